//! `capacity`'s search and calls, as pure functions of the plan and the steps so far:
//! what a step's figures are ([`figures`], from a UDP run's record), its call ([`judge`]:
//! the generator's self-check first, then the objective), the next rate to try or where
//! the search ends ([`next`]: doubling from the start rate to the first failure, then
//! bisection to the resolution, then repeats at both ends of the bracket), and the
//! sentence that says it ([`headline`]).

pub use tpslab_record::capacity::{
    BuiltinTcpServer, CapacityLoad, CapacityPlan, CapacityRecord, CapacityRetry, CapacitySearch,
    CapacityStep, Conclusion, HttpStep, Objective, Quantile, RateUnit, Slo, StepStatus,
    StepVerdict, TcpStep,
};
use tpslab_record::verdict::Case;
use tpslab_record::RunRecord;

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

/// What a step measured, for its call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepFigures {
    /// The rate intended, pps.
    pub rate_pps: f64,
    /// What the generator sent, pps.
    pub achieved_pps: f64,
    /// Answered per second in the measured window.
    pub answered_pps: f64,
    /// Latency from the intended send, ns: p50, p90, p99, p99.9, max (None: no reply).
    pub latency_ns: Option<[u64; 5]>,
    /// Latency from the actual send, ns, in the same order, when the generator's lateness
    /// is its own (UDP: a send never waits for the server, so the time between the
    /// intended and the actual send is the generator's or its host's); None otherwise.
    pub latency_actual_ns: Option<[u64; 5]>,
    /// Loss in the window, % (None without replies).
    pub loss_pct: Option<f64>,
    /// Refused sends, % of attempted.
    pub errors_pct: f64,
    /// The generator's self-check held (kept its schedule, lost nothing itself).
    pub gen_valid: bool,
    /// Why it did not.
    pub gen_reasons: Vec<String>,
    /// The step was stopped before its end.
    pub interrupted: bool,
}

/// A UDP run's figures for a step intended at `rate_pps` (None when the run has no
/// generator report).
pub fn figures(run: &RunRecord, rate_pps: f64) -> Option<StepFigures> {
    let g = run.generator.as_ref()?;
    let five = |l: &tpslab_record::stats::LatencySummary| {
        (l.count > 0).then_some([l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns])
    };
    Some(StepFigures {
        rate_pps,
        achieved_pps: g.achieved_pps,
        answered_pps: g.tps,
        latency_ns: five(&g.latency_intended),
        latency_actual_ns: five(&g.latency_actual),
        loss_pct: g.window_loss_pct,
        errors_pct: if g.attempted == 0 {
            0.0
        } else {
            g.send_failed as f64 * 100.0 / g.attempted as f64
        },
        gen_valid: g.valid,
        gen_reasons: g.invalid_reasons.clone(),
        interrupted: run.interrupted,
    })
}

/// An HTTP step's figures (`load http`'s record of its window) for a step intended at
/// `rate_pps` requests/s: achieved, the requests written over the window; answered,
/// final replies (any status) a second; latency from the intended send (corrected);
/// loss, requests written that got no reply (timed out, or outstanding at the end), % of
/// those written; errors, failed connects and requests (refused, reset, closed, TLS,
/// protocol) and 4xx/5xx replies, % of those intended (at most 100). A request can wait
/// for its connection's previous reply (the server's doing), so only sends late with an
/// idle, ready connection (`behind`) are the generator's: more than 1 % of them, and
/// the step is not evidence.
pub fn figures_http(
    rec: &tpslab_record::load_http::LoadHttpRecord,
    rate_pps: f64,
    interrupted: bool,
) -> StepFigures {
    let secs = rec.plan.duration.as_secs_f64();
    open_figures(
        &rec.result,
        secs,
        rec.sent_rate(interrupted),
        rate_pps,
        interrupted,
    )
}

