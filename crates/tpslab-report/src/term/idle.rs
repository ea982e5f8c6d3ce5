//! `tpslab probe idle` in a terminal: the plan, each connection's fate by round, the
//! bracket and how the path ended the flow, the control connection, and what an
//! application on this host suffers with that timeout.

use std::io::{self, Write};
use tpslab_analysis::idle::{
    behaviour, control_end_explained, payload_counts, Behaviour, Ending, PayloadCounts,
    StatedTimeout, POLL_MS,
};
use tpslab_plan::probe::{IdleTarget, IdleTimer, OnIdle};
use tpslab_record::idle::{Fate, IdleRecord, KeepaliveCounts, Outcome, PayloadWay, PoolRecord};

/// `report`'s text without its first line: what a probe prints at its end, its header
/// ([`header`], [`pool_header`]) printed when it began being that line.
pub fn after_header(
    w: &mut dyn Write,
    report: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut full = vec![];
    report(&mut full)?;
    let text = String::from_utf8_lossy(&full);
    write!(w, "{}", text.split_once('\n').map_or("", |(_, rest)| rest))
}

/// The header, printed before the study starts.
pub fn header(w: &mut dyn Write, r: &IdleRecord) -> io::Result<()> {
    let p = &r.plan;
    let target = match p.target {
        IdleTarget::Server { addr } => format!("{addr}"),
        IdleTarget::Lab {
            idle_timeout,
            on_idle,
            timer,
        } => format!(
            "the lab (a middlebox that forgets flows idle for more than {:.1} s{}, then {})",
            idle_timeout.as_nanos() as f64 / 1e9,
            match timer {
                IdleTimer::Any => "",
                IdleTimer::Payload => " (only payload, either way, counts as activity)",
                IdleTimer::NearPayload => " (only payload from the near side counts as activity)",
            },
            match on_idle {
                OnIdle::Drop => "drops their segments",
                OnIdle::Reset => "answers them with RSTs",
                OnIdle::Reopen =>
                    "lets the near side re-open them and drops the far side's segments",
                OnIdle::Fin => "ends them with a FIN to both ends",
            }
        ),
    };
    writeln!(
        w,
        "tpslab probe idle {target}: idle intervals {} s to {} s, resolution {} s, {}",
        p.min_s,
        p.max_s,
        p.resolution_s,
        if p.udp {
            format!("{} UDP mappings at once (one a control, answered every second), each asking tpslab's responder for a reply after its interval", p.connections)
        } else if p.server_first {
            format!("{} connections at once (one a control); tpslab's responder on the far side probes each first and reports its fate", p.connections)
        } else if let Some(proto) = p.protocol {
            format!("{} connections at once (one a control, probed every second), each logged in with the {} protocol; each idle one sends the protocol's no-op when its interval ends", p.connections, proto.name())
        } else if p.probe_data.is_some() {
            format!("{} connections at once (one a control, probed every second); no application bytes on these", p.connections)
        } else {
            format!("{} connections at once (one a control, probed every second); no application bytes are sent", p.connections)
        }
    )
}

/// The line saying what the payload connections of `--probe-data` carry (none without
/// it): after the header, with the results (the header is one line, printed alone when
/// the study begins).
fn probe_data_line(w: &mut dyn Write, r: &IdleRecord) -> io::Result<()> {
    let p = &r.plan;
    if let Some(d) = p.probe_data {
        writeln!(
            w,
            "  --probe-data \"{d}\": {}",
            if p.server_first {
                "three connections open through the study carry payload every second: from this side only (the responder reads it), from the far side only (the responder sends), and both ways (the responder echoes)"
            } else {
                "one connection open through the study sends these bytes every second (the server's answers, if any, are its payload)"
            }
        )?;
    }
    Ok(())
}

/// The payload part of the behaviour line (`p`: what the payload connections showed).
fn payload_words(p: PayloadCounts) -> String {
    let side = |v: Option<bool>, who: &str| match v {
        Some(true) => format!("payload from the {who} side alone counts"),
        Some(false) => format!("payload from the {who} side alone does not count"),
        None => format!("whether payload from the {who} side alone counts: not measured"),
    };
    match (p.client, p.server, p.both) {
        (Some(true), Some(true), _) => "payload from either side counts (resets its timer)".into(),
        (Some(true), Some(false), _) => "only payload from the client side counts".into(),
        (Some(false), Some(true), _) => "only payload from the server side counts".into(),
        (Some(false), Some(false), Some(true)) => {
            "payload counts only both ways (one direction alone does not)".into()
        }
        (None, None, Some(true)) => {
            "payload counts (tested both ways at once; one direction alone: not measured)".into()
        }
        (_, _, Some(false)) => {
            "payload does not reset its timer either (a flow ended at about the timeout though its payload flowed every second: a limit on a flow's life?)".into()
        }
        (c, s, None) if c.is_some() || s.is_some() => {
            format!("{}; {}", side(c, "client"), side(s, "server"))
        }
        _ => "whether payload counts: not measured (the payload connection was still too young at the end, or ended unlike the timeout: the far side may not accept these bytes)".into(),
    }
}

