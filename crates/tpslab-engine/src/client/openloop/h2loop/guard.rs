//! A connection's limits on what its server may make it do, as hardened peers keep theirs
//! (nghttp2's outbound-ack and CONTINUATION limits, the h2 crate's send buffer): the
//! acknowledgements a server's PING and SETTINGS frames queue unwritten, the frames a
//! second that advance no request (PING, SETTINGS, WINDOW_UPDATE, resets of streams not
//! in flight, empty frames), a header block's bytes and CONTINUATION frames, the bytes of
//! requests queued in the write buffer. A server past one is closed with GOAWAY
//! ENHANCE_YOUR_CALM and counted by kind ([`Fault`], the record's `Http2Faults`).
//!
//! Each budget is per connection and per second (or per header block), far above what a
//! well-behaved server sends (nginx: one SETTINGS and one WINDOW_UPDATE a connection, a
//! RST_STREAM only for a stream in flight), and checked with a few integer operations: no
//! allocation, no system call.

use tpslab_record::load_http::Http2Faults;

/// PING and SETTINGS acknowledgements queued and not yet written, per connection, at
/// most (nghttp2's `max_outbound_ack`): past it, the server sends faster than it reads.
pub(super) const MAX_PENDING_ACKS: u32 = 1_000;

/// Bytes queued unwritten in a connection's write buffer past which no request starts
/// and no request body continues there until the socket takes them (the h2 crate's
/// `max_send_buffer_size` is 400 KiB): the buffer holds at most this, one DATA frame of
/// a body (at most the 1 MiB body), one request's HEADERS, [`MAX_PENDING_ACKS`]
/// acknowledgements (17 bytes each), a RST_STREAM per stream and a GOAWAY.
pub(super) const TX_HIGH: usize = 256 * 1024;

/// A reply's header block across HEADERS and CONTINUATION frames, bytes, at most.
pub(super) const MAX_HEADER_BLOCK: usize = 64 * 1024;

/// CONTINUATION frames in one header block, at most (nghttp2's default).
pub(super) const MAX_CONTINUATIONS: u32 = 8;

/// Parameters in one SETTINGS frame, at most (nghttp2's default).
pub(super) const MAX_SETTINGS_PARAMS: usize = 32;

/// The window the per-second budgets count over, ns.
const WINDOW_NS: u64 = 1_000_000_000;

/// PING frames a second per connection, at most.
pub(super) const PINGS_PER_S: u32 = 1_000;
/// SETTINGS frames a second per connection, at most.
pub(super) const SETTINGS_PER_S: u32 = 100;
/// RST_STREAM frames a second per connection for streams not in flight (closed
/// already: a reset of one in flight fails its request and counts there), at most.
pub(super) const IDLE_RESETS_PER_S: u32 = 100;
/// WINDOW_UPDATE frames a second per connection, at most: this many, plus
/// [`WINDOW_UPDATES_PER_STREAM`] for each stream started in that second.
pub(super) const WINDOW_UPDATES_PER_S: u32 = 1_000;
/// WINDOW_UPDATE frames allowed per stream started (a body's stream and connection
/// window given back as the server reads it).
pub(super) const WINDOW_UPDATES_PER_STREAM: u32 = 4;
/// Frames that carry nothing (empty DATA without END_STREAM, PRIORITY, unknown types,
/// PING or SETTINGS acknowledgements never asked for, GOAWAY again) a second per
/// connection, at most.
pub(super) const EMPTY_PER_S: u32 = 1_000;

/// Reads of a connection's socket (each up to its 64 KiB buffer) handled per readiness
/// event, at most: a server that writes without pause cannot keep the loop from its
/// schedules, its timeouts and the plan's end.
pub(super) const READS_PER_EVENT: usize = 4;

/// A limit the server passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flood {
    Ping,
    Settings,
    Reset,
    WindowUpdate,
    Continuation,
    HeaderBlock,
    Empty,
}

