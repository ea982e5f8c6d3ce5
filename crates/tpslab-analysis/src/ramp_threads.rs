//! Which of a server's threads served a ramp step's load, and what they say: each
//! thread's CPU time over the step and its sampled states ([`StepThread`], a record type)
//! split the threads into working ones (they used CPU time, or were seen in more than one
//! state) and idle ones (no CPU time to speak of and parked in one wait the whole step:
//! redis's bio_* helpers, a JVM's GC and compiler threads, a runtime's timers). The
//! verdict and the evidence lines judge the working threads only, by the rules of
//! [`THREAD_RULES`], in priority order: one thread runnable all the step but mostly
//! waiting for a CPU (contended: the host's CPUs are busy with other work), one thread at
//! ~100 % of a CPU (saturated), several threads waiting on a futex without a timeout more
//! than spare pool threads explain (serialised), threads blocked on sockets to another
//! peer (waiting for a peer). A working thread that is a runtime's helper
//! ([`crate::waits::is_helper`]: a JVM's compiler or collector, redis's bio threads, never
//! seen in a network wait) stays a working thread, but its futex waits are not counted
//! in the lock figures. Shares are of the time each thread was sampled over
//! ([`span_ns`]), not of the planned step.

use tpslab_record::ramp::StepResult;
use tpslab_record::waits::{StepThread, ThreadStates, WaitClass};

pub use crate::waits::IDLE_CPU_SHARE;

/// A thread's CPU time in a step, ns: schedstat's time on a CPU when it was read at both
/// edges (exact), else the growth of utime+stime (USER_HZ ticks).
pub fn cpu_ns(t: &StepThread) -> u64 {
    if t.states.on_cpu_ns > 0 {
        t.states.on_cpu_ns
    } else {
        t.cpu_ns
    }
}

/// The time a thread's CPU time and schedstat deltas cover, ns: its sampled span, or
/// `window_ns` (the step's planned window) for a record written before spans; never
/// less than its schedstat time on a CPU plus waiting for one (a thread of a process
/// born during the step, in a record whose span began at its first sample while its
/// schedstat counts from its birth), so no share of it passes 100 %.
pub fn span_ns(t: &StepThread, window_ns: u64) -> u64 {
    let span = if t.span_ns > 0 { t.span_ns } else { window_ns };
    span.max(t.states.on_cpu_ns.saturating_add(t.states.runqueue_ns))
}

/// Idle over a step of `window_ns`: CPU time under [`IDLE_CPU_SHARE`] of the time it
/// was sampled over ([`span_ns`]), never seen running or runnable, and every sample in
/// one wait (one class; in a futex, all with a timeout or all without): parked the
/// whole step. A thread that was never sampled is idle when
/// its CPU time is none to speak of.
pub fn is_idle(t: &StepThread, window_ns: u64) -> bool {
    let s = &t.states;
    let little_cpu = (cpu_ns(t) as f64) < IDLE_CPU_SHARE * span_ns(t, window_ns) as f64;
    // A futex wait with a timeout and one without are two waits (a pool thread that
    // slept in a lock and then waited for it).
    let timed_and_not = t.futex_timed > 0 && lock_samples(t) > 0;
    let classes = s.by_class.values().filter(|&&n| n > 0).count() + usize::from(timed_and_not);
    little_cpu && s.running == 0 && classes <= 1
}

/// Share of a thread's step it was busy (running or runnable), 0..=1: the largest of its
/// time on a CPU or waiting for one (schedstat), its CPU time (utime+stime) and the share
/// of its samples in state R; of the time it was sampled over ([`span_ns`]). On a virtual
/// machine whose vCPUs the hypervisor holds (steal), a thread in state R is neither on a
/// CPU nor in the run queue by schedstat for that time: the samples see it.
pub fn busy_share(t: &StepThread, window_ns: u64) -> f64 {
    let w = span_ns(t, window_ns).max(1) as f64;
    let s = &t.states;
    let sched = (s.on_cpu_ns + s.runqueue_ns) as f64 / w;
    let ran = s.running as f64 / s.samples.max(1) as f64;
    sched.max(t.cpu_ns as f64 / w).max(ran).min(1.0)
}

