//! A ramp's verdict: the first of its rules that holds, in order (one thread contended or
//! saturated, even while TPS still grows if that thread had no CPU time left, a lock, disk waits, the CPU saturated, several threads kept off the CPUs by
//! other work, CPU-bound workers, a peer, a concurrency cap), from the signals
//! [`super::analyse`] worked out of the record once.

use super::{disk_waits_grow, futex_share, no_replies, top_state};
use crate::ramp_threads::{ThreadCase, ThreadFacts};
use tpslab_record::ramp::RampRecord;
use tpslab_record::usl::UslFit;

/// What the verdict reads of a ramp.
pub(super) struct Signals<'a> {
    rec: &'a RampRecord,
    /// Requests answered over the whole ramp.
    served: u64,
    /// The USL fit's sigma is 0.5 or more: serial.
    serial: bool,
    /// TPS at the last step within 10 % of TPS at the knee.
    flat: bool,
    knee: Option<usize>,
    /// The knee's users (0 without a knee).
    ku: usize,
    /// The working threads' facts at the last step, and their rule's case.
    threads: Option<ThreadFacts>,
    case: Option<ThreadCase>,
    /// The server waits on a lock: the threads' rule says serialised, or (without
    /// per-thread samples) most samples in a futex at the top, grown by 0.2 since the first.
    lock: bool,
    /// The server's CPU use at the last step, in cores, and the CPUs it may run on.
    busy: Option<f64>,
    cores: f64,
    /// The server used less than half its CPUs at the last step.
    idle_cpu: bool,
    /// "; N idle threads left out ..." or empty.
    idle_words: String,
    disk_waits: Option<(f64, f64, f64, String)>,
    /// The top thread state at the last step and its share of samples.
    top: Option<(String, f64)>,
}

impl<'a> Signals<'a> {
    /// The signals of `rec` judged on `cpus` CPUs, with `served` requests answered, its
    /// knee (an index into its steps) and its USL fit.
    pub(super) fn of(
        rec: &'a RampRecord,
        cpus: usize,
        served: u64,
        knee: Option<usize>,
        fit: Option<&UslFit>,
    ) -> Self {
        let serial = fit.is_some_and(|f| f.sigma >= 0.5);
        let top = rec.steps.last().and_then(top_state);
        // A lock: most server thread samples wait in a futex at the top, and that share
        // grew with the users (idle pool threads parked on condition variables wait in a
        // futex at every step, even with one user).
        // With per-thread samples, the working threads' rules judge instead (idle threads
        // are left out, so a futex wait at every step is a lock's).
        let threads = rec.steps.last().and_then(crate::ramp_threads::facts);
        let case = threads.as_ref().and_then(crate::ramp_threads::judge);
        let lock = match (rec.steps.first(), rec.steps.last(), &threads) {
            (_, _, Some(_)) => case == Some(ThreadCase::Serialised),
            (Some(f), Some(l), None) => {
                futex_share(l) >= 0.5 && futex_share(l) - futex_share(f) >= 0.2
            }
            _ => false,
        };
        let idle_words = threads
            .as_ref()
            .and_then(crate::ramp_threads::idle_words)
            .map_or(String::new(), |w| format!("; {w}"));
        let busy = rec.steps.last().and_then(|s| s.server_cpu_cores);
        let cores = cpus.max(1) as f64;
        let idle_cpu = busy.is_some_and(|b| b < 0.5 * cores);
        // Flat: TPS at the last step within 10 % of TPS at the knee.
        let flat = knee.is_some_and(|k| {
            rec.steps
                .last()
                .is_some_and(|l| l.tps < rec.steps[k].tps * 1.1)
        });
        Signals {
            rec,
            served,
            serial,
            flat,
            knee,
            ku: knee.map_or(0, |k| rec.steps[k].users),
            threads,
            case,
            lock,
            busy,
            cores,
            idle_cpu,
            idle_words,
            disk_waits: disk_waits_grow(rec),
            top,
        }
    }

    /// TPS stopped growing: serial by the fit, or flat beyond the knee.
    fn stopped(&self) -> bool {
        self.serial || self.flat
    }

    /// TPS stopped or bent: stopped, or a knee.
    fn bent(&self) -> bool {
        self.stopped() || self.knee.is_some()
    }

    /// "TPS stops at the knee (N users)" or "TPS bends beyond the knee (N users)".
    fn tps_at_knee(&self) -> String {
        if self.stopped() {
            format!("TPS stops at the knee ({})", users(self.ku))
        } else {
            format!("TPS bends beyond the knee ({})", users(self.ku))
        }
    }
}

