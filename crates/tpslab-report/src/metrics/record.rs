//! A finished record's metric families, by kind of record: what `--metrics-file` writes
//! (a UDP run's counts, ledger and latency; a ramp's steps; a capacity search's rates; a
//! sweep's cell means). `load http`'s families are in `load_http.rs`.

use super::load_http::of_load_http;
use super::{labels, latency_value, Family, Kind, Value};
use tpslab_record::{Body, Record, RunRecord};

/// The families of a finished record: what `--metrics-file` writes. Every record has
/// `tpslab_run_info` and the run's timing; runs add their counts, ledger rows and latency.
pub fn of_record(rec: &Record) -> Vec<Family> {
    let kind = rec.kind();
    let mut f = vec![
        Family::one(
            "tpslab_run_info",
            "The record this file was written from (its kind and tpslab's version).",
            Kind::Gauge,
            labels(&[("kind", kind), ("version", &rec.meta.tool_version)]),
            Value::Int(1),
        ),
        Family::one(
            "tpslab_run_start_timestamp_seconds",
            "When the run started, seconds since the Unix epoch.",
            Kind::Gauge,
            vec![],
            Value::Float(rec.meta.started_unix_ms as f64 / 1e3),
        ),
        Family::one(
            "tpslab_run_duration_seconds",
            "How long the command ran, seconds.",
            Kind::Gauge,
            vec![],
            Value::Float(rec.meta.elapsed_s),
        ),
        Family::one(
            "tpslab_run_interrupted",
            "1 when the run was ended by a signal before its plan's end.",
            Kind::Gauge,
            vec![],
            Value::Int(u64::from(rec.meta.interrupted)),
        ),
    ];
    match &rec.body {
        Body::UdpRun(r) | Body::Watch(r) => f.extend(of_run(r)),
        // The last run: after the fix when there was one.
        Body::Diagnose(d) => f.extend(of_run(d.after.as_ref().unwrap_or(&d.before))),
        Body::Ramp(r) => f.extend(of_ramp(r)),
        Body::Sweep(s) => f.extend(of_sweep(s)),
        Body::LoadHttp(l) => f.extend(of_load_http(l, rec.meta.interrupted)),
        Body::Capacity(c) => f.extend(of_capacity(c)),
        // No figures of their own beyond the metadata's yet.
        Body::Serve(_)
        | Body::Tcp(_)
        | Body::ServeTcp(_)
        | Body::Doctor(_)
        | Body::Bdp(_)
        | Body::ProbeIdle(_)
        | Body::ProbePool(_)
        | Body::Compare(_) => {}
    }
    f
}

/// A UDP run's (or watch's) families.
pub fn of_run(r: &RunRecord) -> Vec<Family> {
    let mut f = vec![];
    if let Some(g) = &r.generator {
        f.extend(of_generator(g));
    }
    if let Some(o) = &r.observer {
        f.extend(of_observer(o));
    }
    f.extend(super::drops::of_record(
        r.drop_reasons.as_ref(),
        r.observer.as_ref().map_or(&[], |o| &o.target_sockets),
    ));
    if let Some(l) = &r.ledger {
        f.push(of_ledger(l));
    }
    f
}

/// A counter family of one unlabelled series.
fn counter(name: &str, help: &str, n: u64) -> Family {
    Family::one(name, help, Kind::Counter, vec![], Value::Int(n))
}

