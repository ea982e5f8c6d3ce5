//! What ramp, tcp and sweep records show in HTML.

use super::plot::{self, draw, Band, Chart, Line, PALETTE};
use super::{Bar, Item, Page, Section, Segment, Verdict};
use tpslab_analysis::experiment::EstimateExt;
use tpslab_analysis::record::{RampReport, SweepReport, TcpRecord};
use tpslab_analysis::tcp::{classify, Limit, TcpRecordExt, TcpSample};
use tpslab_analysis::usl::UslFitExt;

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
    est: &[Option<tpslab_analysis::experiment::Estimate>],
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
    let users = |f: &dyn Fn(&tpslab_analysis::ramp::StepResult) -> f64| -> Vec<(f64, f64)> {
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
                (n, f.predict(n))
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
            (|s: &tpslab_analysis::ramp::StepResult| s.response.p50_ns) as fn(&_) -> u64,
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
    let bars: Vec<Bar> = run
        .steps
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
        .collect();
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

const LIMIT_COLOURS: [(Limit, usize); 4] = [
    (Limit::ReceiveWindow, 1),
    (Limit::SendBuffer, 4),
    (Limit::CongestionWindow, 0),
    (Limit::Application, 3),
];

fn bands(samples: &[TcpSample], sndbuf: Option<u64>) -> Vec<Band> {
    let t0 = samples.first().map_or(0, |s| s.t_ns);
    samples
        .windows(2)
        .map(|w| {
            let l = classify(&w[0], &w[1], sndbuf);
            let c = LIMIT_COLOURS.iter().find(|x| x.0 == l).map_or(6, |x| x.1);
            Band {
                x0: (w[0].t_ns - t0) as f64 / 1e9,
                x1: (w[1].t_ns - t0) as f64 / 1e9,
                name: format!("held by the {}", l.name()),
                colour: PALETTE[c],
            }
        })
        .collect()
}

/// The charts of one flow's TCP_INFO samples, each interval shaded by the limit that
/// held it.
fn flow_charts(tag: &str, samples: &[TcpSample], sndbuf: Option<u64>) -> Vec<Chart> {
    let t0 = samples.first().map_or(0, |s| s.t_ns);
    let t = |s: &TcpSample| (s.t_ns - t0) as f64 / 1e9;
    // One TCP_INFO field over time.
    let over_time = |f: fn(&TcpSample) -> f64| -> Vec<(f64, f64)> {
        samples.iter().map(|s| (t(s), f(s))).collect()
    };
    let shade = bands(samples, sndbuf);
    let mut thr = Chart::new(
        &format!("{tag}throughput"),
        "Throughput",
        "time, s",
        "Mbit/s",
    );
    thr.lines.push(Line::new(
        "goodput (acknowledged bytes)",
        "TCP_INFO tcpi_bytes_acked, delta per interval",
        samples
            .windows(2)
            .map(|w| {
                let dt = (w[1].t_ns.saturating_sub(w[0].t_ns) as f64 / 1e9).max(1e-9);
                (
                    t(&w[1]),
                    w[1].bytes_acked.saturating_sub(w[0].bytes_acked) as f64 * 8.0 / dt / 1e6,
                )
            })
            .collect(),
        PALETTE[0],
    ));
    let mut rtt = Chart::new(&format!("{tag}rtt"), "Round-trip time", "time, s", "ms");
    rtt.y_fmt = |v| format!("{v:.2}");
    rtt.lines.push(Line::new(
        "smoothed RTT",
        "TCP_INFO tcpi_rtt",
        over_time(|s| s.rtt_us as f64 / 1e3),
        PALETTE[0],
    ));
    rtt.lines.push(
        Line::new(
            "minimum RTT",
            "TCP_INFO tcpi_min_rtt",
            over_time(|s| s.min_rtt_us as f64 / 1e3),
            PALETTE[2],
        )
        .dashed(),
    );
    let mut win = Chart::new(
        &format!("{tag}windows"),
        "Windows and bytes in flight",
        "time, s",
        "bytes",
    );
    win.lines.push(Line::new(
        "congestion window",
        "TCP_INFO tcpi_snd_cwnd x tcpi_snd_mss",
        over_time(|s| s.cwnd_segs as f64 * s.mss as f64),
        PALETTE[0],
    ));
    win.lines.push(Line::new(
        "peer's receive window",
        "TCP_INFO tcpi_snd_wnd",
        over_time(|s| s.peer_window_bytes as f64),
        PALETTE[1],
    ));
    win.lines.push(Line::new(
        "bytes in flight",
        "TCP_INFO (tcpi_unacked - sacked - lost + retrans) x mss",
        over_time(|s| s.in_flight_bytes as f64),
        PALETTE[2],
    ));
    let mut out = vec![thr, rtt, win];
    for c in &mut out {
        c.bands = shade.clone();
    }
    out.retain(Chart::has_data);
    out
}

/// tcp: per run (or watched flow) throughput, RTT, windows and in flight over time,
/// shaded by the limit that held each interval; two runs side by side.
pub(super) fn tcp(p: &mut Page, t: &TcpRecord) -> Result<(), String> {
    let verdicts: Vec<String> = t
        .runs
        .iter()
        .filter_map(|r| r.verdict.clone())
        .chain(t.watched.iter().filter_map(|w| w.verdict.clone()))
        .chain(t.app_wait_finding())
        .collect();
    if let Some((first, rest)) = verdicts.split_first() {
        p.verdict = Some(Verdict {
            label: "VERDICT".into(),
            headline: first.clone(),
            evidence: rest
                .iter()
                .map(|v| super::Evidence {
                    text: v.clone(),
                    source: String::new(),
                })
                .collect(),
            ..Default::default()
        });
    }
    let mut flows: Vec<(String, &[TcpSample], Option<u64>)> = t
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                format!("run {}", i + 1),
                r.flow.samples.as_slice(),
                Some(r.flow.sndbuf_granted),
            )
        })
        .collect();
    flows.extend(t.watched.iter().map(|w| {
        (
            format!("{} -> {}", w.flow.local, w.flow.remote),
            w.flow.samples.as_slice(),
            Some(w.flow.sndbuf),
        )
    }));
    let cols = if flows.len() == 2 { 2 } else { 1 };
    let mut s = Section::new("The flows over time (TCP_INFO)");
    s.columns = cols;
    let charts: Vec<Vec<Chart>> = flows
        .iter()
        .enumerate()
        .map(|(i, (name, samples, sndbuf))| {
            let mut cs = flow_charts(&format!("f{i}-"), samples, *sndbuf);
            for c in &mut cs {
                c.title = format!("{name}: {}", c.title);
            }
            cs
        })
        .collect();
    if cols == 2 {
        // Interleaved, so each row compares the same chart, on shared y axes.
        let kind = |c: &Chart| {
            c.id.split_once('-')
                .map_or(String::new(), |x| x.1.to_string())
        };
        for a in &charts[0] {
            let Some(b) = charts[1].iter().find(|b| kind(b) == kind(a)) else {
                s.items.push(figure(a));
                continue;
            };
            let y1 = a.extents().1 .1.max(b.extents().1 .1);
            for c in [a, b] {
                let mut c = c.clone();
                c.y_range = Some((0.0, y1));
                s.items.push(figure(&c));
            }
        }
    } else {
        s.items.extend(charts.iter().flatten().map(figure));
    }
    if !s.items.is_empty() {
        p.sections.push(s);
    }
    Ok(())
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
    s.note = Some(format!("Cell 0 is the baseline (marked); a whisker is the 95 % confidence interval of the mean over the cell's repeats (Student t, kept within what the figure can take: a loss within 0-100 %, TPS 0 or more); a cell of fewer than {} runs has none.", tpslab_analysis::experiment::MIN_RUNS_FOR_INTERVAL));
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
                c.figures
                    .get(fig)
                    .map(|e| e.within(tpslab_analysis::sweep::domain(fig)))
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
                    let e = e.within(tpslab_analysis::sweep::domain(k));
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

/// A capacity search: the result and the verdict at the first failing rate, then the
/// search's path (each step's p99 and loss against its rate, the objective's bounds as
/// dashed lines, the rate sustained marked).
pub(super) fn capacity(
    p: &mut Page,
    c: &tpslab_analysis::capacity::CapacityRecord,
) -> Result<(), String> {
    use tpslab_analysis::capacity::{headline, Conclusion};
    let mut evidence: Vec<super::Evidence> = vec![];
    let mut recommendations = vec![];
    if let Some(d) = &c.boundary {
        evidence.push(super::Evidence {
            text: d.headline.clone(),
            source: "the verdict of the first failing step at the lowest failing rate".into(),
        });
        evidence.extend(d.evidence.iter().map(|e| super::Evidence {
            text: e.text.clone(),
            source: e.source.clone(),
        }));
        recommendations.extend(d.recommendations.iter().map(|r| super::Advice {
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
fn capacity_search(c: &tpslab_analysis::capacity::CapacityRecord, title: &str) -> Option<Section> {
    use tpslab_analysis::capacity::{Conclusion, Objective, Quantile, StepStatus};
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
        let pick = |f: &dyn Fn(&tpslab_analysis::capacity::CapacityStep) -> Option<f64>| {
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
