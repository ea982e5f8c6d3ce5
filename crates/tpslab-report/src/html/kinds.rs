//! What each kind of record shows in HTML: UDP runs and watches, diagnoses (before and
//! after side by side on shared axes) here; ramp, tcp and sweep in [`super::others`].

use super::plot::{self, draw, percentile_x, Chart, Line, PALETTE};
use super::{Advice, Bar, Evidence, Item, Page, Section, Segment, Verdict};
use crate::units::fmt_ns;
use tpslab_record::ledger::LedgerPath;
use tpslab_record::{Body, DiagnoseRecord, Record, RunRecord};

/// Fills the page's verdict and sections for `rec`'s kind.
pub(super) fn fill(p: &mut Page, rec: &Record) -> Result<(), String> {
    match &rec.body {
        Body::UdpRun(r) | Body::Watch(r) => run(p, r),
        Body::Diagnose(d) => diagnose(p, d),
        Body::Ramp(r) => super::others::ramp(p, r),
        Body::Tcp(t) => super::others::tcp(p, t),
        Body::Sweep(s) => super::others::sweep(p, s),
        Body::Compare(c) => super::compare::page(p, c),
        Body::Capacity(c) => super::others::capacity(p, c),
        // Tables and findings: their terminal report, on the page, says it all.
        Body::Serve(_)
        | Body::ServeTcp(_)
        | Body::Doctor(_)
        | Body::Bdp(_)
        | Body::ProbeIdle(_)
        | Body::ProbePool(_) => Ok(()),
        Body::LoadHttp(l) => super::load_http::page(p, l, rec.meta.interrupted),
    }
}

fn run(p: &mut Page, r: &RunRecord) -> Result<(), String> {
    p.alerts.extend(alerts(r, ""));
    if let Some(g) = &r.generator {
        let loss = g
            .window_loss_pct
            .map_or("no replies expected".into(), |l| format!("loss {l:.2} %"));
        p.verdict = Some(Verdict {
            label: if g.valid { "RUN VALID" } else { "RUN INVALID" }.into(),
            headline: format!(
                "{} datagrams attempted at {} pps, {loss}, {:.0} TPS, p99 {} (from the intended send time)",
                g.attempted,
                plot::si(g.achieved_pps),
                g.tps,
                fmt_ns(g.latency_intended.p99_ns as f64)
            ),
            detail: (!g.valid).then(|| g.invalid_reasons.join("; ")),
            ok: g.valid && g.window_loss_pct.unwrap_or(0.0) == 0.0,
            ..Default::default()
        });
    }
    let charts = run_charts(r);
    p.sections
        .extend(sections(&[r], &[""], vec![charts], &[ledger_bars(r)]));
    Ok(())
}

fn diagnose(p: &mut Page, d: &DiagnoseRecord) -> Result<(), String> {
    let g = &d.diagnosis;
    p.title = format!("tpslab diagnose: {}", d.scenario);
    p.verdict = Some(Verdict {
        label: "VERDICT".into(),
        headline: g.headline.clone(),
        detail: Some(format!("where: {}", g.layer)),
        evidence: g
            .evidence
            .iter()
            .map(|e| Evidence {
                text: e.text.clone(),
                source: e.source.clone(),
            })
            .collect(),
        recommendations: g
            .recommendations
            .iter()
            .map(|r| Advice {
                what: r.what.clone(),
                why: r.why.clone(),
                lines: r.lines.clone(),
            })
            .collect(),
        ok: false,
    });
    let mut runs = vec![&d.before];
    let mut names = vec!["before"];
    p.alerts.extend(alerts(&d.before, "before: "));
    if let Some(a) = &d.after {
        runs.push(a);
        names.push("after");
        p.alerts.extend(alerts(a, "after: "));
    }
    let charts: Vec<Vec<Chart>> = runs.iter().map(|r| run_charts(r)).collect();
    let bars: Vec<Item> = runs.iter().map(|r| ledger_bars(r)).collect();
    p.sections.extend(sections(&runs, &names, charts, &bars));
    if !d.applied.is_empty() || !d.restored.is_empty() {
        let mut s = Section::new("What was changed for the verification run, and restored");
        let mut items: Vec<String> = d.applied.iter().map(|a| format!("applied: {a}")).collect();
        items.extend(
            d.restored
                .iter()
                .map(|(k, v)| format!("restored: {k} = {v}")),
        );
        s.items.push(Item::List {
            title: String::new(),
            items,
        });
        p.sections.push(s);
    }
    if let Some(n) = &d.not_verified {
        let mut s = Section::new("Verification: nothing verified");
        let mut items = vec![n.why.clone()];
        items.extend(n.run.iter().map(|r| format!("to verify, run: {r}")));
        items.extend(n.run_note.iter().cloned());
        s.items.push(Item::List {
            title: String::new(),
            items,
        });
        p.sections.push(s);
    }
    Ok(())
}

