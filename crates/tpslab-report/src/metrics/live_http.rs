//! The families `load http --metrics-listen` serves while the run goes: the record's
//! counts under the record's names (`tpslab_http_requests_sent_total`, replies by class,
//! errors by kind), accumulated from the open loop's 250 ms intervals, the rates and what
//! is in flight over the last interval, and the latency histogram every command's live
//! exporter serves; fixed in size however long the run lasts.

use super::live::LATENCY_HELP;
use super::load_http::{counts, kinds_apart};
use super::{labels, latency_value, Family, Kind, Value};
use tpslab_record::http_counts::{ErrorKinds, StatusClasses};

/// One interval of an open (or closed) loop of HTTP requests as the exporter reads it
/// (the engine's `HttpLiveSample`): the interval's counts, the rates over it, and what
/// stood at its end.
#[derive(Debug, Clone, Copy)]
pub struct HttpLiveReading<'a> {
    /// Requests the plan intended per second over the interval (0 in a closed loop).
    pub intended_rps: f64,
    /// Requests written per second over the interval.
    pub sent_rps: f64,
    /// Final replies read per second over the interval.
    pub answered_rps: f64,
    /// Requests written whole in the interval.
    pub sent: u64,
    /// The interval's final replies by status class.
    pub status: &'a StatusClasses,
    /// The interval's failed requests by kind.
    pub errors: &'a ErrorKinds,
    /// The interval's failed connects by kind.
    pub connect_errors: &'a ErrorKinds,
    /// Requests written and not yet answered or failed, at the interval's end.
    pub in_flight: u64,
    /// TCP connections established to the target at the interval's end (sock_diag);
    /// None where they cannot be counted.
    pub connections: Option<u64>,
    /// The latencies of the replies read in the interval, ns from each request's intended
    /// send time (a closed loop's: from its send).
    pub latency_histogram: Option<&'a hdrhistogram::Histogram<u64>>,
}

/// What the exporter accumulates between intervals: counts and one latency histogram,
/// bounded however long the run lasts.
#[derive(Debug)]
pub struct HttpLiveState {
    /// `from`'s label of the latency: `intended` (an open loop), `actual` (a closed one).
    from: &'static str,
    intervals: u64,
    sent: u64,
    status: StatusClasses,
    errors: ErrorKinds,
    connect_errors: ErrorKinds,
    /// Every interval's latencies added up, ns.
    latency: Option<hdrhistogram::Histogram<u64>>,
}

impl HttpLiveState {
    /// The state of a run; `closed_loop` (`--rate max`): its latency is from each
    /// request's actual send (service time), labelled `from="actual"`.
    pub fn new(closed_loop: bool) -> HttpLiveState {
        HttpLiveState {
            from: if closed_loop { "actual" } else { "intended" },
            intervals: 0,
            sent: 0,
            status: StatusClasses::default(),
            errors: ErrorKinds::default(),
            connect_errors: ErrorKinds::default(),
            latency: None,
        }
    }

    /// Takes in one interval; returns the families scrapes see now.
    pub fn update(&mut self, r: &HttpLiveReading<'_>) -> Vec<Family> {
        self.intervals += 1;
        self.sent += r.sent;
        let (s, t) = (&mut self.status, r.status);
        s.s2xx += t.s2xx;
        s.s3xx += t.s3xx;
        s.s4xx += t.s4xx;
        s.s5xx += t.s5xx;
        s.other += t.other;
        self.errors.add(r.errors);
        self.connect_errors.add(r.connect_errors);
        if let Some(h) = r.latency_histogram {
            let acc = self
                .latency
                .get_or_insert_with(tpslab_analysis::stats::new_ns_histogram);
            let _ = acc.add(h);
        }
        self.families(r)
    }

