//! `capacity`'s search and calls, as pure functions of the plan and the steps so far:
//! what a step's figures are ([`figures`], from a UDP run's record), its call ([`judge`]:
//! the generator's self-check first, then the objective), the next rate to try or where
//! the search ends ([`next`]: doubling from the start rate to the first failure, then
//! bisection to the resolution, then repeats at both ends of the bracket), and the
//! sentence that says it ([`headline`]).

use tpslab_plan::capacity::{CapacitySearch, Objective, Slo};
use tpslab_record::capacity::{CapacityRecord, CapacityStep, Conclusion, StepStatus};
use tpslab_record::verdict::Case;
use tpslab_record::RunRecord;

mod judge;
mod text;
pub use judge::*;
pub use text::*;

/// The search's growth factor before the first failure.
pub const GROWTH: f64 = 2.0;
/// The most steps one search runs (whatever its budget): past it, it ends unfinished.
pub const MAX_STEPS: usize = 200;
/// The lowest rate the search tries, pps.
pub const MIN_RATE: f64 = 1.0;
/// Steps a rate's generator must fail before the rate is the generator's limit (when it
/// delivered no higher rate).
pub const INVALID_TO_LIMIT: u32 = 2;
/// Steps the generator may fail at one rate it delivered higher rates than (a busy host):
/// past them, the search ends unfinished rather than try that rate forever.
pub const INVALID_AT_RATE: u32 = 4;

/// The calls at one rate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateTally {
    /// The rate, pps.
    pub rate_pps: f64,
    /// Steps that passed.
    pub pass: u32,
    /// Steps that failed.
    pub fail: u32,
    /// Steps the generator did not deliver.
    pub invalid: u32,
}

impl RateTally {
    /// Steps judged (passed or failed).
    pub fn judged(&self) -> u32 {
        self.pass + self.fail
    }
}

/// The calls by rate, lowest rate first (interrupted steps left out).
pub fn tally(steps: &[CapacityStep]) -> Vec<RateTally> {
    let mut out: Vec<RateTally> = vec![];
    for s in steps {
        let i = match out.iter().position(|t| t.rate_pps == s.rate_pps) {
            Some(i) => i,
            None => {
                out.push(RateTally {
                    rate_pps: s.rate_pps,
                    ..Default::default()
                });
                out.len() - 1
            }
        };
        match s.status {
            StepStatus::Pass => out[i].pass += 1,
            StepStatus::Fail => out[i].fail += 1,
            StepStatus::Invalid => out[i].invalid += 1,
            StepStatus::Interrupted => {}
        }
    }
    out.retain(|t| t.judged() + t.invalid > 0);
    out.sort_by(|a, b| a.rate_pps.total_cmp(&b.rate_pps));
    out
}

/// The bracket so far: (the highest rate below the upper bound that passed every time,
/// the upper bound: the lowest rate that failed, or the lowest the generator could not
/// deliver [`INVALID_TO_LIMIT`] times and delivered no higher rate, whichever is lower;
/// whether that bound is the generator's). A rate the generator missed below one it
/// delivered is a busy host's moment, not its limit: it is tried again.
fn bracket(t: &[RateTally]) -> (Option<RateTally>, Option<RateTally>, bool) {
    let fail = t.iter().find(|r| r.fail > 0).copied();
    let gen = t
        .iter()
        .find(|r| {
            r.invalid >= INVALID_TO_LIMIT
                && !t.iter().any(|x| x.rate_pps >= r.rate_pps && x.judged() > 0)
        })
        .copied();
    let (hi, by_gen) = match (fail, gen) {
        (Some(f), Some(g)) if g.rate_pps < f.rate_pps => (Some(g), true),
        (Some(f), _) => (Some(f), false),
        (None, Some(g)) => (Some(g), true),
        (None, None) => (None, false),
    };
    let lo = t
        .iter()
        .rfind(|r| r.fail == 0 && r.pass > 0 && hi.is_none_or(|h| r.rate_pps < h.rate_pps))
        .copied();
    (lo, hi, by_gen)
}

/// The next step of a search: a rate to try, or its end.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Run a step at this rate, pps.
    Step(f64),
    /// The search is over.
    Done(Conclusion),
}

/// A rate as the search tries it: whole datagrams per second, at least [`MIN_RATE`].
fn whole(r: f64) -> f64 {
    r.round().max(MIN_RATE)
}

