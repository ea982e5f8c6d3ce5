//! Open-loop load on the closed loop's machinery (wrk2's model): C keep-alive connections,
//! each sending at R/C requests a second on its own schedule, one request in flight per
//! connection (no pipelining). The users' loop (`users.rs`) runs it unchanged: a user's
//! "think time" is the wait until its next intended send time (`Schedule` is its
//! `Books`), so a protocol that serves `ramp` ([`Exchange`]) serves `load` too.
//!
//! Connection j's k-th request is intended at `start + j / R + k * C / R`. A reply that
//! comes after the next intended time makes the next request go at once, late: its lag
//! is counted (`late`, `max_lag_ns`), and its latency is measured from the intended time
//! (corrected for coordinated omission: the stall a late reply caused shows in every
//! request it delayed) and, beside it, from the actual send (uncorrected: what a closed
//! loop would report). A send late although its connection was idle and ready is the
//! generator's own lag (`behind`), which the corrected figures include.
//!
//! A plan is a promise: no request is written at or after the plan's end. Replies still
//! outstanding then get a grace of the timeout (at most 2 s); those still waiting after
//! it are counted `unanswered`. Each loop thread counts into its own `OpenLocal` (two
//! histograms, counters: no allocation, no lock per request), merged at its end.
//!
//! `--rate max` runs the same loops on a closed [`Schedule`] (wrk's and `oha -c`'s model):
//! every connection (HTTP/2: every stream) sends its first request at the start and each
//! next one as soon as the last is answered or failed; nothing is intended, so latency is
//! from the actual send (service time: coordinated omission does not apply) and nothing is
//! late. `--requests N` caps the requests started ([`Books::claim`]); the run ends when the
//! N-th is answered or failed, or at the duration.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use tpslab_net::mono_ns;
use tpslab_plan::load_http::LoadHttpPlan;
use tpslab_plan::time::nanos;
use tpslab_record::load_http::{LoadHttpRecord, LoadHttpResult};

pub(crate) mod h2loop;
pub(crate) mod h3loop;
pub use h3loop::wait_http3_ready;
pub mod live;
mod local;
mod series;
mod supervise;
mod tcpstep;

use local::error_slot;
pub(crate) use local::OpenLocal;
pub(crate) use supervise::{loops_for, run_schedule};

pub use live::{HttpLiveSample, HttpLiveSink};
pub use tcpstep::run_load_tcp;

use crate::client::books::Books;
use crate::client::proto::http1::Http1;
use crate::client::proto::Reply;
use crate::client::users::run_loop;
use crate::EngineError;

/// Longest grace for replies outstanding at the plan's end.
const MAX_GRACE_NS: u64 = 2_000_000_000;

/// The open loop's clock: when each connection sends, until when, and what is in flight.
pub(crate) struct Schedule<'a> {
    /// The plan's start and end, monotonic ns.
    start: u64,
    end: u64,
    /// Between two intended sends of one connection, ns.
    interval: u64,
    /// Between the first intended sends of two connections in turn, ns (1/R).
    phase_ns: f64,
    timeout_ns: u64,
    /// Set once the grace after the end is over: the loops return.
    done: AtomicBool,
    stop: &'a AtomicBool,
    /// Requests written and not yet answered or failed, all loops.
    outstanding: AtomicI64,
    /// The loops' counts, merged as each ends.
    total: Mutex<Option<OpenLocal>>,
    /// The per-interval stream, when one is asked for.
    live: Option<live::Live>,
    /// `--rate max`: a closed loop (each request at once after its predecessor ended).
    closed: bool,
    /// `--requests`: requests that may start at most (u64::MAX: no cap).
    budget: u64,
    /// Requests started so far ([`Books::claim`]; less those started again elsewhere,
    /// [`Books::unclaim`]), all loops: the cap's count under `--requests`.
    claimed: AtomicU64,
    /// Of those, requests ended: answered, or failed written or while being written. The
    /// run ends (after its end, cap or stop) once every request started has ended, not
    /// merely those written whole: one still being written is waited for too.
    settled: AtomicU64,
    /// The loop threads' time on a CPU, waiting for one, and wall time since the start,
    /// ns, and the threads that read them, summed as each returns.
    loop_ns: [AtomicU64; 4],
}

