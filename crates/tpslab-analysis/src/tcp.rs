//! Which limit held a TCP flow: analysis of TCP_INFO samples taken on the sender.
//!
//! Each interval between two samples is put behind one limit, from the state at its
//! end and the kernel's chronographs over it (`tcpi_busy_time`: us with data
//! outstanding, which includes `tcpi_rwnd_limited` and `tcpi_sndbuf_limited`):
//! 1. busy less than half the interval: the **application** (nothing to send);
//! 2. bytes in flight within 10 % (or 2 MSS) of the receiver's advertised window: the
//!    **receive window**;
//! 3. in flight within 10 % (or 2 MSS) of cwnd x MSS: the **congestion window** / path;
//! 4. below both windows and the send buffer full (`tcpi_sndbuf_limited` grew by 5 % of
//!    the interval or more, or in flight + not yet sent >= half of SO_SNDBUF): the
//!    **send buffer**;
//! 5. otherwise the **application** (room in every window and buffer, nothing sent).
//!
//! The kernel's own chronograph shares are kept beside this: on Linux 6.x they
//! under-count the receive window (a flow whose flight sits at the window showed
//! rwnd_limited for 22-45 % of the time here), because the window-limited state is
//! cleared whenever a transmit attempt stops for another reason (TSO deferral, TSQ).

use crate::gate::Outcome;
use tpslab_plan::tcp::TcpMode;
use tpslab_record::tcp::{
    Direction, FlowRecord, LabStats, TcpRecord, TcpRun, WatchedFlow, WatchedReport,
};
use tpslab_record::tcp::{FlowAnalysis, Limit, ReceiverAnalysis, TcpSample, LIMITS};
use tpslab_record::waits::WaitClass;

fn near(x: f64, limit: f64, mss: f64) -> bool {
    limit > 0.0 && x + (2.0 * mss).max(0.1 * limit) >= limit
}

/// The limit of the interval from `prev` to `cur` (rules in the module text).
/// `sndbuf_bytes`: the sender's SO_SNDBUF as granted, if known.
pub fn classify(prev: &TcpSample, cur: &TcpSample, sndbuf_bytes: Option<u64>) -> Limit {
    let dt_us = cur.t_ns.saturating_sub(prev.t_ns) as f64 / 1e3;
    let chronos = prev.chronos && cur.chronos && dt_us > 0.0;
    let share = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt_us;
    let mss = cur.mss as f64;
    let flight = cur.in_flight_bytes as f64;
    if chronos && share(prev.busy_us, cur.busy_us) < 0.5 {
        return Limit::Application;
    }
    if near(flight, cur.peer_window_bytes as f64, mss) {
        return Limit::ReceiveWindow;
    }
    if near(flight, cur.cwnd_segs as f64 * mss, mss) {
        return Limit::CongestionWindow;
    }
    let sndbuf_chrono = chronos && share(prev.sndbuf_limited_us, cur.sndbuf_limited_us) >= 0.05;
    let sndbuf_full =
        sndbuf_bytes.is_some_and(|b| (flight + cur.notsent_bytes as f64) * 2.0 >= b as f64);
    if sndbuf_chrono || sndbuf_full {
        Limit::SendBuffer
    } else {
        Limit::Application
    }
}

