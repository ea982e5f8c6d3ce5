//! `tpslab tcp` in a terminal: the verdict, a timeline of TCP_INFO, the share of time
//! behind each limit, the buffers a target rate needs; the lab's delay line; the flows of
//! another process watched.

use super::table;
use std::io::{self, Write};
use tpslab_analysis::bdp;
use tpslab_analysis::tcp::classify;
use tpslab_plan::tcp::{ServeTcpMode, TcpMode};
use tpslab_record::tcp::{Direction, FlowRecord, LabStats, ServeTcpRecord, TcpRecord, TcpRun};
use tpslab_record::tcp::{FlowAnalysis, Limit, LIMITS};

fn mbit(bps: f64) -> String {
    format!("{:.1}", bps / 1e6)
}

fn describe_buf(asked: Option<u64>, granted: u64) -> String {
    match asked {
        Some(a) => format!("{a} (granted {granted})"),
        None => format!("autotuned ({granted} at start)"),
    }
}

/// The whole record, as `tpslab tcp` printed it.
pub fn record(w: &mut dyn Write, r: &TcpRecord) -> io::Result<()> {
    match r.plan.mode {
        TcpMode::Watch { .. } => watched(w, r),
        TcpMode::Reverse { .. } => reverse(w, r),
        TcpMode::Send { .. } | TcpMode::Lab { .. } => {
            for part in 0..r.runs.len() {
                run_part(w, r, part)?;
            }
            Ok(())
        }
    }
}

/// A sending flow's part `part` (0: the flow as planned, with the recommendation when
/// the target was missed; 1: the lab's run with the recommended buffers, and before
/// against after), printed as soon as its run ends.
pub fn run_part(w: &mut dyn Write, r: &TcpRecord, part: usize) -> io::Result<()> {
    let Some(run) = r.runs.get(part) else {
        return Ok(());
    };
    let target = r.plan.target_rate_bps;
    if part == 1 {
        writeln!(w)?;
        let lab = run.lab.as_ref();
        flow(
            w,
            &format!(
                "AFTER: the same lab with both buffers at the recommended size (sender SO_SNDBUF {}, sink SO_RCVBUF {})",
                describe_buf(run.flow.plan.sndbuf, run.flow.sndbuf_granted),
                describe_buf(lab.and_then(|l| l.sink_rcvbuf), lab.map_or(0, |l| l.sink_rcvbuf_granted))
            ),
            run,
            tpslab_plan::time::nanos(&r.plan.skip),
            target,
        )?;
        if let Some(l) = lab {
            lab_line(w, l)?;
        }
        if let (Some(b), Some(x)) = (&r.runs[0].analysis, &run.analysis) {
            before_after(w, b, x, target)?;
        }
        return Ok(());
    }
    match r.plan.mode {
        TcpMode::Lab {
            link, sink_rcvbuf, ..
        } => {
            let lab = run.lab.as_ref();
            writeln!(
                w,
                "tpslab tcp: lab between two network namespaces over tpslab's delay line (RTT {} ms, rate {}, loss {} %, queue {} packets); {} s; sender SO_SNDBUF {}, sink SO_RCVBUF {}",
                link.rtt_ns() as f64 / 1e6,
                link.rate_bps.map_or("unlimited".into(), |r| format!("{} Mbit/s", mbit(r))),
                link.loss * 100.0,
                link.queue_packets,
                r.plan.duration.as_nanos() as f64 / 1e9,
                describe_buf(r.plan.sndbuf, run.flow.sndbuf_granted),
                describe_buf(sink_rcvbuf, lab.map_or(0, |l| l.sink_rcvbuf_granted))
            )?;
            if let Some(l) = lab {
                lab_line(w, l)?;
                if let (Some(asked), Some(a)) = (sink_rcvbuf, &run.analysis) {
                    window_arithmetic(w, asked, l, a, link.rtt_ns() as f64 / 1e9)?;
                }
            }
        }
        TcpMode::Send { target } => writeln!(
            w,
            "tpslab tcp: {} s to {target}; SO_SNDBUF {}",
            r.plan.duration.as_nanos() as f64 / 1e9,
            describe_buf(r.plan.sndbuf, run.flow.sndbuf_granted)
        )?,
        TcpMode::Reverse { .. } | TcpMode::Watch { .. } => {}
    }
    flow(w, "", run, tpslab_plan::time::nanos(&r.plan.skip), target)?;
    if let (Some(t), Some(a)) = (target, &run.analysis) {
        if a.throughput_bps < t {
            recommend(w, t, a)?;
        }
    }
    Ok(())
}

