//! The run of a command whose flags and plan are [`tpslab_cli::probe`]:
//! `tpslab probe idle`: after how long of idleness a path kills a TCP connection (S5),
//! against a server or in tpslab's lab behind a middlebox with a known timeout.

use crate::out;
use anyhow::{bail, Result};
use std::io::Write;
use std::process::ExitCode;
use tpslab_cli::probe::{IdleArgs, PoolArgs, ProbeCmd, ResponderArgs};
use tpslab_plan::probe::IdleTarget;
use tpslab_record::Body;
use tpslab_report::term::idle as idle_term;
use tpslab_run::probe::{self};

/// Runs `tpslab probe ...`.
pub(crate) fn run(cmd: ProbeCmd) -> Result<ExitCode> {
    match cmd {
        ProbeCmd::Idle(a) => idle(a),
        ProbeCmd::IdleResponder(a) => responder(a),
        ProbeCmd::Pool(a) => pool_run(a),
    }
}

fn pool_run(a: PoolArgs) -> Result<ExitCode> {
    let (plan, login) = a.plan()?;
    if plan.target.is_none() && !tpslab_net::is_root() {
        bail!("probe pool creates network namespaces: run as root");
    }
    let ctx = out::ctx(None)?;
    let mut stdout = std::io::stdout().lock();
    crate::out::fitted(|o| idle_term::pool_header(o, &probe::pool_begin(&plan)))?;
    stdout.flush()?;
    let rec = probe::pool(&plan, login.as_ref(), &ctx)?;
    let Body::ProbePool(r) = &rec.body else {
        unreachable!("a probe_pool record")
    };
    crate::out::fitted(|o| idle_term::after_header(o, |w| idle_term::pool_record(w, r)))?;
    drop(stdout);
    out::emit_files(&rec, &a.record)?;
    Ok(ExitCode::SUCCESS)
}

fn responder(a: ResponderArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let r = probe::Responder::bind(&plan)?;
    let ctx = out::ctx(None)?;
    println!(
        "tpslab probe idle-responder on {} (UDP and TCP): answering `tpslab probe idle --udp` requests after the idle time each asks for, and probing `--server-first` connections first",
        r.local_addr()?
    );
    let n = r.serve(&ctx)?;
    println!("answered {n} request(s)");
    Ok(ExitCode::SUCCESS)
}

fn idle(a: IdleArgs) -> Result<ExitCode> {
    let setup = a.plan()?;
    if matches!(setup.plan.target, IdleTarget::Lab { .. }) && !tpslab_net::is_root() {
        bail!("--lab-idle-timeout creates network namespaces: run as root");
    }
    tpslab_net::raise_nofile();
    let ctx = out::ctx(None)?;
    let begun = probe::idle_begin(&setup);
    let mut stdout = std::io::stdout().lock();
    crate::out::fitted(|o| idle_term::header(o, &begun))?;
    stdout.flush()?;
    let rec = probe::idle(begun, setup.login.as_ref(), &ctx)?;
    let Body::ProbeIdle(r) = &rec.body else {
        unreachable!("a probe_idle record")
    };
    // The header again is the report's first line: print the rest.
    crate::out::fitted(|o| idle_term::after_header(o, |w| idle_term::record(w, r)))?;
    drop(stdout);
    out::emit_files(&rec, &a.record)?;
    Ok(ExitCode::SUCCESS)
}
