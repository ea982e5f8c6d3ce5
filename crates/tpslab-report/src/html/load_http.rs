//! What a `load http` record shows in HTML: its verdict (the terminal report's VERDICT and
//! connection-reuse lines), then, from the record's series (`result.series`), requests/s
//! intended vs sent vs answered over time, latency percentiles over time, the run's latency
//! histogram, and replies by status class and failures by kind over time. A record without
//! a series (older ones) shows the verdict and the terminal report only.

use super::others::figure;
use super::plot::{Chart, Line, PALETTE};
use super::{Evidence, Item, Page, Section, Verdict};
use crate::units::fmt_ns;
use tpslab_record::http_series::{HttpPoint, HttpSeries};
use tpslab_record::load_http::LoadHttpRecord;

/// The source every series of the page names.
const SOURCE: &str = "tpslab's own counts per interval (result.series)";

/// Fills `p` for `rec` (`interrupted`: the run was stopped early).
pub(super) fn page(p: &mut Page, rec: &LoadHttpRecord, interrupted: bool) -> Result<(), String> {
    let r = &rec.result;
    let (_, failed) = tpslab_analysis::load_http::failed_of(rec);
    let mut evidence = vec![];
    if let Some(first) = tpslab_analysis::load_http::ledger_lines(rec).first() {
        evidence.push(Evidence {
            text: first.clone(),
            source: "the server's threads sampled every 10 ms, their schedstat and its accept queue over the run, by Little's law (result.server.ledger)".into(),
        });
    }
    if let Some(reuse) = tpslab_analysis::load_http::reuse(rec) {
        evidence.push(Evidence {
            text: format!("Connections: {reuse}"),
            source: "connections made against requests sent (result.connections)".into(),
        });
    }
    let p99 = if r.corrected.count > 0 {
        format!(", p99 {}", fmt_ns(r.corrected.p99_ns as f64))
    } else {
        String::new()
    };
    let (label, headline, ok) = if interrupted {
        (
            "INTERRUPTED",
            format!("stopped {:.1} s into the run: no verdict", r.last_sent_s),
            false,
        )
    } else if r.sent == 0 {
        ("NO REQUEST SENT", "no request was written".into(), false)
    } else {
        (
            "VERDICT",
            format!("limited by {}", tpslab_analysis::load_http::limited_by(rec)),
            failed == 0 && r.unanswered == 0,
        )
    };
    p.verdict = Some(Verdict {
        label: label.into(),
        headline,
        detail: Some(format!(
            "{} sent, {} answered{p99}, {} failed, {} unanswered at the end",
            r.sent,
            rec.answered(),
            r.errors.total(),
            r.unanswered
        )),
        evidence,
        recommendations: vec![],
        ok,
    });
    if let Some(sec) = ledger_section(rec) {
        p.sections.push(sec);
    }
    let Some(s) = &r.series else {
        return Ok(());
    };
    let mut sec = Section::new("Over time");
    sec.note = Some(format!(
        "one point per {} s of the run (its last may be shorter)",
        s.interval_s
    ));
    sec.items.push(figure(&rates(s, rec.plan.max_rate)));
    sec.items.push(figure(&latency(s)));
    sec.items.push(figure(&outcomes(s)));
    p.sections.push(sec);
    let mut h = Section::new("Latency distribution");
    h.items.push(figure(&histogram(s, rec.plan.max_rate)));
    h.items.push(Item::Table {
        title: "Replies by status class, failures by kind (the whole run)".into(),
        header: vec!["what".into(), "count".into()],
        rows: status_rows(rec),
    });
    p.sections.push(h);
    Ok(())
}

fn points(s: &HttpSeries, f: impl Fn(&HttpPoint) -> Option<f64>) -> Vec<(f64, f64)> {
    s.points
        .iter()
        .filter_map(|p| f(p).map(|v| (p.t_s, v)))
        .collect()
}

