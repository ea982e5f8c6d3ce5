//! The CSV format: a record's table for a spreadsheet, one header line and one row each:
//! a sweep's runs (cell, repetition, the cell's settings, the run's figures), a ramp's
//! steps, a UDP run's or watch's time series (a diagnosis: its first run's), a server's
//! reads per thread, a TCP flow's TCP_INFO samples, a TCP server's totals, with the units
//! in the column names. Figures not measured are empty
//! cells; a text cell with a comma or a quote is quoted (RFC 4180).

use std::io::{self, Write};
use tpslab_record::rt_ledger::RtPart;
use tpslab_record::{Body, Record, RunRecord};

/// A capacity search's steps, one row each; `search` is `as_is`, or `with_fix` for the
/// steps of `--fix-and-retry`'s second search (numbered from 1 again); `capacity tcp|http`
/// steps add their response-time ledger (ms per part; empty without one).
fn capacity(w: &mut dyn Write, c: &tpslab_record::capacity::CapacityRecord) -> io::Result<()> {
    writeln!(
        w,
        "step,rate_pps,achieved_pps,answered_pps,p50_ns,p90_ns,p99_ns,p999_ns,max_ns,loss_pct,errors_pct,call,why,started_s,elapsed_s,search,ledger_mean_ms,{},ledger_unattributed_ms",
        RtPart::ALL
            .iter()
            .map(|p| format!("ledger_{}_ms", part_name(*p)))
            .collect::<Vec<_>>()
            .join(",")
    )?;
    let searches =
        std::iter::once((c, "as_is")).chain(c.retry.iter().map(|r| (&r.search, "with_fix")));
    for (c, search) in searches {
        for (i, s) in c.steps.iter().enumerate() {
            let lat = s.latency_ns.map_or(",,,,".to_string(), |l| {
                l.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            });
            writeln!(
                w,
                "{},{},{},{},{lat},{},{},{},{},{},{},{search},{}",
                i + 1,
                s.rate_pps,
                s.achieved_pps,
                s.answered_pps,
                s.loss_pct.map_or(String::new(), |l| l.to_string()),
                s.errors_pct,
                s.status.word().to_lowercase(),
                text(&s.why.join("; ")),
                s.started_s,
                s.elapsed_s,
                ledger_cells(s.ledger.as_ref())
            )?;
        }
    }
    Ok(())
}

