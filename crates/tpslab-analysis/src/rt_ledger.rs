//! A ramp step's response-time ledger ([`RtLedger`], a record type): the step's mean
//! response time split into measured parts, each estimated by Little's law (the mean
//! number of things in a state = the rate through it x the time each spends in it):
//!
//! - waiting to be accepted: the listen socket's mean accept queue over the step's reads
//!   (each connection in it holds its user's first request) / TPS;
//! - the server's threads by state: each thread's share of the step on a CPU and waiting
//!   for one (schedstat, exact), its blocked time split by its blocked samples' classes
//!   (a lock: a futex without a timeout; asleep: nanosleep or a timed futex; a peer: a
//!   socket to another address; disk; another wait), added over the threads into mean
//!   threads in each state, / TPS: the time per request. A thread blocked on the load's
//!   own connection or in poll/accept waits for a request, not on one: never charged.
//!   Idle threads ([`crate::ramp_threads::is_idle`]: no CPU, one wait all step) weigh
//!   only in the lock part (and with their little CPU time): a thread-per-connection server's threads queued on a busy
//!   lock look so, but not those already parked in a lock wait at the ramp's first step
//!   ([`parked`]: a runtime's helpers, redis's bio threads, never a request's queue);
//!   the lock part leaves out the spare threads the users cannot keep busy
//!   (threads seen in a lock wait beyond the step's users: a pool's threads waiting for
//!   work on a condition variable), as [`crate::ramp_threads::ThreadFacts::lock_excess`].
//!   A runtime's helpers ([`crate::waits::is_helper`]: a JVM's compiler and collector
//!   threads, redis's bio threads, never seen in a network wait) weigh only with their
//!   CPU time, busy or not: their waits are on their own conditions, not a request's.
//!
//! The uncertainty of a sampled part is one standard error of its shares (binomial over
//! each thread's blocked samples, samples taken as independent); schedstat's parts are
//! exact (0). A reply's transmission stall (its last bytes held apart from its first:
//! Nagle x delayed ACK) is the client's own measure per request (`reply_gaps`). What no
//! part explains is `unattributed` (the network, the client's own time).

use crate::ramp_threads::{cpu_ns, is_idle, lock_samples, span_ns};
use std::collections::BTreeSet;
use tpslab_record::ramp::StepResult;
use tpslab_record::rt_ledger::{LedgerPart, RtLedger, RtPart};
use tpslab_record::waits::WaitClass;

/// One part's mean threads in its state over the step and its variance (threads^2).
#[derive(Default, Clone, Copy)]
struct Threads {
    n: f64,
    var: f64,
}

impl Threads {
    fn add(&mut self, share: f64, var: f64) {
        self.n += share;
        self.var += var;
    }
}

/// The ledger of one step whose users think `think_s` seconds between requests; None
/// for a step without replies (no mean response time, no rate).
pub fn step_ledger(s: &StepResult, think_s: f64) -> Option<RtLedger> {
    step_ledger_beside(s, think_s, &BTreeSet::new())
}

/// The threads idle in a lock wait at the ramp's first step (`tid`s): parked before the
/// load grew (a runtime's helpers, redis's bio threads on their condition variables),
/// never charged as requests queued on a lock at any step.
pub fn parked(first: &StepResult) -> BTreeSet<u32> {
    let window = (first.measured_s * 1e9) as u64;
    first
        .per_thread
        .iter()
        .filter(|t| is_idle(t, window) && lock_samples(t) > 0)
        .map(|t| t.tid)
        .collect()
}

/// [`step_ledger`] with the threads `parked` at the first step left out of its lock part.
pub fn step_ledger_beside(
    s: &StepResult,
    think_s: f64,
    parked: &BTreeSet<u32>,
) -> Option<RtLedger> {
    if s.completed == 0 || s.tps <= 0.0 || s.response.mean_ns.is_nan() {
        return None;
    }
    let tps = s.tps;
    let mean_ms = s.response.mean_ns / 1e6;
    let ms = |threads: f64| threads / tps * 1e3;
    let mut parts = vec![];
    if let Some(q) = s.accept_queue_mean {
        // A Poisson count's standard error over the reads.
        let pm = (q.connections / q.reads.max(1) as f64).sqrt();
        parts.push(LedgerPart {
            part: RtPart::AcceptWait,
            ms: ms(q.connections),
            pm_ms: ms(pm),
        });
    }
    if let Some(by) = thread_parts(s, parked) {
        for (part, t) in by {
            parts.push(LedgerPart {
                part,
                ms: ms(t.n),
                pm_ms: ms(t.var.sqrt()),
            });
        }
    }
    if let Some(g) = s.reply_gaps.filter(|g| g.replies > 0) {
        // Timed per request by the client: exact as far as its clock goes.
        parts.push(LedgerPart {
            part: RtPart::TransmissionStall,
            ms: g.held_gap_ns as f64 / g.replies as f64 / 1e6,
            pm_ms: 0.0,
        });
    }
    let attributed: f64 = parts.iter().map(|p| p.ms).sum();
    let outside_ms = (s.users as f64 / tps - s.response.mean_ns / 1e9 - think_s).max(0.0) * 1e3;
    Some(RtLedger {
        users: s.users,
        mean_ms,
        parts,
        unattributed_ms: mean_ms - attributed,
        outside_ms,
    })
}