/// The generator's families: datagrams sent and read, TPS, the window's loss, latency at
/// percentiles and as a histogram.
fn of_generator(g: &tpslab_record::GeneratorReport) -> Vec<Family> {
    let mut f = vec![];
    f.push(counter(
        "tpslab_generator_sent_datagrams",
        "Datagrams the generator's kernel accepted, whole run (its own count).",
        g.sent,
    ));
    f.push(counter(
        "tpslab_generator_replies_datagrams",
        "Reply datagrams the generator read, whole run.",
        g.replies_read,
    ));
    f.push(Family::one(
        "tpslab_generator_tps",
        "Answered requests per second over the measurement window.",
        Kind::Gauge,
        vec![],
        Value::Float(g.tps),
    ));
    if let Some(l) = g.window_loss_pct {
        f.push(Family::one(
            "tpslab_window_loss_ratio",
            "Requests of the measurement window without a reply, as a fraction of those sent.",
            Kind::Gauge,
            vec![],
            Value::Float(l / 100.0),
        ));
    }
    // A gauge per percentile, labelled `percentile`: `quantile` is the label
    // Prometheus reserves for summaries (promtool refuses it on a gauge), and a
    // summary's quantiles are over a sliding window, these over the whole run.
    let mut q = Family {
        name: super::PERCENTILE.0.into(),
        help: super::PERCENTILE.1.into(),
        kind: Kind::Gauge,
        series: vec![],
    };
    for (from, l) in [
        ("intended", &g.latency_intended),
        ("actual", &g.latency_actual),
    ] {
        if l.count == 0 {
            continue;
        }
        for (pct, ns) in [
            ("50", l.p50_ns),
            ("99", l.p99_ns),
            ("99.9", l.p999_ns),
            ("100", l.max_ns),
        ] {
            q.series.push((
                labels(&[("from", from), ("percentile", pct)]),
                Value::Float(ns as f64 / 1e9),
            ));
        }
    }
    if !q.series.is_empty() {
        f.push(q);
    }
    if let Some(h) = &g.histograms {
        let mut fam = Family {
            name: "tpslab_latency_seconds".into(),
            help: "Latency of the matched replies of the measurement window, seconds (from the record's HdrHistograms).".into(),
            kind: Kind::Histogram,
            series: vec![],
        };
        for (from, text) in [("intended", &h.intended), ("actual", &h.actual)] {
            if let Ok(h) = tpslab_record::histogram::decode_histogram(text) {
                fam.series
                    .push((labels(&[("from", from)]), latency_value(&h)));
            }
        }
        f.push(fam);
    }
    f
}

/// The observer's families: the namespace's UDP counters and softnet drops, the target
/// sockets' drops and largest queue.
fn of_observer(o: &tpslab_record::ObserverReport) -> Vec<Family> {
    let mut f = vec![];
    let d = |k: &str| o.deltas.get(k).copied();
    for (key, name, help) in [
        ("udp_rcvbuf_errors", "tpslab_udp_rcvbuf_errors", "Udp: RcvbufErrors + Udp6RcvbufErrors of the target's namespace, delta over the run (node_netstat_Udp_RcvbufErrors)."),
        ("udp_in_datagrams", "tpslab_udp_in_datagrams", "Udp: InDatagrams + Udp6InDatagrams of the target's namespace, delta over the run (node_netstat_Udp_InDatagrams)."),
        ("udp_no_ports", "tpslab_udp_no_ports", "Udp: NoPorts + Udp6NoPorts, delta over the run (node_netstat_Udp_NoPorts)."),
        ("softnet_dropped", "tpslab_softnet_dropped", "softnet backlog drops, all CPUs, delta over the run (sum of node_softnet_dropped_total)."),
        ("server_drops", "tpslab_socket_drops", "Drops at the target socket(s), /proc/net/udp `drops`, delta over the run (no node_exporter series)."),
    ] {
        if let Some(n) = d(key) {
            f.push(counter(name, help, n));
        }
    }
    if let Some(s) = o.summaries.get("server_rx_queue_bytes") {
        f.push(Family::one(
            "tpslab_socket_rx_queue_max_bytes",
            "Largest rx_queue of the target socket(s) seen over the run, bytes (truesize).",
            Kind::Gauge,
            vec![],
            Value::Float(s.max),
        ));
    }
    f
}

/// The loss ledger's family: each path's datagrams by the layer that delivered or
/// dropped them.
fn of_ledger(l: &tpslab_record::ledger::Ledger) -> Family {
    let mut fam = Family {
        name: "tpslab_ledger_datagrams".into(),
        help: "The loss ledger: datagrams of each path by the layer that delivered or dropped them, whole run.".into(),
        kind: Kind::Gauge,
        series: vec![],
    };
    for (path, p) in [("request", Some(&l.request)), ("reply", l.reply.as_ref())] {
        let Some(p) = p else { continue };
        fam.series.push((
            labels(&[("path", path), ("layer", "attempted")]),
            Value::Int(p.attempted),
        ));
        for row in &p.rows {
            fam.series.push((
                labels(&[("path", path), ("layer", &row.layer)]),
                Value::Int(row.count),
            ));
        }
        // Only a figure that can be true: a negative gap is an inconsistency, said in
        // the record, not a count.
        if let Some(u) = p.unattributed.filter(|u| *u >= 0) {
            fam.series.push((
                labels(&[("path", path), ("layer", "unattributed")]),
                Value::Int(u as u64),
            ));
        }
    }
    fam
}

