//! The sysctl files a host applies at boot, judged against each other and against what
//! runs now ([`audit`]), and the memory limits that count pages ([`memory`]).

use super::{dotted, numbers};
use std::collections::BTreeMap;
use tpslab_proc::sysctl_conf::ConfEntry;
use tpslab_record::doctor::{Finding, Fix, Running, Severity};

use tpslab_record::doctor::ConfFile;

/// Pairs whose order matters: (smaller, larger, why).
const PAIRS: &[(&str, &str, &str)] = &[
    (
        "net/core/rmem_default",
        "net/core/rmem_max",
        "a socket that asks for SO_RCVBUF above rmem_max is capped there, below what one that asks nothing gets",
    ),
    (
        "net/core/wmem_default",
        "net/core/wmem_max",
        "a socket that asks for SO_SNDBUF above wmem_max is capped there, below what one that asks nothing gets",
    ),
];

/// Triples that must be non-decreasing: min, default, max (bytes) or min, pressure, max
/// (pages).
const TRIPLES: &[&str] = &[
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/udp_mem",
    "net/ipv4/tcp_mem",
];

/// A value as the kernel reads it, for comparison: numbers field by field in decimal
/// (`020000` is octal 8192), anything else with its blanks collapsed.
fn normal(v: &str) -> String {
    tpslab_plan::sysctl::canonical(v)
        .unwrap_or_else(|| v.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Judges `files` (in the order the system applies them; later wins) against the
/// `running` values and the `suggested` keys for paths this kernel does not have.
/// Findings come errors first, then warnings, then notes, each group in file order.
pub fn audit(
    files: &[ConfFile],
    running: &Running,
    suggested: &BTreeMap<String, String>,
) -> Vec<Finding> {
    let (mut out, set) = per_line(files, running, suggested);
    out.extend(per_key(&set, running));
    out.extend(order(&set, running));
    out.sort_by_key(|f| f.severity);
    out
}

/// Every (file:line, value, key as written) that sets a /proc/sys path, in the order
/// applied.
type Settings = BTreeMap<String, Vec<(String, String, String)>>;

/// The findings of single lines (malformed, a key this kernel lacks, a glob), and the
/// settings of the others.
fn per_line(
    files: &[ConfFile],
    running: &Running,
    suggested: &BTreeMap<String, String>,
) -> (Vec<Finding>, Settings) {
    let mut out = vec![];
    let mut set = Settings::new();
    for f in files {
        for l in &f.lines {
            let at = format!("{}:{}", f.path, l.line);
            match &l.entry {
                ConfEntry::Malformed { text } => out.push(Finding {
                    severity: Severity::Error,
                    what: "a line that is not `key = value`: ignored at boot".into(),
                    evidence: vec![format!("{at}: {}", text.trim())],
                    fix: None,
                }),
                ConfEntry::Set {
                    written,
                    value,
                    ignore_failure,
                    ..
                } => {
                    let path = l.entry.path().unwrap_or_default();
                    if path.contains('*') {
                        // systemd-sysctl expands globs over existing keys: nothing to check.
                        out.push(Finding {
                            severity: Severity::Info,
                            what: format!(
                                "`{written}` is a glob: the keys it matches are not checked"
                            ),
                            evidence: vec![format!("{at}: {written} = {value}")],
                            fix: None,
                        });
                        continue;
                    }
                    if running.get(&path) == Some(&None) && *ignore_failure {
                        out.push(Finding {
                            severity: Severity::Info,
                            what: format!(
                                "`{written}` is not a key of this kernel (no /proc/sys/{path}); written with `-`, so its failure is ignored at boot"
                            ),
                            evidence: vec![format!("{at}: -{written} = {value}")],
                            fix: None,
                        });
                        continue;
                    }
                    if running.get(&path) == Some(&None) {
                        let hint = suggested.get(&path);
                        out.push(Finding {
                            severity: Severity::Error,
                            what: format!(
                                "`{written}` is not a key of this kernel (no /proc/sys/{path}): ignored at boot{}",
                                hint.map_or(String::new(), |k| format!("; the key is probably `{k}`"))
                            ),
                            evidence: vec![format!("{at}: {written} = {value}")],
                            fix: hint.map(|k| Fix::sysctl(k, value)),
                        });
                        continue;
                    }
                    set.entry(path)
                        .or_default()
                        .push((at, value.clone(), written.clone()));
                }
            }
        }
    }
    (out, set)
}

/// For each key set: the files that set it more than once, and a value that differs from
/// what runs.
fn per_key(set: &Settings, running: &Running) -> Vec<Finding> {
    let mut out = vec![];
    for (path, sets) in set {
        let key = dotted(path);
        let (last_at, last, _) = sets.last().expect("at least one setting");
        if sets.len() > 1 {
            let differ = sets.iter().any(|s| normal(&s.1) != normal(last));
            out.push(Finding {
                severity: Severity::Info,
                what: format!(
                    "{key} is set in {} places{}; the last one applied wins: {last_at}",
                    sets.len(),
                    if differ { " with different values" } else { "" }
                ),
                evidence: sets.iter().map(|(at, v, _)| format!("{at}: {v}")).collect(),
                fix: None,
            });
        }
        if let Some(Some(now)) = running.get(path) {
            if normal(now) != normal(last) {
                out.push(Finding {
                    severity: Severity::Warn,
                    what: format!(
                        "{key} runs with {} but the files set {}: not applied since boot (sysctl --system), or changed by hand and lost at the next boot",
                        normal(now),
                        normal(last)
                    ),
                    evidence: vec![
                        format!("{last_at}: {last}"),
                        format!("/proc/sys/{path}: {now}"),
                    ],
                    fix: None,
                });
            }
        }
    }
    out
}

/// Pairs and triples out of order in the values each key will have after the next boot.
fn order(set: &Settings, running: &Running) -> Vec<Finding> {
    let mut out = vec![];
    // The value each key will have after the next boot: the files', else what runs now.
    let at_boot = |p: &str| -> Option<(String, String)> {
        match set.get(p).and_then(|s| s.last()) {
            Some((at, v, _)) => Some((normal(v), at.clone())),
            None => running
                .get(p)
                .cloned()
                .flatten()
                .map(|v| (normal(&v), format!("/proc/sys/{p} (running)"))),
        }
    };
    for (small, large, why) in PAIRS {
        let (Some((a, a_at)), Some((b, b_at))) = (at_boot(small), at_boot(large)) else {
            continue;
        };
        if let (Ok(x), Ok(y)) = (a.parse::<u64>(), b.parse::<u64>()) {
            if x > y {
                out.push(Finding {
                    severity: Severity::Warn,
                    what: format!(
                        "{} ({x}) is above {} ({y}) after boot: {why}",
                        dotted(small),
                        dotted(large)
                    ),
                    evidence: vec![format!("{a_at}: {x}"), format!("{b_at}: {y}")],
                    fix: Some(Fix::sysctl(dotted(large), x)),
                });
            }
        }
    }
    for p in TRIPLES {
        let Some((v, at)) = at_boot(p) else { continue };
        let f: Vec<u64> = v.split(' ').filter_map(|x| x.parse().ok()).collect();
        if f.len() == 3 && !(f[0] <= f[1] && f[1] <= f[2]) {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!(
                    "{} is not in increasing order after boot ({v}): the kernel uses the fields as given (a default above the max, a pressure above the limit)",
                    dotted(p)
                ),
                evidence: vec![format!("{at}: {v}")],
                fix: None,
            });
        }
    }
    out
}