/// A `load http` run: one row per figure (figure, value, unit), latency corrected and
/// uncorrected at each quantile; `interrupted`: the run stopped early (its rate is over
/// its first to its last request, and not compared with the plan's).
fn load_http(
    w: &mut dyn Write,
    l: &tpslab_record::load_http::LoadHttpRecord,
    interrupted: bool,
) -> io::Result<()> {
    let r = &l.result;
    writeln!(w, "figure,value,unit")?;
    // A closed loop (--rate max) intends no rate: no intended rate nor error against it.
    if !l.plan.max_rate {
        writeln!(w, "rate_intended,{},requests/s", l.plan.rate)?;
    }
    writeln!(w, "rate_achieved,{},requests/s", l.sent_rate(interrupted))?;
    if interrupted {
        writeln!(w, "last_request_s,{},s", l.result.last_sent_s)?;
    } else if !l.plan.max_rate {
        writeln!(w, "rate_error,{},fraction", l.rate_error())?;
    }
    for (k, n) in [
        ("intended", r.intended),
        ("sent", r.sent),
        ("answered", l.answered()),
        ("status_2xx", r.status.s2xx),
        ("status_3xx", r.status.s3xx),
        ("status_4xx", r.status.s4xx),
        ("status_5xx", r.status.s5xx),
        ("status_other", r.status.other),
        ("error_refused", r.errors.refused),
        ("error_reset", r.errors.reset),
        ("error_timeout", r.errors.timeout),
        ("error_closed", r.errors.closed),
        ("error_protocol", r.errors.protocol),
        ("error_other", r.errors.other),
        ("unanswered", r.unanswered),
        ("connections", r.connections),
        ("late", r.late),
        ("behind", r.behind),
    ] {
        writeln!(w, "{k},{n},requests")?;
    }
    // Rows of kinds counted apart since TLS: only when they occurred (a run without
    // them keeps its rows).
    let c = &r.connect_errors;
    for (k, n) in [
        ("error_tls", r.errors.tls),
        ("error_unsolicited", r.errors.unsolicited),
        ("reconnect_backoffs", r.reconnect_backoffs),
        ("connect_error_refused", c.refused),
        ("connect_error_reset", c.reset),
        ("connect_error_timeout", c.timeout),
        ("connect_error_closed", c.closed),
        ("connect_error_tls", c.tls),
        ("connect_error_other", c.protocol + c.other),
    ] {
        if n > 0 {
            writeln!(w, "{k},{n},requests")?;
        }
    }
    writeln!(w, "bytes_out,{},bytes", r.bytes_out)?;
    writeln!(w, "bytes_in,{},bytes", r.bytes_in)?;
    if let Some(g) = &r.reply_gaps {
        // Replies held between their first byte and their last (tpslab_analysis::nagle).
        writeln!(w, "small_replies,{},requests", g.small)?;
        writeln!(w, "held_replies,{},requests", g.held)?;
        writeln!(w, "held_gap_sum,{},ns", g.held_gap_ns)?;
        writeln!(w, "held_gap_max,{},ns", g.held_gap_max_ns)?;
        writeln!(w, "held_share,{},fraction", g.held_share())?;
        if let Some(d) = g.delayed_acks {
            writeln!(w, "delayed_acks,{d},acks")?;
        }
    }
    writeln!(w, "max_lag,{},ns", r.max_lag_ns)?;
    writeln!(w, "behind_max_lag,{},ns", r.behind_max_ns)?;
    for (from, s) in [("corrected", &r.corrected), ("uncorrected", &r.uncorrected)] {
        for (q, ns) in [
            ("p50", s.p50_ns),
            ("p90", s.p90_ns),
            ("p99", s.p99_ns),
            ("p99.9", s.p999_ns),
            ("max", s.max_ns),
        ] {
            writeln!(w, "latency_{from}_{q},{ns},ns")?;
        }
    }
    // The watched server's response-time ledger: its mean and each part read, ms.
    if let Some(srv) = &r.server {
        writeln!(w, "server_pid,{},pid", srv.pid)?;
        if let Some(l) = &srv.ledger {
            writeln!(w, "ledger_mean,{},ms", num(l.mean_ms, 3))?;
            for p in &l.parts {
                writeln!(w, "ledger_{},{},ms", part_name(p.part), num(p.ms, 3))?;
                writeln!(w, "ledger_{}_pm,{},ms", part_name(p.part), num(p.pm_ms, 3))?;
            }
            writeln!(w, "ledger_unattributed,{},ms", num(l.unattributed_ms, 3))?;
        }
    }
    Ok(())
}

/// Writes `rec`'s table.
pub fn record(w: &mut dyn Write, rec: &Record) -> io::Result<()> {
    match &rec.body {
        Body::Sweep(s) => sweep(w, s),
        Body::Ramp(r) => ramp(w, r),
        Body::UdpRun(r) | Body::Watch(r) => series(w, r),
        Body::Diagnose(d) => series(w, &d.before),
        Body::Serve(s) => {
            writeln!(w, "thread,read")?;
            for (i, n) in s.server.received_per_thread.iter().enumerate() {
                writeln!(w, "{i},{n}")?;
            }
            Ok(())
        }
        Body::Tcp(t) => tcp(w, t),
        Body::Doctor(d) => doctor(w, d),
        Body::LoadHttp(l) => load_http(w, l, rec.meta.interrupted),
        Body::Capacity(c) => capacity(w, c),
        Body::Bdp(b) => bdp(w, b),
        Body::Compare(c) => compare(w, c),
        Body::ProbeIdle(r) => probe_idle(w, r),
        Body::ProbePool(r) => probe_pool(w, r),
        Body::ServeTcp(s) => {
            writeln!(w, "connections,bytes,requests,errors,elapsed_s")?;
            writeln!(
                w,
                "{},{},{},{},{}",
                s.connections,
                s.bytes,
                s.requests,
                s.errors,
                num(s.elapsed_s, 3)
            )
        }
    }
}

