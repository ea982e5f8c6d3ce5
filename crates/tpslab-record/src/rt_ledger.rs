//! A step's response-time ledger, as a record keeps it: the step's mean response time
//! (request written to reply read) split into measured parts, each with the figure it
//! comes from ([`RtPart::source`]) and an uncertainty, and what no part explains
//! (computed by `tpslab_analysis::rt_ledger`).

use serde::{Deserialize, Serialize};

/// A part of a request's response time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RtPart {
    /// Waiting to be accepted: the connection (its first request written) in the
    /// listen socket's accept queue.
    AcceptWait,
    /// The server's threads on a CPU for the request.
    OnCpu,
    /// The server's threads runnable, waiting for a CPU.
    Runnable,
    /// The server's threads waiting on a lock (a futex wait without a timeout, beyond
    /// the spare threads the users cannot keep busy).
    Lock,
    /// The server's threads asleep by request (nanosleep, a futex wait with a timeout).
    Sleep,
    /// The server's threads blocked on a socket to another peer (a backend).
    Peer,
    /// The server's threads waiting on disk I/O (state D, an fsync-family call).
    Disk,
    /// The server's threads in another wait (a file, a pipe, a child, unreadable).
    OtherWait,
    /// A reply's last bytes held apart from its first on the way (Nagle on the server
    /// holding the last send until the client's delayed ACK): measured per request by the
    /// client (`reply_gaps`).
    TransmissionStall,
}

impl RtPart {
    /// Every part, in report order.
    pub const ALL: [RtPart; 9] = [
        RtPart::AcceptWait,
        RtPart::OnCpu,
        RtPart::Runnable,
        RtPart::Lock,
        RtPart::Sleep,
        RtPart::Peer,
        RtPart::Disk,
        RtPart::OtherWait,
        RtPart::TransmissionStall,
    ];

    /// Words for a report.
    pub fn label(self) -> &'static str {
        match self {
            RtPart::AcceptWait => "waiting to be accepted",
            RtPart::OnCpu => "server threads on a CPU",
            RtPart::Runnable => "server threads waiting for a CPU",
            RtPart::Lock => "server threads waiting on a lock",
            RtPart::Sleep => "server threads asleep (a timer)",
            RtPart::Peer => "server threads waiting on a peer",
            RtPart::Disk => "server threads waiting on disk",
            RtPart::OtherWait => "server threads in another wait",
            RtPart::TransmissionStall => "replies held between their first and last byte",
        }
    }

    /// Where its figure comes from and how it is estimated.
    pub fn source(self) -> &'static str {
        match self {
            RtPart::AcceptWait => {
                "mean accept queue (sock_diag idiag_rqueue per sample) / TPS (Little's law)"
            }
            RtPart::OnCpu => "threads' schedstat time on a CPU / window / TPS (Little's law)",
            RtPart::Runnable => "threads' schedstat run-queue time / window / TPS (Little's law)",
            RtPart::Lock => {
                "threads' blocked time x share of samples in a futex without a timeout, less spare threads, / TPS (Little's law)"
            }
            RtPart::Sleep => {
                "threads' blocked time x share of samples in nanosleep or a timed futex / TPS (Little's law)"
            }
            RtPart::Peer => {
                "threads' blocked time x share of samples on a socket to another peer / TPS (Little's law)"
            }
            RtPart::Disk => {
                "threads' blocked time x share of samples in state D or fsync / TPS (Little's law)"
            }
            RtPart::OtherWait => {
                "threads' blocked time x share of samples in a file, pipe, child or other wait / TPS (Little's law)"
            }
            RtPart::TransmissionStall => {
                "held replies' first-to-last-byte gaps summed / replies (the client's timestamps per request, reply_gaps)"
            }
        }
    }
}

/// One measured part of a step's mean response time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LedgerPart {
    /// Which part.
    pub part: RtPart,
    /// Its time per request, ms.
    pub ms: f64,
    /// Its uncertainty, ms (one standard error of the sampled share; 0 for exact
    /// counters such as schedstat's).
    pub pm_ms: f64,
}

/// A step's response-time ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RtLedger {
    /// Users of the step.
    pub users: usize,
    /// The step's mean response time, ms (request written to reply read).
    pub mean_ms: f64,
    /// The measured parts that were read, in [`RtPart::ALL`]'s order (at most one each).
    #[serde(deserialize_with = "crate::read::ledger_parts")]
    pub parts: Vec<LedgerPart>,
    /// Mean response time the parts do not explain, ms: `mean_ms` less their sum
    /// (negative when they add up to more than the mean).
    pub unattributed_ms: f64,
    /// Time per request each user spent outside a request (connecting: SYN
    /// retransmissions after a full accept queue, TLS; backing off after a failure),
    /// ms: users / TPS - mean response - think time (Little's law over the closed
    /// loop), at least 0. Not part of the response time: the users' cycle is
    /// response + think + this.
    pub outside_ms: f64,
}

impl RtLedger {
    /// The sum of the measured parts, ms.
    pub fn attributed_ms(&self) -> f64 {
        self.parts.iter().map(|p| p.ms).sum::<f64>()
    }

    /// A part's time per request, ms (0 when not read).
    pub fn ms(&self, part: RtPart) -> f64 {
        self.parts
            .iter()
            .filter(|p| p.part == part)
            .map(|p| p.ms)
            .sum()
    }
}