/// Analyses samples in time order (the first one after connect). Samples from
/// `skip_ns` on are used (skip slow start with it); needs 2 samples.
/// `sndbuf_bytes`: the sender's SO_SNDBUF as granted, if known.
pub fn analyse(
    samples: &[TcpSample],
    skip_ns: u64,
    sndbuf_bytes: Option<u64>,
) -> Option<FlowAnalysis> {
    let s: Vec<&TcpSample> = samples.iter().filter(|s| s.t_ns >= skip_ns).collect();
    let (first, last) = (*s.first()?, *s.last()?);
    if s.len() < 2 || last.t_ns <= first.t_ns {
        return None;
    }
    let dt_ns = (last.t_ns - first.t_ns) as f64;
    let seconds = dt_ns / 1e9;
    let bytes = last.bytes_acked.saturating_sub(first.bytes_acked);
    let throughput_bps = bytes as f64 * 8.0 / seconds;
    let mut shares = [0.0; 4];
    for w in s.windows(2) {
        let l = classify(w[0], w[1], sndbuf_bytes);
        let i = LIMITS.iter().position(|&x| x == l).unwrap_or(3);
        shares[i] += w[1].t_ns.saturating_sub(w[0].t_ns) as f64 / dt_ns;
    }
    let mut best = 0;
    for i in 1..4 {
        if shares[i] > shares[best] {
            best = i;
        }
    }
    let kernel_chronos = (first.chronos && last.chronos).then(|| {
        let d = |a: u64, b: u64| b.saturating_sub(a) as f64 * 1e3 / dt_ns;
        let busy = d(first.busy_us, last.busy_us).min(1.0);
        let rwnd = d(first.rwnd_limited_us, last.rwnd_limited_us).min(busy);
        let sndbuf = d(first.sndbuf_limited_us, last.sndbuf_limited_us).min(busy - rwnd);
        [rwnd, sndbuf, busy - rwnd - sndbuf, 1.0 - busy]
    });
    let n = s.len() as f64;
    let mean = |f: &dyn Fn(&TcpSample) -> f64| s.iter().map(|x| f(x)).sum::<f64>() / n;
    let rtt_mean_us = mean(&|x| x.rtt_us as f64);
    let peer_window_mean_bytes = mean(&|x| x.peer_window_bytes as f64);
    let in_flight_mean_bytes = mean(&|x| x.in_flight_bytes as f64);
    let cwnd_mean_bytes = mean(&|x| x.cwnd_segs as f64 * x.mss as f64);
    let per_rtt = |b: f64| {
        if rtt_mean_us > 0.0 {
            b * 8.0 / (rtt_mean_us / 1e6)
        } else {
            0.0
        }
    };
    Some(FlowAnalysis {
        seconds,
        bytes,
        throughput_bps,
        shares,
        held_by: LIMITS[best],
        kernel_chronos,
        rtt_mean_us,
        min_rtt_us: s
            .iter()
            .map(|x| x.min_rtt_us)
            .filter(|&v| v > 0)
            .min()
            .unwrap_or(0),
        peer_window_mean_bytes,
        in_flight_mean_bytes,
        cwnd_mean_bytes,
        bytes_retrans: last.bytes_retrans.saturating_sub(first.bytes_retrans),
        window_ceiling_bps: per_rtt(peer_window_mean_bytes),
        flight_rate_bps: per_rtt(in_flight_mean_bytes),
    })
}

/// Analyses samples taken on the receiving socket from `skip_ns` on; needs 2 samples,
/// and `None` when the kernel reports no advertised window (before 6.x).
pub fn analyse_receiver(samples: &[TcpSample], skip_ns: u64) -> Option<ReceiverAnalysis> {
    let s: Vec<&TcpSample> = samples.iter().filter(|s| s.t_ns >= skip_ns).collect();
    let (first, last) = (*s.first()?, *s.last()?);
    if s.len() < 2 || last.t_ns <= first.t_ns {
        return None;
    }
    let seconds = (last.t_ns - first.t_ns) as f64 / 1e9;
    let bytes = last.bytes_received.saturating_sub(first.bytes_received);
    let throughput_bps = bytes as f64 * 8.0 / seconds;
    let rtts: Vec<f64> = s
        .iter()
        .filter(|x| x.rcv_rtt_us > 0)
        .map(|x| x.rcv_rtt_us as f64)
        .collect();
    let rcv_rtt_mean_us = if rtts.is_empty() {
        0.0
    } else {
        rtts.iter().sum::<f64>() / rtts.len() as f64
    };
    let rcv_wnd_mean_bytes = s.iter().map(|x| x.rcv_wnd_bytes as f64).sum::<f64>() / s.len() as f64;
    if rcv_wnd_mean_bytes <= 0.0 {
        return None;
    }
    let timestamps = s.iter().all(|x| x.timestamps);
    let window_ceiling_bps = (rcv_rtt_mean_us > 0.0 && timestamps)
        .then(|| rcv_wnd_mean_bytes * 8.0 / (rcv_rtt_mean_us / 1e6));
    Some(ReceiverAnalysis {
        seconds,
        bytes,
        throughput_bps,
        rcv_rtt_mean_us,
        rcv_wnd_mean_bytes,
        window_ceiling_bps,
        window_bound: window_ceiling_bps.map(|c| throughput_bps >= 0.8 * c),
    })
}