impl<'a> Schedule<'a> {
    /// A schedule of `connections` at `rate` requests/s in all from `start` (monotonic ns)
    /// for `duration_ns`.
    pub(crate) fn new(
        start: u64,
        rate: f64,
        connections: usize,
        duration_ns: u64,
        timeout_ns: u64,
        stop: &'a AtomicBool,
    ) -> Schedule<'a> {
        Schedule {
            start,
            end: start + duration_ns,
            interval: ((connections as f64 * 1e9 / rate).round() as u64).max(1),
            phase_ns: 1e9 / rate,
            timeout_ns,
            done: AtomicBool::new(false),
            stop,
            outstanding: AtomicI64::new(0),
            total: Mutex::new(None),
            live: None,
            closed: false,
            budget: u64::MAX,
            claimed: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            loop_ns: Default::default(),
        }
    }

    /// The schedule made a closed loop (`--rate max`): no intended times, each request
    /// at once after its predecessor, at most `requests` started (None: no cap).
    pub(crate) fn closed(mut self, requests: Option<u64>) -> Self {
        self.closed = true;
        self.interval = 0;
        self.budget = requests.unwrap_or(u64::MAX);
        self
    }

    /// Every request the cap allows was started (never, without a cap).
    fn exhausted(&self) -> bool {
        self.claimed.load(Relaxed) >= self.budget
    }

    /// Whether every request started has ended (answered or failed).
    fn all_settled(&self) -> bool {
        self.settled.load(Relaxed) >= self.claimed.load(Relaxed)
    }

    /// The schedule with a per-interval stream to `sink` (connections counted to
    /// `target`), and the record's series from it (with or without a sink).
    pub(crate) fn with_live(mut self, sink: Option<&HttpLiveSink>, target: SocketAddr) -> Self {
        let span = self.end - self.start + self.timeout_ns.min(MAX_GRACE_NS);
        let per_point = series::per_point(span);
        self.live = Some(live::Live::new(
            sink.cloned(),
            target,
            self.start,
            per_point,
        ));
        self
    }

    /// The times the per-interval stream needs, the plan's sends ending at `send_end`.
    fn clock(&self, send_end: u64) -> live::Clock {
        live::Clock {
            start: self.start,
            send_end,
            rate: 1e9 / self.phase_ns,
            in_flight: self.outstanding.load(Relaxed).max(0) as u64,
        }
    }

    /// Requests intended before the end: each connection's from its first intended time
    /// (a closed loop intends none).
    pub(crate) fn intended(&self, connections: usize) -> u64 {
        if self.closed {
            return 0;
        }
        (0..connections)
            .map(|j| {
                let f = self.first_due(j);
                if f >= self.end {
                    0
                } else {
                    1 + (self.end - 1 - f) / self.interval
                }
            })
            .sum()
    }
}