/// Loudly: a ledger that cannot balance, a run that is no evidence.
fn alerts(r: &RunRecord, prefix: &str) -> Vec<String> {
    let mut v = vec![];
    if let Some(l) = &r.ledger {
        for (name, path) in
            std::iter::once(("request", &l.request)).chain(l.reply.iter().map(|p| ("reply", p)))
        {
            if let Some(why) = &path.inconsistent {
                v.push(format!(
                    "{prefix}the {name} path's ledger is inconsistent, so no share is shown: {why}"
                ));
            }
        }
    }
    if r.interrupted {
        v.push(format!(
            "{prefix}the run was interrupted before its planned end"
        ));
    }
    v
}

fn series<'a>(r: &'a RunRecord, name: &str) -> Option<(&'a [f64], &'a [f64])> {
    let o = r.observer.as_ref()?;
    let v = o.series.values.get(name)?;
    // Rates start at the second sample: align on the last times. An empty series is no
    // line (callers take its first and last times).
    let t = &o.series.t_ms;
    (!v.is_empty() && v.len() <= t.len()).then(|| (&t[t.len() - v.len()..], v.as_slice()))
}

fn source(r: &RunRecord, name: &str) -> String {
    let o = r.observer.as_ref();
    let base = name
        .trim_end_matches("_per_s")
        .trim_end_matches("_bytes")
        .to_string();
    o.and_then(|o| o.sources.get(name).or_else(|| o.sources.get(&base)))
        .cloned()
        .map(|s| {
            if name.ends_with("_per_s") && !s.contains("per sample") {
                format!("{s}, per second of each interval")
            } else {
                s
            }
        })
        .unwrap_or_else(|| name.to_string())
}

fn line(r: &RunRecord, name: &str, label: &str, colour: usize) -> Option<Line> {
    let (t, v) = series(r, name)?;
    Some(Line::new(
        label,
        &source(r, name),
        t.iter().zip(v).map(|(&t, &v)| (t / 1e3, v)).collect(),
        PALETTE[colour],
    ))
}

/// The time-series and latency charts of one run (not drawn yet: before/after share
/// their axes first).
fn run_charts(r: &RunRecord) -> Vec<Chart> {
    let mut out = vec![];
    out.push(rates_chart(r));
    out.push(rx_queue_chart(r));
    let mut c = Chart::new("drops", "Drops per interval", "time, s", "drops per second");
    c.lines
        .extend(line(r, "server_drops_per_s", "server socket drops", 1));
    c.lines
        .extend(line(r, "udp_rcvbuf_errors_per_s", "Udp: RcvbufErrors", 3));
    c.lines
        .extend(line(r, "softnet_dropped_per_s", "softnet backlog drops", 4));
    out.push(c);
    if let Some(g) = &r.generator {
        out.push(latency_chart(g));
    }
    out.retain(Chart::has_data);
    out
}

