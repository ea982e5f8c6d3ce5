//! What each case says: its evidence, its recommendations and the fix a verification run
//! applies. One function per case, called through the rule table in [`super::rules`].

use super::facts::usable_threads;
use super::words::{
    cpu, ev, loss_text, on_wire, pct, raise_lines, rxq, server_starved, server_waits, sysctl_lines,
};
use super::{Evidence, Facts, Fix, Recommendation};
use crate::buffer::{buffer_need, BufferNeed, BACKLOG_MARGIN};
use crate::runtime::{self, Runtime};

/// What the explanations fill in.
#[derive(Default)]
pub(super) struct Draft {
    pub(super) evidence: Vec<Evidence>,
    pub(super) recs: Vec<Recommendation>,
    pub(super) buffer: Option<BufferNeed>,
    pub(super) fix: Option<Fix>,
    /// Sysctls the recommendations set with `sysctl -w`, to persist in one file
    /// ([`super::words::persist_lines`]): (key, value).
    pub(super) persist: Vec<(String, u64)>,
}

/// Why a foreign server's runtime is unknown: the record has no process for it.
const RUNTIME_UNKNOWN: &str =
    "no PID: its process was not found on this host, or it runs on another";

/// The lines of `what` in the runtime of the server in front of us; for a server whose
/// runtime is unknown, those of every common runtime, each named.
fn in_its_runtime(f: &Facts, what: impl Fn(Runtime) -> Vec<String>) -> Vec<String> {
    match f.runtime {
        Some(rt) => what(rt),
        None => runtime::every_runtime(RUNTIME_UNKNOWN, what),
    }
}

/// What reads in parallel in the server: (plural, singular).
fn readers(f: &Facts) -> (&'static str, &'static str) {
    match (f.ours, f.runtime) {
        (true, _) => ("threads", "thread"),
        (false, Some(rt)) => (rt.readers(), rt.reader()),
        (false, None) => ("readers (threads; processes for Python or Node)", "reader"),
    }
}

/// The mean rate a server must drain with more readers, times this: 30 % to spare, so
/// the queue empties after a stall.
pub(super) const HEADROOM: f64 = 1.3;

/// How many readers (threads or processes) drain the mean rate at the rate one of them
/// drained, and whether the host's CPUs can run them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ThreadCount {
    /// Datagrams per second one reader drained: the server's drain while datagrams
    /// waited (else its reads per CPU-second) over the readers it had.
    pub(super) per_reader: f64,
    /// The rate to reach: the mean offered rate x [`HEADROOM`], datagrams per second.
    pub(super) goal: f64,
    /// Readers that reach it at `per_reader` each.
    pub(super) needed: usize,
    /// CPUs one reader kept busy (running or runnable) while it drained; 1 when not
    /// resolved.
    pub(super) cpu_each: f64,
    /// CPUs of the host.
    pub(super) cpus: usize,
}

impl ThreadCount {
    /// From the facts and the server's drain `cap` (datagrams per second, all readers).
    pub(super) fn new(f: &Facts, cap: f64) -> ThreadCount {
        let now = usable_threads(f);
        let per_reader = (cap / now as f64).max(1e-9);
        let goal = f.offered_pps * HEADROOM;
        let cpu_each = match f.backlog_cpu_pct {
            Some(c) => {
                ((c + f.backlog_runq_pct.unwrap_or(0.0)) / 100.0 / now as f64).clamp(0.01, 1.0)
            }
            None => 1.0,
        };
        ThreadCount {
            per_reader,
            goal,
            needed: (goal / per_reader).ceil().max(1.0) as usize,
            cpu_each,
            cpus: f.cpus.max(1),
        }
    }

    /// CPUs the needed readers keep busy.
    pub(super) fn cpus_needed(&self) -> f64 {
        self.needed as f64 * self.cpu_each
    }

    /// The host's CPUs can run the needed readers.
    pub(super) fn fits(&self) -> bool {
        self.cpus_needed() <= self.cpus as f64 + 1e-9
    }
}