impl Books for Schedule<'_> {
    type Local = OpenLocal;

    fn local(&self) -> OpenLocal {
        OpenLocal {
            live: self.live.as_ref().map(|l| l.local()),
            ..OpenLocal::new()
        }
    }

    fn done(&self) -> bool {
        self.done.load(Relaxed)
    }

    /// Every connection from the start: each connects at once and waits for its first
    /// intended time.
    fn users_at(&self, _now: u64) -> usize {
        usize::MAX
    }

    fn may_send(&self, now: u64) -> bool {
        now < self.end && !self.stop.load(Relaxed) && !self.exhausted()
    }

    /// One more request started; under `--requests`, one of the cap's, while any is left.
    fn claim(&self) -> bool {
        self.claimed
            .fetch_update(Relaxed, Relaxed, |n| (n < self.budget).then_some(n + 1))
            .is_ok()
    }

    fn unclaim(&self) {
        let _ = self
            .claimed
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }

    fn abandoned(&self) {
        self.settled.fetch_add(1, Relaxed);
    }

    fn timeout_ns(&self) -> u64 {
        self.timeout_ns
    }

    /// A closed loop's users all start at the start.
    fn first_due(&self, id: usize) -> u64 {
        if self.closed {
            return self.start;
        }
        self.start + (id as f64 * self.phase_ns).round() as u64
    }

    /// A closed loop's next request is due at once (0: the send's own time is its
    /// intended time, so nothing is late and latency is from the actual send).
    fn next_due(&self, intended: u64, _now: u64) -> u64 {
        if self.closed {
            return 0;
        }
        intended + self.interval
    }

    fn sent(&self, l: &mut OpenLocal, intended: u64, ready: u64, now: u64, bytes: usize) {
        self.outstanding.fetch_add(1, Relaxed);
        l.sent += 1;
        l.bytes_out += bytes as u64;
        l.first = l.first.min(now);
        l.last = l.last.max(now);
        if self.closed {
            // Nothing is intended: no lag to count (the first request waited for its
            // connection, not for a schedule).
            l.publish(None);
            return;
        }
        let lag = now.saturating_sub(intended);
        if lag > LoadHttpResult::LATE_NS {
            l.late += 1;
            l.max_lag_ns = l.max_lag_ns.max(lag);
        }
        let own = now.saturating_sub(intended.max(ready));
        if own > LoadHttpResult::LATE_NS {
            l.behind += 1;
            l.behind_max_ns = l.behind_max_ns.max(own);
        }
        l.publish(None);
    }

    fn read(&self, l: &mut OpenLocal, bytes: usize) {
        l.bytes_in += bytes as u64;
    }

    fn wrote(&self, l: &mut OpenLocal, bytes: usize) {
        l.bytes_out += bytes as u64;
    }

    fn opened(&self, l: &mut OpenLocal) {
        l.connections += 1;
    }

    fn backed_off(&self, l: &mut OpenLocal, _now: u64) {
        l.backoffs += 1;
    }

    fn answered(&self, l: &mut OpenLocal, intended: u64, t0: u64, first: u64, now: u64, r: &Reply) {
        // A reply without a status code that says the request failed (a Redis error
        // reply) is a failed request of its kind, as the closed loop counts it; HTTP's
        // (status 5xx) are counted by their status class below.
        if let (Some(kind), 0) = (r.failed, r.status) {
            return self.failed(l, now, kind, true);
        }
        self.outstanding.fetch_sub(1, Relaxed);
        self.settled.fetch_add(1, Relaxed);
        l.last_end = l.last_end.max(now);
        let uncorrected = now.saturating_sub(t0).max(1);
        // Above the histogram's 100 s bound counts as 100 s, never as nothing. A closed
        // loop intends nothing: its "corrected" latency is the service time.
        let corrected = if self.closed {
            uncorrected
        } else {
            now.saturating_sub(intended).max(1)
        };
        l.corrected.saturating_record(corrected);
        l.uncorrected.saturating_record(uncorrected);
        let gap = (first != 0).then(|| now.saturating_sub(first));
        l.gaps.add(uncorrected, gap, r.len);
        let s = &mut l.status;
        match r.status {
            200..=299 => s.s2xx += 1,
            300..=399 => s.s3xx += 1,
            400..=499 => s.s4xx += 1,
            500..=599 => s.s5xx += 1,
            _ => s.other += 1,
        }
        l.codes.add(r.status, 1);
        l.publish(Some(corrected));
    }

    fn held_rtt(&self, l: &mut OpenLocal, _now: u64, rtt_ns: u64) {
        l.gaps.held_rtt(rtt_ns);
    }

    fn failed(&self, l: &mut OpenLocal, now: u64, kind: &str, in_flight: bool) {
        if in_flight {
            self.outstanding.fetch_sub(1, Relaxed);
            self.settled.fetch_add(1, Relaxed);
            l.last_end = l.last_end.max(now);
        }
        // A connect's failure (its TLS handshake's too) says `connect: KIND`.
        let slots = if kind.starts_with("connect: ") {
            &mut l.connect_errors
        } else {
            &mut l.errors
        };
        *error_slot(slots, kind) += 1;
        let k = kind.strip_prefix("connect: ").unwrap_or(kind);
        if k.starts_with("tls: ") && l.first_tls_error.is_none() {
            l.first_tls_error = Some(k.to_string());
        }
        l.publish(None);
    }

    fn abort(&self) {
        self.done.store(true, Relaxed);
    }

    /// Its bytes still count.
    fn unsent(&self, l: &mut OpenLocal) {
        self.outstanding.fetch_sub(1, Relaxed);
        l.sent -= 1;
    }

    fn finish(&self, mut l: OpenLocal, in_flight: u64) {
        l.unanswered += in_flight;
        if let Some(p) = l.live.take() {
            p.flush(l.counts());
        }
        let mut t = self.total.lock().unwrap_or_else(|e| e.into_inner());
        match t.as_mut() {
            Some(t) => t.merge(&l),
            None => *t = Some(l),
        }
    }
}

