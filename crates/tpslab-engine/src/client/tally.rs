//! What the users of a ramp share: the plan's clock (which users run when, which step a
//! reply counts in) and each step's tally of response times and failures. The ramp
//! (`ramp.rs`) makes it and reads the steps; the users' loops (`users.rs`) count into it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use hdrhistogram::Histogram;

use tpslab_plan::ramp::RampPlan;
use tpslab_plan::time::nanos;

/// One step's counts.
pub(crate) struct StepAcc {
    /// Response times of the replies in its window, ns.
    pub(crate) hist: Histogram<u64>,
    /// Failures in its window by kind.
    pub(crate) errors: BTreeMap<String, u64>,
    /// Its replies by the time from their first byte read to their last.
    pub(crate) gaps: tpslab_record::gaps::ReplyGaps,
    /// Its users' back-offs before connecting again.
    pub(crate) backoffs: u64,
}

/// The plan's clock and the steps' counts.
pub(crate) struct Tally<'a> {
    pub(crate) plan: &'a RampPlan,
    /// Set at the end: the loops return (their sockets open until then, so late replies
    /// are read, not dropped by the kernel while the last step's drops are counted).
    pub(crate) done: AtomicBool,
    /// The run's stop (SIGINT/SIGTERM): no request is started once it is set.
    pub(crate) stop: &'a AtomicBool,
    /// Measured windows: [start, end) ns per step.
    pub(crate) windows: Vec<(u64, u64)>,
    pub(crate) acc: Vec<Mutex<StepAcc>>,
    /// Each step's requests written (first, last), ns, as the loops publish them
    /// ([`LoopSends`]); (u64::MAX, 0) while none.
    pub(crate) sent: Vec<(AtomicU64, AtomicU64)>,
}

/// A tally's per-step send spans, before any send.
pub(crate) fn no_sends(steps: usize) -> Vec<(AtomicU64, AtomicU64)> {
    (0..steps)
        .map(|_| (AtomicU64::new(u64::MAX), AtomicU64::new(0)))
        .collect()
}

/// What one loop thread sent in the step it is in: kept locally (a request costs no
/// shared write) and published into [`Tally::sent`] when its sends move to a later step
/// and when the loop ends.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoopSends {
    /// The step of the sends below.
    step: usize,
    /// First and last request written in it, ns (first 0: none yet).
    first: u64,
    last: u64,
}

impl LoopSends {
    /// A request written at `t`, the steps starting (warm-up included) at `starts`
    /// (increasing; the last step open-ended, so a send past the plan's end counts in it
    /// and shows as an overrun). Returns the span of the step it left, (step, first,
    /// last), when `t` is in a later step than the sends before.
    pub(crate) fn note(&mut self, t: u64, starts: &[u64]) -> Option<(usize, u64, u64)> {
        let mut left = None;
        while starts.get(self.step + 1).is_some_and(|&s| t >= s) {
            left = left.or(self.current());
            *self = LoopSends {
                step: self.step + 1,
                first: 0,
                last: 0,
            };
        }
        if self.first == 0 {
            self.first = t;
        }
        self.last = self.last.max(t);
        left
    }

    /// The span of the step it is in, (step, first, last), if anything was sent in it.
    pub(crate) fn current(&self) -> Option<(usize, u64, u64)> {
        (self.first != 0).then_some((self.step, self.first, self.last))
    }
}

impl Tally<'_> {
    /// The steps' starts, warm-up included, ns.
    pub(crate) fn step_starts(&self) -> Vec<u64> {
        let warmup = nanos(&self.plan.warmup);
        self.windows
            .iter()
            .map(|(w0, _)| w0.saturating_sub(warmup))
            .collect()
    }

    /// The plan's end (the last window's), ns.
    pub(crate) fn end_ns(&self) -> u64 {
        self.windows.last().map_or(0, |w| w.1)
    }

    /// Whether a request may start at `now`: before the plan's end and the run's stop.
    /// Every user checks it itself before it connects or writes, so the load ends on the
    /// plan's clock, whenever the thread that keeps the books gets to run.
    pub(crate) fn may_send(&self, now: u64) -> bool {
        now < self.end_ns() && !self.stop.load(Relaxed)
    }

    /// Adds a loop's sends in step `k` (first, last, ns) to the step's span.
    pub(crate) fn publish(&self, (k, first, last): (usize, u64, u64)) {
        if let Some((f, l)) = self.sent.get(k) {
            f.fetch_min(first, Relaxed);
            l.fetch_max(last, Relaxed);
        }
    }

    /// Step `k`'s requests written (first, last), ns, as published so far.
    pub(crate) fn sent_span(&self, k: usize) -> Option<(u64, u64)> {
        let (f, l) = self.sent.get(k)?;
        let (f, l) = (f.load(Relaxed), l.load(Relaxed));
        (f != u64::MAX && l >= f).then_some((f, l))
    }

    /// Users that run at `t`: those of the step whose warm-up or window holds it (by the
    /// plan's clock, not by when this thread gets to its bookkeeping), the last step's
    /// after its end, none before the first.
    pub(crate) fn users_at(&self, t: u64) -> usize {
        let warmup = nanos(&self.plan.warmup);
        self.windows
            .iter()
            .zip(&self.plan.steps)
            .take_while(|((w0, _), _)| t >= w0.saturating_sub(warmup))
            .last()
            .map_or(0, |(_, &n)| n)
    }

    fn step_of(&self, t: u64) -> Option<usize> {
        self.windows.iter().position(|&(a, b)| t >= a && t < b)
    }

    /// A reply of `len` bytes at `t` after `rt_ns`, its last byte `gap_ns` after its
    /// first (None: not taken): counted in the step whose window holds `t`.
    pub(crate) fn ok(&self, t: u64, rt_ns: u64, gap_ns: Option<u64>, len: usize) {
        if let Some(i) = self.step_of(t) {
            let mut a = self.acc[i].lock().unwrap_or_else(|e| e.into_inner());
            // Above the histogram's 100 s bound counts as 100 s, never as nothing.
            a.hist.saturating_record(rt_ns.max(1));
            a.gaps.add(rt_ns, gap_ns, len);
        }
    }

    /// The RTT of a held reply's connection at `t` (ns): kept in the step whose window
    /// holds `t` (the lowest).
    pub(crate) fn held_rtt_at(&self, t: u64, rtt_ns: u64) {
        if let Some(i) = self.step_of(t) {
            let mut a = self.acc[i].lock().unwrap_or_else(|e| e.into_inner());
            a.gaps.held_rtt(rtt_ns);
        }
    }

    /// A failure of `kind` at `t`: counted in the step whose window holds `t`.
    pub(crate) fn err(&self, t: u64, kind: &str) {
        if let Some(i) = self.step_of(t) {
            let mut a = self.acc[i].lock().unwrap_or_else(|e| e.into_inner());
            *a.errors.entry(kind.to_string()).or_default() += 1;
        }
    }
}

