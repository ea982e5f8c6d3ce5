//! A UDP run or watch in a terminal: validity, the load and its latencies, the reference
//! server, the kernel's counters and the ledger; `serve udp`'s lines.

use super::{fmt_ns, table, with_errnos};
use comfy_table::Table;
use std::io::{self, Write};
use tpslab_plan::udp::MatchMode;
use tpslab_record::stats::LatencySummary;
use tpslab_record::{GeneratorReport, RunRecord, ServerReport};

mod kernel;
use kernel::print_observer;
pub(super) use kernel::{print_drop_reasons, print_path};

fn lat_row(t: &mut Table, name: &str, l: &LatencySummary) {
    if l.count == 0 {
        t.add_row(vec![
            name.to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "0".into(),
        ]);
        return;
    }
    t.add_row(vec![
        name.to_string(),
        fmt_ns(l.p50_ns as f64),
        fmt_ns(l.p90_ns as f64),
        fmt_ns(l.p99_ns as f64),
        fmt_ns(l.p999_ns as f64),
        fmt_ns(l.max_ns as f64),
        l.count.to_string(),
    ]);
}

/// The load's shape in words: bursts only when there are bursts.
fn load_shape(g: &GeneratorReport) -> String {
    if g.rate_max {
        "as fast as the path allows (--rate max)".to_string()
    } else if g.burst > 1 {
        format!(
            "bursts of {} every {} ({:.0} pps mean)",
            g.burst,
            fmt_ns(g.burst_interval_ns as f64),
            g.rate_pps
        )
    } else if g.pacing_slack_ns > 0 {
        format!(
            "a steady {} pps, paced in groups due within {} ({})",
            fmt_rate(g.rate_pps),
            fmt_ns(g.pacing_slack_ns as f64),
            if g.pacing_slack_auto {
                "--pacing-slack auto, from the rate; 0 for exact"
            } else {
                "--pacing-slack"
            }
        )
    } else {
        format!("a steady {} pps", fmt_rate(g.rate_pps))
    }
}

/// The foreign server's process in one line: PID, executable, runtime, threads, how it
/// was found (its socket, when no `--pid` was given), the other processes holding its
/// socket, and whether its reads were counted on its threads.
pub fn target_line(t: &tpslab_record::TargetProcess) -> String {
    let mut s = format!(
        "server: PID {} {} ({}, {} thread(s))",
        t.pid,
        t.exe,
        t.runtime.name(),
        t.threads
    );
    if let Some(f) = &t.found_by {
        s.push_str(&format!(", {f}"));
    }
    if !t.others.is_empty()
        && !t
            .found_by
            .as_deref()
            .is_some_and(|f| f.contains("also hold"))
    {
        let others: Vec<String> = t.others.iter().map(|p| p.to_string()).collect();
        // Their own sockets of one SO_REUSEPORT group, or one socket shared by a fork.
        s.push_str(&format!(
            "; with PID(s) {} holding its socket(s) on the same address and port (followed too)",
            others.join(", ")
        ));
    }
    s.push_str(&format!(
        "; its reads and replies {}",
        if t.exact_counts {
            "counted exactly on its threads (perf tracepoints)"
        } else {
            "NOT counted on its threads: derived from namespace-wide counters (see the notes)"
        }
    ));
    s
}

/// A rate in pps: whole numbers as such, fractions (e.g. --rate 1.5) kept.
fn fmt_rate(r: f64) -> String {
    if r.fract() == 0.0 || r >= 100.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.2}")
    }
}

fn print_generator(w: &mut dyn Write, g: &GeneratorReport) -> io::Result<()> {
    let shape = load_shape(g);
    writeln!(
        w,
        "Load: {} B datagrams to {}, {}, {} thread(s){}, {:.1} s window after {:.1} s warm-up",
        g.size_bytes,
        g.target,
        shape,
        g.threads,
        if g.gso { ", UDP GSO" } else { "" },
        g.duration_s,
        g.warmup_s
    )?;
    if g.gso_fallback {
        writeln!(
            w,
            "UDP GSO was refused by the path (EIO/EINVAL): the rest of the run went without it."
        )?;
    }
    if g.valid {
        writeln!(
            w,
            "Generator kept its schedule: the run is valid evidence about the server."
        )?;
    } else {
        writeln!(
            w,
            "RUN INVALID as evidence against the server — the generator was a bottleneck:"
        )?;
        for r in &g.invalid_reasons {
            writeln!(w, "  - {r}")?;
        }
    }
    let mut t = table(&["generator", "count"]);
    t.add_row(vec![
        "planned (whole run)".to_string(),
        g.planned.to_string(),
    ]);
    if g.not_sent > 0 {
        t.add_row(vec![
            "not sent (behind schedule or interrupted)".to_string(),
            g.not_sent.to_string(),
        ]);
    }
    t.add_row(vec!["attempted".to_string(), g.attempted.to_string()]);
    t.add_row(vec!["sent".to_string(), g.sent.to_string()]);
    t.add_row(vec![
        with_errnos("failed to send", &g.send_errors),
        g.send_failed.to_string(),
    ]);
    t.add_row(vec![
        "achieved send rate, pps".to_string(),
        format!("{:.0}", g.achieved_pps),
    ]);
    if g.match_mode != MatchMode::None {
        reply_rows(&mut t, g);
    }
    crate::term::fit::put(w, t)?;
    latency_table(w, g)?;
    Ok(())
}

