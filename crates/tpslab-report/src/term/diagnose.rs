//! A diagnosis in a terminal: the verdict first, its evidence, the ledger, the
//! recommendations, the buffer arithmetic, and before/after of the verification run.

use super::run::{print_drop_reasons, print_load_line, print_path};
use super::{fmt_ns, table};
use std::io::{self, Write};
use tpslab_analysis::record::{DiagnoseRecord, RunRecord};

fn before_after_row(rec: &RunRecord) -> Vec<String> {
    let g = rec.generator.as_ref();
    let q = rec
        .observer
        .as_ref()
        .and_then(|o| o.summaries.get("server_rx_queue_bytes"))
        .copied()
        .unwrap_or_default();
    let delivered = rec
        .ledger
        .as_ref()
        .map_or(0, |l| l.request.count("delivered"));
    vec![
        g.map_or(0, |g| g.attempted).to_string(),
        delivered.to_string(),
        g.and_then(|g| g.window_loss_pct)
            .map_or("-".into(), |l| format!("{l:.2} %")),
        g.map_or("-".into(), |g| format!("{:.0}", g.tps)),
        g.map_or("-".into(), |g| fmt_ns(g.latency_intended.p99_ns as f64)),
        format!("{:.0}", q.mean),
        format!("{:.0}", q.max),
    ]
}

/// Prints a diagnosis: verdict first, evidence, ledger, recommendations, buffer
/// arithmetic, and the before/after of the verification run.
pub fn print_diagnosis(w: &mut dyn Write, rec: &DiagnoseRecord, explain: bool) -> io::Result<()> {
    let (d, before) = (&rec.diagnosis, &rec.before);
    let scenario = &rec.scenario;
    writeln!(w, "tpslab diagnose: {scenario}")?;
    writeln!(w)?;
    writeln!(w, "VERDICT: {}", d.headline)?;
    writeln!(w, "  where: {}", d.layer)?;
    if let Some(t) = &before.target {
        writeln!(w, "  {}", super::run::target_line(t))?;
    }
    if let Some(g) = &before.generator {
        print_load_line(w, g)?;
    }
    writeln!(w)?;
    writeln!(w, "Evidence:")?;
    for e in &d.evidence {
        if explain {
            writeln!(w, "  - {}\n      [source: {}]", e.text, e.source)?;
        } else {
            writeln!(w, "  - {}", e.text)?;
        }
    }
    if let Some(l) = &before.ledger {
        print_path(w, "request path: generator -> server", &l.request, explain)?;
        if let Some(r) = &l.reply {
            print_path(w, "reply path: server -> generator", r, explain)?;
        }
    }
    if let Some(dr) = &before.drop_reasons {
        print_drop_reasons(w, dr, before.ledger.as_ref())?;
    }
    if !d.recommendations.is_empty() {
        writeln!(w, "Recommendation:")?;
        for (i, r) in d.recommendations.iter().enumerate() {
            writeln!(w, "  {}. {}", i + 1, r.what)?;
            writeln!(w, "     why: {}", r.why)?;
            for l in &r.lines {
                writeln!(w, "       {l}")?;
            }
        }
    }
    if !d.buffer_notes.is_empty() {
        writeln!(w, "Buffer arithmetic (measured on this kernel):")?;
        for n in &d.buffer_notes {
            writeln!(w, "  - {n}")?;
        }
    }
    if explain {
        for n in &d.explain_notes {
            writeln!(w, "  - {n}")?;
        }
    }
    if let Some(a) = &rec.after {
        verification(w, before, a, &rec.applied, &rec.restored)?;
    }
    for n in before.notes.iter().chain(&rec.notes) {
        writeln!(w, "note: {n}")?;
    }
    Ok(())
}

/// The verification run against the first: what was applied, before/after, what it cost,
/// what was restored.
fn verification(
    w: &mut dyn Write,
    before: &RunRecord,
    a: &RunRecord,
    applied: &[String],
    restored: &[(String, String)],
) -> io::Result<()> {
    writeln!(w)?;
    writeln!(
        w,
        "Verification: the load again with {}{}",
        applied.join(", "),
        if a.interrupted {
            " (INTERRUPTED: partial run)"
        } else {
            ""
        }
    )?;
    let mut t = table(&[
        "",
        "sent",
        "delivered",
        "lost (window)",
        "TPS",
        "p99 RTT",
        "rx_queue mean B",
        "rx_queue max B",
    ]);
    let mut b = vec!["before".to_string()];
    b.extend(before_after_row(before));
    t.add_row(b);
    let mut x = vec!["after".to_string()];
    x.extend(before_after_row(a));
    t.add_row(x);
    writeln!(w, "{t}")?;
    if let (Some(gb), Some(ga)) = (&before.generator, &a.generator) {
        let bigger_queue = applied.iter().any(|a| a.contains("--rcvbuf"));
        if bigger_queue
            && ga.latency_intended.p99_ns > gb.latency_intended.p99_ns
            && ga.window_loss_pct < gb.window_loss_pct
        {
            writeln!(w, "  p99 RTT rose: datagrams that were dropped before now wait in the larger queue; latency is the price of not losing them")?;
        }
    }
    if let Some(g) = &a.generator {
        if !g.valid {
            writeln!(
                w,
                "  (the verification run's generator was a bottleneck: {})",
                g.invalid_reasons.join("; ")
            )?;
        }
    }
    for (k, v) in restored {
        writeln!(w, "  restored {k} = {v}")?;
    }
    Ok(())
}
