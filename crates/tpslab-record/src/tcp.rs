//! The record of `tpslab tcp` and `serve tcp`: the plan, each flow's TCP_INFO samples
//! (and, in the lab, the delay line's counters), or the flows of another process watched,
//! each with its judgement ([`FlowAnalysis`], [`ReceiverAnalysis`], a verdict). Judging
//! a flow from its samples is `tpslab_analysis::tcp`.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use tpslab_plan::tcp::{FlowPlan, LinkConfig, TcpPlan};

/// One TCP_INFO reading of the sending socket. Fields the kernel did not report are 0
/// and `chronos` false.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TcpSample {
    /// Monotonic time of the reading, ns since the flow connected.
    pub t_ns: u64,
    /// Bytes acknowledged by the receiver so far (`tcpi_bytes_acked` minus the SYN).
    pub bytes_acked: u64,
    /// Bytes retransmitted so far (`tcpi_bytes_retrans`).
    pub bytes_retrans: u64,
    /// Segments retransmitted so far (`tcpi_total_retrans`).
    pub retrans_segs: u32,
    /// Smoothed RTT, us (`tcpi_rtt`).
    pub rtt_us: u32,
    /// RTT variance, us (`tcpi_rttvar`).
    pub rttvar_us: u32,
    /// Lowest RTT seen, us (`tcpi_min_rtt`).
    pub min_rtt_us: u32,
    /// Congestion window, segments (`tcpi_snd_cwnd`).
    pub cwnd_segs: u32,
    /// Sender MSS, bytes (`tcpi_snd_mss`).
    pub mss: u32,
    /// Bytes in flight: `tcpi_unacked` x MSS.
    pub in_flight_bytes: u64,
    /// The receiver's advertised window, bytes (`tcpi_snd_wnd`).
    pub peer_window_bytes: u32,
    /// Written by the application and not yet sent, bytes (`tcpi_notsent_bytes`).
    pub notsent_bytes: u32,
    /// Latest delivery-rate sample, bytes/s (`tcpi_delivery_rate`).
    pub delivery_rate_bps: u64,
    /// Chronographs, us since the connection started (see `tpslab_analysis::tcp`).
    pub busy_us: u64,
    /// `tcpi_rwnd_limited`, us.
    pub rwnd_limited_us: u64,
    /// `tcpi_sndbuf_limited`, us.
    pub sndbuf_limited_us: u64,
    /// Whether the kernel reported the chronographs.
    pub chronos: bool,
    /// Receiving side: bytes received so far (`tcpi_bytes_received`).
    #[serde(default)]
    pub bytes_received: u64,
    /// Receiving side: its RTT estimate, us (`tcpi_rcv_rtt`).
    #[serde(default)]
    pub rcv_rtt_us: u32,
    /// Receiving side: the window it advertises, bytes (`tcpi_rcv_wnd`, Linux 6.x).
    #[serde(default)]
    pub rcv_wnd_bytes: u32,
    /// TCP timestamps negotiated (`tcpi_options` & 1): without them the receiver's RTT
    /// is the time to receive one window, so window / RTT is the throughput by
    /// construction and proves nothing.
    #[serde(default)]
    pub timestamps: bool,
}

/// The four limits a sender can sit behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The receiver's advertised window (its receive buffer).
    ReceiveWindow,
    /// The sender's send buffer.
    SendBuffer,
    /// The congestion window or the path (loss, queueing, link rate).
    CongestionWindow,
    /// The application did not write fast enough.
    Application,
}

impl Limit {
    /// Plain name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Limit::ReceiveWindow => "receiver window (its receive buffer)",
            Limit::SendBuffer => "sender's send buffer",
            Limit::CongestionWindow => "congestion window / the path",
            Limit::Application => "application (not writing fast enough)",
        }
    }
}

