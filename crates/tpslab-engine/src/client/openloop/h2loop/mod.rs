//! `load http --http2`: the open loop ([`crate::client::openloop`]'s `Schedule`) over HTTP/2
//! connections, several streams in flight on each; and `ramp http --http2`, the same loop
//! as a closed loop on a ramp's `Tally` (each schedule a user that joins at its step and
//! sends after its think time; see [`H2Run::closed`]). h2c with prior knowledge for
//! `http://`, ALPN `h2` over TLS for `https://` (a server that does not agree to h2 ends
//! the run with one line, as does one that answers the preface with HTTP/1.x).
//!
//! The schedules: `connections * streams` of them (`LoadHttpPlan::schedules`), schedule
//! `u` on connection `u % connections`, each at `rate / schedules` requests a second with
//! one request in flight at a time, as wrk2's connections are; its latency from its
//! intended send time (corrected) and from its actual send (uncorrected). A schedule due
//! while its connection has no stream free (the server's SETTINGS_MAX_CONCURRENT_STREAMS)
//! or is being made again waits in the connection's queue; its send counts as late, not
//! as the generator's own lag.
//!
//! Each loop thread owns a share of the connections (connection `c` on loop `c % loops`)
//! on its own epoll, with the due times of their schedules on a heap; frames are cut and
//! written by [`crate::client::proto::h2`]. Flow control: this client announces windows of
//! [`h2::RECV_WINDOW`] and gives them back (WINDOW_UPDATE) once half is used; a request's
//! body is sent within the server's stream and connection windows and its
//! SETTINGS_MAX_FRAME_SIZE, the rest when a WINDOW_UPDATE comes. A request counts as sent
//! when its last frame is handed to the connection's write (at once, but for a full socket
//! buffer).
//!
//! Failures by kind: a RST_STREAM from the server fails its stream (`reset`); a GOAWAY
//! lets the streams it names finish, sends those above its last stream again on a new
//! connection (the server did not process them: not counted twice) and makes the
//! connection again once its streams are done; bytes that are not HTTP/2 fail every stream
//! of the connection (`protocol`); a stream without its reply within `--timeout` is
//! cancelled (RST_STREAM CANCEL, `timeout`); a request that waited on the client for a
//! free stream past it fails the same (`timeout`, never sent). Bytes: requests' frames
//! out, every byte read in (TLS: plaintext).
//!
//! Here: what a run shares, the loop's state and its event loop; the connections' I/O in
//! `conn`, the frames read in `frames`, the streams (and the schedules waiting for one)
//! in `streams`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;

use tpslab_net::mono_ns;
use tpslab_net::poll::Epoll;

use crate::client::books::Books;
use crate::client::evloop::Waits;
use crate::client::proto::h2;
use crate::client::proto::tls::TlsClient;
use tpslab_record::load_http::Http2Streams;

mod conn;
mod frames;
mod guard;
mod load;
mod settings;
mod streams;

pub(in crate::client::openloop) use load::run_load_h2;

/// What every loop of a run shares.
pub(crate) struct H2Run<'a, B: Books> {
    /// The clock and the counts: the open loop's [`super::Schedule`], or a closed-loop
    /// ramp's [`crate::client::tally::Tally`].
    pub(crate) sched: &'a B,
    /// A closed loop (`ramp http --http2`): a user's response time counts from when it
    /// was ready to send (after its think time), so a wait for a free stream or for its
    /// connection is part of it; error statuses (4xx, 5xx) count as failures, as
    /// HTTP/1.1's do. Else (the open loop) latency is from the intended and the actual
    /// send, and statuses are counted by class.
    pub(crate) closed: bool,
    /// The URL's address.
    pub(crate) target: SocketAddr,
    /// The URL, for errors.
    pub(crate) url: String,
    /// `https://`: the TLS client (ALPN `h2`).
    pub(crate) tls: Option<TlsClient>,
    /// The request's header list ([`h2::request_headers`]).
    pub(crate) headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The request's body.
    pub(crate) body: Vec<u8>,
    /// Connections in all.
    pub(crate) connections: usize,
    /// Schedules (streams) per connection.
    pub(crate) streams: usize,
    /// A failure that ends the run (the server does not speak HTTP/2): its line.
    pub(crate) fatal: Mutex<Option<String>>,
    /// The servers' stream limits and the waits for a free stream, per step of
    /// [`Books::step_starts`] (one for an open loop, a ramp's steps), every loop's merged
    /// as it ends.
    pub(crate) seen: Mutex<Vec<Http2Streams>>,
}