/// The whole record, as `tpslab probe idle` printed it.
pub fn record(w: &mut dyn Write, r: &IdleRecord) -> io::Result<()> {
    header(w, r)?;
    probe_data_line(w, r)?;
    rounds(w, r)?;
    result_line(w, r)?;
    if let Some(b) = behaviour(r) {
        behaviour_line(w, r, &b)?;
    }
    owner_lines(w, r)?;
    control_line(w, r)?;
    if !r.findings.is_empty() {
        writeln!(
            w,
            "\nThis host's TCP settings against the lower end of the bracket ({} s: a setting below it is surely in time):",
            r.bracket.alive_s.or(r.bracket.dead_s).unwrap_or(0)
        )?;
        super::doctor::findings(w, &r.findings)?;
    }
    Ok(())
}

/// Each round's connections: the idle time tried, its fate and when it was decided.
fn rounds(w: &mut dyn Write, r: &IdleRecord) -> io::Result<()> {
    let rounds = r.conns.iter().map(|c| c.round).max().unwrap_or(0);
    for n in 1..=rounds {
        let line: Vec<String> = r
            .conns
            .iter()
            .filter(|c| c.round == n)
            .map(|c| match c.fate {
                Fate::Abandoned => format!("{} s -", c.idle_s),
                _ => format!(
                    "{} s {} ({:.1} s)",
                    c.idle_s,
                    short(&c.fate),
                    c.decided_ms as f64 / 1e3
                ),
            })
            .collect();
        writeln!(w, "  round {n}: {}", line.join(", "))?;
    }
    Ok(())
}

/// "Result: ...": the bracket of the idle timeout, how the path ended a connection.
fn result_line(w: &mut dyn Write, r: &IdleRecord) -> io::Result<()> {
    let b = r.bracket;
    let found = match (b.alive_s, b.dead_s) {
        _ if b.inconsistent() => format!(
            "INCONSISTENT: a connection died after {} s idle while one survived {} s: this path has no fixed idle timeout (several middleboxes behind a balancer?); no single figure is measured",
            b.dead_s.unwrap_or(0),
            b.alive_s.unwrap_or(0)
        ),
        _ if r.active_ends.is_some() => {
            let e = r.active_ends.expect("checked");
            format!(
                "idle timeout in ({:.2} s, {:.2} s] without application data: {} connection(s) ended by the path itself, each dated by its end (not by its probe; seen open until the lower end)",
                if e.open_ms > 0 {
                    e.open_ms
                } else {
                    e.first_ms.saturating_sub(POLL_MS)
                } as f64
                    / 1e3,
                e.last_ms as f64 / 1e3,
                e.n
            )
        }
        (Some(a), Some(d)) => format!("idle timeout in ({a} s, {d} s]"),
        (None, Some(d)) => format!("idle timeout at most {d} s (the shortest interval tried already died)"),
        (_, None) => format!(
            "no idle timeout up to {} s: every connection judged survived",
            b.alive_s.unwrap_or(0)
        ),
    };
    let how = r.how.as_ref().map_or(String::new(), |h| {
        format!("; the path ended it: {}", h.words(r.plan.udp))
    });
    writeln!(
        w,
        "Result: {found}{how}{}",
        if r.interrupted {
            " (interrupted: what was found so far)"
        } else {
            ""
        }
    )?;
    Ok(())
}

