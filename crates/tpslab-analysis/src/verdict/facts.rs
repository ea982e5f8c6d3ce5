//! The facts the verdict rules look at, extracted from a run record: each from a named
//! counter or series (see the field docs), and the server's drain while datagrams waited.

use crate::buffer::TruesizeProbe;
use crate::record::{MatchMode, RunRecord};
use serde::{Deserialize, Serialize};

/// Numbers the rules look at, each from a named source (see [`Facts::from_record`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// Generator valid (kept its schedule, lost nothing itself).
    pub gen_valid: bool,
    /// Why not.
    pub gen_reasons: Vec<String>,
    /// Request path: datagrams attempted.
    pub attempted: u64,
    /// Request path: read by the server.
    pub delivered: u64,
    /// Request path: socket buffer drops (per-socket `drops`).
    pub socket_drops: u64,
    /// Request path: softnet backlog drops.
    pub softnet_drops: u64,
    /// NIC drops (both paths).
    pub nic_drops: u64,
    /// Udp: NoPorts.
    pub no_ports: u64,
    /// Generator send failures.
    pub send_failed: u64,
    /// Request path unattributed (None: unknown).
    pub unattributed: Option<i64>,
    /// Reply path: replies the server failed to send.
    pub reply_failed: u64,
    /// Reply path: softnet drops.
    pub reply_softnet_drops: u64,
    /// Reply path: read by the server but not answered.
    pub not_answered: u64,
    /// Reply path unattributed (None: unknown or no reply path).
    pub reply_unattributed: Option<i64>,
    /// Replies the generator read (all).
    pub replies_read: u64,
    /// Loss in the measurement window, % (None without replies).
    pub window_loss_pct: Option<f64>,
    /// Whether replies were expected.
    pub replies: bool,
    /// Total datagrams lost on both paths (all layers + unattributed).
    pub lost_total: u64,
    /// Socket buffer limit (granted), bytes; None when unknown (a server not ours).
    pub limit_bytes: Option<u64>,
    /// rx_queue of the server socket(s): max, mean, bytes.
    pub rxq_max_bytes: f64,
    /// Mean rx_queue, bytes.
    pub rxq_mean_bytes: f64,
    /// Share of samples with the queue at 75 % of its limit or more (0..1).
    pub rxq_share_full: f64,
    /// Share of samples with the queue below 10 % of its limit (drained) (0..1).
    pub rxq_share_low: f64,
    /// Server threads' CPU, mean % of one CPU (schedstat).
    pub server_cpu_mean_pct: f64,
    /// Datagrams the server can read per second of CPU time, times its usable threads.
    pub capacity_pps: Option<f64>,
    /// What the server's threads read per second of CPU they used, times the threads that
    /// can run at once: its capacity at full CPU, whatever the scheduler gave it (reads
    /// over the run / on-CPU time from /proc/PID/task/TID/schedstat).
    #[serde(default)]
    pub cpu_capacity_pps: Option<f64>,
    /// Mean offered rate, pps.
    pub offered_pps: f64,
    /// Datagrams per burst.
    pub burst: u64,
    /// Seconds between bursts.
    pub burst_interval_s: f64,
    /// Most datagrams dropped at the server socket within one burst interval (or 100 ms
    /// when paced), from the per-sample drops series; at most the burst
    /// ([`crate::buffer::peak_burst_drops`]).
    pub peak_drops_window: u64,
    /// What the window of samples counted when it was more than the burst (drops of two
    /// bursts), before the cap; None when not capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_drops_window_uncapped: Option<u64>,
    /// Datagram size, bytes.
    pub size_bytes: u64,
    /// Measured truesize per datagram, bytes (probe).
    pub truesize_bytes: Option<u64>,
    /// The server is tpslab's reference server.
    pub ours: bool,
    /// Server threads.
    pub threads: usize,
    /// Server recvmmsg batch.
    pub batch: usize,
    /// CPUs of the host.
    pub cpus: usize,
    /// net.core.rmem_max, bytes.
    pub rmem_max: Option<u64>,
    /// net.core.rmem_default, bytes.
    pub rmem_default: Option<u64>,
    /// net.core.netdev_max_backlog, packets.
    pub netdev_max_backlog: Option<u64>,
    /// Target port.
    pub port: u16,
    /// The load's target as the generator wrote it (`127.0.0.1:9500`, `[::1]:9500`), for
    /// command lines; empty when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// A foreign server's PID (the record's target process), for command lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// That process had one thread when the run started (its PID is the thread that
    /// reads: `taskset`/`chrt` lines can name it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pid_single_thread: bool,
    /// Why the ledger does not balance (None: it does, or its balance is unknown).
    #[serde(default)]
    pub inconsistent: Option<String>,
    /// Datagrams the server read per second while datagrams waited in its queue (the
    /// queue non-empty at both ends of a sampling interval); None when it never
    /// waited long enough (50 ms) or the reads were not counted per interval.
    #[serde(default)]
    pub drain_pps: Option<f64>,
    /// The server threads' CPU, % of one CPU, over those same intervals.
    #[serde(default)]
    pub backlog_cpu_pct: Option<f64>,
    /// The server threads' time runnable but waiting for a CPU (schedstat run-queue
    /// wait), % of one CPU, over those same intervals: other processes took its CPU.
    #[serde(default)]
    pub backlog_runq_pct: Option<f64>,
    /// Seconds during which datagrams waited in the server's queue.
    #[serde(default)]
    pub backlog_s: f64,
    /// A foreign server's runtime (for the line that sets its buffer).
    #[serde(default)]
    pub runtime: Option<crate::runtime::Runtime>,
    /// The server sockets' SO_RCVBUF limits (sk_rcvbuf) from sock_diag, bytes, one per
    /// socket (SO_REUSEPORT servers have several).
    #[serde(default)]
    pub sk_rcvbufs: Vec<u64>,
    /// A foreign server's threads that read UDP datagrams (exact counts only).
    #[serde(default)]
    pub reader_threads: Option<usize>,
    /// A foreign server's reads and replies were counted exactly on its threads.
    #[serde(default)]
    pub exact_server: bool,
    /// Why the server's reads were not counted exactly (a foreign server not found on
    /// this host, its threads not countable as this user or on this kernel); None when
    /// they were (tpslab's own server, or a foreign one counted on its threads). Without
    /// them no verdict says whether the server keeps up with the mean rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads_unknown: Option<String>,
    /// Datagrams the ledger charged to kernel drop reasons no counter covers (rows
    /// `kernel:REASON`): (reason, on the request path, on the reply path), largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_drops: Vec<(String, u64, u64)>,
    /// Where the server's threads spent the run, in one sentence (the observer's thread
    /// samples: [`crate::waits::ThreadWaits::headline`]); None when not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_headline: Option<String>,
    /// The blocking wait, other than for the network (where an idle server waits for
    /// datagrams), that took the largest share of the threads' time, when 15 % or more:
    /// (what it waited on, "disk I/O (in fsync)", share %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_on: Option<(String, f64)>,
    /// Sockets on the target's address and port the observer followed during the run
    /// (observer delta `server_sockets_found`): more than one is a SO_REUSEPORT group (our
    /// server's threads, or a server such as named that opens one per worker); 0 when
    /// none was found.
    #[serde(default)]
    pub server_sockets: usize,
}

