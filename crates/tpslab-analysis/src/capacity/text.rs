//! The search's result for people: rates, the calls at a rate, what gave first, the
//! one-sentence headline.

use super::*;

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
