//! Sweep design and analysis (pure): factors and levels into cells (one factor at a time
//! from a baseline, or full factorial), a randomised run order, per-run metrics taken from
//! run records, and per-cell estimates with each setting's effect against the baseline.

use crate::experiment::{effect, Domain};
use std::collections::BTreeMap;
use tpslab_record::estimate::Effect;
use tpslab_record::sweep::{CellEffect, CellResult, RunMetrics, SweepResult, DROPS};
use tpslab_record::RunRecord;

use tpslab_plan::sweep::{Cell, Objective};

/// The values figure `name` of [`RunMetrics::figures`] can take, which its intervals keep
/// to: loss and a CPU's busy % are shares (0..=100 %); rates, queues in bytes, the
/// server's CPU (% of one CPU, past 100 with several threads), latencies and drop counts
/// are 0 or more; a figure tpslab does not know is any real number.
pub fn domain(name: &str) -> Domain {
    match name {
        "loss_pct" => Domain::Percent,
        n if n.starts_with("cpu") && n.ends_with("_busy_pct") => Domain::Percent,
        "tps" | "rxq_mean_bytes" | "rxq_stddev_bytes" | "server_cpu_pct" | "ctxt_per_s"
        | "server_ctxt_per_s" | "p50_us" | "p99_us" => Domain::NonNegative,
        n if n.starts_with(DROPS) => Domain::NonNegative,
        _ => Domain::Real,
    }
}

/// The gates' view of a sweep: its runs (cell, metrics); not valid evidence when any run's
/// generator fell behind, errors when any run had send or reply failures.
pub fn outcome(runs: &[(usize, RunMetrics)], interrupted: bool) -> crate::gate::Outcome {
    let invalid: Vec<usize> = runs
        .iter()
        .filter(|(_, m)| !m.valid)
        .map(|(c, _)| *c)
        .collect();
    let failed: Vec<&(usize, RunMetrics)> = runs.iter().filter(|(_, m)| m.errors > 0).collect();
    crate::gate::Outcome {
        interrupted,
        invalid: if invalid.is_empty() {
            vec![]
        } else {
            vec![format!(
                "{} of {} runs had a generator that fell behind (cells {invalid:?})",
                invalid.len(),
                runs.len()
            )]
        },
        errors: (!failed.is_empty()).then(|| {
            format!(
                "{} of {} runs had send or reply failures ({} in all)",
                failed.len(),
                runs.len(),
                failed.iter().map(|(_, m)| m.errors).sum::<u64>()
            )
        }),
        ..Default::default()
    }
}

fn window_mean(t_ms: &[f64], xs: &[f64], from_ms: f64, to_ms: f64, offset: usize) -> (f64, f64) {
    // xs[i] belongs to t_ms[i + offset] (rate series start at the second sample).
    let v: Vec<f64> = xs
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            t_ms.get(i + offset)
                .is_some_and(|&t| t >= from_ms && t <= to_ms)
        })
        .map(|(_, &x)| x)
        .collect();
    let s = crate::stats::summary(&v);
    (s.mean, s.stddev)
}

/// A sweep run's figures ([`RunMetrics`]) taken from its run record: the generator's
/// validity, TPS, loss, errors and latency (p50, p99), the kernel drops whose reasons
/// are UDP's, CPU and context switches (the host's and the server's); all zero (not
/// valid) without a generator report.
pub fn metrics(rec: &RunRecord) -> RunMetrics {
    let mut m = RunMetrics::default();
    let Some(g) = &rec.generator else {
        return m;
    };
    m.valid = g.valid;
    m.kernel_drops = rec
        .drop_reasons
        .as_ref()
        .filter(|d| d.unavailable.is_none())
        .map(|d| {
            d.by_reason
                .iter()
                .filter(|(r, _)| {
                    crate::drop_reason::classify(r) != crate::drop_reason::ReasonClass::NotUdp
                })
                .map(|(r, n)| (r.clone(), *n))
                .collect()
        });
    m.errors = g.send_failed + rec.server.as_ref().map_or(0, |s| s.reply_failed);
    m.tps = g.tps;
    m.loss_pct = match g.window_loss_pct {
        Some(l) => l,
        None => rec.ledger.as_ref().map_or(0.0, |l| {
            let a = l.request.attempted.max(1) as f64;
            100.0
                * (l.request
                    .attempted
                    .saturating_sub(l.request.count("delivered"))) as f64
                / a
        }),
    };
    if g.match_mode == tpslab_plan::udp::MatchMode::None && g.duration_s > 0.0 {
        // One way: datagrams the server read per second of the window.
        m.tps = g.window_sent as f64 * (1.0 - m.loss_pct / 100.0) / g.duration_s;
    }
    if g.match_mode != tpslab_plan::udp::MatchMode::None && g.latency_intended.count > 0 {
        m.p50_us = Some(g.latency_intended.p50_ns as f64 / 1e3);
        m.p99_us = Some(g.latency_intended.p99_ns as f64 / 1e3);
    }
    if let Some(o) = &rec.observer {
        // The load starts ~5 ms after the observer; the window follows the warm-up.
        let from = g.warmup_s * 1e3 + 5.0;
        let to = from + g.duration_s * 1e3;
        let t = &o.series.t_ms;
        let get = |k: &str| o.series.values.get(k).map(|v| v.as_slice()).unwrap_or(&[]);
        (m.rxq_mean_bytes, m.rxq_stddev_bytes) =
            window_mean(t, get("server_rx_queue_bytes"), from, to, 0);
        m.server_cpu_pct = window_mean(t, get("target_cpu_pct"), from, to, 1).0;
        m.ctxt_per_s = window_mean(t, get("ctxt_per_s"), from, to, 1).0;
        m.server_ctxt_per_s = window_mean(t, get("target_vol_ctxt_per_s"), from, to, 1).0
            + window_mean(t, get("target_invol_ctxt_per_s"), from, to, 1).0;
        m.cpu_busy_pct = o
            .cpu_pct
            .iter()
            .map(|(k, v)| (k.clone(), v.get("busy").copied().unwrap_or(0.0)))
            .collect();
    }
    m
}