/// A doctor record's findings, one row each: severity, finding, evidence, fix.
fn doctor(w: &mut dyn Write, d: &tpslab_record::doctor::DoctorRecord) -> io::Result<()> {
    writeln!(w, "severity,finding,evidence,fix")?;
    for f in &d.findings {
        writeln!(
            w,
            "{},{},{},{}",
            text(&format!("{:?}", f.severity).to_lowercase()),
            text(&f.what),
            text(&f.evidence.join("; ")),
            text(&f.fix.as_ref().map_or(String::new(), |x| x.to_string()))
        )?;
    }
    Ok(())
}

/// A bdp record's figures, one row each, and the sysctls of its fix.
fn bdp(w: &mut dyn Write, b: &tpslab_record::bdp::BdpRecord) -> io::Result<()> {
    writeln!(w, "figure,value,unit")?;
    writeln!(w, "rtt,{},s", b.rtt_s)?;
    if let Some(c) = &b.ceiling {
        writeln!(w, "window,{},bytes", c.window_bytes)?;
        writeln!(w, "ceiling,{},bit/s", c.ceiling_bps)?;
    }
    if let Some(n) = &b.need {
        writeln!(w, "rate,{},bit/s", n.rate_bps)?;
        writeln!(w, "bdp,{},bytes", n.plan.bdp_bytes)?;
        writeln!(w, "buffer,{},bytes", n.plan.buffer_bytes)?;
        writeln!(w, "setsockopt,{},bytes", n.plan.setsockopt_bytes())?;
        for (k, v) in &n.fixes {
            writeln!(w, "{},{},sysctl", text(k), text(v))?;
        }
    }
    Ok(())
}

/// A comparison's figures, one row per figure and record, with the difference from the first.
fn compare(w: &mut dyn Write, c: &tpslab_record::compare::CompareReport) -> io::Result<()> {
    writeln!(
        w,
        "figure,record,n,mean,stddev,ci_lo,ci_hi,diff_from_first,diff_ci_lo,diff_ci_hi,significant"
    )?;
    for f in &c.figures {
        for (i, v) in f.values.iter().enumerate() {
            let Some(v) = v else { continue };
            let e = i.checked_sub(1).and_then(|j| f.effects[j].as_ref());
            let opt = |x: Option<f64>| {
                x.filter(|x| x.is_finite())
                    .map_or(String::new(), |x| x.to_string())
            };
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{}",
                text(&f.name),
                text(&c.labels[i]),
                v.n,
                v.mean,
                opt(Some(v.stddev)),
                opt(Some(v.ci_lo)),
                opt(Some(v.ci_hi)),
                opt(e.map(|e| e.diff)),
                opt(e.map(|e| e.ci_lo)),
                opt(e.map(|e| e.ci_hi)),
                e.map_or(String::new(), |e| e.significant.to_string())
            )?;
        }
    }
    Ok(())
}

/// A probe idle record's connections, one row each.
fn probe_idle(w: &mut dyn Write, r: &tpslab_record::idle::IdleRecord) -> io::Result<()> {
    writeln!(w, "round,idle_s,fate,decided_ms,active_end")?;
    for c in &r.conns {
        let fate = serde_json::to_value(&c.fate).unwrap_or_default();
        let fate = fate.as_str().map_or_else(|| fate.to_string(), String::from);
        writeln!(
            w,
            "{},{},{},{},{}",
            c.round,
            c.idle_s,
            text(&fate),
            c.decided_ms,
            c.active_end
        )?;
    }
    Ok(())
}