/// "Behaviour: ...": the path's timeout, whether keepalive and payload count, how it ends
/// flows.
fn behaviour_line(w: &mut dyn Write, r: &IdleRecord, b: &Behaviour) -> io::Result<()> {
    // Where keepalive resets the timer, the probes' silence was of every packet.
    let payload = payload_counts(r);
    let of_what = if b.keepalive == Some(KeepaliveCounts::Yes) {
        "without a packet in either direction"
    } else if payload.is_some_and(|p| p.client == Some(true) && p.server == Some(false)) {
        "without payload from the client side"
    } else if payload.is_some_and(|p| p.client == Some(false) && p.server == Some(true)) {
        "without payload from the server side"
    } else {
        "without payload in either direction"
    };
    let timeout = b.timeout_s.map_or(
        "times out: not measured (no connection died)".into(),
        |(lo, hi)| {
            if r.active_ends.is_some() {
                format!("times out after ({lo:.2} s, {hi:.2} s] {of_what}")
            } else if lo > 0.0 {
                format!("times out after ({lo:.0} s, {hi:.0} s] {of_what}")
            } else {
                format!("times out after at most {hi:.0} s {of_what}")
            }
        },
    );
    let keepalive = match b.keepalive {
        Some(KeepaliveCounts::Yes) => "TCP keepalive counts (resets its timer)",
        Some(KeepaliveCounts::No) => "TCP keepalive does not count",
        None => "whether TCP keepalive counts: not measured",
    };
    let ending = match b.ending {
        Some(Ending::Fin) => {
            "ends flows itself with a FIN (seen on this side; the far side's not seen)"
        }
        Some(Ending::Rst) => "ends flows itself with a RST",
        Some(Ending::RstNextPacket) => "forgets flows and answers their next packet with a RST",
        Some(Ending::Silent) => "forgets flows silently (their next packets go unanswered)",
        None => "how it ends flows: not measured",
    };
    let payload = payload.map_or(
        "whether payload in one direction counts: not measured".into(),
        payload_words,
    );
    writeln!(w, "Behaviour: {timeout}; {keepalive}; {payload}; {ending}")?;
    Ok(())
}

/// Whose timeout it is, the server's stated setting, the payload connections, and what a
/// study without application bytes cannot tell apart.
fn owner_lines(w: &mut dyn Write, r: &IdleRecord) -> io::Result<()> {
    if let Some(o) = tpslab_analysis::idle_owner::owner(r) {
        writeln!(
            w,
            "Owner: {}{}; governed by {} ({})",
            o.who,
            if o.named_by_server {
                " (named by the server's own goodbye)"
            } else if o.by_setting {
                " (by the server's stated setting)"
            } else {
                ""
            },
            o.setting,
            o.evidence
        )?;
    }
    if let Some(st) = tpslab_analysis::idle_stated::stated(r) {
        writeln!(w, "Server setting: {}", st.line)?;
    }
    for c in &r.payload {
        writeln!(
            w,
            "  payload {}: {} ({:.1} s after its open){}",
            match c.way {
                PayloadWay::Near => "from this side only",
                PayloadWay::Far => "from the far side only",
                PayloadWay::Both => "both ways",
            },
            short(&c.fate),
            c.decided_ms as f64 / 1e3,
            if c.answered_bytes > 0 {
                format!(", {} byte(s) from the far side", c.answered_bytes)
            } else {
                String::new()
            }
        )?;
    }
    // Server first, each timed connection sent its hello to the responder.
    if r.active_ends.is_some() && !r.plan.server_first && r.plan.protocol.is_none() {
        writeln!(
            w,
            "  (no application byte was sent: a server's own limit for connections that never send, such as MySQL's connect_timeout or PostgreSQL's authentication_timeout, ends them the same way, and is not the idle timeout of a pooled connection that has sent queries)"
        )?;
    }
    Ok(())
}

/// What the control connection says: not evidence when it ended, else whether keepalive
/// resets the path's timer.
fn control_line(w: &mut dyn Write, r: &IdleRecord) -> io::Result<()> {
    let unexplained: Vec<String> = r
        .control_ends_ms
        .iter()
        .filter(|&&t| !control_end_explained(t, r.active_ends, r.bracket))
        .map(|&t| format!("{:.1} s", t as f64 / 1e3))
        .collect();
    match (&r.control, r.keepalive_counts) {
        (f, _) if *f != Fate::Alive => writeln!(
            w,
            "NOT EVIDENCE: the control connection, busy every second, ended: {}; the server or the path failed during the study",
            f.words(r.plan.udp)
        )?,
        _ if !unexplained.is_empty() => writeln!(
            w,
            "NOT EVIDENCE: a control connection, probed every second, was ended after {} without data, unlike the connections the path timed out: the server or the path failed during the study",
            unexplained.join(", ")
        )?,
        (_, Some(KeepaliveCounts::No)) => writeln!(
            w,
            "TCP keepalive does not reset this path's idle timer (a proxy on it, or the server, counts application data only): the control connection, probed every second, was ended {} time(s) after {} without data, {}; it was opened again each time (the server answered)",
            r.control_ends_ms.len(),
            r.control_ends_ms
                .iter()
                .map(|&t| format!("{:.1} s", t as f64 / 1e3))
                .collect::<Vec<_>>()
                .join(", "),
            if r.active_ends.is_some() {
                "as unprobed connections were"
            } else {
                "inside the bracket the probes found (its next keepalive after the timeout met a path that had forgotten it)"
            }
        )?,
        (_, Some(KeepaliveCounts::Yes)) => writeln!(
            w,
            "Control connection: alive through the study (the path and the server worked); silent but for a keepalive every second, it outlived the connections the path killed: TCP keepalive resets this path's idle timer"
        )?,
        _ => writeln!(w, "Control connection: alive through the study (the path and the server worked)")?,
    }
    Ok(())
}