/// A step's thread facts, from its per-thread samples: what [`THREAD_RULES`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadFacts {
    /// Users of the step.
    pub users: usize,
    /// The working threads' names and ids, most CPU first.
    pub working: Vec<(String, u32)>,
    /// The idle threads' names, by tid.
    pub idle: Vec<String>,
    /// The working threads that are a runtime's helpers, not serving requests
    /// ([`crate::waits::is_helper`]: a JVM's compiler and collector threads, redis's bio
    /// threads, never seen in a network wait), by name: their waits on a condition are
    /// not requests waiting on a lock, so the lock figures below leave them out.
    pub helpers: Vec<String>,
    /// The busiest working thread: (name, tid, busy share 0..=1, on a CPU 0..=1, waiting
    /// for a CPU 0..=1).
    pub busiest: Option<(String, u32, f64, f64, f64)>,
    /// The busy share of the next busiest working thread, 0..=1 (0 with one).
    pub next_busy: f64,
    /// Working threads (not helpers) with half their samples or more waiting on a lock:
    /// in a futex without a timeout (a timed futex wait is a sleep or a timer,
    /// [`lock_samples`]).
    pub futex_threads: usize,
    /// Share of the working threads' samples (not the helpers') waiting on a lock, 0..=1.
    pub lock_share: f64,
    /// Working threads' lock waits beyond what spare threads explain, in threads: the
    /// sum of their shares of samples waiting on a lock, less the threads the step's
    /// users could not keep busy (the working threads seen in such a wait - users, at
    /// least 0). A pool of 8 threads serving 2 users has 6 threads waiting for work on a
    /// condition (a futex without a timeout, like a lock's): 6 threads' worth of waits
    /// are spare capacity, not a lock; with a global lock, 8 users keep 7 threads
    /// waiting beyond it. A thread parked on a condition all the step (a GC thread that
    /// ran once) adds one to both sides; threads that never wait so (a compiler's timed
    /// waits, an event loop's epoll) add to neither.
    pub lock_excess: f64,
    /// Share of the working threads' samples in a futex wait with a timeout (a sleep or
    /// a timer, not a lock), 0..=1; 0 in records written before timeouts were read.
    pub timed_share: f64,
    /// Share of the working threads' samples blocked on a socket to another peer (a
    /// receive, a read, a send, a connect; not on the load's own connections, nor a
    /// pipe, an eventfd or a file), 0..=1. For a record written before the sampler told
    /// sockets apart: those calls' samples bounded by the network's.
    pub peer_share: f64,
    /// The system call most of those samples were in.
    pub peer_call: Option<String>,
    /// The working threads' samples together.
    pub states: ThreadStates,
    /// Two or more working threads, every one busy [`SATURATED_SHARE`] of the step or
    /// more (a prefork server's workers, a pool on every CPU): (their count, the
    /// processes they are in, their mean share on a CPU 0..=1, their mean share waiting
    /// for one 0..=1, the least busy one's share running or runnable 0..=1). None otherwise. No rule of [`THREAD_RULES`] reads it (many busy
    /// threads are the CPU's saturation, judged on the process's CPU); the verdict does
    /// when that CPU is below saturation: the threads got less CPU than they wanted.
    pub all_busy: Option<(usize, usize, f64, f64, f64)>,
    /// Two or more working threads, by their means: (their count, the processes they are
    /// in, their mean share running or runnable 0..=1, on a CPU 0..=1, waiting for one
    /// 0..=1). None with fewer. The verdict reads it when not all are busy
    /// ([`Self::all_busy`] None) to tell workers kept off the CPUs by other work (most
    /// of their busy time in the run queue) from a cap of threads that wait.
    pub crowd: Option<(usize, usize, f64, f64, f64)>,
    /// Whether the step's threads carry schedstat's times (on a CPU, in the run queue):
    /// false in a record written before they were kept (or where schedstat could not be
    /// read), where a thread in state R was on a CPU or waiting for one, untold.
    pub schedstat: bool,
}

