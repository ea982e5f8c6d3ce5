//! `tpslab load http`'s record: an open loop of HTTP/1.1 requests at a fixed rate, each
//! keep-alive connection on its own schedule, with latency measured from each request's
//! intended send time (corrected for coordinated omission, as wrk2 does) and, beside it,
//! from its actual send time (uncorrected).

use serde::{Deserialize, Serialize};

use tpslab_plan::load_http::LoadHttpPlan;

use crate::stats::LatencySummary;

use crate::http_series::HttpSeries;

use crate::http_counts::{ErrorKinds, StatusClasses, StatusCodes};

/// What an open-loop HTTP run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadHttpResult {
    /// Requests the plan intended (intended times before its end).
    pub intended: u64,
    /// Requests written whole.
    pub sent: u64,
    /// Final replies, by status class.
    pub status: StatusClasses,
    /// Final replies by status code (`200`, `404`, ...; the first
    /// [`StatusCodes::CAP`] codes, the rest in its `more`); absent in records made before
    /// codes were counted (and from those with no reply).
    #[serde(default, skip_serializing_if = "StatusCodes::is_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "crate::http_counts::StatusCodesJson")
    )]
    pub codes: StatusCodes,
    /// Requests that failed, by kind (a request written, or due, whose connection failed
    /// or whose reply did not come or was not HTTP, or was followed by bytes no request
    /// asked for: `unsolicited`). Records before connects were counted apart hold connect
    /// failures here too.
    pub errors: ErrorKinds,
    /// Connects that failed, by kind (refused, timed out, reset, a TLS handshake that
    /// failed), and connections closed for the server's fault while no request of theirs
    /// was in flight (HTTP/1.1: a response no request asked for, `unsolicited`; HTTP/2: a
    /// GOAWAY with an error, a flood): no request failed with them.
    #[serde(default, skip_serializing_if = "ErrorKinds::is_none")]
    pub connect_errors: ErrorKinds,
    /// Requests started and still waiting for their reply, or still being written (the
    /// server read no more of them; not among `sent`), when the grace after the end ran
    /// out (the timeout, at most 2 s): failed requests of their own kind, `unanswered at
    /// the end` (not among `errors`, whose kinds are failures seen during the run). Every
    /// request started is answered, failed or here.
    pub unanswered: u64,
    /// Bytes written: the requests; HTTP/2's also the connection's own frames (preface,
    /// SETTINGS, WINDOW_UPDATE, SETTINGS and PING acks, RST_STREAM). Over TLS, plaintext.
    pub bytes_out: u64,
    /// Reply bytes read.
    pub bytes_in: u64,
    /// Connections made (first ones and reconnects; a refused connect is not one).
    pub connections: u64,
    /// Back-offs before a reconnect: after a failed connect, or a connection closed for a
    /// response no request asked for, a connection waits 1 ms, doubling at each failure in
    /// a row up to 1 s (until a reply comes) before it connects again. 0 in older records.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub reconnect_backoffs: u64,
    /// Requests sent more than [`LoadHttpResult::LATE_NS`] after their intended time, for
    /// any reason (mostly: the previous reply on their connection came late).
    pub late: u64,
    /// The largest lag of a send behind its intended time, ns.
    pub max_lag_ns: u64,
    /// Of those, requests the generator itself sent late: their connection was idle and
    /// ready at the intended time (its loop thread ran late; a busy host).
    pub behind: u64,
    /// The largest of those lags, ns.
    pub behind_max_ns: u64,
    /// When the first and the last request were written, s after the plan's start.
    pub first_sent_s: f64,
    /// The last request written, s after the plan's start.
    pub last_sent_s: f64,
    /// The last reply read or request failed in flight, s after the plan's start (a
    /// closed loop's rate is its replies over this span). 0: none, or an older record.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub last_end_s: f64,
    /// Latency from each request's intended send time to its reply (coordinated
    /// omission corrected), every final reply.
    pub corrected: LatencySummary,
    /// Latency from each request's actual send time to its reply (uncorrected).
    pub uncorrected: LatencySummary,
    /// The first TLS failure's text, e.g. `tls: invalid peer certificate: certificate not
    /// valid for name "localhost"; certificate is only valid for DnsName("other")` (the
    /// counts above say how many; this, why). None: no TLS failure, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_tls_error: Option<String>,
    /// HTTP/2 (`--http2`): the streams at once the server allowed and the requests that
    /// waited on the client for one. None: HTTP/1.1, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2Streams>,
    /// HTTP/3 (`--http3`): the QUIC connections' figures (round-trip time, congestion
    /// window, packets sent and lost, UDP datagrams). None: another protocol, or an older
    /// record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http3: Option<crate::quic::QuicPaths>,
    /// HTTP/3 against a server on this host: its QUIC socket found by the URL's address
    /// and what the kernel showed of it over the run (drops, receive queue against
    /// SO_RCVBUF, softnet, drop reasons, its reading threads) with the datagram ledger.
    /// None: another protocol, a server elsewhere, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_udp: Option<Box<crate::quic_server::QuicServerUdp>>,
    /// `--verify`: the fix the verdict named applied, the server restarted, the run
    /// again; None without `--verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Box<QuicVerification>>,
    /// HTTP/1.1: the replies by the time from their first byte read to their last (the
    /// response time summed is of the uncorrected latencies), with the client
    /// namespace's delayed ACKs over the run (`tpslab_analysis::nagle` judges it). None:
    /// HTTP/2, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_gaps: Option<crate::gaps::ReplyGaps>,
    /// The generator's loop threads: their time on a CPU and waiting for one, against
    /// their wall time (a closed loop's verdict names the generator when they wanted a
    /// CPU nearly all of it). None: an older record, or schedstat unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_cpu: Option<LoopCpu>,
    /// The run over time: a point per interval (requests/s intended vs answered, latency
    /// percentiles, status classes, errors by kind) and the latency histogram (the HTML
    /// page's plots). None: an older record, or a `capacity` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<HttpSeries>,
    /// The server on this host whose threads were sampled over the run (`--pid`, or the
    /// process holding the URL's listening socket), with the run's response-time ledger.
    /// None: HTTP/3, a server not on this host or not found, a `capacity` step, or an
    /// older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<Box<WatchedServer>>,
}

