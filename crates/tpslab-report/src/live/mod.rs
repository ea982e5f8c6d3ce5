//! The live view (`--live`): a full-screen picture of a run as it goes, drawn with ratatui
//! into any backend (the binary's crossterm terminal, a test's `TestBackend`).
//!
//! It is fed by the same per-interval lines `--json-stream` writes ([`LiveFrame`] reads one
//! such line, or is given the same sample in process with the figures the stream leaves
//! out: the SO_RCVBUF limit, softnet drops per CPU). [`LiveState`] keeps what the screen
//! shows (a bounded window of the last [`WINDOW_S`] seconds); [`draw`] lays it out.
//! A ramp's view ([`RampLiveState`], [`draw_ramp`]) is fed by its steps as each ends; a
//! command of several UDP runs (diagnose, sweep, capacity: [`RunsLiveState`],
//! [`draw_runs`]) shows the runs so far above the run going now; an open loop of HTTP
//! requests (`load http`, `capacity http`: [`HttpLiveState`], [`draw_http`]) has its own
//! stream and screen.

pub mod axis;
mod draw;
mod http;
mod http_draw;
mod http_panels;
pub mod keys;
mod ramp;
mod runs;
pub mod screen;

pub use draw::{draw, MIN_HEIGHT, MIN_WIDTH};
pub use http::{draw_http, HttpFrame, HttpLiveState, HttpSearch};
pub use ramp::{draw_ramp, CurrentStep, RampHeader, RampLiveState};
pub use runs::{draw_runs, RunRow, RunsKind, RunsLiveState};

use serde::Deserialize;
use std::collections::VecDeque;
use tpslab_analysis::waits::LiveThread;

/// Seconds of history the charts show (older intervals are let go).
pub const WINDOW_S: f64 = 60.0;

/// Intervals kept at most (60 s at the finest 10 ms interval).
const MAX_POINTS: usize = 6000;

/// Latency of the replies read in one interval, from their intended send time, us (the
/// stream's `latency` object).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FrameLatency {
    /// Replies read in the interval.
    pub replies: u64,
    /// Median, us.
    pub p50_us: f64,
    /// 99th percentile, us.
    pub p99_us: f64,
    /// 99.9th percentile, us.
    pub p999_us: f64,
    /// Largest, us.
    pub max_us: f64,
}

/// One sampling interval: one `--json-stream` line (the engine's `LiveSample` as
/// serialised), and, given in process only, what the stream does not carry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LiveFrame {
    /// End of the interval, ms since the observer started.
    pub t_ms: f64,
    /// Length of the interval, ms.
    pub interval_ms: f64,
    /// Datagrams the generator sent per second over the interval (tpslab's load only).
    pub offered_pps: Option<f64>,
    /// Datagrams the server read per second over the interval; null where not known.
    pub delivered_pps: Option<f64>,
    /// Drops at the server socket(s) since the start (/proc/net/udp `drops`).
    pub socket_drops: u64,
    /// `Udp: RcvbufErrors` (+ Udp6) since the start (the target's namespace).
    pub rcvbuf_errors: u64,
    /// softnet backlog drops since the start, all CPUs (host-wide).
    pub softnet_drops: u64,
    /// Server socket(s) rx_queue now, bytes, summed over the target's sockets.
    pub rx_queue_bytes: u64,
    /// Latency of the replies read in the interval; null without replies.
    pub latency: Option<FrameLatency>,
    /// SO_RCVBUF limit of the target socket(s), bytes, summed as `rx_queue_bytes` is (not
    /// in the NDJSON: given in process).
    #[serde(default)]
    pub rcvbuf_limit_bytes: Option<u64>,
    /// softnet backlog drops per CPU since the start, (cpu, drops); empty where not read
    /// (not in the NDJSON: given in process, every 100 ms).
    #[serde(default)]
    pub softnet_dropped_per_cpu: Vec<(u64, u64)>,
    /// The server's threads, their state and where they wait; empty where not read (not
    /// in the NDJSON: given in process, every 100 ms, with a server process followed).
    #[serde(skip)]
    pub threads: Vec<LiveThread>,
}

impl LiveFrame {
    /// One `--json-stream` line. Errors: the line is not one of its objects.
    pub fn from_line(line: &str) -> Result<LiveFrame, serde_json::Error> {
        serde_json::from_str(line)
    }
}

/// What the run is, for the status line and for saying why a figure is absent.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveHeader {
    /// The command, e.g. `load udp`.
    pub command: String,
    /// The target, e.g. `127.0.0.1:9000`.
    pub target: String,
    /// How long the run is planned to last, s (None: until stopped).
    pub planned_s: Option<f64>,
    /// Requests the run plans (an HTTP run's: a fixed rate's intended requests,
    /// `--requests` with `--rate max`), for its progress gauge; None: not counted ahead
    /// (and in views that count no requests).
    pub planned_requests: Option<u64>,
    /// Why there is no latency at all, when there cannot be any (e.g. `UDP sink mode`);
    /// None: the load reads replies.
    pub no_latency: Option<String>,
}