/// A thread's samples waiting on a lock: in a futex without a timeout (its `Lock`
/// samples less those with one, [`StepThread::futex_timed`]).
pub fn lock_samples(t: &StepThread) -> u64 {
    let s = &t.states;
    s.by_class
        .get(&WaitClass::Lock)
        .copied()
        .unwrap_or(0)
        .saturating_sub(t.futex_timed)
}

/// System calls a thread blocked on a socket waits for its peer in (not a poll, an
/// epoll or an accept, where an event loop or a listener waits for work).
pub fn peer_call(sc: &str) -> bool {
    matches!(
        sc,
        "read"
            | "readv"
            | "write"
            | "writev"
            | "pread64"
            | "pwrite64"
            | "recvfrom"
            | "recvmsg"
            | "recvmmsg"
            | "sendto"
            | "sendmsg"
            | "sendmmsg"
            | "connect"
    )
}

/// The thread facts of a step; None for a step without per-thread samples (no --pid, or
/// a record written before them).
pub fn facts(s: &StepResult) -> Option<ThreadFacts> {
    if s.per_thread.is_empty() {
        return None;
    }
    let window = (s.measured_s * 1e9) as u64;
    let (idle, working): (Vec<&StepThread>, Vec<&StepThread>) =
        s.per_thread.iter().partition(|t| is_idle(t, window));
    let mut states = ThreadStates::default();
    for t in &working {
        states.merge(&t.states);
    }
    let n = |st: &ThreadStates, c: WaitClass| st.by_class.get(&c).copied().unwrap_or(0);
    let samples = states.samples.max(1) as f64;
    // The lock figures are the serving threads': a runtime's helpers wait on their own
    // conditions between their bursts of work.
    let (helpers, serving): (Vec<&StepThread>, Vec<&StepThread>) = working
        .iter()
        .partition(|t| crate::waits::is_helper(&t.comm, &t.states));
    let serving_samples = serving.iter().map(|t| t.states.samples).sum::<u64>().max(1) as f64;
    let futex_threads = serving
        .iter()
        .filter(|t| t.states.samples > 0 && 2 * lock_samples(t) >= t.states.samples)
        .count();
    let locks: u64 = serving.iter().map(|t| lock_samples(t)).sum();
    let lock_threads: f64 = serving
        .iter()
        .filter(|t| t.states.samples > 0)
        .map(|t| lock_samples(t) as f64 / t.states.samples as f64)
        .sum();
    let waiters = serving.iter().filter(|t| lock_samples(t) > 0).count();
    let spare = waiters.saturating_sub(s.users) as f64;
    let mut peer_calls: std::collections::BTreeMap<String, u64> = Default::default();
    let told = working.iter().any(|t| t.peer_by_syscall.is_some());
    if told {
        // Samples on sockets to other peers, as the sampler told them apart.
        for t in &working {
            for (sc, k) in t.peer_by_syscall.iter().flatten() {
                *peer_calls.entry(sc.clone()).or_default() += k;
            }
        }
    } else {
        // An older record: network samples in a peer call, read from the blocked
        // samples' calls (a read on a file is not Network, so the class bounds them).
        for (sc, k) in &states.by_syscall {
            if peer_call(sc) {
                *peer_calls.entry(sc.clone()).or_default() += k;
            }
        }
    }
    let peer = peer_calls.values().sum::<u64>();
    let peer = if told {
        peer
    } else {
        peer.min(n(&states, WaitClass::Network))
    };
    let busiest = working
        .iter()
        .max_by(|a, b| busy_share(a, window).total_cmp(&busy_share(b, window)))
        .map(|t| {
            let w = span_ns(t, window).max(1) as f64;
            (
                t.comm.clone(),
                t.tid,
                busy_share(t, window),
                (cpu_ns(t) as f64 / w).min(1.0),
                (t.states.runqueue_ns as f64 / w).min(1.0),
            )
        });
    let mut shares: Vec<f64> = working.iter().map(|t| busy_share(t, window)).collect();
    shares.sort_by(|a, b| b.total_cmp(a));
    // The working threads' means: (count, processes, on a CPU, waiting for one).
    let means = (working.len() >= 2).then(|| {
        let n = working.len() as f64;
        let share = |t: &StepThread, v: u64| (v as f64 / span_ns(t, window).max(1) as f64).min(1.0);
        let mut procs: Vec<u32> = working.iter().map(|t| t.pid).collect();
        procs.sort_unstable();
        procs.dedup();
        (
            working.len(),
            procs.len(),
            working.iter().map(|t| share(t, cpu_ns(t))).sum::<f64>() / n,
            working
                .iter()
                .map(|t| share(t, t.states.runqueue_ns))
                .sum::<f64>()
                / n,
        )
    });
    let all_busy = means
        .filter(|_| shares.iter().all(|&b| b >= SATURATED_SHARE))
        .map(|(n, procs, cpu, runq)| (n, procs, cpu, runq, shares.last().copied().unwrap_or(0.0)));
    let crowd = means
        .map(|(n, procs, cpu, runq)| (n, procs, shares.iter().sum::<f64>() / n as f64, cpu, runq));
    Some(ThreadFacts {
        users: s.users,
        next_busy: shares.get(1).copied().unwrap_or(0.0),
        working: working.iter().map(|t| (t.comm.clone(), t.tid)).collect(),
        idle: idle.iter().map(|t| t.comm.clone()).collect(),
        helpers: helpers.iter().map(|t| t.comm.clone()).collect(),
        busiest,
        futex_threads,
        lock_share: locks as f64 / serving_samples,
        lock_excess: lock_threads - spare,
        timed_share: working.iter().map(|t| t.futex_timed).sum::<u64>() as f64 / samples,
        peer_share: peer as f64 / samples,
        peer_call: peer_calls
            .into_iter()
            .max_by_key(|(_, k)| *k)
            .map(|(c, _)| c),
        states,
        all_busy,
        crowd,
        schedstat: s
            .per_thread
            .iter()
            .any(|t| t.states.on_cpu_ns > 0 || t.states.runqueue_ns > 0),
    })
}