/// The server a `load http` run watched (its process and descendants, each thread's
/// states sampled every 10 ms and its schedstat, the listen socket's accept queue), and
/// the run's mean response time split into the parts those measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchedServer {
    /// Its PID.
    pub pid: u32,
    /// How it was found.
    pub found_by: FoundBy,
    /// The run's response-time ledger (`users`: the requests in flight at most, one per
    /// connection or HTTP/2 stream; `outside_ms` 0: an open loop sends on its schedule).
    /// None: no reply, or nothing of the server could be sampled.
    pub ledger: Option<crate::rt_ledger::RtLedger>,
}

/// How a `load http` run found the server it watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FoundBy {
    /// `--pid`.
    Pid,
    /// The process holding the URL's listening TCP socket on this host.
    Address,
}

impl FoundBy {
    /// Words for a report: "--pid", "the URL's listening socket".
    pub fn words(self) -> &'static str {
        match self {
            FoundBy::Pid => "--pid",
            FoundBy::Address => "the URL's listening socket",
        }
    }
}

/// The CPU the generator's loop threads used and waited for, from each thread's
/// `/proc/thread-self/schedstat` at its start and its return, summed over the threads;
/// wall time from the schedule's start to each thread's return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoopCpu {
    /// Loop threads.
    pub threads: u32,
    /// Time on a CPU (user and system), all threads, s.
    pub cpu_s: f64,
    /// Time runnable and waiting for a CPU (the run queue), all threads, s.
    pub runq_s: f64,
    /// Their wall times added, s.
    pub wall_s: f64,
}

impl LoopCpu {
    /// The share of their time the loop threads wanted a CPU (on one, or waiting for one
    /// in the run queue), 0..=1 (0 without wall time): near 1, they never waited on the
    /// network (a loop waiting for replies sleeps in epoll_wait).
    pub fn busy(&self) -> f64 {
        if self.wall_s > 0.0 {
            ((self.cpu_s + self.runq_s) / self.wall_s).min(1.0)
        } else {
            0.0
        }
    }
}

