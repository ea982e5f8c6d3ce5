//! `tpslab doctor`: a host's network settings judged against each other, against what
//! runs now, and against the workload the host is for. Pure: the caller reads the files
//! (parsed, in the order they are applied), the running values, the host's NICs and CPUs
//! and probes truesize; [`judge`] only judges.
//!
//! - [`files`]: the sysctl files (unknown keys, malformed lines, overrides, values not
//!   running, pairs and triples out of order, memory limits in pages);
//! - [`workload`]: `--for udp|tcp|pool` (buffers for a burst, for a BDP, keepalive and
//!   retries against an idle timeout; what `probe idle` saw of the path in [`path_seen`]);
//! - [`host`]: NIC rings and drops, RPS, irqbalance, the CPU frequency governor.

pub mod files;
pub mod host;
pub mod path_seen;
pub mod pool;
pub mod workload;

use tpslab_plan::doctor::Workload;

pub use files::audit;
use tpslab_record::doctor::{DoctorRecord, Finding, Fix, Running, Severity};

/// The network sysctls doctor always reads, with what each one governs.
pub const KNOWN: &[(&str, &str)] = &[
    (
        "net/core/rmem_default",
        "receive buffer limit of a socket that never sets SO_RCVBUF, bytes",
    ),
    (
        "net/core/rmem_max",
        "largest SO_RCVBUF a socket may ask (the kernel doubles it), bytes",
    ),
    (
        "net/core/wmem_default",
        "send buffer limit of a socket that never sets SO_SNDBUF, bytes",
    ),
    (
        "net/core/wmem_max",
        "largest SO_SNDBUF a socket may ask, bytes",
    ),
    (
        "net/core/netdev_max_backlog",
        "packets each CPU's input backlog holds (loopback, veth, RPS)",
    ),
    (
        "net/core/netdev_budget",
        "packets one NET_RX softirq run handles",
    ),
    (
        "net/core/netdev_budget_usecs",
        "longest NET_RX softirq run, us",
    ),
    (
        "net/core/somaxconn",
        "largest listen() backlog (accept queue)",
    ),
    (
        "net/core/busy_read",
        "busy-poll time of a blocking read, us (0: off)",
    ),
    (
        "net/core/busy_poll",
        "busy-poll time of poll/select, us (0: off)",
    ),
    ("net/core/optmem_max", "ancillary buffer per socket, bytes"),
    (
        "net/core/rps_sock_flow_entries",
        "RFS flow table size (0: RFS off)",
    ),
    (
        "net/ipv4/udp_mem",
        "UDP memory of all sockets: min pressure max, pages",
    ),
    (
        "net/ipv4/udp_rmem_min",
        "receive memory a UDP socket keeps under pressure, bytes",
    ),
    (
        "net/ipv4/tcp_rmem",
        "TCP receive buffer: min default max (autotuning ceiling), bytes",
    ),
    (
        "net/ipv4/tcp_wmem",
        "TCP send buffer: min default max, bytes",
    ),
    (
        "net/ipv4/tcp_mem",
        "TCP memory of all sockets: min pressure max, pages",
    ),
    (
        "net/ipv4/tcp_window_scaling",
        "window scaling (RFC 7323; 0 caps windows at 64 KiB)",
    ),
    (
        "net/ipv4/tcp_moderate_rcvbuf",
        "receive buffer autotuning (0: off)",
    ),
    (
        "net/ipv4/tcp_congestion_control",
        "congestion control of new connections",
    ),
    (
        "net/ipv4/tcp_keepalive_time",
        "idle time before the first keepalive probe, s",
    ),
    (
        "net/ipv4/tcp_keepalive_intvl",
        "time between keepalive probes, s",
    ),
    (
        "net/ipv4/tcp_keepalive_probes",
        "unanswered keepalive probes before the connection is dropped",
    ),
    (
        "net/ipv4/tcp_retries2",
        "retransmissions of unacknowledged data before ETIMEDOUT",
    ),
    (
        "net/ipv4/tcp_rto_min_us",
        "smallest retransmission timeout, us",
    ),
    (
        "net/ipv4/tcp_rto_max_ms",
        "largest retransmission timeout, ms",
    ),
    (
        "net/ipv4/tcp_max_syn_backlog",
        "half-open connections a listener holds",
    ),
    (
        "net/ipv4/ip_local_port_range",
        "ephemeral ports for outgoing connections: first last",
    ),
];

/// The /proc/sys paths [`judge`] reads: [`KNOWN`] (which holds every key judged in pairs,
/// triples and workloads).
pub fn judged_paths() -> Vec<&'static str> {
    KNOWN.iter().map(|(p, _)| *p).collect()
}