/// What the working threads say about a flat top.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadCase {
    /// One thread runnable nearly all the step but on a CPU less than half of that
    /// (schedstat's run-queue delay, or a vCPU the hypervisor held): the host's CPUs
    /// were busy with other work, not with the server's own.
    Contended,
    /// One thread busy (on a CPU or waiting for one) nearly all the step: a CPU-bound
    /// event loop (redis).
    Saturated,
    /// Several working threads wait on a futex most of the step: a global lock.
    Serialised,
    /// The working threads are blocked on sockets most of the step: a downstream peer.
    PeerWait,
}

/// One rule: a condition on a step's thread facts, and the case it names.
pub struct ThreadRule {
    /// The case named when the condition holds.
    pub case: ThreadCase,
    /// The condition.
    pub when: fn(&ThreadFacts) -> bool,
    /// Why the rule has its place in the order.
    pub why_here: &'static str,
}

/// A thread busy this share of the step or more is "at ~100 % of a CPU".
pub const SATURATED_SHARE: f64 = 0.8;

/// Lock waits beyond spare threads ([`ThreadFacts::lock_excess`]) that make a lock: half
/// a thread. With one lock and N users, N-1 threads wait for it beyond the spare ones
/// (one at 2 users); without one, none do.
pub const LOCK_EXCESS: f64 = 0.5;

/// One busy thread beside others that mostly are not: the event loop's shape.
fn one_busy(f: &ThreadFacts) -> bool {
    f.busiest.as_ref().is_some_and(|b| b.2 >= SATURATED_SHARE) && f.next_busy < 0.5
}