/// A probe pool record's requests, one row each.
fn probe_pool(w: &mut dyn Write, r: &tpslab_record::idle::PoolRecord) -> io::Result<()> {
    writeln!(w, "at_ms,conn,idle_ms,outcome,latency_us")?;
    for q in &r.requests {
        let (o, l) = match &q.outcome {
            tpslab_record::idle::Outcome::Answered { latency_us } => {
                ("answered".to_string(), latency_us.to_string())
            }
            tpslab_record::idle::Outcome::TimedOut => ("timed_out".to_string(), String::new()),
            tpslab_record::idle::Outcome::Failed(e) => (format!("failed {e}"), String::new()),
        };
        writeln!(w, "{},{},{},{},{l}", q.at_ms, q.conn, q.idle_ms, text(&o))?;
    }
    Ok(())
}

/// A TCP record's TCP_INFO samples, one row each: `flow` names the run (`first`,
/// `after`) or the watched flow (`LOCAL->REMOTE`).
pub fn tcp(w: &mut dyn Write, t: &tpslab_record::TcpRecord) -> io::Result<()> {
    writeln!(w, "flow,t_ms,bytes_acked,bytes_received,rtt_us,min_rtt_us,cwnd_bytes,peer_window_bytes,in_flight_bytes,notsent_bytes,retrans_segs,rcv_rtt_us,rcv_wnd_bytes")?;
    let runs = t.runs.iter().enumerate().map(|(i, r)| {
        (
            if i == 0 {
                "first".to_string()
            } else {
                "after".into()
            },
            &r.flow.samples,
        )
    });
    let watched = t.watched.iter().map(|x| {
        (
            format!("{}->{}", x.flow.local, x.flow.remote),
            &x.flow.samples,
        )
    });
    for (name, samples) in runs.chain(watched) {
        for s in samples {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{},{},{}",
                text(&name),
                num(s.t_ns as f64 / 1e6, 3),
                s.bytes_acked,
                s.bytes_received,
                s.rtt_us,
                s.min_rtt_us,
                s.cwnd_segs as u64 * s.mss as u64,
                s.peer_window_bytes,
                s.in_flight_bytes,
                s.notsent_bytes,
                s.retrans_segs,
                s.rcv_rtt_us,
                s.rcv_wnd_bytes
            )?;
        }
    }
    Ok(())
}

/// A text cell, quoted when it holds a comma, a quote or a line break.
fn text(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        String::new()
    }
}

/// A sweep's runs: `cell,rep,<factor>...,<figure>...`.
pub fn sweep(w: &mut dyn Write, s: &tpslab_record::SweepReport) -> io::Result<()> {
    let cells = tpslab_plan::sweep::cells(&s.plan.factors, s.plan.design);
    let names: Vec<&str> = s.plan.factors.iter().map(|f| f.name.as_str()).collect();
    let header: Vec<String> = names.iter().map(|n| text(n)).collect();
    let figs: Vec<String> = s
        .runs
        .first()
        .map(|r| r.metrics.figures().into_keys().collect())
        .unwrap_or_default();
    writeln!(w, "cell,rep,{},{}", header.join(","), figs.join(","))?;
    for r in &s.runs {
        let f = r.metrics.figures();
        let settings = cells.get(r.cell).map(|c| &c.settings);
        let levels: Vec<String> = names
            .iter()
            .map(|n| {
                settings
                    .and_then(|s| s.get(*n))
                    .map_or(String::new(), |l| text(l))
            })
            .collect();
        let values: Vec<String> = figs
            .iter()
            .map(|k| f.get(k).map_or(String::new(), |v| num(*v, 3)))
            .collect();
        writeln!(
            w,
            "{},{},{},{}",
            r.cell,
            r.rep,
            levels.join(","),
            values.join(",")
        )?;
    }
    Ok(())
}

