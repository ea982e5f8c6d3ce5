//! What `tpslab doctor` reads: the host's sysctl configuration as the system applies it
//! at boot (sysctl.d(5)), the running values to judge it against and their scope, the
//! host's memory, NICs, RPS, irqbalance and CPU frequency governors.

use crate::EngineError;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tpslab_analysis::doctor::KNOWN;
use tpslab_proc::sysctl_conf::parse_sysctl_conf;
use tpslab_record::doctor::Nic;
use tpslab_record::doctor::{ConfFile, HostFacts, KnownSysctl, Running, Scope};

/// The sysctl.d directories, the first masking a file of the same name in the later ones.
pub const SYSCTL_DIRS: [&str; 5] = [
    "etc/sysctl.d",
    "run/sysctl.d",
    "usr/local/lib/sysctl.d",
    "usr/lib/sysctl.d",
    "lib/sysctl.d",
];

/// A file not applied and the file that masks it.
pub type Masked = (String, String);

/// The sysctl files under `root` in the order they are applied: every `*.conf` of
/// [`SYSCTL_DIRS`] sorted by file name (a name in an earlier directory masks the same name
/// in later ones), then `etc/sysctl.conf`; with the masked files (masked, by; the same
/// file reached through a symlinked directory is not masked). Paths are
/// shown from the root (`/etc/sysctl.d/...`). Errors: a file or directory that exists but
/// cannot be read.
pub fn sysctl_files(root: &Path) -> Result<(Vec<ConfFile>, Vec<Masked>), EngineError> {
    let shown = |rel: &str| format!("/{rel}");
    // file name -> (dir of the file applied, dirs masked)
    let mut by_name: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for dir in SYSCTL_DIRS {
        let d = root.join(dir);
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(EngineError::os(format!("reading {}", d.display()), e)),
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".conf"))
            .collect();
        names.sort();
        for n in names {
            match by_name.get_mut(&n) {
                Some((_, masked)) => masked.push(dir.to_string()),
                None => {
                    by_name.insert(n, (dir.to_string(), vec![]));
                }
            }
        }
    }
    let read = |rel: &str| -> Result<ConfFile, EngineError> {
        let p = root.join(rel);
        let text = std::fs::read_to_string(&p)
            .map_err(|e| EngineError::os(format!("reading {}", p.display()), e))?;
        Ok(ConfFile {
            path: shown(rel),
            lines: parse_sysctl_conf(&text),
        })
    };
    let mut files = vec![];
    let mut masked = vec![];
    for (name, (dir, hidden)) in &by_name {
        let rel = format!("{dir}/{name}");
        files.push(read(&rel)?);
        for h in hidden {
            // /lib is often /usr/lib (merged /usr): the same file under two names masks
            // nothing.
            let other = format!("{h}/{name}");
            let same = std::fs::canonicalize(root.join(&other)).ok()
                == std::fs::canonicalize(root.join(&rel)).ok();
            if !same {
                masked.push((shown(&other), shown(&rel)));
            }
        }
    }
    if root.join("etc/sysctl.conf").exists() {
        files.push(read("etc/sysctl.conf")?);
    }
    Ok((files, masked))
}

/// This host's value of each /proc/sys path in `paths` (None: no such key on this
/// kernel). A host-wide key that this network namespace does not show
/// (net.core.netdev_max_backlog) is read in an outer namespace ([`crate::host::env::read_proc_sys`]).
pub fn running(paths: impl IntoIterator<Item = String>) -> Running {
    paths
        .into_iter()
        .map(|p| {
            let v = crate::host::env::read_proc_sys(&format!("/proc/sys/{p}"));
            (p, v)
        })
        .collect()
}

/// The key probably meant by a /proc/sys `path` this kernel does not have: the same path
/// under `net/` (S1's `core.rmem_default`), `net/ipv4/`, `vm/`, `kernel/` or `fs/` when
/// that exists; else a key with the same last name in `net/core` or `net/ipv4`.
pub fn suggest(path: &str) -> Option<String> {
    let exists = |p: &str| crate::host::env::read_proc_sys(&format!("/proc/sys/{p}")).is_some();
    for prefix in ["net/", "net/ipv4/", "net/core/", "vm/", "kernel/", "fs/"] {
        let p = format!("{prefix}{path}");
        if exists(&p) {
            return Some(p.replace('/', "."));
        }
    }
    let last = path.rsplit('/').next()?;
    ["net/core", "net/ipv4"]
        .iter()
        .map(|d| format!("{d}/{last}"))
        .find(|p| exists(p))
        .map(|p| p.replace('/', "."))
}