/// One sending flow: verdict, timeline, limits, figures, sources.
fn flow(
    w: &mut dyn Write,
    title: &str,
    run: &TcpRun,
    skip_ns: u64,
    target_bps: Option<f64>,
) -> io::Result<()> {
    let f = &run.flow;
    if !title.is_empty() {
        writeln!(w, "{title}")?;
    }
    let Some(a) = &run.analysis else {
        return writeln!(
            w,
            "  too short to analyse: {} samples after --skip; lengthen --duration",
            f.samples.iter().filter(|s| s.t_ns >= skip_ns).count()
        );
    };
    let v = run.verdict.as_deref().unwrap_or_default();
    match target_bps {
        Some(t) if a.throughput_bps >= t => writeln!(
            w,
            "VERDICT: {} Mbit/s meets the {} Mbit/s target. What holds it now: {v}",
            mbit(a.throughput_bps),
            mbit(t)
        )?,
        Some(t) => writeln!(
            w,
            "VERDICT: {} Mbit/s, short of the {} Mbit/s target: {v}",
            mbit(a.throughput_bps),
            mbit(t)
        )?,
        None => writeln!(w, "VERDICT: {v}")?,
    }
    timeline(w, f)?;
    let mut t = table(&["limit", "share of time", "kernel chronograph"]);
    for (k, l) in LIMITS.iter().enumerate() {
        t.add_row(vec![
            l.name().to_string(),
            format!("{:.1} %", a.shares[k] * 100.0),
            a.kernel_chronos
                .map_or("n/a".into(), |c| format!("{:.1} %", c[k] * 100.0)),
        ]);
    }
    crate::term::fit::put(w, t)?;
    writeln!(
        w,
        "  {} Mbit/s: {} bytes acknowledged in {:.2} s (after the first {:.1} s); RTT mean {:.2} ms, min {:.2} ms; peer window mean {:.0} B; in flight mean {:.0} B; cwnd mean {:.0} B; {} bytes retransmitted",
        mbit(a.throughput_bps),
        a.bytes,
        a.seconds,
        skip_ns as f64 / 1e9,
        a.rtt_mean_us / 1e3,
        a.min_rtt_us as f64 / 1e3,
        a.peer_window_mean_bytes,
        a.in_flight_mean_bytes,
        a.cwnd_mean_bytes,
        a.bytes_retrans
    )?;
    writeln!(
        w,
        "  ceilings: peer window / RTT = {} Mbit/s; bytes in flight / RTT = {} Mbit/s",
        mbit(a.window_ceiling_bps),
        mbit(a.flight_rate_bps)
    )?;
    writeln!(w, "  sources: TCP_INFO of the sending socket every {:.0} ms (tcpi_bytes_acked, tcpi_rtt, tcpi_snd_cwnd x tcpi_snd_mss, tcpi_snd_wnd, tcpi_unacked x tcpi_snd_mss, tcpi_busy_time / tcpi_rwnd_limited / tcpi_sndbuf_limited)",
        f.plan.interval.as_nanos() as f64 / 1e6)?;
    ended(w, f)?;
    if f.interrupted {
        writeln!(w, "  interrupted before its duration")?;
    }
    Ok(())
}

fn ended(w: &mut dyn Write, f: &FlowRecord) -> io::Result<()> {
    match &f.error {
        Some(e) => writeln!(w, "  the flow ended early: {e}"),
        None => Ok(()),
    }
}

/// About ten rows of the sending flow's TCP_INFO, each interval behind one limit.
fn timeline(w: &mut dyn Write, f: &FlowRecord) -> io::Result<()> {
    let s = &f.samples;
    let step = (s.len() / 10).max(1);
    let mut t = table(&[
        "t (s)",
        "Mbit/s",
        "RTT ms",
        "cwnd KiB",
        "peer window KiB",
        "in flight KiB",
        "retrans",
        "limit",
    ]);
    let mut i = 0;
    while i + step < s.len() {
        let (p, c) = (&s[i], &s[i + step]);
        let dt = (c.t_ns.saturating_sub(p.t_ns)) as f64 / 1e9;
        // A rate over a sliver (the last sample, taken when the flow ended) is noise.
        if !too_short(dt, step, tpslab_plan::time::nanos(&f.plan.interval)) {
            let lim = classify(&s[i + step - 1], c, Some(f.sndbuf_granted));
            t.add_row(vec![
                format!("{:.1}", c.t_ns as f64 / 1e9),
                mbit(c.bytes_acked.saturating_sub(p.bytes_acked) as f64 * 8.0 / dt),
                format!("{:.1}", c.rtt_us as f64 / 1e3),
                format!("{:.0}", c.cwnd_segs as f64 * c.mss as f64 / 1024.0),
                format!("{:.0}", c.peer_window_bytes as f64 / 1024.0),
                format!("{:.0}", c.in_flight_bytes as f64 / 1024.0),
                c.retrans_segs.saturating_sub(p.retrans_segs).to_string(),
                match lim {
                    Limit::ReceiveWindow => "rwnd",
                    Limit::SendBuffer => "sndbuf",
                    Limit::CongestionWindow => "cwnd",
                    Limit::Application => "app",
                }
                .into(),
            ]);
        }
        i += step;
    }
    crate::term::fit::put(w, t)
}