/// A ramp loop's own counts: the steps' starts (warm-up included, ns: which step a request
/// written counts in) and its requests written in the step it is in.
pub(crate) struct RampLocal {
    starts: Vec<u64>,
    sends: LoopSends,
}

impl crate::client::books::Books for Tally<'_> {
    type Local = RampLocal;

    fn local(&self) -> RampLocal {
        RampLocal {
            starts: self.step_starts(),
            sends: LoopSends::default(),
        }
    }

    fn done(&self) -> bool {
        self.done.load(Relaxed)
    }

    fn users_at(&self, now: u64) -> usize {
        Tally::users_at(self, now)
    }

    fn may_send(&self, now: u64) -> bool {
        Tally::may_send(self, now)
    }

    fn timeout_ns(&self) -> u64 {
        nanos(&self.plan.timeout)
    }

    fn first_due(&self, _id: usize) -> u64 {
        0
    }

    fn step_starts(&self) -> Vec<u64> {
        Tally::step_starts(self)
    }

    /// The start (warm-up included) of the first step with more than `id` users.
    fn starts_at(&self, id: usize) -> u64 {
        let starts = self.step_starts();
        self.plan
            .steps
            .iter()
            .zip(starts)
            .find(|(&n, _)| n > id)
            .map_or(u64::MAX, |(_, t)| t)
    }

    /// After the think time.
    fn next_due(&self, _intended: u64, now: u64) -> u64 {
        now + nanos(&self.plan.think)
    }

    fn sent(&self, l: &mut RampLocal, _intended: u64, _ready: u64, now: u64, _bytes: usize) {
        if let Some(left) = l.sends.note(now, &l.starts) {
            self.publish(left);
        }
    }

    /// Response time from the send; a reply that reports a failure counts as one.
    fn answered(
        &self,
        _l: &mut RampLocal,
        _intended: u64,
        t0: u64,
        first: u64,
        now: u64,
        r: &crate::client::proto::Reply,
    ) {
        match r.failed {
            None => {
                let gap = (first != 0).then(|| now.saturating_sub(first));
                self.ok(now, now - t0, gap, r.len)
            }
            Some(kind) => self.err(now, kind),
        }
    }

    fn held_rtt(&self, _l: &mut RampLocal, now: u64, rtt_ns: u64) {
        self.held_rtt_at(now, rtt_ns)
    }

    fn failed(&self, _l: &mut RampLocal, now: u64, kind: &str, _in_flight: bool) {
        self.err(now, kind)
    }

    /// Counted in the step whose window holds `now`.
    fn backed_off(&self, _l: &mut RampLocal, now: u64) {
        if let Some(i) = self.step_of(now) {
            self.acc[i]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .backoffs += 1;
        }
    }

    /// The ramp's steps end too (it reads [`Tally::done`]).
    fn abort(&self) {
        self.done.store(true, Relaxed);
    }

    fn finish(&self, l: RampLocal, _in_flight: u64) {
        if let Some(span) = l.sends.current() {
            self.publish(span);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LoopSends;

    /// Steps starting at 100, 200 and 300 ns (the last open-ended).
    const STARTS: [u64; 3] = [100, 200, 300];

    #[test]
    fn sends_are_kept_per_step_and_handed_over_when_a_later_step_begins() {
        let mut s = LoopSends::default();
        assert_eq!(s.current(), None);
        assert_eq!(s.note(110, &STARTS), None);
        assert_eq!(s.note(150, &STARTS), None);
        assert_eq!(s.current(), Some((0, 110, 150)));
        // Into step 1: step 0's span is handed over.
        assert_eq!(s.note(200, &STARTS), Some((0, 110, 150)));
        assert_eq!(s.current(), Some((1, 200, 200)));
        // Over step 2 to past the plan's end: step 1's span, then the last step takes all.
        assert_eq!(s.note(299, &STARTS), None);
        assert_eq!(s.note(5000, &STARTS), Some((1, 200, 299)));
        assert_eq!(s.note(9000, &STARTS), None);
        assert_eq!(s.current(), Some((2, 5000, 9000)));
    }

    #[test]
    fn a_step_without_sends_hands_nothing_over() {
        let mut s = LoopSends::default();
        // The first send is in step 2: steps 0 and 1 sent nothing here.
        assert_eq!(s.note(310, &STARTS), None);
        assert_eq!(s.current(), Some((2, 310, 310)));
    }
}
