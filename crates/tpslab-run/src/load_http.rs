//! `load http URL --rate R`: an open loop of HTTP/1.1 requests at a fixed rate (the
//! engine's [`tpslab_engine::openloop`]), as one record of kind `load_http`.

use anyhow::Result;
use std::sync::atomic::Ordering::Relaxed;
use tpslab_plan::load_http::LoadHttpPlan;
use tpslab_record::{Body, Record};

use crate::{Ctx, Started};

/// Runs the plan until its end (or `ctx.stop`: the counts so far, the record marked
/// interrupted), its per-interval samples handed to `ctx.http_live`. Errors: as
/// [`tpslab_engine::openloop::run_load_http`] (one line).
pub fn run(plan: &LoadHttpPlan, ctx: &Ctx) -> Result<Record> {
    let started = Started::now();
    let secs = plan.duration.as_nanos() as f64 / 1e9;
    let what = if plan.max_rate {
        "load http at max rate (closed loop)".to_string()
    } else {
        format!("load http at {} requests/s", plan.rate)
    };
    let phase = ctx.progress.phase(&what, secs);
    let rec = tpslab_engine::openloop::run_load_http_live(plan, &ctx.stop, ctx.http_live.as_ref())?;
    drop(phase);
    let interrupted = ctx.stop.load(Relaxed);
    Ok(Record::with_meta(
        started.meta(interrupted),
        Body::LoadHttp(rec),
    ))
}
