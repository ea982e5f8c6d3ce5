//! A fleet in the terminal: an agent's place and start, a merged record's agents beside
//! the total.

use super::{fmt_ns, table};
use crate::units::utc;
use std::io::{self, Write};
use tpslab_record::merge::MergeInfo;
use tpslab_record::AgentInfo;

/// "Agent 1 of 3 of plan 0123abcd...: started 412 us after the common start ...".
pub fn print_agent(w: &mut dyn Write, a: &AgentInfo) -> io::Result<()> {
    let clock = match a.clock {
        Some(c) if c.synchronized => format!(
            "its clock synchronized, maximum error {} us (adjtimex)",
            c.maxerror_us
        ),
        Some(_) => "its kernel calls its clock unsynchronized (the plan did not check it)".into(),
        None => "its clock's error unknown".into(),
    };
    writeln!(
        w,
        "Agent {} of {} of plan {}: started {} us {} the common start {} by its clock; {clock}.",
        a.index,
        a.of,
        &a.plan_hash[..a.plan_hash.len().min(16)],
        a.start_error_us.abs(),
        if a.start_error_us < 0 {
            "before"
        } else {
            "after"
        },
        utc(a.start_at_unix_ms)
    )
}

/// The fleet's header and each agent's figures beside the total.
pub fn print_merged(w: &mut dyn Write, m: &MergeInfo) -> io::Result<()> {
    writeln!(
        w,
        "Fleet: {} of {} agents of plan {}, common start {}; the server's side {}.",
        m.agents.len(),
        m.of,
        &m.plan_hash[..m.plan_hash.len().min(16)],
        utc(m.start_at_unix_ms),
        m.server
            .as_ref()
            .map_or("unknown (no --server record)".to_string(), |s| format!(
                "from {s}"
            ))
    )?;
    let mut t = table(&[
        "agent",
        "host",
        "sent",
        "replies",
        "TPS",
        "loss",
        "p50",
        "p99",
        "start",
        "generator",
    ]);
    for a in &m.agents {
        t.add_row(vec![
            a.index.to_string(),
            a.hostname.clone(),
            a.sent.to_string(),
            a.replies_read.to_string(),
            format!("{:.0}", a.tps),
            a.window_loss_pct
                .map_or("-".into(), |l| format!("{l:.2} %")),
            fmt_ns(a.p50_ns as f64),
            fmt_ns(a.p99_ns as f64),
            format!("{:+} us", a.start_error_us),
            if a.bottleneck.is_empty() {
                "kept schedule".into()
            } else {
                "BOTTLENECK".into()
            },
        ]);
    }
    for i in &m.missing {
        t.add_row(vec![
            i.to_string(),
            "MISSING".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    crate::term::fit::put(w, t)
}
