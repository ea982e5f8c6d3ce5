//! The open loop's supervision: how many loop threads, and the thread that starts them,
//! samples the per-interval stream, and ends the run at the schedule's end (or its cap,
//! or the stop) and the grace after it.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tpslab_net::mono_ns;

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
    crate::env::check_ports(c)?;
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
                    run_loop(ids)
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
            if sched.done.load(Relaxed)
                || (ended && sched.outstanding.load(Relaxed) <= 0)
                || now >= grace_end
            {
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
    Ok(total.unwrap_or_else(OpenLocal::new))
}