/// Whether each /proc/sys path of `paths` belongs to each network namespace or to the
/// host, as this kernel shows it in a fresh namespace: writable there (netns), or absent
/// or read-only there (host; since 6.11 net.core.rmem_* show the host's value read-only).
/// Empty without CAP_SYS_ADMIN (no namespace can be created). Paths this host lacks are
/// left out.
pub fn scopes(paths: &[&str]) -> BTreeMap<String, Scope> {
    let Ok(ns) = tpslab_net::ns::NetNs::create() else {
        return BTreeMap::new();
    };
    let here: Vec<&str> = paths
        .iter()
        .copied()
        .filter(|p| crate::host::env::read_proc_sys(&format!("/proc/sys/{p}")).is_some())
        .collect();
    ns.run(|| {
        here.iter()
            .map(|p| {
                let scope = if writable(&format!("/proc/sys/{p}")) {
                    Scope::Netns
                } else {
                    Scope::Host
                };
                (p.to_string(), scope)
            })
            .collect()
    })
    .unwrap_or_default()
}

fn writable(path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o200 != 0)
}

/// [`KNOWN`] with their running values and scopes ([`scopes`]).
pub fn known(running: &Running) -> Vec<KnownSysctl> {
    let paths: Vec<&str> = KNOWN.iter().map(|(p, _)| *p).collect();
    let sc = scopes(&paths);
    KNOWN
        .iter()
        .map(|(p, what)| KnownSysctl {
            key: p.replace('/', "."),
            value: running.get(*p).cloned().flatten(),
            scope: sc.get(*p).copied(),
            what: what.to_string(),
        })
        .collect()
}

/// Physical memory from /proc/meminfo `MemTotal`, bytes (0 when unreadable).
pub fn memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| tpslab_proc::meminfo::parse_mem_total(&m))
        .unwrap_or(0)
}

