//! `tpslab capacity` in the terminal: the search's plan in one line, every step (rate
//! intended, achieved and answered, p99, loss, the call and why), the result in one
//! sentence (`sustains 40,000 pps (...); first to give: ...`), and the verdict at the
//! first failing rate with its evidence.

use std::io::{self, Write};
use tpslab_analysis::capacity::{headline, latency_text, rate_text};
use tpslab_plan::capacity::CapacityLoad;
use tpslab_record::capacity::{CapacityRecord, Conclusion};

use super::{fmt_ns, table};

/// The plan's line: target, objective, rates, resolution, repeats, budget, step length.
fn plan_line(w: &mut dyn Write, c: &CapacityRecord) -> io::Result<()> {
    let s = &c.plan.search;
    let (duration, warmup, what) = match &c.plan.load {
        CapacityLoad::Udp(r) => {
            let l = &r.load;
            (
                l.duration,
                l.warmup,
                format!(
                    "{}-byte datagrams{}{}",
                    l.datagram_len(),
                    if l.burst > 1 {
                        format!(", bursts of {}", l.burst)
                    } else {
                        String::new()
                    },
                    if l.threads > 1 {
                        format!(", {} sender threads", l.threads)
                    } else {
                        String::new()
                    }
                ),
            )
        }
        CapacityLoad::Http(h) => (
            h.load.duration,
            h.warmup,
            format!(
                "{} {} on {} {}connection(s){}, timeout {}",
                h.load.request.method,
                h.load.request.url,
                h.load.connections,
                if h.load.version.is_http3() {
                    "QUIC "
                } else {
                    "keep-alive "
                },
                if h.load.version.is_http2() {
                    format!(" over HTTP/2 with {} stream(s) each", h.load.streams)
                } else if h.load.version.is_http3() {
                    format!(" over HTTP/3 with {} stream(s) each", h.load.streams)
                } else {
                    String::new()
                },
                fmt_ns(h.load.timeout.as_nanos() as f64)
            ),
        ),
        CapacityLoad::Tcp(t) => (
            t.duration,
            t.warmup,
            format!(
                "{}-byte requests, {}, on {} connection(s), timeout {}{}",
                t.request_bytes,
                t.proto.replies(&t.framing),
                t.connections,
                fmt_ns(t.timeout.as_nanos() as f64),
                match &t.builtin {
                    Some(b) => format!(
                        "; tpslab's server: {} CPU + {} waiting per request{}, {}",
                        fmt_ns(b.work.as_nanos() as f64),
                        fmt_ns(b.serial.as_nanos() as f64),
                        if b.serialize { " under one lock" } else { "" },
                        match b.threads {
                            0 => "a thread per connection".to_string(),
                            n => format!("{n} worker thread(s)"),
                        }
                    ),
                    None => String::new(),
                }
            ),
        ),
    };
    writeln!(
        w,
        "tpslab capacity {} {}: objective {}; from {} {unit} up to {} {unit}, to within {} %, {} repeat(s) at the boundary, budget {}{}; steps of {} after {} warm-up, {what}",
        c.plan.command(),
        c.plan.target(),
        s.slo,
        rate_text(s.start_rate),
        rate_text(s.max_rate),
        s.resolution_pct,
        s.repeats,
        fmt_ns(s.budget.as_nanos() as f64),
        if c.plan.fix_and_retry {
            " per search (--fix-and-retry: a second search with the fix)"
        } else {
            ""
        },
        fmt_ns(duration.as_nanos() as f64),
        fmt_ns(warmup.as_nanos() as f64),
        unit = s.unit,
    )
}

/// The whole record: the plan's line, the search, and with `--fix-and-retry` the change
/// made, the second search and both capacities.
pub fn record(w: &mut dyn Write, c: &CapacityRecord, elapsed_s: f64) -> io::Result<()> {
    plan_line(w, c)?;
    super::thresholds::block(
        w,
        c.plan.search.fail_on.as_deref(),
        tpslab_analysis::gate::applies::CAPACITY,
        &tpslab_analysis::gate::capacity_outcome(c),
    )?;
    search(w, c, "")?;
    for n in &c.notes {
        writeln!(w, "note: {n}")?;
    }
    let mut steps = c.steps.len();
    if let Some(r) = &c.retry {
        writeln!(w, "FIX AND RETRY: {}", r.applied.join("; "))?;
        search(w, &r.search, " with the fix")?;
        for n in &r.search.notes {
            writeln!(w, "note: {n}")?;
        }
        let unit = c.plan.search.unit;
        writeln!(
            w,
            "CAPACITY: {} as it was, {} with the fix{}",
            capacity_text(&c.conclusion, unit),
            capacity_text(&r.search.conclusion, unit),
            c.retry_change_pct()
                .map_or(String::new(), |p| format!(" ({p:+.0} %)"))
        )?;
        if !r.restored.is_empty() {
            let back: Vec<String> = r.restored.iter().map(|(k, v)| format!("{k}={v}")).collect();
            writeln!(w, "restored: {}", back.join(", "))?;
        }
        steps += r.search.steps.len();
    }
    writeln!(
        w,
        "{steps} step(s) in {elapsed_s:.1} s{}",
        if c.interrupted || c.retry.as_ref().is_some_and(|r| r.search.interrupted) {
            " (interrupted)"
        } else {
            ""
        }
    )
}

