//! A sweep in a terminal: its design, estimates per cell with their spread, effects
//! against the baseline, the best cell.

use std::io::{self, Write};
use tpslab_record::estimate::{Estimate, MIN_RUNS_FOR_INTERVAL as MIN};
use tpslab_record::SweepReport;

/// The first line of a sweep, printed when it starts: cells, runs, design, order, how long.
pub fn sweep_header(
    w: &mut dyn Write,
    p: &tpslab_plan::sweep::SweepPlan,
    out: &str,
) -> io::Result<()> {
    let cells = tpslab_plan::sweep::cells(&p.factors, p.design).len();
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
    super::fit::table(&mut t);
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
    // Each figure's interval as this release bounds it (a record written before could
    // hold a loss interval below 0, or one of 2 runs).
    let e = |c: &tpslab_record::sweep::CellResult, k: &str| {
        c.figures.get(k).map(|x| {
            tpslab_analysis::experiment::within_domain(*x, tpslab_analysis::sweep::domain(k))
        })
    };
    let mut too_few = false;
    for c in &r.cells {
        let loss = e(c, "loss_pct").map_or("-".into(), |x| {
            too_few |= x.interval().is_none();
            with_interval(&x)
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
    // At 80 columns the context switches go first, then the spread of rx_queue.
    crate::term::fit::put_dropping(w, t, &[8, 7, 5, 6])?;
    writeln!(
        w,
        "(* baseline; mean ± stddev over the runs; figures over the measurement window)"
    )?;
    if too_few {
        writeln!(
            w,
            "(loss with fewer than {MIN} runs a cell has no interval: with 2, Student's t of one degree of freedom makes it about 7 times the runs' spread; --repeat {MIN} or more)"
        )?;
    }
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

/// "mean [lo, hi]" of an estimate, or why it has no interval: "0.29 (2 runs: too few
/// for an interval)".
fn with_interval(x: &Estimate) -> String {
    match x.interval() {
        Some((lo, hi)) => format!("{:.2} [{lo:.2}, {hi:.2}]", x.mean),
        None => format!(
            "{:.2} ({} run{}: too few for an interval)",
            x.mean,
            x.n,
            if x.n == 1 { "" } else { "s" }
        ),
    }
}

/// Each cell's kernel drops by reason, mean per run, when any cell read them.
fn print_kernel_drops(w: &mut dyn Write, r: &tpslab_record::sweep::SweepResult) -> io::Result<()> {
    use tpslab_record::sweep::DROPS;
    let drops = |c: &tpslab_record::sweep::CellResult| -> Vec<(String, f64)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_analysis::sweep::analyse;
    use tpslab_plan::sweep::cells;
    use tpslab_record::sweep::RunMetrics;

    fn run(loss: f64) -> RunMetrics {
        RunMetrics {
            loss_pct: loss,
            tps: 10_000.0,
            valid: true,
            ..Default::default()
        }
    }

    fn text(rep: &SweepReport) -> String {
        let mut out = vec![];
        sweep_results(&mut out, rep).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The table of cells: what precedes the effects (a difference may be negative).
    fn table(s: &str) -> &str {
        &s[..s.find("Effects against").unwrap()]
    }

    #[test]
    fn loss_intervals_stay_at_or_above_0_and_too_few_runs_are_named() {
        let plan = tpslab_plan::sweep::s2_plan(1, std::time::Duration::from_millis(100));
        let c = cells(&plan.factors, plan.design);
        // Issue 33: the baseline's two runs (mean 0.29, once printed [-0.68, 1.26]);
        // a cell of three runs whose t interval reaches -0.71; one of a single run; one
        // with no loss at all.
        let runs = vec![
            (0, run(0.2137)),
            (0, run(0.3663)),
            (1, run(0.0)),
            (1, run(0.12)),
            (1, run(0.75)),
            (2, run(0.5)),
            (3, run(0.0)),
            (3, run(0.0)),
            (3, run(0.0)),
        ];
        let mut rep = SweepReport {
            result: analyse(&c, &runs, plan.objective),
            plan,
            out: "sweep-out".into(),
            runs: vec![],
            notes: vec![],
        };
        let s = text(&rep);
        assert!(s.contains("0.29 (2 runs: too few for an interval)"), "{s}");
        assert!(s.contains("0.29 [0.00, 1.29]"), "{s}");
        assert!(s.contains("0.50 (1 run: too few for an interval)"), "{s}");
        assert!(s.contains("0.00 [0.00, 0.00]"), "{s}");
        assert!(s.contains("--repeat 3 or more"), "{s}");
        assert!(!table(&s).contains("[-"), "an interval below 0: {s}");
        // A record written before the bounds: an interval of 3 runs below 0 is shown
        // from 0, one of 2 runs not at all.
        let old = |n, lo, hi| tpslab_record::estimate::Estimate {
            n,
            mean: 0.29,
            stddev: 0.4,
            min: 0.0,
            max: 0.75,
            ci_lo: lo,
            ci_hi: hi,
        };
        let f = &mut rep.result.cells[0].figures;
        f.insert("loss_pct".into(), old(2, -0.68, 1.26));
        rep.result.cells[1]
            .figures
            .insert("loss_pct".into(), old(3, -0.71, 1.29));
        let s = text(&rep);
        assert!(!table(&s).contains("[-"), "an interval below 0: {s}");
        assert!(s.contains("0.29 (2 runs: too few for an interval)"), "{s}");
        assert!(s.contains("0.29 [0.00, 1.29]"), "{s}");
        // Enough runs everywhere: no note.
        let runs: Vec<_> = (0..4)
            .flat_map(|c| [(c, run(1.0)), (c, run(2.0)), (c, run(3.0))])
            .collect();
        rep.result = analyse(
            &cells(&rep.plan.factors, rep.plan.design),
            &runs,
            rep.plan.objective,
        );
        let s = text(&rep);
        assert!(s.contains("2.00 [0.00, 4.48]"), "{s}");
        assert!(!s.contains("too few"), "{s}");
    }
}