/// One sentence on `change`'s effect `e` on the objective `obj`: improved or worsened
/// (a real effect), or not distinguishable from noise.
fn finding(change: &str, obj: &str, lower_better: bool, e: &Effect) -> String {
    let better = if lower_better {
        e.diff < 0.0
    } else {
        e.diff > 0.0
    };
    let rel = e.rel_pct.map_or(String::new(), |r| format!(" ({r:+.1} %)"));
    if !e.ci_lo.is_finite() || !e.ci_hi.is_finite() {
        format!(
            "{change}: {obj} changed by {:+.3}{rel}: one run on a side, no test (--repeat 2 or more)",
            e.diff
        )
    } else if e.significant {
        format!(
            "{change}: {obj} {} by {:.3}{rel}, 95 % CI [{:.3}, {:.3}]: a real effect",
            if better { "improved" } else { "worsened" },
            e.diff.abs(),
            e.ci_lo,
            e.ci_hi
        )
    } else {
        format!(
            "{change}: {obj} changed by {:+.3}{rel}, 95 % CI [{:.3}, {:.3}] includes 0: not distinguishable from noise",
            e.diff, e.ci_lo, e.ci_hi
        )
    }
}

/// One sentence per kernel drop reason whose count per run `change` moved by more than
/// the noise: "rcvbuf=4194304: kernel drops SOCKET_RCVBUFF fell from 1999 to 0 per run".
/// `means(name)` gives (baseline mean, cell mean).
fn drop_findings(
    change: &str,
    eff: &BTreeMap<String, Effect>,
    means: impl Fn(&str) -> (f64, f64),
) -> Vec<String> {
    eff.iter()
        .filter(|(n, e)| n.starts_with(DROPS) && e.significant)
        .map(|(n, e)| {
            let (b, c) = means(n);
            format!(
                "{change}: kernel drops {} {} from {b:.0} to {c:.0} per run",
                &n[DROPS.len()..],
                if e.diff < 0.0 { "fell" } else { "rose" }
            )
        })
        .collect()
}