/// The threads' parts of a step: mean threads in each state (see the module's text);
/// None without per-thread samples with classes.
fn thread_parts(s: &StepResult, parked: &BTreeSet<u32>) -> Option<Vec<(RtPart, Threads)>> {
    if s.per_thread.is_empty() || s.per_thread.iter().all(|t| t.states.by_class.is_empty()) {
        return None;
    }
    let window = (s.measured_s * 1e9) as u64;
    let mut by = [Threads::default(); 7];
    let idx = |p: RtPart| match p {
        RtPart::OnCpu => 0,
        RtPart::Runnable => 1,
        RtPart::Lock => 2,
        RtPart::Sleep => 3,
        RtPart::Peer => 4,
        RtPart::Disk => 5,
        _ => 6,
    };
    let mut waiters = 0usize;
    for t in &s.per_thread {
        let w = span_ns(t, window).max(1) as f64;
        // Its mean presence over the window (a thread born in the step counts from then).
        let present = (w / window.max(1) as f64).min(1.0);
        let idle = is_idle(t, window);
        let st = &t.states;
        let cpu = (cpu_ns(t) as f64 / w).min(1.0);
        let runq = (st.runqueue_ns as f64 / w).min(1.0 - cpu);
        // CPU time is work whoever spends it (an idle thread's is little by definition).
        by[idx(RtPart::OnCpu)].add(cpu * present, 0.0);
        by[idx(RtPart::Runnable)].add(runq * present, 0.0);
        // A runtime's helper (its compiler, its collector, redis's bio threads) serves
        // no request: its CPU time above is work, its waits are its own.
        if (idle && parked.contains(&t.tid)) || crate::waits::is_helper(&t.comm, st) {
            continue;
        }
        let n = |c: WaitClass| st.by_class.get(&c).copied().unwrap_or(0);
        let blocked_samples = st.samples.saturating_sub(n(WaitClass::OnCpu));
        if blocked_samples == 0 {
            continue;
        }
        let blocked = (1.0 - cpu - runq).max(0.0) * present;
        let k = blocked_samples as f64;
        let lock = lock_samples(t);
        if lock > 0 {
            waiters += 1;
        }
        let peer: u64 = t.peer_by_syscall.iter().flatten().map(|(_, k)| k).sum();
        let mut charge = |part: RtPart, c: u64| {
            let p = (c as f64 / k).min(1.0);
            by[idx(part)].add(blocked * p, blocked * blocked * p * (1.0 - p) / k);
        };
        charge(RtPart::Lock, lock);
        if idle {
            continue;
        }
        charge(RtPart::Sleep, n(WaitClass::Sleep) + t.futex_timed);
        charge(RtPart::Peer, peer.min(n(WaitClass::Network)));
        charge(RtPart::Disk, n(WaitClass::Disk));
        charge(
            RtPart::OtherWait,
            n(WaitClass::File) + n(WaitClass::Child) + n(WaitClass::Other) + n(WaitClass::Unknown),
        );
    }
    // Spare threads: seen waiting on a lock beyond the users (a pool waiting for work).
    let spare = waiters.saturating_sub(s.users) as f64;
    let lock = &mut by[idx(RtPart::Lock)];
    lock.n = (lock.n - spare).max(0.0);
    Some(
        [
            RtPart::OnCpu,
            RtPart::Runnable,
            RtPart::Lock,
            RtPart::Sleep,
            RtPart::Peer,
            RtPart::Disk,
            RtPart::OtherWait,
        ]
        .into_iter()
        .map(|p| (p, by[idx(p)]))
        .collect(),
    )
}

