//! Prometheus metrics: a record's figures (and a run's live ones) as metric families,
//! encoded by `prometheus-client` in the OpenMetrics text format (what `--metrics-listen`
//! serves), or in Prometheus' text format 0.0.4 for node_exporter's textfile collector
//! (what `--metrics-file` writes).
//!
//! Names: `tpslab_` prefix, base units (seconds, bytes), counters end in `_total` on the
//! wire; labels name the layer, path, port and CPU. Series that are the same counter as
//! node_exporter's say so in their help (e.g. `tpslab_udp_rcvbuf_errors_total` is
//! `node_netstat_Udp_RcvbufErrors` + `Udp6`, counted from the start of the run).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex};
use tpslab_analysis::record::{Body, Record, RunRecord};

pub mod live;
pub use live::{exporter_info, sweep_progress, LiveReading, LiveState};

/// Label pairs of one series, e.g. `[("path", "request"), ("layer", "socket_drops")]`.
pub type Labels = Vec<(String, String)>;

/// What kind of metric a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (from the start of the run or the process): `_total` on the wire.
    Counter,
    /// A value now (or the run's result).
    Gauge,
    /// Cumulative buckets, sum and count.
    Histogram,
}

/// One series' value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A count.
    Int(u64),
    /// A measurement (NaN is encoded as such; callers leave out what was not measured).
    Float(f64),
    /// Buckets as (upper bound, count in that bucket, not cumulative), the last bound
    /// +Inf; the sum of the observations and their count.
    Histogram {
        buckets: Vec<(f64, u64)>,
        sum: f64,
        count: u64,
    },
}

/// A metric family: its name (without `_total`), help, kind and series.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub series: Vec<(Labels, Value)>,
}

impl Family {
    /// A family with one series.
    pub fn one(name: &str, help: &str, kind: Kind, labels: Labels, v: Value) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind,
            series: vec![(labels, v)],
        }
    }
}

/// Label pairs from string slices.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Families shared with a scrape: replaced as a run goes, encoded at each scrape.
#[derive(Debug, Clone, Default)]
pub struct Shared(pub Arc<Mutex<Vec<Family>>>);

impl Shared {
    /// Replaces what the next scrape sees.
    pub fn set(&self, f: Vec<Family>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = f;
    }
}

impl Collector for Shared {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let fams = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        encode_families(&fams, &mut enc)
    }
}

fn encode_families(fams: &[Family], enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    for f in fams {
        let ty = match f.kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Histogram => MetricType::Histogram,
        };
        let mut m = enc.encode_descriptor(&f.name, &f.help, None, ty)?;
        match f.series.as_slice() {
            // One series without labels: `name value`, not `name{} value`.
            [(l, v)] if l.is_empty() => put(m, f.kind, v)?,
            series => {
                for (labels, v) in series {
                    put(m.encode_family(labels)?, f.kind, v)?;
                }
            }
        }
    }
    Ok(())
}

fn put(
    s: prometheus_client::encoding::MetricEncoder,
    kind: Kind,
    v: &Value,
) -> Result<(), std::fmt::Error> {
    match (kind, v) {
        (Kind::Counter, Value::Int(n)) => ConstCounter::new(*n).encode(s),
        (Kind::Counter, Value::Float(x)) => ConstCounter::new(x.max(0.0)).encode(s),
        (_, Value::Int(n)) => ConstGauge::new(*n as i64).encode(s),
        (_, Value::Float(x)) => ConstGauge::new(*x).encode(s),
        (
            _,
            Value::Histogram {
                buckets,
                sum,
                count,
            },
        ) => {
            let mut s = s;
            s.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                *sum, *count, buckets, None,
            )
        }
    }
}

/// A registry holding `shared`, every family under the `tpslab_` names it carries.
pub fn registry(shared: Shared) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(shared));
    r
}

/// The families in the OpenMetrics text format (ends with `# EOF`).
pub fn openmetrics(fams: &[Family]) -> String {
    let shared = Shared::default();
    shared.set(fams.to_vec());
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry(shared))
        .expect("encoding into a String cannot fail");
    out
}

