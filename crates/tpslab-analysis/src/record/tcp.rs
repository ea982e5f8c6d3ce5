//! The record of `tpslab tcp`: the plan, each flow's TCP_INFO samples (and, in the lab,
//! the delay line's counters), or the flows of another process watched; with the
//! judgement of each, a pure function of the samples and the plan ([`TcpRun::judge`],
//! [`WatchedReport::judge`]).

use crate::tcp::{
    analyse, analyse_receiver, verdict, verdict_receiver, FlowAnalysis, ReceiverAnalysis, TcpSample,
};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use tpslab_plan::tcp::{FlowPlan, LinkConfig, TcpMode, TcpPlan};

/// What a flow did: samples of its TCP_INFO and the application's own counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Samples, the first right after connect.
    pub samples: Vec<TcpSample>,
    /// The write error that ended the flow early, if any.
    pub error: Option<String>,
    /// Whether it was stopped before its duration (Ctrl-C).
    pub interrupted: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Counters of one direction of the delay line, packets and bytes since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "is_zero")]
    pub forgotten: u64,
    /// RSTs the middlebox wrote (two or three per segment of a forgotten flow in reset
    /// mode: one to its sender, one or two to its receiver).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resets_sent: u64,
}

/// What the lab's delay line and sink saw during one flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

impl TcpRun {
    /// A flow judged from its samples after `skip_ns`: a sending flow by which limit held
    /// it (its granted SO_SNDBUF known), a receiving one by its advertised window.
    pub fn judge(flow: FlowRecord, lab: Option<LabStats>, skip_ns: u64) -> TcpRun {
        let (analysis, receiver_analysis, verdict) = if flow.plan.reverse {
            let a = analyse_receiver(&flow.samples, skip_ns);
            let v = a.as_ref().map(verdict_receiver);
            (None, a, v)
        } else {
            let a = analyse(&flow.samples, skip_ns, Some(flow.sndbuf_granted));
            let v = a.as_ref().map(verdict);
            (a, None, v)
        };
        TcpRun {
            flow,
            lab,
            analysis,
            receiver_analysis,
            verdict,
        }
    }
}

/// A TCP flow of another process, sampled through sock_diag (what `ss -tmi` shows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// TCP_INFO samples, `t_ns` from the start of the watch.
    pub samples: Vec<TcpSample>,
}

/// Which way a watched flow's data moved while it was watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A watched flow judged from its samples after `skip_ns`, as a sender when it
    /// had more bytes acknowledged than received (from the first to the last sample).
    pub fn judge(flow: WatchedFlow, skip_ns: u64) -> WatchedReport {
        let (sent, got) = match (flow.samples.first(), flow.samples.last()) {
            (Some(x), Some(y)) => (
                y.bytes_acked.saturating_sub(x.bytes_acked),
                y.bytes_received.saturating_sub(x.bytes_received),
            ),
            _ => (0, 0),
        };
        let mut r = WatchedReport {
            direction: Direction::Idle,
            analysis: None,
            receiver_analysis: None,
            verdict: None,
            flow,
        };
        if sent == 0 && got == 0 {
            return r;
        }
        if sent >= got {
            r.direction = Direction::Sending;
            r.analysis = analyse(&r.flow.samples, skip_ns, Some(r.flow.sndbuf));
            r.verdict = Some(
                r.analysis
                    .as_ref()
                    .map_or("too few samples after --skip".into(), verdict),
            );
        } else {
            r.direction = Direction::Receiving;
            r.receiver_analysis = analyse_receiver(&r.flow.samples, skip_ns);
            r.verdict = Some(r.receiver_analysis.as_ref().map_or(
                "too few samples, or no advertised window reported".into(),
                verdict_receiver,
            ));
        }
        r
    }

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