/// The ledger of an open-loop step (`capacity tcp|http`): `s` holds the step's replies
/// and response time over the sampler's window (`measured_s`, `completed`, `tps`), its
/// threads and its listener as a ramp step's do, and `users` the connections its
/// requests were sent on (the most requests at once: what bounds the spare threads).
/// Nothing is outside a request: the open loop sends on its schedule, not after a
/// reply, so `outside_ms` is 0. None without replies.
pub fn open_loop(s: &StepResult, parked: &BTreeSet<u32>) -> Option<RtLedger> {
    let mut l = step_ledger_beside(s, 0.0, parked)?;
    l.outside_ms = 0.0;
    Some(l)
}

/// Every step's ledger, in step order (steps without replies left out).
pub fn ledgers(steps: &[StepResult], think_s: f64) -> Vec<RtLedger> {
    let parked = steps.first().map(parked).unwrap_or_default();
    steps
        .iter()
        .filter_map(|s| step_ledger_beside(s, think_s, &parked))
        .collect()
}

/// The users' cycle per request, ms: response + think + time outside a request.
pub fn cycle_ms(l: &RtLedger, think_s: f64) -> f64 {
    l.mean_ms + think_s * 1e3 + l.outside_ms
}

/// A part's share of the step's mean response time, 0..=1; 0 without a mean.
pub fn share(l: &RtLedger, part: RtPart) -> f64 {
    if l.mean_ms > 0.0 {
        (l.ms(part) / l.mean_ms).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Whether the parts add up to at most the mean, within its sampling error (a tenth):
/// past it they overlap (threads sampled in a state that is on no request's path, a
/// runtime's helpers) and no part's share of the mean is given.
pub fn balances(l: &RtLedger) -> bool {
    l.unattributed_ms >= -0.1 * l.mean_ms
}

/// The users of the first step whose ledger gives `parts` together at least a quarter of
/// its mean response time: where that part starts to weigh.
pub fn first_step(ledgers: &[RtLedger], parts: &[RtPart]) -> Option<usize> {
    ledgers
        .iter()
        .find(|l| parts.iter().map(|&p| share(l, p)).sum::<f64>() >= 0.25)
        .map(|l| l.users)
}

/// The ledger's line: "response-time ledger at 64 users: mean 270.1 ms = waiting on a
/// lock 251.0 ms +- 3.1 (93 %) + ... + unattributed 10.2 ms (4 %); outside a request
/// 5.0 ms per request (connecting, backing off)".
pub fn line(l: &RtLedger) -> String {
    format!(
        "{}; outside a request (connecting, backing off, or what Little's law leaves over the closed loop) {:.2} ms per request",
        line_at(l, &format!("{} users", l.users)),
        l.outside_ms
    )
}

/// The ledger's sum at `at` (`64 users`, `800 requests/s`): "response-time ledger at
/// 800 requests/s: mean 4.20 ms = ... + unattributed 0.10 ms (2 %)", or the parts that
/// overlap (see [`balances`]).
pub fn line_at(l: &RtLedger, at: &str) -> String {
    let pct = |ms: f64| {
        if l.mean_ms > 0.0 {
            100.0 * ms / l.mean_ms
        } else {
            0.0
        }
    };
    let ok = balances(l);
    let mut parts: Vec<String> = l
        .parts
        .iter()
        .filter(|p| p.ms >= 0.005 || p.part == RtPart::AcceptWait)
        .map(|p| {
            if ok {
                format!(
                    "{} {:.2} ms +- {:.2} ({:.0} %)",
                    p.part.label(),
                    p.ms,
                    p.pm_ms,
                    pct(p.ms)
                )
            } else {
                format!("{} {:.2} ms +- {:.2}", p.part.label(), p.ms, p.pm_ms)
            }
        })
        .collect();
    let sum = if ok {
        parts.push(format!(
            "unattributed {:.2} ms ({:.0} %)",
            l.unattributed_ms.max(0.0),
            pct(l.unattributed_ms.max(0.0))
        ));
        format!("mean {:.2} ms = {}", l.mean_ms, parts.join(" + "))
    } else {
        format!(
            "mean {:.2} ms, but the parts add up to {:.2} ms, {:.2} ms more: they overlap (threads sampled in a state on no request's path, e.g. a runtime's helper threads), so no share is given: {}",
            l.mean_ms,
            l.attributed_ms(),
            -l.unattributed_ms,
            parts.join(", ")
        )
    };
    format!("response-time ledger at {at}: {sum}")
}

#[cfg(test)]
#[path = "rt_ledger_tests.rs"]
mod tests;