/// The drops of one interval (the difference of two lines' counts since the start), and
/// since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Drops {
    /// At the server socket(s) (/proc/net/udp `drops`).
    pub socket: u64,
    /// `Udp: RcvbufErrors` of the target's namespace.
    pub rcvbuf_errors: u64,
    /// softnet backlog, host-wide.
    pub softnet: u64,
}

/// What the screen shows: the header, a window of the last intervals, the last frame and
/// the keys' state. Fixed in size however long the run lasts.
#[derive(Debug, Clone)]
pub struct LiveState {
    /// The run.
    pub header: LiveHeader,
    /// (t s, offered pps) of the intervals in the window that had one.
    pub offered: VecDeque<(f64, f64)>,
    /// (t s, delivered pps) of the intervals in the window that had one.
    pub delivered: VecDeque<(f64, f64)>,
    /// (t s, p50, p99, p99.9 in us) of the intervals in the window with replies.
    pub latency: VecDeque<(f64, f64, f64, f64)>,
    /// The last frame, None before the first.
    pub last: Option<LiveFrame>,
    /// The last interval's drops.
    pub interval_drops: Drops,
    /// Drops since the start.
    pub total_drops: Drops,
    /// Deepest rx_queue seen, bytes.
    pub rx_queue_peak: u64,
    /// The last per-CPU softnet drops read (kept between the samples that read them).
    pub softnet_per_cpu: Vec<(u64, u64)>,
    /// The server's threads as last read (kept between the samples that read them).
    pub threads: Vec<LiveThread>,
    /// Intervals received.
    pub frames: u64,
    /// The screen is frozen (`p`): the caller holds new frames back.
    pub paused: bool,
    /// The help overlay is shown (`?`).
    pub help: bool,
    /// The run was asked to stop (`q`): the record is being written.
    pub stopping: bool,
}

impl LiveState {
    /// An empty view of the run `header`.
    pub fn new(header: LiveHeader) -> LiveState {
        LiveState {
            header,
            offered: VecDeque::new(),
            delivered: VecDeque::new(),
            latency: VecDeque::new(),
            last: None,
            interval_drops: Drops::default(),
            total_drops: Drops::default(),
            rx_queue_peak: 0,
            softnet_per_cpu: Vec::new(),
            threads: Vec::new(),
            frames: 0,
            paused: false,
            help: false,
            stopping: false,
        }
    }

    /// Takes one interval in.
    pub fn push(&mut self, f: LiveFrame) {
        let t = f.t_ms / 1e3;
        if let Some(p) = f.offered_pps {
            self.offered.push_back((t, p));
        }
        if let Some(p) = f.delivered_pps {
            self.delivered.push_back((t, p));
        }
        if let Some(l) = &f.latency {
            self.latency.push_back((t, l.p50_us, l.p99_us, l.p999_us));
        }
        let now = Drops {
            socket: f.socket_drops,
            rcvbuf_errors: f.rcvbuf_errors,
            softnet: f.softnet_drops,
        };
        let was = self.last.as_ref().map_or(Drops::default(), |l| Drops {
            socket: l.socket_drops,
            rcvbuf_errors: l.rcvbuf_errors,
            softnet: l.softnet_drops,
        });
        self.interval_drops = Drops {
            socket: now.socket.saturating_sub(was.socket),
            rcvbuf_errors: now.rcvbuf_errors.saturating_sub(was.rcvbuf_errors),
            softnet: now.softnet.saturating_sub(was.softnet),
        };
        self.total_drops = now;
        self.rx_queue_peak = self.rx_queue_peak.max(f.rx_queue_bytes);
        if !f.softnet_dropped_per_cpu.is_empty() {
            self.softnet_per_cpu = f.softnet_dropped_per_cpu.clone();
        }
        if !f.threads.is_empty() {
            self.threads = f.threads.clone();
        }
        self.frames += 1;
        self.last = Some(f);
        self.forget_before(t - WINDOW_S);
    }

    /// Seconds since the run started, as far as the stream tells (the last line's end).
    pub fn elapsed_s(&self) -> f64 {
        self.last.as_ref().map_or(0.0, |f| f.t_ms / 1e3)
    }

    /// The chart's time bounds: the window ending at the last line (at least 1 s wide).
    pub fn window(&self) -> [f64; 2] {
        let end = self.elapsed_s().max(1.0);
        [(end - WINDOW_S).max(0.0), end]
    }

    fn forget_before(&mut self, t0: f64) {
        while self
            .offered
            .front()
            .is_some_and(|p| p.0 < t0 || self.offered.len() > MAX_POINTS)
        {
            self.offered.pop_front();
        }
        while self
            .delivered
            .front()
            .is_some_and(|p| p.0 < t0 || self.delivered.len() > MAX_POINTS)
        {
            self.delivered.pop_front();
        }
        while self
            .latency
            .front()
            .is_some_and(|p| p.0 < t0 || self.latency.len() > MAX_POINTS)
        {
            self.latency.pop_front();
        }
    }
}

#[cfg(test)]
mod tests;