/// HTTP/2: how many streams at once the server allowed on each connection (its
/// SETTINGS_MAX_CONCURRENT_STREAMS, RFC 9113 6.5.2) and the requests that waited on the
/// client because a connection had that many in flight. Such a request's wait is spent in
/// the client's queue, not in the server: it is in the latency (and holds back TPS) but
/// the server never saw it. Read from each connection's SETTINGS frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Http2Streams {
    /// Connections whose server's first SETTINGS came (reconnects included).
    pub connections: u64,
    /// The smallest SETTINGS_MAX_CONCURRENT_STREAMS any of them advertised (in any
    /// SETTINGS frame), streams. None: no server named one (no limit).
    pub max_concurrent_min: Option<u32>,
    /// The largest, streams.
    pub max_concurrent_max: Option<u32>,
    /// Connections whose server's first SETTINGS named no limit.
    pub unlimited: u64,
    /// Requests due while their connection had as many streams in flight as its server
    /// allowed: each waited on the client for a free stream (counted once, however many
    /// connections it waited on).
    pub waited_for_stream: u64,
    /// The longest of those waits, ns: from the request's due time (or its connection's
    /// opening when it waited for that first) to its stream's start or its timeout, the
    /// whole wait however many connections it waited on (a GOAWAY or a close in between
    /// does not restart it).
    pub wait_max_ns: u64,
    /// Of those, requests that waited past `--timeout` and were given up: never sent,
    /// counted among the `timeout` errors (so a loss, "written and not answered", leaves
    /// them out).
    #[serde(default)]
    pub timed_out_waiting: u64,
    /// Requests waiting on the client for a free stream when the run ended (the plan's
    /// end or its stop): never written, among the intended requests not sent (the
    /// client's queue at the end, not a shortfall of the server's). 0 in older records.
    #[serde(default)]
    pub waiting_at_end: u64,
    /// Requests written that a GOAWAY named unprocessed (above its last stream) and that
    /// were written again on a new connection: counted sent once, not twice (their
    /// first write went to a server that says it dropped them). 0 in older records.
    #[serde(default)]
    pub goaway_retried: u64,
    /// Of those, requests a GOAWAY named unprocessed a second time: failed (a protocol
    /// error, `refused by GOAWAY twice`), not sent a third. 0 in older records.
    #[serde(default)]
    pub goaway_refused: u64,
    /// Connections this client closed for their server's misbehaviour, by kind (floods,
    /// oversized header blocks, other connection errors); all 0 in older records and
    /// against a well-behaved server.
    #[serde(default, skip_serializing_if = "Http2Faults::is_none")]
    pub faults: Http2Faults,
}

/// Connections an HTTP/2 client closed because of what their server sent (RFC 9113's
/// connection errors), by kind: each also fails its streams in flight (counted among the
/// `protocol` errors) or, with none in flight, counts once among the connects' `protocol`
/// errors. A flood is closed with GOAWAY ENHANCE_YOUR_CALM once the server passes one of
/// the client's limits (docs/security.md lists them with their values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Http2Faults {
    /// PING flood: more PING acknowledgements queued unwritten than the limit (the server
    /// sends faster than it reads), or more PINGs a second than the limit.
    pub ping_flood: u64,
    /// SETTINGS flood: as many SETTINGS acknowledgements queued unwritten, more SETTINGS
    /// frames a second, or one frame of more parameters than the limit.
    pub settings_flood: u64,
    /// RST_STREAM flood: more resets a second of streams not in flight than the limit.
    pub reset_flood: u64,
    /// WINDOW_UPDATE flood: more WINDOW_UPDATE frames a second than the limit.
    pub window_update_flood: u64,
    /// CONTINUATION flood: more CONTINUATION frames in one header block than the limit.
    pub continuation_flood: u64,
    /// A header block over the limit, bytes.
    pub header_block: u64,
    /// Frames that carry nothing (empty DATA, PRIORITY, unknown types, acknowledgements
    /// never asked for, GOAWAY again) more a second than the limit.
    pub empty_frame_flood: u64,
    /// Any other connection error: a frame this client cannot take (bad length, wrong
    /// stream, a zero WINDOW_UPDATE, a reset of an idle stream, a bad SETTINGS value, a
    /// header block HPACK cannot decode).
    pub protocol: u64,
}

