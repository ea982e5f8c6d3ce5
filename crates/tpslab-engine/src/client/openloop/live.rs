//! The open loop's per-interval stream (`load http --json-stream`, `--live`, `capacity http
//! --live`): every [`INTERVAL`] the schedule's supervising thread reads what each loop
//! thread published and hands one [`HttpLiveSample`] to the sink.
//!
//! A loop thread never waits for it: after each request sent, answered or failed it
//! publishes its running counts (and the corrected latencies since its last publish) into
//! its own shard with `try_lock`; when the reader holds the shard (a swap of two
//! histograms) the thread keeps them and publishes them with its next event (or, blocking,
//! as it ends).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use hdrhistogram::Histogram;
use tpslab_analysis::stats::new_ns_histogram;
use tpslab_record::http_counts::{ErrorKinds, StatusClasses, StatusCodes};
use tpslab_record::http_series::LatencyBin;

use super::series::{Sample, SeriesAcc};
use crate::observe::IntervalLatency;

/// Length of one interval of the stream.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// One interval of an open loop of HTTP requests, as `--json-stream` writes it (one JSON
/// object per line).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HttpLiveSample {
    /// End of the interval, ms since the schedule's start (its first intended send).
    pub t_ms: f64,
    /// Length of the interval, ms.
    pub interval_ms: f64,
    /// Requests the plan intended per second over the interval (the rate while the plan
    /// runs; 0 after its end or the stop).
    pub intended_rps: f64,
    /// Requests written per second over the interval (the achieved rate).
    pub sent_rps: f64,
    /// Final replies read per second over the interval.
    pub answered_rps: f64,
    /// Latency of the replies read in the interval, from each request's intended send time
    /// (corrected for coordinated omission), us; null without replies in it.
    pub latency: Option<IntervalLatency>,
    /// The interval's final replies by status class.
    pub status: StatusClasses,
    /// The interval's final replies by status code (JSON: `{"codes": [{"code": 200,
    /// "count": 220}, ...]}`, `more` when over the table's size).
    pub codes: StatusCodes,
    /// The latencies of the interval's replies (as `latency`'s) in the log-spaced bins of
    /// the record's histogram (`HttpSeries::bin_bounds_ns`: 4 a doubling, 1 us to 100 s),
    /// only bins holding replies; empty without replies. Summed over the lines, the run's
    /// histogram so far.
    pub histogram: Vec<LatencyBin>,
    /// The interval's failed requests by kind.
    pub errors: ErrorKinds,
    /// The interval's failed connects by kind.
    pub connect_errors: ErrorKinds,
    /// Requests written and not yet answered or failed, at the interval's end.
    pub in_flight: u64,
    /// TCP connections established to the target at the interval's end (this network
    /// namespace's sockets whose peer is the target, from sock_diag); null where they
    /// cannot be counted.
    pub connections: Option<u64>,
    /// Requests written in the interval (`sent_rps` as a count; not in the JSON line).
    #[serde(skip)]
    pub sent: u64,
    /// The latencies of the replies read in the interval, ns from each request's intended
    /// send time (a closed loop's: from its send), as `latency` summarises them; None
    /// without replies (not in the JSON line: `--metrics-listen` buckets it).
    #[serde(skip)]
    pub latency_histogram: Option<Histogram<u64>>,
}

/// Receives each [`HttpLiveSample`] on the schedule's supervising thread (keep it short: a
/// line written, a message sent).
#[derive(Clone)]
pub struct HttpLiveSink(pub Arc<dyn Fn(&HttpLiveSample) + Send + Sync>);

impl std::fmt::Debug for HttpLiveSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpLiveSink")
    }
}

/// A loop thread's running counts since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Counts {
    pub(super) sent: u64,
    pub(super) status: StatusClasses,
    pub(super) codes: StatusCodes,
    pub(super) errors: ErrorKinds,
    pub(super) connect_errors: ErrorKinds,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.sent += o.sent;
        let (s, t) = (&mut self.status, &o.status);
        s.s2xx += t.s2xx;
        s.s3xx += t.s3xx;
        s.s4xx += t.s4xx;
        s.s5xx += t.s5xx;
        s.other += t.other;
        self.codes.merge(&o.codes);
        self.errors.add(&o.errors);
        self.connect_errors.add(&o.connect_errors);
    }
}