/// Whether a timeline row spans less than half of the `step` sampling intervals it
/// stands for (or no time at all): its rate would be noise, or a division by zero.
fn too_short(dt_s: f64, step: usize, interval_ns: u64) -> bool {
    dt_s <= 0.0 || dt_s * 1e9 < 0.5 * step as f64 * interval_ns as f64
}

fn before_after(
    w: &mut dyn Write,
    b: &FlowAnalysis,
    x: &FlowAnalysis,
    target: Option<f64>,
) -> io::Result<()> {
    let mut t = table(&[
        "",
        "Mbit/s",
        "RTT ms",
        "peer window KiB",
        "in flight KiB",
        "held by",
    ]);
    for (name, y) in [("before", b), ("after", x)] {
        t.add_row(vec![
            name.to_string(),
            mbit(y.throughput_bps),
            format!("{:.1}", y.rtt_mean_us / 1e3),
            format!("{:.0}", y.peer_window_mean_bytes / 1024.0),
            format!("{:.0}", y.in_flight_mean_bytes / 1024.0),
            y.held_by.name().to_string(),
        ]);
    }
    crate::term::fit::put(w, t)?;
    if let Some(r) = target {
        writeln!(
            w,
            "  target {} Mbit/s: {}",
            mbit(r),
            if x.throughput_bps >= r {
                "reached"
            } else {
                "NOT reached"
            }
        )?;
    }
    Ok(())
}

fn lab_line(w: &mut dyn Write, l: &LabStats) -> io::Result<()> {
    let [ab, ba] = l.link_stats;
    writeln!(
        w,
        "  delay line: sender->sink {} packets ({} dropped by loss, {} by the full queue), sink->sender {} packets ({} / {}); the sink read {} bytes",
        ab.packets_in, ab.dropped_loss, ab.dropped_queue, ba.packets_in, ba.dropped_loss, ba.dropped_queue, l.sink_bytes
    )
}

/// S4's arithmetic: the buffer asked for, granted, and the window it turned into.
fn window_arithmetic(
    w: &mut dyn Write,
    asked: u64,
    l: &LabStats,
    a: &FlowAnalysis,
    rtt_s: f64,
) -> io::Result<()> {
    writeln!(
        w,
        "  window arithmetic: sink SO_RCVBUF {asked} asked -> {} granted (doubled for overhead) -> {:.0} bytes advertised ({:.0} % of granted); {asked} / {:.0} ms = {} Mbit/s, {:.0} / {:.0} ms = {} Mbit/s",
        l.sink_rcvbuf_granted,
        a.peer_window_mean_bytes,
        a.peer_window_mean_bytes * 100.0 / l.sink_rcvbuf_granted.max(1) as f64,
        rtt_s * 1e3,
        mbit(bdp::window_ceiling_bps(asked, rtt_s)),
        a.peer_window_mean_bytes,
        rtt_s * 1e3,
        mbit(a.peer_window_mean_bytes * 8.0 / rtt_s)
    )
}

/// The buffers `rate_bps` needs over the measured RTT.
fn recommend(w: &mut dyn Write, rate_bps: f64, a: &FlowAnalysis) -> io::Result<()> {
    let rtt_s = a.rtt_mean_us / 1e6;
    let p = bdp::buffer_plan(rate_bps, rtt_s);
    let ask = p.setsockopt_bytes();
    writeln!(
        w,
        "Recommendation for {} Mbit/s over the measured {:.1} ms RTT: {} bytes in flight (bandwidth-delay product); socket buffers of {} bytes on both ends (the kernel advertises only part of a buffer as window):",
        mbit(rate_bps),
        rtt_s * 1e3,
        p.bdp_bytes,
        p.buffer_bytes
    )?;
    writeln!(
        w,
        "  in code: setsockopt(fd, SOL_SOCKET, SO_SNDBUF, {ask}) on the sender and SO_RCVBUF {ask} on the receiver, before connect()/listen(); the kernel doubles it to {}",
        p.buffer_bytes
    )?;
    writeln!(
        w,
        "  or, for applications that set no buffer, let autotuning reach it: the last value of net.ipv4.tcp_rmem (receiver) and net.ipv4.tcp_wmem (sender) >= {0}; applications that set their own are capped by net.core.rmem_max / wmem_max",
        p.buffer_bytes
    )?;
    writeln!(
        w,
        "  (tpslab bdp --rate {}mbit --rtt {}us compares with this host's settings)",
        rate_bps / 1e6,
        (rtt_s * 1e6).round()
    )
}

