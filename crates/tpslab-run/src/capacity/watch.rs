//! What a `capacity tcp|http` step's window showed beyond its figures, for its verdict
//! ([`tpslab_analysis::capacity_stream`]).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tpslab_net::sched::SchedPolicy;

/// Watches a TCP or HTTP step's window for its verdict: the TcpExt listen counters and
/// the listen socket on the target's port (sampled every 10 ms) of the server's network
/// namespace (`/proc/PID` with the server's PID; ours when the target is a loopback
/// address; else not read), and with the PID each server thread's schedstat.
pub(super) struct StreamWatch {
    root: Option<std::path::PathBuf>,
    before: Option<tpslab_proc::netstat::TcpCounters>,
    pid: Option<u32>,
    threads: Vec<(u32, tpslab_proc::pid::SchedStat)>,
    /// The process's CPU time at the start (utime+stime, ticks: its threads that ended
    /// too).
    cpu0: Option<u64>,
    t0: Instant,
    done: Arc<AtomicBool>,
    sampler: Option<std::thread::JoinHandle<Option<u64>>>,
}

impl StreamWatch {
    pub(super) fn start(target: std::net::SocketAddr, pid: Option<u32>) -> StreamWatch {
        let root = match pid {
            Some(p) => Some(std::path::PathBuf::from(format!("/proc/{p}"))),
            None if target.ip().is_loopback() => Some("/proc/self".into()),
            None => None,
        };
        let before = root
            .as_deref()
            .and_then(|r| tpslab_proc::live::tcp_counters(r).ok());
        let threads = pid.map_or(vec![], schedstats);
        let cpu0 = pid.and_then(cpu_ticks);
        let done = Arc::new(AtomicBool::new(false));
        let sampler = root.clone().map(|r| {
            let d = done.clone();
            let port = target.port();
            std::thread::spawn(move || {
                // Never ahead of the generator's threads: a run under `chrt -f` would
                // otherwise share its CPU with this reader at the same priority.
                let _ = tpslab_net::sched::set_policy(SchedPolicy::Other);
                // The most connections waiting at the listen socket on the port.
                let mut seen: Option<u64> = None;
                loop {
                    if let Ok(socks) = tpslab_proc::live::tcp(&r) {
                        // 0x0A: TCP_LISTEN; its rx_queue is the connections waiting for
                        // accept.
                        for s in socks
                            .iter()
                            .filter(|s| s.state == 0x0A && s.local.port() == port)
                        {
                            seen = Some(seen.unwrap_or(0).max(s.rx_queue));
                        }
                    }
                    if d.load(Relaxed) {
                        return seen;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        });
        StreamWatch {
            root,
            before,
            pid,
            threads,
            cpu0,
            t0: Instant::now(),
            done,
            sampler,
        }
    }

    /// The facts of the window that ended, with the failures counted in `r`.
    pub(super) fn end(
        mut self,
        r: &tpslab_analysis::capacity_stream::LoadHttpResult,
    ) -> tpslab_analysis::capacity_stream::StreamFacts {
        // The threads' shares are of the time load was sent (first to last request
        // written), not of the watch's: that also holds the loop's lead before its first
        // send, the connects and the grace after the last (a thread busy all the window
        // would show 83 % of a 500 ms one). Without a send, the watch's whole time.
        let sending = r.last_sent_s - r.first_sent_s;
        let secs = if r.sent > 1 && sending > 0.0 {
            sending
        } else {
            self.t0.elapsed().as_secs_f64()
        }
        .max(1e-9);
        self.done.store(true, Relaxed);
        let accept_queue_max = self.sampler.take().and_then(|h| h.join().ok().flatten());
        let after = self
            .root
            .as_deref()
            .and_then(|r| tpslab_proc::live::tcp_counters(r).ok());
        let listen_drops = match (self.before, after) {
            (Some(a), Some(b)) => Some(
                b.listen_overflows
                    .saturating_sub(a.listen_overflows)
                    .max(b.listen_drops.saturating_sub(a.listen_drops)),
            ),
            _ => None,
        };
        let threads = self.pid.map(|pid| {
            let now = schedstats(pid);
            let mut t = tpslab_analysis::capacity_stream::ThreadFacts {
                threads: now.len(),
                cpus: allowed_cpus(pid),
                ..Default::default()
            };
            for (tid, s) in &now {
                // A thread started in the window (a thread per connection, made again each
                // run) counts from its birth: schedstat starts at 0 then.
                let b = self
                    .threads
                    .iter()
                    .find(|(x, _)| x == tid)
                    .map(|(_, b)| *b)
                    .unwrap_or_default();
                let run = s.run_ns.saturating_sub(b.run_ns) as f64 / 1e9 / secs * 100.0;
                let wait = s.wait_ns.saturating_sub(b.wait_ns) as f64 / 1e9 / secs * 100.0;
                t.all_wanted_pct += run + wait;
                if run + wait > t.busiest_run_pct + t.busiest_wait_pct {
                    (t.busiest_run_pct, t.busiest_wait_pct) = (run.min(100.0), wait.min(100.0));
                }
            }
            // The process's CPU time counts threads that ended in the window too (a
            // thread per connection, gone by now): all threads' share is at least it.
            if let (Some(c0), Some(c1)) = (self.cpu0, cpu_ticks(pid)) {
                let all =
                    c1.saturating_sub(c0) as f64 / tpslab_net::clock_ticks_per_s() / secs * 100.0;
                t.all_wanted_pct = t.all_wanted_pct.max(all);
            }
            t
        });
        tpslab_analysis::capacity_stream::StreamFacts {
            listen_drops,
            accept_queue_max,
            threads,
            ..Default::default()
        }
        .with_failures(r)
    }
}

impl Drop for StreamWatch {
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        if let Some(h) = self.sampler.take() {
            let _ = h.join();
        }
    }
}

/// Each thread of `pid` with its schedstat (those readable).
/// `pid`'s CPU time, utime+stime in clock ticks (its ended threads' included), when
/// readable.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let st = tpslab_proc::pid::parse_task_stat(&text, "stat").ok()?;
    Some(st.utime + st.stime)
}

/// The CPUs `pid` may run on (its Cpus_allowed_list), when readable.
fn allowed_cpus(pid: u32) -> Option<usize> {
    let st = tpslab_proc::live::task_status(std::path::Path::new(&format!("/proc/{pid}/status")))
        .ok()?;
    let cpus = tpslab_proc::pid::parse_cpu_list(&st.cpus_allowed_list).ok()?;
    (!cpus.is_empty()).then_some(cpus.len())
}

fn schedstats(pid: u32) -> Vec<(u32, tpslab_proc::pid::SchedStat)> {
    tpslab_proc::live::task_ids(pid)
        .into_iter()
        .filter_map(|tid| {
            tpslab_proc::live::schedstat(std::path::Path::new(&format!("/proc/{pid}/task/{tid}")))
                .ok()
                .map(|s| (tid, s))
        })
        .collect()
}
