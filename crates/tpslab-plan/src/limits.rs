//! Every limit on a setting, stated once. Flags, plan files, sweep factors and records
//! read back are all checked against these.

use crate::PlanError;
use std::time::Duration;

/// An inclusive range of whole numbers in a unit (`""` for a plain count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Smallest allowed value.
    pub min: u64,
    /// Largest allowed value.
    pub max: u64,
    /// Unit shown after the range (`bytes`, `ns`, `us`), or empty.
    pub unit: &'static str,
}

impl Limit {
    /// What is allowed, e.g. `1..=1024` or `40..=65507 bytes`.
    pub fn allowed(&self) -> String {
        match self.unit {
            "" => format!("{}..={}", self.min, self.max),
            u => format!("{}..={} {u}", self.min, self.max),
        }
    }

    /// `v` when within the limit, else an error labelled `label`.
    pub fn check(&self, label: &str, v: u64) -> Result<u64, PlanError> {
        if (self.min..=self.max).contains(&v) {
            Ok(v)
        } else {
            Err(PlanError::value(label, v, self.allowed()))
        }
    }

    /// Parses `s` as a whole number and checks it (`label s: allowed ...` on any error).
    pub fn parse(&self, label: &str, s: &str) -> Result<u64, PlanError> {
        s.trim()
            .parse::<u64>()
            .map_err(|_| PlanError::value(label, format!("\"{s}\""), self.allowed()))
            .and_then(|v| self.check(label, v))
    }
}

/// An inclusive range of durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationLimit {
    /// Shortest allowed.
    pub min: Duration,
    /// Longest allowed.
    pub max: Duration,
}

impl DurationLimit {
    /// What is allowed, e.g. `1ms..=60s`.
    pub fn allowed(&self) -> String {
        format!(
            "{}..={}",
            humantime::format_duration(self.min),
            humantime::format_duration(self.max)
        )
    }

    /// `d` when within the limit, else an error labelled `label`.
    pub fn check(&self, label: &str, d: Duration) -> Result<Duration, PlanError> {
        if (self.min..=self.max).contains(&d) {
            Ok(d)
        } else {
            Err(PlanError::value(
                label,
                humantime::format_duration(d),
                self.allowed(),
            ))
        }
    }
}

/// SO_SNDBUF / SO_RCVBUF asked of a TCP socket, bytes (the kernel doubles it, and an int
/// holds the double).
pub const TCP_BUFFER_BYTES: Limit = Limit {
    min: 1024,
    max: i32::MAX as u64 / 2,
    unit: "bytes",
};

/// Bytes per write() of a bulk flow.
pub const WRITE_BYTES: Limit = Limit {
    min: 1,
    max: 16 << 20,
    unit: "bytes",
};

/// The pacing slack of a load: up to 2 ms, well inside the 5 ms of lag that a run's
/// schedule check forgives.
pub const PACING_SLACK: DurationLimit = DurationLimit {
    min: Duration::ZERO,
    max: Duration::from_millis(2),
};

/// The lab's round-trip time (twice the delay line's one-way delay).
pub const LAB_RTT: DurationLimit = DurationLimit {
    min: Duration::from_millis(1),
    max: Duration::from_secs(10),
};

/// A path's round-trip time as `bdp` and `doctor --for tcp` take it.
pub const PATH_RTT: DurationLimit = DurationLimit {
    min: Duration::from_micros(1),
    max: Duration::from_secs(60),
};

/// A middlebox's idle timeout as `doctor --for pool` takes it (up to a week).
pub const IDLE_TIMEOUT: DurationLimit = DurationLimit {
    min: Duration::from_secs(1),
    max: Duration::from_secs(7 * 24 * 3600),
};

/// The longest idle interval `probe idle` waits for (a study can last about this long).
pub const IDLE_PROBE_MAX: DurationLimit = DurationLimit {
    min: Duration::from_secs(2),
    max: Duration::from_secs(2 * 3600),
};

/// Connections `probe idle` holds open at once, the control connection included (at
/// least two idle ones).
pub const IDLE_PROBE_CONNECTIONS: Limit = Limit {
    min: 3,
    max: 256,
    unit: "",
};