/// `tcp --reverse`: this side's receive window.
fn reverse(w: &mut dyn Write, r: &TcpRecord) -> io::Result<()> {
    let TcpMode::Reverse { target } = r.plan.mode else {
        return Ok(());
    };
    let Some(run) = r.runs.first() else {
        return Ok(());
    };
    let f = &run.flow;
    writeln!(
        w,
        "tpslab tcp --reverse: {} s from {target}; this side's SO_RCVBUF {}",
        r.plan.duration.as_nanos() as f64 / 1e9,
        describe_buf(r.plan.rcvbuf, f.rcvbuf_granted)
    )?;
    let Some(an) = &run.receiver_analysis else {
        return writeln!(w, "  too short to analyse, or this kernel does not report the advertised window (tcpi_rcv_wnd)");
    };
    writeln!(w, "VERDICT: {}", run.verdict.as_deref().unwrap_or_default())?;
    let s = &f.samples;
    let step = (s.len() / 10).max(1);
    let mut t = table(&[
        "t (s)",
        "Mbit/s",
        "receiver RTT ms",
        "advertised window KiB",
    ]);
    let mut i = 0;
    while i + step < s.len() {
        let (p, c) = (&s[i], &s[i + step]);
        let dt = (c.t_ns.saturating_sub(p.t_ns)) as f64 / 1e9;
        if too_short(dt, step, tpslab_plan::time::nanos(&r.plan.interval)) {
            i += step;
            continue;
        }
        t.add_row(vec![
            format!("{:.1}", c.t_ns as f64 / 1e9),
            mbit(c.bytes_received.saturating_sub(p.bytes_received) as f64 * 8.0 / dt),
            format!("{:.1}", c.rcv_rtt_us as f64 / 1e3),
            format!("{:.0}", c.rcv_wnd_bytes as f64 / 1024.0),
        ]);
        i += step;
    }
    crate::term::fit::put(w, t)?;
    writeln!(
        w,
        "  {} Mbit/s: {} bytes received in {:.2} s (after the first {:.1} s); receiver RTT mean {:.2} ms; advertised window mean {:.0} B; window / RTT = {} Mbit/s",
        mbit(an.throughput_bps),
        an.bytes,
        an.seconds,
        r.plan.skip.as_nanos() as f64 / 1e9,
        an.rcv_rtt_mean_us / 1e3,
        an.rcv_wnd_mean_bytes,
        an.window_ceiling_bps.map_or("unknown".to_string(), mbit)
    )?;
    writeln!(w, "  sources: TCP_INFO of the receiving socket (tcpi_bytes_received, tcpi_rcv_rtt, tcpi_rcv_wnd); the sender's limits are not visible from here")?;
    ended(w, f)
}

