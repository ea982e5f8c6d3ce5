//! A ramp in a terminal: its plan, the steps with Little's law, the knee, the USL fit and
//! the verdict.

use super::{fmt_ns, table};
use std::io::{self, Write};
use tpslab_analysis::ramp;
use tpslab_plan::ramp::{RampPlan, UserConnections};
use tpslab_record::load_http::Http2Streams;
use tpslab_record::RampReport;

fn ms(ns: f64) -> String {
    format!("{:.2}", ns / 1e6)
}

/// The first line of a ramp, printed when it starts: what will run against what.
pub fn ramp_header(w: &mut dyn Write, p: &RampPlan) -> io::Result<()> {
    let total = p.steps.len() as f64 * (p.step + p.warmup).as_nanos() as f64 / 1e9;
    writeln!(
        w,
        "tpslab ramp {}: {} steps of users {:?}, {} s{}; target {}{}",
        p.proto.command(),
        p.steps.len(),
        p.steps,
        if total < 10.0 {
            format!("{total:.1}")
        } else {
            format!("{total:.0}")
        },
        if p.think.is_zero() {
            String::new()
        } else {
            format!(", think {:?}", p.think)
        },
        match &p.proto {
            // The URL, and the address it was resolved to.
            tpslab_plan::proto::Proto::Http(h) => format!(
                "{} ({}){}{}",
                h.url,
                p.target,
                super::load_http::tls_note(&h.tls),
                match p.connections {
                    UserConnections::PerUser => String::new(),
                    UserConnections::Http2(1) => {
                        ", HTTP/2: the users' streams on 1 connection".into()
                    }
                    UserConnections::Http2(n) => {
                        format!(", HTTP/2: the users' streams on {n} connections")
                    }
                    UserConnections::Http3(1) => {
                        ", HTTP/3 (QUIC): the users' streams on 1 connection".into()
                    }
                    UserConnections::Http3(n) => {
                        format!(", HTTP/3 (QUIC): the users' streams on {n} connections")
                    }
                }
            ),
            _ => p.target.to_string(),
        },
        p.builtin_server
            .as_ref()
            .map_or(String::new(), |s| format!(" (built-in server: {s})"))
    )
}

