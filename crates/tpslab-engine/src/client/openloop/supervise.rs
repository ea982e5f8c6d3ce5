//! The open loop's supervision: how many loop threads, and the thread that starts them,
//! samples the per-interval stream, and ends the run at the schedule's end (or its cap,
//! or the stop) and the grace after it.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tpslab_net::mono_ns;
use tpslab_proc::pid::SchedStat;
use tpslab_record::load_http::LoopCpu;

use super::{OpenLocal, Schedule, MAX_GRACE_NS};
use crate::EngineError;

/// The loop threads for `c` connections (`load_threads`; 0: one per CPU; at most one per
/// connection), once this process may open them (RLIMIT_NOFILE, raised to its hard limit)
/// and this namespace has local ports for them. Errors: one line each.
pub(crate) fn loops_for(c: usize, load_threads: usize) -> Result<usize, EngineError> {
    let limit = tpslab_net::raise_nofile();
    if (c as u64) + 64 > limit {
        return Err(EngineError::Other(format!(
            "{c} connections need {} file descriptors; the limit (RLIMIT_NOFILE, ulimit -n) is {limit}: raise it or use fewer connections",
            c + 64
        )));
    }
    crate::host::env::check_ports(c)?;
    Ok(match load_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, c))
}

/// The counts of an open loop on `schedule`: `run_loop(ids)` on each of `loops` threads,
/// `connections` shared among them (connection c on thread c % loops); runs until the
/// schedule's end and the grace after it (or the stop, or an abort). Errors: a loop thread
/// that cannot start.
pub(crate) fn run_schedule(
    sched: &Schedule,
    connections: usize,
    loops: usize,
    run_loop: &(dyn Fn(Vec<usize>) + Sync),
) -> Result<OpenLocal, EngineError> {
    let mut send_end = sched.end;
    std::thread::scope(|s| -> Result<(), EngineError> {
        for t in 0..loops {
            let ids: Vec<usize> = (t..connections).step_by(loops).collect();
            std::thread::Builder::new()
                .name(format!("load-users-{t}"))
                .spawn_scoped(s, move || {
                    // Intended times kept to the microsecond: no 50 us timer slack.
                    tpslab_net::sched::set_timer_slack_ns(1);
                    let (t0, s0) = (mono_ns(), thread_schedstat());
                    run_loop(ids);
                    sched.loop_time(t0, s0, thread_schedstat());
                })
                .map_err(|e| {
                    sched.done.store(true, Relaxed);
                    EngineError::Other(format!("starting a load thread: {e}"))
                })?;
        }
        // Until the end (or the stop), then the grace while replies are outstanding.
        let grace_end = sched.end + sched.timeout_ns.min(MAX_GRACE_NS);
        loop {
            let now = mono_ns();
            let stopped = sched.stop.load(Relaxed);
            // A closed loop's cap reached: no request starts any more.
            let capped = sched.exhausted();
            if stopped || capped {
                send_end = send_end.min(now);
            }
            let ended = now >= sched.end || stopped || capped;
            if sched.done.load(Relaxed) || (ended && sched.all_settled()) || now >= grace_end {
                break;
            }
            let mut until = if ended { grace_end } else { sched.end };
            if let Some(l) = &sched.live {
                if now >= l.next_at() {
                    l.sample(now, &sched.clock(send_end));
                }
                until = until.min(l.next_at());
            }
            let nap = until.saturating_sub(now).clamp(100_000, 10_000_000);
            std::thread::sleep(Duration::from_nanos(nap));
        }
        sched.done.store(true, Relaxed);
        Ok(())
    })?;
    // The last interval, short, with every loop's last counts (each flushed as it ended).
    if let Some(l) = &sched.live {
        let now = mono_ns();
        if now > sched.start {
            l.sample(now, &sched.clock(send_end.min(now)));
        }
    }
    let total = sched.total.lock().unwrap_or_else(|e| e.into_inner()).take();
    let mut total = total.unwrap_or_else(OpenLocal::new);
    total.series = sched.live.as_ref().map(|l| l.take_series());
    let [cpu, runq, wall, read] = sched.loop_ns.each_ref().map(|a| a.load(Relaxed));
    total.loop_cpu = (read == loops as u64).then(|| LoopCpu {
        threads: loops as u32,
        cpu_s: cpu as f64 / 1e9,
        runq_s: runq as f64 / 1e9,
        wall_s: wall as f64 / 1e9,
    });
    Ok(total)
}

/// The calling thread's schedstat (time on a CPU and waiting for one, ns), None when
/// unreadable (a kernel without CONFIG_SCHED_INFO).
fn thread_schedstat() -> Option<SchedStat> {
    let f = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
    tpslab_proc::pid::parse_schedstat(std::io::BufReader::new(f), "schedstat").ok()
}

impl Schedule<'_> {
    /// A loop thread's times between its schedstat `s0` at its start (`t0`, ns) and `s1`
    /// at its return, added to the run's; its wall time is from its own start, as its
    /// CPU times are (connects and handshakes before the schedule's start included in
    /// both: a share of it can never pass 100 %).
    fn loop_time(&self, t0: u64, s0: Option<SchedStat>, s1: Option<SchedStat>) {
        let (Some(a), Some(b)) = (s0, s1) else {
            return;
        };
        let l = &self.loop_ns;
        l[0].fetch_add(b.run_ns.saturating_sub(a.run_ns), Relaxed);
        l[1].fetch_add(b.wait_ns.saturating_sub(a.wait_ns), Relaxed);
        l[2].fetch_add(mono_ns().saturating_sub(t0), Relaxed);
        l[3].fetch_add(1, Relaxed);
    }
}
