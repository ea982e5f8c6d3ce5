//! `load http --http2`: the open loop's [`super::Schedule`] over the HTTP/2 loop
//! ([`super::run_loop`]), and its record.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use tpslab_plan::load_http::LoadHttpPlan;
use tpslab_record::load_http::{Http2Streams, LoadHttpRecord};

use super::{run_loop, H2Run};
use crate::client::openloop::{loops_for, record, run_schedule, HttpLiveSink, OpenAsk};
use crate::EngineError;

/// `load http --http2`'s run: as [`super::run_load_http`]'s, over
/// `connections` HTTP/2 connections with `streams` schedules each. Errors: as
/// [`super::run_load_http`]'s; a server that does not speak HTTP/2 (one line, after the first
/// connection that shows it).
pub(in crate::client::openloop) fn run_load_h2(
    plan: &LoadHttpPlan,
    stop: &AtomicBool,
    live: Option<&HttpLiveSink>,
) -> Result<LoadHttpRecord, EngineError> {
    let headers = crate::client::proto::h2::request_headers(&plan.request, plan.body.len())
        .map_err(EngineError::Other)?;
    let tls = crate::client::proto::tls::client_for(&plan.request, crate::client::proto::h2::ALPN)
        .map_err(EngineError::Other)?;
    let c = plan.connections;
    let loops = loops_for(c, plan.load_threads)?;
    let (start, sched, intended) = OpenAsk::of_http(plan).schedule(plan.schedules(), stop, live);
    let run = H2Run {
        sched: &sched,
        target: plan.target,
        url: plan.request.url.clone(),
        tls,
        headers,
        body: plan.body.clone(),
        connections: c,
        streams: plan.streams.max(1),
        fatal: Mutex::new(None),
        closed: false,
        seen: Mutex::new(vec![]),
    };
    let l = run_schedule(&sched, c, loops, &|ids| run_loop(&run, ids))?;
    if let Some(why) = run.fatal.lock().unwrap_or_else(|e| e.into_inner()).take() {
        return Err(EngineError::Other(why));
    }
    let mut rec = record(plan, start, intended, l);
    let seen = run.seen.lock().unwrap_or_else(|e| e.into_inner());
    rec.result.http2 = Some(Http2Streams::sum(seen.iter()));
    Ok(rec)
}
