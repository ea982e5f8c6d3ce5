//! `load http`'s judgements: the outcome its `--fail-on` gates read (latency, the error
//! share, the rate).

use tpslab_record::load_http::LoadHttpRecord;

use crate::gate::{Figures, Outcome};

/// Requests that failed or were answered 4xx/5xx, and all requests that ended (answered
/// or failed or unanswered at the end).
pub fn failed_of(rec: &LoadHttpRecord) -> (u64, u64) {
    let r = &rec.result;
    let bad = r.errors.total() + r.unanswered + r.status.s4xx + r.status.s5xx;
    (bad, rec.answered() + r.errors.total() + r.unanswered)
}

/// The outcome of a `load http` record for `--fail-on`: errors (failed requests, 4xx/5xx
/// replies, failed connects), the figures: latency (from the intended send; a closed
/// loop's from the send), the error share of all requests, the rate answered (replies
/// over the planned duration; a closed loop's: replies over its span).
pub fn outcome(rec: &LoadHttpRecord, interrupted: bool) -> Outcome {
    let r = &rec.result;
    let (bad, all) = failed_of(rec);
    let errors = (bad > 0 || !r.connect_errors.is_none()).then(|| {
        format!(
            "{bad} of {all} requests failed or answered 4xx/5xx (failed: {}; 4xx {}, 5xx {}; connects failed: {})",
            r.failures(),
            r.status.s4xx,
            r.status.s5xx,
            r.connect_errors.summary()
        )
    });
    let rps = if interrupted {
        None
    } else if rec.plan.max_rate {
        Some((rec.closed_rate(), "replies/s, closed loop".to_string()))
    } else {
        // What the server answered, not what was sent: a plan sent whole to a server
        // that answered half of it did not reach its rate.
        Some((rec.answered_rate(), "answered/s".to_string()))
    };
    Outcome {
        interrupted,
        errors,
        figures: Figures {
            latency: (r.corrected.count > 0).then_some(r.corrected),
            error_pct: (all > 0).then(|| bad as f64 * 100.0 / all as f64),
            rps,
        },
        ..Default::default()
    }
}

/// How the run used its connections: a finding when the server closed them (one request
/// each: it does not keep connections alive; a few each: it closes them after a count),
/// else how many requests each carried. From `result.connections` (connections made,
/// reconnects included) and the requests written.
pub fn reuse(rec: &LoadHttpRecord) -> Option<String> {
    let r = &rec.result;
    if r.connections == 0 || r.sent == 0 {
        return None;
    }
    let per = r.sent as f64 / r.connections as f64;
    let first = rec.plan.connections as u64;
    Some(if r.connections >= r.sent && r.sent > first {
        format!(
            "every connection closed after 1 request: the server does not keep connections alive ({} connections for {} requests; HTTP/1.0 or Connection: close): each request paid a connect, which is in its latency",
            r.connections, r.sent
        )
    } else if r.connections > first && per < 100.0 {
        format!(
            "connections closed by the server after {per:.1} requests each on average ({} made for {} asked): reconnects are in the latency",
            r.connections, first
        )
    } else {
        format!(
            "connections kept alive: {per:.1} requests each ({} made)",
            r.connections
        )
    })
}

/// A closed loop's loop threads wanting a CPU (on one or in the run queue) this share of
/// their time or more: the rate is the generator's pace (a loop waiting on the server
/// sleeps in epoll_wait).
pub const GENERATOR_BUSY: f64 = 0.9;

/// What limited the run, from the record's evidence (as ramp judges a step): the
/// generator (sends late with their connection idle, when they were at least as large a
/// share of the requests as the server's failures and lost connections; a closed loop's
/// threads wanting a CPU [`GENERATOR_BUSY`] of their time or more), the server's
/// connection handling (connects refused or timed out, connections closed), its answers
/// (replies late enough to hold back the next send, failures; a closed loop's pace
/// otherwise), or nothing (the plan kept).
pub fn limited_by(rec: &LoadHttpRecord) -> String {
    let base = limited_by_counts(rec);
    // The server's answers: with its ledger, the part that took most of their time.
    match largest_part(rec) {
        Some(part) if base.starts_with("the server's answers") => format!("{base}; ledger: {part}"),
        _ => base,
    }
}

/// The largest part of the watched server's response-time ledger, when it balances
/// ([`crate::rt_ledger::balances`]): "server threads waiting on a lock 8.81 ms of the
/// 17.75 ms mean response time (50 %)".
pub fn largest_part(rec: &LoadHttpRecord) -> Option<String> {
    let l = rec.result.server.as_ref()?.ledger.as_ref()?;
    if !crate::rt_ledger::balances(l) {
        return None;
    }
    let p = l
        .parts
        .iter()
        .filter(|p| p.ms > 0.0)
        .max_by(|a, b| a.ms.total_cmp(&b.ms))?;
    Some(format!(
        "{} {:.2} ms of the {:.2} ms mean response time ({:.0} %)",
        p.part.label(),
        p.ms,
        l.mean_ms,
        100.0 * crate::rt_ledger::share(l, p.part)
    ))
}

