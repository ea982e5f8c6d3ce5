//! `capacity tcp`'s step: the open loop of [`super`] over framed TCP requests.

use super::{result, run_users, HttpLiveSink, OpenAsk};
use crate::proto::tcp_framed::TcpFramed;
use crate::EngineError;
use std::sync::atomic::AtomicBool;
use tpslab_plan::capacity::TcpStep;
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
    let ask = OpenAsk {
        target: plan.target,
        rate: plan.rate,
        connections: plan.connections,
        duration: plan.duration,
        timeout: plan.timeout,
        load_threads: plan.load_threads,
        closed: None,
    };
    let (start, intended, l) = run_users(&ask, &proto, stop, live)?;
    Ok(result(start, intended, l))
}
