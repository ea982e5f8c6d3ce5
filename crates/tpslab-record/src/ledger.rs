//! The loss ledger: every datagram sent is either delivered or dropped at a named layer.
//!
//! Two directions are balanced separately:
//! - request path (generator -> server): attempted = failed to send + dropped at the NIC +
//!   dropped in the softnet backlog + no listener (NoPorts) + dropped at the server socket's
//!   receive buffer + read by the server application + unattributed;
//! - reply path (server -> generator): replies attempted by the server = failed to send +
//!   dropped at the NIC + softnet + dropped at the generator socket's receive buffer +
//!   read by the generator + unattributed.
//!
//! NIC and softnet counters do not say which flow a drop belonged to; they are charged to
//! the request path first, up to what that path cannot otherwise explain, and the rest to
//! the reply path. `unattributed` is what no counter explains; on an idle loopback run it
//! must be 0.
//!
//! These are the ledger's types as a record holds them; the arithmetic that builds one
//! from counter deltas is `tpslab_analysis::ledger`.

use serde::{Deserialize, Serialize};

/// Counter deltas over a whole run (warm-up included: kernel counters cannot exclude it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LedgerInputs {
    /// Datagrams the generator tried to send (its own count).
    pub gen_attempted: u64,
    /// Datagrams the kernel refused to send (sendmmsg errors, generator's count).
    pub gen_send_failed: u64,
    /// Delta of the `drops` column of /proc/net/udp{,6} summed over the server's sockets;
    /// None when the server sockets were not found.
    pub server_socket_drops: Option<u64>,
    /// Delta of the `drops` column summed over the generator's own sockets.
    pub gen_socket_drops: u64,
    /// Delta of column 2 (dropped) of /proc/net/softnet_stat summed over CPUs (host-wide).
    pub softnet_drops: u64,
    /// Delta of rx `drop` of /proc/net/dev on the interfaces the traffic crossed, minus
    /// the softnet backlog drops (which the kernel counts in rx_dropped too).
    pub nic_rx_drops: u64,
    /// Delta of `Udp: NoPorts` + `Udp6NoPorts` (per network namespace).
    pub no_ports: u64,
    /// Datagrams read by the server application: the server's own count when it is ours;
    /// otherwise derived from `Udp: InDatagrams` (see `server_counts_source`).
    pub server_read: Option<u64>,
    /// Replies the server attempted (sent + failed to send); None when unknown.
    pub server_reply_attempted: Option<u64>,
    /// Replies the server failed to send (its own count); None when unknown.
    pub server_reply_failed: Option<u64>,
    /// Where `server_read` and the reply counts come from.
    pub server_counts_source: String,
    /// Datagrams read by the generator's reply receivers (all, matched or not).
    pub gen_read: u64,
    /// Whether the server is expected to answer (false for a sink).
    pub replies_expected: bool,
    /// The server's socket was found during the run: this run's datagrams met an open
    /// port, so the namespace's NoPorts (late DNS replies, probes: other traffic's first)
    /// are charged only after NIC and softnet drops.
    #[serde(default)]
    pub server_socket_seen: bool,
    /// Kernel drops by reason that no counter above covers (from `skb:kfree_skb`,
    /// host-wide; see `tpslab_analysis::drop_reason::uncovered`), largest first: each is charged
    /// as a row of its own after every counter, up to what a path leaves unexplained
    /// (request path first), the rest noted as not this run's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_drops: Vec<(String, u64)>,
    /// Most datagrams one of the generator's send messages carried (its
    /// `max_segments_per_send`; 0 or 1: one each). Above 1 (UDP GSO), a server reading
    /// with UDP_GRO queues such a message as one buffer and counts its drop as one in
    /// `drops`: each drop is charged up to this many datagrams, up to what the path
    /// leaves unexplained, before any shared counter.
    #[serde(default)]
    pub max_segments_per_send: u64,
}

/// One line of the ledger: a count of datagrams, where they ended, and the counter it
/// comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LedgerRow {
    /// Stable key of the layer, e.g. "server_socket_drops".
    pub layer: String,
    /// Human label.
    pub label: String,
    /// Datagrams.
    pub count: u64,
    /// Source counter, e.g. "/proc/net/udp `drops` of the server socket(s), delta".
    pub source: String,
}

/// One direction of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LedgerPath {
    /// Datagrams that entered this path.
    pub attempted: u64,
    /// Where they went; sums to `attempted` together with `unattributed`.
    pub rows: Vec<LedgerRow>,
    /// Datagrams no counter explains (negative: counters explain more than was sent, i.e.
    /// a count included traffic that is not this run's; see `inconsistent`). None when a
    /// needed count is unknown.
    pub unattributed: Option<i64>,
    /// Why this path does not balance (the counters explain more datagrams than entered
    /// it): then its shares mean nothing and no verdict may be drawn from it.
    #[serde(default)]
    pub inconsistent: Option<String>,
    /// Shared counters (namespace- or host-wide) that were only partly charged to this
    /// path, and other remarks on how it was balanced.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl LedgerPath {
    /// The count of a row by its layer key (0 when absent).
    pub fn count(&self, layer: &str) -> u64 {
        self.rows
            .iter()
            .filter(|r| r.layer == layer)
            .map(|r| r.count)
            .sum()
    }
    /// Dropped datagrams: all rows but the delivered one.
    pub fn lost(&self) -> u64 {
        self.rows
            .iter()
            .filter(|r| r.layer != "delivered")
            .map(|r| r.count)
            .sum::<u64>()
            + self.unattributed.unwrap_or(0).max(0) as u64
    }
    /// Share of `attempted`, percent, for a count of this path; None when the path does
    /// not balance or the share would exceed 100 % (a figure that cannot be true).
    pub fn share_pct(&self, count: u64) -> Option<f64> {
        (self.inconsistent.is_none() && self.attempted > 0 && count <= self.attempted)
            .then(|| 100.0 * count as f64 / self.attempted as f64)
    }
}

/// The two-direction ledger of a run (built from [`LedgerInputs`] by
/// `tpslab_analysis::ledger`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Ledger {
    /// Generator -> server.
    pub request: LedgerPath,
    /// Server -> generator, starting from the datagrams the server read (None for a sink).
    pub reply: Option<LedgerPath>,
}
