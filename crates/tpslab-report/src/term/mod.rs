//! The terminal format: a record as people read it in a terminal (verdict and validity
//! first, then tables), into any `io::Write`. What a command prints is this rendering of
//! its record, so `tpslab report FILE` prints the same bytes again.

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, Table};
use std::io::{self, Write};
use tpslab_analysis::ledger::LedgerPath;
use tpslab_analysis::ramp::{self, RampPlan, RampProto};
use tpslab_analysis::record::{
    Body, GeneratorReport, MatchMode, ObserverReport, RampReport, Record, RunRecord, ServerReport,
    SweepReport,
};
use tpslab_analysis::LatencySummary;

pub mod tcp;

/// A table with tpslab's borders, the first column left-aligned and the rest right.
pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(header.iter().map(Cell::new).collect::<Vec<_>>());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// "label (ENOBUFS x3, EAGAIN x1)", or the label alone without errors.
fn with_errnos(label: &str, errors: &std::collections::BTreeMap<String, u64>) -> String {
    if errors.is_empty() {
        return label.to_string();
    }
    let list: Vec<String> = errors.iter().map(|(k, v)| format!("{k} x{v}")).collect();
    format!("{label} ({})", list.join(", "))
}

/// Formats nanoseconds with a readable unit.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

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
    } else {
        format!("a steady {} pps", fmt_rate(g.rate_pps))
    }
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
        t.add_row(vec!["replies read".to_string(), g.replies_read.to_string()]);
        if g.match_mode != MatchMode::Aggregate {
            t.add_row(vec![
                "replies matched".to_string(),
                g.replies_matched.to_string(),
            ]);
            t.add_row(vec![
                "beyond the first per request (frames or duplicates)".to_string(),
                g.duplicates.to_string(),
            ]);
            if let Some(k) = g.replies_per_request.filter(|k| *k > 1.0) {
                t.add_row(vec![
                    "reply datagrams per answered request".to_string(),
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
    writeln!(w, "{t}")?;
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
        writeln!(w, "{t}")?;
        if g.rx_kernel_timestamps > 0 {
            writeln!(w,
                "  RTTs end at the kernel's receive timestamp (SO_TIMESTAMPNS) for {} of {} replies: the generator's own wake-up is not counted",
                g.rx_kernel_timestamps, g.window_answered
            )?;
        }
    } else {
        let mut t = table(&["schedule", "p50", "p90", "p99", "p99.9", "max", "n"]);
        lat_row(&mut t, "schedule lag (actual - intended)", &g.schedule_lag);
        writeln!(w, "{t}")?;
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
    }
    writeln!(w, "{t}")?;
    Ok(())
}

fn print_observer(w: &mut dyn Write, o: &ObserverReport, explain: bool) -> io::Result<()> {
    writeln!(
        w,
        "Kernel, sampled every {:.1} ms ({} samples):",
        o.interval_ms, o.samples
    )?;
    let mut hdr = vec!["series", "mean", "stddev", "min", "max", "p50", "p99"];
    if explain {
        hdr.push("source");
    }
    let mut t = table(&hdr);
    for (k, s) in &o.summaries {
        let mut row = vec![
            k.clone(),
            format!("{:.0}", s.mean),
            format!("{:.0}", s.stddev),
            format!("{:.0}", s.min),
            format!("{:.0}", s.max),
            format!("{:.0}", s.p50),
            format!("{:.0}", s.p99),
        ];
        if explain {
            let base = k.trim_end_matches("_per_s");
            row.push(
                o.sources
                    .get(base)
                    .or_else(|| o.sources.get(k))
                    .cloned()
                    .unwrap_or_default(),
            );
        }
        t.add_row(row);
    }
    writeln!(w, "{t}")?;
    let mut t = table(&["counter delta over the run", "value"]);
    for (k, v) in &o.deltas {
        if *v > 0 || k.contains("drop") || k.contains("errors") || k == "udp_no_ports" {
            t.add_row(vec![k.clone(), v.to_string()]);
        }
    }
    writeln!(w, "{t}")?;
    let mut t = table(&["CPU", "user %", "system %", "irq+softirq %", "busy %"]);
    for (cpu, m) in &o.cpu_pct {
        let g = |k: &str| format!("{:.1}", m.get(k).copied().unwrap_or(0.0));
        t.add_row(vec![
            cpu.clone(),
            g("user"),
            g("system"),
            g("softirq"),
            g("busy"),
        ]);
    }
    writeln!(w, "{t}")?;
    if !o.target_rcvbuf_bytes.is_empty() {
        writeln!(
            w,
            "  target socket(s) SO_RCVBUF limit (sock_diag): {} bytes",
            o.target_rcvbuf_bytes
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    if let Some(n) = o.target_reader_threads {
        writeln!(w, "  target threads that read UDP datagrams: {n}")?;
    }
    for s in &o.target_sched {
        writeln!(w, "  target thread {s}")?;
    }
    for n in &o.notes {
        writeln!(w, "  note: {n}")?;
    }
    for e in &o.errors {
        writeln!(w, "  observer could not read: {e}")?;
    }
    Ok(())
}

fn print_path(w: &mut dyn Write, title: &str, p: &LedgerPath, explain: bool) -> io::Result<()> {
    let mut hdr = vec![title, "datagrams", "% of attempted"];
    if explain {
        hdr.push("source");
    }
    let mut t = table(&hdr);
    // A share that cannot be true (above 100 %, or of a path that does not balance) is
    // not printed.
    let pct = |c: u64| {
        p.share_pct(c)
            .map_or("-".to_string(), |v| format!("{v:.2}"))
    };
    let mut first = vec![
        "attempted".to_string(),
        p.attempted.to_string(),
        pct(p.attempted),
    ];
    if explain {
        first.push("sender's own count".into());
    }
    t.add_row(first);
    for r in &p.rows {
        let mut row = vec![format!("  {}", r.label), r.count.to_string(), pct(r.count)];
        if explain {
            row.push(r.source.clone());
        }
        t.add_row(row);
    }
    let mut last = vec![
        "  unattributed (no counter explains)".to_string(),
        match p.unattributed {
            None => "unknown".into(),
            Some(u) if u < 0 => "INCONSISTENT".into(),
            Some(u) => u.to_string(),
        },
        p.unattributed
            .filter(|u| *u >= 0)
            .map_or("-".into(), |u| pct(u as u64)),
    ];
    if explain {
        last.push("attempted minus every row above".into());
    }
    t.add_row(last);
    writeln!(w, "{t}")?;
    if let Some(why) = &p.inconsistent {
        writeln!(w, "  WARNING: MEASUREMENT INCONSISTENT: {why}; no share and no verdict is drawn from this path")?;
    }
    for n in &p.notes {
        writeln!(w, "  {n}")?;
    }
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
    if let Some(g) = &rec.generator {
        print_generator(w, g)?;
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
    for n in &rec.notes {
        writeln!(w, "note: {n}")?;
    }
    Ok(())
}

fn before_after_row(rec: &RunRecord) -> Vec<String> {
    let g = rec.generator.as_ref();
    let q = rec
        .observer
        .as_ref()
        .and_then(|o| o.summaries.get("server_rx_queue_bytes"))
        .copied()
        .unwrap_or_default();
    let delivered = rec
        .ledger
        .as_ref()
        .map_or(0, |l| l.request.count("delivered"));
    vec![
        g.map_or(0, |g| g.attempted).to_string(),
        delivered.to_string(),
        g.and_then(|g| g.window_loss_pct)
            .map_or("-".into(), |l| format!("{l:.2} %")),
        g.map_or("-".into(), |g| format!("{:.0}", g.tps)),
        g.map_or("-".into(), |g| fmt_ns(g.latency_intended.p99_ns as f64)),
        format!("{:.0}", q.mean),
        format!("{:.0}", q.max),
    ]
}

/// Prints a diagnosis: verdict first, evidence, ledger, recommendations, buffer
/// arithmetic, and the before/after of the verification run.
#[allow(clippy::too_many_arguments)]
pub fn print_diagnosis(
    w: &mut dyn Write,
    scenario: &str,
    d: &tpslab_analysis::verdict::Diagnosis,
    before: &RunRecord,
    after: Option<&RunRecord>,
    applied: &[String],
    restored: &[(String, String)],
    notes: &[String],
    explain: bool,
) -> io::Result<()> {
    writeln!(w, "tpslab diagnose: {scenario}")?;
    writeln!(w)?;
    writeln!(w, "VERDICT: {}", d.headline)?;
    writeln!(w, "  where: {}", d.layer)?;
    if let Some(t) = &before.target {
        writeln!(
            w,
            "  server: PID {} {} ({}, {} thread(s)); its reads and replies {}",
            t.pid,
            t.exe,
            t.runtime.name(),
            t.threads,
            if t.exact_counts {
                "counted exactly on its threads (perf tracepoints)"
            } else {
                "NOT counted on its threads: derived from namespace-wide counters (see the notes)"
            }
        )?;
    }
    if let Some(g) = &before.generator {
        print_load_line(w, g)?;
    }
    writeln!(w)?;
    writeln!(w, "Evidence:")?;
    for e in &d.evidence {
        if explain {
            writeln!(w, "  - {}\n      [source: {}]", e.text, e.source)?;
        } else {
            writeln!(w, "  - {}", e.text)?;
        }
    }
    if let Some(l) = &before.ledger {
        print_path(w, "request path: generator -> server", &l.request, explain)?;
        if let Some(r) = &l.reply {
            print_path(w, "reply path: server -> generator", r, explain)?;
        }
    }
    if !d.recommendations.is_empty() {
        writeln!(w, "Recommendation:")?;
        for (i, r) in d.recommendations.iter().enumerate() {
            writeln!(w, "  {}. {}", i + 1, r.what)?;
            writeln!(w, "     why: {}", r.why)?;
            for l in &r.lines {
                writeln!(w, "       {l}")?;
            }
        }
    }
    if !d.buffer_notes.is_empty() {
        writeln!(w, "Buffer arithmetic (measured on this kernel):")?;
        for n in &d.buffer_notes {
            writeln!(w, "  - {n}")?;
        }
    }
    if explain {
        for n in &d.explain_notes {
            writeln!(w, "  - {n}")?;
        }
    }
    if let Some(a) = after {
        writeln!(w)?;
        writeln!(
            w,
            "Verification: the load again with {}{}",
            applied.join(", "),
            if a.interrupted {
                " (INTERRUPTED: partial run)"
            } else {
                ""
            }
        )?;
        let mut t = table(&[
            "",
            "sent",
            "delivered",
            "lost (window)",
            "TPS",
            "p99 RTT",
            "rx_queue mean B",
            "rx_queue max B",
        ]);
        let mut b = vec!["before".to_string()];
        b.extend(before_after_row(before));
        t.add_row(b);
        let mut x = vec!["after".to_string()];
        x.extend(before_after_row(a));
        t.add_row(x);
        writeln!(w, "{t}")?;
        if let (Some(gb), Some(ga)) = (&before.generator, &a.generator) {
            let bigger_queue = applied.iter().any(|a| a.contains("--rcvbuf"));
            if bigger_queue
                && ga.latency_intended.p99_ns > gb.latency_intended.p99_ns
                && ga.window_loss_pct < gb.window_loss_pct
            {
                writeln!(w, "  p99 RTT rose: datagrams that were dropped before now wait in the larger queue; latency is the price of not losing them")?;
            }
        }
        if let Some(g) = &a.generator {
            if !g.valid {
                writeln!(
                    w,
                    "  (the verification run's generator was a bottleneck: {})",
                    g.invalid_reasons.join("; ")
                )?;
            }
        }
        for (k, v) in restored {
            writeln!(w, "  restored {k} = {v}")?;
        }
    }
    for n in before.notes.iter().chain(notes) {
        writeln!(w, "note: {n}")?;
    }
    Ok(())
}

/// One line on the load and what came back: shape, TPS and RTT percentiles.
fn print_load_line(w: &mut dyn Write, g: &GeneratorReport) -> io::Result<()> {
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

/// Renders any record: a UDP run or watch ([`print_record`]), a diagnosis
/// ([`print_diagnosis`]).
pub fn record(w: &mut dyn Write, rec: &Record, explain: bool) -> io::Result<()> {
    match &rec.body {
        Body::UdpRun(r) | Body::Watch(r) => print_record(w, r, explain),
        Body::Ramp(r) => {
            ramp_header(w, &r.run.plan)?;
            ramp_results(w, r)
        }
        Body::Serve(s) => {
            serve_header(w, &s.server)?;
            print_server(w, &s.server, s.elapsed_s)
        }
        Body::Sweep(r) => {
            sweep_header(w, &r.plan, &r.out)?;
            sweep_results(w, r)
        }
        Body::Tcp(t) => tcp::record(w, t),
        Body::ServeTcp(s) => {
            tcp::serve_header(w, s)?;
            tcp::serve_end(w, s)
        }
        Body::Diagnose(d) => print_diagnosis(
            w,
            &d.scenario,
            &d.diagnosis,
            &d.before,
            d.after.as_ref(),
            &d.applied,
            &d.restored,
            &d.notes,
            explain,
        ),
    }
}

fn ms(ns: f64) -> String {
    format!("{:.2}", ns / 1e6)
}

/// The first line of a ramp, printed when it starts: what will run against what.
pub fn ramp_header(w: &mut dyn Write, p: &RampPlan) -> io::Result<()> {
    let total = p.steps.len() as f64 * (p.step_ns + p.warmup_ns) as f64 / 1e9;
    writeln!(
        w,
        "tpslab ramp {}: {} steps of users {:?}, {} s{}; target {}{}",
        match p.proto {
            RampProto::Tcp => "tcp",
            RampProto::Udp => "udp",
        },
        p.steps.len(),
        p.steps,
        if total < 10.0 {
            format!("{total:.1}")
        } else {
            format!("{total:.0}")
        },
        if p.think_ns == 0 {
            String::new()
        } else {
            format!(", think {:?}", std::time::Duration::from_nanos(p.think_ns))
        },
        p.target,
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
    writeln!(w, "{t}")?;
    writeln!(w, "  sources: TPS = replies in the step's measured window / its length; response = request written to reply read (closed loop: no coordinated omission, each user waits); X*(R+Z)/N = Little's law (1.00 = every user always had a request out); server CPU from /proc/PID/stat utime+stime; run queue = time the server's threads waited for a CPU while runnable, in % of one CPU (schedstat); threads from /proc/PID/task/*/stat state and wchan")
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

/// The first line of a sweep, printed when it starts: cells, runs, design, order, how long.
pub fn sweep_header(
    w: &mut dyn Write,
    p: &tpslab_analysis::sweep::SweepPlan,
    out: &str,
) -> io::Result<()> {
    let cells = tpslab_analysis::sweep::cells(&p.factors, p.design).len();
    let est_run_s = (p.load.warmup + p.load.duration).as_secs_f64() + 1.0;
    writeln!(
        w,
        "tpslab sweep: {} cells x {} runs, {:?} design, random order (seed {}), about {:.0} s; records in {}",
        cells,
        p.repeat,
        p.design,
        p.seed,
        est_run_s * (cells * p.repeat) as f64,
        out
    )
}

/// A sweep's results: estimates per cell, effects against the baseline, the best cell,
/// warnings and notes.
pub fn sweep_results(w: &mut dyn Write, rep: &SweepReport) -> io::Result<()> {
    let (plan, r, notes) = (&rep.plan, &rep.result, &rep.notes);
    use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "cell",
        "n",
        "loss % (95 % CI)",
        "TPS",
        "rx_queue mean B",
        "rx_queue stddev B",
        "server CPU %",
        "ctxt/s (system)",
        "ctxt/s (server)",
        "p99 RTT us",
    ]);
    let e = |c: &tpslab_analysis::sweep::CellResult, k: &str| c.figures.get(k).copied();
    for c in &r.cells {
        let loss = e(c, "loss_pct").map_or("-".into(), |x| {
            if x.ci_lo.is_nan() {
                format!("{:.2} [-]", x.mean)
            } else {
                format!("{:.2} [{:.2}, {:.2}]", x.mean, x.ci_lo, x.ci_hi)
            }
        });
        let pm =
            |k: &str| e(c, k).map_or("-".into(), |x| format!("{:.0} ± {:.0}", x.mean, x.stddev));
        t.add_row(vec![
            format!(
                "{}{}",
                if c.cell.id == 0 { "* " } else { "" },
                c.cell.label()
            ),
            e(c, "tps").map_or(0, |x| x.n).to_string(),
            loss,
            pm("tps"),
            pm("rxq_mean_bytes"),
            pm("rxq_stddev_bytes"),
            pm("server_cpu_pct"),
            pm("ctxt_per_s"),
            pm("server_ctxt_per_s"),
            pm("p99_us"),
        ]);
    }
    writeln!(w, "{t}")?;
    writeln!(
        w,
        "(* baseline; mean ± stddev over the runs; figures over the measurement window)"
    )?;
    writeln!(
        w,
        "Effects against the baseline ({}):",
        plan.objective.figure().0
    )?;
    for f in &r.findings {
        writeln!(w, "  - {f}")?;
    }
    if let Some(b) = r.best {
        writeln!(
            w,
            "Best cell for {}: {}",
            plan.objective.figure().0,
            r.cells[b].cell.label()
        )?;
    }
    for warning in &r.warnings {
        writeln!(w, "warning: {warning}")?;
    }
    for n in notes {
        writeln!(w, "note: {n}")?;
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
