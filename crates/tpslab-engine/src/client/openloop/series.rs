//! The record's time series of an open loop (`load http`'s `result.series`): the
//! per-interval stream's samples ([`super::live`], every [`INTERVAL`], read on the
//! supervising thread from the loop threads' own shards) merged `per_point` at a time, so
//! that a run of any duration keeps at most [`HttpSeries::MAX_POINTS`] points.

use hdrhistogram::Histogram;
use tpslab_analysis::stats::{bucket_counts, new_ns_histogram};
use tpslab_record::http_counts::{ErrorKinds, StatusClasses};
use tpslab_record::http_series::{HttpPoint, HttpSeries, LatencyBin, PointLatency};

use super::live::INTERVAL;

/// Stream intervals merged into one point for a run of `span_ns` (its duration and the
/// grace after it): the fewest that keep it within [`HttpSeries::MAX_POINTS`] (the last,
/// short interval included).
pub(super) fn per_point(span_ns: u64) -> u32 {
    let samples = span_ns.div_ceil(INTERVAL.as_nanos() as u64) + 2;
    samples.div_ceil(HttpSeries::MAX_POINTS as u64 - 1).max(1) as u32
}

/// The points so far and the one being filled.
pub(super) struct SeriesAcc {
    per_point: u32,
    points: Vec<HttpPoint>,
    /// Samples in the point being filled.
    n: u32,
    /// Its length, s, and the requests intended, written and answered in it.
    dt_s: f64,
    intended: f64,
    sent: u64,
    answered: u64,
    hist: Histogram<u64>,
    status: StatusClasses,
    errors: ErrorKinds,
    connect_errors: ErrorKinds,
    /// Its end, s after the schedule's start.
    t_s: f64,
}

/// One stream interval's counts, as [`SeriesAcc::add`] takes them.
pub(super) struct Sample<'a> {
    /// End, s after the schedule's start, and length, s.
    pub(super) t_s: f64,
    pub(super) dt_s: f64,
    /// Requests intended (the plan's rate over the part of the interval it ran), written,
    /// and answered (final replies) in the interval.
    pub(super) intended: f64,
    pub(super) sent: u64,
    pub(super) answered: u64,
    /// The latencies (ns) of the interval's replies.
    pub(super) hist: &'a Histogram<u64>,
    pub(super) status: StatusClasses,
    pub(super) errors: ErrorKinds,
    pub(super) connect_errors: ErrorKinds,
}

impl SeriesAcc {
    /// No points yet, `per_point` stream intervals to a point.
    pub(super) fn new(per_point: u32) -> SeriesAcc {
        SeriesAcc {
            per_point: per_point.max(1),
            points: Vec::new(),
            n: 0,
            dt_s: 0.0,
            intended: 0.0,
            sent: 0,
            answered: 0,
            hist: new_ns_histogram(),
            status: StatusClasses::default(),
            errors: ErrorKinds::default(),
            connect_errors: ErrorKinds::default(),
            t_s: 0.0,
        }
    }

    /// Adds one stream interval; a point is closed every `per_point` of them.
    pub(super) fn add(&mut self, s: Sample) {
        self.n += 1;
        self.t_s = s.t_s;
        self.dt_s += s.dt_s;
        self.intended += s.intended;
        self.sent += s.sent;
        self.answered += s.answered;
        // Same bounds: adding cannot fail.
        let _ = self.hist.add(s.hist);
        let (a, b) = (&mut self.status, &s.status);
        a.s2xx += b.s2xx;
        a.s3xx += b.s3xx;
        a.s4xx += b.s4xx;
        a.s5xx += b.s5xx;
        a.other += b.other;
        self.errors.add(&s.errors);
        self.connect_errors.add(&s.connect_errors);
        if self.n >= self.per_point {
            self.close();
        }
    }

    /// Ends the point being filled (nothing without a sample in it).
    fn close(&mut self) {
        if self.n == 0 {
            return;
        }
        let dt = self.dt_s.max(1e-9);
        let h = &self.hist;
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
        self.points.push(HttpPoint {
            t_s: self.t_s,
            intended_rps: self.intended / dt,
            sent_rps: self.sent as f64 / dt,
            answered_rps: self.answered as f64 / dt,
            latency: (!h.is_empty()).then(|| PointLatency {
                replies: h.len(),
                p50_us: us(0.5),
                p90_us: us(0.9),
                p99_us: us(0.99),
                max_us: h.max() as f64 / 1e3,
            }),
            status: self.status,
            errors: self.errors,
            connect_errors: self.connect_errors,
        });
        let fresh = SeriesAcc::new(self.per_point);
        let points = std::mem::take(&mut self.points);
        *self = SeriesAcc { points, ..fresh };
    }