impl<B: Books> H2Run<'_, B> {
    fn fatal(&self, why: String) {
        let mut f = self.fatal.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(why);
        }
        self.sched.abort();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CState {
    /// No socket: made again at `retry_at`.
    Closed,
    Connecting,
    Handshaking,
    /// The preface written: waiting for the server's SETTINGS.
    Settings,
    Open,
}

/// Bytes of a connection's read buffer: several frames of the default maximum size.
const RX_BYTES: usize = 65_536;

/// How often streams and connects are checked for their timeout, ns.
const TIMEOUT_SCAN_NS: u64 = 10_000_000;

/// Appends a connection's own frames to its `tx` with `put` (the preface and SETTINGS, a
/// SETTINGS or PING ack, WINDOW_UPDATE, RST_STREAM) and counts their bytes out as a
/// request's frames are: bytes_out is every HTTP/2 byte the client wrote.
fn control<B: Books>(
    books: &B,
    l: &mut B::Local,
    tx: &mut Vec<u8>,
    put: impl FnOnce(&mut Vec<u8>),
) {
    let n = tx.len();
    put(tx);
    books.wrote(l, tx.len() - n);
}

struct Conn {
    state: CState,
    sock: Option<socket2::Socket>,
    tls: Option<Box<rustls::ClientConnection>>,
    gen: u32,
    interest: u32,
    /// Connect, handshake or SETTINGS deadline, ns (0: none).
    deadline: u64,
    /// When Closed: made again from this time on, ns.
    retry_at: u64,
    rx: Vec<u8>,
    rx_end: usize,
    tx: Vec<u8>,
    tx_off: usize,
    dec: h2::HeaderDecoder,
    /// The first request's header block and every later one's ([`h2::header_blocks`]).
    blocks: (Vec<u8>, Vec<u8>),
    first_sent: bool,
    /// The server's SETTINGS: streams at once, a new stream's send window, largest frame.
    peer: settings::PeerSettings,
    /// When its server's first SETTINGS came (it opened), ns (0: not yet).
    opened_at: u64,
    /// The schedules waiting when it opened that found no stream free were counted as
    /// waiting for one (later ones are as they queue).
    swept: bool,
    /// The connection's send window, bytes.
    send_window: i64,
    /// Bytes received since the last connection WINDOW_UPDATE.
    recv_unacked: u32,
    next_sid: u32,
    /// Stream id -> local schedule index, for streams in flight.
    streams: HashMap<u32, usize>,
    /// Schedules due, waiting for a stream (or for the connection).
    waiting: VecDeque<usize>,
    /// Streams with request body left to send (waiting for window).
    blocked: VecDeque<usize>,
    /// A header block being received across CONTINUATION frames: its stream, its bytes,
    /// its HEADERS' END_STREAM.
    hdr_sid: u32,
    hdr: Vec<u8>,
    hdr_end_stream: bool,
    /// CONTINUATION frames of the header block being received.
    hdr_frames: u32,
    /// A GOAWAY's last stream: no new stream on this connection.
    goaway: Option<u32>,
    /// Its counts against the server's floods.
    guard: guard::Guard,
    /// A reply came on it (else a GOAWAY or close makes it again after a back-off).
    served: bool,
    /// The slot's last back-off before a connect, ns (0: none since a reply came): the
    /// next is twice it, 1 ms to 1 s ([`crate::client::users::next_backoff`], as HTTP/1.1's
    /// users); kept when the connection is made again.
    backoff_ns: u64,
    /// Its read budget ran out with TLS plaintext perhaps left in the session: read again
    /// at the loop's next turn (no readiness event would say so).
    more: bool,
}