/// The generator table's rows about replies: read, matched, frames, duplicates, order,
/// the window's answers and loss, TPS.
fn reply_rows(t: &mut Table, g: &GeneratorReport) {
    t.add_row(vec!["replies read".to_string(), g.replies_read.to_string()]);
    if g.match_mode != MatchMode::Aggregate {
        t.add_row(vec![
            match g.frames {
                Some(_) => "replies matched, complete: every frame arrived",
                None => "replies matched",
            }
            .to_string(),
            g.replies_matched.to_string(),
        ]);
        if let Some(f) = &g.frames {
            t.add_row(vec![
                "replies incomplete: some frames missing".to_string(),
                f.replies_incomplete.to_string(),
            ]);
            t.add_row(vec![
                format!("reply frames read / announced ({})", f.header),
                format!("{} / {}", f.frames_received, f.frames_expected),
            ]);
            t.add_row(vec![
                "frames read twice".to_string(),
                g.duplicates.to_string(),
            ]);
        } else {
            t.add_row(vec![
                "beyond the first per request (frames or duplicates)".to_string(),
                g.duplicates.to_string(),
            ]);
        }
        if let Some(k) = g.replies_per_request.filter(|k| *k > 1.0) {
            t.add_row(vec![
                match g.frames {
                    Some(_) => "frames per reply (announced)",
                    None => "reply datagrams per answered request",
                }
                .to_string(),
                format!("{k:.2}"),
            ]);
        }
        t.add_row(vec!["reordered".to_string(), g.reordered.to_string()]);
        t.add_row(vec!["unmatched".to_string(), g.unmatched.to_string()]);
    }
    t.add_row(vec![
        "window: sent / answered".to_string(),
        format!("{} / {}", g.window_sent, g.window_answered),
    ]);
    if let Some(l) = g.window_loss_pct {
        t.add_row(vec!["window: loss".to_string(), format!("{l:.2} %")]);
    }
    t.add_row(vec![
        "TPS (answered per s)".to_string(),
        format!("{:.0}", g.tps),
    ]);
}

/// The latency table (RTT from the intended and the actual send, wake-up, schedule lag)
/// when replies are matched to requests, else the schedule lag alone.
fn latency_table(w: &mut dyn Write, g: &GeneratorReport) -> io::Result<()> {
    if g.match_mode == MatchMode::Header || g.match_mode == MatchMode::SeqField {
        let mut t = table(&["latency (window)", "p50", "p90", "p99", "p99.9", "max", "n"]);
        lat_row(
            &mut t,
            "RTT from intended send (CO-corrected)",
            &g.latency_intended,
        );
        lat_row(&mut t, "RTT from actual send", &g.latency_actual);
        if g.rx_kernel_timestamps > 0 && g.latency_wakeup.count > 0 {
            lat_row(&mut t, "  same, to our thread's wake-up", &g.latency_wakeup);
        }
        lat_row(&mut t, "schedule lag (actual - intended)", &g.schedule_lag);
        crate::term::fit::put(w, t)?;
        if g.rx_kernel_timestamps > 0 {
            writeln!(w,
                "  RTTs end at the kernel's receive timestamp (SO_TIMESTAMPNS) for {} of {} replies: the generator's own wake-up is not counted",
                g.rx_kernel_timestamps, g.window_answered
            )?;
        }
    } else {
        let mut t = table(&["schedule", "p50", "p90", "p99", "p99.9", "max", "n"]);
        lat_row(&mut t, "schedule lag (actual - intended)", &g.schedule_lag);
        crate::term::fit::put(w, t)?;
    }
    Ok(())
}

