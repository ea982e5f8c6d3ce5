//! The facts the verdict rules look at, extracted from a run record: each from a named
//! counter or series (see the field docs), and the server's drain while datagrams waited.

use tpslab_plan::udp::MatchMode;
use tpslab_record::buffer::TruesizeProbe;
use tpslab_record::verdict::Facts;
use tpslab_record::RunRecord;

/// The largest blocking wait of `w` other than for the network, when 15 % of the time or
/// more: what it waited on (with the system call) and its share, percent.
fn blocked_on(w: &tpslab_record::waits::ThreadWaits) -> Option<(String, f64)> {
    use tpslab_record::waits::WaitClass::*;
    let p = &w.process;
    [Lock, Sleep, Disk, File, Child]
        .into_iter()
        .filter_map(|c| Some((c, p.share_pct(c)?)))
        .filter(|&(_, share)| share >= 15.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, share)| {
            let call =
                crate::waits::top_syscall(p, c).map_or(String::new(), |s| format!(" (in {s})"));
            let on = match c {
                Lock => "a lock",
                Sleep => "a sleep",
                Disk => "disk I/O",
                File => "a file or pipe",
                _ => "a child process",
            };
            (format!("{on}{call}"), share)
        })
}

/// The target's SO_REUSEPORT group socket by socket: the observer's drops and queue of
/// each, with tpslab's own server's reads (thread `i` reads socket `i`) and granted
/// SO_RCVBUF, or a foreign server's worker reads (the exact counts of the threads of the
/// process holding that socket alone, or of one process's threads seen reading it) and
/// those threads' sampled waits; empty with one socket.
fn group(
    o: &tpslab_record::ObserverReport,
    server: Option<&tpslab_record::ServerReport>,
) -> Vec<tpslab_record::verdict::GroupSocket> {
    // Processes whose threads read several sockets of the group: a reader there is a
    // thread, named so.
    let mut sockets_of = std::collections::BTreeMap::<u32, usize>::new();
    for t in &o.target_sockets {
        let mut pids: Vec<u32> = t.readers.iter().map(|r| r.pid).collect();
        pids.dedup();
        for p in pids {
            *sockets_of.entry(p).or_default() += 1;
        }
    }
    let threaded = |t: &tpslab_record::TargetSocket| {
        !t.readers.is_empty() && t.readers.iter().all(|r| sockets_of[&r.pid] > 1)
    };
    o.target_sockets
        .iter()
        .map(|t| {
            let at = server.and_then(|s| s.socket_inodes.iter().position(|&i| i == t.inode));
            let foreign = (!t.readers.is_empty()).then(|| t.readers.iter().map(|r| r.reads).sum());
            tpslab_record::verdict::GroupSocket {
                reads: at
                    .and_then(|k| server?.received_per_thread.get(k).copied())
                    .or(foreign),
                drops: t.drops,
                rx_queue_max_bytes: t.rx_queue_max_bytes,
                rcvbuf_bytes: t
                    .rcvbuf_bytes
                    .or(at.and(server.map(|s| s.rcvbuf_granted_bytes))),
                inode: t.inode,
                reader: reader(t, o.thread_waits.as_ref(), threaded(t)),
            }
        })
        .collect()
}

