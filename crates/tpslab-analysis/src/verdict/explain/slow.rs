//! [`tpslab_record::verdict::Case::AppTooSlow`]: how many readers drain the rate, and in which
//! runtime to add them.

use super::*;

/// The mean rate a server must drain with more readers, times this: 30 % to spare, so
/// the queue empties after a stall.
pub(in crate::verdict) const HEADROOM: f64 = 1.3;

/// How many readers (threads or processes) drain the mean rate at the rate one of them
/// drained, and whether the host's CPUs can run them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::verdict) struct ThreadCount {
    /// Datagrams per second one reader drained: the server's drain while datagrams
    /// waited (else its reads per CPU-second) over the readers it had.
    pub(in crate::verdict) per_reader: f64,
    /// The rate to reach: the mean offered rate x [`HEADROOM`], datagrams per second.
    pub(in crate::verdict) goal: f64,
    /// Readers that reach it at `per_reader` each.
    pub(in crate::verdict) needed: usize,
    /// CPUs one reader kept busy (running or runnable) while it drained; 1 when not
    /// resolved.
    pub(in crate::verdict) cpu_each: f64,
    /// CPUs of the host.
    pub(in crate::verdict) cpus: usize,
}

impl ThreadCount {
    /// From the facts and the server's drain `cap` (datagrams per second, all readers).
    pub(in crate::verdict) fn new(f: &Facts, cap: f64) -> ThreadCount {
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
    pub(in crate::verdict) fn cpus_needed(&self) -> f64 {
        self.needed as f64 * self.cpu_each
    }

    /// The host's CPUs can run the needed readers.
    pub(in crate::verdict) fn fits(&self) -> bool {
        self.cpus_needed() <= self.cpus as f64 + 1e-9
    }
}

/// [`tpslab_record::verdict::Case::AppTooSlow`]: its evidence, recommendations and fix;
/// returns (layer, headline).
pub(in crate::verdict) fn app_too_slow(f: &Facts, d: &mut Draft) -> (String, String) {
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
        d.recs.push(wait_rec(f, cap));
    }
    let threads = threads_rec(f, measured, cap, d);
    if !waits {
        tuning_recs(f, d);
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

/// The wait in the per-message path to remove or overlap (the server mostly asleep while
/// datagrams queue), its time per message from the drain `cap` (datagrams per second).
fn wait_rec(f: &Facts, cap: f64) -> Recommendation {
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
    Recommendation {
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
            }
}

/// How many readers drain the mean rate with headroom at the rate one drained (`measured`,
/// all readers, datagrams per second; `cap` at least 1): a recommendation to measure it
/// first, to cut the work when the host's CPUs cannot run them, or the readers to add.
/// Returns the thread count for tpslab's own server's fix.
fn threads_rec(f: &Facts, measured: Option<f64>, cap: f64, d: &mut Draft) -> Option<usize> {
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
    threads
}

/// Batched reads, pinning and the scheduler, for a server that does not wait per message.
fn tuning_recs(f: &Facts, d: &mut Draft) {
    let (_, reader) = readers(f);
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
                    "# java, python, node: their standard libraries have no batch receive".into(),
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