impl Flood {
    /// The failure's kind, as counted (a protocol error) and named.
    pub(super) fn kind(self) -> &'static str {
        match self {
            Flood::Ping => "http2: PING flood (GOAWAY ENHANCE_YOUR_CALM)",
            Flood::Settings => "http2: SETTINGS flood (GOAWAY ENHANCE_YOUR_CALM)",
            Flood::Reset => "http2: RST_STREAM flood (GOAWAY ENHANCE_YOUR_CALM)",
            Flood::WindowUpdate => "http2: WINDOW_UPDATE flood (GOAWAY ENHANCE_YOUR_CALM)",
            Flood::Continuation => "http2: CONTINUATION flood (GOAWAY ENHANCE_YOUR_CALM)",
            Flood::HeaderBlock => {
                "http2: a header block over 65536 bytes (GOAWAY ENHANCE_YOUR_CALM)"
            }
            Flood::Empty => "http2: empty frame flood (GOAWAY ENHANCE_YOUR_CALM)",
        }
    }
}

/// Why a connection is closed for its server's doing: a limit passed, or a frame the
/// protocol forbids (`http2: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Fault {
    Flood(Flood),
    Protocol(String),
}

impl From<Flood> for Fault {
    fn from(f: Flood) -> Fault {
        Fault::Flood(f)
    }
}

impl From<String> for Fault {
    fn from(s: String) -> Fault {
        Fault::Protocol(s)
    }
}

impl Fault {
    /// The failure's kind (`http2: ...`).
    pub(super) fn kind(&self) -> &str {
        match self {
            Fault::Flood(f) => f.kind(),
            Fault::Protocol(s) => s,
        }
    }

    /// The GOAWAY's error code: ENHANCE_YOUR_CALM for a flood, PROTOCOL_ERROR else.
    pub(super) fn code(&self) -> u32 {
        match self {
            Fault::Flood(_) => 0xb,
            Fault::Protocol(_) => 0x1,
        }
    }

    /// Counts it in `f`, by kind.
    pub(super) fn count(&self, f: &mut Http2Faults) {
        let n = match self {
            Fault::Flood(Flood::Ping) => &mut f.ping_flood,
            Fault::Flood(Flood::Settings) => &mut f.settings_flood,
            Fault::Flood(Flood::Reset) => &mut f.reset_flood,
            Fault::Flood(Flood::WindowUpdate) => &mut f.window_update_flood,
            Fault::Flood(Flood::Continuation) => &mut f.continuation_flood,
            Fault::Flood(Flood::HeaderBlock) => &mut f.header_block,
            Fault::Flood(Flood::Empty) => &mut f.empty_frame_flood,
            Fault::Protocol(_) => &mut f.protocol,
        };
        *n += 1;
    }
}

/// A connection's counts against the limits.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Guard {
    /// When the current second began, ns.
    since: u64,
    /// Frames in it: PING, SETTINGS, idle resets, WINDOW_UPDATE, empty.
    counts: [u32; 5],
    /// Streams started in it.
    started: u32,
    /// Acknowledgements queued since the write buffer was last written whole.
    acks: u32,
}

impl Guard {
    /// One frame of `f`'s kind (Ping, Settings, Reset, WindowUpdate or Empty) at `now`,
    /// ns: Err past its budget for the second.
    pub(super) fn frame(&mut self, f: Flood, now: u64) -> Result<(), Flood> {
        if now.saturating_sub(self.since) >= WINDOW_NS {
            self.since = now;
            self.counts = [0; 5];
            self.started = 0;
        }
        let (i, max) = match f {
            Flood::Ping => (0, PINGS_PER_S),
            Flood::Settings => (1, SETTINGS_PER_S),
            Flood::Reset => (2, IDLE_RESETS_PER_S),
            Flood::WindowUpdate => (
                3,
                WINDOW_UPDATES_PER_S
                    .saturating_add(WINDOW_UPDATES_PER_STREAM.saturating_mul(self.started)),
            ),
            _ => (4, EMPTY_PER_S),
        };
        self.counts[i] += 1;
        if self.counts[i] > max {
            Err(f)
        } else {
            Ok(())
        }
    }

    /// An acknowledgement (of a PING or SETTINGS, `f`) is to be queued: Err when
    /// [`MAX_PENDING_ACKS`] wait unwritten already.
    pub(super) fn ack(&mut self, f: Flood) -> Result<(), Flood> {
        if self.acks >= MAX_PENDING_ACKS {
            return Err(f);
        }
        self.acks += 1;
        Ok(())
    }