/// A foreign socket's reader: its reading threads' processes and their samples merged
/// (None without reading threads); `threaded`: the threads of a process that reads
/// other sockets of the group too, named by thread and socket.
fn reader(
    t: &tpslab_record::TargetSocket,
    waits: Option<&tpslab_record::waits::ThreadWaits>,
    threaded: bool,
) -> Option<tpslab_record::verdict::GroupReader> {
    let first = t.readers.first()?;
    let mut pids: Vec<u32> = t.readers.iter().map(|r| r.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let threads: Vec<&tpslab_record::waits::ThreadWait> = waits
        .map(|w| {
            w.threads
                .iter()
                .filter(|th| t.readers.iter().any(|r| r.tid == th.tid))
                .collect()
        })
        .unwrap_or_default();
    let states = (!threads.is_empty()).then(|| {
        let mut st = tpslab_record::waits::ThreadStates::default();
        for th in &threads {
            st.merge(&th.states);
        }
        st
    });
    Some(tpslab_record::verdict::GroupReader {
        pids,
        comm: threads
            .first()
            .map_or_else(|| format!("pid {}", first.pid), |th| th.comm.clone()),
        states,
        tids: if threaded {
            t.readers.iter().map(|r| r.tid).collect()
        } else {
            vec![]
        },
        inode: if threaded { t.inode } else { 0 },
    })
}

/// Extracts the facts from a run record and an optional truesize probe.
pub fn facts_of(rec: &RunRecord, probe: Option<&TruesizeProbe>) -> Facts {
    let mut f = Facts {
        gen_valid: true,
        ..Default::default()
    };
    let sysctl = |k: &str| {
        rec.environment
            .sysctls
            .get(k)
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    f.rmem_max = sysctl("net.core.rmem_max");
    f.rmem_default = sysctl("net.core.rmem_default");
    f.netdev_max_backlog = sysctl("net.core.netdev_max_backlog");
    f.cpus = rec.environment.cpus.max(1);
    f.truesize_bytes = probe.map(|p| p.truesize_bytes()).filter(|&t| t > 0);
    if let Some(g) = &rec.generator {
        generator_facts(&mut f, g);
    }
    if let Some(l) = &rec.ledger {
        ledger_facts(&mut f, l);
    }
    f.frames = rec.generator.as_ref().and_then(|g| g.frames.clone());
    f.sends_refused_by = sends_refused_by(rec, f.reply_failed);
    if let Some(s) = &rec.server {
        f.ours = true;
        // rx_queue is summed over the server's sockets: compare with their summed limit.
        f.limit_bytes = Some(s.rcvbuf_granted_bytes * s.threads.max(1) as u64);
        f.threads = s.threads;
        f.batch = s.batch;
        f.steer = s.reuseport_steer;
    }
    if let Some(t) = &rec.target {
        f.runtime = Some(t.runtime);
        f.exact_server = t.exact_counts;
        f.pid = Some(t.pid);
        f.pid_single_thread = t.threads == 1 && t.others.is_empty();
    }
    f.reads_unknown = reads_unknown(rec);
    if let Some(o) = &rec.observer {
        observer_facts(&mut f, o, rec);
    }
    f
}

/// The generator's part of the facts: its validity, rate, bursts, size and target.
fn generator_facts(f: &mut Facts, g: &tpslab_record::GeneratorReport) {
    f.gen_valid = g.valid;
    f.gen_reasons = g.invalid_reasons.clone();
    f.window_loss_pct = g.window_loss_pct;
    f.replies = g.match_mode != MatchMode::None;
    f.replies_read = g.replies_read;
    f.offered_pps = g.rate_pps;
    f.burst = g.burst;
    f.burst_interval_s = g.burst_interval_ns as f64 / 1e9;
    f.size_bytes = g.size_bytes as u64;
    f.target = g.target.clone();
    f.port = g
        .target
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
}

/// The ledger's part of the facts: each row's count on the request path and the reply
/// path, the kernel's drop reasons of both, most first.
fn ledger_facts(f: &mut Facts, l: &tpslab_record::ledger::Ledger) {
    let r = &l.request;
    f.attempted = r.attempted;
    f.delivered = r.count("delivered");
    f.socket_drops = r.count("socket_drops");
    f.softnet_drops = r.count("softnet_drops");
    f.nic_drops = r.count("nic_drops");
    f.no_ports = r.count("no_ports");
    f.send_failed = r.count("send_failed");
    f.unattributed = r.unattributed;
    f.lost_total = r.lost();
    f.inconsistent = r.inconsistent.clone();
    let mut kernel: Vec<(String, u64, u64)> = vec![];
    let paths = [Some(r), l.reply.as_ref()];
    for (i, p) in paths.iter().enumerate() {
        for row in p.iter().flat_map(|p| &p.rows) {
            let Some(reason) = row.layer.strip_prefix("kernel:") else {
                continue;
            };
            let at = match kernel.iter().position(|k| k.0 == reason) {
                Some(at) => at,
                None => {
                    kernel.push((reason.to_string(), 0, 0));
                    kernel.len() - 1
                }
            };
            if i == 0 {
                kernel[at].1 += row.count;
            } else {
                kernel[at].2 += row.count;
            }
        }
    }
    kernel.sort_by(|a, b| (b.1 + b.2).cmp(&(a.1 + a.2)).then(a.0.cmp(&b.0)));
    f.kernel_drops = kernel;
    if let Some(p) = &l.reply {
        f.reply_attempted = p.attempted;
        f.reply_failed = p.count("send_failed");
        f.not_answered = p.count("not_answered");
        f.reply_unattributed = p.unattributed;
        f.reply_softnet_drops = p.count("softnet_drops");
        f.nic_drops += p.count("nic_drops");
        f.lost_total += p.lost();
        if f.inconsistent.is_none() {
            f.inconsistent = p.inconsistent.clone();
        }
    }
}

/// The observer's part of the facts: the server's sockets, group, waits, queue over
/// time, drops' peak, CPU and drain.
fn observer_facts(f: &mut Facts, o: &tpslab_record::ObserverReport, rec: &RunRecord) {
    f.reader_threads = o.target_reader_threads;
    f.server_sockets = o
        .deltas
        .get("server_sockets_found")
        .map_or(0, |&n| n as usize);
    f.group = group(o, rec.server.as_ref());
    if !f.group.is_empty() {
        // What a group's balance depends on (asked only of a group).
        f.flows = rec
            .generator
            .as_ref()
            .map(|g| g.socket_inodes.len())
            .filter(|&n| n > 0);
    }
    if let Some(w) = &o.thread_waits {
        // Threads parked in one wait the whole run with no CPU time (a JVM's
        // helpers in a futex), and a runtime's helpers that ran (its compiler,
        // its collector, redis's bio threads), say nothing of where requests wait.
        let (w, left) = crate::waits::without_idle(w);
        f.waits_headline = crate::waits::headline(&w).map(|h| format!("{h}{}", left.words()));
        f.blocked_on = blocked_on(&w);
    }
    if !o.target_rcvbuf_bytes.is_empty() {
        f.sk_rcvbufs = o.target_rcvbuf_bytes.clone();
        // rx_queue is summed over the sockets: so is the limit; not from part of
        // a SO_REUSEPORT group (a record from before the observer's UDP dump
        // holds one member's limit): a queue summed over four sockets against one
        // socket's limit would read as fuller than full.
        if !f.ours && f.group.len() <= f.sk_rcvbufs.len() {
            f.limit_bytes = Some(f.sk_rcvbufs.iter().sum());
        }
    }
    if let Some(q) = o.series.values.get("server_rx_queue_bytes") {
        // The summary's maximum covers every sample, also ones a long run thinned.
        let max = q.iter().cloned().fold(0.0, f64::max).max(
            o.summaries
                .get("server_rx_queue_bytes")
                .map_or(0.0, |s| s.max),
        );
        f.rxq_max_bytes = max;
        f.rxq_mean_bytes = q.iter().sum::<f64>() / q.len().max(1) as f64;
        let limit = f.limit_bytes.map(|l| l as f64).unwrap_or(max);
        let full_at = 0.75 * limit;
        if limit > 0.0 && !q.is_empty() {
            let n = q.len() as f64;
            f.rxq_share_full = q.iter().filter(|&&x| x > 0.0 && x >= full_at).count() as f64 / n;
            f.rxq_share_low = q.iter().filter(|&&x| x < 0.1 * limit).count() as f64 / n;
        }
    }
    if let Some(d) = o.series.values.get("server_drops_per_s") {
        // Rates start at the second sample: drops[i] happened over (t[i], t[i+1]].
        let t: Vec<f64> = o.series.t_ms.iter().map(|x| x / 1e3).collect();
        let counts: Vec<f64> = d
            .iter()
            .enumerate()
            .map(|(i, r)| r * (t.get(i + 1).unwrap_or(&0.0) - t.get(i).unwrap_or(&0.0)))
            .collect();
        let window = if f.burst > 1 { f.burst_interval_s } else { 0.1 };
        (f.peak_drops_window, f.peak_drops_window_uncapped) =
            crate::buffer::peak_burst_drops(&t, &counts, window, f.burst);
    }
    if let Some(c) = o.summaries.get("target_cpu_pct") {
        f.server_cpu_mean_pct = c.mean;
    }
    let run_ns = o.deltas.get("target_run_ns").copied().unwrap_or(0);
    let dr = drain(o);
    (f.drain_pps, f.backlog_cpu_pct, f.backlog_s) = (dr.pps, dr.cpu_pct, dr.secs);
    f.backlog_runq_pct = dr.runq_pct;
    if run_ns > 0 && f.delivered > 0 {
        let per_cpu = f.delivered as f64 / (run_ns as f64 / 1e9);
        f.cpu_capacity_pps = Some(per_cpu * usable_threads(f) as f64);
    }
    f.capacity_pps = f.drain_pps.or(f.cpu_capacity_pps);
}

/// The firewall drop reason seen (host-wide) at least as often as the server's reply
/// sends failed, when they failed and the ledger did not charge it to a row of its own:
/// (reason, drops).
fn sends_refused_by(rec: &RunRecord, reply_failed: u64) -> Option<(String, u64)> {
    use crate::drop_reason::{classify, ReasonClass};
    if reply_failed == 0 {
        return None;
    }
    rec.drop_reasons
        .as_ref()?
        .by_reason
        .iter()
        .filter(|(r, n)| classify(r) == ReasonClass::Firewall && *n >= reply_failed)
        .max_by_key(|(_, n)| *n)
        .cloned()
}

/// What the server did while datagrams waited in its queue (see [`drain`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Drain {
    /// Datagrams read per second; None when the queue held datagrams under 50 ms.
    pub pps: Option<f64>,
    /// Its threads' CPU, % of one CPU (None: not resolved, see [`drain`]).
    pub cpu_pct: Option<f64>,
    /// Its threads' run-queue wait (runnable, no CPU), % of one CPU (None: not resolved).
    pub runq_pct: Option<f64>,
    /// Seconds the queue held datagrams.
    pub secs: f64,
}

/// Reads per second while datagrams waited in the server's queue, the server's CPU and
/// run-queue wait over those intervals, and their length: from the per-interval
/// `server_reads_per_s`, `server_rx_queue_bytes` (both ends of the interval > 0),
/// `target_cpu_pct` and `target_runq_wait_pct` series. No rate when the queue held
/// datagrams for less than 50 ms in all.
pub fn drain(o: &tpslab_record::ObserverReport) -> Drain {
    let (Some(reads), Some(q)) = (
        o.series.values.get("server_reads_per_s"),
        o.series.values.get("server_rx_queue_bytes"),
    ) else {
        return Drain::default();
    };
    let cpu = o.series.values.get("target_cpu_pct");
    let runq = o.series.values.get("target_runq_wait_pct");
    let t = &o.series.t_ms;
    let (mut n, mut secs, mut cpu_s, mut runq_s) = (0.0, 0.0, 0.0, 0.0);
    for (k, r) in reads.iter().enumerate() {
        let (Some(a), Some(b), Some(ta), Some(tb)) =
            (q.get(k), q.get(k + 1), t.get(k), t.get(k + 1))
        else {
            break;
        };
        if *a > 0.0 && *b > 0.0 {
            let dt = (tb - ta) / 1e3;
            n += r * dt;
            secs += dt;
            cpu_s += cpu.and_then(|c| c.get(k)).copied().unwrap_or(0.0) * dt;
            runq_s += runq.and_then(|c| c.get(k)).copied().unwrap_or(0.0) * dt;
        }
    }
    if secs < 0.05 {
        return Drain {
            secs,
            ..Default::default()
        };
    }
    // CPU time is read every 100 ms: its share during the backlog is resolved only when
    // the backlog covers most of the run (a server that is behind all along).
    let span = (t.last().unwrap_or(&0.0) - t.first().unwrap_or(&0.0)) / 1e3;
    let known = secs >= 0.5 * span;
    Drain {
        pps: Some(n / secs),
        cpu_pct: (known && cpu.is_some()).then(|| cpu_s / secs),
        runq_pct: (known && runq.is_some()).then(|| runq_s / secs),
        secs,
    }
}

/// Threads that can read in parallel: ours as configured, a foreign server's threads that
/// read UDP datagrams (1 when unknown), at most one per CPU.
pub(super) fn usable_threads(f: &Facts) -> usize {
    let n = if f.ours {
        f.threads
    } else {
        f.reader_threads.unwrap_or(1)
    };
    n.clamp(1, f.cpus.max(1))
}

/// Why a foreign server's reads were not counted exactly, from the record: no process
/// found for the target, or its threads not countable (the observer's error names why:
/// not root, a kernel without the tracepoints' fields). None for tpslab's own server and
/// for a foreign server counted on its threads.
fn reads_unknown(rec: &RunRecord) -> Option<String> {
    if rec.server.is_some() || rec.target.as_ref().is_some_and(|t| t.exact_counts) {
        return None;
    }
    let io_error = rec.observer.as_ref().and_then(|o| {
        o.errors
            .iter()
            .find_map(|e| e.strip_prefix("exact per-thread UDP read/send counts unavailable: "))
    });
    let socket_seen = rec
        .observer
        .as_ref()
        .is_some_and(|o| o.deltas.get("server_sockets_found").is_some_and(|&n| n > 0));
    Some(match (&rec.target, io_error) {
        (None, _) if socket_seen => "its socket was seen on this host but not the process holding it (another user's process: run tpslab as root, or pass --pid PID)".into(),
        (None, _) => "no process of the server was found on this host (a remote target, or one in another network namespace: run tpslab as root on the server's host, or pass --pid PID)".into(),
        (Some(t), Some(e)) => format!("PID {}'s threads could not be counted: {e}", t.pid),
        (Some(t), None) => format!(
            "PID {}'s threads were not counted (that needs root and kernel 6.4+)",
            t.pid
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waits::FdKind;
    use tpslab_record::waits::{ThreadStates, ThreadWaits};

    fn waits(samples: &[(char, &str, u64)]) -> ThreadWaits {
        let mut p = ThreadStates::default();
        for &(state, call, n) in samples {
            for _ in 0..n {
                crate::waits::add_sample(&mut p, state, Some("x"), Some(call), FdKind::Socket);
            }
        }
        ThreadWaits {
            pid: 7,
            process: p,
            ..Default::default()
        }
    }

    #[test]
    fn the_largest_wait_that_is_not_the_network_is_named() {
        let w = waits(&[
            ('S', "recvmmsg", 30),
            ('D', "fsync", 55),
            ('S', "futex", 15),
        ]);
        assert_eq!(blocked_on(&w), Some(("disk I/O (in fsync)".into(), 55.0)));
        // Waiting for datagrams is what an idle server does: never named here.
        let w = waits(&[('S', "recvmmsg", 90), ('R', "none", 10)]);
        assert_eq!(blocked_on(&w), None);
        // Below 15 % of the time: not the story.
        let w = waits(&[('S', "recvmmsg", 90), ('S', "futex", 10)]);
        assert_eq!(blocked_on(&w), None);
        assert_eq!(
            blocked_on(&waits(&[('S', "futex", 60), ('R', "none", 40)])),
            Some(("a lock (in futex)".into(), 60.0))
        );
    }

    /// One thread's samples over a run of `window_ms`, `cpu_ms` of it on a CPU.
    fn thread(
        tid: u32,
        samples: &[(char, &str, u64)],
        cpu_ms: u64,
        window_ms: u64,
    ) -> tpslab_record::waits::ThreadWait {
        let mut states = waits(samples).process;
        states.on_cpu_ns = cpu_ms * 1_000_000;
        states.window_ns = window_ms * 1_000_000;
        tpslab_record::waits::ThreadWait {
            tid,
            pid: 0,
            comm: format!("t{tid}"),
            states,
            futex_timed: 0,
        }
    }

    /// S1 against a JVM (after java tests/servers/UdpServer.java: 16 of its 20 threads,
    /// main, GC, G1, VM Thread, Finalizer, ..., sat in a futex the whole run with no CPU
    /// time): the one thread that serves datagrams and 20 helpers parked in a futex.
    /// Counted together they read "waiting on a lock"; the helpers are left out.
    #[test]
    fn idle_threads_parked_in_one_wait_never_weigh_in_the_waits() {
        let mut threads = vec![thread(
            101,
            &[('S', "recvfrom", 240), ('R', "none", 60)],
            600,
            3000,
        )];
        for tid in 102..122 {
            threads.push(thread(tid, &[('S', "futex", 300)], 0, 3000));
        }
        // A second reader that also took a lock now and then (two waits, some CPU): kept.
        threads.push(thread(
            122,
            &[('S', "futex", 10), ('S', "recvfrom", 290)],
            40,
            3000,
        ));
        let mut process = tpslab_record::waits::ThreadStates::default();
        for t in &threads {
            process.merge(&t.states);
        }
        let w = ThreadWaits {
            pid: 9,
            process,
            threads,
            ..Default::default()
        };
        // All threads together: a lock.
        assert_eq!(
            blocked_on(&w).map(|b| b.0),
            Some("a lock (in futex)".into())
        );
        let rec = RunRecord {
            observer: Some(tpslab_record::ObserverReport {
                thread_waits: Some(w.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let f = crate::verdict::facts_of(&rec, None);
        // The working threads: waiting for datagrams most of the run; no lock named.
        assert_eq!(f.blocked_on, None);
        let h = f.waits_headline.expect("a headline");
        assert!(h.starts_with("process 9's threads spent "), "{h}");
        assert!(
            h.ends_with(
                "(20 idle threads left out: parked in one wait the whole run, no CPU time)"
            ),
            "{h}"
        );
        assert!(
            h.contains("of the run waiting for the network (in recvfrom)") && !h.contains("lock"),
            "{h}"
        );
        // Left out, the helpers no longer make a lock of the run.
        let (kept, left) = crate::waits::without_idle(&w);
        assert_eq!((left.idle, kept.threads.len()), (20, 2));
        assert_eq!(kept.process.samples, 600);
        // Every thread idle, or none: the waits as they are.
        let none_idle = ThreadWaits {
            threads: w.threads[..1].to_vec(),
            ..w.clone()
        };
        assert_eq!(crate::waits::without_idle(&none_idle).1.idle, 0);
        let all_idle = ThreadWaits {
            threads: w.threads[1..21].to_vec(),
            ..w.clone()
        };
        assert_eq!(crate::waits::without_idle(&all_idle).1.idle, 0);
        // Without schedstat (no time on a CPU read) no thread is called idle.
        let mut unread = w.threads[1].clone();
        unread.states.window_ns = 0;
        assert!(!crate::waits::is_idle(&unread));
        assert!(crate::waits::is_idle(&w.threads[1]));
    }

    #[test]
    fn a_record_with_thread_waits_gives_the_facts_their_words() {
        let rec = RunRecord {
            observer: Some(tpslab_record::ObserverReport {
                thread_waits: Some(waits(&[('D', "fsync", 62), ('S', "recvfrom", 38)])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let f = crate::verdict::facts_of(&rec, None);
        assert_eq!(f.blocked_on, Some(("disk I/O (in fsync)".into(), 62.0)));
        assert_eq!(
            f.waits_headline.as_deref(),
            Some("process 7's threads spent 62 % of the run waiting on disk I/O (in fsync), 38 % waiting for the network (in recvfrom)")
        );
    }
}
