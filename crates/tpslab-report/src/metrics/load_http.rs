//! `load http`'s metric families: requests by outcome, the rates, latency at percentiles,
//! bytes, connections and late sends.

use super::{labels, Family, Kind, Labels, Value};

/// A `load http` run's families: requests by outcome, the rates, latency at percentiles
/// (corrected and not), bytes, late sends; `interrupted`: the achieved rate is over the
/// time until the last request went.
pub(super) fn of_load_http(
    l: &tpslab_record::load_http::LoadHttpRecord,
    interrupted: bool,
) -> Vec<Family> {
    let r = &l.result;
    let s = &r.status;
    let e = &r.errors;
    let q = latency(r);
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
    f.extend(since_tls(r));
    if !q.is_empty() {
        f.push(series(
            super::PERCENTILE.0,
            super::PERCENTILE.1,
            Kind::Gauge,
            q,
        ));
    }
    f
}

/// A family of one counter `name` with labels `lab` and value `n`.
fn counter(name: &str, help: &str, lab: &[(&str, &str)], n: u64) -> Family {
    Family::one(name, help, Kind::Counter, labels(lab), Value::Int(n))
}

/// A family of `kind` with series `s`.
fn series(name: &str, help: &str, kind: Kind, s: Vec<(Labels, Value)>) -> Family {
    Family {
        name: name.into(),
        help: help.into(),
        kind,
        series: s,
    }
}

/// Latency at the 50th, 90th, 99th, 99.9th percentiles and the maximum, seconds, from the
/// intended send (corrected) and the actual one, each when it has replies.
fn latency(r: &tpslab_record::load_http::LoadHttpResult) -> Vec<(Labels, Value)> {
    let mut q = vec![];
    for (from, lat) in [("intended", &r.corrected), ("actual", &r.uncorrected)] {
        if lat.count == 0 {
            continue;
        }
        for (pct, ns) in [
            ("50", lat.p50_ns),
            ("90", lat.p90_ns),
            ("99", lat.p99_ns),
            ("99.9", lat.p999_ns),
            ("100", lat.max_ns),
        ] {
            q.push((
                labels(&[("from", from), ("percentile", pct)]),
                Value::Float(ns as f64 / 1e9),
            ));
        }
    }
    q
}

/// The families of failures counted apart since TLS: TLS errors, unsolicited responses,
/// failed connects.
fn since_tls(r: &tpslab_record::load_http::LoadHttpResult) -> Vec<Family> {
    let mut out = vec![];
    // Kinds counted apart since TLS: only when they occurred (a run without them keeps
    // its families).
    if r.errors.tls > 0 {
        out.push(counter(
            "tpslab_http_tls_errors",
            "HTTP requests that failed in TLS (a record that did not decrypt, an alert).",
            &[],
            r.errors.tls,
        ));
    }
    if r.errors.unsolicited > 0 {
        out.push(counter(
            "tpslab_http_unsolicited_responses",
            "HTTP/1.1 responses no request asked for (each closed its connection).",
            &[],
            r.errors.unsolicited,
        ));
    }
    if !r.connect_errors.is_none() {
        out.push(series(
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
    out
}