/// Prints the reference server's counts.
pub fn print_server(w: &mut dyn Write, s: &ServerReport, elapsed_s: f64) -> io::Result<()> {
    writeln!(
        w,
        "Server: {} on {}, {} thread(s), batch {}, work {} ns/datagram, sched {}, cpus {}",
        s.mode,
        s.bind,
        s.threads,
        s.batch,
        s.work_ns,
        s.sched,
        if s.cpus.is_empty() {
            "all".to_string()
        } else {
            format!("{:?}", s.cpus)
        }
    )?;
    if s.gro {
        writeln!(
            w,
            "  UDP_GRO: on (coalesced datagrams counted and answered one by one)"
        )?;
    }
    if let Some(us) = s.busy_poll_us {
        writeln!(w, "  SO_BUSY_POLL: {us} us")?;
    }
    writeln!(w,
        "  SO_RCVBUF: requested {}, granted {} bytes{} (getsockopt; the kernel doubles the request, capped by net.core.rmem_max unless forced)",
        s.rcvbuf_requested_bytes.map_or("default (net.core.rmem_default)".to_string(), |b| format!("{b} bytes")),
        s.rcvbuf_granted_bytes,
        if s.rcvbuf_forced { " via SO_RCVBUFFORCE" } else { "" }
    )?;
    let mut t = table(&["server", "count"]);
    t.add_row(vec!["read".to_string(), s.received.to_string()]);
    t.add_row(vec!["answered".to_string(), s.answered.to_string()]);
    t.add_row(vec![
        with_errnos("reply failed", &s.reply_errors),
        s.reply_failed.to_string(),
    ]);
    t.add_row(vec![
        "truncated on read".to_string(),
        s.truncated.to_string(),
    ]);
    if elapsed_s > 0.0 {
        t.add_row(vec![
            "read rate, pps (over the server's life)".to_string(),
            format!("{:.0}", s.received as f64 / elapsed_s),
        ]);
    }
    if s.threads > 1 {
        t.add_row(vec![
            "read per thread".to_string(),
            format!("{:?}", s.received_per_thread),
        ]);
        if !s.reuseport_steer.is_hash() {
            t.add_row(vec![
                "spread over the sockets by".to_string(),
                format!("reuseport BPF: {}", s.reuseport_steer.name()),
            ]);
        }
    }
    crate::term::fit::put(w, t)?;
    Ok(())
}

/// Prints a run record: validity, generator, server, kernel, ledger.
pub fn print_record(w: &mut dyn Write, rec: &RunRecord, explain: bool) -> io::Result<()> {
    if rec.interrupted {
        writeln!(
            w,
            "(run interrupted by a signal: figures cover the part that ran)"
        )?;
    }
    if let Some(m) = &rec.merged {
        super::fleet::print_merged(w, m)?;
    }
    if let Some(a) = &rec.agent {
        super::fleet::print_agent(w, a)?;
    }
    if let Some(g) = &rec.generator {
        print_generator(w, g)?;
    }
    if let Some(t) = &rec.target {
        writeln!(w, "{}", target_line(t))?;
    }
    if let Some(s) = &rec.server {
        print_server(w, s, 0.0)?;
    }
    if let Some(o) = &rec.observer {
        print_observer(w, o, explain)?;
    }
    if let Some(l) = &rec.ledger {
        writeln!(
            w,
            "Ledger: where every datagram went (whole run, warm-up included)"
        )?;
        print_path(w, "request path: generator -> server", &l.request, explain)?;
        if let Some(r) = &l.reply {
            print_path(w, "reply path: server -> generator", r, explain)?;
        }
    }
    if let Some(d) = &rec.drop_reasons {
        print_drop_reasons(w, d, rec.ledger.as_ref())?;
    }
    for n in &rec.notes {
        writeln!(w, "note: {n}")?;
    }
    Ok(())
}

/// One line on the load and what came back: shape, TPS and RTT percentiles.
pub(super) fn print_load_line(w: &mut dyn Write, g: &GeneratorReport) -> io::Result<()> {
    write!(w, "  load: {} B datagrams, {}", g.size_bytes, load_shape(g))?;
    if g.match_mode != MatchMode::None {
        write!(w, "; TPS {:.0} (answered per s in the window)", g.tps)?;
        let l = &g.latency_intended;
        if l.count > 0 {
            write!(
                w,
                "; RTT from intended send p50 {} p99 {} p99.9 {} max {}",
                fmt_ns(l.p50_ns as f64),
                fmt_ns(l.p99_ns as f64),
                fmt_ns(l.p999_ns as f64),
                fmt_ns(l.max_ns as f64)
            )?;
        }
    }
    writeln!(w)?;
    if !g.valid {
        writeln!(w, "  RUN INVALID: {}", g.invalid_reasons.join("; "))?;
    }
    Ok(())
}

/// The first line of `serve udp`, printed when it listens.
pub fn serve_header(w: &mut dyn Write, s: &ServerReport) -> io::Result<()> {
    writeln!(
        w,
        "tpslab serve udp: listening on {} ({} thread(s), batch {}, SO_RCVBUF granted {} bytes)",
        s.bind, s.threads, s.batch, s.rcvbuf_granted_bytes
    )
}
