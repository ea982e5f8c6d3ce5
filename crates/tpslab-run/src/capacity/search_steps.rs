//! One capacity search's loop: a step at each rate the search gives, each judged and, when
//! it fails, diagnosed by the verdict rules of its kind (UDP's from its run, a stream's
//! from its facts and ledger).

use super::{no_listener, queued, run_step, step_line, StepEvidence, Watchdog};
use crate::Ctx;
use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tpslab_analysis::capacity::{self as search, rate_text, Next};
use tpslab_analysis::verdict::diagnose;
use tpslab_engine::host::probe::probe_truesize;
use tpslab_plan::capacity::CapacityPlan;
use tpslab_record::buffer::TruesizeProbe;
use tpslab_record::capacity::{CapacityRecord, CapacityStep, Conclusion, StepStatus, StepVerdict};
use tpslab_record::rt_ledger::RtLedger;
use tpslab_record::verdict::Diagnosis;

/// One search: one step (`run_step`) at each rate [`search::next`] gives, until it is
/// done; no step starts that would end after `plan.search.budget` (a step still running
/// then is stopped, marked interrupted and not counted), and `ctx.stop` ends the search
/// after its current step's interruption with the best bracket so far. Each step is
/// reported on `ctx.progress` as it ends, its phase named `label` and its number.
///
/// Returns the search's record. Errors: the engine's on the first step (the target
/// cannot be reached or found, a bad `--pid`); on a later step the search ends there,
/// unfinished, with the error as its reason.
pub(super) fn search(plan: &CapacityPlan, ctx: &Ctx, label: &str) -> Result<CapacityRecord> {
    let t0 = Instant::now();
    let budget = plan.search.budget;
    let deadline = t0 + budget;
    let mut steps: Vec<CapacityStep> = vec![];
    // The verdict of the first failing step at each rate.
    let mut verdicts: Vec<(f64, Diagnosis)> = vec![];
    let mut environment = None;
    let base = plan.min_budget();
    let mut longest = Duration::ZERO;
    // The server's threads parked in a lock wait at the first step with a ledger (a
    // runtime's helpers): never charged as requests queued on a lock.
    let mut parked: Option<std::collections::BTreeSet<u32>> = None;
    // The charge per datagram (truesize) a socket buffer's size is counted in: what the
    // buffer verdict's fix is sized by. A probe that fails leaves the verdict unsized.
    let probe = plan
        .load
        .udp()
        .and_then(|r| probe_truesize(r.load.datagram_len(), None).ok());
    let conclusion = loop {
        if ctx.stopped() {
            break search::so_far(&plan.search, &steps, "interrupted");
        }
        let rate = match search::next(&plan.search, &steps) {
            Next::Step(r) => r,
            Next::Done(c) => break c,
        };
        // A plan is a promise: no step starts that would not end within the budget.
        let expect = base.max(longest);
        if t0.elapsed() + expect > budget {
            break search::so_far(
                &plan.search,
                &steps,
                &format!("the budget of {}", humantime::format_duration(budget)),
            );
        }
        let stop = Arc::new(AtomicBool::new(false));
        let started_s = t0.elapsed().as_secs_f64();
        let ran = {
            let _dog = Watchdog::start(ctx, stop.clone(), deadline);
            ctx.phase(
                &format!(
                    "{label} {}: {} {}",
                    steps.len() + 1,
                    rate_text(rate),
                    plan.search.unit
                ),
                plan.step_time().as_secs_f64(),
                || run_step(plan, rate, &stop, ctx),
            )
        };
        // An error on the first step is the command's (the target cannot be reached or
        // found); later (a server that crashed under load, a --pid gone) the search ends
        // with the steps it has, and says why.
        let (mut f, evidence) = match ran {
            Ok(r) => r,
            Err(e) if steps.is_empty() => return Err(e),
            Err(e) => {
                break search::so_far(
                    &plan.search,
                    &steps,
                    &format!(
                        "the step at {} {} failed to run: {e}",
                        rate_text(rate),
                        plan.search.unit
                    ),
                )
            }
        };
        let elapsed = t0.elapsed().as_secs_f64() - started_s;
        longest = longest.max(Duration::from_secs_f64(elapsed));
        environment.get_or_insert_with(|| match &evidence {
            StepEvidence::Udp(rec) => rec.environment.clone(),
            StepEvidence::Stream(..) => tpslab_engine::host::env::environment(),
        });
        f.interrupted |= stop.load(Relaxed);
        let timing = (started_s, elapsed);
        let step = judged_step(
            plan,
            rate,
            &f,
            &evidence,
            timing,
            probe.as_ref(),
            &mut parked,
            &mut verdicts,
        );
        let nobody = if steps.is_empty() {
            no_listener(&step, &evidence)
        } else {
            None
        };
        ctx.progress
            .line(&step_line(steps.len() + 1, &step, plan.search.unit));
        steps.push(step);
        ctx.progress.capacity_steps(&steps);
        // Nothing listens: lower rates would only find it again.
        if let Some(why) = nobody {
            break search::so_far(&plan.search, &steps, &why);
        }
    };
    let interrupted = ctx.stopped();
    let boundary = boundary(&conclusion, &steps, &verdicts);
    Ok(CapacityRecord {
        plan: plan.clone(),
        steps,
        conclusion,
        boundary,
        interrupted,
        environment: environment.unwrap_or_else(tpslab_engine::host::env::environment),
        notes: vec![],
        retry: None,
    })
}

