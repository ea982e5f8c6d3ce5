//! The run of a command whose flags and plan are [`tpslab_cli::sweep`]:
//! `tpslab sweep`: the folder, the runs and the analysis are [`tpslab_run::sweep`]'s.

use crate::out;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;
use tpslab_analysis::gate::applies;
use tpslab_cli::sweep::SweepArgs;
use tpslab_record::Body;
use tpslab_report::live::screen::RunsItem;
use tpslab_run::sweep::Event;

/// Runs `tpslab sweep`.
pub fn run(a: SweepArgs) -> Result<ExitCode> {
    let new = a.plan()?;
    // Before the sysctl levels are tried: a Ctrl-C then still restores them.
    let ctx = out::ctx(None)?;
    let plan = tpslab_run::sweep::prepare(new, &a.out)?;
    let exporter = crate::metrics::start(&a.metrics, "sweep")?;
    let folder = a.out.display().to_string();
    out::fitted(|o| tpslab_report::term::sweep_header(o, &plan, &folder))?;
    let cells = tpslab_plan::sweep::cells(&plan.factors, plan.design).len();
    let planned = tpslab_plan::sweep::run_order(cells, plan.repeat, plan.seed).len();
    let mut ctx = ctx;
    let load = &plan.load;
    let header = tpslab_report::live::LiveHeader {
        command: "sweep".into(),
        target: match &plan.server_cmd {
            Some(_) => "the server of --server-cmd".into(),
            None => "tpslab's server".into(),
        },
        planned_s: Some((load.warmup + load.duration).as_secs_f64()),
        planned_requests: None,
        no_latency: (!load.expect_replies).then(|| "the load reads no replies".into()),
    };
    let kind = tpslab_report::live::RunsKind::Sweep { planned };
    let view = out::attach_runs(a.live, kind, header, &mut ctx)?;
    let pb = if out::progress_shown() && view.is_none() {
        indicatif::ProgressBar::new(planned as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs, ETA {eta} {msg}")
            .unwrap()
            .progress_chars("=> "),
    );
    let to_view = view.as_ref().map(|v| v.1.clone());
    let rec = tpslab_run::sweep::run(&plan, &a.out, &ctx, &mut |e| match e {
        Event::Next(cell) => {
            if let Some(tx) = &to_view {
                let _ = tx.send(RunsItem::Run(cell.label()));
            }
            pb.set_message(cell.label())
        }
        Event::Done {
            done,
            planned,
            cell,
            record,
        } => {
            pb.inc(1);
            if let Some(tx) = &to_view {
                let m = tpslab_analysis::sweep::metrics(record);
                let _ = tx.send(RunsItem::SweepDone(done, cell.label(), Box::new(m)));
            }
            // Scraped: the runs done, and the last run's figures labelled by its cell.
            if let Some(e) = &exporter {
                e.set(tpslab_report::metrics::sweep_progress(
                    done,
                    planned,
                    &cell.label(),
                    record,
                ));
            }
        }
    });
    pb.finish_and_clear();
    // The terminal is given back before the report prints (or the error is said).
    drop(to_view);
    drop(view);
    let Some(rec) = rec? else {
        eprintln!("tpslab: interrupted before a run of the baseline cell finished; the records so far are in {} (--resume continues)", a.out.display());
        return Ok(ExitCode::from(130));
    };
    let Body::Sweep(r) = &rec.body else {
        unreachable!("a sweep makes a sweep record")
    };
    let outputs = out::Outputs::of(&a.record).with("--csv", a.csv.as_deref(), "CSV", |w| {
        tpslab_report::csv::sweep(w, r)
    });
    let print = |out: &mut dyn Write| tpslab_report::term::sweep_results(out, r);
    out::emit(&rec, outputs, out::Terminal::With(&print))?;
    a.gate.exit(
        &tpslab_analysis::sweep::outcome(
            &tpslab_run::sweep::metrics(&r.runs),
            rec.meta.interrupted,
        ),
        applies::SWEEP,
    )
}