/// What a search found, in a few words: `100,000 pps`, `at least 1,000,000 pps`, `none`,
/// `not found (the generator was the limit)`, `not found (unfinished: interrupted;
/// 20,000 pps so far)`.
fn capacity_text(c: &Conclusion, unit: tpslab_plan::capacity::RateUnit) -> String {
    let rate = |x: f64| format!("{} {unit}", rate_text(x));
    match c {
        Conclusion::Bracket { sustains_pps, .. } => rate(*sustains_pps),
        Conclusion::AtLeast { sustains_pps } => format!("at least {}", rate(*sustains_pps)),
        Conclusion::NothingPasses { .. } => "none".into(),
        Conclusion::GeneratorLimited { .. } => "not found (the generator was the limit)".into(),
        Conclusion::Unfinished {
            sustains_pps, why, ..
        } => format!(
            "not found (unfinished: {why}{})",
            sustains_pps.map_or(String::new(), |s| format!("; {} so far", rate(s)))
        ),
    }
}

/// The columns of a search's table left out first when it does not fit (indices): `why`
/// (its words restate the loss and p99 shown beside it), `achieved`, `answered`, `p99`.
/// The columns that carry the call are kept longest: the step, its rate, the loss and
/// the call itself.
const DROPPED_FIRST: [usize; 4] = [7, 2, 3, 4];

/// One search: its steps, the result (`RESULT{label}: ...`) and the verdict at its first
/// failing rate with its evidence.
fn search(w: &mut dyn Write, c: &CapacityRecord, label: &str) -> io::Result<()> {
    let rate = format!("rate {}", c.plan.search.unit);
    let mut t = table(&[
        "step", &rate, "achieved", "answered", "p99", "loss", "call", "why",
    ]);
    // The call and the reasons are words: left-aligned, as text is read.
    for i in [6, 7] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Left);
        }
    }
    for (i, s) in c.steps.iter().enumerate() {
        t.add_row(vec![
            (i + 1).to_string(),
            rate_text(s.rate_pps),
            rate_text(s.achieved_pps),
            rate_text(s.answered_pps),
            s.latency_ns
                .map_or("-".into(), |l| latency_text(l[2] as f64)),
            s.loss_pct.map_or("-".into(), |l| format!("{l:.2} %")),
            s.status.word().to_string(),
            s.why.join("; "),
        ]);
    }
    crate::term::fit::put_dropping(w, t, &DROPPED_FIRST)?;
    let result = match c.conclusion {
        Conclusion::GeneratorLimited { .. } => "GENERATOR LIMIT",
        Conclusion::Unfinished { .. } => "RESULT (unfinished)",
        _ => "RESULT",
    };
    writeln!(w, "{result}{label}: {}", headline(c))?;
    if let Some(d) = &c.boundary {
        let rate = c
            .steps
            .iter()
            // The boundary is the verdict at the lowest failing rate; bursts of one size
            // can give several rates the same headline.
            .filter(|s| s.verdict.as_ref().is_some_and(|v| v.headline == d.headline))
            .min_by(|a, b| a.rate_pps.total_cmp(&b.rate_pps))
            .map_or(String::new(), |s| {
                format!(" at {} {}", rate_text(s.rate_pps), c.plan.search.unit)
            });
        writeln!(w, "First failing rate{rate}: {}", d.headline)?;
        for e in &d.evidence {
            writeln!(w, "  - {} [{}]", e.text, e.source)?;
        }
        if let Some(r) = d.recommendations.first() {
            writeln!(w, "  fix: {}", r.what)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::term::fit::{at_width, cells};

    /// The report of the real search `fixture` at `width` columns.
    fn at(fixture: &str, width: usize) -> String {
        let path = format!(
            "{}/tests/fixtures/{fixture}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let rec =
            tpslab_record::Record::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut out = vec![];
        at_width(Some(width), || crate::term::record(&mut out, &rec, false)).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The columns the report says it left out at `width`, as it lists them.
    fn left_out(text: &str, width: usize) -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("(left out at {width} columns: ")))
            .map(|l| l.split(';').next().unwrap().to_string())
    }

    #[test]
    fn a_narrow_terminal_keeps_the_rate_the_loss_and_the_call() {
        // A UDP search (pps) and an HTTP one (requests/s: a wider rate column).
        for (fixture, failing) in [("capacity", "43.77"), ("capacity_http_lock", "FAIL")] {
            for width in [50, 60, 70, 77] {
                let text = at(fixture, width);
                // The header's rows: between the table's top and the line under them.
                let head: String = text
                    .lines()
                    .skip_while(|l| !l.starts_with('┌'))
                    .take_while(|l| !l.starts_with('╞'))
                    .collect::<Vec<_>>()
                    .join("\n");
                for kept in ["step", "rate", "loss", "call"] {
                    assert!(head.contains(kept), "{fixture}: {kept} at {width}:\n{text}");
                }
                // A failing step's row holds its call.
                assert!(
                    text.lines()
                        .any(|l| l.contains(failing) && l.contains("FAIL")),
                    "{fixture} at {width}:\n{text}"
                );
                let wide: Vec<&str> = text.lines().filter(|l| cells(l) > width).collect();
                assert!(wide.is_empty(), "{fixture} at {width}: {wide:?}");
            }
        }
        // What is left out, in its order: why first, then the achieved and answered
        // rates (it left out why, then call, then loss before).
        let said = |fixture, width| left_out(&at(fixture, width), width);
        assert_eq!(said("capacity", 60).as_deref(), Some("why"));
        assert_eq!(said("capacity", 50).as_deref(), Some("why, achieved"));
        assert_eq!(
            said("capacity_http_lock", 50).as_deref(),
            Some("why, achieved, answered")
        );
        // At 77 and 80 columns everything fits.
        assert_eq!(said("capacity", 77), None);
        assert_eq!(said("capacity_http_lock", 80), None);
    }
}