/// The largest blocking wait of `w` other than for the network, when 15 % of the time or
/// more: what it waited on (with the system call) and its share, percent.
fn blocked_on(w: &crate::waits::ThreadWaits) -> Option<(String, f64)> {
    use crate::waits::WaitClass::*;
    let p = &w.process;
    [Lock, Sleep, Disk, File, Child]
        .into_iter()
        .filter_map(|c| Some((c, p.share_pct(c)?)))
        .filter(|&(_, share)| share >= 15.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, share)| {
            let call = p
                .top_syscall(c)
                .map_or(String::new(), |s| format!(" (in {s})"));
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

impl Facts {
    /// Extracts the facts from a run record and an optional truesize probe.
    pub fn from_record(rec: &RunRecord, probe: Option<&TruesizeProbe>) -> Facts {
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
        if let Some(l) = &rec.ledger {
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
        if let Some(s) = &rec.server {
            f.ours = true;
            // rx_queue is summed over the server's sockets: compare with their summed limit.
            f.limit_bytes = Some(s.rcvbuf_granted_bytes * s.threads.max(1) as u64);
            f.threads = s.threads;
            f.batch = s.batch;
        }
        if let Some(t) = &rec.target {
            f.runtime = Some(t.runtime);
            f.exact_server = t.exact_counts;
            f.pid = Some(t.pid);
            f.pid_single_thread = t.threads == 1 && t.others.is_empty();
        }
        f.reads_unknown = reads_unknown(rec);
        if let Some(o) = &rec.observer {
            f.reader_threads = o.target_reader_threads;
            f.server_sockets = o
                .deltas
                .get("server_sockets_found")
                .map_or(0, |&n| n as usize);
            if let Some(w) = &o.thread_waits {
                f.waits_headline = w.headline();
                f.blocked_on = blocked_on(w);
            }
            if !o.target_rcvbuf_bytes.is_empty() {
                f.sk_rcvbufs = o.target_rcvbuf_bytes.clone();
                // rx_queue is summed over the sockets: so is the limit.
                if !f.ours {
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
                    f.rxq_share_full =
                        q.iter().filter(|&&x| x > 0.0 && x >= full_at).count() as f64 / n;
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
                f.cpu_capacity_pps = Some(per_cpu * usable_threads(&f) as f64);
            }
            f.capacity_pps = f.drain_pps.or(f.cpu_capacity_pps);
        }
        f
    }
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
pub fn drain(o: &crate::record::ObserverReport) -> Drain {
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
    use crate::waits::{FdKind, ThreadStates, ThreadWaits};

    fn waits(samples: &[(char, &str, u64)]) -> ThreadWaits {
        let mut p = ThreadStates::default();
        for &(state, call, n) in samples {
            for _ in 0..n {
                p.add(state, Some("x"), Some(call), FdKind::Socket);
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

    #[test]
    fn a_record_with_thread_waits_gives_the_facts_their_words() {
        let rec = RunRecord {
            observer: Some(crate::record::ObserverReport {
                thread_waits: Some(waits(&[('D', "fsync", 62), ('S', "recvfrom", 38)])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let f = Facts::from_record(&rec, None);
        assert_eq!(f.blocked_on, Some(("disk I/O (in fsync)".into(), 62.0)));
        assert_eq!(
            f.waits_headline.as_deref(),
            Some("process 7's threads spent 62 % of the run waiting on disk I/O (in fsync), 38 % waiting for the network (in recvfrom)")
        );
    }
}