/// `now - was`, kind by kind.
fn kinds_since(now: &ErrorKinds, was: &ErrorKinds) -> ErrorKinds {
    ErrorKinds {
        refused: now.refused.saturating_sub(was.refused),
        reset: now.reset.saturating_sub(was.reset),
        timeout: now.timeout.saturating_sub(was.timeout),
        closed: now.closed.saturating_sub(was.closed),
        protocol: now.protocol.saturating_sub(was.protocol),
        other: now.other.saturating_sub(was.other),
        tls: now.tls.saturating_sub(was.tls),
        unsolicited: now.unsolicited.saturating_sub(was.unsolicited),
    }
}

/// `now - was`, class by class.
fn status_since(now: &StatusClasses, was: &StatusClasses) -> StatusClasses {
    StatusClasses {
        s2xx: now.s2xx.saturating_sub(was.s2xx),
        s3xx: now.s3xx.saturating_sub(was.s3xx),
        s4xx: now.s4xx.saturating_sub(was.s4xx),
        s5xx: now.s5xx.saturating_sub(was.s5xx),
        other: now.other.saturating_sub(was.other),
    }
}

/// What one loop thread published: its counts, the corrected latencies (ns) since the
/// reader's last swap.
struct Published {
    counts: Counts,
    hist: Histogram<u64>,
}

type Shard = Arc<Mutex<Published>>;

/// A loop thread's side of the stream: its shard and what it could not publish yet.
pub(super) struct LiveLocal {
    shard: Shard,
    pending: Vec<u64>,
}

impl LiveLocal {
    /// Publishes `counts` and `latency` (ns, when a reply came) unless the reader holds the
    /// shard now (then with the next call).
    pub(super) fn publish(&mut self, counts: Counts, latency: Option<u64>) {
        if let Some(v) = latency {
            self.pending.push(v);
        }
        let mut g = match self.shard.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        g.counts = counts;
        for v in self.pending.drain(..) {
            g.hist.saturating_record(v);
        }
    }

    /// Publishes the last counts, waiting for the shard if need be (the loop ends).
    pub(super) fn flush(mut self, counts: Counts) {
        let mut g = self.shard.lock().unwrap_or_else(|e| e.into_inner());
        g.counts = counts;
        for v in self.pending.drain(..) {
            g.hist.saturating_record(v);
        }
    }
}

/// The reader's side: every loop thread's shard, the sink (if any: the record's series is
/// kept without one), and the last interval's end.
pub(super) struct Live {
    sink: Option<HttpLiveSink>,
    target: SocketAddr,
    shards: Mutex<Vec<Shard>>,
    reader: Mutex<Reader>,
}

/// What the reader keeps between intervals.
struct Reader {
    /// The last interval's end, monotonic ns.
    prev_t: u64,
    prev: Counts,
    diag: Option<tpslab_net::diag::SockDiag>,
    /// sock_diag could not be opened (or failed once): no count of connections.
    no_diag: bool,
    /// The record's series.
    series: SeriesAcc,
}

/// The schedule's times the reader needs, monotonic ns.
pub(super) struct Clock {
    pub(super) start: u64,
    /// The plan's end, or the stop's time when stopped before it.
    pub(super) send_end: u64,
    pub(super) rate: f64,
    pub(super) in_flight: u64,
}

impl Live {
    /// A stream to `sink` (None: only the record's series, `per_point` intervals to a
    /// point) of a run against `target` whose schedule starts at `start`.
    pub(super) fn new(
        sink: Option<HttpLiveSink>,
        target: SocketAddr,
        start: u64,
        per_point: u32,
    ) -> Live {
        Live {
            sink,
            target,
            shards: Mutex::new(Vec::new()),
            reader: Mutex::new(Reader {
                prev_t: start,
                prev: Counts::default(),
                diag: None,
                no_diag: false,
                series: SeriesAcc::new(per_point),
            }),
        }
    }