/// Analysis of one flow over its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FlowAnalysis {
    /// Seconds between the first and last sample.
    pub seconds: f64,
    /// Bytes acknowledged in that time.
    pub bytes: u64,
    /// Throughput, bits/s: bytes acknowledged x 8 / seconds (goodput, retransmissions
    /// not counted twice).
    pub throughput_bps: f64,
    /// Share of the time behind each limit by the rules of `tpslab_analysis::tcp`, 0..1, in
    /// the order receive window, send buffer, congestion window, application.
    pub shares: [f64; 4],
    /// The limit with the largest share.
    pub held_by: Limit,
    /// The kernel's chronographs alone over the same time, same order (`None` before
    /// Linux 4.10): rwnd_limited, sndbuf_limited, busy minus both, not busy.
    pub kernel_chronos: Option<[f64; 4]>,
    /// Mean smoothed RTT over the samples, us.
    pub rtt_mean_us: f64,
    /// Lowest RTT seen, us.
    pub min_rtt_us: u32,
    /// Mean of the receiver's advertised window, bytes.
    pub peer_window_mean_bytes: f64,
    /// Mean bytes in flight.
    pub in_flight_mean_bytes: f64,
    /// Mean congestion window x MSS, bytes.
    pub cwnd_mean_bytes: f64,
    /// Bytes retransmitted in the window.
    pub bytes_retrans: u64,
    /// window / RTT for the mean peer window and mean RTT, bits/s: the ceiling that
    /// window sets.
    pub window_ceiling_bps: f64,
    /// Mean bytes in flight / mean RTT, bits/s: what the flight carried.
    pub flight_rate_bps: f64,
}

/// The four limits in the order of [`FlowAnalysis::shares`].
pub const LIMITS: [Limit; 4] = [
    Limit::ReceiveWindow,
    Limit::SendBuffer,
    Limit::CongestionWindow,
    Limit::Application,
];

/// A flow seen from the receiving side, where the sender's state is not visible.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReceiverAnalysis {
    /// Seconds between the first and last sample used.
    pub seconds: f64,
    /// Bytes received in that time.
    pub bytes: u64,
    /// Throughput, bits/s.
    pub throughput_bps: f64,
    /// Mean of the receiver's RTT estimate, us (samples where it was measured).
    pub rcv_rtt_mean_us: f64,
    /// Mean of the window this side advertised, bytes.
    pub rcv_wnd_mean_bytes: f64,
    /// Advertised window / RTT, bits/s: the most this side's window lets through;
    /// `None` when the RTT was not measured or TCP timestamps are off.
    pub window_ceiling_bps: Option<f64>,
    /// Whether the flow ran at 80 % of that ceiling or more: this side's receive
    /// window held it; `None` when the ceiling is unknown.
    pub window_bound: Option<bool>,
}

/// What a flow did: samples of its TCP_INFO and the application's own counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FlowRecord {
    /// The plan it ran.
    pub plan: FlowPlan,
    /// SO_SNDBUF granted (getsockopt after connect), bytes.
    pub sndbuf_granted: u64,
    /// Time to connect, ns.
    pub connect_ns: u64,
    /// Bytes the application wrote.
    pub bytes_written: u64,
    /// Bytes the application read (reverse).
    #[serde(default)]
    pub bytes_read: u64,
    /// SO_RCVBUF at the end (getsockopt), bytes.
    #[serde(default)]
    pub rcvbuf_granted: u64,
    /// Samples, the first right after connect (at most 360 002: a longer list is refused,
    /// `tpslab_plan::limits::FLOW_SAMPLES`).
    #[serde(deserialize_with = "crate::read::tcp_samples")]
    pub samples: Vec<TcpSample>,
    /// The write error that ended the flow early, if any.
    pub error: Option<String>,
    /// Whether it was stopped before its duration (Ctrl-C).
    pub interrupted: bool,
}

/// Counters of one direction of the delay line, packets and bytes since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DirStats {
    /// Packets read from the sending side's TUN.
    pub packets_in: u64,
    /// Bytes of those packets.
    pub bytes_in: u64,
    /// Packets written into the receiving side's TUN.
    pub delivered: u64,
    /// Dropped by the random loss setting.
    pub dropped_loss: u64,
    /// Dropped because the rate limiter's queue was full (tail drop).
    pub dropped_queue: u64,
    /// Dropped because MAX_LINE_PACKETS were already on the line.
    pub line_full: u64,
    /// Writes into the receiving TUN that failed.
    pub write_errors: u64,
    /// Still on the line when the link stopped (never delivered).
    pub on_line_at_stop: u64,
    /// Packets of flows the middlebox had forgotten (idle past its timeout), dropped or
    /// answered with RSTs (left out of records when 0).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub forgotten: u64,
    /// RSTs the middlebox wrote (two or three per segment of a forgotten flow in reset
    /// mode: one to its sender, one or two to its receiver).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub resets_sent: u64,
}

