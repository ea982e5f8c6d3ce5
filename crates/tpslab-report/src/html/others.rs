//! What ramp and sweep records show in HTML; tcp and capacity records in its submodules.

use super::plot::{self, draw, Chart, Line, PALETTE};
use super::{Bar, Item, Page, Section, Segment, Verdict};
use tpslab_record::{RampReport, SweepReport};

mod capacity;
mod tcp_flows;
pub(super) use capacity::capacity;
pub(super) use tcp_flows::tcp;

/// Whole numbers (users, cells): no label between them.
pub(super) fn whole(x: f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

/// Categories (sweep cells, compared records) at x = 0, 1, ...: each estimate's mean as
/// a dot (`mean`: name, source) and its 95 % interval as a whisker.
pub(super) fn intervals(
    c: &mut Chart,
    est: &[Option<tpslab_record::estimate::Estimate>],
    mean: (&str, &str),
    whisker_source: &str,
) {
    c.x_fmt = whole;
    let (mut means, mut named) = (vec![], false);
    for (i, e) in est.iter().enumerate() {
        let Some(e) = e else { continue };
        means.push((i as f64, e.mean));
        if e.ci_lo.is_finite() && e.ci_hi.is_finite() {
            let mut w = Line::new(
                "95 % interval of the mean",
                whisker_source,
                vec![(i as f64, e.ci_lo), (i as f64, e.ci_hi)],
                PALETTE[6],
            );
            // One legend entry for all the whiskers.
            w.in_legend = !named;
            named = true;
            c.lines.push(w);
        }
    }
    c.lines
        .insert(0, Line::new(mean.0, mean.1, means, PALETTE[0]).dots());
    c.x_range = Some((-0.5, est.len() as f64 - 0.5));
}

pub(super) fn figure(c: &Chart) -> Item {
    match draw(c) {
        Ok(f) => Item::Figure(f),
        Err(e) => Item::List {
            title: c.title.clone(),
            items: vec![format!("not drawn: {e}")],
        },
    }
}

/// Ramp: TPS against users with the USL curve and the knee, p50/p99 against users,
/// thread states per step.
pub(super) fn ramp(p: &mut Page, r: &RampReport) -> Result<(), String> {
    let (run, a) = (&r.run, &r.analysis);
    p.verdict = Some(Verdict {
        label: "VERDICT".into(),
        headline: a.verdict.trim_start_matches("VERDICT: ").to_string(),
        detail: None,
        evidence: a
            .lines
            .iter()
            .map(|l| super::Evidence {
                text: l.clone(),
                source: String::new(),
            })
            .collect(),
        recommendations: vec![],
        ok: false,
    });
    if run.interrupted {
        p.alerts
            .push("the ramp was interrupted: its last step is partial".into());
    }
    let users = |f: &dyn Fn(&tpslab_record::ramp::StepResult) -> f64| -> Vec<(f64, f64)> {
        run.steps.iter().map(|s| (s.users as f64, f(s))).collect()
    };
    let mut s = Section::new("Throughput and response time against users");
    s.columns = 2;
    let mut c = Chart::new("tps", "TPS against users", "users (N)", "TPS");
    c.x_fmt = whole;
    c.lines.push(
        Line::new(
            "TPS (measured)",
            "completed requests / measured time of each step",
            users(&|s| s.tps),
            PALETTE[0],
        )
        .markers(),
    );
    if let Some(f) = &a.usl {
        let nmax = run.steps.iter().map(|s| s.users).max().unwrap_or(1).max(2) as f64;
        let curve = (0..=100)
            .map(|i| {
                let n = 1.0 + (nmax - 1.0) * i as f64 / 100.0;
                (n, tpslab_analysis::usl::predict(f, n))
            })
            .collect();
        c.lines.push(
            Line::new(
                &format!("USL fit: sigma {:.3}, kappa {:.5}", f.sigma, f.kappa),
                "Universal Scalability Law fitted to the steps (least squares)",
                curve,
                PALETTE[0],
            )
            .dashed(),
        );
    }
    if let Some(k) = a.knee_index.and_then(|k| run.steps.get(k)) {
        c.marks.push((
            k.users as f64,
            format!("knee: {} user(s), {:.0} TPS", k.users, k.tps),
        ));
    }
    s.items.push(figure(&c));
    let mut c = Chart::new("response", "Response time against users", "users (N)", "ms");
    c.x_fmt = whole;
    c.y_fmt = |v| format!("{v:.2}");
    for (name, colour, f) in [
        (
            "p50",
            2,
            (|s: &tpslab_record::ramp::StepResult| s.response.p50_ns) as fn(&_) -> u64,
        ),
        ("p99", 1, |s| s.response.p99_ns),
    ] {
        c.lines.push(
            Line::new(
                &format!("{name} response"),
                "HDR histogram of each step's request-to-reply times",
                users(&|s| f(s) as f64 / 1e6),
                PALETTE[colour],
            )
            .markers(),
        );
    }
    s.items.push(figure(&c));
    p.sections.push(s);
    let bars = thread_bars(&run.steps);
    if !bars.is_empty() {
        let mut s = Section::new("Where the server's threads were, per step");
        s.items.push(Item::Bars {
            id: "threads".into(),
            title: "thread states".into(),
            bars,
        });
        p.sections.push(s);
    }
    Ok(())
}

/// One bar per ramp step of where the server's threads were (the working threads' states
/// when threads were sampled one by one, idle ones left out), for the steps with samples.
fn thread_bars(steps: &[tpslab_record::ramp::StepResult]) -> Vec<Bar> {
    steps
        .iter()
        .filter_map(|st| {
            // With per-thread samples, the working threads' (idle ones left out).
            let working = tpslab_analysis::ramp_threads::facts(st);
            let t = working
                .as_ref()
                .map(|f| &f.states)
                .or(st.threads.as_ref())
                .filter(|t| t.samples > 0)?;
            let total: u64 = t.by_class.values().sum();
            (total > 0).then(|| Bar {
                label: format!("{} user(s)", st.users),
                total_text: match &working {
                    Some(f) => format!(
                        "{} thread samples of {} working threads ({} idle left out)",
                        t.samples,
                        f.working.len(),
                        f.idle.len()
                    ),
                    None => format!("{} thread samples", t.samples),
                },
                segments: t
                    .by_class
                    .iter()
                    .enumerate()
                    .map(|(i, (class, n))| Segment {
                        label: class.label().into(),
                        value_text: format!("{:.1} %", 100.0 * *n as f64 / total as f64),
                        source: "/proc/PID/task/TID/stat state, syscall and wchan, sampled".into(),
                        width: 100.0 * *n as f64 / total as f64,
                        colour: plot::hex(PALETTE[i % PALETTE.len()]),
                    })
                    .collect(),
            })
        })
        .collect()
}

/// sweep: each cell's mean with its 95 % interval, the baseline marked; findings.
pub(super) fn sweep(p: &mut Page, rep: &SweepReport) -> Result<(), String> {
    let r = &rep.result;
    let (obj, _) = rep.plan.objective.figure();
    let best = r.best.and_then(|b| r.cells.get(b));
    p.verdict = Some(Verdict {
        label: "BEST".into(),
        headline: match best {
            Some(c) if c.cell.id != 0 => format!(
                "{} (against the baseline {})",
                c.cell.label(),
                r.cells[0].cell.label()
            ),
            _ => "the baseline: no setting beat it by more than the noise".into(),
        },
        evidence: r
            .findings
            .iter()
            .chain(&r.warnings)
            .map(|f| super::Evidence {
                text: f.clone(),
                source: String::new(),
            })
            .collect(),
        ..Default::default()
    });
    let mut s = Section::new("Each cell's mean with its 95 % interval");
    s.note = Some(format!("Cell 0 is the baseline (marked); a whisker is the 95 % confidence interval of the mean over the cell's repeats (Student t, kept within what the figure can take: a loss within 0-100 %, TPS 0 or more); a cell of fewer than {} runs has none.", tpslab_record::estimate::MIN_RUNS_FOR_INTERVAL));
    s.columns = 2;
    let mut figs = vec![obj];
    figs.extend(["loss_pct", "tps"].into_iter().filter(|&f| f != obj));
    for fig in figs {
        let y = match fig {
            "loss_pct" => "loss, %",
            "tps" => "TPS",
            "p99_us" => "p99, us",
            f => f,
        };
        let mut c = Chart::new(
            &format!("cells-{fig}"),
            &format!("{fig} by cell"),
            "cell",
            y,
        );
        // As this release bounds them (older records could hold a loss below 0).
        let est: Vec<_> = r
            .cells
            .iter()
            .map(|c| {
                c.figures.get(fig).map(|e| {
                    tpslab_analysis::experiment::within_domain(
                        *e,
                        tpslab_analysis::sweep::domain(fig),
                    )
                })
            })
            .collect();
        intervals(
            &mut c,
            &est,
            (
                &format!("mean {fig}"),
                "mean of the cell's runs (their records)",
            ),
            "Student t over the repeats, within the figure's bounds",
        );
        c.marks.push((0.0, "baseline (cell 0)".into()));
        if c.has_data() {
            s.items.push(figure(&c));
        }
    }
    let rows = r
        .cells
        .iter()
        .map(|c| {
            let f = |k: &str| {
                c.figures.get(k).map_or("-".into(), |e| {
                    let e = tpslab_analysis::experiment::within_domain(
                        *e,
                        tpslab_analysis::sweep::domain(k),
                    );
                    match e.interval() {
                        Some((lo, hi)) => format!("{:.2} [{lo:.2}, {hi:.2}]", e.mean),
                        None => format!("{:.2} ({} runs: too few for an interval)", e.mean, e.n),
                    }
                })
            };
            vec![
                format!(
                    "{}{}",
                    c.cell.id,
                    if c.cell.id == 0 { " (baseline)" } else { "" }
                ),
                c.cell.label(),
                f(obj),
                f("tps"),
                c.invalid_runs.to_string(),
            ]
        })
        .collect();
    s.items.push(Item::Table {
        title: String::new(),
        header: vec![
            "cell".into(),
            "settings".into(),
            format!("{obj} (95 % CI)"),
            "TPS (95 % CI)".into(),
            "invalid runs".into(),
        ],
        rows,
    });
    p.sections.push(s);
    Ok(())
}