/// Requests/s intended (none in a closed loop), written and answered.
fn rates(s: &HttpSeries, closed: bool) -> Chart {
    let mut c = Chart::new(
        "http_rates",
        "Requests per second: intended, sent, answered",
        "time, s",
        "requests per second",
    );
    if !closed {
        c.lines.push(
            Line::new(
                "intended (the plan)",
                SOURCE,
                points(s, |p| Some(p.intended_rps)),
                PALETTE[6],
            )
            .dashed(),
        );
    }
    c.lines.push(Line::new(
        "sent (written whole)",
        SOURCE,
        points(s, |p| Some(p.sent_rps)),
        PALETTE[0],
    ));
    c.lines.push(Line::new(
        "answered (final replies)",
        SOURCE,
        points(s, |p| Some(p.answered_rps)),
        PALETTE[2],
    ));
    c.y_fmt = super::plot::si;
    c
}

/// p50, p90, p99 and max of each interval's replies, ms.
fn latency(s: &HttpSeries) -> Chart {
    let mut c = Chart::new(
        "http_latency",
        "Latency percentiles of each interval's replies",
        "time, s",
        "latency, ms",
    );
    let src = "each interval's own HdrHistogram of its replies (result.series.points.latency)";
    for (i, (name, f)) in [
        (
            "p50",
            (|l| l.p50_us) as fn(&tpslab_record::http_series::PointLatency) -> f64,
        ),
        ("p90", |l| l.p90_us),
        ("p99", |l| l.p99_us),
        ("max", |l| l.max_us),
    ]
    .into_iter()
    .enumerate()
    {
        let pts = points(s, |p| p.latency.as_ref().map(|l| f(l) / 1e3));
        c.lines.push(Line::new(name, src, pts, PALETTE[i]));
    }
    c
}

/// A count a point holds.
type Count = fn(&HttpPoint) -> u64;

/// Replies by status class and failures (requests and connects) per second.
fn outcomes(s: &HttpSeries) -> Chart {
    let mut c = Chart::new(
        "http_outcomes",
        "Status classes and failures per second",
        "time, s",
        "per second",
    );
    // Each point's own length: from the previous point's end (the first from the start).
    let per_s = |n: &dyn Fn(&HttpPoint) -> u64| -> Vec<(f64, f64)> {
        let mut t0 = 0.0;
        s.points
            .iter()
            .map(|p| {
                let dt = (p.t_s - t0).max(1e-9);
                t0 = p.t_s;
                (p.t_s, n(p) as f64 / dt)
            })
            .collect()
    };
    let classes: [(&str, Count); 5] = [
        ("2xx", |p| p.status.s2xx),
        ("3xx", |p| p.status.s3xx),
        ("4xx", |p| p.status.s4xx),
        ("5xx", |p| p.status.s5xx),
        ("other status", |p| p.status.other),
    ];
    for (i, (name, f)) in classes.into_iter().enumerate() {
        if s.points.iter().any(|p| f(p) > 0) {
            c.lines.push(Line::new(name, SOURCE, per_s(&f), PALETTE[i]));
        }
    }
    let kinds = s.points.first().map(|p| p.errors.list().len()).unwrap_or(0);
    for k in 0..kinds {
        let name = s.points[0].errors.list()[k].0;
        let n = |p: &HttpPoint| p.errors.list()[k].1 + p.connect_errors.list()[k].1;
        if s.points.iter().any(|p| n(p) > 0) {
            c.lines.push(
                Line::new(
                    &format!("failed: {name}"),
                    "requests and connects failed, by kind (result.series.points.errors, connect_errors)",
                    per_s(&n),
                    PALETTE[(5 + k) % PALETTE.len()],
                )
                .dashed(),
            );
        }
    }
    c.y_fmt = super::plot::si;
    c
}