impl Conn {
    fn new(streams: usize) -> Conn {
        Conn {
            state: CState::Closed,
            sock: None,
            tls: None,
            gen: 0,
            interest: 0,
            deadline: 0,
            retry_at: 0,
            rx: vec![0; RX_BYTES],
            rx_end: 0,
            tx: Vec::with_capacity(4096),
            tx_off: 0,
            dec: h2::HeaderDecoder::default(),
            blocks: (vec![], vec![]),
            first_sent: false,
            peer: settings::PeerSettings::default(),
            opened_at: 0,
            swept: false,
            send_window: h2::DEFAULT_WINDOW,
            recv_unacked: 0,
            next_sid: 1,
            streams: HashMap::with_capacity(streams * 2),
            waiting: VecDeque::with_capacity(streams),
            blocked: VecDeque::with_capacity(streams),
            hdr_sid: 0,
            hdr: vec![],
            hdr_end_stream: false,
            hdr_frames: 0,
            goaway: None,
            guard: guard::Guard::default(),
            served: false,
            backoff_ns: 0,
            more: false,
        }
    }

    /// Closed, to be made again from `retry_at` (ns): every field as [`Conn::new`] has it
    /// but the schedules waiting (they wait on for the next connection), the back-off
    /// and a new `gen`
    /// (events of the old socket are ignored). Its buffers are emptied, not freed: a
    /// connection slot allocates its 64 KiB read buffer once, not at every reconnect.
    fn reset(&mut self, retry_at: u64) {
        // Every field named: one added to `Conn` must be said here too.
        let Conn {
            state,
            sock,
            tls,
            gen,
            interest,
            deadline,
            retry_at: retry,
            rx: _,
            rx_end,
            tx,
            tx_off,
            dec,
            blocks,
            first_sent,
            peer,
            opened_at,
            swept,
            send_window,
            recv_unacked,
            next_sid,
            streams,
            waiting: _,
            blocked,
            hdr_sid,
            hdr,
            hdr_end_stream,
            hdr_frames,
            goaway,
            guard,
            served,
            backoff_ns: _,
            more,
        } = self;
        *state = CState::Closed;
        *sock = None;
        *tls = None;
        *gen = gen.wrapping_add(1);
        *interest = 0;
        *deadline = 0;
        *retry = retry_at;
        *rx_end = 0;
        tx.clear();
        *tx_off = 0;
        *dec = h2::HeaderDecoder::default();
        blocks.0.clear();
        blocks.1.clear();
        *first_sent = false;
        *peer = settings::PeerSettings::default();
        *opened_at = 0;
        *swept = false;
        *send_window = h2::DEFAULT_WINDOW;
        *recv_unacked = 0;
        *next_sid = 1;
        streams.clear();
        blocked.clear();
        *hdr_sid = 0;
        hdr.clear();
        *hdr_end_stream = false;
        *hdr_frames = 0;
        *goaway = None;
        *guard = guard::Guard::default();
        *served = false;
        *more = false;
    }

    /// Bytes wait to be written (or TLS records to be flushed).
    fn pending(&self) -> bool {
        self.tx_off < self.tx.len() || self.tls.as_ref().is_some_and(|c| c.wants_write())
    }
}

/// A schedule: one stream at a time on its connection.
struct Sched {
    /// Its connection, the loop's index.
    conn: usize,
    /// Its stream in flight (0: none).
    sid: u32,
    intended: u64,
    next_at: u64,
    t0: u64,
    /// Since when it could send, ns.
    ready: u64,
    /// The reply's final status (0: not yet).
    status: u16,
    /// Request bytes written (frames) and body bytes sent.
    bytes: usize,
    body_off: usize,
    /// Its stream's send window.
    window: i64,
    /// The whole request was written (counted sent).
    sent: bool,
    /// Reply bytes received since the stream's last WINDOW_UPDATE.
    recv_unacked: u32,
    /// Its due request has waited on the client for a free stream since, ns (its
    /// connection open with as many streams in flight as its server allows; 0: not):
    /// kept while it waits on through its connection's close and reopening (its timeout
    /// counts from here, and it counts once in `waited_for_stream`), cleared when its
    /// stream starts or it is given up.
    queued_at: u64,
    /// Its request was sent again after a GOAWAY named it unprocessed: a second such
    /// GOAWAY fails it (`refused`), cleared when its stream ends.
    retried: bool,
}

