//! A sweep in a terminal: its design, estimates per cell with their spread, effects
//! against the baseline, the best cell.

use std::io::{self, Write};
use tpslab_analysis::record::SweepReport;

/// The first line of a sweep, printed when it starts: cells, runs, design, order, how long.
pub fn sweep_header(
    w: &mut dyn Write,
    p: &tpslab_analysis::sweep::SweepPlan,
    out: &str,
) -> io::Result<()> {
    let cells = tpslab_analysis::sweep::cells(&p.factors, p.design).len();
    let est_run_s = (p.load.warmup + p.load.duration).as_secs_f64() + 1.0;
    writeln!(
        w,
        "tpslab sweep: {} cells x {} runs, {:?} design, random order (seed {}), about {:.0} s; records in {}",
        cells,
        p.repeat,
        p.design,
        p.seed,
        est_run_s * (cells * p.repeat) as f64,
        out
    )
}

/// A sweep's results: estimates per cell, effects against the baseline, the best cell,
/// warnings and notes.
pub fn sweep_results(w: &mut dyn Write, rep: &SweepReport) -> io::Result<()> {
    let (plan, r, notes) = (&rep.plan, &rep.result, &rep.notes);
    use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "cell",
        "n",
        "loss % (95 % CI)",
        "TPS",
        "rx_queue mean B",
        "rx_queue stddev B",
        "server CPU %",
        "ctxt/s (system)",
        "ctxt/s (server)",
        "p99 RTT us",
    ]);
    let e = |c: &tpslab_analysis::sweep::CellResult, k: &str| c.figures.get(k).copied();
    for c in &r.cells {
        let loss = e(c, "loss_pct").map_or("-".into(), |x| {
            if x.ci_lo.is_nan() {
                format!("{:.2} [-]", x.mean)
            } else {
                format!("{:.2} [{:.2}, {:.2}]", x.mean, x.ci_lo, x.ci_hi)
            }
        });
        let pm =
            |k: &str| e(c, k).map_or("-".into(), |x| format!("{:.0} ± {:.0}", x.mean, x.stddev));
        t.add_row(vec![
            format!(
                "{}{}",
                if c.cell.id == 0 { "* " } else { "" },
                c.cell.label()
            ),
            e(c, "tps").map_or(0, |x| x.n).to_string(),
            loss,
            pm("tps"),
            pm("rxq_mean_bytes"),
            pm("rxq_stddev_bytes"),
            pm("server_cpu_pct"),
            pm("ctxt_per_s"),
            pm("server_ctxt_per_s"),
            pm("p99_us"),
        ]);
    }
    writeln!(w, "{t}")?;
    writeln!(
        w,
        "(* baseline; mean ± stddev over the runs; figures over the measurement window)"
    )?;
    print_kernel_drops(w, r)?;
    writeln!(
        w,
        "Effects against the baseline ({}):",
        plan.objective.figure().0
    )?;
    for f in &r.findings {
        writeln!(w, "  - {f}")?;
    }
    if let Some(b) = r.best {
        writeln!(
            w,
            "Best cell for {}: {}",
            plan.objective.figure().0,
            r.cells[b].cell.label()
        )?;
    }
    for warning in &r.warnings {
        writeln!(w, "warning: {warning}")?;
    }
    for n in notes {
        writeln!(w, "note: {n}")?;
    }
    Ok(())
}

/// Each cell's kernel drops by reason, mean per run, when any cell read them.
fn print_kernel_drops(
    w: &mut dyn Write,
    r: &tpslab_analysis::sweep::SweepResult,
) -> io::Result<()> {
    use tpslab_analysis::sweep::DROPS;
    let drops = |c: &tpslab_analysis::sweep::CellResult| -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = c
            .figures
            .iter()
            .filter_map(|(k, e)| Some((k.strip_prefix(DROPS)?.to_string(), e.mean)))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v
    };
    if r.cells.iter().all(|c| drops(c).is_empty()) {
        return Ok(());
    }
    writeln!(
        w,
        "Kernel drop reasons (skb:kfree_skb during each run, host-wide; mean per run):"
    )?;
    for c in &r.cells {
        let d = drops(c);
        let seen: Vec<String> = d
            .iter()
            .filter(|(_, n)| *n > 0.0)
            .map(|(k, n)| format!("{k} {n:.0}"))
            .collect();
        let text = match (d.is_empty(), seen.is_empty()) {
            (true, _) => "not read".to_string(),
            (false, true) => "none".to_string(),
            (false, false) => seen.join(", "),
        };
        let mark = if c.cell.id == 0 { "* " } else { "  " };
        writeln!(w, "  {mark}{}: {text}", c.cell.label())?;
    }
    Ok(())
}
