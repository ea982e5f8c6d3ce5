//! What a capacity record shows in HTML: the result and the verdict at the first failing
//! rate, then each search's path (its steps' p99 and loss against their rate).

use super::super::plot::{Chart, Line, PALETTE};
use super::super::{Page, Section, Verdict};
use super::figure;

/// A capacity search: the result and the verdict at the first failing rate, then the
/// search's path (each step's p99 and loss against its rate, the objective's bounds as
/// dashed lines, the rate sustained marked).
pub(in crate::html) fn capacity(
    p: &mut Page,
    c: &tpslab_record::capacity::CapacityRecord,
) -> Result<(), String> {
    use tpslab_analysis::capacity::headline;
    use tpslab_record::capacity::Conclusion;
    let mut evidence: Vec<super::super::Evidence> = vec![];
    let mut recommendations = vec![];
    if let Some(d) = &c.boundary {
        evidence.push(super::super::Evidence {
            text: d.headline.clone(),
            source: "the verdict of the first failing step at the lowest failing rate".into(),
        });
        evidence.extend(d.evidence.iter().map(|e| super::super::Evidence {
            text: e.text.clone(),
            source: e.source.clone(),
        }));
        recommendations.extend(d.recommendations.iter().map(|r| super::super::Advice {
            what: r.what.clone(),
            why: r.why.clone(),
            lines: r.lines.clone(),
        }));
    }
    p.verdict = Some(Verdict {
        label: match c.conclusion {
            Conclusion::GeneratorLimited { .. } => "GENERATOR LIMIT",
            Conclusion::Unfinished { .. } => "CAPACITY (unfinished)",
            _ => "CAPACITY",
        }
        .into(),
        headline: headline(c),
        detail: Some(match &c.retry {
            None => format!("objective {}", c.plan.search.slo),
            Some(r) => format!(
                "objective {}; with the fix ({}): {}{}",
                c.plan.search.slo,
                r.applied.join("; "),
                headline(&r.search),
                c.retry_change_pct()
                    .map_or(String::new(), |p| format!(" ({p:+.0} % against as it was)"))
            ),
        }),
        evidence,
        recommendations,
        ok: false,
    });
    if c.interrupted {
        p.alerts
            .push("the search was interrupted: the result is the best bracket so far".into());
    }
    if c.retry.as_ref().is_some_and(|r| r.search.interrupted) {
        p.alerts.push(
            "the search with the fix was interrupted: its result is the best bracket so far".into(),
        );
    }
    p.sections
        .extend(capacity_search(c, "The search: each step against its rate"));
    if let Some(r) = &c.retry {
        p.sections.extend(capacity_search(
            &r.search,
            &format!("The search with the fix ({})", r.applied.join("; ")),
        ));
    }
    Ok(())
}

/// One capacity search's path under `title` (each step's p99 and loss against its rate,
/// the objective's bounds as dashed lines, the rate sustained marked); None without a
/// step that passed or failed.
fn capacity_search(c: &tpslab_record::capacity::CapacityRecord, title: &str) -> Option<Section> {
    use tpslab_plan::capacity::{Objective, Quantile};
    use tpslab_record::capacity::{Conclusion, StepStatus};
    let rate_axis = format!("rate ({})", c.plan.search.unit);
    let mut steps: Vec<_> = c
        .steps
        .iter()
        .filter(|s| matches!(s.status, StepStatus::Pass | StepStatus::Fail))
        .collect();
    steps.sort_by(|a, b| a.rate_pps.total_cmp(&b.rate_pps));
    let x_max = steps.iter().map(|s| s.rate_pps).fold(0.0, f64::max);
    let mut s = Section::new(title);
    s.columns = 2;
    let mut lat = Chart::new(
        "p99",
        "p99 latency against the rate tried",
        &rate_axis,
        "ms",
    );
    lat.y_fmt = |v| format!("{v:.2}");
    let mut loss = Chart::new("loss", "Loss against the rate tried", &rate_axis, "%");
    loss.y_fmt = |v| format!("{v:.2}");
    for (name, st, colour) in [("pass", StepStatus::Pass, 2), ("fail", StepStatus::Fail, 1)] {
        let pick = |f: &dyn Fn(&tpslab_record::capacity::CapacityStep) -> Option<f64>| {
            steps
                .iter()
                .filter(|x| x.status == st)
                .filter_map(|x| f(x).map(|v| (x.rate_pps, v)))
                .collect::<Vec<_>>()
        };
        let l = pick(&|x| x.latency_ns.map(|l| l[2] as f64 / 1e6));
        if !l.is_empty() {
            lat.lines.push(
                Line::new(
                    &format!("p99, steps that {name}ed"),
                    "latency from the intended send time (coordinated omission corrected)",
                    l,
                    PALETTE[colour],
                )
                .markers(),
            );
        }
        let o = pick(&|x| x.loss_pct);
        if !o.is_empty() {
            loss.lines.push(
                Line::new(
                    &format!("loss, steps that {name}ed"),
                    "the measured window's requests not answered",
                    o,
                    PALETTE[colour],
                )
                .markers(),
            );
        }
    }
    for o in &c.plan.search.slo.objectives {
        match *o {
            Objective::Latency {
                quantile: Quantile::P99,
                limit,
                ..
            } => lat.lines.push(
                Line::new(
                    &format!("objective {o}"),
                    "--slo",
                    vec![
                        (0.0, limit.as_nanos() as f64 / 1e6),
                        (x_max, limit.as_nanos() as f64 / 1e6),
                    ],
                    PALETTE[0],
                )
                .dashed(),
            ),
            Objective::Loss { limit_pct, .. } => loss.lines.push(
                Line::new(
                    &format!("objective {o}"),
                    "--slo",
                    vec![(0.0, limit_pct), (x_max, limit_pct)],
                    PALETTE[0],
                )
                .dashed(),
            ),
            _ => {}
        }
    }
    if let Conclusion::Bracket { sustains_pps, .. } = c.conclusion {
        lat.marks.push((
            sustains_pps,
            format!("sustains {sustains_pps:.0} {}", c.plan.search.unit),
        ));
    }
    if !lat.lines.is_empty() {
        s.items.push(figure(&lat));
    }
    if !loss.lines.is_empty() {
        s.items.push(figure(&loss));
    }
    (!s.items.is_empty()).then_some(s)
}