/// At a knee, [`Signals::tps_at_knee`]; without one, "TPS still grew G % from A to B
/// users" over the last two steps, and "while the server's CPU per request fell from X to
/// Y us" when both steps have the server's CPU (cores / TPS, in microseconds).
fn still_grew(s: &Signals) -> String {
    let steps = &s.rec.steps;
    if s.bent() || steps.len() < 2 {
        return s.tps_at_knee();
    }
    let (a, b) = (&steps[steps.len() - 2], &steps[steps.len() - 1]);
    let growth = match (a.tps > 0.0, b.tps >= a.tps) {
        (true, true) => format!("still grew {:.0} %", (b.tps / a.tps - 1.0) * 100.0),
        (true, false) => format!("fell {:.0} %", (1.0 - b.tps / a.tps) * 100.0),
        (false, _) => format!("rose from 0 to {:.0}", b.tps),
    };
    let per_request = match (a.server_cpu_cores, b.server_cpu_cores) {
        (Some(ca), Some(cb)) if a.tps > 0.0 && b.tps > 0.0 => {
            let (x, y) = (ca / a.tps * 1e6, cb / b.tps * 1e6);
            let moved = if y < x { "fell" } else { "went" };
            format!(" while the server's CPU per request {moved} from {x:.1} to {y:.1} us")
        }
        _ => String::new(),
    };
    format!(
        "TPS {growth} from {} to {}{per_request}",
        users(a.users),
        users(b.users)
    )
}

/// "1 user", "N users".
fn users(n: usize) -> String {
    format!("{n} user{}", if n == 1 { "" } else { "s" })
}

/// The ramp's "VERDICT: ..." line, before the ledger and the accept queue rank it.
pub(super) fn verdict(s: &Signals) -> String {
    if s.served == 0 {
        return no_replies(s.rec);
    }
    if s.rec.steps.len() < 2 {
        return "VERDICT: one step only: a ramp needs at least two user counts to show how TPS scales"
            .to_string();
    }
    one_thread(s)
        .or_else(|| serialised(s))
        .or_else(|| disk(s))
        .or_else(|| cpu_saturated(s))
        .or_else(|| crowded(s))
        .or_else(|| cpu_bound(s))
        .unwrap_or_else(|| elsewhere(s))
}

/// A busiest thread busy this share of the last step or more has no CPU time left to
/// give: it is the limit even while TPS still grows (by cheaper requests, not more CPU).
const NO_TIME_LEFT: f64 = 0.95;

/// Without a knee, the busiest thread must also have been on a CPU this share of the last
/// step (schedstat, or utime + stime): a thread runnable all the step but waiting for a
/// CPU half of it still has CPU time to gain.
const ON_CPU_LEFT: f64 = 0.9;

/// The server's busiest thread is the limit: runnable but kept off the CPUs (contention),
/// or on a CPU ~100 % (saturated). Without a knee, only a saturated thread busy
/// [`NO_TIME_LEFT`] of the last step and on a CPU [`ON_CPU_LEFT`] of it or more: TPS then
/// grew without its CPU time growing.
fn one_thread(s: &Signals) -> Option<String> {
    let (comm, tid, busy, cpu, runq) = s.threads.as_ref().and_then(|t| t.busiest.as_ref())?;
    let full =
        *busy >= NO_TIME_LEFT && *cpu >= ON_CPU_LEFT && s.case == Some(ThreadCase::Saturated);
    if !s.bent() && !full {
        return None;
    }
    let (tps, idle_words) = (still_grew(s), &s.idle_words);
    let queue = if s.bent() {
        "more users only queue behind it"
    } else {
        "it has no CPU time left to give, so more users will mostly queue behind it"
    };
    match s.case? {
        ThreadCase::Contended => {
            let held = (busy - cpu - runq).max(0.0);
            let steal = if held >= 0.05 {
                format!(
                    ", and {:.0} % runnable on a vCPU the hypervisor held",
                    held * 100.0
                )
            } else {
                String::new()
            };
            Some(format!(
                "VERDICT: CPU contention: one thread runnable ~100 % of the step but mostly waiting for a CPU: {tps} while the server's busiest thread, {comm} (tid {tid}), was running or runnable {:.0} % of the last step yet on a CPU only {:.0} % (waiting for a CPU {:.0} % by schedstat's run-queue delay{steal}){idle_words}. Its own work did not fill a CPU: other work on the CPUs it may run on (the load generator on this host, other processes, a hypervisor) kept it off them, so this ramp measures the host's contention more than the server. Give the server CPUs of its own (taskset, cpusets) or send the load from another host, then ramp again",
                busy * 100.0,
                cpu * 100.0,
                runq * 100.0
            ))
        }
        ThreadCase::Saturated => Some(format!(
            "VERDICT: saturated: one thread at ~100 % of a CPU: {tps} while the server's busiest thread, {comm} (tid {tid}), was running or runnable {:.0} % of the last step (on a CPU {:.0} %, waiting for a CPU {:.0} % by schedstat){idle_words}. Its work runs on that one thread (an event loop): {queue}, and it is not a lock. Make each request cheaper, or spread the work over more threads or processes (shards)",
            busy * 100.0,
            cpu * 100.0,
            runq * 100.0
        )),
        _ => None,
    }
}

