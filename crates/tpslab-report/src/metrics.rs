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

pub mod drops;
pub mod live;
pub mod live_http;
mod load_http;
mod record;
pub use live::{exporter_info, sweep_progress, LiveReading, LiveState};
pub use live_http::{HttpLiveReading, HttpLiveState};
pub use record::{of_record, of_run, ramp_steps};

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

/// The latency percentiles' family (`--metrics-file` of a UDP run and of `load http`): its
/// name and its one help (node_exporter refuses a family two files give two helps), a gauge
/// per percentile labelled `from` and `percentile` (`quantile` is the label Prometheus
/// reserves for summaries: promtool refuses it on a gauge).
pub const PERCENTILE: (&str, &str) = (
    "tpslab_latency_percentile_seconds",
    "Latency at a percentile of the run's replies (100: the largest), seconds, from the intended send time (no coordinated omission) or the actual one.",
);

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

/// What `--metrics-file FILE` writes (and `report --format metrics`): the record's
/// families ([`of_record`]) in the Prometheus text format 0.0.4, every series labelled
/// `file="NAME"` when `file` names the file (its name without the folder: what tells two
/// producers apart in node_exporter's textfile folder, whose files have distinct names).
pub fn record_text(rec: &tpslab_record::Record, file: Option<&str>) -> String {
    let mut fams = of_record(rec);
    if let Some(name) = file {
        for f in &mut fams {
            for (l, _) in &mut f.series {
                l.push(("file".into(), name.into()));
            }
        }
    }
    prometheus_text(&openmetrics(&fams))
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

/// The two text formats a scrape can ask for (`Accept`), as Prometheus' client libraries
/// offer them: the Prometheus text format 0.0.4 (what `promtool check metrics` and
/// node_exporter's textfile collector read) and OpenMetrics 1.0.0 (what Prometheus asks
/// for first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// `text/plain; version=0.0.4`: a counter's `# HELP`/`# TYPE` name its `_total`
    /// samples; no `# EOF`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`: a counter's family name without
    /// `_total`, ends with `# EOF`.
    OpenMetrics,
}

impl Exposition {
    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for, as client_golang's
    /// `expfmt.NegotiateIncludingOpenMetrics` and Python's `choose_encoder` choose: the
    /// media ranges by their `q` (highest first, `q=0` refused; in their order on a tie),
    /// the first that is `application/openmetrics-text` (version 1.0.0, 0.0.1 or none) or
    /// `text/plain` (version 0.0.4 or none); anything else, no header, or `*/*`: the
    /// Prometheus text format.
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        let Some(accept) = accept else {
            return Exposition::Prometheus;
        };
        let mut ranges: Vec<(f64, Option<Exposition>)> = accept
            .split(',')
            .map(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media = parts.next().unwrap_or("").to_ascii_lowercase();
                let (mut q, mut version) = (1.0, None);
                for p in parts {
                    let Some((k, v)) = p.split_once('=') else {
                        continue;
                    };
                    let v = v.trim().trim_matches('"');
                    match k.trim().to_ascii_lowercase().as_str() {
                        "q" => q = v.parse::<f64>().unwrap_or(0.0),
                        "version" => version = Some(v.to_string()),
                        _ => {}
                    }
                }
                let v = version.as_deref();
                let fits = match media.as_str() {
                    "application/openmetrics-text"
                        if matches!(v, None | Some("1.0.0") | Some("0.0.1")) =>
                    {
                        Some(Exposition::OpenMetrics)
                    }
                    "text/plain" if matches!(v, None | Some("0.0.4")) => {
                        Some(Exposition::Prometheus)
                    }
                    _ => None,
                };
                (q, fits)
            })
            .filter(|(q, _)| *q > 0.0)
            .collect();
        // Stable: equal q keep the header's order.
        ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
        ranges
            .into_iter()
            .find_map(|(_, fits)| fits)
            .unwrap_or(Exposition::Prometheus)
    }

    /// `openmetrics` (the registry's encoding) in this format.
    pub fn from_openmetrics(self, openmetrics: String) -> String {
        match self {
            Exposition::OpenMetrics => openmetrics,
            Exposition::Prometheus => prometheus_text(&openmetrics),
        }
    }
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
    fn accept_headers_choose_the_format_as_client_libraries_do() {
        use Exposition::*;
        let n = |a: &str| Exposition::negotiate(Some(a));
        assert_eq!(Exposition::negotiate(None), Prometheus);
        assert_eq!(n("*/*"), Prometheus);
        assert_eq!(n("application/openmetrics-text"), OpenMetrics);
        assert_eq!(
            n("application/openmetrics-text; version=0.0.1"),
            OpenMetrics
        );
        assert_eq!(n("text/plain; version=0.0.4"), Prometheus);
        // Higher q wins whatever the order; q=0 refuses; an unknown version is skipped.
        assert_eq!(
            n("text/plain;version=0.0.4;q=0.5,application/openmetrics-text;version=1.0.0"),
            OpenMetrics
        );
        assert_eq!(
            n("application/openmetrics-text;q=0.3, text/plain;q=0.9"),
            Prometheus
        );
        assert_eq!(n("application/openmetrics-text;q=0"), Prometheus);
        assert_eq!(n("application/openmetrics-text;version=2.0.0"), Prometheus);
        assert_eq!(
            n("Application/OpenMetrics-Text;Version=\"1.0.0\""),
            OpenMetrics
        );
        // Protobuf (which we do not serve) falls through to what is offered next.
        assert_eq!(
            n("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;q=0.8"),
            OpenMetrics
        );
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
