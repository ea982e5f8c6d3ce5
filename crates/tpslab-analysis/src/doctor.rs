//! `tpslab doctor`: the sysctl files a host applies at boot, judged against each other and
//! against what runs now. Pure: the files (parsed, in the order they are applied), the
//! running values and the suggested keys are read by the caller; [`audit`] only judges.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tpslab_proc::sysctl_conf::{ConfEntry, ConfLine};

/// One configuration file, as applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfFile {
    /// Its path on the audited tree (`/etc/sysctl.d/60-udp.conf`).
    pub path: String,
    /// Its settings and malformed lines.
    pub lines: Vec<ConfLine>,
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The file does not do what it says (a key this kernel does not have, a malformed
    /// line).
    Error,
    /// Something will differ from what someone expects (a value not running, an
    /// inconsistent pair).
    Warn,
    /// Worth knowing (a value set in several files).
    Info,
}

/// One finding with its evidence and the line that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// What is wrong, in one sentence.
    pub what: String,
    /// Where it was seen: `file:line` with the line's setting, or the running value.
    pub evidence: Vec<String>,
    /// The line to write instead (sysctl.d syntax), when there is one.
    pub fix: Option<String>,
}

/// What the running kernel has for a /proc/sys path: its value, or None when this kernel
/// has no such key.
pub type Running = BTreeMap<String, Option<String>>;

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

/// Triples that must be non-decreasing: min, default, max (bytes).
const TRIPLES: &[&str] = &["net/ipv4/tcp_rmem", "net/ipv4/tcp_wmem"];

/// A value as the kernel reads it, for comparison: numbers field by field in decimal
/// (`020000` is octal 8192), anything else with its blanks collapsed.
fn normal(v: &str) -> String {
    tpslab_plan::sysctl::canonical(v)
        .unwrap_or_else(|| v.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn dotted(path: &str) -> String {
    path.replace('/', ".")
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
                            fix: hint.map(|k| format!("{k} = {value}")),
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
                    fix: Some(format!("{} = {x}", dotted(large))),
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
                    "{} is not min <= default <= max after boot ({v}): the kernel uses them as given, so a default above the max caps autotuning below its own start",
                    dotted(p)
                ),
                evidence: vec![format!("{at}: {v}")],
                fix: None,
            });
        }
    }
    out
}

/// Everything `tpslab doctor` read and found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorRecord {
    /// The tree audited (`/` for this host).
    pub root: String,
    /// The sysctl files, in the order the system applies them (later wins).
    pub files: Vec<ConfFile>,
    /// Files not applied because a file of the same name in a directory that comes
    /// first masks them: (masked, by).
    pub masked: Vec<(String, String)>,
    /// This kernel's values of every key the files set, and of the keys judged in pairs
    /// (None: no such key).
    pub running: Running,
    /// For keys this kernel does not have: the key probably meant.
    pub suggested: BTreeMap<String, String>,
    /// The findings ([`audit`] of the above).
    pub findings: Vec<Finding>,
}

/// The /proc/sys paths whose running values [`audit`] compares in pairs and triples.
pub fn judged_paths() -> Vec<&'static str> {
    PAIRS
        .iter()
        .flat_map(|(a, b, _)| [*a, *b])
        .chain(TRIPLES.iter().copied())
        .collect()
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
        assert_eq!(f[0].fix.as_deref(), Some("net.core.rmem_default = 4608000"));
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
        assert_eq!(p.fix.as_deref(), Some("net.core.rmem_max = 16777216"));
        find("net.ipv4.tcp_rmem is not min <= default <= max");
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
