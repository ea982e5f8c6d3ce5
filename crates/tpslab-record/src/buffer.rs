//! Receive-buffer figures as a record holds them: what a probe measured of this kernel's
//! charge per datagram, and the buffer a bursty load needs. The arithmetic that finds the
//! need is `tpslab_analysis::buffer`.

use serde::{Deserialize, Serialize};

/// What a calibration probe measured on this kernel for one datagram size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TruesizeProbe {
    /// UDP payload of the probe datagrams, bytes.
    pub size_bytes: u64,
    /// Datagrams queued (unread) when `rx_queue_bytes` was read.
    pub queued: u64,
    /// `rx_queue` of the probe socket with `queued` datagrams, bytes (/proc/net/udp).
    pub rx_queue_bytes: u64,
    /// getsockopt(SO_RCVBUF) of the probe socket, bytes.
    pub granted_bytes: u64,
    /// Datagrams the probe socket held when it started dropping (full queue).
    pub full_queued: u64,
    /// `rx_queue` of the full queue, bytes.
    pub full_rx_queue_bytes: u64,
}

impl TruesizeProbe {
    /// Memory charged per queued datagram, bytes: rx_queue / queued.
    pub fn truesize_bytes(&self) -> u64 {
        self.rx_queue_bytes.checked_div(self.queued).unwrap_or(0)
    }
    /// Whether this kernel lets a full queue exceed the limit (checks before adding).
    pub fn overshoots(&self) -> bool {
        self.full_rx_queue_bytes > self.granted_bytes
    }
}

/// The receive-buffer need of a bursty load, from what a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BufferNeed {
    /// Largest burst sent, datagrams.
    pub burst: u64,
    /// Most datagrams that had to wait at once: those the queue held (limit / truesize)
    /// plus the most dropped within one burst interval, capped at the burst.
    pub peak_backlog: u64,
    /// Memory charged per datagram, bytes.
    pub truesize_bytes: u64,
    /// Limit (granted size) that holds the backlog with the margin, bytes.
    pub granted_needed_bytes: u64,
    /// What to pass to setsockopt(SO_RCVBUF) to get it (the kernel doubles), bytes.
    pub setsockopt_bytes: u64,
    /// Safety margin applied to the backlog.
    pub margin: f64,
}

/// The largest setsockopt(SO_RCVBUF) request: the kernel doubles it into an int.
pub const MAX_RCVBUF_REQUEST: u64 = (i32::MAX / 2) as u64;

impl BufferNeed {
    /// What to ask of setsockopt(SO_RCVBUF) (capped at [`MAX_RCVBUF_REQUEST`]) and the
    /// limit that grants (twice it), bytes.
    pub fn request(&self) -> (u64, u64) {
        let req = self.setsockopt_bytes.min(MAX_RCVBUF_REQUEST);
        (req, req * 2)
    }
}