impl TcpRecord {
    /// What held a watched process's flows that its own application held: the largest
    /// class of its threads' time, in words; S4's case when they waited for the network
    /// (a peer or input upstream, not this flow). None without application-limited flows
    /// or thread samples.
    pub fn app_wait_finding(&self) -> Option<String> {
        use crate::tcp::Limit;
        use crate::waits::WaitClass;
        let w = self.thread_waits.as_ref()?;
        let held = self
            .watched
            .iter()
            .filter(|x| {
                x.analysis
                    .as_ref()
                    .is_some_and(|a| a.held_by == Limit::Application)
            })
            .count();
        if held == 0 {
            return None;
        }
        let (class, share) = w.process.dominant()?;
        let call = w
            .process
            .top_syscall(class)
            .map_or(String::new(), |c| format!(" (in {c})"));
        let what = match class {
            WaitClass::Network => "it waits on another peer or its input, not on these flows' windows or buffers: look upstream, at what it reads from (S4)",
            WaitClass::OnCpu | WaitClass::Runnable => "it is busy computing (or waiting for a CPU): its own work, not the network, sets the pace",
            WaitClass::Disk => "it waits on its disk between writes to the network",
            WaitClass::Lock => "it waits on a lock between writes to the network",
            _ => "that wait, not the network, sets the pace",
        };
        Some(format!(
            "{held} flow(s) held by their own application, whose threads spent {share:.0} % of the watch {}{call}: {what}",
            class.label()
        ))
    }

    /// The gates' view: sending flows are judged by their first run (the buffers as
    /// given; a second run shows the fix) against the target rate; a receiving flow is
    /// invalid when it could not be judged; watching has nothing to gate.
    pub fn outcome(&self) -> crate::gate::Outcome {
        let first = self.runs.first();
        match self.plan.mode {
            TcpMode::Send { .. } | TcpMode::Lab { .. } => crate::tcp::flow_outcome(
                self.interrupted,
                first.and_then(|r| r.analysis.as_ref()),
                self.plan.target_rate_bps,
            ),
            TcpMode::Reverse { .. } => crate::gate::Outcome {
                interrupted: self.interrupted,
                invalid: match first.and_then(|r| r.receiver_analysis.as_ref()) {
                    None => vec![
                        "too few samples after --skip, or no tcpi_rcv_wnd from this kernel".into(),
                    ],
                    Some(_) => vec![],
                },
                ..Default::default()
            },
            TcpMode::Watch { .. } => crate::gate::Outcome::default(),
        }
    }
}

/// `serve tcp`: the server's plan and what it moved over its life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Body, Record};

    fn fixture() -> TcpRecord {
        let text = include_str!("../../../tpslab-report/tests/fixtures/tcp_lab.json");
        match Record::from_json(text).expect("a record").body {
            Body::Tcp(t) => t,
            _ => panic!("a tcp record"),
        }
    }

    #[test]
    fn the_judgement_is_a_function_of_the_samples_and_the_plan() {
        let rec = fixture();
        for run in &rec.runs {
            let again = TcpRun::judge(run.flow.clone(), run.lab.clone(), rec.plan.skip_ns);
            assert_eq!(&again, run);
        }
        // S4 in the lab: the first run, window-bound, misses 80 Mbit/s; the gate says so.
        let first = rec.runs[0].analysis.as_ref().unwrap();
        assert_eq!(first.held_by, crate::tcp::Limit::ReceiveWindow);
        let o = rec.outcome();
        assert!(o.invalid.is_empty());
        assert!(o
            .target
            .unwrap()
            .unwrap()
            .contains("short of the 80.0 Mbit/s target"));
        // Too few samples after the skip: invalid, never judged.
        let mut short = rec.clone();
        short.plan.skip_ns = u64::MAX;
        short.runs = vec![TcpRun::judge(rec.runs[0].flow.clone(), None, u64::MAX)];
        assert!(short.runs[0].analysis.is_none() && short.runs[0].verdict.is_none());
        assert_eq!(short.outcome().invalid.len(), 1);
    }

    #[test]
    fn a_watched_flow_is_judged_by_the_way_its_data_moved() {
        let rec = fixture();
        let samples = rec.runs[0].flow.samples.clone();
        let flow = |samples: Vec<TcpSample>| WatchedFlow {
            local: "127.0.0.1:40000".parse().unwrap(),
            remote: "127.0.0.1:5001".parse().unwrap(),
            inode: 1,
            sndbuf: 131072,
            rcvbuf: 131072,
            samples,
        };
        let w = WatchedReport::judge(flow(samples.clone()), rec.plan.skip_ns);
        assert_eq!(w.direction, Direction::Sending);
        assert!(w.throughput_bps() > 1e6 && w.rtt_ms() > 29.0);
        let still: Vec<TcpSample> = samples
            .iter()
            .map(|s| TcpSample {
                bytes_acked: 7,
                ..*s
            })
            .collect();
        let idle = WatchedReport::judge(flow(still), 0);
        assert_eq!(idle.direction, Direction::Idle);
        assert!(idle.verdict.is_none() && idle.throughput_bps() == 0.0);
    }
}