/// Where the search goes from `steps`: the start rate first; doubling (capped at the max
/// rate) while every rate passes; halving below a first failure until a rate passes;
/// bisection while the failing rate is more than the resolution above the passing one;
/// then each end of the bracket repeated until it has `repeats` calls (a passing end that
/// fails once stops passing, and the search narrows again below it). A step the generator
/// did not deliver is tried again; twice at one rate, that rate is the generator's limit
/// and the search goes on below it. Ends: a bracket within the resolution, a pass at the
/// max rate, failures down to [`MIN_RATE`] (or the search's `min_rate`), the generator's limit, or (past [`MAX_STEPS`])
/// unfinished.
pub fn next(search: &CapacitySearch, steps: &[CapacityStep]) -> Next {
    let unit = search.unit;
    if steps.len() >= MAX_STEPS {
        return Next::Done(so_far(
            search,
            steps,
            &format!("the step limit of {MAX_STEPS}"),
        ));
    }
    let t = tally(steps);
    let (lo, hi, by_gen) = bracket(&t);
    let judged_at = |r: f64| t.iter().find(|x| x.rate_pps == r).map_or(0, |x| x.judged());
    let pending = |r: f64| match t.iter().find(|x| x.rate_pps == r) {
        Some(x) if x.invalid >= INVALID_AT_RATE => {
            let delivered = t
                .iter()
                .filter(|x| x.judged() > 0)
                .map(|x| x.rate_pps)
                .fold(0.0, f64::max);
            Next::Done(so_far(
                search,
                steps,
                &format!(
                    "the generator did not deliver {} {unit} in {} steps while it delivered {} {unit}: too busy a host to judge that rate",
                    rate_text(r),
                    x.invalid,
                    rate_text(delivered)
                ),
            ))
        }
        _ => Next::Step(r),
    };
    match (lo, hi) {
        (None, None) => pending(whole(search.start_rate.min(search.max_rate))),
        (Some(lo), None) => {
            if lo.rate_pps >= search.max_rate {
                if lo.pass < search.repeats {
                    return pending(lo.rate_pps);
                }
                return Next::Done(Conclusion::AtLeast {
                    sustains_pps: lo.rate_pps,
                });
            }
            pending(whole((lo.rate_pps * GROWTH).min(search.max_rate)))
        }
        (None, Some(hi)) => {
            let below = whole(hi.rate_pps / GROWTH).max(search.min_rate);
            if below >= hi.rate_pps {
                return Next::Done(if by_gen {
                    Conclusion::GeneratorLimited {
                        sustains_pps: None,
                        generator_pps: hi.rate_pps,
                    }
                } else {
                    Conclusion::NothingPasses {
                        fails_pps: hi.rate_pps,
                    }
                });
            }
            pending(below)
        }
        (Some(lo), Some(hi)) => {
            let (l, h) = (lo.rate_pps, hi.rate_pps);
            let mid = whole((l + h) / 2.0);
            if h > l * (1.0 + search.resolution_pct / 100.0) && mid > l && mid < h {
                return pending(mid);
            }
            if lo.pass < search.repeats {
                return pending(l);
            }
            if !by_gen && judged_at(h) < search.repeats {
                return pending(h);
            }
            Next::Done(if by_gen {
                Conclusion::GeneratorLimited {
                    sustains_pps: Some(l),
                    generator_pps: h,
                }
            } else {
                Conclusion::Bracket {
                    sustains_pps: l,
                    fails_pps: h,
                }
            })
        }
    }
}

/// The bracket so far: the highest rate that passed and the lowest rate the server failed
/// (not the generator), each if any, as [`so_far`] gives them.
pub fn bounds_so_far(steps: &[CapacityStep]) -> (Option<f64>, Option<f64>) {
    let (lo, hi, by_gen) = bracket(&tally(steps));
    (
        lo.map(|t| t.rate_pps),
        hi.filter(|_| !by_gen).map(|t| t.rate_pps),
    )
}

/// The best bracket so far, for a search ended early by `why` (the budget, Ctrl-C).
/// An upper bound that is the generator's limit is no rate the server failed: it is
/// said in `why`, and `fails_pps` stays empty.
pub fn so_far(search: &CapacitySearch, steps: &[CapacityStep], why: &str) -> Conclusion {
    let unit = search.unit;
    let (lo, hi, by_gen) = bracket(&tally(steps));
    let why = match hi.filter(|_| by_gen) {
        Some(g) => format!(
            "{why}; the generator could not deliver {} {unit} (no server failure above the rate sustained)",
            rate_text(g.rate_pps)
        ),
        None => why.to_string(),
    };
    Conclusion::Unfinished {
        sustains_pps: lo.map(|t| t.rate_pps),
        fails_pps: hi.filter(|_| !by_gen).map(|t| t.rate_pps),
        why,
    }
}

/// How the reason of a search stopped at its first step because nothing listens on the
/// target begins (`tpslab capacity` then exits 2 with it).
pub const NO_LISTENER: &str = "no listener";

/// The reason a search stopped at its first step because nothing listens on the target
/// (an [`Conclusion::Unfinished`] after one step whose reason begins with
/// [`NO_LISTENER`]); None otherwise.
pub fn stopped_no_listener(rec: &CapacityRecord) -> Option<&str> {
    match &rec.conclusion {
        Conclusion::Unfinished { why, .. }
            if rec.steps.len() == 1 && why.starts_with(NO_LISTENER) =>
        {
            Some(why)
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