/// A lock serialises the server while its CPU idles: by the working threads' futex waits,
/// or (without per-thread samples) by the futex share of all samples.
fn serialised(s: &Signals) -> Option<String> {
    let (ku, idle_words) = (s.ku, &s.idle_words);
    if let (true, true, true, Some(t)) = (s.bent(), s.lock, s.idle_cpu, &s.threads) {
        let tps = if s.stopped() {
            "is flat beyond"
        } else {
            "bends at"
        };
        return Some(format!(
            "VERDICT: serialisation: {} threads waiting on a futex, serialised by a lock in the server process: TPS {tps} the knee ({ku} users) while {} of its {} working threads wait on a lock most of the step ({:.0} % of their samples) and its CPU idles{idle_words}; more users only lengthen the queue. Remove or shorten the serialised section; adding servers or threads will not raise TPS",
            t.futex_threads,
            t.futex_threads,
            t.working.len(),
            t.lock_share * 100.0
        ));
    }
    (s.stopped() && s.lock && s.idle_cpu).then(|| "VERDICT: serialisation: TPS is flat beyond the knee and the server's threads wait on a lock while its CPU idles; more users only lengthen the queue (response time grows linearly with users). Remove or shorten the serialised section; adding servers or threads will not raise TPS".to_string())
}

/// Each request waits longer on disk I/O as users grow.
fn disk(s: &Signals) -> Option<String> {
    let (a, b, share, call) = s.disk_waits.as_ref().filter(|_| s.bent())?;
    let steps = &s.rec.steps;
    let (f, l) = (users(steps[0].users), users(steps[steps.len() - 1].users));
    let tps = s.tps_at_knee();
    Some(format!(
        "VERDICT: waits on disk I/O grow with users: {tps} while each request waits longer on disk I/O ({:.2} ms at {f}, {:.2} ms at {l}{call}, {:.0} % of its response time): requests queue behind synchronous writes (S3's redo log). Group the writes (group commit), make them asynchronous, or use faster storage; more users or threads will not raise TPS much",
        a / 1e6,
        b / 1e6,
        share * 100.0
    ))
}

/// The CPU is the limit: the server's CPUs are 80 % used at the top.
fn cpu_saturated(s: &Signals) -> Option<String> {
    let cores = s.cores;
    (s.stopped() && s.busy.is_some_and(|b| b >= 0.8 * cores)).then(|| format!("VERDICT: saturation of the CPU: the server uses {:.0} % of {cores:.0} CPUs at the top; TPS is capped by CPU, not by a lock", s.busy.unwrap_or(0.0) * 100.0))
}

/// The CPU time the workers get is the limit: all the server's working threads are
/// running or runnable (on a CPU half their busy time or more, else [`crowded`]).
fn cpu_bound(s: &Signals) -> Option<String> {
    let (ku, idle_words) = (s.ku, &s.idle_words);
    let (true, Some((n, procs, cpu, runq, least))) =
        (s.bent(), s.threads.as_ref().and_then(|t| t.all_busy))
    else {
        return None;
    };
    let tps = if s.stopped() {
        "stops at"
    } else {
        "bends beyond"
    };
    let procs = if procs > 1 {
        format!(" in {procs} processes")
    } else {
        String::new()
    };
    Some(format!(
        "VERDICT: CPU-bound workers: TPS {tps} the knee ({ku} users) while all {n} of the server's working threads{procs} were running or runnable {:.0} % of the last step or more, on a CPU {:.0} % and waiting for one {:.0} % on average (schedstat){idle_words}. None spent more than {:.0} % of it waiting on anything else (a lock, a peer, a timer): the CPU time they get is the limit. Much time waiting for a CPU means other work on the CPUs they may run on (the load generator on this host, other processes) takes it: give the server CPUs of its own or send the load from another host; else make each request cheaper or give it more CPUs",
        least * 100.0,
        cpu * 100.0,
        runq * 100.0,
        (1.0 - least) * 100.0
    ))
}