/// Runs `load http`'s plan; `stop` ends it early (the counts so far are returned, the
/// record marked interrupted by the caller). Errors: a plan [`LoadHttpPlan::validate`]
/// refuses (its line), more connections than file descriptors or local ports, a loop
/// thread that cannot start.
pub fn run_load_http(
    plan: &LoadHttpPlan,
    stop: &AtomicBool,
) -> Result<LoadHttpRecord, EngineError> {
    run_load_http_live(plan, stop, None)
}

/// [`run_load_http`] with its per-interval stream handed to `live` (every
/// [`live::INTERVAL`], on the schedule's supervising thread: the loops never wait for it).
/// Errors: as [`run_load_http`]'s.
pub fn run_load_http_live(
    plan: &LoadHttpPlan,
    stop: &AtomicBool,
    live: Option<&HttpLiveSink>,
) -> Result<LoadHttpRecord, EngineError> {
    plan.validate()
        .map_err(|e| EngineError::Other(e.to_string()))?;
    if plan.version.is_http2() {
        return h2loop::run_load_h2(plan, stop, live);
    }
    if plan.version.is_http3() {
        return h3loop::run_load_h3(plan, stop, live);
    }
    let proto = http1_for(plan)?;
    let ask = OpenAsk::of_http(plan);
    // The client's namespace's delayed ACKs over the run: the other half of a reply
    // held by the server's Nagle.
    let delack0 = delayed_acks();
    let (start, intended, mut l) = run_users(&ask, &proto, stop, live)?;
    l.gaps.delayed_acks = delack0
        .zip(delayed_acks())
        .map(|(a, b)| b.saturating_sub(a));
    Ok(record(plan, start, intended, l))
}

/// `load http`'s HTTP/1.1 exchange (over TLS for `https://`). Errors: the request's
/// bytes, a `--cacert` without a usable certificate (one line each).
pub(crate) fn http1_for(plan: &LoadHttpPlan) -> Result<Http1, EngineError> {
    let request = plan
        .request
        .bytes(&plan.body)
        .map_err(|e| EngineError::Other(e.to_string()))?;
    // Methods are case-sensitive: only HEAD's replies have no body.
    let proto = Http1::new(plan.target, request, plan.request.method == "HEAD");
    Ok(
        match crate::client::proto::tls::client_for(
            &plan.request,
            crate::client::proto::http1::ALPN,
        )
        .map_err(EngineError::Other)?
        {
            Some(t) => proto.with_tls(t),
            None => proto,
        },
    )
}

/// `TcpExt: DelayedACKs` of this process's network namespace, when readable.
pub(crate) fn delayed_acks() -> Option<u64> {
    tpslab_proc::live::delayed_acks(std::path::Path::new("/proc/self")).ok()
}

/// An open loop of one request in flight per connection: what it is asked.
pub(crate) struct OpenAsk {
    /// Where the connections go.
    pub(crate) target: SocketAddr,
    /// Requests per second, all connections together.
    pub(crate) rate: f64,
    /// Connections, each on its own schedule at rate / connections.
    pub(crate) connections: usize,
    /// How long requests are sent.
    pub(crate) duration: Duration,
    /// How long a reply may take.
    pub(crate) timeout: Duration,
    /// Loop threads (0: one per CPU, as [`loops_for`]).
    pub(crate) load_threads: usize,
    /// Some: a closed loop (`--rate max`, `rate` unused), with its `--requests` cap.
    pub(crate) closed: Option<Option<u64>>,
}

