//! `load http`'s metric families: requests by outcome, the rates, latency at percentiles,
//! bytes, connections and late sends.

use super::{labels, Family, Kind, Labels, Value};
use tpslab_record::http_counts::{ErrorKinds, StatusClasses};

/// A `load http` run's families: requests by outcome, the rates, latency at percentiles
/// (corrected and not), bytes, late sends; `interrupted`: the achieved rate is over the
/// time until the last request went.
pub(super) fn of_load_http(
    l: &tpslab_record::load_http::LoadHttpRecord,
    interrupted: bool,
) -> Vec<Family> {
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
    let [sent, replies, errors] = counts(r.sent, &r.status, &r.errors);
    let mut f = vec![
        sent,
        replies,
        errors,
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
    f.extend(kinds_apart(&r.errors, &r.connect_errors));
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

/// The requests written whole, the final replies by status class and the failed
/// requests by kind (the kinds of [`kinds_apart`] aside): a `load http` record's counts
/// over the run, or `--metrics-listen`'s since the start.
pub(super) fn counts(sent: u64, s: &StatusClasses, e: &ErrorKinds) -> [Family; 3] {
    let by = |name: &str, help: &str, label: &str, s: &[(&str, u64)]| Family {
        name: name.into(),
        help: help.into(),
        kind: Kind::Counter,
        series: s
            .iter()
            .map(|(c, n)| (labels(&[(label, c)]), Value::Int(*n)))
            .collect(),
    };
    [
        Family::one(
            "tpslab_http_requests_sent",
            "HTTP requests written whole.",
            Kind::Counter,
            vec![],
            Value::Int(sent),
        ),
        by(
            "tpslab_http_replies",
            "Final HTTP replies by status class.",
            "class",
            &[
                ("2xx", s.s2xx),
                ("3xx", s.s3xx),
                ("4xx", s.s4xx),
                ("5xx", s.s5xx),
                ("other", s.other),
            ],
        ),
        by(
            "tpslab_http_errors",
            "HTTP requests (or connects) that failed, by kind.",
            "kind",
            &[
                ("refused", e.refused),
                ("reset", e.reset),
                ("timeout", e.timeout),
                ("closed", e.closed),
                ("protocol", e.protocol),
                ("other", e.other),
            ],
        ),
    ]
}

/// The failures counted apart since TLS, each family only once one occurred (a run
/// without them keeps its families): TLS errors, unsolicited responses, failed connects
/// by kind.
pub(super) fn kinds_apart(e: &ErrorKinds, connect: &ErrorKinds) -> Vec<Family> {
    let counter = |name: &str, help: &str, n: u64| {
        Family::one(name, help, Kind::Counter, vec![], Value::Int(n))
    };
    let mut f = vec![];
    if e.tls > 0 {
        f.push(counter(
            "tpslab_http_tls_errors",
            "HTTP requests that failed in TLS (a record that did not decrypt, an alert).",
            e.tls,
        ));
    }
    if e.unsolicited > 0 {
        f.push(counter(
            "tpslab_http_unsolicited_responses",
            "HTTP/1.1 responses no request asked for (each closed its connection).",
            e.unsolicited,
        ));
    }
    if !connect.is_none() {
        f.push(Family {
            name: "tpslab_http_connect_errors".into(),
            help:
                "Connects (with their TLS handshake) that failed, by kind; no request went on them."
                    .into(),
            kind: Kind::Counter,
            series: connect
                .list()
                .iter()
                .map(|(k, n)| (labels(&[("kind", k)]), Value::Int(*n)))
                .collect(),
        });
    }
    f
}