/// A crowd share at or above which the working threads wanted a CPU most of the step.
const CROWD_BUSY: f64 = 0.5;

/// Several working threads running or runnable
/// [`CROWD_BUSY`] of the step on average and on a CPU less than half of that, while the
/// server used under 80 % of its CPUs: other work held the CPUs (a neighbour, the load
/// generator), not a cap of threads that wait (a prefork server's workers beside a CPU
/// hog).
fn crowded(s: &Signals) -> Option<String> {
    let t = s.threads.as_ref()?;
    let (n, procs, busy, cpu, runq) = t.crowd?;
    let below = s.busy.is_some_and(|b| b < 0.8 * s.cores);
    if !(s.bent() && below && busy >= CROWD_BUSY && cpu < 0.5 * busy) {
        return None;
    }
    let procs = if procs > 1 {
        format!(" in {procs} processes")
    } else {
        String::new()
    };
    // Without schedstat the time on a CPU is the threads' utime + stime, and the wait for
    // one is not measured: no figure for it.
    let waited = if t.schedstat {
        format!("waiting for a CPU {:.0} % by schedstat", runq * 100.0)
    } else {
        "on a CPU by their utime + stime; this record has no schedstat to measure their wait for one".to_string()
    };
    Some(format!(
        "VERDICT: CPU contention: {} while the server's {n} working threads{procs} were running or runnable {:.0} % of the last step on average but on a CPU only {:.0} % ({waited}), and the server used {:.2} of {:.0} CPUs{}. Other work on the CPUs they may run on (the load generator on this host, other processes) kept them off: this ramp measures the host's contention more than the server. Give the server CPUs of its own (taskset, cpusets) or send the load from another host, then ramp again",
        s.tps_at_knee(),
        busy * 100.0,
        cpu * 100.0,
        s.busy.unwrap_or(0.0),
        s.cores,
        s.idle_words
    ))
}

/// The rest, in order: a lock and a busy CPU, a peer, a concurrency cap, a limit not seen
/// on this host, a bend, scaling.
fn elsewhere(s: &Signals) -> String {
    let (ku, idle_words) = (s.ku, &s.idle_words);
    if s.stopped() && s.lock {
        "VERDICT: TPS is flat and the server's threads wait on a lock more as users grow, while it uses much of its CPU: both contention and CPU may limit it; see the run queue column".to_string()
    } else if let (true, true, Some(ThreadCase::PeerWait), Some(t)) =
        (s.stopped(), s.idle_cpu, s.case, &s.threads)
    {
        format!(
            "VERDICT: waiting for a peer: TPS stops at the knee ({ku} users) while the server's CPU idles and its {} working threads are blocked on sockets {:.0} % of the step{}{idle_words}: each request waits on someone else (a database, a backend, a downstream service). A faster peer, or more connections to it, raise TPS",
            t.working.len(),
            t.peer_share * 100.0,
            t.peer_call.as_ref().map_or(String::new(), |c| format!(" (in {c})"))
        )
    } else if let (true, true, Some((w, share))) = (s.stopped(), s.idle_cpu, &s.top) {
        // Threads mostly in state R were on a CPU here (workers kept off the CPUs by other
        // work are [`crowded`]'s): a cap of busy threads, not of waits.
        let schedstat = s.threads.as_ref().is_some_and(|t| t.schedstat);
        let what = if w == "running" && schedstat {
            format!(
                "its threads are mostly running ({:.0} % of samples): it works on only about {ku} requests at once, each on a thread of its own",
                share * 100.0
            )
        } else if w == "running" {
            // State R without schedstat: on a CPU or waiting for one, untold.
            format!(
                "its threads are mostly in state R ({:.0} % of samples: running or waiting for a CPU, which this record has no schedstat to tell apart): it works on only about {ku} requests at once",
                share * 100.0
            )
        } else {
            format!("its threads wait ({w}): it works on only about {ku} requests at once, each waiting on something (a backend, a peer, a timer)")
        };
        format!(
            "VERDICT: a concurrency cap: TPS stops at the knee ({ku} users) while the server's CPU idles and {what}. More threads, workers or connections (S3's single connection), or a faster backend, raise TPS"
        )
    } else if s.stopped() {
        "VERDICT: TPS stops growing without a lock wait or a busy CPU visible on this host: the limit is elsewhere (a downstream peer, the network, one connection carrying all requests); give --pid to see the server's threads".to_string()
    } else if s.knee.is_some() {
        "VERDICT: throughput bends but keeps rising; see the USL fit for where it peaks".to_string()
    } else {
        "VERDICT: scales with users over the measured range".to_string()
    }
}