/// Runs `ask` over the users' loop of `proto` on an open-loop schedule (starting 100 ms
/// from now, room for the connects), `stop` ending it early, `live` given each interval.
/// Returns the schedule's start (monotonic ns), the requests it intended, and the
/// loops' counts. Errors: more connections than file descriptors or local ports, a
/// loop thread that cannot start.
pub(crate) fn run_users<P: crate::client::proto::Exchange>(
    ask: &OpenAsk,
    proto: &P,
    stop: &AtomicBool,
    live: Option<&HttpLiveSink>,
) -> Result<(u64, u64, OpenLocal), EngineError> {
    let c = ask.connections;
    let loops = loops_for(c, ask.load_threads)?;
    let (start, sched, intended) = ask.schedule(c, stop, live);
    let l = run_schedule(&sched, c, loops, &|ids| run_loop(&sched, proto, ids))?;
    Ok((start, intended, l))
}

impl OpenAsk {
    /// What `load http`'s `plan` asks of an open loop (`--rate max`: a closed loop).
    pub(crate) fn of_http(plan: &LoadHttpPlan) -> OpenAsk {
        OpenAsk {
            target: plan.target,
            rate: plan.rate,
            connections: plan.connections,
            duration: plan.duration,
            timeout: plan.timeout,
            load_threads: plan.load_threads,
            closed: plan.max_rate.then_some(plan.requests),
        }
    }

    /// The ask's schedule of `schedules` (its connections; with HTTP/2 and HTTP/3 its
    /// connections times their streams), starting 100 ms from now (room for the
    /// connections to be made before the first intended send), `stop` ending it early,
    /// `live` given each interval: (its start, monotonic ns; the schedule; the requests
    /// it intends).
    pub(crate) fn schedule<'a>(
        &self,
        schedules: usize,
        stop: &'a AtomicBool,
        live: Option<&HttpLiveSink>,
    ) -> (u64, Schedule<'a>, u64) {
        let start = mono_ns() + 100_000_000;
        let mut sched = Schedule::new(
            start,
            self.rate,
            schedules,
            nanos(&self.duration),
            nanos(&self.timeout),
            stop,
        );
        if let Some(requests) = self.closed {
            sched = sched.closed(requests);
        }
        let sched = sched.with_live(live, self.target);
        let intended = sched.intended(schedules);
        (start, sched, intended)
    }
}

/// The record of a run of `plan` started at `start` (monotonic ns) that intended
/// `intended` requests and counted `l`, with `l`'s series and latency histogram (a
/// `capacity` step's [`result`] keeps none).
fn record(plan: &LoadHttpPlan, start: u64, intended: u64, mut l: OpenLocal) -> LoadHttpRecord {
    let series = l
        .series
        .take()
        .map(|(interval, points)| series::series(interval, points, &l.corrected));
    let mut result = result(start, intended, l);
    result.series = series;
    LoadHttpRecord {
        plan: plan.clone(),
        result,
    }
}

/// The counts of a run started at `start` (monotonic ns) that intended `intended`
/// requests and counted `l`.
fn result(start: u64, intended: u64, l: OpenLocal) -> LoadHttpResult {
    let since = |t: u64| t.saturating_sub(start) as f64 / 1e9;
    LoadHttpResult {
        intended,
        sent: l.sent,
        status: l.status,
        codes: l.codes,
        errors: l.errors,
        connect_errors: l.connect_errors,
        unanswered: l.unanswered,
        bytes_out: l.bytes_out,
        bytes_in: l.bytes_in,
        connections: l.connections,
        reconnect_backoffs: l.backoffs,
        late: l.late,
        max_lag_ns: l.max_lag_ns,
        behind: l.behind,
        behind_max_ns: l.behind_max_ns,
        first_sent_s: if l.sent == 0 { 0.0 } else { since(l.first) },
        last_sent_s: if l.sent == 0 { 0.0 } else { since(l.last) },
        last_end_s: if l.last_end == 0 {
            0.0
        } else {
            since(l.last_end)
        },
        corrected: tpslab_analysis::stats::latency_summary(&l.corrected),
        uncorrected: tpslab_analysis::stats::latency_summary(&l.uncorrected),
        first_tls_error: l.first_tls_error,
        http2: None,
        http3: None,
        server_udp: None,
        verification: None,
        reply_gaps: Some(l.gaps),
        loop_cpu: l.loop_cpu,
        series: None,
        server: None,
    }
}

#[cfg(test)]
#[path = "openloop_tests.rs"]
mod tests;