/// A TCP step's figures (the open loop's counts over a window of `window`) for a step
/// intended at `rate_pps` requests/s: as [`figures_http`]'s, every framed reply answered
/// (a framed reply has no status: its count is `status.other`); errors, failed connects
/// (refused, reset, timed out) and requests (reset, closed by the server, a frame not of
/// the framing), % of those intended. Achieved: over the window, or when `interrupted`
/// over the gaps between the first and last request sent.
pub fn figures_tcp(
    r: &tpslab_record::load_http::LoadHttpResult,
    window: std::time::Duration,
    rate_pps: f64,
    interrupted: bool,
) -> StepFigures {
    let secs = window.as_secs_f64();
    let span = r.last_sent_s - r.first_sent_s;
    let sent_rate = if !interrupted {
        r.sent as f64 / secs.max(1e-9)
    } else if r.sent >= 2 && span > 0.0 {
        (r.sent - 1) as f64 / span
    } else {
        0.0
    };
    open_figures(r, secs, sent_rate, rate_pps, interrupted)
}

/// The figures of an open loop's counts `r` over `secs`, sent at `sent_rate` (see
/// [`figures_http`]).
fn open_figures(
    r: &tpslab_record::load_http::LoadHttpResult,
    secs: f64,
    sent_rate: f64,
    rate_pps: f64,
    interrupted: bool,
) -> StepFigures {
    let secs = secs.max(1e-9);
    let l = &r.corrected;
    let lost = r.errors.timeout + r.unanswered;
    let failed = (r.errors.total() - r.errors.timeout)
        + r.connect_errors.total()
        + r.status.s4xx
        + r.status.s5xx;
    let mut gen_reasons = vec![];
    if r.sent > 0 && r.behind as f64 > 0.01 * r.sent as f64 {
        gen_reasons.push(format!(
            "the generator sent {} of {} requests late with their connection idle and ready (up to {}; allowed: 1 %)",
            r.behind,
            r.sent,
            latency_text(r.behind_max_ns as f64)
        ));
    }
    StepFigures {
        rate_pps,
        achieved_pps: sent_rate,
        answered_pps: r.status.total() as f64 / secs,
        latency_ns: (l.count > 0).then_some([l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns]),
        latency_actual_ns: None,
        loss_pct: (r.sent > 0).then(|| lost as f64 * 100.0 / r.sent as f64),
        errors_pct: if r.intended == 0 {
            0.0
        } else {
            (failed as f64 * 100.0 / r.intended as f64).min(100.0)
        },
        gen_valid: gen_reasons.is_empty(),
        gen_reasons,
        interrupted,
    }
}

