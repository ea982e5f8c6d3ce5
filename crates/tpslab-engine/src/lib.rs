//! tpslab's engine: the open-loop UDP generator, the reference UDP server, the observer
//! thread, and the composition of the three into one run with a ledger.

mod books;
pub mod counters;
pub mod dropwatch;
pub mod env;
pub mod fd_holders;
pub mod guard;
pub mod hostconf;
pub mod idle;
pub mod link;
pub mod listen;
pub mod load;
pub mod middlebox;
pub mod observe;
pub mod openloop;
pub mod owner;
pub mod pool_lab;
pub mod probe;
pub mod proto;
pub mod quickack;
pub mod ramp;
pub mod rr;
mod rr_http;
pub mod server;
pub mod server_tree;
pub mod sockio;
pub mod step_sampler;
mod tally;
pub mod tcpflow;
pub mod udp_run;
mod users;
pub mod waits;
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
    /// An OS operation failed: what was being done, and the OS error (its errno kept as
    /// such, for callers to match with [`EngineError::io_kind`]; part of the message, so not
    /// repeated as a source in an error chain).
    #[error("{what}: {error}")]
    Os {
        /// What was being done, e.g. "creating network namespace A (sender)".
        what: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// Anything else, described.
    #[error("{0}")]
    Other(String),
}

impl EngineError {
    /// An [`EngineError::Os`] for `what`.
    pub fn os(what: impl Into<String>, error: std::io::Error) -> Self {
        EngineError::Os {
            what: what.into(),
            error,
        }
    }

    /// The kind of the OS error behind this one, if there is one (e.g. `PermissionDenied`
    /// for EPERM/EACCES), matched on the error itself, never on its message.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            EngineError::Os { error, .. } => Some(error.kind()),
            EngineError::Net(tpslab_net::NetError::Sys { error, .. }) => Some(error.kind()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn an_os_error_keeps_its_kind_and_says_it_once() {
        let e = EngineError::os(
            "creating network namespace A",
            std::io::Error::from_raw_os_error(1),
        );
        assert_eq!(e.io_kind(), Some(std::io::ErrorKind::PermissionDenied));
        assert!(
            std::error::Error::source(&e).is_none(),
            "the OS error is in the message already"
        );
        assert_eq!(
            e.to_string().matches("Operation not permitted").count(),
            1,
            "{e}"
        );
        let n = EngineError::from(tpslab_net::NetError::io(
            "bind 127.0.0.1:1",
            std::io::Error::from_raw_os_error(13),
        ));
        assert_eq!(n.io_kind(), Some(std::io::ErrorKind::PermissionDenied));
        assert_eq!(EngineError::Other("x".into()).io_kind(), None);
    }
}