    /// A new loop thread's side.
    pub(super) fn local(&self) -> LiveLocal {
        let shard = Arc::new(Mutex::new(Published {
            counts: Counts::default(),
            hist: new_ns_histogram(),
        }));
        self.shards
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(shard.clone());
        LiveLocal {
            shard,
            pending: Vec::with_capacity(64),
        }
    }

    /// When the next interval ends, monotonic ns.
    pub(super) fn next_at(&self) -> u64 {
        let r = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        r.prev_t + INTERVAL.as_nanos() as u64
    }

    /// The record's series so far, its last point closed: a whole point's length, s, and
    /// the points.
    pub(super) fn take_series(&self) -> (f64, Vec<tpslab_record::http_series::HttpPoint>) {
        let mut r = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        r.series.take()
    }

    /// Ends the interval at `now`: reads every shard, adds the interval to the record's
    /// series and hands the sample to the sink.
    /// Does nothing when less than a millisecond passed since the last one.
    pub(super) fn sample(&self, now: u64, clock: &Clock) {
        let mut r = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        if now < r.prev_t + 1_000_000 {
            return;
        }
        let shards: Vec<Shard> = self
            .shards
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut total = Counts::default();
        let mut lat = new_ns_histogram();
        for s in &shards {
            // Made before the lock: the loop thread's try_lock fails only for the swap.
            let mut fresh = new_ns_histogram();
            {
                let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
                std::mem::swap(&mut g.hist, &mut fresh);
                total.add(&g.counts);
            }
            let _ = lat.add(&fresh);
        }
        let dt = (now - r.prev_t) as f64 / 1e9;
        let overlap = now
            .min(clock.send_end)
            .saturating_sub(r.prev_t.max(clock.start));
        let was = r.prev;
        let status = status_since(&total.status, &was.status);
        let errors = kinds_since(&total.errors, &was.errors);
        let connect_errors = kinds_since(&total.connect_errors, &was.connect_errors);
        r.series.add(Sample {
            t_s: now.saturating_sub(clock.start) as f64 / 1e9,
            dt_s: dt,
            intended: clock.rate * overlap as f64 / 1e9,
            sent: total.sent.saturating_sub(was.sent),
            answered: status.total(),
            hist: &lat,
            status,
            errors,
            connect_errors,
        });
        r.prev = total;
        r.prev_t = now;
        let Some(sink) = &self.sink else {
            return;
        };
        let connections = r.connections(self.target);
        drop(r);
        let sample = HttpLiveSample {
            t_ms: now.saturating_sub(clock.start) as f64 / 1e6,
            interval_ms: dt * 1e3,
            intended_rps: clock.rate * overlap as f64 / 1e9 / dt,
            sent_rps: total.sent.saturating_sub(was.sent) as f64 / dt,
            answered_rps: total.status.total().saturating_sub(was.status.total()) as f64 / dt,
            latency: (!lat.is_empty()).then(|| {
                let l = tpslab_analysis::stats::latency_summary(&lat);
                IntervalLatency {
                    replies: l.count,
                    p50_us: l.p50_ns as f64 / 1e3,
                    p99_us: l.p99_ns as f64 / 1e3,
                    p999_us: l.p999_ns as f64 / 1e3,
                    max_us: l.max_ns as f64 / 1e3,
                }
            }),
            status,
            codes: total.codes.since(&was.codes),
            histogram: super::series::bins(&lat),
            errors,
            connect_errors,
            in_flight: clock.in_flight,
            connections,
            sent: total.sent.saturating_sub(was.sent),
            latency_histogram: (!lat.is_empty()).then_some(lat),
        };
        (sink.0)(&sample);
    }
}

