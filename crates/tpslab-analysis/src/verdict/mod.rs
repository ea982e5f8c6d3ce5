//! The verdict: where the datagrams died, the evidence, and what to change.
//!
//! [`Facts`] are extracted from a run record (plus a truesize probe); [`diagnose`] applies
//! rules in a fixed order: a run whose generator was the bottleneck is not evidence; then
//! no listener; then the layer that lost the most; no loss at all is said plainly.

mod facts;

pub use facts::{drain, Drain, Facts};

use crate::buffer::{buffer_need, explain_overshoot, BufferNeed, TruesizeProbe};
use facts::usable_threads;
use serde::{Deserialize, Serialize};

/// The diagnosed case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    /// The generator could not keep its schedule or lost replies itself.
    GeneratorInvalid,
    /// The ledger does not balance: a count includes traffic that is not this run's.
    Inconsistent,
    /// Nothing listened on the target port (Udp: NoPorts).
    NoListener,
    /// Nothing was lost.
    NoLoss,
    /// The socket receive buffer overflowed on bursts while the application keeps up on
    /// average.
    SocketBufferBursts,
    /// The application is too slow for the mean rate: the queue is pinned at its limit.
    AppTooSlow,
    /// The per-CPU softnet backlog overflowed (net.core.netdev_max_backlog).
    SoftnetBacklog,
    /// The NIC dropped (/proc/net/dev).
    NicDrops,
    /// The server failed to send replies.
    ReplySendFailed,
    /// The server read datagrams and did not answer them.
    NotAnswered,
    /// Loss that no counter explains.
    Unexplained,
}

/// One piece of evidence with its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// What was seen.
    pub text: String,
    /// Where it comes from.
    pub source: String,
}

/// A concrete change with its reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// What to change.
    pub what: String,
    /// Why it helps (or why something else will not).
    pub why: String,
    /// Exact lines to run or write (sysctl -w, setsockopt, sysctl.d snippet, tpslab flags).
    pub lines: Vec<String>,
}

/// Settings to apply in a verification run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    /// SO_RCVBUF request for the server socket(s), bytes.
    pub rcvbuf: Option<u64>,
    /// Server threads.
    pub threads: Option<usize>,
    /// recvmmsg batch.
    pub batch: Option<usize>,
    /// Host sysctls (name, value).
    pub sysctls: Vec<(String, String)>,
}

/// The verdict of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The case.
    pub case: Case,
    /// The layer in plain words.
    pub layer: String,
    /// One sentence.
    pub headline: String,
    /// Figures behind it.
    pub evidence: Vec<Evidence>,
    /// What to change.
    pub recommendations: Vec<Recommendation>,
    /// The buffer arithmetic, when the socket buffer is involved.
    pub buffer: Option<BufferNeed>,
    /// Explanation of requested / granted / charged sizes from the probe.
    pub buffer_notes: Vec<String>,
    /// What to apply for `--verify` (None: nothing to apply).
    pub fix: Option<Fix>,
    /// Background shown only with `--explain` (e.g. S2's queue riddle for a foreign server).
    #[serde(default)]
    pub explain_notes: Vec<String>,
}

