//! `capacity tcp`'s step: the open loop of [`super`] over the step's request/reply
//! protocol (framed TCP requests by default), chosen by the engine's registry.

use super::{result, run_users, HttpLiveSink, OpenAsk, OpenLocal};
use crate::client::proto::{Exchange, Protocol, WithExchange};
use crate::EngineError;
use std::sync::atomic::AtomicBool;
use tpslab_plan::capacity::TcpStep;
use tpslab_record::load_http::LoadHttpResult;

/// `capacity tcp`'s step: an open loop of `plan.request` over `plan.connections` TCP
/// connections at `plan.rate` for `plan.duration`, each reply found by the step's protocol
/// (`plan.proto`: framed by `plan.framing` by default), as [`super::run_load_http`]'s loop. `stop` ends it early; with
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
    let proto = Protocol::for_plan(&plan.wire());
    let ask = OpenAsk {
        target: plan.target,
        rate: plan.rate,
        connections: plan.connections,
        duration: plan.duration,
        timeout: plan.timeout,
        load_threads: plan.load_threads,
        closed: None,
    };
    let (start, intended, l) = proto.with(Open {
        ask: &ask,
        stop,
        live,
    })?;
    Ok(result(start, intended, l))
}

/// The open loop run with the protocol as its own type.
struct Open<'a> {
    ask: &'a OpenAsk,
    stop: &'a AtomicBool,
    live: Option<&'a HttpLiveSink>,
}

impl WithExchange for Open<'_> {
    type Out = Result<(u64, u64, OpenLocal), EngineError>;

    fn with<P: Exchange>(self, p: &P) -> Self::Out {
        run_users(self.ask, p, self.stop, self.live)
    }
}