/// The run's latency histogram: replies per bin against the bin's upper bound on a log
/// axis (x is log10 of the bound in us).
fn histogram(s: &HttpSeries, closed: bool) -> Chart {
    let what = if closed {
        "from each request's send (service time)"
    } else {
        "from each request's intended send time (corrected for coordinated omission)"
    };
    let mut c = Chart::new(
        "http_histogram",
        &format!("Latency histogram of the run, {what}"),
        "latency (bin's upper bound, log scale)",
        "replies",
    );
    let pts: Vec<(f64, f64)> = s
        .histogram
        .iter()
        .map(|b| {
            // The bin above the last bound is drawn one step past it.
            let ns = if b.upto_ns == u64::MAX {
                1.2e11
            } else {
                b.upto_ns as f64
            };
            ((ns / 1e3).log10(), b.count as f64)
        })
        .collect();
    c.lines.push(
        Line::new(
            "replies per bin (4 bins per doubling)",
            "the run's HdrHistogram of latencies (result.series.histogram)",
            pts,
            PALETTE[0],
        )
        .markers(),
    );
    c.x_fmt = log_us;
    c.y_fmt = super::plot::si;
    c
}

/// An x of log10(us) as a latency.
fn log_us(x: f64) -> String {
    fmt_ns(10f64.powf(x) * 1e3)
}

fn status_rows(rec: &LoadHttpRecord) -> Vec<Vec<String>> {
    let r = &rec.result;
    let st = &r.status;
    let mut rows: Vec<Vec<String>> = [
        ("2xx", st.s2xx),
        ("3xx", st.s3xx),
        ("4xx", st.s4xx),
        ("5xx", st.s5xx),
        ("other status", st.other),
    ]
    .iter()
    .map(|(k, n)| vec![(*k).to_string(), n.to_string()])
    .collect();
    for (k, n) in r.errors.list() {
        rows.push(vec![format!("failed request: {k}"), n.to_string()]);
    }
    for (k, n) in r.connect_errors.list().iter().filter(|(_, n)| *n > 0) {
        rows.push(vec![format!("failed connect: {k}"), n.to_string()]);
    }
    rows.push(vec![
        "unanswered at the end".into(),
        r.unanswered.to_string(),
    ]);
    rows
}

/// The watched server's response-time ledger as a table: each part read, its time per
/// request, uncertainty, share of the mean and source; then what no part explains. None
/// without a ledger.
fn ledger_section(rec: &LoadHttpRecord) -> Option<Section> {
    use tpslab_analysis::rt_ledger::{balances, share};
    let srv = rec.result.server.as_ref()?;
    let l = srv.ledger.as_ref()?;
    let ok = balances(l);
    let pct = |v: f64| match ok {
        true => format!("{:.0} %", 100.0 * v),
        false => "-".into(),
    };
    let mut rows: Vec<Vec<String>> = l
        .parts
        .iter()
        .map(|p| {
            vec![
                p.part.label().into(),
                format!("{:.2}", p.ms),
                format!("{:.2}", p.pm_ms),
                pct(share(l, p.part)),
                p.part.source().into(),
            ]
        })
        .collect();
    rows.push(vec![
        "unattributed (the network, the client's own time)".into(),
        format!("{:.2}", l.unattributed_ms),
        String::new(),
        pct(if l.mean_ms > 0.0 {
            (l.unattributed_ms / l.mean_ms).max(0.0)
        } else {
            0.0
        }),
        "mean less the parts".into(),
    ]);
    let mut sec = Section::new("Response-time ledger");
    sec.note = Some(format!(
        "server PID {} (found by {}); mean response time {:.2} ms{}",
        srv.pid,
        srv.found_by.words(),
        l.mean_ms,
        if ok {
            ""
        } else {
            ": the parts overlap (more than the mean), so no share is given"
        }
    ));
    sec.items.push(Item::Table {
        title: "The mean response time by part, ms per request".into(),
        header: ["part", "ms", "+- ms", "share", "source"]
            .map(String::from)
            .to_vec(),
        rows,
    });
    Some(sec)
}
