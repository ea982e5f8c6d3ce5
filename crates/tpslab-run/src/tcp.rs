//! `tcp`: a bulk flow with its TCP_INFO sampled and which limit held it, to a sink, from
//! a source, across tpslab's delay line between two namespaces (with the recommended
//! buffers tried again when the flow missed its target rate because of a buffer), or
//! another process's established flows watched.

use crate::{Ctx, Started};
use anyhow::{anyhow, Result};
use std::time::Duration;
use tpslab_analysis::bdp;
use tpslab_engine::lab::tcpflow;
use tpslab_plan::tcp::{TcpMode, TcpPlan};
use tpslab_plan::time::nanos;
use tpslab_record::tcp::Limit;
use tpslab_record::tcp::TcpRun;
use tpslab_record::{Body, Record, TcpRecord};

/// Runs the plan and returns its record (kind tcp). `on_lab_run(record, i)` is called as
/// soon as the lab's run `i` has ended (0: as planned; 1: the re-run with the recommended
/// buffers), with the record so far, so the run can be shown before the next starts; an
/// error from it ends the workflow. `ctx.stop` ends the flow (the record says interrupted)
/// and skips the re-run.
///
/// Errors: the connection (refused, timed out), the lab without root (namespaces and TUN
/// devices), sock_diag for watched flows.
pub fn run(
    plan: &TcpPlan,
    ctx: &Ctx,
    on_lab_run: &mut dyn FnMut(&TcpRecord, usize) -> Result<()>,
) -> Result<Record> {
    let started = Started::now();
    let mut rec = TcpRecord {
        plan: *plan,
        runs: vec![],
        watched: vec![],
        thread_waits: None,
        interrupted: false,
    };
    match plan.mode {
        TcpMode::Send { target } | TcpMode::Reverse { target } => {
            let flow = plan.flow(target, plan.sndbuf);
            let t = tpslab_net::mono_ns();
            let s = tcpflow::connect(target, flow.sndbuf, flow.rcvbuf, Duration::from_secs(5))?;
            let connect_ns = tpslab_net::mono_ns() - t;
            let secs = plan.duration.as_nanos() as f64 / 1e9;
            let f = ctx.phase("tcp flow", secs, || {
                tcpflow::run_flow(s, flow, connect_ns, &ctx.stop)
            })?;
            rec.runs
                .push(tpslab_analysis::tcp::judge_run(f, None, nanos(&plan.skip)));
        }
        TcpMode::Lab { .. } => lab(&mut rec, ctx, on_lab_run)?,
        TcpMode::Watch { pid, port } => {
            // Where the process's threads wait, beside its flows (S4: in poll, on a peer).
            let every = (nanos(&plan.interval) / 1_000_000).max(100);
            let mut waits =
                pid.map(|p| tpslab_engine::observe::waits::WaitSampler::new(p, None, every));
            let flows = tcpflow::watch_flows(
                pid,
                port,
                nanos(&plan.duration),
                nanos(&plan.interval),
                &ctx.stop,
                waits.as_mut(),
            )?;
            rec.thread_waits = waits.map(|w| w.finish());
            rec.watched = flows
                .into_iter()
                .map(|f| tpslab_analysis::tcp::judge_watched(f, nanos(&plan.skip)))
                .collect();
        }
    }
    rec.interrupted = ctx.stopped() || rec.runs.first().is_some_and(|r| r.flow.interrupted);
    Ok(Record::with_meta(
        started.meta(rec.interrupted),
        Body::Tcp(rec),
    ))
}

/// The lab: the flow as planned; when it misses the target rate because of a buffer (the
/// receive window or the send buffer held it), the same lab again with the buffer
/// [`bdp::buffer_plan`] recommends for the target rate over the measured RTT, unless the
/// plan says not to verify or the run was stopped.
fn lab(
    rec: &mut TcpRecord,
    ctx: &Ctx,
    on_run: &mut dyn FnMut(&TcpRecord, usize) -> Result<()>,
) -> Result<()> {
    let plan = rec.plan;
    let TcpMode::Lab {
        link,
        sink_rcvbuf,
        verify,
    } = plan.mode
    else {
        unreachable!("called for the lab")
    };
    let port = std::net::SocketAddr::from(([0, 0, 0, 0], 5001));
    let run = |snd: Option<u64>, rcv: Option<u64>| -> Result<TcpRun> {
        let secs = plan.duration.as_nanos() as f64 / 1e9;
        let (flow, stats) = ctx
            .phase("tcp lab flow", secs, || {
                tcpflow::run_lab_flow(link, rcv, plan.flow(port, snd), &ctx.stop)
            })
            .map_err(|e| {
                if e.io_kind() == Some(std::io::ErrorKind::PermissionDenied) {
                    anyhow!("tcp --lab-rtt needs root (network namespaces and TUN devices): {e}")
                } else {
                    anyhow!("{e}")
                }
            })?;
        Ok(tpslab_analysis::tcp::judge_run(
            flow,
            Some(stats),
            nanos(&plan.skip),
        ))
    };
    rec.runs.push(run(plan.sndbuf, sink_rcvbuf)?);
    on_run(rec, 0)?;
    if let Some(buf) = verify_buffer(rec, verify && !ctx.stopped()) {
        rec.runs.push(run(Some(buf), Some(buf))?);
        on_run(rec, 1)?;
    }
    Ok(())
}

/// The buffer (setsockopt bytes, for both ends) the lab's first run is tried again with:
/// Some when `verify`, the plan has a target rate, the run fell short of it and a buffer
/// held it (receive window or send buffer).
fn verify_buffer(rec: &TcpRecord, verify: bool) -> Option<u64> {
    let (rate, an) = rec
        .plan
        .target_rate_bps
        .zip(rec.runs.first()?.analysis.as_ref())
        .filter(|(r, an)| an.throughput_bps < *r)?;
    let buffer_bound = matches!(an.held_by, Limit::ReceiveWindow | Limit::SendBuffer);
    (verify && buffer_bound)
        .then(|| bdp::buffer_plan(rate, an.rtt_mean_us / 1e6).setsockopt_bytes())
}
