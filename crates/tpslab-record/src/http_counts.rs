//! An HTTP run's counts by status class and by failure kind: what `load http`'s result,
//! its time series and its live samples count (`load_http` and `http_series` both hold
//! them; a module of their own so that neither imports the other's).

use serde::{Deserialize, Serialize};

/// Final replies by status class (1xx interim replies are skipped, not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatusClasses {
    /// 2xx.
    pub s2xx: u64,
    /// 3xx.
    pub s3xx: u64,
    /// 4xx.
    pub s4xx: u64,
    /// 5xx.
    pub s5xx: u64,
    /// Any other code (below 200 final, 600 and above).
    pub other: u64,
}

impl StatusClasses {
    /// All final replies.
    pub fn total(&self) -> u64 {
        self.s2xx + self.s3xx + self.s4xx + self.s5xx + self.other
    }
}

/// Requests (or connects) that failed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorKinds {
    /// A connect refused (nothing listening).
    pub refused: u64,
    /// A connection reset (RST, or a write to a connection the peer had closed).
    pub reset: u64,
    /// No reply (or no connect) within the timeout.
    pub timeout: u64,
    /// The server closed the connection with a request in flight.
    pub closed: u64,
    /// Bytes that were not an HTTP/1.1 reply (or one this client cannot delimit).
    pub protocol: u64,
    /// Anything else (an OS error).
    pub other: u64,
    /// TLS (`https://`): a handshake that failed (a certificate not trusted, no common
    /// version or cipher, the peer's alert) or a record that did not decrypt.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub tls: u64,
    /// A protocol error of its own kind, [`UNSOLICITED`]: an HTTP/1.1 response no request
    /// asked for. In `errors`: bytes after a whole reply, failing the request it followed;
    /// in `connect_errors`: bytes on a connection with no request in flight, failing no
    /// request. Each closed its connection. 0 in older records.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub unsolicited: u64,
}

/// The failure of an HTTP/1.1 response no request asked for (one request is in flight
/// per connection): counted as [`ErrorKinds::unsolicited`].
pub const UNSOLICITED: &str = "http: a response with no request in flight";

impl ErrorKinds {
    /// No failure of any kind.
    pub fn is_none(&self) -> bool {
        self.total() == 0
    }

    /// All failures.
    pub fn total(&self) -> u64 {
        self.list().iter().map(|(_, n)| n).sum()
    }

    /// Each kind with its count, as the report names them, in the report's order.
    pub fn list(&self) -> [(&'static str, u64); 8] {
        [
            ("refused", self.refused),
            ("reset", self.reset),
            ("timeout", self.timeout),
            ("closed by peer", self.closed),
            ("tls", self.tls),
            ("protocol", self.protocol),
            ("unsolicited response", self.unsolicited),
            ("other", self.other),
        ]
    }

    /// The kinds that occurred, `refused 3, tls 2`, or `none`.
    pub fn summary(&self) -> String {
        let s: Vec<String> = self
            .list()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if s.is_empty() {
            "none".into()
        } else {
            s.join(", ")
        }
    }

    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &ErrorKinds) {
        self.refused += o.refused;
        self.reset += o.reset;
        self.timeout += o.timeout;
        self.closed += o.closed;
        self.protocol += o.protocol;
        self.other += o.other;
        self.tls += o.tls;
        self.unsolicited += o.unsolicited;
    }
}