/// `tcp --watch-pid/--watch-port`: another process's flows.
fn watched(w: &mut dyn Write, r: &TcpRecord) -> io::Result<()> {
    let TcpMode::Watch { pid, port } = r.plan.mode else {
        return Ok(());
    };
    let what = match (pid, port) {
        (Some(p), Some(port)) => format!("PID {p}, port {port}"),
        (Some(p), None) => format!("PID {p}"),
        (None, Some(port)) => format!("port {port}"),
        (None, None) => "nothing".into(),
    };
    writeln!(
        w,
        "tpslab tcp --watch: {} established flow(s) of {what} over {:.1} s, TCP_INFO every {:.0} ms through sock_diag (INET_DIAG_INFO, INET_DIAG_SKMEMINFO)",
        r.watched.len(),
        r.plan.duration.as_nanos() as f64 / 1e9,
        r.plan.interval.as_nanos() as f64 / 1e6
    )?;
    let mut t = table(&[
        "flow",
        "direction",
        "Mbit/s",
        "RTT ms",
        "SO_SNDBUF",
        "SO_RCVBUF",
    ]);
    let mut verdicts = vec![];
    let mut idle = 0;
    for x in &r.watched {
        let f = &x.flow;
        let dir = match x.direction {
            Direction::Idle => {
                idle += 1;
                continue;
            }
            Direction::Sending => "sending",
            Direction::Receiving => "receiving",
        };
        t.add_row(vec![
            format!("{} -> {}", f.local, f.remote),
            dir.into(),
            mbit(x.throughput_bps()),
            format!("{:.2}", x.rtt_ms()),
            f.sndbuf.to_string(),
            f.rcvbuf.to_string(),
        ]);
        verdicts.push(format!(
            "{} -> {}: {}",
            f.local,
            f.remote,
            x.verdict.as_deref().unwrap_or_default()
        ));
    }
    crate::term::fit::put(w, t)?;
    for v in &verdicts {
        writeln!(w, "VERDICT {v}")?;
    }
    if let Some(f) = tpslab_analysis::tcp::app_wait_finding(r) {
        writeln!(w, "VERDICT {f}")?;
    }
    if idle > 0 {
        writeln!(w, "  {idle} more flow(s) moved no data while watched")?;
    }
    writeln!(w, "  SO_SNDBUF / SO_RCVBUF: the sockets' limits now (sk_sndbuf / sk_rcvbuf; doubled from what setsockopt asked, or autotuned)")?;
    if let Some(tw) = &r.thread_waits {
        super::waits::print_thread_waits(w, tw)?;
    }
    Ok(())
}

/// `serve tcp`'s first line, printed once it listens (whoever starts it reads its address
/// there).
pub fn serve_header(w: &mut dyn Write, s: &ServeTcpRecord) -> io::Result<()> {
    let p = &s.plan;
    match p.mode {
        ServeTcpMode::Source => writeln!(
            w,
            "tpslab serve tcp: source on {} (SO_SNDBUF {})",
            s.addr,
            p.sndbuf
                .map_or("autotuned by net.ipv4.tcp_wmem".into(), |b| format!("{b} asked"))
        ),
        ServeTcpMode::Sink => writeln!(
            w,
            "tpslab serve tcp: sink on {} (SO_RCVBUF {})",
            s.addr,
            match p.rcvbuf {
                Some(r) => format!("{r} asked, {} granted", s.rcvbuf_granted),
                None => format!(
                    "{} at start, autotuned by net.ipv4.tcp_rmem",
                    s.rcvbuf_granted
                ),
            }
        ),
        ServeTcpMode::Echo | ServeTcpMode::Replace => writeln!(
            w,
            "tpslab serve tcp: {} on {} (length-framed requests; work {:?} per request, then {:?} waiting{}); {}",
            if p.mode == ServeTcpMode::Echo { "Echo" } else { "Replace" },
            s.addr,
            std::time::Duration::from_nanos(tpslab_plan::time::nanos(&p.work)),
            std::time::Duration::from_nanos(tpslab_plan::time::nanos(&p.serial)),
            if p.serialize { " under one global lock" } else { "" },
            if p.threads == 0 {
                "thread per connection".to_string()
            } else {
                format!("{} epoll worker(s) sharing the connections", p.threads)
            }
        ),
        ServeTcpMode::Http => writeln!(
            w,
            "tpslab serve http: HTTP/1.1 on {} (keep-alive; work {:?} per request, then {:?} waiting{}); {}",
            s.addr,
            std::time::Duration::from_nanos(tpslab_plan::time::nanos(&p.work)),
            std::time::Duration::from_nanos(tpslab_plan::time::nanos(&p.serial)),
            if p.serialize { " under one global lock" } else { "" },
            if p.threads == 0 {
                "thread per connection".to_string()
            } else {
                format!("{} epoll worker(s) sharing the connections", p.threads)
            }
        ),
    }
}

/// `serve tcp`'s last line: what it moved over its life.
pub fn serve_end(w: &mut dyn Write, s: &ServeTcpRecord) -> io::Result<()> {
    let secs = s.elapsed_s;
    if s.plan.request_response() {
        writeln!(
            w,
            "tpslab serve tcp: {} connection(s), {} requests answered in {secs:.1} s ({:.1} TPS on average), {} connection errors",
            s.connections,
            s.requests,
            s.requests as f64 / secs,
            s.errors
        )
    } else {
        writeln!(
            w,
            "tpslab serve tcp: {} connection(s), {} bytes {} in {secs:.1} s ({:.1} Mbit/s on average)",
            s.connections,
            s.bytes,
            if s.plan.mode == ServeTcpMode::Source { "written" } else { "read" },
            s.bytes as f64 * 8.0 / secs / 1e6
        )
    }
}