/// The receiving side's verdict in one sentence.
pub fn verdict_receiver(a: &ReceiverAnalysis) -> String {
    let mbit = |b: f64| b / 1e6;
    let Some(ceiling) = a.window_ceiling_bps else {
        return format!(
            "{:.1} Mbit/s; whether this side's window held it cannot be told here: the receiver's RTT was not measured independently (TCP timestamps off, or no RTT sample)",
            mbit(a.throughput_bps)
        );
    };
    if a.window_bound == Some(true) {
        format!(
            "held by this side's receive window: {:.0} KiB advertised over a {:.1} ms RTT lets through at most {:.1} Mbit/s (window / RTT); the flow made {:.1} Mbit/s. Raise this side's buffer (SO_RCVBUF, or the last value of net.ipv4.tcp_rmem)",
            a.rcv_wnd_mean_bytes / 1024.0,
            a.rcv_rtt_mean_us / 1e3,
            mbit(ceiling),
            mbit(a.throughput_bps)
        )
    } else {
        format!(
            "not held by this side's receive window ({:.1} Mbit/s made, {:.1} Mbit/s allowed by {:.0} KiB over {:.1} ms): the limit is on the sending side or the path (its send buffer, congestion window, the link or the application); run tpslab tcp from the sender to tell which",
            mbit(a.throughput_bps),
            mbit(ceiling),
            a.rcv_wnd_mean_bytes / 1024.0,
            a.rcv_rtt_mean_us / 1e3
        )
    }
}

/// The gates' view of a sending flow (`tcp TARGET`, the lab's first run): invalid when
/// the samples were too few to judge (`analysis` None), the target missed when the flow's
/// throughput (after `--skip`) is below `target_bps`.
pub fn flow_outcome(
    interrupted: bool,
    analysis: Option<&FlowAnalysis>,
    target_bps: Option<f64>,
) -> Outcome {
    Outcome {
        interrupted,
        invalid: match analysis {
            None => vec!["too few TCP_INFO samples after --skip to judge the flow".into()],
            Some(_) => vec![],
        },
        target: target_bps.map(|r| match analysis {
            Some(a) if a.throughput_bps >= r => None,
            Some(a) => Some(format!(
                "{:.1} Mbit/s, short of the {:.1} Mbit/s target",
                a.throughput_bps / 1e6,
                r / 1e6
            )),
            None => Some(format!(
                "the flow could not be judged against the {:.1} Mbit/s target",
                r / 1e6
            )),
        }),
        ..Default::default()
    }
}

