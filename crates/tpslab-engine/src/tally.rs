//! What the users of a ramp share: the plan's clock (which users run when, which step a
//! reply counts in) and each step's tally of response times and failures. The ramp
//! (`ramp.rs`) makes it and reads the steps; the users' loops (`users.rs`) count into it.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use hdrhistogram::Histogram;

use tpslab_plan::ramp::RampPlan;

/// One step's counts.
pub(crate) struct StepAcc {
    /// Response times of the replies in its window, ns.
    pub(crate) hist: Histogram<u64>,
    /// Failures in its window by kind.
    pub(crate) errors: BTreeMap<String, u64>,
}

/// The plan's clock and the steps' counts.
pub(crate) struct Tally<'a> {
    pub(crate) plan: &'a RampPlan,
    /// Set at the end.
    pub(crate) done: AtomicBool,
    /// Measured windows: [start, end) ns per step.
    pub(crate) windows: Vec<(u64, u64)>,
    pub(crate) acc: Vec<Mutex<StepAcc>>,
}

impl Tally<'_> {
    /// Users that run at `t`: those of the step whose warm-up or window holds it (by the
    /// plan's clock, not by when this thread gets to its bookkeeping), the last step's
    /// after its end, none before the first.
    pub(crate) fn users_at(&self, t: u64) -> usize {
        let warmup = self.plan.warmup_ns;
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

    /// A reply at `t` after `rt_ns`: counted in the step whose window holds `t`.
    pub(crate) fn ok(&self, t: u64, rt_ns: u64) {
        if let Some(i) = self.step_of(t) {
            let mut a = self.acc[i].lock().unwrap_or_else(|e| e.into_inner());
            // Above the histogram's 100 s bound counts as 100 s, never as nothing.
            a.hist.saturating_record(rt_ns.max(1));
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