/// The step at `rate` judged against the objectives from its figures `f`: its ledger (a
/// stream step's, the server's threads `parked` at the first step with one left out), its
/// verdict when it failed (the first failing step's diagnosis at each rate kept in
/// `verdicts`), and `timing`: when it started after the search's start and how long it
/// ran, seconds.
#[allow(clippy::too_many_arguments)]
fn judged_step(
    plan: &CapacityPlan,
    rate: f64,
    f: &search::StepFigures,
    evidence: &StepEvidence,
    timing: (f64, f64),
    probe: Option<&TruesizeProbe>,
    parked: &mut Option<std::collections::BTreeSet<u32>>,
    verdicts: &mut Vec<(f64, Diagnosis)>,
) -> CapacityStep {
    let (status, why) = search::judge(&plan.search.slo, f);
    let ledger = match evidence {
        StepEvidence::Stream(_, Some(s)) => {
            let p = parked.get_or_insert_with(|| tpslab_analysis::rt_ledger::parked(s));
            tpslab_analysis::rt_ledger::open_loop(s, p)
        }
        _ => None,
    };
    // The verdict rules read a UDP run's ledger; an HTTP step has none (its failing
    // objective is its evidence).
    let verdict = (status == StepStatus::Fail).then(|| {
        let d = step_diagnosis(plan, rate, f, evidence, probe, ledger.as_ref());
        let v = StepVerdict {
            case: d.case,
            layer: d.layer.clone(),
            headline: d.headline.clone(),
        };
        if !verdicts.iter().any(|(r, _)| *r == rate) {
            verdicts.push((rate, d));
        }
        v
    });
    CapacityStep {
        rate_pps: rate,
        achieved_pps: f.achieved_pps,
        answered_pps: f.answered_pps,
        latency_ns: f.latency_ns,
        loss_pct: f.loss_pct,
        errors_pct: f.errors_pct,
        status,
        why,
        verdict,
        started_s: timing.0,
        elapsed_s: timing.1,
        ledger,
    }
}

/// The diagnosis of a failing step at `rate` with figures `f`: a UDP step's by the
/// verdict rules on its run (with the datagram charge `probe`, and how the latency
/// objective broke), a stream step's by its facts against what broke, with its
/// response-time `ledger` when it has one.
fn step_diagnosis(
    plan: &CapacityPlan,
    rate: f64,
    f: &search::StepFigures,
    evidence: &StepEvidence,
    probe: Option<&TruesizeProbe>,
    ledger: Option<&RtLedger>,
) -> Diagnosis {
    match evidence {
        StepEvidence::Udp(rec) => {
            let facts = tpslab_analysis::verdict::facts_of(rec, probe);
            let mut d = diagnose(&facts, probe);
            queued(&mut d, &facts, search::latency_only(&plan.search.slo, f));
            d
        }
        StepEvidence::Stream(facts, step) => {
            use tpslab_analysis::capacity_stream as stream;
            // The counts are judged against what broke (a p99 is broken by 1 %
            // of requests, not by one reset).
            let broken = stream::broken(&plan.search.slo, f);
            let mut d = stream::diagnose(&stream::StreamFacts {
                broken,
                ..(**facts).clone()
            });
            if let Some(l) = ledger {
                let at = format!("{} {}", rate_text(rate), plan.search.unit);
                let gaps = step.as_ref().and_then(|s| s.reply_gaps);
                tpslab_analysis::capacity_ledger::with_ledger(&mut d, l, gaps.as_ref(), &at);
            }
            d
        }
    }
}

/// The layer that gave first: the diagnosis at the lowest failing rate of `conclusion`
/// (else of the steps' tally), from `verdicts` (the first failing step's at each rate).
fn boundary(
    conclusion: &Conclusion,
    steps: &[CapacityStep],
    verdicts: &[(f64, Diagnosis)],
) -> Option<Diagnosis> {
    let lowest_fail = match conclusion {
        Conclusion::Bracket { fails_pps, .. } | Conclusion::NothingPasses { fails_pps } => {
            Some(*fails_pps)
        }
        _ => search::tally(steps)
            .iter()
            .find(|t| t.fail > 0)
            .map(|t| t.rate_pps),
    };
    lowest_fail.and_then(|r| {
        verdicts
            .iter()
            .find(|(x, _)| *x == r)
            .map(|(_, d)| d.clone())
    })
}