/// Each interval of `probe pool` (timeouts, request spacing, validation, idle life).
pub const POOL_DURATION: DurationLimit = DurationLimit {
    min: Duration::from_millis(100),
    max: Duration::from_secs(600),
};

/// The lab middlebox's idle timeout for `probe idle`: above the control connection's
/// one-second probes, with room for their timers' lateness.
pub const LAB_IDLE_TIMEOUT: DurationLimit = DurationLimit {
    min: Duration::from_secs(2),
    max: Duration::from_secs(7 * 24 * 3600),
};

/// Connections `probe pool` keeps open.
pub const POOL_CONNECTIONS: Limit = Limit {
    min: 1,
    max: 64,
    unit: "",
};

/// Requests `probe pool` sends.
pub const POOL_REQUESTS: Limit = Limit {
    min: 1,
    max: 1000,
    unit: "",
};

/// Sockets receiving at once (an SO_REUSEPORT group) in `doctor --for udp`.
pub const SOCKETS: Limit = Limit {
    min: 1,
    max: 65_536,
    unit: "",
};

/// Packets on the delay line at once (queued + in propagation), per direction: a bound on
/// memory (x MTU bytes). Beyond it packets are dropped and counted as `line_full`.
pub const MAX_LINE_PACKETS: usize = 32768;

/// The largest UDP payload over IPv4, bytes (65535 - 8 UDP - 20 IP header bytes).
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Bytes of tpslab's datagram header (magic, run id, stream, sequence, intended and actual
/// send time); the engine's wire format asserts it has this length.
pub const HEADER_LEN: usize = 40;

/// Reference server threads, one SO_REUSEPORT socket each.
pub const SERVER_THREADS: Limit = Limit {
    min: 1,
    max: 1024,
    unit: "",
};

/// Datagrams per recvmmsg/sendmmsg call (1: recvfrom/sendto).
pub const BATCH: Limit = Limit {
    min: 1,
    max: 1024,
    unit: "",
};

/// SO_RCVBUF request, bytes: the kernel doubles it into an int, so at most i32::MAX / 2.
pub const RCVBUF_BYTES: Limit = Limit {
    min: 1,
    max: (i32::MAX / 2) as u64,
    unit: "bytes",
};

/// SO_BUSY_POLL, microseconds (up to one second).
pub const BUSY_POLL_US: Limit = Limit {
    min: 0,
    max: 1_000_000,
    unit: "us",
};

/// Generator threads (sockets) of an open-loop load.
pub const LOAD_THREADS: Limit = Limit {
    min: 1,
    max: 256,
    unit: "",
};

/// Flows (source ports, one socket each) of an open-loop load, over all its threads.
pub const FLOWS: Limit = Limit {
    min: 1,
    max: 1024,
    unit: "",
};

/// Flows of a load when `--flows` is not given (at least one per thread): 4 per socket of
/// a server's SO_REUSEPORT group of up to 8, so the kernel's hash leaves about 2 % of a
/// group's sockets without a flow (e^-4), where one flow per socket leaves 37 %.
pub const DEFAULT_FLOWS: usize = 32;

/// Generated datagram size, bytes: tpslab's header up to the largest UDP payload.
pub const SIZE_BYTES: Limit = Limit {
    min: HEADER_LEN as u64,
    max: MAX_UDP_PAYLOAD as u64,
    unit: "bytes",
};

/// A payload file's length, bytes.
pub const PAYLOAD_BYTES: Limit = Limit {
    min: 1,
    max: MAX_UDP_PAYLOAD as u64,
    unit: "bytes",
};

/// Width of a sequence field echoed by the protocol, bytes.
pub const SEQ_FIELD_BYTES: Limit = Limit {
    min: 1,
    max: 8,
    unit: "bytes",
};

/// Datagrams per burst.
pub const BURST: Limit = Limit {
    min: 1,
    max: 100_000_000,
    unit: "datagrams",
};

/// The highest mean rate of an open-loop load, datagrams per second (with `max` for back
/// to back).
pub const MAX_RATE_PPS: f64 = 100e6;

/// Runs per cell of a sweep.
pub const REPEAT: Limit = Limit {
    min: 1,
    max: 100,
    unit: "",
};

/// Busy work per datagram of the reference server (`--work`).
pub const WORK: DurationLimit = DurationLimit {
    min: Duration::ZERO,
    max: Duration::from_secs(1),
};