/// Offered and delivered datagrams per second, with the plan's mean rate.
fn rates_chart(r: &RunRecord) -> Chart {
    let mut c = Chart::new(
        "rates",
        "Offered and delivered",
        "time, s",
        "datagrams per second",
    );
    c.lines
        .extend(line(r, "gen_sent_per_s", "offered pps (sent)", 0));
    let delivered = if series(r, "server_reads_per_s").is_some() {
        line(
            r,
            "server_reads_per_s",
            "delivered pps (read by the server)",
            2,
        )
    } else {
        line(
            r,
            "udp_in_datagrams_per_s",
            "delivered pps (Udp: InDatagrams)",
            2,
        )
    };
    c.lines.extend(delivered);
    if let Some(g) = r.generator.as_ref().filter(|g| g.rate_pps > 0.0) {
        if let Some((t, _)) = series(r, "server_drops_per_s") {
            let (a, b) = (t[0] / 1e3, t[t.len() - 1] / 1e3);
            c.lines.push(
                Line::new(
                    "planned rate (mean)",
                    "the plan: --rate",
                    vec![(a, g.rate_pps), (b, g.rate_pps)],
                    PALETTE[6],
                )
                .dashed(),
            );
        }
    }
    c
}

/// The server's receive queue against its limit (SO_RCVBUF, summed over its sockets).
fn rx_queue_chart(r: &RunRecord) -> Chart {
    let mut c = Chart::new(
        "rx_queue",
        "Server receive queue against its limit",
        "time, s",
        "bytes",
    );
    // Each run against its own limit: a raised limit would flatten the first run's queue.
    c.share_y = false;
    c.lines.extend(line(
        r,
        "server_rx_queue_bytes",
        "rx_queue (bytes charged, truesize)",
        0,
    ));
    let limit: u64 = r
        .observer
        .as_ref()
        .map_or(0, |o| o.target_rcvbuf_bytes.iter().sum());
    let limit = if limit > 0 {
        Some((
            limit,
            "sock_diag SK_MEMINFO_RCVBUF of the server socket(s), summed",
        ))
    } else {
        r.server.as_ref().map(|s| {
            (
                s.rcvbuf_granted_bytes * s.socket_inodes.len().max(1) as u64,
                "getsockopt(SO_RCVBUF) of the server socket(s), summed",
            )
        })
    };
    if let (Some((lim, src)), Some((t, _))) = (limit, series(r, "server_rx_queue_bytes")) {
        c.lines.push(
            Line::new(
                "limit (SO_RCVBUF)",
                src,
                vec![(t[0] / 1e3, lim as f64), (t[t.len() - 1] / 1e3, lim as f64)],
                PALETTE[1],
            )
            .dashed(),
        );
    }
    c
}

/// Latency by percentile, from the intended and from the actual send time.
fn latency_chart(g: &tpslab_record::GeneratorReport) -> Chart {
    let mut c = Chart::new(
        "latency",
        "Latency by percentile",
        "percentile",
        "latency, ms",
    );
    c.x_scale = plot::XScale::Percentile;
    c.y_fmt = |v| format!("{v:.2}");
    for (s, name, src, colour) in [
        (
            &g.latency_intended,
            "from the intended send time (coordinated omission corrected)",
            "generator HDR histogram: reply time - scheduled send time",
            1,
        ),
        (
            &g.latency_actual,
            "from the actual send time",
            "generator HDR histogram: reply time - send call",
            0,
        ),
    ] {
        let pts: Vec<(f64, f64)> = s
            .ladder()
            .into_iter()
            .map(|(q, ns)| (percentile_x(q), ns as f64 / 1e6))
            .collect();
        c.lines
            .push(Line::new(name, src, pts, PALETTE[colour]).markers());
    }
    c.x_range = Some((0.0, plot::PERCENTILE_MAX_X));
    c
}