    /// A stream started (more WINDOW_UPDATE frames are due).
    pub(super) fn started(&mut self) {
        self.started = self.started.saturating_add(1);
    }

    /// The write buffer was written whole: no acknowledgement waits.
    pub(super) fn written(&mut self) {
        self.acks = 0;
    }
}

/// Whether a write buffer of `len` bytes, `off` of them written, has room for a request
/// ([`TX_HIGH`]).
pub(super) fn tx_room(len: usize, off: usize) -> bool {
    len - off < TX_HIGH
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn each_budget_holds_for_its_second_and_starts_again_with_the_next() {
        for (f, max) in [
            (Flood::Ping, PINGS_PER_S),
            (Flood::Settings, SETTINGS_PER_S),
            (Flood::Reset, IDLE_RESETS_PER_S),
            (Flood::WindowUpdate, WINDOW_UPDATES_PER_S),
            (Flood::Empty, EMPTY_PER_S),
        ] {
            let mut g = Guard::default();
            for i in 0..max {
                assert_eq!(g.frame(f, S + i as u64), Ok(()), "{f:?} {i}");
            }
            assert_eq!(g.frame(f, S + 900_000_000), Err(f), "{f:?} over {max}");
            // A second later: a new budget.
            assert_eq!(g.frame(f, 2 * S + 1), Ok(()), "{f:?}");
        }
    }

    #[test]
    fn budgets_are_kept_apart() {
        let mut g = Guard::default();
        for _ in 0..SETTINGS_PER_S {
            g.frame(Flood::Settings, 5).unwrap();
        }
        // PINGs have their own budget.
        g.frame(Flood::Ping, 6).unwrap();
        assert_eq!(g.frame(Flood::Settings, 7), Err(Flood::Settings));
    }

    #[test]
    fn window_updates_are_allowed_per_stream_started() {
        let mut g = Guard::default();
        g.frame(Flood::WindowUpdate, S).unwrap();
        for _ in 0..100 {
            g.started();
        }
        let allowed = WINDOW_UPDATES_PER_S + 100 * WINDOW_UPDATES_PER_STREAM;
        for _ in 1..allowed {
            g.frame(Flood::WindowUpdate, S + 1).unwrap();
        }
        assert_eq!(
            g.frame(Flood::WindowUpdate, S + 2),
            Err(Flood::WindowUpdate)
        );
    }

    #[test]
    fn acknowledgements_unwritten_are_capped_until_the_buffer_is_written() {
        let mut g = Guard::default();
        for _ in 0..MAX_PENDING_ACKS {
            g.ack(Flood::Ping).unwrap();
        }
        assert_eq!(g.ack(Flood::Ping), Err(Flood::Ping));
        assert_eq!(g.ack(Flood::Settings), Err(Flood::Settings));
        g.written();
        assert_eq!(g.ack(Flood::Ping), Ok(()));
    }

    #[test]
    fn the_write_buffer_takes_requests_below_its_mark() {
        assert!(tx_room(0, 0));
        assert!(tx_room(TX_HIGH + 10, 11));
        assert!(!tx_room(TX_HIGH, 0));
        assert!(!tx_room(TX_HIGH + 10, 10));
    }

    #[test]
    fn faults_count_by_kind_with_their_goaway_code() {
        let mut f = Http2Faults::default();
        for x in [
            Fault::Flood(Flood::Ping),
            Fault::Flood(Flood::Ping),
            Fault::Flood(Flood::Continuation),
            Fault::Protocol("http2: RST_STREAM on idle stream 9".into()),
        ] {
            x.count(&mut f);
        }
        assert_eq!((f.ping_flood, f.continuation_flood, f.protocol), (2, 1, 1));
        assert_eq!(f.total(), 4);
        assert_eq!(Fault::Flood(Flood::Settings).code(), 0xb);
        assert_eq!(Fault::from("http2: x".to_string()).code(), 0x1);
        assert!(Flood::Ping.kind().contains("PING flood"));
        assert_eq!(
            f.summary(),
            "PING flood on 2 connections, CONTINUATION flood on 1 connection, protocol error on 1 connection"
        );
    }
}
