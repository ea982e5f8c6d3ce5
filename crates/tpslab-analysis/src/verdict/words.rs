//! Shared wording of the explanations: evidence lines with their sources, percentages,
//! the buffer notes, the server's drain, sysctl lines.

use super::facts::usable_threads;
use crate::buffer::explain_overshoot;
use tpslab_record::buffer::TruesizeProbe;
use tpslab_record::verdict::{Evidence, Facts};

/// Datagrams that reached the wire: attempted minus those the generator failed to send.
pub(super) fn on_wire(f: &Facts) -> u64 {
    f.attempted.saturating_sub(f.send_failed)
}

pub(super) fn loss_text(f: &Facts) -> String {
    f.window_loss_pct.map_or(String::new(), |l| {
        format!(" ({l:.2} % of the measurement window unanswered)")
    })
}

pub(super) fn ev(text: String, source: &str) -> Evidence {
    Evidence {
        text,
        source: source.into(),
    }
}

pub(super) fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

pub(super) fn buffer_notes(f: &Facts, probe: Option<&TruesizeProbe>) -> Vec<String> {
    let mut notes = vec![];
    let Some(p) = probe else {
        return notes;
    };
    let t = p.truesize_bytes();
    notes.push(format!(
        "measured here: a queued {}-byte datagram is charged {} bytes (rx_queue {} / {} queued datagrams): skb truesize, not payload",
        p.size_bytes, t, p.rx_queue_bytes, p.queued
    ));
    notes.push(format!(
        "a socket that asks for SO_RCVBUF N is granted 2N (getsockopt reads 2N; N is first capped at net.core.rmem_max unless SO_RCVBUFFORCE); a socket that never asks gets net.core.rmem_default ({}) as its limit, not doubled",
        f.rmem_default.map_or("unknown".into(), |v| format!("{v} bytes"))
    ));
    notes.push(format!(
        "a full queue here held {} datagrams and read {} bytes against a {}-byte limit: this kernel {}",
        p.full_queued,
        p.full_rx_queue_bytes,
        p.granted_bytes,
        if p.overshoots() {
            "checks the limit before adding a datagram, so a full queue reads above the limit"
        } else {
            "counts the new datagram in the check, so a full queue stays at or below the limit"
        }
    ));
    if let (Some(tpslab_record::runtime::Runtime::Java), Some(&b)) =
        (f.runtime, f.sk_rcvbufs.first())
    {
        notes.push(format!(
            "this Java server's getReceiveBufferSize() reports {}: the JDK halves SO_RCVBUF when reading it back on Linux; the kernel's limit, which rx_queue is held to, is {b}",
            b / 2
        ));
    }
    let fits = explain_overshoot(213312, 212992);
    if !fits.is_empty() {
        notes.push(format!(
            "S2's riddle (a queue reading 213312 with SO_RCVBUF 212992), by arithmetic on the rule above, not measured here: a full queue on a kernel that admitted a datagram while the queue was at or below the limit; 213312 = {} datagrams of that truesize, the last admitted at {} or less",
            fits.iter().map(|(n, t)| format!("{n} x {t}")).collect::<Vec<_>>().join(" or "),
            212992
        ));
    }
    notes
}

/// The server's drain while datagrams waited, and whether it was busy or waiting.
pub(super) fn drain_text(f: &Facts, d: f64) -> String {
    let usable = usable_threads(f);
    let Some(cpu) = f.backlog_cpu_pct else {
        return format!(
            "while datagrams waited in its queue ({:.1} s of the run) the server read {d:.0} datagrams/s (its CPU in those moments is not resolved: CPU time is read every 100 ms; {:.0} % of a CPU over the run); offered {:.0} pps mean",
            f.backlog_s, f.server_cpu_mean_pct, f.offered_pps
        );
    };
    let per_dgram_us = 1e6 / d.max(1e-9);
    let runq = f.backlog_runq_pct.unwrap_or(0.0);
    let starved = format!(
        "it was runnable but waiting for a CPU {runq:.0} % of the time: other processes took its CPU (contention), so it is slower here than it would be on a CPU of its own"
    );
    let asleep = format!(
        "it sleeps or blocks about {:.0} us per datagram (only {:.0} us of CPU each), so that wait, not CPU or buffer, sets its rate",
        per_dgram_us * (1.0 - (cpu + runq) / 100.0 / usable as f64).max(0.0),
        per_dgram_us * cpu / 100.0
    );
    let state = match (server_starved(f), server_waits(f)) {
        (true, true) => format!("{starved}; and {asleep}"),
        (true, false) => starved,
        (false, true) => format!("it was mostly NOT on a CPU: {asleep}"),
        (false, false) => {
            "its threads were busy: that is what it can drain at full CPU".to_string()
        }
    };
    format!(
        "while datagrams waited in its queue ({:.1} s of the run) the server read {d:.0} datagrams/s using {cpu:.0} % of a CPU: {state}; offered {:.0} pps mean",
        f.backlog_s, f.offered_pps
    )
}

