//! The socket-buffer cases ([`tpslab_record::verdict::Case::SocketBufferBursts`],
//! [`tpslab_record::verdict::Case::SocketBufferUnjudged`]) and the buffer a fix sets.

use super::*;

/// [`tpslab_record::verdict::Case::SocketBufferBursts`]: its evidence, recommendations and fix; returns (layer, headline).
pub(in crate::verdict) fn socket_buffer_bursts(f: &Facts, d: &mut Draft) -> (String, String) {
    let att = f.attempted;
    d.evidence.push(rxq(f));
    d.evidence.push(cpu(f));
    if let Some(t) = f.truesize_bytes.filter(|&t| t > 0) {
        buffer_fix(f, t, d);
    }
    let when = if f.burst > 1 {
        "during bursts"
    } else {
        "while the server stalls"
    };
    d.recs.push(Recommendation {
            what: "do not add threads or rewrite the server first".into(),
            why: match f.capacity_pps {
                Some(c) if f.drain_pps.is_some() => format!(
                    "it keeps up on average (it read {c:.0} datagrams/s while its queue held datagrams, against {:.0} pps offered; {:.0} % of a CPU over the run): the datagrams die in the queue {when}, not for lack of CPU (S1's lesson)",
                    f.offered_pps, f.server_cpu_mean_pct
                ),
                Some(c) => format!(
                    "it keeps up on average ({:.0} % of a CPU for {:.0} pps offered; about {c:.0} pps at full CPU): the datagrams die in the queue {when}, not for lack of CPU (S1's lesson)",
                    f.server_cpu_mean_pct, f.offered_pps
                ),
                None => format!(
                    "its queue drains between peaks (below 10 % of the limit in {:.0} % of samples): the datagrams die in the queue {when} (S1's lesson)",
                    100.0 * f.rxq_share_low
                ),
            },
            lines: vec![],
        });
    if f.burst > 1 {
        (
                "the server socket's receive buffer (bursts)".to_string(),
                format!(
                    "Datagrams die at the server socket's receive buffer during bursts ({:.1} % of those attempted), while the server keeps up on average.",
                    pct(f.socket_drops, att)
                ),
            )
    } else {
        (
                "the server socket's receive buffer (stalls under a steady load)".to_string(),
                format!(
                    "Datagrams die at the server socket's receive buffer ({:.1} % of those attempted) under a steady {:.0} pps that the server keeps up with on average: it stalls now and then, and the buffer does not cover the stall.",
                    pct(f.socket_drops, att),
                    f.offered_pps
                ),
            )
    }
}

/// [`tpslab_record::verdict::Case::SocketBufferUnjudged`]: the drops at the socket buffer, what is known
/// of the server, and how to get its read count; no fix (the two possible causes need
/// opposite ones). Returns (layer, headline).
pub(in crate::verdict) fn socket_buffer_unjudged(f: &Facts, d: &mut Draft) -> (String, String) {
    let att = f.attempted;
    let why = f.reads_unknown.clone().unwrap_or_default();
    d.evidence.push(rxq(f));
    d.evidence.push(cpu(f));
    d.evidence.push(ev(
        format!(
            "the server's reads were not counted: {why}; the ledger's read count ({}) comes from counters that include every other UDP socket of the namespace, so it cannot say whether the server keeps up with {:.0} pps",
            f.delivered, f.offered_pps
        ),
        "observer: the target's process and its threads' tracepoints",
    ));
    d.recs.push(Recommendation {
        what: "count the server's reads, then diagnose again: the fix depends on them".into(),
        why: format!(
            "if the server keeps up on average, the datagrams die in its queue during bursts or stalls and a bigger receive buffer is the fix (S1); if it is too slow for the mean rate, a bigger buffer only fills later and the server must get faster; only its read count while datagrams wait tells them apart ({why})"
        ),
        lines: {
            // The same target, as root on the server's host (kernel 6.4+): tpslab finds the
            // process by its socket; the PID when it was given or found.
            let target = if f.target.is_empty() { "HOST:PORT" } else { f.target.as_str() };
            let mut words = vec!["sudo", "tpslab", "diagnose", "udp", target];
            let pid = f.pid.map(|p| p.to_string());
            if let Some(p) = &pid {
                words.extend(["--pid", p.as_str()]);
            }
            vec![format!(
                "{}  # on the server's host, as root (kernel 6.4+)",
                crate::verdict::words::sh(&words)
            )]
        },
    });
    (
        "the server socket's receive buffer (cause unknown: the server's reads were not counted)"
            .to_string(),
        format!(
            "Datagrams die at the server socket's receive buffer ({:.1} % of those attempted); whether the server keeps up with the mean {:.0} pps (a bigger buffer helps) or is too slow for it (it does not) is unknown without its read count: {why}.",
            pct(f.socket_drops, att),
            f.offered_pps
        ),
    )
}