/// Memory limits counted in pages (udp_mem, tcp_mem): a limit above the host's memory
/// was probably written in bytes. `memory_bytes` 0: unknown, nothing judged.
pub fn memory(running: &Running, memory_bytes: u64, page_bytes: u64) -> Vec<Finding> {
    let mut out = vec![];
    if memory_bytes == 0 || page_bytes == 0 {
        return out;
    }
    for p in ["net/ipv4/udp_mem", "net/ipv4/tcp_mem"] {
        let Some(v) = numbers(running, p).filter(|v| v.len() == 3) else {
            continue;
        };
        let max_bytes = v[2].saturating_mul(page_bytes);
        if max_bytes > memory_bytes {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!(
                    "{} counts pages of {page_bytes} bytes: its limit of {} pages is {:.1} GiB, more than this host's {:.1} GiB of memory (written in bytes?); the limit never binds, so one flood of queued data can take the host's memory",
                    dotted(p),
                    v[2],
                    max_bytes as f64 / (1u64 << 30) as f64,
                    memory_bytes as f64 / (1u64 << 30) as f64
                ),
                evidence: vec![
                    format!("/proc/sys/{p}: {} {} {}", v[0], v[1], v[2]),
                    format!("/proc/meminfo MemTotal: {} kB", memory_bytes / 1024),
                ],
                fix: None,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_proc::sysctl_conf::parse_sysctl_conf;

    fn file(path: &str, text: &str) -> ConfFile {
        ConfFile {
            path: path.into(),
            lines: parse_sysctl_conf(text),
        }
    }

    fn running(pairs: &[(&str, Option<&str>)]) -> Running {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(String::from)))
            .collect()
    }

    #[test]
    fn s1s_key_without_net_is_an_error_with_the_intended_key() {
        let files = [file("/etc/sysctl.conf", "core.rmem_default = 4608000\n")];
        let run = running(&[("core/rmem_default", None)]);
        let hint = BTreeMap::from([(
            "core/rmem_default".to_string(),
            "net.core.rmem_default".to_string(),
        )]);
        let f = audit(&files, &run, &hint);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(
            f[0].what.contains("probably `net.core.rmem_default`"),
            "{}",
            f[0].what
        );
        assert_eq!(
            f[0].evidence,
            ["/etc/sysctl.conf:1: core.rmem_default = 4608000"]
        );
        assert_eq!(
            f[0].fix,
            Some(Fix::sysctl("net.core.rmem_default", 4608000))
        );
    }

    #[test]
    fn overrides_running_values_pairs_and_malformed_lines() {
        let files = [
            file("/usr/lib/sysctl.d/50-default.conf", "net.core.rmem_max = 212992\nnet.core.rmem_default=212992\n"),
            file("/etc/sysctl.d/60-udp.conf", "net.core.rmem_max = 8388608\nnet.core.rmem_default = 16777216\nbogus line\nnet.ipv4.tcp_rmem = 4096 6291456 131072\n"),
        ];
        let run = running(&[
            ("net/core/rmem_max", Some("8388608")),
            // Octal in the running value reads as the same number.
            ("net/core/rmem_default", Some("212992")),
            ("net/ipv4/tcp_rmem", Some("4096\t6291456\t131072")),
        ]);
        let f = audit(&files, &run, &BTreeMap::new());
        let sev: Vec<Severity> = f.iter().map(|x| x.severity).collect();
        assert!(
            sev.windows(2).all(|w| w[0] <= w[1]),
            "errors first: {sev:?}"
        );
        let find = |s: &str| {
            f.iter()
                .find(|x| x.what.contains(s))
                .unwrap_or_else(|| panic!("{s}: {f:#?}"))
        };
        let m = find("not `key = value`");
        assert_eq!(m.evidence, ["/etc/sysctl.d/60-udp.conf:3: bogus line"]);
        let o = find("net.core.rmem_max is set in 2 places with different values");
        assert!(
            o.what.ends_with("/etc/sysctl.d/60-udp.conf:1"),
            "{}",
            o.what
        );
        // rmem_max matches what runs; rmem_default does not.
        assert!(!f
            .iter()
            .any(|x| x.what.starts_with("net.core.rmem_max runs with")));
        find("net.core.rmem_default runs with 212992 but the files set 16777216");
        let p = find("net.core.rmem_default (16777216) is above net.core.rmem_max (8388608)");
        assert_eq!(p.fix, Some(Fix::sysctl("net.core.rmem_max", 16777216)));
        find("net.ipv4.tcp_rmem is not in increasing order");
    }

    #[test]
    fn optional_and_glob_keys_are_notes_not_errors() {
        let files = [file(
            "/etc/sysctl.d/70-if.conf",
            "-net.ipv4.conf.eth9.rp_filter = 1\nnet.ipv4.conf.*.rp_filter = 2\n",
        )];
        let run = running(&[("net/ipv4/conf/eth9/rp_filter", None)]);
        let f = audit(&files, &run, &BTreeMap::new());
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(f.iter().all(|x| x.severity == Severity::Info));
        assert!(f[0].what.contains("written with `-`"), "{}", f[0].what);
        assert!(f[1].what.contains("is a glob"), "{}", f[1].what);
    }

    #[test]
    fn memory_limits_above_the_hosts_memory_were_written_in_bytes() {
        let run = running(&[
            // This machine's kernel default (24 GiB): 4.4 GiB of pages.
            ("net/ipv4/tcp_mem", Some("287898 383867 575796")),
            // 8 GiB in bytes, read as pages: 32 TiB.
            ("net/ipv4/udp_mem", Some("4194304 6291456 8589934592")),
        ]);
        let f = memory(&run, 24_684_084 * 1024, 4096);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].what.starts_with("net.ipv4.udp_mem counts pages of 4096 bytes: its limit of 8589934592 pages is 32768.0 GiB, more than this host's 23.5 GiB"), "{}", f[0].what);
        assert_eq!(memory(&run, 0, 4096), vec![]);
    }

    #[test]
    fn nothing_to_say_about_a_consistent_applied_file() {
        let files = [file(
            "/etc/sysctl.d/60-udp.conf",
            "net.core.rmem_max = 020000\n",
        )];
        let run = running(&[
            ("net/core/rmem_max", Some("8192")),
            ("net/core/rmem_default", Some("4096")),
        ]);
        assert_eq!(audit(&files, &run, &BTreeMap::new()), vec![]);
    }
}
