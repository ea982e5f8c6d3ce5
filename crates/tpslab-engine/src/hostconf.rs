//! The host's sysctl configuration as the system applies it at boot (sysctl.d(5)), and
//! the running values to judge it against, for `tpslab doctor`.

use crate::EngineError;
use std::collections::BTreeMap;
use std::path::Path;
use tpslab_analysis::doctor::{ConfFile, Running};
use tpslab_proc::sysctl_conf::parse_sysctl_conf;

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
/// (net.core.netdev_max_backlog) is read in an outer namespace ([`crate::env::read_proc_sys`]).
pub fn running(paths: impl IntoIterator<Item = String>) -> Running {
    paths
        .into_iter()
        .map(|p| {
            let v = crate::env::read_proc_sys(&format!("/proc/sys/{p}"));
            (p, v)
        })
        .collect()
}

/// The key probably meant by a /proc/sys `path` this kernel does not have: the same path
/// under `net/` (S1's `core.rmem_default`), `net/ipv4/`, `vm/`, `kernel/` or `fs/` when
/// that exists; else a key with the same last name in `net/core` or `net/ipv4`.
pub fn suggest(path: &str) -> Option<String> {
    let exists = |p: &str| crate::env::read_proc_sys(&format!("/proc/sys/{p}")).is_some();
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
