//! `capacity tcp`'s step: the open loop of [`super`] over framed TCP requests.

use super::{loops_for, result, run_schedule, HttpLiveSink, Schedule};
use crate::proto::tcp_framed::TcpFramed;
use crate::users::run_loop;
use crate::EngineError;
use std::sync::atomic::AtomicBool;
use tpslab_net::mono_ns;
use tpslab_plan::capacity::TcpStep;
use tpslab_plan::time::nanos;
use tpslab_record::load_http::LoadHttpResult;

/// `capacity tcp`'s step: an open loop of `plan.request` (framed already) over
/// `plan.connections` TCP connections at `plan.rate` for `plan.duration`, each reply ending
/// by `plan.framing` ([`TcpFramed`]), as [`super::run_load_http`]'s loop. `stop` ends it early; with
/// `live`, its samples go there each interval (as `load http --live`'s).
///
/// Returns the counts (a framed reply has no status code: each reply is counted in
/// `status.other`). Errors: a plan [`TcpStep::validate`] refuses, more connections than
/// file descriptors or local ports, a loop thread that cannot start.
pub fn run_load_tcp(
    plan: &TcpStep,
    stop: &AtomicBool,
    live: Option<&HttpLiveSink>,
) -> Result<LoadHttpResult, EngineError> {
    plan.validate()
        .map_err(|e| EngineError::Other(e.to_string()))?;
    let proto = TcpFramed::new(plan.target, plan.request.clone(), plan.framing.clone());
    let c = plan.connections;
    let loops = loops_for(c, plan.load_threads)?;
    // Room for the connections to be made before the first intended send.
    let start = mono_ns() + 100_000_000;
    let sched = Schedule::new(
        start,
        plan.rate,
        c,
        nanos(&plan.duration),
        nanos(&plan.timeout),
        stop,
    )
    .with_live(live, plan.target);
    let intended = sched.intended(c);
    let l = run_schedule(&sched, c, loops, &|ids| run_loop(&sched, &proto, ids))?;
    Ok(result(start, intended, l))
}
