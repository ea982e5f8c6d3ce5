//! One loop thread's counts of an open (or closed) loop of requests, merged into the
//! run's as each thread returns: the two latency histograms, the requests by outcome,
//! bytes, connections, late sends, the reply gaps; and the kind a failure counts as.

use hdrhistogram::Histogram;
use tpslab_analysis::stats::new_ns_histogram;
use tpslab_record::http_counts::{ErrorKinds, StatusClasses, StatusCodes};

use super::live;

/// One loop's counts (and, merged, the run's).
pub(crate) struct OpenLocal {
    pub(super) corrected: Histogram<u64>,
    pub(super) uncorrected: Histogram<u64>,
    pub(super) sent: u64,
    pub(super) status: StatusClasses,
    pub(super) codes: StatusCodes,
    pub(super) errors: ErrorKinds,
    pub(super) connect_errors: ErrorKinds,
    pub(super) unanswered: u64,
    pub(super) bytes_out: u64,
    pub(super) bytes_in: u64,
    pub(super) connections: u64,
    pub(super) backoffs: u64,
    pub(super) late: u64,
    pub(super) max_lag_ns: u64,
    pub(super) behind: u64,
    pub(super) behind_max_ns: u64,
    /// First and last request written, monotonic ns (first u64::MAX: none).
    pub(super) first: u64,
    pub(super) last: u64,
    /// The last reply read or request failed, monotonic ns (0: none).
    pub(super) last_end: u64,
    /// The first TLS failure's text (`tls: ...`).
    pub(super) first_tls_error: Option<String>,
    /// This loop's side of the per-interval stream.
    pub(super) live: Option<live::LiveLocal>,
    /// The replies by the time from their first byte to their last (response time from
    /// the actual send).
    pub(super) gaps: tpslab_record::gaps::ReplyGaps,
    /// The loop threads' CPU (set on the run's total only).
    pub(super) loop_cpu: Option<tpslab_record::load_http::LoopCpu>,
    /// The series' point length, s, and points (set on the run's total only).
    pub(super) series: Option<(f64, Vec<tpslab_record::http_series::HttpPoint>)>,
}

impl OpenLocal {
    pub(super) fn new() -> OpenLocal {
        OpenLocal {
            corrected: new_ns_histogram(),
            uncorrected: new_ns_histogram(),
            sent: 0,
            status: StatusClasses::default(),
            codes: StatusCodes::default(),
            errors: ErrorKinds::default(),
            connect_errors: ErrorKinds::default(),
            unanswered: 0,
            bytes_out: 0,
            bytes_in: 0,
            connections: 0,
            backoffs: 0,
            late: 0,
            max_lag_ns: 0,
            behind: 0,
            behind_max_ns: 0,
            first: u64::MAX,
            last: 0,
            last_end: 0,
            first_tls_error: None,
            live: None,
            gaps: Default::default(),
            loop_cpu: None,
            series: None,
        }
    }

    /// The running counts the per-interval stream reads.
    pub(super) fn counts(&self) -> live::Counts {
        live::Counts {
            sent: self.sent,
            status: self.status,
            codes: self.codes,
            errors: self.errors,
            connect_errors: self.connect_errors,
        }
    }

    /// Publishes the running counts (and `latency`, ns) to the per-interval stream, if any.
    pub(super) fn publish(&mut self, latency: Option<u64>) {
        if self.live.is_none() {
            return;
        }
        let c = self.counts();
        if let Some(p) = self.live.as_mut() {
            p.publish(c, latency);
        }
    }

    pub(super) fn merge(&mut self, o: &OpenLocal) {
        // Same bounds: adding cannot fail.
        let _ = self.corrected.add(&o.corrected);
        let _ = self.uncorrected.add(&o.uncorrected);
        self.sent += o.sent;
        let (s, t) = (&mut self.status, &o.status);
        (s.s2xx, s.s3xx, s.s4xx, s.s5xx, s.other) = (
            s.s2xx + t.s2xx,
            s.s3xx + t.s3xx,
            s.s4xx + t.s4xx,
            s.s5xx + t.s5xx,
            s.other + t.other,
        );
        self.codes.merge(&o.codes);
        self.errors.add(&o.errors);
        self.connect_errors.add(&o.connect_errors);
        self.unanswered += o.unanswered;
        self.bytes_out += o.bytes_out;
        self.bytes_in += o.bytes_in;
        self.connections += o.connections;
        self.backoffs += o.backoffs;
        self.late += o.late;
        self.max_lag_ns = self.max_lag_ns.max(o.max_lag_ns);
        self.behind += o.behind;
        self.behind_max_ns = self.behind_max_ns.max(o.behind_max_ns);
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
        self.last_end = self.last_end.max(o.last_end);
        if self.first_tls_error.is_none() {
            self.first_tls_error.clone_from(&o.first_tls_error);
        }
        self.gaps.merge(&o.gaps);
    }
}

/// The kind a failure counts as, from its text ([`crate::client::proto::io_kind`]'s words, a
/// protocol's `http: ...`).
pub(super) fn error_slot<'e>(e: &'e mut ErrorKinds, kind: &str) -> &'e mut u64 {
    let k = kind.strip_prefix("connect: ").unwrap_or(kind);
    match k {
        "connection refused" => &mut e.refused,
        "connection reset" | "broken pipe" => &mut e.reset,
        "timeout" => &mut e.timeout,
        "closed by peer" => &mut e.closed,
        // HTTP/2: the server's RST_STREAM.
        _ if k.starts_with("stream reset") => &mut e.reset,
        tpslab_record::http_counts::UNSOLICITED => &mut e.unsolicited,
        _ if k.starts_with("tls: ") => &mut e.tls,
        _ if k.starts_with("http") || k == "frame too long" => &mut e.protocol,
        _ => &mut e.other,
    }
}