/// A warning for a cell whose real-time policy "helps" while the server's CPU is
/// saturated: it starves the rest of that CPU (its softirq, other services).
fn fifo_warning(c: &Cell, results: &[CellResult]) -> Option<String> {
    // A real-time policy that "helps" while the server's CPU is saturated is starving
    // the rest of that CPU (its softirq, other services).
    let pol = c
        .settings
        .get("sched")
        .filter(|s| s.starts_with("fifo") || s.starts_with("rr"))?;
    let fig = |k: &str| results[c.id].figures.get(k).map_or(0.0, |e| e.mean);
    let pinned: Vec<usize> = c
        .settings
        .get("cpus")
        .filter(|v| *v != "all")
        .map(|v| {
            v.split(',')
                .filter_map(|x| x.split('-').next()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let busiest = pinned
        .iter()
        .map(|n| (format!("cpu{n}"), fig(&format!("cpu{n}_busy_pct"))))
        .fold((String::new(), 0.0), |a, b| if b.1 > a.1 { b } else { a });
    let srv = fig("server_cpu_pct");
    (busiest.1 >= 95.0 || srv >= 90.0).then(|| {
        format!(
            "{}: sched={pol} with the server at {srv:.0} % of a CPU{}: a real-time thread that takes a whole CPU starves whatever else must run there (softirq, other services)",
            c.label(),
            if busiest.1 > 0.0 { format!(" and {} {:.0} % busy", busiest.0, busiest.1) } else { String::new() }
        )
    })
}

/// The figure `fig` of each valid run of cell `cell` (NaN: not measured, left out).
fn valid_values(runs: &[(usize, RunMetrics)], cell: usize, fig: &str) -> Vec<f64> {
    runs.iter()
        .filter(|(c, m)| *c == cell && m.valid)
        .map(|(_, m)| m.figure(fig))
        .filter(|x| !x.is_nan())
        .collect()
}

/// Each cell's estimate of every figure in `names` over its valid runs, and its invalid
/// runs counted.
fn cell_results(cells: &[Cell], runs: &[(usize, RunMetrics)], names: &[String]) -> Vec<CellResult> {
    let values = |cell: usize, fig: &str| valid_values(runs, cell, fig);
    cells
        .iter()
        .map(|c| CellResult {
            cell: c.clone(),
            figures: names
                .iter()
                .map(|n| {
                    (
                        n.clone(),
                        crate::experiment::estimate(&values(c.id, n), domain(n)),
                    )
                })
                .filter(|(_, e)| e.n > 0)
                .collect(),
            invalid_runs: runs
                .iter()
                .filter(|(id, m)| *id == c.id && !m.valid)
                .count(),
        })
        .collect()
}

/// The best cell on the objective `obj` among the cells without invalid runs: the
/// baseline, or a cell whose effect on it is significant in the better direction.
fn best_cell(
    results: &[CellResult],
    effects: &[CellEffect],
    obj: &str,
    lower_better: bool,
) -> Option<usize> {
    // The best cell must beat the baseline by more than the noise (its effect on the
    // objective is significant in the better direction); otherwise the baseline stays.
    let better = |id: usize| {
        id == 0
            || effects.iter().any(|e| {
                e.cell == id
                    && e.effects.get(obj).is_some_and(|x| {
                        x.significant
                            && if lower_better {
                                x.diff < 0.0
                            } else {
                                x.diff > 0.0
                            }
                    })
            })
    };
    results
        .iter()
        .filter(|r| r.invalid_runs == 0 && better(r.cell.id))
        .filter_map(|r| r.figures.get(obj).map(|e| (r.cell.id, e.mean)))
        .min_by(|a, b| {
            let (x, y) = if lower_better { (a.1, b.1) } else { (b.1, a.1) };
            x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal)
        })
        .map(|(id, _)| id)
}

/// Analyses the runs: `runs[i] = (cell id, metrics)`.
pub fn analyse(cells: &[Cell], runs: &[(usize, RunMetrics)], objective: Objective) -> SweepResult {
    // Runs whose generator did not keep its schedule describe the tool: they are counted
    // and reported, not averaged (a starved generator offers less and "loses" less).
    let values = |cell: usize, fig: &str| valid_values(runs, cell, fig);
    let names: Vec<String> = runs
        .iter()
        .flat_map(|(_, m)| m.figures().into_keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let results = cell_results(cells, runs, &names);
    let (obj, lower_better) = objective.figure();
    let base = &cells[0];
    let mut effects = vec![];
    let mut findings = vec![];
    let mut warnings = vec![];
    for c in &cells[1..] {
        let change = c
            .settings
            .iter()
            .filter(|(k, v)| base.settings.get(*k) != Some(v))
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let eff: BTreeMap<String, Effect> = names
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    effect(&values(0, n), &values(c.id, n), domain(n)),
                )
            })
            .collect();
        if let Some(e) = eff.get(obj) {
            findings.push(finding(&change, obj, lower_better, e));
        }
        findings.extend(drop_findings(&change, &eff, |n| {
            (
                crate::experiment::estimate(&values(0, n), domain(n)).mean,
                crate::experiment::estimate(&values(c.id, n), domain(n)).mean,
            )
        }));
        warnings.extend(fifo_warning(c, &results));
        effects.push(CellEffect {
            cell: c.id,
            change,
            effects: eff,
        });
    }
    for r in &results {
        if r.invalid_runs > 0 {
            warnings.push(format!(
                "{}: {} run(s) where the generator did not keep its schedule; their figures describe the tool as much as the server",
                r.cell.label(),
                r.invalid_runs
            ));
        }
    }
    let best = best_cell(&results, &effects, obj, lower_better);
    if best == Some(0) && cells.len() > 1 {
        findings.push(format!(
            "no setting beat the baseline on {obj} by more than the noise"
        ));
    }
    if best.is_none() {
        if let Some(b) = results.first().filter(|b| b.invalid_runs > 0) {
            findings.push(format!(
                "no best cell named: a cell is named only when none of its runs missed the generator's schedule, and the baseline had {} such run(s) (as may the cells that beat it); repeat the sweep on a quieter host",
                b.invalid_runs
            ));
        }
    }
    SweepResult {
        cells: results,
        effects,
        best,
        objective,
        findings,
        warnings,
    }
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;