/// [`super::Case::GeneratorInvalid`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn generator_invalid(f: &Facts, d: &mut Draft) -> (String, String) {
    for r in &f.gen_reasons {
        d.evidence.push(ev(r.clone(), "generator self-check"));
    }
    d.recs.push(Recommendation {
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

/// [`super::Case::Inconsistent`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn inconsistent(f: &Facts, d: &mut Draft) -> (String, String) {
    let why = f.inconsistent.clone().unwrap_or_default();
    d.evidence.push(ev(
        why.clone(),
        "ledger: attempted minus every counted layer < 0",
    ));
    d.recs.push(Recommendation {
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

/// [`super::Case::NoListener`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn no_listener(f: &Facts, d: &mut Draft) -> (String, String) {
    for r in f.gen_reasons.iter().filter(|_| !f.gen_valid) {
        d.evidence.push(ev(
                format!("{r} (the generator fell behind too; that does not change where the datagrams went)"),
                "generator self-check",
            ));
    }
    d.evidence.push(ev(
        format!(
            "{} datagrams arrived for port {} where no socket listened",
            f.no_ports, f.port
        ),
        "/proc/net/snmp Udp: NoPorts, delta",
    ));
    d.recs.push(Recommendation {
            what: format!("start the server on port {}, or point the load at the right address", f.port),
            why: "the kernel discarded every datagram: nothing was bound to the port (in this network namespace; pass --pid for a server in another one)".into(),
            lines: vec![format!("ss -uapn 'sport = :{}'", f.port)],
        });
    (
        "no listener (Udp: NoPorts)".to_string(),
        format!(
            "Nothing listens on port {}: {:.1} % of the datagrams were discarded on arrival.",
            f.port,
            pct(f.no_ports, on_wire(f))
        ),
    )
}

/// [`super::Case::ListenerGone`]: its evidence and recommendation; no fix. Returns
/// (layer, headline).
pub(super) fn listener_gone(f: &Facts, d: &mut Draft) -> (String, String) {
    d.evidence.push(ev(
        format!(
            "{} datagrams arrived for port {} when no socket listened there, while {} replies came back: the socket was there for part of the run",
            f.no_ports, f.port, f.replies_read
        ),
        "ledger: /proc/net/snmp Udp: NoPorts delta (charged up to the path's gap); the generator's replies",
    ));
    d.recs.push(Recommendation {
        what: format!("find why the server on port {} stopped listening during the run", f.port),
        why: "it closed its socket or exited (a crash, a restart, an OOM kill, a worker recycled): the datagrams after that were discarded on arrival, which no buffer or thread count changes".into(),
        lines: vec![
            format!("ss -uapn 'sport = :{}'", f.port),
            "journalctl -k --since '-10 min' | grep -i -e oom -e killed".into(),
        ],
    });
    (
        "no listener for part of the run (Udp: NoPorts)".to_string(),
        format!(
            "The server stopped listening on port {} during the run: {:.1} % of the datagrams found no socket, after it had answered {}.",
            f.port,
            pct(f.no_ports, on_wire(f)),
            f.replies_read
        ),
    )
}

/// [`super::Case::NoLoss`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn no_loss(f: &Facts, d: &mut Draft) -> (String, String) {
    let att = f.attempted;
    let what = if f.replies {
        "were read by the server and answered"
    } else {
        "were read by the server"
    };
    d.evidence.push(ev(
        format!("all {att} datagrams {what}{}", loss_text(f)),
        "ledger",
    ));
    (
        "none".to_string(),
        format!("No loss: all {att} datagrams {what}. Nothing to fix at this load."),
    )
}

/// [`super::Case::SocketBufferBursts`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn socket_buffer_bursts(f: &Facts, d: &mut Draft) -> (String, String) {
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

/// [`super::Case::SocketBufferUnjudged`]: the drops at the socket buffer, what is known
/// of the server, and how to get its read count; no fix (the two possible causes need
/// opposite ones). Returns (layer, headline).
pub(super) fn socket_buffer_unjudged(f: &Facts, d: &mut Draft) -> (String, String) {
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
                super::words::sh(&words)
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

/// [`super::Case::AppTooSlow`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn app_too_slow(f: &Facts, d: &mut Draft) -> (String, String) {
    let att = f.attempted;
    d.evidence.push(rxq(f));
    d.evidence.push(cpu(f));
    // What the server drains; None when not measured: its reads not counted on its
    // threads (a drain from namespace-wide counters includes every other UDP socket
    // there, so it sizes nothing), or no reads and CPU at all.
    let measured = f
        .capacity_pps
        .filter(|&c| c > 0.0 && f.reads_unknown.is_none());
    let cap = measured.unwrap_or(0.0).max(1.0);
    let waits = server_waits(f);
    d.recs.push(Recommendation {
            what: "more buffer will not help: make the server faster than the mean rate".into(),
            why: match measured {
                Some(_) => format!(
                    "the mean rate ({:.0} pps) exceeds what the server drains ({cap:.0} pps): a bigger queue only fills later and adds latency",
                    f.offered_pps
                ),
                None => format!(
                    "its queue stayed at its limit: it drains less than the mean rate ({:.0} pps; how much less was not measured), so a bigger queue only fills later and adds latency",
                    f.offered_pps
                ),
            },
            lines: vec![],
        });
    if server_starved(f) {
        d.recs.push(Recommendation {
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
        let (what, on) = match &f.blocked_on {
            Some((on, share)) => (
                format!("remove or overlap the wait on {on} in the per-message path ({share:.0} % of the threads' time)"),
                on.clone(),
            ),
            None => (
                "remove or overlap the wait in the per-message path".to_string(),
                "something (a sleep, a lock, a blocking call)".to_string(),
            ),
        };
        d.recs.push(Recommendation {
                what,
                why: format!(
                    "the server is mostly asleep while datagrams queue ({:.0} % of a CPU): each message waits on {on} for about {:.0} us; more threads only help if they overlap that wait",
                    f.backlog_cpu_pct.unwrap_or(0.0),
                    1e6 / cap * (1.0 - (f.backlog_cpu_pct.unwrap_or(0.0) + f.backlog_runq_pct.unwrap_or(0.0)) / 100.0 / usable_threads(f) as f64).max(0.0)
                ),
                lines: vec![
                    "hand each datagram to a pool of workers (or asynchronous calls) and keep one thread reading the socket".into(),
                    "batch the blocking call (one round trip for many messages) where the protocol allows".into(),
                ],
            });
    }
    let (readers, reader) = readers(f);
    let tc = ThreadCount::new(f, cap);
    let now = usable_threads(f);
    // Sockets on the port now: our server's threads, or what the observer followed.
    let sockets = if f.ours { f.threads } else { f.server_sockets };
    let mut threads = None;
    if measured.is_none() {
        d.recs.push(Recommendation {
            what: "measure what one thread drains before sizing the server's threads".into(),
            why: "its reads were not counted on its threads (no PID, not root, or a kernel before 6.4): a thread count needs the rate one of them drains".into(),
            lines: vec!["as root on kernel 6.4+: tpslab diagnose udp HOST:PORT --pid PID_OF_THE_SERVER".into()],
        });
    } else if tc.needed > now && !tc.fits() {
        d.recs.push(Recommendation {
            what: format!("more {readers} alone cannot reach {:.0} pps on this host", f.offered_pps),
            why: format!(
                "one {reader} drained {:.0} datagrams/s{}; {:.0}/s (the mean rate with {:.0} % to spare) takes {} of them, {:.1} CPUs of work, and this host has {}: cut the work per datagram first (about {:.0} us of CPU each now), or spread the load over more hosts",
                tc.per_reader,
                match f.backlog_cpu_pct {
                    None => ", counted as a whole CPU each (its CPU while behind is not resolved)",
                    Some(_) if tc.cpu_each >= 1.0 => ", a whole CPU each (running or waiting to run)",
                    Some(_) => "",
                },
                tc.goal,
                (HEADROOM - 1.0) * 100.0,
                tc.needed,
                tc.cpus_needed(),
                tc.cpus,
                1e6 / tc.per_reader * tc.cpu_each,
            ),
            lines: vec![],
        });
    } else if tc.needed > now {
        let n = tc.needed;
        threads = Some(n);
        // The kernel picks a socket of a group by flow hash.
        let flows = "a load from one source port reaches one socket of the group; tpslab's --flows N sends from N (32 by default)";
        let group = match if f.ours { 0 } else { sockets } {
            0 | 1 => String::new(),
            s if s >= n => format!(
                "; it has {s} sockets on port {} already (a SO_REUSEPORT group) and {now} of its {readers} read during this run ({flows}): keep at least {n} {readers} reading them",
                f.port
            ),
            s => format!(
                "; it has {s} sockets on port {} already (a SO_REUSEPORT group): raise their number, and the {readers} that read them, to {n} with the server's own setting ({flows})",
                f.port
            ),
        };
        d.recs.push(Recommendation {
            what: if sockets > 1 && !f.ours {
                format!("{n} {readers}, one per socket of its SO_REUSEPORT group")
            } else {
                format!("{n} {readers}, each with its own SO_REUSEPORT socket")
            },
            why: format!(
                "one {reader} drained {:.0} datagrams/s: {n} drain {:.0}/s, the mean rate ({:.0} pps) with {:.0} % to spare ({:.1} of this host's {} CPUs); the kernel spreads datagrams over the sockets by flow hash, so reads run in parallel with no shared lock (needs several source ports/flows){group}",
                tc.per_reader,
                tc.per_reader * n as f64,
                f.offered_pps,
                (HEADROOM - 1.0) * 100.0,
                tc.cpus_needed(),
                tc.cpus,
            ),
            lines: if f.ours {
                vec![format!("tpslab serve udp --threads {n}")]
            } else if sockets > 1 {
                // The group exists: its size is the server's own setting, not a new option.
                vec![]
            } else {
                in_its_runtime(f, |rt| runtime::reuseport_lines(rt, n))
            },
        });
    }
    if !waits {
        let batch = if f.ours {
            Some(vec!["tpslab serve udp --batch 64".to_string()])
        } else {
            match f.runtime {
                Some(rt) => runtime::batch_lines(rt),
                None => {
                    let mut l = runtime::every_runtime(RUNTIME_UNKNOWN, |rt| {
                        runtime::batch_lines(rt).unwrap_or_default()
                    });
                    l.push(
                        "# java, python, node: their standard libraries have no batch receive"
                            .into(),
                    );
                    Some(l)
                }
            }
        };
        if let Some(lines) = batch {
            d.recs.push(Recommendation {
                what: "read in batches with recvmmsg (and reply with sendmmsg)".into(),
                why: "one system call per 64 datagrams instead of one each cuts the per-datagram overhead".into(),
                lines,
            });
        }
        d.recs.push(Recommendation {
                what: format!("pin each server {reader} to its own CPU, away from the CPU that runs the NIC's softirq"),
                why: "no migrations and warm caches; the receive softirq and the application stop competing for one core".into(),
                lines: vec![match (f.ours, f.pid) {
                    (true, _) => "tpslab serve udp --cpus 1".into(),
                    // One process, one thread: its PID is the thread to pin.
                    (false, Some(pid)) if f.pid_single_thread => format!("taskset -pc 1 {pid}"),
                    (false, _) => "taskset -pc CPU TID (each reading thread, or each process's PID, on a CPU of its own)".into(),
                }],
            });
        d.recs.push(Recommendation {
                what: "leave the scheduler at SCHED_OTHER unless latency matters more than fairness".into(),
                why: "SCHED_FIFO cuts preemption (S2 saw context switches drop 14x) but a busy FIFO thread can starve everything else on its CPU".into(),
                lines: vec![match f.pid {
                    Some(pid) if !f.ours && f.pid_single_thread => {
                        format!("chrt -f -p 50 {pid}  # only with a dedicated CPU")
                    }
                    _ => "chrt -f -p 50 TID (only with a dedicated CPU)".into(),
                }],
            });
    }
    // A thread count only where it reaches the mean rate at the measured per-thread rate.
    d.fix = f.ours.then(|| Fix {
        threads,
        batch: Some(64),
        ..Default::default()
    });
    (
            "the application (too slow for the mean rate)".to_string(),
            format!(
                "The server is too slow for the mean rate ({:.0} pps offered, it drains {}{}): {:.1} % of datagrams die at its socket buffer; more buffer will not help.",
                f.offered_pps,
                measured.map_or("less: its queue stayed at its limit".to_string(), |c| format!("about {c:.0}")),
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

/// [`super::Case::SoftnetBacklog`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn softnet_backlog(f: &Facts, d: &mut Draft) -> (String, String) {
    let cur = f.netdev_max_backlog.unwrap_or(1000);
    let want = (f.burst.max(1) * 2)
        .max(cur * 2)
        .max(1000)
        .next_power_of_two();
    d.evidence.push(ev(
            format!(
                "{} packets dropped in the per-CPU softnet backlog (net.core.netdev_max_backlog = {cur})",
                f.softnet_drops + f.reply_softnet_drops
            ),
            "/proc/net/softnet_stat column 2, delta, per CPU",
        ));
    d.recs.push(Recommendation {
            what: format!("raise net.core.netdev_max_backlog to {want}"),
            why: "packets wait in the receiving CPU's backlog before the stack processes them; bursts larger than the backlog are dropped there, before any socket".into(),
            lines: sysctl_lines(&[("net.core.netdev_max_backlog", want)]),
        });
    d.persist.push(("net.core.netdev_max_backlog".into(), want));
    d.fix = Some(Fix {
        sysctls: vec![("net.core.netdev_max_backlog".into(), want.to_string())],
        ..Default::default()
    });
    (
        "the softnet backlog (net.core.netdev_max_backlog)".to_string(),
        format!(
            "Packets die in the per-CPU softnet backlog before reaching any socket ({} dropped).",
            f.softnet_drops + f.reply_softnet_drops
        ),
    )
}

/// [`super::Case::NicDrops`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn nic_drops(f: &Facts, d: &mut Draft) -> (String, String) {
    d.evidence.push(ev(
        format!("{} drops counted by the network interfaces", f.nic_drops),
        "/proc/net/dev rx/tx drop, delta",
    ));
    d.recs.push(Recommendation {
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

/// [`super::Case::KernelDrop`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn kernel_drop(f: &Facts, d: &mut Draft) -> (String, String) {
    use crate::drop_reason::{classify, ReasonClass as C};
    let (reason, req, rep) = f.kernel_drops.first().cloned().unwrap_or_default();
    let n = req + rep;
    // Each path's share of what entered it (the reply path starts from what the server read).
    let shares = |req: u64, rep: u64| {
        let mut v = vec![];
        if req > 0 && req <= f.attempted {
            v.push(format!("{:.1} % of requests", pct(req, f.attempted)));
        }
        if rep > 0 && rep <= f.delivered {
            v.push(format!("{:.1} % of replies", pct(rep, f.delivered)));
        }
        v.join(", ")
    };
    for (r, q, p) in &f.kernel_drops {
        d.evidence.push(ev(
            format!(
                "{} datagrams {}: {q} on the request path, {p} on the reply path ({})",
                q + p,
                crate::drop_reason::label(r),
                shares(*q, *p)
            ),
            &format!("skb:kfree_skb reason {r}, charged to this run up to what the counters left unexplained (the tracepoint is host-wide)"),
        ));
    }
    let share = match shares(req, rep) {
        s if s.is_empty() => String::new(),
        s => format!(", {s}"),
    };
    let (layer, headline, what, lines): (&str, String, &str, Vec<String>) = match classify(&reason)
    {
        C::Firewall => (
            "a firewall rule",
            format!("Datagrams were dropped by a firewall rule ({reason}{share})."),
            "find the rule that drops the flow and allow it",
            vec![
                "nft list ruleset | grep -n -B3 drop".into(),
                "iptables-save -c | grep -E 'DROP|REJECT'".into(),
                "sysctl net.ipv4.conf.all.rp_filter".into(),
            ],
        ),
        C::Route => (
            "routing",
            format!("Datagrams were dropped for lack of a route or neighbour ({reason}{share})."),
            "check the route and the neighbour entry for the destination",
            vec!["ip route get DEST".into(), "ip neigh show".into()],
        ),
        C::Checksum => (
            "checksum verification",
            format!("Datagrams were dropped for bad checksums ({reason}{share})."),
            "find what corrupts or mis-offloads the datagrams",
            vec![
                "nstat -az Udp:InCsumErrors".into(),
                "ethtool -k IFACE | grep checksum".into(),
            ],
        ),
        C::Qdisc => (
            "a queueing discipline",
            format!(
                "Datagrams were dropped by a queueing discipline or tc filter ({reason}{share})."
            ),
            "check the qdisc's limit and the tc filters on the path",
            vec![
                "tc -s qdisc show".into(),
                "tc -s filter show dev IFACE ingress".into(),
            ],
        ),
        _ => (
            "the kernel",
            format!(
                "The kernel dropped datagrams for a reason no counter covers ({reason}{share})."
            ),
            "look the reason up in the kernel's include/net/dropreason-core.h",
            vec![],
        ),
    };
    d.recs.push(Recommendation {
        what: what.into(),
        why: format!(
            "{n} datagrams were dropped with reason {reason} on their way; no buffer or thread setting changes that"
        ),
        lines,
    });
    (layer.to_string(), headline)
}

/// [`super::Case::ReplySendFailed`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn reply_send_failed(f: &Facts, d: &mut Draft) -> (String, String) {
    d.evidence.push(ev(
        format!("the server failed to send {} replies", f.reply_failed),
        "server's sendto/sendmmsg errors",
    ));
    (
        "the server's reply sends".to_string(),
        format!("The server could not send {} replies.", f.reply_failed),
    )
}

/// [`super::Case::NotAnswered`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn not_answered(f: &Facts, d: &mut Draft) -> (String, String) {
    d.evidence.push(ev(
        format!(
            "the server read {} datagrams it never answered ({:.1} % of those it read)",
            f.not_answered,
            pct(f.not_answered, f.delivered)
        ),
        "ledger reply path: read minus replies attempted",
    ));
    d.recs.push(Recommendation {
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

/// [`super::Case::Unexplained`]: its evidence, recommendations and fix; returns (layer, headline).
pub(super) fn unexplained(f: &Facts, d: &mut Draft) -> (String, String) {
    let unknown = f.unattributed.is_none() || (f.replies && f.reply_unattributed.is_none());
    d.evidence.push(ev(
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
        d.recs.push(Recommendation {
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
    d.evidence.push(ev(
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