/// The steps table of a ramp and the sources of its columns.
fn ramp_steps(w: &mut dyn Write, r: &RampReport) -> io::Result<()> {
    let rec = &r.run;
    let mut t = table(&[
        "users",
        "TPS",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "errors",
        "X*(R+Z)/N",
        "server CPU",
        "run queue",
        "server threads mostly",
    ]);
    for (s, l) in rec.steps.iter().zip(&r.analysis.little) {
        let errs: u64 = s.errors.values().sum();
        t.add_row(vec![
            s.users.to_string(),
            format!("{:.1}", s.tps),
            ms(s.response.p50_ns as f64),
            ms(s.response.p90_ns as f64),
            ms(s.response.p99_ns as f64),
            ms(s.response.max_ns as f64),
            if errs == 0 {
                "0".into()
            } else {
                format!(
                    "{errs} ({})",
                    s.errors
                        .iter()
                        .map(|(k, v)| format!("{k} x{v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            format!("{:.2}", l.ratio),
            s.server_cpu_cores
                .map_or("-".into(), |c| format!("{:.0} %", c * 100.0)),
            s.threads.as_ref().map_or("-".into(), |t| {
                format!("{:.0} %", t.runqueue_ns as f64 / 1e7 / s.measured_s)
            }),
            ramp::top_state(s).map_or("-".into(), |(w, f)| format!("{w} {:.0} %", f * 100.0)),
        ]);
    }
    // Narrow: p90, max, run queue, p50, errors go; what the threads did stays.
    crate::term::fit::put_dropping(w, t, &[3, 5, 9, 2, 6])?;
    if let Some(q) = &rec.http3 {
        writeln!(w, "{}", super::load_http::quic_line(q))?;
    }
    if let Some(h) = &rec.http2 {
        writeln!(w, "{}", http2_line(rec, h))?;
        if let Some(line) = super::load_http::waiting_at_end(h) {
            writeln!(w, "{line}")?;
        }
        for line in super::load_http::http2_trouble(h) {
            writeln!(w, "{line}")?;
        }
    }
    if let Some(o) = &rec.overrun {
        writeln!(w, "{}", o.line())?;
    }
    if let Some(kib) = rec.generator_peak_rss_kib {
        writeln!(
            w,
            "  generator: {}, peak RSS {:.1} MiB (VmHWM)",
            match rec.plan.load_threads {
                0 => "one user loop thread per CPU".to_string(),
                1 => "1 user loop thread".to_string(),
                n => format!("{n} user loop threads"),
            },
            kib as f64 / 1024.0
        )?;
    }
    let per: Vec<String> = rec
        .steps
        .iter()
        .filter_map(|s| {
            let f = tpslab_analysis::ramp_threads::facts(s)?;
            Some(format!(
                "{} users {} of {}",
                s.users,
                f.working.len(),
                f.working.len() + f.idle.len()
            ))
        })
        .collect();
    if !per.is_empty() {
        writeln!(
            w,
            "  working server threads: {}: those whose CPU time grew in the step (/proc/PID/task/TID/stat utime+stime, schedstat) or that changed state; the others, idle (parked in one wait with no CPU time), are left out of \"server threads mostly\" and the verdict",
            per.join(", ")
        )?;
    }
    let response = if rec.plan.connections.version().is_http2() {
        "the user ready to send (after its think time) to reply read, a wait for a free HTTP/2 stream included"
    } else if rec.plan.connections.version().is_http3() {
        "the user ready to send (after its think time) to reply read, a wait for a QUIC stream the server's MAX_STREAMS holds back included"
    } else {
        "request written to reply read"
    };
    writeln!(w, "  sources: TPS = replies in the step's measured window / its length; response = {response} (closed loop: no coordinated omission, each user waits); X*(R+Z)/N = Little's law (1.00 = every user always had a request out); server CPU of the PID and its descendants (a prefork server's master and workers) from /proc/PID/stat utime+stime+cutime+cstime; threads of the same processes; run queue = time the server's threads waited for a CPU while runnable, in % of one CPU (schedstat); threads from /proc/PID/task/*/stat state and wchan")
}

/// HTTP/2's line of a ramp: the server's stream limit per connection against the users
/// on each connection (user i on connection i % connections), naming the steps whose
/// users over it waited on the client for a free stream.
fn http2_line(rec: &tpslab_record::ramp::RampRecord, h: &Http2Streams) -> String {
    let c = rec.plan.connections.shared().unwrap_or(1).max(1);
    let over: Vec<&tpslab_record::ramp::StepResult> = rec
        .steps
        .iter()
        .filter(|s| h.exceeded_by(s.users.div_ceil(c)))
        .collect();
    let join = |f: &dyn Fn(usize) -> usize| {
        over.iter()
            .map(|s| f(s.users).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let per = if over.is_empty() {
        let most = rec.steps.iter().map(|s| s.users.div_ceil(c)).max();
        format!("up to {} users per connection", most.unwrap_or(0))
    } else {
        format!(
            "at {} users ({} per connection)",
            join(&|u| u),
            join(&|u| u.div_ceil(c))
        )
    };
    let line = super::load_http::http2_streams(h, &per, !over.is_empty());
    // Per step (records since steps carry their own counts): the first that waited.
    let first = rec
        .steps
        .iter()
        .find(|s| s.http2.is_some_and(|x| x.waited_for_stream > 0));
    match first.and_then(|s| Some((s.users, s.http2?))) {
        Some((users, x)) => format!(
            "{line}; the first step whose requests waited: {users} users ({} requests, the longest {})",
            x.waited_for_stream,
            fmt_ns(x.wait_max_ns as f64)
        ),
        None => line,
    }
}

/// A ramp's results: the steps, the verdict and the findings under it.
pub fn ramp_results(w: &mut dyn Write, r: &RampReport) -> io::Result<()> {
    ramp_steps(w, r)?;
    writeln!(w, "{}", r.analysis.verdict)?;
    for l in &r.analysis.lines {
        writeln!(w, "  {l}")?;
    }
    Ok(())
}