/// A ramp's steps, one row each, with each step's response-time ledger (ms per part).
pub fn ramp(w: &mut dyn Write, r: &tpslab_record::RampReport) -> io::Result<()> {
    writeln!(
        w,
        "users,tps,p50_ms,p90_ms,p99_ms,max_ms,mean_ms,errors,littles_law_ratio,server_cpu_pct,held_replies,held_gap_mean_ms,held_share_pct,delayed_acks,{},ledger_unattributed_ms,ledger_outside_ms",
        RtPart::ALL
            .iter()
            .map(|p| format!("ledger_{}_ms", part_name(*p)))
            .collect::<Vec<_>>()
            .join(",")
    )?;
    for (i, s) in r.run.steps.iter().enumerate() {
        let ms = |ns: u64| num(ns as f64 / 1e6, 3);
        // Replies held between their first byte and their last (tpslab_analysis::nagle).
        let g = s.reply_gaps.as_ref();
        // The step's response-time ledger: each part's ms (empty when not read).
        let l = r.analysis.ledger.iter().find(|l| l.users == s.users);
        let mut ledger: Vec<String> = RtPart::ALL
            .iter()
            .map(|&p| {
                l.and_then(|l| l.parts.iter().find(|x| x.part == p))
                    .map_or(String::new(), |x| num(x.ms, 3))
            })
            .collect();
        ledger.push(l.map_or(String::new(), |l| num(l.unattributed_ms, 3)));
        ledger.push(l.map_or(String::new(), |l| num(l.outside_ms, 3)));
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            s.users,
            num(s.tps, 1),
            ms(s.response.p50_ns),
            ms(s.response.p90_ns),
            ms(s.response.p99_ns),
            ms(s.response.max_ns),
            num(s.response.mean_ns / 1e6, 3),
            s.errors.values().sum::<u64>(),
            r.analysis
                .little
                .get(i)
                .map_or(String::new(), |l| num(l.ratio, 3)),
            s.server_cpu_cores
                .map_or(String::new(), |c| num(c * 100.0, 1)),
            g.map_or(String::new(), |g| g.held.to_string()),
            g.and_then(|g| g.mean_held_gap_ns())
                .map_or(String::new(), |m| num(m / 1e6, 3)),
            g.map_or(String::new(), |g| num(g.held_share() * 100.0, 1)),
            g.and_then(|g| g.delayed_acks)
                .map_or(String::new(), |d| d.to_string()),
            ledger.join(","),
        )?;
    }
    Ok(())
}

/// A capacity step's ledger as cells: its mean, each part's ms (empty when not read),
/// what is left unattributed; all empty without a ledger.
fn ledger_cells(l: Option<&tpslab_record::rt_ledger::RtLedger>) -> String {
    let mut cells = vec![l.map_or(String::new(), |l| num(l.mean_ms, 3))];
    cells.extend(RtPart::ALL.iter().map(|&p| {
        l.and_then(|l| l.parts.iter().find(|x| x.part == p))
            .map_or(String::new(), |x| num(x.ms, 3))
    }));
    cells.push(l.map_or(String::new(), |l| num(l.unattributed_ms, 3)));
    cells.join(",")
}

/// A ledger part's name in a column: its record name (`accept_wait`, `on_cpu`, ...).
fn part_name(p: RtPart) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A run's observer series: `t_ms` and one column per series. A rate series has one value
/// fewer than the samples (it lies between two): each series is aligned to the last
/// samples, its first cells empty.
pub fn series(w: &mut dyn Write, r: &RunRecord) -> io::Result<()> {
    let Some(o) = &r.observer else {
        return writeln!(w, "t_ms");
    };
    let s = &o.series;
    let names: Vec<&str> = s.values.keys().map(String::as_str).collect();
    writeln!(w, "t_ms,{}", names.join(","))?;
    let n = s.t_ms.len();
    for (i, t) in s.t_ms.iter().enumerate() {
        let cells: Vec<String> = s
            .values
            .values()
            .map(|v| {
                (i + v.len())
                    .checked_sub(n)
                    .and_then(|k| v.get(k))
                    .map_or(String::new(), |x| num(*x, 3))
            })
            .collect();
        writeln!(w, "{},{}", num(*t, 3), cells.join(","))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_cells_with_commas_or_quotes_are_quoted() {
        assert_eq!(super::text("0-1,3"), "\"0-1,3\"");
        assert_eq!(super::text("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(super::text("fifo:99"), "fifo:99");
    }
}
