//! The run of a command whose flags and plan are [`tpslab_cli::capacity`]:
//! `tpslab capacity udp HOST:PORT --slo 'p99<20ms,loss<0.1%'` (or `capacity http URL`, `capacity tcp`): the highest rate a server
//! sustains within an objective, found by open-loop steps at rates a search chooses
//! ([`tpslab_run::capacity`]), with the layer that gives first.

use crate::out::{self};
use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::capacity::CapacityCmd;

/// Runs `tpslab capacity`: the search (each step's line on stderr as it ends), the record
/// and its report. Exit 0 when the search ended, 130 when interrupted.
pub(crate) fn run(cmd: CapacityCmd) -> Result<ExitCode> {
    let (plan, record, live) = match &cmd {
        CapacityCmd::Udp(a) => (a.plan()?, &a.record, a.live),
        CapacityCmd::Http(a) => (a.plan()?, &a.record, a.live),
        CapacityCmd::Tcp(a) => (a.plan()?, &a.record, a.live),
    };
    let fail_on = plan.search.fail_on.clone();
    if live {
        tpslab_cli::live::check()?;
    }
    let mut ctx = out::ctx(None)?;
    let header = tpslab_report::live::LiveHeader {
        command: format!("capacity {}", plan.command()),
        // Port 0: a server the search starts (`--server-cmd`, tpslab's own) is given its
        // port when it starts, after the view is up.
        target: match plan.target() {
            t if t.port() == 0 => format!("the server the search starts, on {}", t.ip()),
            t => t.to_string(),
        },
        planned_s: Some(plan.step_time().as_secs_f64()),
        planned_requests: None,
        no_latency: None,
    };
    let kind = tpslab_report::live::RunsKind::Capacity;
    let view = match plan.load.udp() {
        Some(_) => out::attach_runs(live, kind, header, &mut ctx)?.map(|v| v.0),
        // Requests (HTTP, TCP): the TCP open loop's samples are the HTTP one's.
        None => out::attach_http(live, true, header, &mut ctx)?,
    };
    let rec = tpslab_run::capacity::run(&plan, &ctx);
    // The terminal is given back before the report prints (or the error is said).
    drop(view);
    let rec = rec?;
    out::emit(
        &rec,
        out::Outputs::of(record),
        out::Terminal::Report { explain: false },
    )?;
    if rec.meta.interrupted {
        return Ok(ExitCode::from(130));
    }
    // The first step found no listener: the search stopped there; the record is written,
    // the exit code says the target was never served (as `load http`'s 2 when nothing
    // answered).
    if let tpslab_record::Body::Capacity(c) = &rec.body {
        if let Some(why) = tpslab_analysis::capacity::stopped_no_listener(c) {
            eprintln!("tpslab: error: {}: {why}", plan.target());
            return Ok(ExitCode::from(2));
        }
        // A floor on the capacity found (`--fail-on 'rps>=N'`): 1 below it.
        return super::load_http::gate_exit(
            fail_on.as_deref(),
            tpslab_analysis::gate::applies::CAPACITY,
            &tpslab_analysis::gate::capacity_outcome(c),
            false,
        );
    }
    Ok(ExitCode::SUCCESS)
}