/// The verdict in one sentence, with the figures that back it.
pub fn verdict(a: &FlowAnalysis) -> String {
    let mbit = |b: f64| b / 1e6;
    let limit = a.held_by;
    let best = LIMITS.iter().position(|&x| x == limit).unwrap_or(3);
    let share = a.shares[best] * 100.0;
    let rtt_ms = a.rtt_mean_us / 1e3;
    let mut also = String::new();
    if let Some((i, s)) = a
        .shares
        .iter()
        .enumerate()
        .filter(|&(i, &s)| i != best && s >= 0.25)
        .max_by(|x, y| x.1.total_cmp(y.1))
    {
        let both = matches!(LIMITS[i], Limit::ReceiveWindow | Limit::SendBuffer)
            && matches!(limit, Limit::ReceiveWindow | Limit::SendBuffer);
        also = format!(
            ". Also held by the {} {:.0} % of the time{}",
            LIMITS[i].name(),
            s * 100.0,
            if both { ": raise both" } else { "" }
        );
    }
    let main = match limit {
        Limit::ReceiveWindow => format!(
            "held by the receiver's window {share:.0} % of the time: {:.0} KiB advertised over a {rtt_ms:.1} ms RTT carries at most {:.1} Mbit/s (window / RTT); the flow made {:.1} Mbit/s. Raise the receiver's buffer (its SO_RCVBUF, or net.ipv4.tcp_rmem when it does not set one)",
            a.peer_window_mean_bytes / 1024.0,
            mbit(a.window_ceiling_bps),
            mbit(a.throughput_bps)
        ),
        Limit::SendBuffer => format!(
            "held by the sender's send buffer {share:.0} % of the time: {:.0} KiB in flight over a {rtt_ms:.1} ms RTT carries {:.1} Mbit/s; the flow made {:.1} Mbit/s. Raise the sender's buffer (its SO_SNDBUF, or net.ipv4.tcp_wmem when it does not set one)",
            a.in_flight_mean_bytes / 1024.0,
            mbit(a.flight_rate_bps),
            mbit(a.throughput_bps)
        ),
        Limit::CongestionWindow => format!(
            "held by the congestion window / the path {share:.0} % of the time ({:.0} KiB cwnd, {} bytes retransmitted, {rtt_ms:.1} ms RTT): {:.1} Mbit/s; bigger buffers will not help, the path (its rate, queue or loss) is the limit",
            a.cwnd_mean_bytes / 1024.0,
            a.bytes_retrans,
            mbit(a.throughput_bps)
        ),
        Limit::Application => format!(
            "the sending application was the limit {share:.0} % of the time (nothing queued to send): {:.1} Mbit/s; the network and buffers were waiting for it",
            mbit(a.throughput_bps)
        ),
    };
    main + &also
}

/// A flow judged from its samples after `skip_ns`: a sending flow by which limit held
/// it (its granted SO_SNDBUF known), a receiving one by its advertised window.
pub fn judge_run(flow: FlowRecord, lab: Option<LabStats>, skip_ns: u64) -> TcpRun {
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

/// A watched flow judged from its samples after `skip_ns`, as a sender when it
/// had more bytes acknowledged than received (from the first to the last sample).
pub fn judge_watched(flow: WatchedFlow, skip_ns: u64) -> WatchedReport {
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

/// What held a watched process's flows that its own application held: the largest
/// class of its threads' time, in words; S4's case when they waited for the network
/// (a peer or input upstream, not this flow). None without application-limited flows
/// or thread samples.
pub fn app_wait_finding(rec: &TcpRecord) -> Option<String> {
    let w = rec.thread_waits.as_ref()?;
    let held = rec
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
    let call = crate::waits::top_syscall(&w.process, class)
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
pub fn outcome(rec: &TcpRecord) -> Outcome {
    let first = rec.runs.first();
    match rec.plan.mode {
        TcpMode::Send { .. } | TcpMode::Lab { .. } => flow_outcome(
            rec.interrupted,
            first.and_then(|r| r.analysis.as_ref()),
            rec.plan.target_rate_bps,
        ),
        TcpMode::Reverse { .. } => Outcome {
            interrupted: rec.interrupted,
            invalid: match first.and_then(|r| r.receiver_analysis.as_ref()) {
                None => {
                    vec!["too few samples after --skip, or no tcpi_rcv_wnd from this kernel".into()]
                }
                Some(_) => vec![],
            },
            ..Default::default()
        },
        TcpMode::Watch { .. } => Outcome::default(),
    }
}

#[cfg(test)]
#[path = "tcp_tests.rs"]
mod tests;