/// The server's threads were mostly off-CPU while datagrams waited, and asleep (neither
/// running nor runnable) for at least 30 % of each usable thread's time: it sleeps or
/// blocks per message. A server can also be starved at the same time (see
/// [`server_starved`]): on a loaded host a thread that sleeps per message also waits for
/// a CPU after each wake-up.
pub(super) fn server_waits(f: &Facts) -> bool {
    let usable = usable_threads(f) as f64;
    let Some(cpu) = f.backlog_cpu_pct else {
        return false;
    };
    let asleep = 100.0 * usable - cpu - f.backlog_runq_pct.unwrap_or(0.0);
    f.drain_pps.is_some() && cpu < 50.0 * usable && asleep >= 30.0 * usable
}

/// The server's threads spent much of the backlog runnable but without a CPU (other
/// processes had it): at least a quarter of a CPU per usable thread, and more than the
/// time they ran.
pub(super) fn server_starved(f: &Facts) -> bool {
    let usable = usable_threads(f) as f64;
    f.drain_pps.is_some()
        && f.backlog_runq_pct
            .is_some_and(|w| w >= 25.0 * usable && w >= f.backlog_cpu_pct.unwrap_or(0.0) * 0.5)
}

/// `sysctl -w` lines for the pairs whose current value (`cur`) is lower, and the pairs
/// themselves (for [`persist_lines`]); a sysctl is never set to the value it already has.
pub(super) fn raise_lines(pairs: &[(&str, u64, Option<u64>)]) -> (Vec<String>, Vec<(String, u64)>) {
    let need: Vec<(&str, u64)> = pairs
        .iter()
        .filter(|(_, v, cur)| cur.is_none_or(|c| c < *v))
        .map(|(k, v, _)| (*k, *v))
        .collect();
    (
        sysctl_lines(&need),
        need.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    )
}

/// `sysctl -w KEY=VALUE` for each pair, quoted for sh by shlex. They last until the next
/// boot: the diagnosis persists them all in one file ([`persist_lines`]).
pub(super) fn sysctl_lines(pairs: &[(&str, u64)]) -> Vec<String> {
    pairs
        .iter()
        // Key and value quoted each: `=` inside an argument is not special to sh.
        .map(|(k, v)| format!("sysctl -w {}={}", sh(&[k]), sh(&[&v.to_string()])))
        .collect()
}

/// Words joined into one sh command line, each quoted by shlex where it needs it.
pub(super) fn sh(words: &[&str]) -> String {
    // Only a NUL byte makes try_join fail; the words here are sysctl keys, numbers and
    // paths built in this crate.
    shlex::try_join(words.iter().copied()).unwrap_or_else(|e| format!("# not quotable: {e}"))
}

/// Where the diagnosis persists its sysctls (sysctl.d(5), read at boot).
pub const PERSIST_FILE: &str = "/etc/sysctl.d/60-udp-buffers.conf";

/// One file for every sysctl a diagnosis recommends, written by one `cat >` (a second
/// `cat >` to the same path would replace the first, losing its keys at the next boot):
/// a comment, the here-document with one `KEY = VALUE` line per key (the last value of a
/// key given twice), `EOF`. Empty when there is nothing to persist.
pub(super) fn persist_lines(pairs: &[(String, u64)]) -> Vec<String> {
    let mut keys: Vec<(&str, u64)> = vec![];
    for (k, v) in pairs {
        match keys.iter_mut().find(|(key, _)| key == k) {
            Some(e) => e.1 = *v,
            None => keys.push((k, *v)),
        }
    }
    if keys.is_empty() {
        return vec![];
    }
    let mut lines = vec![
        "# one file with every key, full names (S1's `core.rmem_default` without `net.` is ignored at boot); leave out a line whose change you did not make:".to_string(),
        format!("cat > {} <<'EOF'", sh(&[PERSIST_FILE])),
    ];
    lines.extend(keys.iter().map(|(k, v)| format!("{k} = {v}")));
    lines.push("EOF".into());
    lines
}

/// The server socket's queue against its limit.
pub(super) fn rxq(f: &Facts) -> Evidence {
    ev(
            format!(
                "server socket rx_queue: mean {:.0} B, max {:.0} B against a limit of {}; at 75 % of the limit or more in {:.0} % of samples, below 10 % of it in {:.0} %",
                f.rxq_mean_bytes,
                f.rxq_max_bytes,
                f.limit_bytes.map_or("unknown (not our server: max seen used)".into(), |l| format!("{l} B")),
                100.0 * f.rxq_share_full,
                100.0 * f.rxq_share_low
            ),
            "/proc/PID/net/udp rx_queue of the server socket, every sample",
        )
}

/// The server's drain or CPU while datagrams waited.
pub(super) fn cpu(f: &Facts) -> Evidence {
    if let Some(d) = f.drain_pps {
        return ev(drain_text(f, d), "reads per sampling interval (tracepoints sock:sock_recv_length on the server's threads, or its own count) while rx_queue > 0; CPU from /proc/PID/task/TID/schedstat");
    }
    match f.capacity_pps {
        Some(c) => ev(
            format!(
                "server threads used {:.0} % of a CPU on average; they can read about {c:.0} datagrams/s at full CPU, offered {:.0} pps mean",
                f.server_cpu_mean_pct, f.offered_pps
            ),
            "/proc/PID/task/TID/schedstat run time; reads per CPU-second",
        ),
        None => ev(
            format!(
                "server CPU not measured (pass --pid PID of the server); offered {:.0} pps mean",
                f.offered_pps
            ),
            "-",
        ),
    }
}
