//! `tpslab load http` in the terminal: the plan's line (printed before the run), then the
//! rate intended and achieved, latency corrected for coordinated omission beside the
//! uncorrected, status classes, errors by kind, bytes and connections, and when sends
//! were late: because the server was slow (what the correction is for), or because the
//! generator itself fell behind (then the corrected figures include its own lag).

use std::io::{self, Write};
use tpslab_plan::load_http::LoadHttpPlan;
use tpslab_record::load_http::{Http2Streams, LoadHttpRecord, LoadHttpResult};

use super::{fmt_ns, table};

/// Seconds as given, e.g. `3 s`, `0.5 s`.
fn secs(d: std::time::Duration) -> String {
    format!("{} s", d.as_nanos() as f64 / 1e9)
}

/// What an `https://` run trusted, after its URL: `, TLS NOT VERIFIED (--insecure)`,
/// `, TLS verified by --cacert FILE`; nothing for the system's roots or `http://`.
pub(super) fn tls_note(t: &tpslab_plan::http::TlsSettings) -> String {
    match (&t.cacert, t.insecure) {
        (_, true) => ", TLS NOT VERIFIED (--insecure)".into(),
        (Some(f), false) => format!(", TLS verified by --cacert {f}"),
        (None, false) => String::new(),
    }
}