/// A small file under /sys, trimmed.
fn sys(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// `ethtool ARGS IF`: its output, or why there is none (not installed, the driver does
/// not report it: ethtool's first line of error).
fn ethtool(args: &[&str], iface: &str) -> Result<String, String> {
    let out = Command::new("ethtool")
        .args(args)
        .arg(iface)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "ethtool is not installed".to_string(),
            _ => format!("ethtool: {e}"),
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "ethtool {} {iface}: {}",
            args.join(" "),
            err.lines().next().unwrap_or("failed").trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One NIC as /sys/class/net and ethtool show it.
fn nic(name: &str) -> Nic {
    let base = Path::new("/sys/class/net").join(name);
    let mut n = Nic {
        name: name.to_string(),
        driver: std::fs::read_link(base.join("device/driver"))
            .ok()
            .and_then(|l| l.file_name().map(|f| f.to_string_lossy().into_owned())),
        ..Default::default()
    };
    let mut queues: Vec<String> = std::fs::read_dir(base.join("queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|q| q.starts_with("rx-"))
                .collect()
        })
        .unwrap_or_default();
    queues.sort_by_key(|q| q[3..].parse::<u64>().unwrap_or(u64::MAX));
    n.rx_queues = queues.len() as u64;
    n.rps_cpus = queues
        .iter()
        .filter_map(|q| sys(base.join("queues").join(q).join("rps_cpus")))
        .collect();
    for c in [
        "rx_dropped",
        "rx_missed_errors",
        "rx_fifo_errors",
        "rx_over_errors",
    ] {
        if let Some(v) = sys(base.join("statistics").join(c)).and_then(|v| v.parse::<u64>().ok()) {
            if v > 0 {
                n.drops.insert(c.to_string(), v);
            }
        }
    }
    match ethtool(&["-g"], name) {
        Ok(t) => {
            let r = tpslab_proc::ethtool::parse_rings(&t);
            (n.rx_ring, n.tx_ring) = (r.rx, r.tx);
            if r.rx.is_none() {
                n.rings_skipped = Some(format!("ethtool -g {name}: no RX ring size reported"));
            }
        }
        Err(e) => n.rings_skipped = Some(e),
    }
    if let Ok(t) = ethtool(&["-S"], name) {
        for (k, v) in tpslab_proc::ethtool::parse_stats(&t) {
            if v > 0 && tpslab_proc::ethtool::is_drop_counter(&k) {
                n.drops.insert(format!("ethtool -S {k}"), v);
            }
        }
    }
    n
}

/// NICs (devices with a `device` link: hardware or paravirtual, not lo, veth, bridges or
/// ifb) of this network namespace, irqbalance, CPU frequency governors; what is not
/// there is listed in `skipped` with the reason.
pub fn host_facts() -> HostFacts {
    let mut h = HostFacts {
        cpus: tpslab_net::online_cpus() as u64,
        ..Default::default()
    };
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    h.nics = names
        .iter()
        .filter(|n| Path::new("/sys/class/net").join(n).join("device").exists())
        .map(|n| nic(n))
        .collect();
    if h.nics.is_empty() {
        h.skipped.push(format!(
            "NICs: none in this network namespace (devices: {}; virtual ones have no rings or RPS to judge)",
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        ));
    }
    for n in &h.nics {
        if let Some(why) = &n.rings_skipped {
            h.skipped.push(format!("{} ring sizes: {why}", n.name));
        }
    }
    h.irqbalance_pid = std::fs::read_dir("/proc").ok().and_then(|d| {
        d.filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| sys(format!("/proc/{pid}/comm")).as_deref() == Some("irqbalance"))
    });
    for cpu in 0..h.cpus {
        if let Some(g) = sys(format!(
            "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
        )) {
            *h.governors.entry(g).or_default() += 1;
        }
    }
    if h.governors.is_empty() {
        h.skipped.push(
            "CPU frequency governor: no /sys/devices/system/cpu/cpu0/cpufreq (a VM, or the firmware sets the frequency)"
                .into(),
        );
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_in_boot_order_with_masking() {
        let root = std::env::temp_dir().join(format!("tpslab-hostconf-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let w = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w(
            "usr/lib/sysctl.d/50-default.conf",
            "net.core.rmem_max = 1\n",
        );
        w("usr/lib/sysctl.d/60-udp.conf", "net.core.rmem_max = 2\n");
        w("etc/sysctl.d/60-udp.conf", "net.core.rmem_max = 3\n");
        w("etc/sysctl.d/10-first.conf", "vm.swappiness = 10\n");
        w("etc/sysctl.d/README", "not a conf file\n");
        w("etc/sysctl.conf", "core.rmem_default = 4608000\n");
        let (files, masked) = sysctl_files(&root).unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/etc/sysctl.d/10-first.conf",
                "/usr/lib/sysctl.d/50-default.conf",
                "/etc/sysctl.d/60-udp.conf",
                "/etc/sysctl.conf"
            ]
        );
        assert_eq!(
            masked,
            [(
                "/usr/lib/sysctl.d/60-udp.conf".to_string(),
                "/etc/sysctl.d/60-udp.conf".to_string()
            )]
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The scopes this kernel (6.18) shows, checked in a fresh namespace: the ones a
    /// container can set and the ones only the host can.
    #[test]
    fn scopes_of_this_kernel() {
        if !tpslab_net::is_root() {
            eprintln!("skipping: creating a network namespace needs root");
            return;
        }
        let sc = scopes(&[
            "net/core/rmem_max",
            "net/core/netdev_max_backlog",
            "net/ipv4/udp_mem",
            "net/ipv4/tcp_rmem",
            "net/core/somaxconn",
            "net/ipv4/no_such_key",
        ]);
        assert_eq!(
            sc["net/core/rmem_max"],
            Scope::Host,
            "read-only in a namespace"
        );
        assert_eq!(
            sc["net/core/netdev_max_backlog"],
            Scope::Host,
            "absent there"
        );
        assert_eq!(sc["net/ipv4/udp_mem"], Scope::Host);
        assert_eq!(sc["net/ipv4/tcp_rmem"], Scope::Netns);
        assert_eq!(sc["net/core/somaxconn"], Scope::Netns);
        assert!(!sc.contains_key("net/ipv4/no_such_key"));
    }

    #[test]
    fn s1s_key_is_found_under_net() {
        if !Path::new("/proc/sys/net/core/rmem_default").exists() {
            eprintln!("skipping: no /proc/sys/net/core here");
            return;
        }
        assert_eq!(
            suggest("core/rmem_default").as_deref(),
            Some("net.core.rmem_default")
        );
        assert_eq!(suggest("no/such_key_anywhere"), None);
        let r = running([
            "net/core/rmem_default".to_string(),
            "core/rmem_default".to_string(),
        ]);
        assert!(r["net/core/rmem_default"].is_some());
        assert_eq!(r["core/rmem_default"], None);
    }
}
