//! The TCP counters of a network namespace: `Tcp:` of /proc/net/snmp and `TcpExt:` of
//! /proc/net/netstat (both files are pairs of `Proto: Name...` / `Proto: value...`
//! lines), the ones that say where connections and segments were dropped.

use crate::common::ParseError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::BufRead;

/// Every counter of a pair-line file (/proc/net/snmp, /proc/net/netstat) as
/// `Proto.Name` -> value. Errors: a line without `Proto:`, a value line whose prefix or
/// field count differs from its header, a value that is not an integer, a header
/// without its value line.
pub fn parse_pairs<R: BufRead>(r: R, file: &str) -> Result<BTreeMap<String, i64>, ParseError> {
    let mut out = BTreeMap::new();
    crate::snmp::for_each_pair(r, file, |n, prefix, names, values| {
        for (name, v) in names.iter().zip(values) {
            let x: i64 = v.parse().map_err(|_| {
                ParseError::new(file, n, format!("{prefix} {name} {v:?} is not an integer"))
            })?;
            out.insert(format!("{prefix}.{name}"), x);
        }
        Ok(())
    })?;
    Ok(out)
}

/// TCP drop and retransmission counters of a namespace (monotonic counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TcpCounters {
    /// `TcpExt: ListenOverflows`: SYNs or final ACKs dropped because a listener's accept
    /// queue was full.
    pub listen_overflows: u64,
    /// `TcpExt: ListenDrops`: connection requests a listener dropped for any reason
    /// (overflows included).
    pub listen_drops: u64,
    /// `TcpExt: TCPBacklogDrop`: segments dropped because a socket's backlog (while its
    /// owner held the lock) was full.
    pub backlog_drop: u64,
    /// `TcpExt: TCPRcvQDrop`: segments dropped because the receive queue was over its
    /// memory limit.
    pub rcvq_drop: u64,
    /// `Tcp: RetransSegs`: segments retransmitted.
    pub retrans_segs: u64,
    /// `TcpExt: TCPTimeouts`: retransmission timer expiries.
    pub timeouts: u64,
}

impl TcpCounters {
    /// From the counters of /proc/net/snmp and /proc/net/netstat ([`parse_pairs`] of
    /// each); a counter the kernel does not have is 0.
    pub fn from_pairs(snmp: &BTreeMap<String, i64>, netstat: &BTreeMap<String, i64>) -> Self {
        let g = |m: &BTreeMap<String, i64>, k: &str| m.get(k).copied().unwrap_or(0).max(0) as u64;
        TcpCounters {
            listen_overflows: g(netstat, "TcpExt.ListenOverflows"),
            listen_drops: g(netstat, "TcpExt.ListenDrops"),
            backlog_drop: g(netstat, "TcpExt.TCPBacklogDrop"),
            rcvq_drop: g(netstat, "TcpExt.TCPRcvQDrop"),
            retrans_segs: g(snmp, "Tcp.RetransSegs"),
            timeouts: g(netstat, "TcpExt.TCPTimeouts"),
        }
    }

    /// What grew from `before` to `self` (a counter that went back, as after a namespace
    /// was recreated, counts 0).
    pub fn since(&self, before: &TcpCounters) -> TcpCounters {
        TcpCounters {
            listen_overflows: self
                .listen_overflows
                .saturating_sub(before.listen_overflows),
            listen_drops: self.listen_drops.saturating_sub(before.listen_drops),
            backlog_drop: self.backlog_drop.saturating_sub(before.backlog_drop),
            rcvq_drop: self.rcvq_drop.saturating_sub(before.rcvq_drop),
            retrans_segs: self.retrans_segs.saturating_sub(before.retrans_segs),
            timeouts: self.timeouts.saturating_sub(before.timeouts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_errors_name_the_line() {
        let bad = "TcpExt: A B\nTcpExt: 1\n";
        let e = parse_pairs(bad.as_bytes(), "netstat")
            .unwrap_err()
            .to_string();
        assert!(e.contains("netstat") && e.contains("1 fields"), "{e}");
        let e = parse_pairs("TcpExt: A\n".as_bytes(), "netstat")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no value line"), "{e}");
        let e = parse_pairs("TcpExt: A\nTcpExt: x\n".as_bytes(), "n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an integer"), "{e}");
    }

    #[test]
    fn since_never_goes_negative() {
        let a = TcpCounters {
            listen_overflows: 5,
            ..Default::default()
        };
        let b = TcpCounters {
            listen_overflows: 12,
            listen_drops: 12,
            ..Default::default()
        };
        assert_eq!(b.since(&a).listen_overflows, 7);
        assert_eq!(a.since(&b).listen_overflows, 0);
    }
}