/// Waiting per request of the request/response server (`serve tcp --serial`).
pub const SERIAL: DurationLimit = DurationLimit {
    min: Duration::ZERO,
    max: Duration::from_secs(10),
};

/// Measurement window of an open-loop load.
pub const LOAD_DURATION: DurationLimit = DurationLimit {
    min: Duration::from_nanos(1),
    max: Duration::from_secs(24 * 3600),
};

/// Warm-up before the measurement window.
pub const WARMUP: DurationLimit = DurationLimit {
    min: Duration::ZERO,
    max: Duration::from_secs(3600),
};

/// Wait for late replies after the last send.
pub const DRAIN: DurationLimit = DurationLimit {
    min: Duration::ZERO,
    max: Duration::from_secs(60),
};

/// Sampling interval of every observer and sampler (kernel counters, TCP_INFO, thread
/// states).
pub const SAMPLE_INTERVAL: DurationLimit = DurationLimit {
    min: Duration::from_millis(1),
    max: Duration::from_secs(60),
};

/// Measured length of each step of a closed-loop ramp.
pub const STEP_DURATION: DurationLimit = DurationLimit {
    min: Duration::from_millis(100),
    max: Duration::from_secs(3600),
};

/// Warm-up of each ramp step.
pub const STEP_WARMUP: DurationLimit = DurationLimit {
    min: Duration::ZERO,
    max: Duration::from_secs(600),
};

/// Users of a closed-loop ramp's step (each holds a socket).
pub const RAMP_USERS: Limit = Limit {
    min: 1,
    max: 10_000,
    unit: "",
};

/// Steps of a closed-loop ramp.
pub const RAMP_STEPS: usize = 200;

/// HTTP/2 streams in flight per connection (`load http --http2 --streams`).
pub const HTTP2_STREAMS: Limit = Limit {
    min: 1,
    max: 1_000,
    unit: "",
};

/// HTTP/2 schedules of a `load http --http2`, all connections (`--connections x
/// --streams`): each keeps a few hundred bytes of state.
pub const HTTP2_SCHEDULES: usize = 100_000;

/// Requests a second of an open-loop HTTP load (`load http --rate`), all connections.
pub const HTTP_RATE: f64 = 10e6;

/// Length of an open-loop HTTP load (`load http --duration`).
pub const HTTP_LOAD_DURATION: DurationLimit = DurationLimit {
    min: Duration::from_millis(100),
    max: Duration::from_secs(24 * 3600),
};

/// Requests of a closed-loop HTTP load (`load http --rate max --requests`).
pub const HTTP_LOAD_REQUESTS: Limit = Limit {
    min: 1,
    max: 10_000_000_000,
    unit: "",
};

/// A closed-loop user's think time between a reply and its next request.
pub const THINK: DurationLimit = DurationLimit {
    min: Duration::ZERO,
    max: Duration::from_secs(600),
};

/// How long a closed-loop request may wait for its reply.
pub const REQUEST_TIMEOUT: DurationLimit = DurationLimit {
    min: Duration::from_millis(1),
    max: Duration::from_secs(600),
};

/// How long `watch` observes (it runs as a small exporter for days; a year at most).
pub const WATCH_DURATION: DurationLimit = DurationLimit {
    min: Duration::from_millis(1),
    max: Duration::from_secs(366 * 24 * 3600),
};

/// Length of a TCP flow (`tcp`).
pub const TCP_DURATION: DurationLimit = DurationLimit {
    min: Duration::from_secs(1),
    max: Duration::from_secs(3600),
};

/// Samples a command that keeps its whole series (TCP_INFO of `tcp`) may plan: duration /
/// interval at most this (1 h at 10 ms).
pub const MAX_KEPT_SAMPLES: u64 = 360_000;

/// TCP_INFO samples of one flow in a record read back: [`MAX_KEPT_SAMPLES`], one right
/// after connect and one at the end (a longer list is refused while read).
pub const FLOW_SAMPLES: usize = MAX_KEPT_SAMPLES as usize + 2;

/// Samples an observer keeps in memory (a longer run's are thinned to half of it), and
/// the longest observer series a record read back may hold: 20 000 (about 200 s at 10 ms).
pub const OBSERVER_SAMPLES: usize = 20_000;