/// What the lab's delay line and sink saw during one flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LabStats {
    /// The emulated link.
    pub link: LinkConfig,
    /// The link's counters at the end: [sender to sink, sink to sender].
    pub link_stats: [DirStats; 2],
    /// SO_RCVBUF asked for on the sink, bytes; `None` = autotuning.
    pub sink_rcvbuf: Option<u64>,
    /// SO_RCVBUF the sink's listener was granted, bytes.
    pub sink_rcvbuf_granted: u64,
    /// Bytes the sink read.
    pub sink_bytes: u64,
}

/// One flow and its judgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TcpRun {
    /// The flow.
    pub flow: FlowRecord,
    /// The lab's link and sink, when the flow ran in the lab.
    pub lab: Option<LabStats>,
    /// Which limit held a sending flow; `None` with too few samples after the skip, or
    /// when this side received.
    pub analysis: Option<FlowAnalysis>,
    /// This side's receive window, when it received (`--reverse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_analysis: Option<ReceiverAnalysis>,
    /// The verdict in one sentence, when there is an analysis.
    pub verdict: Option<String>,
}

/// A TCP flow of another process, sampled through sock_diag (what `ss -tmi` shows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchedFlow {
    /// Local address.
    pub local: SocketAddr,
    /// Remote address.
    pub remote: SocketAddr,
    /// Socket inode.
    pub inode: u64,
    /// Send buffer limit at the last sample, bytes (sk_sndbuf).
    pub sndbuf: u64,
    /// Receive buffer limit at the last sample, bytes (sk_rcvbuf).
    pub rcvbuf: u64,
    /// TCP_INFO samples, `t_ns` from the start of the watch (at most 360 002: a longer
    /// list is refused, `tpslab_plan::limits::FLOW_SAMPLES`).
    #[serde(deserialize_with = "crate::read::tcp_samples")]
    pub samples: Vec<TcpSample>,
}

/// Which way a watched flow's data moved while it was watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// More bytes acknowledged than received: judged as a sender.
    Sending,
    /// More bytes received: judged by the window it advertised.
    Receiving,
    /// No data moved (or fewer than one sample).
    Idle,
}

/// A watched flow and its judgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchedReport {
    /// The flow.
    pub flow: WatchedFlow,
    /// Which way it moved data.
    pub direction: Direction,
    /// Sending: which limit held it.
    pub analysis: Option<FlowAnalysis>,
    /// Receiving: its advertised window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_analysis: Option<ReceiverAnalysis>,
    /// The verdict in one sentence (a reason when it could not be judged; none when idle).
    pub verdict: Option<String>,
}

impl WatchedReport {
    /// Throughput after the skip, bits/s (0 when not judged).
    pub fn throughput_bps(&self) -> f64 {
        match (&self.analysis, &self.receiver_analysis) {
            (Some(a), _) => a.throughput_bps,
            (_, Some(a)) => a.throughput_bps,
            _ => 0.0,
        }
    }

    /// Mean RTT after the skip, ms (the receiver's estimate when receiving; 0 when not
    /// judged).
    pub fn rtt_ms(&self) -> f64 {
        match (&self.analysis, &self.receiver_analysis) {
            (Some(a), _) => a.rtt_mean_us / 1e3,
            (_, Some(a)) => a.rcv_rtt_mean_us / 1e3,
            _ => 0.0,
        }
    }
}

/// Everything `tpslab tcp` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TcpRecord {
    /// The validated plan.
    pub plan: TcpPlan,
    /// The flows this command ran: one (to a sink, from a source), or in the lab the
    /// first run and, when verified, the run with the recommended buffers.
    pub runs: Vec<TcpRun>,
    /// The flows of another process, when watching.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watched: Vec<WatchedReport>,
    /// Where the watched process's threads spent the watch (`--watch-pid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_waits: Option<crate::waits::ThreadWaits>,
    /// Ctrl-C/SIGTERM ended it early (the figures cover what ran).
    pub interrupted: bool,
}

/// `serve tcp`: the server's plan and what it moved over its life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServeTcpRecord {
    /// The validated plan.
    pub plan: tpslab_plan::tcp::ServeTcpPlan,
    /// The address it listened on.
    pub addr: SocketAddr,
    /// SO_RCVBUF of the listener at start (sink), bytes (getsockopt).
    pub rcvbuf_granted: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Bytes read (sink) or written (source).
    pub bytes: u64,
    /// Requests answered (echo, replace).
    pub requests: u64,
    /// Connections that ended with an error other than the peer closing (echo, replace).
    pub errors: u64,
    /// Its life, seconds.
    pub elapsed_s: f64,
    /// Ended by SIGINT/SIGTERM (the usual end without --duration).
    pub interrupted: bool,
}