/// The busiest thread's time on a CPU (schedstat or utime+stime) was less than half of
/// its busy time: the rest it waited for a CPU (run queue) or ran on a vCPU the
/// hypervisor held.
fn mostly_waiting_for_a_cpu(f: &ThreadFacts) -> bool {
    f.busiest
        .as_ref()
        .is_some_and(|&(_, _, busy, cpu, _)| cpu > 0.0 && cpu < 0.5 * busy)
}

/// The rules, first match wins.
pub const THREAD_RULES: &[ThreadRule] = &[
    ThreadRule {
        case: ThreadCase::Contended,
        when: |f| one_busy(f) && mostly_waiting_for_a_cpu(f),
        why_here: "first: a thread that is runnable all the step but mostly kept off a CPU does less of its own work than the step allows; the CPUs are busy elsewhere (the load generator on the same host, other processes, a hypervisor's steal), so its own cost is not yet the limit",
    },
    ThreadRule {
        case: ThreadCase::Saturated,
        when: one_busy,
        why_here: "then: one thread that is never idle, beside others that mostly are, is the bottleneck; threads that wait for its results (on a futex or a socket) wait because of it (many busy threads are the CPU's saturation, judged by the process's CPU)",
    },
    ThreadRule {
        case: ThreadCase::Serialised,
        when: |f| f.futex_threads >= 2 && f.lock_share >= 0.5 && f.lock_excess >= LOCK_EXCESS,
        why_here: "several working threads, each waiting on a futex without a timeout most of the step, more of them than spare threads explain, and no thread busy: they wait for one another (idle helpers parked in a futex are not counted; a timed futex wait is a sleep or a timer; a pool's threads waiting for work while the users cannot keep them busy are spare capacity)",
    },
    ThreadRule {
        case: ThreadCase::PeerWait,
        when: |f| f.peer_share >= 0.5,
        why_here: "the working threads blocked on sockets to other peers in a receive, read, send or connect (not an event loop's poll, nor a read of the load's own connection, a pipe or an eventfd): each request waits on someone else",
    },
];

/// The first rule that holds for `f`.
pub fn judge(f: &ThreadFacts) -> Option<ThreadCase> {
    THREAD_RULES.iter().find(|r| (r.when)(f)).map(|r| r.case)
}

/// "4 other threads idle (bio_close_file, ...)": the idle threads, up to 4 named; None
/// when there are none.
pub fn idle_words(f: &ThreadFacts) -> Option<String> {
    if f.idle.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = f.idle.iter().map(String::as_str).take(4).collect();
    if f.idle.len() > 4 {
        names.push("...");
    }
    Some(format!(
        "{} other thread{} idle ({})",
        f.idle.len(),
        if f.idle.len() == 1 { "" } else { "s" },
        names.join(", ")
    ))
}

/// The evidence line of the working threads: "working server threads at 64 users: 1 of
/// 5; the busiest, redis-server (tid 12), running or runnable 91 % of the step (on a CPU
/// 36 %, waiting for a CPU 55 % by schedstat); 4 other threads idle (...)".
pub fn evidence_line(f: &ThreadFacts) -> String {
    let busiest = f
        .busiest
        .as_ref()
        .map_or(String::new(), |(comm, tid, busy, cpu, runq)| {
            format!(
                "; the busiest, {comm} (tid {tid}), running or runnable {:.0} % of the step (on a CPU {:.0} %, waiting for a CPU {:.0} % by schedstat)",
                busy * 100.0,
                cpu * 100.0,
                runq * 100.0
            )
        });
    let locked = if f.futex_threads > 0 {
        format!(
            "; {} waiting on a futex most of the step ({:.0} % of the working threads' samples)",
            f.futex_threads,
            f.lock_share * 100.0
        )
    } else {
        String::new()
    };
    let helpers = match f.helpers.len() {
        0 => String::new(),
        n => {
            let mut names: Vec<&str> = f.helpers.iter().map(String::as_str).take(4).collect();
            if n > 4 {
                names.push("...");
            }
            format!(
                "; {n} of them a runtime's helper{}, their waits not counted as a lock's ({})",
                if n == 1 { "" } else { "s" },
                names.join(", ")
            )
        }
    };
    format!(
        "working server threads at {} users: {} of {}{busiest}{locked}{helpers}{}",
        f.users,
        f.working.len(),
        f.working.len() + f.idle.len(),
        idle_words(f).map_or(String::new(), |w| format!("; {w}"))
    )
}

