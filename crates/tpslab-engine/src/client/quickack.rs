//! Re-timing held replies with the client acknowledging at once: when a run's replies
//! look held by Nagle until the client's delayed ACK (`tpslab_analysis::nagle::looks_like`),
//! one user on a new connection sends a short bounded sample of the same requests
//! (at most [`QuickackRetime::MAX_REQUESTS`] requests or [`QuickackRetime::MAX_NS`],
//! whichever first, one in flight, no think time) through the same users' loop, whose
//! client sets TCP_QUICKACK before each read ([`Books::QUICKACK`]): the server's first
//! segment is acknowledged at once, so Nagle has nothing to wait for. Holds that vanish
//! were Nagle x delayed ACK; holds that stay are the server pausing between its sends.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use tpslab_net::mono_ns;
use tpslab_record::gaps::{QuickackRetime, ReplyGaps};

use crate::client::books::Books;
use crate::client::proto::{Exchange, Reply, WithExchange};

/// The re-timing's clock and counts: one user, a cap on its requests, an end.
struct Retime<'a> {
    stop: &'a AtomicBool,
    /// No request starts at or after it, and the loop ends there, ns.
    end: u64,
    timeout_ns: u64,
    /// Requests claimed so far.
    claimed: AtomicU64,
    /// Set once the cap is used up and its last request ended, or on an abort.
    done: AtomicBool,
    /// The loop's counts, when it ended.
    out: Mutex<Option<(QuickackRetime, u64, u64)>>,
}

/// The loop's own counts: the re-timing's, and its first send and last end, ns.
#[derive(Default)]
struct Local {
    q: QuickackRetime,
    first: u64,
    last: u64,
}

impl Local {
    /// A request ended (answered or failed) at `now`: the cap's last, the loop is done.
    fn ended(&mut self, sh: &Retime<'_>, now: u64) {
        self.last = now;
        if self.q.replies + self.q.failed >= QuickackRetime::MAX_REQUESTS {
            sh.done.store(true, Relaxed);
        }
    }
}

impl Books for Retime<'_> {
    type Local = Local;
    const QUICKACK: bool = true;

    fn local(&self) -> Local {
        Local::default()
    }

    fn done(&self) -> bool {
        self.done.load(Relaxed) || self.stop.load(Relaxed) || mono_ns() >= self.end
    }

    fn users_at(&self, _now: u64) -> usize {
        1
    }

    fn may_send(&self, now: u64) -> bool {
        now < self.end && !self.stop.load(Relaxed)
    }

    /// One user: a claim past the cap comes with no request in flight, and ends the loop.
    fn claim(&self) -> bool {
        let ok = self.claimed.fetch_add(1, Relaxed) < QuickackRetime::MAX_REQUESTS;
        if !ok {
            self.done.store(true, Relaxed);
        }
        ok
    }

    fn timeout_ns(&self) -> u64 {
        self.timeout_ns
    }

    fn first_due(&self, _id: usize) -> u64 {
        0
    }

    fn next_due(&self, _intended: u64, now: u64) -> u64 {
        now
    }

    fn sent(&self, l: &mut Local, _intended: u64, _ready: u64, now: u64, _bytes: usize) {
        l.q.requests += 1;
        if l.first == 0 {
            l.first = now;
        }
    }

    fn answered(&self, l: &mut Local, _i: u64, t0: u64, first: u64, now: u64, r: &Reply) {
        match r.failed {
            None => {
                let gap = (first != 0).then(|| now.saturating_sub(first));
                l.q.add(now.saturating_sub(t0), gap, r.len);
            }
            Some(_) => l.q.failed += 1,
        }
        l.ended(self, now);
    }

    fn failed(&self, l: &mut Local, now: u64, _kind: &str, in_flight: bool) {
        // A connect's failure is no request's: the user backs off and tries again until
        // the end.
        if in_flight {
            l.q.failed += 1;
            l.ended(self, now);
        }
    }

    fn abort(&self) {
        self.done.store(true, Relaxed);
    }

    fn finish(&self, l: Local, _in_flight: u64) {
        *self.out.lock().unwrap_or_else(|e| e.into_inner()) = Some((l.q, l.first, l.last));
    }
}

/// Re-times `proto`'s requests (see the module's text) with a per-request `timeout_ns`;
/// `stop` ends it early. What the client's namespace's `TcpExt: DelayedACKs` did over it
/// is in the result when readable.
pub(crate) fn retime<P: Exchange>(proto: &P, timeout_ns: u64, stop: &AtomicBool) -> QuickackRetime {
    let sh = Retime {
        stop,
        end: mono_ns() + QuickackRetime::MAX_NS,
        timeout_ns,
        claimed: AtomicU64::new(0),
        done: AtomicBool::new(false),
        out: Mutex::new(None),
    };
    let delack0 = crate::client::openloop::delayed_acks();
    crate::client::users::run_loop(&sh, proto, vec![0]);
    let delack1 = crate::client::openloop::delayed_acks();
    let (mut q, first, last) = sh
        .out
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_default();
    q.duration_ns = last.saturating_sub(first);
    q.delayed_acks = delack0.zip(delack1).map(|(a, b)| b.saturating_sub(a));
    q
}

/// [`retime`] run with a protocol known only at run time (`Protocol::with`).
pub(crate) struct Run<'a> {
    pub(crate) timeout_ns: u64,
    pub(crate) stop: &'a AtomicBool,
}

impl WithExchange for Run<'_> {
    type Out = QuickackRetime;
    fn with<P: Exchange>(self, p: &P) -> QuickackRetime {
        retime(p, self.timeout_ns, self.stop)
    }
}

/// Whether any of `gaps` looks like Nagle x delayed ACK (re-timing is then worth its
/// requests).
pub(crate) fn wanted<'a>(mut gaps: impl Iterator<Item = &'a ReplyGaps>) -> bool {
    gaps.any(|g| tpslab_analysis::nagle::looks_like(g).is_some())
}

/// Keeps `q` in each of `gaps` that looks like Nagle x delayed ACK.
pub(crate) fn attach<'a>(gaps: impl Iterator<Item = &'a mut ReplyGaps>, q: QuickackRetime) {
    for g in gaps {
        if tpslab_analysis::nagle::looks_like(g).is_some() {
            g.quickack = Some(q);
        }
    }
}

/// `load http`'s run `rec` of `plan` re-timed when its replies look held by Nagle until a
/// delayed ACK (HTTP/1.1 only: HTTP/2's and HTTP/3's replies' gaps are not taken), the
/// figures kept in its `reply_gaps`; unchanged otherwise, or once `stop` is set. Errors:
/// as `run_load_http`'s for the request (not reached for a plan that ran).
pub fn retime_load_http(
    plan: &tpslab_plan::load_http::LoadHttpPlan,
    stop: &AtomicBool,
    rec: &mut tpslab_record::load_http::LoadHttpRecord,
) -> Result<(), crate::EngineError> {
    if plan.version.multiplexed() || stop.load(Relaxed) {
        return Ok(());
    }
    let Some(g) = rec.result.reply_gaps.as_mut() else {
        return Ok(());
    };
    if !wanted(std::iter::once(&*g)) {
        return Ok(());
    }
    let proto = crate::client::openloop::http1_for(plan)?;
    let timeout_ns = tpslab_plan::time::nanos(&plan.timeout).max(1_000_000);
    attach(std::iter::once(g), retime(&proto, timeout_ns, stop));
    Ok(())
}