struct Loop<'a, 'b, B: Books> {
    run: &'a H2Run<'b, B>,
    ep: Epoll,
    conns: Vec<Conn>,
    scheds: Vec<Sched>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    local: B::Local,
    timeout_ns: u64,
    /// Where the steps its counts are split at begin ([`Books::step_starts`]), ns.
    starts: Vec<u64>,
    /// This loop's servers' stream limits and waits for a free stream, per step: each
    /// counted in the step whose time it happened in.
    seen: Vec<Http2Streams>,
}

/// The step of `starts` (where each begins, ns, increasing) that holds `now`: the first
/// for a time before it.
fn step_at(starts: &[u64], now: u64) -> usize {
    starts.partition_point(|&s| s <= now).saturating_sub(1)
}

/// Runs the connections `ids` (their schedules with them) on this thread until the run
/// is done.
pub(crate) fn run_loop<B: Books>(run: &H2Run<B>, ids: Vec<usize>) {
    let sched = run.sched;
    let Some(ep) = crate::client::evloop::epoll_for(sched) else {
        return;
    };
    let mut waits = Waits::new(&ep);
    let mut lp = Loop::new(run, ep, &ids);
    let mut next_scan = 0;
    while !sched.done() {
        let now = mono_ns();
        lp.turn(now);
        if now >= next_scan {
            lp.timeouts(now);
            next_scan = now + TIMEOUT_SCAN_NS;
        }
        lp.flush_all();
        let mut next = lp.heap.peek().map_or(u64::MAX, |r| r.0 .0);
        for c in &lp.conns {
            if c.state == CState::Closed {
                next = next.min(c.retry_at);
            }
        }
        let more = lp.conns.iter().any(|c| c.more);
        let Some(events) = waits.wait(&mut lp.ep, sched, &mut lp.local, next, more) else {
            continue;
        };
        for &(token, ev) in events {
            let (k, g) = ((token >> 32) as usize, token as u32);
            if lp
                .conns
                .get(k)
                .is_some_and(|c| c.gen == g && c.sock.is_some())
            {
                lp.on_event(k, ev);
            }
        }
        if more {
            for k in 0..lp.conns.len() {
                if std::mem::take(&mut lp.conns[k].more) && lp.conns[k].sock.is_some() {
                    lp.read(k);
                }
            }
        }
    }
    lp.end();
}

impl<'a, 'b, B: Books> Loop<'a, 'b, B> {
    /// The loop of the connections `ids` of `run` (connection `cid`'s schedules `cid +
    /// j * connections`), on `ep`: every schedule on the heap at its first due time.
    fn new(run: &'a H2Run<'b, B>, ep: Epoll, ids: &[usize]) -> Self {
        let sched = run.sched;
        let (c, s) = (run.connections, run.streams);
        let mut scheds = Vec::with_capacity(ids.len() * s);
        for (k, &cid) in ids.iter().enumerate() {
            for j in 0..s {
                let id = cid + j * c;
                scheds.push(Sched {
                    conn: k,
                    sid: 0,
                    intended: 0,
                    next_at: sched.first_due(id).max(sched.starts_at(id)),
                    t0: 0,
                    ready: 0,
                    status: 0,
                    bytes: 0,
                    body_off: 0,
                    window: 0,
                    sent: false,
                    recv_unacked: 0,
                    queued_at: 0,
                    retried: false,
                });
            }
        }
        let heap = scheds
            .iter()
            .enumerate()
            .map(|(i, u)| Reverse((u.next_at, i)))
            .collect();
        let mut starts = sched.step_starts();
        if starts.is_empty() {
            starts.push(0);
        }
        Loop {
            run,
            ep,
            conns: ids.iter().map(|_| Conn::new(s)).collect(),
            scheds,
            heap,
            local: sched.local(),
            timeout_ns: sched.timeout_ns().max(1_000_000),
            seen: vec![Http2Streams::default(); starts.len()],
            starts,
        }
    }