/// How many streams each connection carries, ` over HTTP/2 with 4 streams each` (or
/// HTTP/3), or nothing.
fn h2_note(p: &LoadHttpPlan) -> String {
    if p.version.multiplexed() {
        format!(
            " over HTTP/{} with {} stream{} each",
            if p.version.is_http3() {
                "3 (QUIC)"
            } else {
                "2"
            },
            p.streams,
            if p.streams == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    }
}

/// HTTP/3's QUIC line: the connections' round-trip times and congestion windows at their
/// end, packets sent and lost, datagrams; then, when requests waited for a stream, how
/// many and the longest wait.
pub(super) fn quic_line(q: &tpslab_record::quic::QuicPaths) -> String {
    let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
    let waits = if q.waited_for_stream > 0 {
        format!(
            "\nQUIC streams: {} requests waited on the client for a stream (the server's MAX_STREAMS had none left on their connection, or, rarely, the connection's send window held their headers), the longest {}: that wait is in the latency and holds the rate down, but it is the client's queue, not the server's",
            q.waited_for_stream,
            fmt_ns(q.stream_wait_max_ns as f64)
        )
    } else {
        String::new()
    };
    format!(
        "QUIC: {} connection{}: RTT {}/{}/{} ms (min/mean/max, each at its end), congestion window {}..{} bytes; {} packets sent, {} lost ({:.2} %), {} congestion event{}; {} datagrams sent, {} received",
        q.connections,
        if q.connections == 1 { "" } else { "s" },
        ms(q.rtt_min_ns),
        ms(q.rtt_mean_ns),
        ms(q.rtt_max_ns),
        q.cwnd_min_bytes,
        q.cwnd_max_bytes,
        q.packets_sent,
        q.packets_lost,
        q.loss_pct(),
        q.congestion_events,
        if q.congestion_events == 1 { "" } else { "s" },
        q.datagrams_sent,
        q.datagrams_received,
    ) + &waits
}

/// How long a closed loop runs: `for 3 s`, `until 10000 requests (at most 3 s)`.
fn closed_span(p: &LoadHttpPlan) -> String {
    match p.requests {
        Some(n) => format!("until {n} requests (at most {})", secs(p.duration)),
        None => format!("for {}", secs(p.duration)),
    }
}

/// The plan's line: rate, connections, duration, request, target.
pub fn header(w: &mut dyn Write, p: &LoadHttpPlan) -> io::Result<()> {
    if p.max_rate {
        return writeln!(
            w,
            "tpslab load http: max rate (closed loop: each {} sends its next request when its last reply is in) on {} keep-alive connection{}{} {}, {} {} ({}){}{}, timeout {}",
            if p.version.multiplexed() { "stream" } else { "connection" },
            p.connections,
            if p.connections == 1 { "" } else { "s" },
            h2_note(p),
            closed_span(p),
            p.request.method,
            p.request.url,
            p.target,
            tls_note(&p.request.tls),
            if p.body_bytes > 0 {
                format!(", a body of {} bytes", p.body_bytes)
            } else {
                String::new()
            },
            fmt_ns(p.timeout.as_nanos() as f64)
        );
    }
    writeln!(
        w,
        "tpslab load http: {} requests/s on {} keep-alive connection{}{} for {} (each every {}), {} {} ({}){}{}, timeout {}",
        p.rate,
        p.connections,
        if p.connections == 1 { "" } else { "s" },
        h2_note(p),
        secs(p.duration),
        fmt_ns(p.interval_ns() * p.streams.max(1) as f64),
        p.request.method,
        p.request.url,
        p.target,
        tls_note(&p.request.tls),
        if p.body_bytes > 0 {
            format!(", a body of {} bytes", p.body_bytes)
        } else {
            String::new()
        },
        fmt_ns(p.timeout.as_nanos() as f64)
    )
}

/// What the run did.
pub fn record(w: &mut dyn Write, rec: &LoadHttpRecord, interrupted: bool) -> io::Result<()> {
    let (p, r) = (&rec.plan, &rec.result);
    super::thresholds::block(
        w,
        p.fail_on.as_deref(),
        tpslab_analysis::gate::applies::LOAD_HTTP,
        &tpslab_analysis::load_http::outcome(rec, interrupted),
    )?;
    if interrupted {
        // Stopped early: the rate over the planned duration, and the requests the plan
        // still had, say nothing of the server.
        writeln!(
            w,
            "INTERRUPTED: the last request went {:.1} s into the planned {}: {} sent, {} answered, {} failed, {} unanswered at the stop; the achieved rate ({:.1}/s until then) is not compared with the plan",
            r.last_sent_s,
            secs(p.duration),
            r.sent,
            rec.answered(),
            r.errors.total(),
            r.unanswered,
            rec.sent_rate(true)
        )?;
    } else if p.max_rate {
        closed_rate_line(w, rec)?;
    } else {
        rate_line(w, rec)?;
    }
    if r.corrected.count == 0 {
        writeln!(w, "Latency: no replies")?;
    } else if p.max_rate {
        service_time(w, r)?;
    } else {
        latency(w, r)?;
    }
    status_and_errors(w, r)?;
    if let Some(n) = r
        .reply_gaps
        .as_ref()
        .and_then(tpslab_analysis::nagle::judge)
    {
        writeln!(w, "{}", n.line())?;
    }
    if let Some(p) = r
        .reply_gaps
        .as_ref()
        .and_then(tpslab_analysis::nagle::paused)
    {
        writeln!(w, "{}", p.line())?;
    }
    if let Some(h) = &r.http2 {
        let per = format!("{} streams per connection", p.streams);
        writeln!(w, "{}", http2_streams(h, &per, h.exceeded_by(p.streams)))?;
        for line in http2_trouble(h) {
            writeln!(w, "{line}")?;
        }
    }
    if let Some(q) = &r.http3 {
        writeln!(w, "{}", quic_line(q))?;
    }
    super::load_http_quic::print(w, r)?;
    if r.late > 0 || r.behind > 0 {
        late(w, r)?;
    }
    for line in tpslab_analysis::load_http::ledger_lines(rec) {
        writeln!(w, "{line}")?;
    }
    if !interrupted && r.sent > 0 {
        writeln!(
            w,
            "VERDICT: limited by {}",
            tpslab_analysis::load_http::limited_by(rec)
        )?;
        if let Some(f) = tpslab_analysis::load_http::reuse(rec) {
            writeln!(w, "Connections: {f}")?;
        }
    }
    Ok(())
}

/// Intended against achieved rate, and the requests the plan had that were not sent.
fn rate_line(w: &mut dyn Write, rec: &LoadHttpRecord) -> io::Result<()> {
    let (p, r) = (&rec.plan, &rec.result);
    writeln!(
        w,
        "Rate: intended {} requests/s, achieved {:.1}/s (error {:+.3} %): {} intended, {} sent, {} answered, {} failed, {} unanswered at the end",
        p.rate,
        rec.achieved_rate(),
        rec.rate_error() * 100.0,
        r.intended,
        r.sent,
        rec.answered(),
        r.errors.total(),
        r.unanswered
    )?;
    let gave_up = r.timed_out_unsent();
    if gave_up > 0 {
        writeln!(
            w,
            "Given up unsent: {gave_up} of the failed requests waited on the client for a free HTTP/2 stream past the timeout (counted as timeouts, never written)"
        )?;
    }
    let at_end = r.intended.saturating_sub(r.sent).saturating_sub(gave_up);
    if at_end > 0 {
        let queued = match &r.http2 {
            Some(h) if h.waited_for_stream > 0 => {
                ", or waiting on the client for a free HTTP/2 stream"
            }
            _ => "",
        };
        writeln!(
            w,
            "Not sent: {at_end} intended requests (their connection was waiting for a reply, or reconnecting{queued}, at the plan's end; none is sent after it)"
        )?;
    }
    if let Some(line) = r.http2.as_ref().and_then(waiting_at_end) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// A closed loop's rate: replies over its span, and what it sent.
fn closed_rate_line(w: &mut dyn Write, rec: &LoadHttpRecord) -> io::Result<()> {
    let r = &rec.result;
    writeln!(
        w,
        "Rate: {:.1} replies/s over {:.3} s (the server's pace, closed loop): {} sent, {} answered, {} failed, {} unanswered at the end{}",
        rec.closed_rate(),
        r.last_end_s,
        r.sent,
        rec.answered(),
        r.errors.total(),
        r.unanswered,
        match rec.plan.requests {
            Some(n) if r.started() < n => format!(
                "; {} of the {n} requests not started (the duration ended the run first)",
                n - r.started()
            ),
            _ => String::new(),
        }
    )
}

/// A closed loop's latency: from each request's send (service time); nothing was
/// intended, so coordinated omission does not apply.
fn service_time(w: &mut dyn Write, r: &LoadHttpResult) -> io::Result<()> {
    let mut t = table(&["latency", "service time (from the send)"]);
    let u = &r.uncorrected;
    for (name, v) in [
        ("p50", u.p50_ns),
        ("p90", u.p90_ns),
        ("p99", u.p99_ns),
        ("p99.9", u.p999_ns),
        ("max", u.max_ns),
    ] {
        t.add_row(vec![name.to_string(), fmt_ns(v as f64)]);
    }
    writeln!(w, "{t}")?;
    writeln!(
        w,
        "Coordinated omission does not apply: a closed loop intends no send time (each request goes when the last reply is in), so its latency is service time; --rate R measures latency from an intended schedule"
    )
}

/// Latency corrected and uncorrected, side by side.
fn latency(w: &mut dyn Write, r: &LoadHttpResult) -> io::Result<()> {
    let mut t = table(&[
        "latency",
        "corrected (from intended send)",
        "uncorrected (from actual send)",
    ]);
    let (c, u) = (&r.corrected, &r.uncorrected);
    for (name, a, b) in [
        ("p50", c.p50_ns, u.p50_ns),
        ("p90", c.p90_ns, u.p90_ns),
        ("p99", c.p99_ns, u.p99_ns),
        ("p99.9", c.p999_ns, u.p999_ns),
        ("max", c.max_ns, u.max_ns),
    ] {
        t.add_row(vec![name.to_string(), fmt_ns(a as f64), fmt_ns(b as f64)]);
    }
    crate::term::fit::put(w, t)
}

/// Status classes, errors by kind, bytes and connections.
fn status_and_errors(w: &mut dyn Write, r: &LoadHttpResult) -> io::Result<()> {
    let s = &r.status;
    writeln!(
        w,
        "Status: 2xx {}, 3xx {}, 4xx {}, 5xx {}{}",
        s.s2xx,
        s.s3xx,
        s.s4xx,
        s.s5xx,
        if s.other > 0 {
            format!(", other {}", s.other)
        } else {
            String::new()
        }
    )?;
    if !r.codes.is_empty() {
        let mut codes: Vec<String> = r.codes.iter().map(|(c, n)| format!("{c} {n}")).collect();
        if r.codes.more() > 0 {
            codes.push(format!("more codes {}", r.codes.more()));
        }
        writeln!(w, "Status codes: {}", codes.join(", "))?;
    }
    if r.errors.is_none() && r.unanswered == 0 && !r.connect_errors.is_none() {
        // Never "none" when connections failed (an HTTP/2 server's SETTINGS refused, say).
        writeln!(w, "Errors: no request failed; connects did (below)")?;
    } else {
        writeln!(w, "Errors: {}", r.failures())?;
    }
    if !r.connect_errors.is_none() {
        writeln!(
            w,
            "Connects failed: {} (no request went on them)",
            r.connect_errors.summary()
        )?;
    }
    if r.reconnect_backoffs > 0 {
        writeln!(
            w,
            "Reconnects backed off {} time{} (after a failed connect or a response no request asked for: 1 ms, doubling to 1 s while failures go on)",
            r.reconnect_backoffs,
            if r.reconnect_backoffs == 1 { "" } else { "s" }
        )?;
    }
    writeln!(
        w,
        "Bytes: {} written, {} read; {} connection{} made ({:.1} requests each)",
        r.bytes_out,
        r.bytes_in,
        r.connections,
        if r.connections == 1 { "" } else { "s" },
        if r.connections == 0 {
            0.0
        } else {
            r.sent as f64 / r.connections as f64
        }
    )
}

/// Sends late: by the server's fault, or by the generator's own.
fn late(w: &mut dyn Write, r: &LoadHttpResult) -> io::Result<()> {
    let late_ms = LoadHttpResult::LATE_NS as f64 / 1e6;
    if r.late > 0 {
        writeln!(
            w,
            "Late: {} requests sent over {late_ms} ms after their intended time (max {}), {} of them because their connection was still waiting for the previous reply: the corrected latency counts that wait, the uncorrected hides it",
            r.late,
            fmt_ns(r.max_lag_ns as f64),
            r.late.saturating_sub(r.behind)
        )?;
    }
    if r.behind > 0 {
        writeln!(
            w,
            "BEHIND: the generator fell behind its schedule: {} requests sent over {late_ms} ms late with their connection idle and ready (max {}); the corrected figures include this lag of the generator's own, not the server's",
            r.behind,
            fmt_ns(r.behind_max_ns as f64)
        )?;
    }
    Ok(())
}

/// The requests waiting on the client for a free HTTP/2 stream when the run ended
/// ([`Http2Streams::waiting_at_end`]), when there were any: a line saying so.
pub(super) fn waiting_at_end(h: &Http2Streams) -> Option<String> {
    (h.waiting_at_end > 0).then(|| {
        format!(
            "Waiting at the end: {} requests were waiting for a free stream when the run ended (the client's queue of HTTP/2 requests over the server's stream limit: never written)",
            h.waiting_at_end
        )
    })
}

/// The HTTP/2 server's misbehaviour ([`Http2Streams::faults`], GOAWAY's refusals): a
/// line for each there was.
pub(super) fn http2_trouble(h: &Http2Streams) -> Vec<String> {
    let mut v = vec![];
    if !h.faults.is_none() {
        v.push(format!(
            "HTTP/2: the server misbehaved: this client closed its connections ({}): GOAWAY ENHANCE_YOUR_CALM for a flood, PROTOCOL_ERROR else; their requests in flight failed (protocol errors)",
            h.faults.summary()
        ));
    }
    if h.goaway_retried > 0 {
        v.push(format!(
            "HTTP/2: {} requests written were named unprocessed by the server's GOAWAY and written again on a new connection (counted sent once); {} of them named so twice failed",
            h.goaway_retried, h.goaway_refused
        ));
    }
    v
}

/// HTTP/2's line: the streams at once the server allowed per connection (its
/// SETTINGS_MAX_CONCURRENT_STREAMS, `h`) against the run's, `per` (`16 streams per
/// connection`, `at 32 users (16 per connection)`); `over`: the run's were more, and the
/// excess waited on the client for a free stream (also said when requests waited).
pub(super) fn http2_streams(h: &Http2Streams, per: &str, over: bool) -> String {
    let head = format!(
        "HTTP/2: streams at once per connection the server allows (its SETTINGS_MAX_CONCURRENT_STREAMS): {}",
        h.limit()
    );
    if !over && h.waited_for_stream == 0 {
        return format!("{head}; {per} fit under it");
    }
    format!(
        "{head}; {per}: the streams over it waited on the client for a free stream ({} requests waited, the longest {}): that wait is in the latency and holds the rate down, but it is the client's queue, not the server's",
        h.waited_for_stream,
        fmt_ns(h.wait_max_ns as f64)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's HTTP/2 misbehaviour is named; failed connects alone never read "Errors:
    /// none".
    #[test]
    fn misbehaviour_and_failed_connects_are_said() {
        let mut h = Http2Streams {
            goaway_retried: 5,
            goaway_refused: 2,
            ..Default::default()
        };
        h.faults.ping_flood = 3;
        h.faults.protocol = 1;
        let t = http2_trouble(&h);
        assert_eq!(t.len(), 2, "{t:?}");
        assert!(
            t[0].contains("(PING flood on 3 connections, protocol error on 1 connection)"),
            "{t:?}"
        );
        assert!(t[1].starts_with("HTTP/2: 5 requests written were named unprocessed"));
        assert!(t[1].contains("2 of them named so twice failed"), "{t:?}");
        assert!(http2_trouble(&Http2Streams::default()).is_empty());

        let mut r = LoadHttpResult {
            intended: 10,
            sent: 0,
            status: Default::default(),
            codes: Default::default(),
            errors: Default::default(),
            connect_errors: Default::default(),
            unanswered: 0,
            reconnect_backoffs: 0,
            bytes_out: 0,
            bytes_in: 0,
            connections: 4,
            late: 0,
            max_lag_ns: 0,
            behind: 0,
            behind_max_ns: 0,
            first_sent_s: 0.0,
            last_sent_s: 0.0,
            last_end_s: 0.0,
            corrected: Default::default(),
            uncorrected: Default::default(),
            first_tls_error: None,
            http2: None,
            http3: None,
            server_udp: None,
            verification: None,
            reply_gaps: None,
            loop_cpu: None,
            series: None,
            server: None,
        };
        r.connect_errors.protocol = 4;
        let mut out = vec![];
        status_and_errors(&mut out, &r).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("Errors: none"), "{out}");
        assert!(out.contains("Connects failed: protocol 4"), "{out}");
        assert!(!out.contains("Status codes"), "none without replies: {out}");
        r.status.s2xx = 9;
        r.status.s5xx = 1;
        r.codes.add(200, 9);
        r.codes.add(503, 1);
        let mut out = vec![];
        status_and_errors(&mut out, &r).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("\nStatus codes: 200 9, 503 1\n"), "{out}");
    }
}