fn of_ramp(r: &tpslab_record::RampReport) -> Vec<Family> {
    ramp_steps(&r.run.steps, r.analysis.knee_users)
}

/// A ramp's steps so far (each step's TPS and p99 labelled by its users) and its knee.
pub fn ramp_steps(
    steps: &[tpslab_record::ramp::StepResult],
    knee_users: Option<usize>,
) -> Vec<Family> {
    let mut tps = Family {
        name: "tpslab_ramp_tps".into(),
        help: "Transactions per second at each step's number of users.".into(),
        kind: Kind::Gauge,
        series: vec![],
    };
    let mut p99 = Family {
        name: "tpslab_ramp_latency_p99_seconds".into(),
        help: "99th percentile latency at each step, seconds.".into(),
        kind: Kind::Gauge,
        series: vec![],
    };
    for s in steps {
        let l = labels(&[("users", &s.users.to_string())]);
        tps.series.push((l.clone(), Value::Float(s.tps)));
        p99.series
            .push((l, Value::Float(s.response.p99_ns as f64 / 1e9)));
    }
    let mut f = vec![tps, p99];
    if let Some(k) = knee_users {
        f.push(Family::one(
            "tpslab_ramp_knee_users",
            "Users at the knee: the first step whose TPS gain per user gain fell below the threshold.",
            Kind::Gauge,
            vec![],
            Value::Int(k as u64),
        ));
    }
    f
}

/// A capacity search's families: the rates it found (each when found) and its steps by call.
fn of_capacity(c: &tpslab_record::capacity::CapacityRecord) -> Vec<Family> {
    use tpslab_record::capacity::StepStatus;
    let (lo, hi) = c.conclusion.bounds();
    // One help per name whatever the unit: node_exporter refuses a family whose files
    // give it two helps.
    let per = "per second (datagrams for capacity udp, HTTP requests for capacity http)";
    let mut f = vec![];
    if let Some(v) = lo {
        f.push(Family::one(
            "tpslab_capacity_sustained_pps",
            &format!("The highest rate that passed every step of the capacity search, {per}."),
            Kind::Gauge,
            vec![],
            Value::Float(v),
        ));
    }
    if let Some(v) = hi {
        f.push(Family::one(
            "tpslab_capacity_failed_pps",
            &format!("The lowest rate that failed a step of the capacity search, {per}."),
            Kind::Gauge,
            vec![],
            Value::Float(v),
        ));
    }
    let calls = [
        StepStatus::Pass,
        StepStatus::Fail,
        StepStatus::Invalid,
        StepStatus::Interrupted,
    ]
    .iter()
    .map(|st| {
        (
            labels(&[("call", &st.word().to_lowercase())]),
            Value::Int(c.steps.iter().filter(|s| s.status == *st).count() as u64),
        )
    })
    .collect();
    f.push(Family {
        name: "tpslab_capacity_steps".into(),
        help: "Steps of the capacity search, by call.".into(),
        kind: Kind::Counter,
        series: calls,
    });
    if let Some(r) = &c.retry {
        let (lo, hi) = r.search.conclusion.bounds();
        for (name, what, v) in [
            ("tpslab_capacity_with_fix_sustained_pps", "The highest rate that passed every step of the search with the fix (--fix-and-retry)", lo),
            ("tpslab_capacity_with_fix_failed_pps", "The lowest rate that failed a step of the search with the fix (--fix-and-retry)", hi),
        ] {
            if let Some(v) = v {
                f.push(Family::one(name, &format!("{what}, {per}."), Kind::Gauge, vec![], Value::Float(v)));
            }
        }
    }
    f
}

fn of_sweep(s: &tpslab_record::SweepReport) -> Vec<Family> {
    let mut fam = Family {
        name: "tpslab_sweep_figure_mean".into(),
        help: "Mean over its repeats of each figure of each cell of the sweep (in the figure's own unit: loss_pct in percent, rates per second).".into(),
        kind: Kind::Gauge,
        series: vec![],
    };
    for c in &s.result.cells {
        let cell = c.cell.label();
        for (name, e) in &c.figures {
            if e.mean.is_finite() {
                fam.series.push((
                    labels(&[("cell", &cell), ("figure", name)]),
                    Value::Float(e.mean),
                ));
            }
        }
    }
    vec![fam]
}
