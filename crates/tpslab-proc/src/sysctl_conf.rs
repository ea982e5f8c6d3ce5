//! sysctl configuration files (sysctl.d(5), sysctl.conf(5)): one setting per line,
//! `key = value`, comments starting with `#` or `;`. Keys use `.` or `/` as separators (with
//! `/`, a `.` is part of a name, as in an interface `eth0.100`); a leading `-` means a
//! failure to set it is ignored. Parsed as written: nothing here knows which keys exist.

use serde::{Deserialize, Serialize};

/// One meaningful line of a sysctl configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConfLine {
    /// 1-based line number.
    pub line: usize,
    /// What the line says.
    pub entry: ConfEntry,
}

/// A setting, or a line that is not one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConfEntry {
    /// `key = value`.
    Set {
        /// The key in dotted form (`net.core.rmem_default`); a key written with `/` is
        /// converted, its own dots kept as `/` would be ambiguous: see [`ConfEntry::path`].
        key: String,
        /// The key as written.
        written: String,
        /// The value, surrounding blanks removed.
        value: String,
        /// Written with a leading `-`: a failure to set it is ignored at boot.
        ignore_failure: bool,
    },
    /// Not a comment, not blank, not `key = value` (no `=`, or an empty key).
    Malformed {
        /// The line as written.
        text: String,
    },
}

impl ConfEntry {
    /// The file under /proc/sys of a setting: `net/core/rmem_default` (a key written with
    /// `/` keeps its dots inside names); None for a malformed line.
    pub fn path(&self) -> Option<String> {
        match self {
            ConfEntry::Set { written, .. } => {
                let w = written.trim_start_matches('-');
                Some(if w.contains('/') {
                    w.trim_start_matches('/').to_string()
                } else {
                    w.replace('.', "/")
                })
            }
            ConfEntry::Malformed { .. } => None,
        }
    }
}

/// Parses a sysctl configuration file; never fails (a line that is not a setting is
/// [`ConfEntry::Malformed`]).
pub fn parse_sysctl_conf(text: &str) -> Vec<ConfLine> {
    let mut out = vec![];
    for (i, raw) in text.lines().enumerate() {
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            continue;
        }
        let entry = match t.split_once('=') {
            Some((k, v)) if !k.trim().trim_start_matches('-').trim().is_empty() => {
                let written = k.trim().to_string();
                let ignore_failure = written.starts_with('-');
                let bare = written.trim_start_matches('-').trim();
                let key = if bare.contains('/') {
                    bare.trim_start_matches('/').replace('/', ".")
                } else {
                    bare.to_string()
                };
                ConfEntry::Set {
                    key,
                    written: bare.to_string(),
                    value: v.trim().to_string(),
                    ignore_failure,
                }
            }
            _ => ConfEntry::Malformed {
                text: raw.to_string(),
            },
        };
        out.push(ConfLine { line: i + 1, entry });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_comments_and_malformed_lines() {
        let text = "# S1's file\n\ncore.rmem_default = 4608000\n; old\n-net/ipv4/conf/eth0.100/forwarding=1\nnet.core.rmem_max\n = 5\n  net.ipv4.tcp_rmem = 4096\t131072  6291456  \n";
        let l = parse_sysctl_conf(text);
        assert_eq!(l.len(), 5);
        assert_eq!(l[0].line, 3);
        let ConfEntry::Set {
            key,
            value,
            ignore_failure,
            ..
        } = &l[0].entry
        else {
            panic!("{:?}", l[0])
        };
        assert_eq!(
            (key.as_str(), value.as_str(), *ignore_failure),
            ("core.rmem_default", "4608000", false)
        );
        assert_eq!(l[0].entry.path().unwrap(), "core/rmem_default");
        // A key with '/' keeps the dot inside an interface name in its path.
        let ConfEntry::Set {
            key,
            ignore_failure,
            ..
        } = &l[1].entry
        else {
            panic!()
        };
        assert!(*ignore_failure);
        assert_eq!(key, "net.ipv4.conf.eth0.100.forwarding");
        assert_eq!(
            l[1].entry.path().unwrap(),
            "net/ipv4/conf/eth0.100/forwarding"
        );
        assert_eq!(
            l[2].entry,
            ConfEntry::Malformed {
                text: "net.core.rmem_max".into()
            }
        );
        assert_eq!((l[3].line, l[3].entry.path()), (7, None));
        let ConfEntry::Set { value, .. } = &l[4].entry else {
            panic!()
        };
        assert_eq!(value, "4096\t131072  6291456");
    }
}