impl Reader {
    /// Established TCP connections whose peer is `target`, by sock_diag; None once it
    /// failed.
    fn connections(&mut self, target: SocketAddr) -> Option<u64> {
        if self.no_diag {
            return None;
        }
        if self.diag.is_none() {
            self.diag = tpslab_net::diag::SockDiag::open().ok();
        }
        let n = self.diag.as_mut().and_then(|d| {
            let all = d.tcp_dump(1 << 1).ok()?;
            Some(all.iter().filter(|s| s.remote == target).count() as u64)
        });
        self.no_diag = n.is_none();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_the_difference_of_the_threads_running_counts() {
        let got: Arc<Mutex<Vec<HttpLiveSample>>> = Arc::default();
        let g = got.clone();
        let sink = HttpLiveSink(Arc::new(move |s| g.lock().unwrap().push(s.clone())));
        let target: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let live = Live::new(Some(sink), target, 1_000_000_000, 1);
        let (mut a, mut b) = (live.local(), live.local());
        let mut c = Counts {
            sent: 10,
            ..Counts::default()
        };
        c.status.s2xx = 8;
        c.codes.add(200, 8);
        c.errors.timeout = 1;
        a.publish(c, Some(2_000_000));
        b.publish(
            Counts {
                sent: 5,
                ..Counts::default()
            },
            None,
        );
        // 0.25 s from the start, all of it planned at 100/s.
        let clock = Clock {
            start: 1_000_000_000,
            send_end: 3_000_000_000,
            rate: 100.0,
            in_flight: 3,
        };
        live.sample(1_250_000_000, &clock);
        c.sent = 20;
        c.status.s5xx = 2;
        c.codes.add(503, 2);
        a.flush(c);
        // Half the next interval is after the plan's end.
        let clock = Clock {
            send_end: 1_375_000_000,
            ..clock
        };
        live.sample(1_500_000_000, &clock);
        let s = got.lock().unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].t_ms, s[0].interval_ms), (250.0, 250.0));
        assert_eq!((s[0].sent_rps, s[0].answered_rps), (60.0, 32.0));
        assert!((s[0].intended_rps - 100.0).abs() < 1e-9);
        assert_eq!((s[0].errors.timeout, s[0].in_flight), (1, 3));
        let l = s[0].latency.as_ref().unwrap();
        assert_eq!(l.replies, 1);
        assert!((l.p99_us - 2000.0).abs() < 2.0, "{l:?}");
        // Its codes, and its one reply in one bin: the one whose bound is next above 2 ms
        // (to the histogram's precision), in the JSON line too.
        assert_eq!(s[0].codes.iter().collect::<Vec<_>>(), [(200, 8)]);
        let b = &s[0].histogram;
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].count, 1);
        assert!((2_000_000..2_400_000).contains(&b[0].upto_ns), "{b:?}");
        let line = serde_json::to_string(&s[0]).unwrap();
        assert!(
            line.contains(r#""codes":{"codes":[{"code":200,"count":8}]}"#)
                && line.contains(&format!(
                    r#""histogram":[{{"upto_ns":{},"count":1}}]"#,
                    b[0].upto_ns
                )),
            "{line}"
        );
        // The second: only what changed since, no latency, intended halved.
        assert_eq!(
            (s[1].sent_rps, s[1].status.s5xx, s[1].status.s2xx),
            (40.0, 2, 0)
        );
        assert_eq!(s[1].errors.timeout, 0);
        assert_eq!(s[1].codes.iter().collect::<Vec<_>>(), [(503, 2)]);
        assert!(s[1].latency.is_none() && s[1].histogram.is_empty());
        assert!((s[1].intended_rps - 50.0).abs() < 1e-9);
        drop(s);
        // The record's series holds the same intervals.
        let (interval, p) = live.take_series();
        assert_eq!((interval, p.len()), (0.25, 2));
        assert_eq!(
            (p[0].sent_rps, p[0].answered_rps, p[1].sent_rps),
            (60.0, 32.0, 40.0)
        );
        assert_eq!((p[0].errors.timeout, p[1].status.s5xx), (1, 2));
        assert!((p[1].intended_rps - 50.0).abs() < 1e-9);
    }
}
