//! Why the kernel dropped packets, by reason: every `skb:kfree_skb` event carries a
//! `reason` (SOCKET_RCVBUFF, NO_SOCKET, NETFILTER_DROP, CPU_BACKLOG, QDISC_DROP, ...; kernel
//! 5.17+). One counting perf event per (reason, CPU), filtered `reason == N`, with the
//! reasons and their numbers read from the tracepoint's `format` file (they differ between
//! kernels). Host-wide: the tracepoint sees every network namespace, unlike the `Udp:`
//! counters. Needs root (perf tracepoints, tracefs).
//!
//! Cost (`cargo run --release -p tpslab-engine --example drop_reasons_cost`, this machine):
//! every drop passes through every per-reason filter, 126 of them here, which took a
//! datagram dropped at a closed port from 1618 to 2948 ns (1.82x); one unfiltered counter
//! per CPU took it to 1708 ns (1.06x). So this counting form suits low drop rates and the
//! tests that check it; an observer at high drop rates needs one sampled event per drop
//! (its reason read from the raw record) instead. Not yet wired into the observer (issue
//! 16).

use tpslab_net::perf::{tracefs_read, TracepointCounter};
use tpslab_proc::tracefs::parse_format;

/// Counters of `skb:kfree_skb` by reason, running since [`DropReasons::start`].
#[derive(Debug)]
pub struct DropReasons {
    /// (reason's name, one counter per online CPU).
    counters: Vec<(String, Vec<TracepointCounter>)>,
}

/// The online CPUs (/sys/devices/system/cpu/online), else 0..the count sysconf gives.
fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| tpslab_proc::parse_cpu_list(t.trim()).ok())
        .map(|v| v.into_iter().map(|c| c as u32).collect())
        .unwrap_or_else(|| (0..tpslab_net::online_cpus() as u32).collect())
}

impl DropReasons {
    /// Opens the counters. Errors (one line, for the report): no tracefs or no
    /// `skb:kfree_skb` with a `reason` (kernel before 5.17), no permission, too many
    /// file descriptors.
    pub fn start() -> Result<DropReasons, String> {
        let text = tracefs_read("events/skb/kfree_skb/format")
            .map_err(|e| format!("skb:kfree_skb not readable: {e}"))?;
        let f = parse_format(&text).ok_or("skb:kfree_skb format unreadable")?;
        if f.field("reason").is_none() {
            return Err("skb:kfree_skb has no reason field (kernel before 5.17)".into());
        }
        let reasons = f.symbols("reason");
        if reasons.is_empty() {
            return Err("skb:kfree_skb names no drop reasons".into());
        }
        let cpus = online_cpus();
        let mut counters = vec![];
        for (n, name) in reasons.into_iter().filter(|(_, n)| n != "MAX") {
            let filter = format!("reason == {n}");
            let per_cpu = cpus
                .iter()
                .map(|&c| TracepointCounter::open_cpu(f.id, c, &filter))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("counting skb:kfree_skb reason {name}: {e}"))?;
            counters.push((name, per_cpu));
        }
        Ok(DropReasons { counters })
    }

    /// Every reason with the drops counted so far (all CPUs), in the kernel's order.
    /// Errors: a counter could not be read.
    pub fn read(&self) -> Result<Vec<(String, u64)>, String> {
        self.counters
            .iter()
            .map(|(name, per_cpu)| {
                let n = per_cpu
                    .iter()
                    .map(|c| c.read())
                    .sum::<Result<u64, _>>()
                    .map_err(|e| format!("reading skb:kfree_skb {name}: {e}"))?;
                Ok((name.clone(), n))
            })
            .collect()
    }

    /// Reasons counted (each with one counter per CPU).
    pub fn reasons(&self) -> usize {
        self.counters.len()
    }
}

/// The reasons that grew from `before` to `after` (both from [`DropReasons::read`]), with
/// how much, largest first.
pub fn grown(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = after
        .iter()
        .map(|(name, a)| {
            let b = before
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, b)| *b);
            (name.clone(), a.saturating_sub(b))
        })
        .filter(|(_, d)| *d > 0)
        .collect();
    v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grown_keeps_what_grew_largest_first() {
        let b = vec![("NO_SOCKET".to_string(), 5), ("SOCKET_RCVBUFF".into(), 1)];
        let a = vec![
            ("NO_SOCKET".to_string(), 7),
            ("SOCKET_RCVBUFF".into(), 101),
            ("QDISC_DROP".into(), 0),
            ("CPU_BACKLOG".into(), 2),
        ];
        assert_eq!(
            grown(&b, &a),
            [
                ("SOCKET_RCVBUFF".to_string(), 100),
                ("CPU_BACKLOG".into(), 2),
                ("NO_SOCKET".into(), 2)
            ]
        );
    }
}