/// The evidence of how long the limit of `held` datagrams charged `t` bytes each lasts:
/// against a burst, or against a steady rate's arrivals.
fn backlog_evidence(f: &Facts, t: u64, held: u64) -> Evidence {
    ev(
        if f.burst > 1 {
            format!(
                    "bursts of {} datagrams every {:.1} ms, each charged {t} B: holding a whole burst would take {} B of queue; the limit holds {held} datagrams",
                    f.burst,
                    f.burst_interval_s * 1e3,
                    f.burst * t,
                )
        } else {
            format!(
                    "a steady {:.0} pps, each datagram charged {t} B: the limit holds {held} datagrams, {:.1} ms of arrivals; a longer stall of the server overflows it",
                    f.offered_pps,
                    held as f64 / f.offered_pps.max(1.0) * 1e3
                )
        },
        "generator plan; truesize probe",
    )
}

/// net.core.rmem_default raised to `granted` for a server that never sets its own buffer
/// (`own_buffer`: Some(false) when its sockets were seen at the default), with `lines`.
fn default_rec(
    f: &Facts,
    granted: u64,
    own_buffer: Option<bool>,
    lines: Vec<String>,
) -> Recommendation {
    Recommendation {
                what: format!(
                    "net.core.rmem_default = {granted}{}",
                    if own_buffer == Some(false) { "" } else { " (for a server that never sets SO_RCVBUF)" }
                ),
                why: format!(
                    "{}a socket that never sets SO_RCVBUF gets net.core.rmem_default ({}) as its limit, not doubled; the new value applies only to sockets created after the change, so the server must re-create its socket (restart it){}",
                    if own_buffer == Some(false) {
                        format!("the server's socket{} never set its own buffer (its limit {} B equals net.core.rmem_default): ", if f.sk_rcvbufs.len() > 1 { "s" } else { "" }, f.sk_rcvbufs.first().copied().unwrap_or(0))
                    } else {
                        String::new()
                    },
                    f.rmem_default.map_or("unknown".into(), |v| v.to_string()),
                    if f.ours { "; it enlarges every such socket on the host, so prefer the flag" } else { "; it enlarges every socket on the host that does not set its own, so the code change is the narrower fix" }
                ),
                lines,
            }
}