/// [`limited_by`] from the counts alone.
fn limited_by_counts(rec: &LoadHttpRecord) -> String {
    let r = &rec.result;
    let sent = r.sent.max(1) as f64;
    let c = &r.connect_errors;
    let (bad, all) = failed_of(rec);
    // The generator's lateness is the headline only when it touched at least as large a
    // share of the requests as the server's failures or lost connections did (300 of 300
    // answered 503 with 6 sent late is the server's answers; the lateness has its own
    // BEHIND line either way). Sends held back by late replies are not weighed: a loop
    // short of CPU reads its replies late too.
    let server_share = f64::max(
        bad as f64 / all.max(1) as f64,
        (r.errors.closed + r.errors.reset) as f64 / sent,
    );
    if r.behind as f64 > 0.01 * sent && r.behind as f64 / sent >= server_share {
        return format!(
            "the generator: {} requests went over 1 ms late with their connection idle (max lag {:.1} ms): this host's load, not the server",
            r.behind,
            r.behind_max_ns as f64 / 1e6
        );
    }
    if c.refused + c.timeout + c.reset + r.errors.closed + r.errors.reset > 0 {
        return format!(
            "the server's connection handling: connects failed ({}), {} requests lost with their connection (closed {}, reset {})",
            c.summary(),
            r.errors.closed + r.errors.reset,
            r.errors.closed,
            r.errors.reset
        );
    }
    if let Some(c) = r
        .loop_cpu
        .filter(|c| rec.plan.max_rate && c.busy() >= GENERATOR_BUSY)
    {
        return format!(
            "the generator: its {} loop thread{} wanted a CPU {:.0} % of {} time (on one {:.0} %, waiting for one {:.0} %; closed loop: the rate is this generator's pace, not the server's: give it more CPUs or --load-threads, or put the server on another host)",
            c.threads,
            if c.threads == 1 { "" } else { "s" },
            c.busy() * 100.0,
            if c.threads == 1 { "its" } else { "their" },
            c.cpu_s * 100.0 / c.wall_s,
            c.runq_s * 100.0 / c.wall_s,
        );
    }
    if rec.plan.max_rate {
        return format!(
            "the server's answers (closed loop: the rate is its pace with {} requests in flight at most){}",
            rec.plan.schedules(),
            if bad > 0 {
                format!("; {bad} of {all} failed or answered 4xx/5xx")
            } else {
                String::new()
            }
        );
    }
    if r.late as f64 > 0.01 * sent || bad > 0 {
        return format!(
            "the server's answers: {} sends held back by a late reply on their connection, {bad} of {all} requests failed or answered 4xx/5xx",
            r.late.saturating_sub(r.behind)
        );
    }
    "nothing: the plan's rate was kept and answered".into()
}

/// The watched server's response-time ledger in words, when the record has one: "Server
/// PID 4242 (found by --pid): response-time ledger at 230 requests/s: mean 11.20 ms =
/// server threads waiting on a lock 6.90 ms +- 0.40 (62 %) + ... + unattributed 0.30 ms
/// (3 %)" ([`crate::rt_ledger::line_at`]; a closed loop's at "max rate, N in flight"),
/// then each part's source ("server threads waiting on a lock: threads' blocked time x
/// ..."); a server watched without a ledger says why.
pub fn ledger_lines(rec: &LoadHttpRecord) -> Vec<String> {
    let Some(s) = &rec.result.server else {
        return vec![];
    };
    let who = format!("Server PID {} (found by {})", s.pid, s.found_by.words());
    let Some(l) = &s.ledger else {
        return vec![format!(
            "{who}: no response-time ledger (no reply, or nothing of the server could be sampled)"
        )];
    };
    let at = if rec.plan.max_rate {
        format!("max rate, {} in flight", rec.plan.schedules())
    } else {
        format!("{} requests/s", crate::capacity::rate_text(rec.plan.rate))
    };
    let mut out = vec![format!("{who}: {}", crate::rt_ledger::line_at(l, &at))];
    out.extend(
        l.parts
            .iter()
            .filter(|p| p.ms >= 0.005)
            .map(|p| format!("  {}: {}", p.part.label(), p.part.source())),
    );
    out
}

#[cfg(test)]
#[path = "load_http_tests.rs"]
mod tests;