impl Http2Faults {
    /// Each kind with its count, as the report names them, in the report's order.
    pub fn list(&self) -> [(&'static str, u64); 8] {
        [
            ("PING flood", self.ping_flood),
            ("SETTINGS flood", self.settings_flood),
            ("RST_STREAM flood", self.reset_flood),
            ("WINDOW_UPDATE flood", self.window_update_flood),
            ("CONTINUATION flood", self.continuation_flood),
            ("header block too large", self.header_block),
            ("empty frame flood", self.empty_frame_flood),
            ("protocol error", self.protocol),
        ]
    }

    /// No connection closed for its server's misbehaviour.
    pub fn is_none(&self) -> bool {
        self.total() == 0
    }

    /// Connections closed, all kinds.
    pub fn total(&self) -> u64 {
        self.list().iter().map(|(_, n)| n).sum()
    }

    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &Http2Faults) {
        self.ping_flood += o.ping_flood;
        self.settings_flood += o.settings_flood;
        self.reset_flood += o.reset_flood;
        self.window_update_flood += o.window_update_flood;
        self.continuation_flood += o.continuation_flood;
        self.header_block += o.header_block;
        self.empty_frame_flood += o.empty_frame_flood;
        self.protocol += o.protocol;
    }

    /// The kinds seen, `PING flood on 3 connections, protocol error on 1 connection`;
    /// empty when none.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .list()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| {
                let s = if *n == 1 { "" } else { "s" };
                format!("{k} on {n} connection{s}")
            })
            .collect();
        parts.join(", ")
    }
}

impl Http2Streams {
    /// A connection's server's SETTINGS named `max` streams at once (None: no limit);
    /// `first`: its first SETTINGS (counts the connection).
    pub fn advertised(&mut self, max: Option<u32>, first: bool) {
        if first {
            self.connections += 1;
            if max.is_none() {
                self.unlimited += 1;
            }
        }
        if let Some(m) = max {
            self.max_concurrent_min = Some(self.max_concurrent_min.map_or(m, |x| x.min(m)));
            self.max_concurrent_max = Some(self.max_concurrent_max.map_or(m, |x| x.max(m)));
        }
    }

    /// Adds `o`'s counts to these (another loop's connections).
    pub fn add(&mut self, o: &Http2Streams) {
        self.connections += o.connections;
        self.unlimited += o.unlimited;
        for m in [o.max_concurrent_min, o.max_concurrent_max]
            .into_iter()
            .flatten()
        {
            self.advertised(Some(m), false);
        }
        self.waited_for_stream += o.waited_for_stream;
        self.timed_out_waiting += o.timed_out_waiting;
        self.waiting_at_end += o.waiting_at_end;
        self.wait_max_ns = self.wait_max_ns.max(o.wait_max_ns);
        self.goaway_retried += o.goaway_retried;
        self.goaway_refused += o.goaway_refused;
        self.faults.add(&o.faults);
    }

    /// The counts of `all` added together (a run's steps, its loops).
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Http2Streams>) -> Http2Streams {
        let mut s = Http2Streams::default();
        for o in all {
            s.add(o);
        }
        s
    }

    /// The limit as advertised: `8`, `8 to 128` (differing over connections), or `no
    /// limit`; with ` (no limit on N connection(s))` when some named none.
    pub fn limit(&self) -> String {
        let named = match (self.max_concurrent_min, self.max_concurrent_max) {
            (Some(a), Some(b)) if a == b => a.to_string(),
            (Some(a), Some(b)) => format!("{a} to {b}"),
            _ => return "no limit".into(),
        };
        match self.unlimited {
            0 => named,
            n => format!("{named} (no limit on {n} connection(s))"),
        }
    }

    /// Whether `streams` per connection can exceed the smallest limit advertised: then
    /// the excess waits on the client.
    pub fn exceeded_by(&self, streams: usize) -> bool {
        self.max_concurrent_min
            .is_some_and(|m| streams as u64 > m as u64)
    }
}

impl LoadHttpResult {
    /// What failed, by kind as the report names them: [`ErrorKinds::summary`]'s kinds,
    /// then `unanswered at the end N` ([`LoadHttpResult::unanswered`]); `none` when
    /// nothing failed.
    pub fn failures(&self) -> String {
        match (self.errors.is_none(), self.unanswered) {
            (_, 0) => self.errors.summary(),
            (true, n) => format!("unanswered at the end {n}"),
            (false, n) => format!("{}, unanswered at the end {n}", self.errors.summary()),
        }
    }

    /// Requests started (`--rate max --requests N` claims each before its write): those
    /// answered, failed (less those given up unsent waiting for an HTTP/2 stream, never
    /// started) and unanswered at the end.
    pub fn started(&self) -> u64 {
        self.status.total() + self.errors.total() - self.timed_out_unsent().min(self.errors.total())
            + self.unanswered
    }