/// Each ledger path as a bar split by layer, and each CPU's time as a bar.
fn ledger_bars(r: &RunRecord) -> Item {
    let mut bars = vec![];
    if let Some(l) = &r.ledger {
        bars.extend(path_bar("request path", &l.request));
        if let Some(rp) = &l.reply {
            bars.extend(path_bar("reply path", rp));
        }
    }
    Item::Bars {
        id: "ledger".into(),
        title: "Ledger: where every datagram went".into(),
        bars,
    }
}

fn path_bar(name: &str, p: &LedgerPath) -> Option<Bar> {
    // Shares only when the path balances: never a share above 100 % (see the alerts).
    p.share_pct(0)?;
    let colour = |layer: &str, i: usize| {
        if layer == "delivered" {
            plot::hex(PALETTE[2])
        } else {
            plot::hex(PALETTE[[1, 4, 3, 5, 0, 6][i % 6]])
        }
    };
    let mut segments: Vec<Segment> = p
        .rows
        .iter()
        .filter(|row| row.count > 0)
        .enumerate()
        .map(|(i, row)| Segment {
            label: row.label.clone(),
            value_text: format!(
                "{} ({:.2} %)",
                row.count,
                p.share_pct(row.count).unwrap_or(0.0)
            ),
            source: row.source.clone(),
            width: p.share_pct(row.count).unwrap_or(0.0),
            colour: colour(&row.layer, i),
        })
        .collect();
    if let Some(u) = p.unattributed.filter(|&u| u > 0) {
        segments.push(Segment {
            label: "unattributed".into(),
            value_text: format!("{u} ({:.2} %)", p.share_pct(u as u64).unwrap_or(0.0)),
            source: "attempted minus every counted fate".into(),
            width: p.share_pct(u as u64).unwrap_or(0.0),
            colour: "#999999".into(),
        });
    }
    Some(Bar {
        label: name.into(),
        total_text: format!("{} attempted", p.attempted),
        segments,
    })
}

fn cpu_bars(r: &RunRecord) -> Option<Item> {
    let o = r.observer.as_ref().filter(|o| !o.cpu_pct.is_empty())?;
    let mut cpus: Vec<(&String, _)> = o.cpu_pct.iter().collect();
    cpus.sort_by_key(|(k, _)| {
        k.trim_start_matches("cpu")
            .parse::<u32>()
            .unwrap_or(u32::MAX)
    });
    let bars = cpus
        .into_iter()
        .map(|(cpu, m)| {
            let get = |k: &str| m.get(k).copied().unwrap_or(0.0).clamp(0.0, 100.0);
            let mut segs = vec![];
            for (k, label, c) in [
                ("user", "user", 0),
                ("system", "system", 1),
                ("softirq", "softirq", 4),
            ] {
                segs.push(Segment {
                    label: label.into(),
                    value_text: format!("{:.1} %", get(k)),
                    source: format!("/proc/stat {cpu} {k} time, share of the run"),
                    width: get(k),
                    colour: plot::hex(PALETTE[c]),
                });
            }
            Bar {
                label: cpu.clone(),
                total_text: format!("busy {:.1} %", get("busy")),
                segments: segs,
            }
        })
        .collect();
    Some(Item::Bars {
        id: "cpu".into(),
        title: "CPU per core over the run".into(),
        bars,
    })
}

/// Each chart id's axes shared over every run's chart of that id (x always, y when the
/// chart shares it); returns the ids, in the first run's order.
fn share_axes(charts: &mut [Vec<Chart>]) -> Vec<String> {
    let ids: Vec<String> = charts[0].iter().map(|c| c.id.clone()).collect();
    for id in &ids {
        let ext: Vec<_> = charts
            .iter()
            .flatten()
            .filter(|c| &c.id == id)
            .map(|c| c.extents())
            .collect();
        let x = ext.iter().fold((f64::MAX, f64::MIN), |a, e| {
            (a.0.min(e.0 .0), a.1.max(e.0 .1))
        });
        let y = ext.iter().fold((f64::MAX, f64::MIN), |a, e| {
            (a.0.min(e.1 .0), a.1.max(e.1 .1))
        });
        for c in charts.iter_mut().flatten().filter(|c| &c.id == id) {
            c.x_range = c.x_range.or(Some(x));
            if c.share_y {
                c.y_range = Some(y);
            }
        }
    }
    ids
}