fn short(f: &Fate) -> String {
    match f {
        Fate::Alive => "alive".into(),
        Fate::Dropped => "dropped".into(),
        Fate::Reset => "reset".into(),
        Fate::Closed => "closed".into(),
        Fate::Error(e) => e.clone(),
        Fate::Abandoned => "-".into(),
    }
}

/// The header of `tpslab probe pool`, printed before it runs.
pub fn pool_header(w: &mut dyn Write, r: &PoolRecord) -> io::Result<()> {
    let p = &r.plan;
    let s = |d: std::time::Duration| format!("{:.1} s", d.as_nanos() as f64 / 1e9);
    let path = match (p.target, p.protocol) {
        (Some(addr), Some(proto)) => format!("connections logged in with the {} protocol, their requests and tests its no-op, through {addr}, a path stated to forget connections idle for more than", proto.name()),
        (Some(addr), None) => format!("through {addr}, a path stated to forget flows idle for more than"),
        (None, _) => "a middlebox that forgets flows idle for more than".into(),
    };
    writeln!(
        w,
        "tpslab probe pool (S5 in miniature): {path} {}; the pool tests idle connections {}, closes those idle {}, keeps {} open; a request every {}, failing after {} without its answer",
        s(p.idle_timeout),
        p.validate_every.map_or("never".into(), |v| format!("every {}", s(v))),
        p.max_idle.map_or("never".into(), |v| format!("for {}", s(v))),
        p.min_idle,
        s(p.request_every),
        s(p.query_timeout)
    )
}

/// The whole `probe pool` record.
pub fn pool_record(w: &mut dyn Write, r: &PoolRecord) -> io::Result<()> {
    pool_header(w, r)?;
    let timeout_s = r.plan.idle_timeout.as_nanos() as f64 / 1e9;
    for (i, q) in r.requests.iter().enumerate() {
        let what = match &q.outcome {
            Outcome::Answered { latency_us } => {
                format!("answered in {:.1} ms", *latency_us as f64 / 1e3)
            }
            Outcome::TimedOut => format!(
                "NO ANSWER, timed out after {:.1} s",
                r.plan.query_timeout.as_nanos() as f64 / 1e9
            ),
            Outcome::Failed(e) => format!("failed: {e}"),
        };
        let what = match &q.goodbye {
            Some(g) => format!("{what} (the server said \"{}\" ({}))", g.message, g.code),
            None => what,
        };
        writeln!(
            w,
            "  request {} at {:.1} s: connection {}, idle {:.1} s{}: {what}",
            i + 1,
            q.at_ms as f64 / 1e3,
            q.conn,
            q.idle_ms as f64 / 1e3,
            if q.idle_ms as f64 / 1e3 > timeout_s {
                " (past the timeout)"
            } else {
                ""
            }
        )?;
    }
    let failed = r.failed();
    let n = r.requests.len();
    let stale = r
        .requests
        .iter()
        .filter(|q| !matches!(q.outcome, Outcome::Answered { .. }))
        .all(|q| q.idle_ms as f64 / 1e3 > timeout_s);
    let whose = if r.plan.target.is_some() {
        "the path's"
    } else {
        "the middlebox's"
    };
    if failed == 0 {
        writeln!(w, "Result: all {n} requests answered: no connection was handed out idle past {whose} {timeout_s:.1} s")?;
    } else {
        writeln!(
            w,
            "Result: {failed} of {n} requests failed{} (S5's failure: the pool handed out connections the path had forgotten)",
            if stale { format!(", each on a connection idle longer than {whose} {timeout_s:.1} s") } else { String::new() }
        )?;
    }
    match tpslab_analysis::idle::stated_timeout_disagrees(r) {
        Some(StatedTimeout::Shorter(ms)) => writeln!(
            w,
            "DISAGREES: a request failed on a connection idle only {:.1} s, below the stated --path-idle-timeout {timeout_s:.1} s: the path forgets sooner; measure it again with probe idle (--protocol for a database) and set the pool's max-idle and validation below what it finds",
            ms as f64 / 1e3
        )?,
        Some(StatedTimeout::Longer(ms)) => writeln!(
            w,
            "DISAGREES: a request was answered on a connection idle {:.1} s, past the stated --path-idle-timeout {timeout_s:.1} s: this path kept it longer than stated; the stated figure is not this path's (measure it with probe idle)",
            ms as f64 / 1e3
        )?,
        None => {}
    }
    writeln!(
        w,
        "Pool: {} connection(s) opened, {} validation(s) ({} found a dead connection), {} closed for idling{}",
        r.opened,
        r.validations,
        r.validations_failed,
        r.expired,
        if r.interrupted { "; interrupted" } else { "" }
    )
}