/// The processes a step followed, from its per-thread samples (each thread's process):
/// "server processes at 8 users: nginx: 1 master (the PID 4200) + 2 workers (its
/// descendants); the master idle; 1 of the workers born during the step (...)". The
/// master is `root` (the PID given), named by its
/// main thread; a process is idle when every thread of it is ([`is_idle`]). None with
/// fewer than two processes (or threads of a record written before their processes were
/// recorded).
pub fn processes_line(s: &StepResult, root: u32) -> Option<String> {
    let window = (s.measured_s * 1e9) as u64;
    let mut procs: std::collections::BTreeMap<u32, (bool, Option<&str>)> = Default::default();
    let mut born = std::collections::BTreeSet::new();
    for t in s.per_thread.iter().filter(|t| t.pid != 0) {
        if t.born {
            born.insert(t.pid);
        }
        let p = procs.entry(t.pid).or_insert((true, None));
        p.0 &= is_idle(t, window);
        if t.tid == t.pid {
            p.1 = Some(&t.comm);
        }
    }
    let master = procs.get(&root).copied();
    if procs.len() < 2 || master.is_none() {
        return None;
    }
    let (master_idle, name) = master.unwrap_or_default();
    let workers = procs.len() - 1;
    let idle_workers = procs
        .iter()
        .filter(|(p, (idle, _))| **p != root && *idle)
        .count();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    Some(format!(
        "server processes at {} users: {}1 master (the PID {root}) + {workers} worker{} (its descendants); the master {}{}{}",
        s.users,
        name.map_or(String::new(), |n| format!("{n}: ")),
        plural(workers),
        if master_idle { "idle" } else { "working" },
        match idle_workers {
            0 => String::new(),
            n => format!(", {n} of the workers idle"),
        },
        match born.len() {
            0 => String::new(),
            n => format!(
                "; {n} of the workers born during the step (their shares are of the time since their birth)"
            ),
        }
    ))
}

/// When the thread sampling was partial at some step (a tree of more threads than the
/// sampler reads per tick, sampled in turns): "thread sampling was partial: the server's
/// tree had up to 201 threads in 201 processes, 8 read per tick in turns (each thread
/// at about 4 % of the ticks) at 8, 16 users; shares are of each thread's own samples".
/// None when every step read the whole tree at every tick, or without coverage.
pub fn sampling_line(rec: &tpslab_record::ramp::RampRecord) -> Option<String> {
    let partial: Vec<(usize, tpslab_record::ramp::TreeSampling)> = rec
        .steps
        .iter()
        .filter_map(|s| Some((s.users, s.tree_sampling.filter(|c| c.partial())?)))
        .collect();
    let most = partial.iter().map(|(_, c)| *c).max_by_key(|c| c.threads)?;
    let users: Vec<String> = partial.iter().map(|(u, _)| u.to_string()).collect();
    let unsampled: u32 = partial
        .iter()
        .map(|(_, c)| c.threads.saturating_sub(c.sampled))
        .max()
        .unwrap_or(0);
    Some(format!(
        "thread sampling was partial: the server's tree had up to {} threads in {} processes, {} read per tick in turns (each thread at about {:.0} % of the ticks) at {} users{}; shares are of each thread's own samples",
        most.threads,
        most.processes,
        most.per_tick,
        100.0 * f64::from(most.per_tick) / f64::from(most.threads.max(1)),
        users.join(", "),
        match unsampled {
            0 => String::new(),
            n => format!(", up to {n} threads never sampled in a step"),
        }
    ))
}

#[cfg(test)]
#[path = "ramp_threads_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "ramp_threads_real_tests.rs"]
mod real_tests;

#[cfg(test)]
#[path = "ramp_tree_tests.rs"]
mod tree_tests;