/// The kernel's drops by reason of each run, with the places they happened: a table per
/// run, or why they were not read, or that none was dropped.
fn drop_reasons(runs: &[&RunRecord], names: &[&str]) -> Section {
    let cols = runs.len();
    let mut k = Section::new("The kernel's drops by reason (skb:kfree_skb, host-wide)");
    k.columns = cols;
    for (i, r) in runs.iter().enumerate() {
        if let Some(d) = &r.drop_reasons {
            // Each reason with the places it happened (the reason's total where no site
            // was named).
            let mut rows: Vec<Vec<String>> = vec![];
            for (reason, n) in &d.by_reason {
                let sites: Vec<_> = d.by_site.iter().filter(|s| &s.0 == reason).collect();
                if sites.is_empty() {
                    rows.push(vec![reason.clone(), n.to_string(), String::new()]);
                }
                rows.extend(
                    sites
                        .iter()
                        .map(|s| vec![reason.clone(), s.2.to_string(), s.1.clone()]),
                );
            }
            let title = if cols > 1 {
                names[i].to_string()
            } else {
                String::new()
            };
            match &d.unavailable {
                Some(why) => k.items.push(Item::List {
                    title,
                    items: vec![format!("not read: {why}")],
                }),
                None if rows.is_empty() => k.items.push(Item::List {
                    title,
                    items: vec!["no packet was dropped".into()],
                }),
                None => k.items.push(Item::Table {
                    title,
                    header: vec![
                        "reason".into(),
                        "drops".into(),
                        "where (function+offset)".into(),
                    ],
                    rows,
                }),
            }
        }
    }
    k
}

/// The sections of one run, or of two side by side (before | after) with each chart's
/// axes shared.
fn sections(
    runs: &[&RunRecord],
    names: &[&str],
    mut charts: Vec<Vec<Chart>>,
    ledgers: &[Item],
) -> Vec<Section> {
    let cols = runs.len();
    let mut s = Section::new(if cols > 1 {
        "Before and after, on the same axes"
    } else {
        "What was measured"
    });
    if cols > 1 {
        s.note = Some(
            "Left: the run as found; right: the verification run with the fix applied.".into(),
        );
    }
    s.columns = cols;
    let ids = share_axes(&mut charts);
    // Row by row: a chart of each run side by side.
    for id in &ids {
        for (i, cs) in charts.iter().enumerate() {
            if let Some(c) = cs.iter().find(|c| &c.id == id) {
                let mut c = c.clone();
                if cols > 1 {
                    c.title = format!("{}: {}", names[i], c.title);
                    c.id = format!("{}-{}", names[i], c.id);
                }
                match draw(&c) {
                    Ok(f) => s.items.push(Item::Figure(f)),
                    Err(e) => s.items.push(Item::List {
                        title: c.title.clone(),
                        items: vec![format!("not drawn: {e}")],
                    }),
                }
            }
        }
    }
    for (i, l) in ledgers.iter().enumerate() {
        let mut l = l.clone();
        if let Item::Bars { id, title, .. } = &mut l {
            if cols > 1 {
                *title = format!("{}: {title}", names[i]);
                *id = format!("{}-{id}", names[i]);
            }
        }
        s.items.push(l);
    }
    for (i, r) in runs.iter().enumerate() {
        if let Some(Item::Bars { id, title, bars }) = cpu_bars(r) {
            let (id, title) = if cols > 1 {
                (
                    format!("{}-{id}", names[i]),
                    format!("{}: {title}", names[i]),
                )
            } else {
                (id, title)
            };
            s.items.push(Item::Bars { id, title, bars });
        }
    }
    let mut out = vec![s];
    let k = drop_reasons(runs, names);
    if !k.items.is_empty() {
        out.push(k);
    }
    out
}
