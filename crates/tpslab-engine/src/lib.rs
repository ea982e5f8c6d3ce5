//! tpslab's engine: the open-loop UDP generator, the reference UDP server, the observer
//! thread, and the composition of the three into one run with a ledger.

pub mod counters;
pub mod env;
pub mod guard;
pub mod lab;
pub mod link;
pub mod load;
pub mod observe;
pub mod probe;
pub mod ramp;
pub mod rr;
pub mod server;
pub mod tcpflow;
pub mod wire;

/// Engine errors; each names what failed and with which value.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A socket or OS call failed.
    #[error(transparent)]
    Net(#[from] tpslab_net::NetError),
    /// Anything else, described.
    #[error("{0}")]
    Other(String),
}
