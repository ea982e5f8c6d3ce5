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
pub mod sockio;
pub mod tcpflow;
pub mod wire;

/// Whether a socket read/write error only means "try again": a timeout (SO_RCVTIMEO /
/// SO_SNDTIMEO expired, reported as WouldBlock or TimedOut) or a signal.
pub(crate) fn retryable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

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