/// The buffer that holds the peak backlog of datagrams charged `t` bytes each: the code
/// line (or our server's flag), net.core.rmem_default for a server that never sets its
/// own, rmem_max when the request would be capped, and the fix a verification applies.
fn buffer_fix(f: &Facts, t: u64, d: &mut Draft) {
    let held = f.limit_bytes.unwrap_or(f.rxq_max_bytes as u64) / t;
    let need = buffer_need(f.burst, held, f.peak_drops_window, t, BACKLOG_MARGIN);
    // setsockopt takes an int and the kernel doubles it: at most INT_MAX / 2.
    let (req, granted) = need.request();
    let mut sys = vec![];
    if f.rmem_max.is_none_or(|m| m < req) {
        sys.push(("net.core.rmem_max", req));
    }
    d.evidence.push(backlog_evidence(f, t, held));
    // A socket that never set SO_RCVBUF has net.core.rmem_default as its limit.
    // Per socket: every socket at rmem_default means none set its own.
    let own_buffer = f
        .rmem_default
        .filter(|_| !f.sk_rcvbufs.is_empty())
        .map(|d| f.sk_rcvbufs.iter().any(|&b| b != d));
    let mut code = if f.ours {
        vec![format!("tpslab serve udp --rcvbuf {req}")]
    } else {
        in_its_runtime(f, |rt| runtime::rcvbuf_lines(rt, req))
    };
    if !sys.is_empty() {
        code.push(format!(
            "# the request is capped at net.core.rmem_max ({}): raise it",
            f.rmem_max.map_or("unknown".into(), |m| m.to_string())
        ));
        code.extend(sysctl_lines(&sys));
    }
    let code_rec = Recommendation {
            what: format!(
                "raise the receive buffer to hold a burst: SO_RCVBUF {req} (granted {granted}){}",
                match (f.ours, f.runtime) {
                    (true, _) => String::new(),
                    (false, Some(rt)) => format!(", in the server's code ({})", rt.name()),
                    (false, None) => ", in the server's code (its runtime unknown)".to_string(),
                }
            ),
            why: format!(
                "up to {} datagrams waited at once ({held} queued at the limit + {}, at most {}): {} x {t} B charged each, x{} margin{}",
                need.peak_backlog,
                match f.peak_drops_window_uncapped {
                    // More than a burst in one burst interval of samples: parts of two.
                    Some(raw) => format!(
                        "up to {} dropped from one burst (the samples counted {raw} within one burst interval: parts of two bursts)",
                        f.peak_drops_window
                    ),
                    None => format!(
                        "{} dropped within one {}",
                        f.peak_drops_window,
                        if f.burst > 1 { "burst interval" } else { "100 ms" }
                    ),
                },
                if f.burst > 1 { format!("the burst of {}", f.burst) } else { "what arrived".to_string() },
                need.peak_backlog,
                need.margin,
                if req < need.setsockopt_bytes { "; capped at the largest value setsockopt accepts" } else { "" }
            ),
            lines: code,
        };
    let (default_lines, default_keys) =
        raise_lines(&[("net.core.rmem_default", granted, f.rmem_default)]);
    let default_rec = (!default_lines.is_empty() && own_buffer != Some(true))
        .then(|| default_rec(f, granted, own_buffer, default_lines));
    let mut fix_sys: Vec<(String, String)> = sys
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if !f.ours {
        // tpslab can only change the host for a foreign server: rmem_default,
        // which reaches its socket when it never sets its own buffer.
        fix_sys.clear();
        if own_buffer != Some(true) && f.rmem_default.is_none_or(|d| d < granted) {
            fix_sys.push(("net.core.rmem_default".into(), granted.to_string()));
        }
    }
    let default_keys = if default_rec.is_some() {
        default_keys
    } else {
        vec![]
    };
    let code_keys = sys.iter().map(|(k, v)| (k.to_string(), *v));
    if own_buffer == Some(false) && !f.ours {
        // rmem_default first: it fixes this server without a code change.
        d.recs.extend(default_rec);
        d.recs.push(code_rec);
        d.persist.extend(default_keys);
        d.persist.extend(code_keys);
    } else {
        d.recs.push(code_rec);
        d.recs.extend(default_rec);
        d.persist.extend(code_keys);
        d.persist.extend(default_keys);
    }
    d.fix = (f.ours || !fix_sys.is_empty()).then(|| Fix {
        rcvbuf: f.ours.then_some(req),
        sysctls: fix_sys,
        ..Default::default()
    });
    d.buffer = Some(need);
}
