//! `tpslab bdp`'s record: a path's round-trip time, the ceiling a window puts on a flow
//! over it, and the buffers a rate needs against this host's TCP buffer settings. The
//! arithmetic is `tpslab_analysis::bdp`'s; this holds what it found.

use serde::{Deserialize, Serialize};

/// Buffers a flow needs for a rate over an RTT.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BufferPlan {
    /// The bandwidth-delay product, bytes.
    pub bdp_bytes: u64,
    /// Buffer that yields a window of the BDP: twice it, because the kernel advertises
    /// only part of the buffer as window (the rest covers skb overhead; tcp_adv_win_scale
    /// / the measured scaling ratio), rounded up to 64 KiB.
    pub buffer_bytes: u64,
}

impl BufferPlan {
    /// What to ask of setsockopt(SO_SNDBUF/SO_RCVBUF) for this buffer, bytes: half of
    /// it, because the kernel doubles what it is given.
    pub fn setsockopt_bytes(&self) -> u64 {
        self.buffer_bytes / 2
    }
}

/// A host's TCP buffer settings as read from /proc/sys (None: could not be read).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostBuffers {
    /// net.ipv4.tcp_rmem as read (three fields: min, default, max bytes).
    pub tcp_rmem: Option<String>,
    /// net.ipv4.tcp_wmem as read.
    pub tcp_wmem: Option<String>,
    /// net.core.rmem_max, bytes.
    pub rmem_max: Option<u64>,
    /// net.core.wmem_max, bytes.
    pub wmem_max: Option<u64>,
}

/// What a rate over an RTT needs, against a host: `tpslab bdp --rate`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Need {
    /// The rate, bits/s.
    pub rate_bps: f64,
    /// The round-trip time, seconds.
    pub rtt_s: f64,
    /// The bytes in flight and the buffer that gives them.
    pub plan: BufferPlan,
    /// The host's settings.
    pub host: HostBuffers,
    /// The sysctls to raise, (dotted key, value) in order; empty: the host allows the
    /// buffer already.
    pub fixes: Vec<(String, String)>,
}

/// The most a window carries over an RTT: `tpslab bdp --buffer`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Ceiling {
    /// The window (buffer) asked about, bytes.
    pub window_bytes: u64,
    /// The round-trip time, seconds.
    pub rtt_s: f64,
    /// window / RTT, bits/s.
    pub ceiling_bps: f64,
}

/// A `bdp` answer: the ceiling of `--buffer`, the needs of `--rate`, or both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BdpRecord {
    /// The path's round-trip time (`--rtt`), seconds.
    pub rtt_s: f64,
    /// The ceiling of `--buffer` (None: no buffer asked about).
    pub ceiling: Option<Ceiling>,
    /// The needs of `--rate` (None: no rate asked about).
    pub need: Option<Need>,
}
