//! The live view of an open loop of HTTP requests (`load http --live`, `capacity http
//! --live`), fed by the same per-interval lines `load http --json-stream` writes
//! ([`HttpFrame`] reads one): intended vs achieved request rate, latency p50/p99/p99.9
//! from the intended send times, replies by status code (by class in streams older than
//! the codes) and errors by kind, this interval's and since the start, the latency
//! histogram of the run so far (the lines' log-spaced bins summed), a progress gauge
//! (elapsed of planned, requests done of planned), the connections open; for a capacity
//! search, its steps and the bracket so far above the step running now ([`draw_http`] lays
//! it out, in `http_draw.rs`).

use super::{FrameLatency, LiveHeader, MAX_POINTS, WINDOW_S};
use serde::Deserialize;
use std::collections::VecDeque;
use tpslab_record::capacity::CapacityStep;
use tpslab_record::http_counts::{ErrorKinds, StatusClasses, StatusCodes};
use tpslab_record::http_series::{HttpSeries, LatencyBin};

pub use super::http_draw::draw_http;

/// One interval of an open loop of HTTP requests: one `load http --json-stream` line (the
/// engine's `HttpLiveSample` as serialised).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HttpFrame {
    /// End of the interval, ms since the schedule's start.
    pub t_ms: f64,
    /// Length of the interval, ms.
    pub interval_ms: f64,
    /// Requests the plan intended per second over the interval.
    pub intended_rps: f64,
    /// Requests written per second over the interval (achieved).
    pub sent_rps: f64,
    /// Final replies read per second over the interval.
    pub answered_rps: f64,
    /// Latency of the replies read in the interval, from the intended send time, us.
    pub latency: Option<FrameLatency>,
    /// The interval's final replies by status class.
    pub status: StatusClasses,
    /// The interval's final replies by status code (empty in streams made before codes
    /// were counted).
    #[serde(default)]
    pub codes: StatusCodes,
    /// The interval's latencies (as `latency`'s) in the record histogram's log-spaced bins
    /// (`HttpSeries::bin_bounds_ns`), only bins holding replies (empty without replies,
    /// and in streams made before it was written).
    #[serde(default)]
    pub histogram: Vec<LatencyBin>,
    /// The interval's failed requests by kind.
    pub errors: ErrorKinds,
    /// The interval's failed connects by kind.
    pub connect_errors: ErrorKinds,
    /// Requests in flight at the interval's end.
    pub in_flight: u64,
    /// TCP connections established to the target at the interval's end; None where not
    /// counted.
    pub connections: Option<u64>,
}

impl HttpFrame {
    /// One `load http --json-stream` line. Errors: the line is not one of its objects.
    pub fn from_line(line: &str) -> Result<HttpFrame, serde_json::Error> {
        serde_json::from_str(line)
    }
}

/// A capacity search's part of the screen: the step running and the steps judged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpSearch {
    /// The step running now (its phase's label), None before the first.
    pub current: Option<String>,
    /// The steps judged so far.
    pub steps: Vec<CapacityStep>,
}

/// What the HTTP screen shows: a window of the last intervals, the totals since the start
/// (of the run, or of the step running), the keys' state; with a search, its steps.
#[derive(Debug, Clone)]
pub struct HttpLiveState {
    /// The run.
    pub header: LiveHeader,
    /// (t s, requests/s) intended, of the intervals in the window.
    pub intended: VecDeque<(f64, f64)>,
    /// (t s, requests/s) written (achieved).
    pub sent: VecDeque<(f64, f64)>,
    /// (t s, replies/s) answered.
    pub answered: VecDeque<(f64, f64)>,
    /// (t s, p50, p99, p99.9 in us) of the intervals in the window with replies.
    pub latency: VecDeque<(f64, f64, f64, f64)>,
    /// The last frame, None before the first.
    pub last: Option<HttpFrame>,
    /// Final replies by class since the start.
    pub total_status: StatusClasses,
    /// Final replies by status code since the start.
    pub total_codes: StatusCodes,
    /// The latency histogram since the start: replies per bin of
    /// [`HttpSeries::bin_bounds_ns`] (and one above the last), the lines' bins summed.
    pub histogram: Vec<u64>,
    /// Failed requests by kind since the start.
    pub total_errors: ErrorKinds,
    /// Failed connects by kind since the start.
    pub total_connect_errors: ErrorKinds,
    /// Most connections counted at once.
    pub connections_peak: u64,
    /// Intervals received.
    pub frames: u64,
    /// A capacity search's steps (None: one run, `load http`).
    pub search: Option<HttpSearch>,
    /// The screen is frozen (`p`).
    pub paused: bool,
    /// The help overlay is shown (`?`).
    pub help: bool,
    /// The run was asked to stop (`q`): the record is being written.
    pub stopping: bool,
}