/// Named series of an observer in a record read back (the observer writes some 20: queues,
/// per-socket and host-wide rates).
pub const OBSERVER_SERIES: usize = 64;

/// The largest magnitude of any count or figure in a record read back (2^53, about
/// 9.0e15: every whole number up to it is exact in an f64). No run reaches it (100 Mpps
/// for a year is 3.2e15 datagrams; a year in ns is 3.2e16 but no record keeps one), and a
/// sum of up to 2048 such counts (1024 agents' totals, a ledger's rows) fits in a u64.
/// Identifiers (a run id, a sweep's seed) are not figures and are not held to it.
pub const MAX_FIGURE: u64 = 1 << 53;

/// Online CPUs of the host a record was written on (Linux's NR_CPUS is at most 8192).
pub const CPUS: Limit = Limit {
    min: 1,
    max: 8192,
    unit: "",
};

/// A latency histogram kept in a record (base64 of HdrHistogram's V2 deflate encoding),
/// bytes of text. tpslab's histograms (1 ns to 100 s, 3 significant digits: 27 648
/// counts) encode to a few KB, at most some 330 KB with every count set.
pub const HISTOGRAM_ENCODED_BYTES: usize = 1 << 20;

/// The same histogram inflated (the V2 header and its counts, at most 9 bytes each), bytes:
/// at most some 250 KB for tpslab's histograms. Inflating stops here.
pub const HISTOGRAM_DECODED_BYTES: usize = 1 << 20;

/// The highest value a latency histogram in a record tracks, ns (100 s: tpslab's bound).
pub const HISTOGRAM_MAX_NS: u64 = 100_000_000_000;

/// Significant digits of a latency histogram in a record, at most (tpslab's keep 3).
pub const HISTOGRAM_MAX_DIGITS: u32 = 3;

/// Checks that `duration / interval` samples fit in [`MAX_KEPT_SAMPLES`].
pub fn check_kept_samples(duration: Duration, interval: Duration) -> Result<(), PlanError> {
    let n = duration.as_nanos() / interval.as_nanos().max(1);
    if n > MAX_KEPT_SAMPLES as u128 {
        let min_iv = Duration::from_nanos(
            (duration.as_nanos() / MAX_KEPT_SAMPLES as u128).min(u64::MAX as u128) as u64,
        );
        return Err(PlanError::Conflict(format!(
            "--interval {} over --duration {}: {n} samples; allowed up to {MAX_KEPT_SAMPLES} (an --interval of at least {})",
            humantime::format_duration(interval),
            humantime::format_duration(duration),
            humantime::format_duration(min_iv)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_check_inclusive_bounds_and_name_the_value() {
        assert_eq!(SERVER_THREADS.check("--threads", 1), Ok(1));
        assert_eq!(SERVER_THREADS.check("--threads", 1024), Ok(1024));
        let e = SERVER_THREADS.check("--threads", 0).unwrap_err();
        assert_eq!(e.to_string(), "--threads 0: allowed 1..=1024");
        let e = RCVBUF_BYTES.check("--rcvbuf", 1 << 30).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--rcvbuf 1073741824: allowed 1..=1073741823 bytes"
        );
        assert_eq!(
            BATCH.parse("--batch", "x").unwrap_err().to_string(),
            "--batch \"x\": allowed 1..=1024"
        );
    }

    #[test]
    fn duration_limits_print_human_durations() {
        let e = SAMPLE_INTERVAL
            .check("--interval", Duration::from_micros(500))
            .unwrap_err();
        assert_eq!(e.to_string(), "--interval 500us: allowed 1ms..=1m");
        assert!(SAMPLE_INTERVAL
            .check("--interval", Duration::from_secs(60))
            .is_ok());
    }

    #[test]
    fn kept_samples_bound_a_long_fine_series() {
        assert!(check_kept_samples(Duration::from_secs(3600), Duration::from_millis(10)).is_ok());
        let e = check_kept_samples(Duration::from_secs(3600), Duration::from_millis(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("3600000 samples") && e.contains("at least 10ms"),
            "{e}"
        );
    }

    #[test]
    fn the_header_fits_in_the_smallest_datagram() {
        assert_eq!(SIZE_BYTES.min as usize, HEADER_LEN);
    }
}
