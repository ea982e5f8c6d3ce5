//! `load http`'s time series: one point per interval of the run (requests/s intended,
//! written and answered, the interval's latency percentiles from its own histogram, its
//! replies by status class and its failures by kind), and the run's latency histogram
//! in log-spaced bins, for the HTML page's plots.

use serde::{Deserialize, Serialize};

use crate::http_counts::{ErrorKinds, StatusClasses};

/// The series of one `load http` run: at most [`HttpSeries::MAX_POINTS`] points whatever
/// the duration (the engine's 250 ms intervals merged `interval_s / 0.25` at a time),
/// read from the same per-thread counts as `--json-stream` (nothing is added to the
/// requests' path).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HttpSeries {
    /// Length of each point's interval, s (the last point's may be shorter).
    pub interval_s: f64,
    /// The points, in time order.
    pub points: Vec<HttpPoint>,
    /// The run's latency (corrected: from each request's intended send time; a closed
    /// loop's from its actual send) in log-spaced bins, only bins holding replies.
    pub histogram: Vec<LatencyBin>,
}

impl HttpSeries {
    /// Points a series keeps at most (a record read back with more is refused).
    pub const MAX_POINTS: usize = 2_000;
    /// Bins per doubling of latency in [`HttpSeries::histogram`].
    pub const BINS_PER_DOUBLING: u32 = 4;
    /// Bins the histogram keeps at most (1 us to 100 s at 4 per doubling, and one below).
    pub const MAX_BINS: usize = 112;

    /// The upper bounds of the histogram's bins, ns: 1 us, then 2^(1/4) times the last,
    /// to 100 s (HdrHistogram's range in tpslab).
    pub fn bin_bounds_ns() -> Vec<u64> {
        let mut v = vec![];
        let mut i = 0u32;
        loop {
            let b = (1e3 * 2f64.powf(i as f64 / Self::BINS_PER_DOUBLING as f64)).round() as u64;
            v.push(b.min(100_000_000_000));
            if b >= 100_000_000_000 {
                return v;
            }
            i += 1;
        }
    }
}

/// One interval of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HttpPoint {
    /// End of the interval, s after the schedule's start (its first intended send).
    pub t_s: f64,
    /// Requests the plan intended per second over the interval (0 for a closed loop,
    /// `--rate max`, and after the plan's end).
    pub intended_rps: f64,
    /// Requests written per second over the interval.
    pub sent_rps: f64,
    /// Final replies read per second over the interval.
    pub answered_rps: f64,
    /// The latency of the replies read in the interval (as [`HttpSeries::histogram`]'s),
    /// from the interval's own histogram. None: no reply in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<PointLatency>,
    /// The interval's final replies by status class.
    pub status: StatusClasses,
    /// The interval's failed requests by kind.
    #[serde(default, skip_serializing_if = "ErrorKinds::is_none")]
    pub errors: ErrorKinds,
    /// The interval's failed connects by kind.
    #[serde(default, skip_serializing_if = "ErrorKinds::is_none")]
    pub connect_errors: ErrorKinds,
}

/// Percentiles of one interval's replies, us (HdrHistogram, 3 significant digits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PointLatency {
    /// Replies in the interval.
    pub replies: u64,
    /// Median, us.
    pub p50_us: f64,
    /// 90th percentile, us.
    pub p90_us: f64,
    /// 99th percentile, us.
    pub p99_us: f64,
    /// Largest, us.
    pub max_us: f64,
}

/// One bin of the run's latency histogram: the replies whose latency is above the
/// previous bin's `upto_ns` (0 for the first bin) and at most this one's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LatencyBin {
    /// The bin's upper bound, ns (one of [`HttpSeries::bin_bounds_ns`]; u64::MAX: above
    /// the last).
    pub upto_ns: u64,
    /// Replies in the bin.
    pub count: u64,
}

impl HttpSeries {
    /// Why a series read back cannot be this run's: more points or bins than a run keeps,
    /// a time or rate not finite or negative, bins out of order, or bins holding more
    /// replies than the run read (`replies`).
    pub fn check(&self, replies: u64) -> Result<(), String> {
        if self.points.len() > Self::MAX_POINTS || self.histogram.len() > Self::MAX_BINS {
            return Err(format!(
                "a series of {} points and {} bins (at most {} and {})",
                self.points.len(),
                self.histogram.len(),
                Self::MAX_POINTS,
                Self::MAX_BINS
            ));
        }
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        if !ok(self.interval_s)
            || self.points.iter().any(|p| {
                !ok(p.t_s)
                    || !ok(p.intended_rps)
                    || !ok(p.sent_rps)
                    || !ok(p.answered_rps)
                    || p.latency.is_some_and(|l| {
                        ![l.p50_us, l.p90_us, l.p99_us, l.max_us].into_iter().all(ok)
                    })
            })
        {
            return Err(
                "a series point whose time, rate or latency is not a finite figure >= 0".into(),
            );
        }
        if !self.points.windows(2).all(|w| w[0].t_s < w[1].t_s) {
            return Err("series points whose times do not increase".into());
        }
        let in_order = self
            .histogram
            .windows(2)
            .all(|w| w[0].upto_ns < w[1].upto_ns);
        let n = self
            .histogram
            .iter()
            .fold(0u64, |n, b| n.saturating_add(b.count));
        if !in_order || n > replies {
            return Err(format!(
                "a latency histogram of {n} replies (the run read {replies}) or out of order"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bins_double_every_four_and_end_at_100_s() {
        let b = HttpSeries::bin_bounds_ns();
        assert_eq!(&b[..5], &[1_000, 1_189, 1_414, 1_682, 2_000]);
        assert_eq!(*b.last().unwrap(), 100_000_000_000);
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        // With the bin above the last: every bin a run can fill fits the bound.
        assert!(b.len() < HttpSeries::MAX_BINS, "{}", b.len());
    }

    #[test]
    fn a_series_read_back_is_checked() {
        let mut s = HttpSeries {
            interval_s: 0.25,
            points: vec![HttpPoint {
                t_s: 0.25,
                ..HttpPoint::default()
            }],
            histogram: vec![
                LatencyBin {
                    upto_ns: 1_000,
                    count: 2,
                },
                LatencyBin {
                    upto_ns: 1_189,
                    count: 1,
                },
            ],
        };
        assert_eq!(s.check(3), Ok(()));
        assert!(s.check(2).unwrap_err().contains("3 replies"));
        s.histogram.swap(0, 1);
        assert!(s.check(3).is_err());
        s.histogram.swap(0, 1);
        s.points[0].sent_rps = f64::NAN;
        assert!(s.check(3).is_err());
        s.points[0].sent_rps = 0.0;
        // A negative latency, times that go back: refused (the page divides by them).
        s.points[0].latency = Some(PointLatency {
            replies: 1,
            p50_us: -1.0,
            ..PointLatency::default()
        });
        assert!(s.check(3).unwrap_err().contains("latency"));
        s.points[0].latency = None;
        s.points.push(s.points[0].clone());
        assert!(s.check(3).unwrap_err().contains("do not increase"));
        s.points[1].t_s = 0.5;
        assert_eq!(s.check(3), Ok(()));
        s.points = vec![HttpPoint::default(); HttpSeries::MAX_POINTS + 1];
        assert!(s.check(3).unwrap_err().contains("2001 points"));
    }
}