fn add_status(t: &mut StatusClasses, s: &StatusClasses) {
    t.s2xx += s.s2xx;
    t.s3xx += s.s3xx;
    t.s4xx += s.s4xx;
    t.s5xx += s.s5xx;
    t.other += s.other;
}

impl HttpLiveState {
    /// An empty view of the run `header` (`load http`).
    pub fn new(header: LiveHeader) -> HttpLiveState {
        HttpLiveState {
            header,
            intended: VecDeque::new(),
            sent: VecDeque::new(),
            answered: VecDeque::new(),
            latency: VecDeque::new(),
            last: None,
            total_status: StatusClasses::default(),
            total_codes: StatusCodes::default(),
            histogram: vec![0; HttpSeries::bin_bounds_ns().len() + 1],
            total_errors: ErrorKinds::default(),
            total_connect_errors: ErrorKinds::default(),
            connections_peak: 0,
            frames: 0,
            search: None,
            paused: false,
            help: false,
            stopping: false,
        }
    }

    /// An empty view of a capacity search (`capacity http`), each step shown under
    /// `header`.
    pub fn search(header: LiveHeader) -> HttpLiveState {
        HttpLiveState {
            search: Some(HttpSearch::default()),
            ..HttpLiveState::new(header)
        }
    }

    /// The window emptied for a new run (a step, its warm-up), the keys and the search
    /// kept.
    fn fresh_run(&mut self) {
        let mut run = HttpLiveState::new(self.header.clone());
        run.search = self.search.take();
        (run.paused, run.help, run.stopping) = (self.paused, self.help, self.stopping);
        *self = run;
    }

    /// A search's step called `label` starts: the view of the run starts afresh.
    pub fn start_run(&mut self, label: &str) {
        self.fresh_run();
        if let Some(s) = self.search.as_mut() {
            s.current = Some(label.to_string());
        }
    }

    /// A capacity search's steps judged so far (the whole list each time).
    pub fn set_steps(&mut self, steps: &[CapacityStep]) {
        if let Some(s) = self.search.as_mut() {
            s.steps = steps.to_vec();
        }
    }

    /// Takes one interval in (a line whose clock went back is a new run, a step's after
    /// its warm-up: the view starts afresh).
    pub fn push(&mut self, f: HttpFrame) {
        if self.last.as_ref().is_some_and(|l| f.t_ms < l.t_ms) {
            self.fresh_run();
        }
        let t = f.t_ms / 1e3;
        self.intended.push_back((t, f.intended_rps));
        self.sent.push_back((t, f.sent_rps));
        self.answered.push_back((t, f.answered_rps));
        if let Some(l) = &f.latency {
            self.latency.push_back((t, l.p50_us, l.p99_us, l.p999_us));
        }
        add_status(&mut self.total_status, &f.status);
        self.total_codes.merge(&f.codes);
        self.add_bins(&f.histogram);
        self.total_errors.add(&f.errors);
        self.total_connect_errors.add(&f.connect_errors);
        self.connections_peak = self.connections_peak.max(f.connections.unwrap_or(0));
        self.frames += 1;
        self.last = Some(f);
        let t0 = t - WINDOW_S;
        for q in [&mut self.intended, &mut self.sent, &mut self.answered] {
            while q.front().is_some_and(|p| p.0 < t0 || q.len() > MAX_POINTS) {
                q.pop_front();
            }
        }
        while self
            .latency
            .front()
            .is_some_and(|p| p.0 < t0 || self.latency.len() > MAX_POINTS)
        {
            self.latency.pop_front();
        }
    }

    /// Adds a line's bins to the histogram: each to the bin of its bound (a bound that is
    /// not one of the bins', from another build, to the first bin above it).
    fn add_bins(&mut self, bins: &[LatencyBin]) {
        let bounds = HttpSeries::bin_bounds_ns();
        for b in bins {
            let i = bounds.partition_point(|&x| x < b.upto_ns);
            if let Some(n) = self.histogram.get_mut(i) {
                *n = n.saturating_add(b.count);
            }
        }
    }

    /// Requests done since the start: final replies and failed requests.
    pub fn requests_done(&self) -> u64 {
        self.total_status.total() + self.total_errors.total()
    }

    /// Seconds since the run (or step) started, as far as the stream tells.
    pub fn elapsed_s(&self) -> f64 {
        self.last.as_ref().map_or(0.0, |f| f.t_ms / 1e3)
    }

    /// The charts' time bounds: the window ending at the last line (at least 1 s wide).
    pub fn window(&self) -> [f64; 2] {
        let end = self.elapsed_s().max(1.0);
        [(end - WINDOW_S).max(0.0), end]
    }
}