/// OpenMetrics text turned into Prometheus' text format 0.0.4, which node_exporter's
/// textfile collector parses: no `# EOF` or `# UNIT` lines, and a counter family's
/// `# HELP`/`# TYPE` name its samples' `_total` name.
pub fn prometheus_text(openmetrics: &str) -> String {
    let lines: Vec<&str> = openmetrics.lines().collect();
    let mut out = String::new();
    let counter = |name: &str| {
        lines
            .iter()
            .any(|l| *l == format!("# TYPE {name} counter").as_str())
    };
    for l in &lines {
        if *l == "# EOF" || l.starts_with("# UNIT ") {
            continue;
        }
        let rest = l
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| l.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match rest {
            Some((tag, r)) => {
                let (name, tail) = r.split_once(' ').unwrap_or((r, ""));
                if counter(name) && !name.ends_with("_total") {
                    out.push_str(&format!("{tag}{name}_total {tail}"));
                } else {
                    out.push_str(l);
                }
            }
            None => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

/// Upper bounds of the latency histograms' buckets, ns (10 us to 10 s, 1-2.5-5 steps).
pub const LATENCY_BOUNDS_NS: [u64; 19] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// `h` (ns values) as a Prometheus histogram in seconds over [`LATENCY_BOUNDS_NS`].
pub fn latency_value(h: &hdrhistogram::Histogram<u64>) -> Value {
    let counts = tpslab_analysis::stats::bucket_counts(h, &LATENCY_BOUNDS_NS);
    let buckets = LATENCY_BOUNDS_NS
        .iter()
        .map(|&b| b as f64 / 1e9)
        .chain([f64::INFINITY])
        .zip(counts)
        .collect();
    Value::Histogram {
        buckets,
        sum: h.mean() * h.len() as f64 / 1e9,
        count: h.len(),
    }
}

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
    let counter = |name: &str, help: &str, n: u64| {
        Family::one(name, help, Kind::Counter, vec![], Value::Int(n))
    };
    if let Some(g) = &r.generator {
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
        let mut q = Family {
            name: "tpslab_latency_quantile_seconds".into(),
            help: "Latency at a quantile, seconds, from the intended send time (no coordinated omission) or the actual one.".into(),
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
            for (qs, ns) in [
                ("0.5", l.p50_ns),
                ("0.99", l.p99_ns),
                ("0.999", l.p999_ns),
                ("1", l.max_ns),
            ] {
                q.series.push((
                    labels(&[("from", from), ("quantile", qs)]),
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
                if let Ok(h) = tpslab_analysis::stats::decode_histogram(text) {
                    fam.series
                        .push((labels(&[("from", from)]), latency_value(&h)));
                }
            }
            f.push(fam);
        }
    }
    if let Some(o) = &r.observer {
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
    }
    if let Some(l) = &r.ledger {
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
        f.push(fam);
    }
    f
}

fn of_ramp(r: &tpslab_analysis::record::RampReport) -> Vec<Family> {
    ramp_steps(&r.run.steps, r.analysis.knee_users)
}

/// A ramp's steps so far (each step's TPS and p99 labelled by its users) and its knee.
pub fn ramp_steps(
    steps: &[tpslab_analysis::ramp::StepResult],
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
fn of_capacity(c: &tpslab_analysis::capacity::CapacityRecord) -> Vec<Family> {
    use tpslab_analysis::capacity::StepStatus;
    let (lo, hi) = c.conclusion.bounds();
    let per = match c.plan.search.unit {
        tpslab_analysis::capacity::RateUnit::Pps => "datagrams per second",
        tpslab_analysis::capacity::RateUnit::RequestsPerSecond => "HTTP requests per second",
    };
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

/// A `load http` run's families: requests by outcome, the rates, latency at quantiles
/// (corrected and not), bytes, late sends; `interrupted`: the achieved rate is over the
/// time until the last request went.
fn of_load_http(l: &tpslab_record::load_http::LoadHttpRecord, interrupted: bool) -> Vec<Family> {
    let r = &l.result;
    let counter = |name: &str, help: &str, lab: &[(&str, &str)], n: u64| {
        Family::one(name, help, Kind::Counter, labels(lab), Value::Int(n))
    };
    let series = |name: &str, help: &str, kind: Kind, s: Vec<(Labels, Value)>| Family {
        name: name.into(),
        help: help.into(),
        kind,
        series: s,
    };
    let s = &r.status;
    let e = &r.errors;
    let mut q = vec![];
    for (from, lat) in [("intended", &r.corrected), ("actual", &r.uncorrected)] {
        if lat.count == 0 {
            continue;
        }
        for (qs, ns) in [
            ("0.5", lat.p50_ns),
            ("0.9", lat.p90_ns),
            ("0.99", lat.p99_ns),
            ("0.999", lat.p999_ns),
            ("1", lat.max_ns),
        ] {
            q.push((
                labels(&[("from", from), ("quantile", qs)]),
                Value::Float(ns as f64 / 1e9),
            ));
        }
    }
    let mut f = vec![
        counter(
            "tpslab_http_requests_sent",
            "HTTP requests written whole.",
            &[],
            r.sent,
        ),
        series(
            "tpslab_http_replies",
            "Final HTTP replies by status class.",
            Kind::Counter,
            [
                ("2xx", s.s2xx),
                ("3xx", s.s3xx),
                ("4xx", s.s4xx),
                ("5xx", s.s5xx),
                ("other", s.other),
            ]
            .iter()
            .map(|(c, n)| (labels(&[("class", c)]), Value::Int(*n)))
            .collect(),
        ),
        series(
            "tpslab_http_errors",
            "HTTP requests (or connects) that failed, by kind.",
            Kind::Counter,
            [
                ("refused", e.refused),
                ("reset", e.reset),
                ("timeout", e.timeout),
                ("closed", e.closed),
                ("protocol", e.protocol),
                ("other", e.other),
            ]
            .iter()
            .map(|(k, n)| (labels(&[("kind", k)]), Value::Int(*n)))
            .collect(),
        ),
        counter(
            "tpslab_http_unanswered",
            "Requests still waiting for their reply after the grace at the end.",
            &[],
            r.unanswered,
        ),
        series(
            "tpslab_http_rate_per_second",
            "Requests a second: the plan's (intended) and those sent over its duration (achieved).",
            Kind::Gauge,
            vec![
                (labels(&[("of", "intended")]), Value::Float(l.plan.rate)),
                (
                    labels(&[("of", "achieved")]),
                    Value::Float(l.sent_rate(interrupted)),
                ),
            ],
        ),
        series(
            "tpslab_http_bytes",
            "Bytes written (requests) and read (replies).",
            Kind::Counter,
            vec![
                (labels(&[("direction", "out")]), Value::Int(r.bytes_out)),
                (labels(&[("direction", "in")]), Value::Int(r.bytes_in)),
            ],
        ),
        counter(
            "tpslab_http_connections_opened",
            "Connections opened (first ones and reconnects).",
            &[],
            r.connections,
        ),
        counter(
            "tpslab_http_late_requests",
            "Requests sent over 1 ms after their intended time, for any reason.",
            &[],
            r.late,
        ),
        counter(
            "tpslab_http_generator_behind_requests",
            "Requests the generator itself sent over 1 ms late (their connection idle and ready).",
            &[],
            r.behind,
        ),
    ];
    // Kinds counted apart since TLS: only when they occurred (a run without them keeps
    // its families).
    if r.errors.tls > 0 {
        f.push(counter(
            "tpslab_http_tls_errors",
            "HTTP requests that failed in TLS (a record that did not decrypt, an alert).",
            &[],
            r.errors.tls,
        ));
    }
    if !r.connect_errors.is_none() {
        f.push(series(
            "tpslab_http_connect_errors",
            "Connects (with their TLS handshake) that failed, by kind; no request went on them.",
            Kind::Counter,
            r.connect_errors
                .list()
                .iter()
                .map(|(k, n)| (labels(&[("kind", k)]), Value::Int(*n)))
                .collect(),
        ));
    }
    if !q.is_empty() {
        f.push(series(
            "tpslab_latency_quantile_seconds",
            "Latency at a quantile, seconds, from the intended send time (no coordinated omission) or the actual one.",
            Kind::Gauge,
            q,
        ));
    }
    f
}

fn of_sweep(s: &tpslab_analysis::record::SweepReport) -> Vec<Family> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_get_total_in_both_formats_and_histograms_cumulate() {
        let fams = vec![
            Family::one(
                "tpslab_x",
                "X.",
                Kind::Counter,
                labels(&[("cpu", "1")]),
                Value::Int(5),
            ),
            Family::one(
                "tpslab_y_bytes",
                "Y.",
                Kind::Gauge,
                vec![],
                Value::Float(2.5),
            ),
            Family::one(
                "tpslab_latency_seconds",
                "L.",
                Kind::Histogram,
                vec![],
                Value::Histogram {
                    buckets: vec![(0.001, 2), (0.01, 3), (f64::INFINITY, 1)],
                    sum: 0.05,
                    count: 6,
                },
            ),
        ];
        let om = openmetrics(&fams);
        assert!(om.contains("# TYPE tpslab_x counter\n"), "{om}");
        assert!(om.contains("tpslab_x_total{cpu=\"1\"} 5\n"), "{om}");
        assert!(om.contains("tpslab_y_bytes 2.5\n"), "{om}");
        assert!(
            om.contains("tpslab_latency_seconds_bucket{le=\"0.01\"} 5\n"),
            "{om}"
        );
        assert!(
            om.contains("tpslab_latency_seconds_bucket{le=\"+Inf\"} 6\n"),
            "{om}"
        );
        assert!(om.ends_with("# EOF\n"), "{om}");
        let text = prometheus_text(&om);
        assert!(text.contains("# TYPE tpslab_x_total counter\n"), "{text}");
        assert!(text.contains("# HELP tpslab_x_total X.\n"), "{text}");
        assert!(text.contains("# TYPE tpslab_y_bytes gauge\n"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn a_histogram_keeps_every_value() {
        let mut h = tpslab_analysis::stats::new_ns_histogram();
        for v in [5_000u64, 20_000, 20_000, 3_000_000, 20_000_000_000] {
            h.record(v).unwrap();
        }
        let Value::Histogram { buckets, count, .. } = latency_value(&h) else {
            panic!("a histogram")
        };
        assert_eq!(count, 5);
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 5);
        assert_eq!(buckets[0], (10e-6, 1));
        assert_eq!(buckets[1], (25e-6, 2));
        assert_eq!(buckets.last().unwrap().1, 1);
    }
}
