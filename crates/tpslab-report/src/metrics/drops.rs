//! The kernel's drops by reason and each watched socket's drops as metric families, with
//! a bounded number of label values: at most [`MAX_REASONS`] reasons and
//! [`MAX_SOCKETS`] sockets get a series of their own, the rest are summed under
//! `reason="other"` / `socket="other"`. A live exporter keeps the first ones it sees (a
//! series never moves to `other` while it runs, so every counter only grows); a record's
//! file keeps the largest.

use super::{labels, Family, Kind, Value};
use std::collections::BTreeSet;

/// Drop reasons with a series of their own (the kernel names about 120; a run sees a few).
pub const MAX_REASONS: usize = 16;

/// Sockets with a series of their own (a SO_REUSEPORT group has one per worker).
pub const MAX_SOCKETS: usize = 32;

/// The label value the reasons or sockets past the cap are summed under.
pub const OTHER: &str = "other";

/// Names and helps of the families, live (`--metrics-listen`: counts since the command
/// started) and from a record (`--metrics-file`: over the run).
pub struct Helps {
    /// `tpslab_kernel_drops`'s help.
    pub reasons: &'static str,
    /// `tpslab_kernel_drops_lost`'s help.
    pub lost: &'static str,
    /// `tpslab_target_socket_drops`'s help.
    pub sockets: &'static str,
}

/// What a live exporter says of its families.
pub const LIVE: Helps = Helps {
    reasons: "Packets the kernel dropped since the start by reason (tracepoint skb:kfree_skb, kernel 5.17+, the kernel's reason names), host-wide: every network namespace; read every 100 ms; the first 16 reasons seen have their own series, later ones are summed under reason=\"other\".",
    lost: "Drop samples the kernel could not write (a perf ring was full) since the start: drops missing from tpslab_kernel_drops_total.",
    sockets: "Drops at each watched UDP socket since the start, /proc/net/udp `drops` by inode (socket: udp:LOCAL_ADDRESS); read every 100 ms; the first 32 sockets seen have their own series, later ones are summed under socket=\"other\".",
};

/// What a record's file says of its families.
pub const RECORD: Helps = Helps {
    reasons: "Packets the kernel dropped during the run by reason (tracepoint skb:kfree_skb, kernel 5.17+, the kernel's reason names), host-wide: every network namespace; the 16 largest reasons have their own series, the others are summed under reason=\"other\".",
    lost: "Drop samples the kernel could not write during the run (a perf ring was full): drops missing from tpslab_kernel_drops_total.",
    sockets: "Drops at each socket of the target's SO_REUSEPORT group during the run, /proc/net/udp `drops` by inode (socket: udp:LOCAL_ADDRESS); the 32 largest have their own series, the others are summed under socket=\"other\".",
};

/// Adds to `kept` (at most `cap` values) the first of `candidates` not kept yet, the
/// largest count first among those seen together.
pub fn keep<K: Ord + Clone>(kept: &mut BTreeSet<K>, candidates: &[(K, u64)], cap: usize) {
    let mut new: Vec<&(K, u64)> = candidates
        .iter()
        .filter(|(k, _)| !kept.contains(k))
        .collect();
    new.sort_by_key(|k| std::cmp::Reverse(k.1));
    for (k, _) in new {
        if kept.len() >= cap {
            break;
        }
        kept.insert(k.clone());
    }
}

/// `tpslab_kernel_drops` (a series per reason in `kept`, the rest under
/// `reason="other"`, present only when some are) and `tpslab_kernel_drops_lost`.
pub fn reason_families(
    by_reason: &[(String, u64)],
    lost: u64,
    kept: &BTreeSet<String>,
    helps: &Helps,
) -> Vec<Family> {
    let mut series: Vec<(super::Labels, Value)> = vec![];
    let mut other = None::<u64>;
    for (reason, n) in by_reason {
        if kept.contains(reason) {
            series.push((labels(&[("reason", reason)]), Value::Int(*n)));
        } else {
            *other.get_or_insert(0) += n;
        }
    }
    series.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(n) = other {
        series.push((labels(&[("reason", OTHER)]), Value::Int(n)));
    }
    let mut f = vec![];
    if !series.is_empty() {
        f.push(Family {
            name: "tpslab_kernel_drops".into(),
            help: helps.reasons.into(),
            kind: Kind::Counter,
            series,
        });
    }
    f.push(Family::one(
        "tpslab_kernel_drops_lost",
        helps.lost,
        Kind::Counter,
        vec![],
        Value::Int(lost),
    ));
    f
}

/// One socket's drops: (its `socket` label, `udp:LOCAL_ADDRESS`; its inode; drops).
pub type SocketDrops = (String, u64, u64);

/// `tpslab_target_socket_drops`: a series per socket whose inode is in `kept` (labels
/// `socket` and `inode`), the rest summed under `socket="other"` (`inode=""`); None
/// without sockets.
pub fn socket_family(
    sockets: &[SocketDrops],
    kept: &BTreeSet<u64>,
    helps: &Helps,
) -> Option<Family> {
    if sockets.is_empty() {
        return None;
    }
    let mut series = vec![];
    let mut other = None::<u64>;
    for (socket, inode, n) in sockets {
        if kept.contains(inode) {
            series.push((
                labels(&[("socket", socket), ("inode", &inode.to_string())]),
                Value::Int(*n),
            ));
        } else {
            *other.get_or_insert(0) += n;
        }
    }
    if let Some(n) = other {
        series.push((labels(&[("socket", OTHER), ("inode", "")]), Value::Int(n)));
    }
    Some(Family {
        name: "tpslab_target_socket_drops".into(),
        help: helps.sockets.into(),
        kind: Kind::Counter,
        series,
    })
}

/// A record's families: the [`MAX_REASONS`] largest reasons and [`MAX_SOCKETS`] largest
/// sockets of the group (the record keeps a group's sockets, none for a lone socket).
pub fn of_record(
    reasons: Option<&tpslab_record::DropReasons>,
    group: &[tpslab_record::TargetSocket],
) -> Vec<Family> {
    let mut f = vec![];
    if let Some(r) = reasons.filter(|r| r.unavailable.is_none()) {
        let mut kept = BTreeSet::new();
        keep(&mut kept, &r.by_reason, MAX_REASONS);
        f.extend(reason_families(&r.by_reason, r.lost, &kept, &RECORD));
    }
    let sockets: Vec<SocketDrops> = group
        .iter()
        .map(|t| {
            let socket = t
                .local
                .as_ref()
                .map_or("udp".into(), |a| format!("udp:{a}"));
            (socket, t.inode, t.drops)
        })
        .collect();
    let by_drops: Vec<(u64, u64)> = sockets.iter().map(|s| (s.1, s.2)).collect();
    let mut kept = BTreeSet::new();
    keep(&mut kept, &by_drops, MAX_SOCKETS);
    f.extend(socket_family(&sockets, &kept, &RECORD));
    f
}

#[cfg(test)]
#[path = "drops_tests.rs"]
mod tests;