/// A latency for people: `850 us`, `2.40 ms`, `31 ms`, `1.20 s`.
pub fn latency_text(ns: f64) -> String {
    if ns < 1e6 {
        format!("{:.0} us", ns / 1e3)
    } else if ns < 1e7 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns < 1e9 {
        format!("{:.0} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A percentage for people: `0.01 %`, `2.3 %`, `100 %`.
fn pct_text(v: f64) -> String {
    if v == 0.0 || v >= 10.0 {
        format!("{v:.0} %")
    } else if v >= 1.0 {
        format!("{v:.1} %")
    } else {
        format!("{v:.2} %")
    }
}

/// The figure an objective bounds, from a step's figures (ns or %); None when not
/// measured (no reply to time, no replies to count).
pub fn value(o: &Objective, f: &StepFigures) -> Option<f64> {
    match o {
        Objective::Latency { quantile, .. } => {
            let i = tpslab_record::capacity::Quantile::ALL
                .iter()
                .position(|q| q == quantile)?;
            f.latency_ns.map(|l| l[i] as f64)
        }
        Objective::Loss { .. } => f.loss_pct,
        Objective::Errors { .. } => Some(f.errors_pct),
        Objective::Rate { .. } => (f.rate_pps > 0.0).then(|| f.answered_pps * 100.0 / f.rate_pps),
    }
}

/// Why `o` did not hold at `v`: `p99 31 ms > 20 ms`, `loss 2.3 % >= 0.1 %`, `rate 95 % <
/// 99 %`, `p99 not measured (no reply)`.
fn broken(o: &Objective, v: Option<f64>) -> String {
    let Some(v) = v else {
        return format!("{} not measured (no reply)", o.name());
    };
    match *o {
        Objective::Latency { limit, .. } => format!(
            "{} {} {} {}",
            o.name(),
            latency_text(v),
            if v > limit.as_nanos() as f64 {
                ">"
            } else {
                ">="
            },
            latency_text(limit.as_nanos() as f64)
        ),
        Objective::Loss { limit_pct, .. } | Objective::Errors { limit_pct, .. } => format!(
            "{} {} {} {}",
            o.name(),
            pct_text(v),
            if v > limit_pct { ">" } else { ">=" },
            pct_text(limit_pct)
        ),
        Objective::Rate { min_pct, .. } => format!(
            "rate {} of intended {} {}",
            pct_text(v),
            if v < min_pct { "<" } else { "<=" },
            pct_text(min_pct)
        ),
    }
}

/// A step's call and why: interrupted first (not counted); then the generator's
/// self-check (a generator that did not deliver is INVALID, never the server failing);
/// then every objective (FAIL naming each that did not hold); a step that broke only
/// latency bounds, each of which holds from the actual send time where the lateness is
/// the generator's own ([`StepFigures::latency_actual_ns`]), is INVALID: the generator
/// sent late, the server answered within the objective; else pass.
pub fn judge(slo: &Slo, f: &StepFigures) -> (StepStatus, Vec<String>) {
    if f.interrupted {
        return (
            StepStatus::Interrupted,
            vec!["stopped before its end".into()],
        );
    }
    if !f.gen_valid {
        let mut why = f.gen_reasons.clone();
        if why.is_empty() {
            why.push("the generator's self-check failed".into());
        }
        return (StepStatus::Invalid, why);
    }
    let why: Vec<String> = slo
        .objectives
        .iter()
        .filter_map(|o| {
            let v = value(o, f);
            (!o.holds(v)).then(|| broken(o, v))
        })
        .collect();
    if let Some(late) = sent_late(slo, f) {
        return (StepStatus::Invalid, vec![late]);
    }
    if why.is_empty() {
        (StepStatus::Pass, why)
    } else {
        (StepStatus::Fail, why)
    }
}

/// Why a step that broke only latency bounds is the generator's: each holds from the
/// actual send time, where the lateness is the generator's own (`p99 39 ms from the
/// intended send time, 2.10 ms from the actual send: the generator sent late ...`);
/// None when another objective broke, none did, or one fails from the actual send too.
fn sent_late(slo: &Slo, f: &StepFigures) -> Option<String> {
    let actual = StepFigures {
        latency_ns: Some(f.latency_actual_ns?),
        ..f.clone()
    };
    if !latency_only(slo, f) {
        return None;
    }
    let mut parts = vec![];
    for o in slo.objectives.iter().filter(|o| !o.holds(value(o, f))) {
        let (Some(intended), Some(sent)) = (value(o, f), value(o, &actual)) else {
            return None;
        };
        if !o.holds(Some(sent)) {
            return None;
        }
        parts.push(format!(
            "{} {} from the intended send time, {} from the actual send",
            o.name(),
            latency_text(intended),
            latency_text(sent)
        ));
    }
    Some(format!(
        "{}: the generator sent late, not the server (it answered within the objective from the actual send)",
        parts.join("; ")
    ))
}

/// Whether every objective the step broke is a latency bound (a step failed on latency
/// alone); false when none broke.
pub fn latency_only(slo: &Slo, f: &StepFigures) -> bool {
    let mut broken = slo
        .objectives
        .iter()
        .filter(|o| !o.holds(value(o, f)))
        .peekable();
    broken.peek().is_some() && broken.all(|o| matches!(o, Objective::Latency { .. }))
}

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

/// A rate for people: `41,000 pps` style grouping (whole datagrams per second).
pub fn rate_text(pps: f64) -> String {
    let n = pps.round().max(0.0) as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `40,000 passes 3/3`, `42,000 fails 3/3: p99 31 ms > 20 ms` (the first failing step's
/// reasons), `50,000 INVALID 2/2: ...`.
fn calls_at(rec: &CapacityRecord, rate: f64) -> String {
    let t = tally(&rec.steps);
    let Some(r) = t.iter().find(|x| x.rate_pps == rate) else {
        return rate_text(rate);
    };
    let first = |st: StepStatus| {
        rec.steps
            .iter()
            .find(|s| s.rate_pps == rate && s.status == st)
            .map(|s| s.why.join(", "))
            .unwrap_or_default()
    };
    if r.fail > 0 {
        format!(
            "{} fails {}/{}: {}",
            rate_text(rate),
            r.fail,
            r.judged(),
            first(StepStatus::Fail)
        )
    } else if r.pass > 0 {
        format!("{} passes {}/{}", rate_text(rate), r.pass, r.judged())
    } else {
        format!(
            "{} INVALID {}/{}: {}",
            rate_text(rate),
            r.invalid,
            r.invalid,
            first(StepStatus::Invalid)
        )
    }
}

/// What gave first, from the verdict at the boundary: `the socket receive buffer (...)`;
/// latency alone when nothing was dropped; None without a failing step.
pub fn first_to_give(rec: &CapacityRecord) -> Option<String> {
    let d = rec.boundary.as_ref()?;
    Some(match d.case {
        Case::NoLoss if d.layer == "none" => {
            "latency, with nothing dropped (the verdict rules name no layer that lost datagrams)"
                .into()
        }
        Case::GeneratorInvalid => "the generator (its step is not evidence)".into(),
        // A TCP or HTTP step no rule of `capacity_stream` named a layer for.
        Case::Unexplained if d.layer == "none named" => {
            "no layer named (no count read at the first failing rate was enough to break the objective; the verdict says what was read)".into()
        }
        _ => d.layer.clone(),
    })
}

/// The search's result in one sentence: `sustains 40,000 pps (40,000 passes 3/3; 42,000
/// fails 3/3: p99 31 ms > 20 ms); first to give: the socket receive buffer`; or that the
/// generator was the limit, that the max rate passed, that nothing passed, or the best
/// bracket of a search ended early.
pub fn headline(rec: &CapacityRecord) -> String {
    let unit = rec.plan.search.unit;
    let give = first_to_give(rec)
        .map(|g| format!("; first to give: {g}"))
        .unwrap_or_default();
    match &rec.conclusion {
        Conclusion::Bracket {
            sustains_pps,
            fails_pps,
        } => format!(
            "sustains {} {unit} ({}; {}){give}",
            rate_text(*sustains_pps),
            calls_at(rec, *sustains_pps),
            calls_at(rec, *fails_pps)
        ),
        Conclusion::AtLeast { sustains_pps } => format!(
            "sustains at least {} {unit}, the --max-rate ({}): the boundary is above it",
            rate_text(*sustains_pps),
            calls_at(rec, *sustains_pps)
        ),
        Conclusion::NothingPasses { fails_pps } => format!(
            "sustains none of the rates tried ({}){give}",
            calls_at(rec, *fails_pps)
        ),
        Conclusion::GeneratorLimited {
            sustains_pps,
            generator_pps,
        } => format!(
            "the GENERATOR was the limit, not the server: it could not deliver {} {unit} ({}); {}",
            rate_text(*generator_pps),
            calls_at(rec, *generator_pps),
            match sustains_pps {
                Some(s) => format!(
                    "the server sustains at least {} {unit} ({})",
                    rate_text(*s),
                    calls_at(rec, *s)
                ),
                None => "no rate was measured".into(),
            }
        ),
        Conclusion::Unfinished {
            sustains_pps,
            fails_pps,
            why,
        } => format!(
            "UNFINISHED ({why}): {}{}{give}",
            match sustains_pps {
                Some(s) => format!("sustains {} {unit} ({})", rate_text(*s), calls_at(rec, *s)),
                None => "no rate passed".into(),
            },
            match fails_pps {
                Some(f) => format!("; {}", calls_at(rec, *f)),
                None => "; no rate failed".into(),
            }
        ),
    }
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