    /// Requests given up on the client while they waited for a free HTTP/2 stream past
    /// the timeout ([`Http2Streams::timed_out_waiting`]): never sent; 0 without HTTP/2.
    pub fn timed_out_unsent(&self) -> u64 {
        self.http2.map_or(0, |h| h.timed_out_waiting)
    }

    /// A send later than this after its intended time counts as late (1 ms: above the
    /// loop's timer resolution).
    pub const LATE_NS: u64 = 1_000_000;
}

/// A `load http` run: its plan and what it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadHttpRecord {
    /// The plan.
    pub plan: LoadHttpPlan,
    /// What it did.
    pub result: LoadHttpResult,
}

impl LoadHttpRecord {
    /// The rate at which requests were really sent, requests/s: over the plan's duration,
    /// or, for a run `interrupted` (stopped early), the gaps between its first and its last
    /// request (n requests span n - 1 gaps: n over the span would read 120/s for 100/s
    /// stopped after 6 requests; 0 with fewer than two): the planned duration would read a
    /// Ctrl-C as a slow server.
    pub fn sent_rate(&self, interrupted: bool) -> f64 {
        if !interrupted {
            return self.achieved_rate();
        }
        let r = &self.result;
        let span = r.last_sent_s - r.first_sent_s;
        if r.sent >= 2 && span > 0.0 {
            (r.sent - 1) as f64 / span
        } else {
            0.0
        }
    }

    /// The rate achieved, requests/s: those sent over the plan's duration (a run that
    /// ran to its end; else [`LoadHttpRecord::sent_rate`]); a closed loop's
    /// ([`LoadHttpRecord::closed_rate`]) its replies over its span.
    pub fn achieved_rate(&self) -> f64 {
        if self.plan.max_rate {
            return self.closed_rate();
        }
        self.result.sent as f64 / (self.plan.duration.as_nanos() as f64 / 1e9)
    }

    /// The rate answered, replies/s: final replies (every status) over the plan's
    /// duration; a closed loop's [`LoadHttpRecord::closed_rate`].
    pub fn answered_rate(&self) -> f64 {
        if self.plan.max_rate {
            return self.closed_rate();
        }
        self.answered() as f64 / (self.plan.duration.as_nanos() as f64 / 1e9)
    }

    /// A closed loop's (`--rate max`) rate: replies per second from the start to the
    /// last reply or failure (wrk's requests/s: completed requests over the run's time);
    /// 0 without a reply.
    pub fn closed_rate(&self) -> f64 {
        let r = &self.result;
        if r.last_end_s > 0.0 {
            self.answered() as f64 / r.last_end_s
        } else {
            0.0
        }
    }

    /// The achieved rate's error against the plan's, a fraction (negative: below it).
    pub fn rate_error(&self) -> f64 {
        self.achieved_rate() / self.plan.rate - 1.0
    }

    /// Final replies (every status class).
    pub fn answered(&self) -> u64 {
        self.result.status.total()
    }

    /// Why the run measured nothing, as one line for an error exit (2): Some when no
    /// request was answered (no reply of any status) in a run that went to its end,
    /// naming the connects' and the requests' failures by kind (requests still waiting
    /// at the end among them, `unanswered at the end N`). None when a reply came, or the
    /// run was `interrupted`.
    pub fn nothing_answered(&self, interrupted: bool) -> Option<String> {
        if interrupted || self.answered() > 0 {
            return None;
        }
        let r = &self.result;
        Some(format!(
            "{}: no request answered ({} sent; connects failed: {}; requests failed: {}){}",
            self.plan.request.url,
            r.sent,
            r.connect_errors.summary(),
            r.failures(),
            r.first_tls_error
                .as_ref()
                .map_or(String::new(), |t| format!("; first TLS failure: {t}"))
        ))
    }
}

/// `--verify`: the fix applied through the host guard, the server started again by
/// `--server-cmd` so its socket takes the new limit, the same load again, the host
/// restored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QuicVerification {
    /// Each change, in words ("sysctl net.core.rmem_max=7340032 (host-wide; restored
    /// afterwards)").
    pub applied: Vec<String>,
    /// The sysctls restored afterwards (name, value put back).
    pub restored: Vec<(String, String)>,
    /// The second run's result (its `server_udp` the socket as restarted); None when it
    /// did not run (`not_verified` says why).
    pub after: Option<Box<LoadHttpResult>>,
    /// Why nothing was verified, in one line; None when the second run ran.
    pub not_verified: Option<String>,
    /// Remarks (a restore that failed, the second run's error).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
