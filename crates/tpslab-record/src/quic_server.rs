//! The datagrams beneath a `load http --http3` run against a server on this host: the
//! server's QUIC (UDP) socket found by the URL's address (as `diagnose udp` finds a UDP
//! server), the observer's evidence on it over the run (drops and receive queue against
//! its SO_RCVBUF, RcvbufErrors, softnet, kernel drop reasons, the owning process's
//! reading threads and where they wait), and the datagram ledger of the request path
//! (the client's datagrams, from quinn's statistics, against where they ended).

use serde::{Deserialize, Serialize};

use crate::ledger::Ledger;
use crate::run::{DropReasons, ObserverReport, TargetProcess};

/// The server's side of the QUIC run, as the host showed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QuicServerUdp {
    /// The address the server's socket was looked for by (the URL's, "127.0.0.1:8443").
    pub address: String,
    /// The process holding the socket (found by its socket, `found_by` says how); None
    /// when no process could be seen holding it.
    pub target: Option<TargetProcess>,
    /// The QUIC implementation the server's executable carries, when known (its Go
    /// packages' names in the executable); None: not recognised.
    pub stack: Option<QuicStack>,
    /// The observer over the run (its `target_rcvbuf_bytes` is the socket's SO_RCVBUF as
    /// granted, sock_diag meminfo, bytes; `deltas` `server_drops` its drops).
    pub observer: ObserverReport,
    /// Request path at datagram level: quinn's datagrams sent (`udp_tx.datagrams`, every
    /// connection, their CONNECTION_CLOSE included) against the server socket's drops,
    /// softnet, NoPorts, kernel drop reasons and what the server's threads read
    /// (tracepoints, root on kernel 6.4+; else its namespace's Udp InDatagrams minus
    /// the client's own). The reply path (the server's threads' sends, counted exactly,
    /// against quinn's `udp_rx.datagrams`) only with exact counts; a GSO send counts one.
    pub ledger: Ledger,
    /// Kernel drops by reason over the run (host-wide), or why none were read.
    pub drop_reasons: Option<DropReasons>,
    /// The server's network namespace's socket buffer limits when the run started
    /// (`/proc/sys/net/core/{rmem_max,rmem_default,wmem_max}`), bytes; None unreadable.
    pub rmem_max: Option<u64>,
    /// `net.core.rmem_default`, bytes.
    pub rmem_default: Option<u64>,
    /// `net.core.wmem_max`, bytes.
    pub wmem_max: Option<u64>,
    /// How the counts were taken or qualified.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A QUIC implementation recognised in the server's executable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QuicStack {
    /// Its name ("quic-go").
    pub name: String,
    /// The Go package path found in the executable ("github.com/lucas-clemente/quic-go").
    pub package: String,
    /// The receive buffer it asks for with SO_RCVBUF, bytes; it falls back to what
    /// net.core.rmem_max allows.
    pub asks_bytes: u64,
    /// It asks for the same send buffer (SO_SNDBUF, capped by net.core.wmem_max).
    #[serde(default)]
    pub send_too: bool,
    /// Where `asks_bytes` comes from.
    pub source: String,
}