fn ev(text: String, source: &str) -> Evidence {
    Evidence {
        text,
        source: source.into(),
    }
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

fn buffer_notes(f: &Facts, probe: Option<&TruesizeProbe>) -> Vec<String> {
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
    if let (Some(crate::runtime::Runtime::Java), Some(&b)) = (f.runtime, f.sk_rcvbufs.first()) {
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
fn drain_text(f: &Facts, d: f64) -> String {
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
fn server_waits(f: &Facts) -> bool {
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
fn server_starved(f: &Facts) -> bool {
    let usable = usable_threads(f) as f64;
    f.drain_pps.is_some()
        && f.backlog_runq_pct
            .is_some_and(|w| w >= 25.0 * usable && w >= f.backlog_cpu_pct.unwrap_or(0.0) * 0.5)
}

/// `sysctl -w` and sysctl.d lines for the pairs whose current value (`cur`) is lower;
/// a sysctl is never set to the value it already has.
fn raise_lines(pairs: &[(&str, u64, Option<u64>)]) -> Vec<String> {
    let need: Vec<(&str, u64)> = pairs
        .iter()
        .filter(|(_, v, cur)| cur.is_none_or(|c| c < *v))
        .map(|(k, v, _)| (*k, *v))
        .collect();
    if need.is_empty() {
        return vec![];
    }
    sysctl_lines(&need)
}

fn sysctl_lines(pairs: &[(&str, u64)]) -> Vec<String> {
    let mut lines: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("sysctl -w {k}={v}"))
        .collect();
    lines.push("# persist, with the full key names (S1's `core.rmem_default` without `net.` is ignored at boot):".into());
    lines.push("cat > /etc/sysctl.d/60-udp-buffers.conf <<'EOF'".into());
    lines.extend(pairs.iter().map(|(k, v)| format!("{k} = {v}")));
    lines.push("EOF".into());
    lines
}

/// Applies the rules to the facts.
pub fn diagnose(f: &Facts, probe: Option<&TruesizeProbe>) -> Diagnosis {
    let mut evidence = vec![];
    let mut recs = vec![];
    let mut buffer = None;
    let mut fix = None;
    let att = f.attempted;
    let loss_text = f.window_loss_pct.map_or(String::new(), |l| {
        format!(" ({l:.2} % of the measurement window unanswered)")
    });
    // Where the most datagrams were lost (ties go to the first, most specific layer).
    let layers = [
        (f.socket_drops, Case::SocketBufferBursts),
        (
            f.softnet_drops + f.reply_softnet_drops,
            Case::SoftnetBacklog,
        ),
        (f.nic_drops, Case::NicDrops),
        (f.not_answered, Case::NotAnswered),
        (f.reply_failed, Case::ReplySendFailed),
        (
            (f.unattributed.unwrap_or(0).max(0) + f.reply_unattributed.unwrap_or(0).max(0)) as u64,
            Case::Unexplained,
        ),
    ];
    let (top_count, top_case) =
        layers.iter().copied().fold(
            (0, Case::Unexplained),
            |best, l| if l.0 > best.0 { l } else { best },
        );
    let on_wire = att.saturating_sub(f.send_failed);
    // Everything accounted for on both paths and nothing missing in the window.
    let all_accounted = f.unattributed == Some(0)
        && (!f.replies || f.reply_unattributed == Some(0))
        && f.window_loss_pct.is_none_or(|l| l == 0.0);
    // Nothing listening is judged first: a generator that fell behind its schedule sent
    // fewer datagrams, but it cannot make the kernel find no socket for them.
    let mut case = if f.no_ports > 0
        && f.replies_read == 0
        && f.no_ports as f64 >= 0.9 * on_wire as f64
        && f.inconsistent.is_none()
    {
        Case::NoListener
    } else if !f.gen_valid {
        Case::GeneratorInvalid
    } else if f.inconsistent.is_some() {
        Case::Inconsistent
    } else if f.lost_total == 0 && f.send_failed == 0 && all_accounted {
        Case::NoLoss
    } else if top_count == 0 {
        Case::Unexplained
    } else {
        top_case
    };
    if case == Case::SocketBufferBursts {
        // Too slow for the mean rate: the queue never drains; or more is offered than the
        // server drains and its queue does not empty between bursts; or the queue is
        // pinned while the server's threads are busy. A queue that drains most of the
        // time is a burst problem even when the capacity estimate (noisy on a busy host)
        // is low.
        let pinned = f.rxq_share_full >= 0.5;
        let never_drains = pinned && f.rxq_share_low < 0.1;
        let threads = usable_threads(f);
        let cpu_bound = f.backlog_cpu_pct.unwrap_or(f.server_cpu_mean_pct) >= 85.0 * threads as f64
            || server_starved(f);
        let over_capacity = f.capacity_pps.is_some_and(|c| f.offered_pps >= c);
        // At full CPU the server could not read 80 % of the mean rate (reads per CPU-second
        // it used): no buffer can hold that, however often its queue empties between the
        // moments it gets a CPU. (A drain rate read while the queue held datagrams cannot
        // tell this: a small buffer caps what there is to read in an interval.)
        // Not when the queue sat nearly empty in 80 % of samples or more: a server that
        // waits for datagrams that often kept up with the mean (its CPU time may also
        // include threads that never read, a runtime's compiler or collector).
        let below_mean =
            f.cpu_capacity_pps.is_some_and(|c| c < 0.8 * f.offered_pps) && f.rxq_share_low < 0.8;
        if never_drains
            || below_mean
            || (over_capacity && f.rxq_share_low < 0.5)
            || (pinned && cpu_bound)
        {
            case = Case::AppTooSlow;
        }
    }
    evidence.push(ev(
        format!(
            "request path: {att} attempted, {} read by the server ({}), {} at the socket buffer, {} softnet, {} NIC, {} no listener, {} failed to send{}",
            f.delivered,
            if f.inconsistent.is_some() || f.delivered > att {
                "share not shown: the ledger does not balance".to_string()
            } else {
                format!("{:.2} %", pct(f.delivered, att))
            },
            f.socket_drops,
            f.softnet_drops,
            f.nic_drops,
            f.no_ports,
            f.send_failed,
            match f.unattributed {
                None => ", rest unknown".to_string(),
                Some(u) if u < 0 => format!(", INCONSISTENT: the counters exceed what was sent by {}", -u),
                Some(u) => format!(", {u} unattributed"),
            }
        ),
        "ledger (see --explain for each counter)",
    ));
    let rxq = |f: &Facts| {
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
    };
    let cpu = |f: &Facts| {
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
    };
    let (layer, headline) = match case {
        Case::GeneratorInvalid => {
            for r in &f.gen_reasons {
                evidence.push(ev(r.clone(), "generator self-check"));
            }
            recs.push(Recommendation {
                what: "make the generator keep up before judging the server".into(),
                why: "the loss or latency measured here may be the tool's, not the server's".into(),
                lines: vec![
                    "lower --rate, or spread the load: --threads N (load) / --load-threads N (run)".into(),
                    "keep the generator off the server's CPU (taskset the generator, --cpus for our server)".into(),
                ],
            });
            (
                "the generator (tpslab itself)".to_string(),
                "The run is NOT valid evidence against the server: the generator was a bottleneck."
                    .to_string(),
            )
        }
        Case::Inconsistent => {
            let why = f.inconsistent.clone().unwrap_or_default();
            evidence.push(ev(
                why.clone(),
                "ledger: attempted minus every counted layer < 0",
            ));
            recs.push(Recommendation {
                what: "measure where only this run's datagrams are counted".into(),
                why: "a counter that other traffic shares cannot place this run's datagrams".into(),
                lines: if f.exact_server {
                    vec![
                        "the server's own threads were counted: other clients of the server, or other UDP sockets of its process, share its counts; test it where this load is its only traffic".into(),
                        "e.g. a network namespace of its own (ip netns add ...; ip netns exec ...)".into(),
                    ]
                } else {
                    vec![
                        "run as root on kernel 6.4+ with --pid PID of the server: its own threads' reads are counted exactly".into(),
                        "or run the server and tpslab in a network namespace of their own (ip netns add ...; ip netns exec ...)".into(),
                    ]
                },
            });
            (
                "unknown: the measurement is inconsistent".to_string(),
                format!("NO VERDICT: the measurement is inconsistent ({why})."),
            )
        }
        Case::NoListener => {
            for r in f.gen_reasons.iter().filter(|_| !f.gen_valid) {
                evidence.push(ev(
                    format!("{r} (the generator fell behind too; that does not change where the datagrams went)"),
                    "generator self-check",
                ));
            }
            evidence.push(ev(
                format!(
                    "{} datagrams arrived for port {} where no socket listened",
                    f.no_ports, f.port
                ),
                "/proc/net/snmp Udp: NoPorts, delta",
            ));
            recs.push(Recommendation {
                what: format!("start the server on port {}, or point the load at the right address", f.port),
                why: "the kernel discarded every datagram: nothing was bound to the port (in this network namespace; pass --pid for a server in another one)".into(),
                lines: vec![format!("ss -uapn 'sport = :{}'", f.port)],
            });
            (
                "no listener (Udp: NoPorts)".to_string(),
                format!(
                    "Nothing listens on port {}: {:.1} % of the datagrams were discarded on arrival.",
                    f.port,
                    pct(f.no_ports, on_wire)
                ),
            )
        }
        Case::NoLoss => {
            let what = if f.replies {
                "were read by the server and answered"
            } else {
                "were read by the server"
            };
            evidence.push(ev(
                format!("all {att} datagrams {what}{loss_text}"),
                "ledger",
            ));
            (
                "none".to_string(),
                format!("No loss: all {att} datagrams {what}. Nothing to fix at this load."),
            )
        }
        Case::SocketBufferBursts => {
            evidence.push(rxq(f));
            evidence.push(cpu(f));
            if let Some(t) = f.truesize_bytes.filter(|&t| t > 0) {
                let held = f.limit_bytes.unwrap_or(f.rxq_max_bytes as u64) / t;
                let need = buffer_need(f.burst, held, f.peak_drops_window, t, 2.0);
                // setsockopt takes an int and the kernel doubles it: at most INT_MAX / 2.
                let max_req = (i32::MAX / 2) as u64;
                let req = need.setsockopt_bytes.min(max_req);
                let granted = req * 2;
                let mut sys = vec![];
                if f.rmem_max.is_none_or(|m| m < req) {
                    sys.push(("net.core.rmem_max", req));
                }
                evidence.push(ev(
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
                ));
                // A socket that never set SO_RCVBUF has net.core.rmem_default as its limit.
                // Per socket: every socket at rmem_default means none set its own.
                let own_buffer = f
                    .rmem_default
                    .filter(|_| !f.sk_rcvbufs.is_empty())
                    .map(|d| f.sk_rcvbufs.iter().any(|&b| b != d));
                let rt = f.runtime.unwrap_or(crate::runtime::Runtime::Native);
                let mut code = if f.ours {
                    vec![format!("tpslab serve udp --rcvbuf {req}")]
                } else {
                    crate::runtime::rcvbuf_lines(rt, req)
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
                        if f.ours { String::new() } else { format!(", in the server's code ({})", rt.name()) }
                    ),
                    why: format!(
                        "up to {} datagrams waited at once ({held} queued at the limit + {} dropped within one {}, at most {}): {} x {t} B charged each, x{} margin{}",
                        need.peak_backlog,
                        f.peak_drops_window,
                        if f.burst > 1 { "burst interval" } else { "100 ms" },
                        if f.burst > 1 { format!("the burst of {}", f.burst) } else { "what arrived".to_string() },
                        need.peak_backlog,
                        need.margin,
                        if req < need.setsockopt_bytes { "; capped at the largest value setsockopt accepts" } else { "" }
                    ),
                    lines: code,
                };
                let default_lines =
                    raise_lines(&[("net.core.rmem_default", granted, f.rmem_default)]);
                let default_rec = (!default_lines.is_empty() && own_buffer != Some(true)).then(|| {
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
                        lines: default_lines,
                    }
                });
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
                if own_buffer == Some(false) && !f.ours {
                    // rmem_default first: it fixes this server without a code change.
                    recs.extend(default_rec);
                    recs.push(code_rec);
                } else {
                    recs.push(code_rec);
                    recs.extend(default_rec);
                }
                fix = (f.ours || !fix_sys.is_empty()).then(|| Fix {
                    rcvbuf: f.ours.then_some(req),
                    sysctls: fix_sys,
                    ..Default::default()
                });
                buffer = Some(need);
            }
            let when = if f.burst > 1 {
                "during bursts"
            } else {
                "while the server stalls"
            };
            recs.push(Recommendation {
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
        Case::AppTooSlow => {
            evidence.push(rxq(f));
            evidence.push(cpu(f));
            let cap = f.capacity_pps.unwrap_or(0.0).max(1.0);
            let waits = server_waits(f);
            recs.push(Recommendation {
                what: "more buffer will not help: make the server faster than the mean rate".into(),
                why: format!(
                    "the mean rate ({:.0} pps) exceeds what the server drains ({cap:.0} pps): a bigger queue only fills later and adds latency",
                    f.offered_pps
                ),
                lines: vec![],
            });
            if server_starved(f) {
                recs.push(Recommendation {
                    what: "give the server a CPU of its own".into(),
                    why: format!(
                        "while datagrams queued, its threads were runnable but waiting for a CPU {:.0} % of the time: other processes on this host took it; the same server on an idle CPU drains more",
                        f.backlog_runq_pct.unwrap_or(0.0)
                    ),
                    lines: vec![
                        "taskset -pc CPU PID (a CPU the other work does not use), or move that work away".into(),
                        "chrt -f -p 50 TID only with a dedicated CPU (a FIFO thread can starve the rest)".into(),
                    ],
                });
            }
            if waits {
                recs.push(Recommendation {
                    what: "remove or overlap the wait in the per-message path".into(),
                    why: format!(
                        "the server is mostly asleep while datagrams queue ({:.0} % of a CPU): each message waits on something (a sleep, a lock, a blocking call) for about {:.0} us; more threads only help if they overlap that wait",
                        f.backlog_cpu_pct.unwrap_or(0.0),
                        1e6 / cap * (1.0 - (f.backlog_cpu_pct.unwrap_or(0.0) + f.backlog_runq_pct.unwrap_or(0.0)) / 100.0 / usable_threads(f) as f64).max(0.0)
                    ),
                    lines: vec![
                        "hand each datagram to a pool of workers (or asynchronous calls) and keep one thread reading the socket".into(),
                        "batch the blocking call (one round trip for many messages) where the protocol allows".into(),
                    ],
                });
            }
            let per_thread = cap / f.threads.clamp(1, f.cpus.max(1)) as f64;
            let want = ((f.offered_pps * 1.3) / per_thread).ceil() as usize;
            let threads = want.clamp(2, f.cpus.max(2));
            recs.push(Recommendation {
                what: format!("{threads} threads, each with its own SO_REUSEPORT socket"),
                why: "the kernel spreads datagrams over the sockets by flow hash: reads run in parallel with no shared lock (needs several source ports/flows)".into(),
                lines: if f.ours {
                    vec![format!("tpslab serve udp --threads {threads}")]
                } else {
                    vec!["setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) before bind, one socket per thread".into()]
                },
            });
            if !waits {
                recs.push(Recommendation {
                    what: "read in batches with recvmmsg (and reply with sendmmsg)".into(),
                    why: "one system call per 64 datagrams instead of one each cuts the per-datagram overhead".into(),
                    lines: if f.ours { vec!["tpslab serve udp --batch 64".into()] } else { vec![] },
                });
                recs.push(Recommendation {
                    what: "pin each server thread to its own CPU, away from the CPU that runs the NIC's softirq".into(),
                    why: "no migrations and warm caches; the receive softirq and the application stop competing for one core".into(),
                    lines: vec![if f.ours { "tpslab serve udp --cpus 1".into() } else { "taskset -pc 1 PID".into() }],
                });
                recs.push(Recommendation {
                    what: "leave the scheduler at SCHED_OTHER unless latency matters more than fairness".into(),
                    why: "SCHED_FIFO cuts preemption (S2 saw context switches drop 14x) but a busy FIFO thread can starve everything else on its CPU".into(),
                    lines: vec!["chrt -f -p 50 TID (only with a dedicated CPU)".into()],
                });
            }
            fix = f.ours.then(|| Fix {
                threads: Some(threads),
                batch: Some(64),
                ..Default::default()
            });
            (
                "the application (too slow for the mean rate)".to_string(),
                format!(
                    "The server is too slow for the mean rate ({:.0} pps offered, it drains about {:.0}{}): {:.1} % of datagrams die at its socket buffer; more buffer will not help.",
                    f.offered_pps,
                    cap,
                    match (waits, server_starved(f)) {
                        (true, true) => ", mostly asleep: it waits per message, and short of CPU: other processes took it",
                        (true, false) => ", mostly asleep: it waits per message",
                        (false, true) => ", short of CPU: other processes took it",
                        (false, false) => "",
                    },
                    pct(f.socket_drops, att)
                ),
            )
        }
        Case::SoftnetBacklog => {
            let cur = f.netdev_max_backlog.unwrap_or(1000);
            let want = (f.burst.max(1) * 2)
                .max(cur * 2)
                .max(1000)
                .next_power_of_two();
            evidence.push(ev(
                format!(
                    "{} packets dropped in the per-CPU softnet backlog (net.core.netdev_max_backlog = {cur})",
                    f.softnet_drops + f.reply_softnet_drops
                ),
                "/proc/net/softnet_stat column 2, delta, per CPU",
            ));
            recs.push(Recommendation {
                what: format!("raise net.core.netdev_max_backlog to {want}"),
                why: "packets wait in the receiving CPU's backlog before the stack processes them; bursts larger than the backlog are dropped there, before any socket".into(),
                lines: sysctl_lines(&[("net.core.netdev_max_backlog", want)]),
            });
            fix = Some(Fix {
                sysctls: vec![("net.core.netdev_max_backlog".into(), want.to_string())],
                ..Default::default()
            });
            (
                "the softnet backlog (net.core.netdev_max_backlog)".to_string(),
                format!("Packets die in the per-CPU softnet backlog before reaching any socket ({} dropped).", f.softnet_drops + f.reply_softnet_drops),
            )
        }
        Case::NicDrops => {
            evidence.push(ev(
                format!("{} drops counted by the network interfaces", f.nic_drops),
                "/proc/net/dev rx/tx drop, delta",
            ));
            recs.push(Recommendation {
                what: "check the NIC's ring buffers and interrupt distribution".into(),
                why: "the interface dropped before the kernel's stack saw the packets".into(),
                lines: vec![
                    "ethtool -g IFACE; ethtool -G IFACE rx 4096".into(),
                    "ethtool -S IFACE | grep -i drop".into(),
                ],
            });
            (
                "the NIC".to_string(),
                format!(
                    "Packets die at the network interface ({} drops).",
                    f.nic_drops
                ),
            )
        }
        Case::ReplySendFailed => {
            evidence.push(ev(
                format!("the server failed to send {} replies", f.reply_failed),
                "server's sendto/sendmmsg errors",
            ));
            (
                "the server's reply sends".to_string(),
                format!("The server could not send {} replies.", f.reply_failed),
            )
        }
        Case::NotAnswered => {
            evidence.push(ev(
                format!(
                    "the server read {} datagrams it never answered ({:.1} % of those it read)",
                    f.not_answered,
                    pct(f.not_answered, f.delivered)
                ),
                "ledger reply path: read minus replies attempted",
            ));
            recs.push(Recommendation {
                what: "check what the application does with requests it does not answer".into(),
                why: "the kernel delivered them: malformed or unexpected requests, rate limiting or an application-level queue limit drop them inside the server".into(),
                lines: vec![],
            });
            (
                "the application (read, never answered)".to_string(),
                format!(
                    "The server read {} datagrams and did not answer them.",
                    f.not_answered
                ),
            )
        }
        Case::Unexplained => {
            let unknown = f.unattributed.is_none() || (f.replies && f.reply_unattributed.is_none());
            evidence.push(ev(
                if unknown {
                    format!(
                        "the server's side was not observable (its socket was not found): {} of the window unanswered with no counter to say where",
                        f.window_loss_pct.map_or("loss".to_string(), |l| format!("{l:.2} %"))
                    )
                } else {
                    format!(
                        "{} datagrams on the request path and {} on the reply path lost where no counter saw them",
                        f.unattributed.unwrap_or(0),
                        f.reply_unattributed.unwrap_or(0)
                    )
                },
                "ledger: attempted minus every counted layer",
            ));
            if unknown {
                recs.push(Recommendation {
                    what: "run diagnose where the server's socket can be seen".into(),
                    why: "without the server's socket counters the loss cannot be placed".into(),
                    lines: vec!["tpslab diagnose udp HOST:PORT --pid PID_OF_THE_SERVER".into()],
                });
            }
            (
                "unknown (no counter explains the loss)".to_string(),
                "Datagrams were lost where no kernel counter saw them.".to_string(),
            )
        }
    };
    // Seen drops in other layers are always reported.
    if case != Case::NicDrops && f.nic_drops > 0 {
        evidence.push(ev(
            format!("also: {} NIC drops", f.nic_drops),
            "/proc/net/dev",
        ));
    }
    if case != Case::SoftnetBacklog && f.softnet_drops + f.reply_softnet_drops > 0 {
        evidence.push(ev(
            format!(
                "also: {} softnet backlog drops",
                f.softnet_drops + f.reply_softnet_drops
            ),
            "/proc/net/softnet_stat",
        ));
    }
    let involved = matches!(case, Case::SocketBufferBursts | Case::AppTooSlow);
    let mut notes = if involved {
        buffer_notes(f, probe)
    } else {
        vec![]
    };
    // S2's riddle is about the reference setup: background for a foreign server.
    let explain_notes = if f.ours {
        vec![]
    } else {
        let (riddle, rest): (Vec<String>, Vec<String>) = notes
            .into_iter()
            .partition(|n| n.starts_with("S2's riddle"));
        notes = rest;
        riddle
    };
    Diagnosis {
        case,
        layer,
        headline,
        evidence,
        recommendations: recs,
        buffer,
        buffer_notes: notes,
        fix,
        explain_notes,
    }
}

#[cfg(test)]
mod tests;