    fn families(&self, r: &HttpLiveReading<'_>) -> Vec<Family> {
        let gauge =
            |name: &str, help: &str, v: Value| Family::one(name, help, Kind::Gauge, vec![], v);
        let mut f = vec![Family::one(
            "tpslab_http_intervals",
            "Intervals of 250 ms of the open loop's stream read since the start.",
            Kind::Counter,
            vec![],
            Value::Int(self.intervals),
        )];
        f.extend(counts(self.sent, &self.status, &self.errors));
        f.extend(kinds_apart(&self.errors, &self.connect_errors));
        f.push(Family {
            name: "tpslab_http_interval_rate_per_second".into(),
            help: "Requests a second over the last 250 ms interval: the plan's (intended; 0 in a closed loop or after the plan's end), written (achieved) and answered with a final reply (answered).".into(),
            kind: Kind::Gauge,
            series: [
                ("intended", r.intended_rps),
                ("achieved", r.sent_rps),
                ("answered", r.answered_rps),
            ]
            .iter()
            .map(|(of, v)| (labels(&[("of", of)]), Value::Float(*v)))
            .collect(),
        });
        f.push(gauge(
            "tpslab_http_in_flight_requests",
            "Requests written and not yet answered or failed, at the last interval's end.",
            Value::Int(r.in_flight),
        ));
        if let Some(n) = r.connections {
            f.push(gauge(
                "tpslab_http_connections_established",
                "TCP connections established to the target at the last interval's end (this namespace's sockets whose peer is the target, sock_diag; node_exporter has no such series).",
                Value::Int(n),
            ));
        }
        if let Some(h) = &self.latency {
            f.push(Family::one(
                "tpslab_latency_seconds",
                LATENCY_HELP,
                Kind::Histogram,
                labels(&[("from", self.from)]),
                latency_value(h),
            ));
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading<'a>(
        sent: u64,
        status: &'a StatusClasses,
        errors: &'a ErrorKinds,
        connect: &'a ErrorKinds,
        h: Option<&'a hdrhistogram::Histogram<u64>>,
    ) -> HttpLiveReading<'a> {
        HttpLiveReading {
            intended_rps: 400.0,
            sent_rps: sent as f64 / 0.25,
            answered_rps: status.total() as f64 / 0.25,
            sent,
            status,
            errors,
            connect_errors: connect,
            in_flight: 3,
            connections: Some(4),
            latency_histogram: h,
        }
    }

    #[test]
    fn counts_accumulate_across_intervals_under_the_records_names() {
        let mut h1 = tpslab_analysis::stats::new_ns_histogram();
        h1.record(20_000).unwrap();
        h1.record(30_000).unwrap();
        let mut h2 = tpslab_analysis::stats::new_ns_histogram();
        h2.record(40_000).unwrap();
        let s1 = StatusClasses {
            s2xx: 90,
            s5xx: 2,
            ..Default::default()
        };
        let s2 = StatusClasses {
            s2xx: 100,
            ..Default::default()
        };
        let e1 = ErrorKinds {
            reset: 1,
            ..Default::default()
        };
        let c2 = ErrorKinds {
            refused: 2,
            ..Default::default()
        };
        let none = ErrorKinds::default();
        let mut st = HttpLiveState::new(false);
        st.update(&reading(95, &s1, &e1, &none, Some(&h1)));
        // An interval without replies keeps the latency so far.
        let f = st.update(&reading(101, &s2, &none, &c2, None));
        let om = super::super::openmetrics(&f);
        for line in [
            "tpslab_http_intervals_total 2\n",
            "tpslab_http_requests_sent_total 196\n",
            "tpslab_http_replies_total{class=\"2xx\"} 190\n",
            "tpslab_http_replies_total{class=\"5xx\"} 2\n",
            "tpslab_http_errors_total{kind=\"reset\"} 1\n",
            "tpslab_http_connect_errors_total{kind=\"refused\"} 2\n",
            "tpslab_http_interval_rate_per_second{of=\"achieved\"} 404.0\n",
            "tpslab_http_interval_rate_per_second{of=\"answered\"} 400.0\n",
            "tpslab_http_in_flight_requests 3\n",
            "tpslab_http_connections_established 4\n",
            "tpslab_latency_seconds_count{from=\"intended\"} 2\n",
        ] {
            assert!(om.contains(line), "{line}: {om}");
        }
        // 20 us in (10, 25 us]; 30 us above; the second interval's 40 us not counted twice.
        assert!(
            om.contains("tpslab_latency_seconds_bucket{le=\"0.000025\",from=\"intended\"} 1\n"),
            "{om}"
        );
        let f = st.update(&reading(
            0,
            &StatusClasses::default(),
            &none,
            &none,
            Some(&h2),
        ));
        let om = super::super::openmetrics(&f);
        assert!(
            om.contains("tpslab_latency_seconds_count{from=\"intended\"} 3\n"),
            "{om}"
        );
        // A closed loop's latency is from the send.
        let mut closed = HttpLiveState::new(true);
        let om =
            super::super::openmetrics(&closed.update(&reading(1, &s2, &none, &none, Some(&h1))));
        assert!(
            om.contains("tpslab_latency_seconds_count{from=\"actual\"} 2\n"),
            "{om}"
        );
        assert!(!om.contains("tpslab_http_tls_errors"), "{om}");
    }
}