    /// The points, the last one (short) closed: the length of a whole point, s, and them.
    pub(super) fn take(&mut self) -> (f64, Vec<HttpPoint>) {
        self.close();
        (
            self.per_point as f64 * INTERVAL.as_secs_f64(),
            std::mem::take(&mut self.points),
        )
    }
}

/// The record's series: `points` of `interval_s` each and `run`'s latencies (ns) in the
/// histogram's log-spaced bins (only bins holding replies).
pub(super) fn series(interval_s: f64, points: Vec<HttpPoint>, run: &Histogram<u64>) -> HttpSeries {
    HttpSeries {
        interval_s,
        points,
        histogram: bins(run),
    }
}

/// `h`'s latencies (ns) in the record's log-spaced bins ([`HttpSeries::bin_bounds_ns`]),
/// only bins holding replies, ascending.
pub(super) fn bins(h: &Histogram<u64>) -> Vec<LatencyBin> {
    if h.is_empty() {
        return Vec::new();
    }
    let bounds = HttpSeries::bin_bounds_ns();
    let counts = bucket_counts(h, &bounds);
    counts
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, &count)| LatencyBin {
            upto_ns: bounds.get(i).copied().unwrap_or(u64::MAX),
            count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64, sent: u64, lat_ns: &[u64]) -> (f64, u64, Histogram<u64>) {
        let mut h = new_ns_histogram();
        for &v in lat_ns {
            h.record(v).unwrap();
        }
        (t_s, sent, h)
    }

    #[test]
    fn a_point_merges_its_intervals_histograms_and_rates() {
        let mut acc = SeriesAcc::new(2);
        let mut status = StatusClasses::default();
        for (t, sent, h) in [
            sample(0.25, 10, &[1_000_000; 9]),
            sample(0.5, 20, &[100_000_000]),
            sample(0.6, 4, &[]),
        ] {
            status.s2xx = h.len();
            let errors = ErrorKinds {
                timeout: 1,
                ..ErrorKinds::default()
            };
            acc.add(Sample {
                t_s: t,
                dt_s: if t == 0.6 { 0.1 } else { 0.25 },
                intended: 25.0,
                sent,
                answered: h.len(),
                hist: &h,
                status,
                errors,
                connect_errors: ErrorKinds::default(),
            });
        }
        let (interval, p) = acc.take();
        assert_eq!((interval, p.len()), (0.5, 2));
        // 30 written and 10 answered over 0.5 s; p50 from the first, max from the second.
        assert_eq!(
            (p[0].t_s, p[0].sent_rps, p[0].answered_rps),
            (0.5, 60.0, 20.0)
        );
        assert!((p[0].intended_rps - 100.0).abs() < 1e-9);
        let l = p[0].latency.unwrap();
        assert_eq!(l.replies, 10);
        assert!((l.p50_us - 1000.0).abs() < 1.0, "{l:?}");
        assert!((l.max_us - 100_000.0).abs() < 100.0, "{l:?}");
        assert_eq!((p[0].status.s2xx, p[0].errors.timeout), (10, 2));
        // The last, short one on its own length, without latency.
        assert_eq!((p[1].t_s, p[1].sent_rps), (0.6, 40.0));
        assert!(p[1].latency.is_none());
    }

    #[test]
    fn any_duration_keeps_at_most_the_points_allowed() {
        assert_eq!(per_point(3_000_000_000), 1);
        for secs in [1u64, 500, 501, 3600, 86_400 + 2] {
            let k = per_point(secs * 1_000_000_000) as u64;
            let samples = (secs * 4) + 2;
            assert!(
                samples.div_ceil(k) <= HttpSeries::MAX_POINTS as u64,
                "{secs} s: {k}"
            );
        }
    }

    #[test]
    fn the_histogram_keeps_the_bins_holding_replies() {
        let (_, _, h) = sample(0.0, 0, &[500, 1_000, 1_100, 5_000_000, 99_000_000_000]);
        let s = series(0.25, vec![], &h);
        let b: Vec<(u64, u64)> = s.histogram.iter().map(|b| (b.upto_ns, b.count)).collect();
        assert_eq!(b[0], (1_000, 2));
        assert_eq!(b[1], (1_189, 1));
        assert_eq!(b.len(), 4, "{b:?}");
        assert_eq!(b[3].0, 100_000_000_000);
        assert_eq!(s.histogram.iter().map(|b| b.count).sum::<u64>(), h.len());
    }
}