/// Every finding on `r` (its `findings` field is ignored): files, memory limits, the
/// workload, the host; errors first, then warnings, then notes, each group in that order.
pub fn judge(r: &DoctorRecord) -> Vec<Finding> {
    let mut out = audit(&r.files, &r.running, &r.suggested);
    out.extend(files::memory(&r.running, r.memory_bytes, r.page_bytes));
    if let Some(w) = &r.workload {
        out.extend(workload::judge(w, r));
        if let Workload::Pool {
            idle_timeout,
            keepalive_counts,
            ..
        } = w
        {
            let os = number(&r.running, "net/ipv4/tcp_keepalive_time");
            for p in &r.pools {
                out.extend(
                    pool::judge(
                        p,
                        idle_timeout.as_secs(),
                        os,
                        workload::PathSeen::stated(*keepalive_counts),
                    )
                    .unwrap_or_else(|e| {
                        vec![Finding {
                            severity: Severity::Error,
                            what: e,
                            evidence: vec![],
                            fix: None,
                        }]
                    }),
                );
            }
        }
    }
    out.extend(host::judge(&r.host));
    out.sort_by_key(|f| f.severity);
    out
}

/// The sysctl.d file that applies every [`Fix::Sysctl`] of `findings` (a key fixed twice
/// takes the larger number, else the later value), each line under the finding it fixes;
/// None when no finding has one.
pub fn snippet(findings: &[Finding], header: &str) -> Option<String> {
    let mut chosen: Vec<(String, String, String)> = vec![];
    for f in findings {
        let Some(Fix::Sysctl { key, value }) = &f.fix else {
            continue;
        };
        match chosen.iter_mut().find(|(k, _, _)| k == key) {
            Some(c) => {
                let larger = match (c.1.parse::<u64>(), value.parse::<u64>()) {
                    (Ok(a), Ok(b)) => b > a,
                    _ => true,
                };
                if larger {
                    *c = (key.clone(), value.clone(), f.what.clone());
                }
            }
            None => chosen.push((key.clone(), value.clone(), f.what.clone())),
        }
    }
    if chosen.is_empty() {
        return None;
    }
    let mut s = String::new();
    for l in header.lines() {
        s.push_str(&format!("# {l}\n"));
    }
    for (k, v, why) in chosen {
        s.push_str(&format!("\n# {}\n{k} = {v}\n", why.replace('\n', " ")));
    }
    Some(s)
}

/// The dotted key of a /proc/sys path.
pub(crate) fn dotted(path: &str) -> String {
    path.replace('/', ".")
}

/// A running value's whole-number fields (`4096 131072 6291456` -> three numbers).
pub(crate) fn numbers(running: &Running, path: &str) -> Option<Vec<u64>> {
    let v = running.get(path)?.as_ref()?;
    v.split_whitespace().map(|x| x.parse().ok()).collect()
}

/// A running value that is one whole number.
pub fn number(running: &Running, path: &str) -> Option<u64> {
    numbers(running, path)
        .filter(|v| v.len() == 1)
        .map(|v| v[0])
}

/// `doctor --fail-on`: the least severe finding that fails the run (`warn`, `error`);
/// None without the flag. Errors: one line (`--fail-on x: allowed warn or error`).
pub fn fail_on(s: Option<&str>) -> Result<Option<Severity>, String> {
    Ok(match s {
        None => None,
        Some("warn") => Some(Severity::Warn),
        Some("error") => Some(Severity::Error),
        Some(other) => {
            return Err(format!(
                "{}: allowed warn or error",
                crate::gate::shown(other)
            ))
        }
    })
}

/// How many of `findings` are at `gate` or more severe (0 without a gate).
pub fn failing(findings: &[Finding], gate: Option<Severity>) -> usize {
    gate.map_or(0, |g| findings.iter().filter(|f| f.severity <= g).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(what: &str, fix: Option<Fix>) -> Finding {
        Finding {
            severity: Severity::Warn,
            what: what.into(),
            evidence: vec![],
            fix,
        }
    }

    #[test]
    fn snippet_keeps_one_line_per_key_the_larger_number() {
        let f = [
            finding("a", Some(Fix::sysctl("net.core.rmem_max", 8388608))),
            finding("b", Some(Fix::action("ethtool -G eth0 rx 4096"))),
            finding("c", Some(Fix::sysctl("net.core.rmem_max", 4194304))),
            finding(
                "d",
                Some(Fix::sysctl("net.ipv4.tcp_rmem", "4096 131072 25165824")),
            ),
            finding("e", None),
        ];
        let s = snippet(&f, "written by tpslab doctor\nreview it").unwrap();
        assert_eq!(
            s,
            "# written by tpslab doctor\n# review it\n\n# a\nnet.core.rmem_max = 8388608\n\n# d\nnet.ipv4.tcp_rmem = 4096 131072 25165824\n"
        );
        // What it writes reads back as sysctl.d settings with full keys.
        let parsed = tpslab_proc::sysctl_conf::parse_sysctl_conf(&s);
        assert_eq!(parsed.iter().filter_map(|l| l.entry.path()).count(), 2);
        assert_eq!(snippet(&f[1..2], "x"), None);
    }

    #[test]
    fn known_keys_are_distinct_proc_sys_paths() {
        let mut keys: Vec<&str> = judged_paths();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), KNOWN.len());
        assert!(keys
            .iter()
            .all(|k| k.starts_with("net/") && !k.contains('.')));
    }
}