    /// A turn's work at `now` (ns) before the wait: connections closed past their
    /// back-off made again (while requests may be sent), the schedules due started.
    #[inline]
    fn turn(&mut self, now: u64) {
        let sched = self.run.sched;
        for k in 0..self.conns.len() {
            let c = &self.conns[k];
            if c.state == CState::Closed && c.retry_at <= now && sched.may_send(now) {
                self.open(k);
            }
        }
        while let Some(&Reverse((t, i))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            self.due(i);
        }
    }

    /// The loop's end: the streams in flight cut off, the requests still waiting for a
    /// free stream counted, this loop's HTTP/2 counts merged into the run's and its
    /// counts handed in.
    fn end(mut self) {
        let run = self.run;
        // Streams started and not ended (their request written or still being written):
        // cut off at the end.
        let in_flight = self.scheds.iter().filter(|u| u.sid != 0).count() as u64;
        // Requests still in a connection's queue for a free stream: never sent.
        self.seen_now().waiting_at_end += self
            .scheds
            .iter()
            .filter(|u| u.queued_at != 0 && u.sid == 0)
            .count() as u64;
        let mut seen = run.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() < self.seen.len() {
            seen.resize(self.seen.len(), Http2Streams::default());
        }
        for (all, mine) in seen.iter_mut().zip(&self.seen) {
            all.add(mine);
        }
        drop(seen);
        run.sched.finish(self.local, in_flight);
    }
}

impl<B: Books> Loop<'_, '_, B> {
    pub(super) fn now_may_send(&self) -> bool {
        self.run.sched.may_send(mono_ns())
    }

    /// The counts of the step that holds now.
    pub(super) fn seen_now(&mut self) -> &mut Http2Streams {
        let k = step_at(&self.starts, mono_ns());
        &mut self.seen[k]
    }
}

#[cfg(test)]
mod tests {
    use super::{step_at, CState, Conn, RX_BYTES};

    /// Counts land in the step whose time holds them; before the first, in the first;
    /// after the last's start, in the last.
    #[test]
    fn a_count_lands_in_the_step_that_holds_its_time() {
        let starts = [100, 200, 300];
        let at: Vec<usize> = [0, 100, 199, 200, 299, 300, u64::MAX]
            .iter()
            .map(|&t| step_at(&starts, t))
            .collect();
        assert_eq!(at, [0, 0, 0, 1, 1, 2, 2]);
        assert_eq!(step_at(&[0], 5), 0);
    }

    /// A connection closed keeps its slot's buffers (emptied) and its schedules waiting;
    /// the rest is as new.
    #[test]
    fn a_reset_connection_keeps_its_buffers_and_its_queue_and_nothing_else() {
        let mut c = Conn::new(4);
        c.state = CState::Open;
        c.rx[..3].copy_from_slice(b"abc");
        c.rx_end = 3;
        c.tx.extend_from_slice(&[1; 100]);
        c.tx_off = 10;
        c.next_sid = 9;
        c.opened_at = 7;
        c.goaway = Some(5);
        c.streams.insert(7, 1);
        c.blocked.push_back(1);
        c.waiting.extend([2, 3]);
        c.hdr.extend_from_slice(b"hdr");
        let (rx, tx, gen) = (c.rx.as_ptr(), c.tx.as_ptr(), c.gen);
        c.reset(42);
        assert_eq!((c.rx.as_ptr(), c.rx.len(), c.rx_end), (rx, RX_BYTES, 0));
        assert_eq!((c.tx.as_ptr(), c.tx.len(), c.tx_off), (tx, 0, 0));
        assert_eq!(c.waiting, [2, 3]);
        assert_eq!((c.state, c.retry_at, c.gen), (CState::Closed, 42, gen + 1));
        assert_eq!((c.next_sid, c.opened_at, c.goaway), (1, 0, None));
        assert!(c.streams.is_empty() && c.blocked.is_empty() && c.hdr.is_empty());
    }
}
