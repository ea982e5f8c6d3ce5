//! `load http --http2`: the open loop ([`crate::openloop`]'s `Schedule`) over HTTP/2
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
//! written by [`crate::proto::h2`]. Flow control: this client announces windows of
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
//! cancelled (RST_STREAM CANCEL, `timeout`). Bytes: requests' frames out, every byte read
//! in (TLS: plaintext).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::{ErrorKind, Read};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use tpslab_net::mono_ns;
use tpslab_net::poll::{Epoll, Timer, HANGUP, READABLE, WRITABLE};

use crate::books::Books;
use crate::proto::h2::{self, Frame};
use crate::proto::tls::{self, Handshake, TlsClient};
use crate::proto::{connect, io_kind, Opened, Reply};

/// What every loop of a run shares.
pub(crate) struct H2Run<'a, B: Books> {
    /// The clock and the counts: the open loop's [`super::Schedule`], or a closed-loop
    /// ramp's [`crate::tally::Tally`].
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

/// The token of the loop's timer.
const TIMER_TOKEN: u64 = u64::MAX;

/// The largest header block a reply may have across CONTINUATION frames, bytes.
const MAX_HEADER_BLOCK: usize = 1 << 20;

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
    max_streams: u32,
    peer_window: i64,
    max_frame: u32,
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
    /// A GOAWAY's last stream: no new stream on this connection.
    goaway: Option<u32>,
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
            max_streams: u32::MAX,
            peer_window: h2::DEFAULT_WINDOW,
            max_frame: h2::DEFAULT_MAX_FRAME,
            send_window: h2::DEFAULT_WINDOW,
            recv_unacked: 0,
            next_sid: 1,
            streams: HashMap::with_capacity(streams * 2),
            waiting: VecDeque::with_capacity(streams),
            blocked: VecDeque::with_capacity(streams),
            hdr_sid: 0,
            hdr: vec![],
            hdr_end_stream: false,
            goaway: None,
        }
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
}

struct Loop<'a, 'b, B: Books> {
    run: &'a H2Run<'b, B>,
    ep: Epoll,
    conns: Vec<Conn>,
    scheds: Vec<Sched>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    local: B::Local,
    timeout_ns: u64,
}

/// Runs the connections `ids` (their schedules with them) on this thread until the run
/// is done.
pub(crate) fn run_loop<B: Books>(run: &H2Run<B>, ids: Vec<usize>) {
    let sched = run.sched;
    let ep = match Epoll::new(1024) {
        Ok(ep) => ep,
        Err(e) => {
            let mut l = sched.local();
            sched.failed(&mut l, mono_ns(), &format!("epoll: {e}"), false);
            sched.finish(l, 0);
            return;
        }
    };
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
            });
        }
    }
    let heap = scheds
        .iter()
        .enumerate()
        .map(|(i, u)| Reverse((u.next_at, i)))
        .collect();
    let mut lp = Loop {
        run,
        ep,
        conns: ids.iter().map(|_| Conn::new(s)).collect(),
        scheds,
        heap,
        local: sched.local(),
        timeout_ns: sched.timeout_ns().max(1_000_000),
    };
    let timer = Timer::new()
        .ok()
        .filter(|t| lp.ep.add(t, TIMER_TOKEN, READABLE).is_ok());
    let mut armed = 0;
    let mut next_scan = 0;
    let mut events = Vec::with_capacity(1024);
    while !sched.done() {
        let now = mono_ns();
        for k in 0..lp.conns.len() {
            let c = &lp.conns[k];
            if c.state == CState::Closed && c.retry_at <= now && sched.may_send(now) {
                lp.open(k);
            }
        }
        while let Some(&Reverse((t, i))) = lp.heap.peek() {
            if t > now {
                break;
            }
            lp.heap.pop();
            lp.due(i);
        }
        if now >= next_scan {
            lp.timeouts(now);
            next_scan = now + TIMEOUT_SCAN_NS;
        }
        lp.flush_all();
        let now = mono_ns();
        let mut next = lp.heap.peek().map_or(u64::MAX, |r| r.0 .0);
        for c in &lp.conns {
            if c.state == CState::Closed {
                next = next.min(c.retry_at);
            }
        }
        let wait = next.saturating_sub(now).min(5_000_000);
        if let Some(t) = &timer {
            if next != armed && next < now + 5_000_000 && t.set_at(next).is_ok() {
                armed = next;
            }
        }
        events.clear();
        if let Err(e) = lp.ep.wait_ns(&mut events, Duration::from_nanos(wait)) {
            sched.failed(&mut lp.local, mono_ns(), &format!("epoll_wait: {e}"), false);
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        for &(token, ev) in &events {
            if token == TIMER_TOKEN {
                if let Some(t) = &timer {
                    t.clear();
                }
                armed = 0;
                continue;
            }
            let (k, g) = ((token >> 32) as usize, token as u32);
            if lp
                .conns
                .get(k)
                .is_some_and(|c| c.gen == g && c.sock.is_some())
            {
                lp.on_event(k, ev);
            }
        }
    }
    let in_flight = lp.scheds.iter().filter(|u| u.sid != 0 && u.sent).count() as u64;
    sched.finish(lp.local, in_flight);
}

impl<B: Books> Loop<'_, '_, B> {
    fn now_may_send(&self) -> bool {
        self.run.sched.may_send(mono_ns())
    }

    /// Starts connection `k`: a non-blocking connect.
    fn open(&mut self, k: usize) {
        match connect(self.run.target) {
            Ok(Opened { socket, ready }) => {
                let c = &mut self.conns[k];
                c.sock = Some(socket);
                c.gen = c.gen.wrapping_add(1);
                c.interest = 0;
                c.deadline = mono_ns() + self.timeout_ns;
                if ready {
                    self.run.sched.opened(&mut self.local);
                    self.connected(k);
                } else {
                    c.state = CState::Connecting;
                    self.watch(k, WRITABLE);
                }
            }
            Err(kind) => {
                self.run
                    .sched
                    .failed(&mut self.local, mono_ns(), &kind, false);
                self.close(k, true);
            }
        }
    }

    /// The connect is done: the TLS handshake, or the preface.
    fn connected(&mut self, k: usize) {
        let Some(client) = &self.run.tls else {
            return self.start_h2(k);
        };
        match client.session() {
            Ok(s) => {
                self.conns[k].tls = Some(Box::new(s));
                self.conns[k].state = CState::Handshaking;
                self.handshake(k);
            }
            Err(kind) => self.connect_failed(k, &kind),
        }
    }

    fn handshake(&mut self, k: usize) {
        let c = &mut self.conns[k];
        let (Some(t), Some(s)) = (c.tls.as_deref_mut(), c.sock.as_ref()) else {
            return;
        };
        match tls::handshake(t, s) {
            Ok(Handshake::Done) => {
                if t.alpn_protocol() != Some(b"h2") {
                    let chose = match t.alpn_protocol() {
                        Some(p) => format!("it chose {}", String::from_utf8_lossy(p)),
                        None => "it chose none".into(),
                    };
                    self.run.fatal(format!(
                        "{}: the server did not agree to HTTP/2 (ALPN h2 offered, {chose}): drop --http2 for HTTP/1.1",
                        self.run.url
                    ));
                    return self.close(k, false);
                }
                self.start_h2(k)
            }
            Ok(Handshake::Writable) => self.watch(k, WRITABLE),
            Ok(Handshake::Readable) => self.watch(k, READABLE),
            // nginx without h2 refuses a client that offers nothing else.
            Err(e) if e.to_string().contains("NoApplicationProtocol") => {
                self.run.fatal(format!(
                    "{}: the server did not agree to HTTP/2 (ALPN h2 offered, it answered no_application_protocol): drop --http2 for HTTP/1.1",
                    self.run.url
                ));
                self.close(k, false)
            }
            Err(e) => self.connect_failed(k, &io_kind(&e)),
        }
    }

    /// Writes the preface and waits for the server's SETTINGS.
    fn start_h2(&mut self, k: usize) {
        let c = &mut self.conns[k];
        c.state = CState::Settings;
        c.tx.clear();
        c.tx_off = 0;
        control(self.run.sched, &mut self.local, &mut c.tx, h2::client_start);
        self.flush(k);
    }

    fn connect_failed(&mut self, k: usize, kind: &str) {
        self.run.sched.failed(
            &mut self.local,
            mono_ns(),
            &format!("connect: {kind}"),
            false,
        );
        self.close(k, true);
    }

    /// Closes connection `k` (its streams must be gone already): made again at once, or
    /// after a back-off (the timeout, at most 100 ms) following a failure.
    fn close(&mut self, k: usize, back_off: bool) {
        let now = mono_ns();
        let mut fresh = Conn::new(self.run.streams);
        let c = &mut self.conns[k];
        // What is kept across connections: the schedules waiting, buffers' memory.
        std::mem::swap(&mut fresh.waiting, &mut c.waiting);
        fresh.gen = c.gen.wrapping_add(1);
        fresh.retry_at = if back_off {
            now + self.timeout_ns.min(100_000_000)
        } else {
            now
        };
        // Streams still listed: none when called right; their schedules go on.
        for (_, i) in c.streams.drain() {
            self.scheds[i].sid = 0;
        }
        *c = fresh;
    }

    /// Fails every stream of connection `k` with `kind` and closes it (backing off).
    fn conn_failed(&mut self, k: usize, kind: &str) {
        let now = mono_ns();
        let ids: Vec<usize> = self.conns[k].streams.values().copied().collect();
        for i in ids {
            self.stream_failed(i, kind, now, false);
        }
        self.close(k, true);
    }

    fn watch(&mut self, k: usize, interest: u32) {
        let tok = ((k as u64) << 32) | self.conns[k].gen as u64;
        let c = &mut self.conns[k];
        if c.interest == interest | (1 << 31) {
            return;
        }
        let Some(s) = &c.sock else { return };
        let r = if c.interest == 0 {
            self.ep.add(s, tok, interest)
        } else {
            self.ep.modify(s, tok, interest)
        };
        match r {
            Ok(()) => c.interest = interest | (1 << 31),
            Err(e) => self.run.sched.failed(
                &mut self.local,
                mono_ns(),
                &format!("epoll_ctl: {e}"),
                false,
            ),
        }
    }

    /// Schedule `i` is due: a stream now if its connection has one free, else it waits.
    fn due(&mut self, i: usize) {
        if !self.now_may_send() {
            return;
        }
        let k = self.scheds[i].conn;
        if self.can_start(k) {
            let ready = self.scheds[i].ready;
            self.start_stream(i, ready);
        } else {
            self.conns[k].waiting.push_back(i);
        }
    }

    fn can_start(&self, k: usize) -> bool {
        let c = &self.conns[k];
        c.state == CState::Open
            && c.goaway.is_none()
            && (c.streams.len() as u64) < c.max_streams as u64
            && c.next_sid <= 0x7fff_ffff
    }

    /// Starts the schedules waiting on connection `k` while it has streams free.
    fn drain_waiting(&mut self, k: usize) {
        while self.can_start(k) {
            let Some(i) = self.conns[k].waiting.pop_front() else {
                return;
            };
            if !self.now_may_send() {
                self.conns[k].waiting.clear();
                return;
            }
            // It waited for the connection, not for the generator.
            self.start_stream(i, mono_ns());
        }
    }

    /// A new stream for schedule `i`: its HEADERS (and as much body as the windows let).
    fn start_stream(&mut self, i: usize, ready: u64) {
        let now = mono_ns();
        let k = self.scheds[i].conn;
        let c = &mut self.conns[k];
        let sid = c.next_sid;
        c.next_sid += 2;
        let block = if c.first_sent {
            &c.blocks.1
        } else {
            &c.blocks.0
        };
        c.first_sent = true;
        let body = !self.run.body.is_empty();
        let n = h2::headers(&mut c.tx, sid, block, !body, c.max_frame);
        c.streams.insert(sid, i);
        let window = c.peer_window;
        let u = &mut self.scheds[i];
        u.sid = sid;
        u.t0 = now;
        u.ready = ready;
        u.intended = if u.next_at == 0 { now } else { u.next_at };
        u.status = 0;
        u.bytes = n;
        u.body_off = 0;
        u.window = window;
        u.sent = false;
        u.recv_unacked = 0;
        if self.send_body(i) {
            self.mark_sent(i);
        } else {
            self.conns[k].blocked.push_back(i);
        }
    }

    /// Sends what the windows let of stream `i`'s body: true when all of it is written.
    fn send_body(&mut self, i: usize) -> bool {
        let body = &self.run.body;
        let u = &mut self.scheds[i];
        let c = &mut self.conns[u.conn];
        while u.body_off < body.len() {
            let n = (body.len() - u.body_off)
                .min(c.send_window.max(0) as usize)
                .min(u.window.max(0) as usize)
                .min(c.max_frame as usize);
            if n == 0 {
                return false;
            }
            let end = u.body_off + n == body.len();
            h2::data(&mut c.tx, u.sid, &body[u.body_off..u.body_off + n], end);
            u.body_off += n;
            u.bytes += h2::HEAD + n;
            c.send_window -= n as i64;
            u.window -= n as i64;
        }
        true
    }

    fn mark_sent(&mut self, i: usize) {
        let u = &mut self.scheds[i];
        u.sent = true;
        self.run
            .sched
            .sent(&mut self.local, u.intended, u.ready, mono_ns(), u.bytes);
    }

    /// Streams of connection `k` waiting for window: sent as far as it now lets.
    fn unblock(&mut self, k: usize) {
        for _ in 0..self.conns[k].blocked.len() {
            let Some(i) = self.conns[k].blocked.pop_front() else {
                return;
            };
            if self.scheds[i].sid == 0 {
                continue;
            }
            if self.send_body(i) {
                self.mark_sent(i);
            } else {
                self.conns[k].blocked.push_back(i);
            }
        }
    }

    /// Stream of schedule `i` is over: its next request at its time.
    fn end_stream(&mut self, i: usize, now: u64) {
        let u = &mut self.scheds[i];
        let k = u.conn;
        let sid = u.sid;
        u.sid = 0;
        u.ready = now;
        u.next_at = self.run.sched.next_due(u.intended, now);
        let at = u.next_at;
        self.heap.push(Reverse((at, i)));
        let c = &mut self.conns[k];
        c.streams.remove(&sid);
        if !self.scheds[i].sent {
            c.blocked.retain(|&b| b != i);
        }
    }

    fn answered(&mut self, i: usize) {
        let now = mono_ns();
        let u = &self.scheds[i];
        let (t0, failed) = match self.run.closed {
            true => (u.intended, crate::proto::http1::status_failure(u.status)),
            false => (u.t0, None),
        };
        let r = Reply {
            status: u.status,
            failed,
            ..Reply::ok(0)
        };
        self.run
            .sched
            .answered(&mut self.local, u.intended, t0, now, &r);
        self.end_stream(i, now);
    }

    /// Stream of schedule `i` failed with `kind`; `rst`: tell the server (RST_STREAM
    /// CANCEL).
    fn stream_failed(&mut self, i: usize, kind: &str, now: u64, rst: bool) {
        let u = &self.scheds[i];
        self.run.sched.failed(&mut self.local, now, kind, u.sent);
        if rst {
            let (k, sid) = (u.conn, u.sid);
            control(
                self.run.sched,
                &mut self.local,
                &mut self.conns[k].tx,
                |t| h2::rst_stream(t, sid, h2::CANCEL),
            );
        }
        self.end_stream(i, now);
    }

    /// Streams past their timeout are cancelled; connects past theirs fail.
    fn timeouts(&mut self, now: u64) {
        for i in 0..self.scheds.len() {
            let u = &self.scheds[i];
            if u.sid != 0 && now >= u.t0 + self.timeout_ns {
                self.stream_failed(i, "timeout", now, true);
                let k = self.scheds[i].conn;
                self.drain_waiting(k);
            }
        }
        for k in 0..self.conns.len() {
            let c = &self.conns[k];
            if c.deadline != 0 && now >= c.deadline {
                let kind = if c.state == CState::Settings {
                    "http2: no SETTINGS from the server within the timeout"
                } else {
                    "timeout"
                };
                self.connect_failed(k, kind);
            }
        }
    }

    fn flush_all(&mut self) {
        for k in 0..self.conns.len() {
            if self.conns[k].sock.is_some()
                && matches!(self.conns[k].state, CState::Settings | CState::Open)
                && self.conns[k].pending()
            {
                self.flush(k);
            }
        }
    }

    /// Writes what connection `k` has to write; watches it for writability while some is
    /// left.
    fn flush(&mut self, k: usize) {
        let c = &mut self.conns[k];
        let Some(s) = c.sock.as_ref() else { return };
        let r = match c.tls.as_deref_mut() {
            Some(t) => tls::write(t, s, &c.tx, &mut c.tx_off),
            None => loop {
                if c.tx_off >= c.tx.len() {
                    break Ok(true);
                }
                match s.send_with_flags(&c.tx[c.tx_off..], libc::MSG_NOSIGNAL) {
                    Ok(n) => c.tx_off += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break Ok(false),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            },
        };
        match r {
            Ok(true) => {
                c.tx.clear();
                c.tx_off = 0;
                self.watch(k, READABLE);
            }
            Ok(false) => self.watch(k, READABLE | WRITABLE),
            Err(e) => self.conn_failed(k, &io_kind(&e)),
        }
    }

    fn on_event(&mut self, k: usize, ev: u32) {
        match self.conns[k].state {
            CState::Connecting => {
                let err = self.conns[k].sock.as_ref().map(|s| s.take_error());
                match err {
                    Some(Ok(None)) if ev & HANGUP == 0 => {
                        self.run.sched.opened(&mut self.local);
                        self.connected(k);
                    }
                    Some(Ok(Some(e))) | Some(Err(e)) => self.connect_failed(k, &io_kind(&e)),
                    _ => self.connect_failed(k, "connection refused"),
                }
            }
            CState::Handshaking => self.handshake(k),
            CState::Settings | CState::Open => {
                if ev & WRITABLE != 0 {
                    self.flush(k);
                }
                if ev & (READABLE | HANGUP) != 0 && self.conns[k].sock.is_some() {
                    self.read(k);
                }
            }
            CState::Closed => {}
        }
    }

    /// Reads connection `k` until nothing is waiting, handling each whole frame.
    fn read(&mut self, k: usize) {
        loop {
            let c = &mut self.conns[k];
            let Some(s) = c.sock.as_ref() else { return };
            let room = &mut c.rx[c.rx_end..];
            // Plaintext: a short read took all there was; the rest waits for the next
            // wait (level-triggered), after the replies' users have sent again.
            let (want, plain) = (room.len(), c.tls.is_none());
            let got = match c.tls.as_deref_mut() {
                Some(t) => tls::read(t, s, room),
                None => {
                    let mut r = s;
                    r.read(room)
                }
            };
            match got {
                Ok(0) => {
                    let graceful = c.goaway.is_some() && c.streams.is_empty();
                    return if graceful {
                        self.close(k, false)
                    } else {
                        self.conn_failed(k, "closed by peer")
                    };
                }
                Ok(n) => {
                    c.rx_end += n;
                    self.run.sched.read(&mut self.local, n);
                    if let Err(kind) = self.frames(k) {
                        return self.conn_failed(k, &kind);
                    }
                    if self.conns[k].sock.is_none() || (plain && n < want) {
                        return;
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    return
                }
                Err(e) => return self.conn_failed(k, &io_kind(&e)),
            }
        }
    }

    /// Handles the whole frames read on connection `k` (the rest kept for the next read).
    fn frames(&mut self, k: usize) -> Result<(), String> {
        let mut at = 0;
        let mut rx = std::mem::take(&mut self.conns[k].rx);
        let end = self.conns[k].rx_end;
        let r = loop {
            if self.conns[k].state == CState::Settings
                && end - at >= 5
                && rx[at..].starts_with(b"HTTP/")
            {
                self.run.fatal(format!(
                    "{}: the server answered HTTP/2's preface with HTTP/1.x: it does not take h2c with prior knowledge (drop --http2, or use its https:// URL)",
                    self.run.url
                ));
                break Ok(());
            }
            match h2::parse(&rx[at..end], h2::DEFAULT_MAX_FRAME) {
                Ok(Some((f, n))) => {
                    at += n;
                    if let Err(e) = self.frame(k, f) {
                        break Err(e);
                    }
                    if self.conns[k].sock.is_none() {
                        break Ok(());
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        rx.copy_within(at..end, 0);
        let c = &mut self.conns[k];
        c.rx = rx;
        if c.sock.is_some() {
            c.rx_end = end - at;
        }
        if r.is_ok() && c.sock.is_some() {
            self.drain_waiting(k);
            self.unblock(k);
            let c = &self.conns[k];
            if c.goaway.is_some() && c.streams.is_empty() {
                self.close(k, false);
            }
        }
        r
    }

    fn frame(&mut self, k: usize, f: Frame<'_>) -> Result<(), String> {
        let c = &mut self.conns[k];
        if c.state == CState::Settings && !matches!(f, Frame::Settings { ack: false, .. }) {
            return Err("http2: the server's first frame is not SETTINGS".into());
        }
        if c.hdr_sid != 0
            && !matches!(
                f,
                Frame::Headers {
                    continuation: true,
                    ..
                }
            )
        {
            return Err("http2: a header block cut by another frame".into());
        }
        match f {
            Frame::Settings { ack: true, .. } | Frame::Other { .. } => {}
            Frame::Settings { ack: false, params } => {
                let mut table = 4096;
                for (id, v) in h2::settings(params) {
                    match id {
                        h2::setting::HEADER_TABLE_SIZE => table = v,
                        h2::setting::MAX_CONCURRENT_STREAMS => c.max_streams = v,
                        h2::setting::INITIAL_WINDOW_SIZE => {
                            if v > 0x7fff_ffff {
                                return Err(
                                    "http2: SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1".into()
                                );
                            }
                            let delta = v as i64 - c.peer_window;
                            c.peer_window = v as i64;
                            for &i in c.streams.values() {
                                self.scheds[i].window += delta;
                            }
                        }
                        h2::setting::MAX_FRAME_SIZE => {
                            if !(16_384..=16_777_215).contains(&v) {
                                return Err(format!("http2: SETTINGS_MAX_FRAME_SIZE {v}"));
                            }
                            c.max_frame = v;
                        }
                        _ => {}
                    }
                }
                control(self.run.sched, &mut self.local, &mut c.tx, h2::settings_ack);
                if c.state == CState::Settings {
                    c.state = CState::Open;
                    c.deadline = 0;
                    c.blocks = h2::header_blocks(&self.run.headers, table);
                } else if table < 4096 && c.blocks.1.first() != Some(&0) {
                    // Indexing stops: the next block says so with a size update.
                    c.blocks = h2::header_blocks(&self.run.headers, table);
                    c.first_sent = false;
                }
            }
            Frame::Ping { ack: false, data } => {
                control(self.run.sched, &mut self.local, &mut c.tx, |t| {
                    h2::ping_ack(t, &data)
                })
            }
            Frame::Ping { ack: true, .. } => {}
            Frame::WindowUpdate {
                stream: 0,
                increment,
            } => {
                c.send_window += increment as i64;
                if c.send_window > 0x7fff_ffff {
                    return Err("http2: the connection's window over 2^31-1".into());
                }
            }
            Frame::WindowUpdate { stream, increment } => {
                if let Some(&i) = c.streams.get(&stream) {
                    self.scheds[i].window += increment as i64;
                }
            }
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                continuation,
                block,
            } => {
                if continuation && c.hdr_sid != stream {
                    return Err("http2: a CONTINUATION without its HEADERS".into());
                }
                if !continuation && end_headers {
                    // The usual case: one frame, decoded in place.
                    let st = c.dec.status(block)?;
                    return self.headers_done(k, stream, end_stream, st);
                }
                if !continuation {
                    c.hdr_sid = stream;
                    c.hdr_end_stream = end_stream;
                    c.hdr.clear();
                }
                if c.hdr.len() + block.len() > MAX_HEADER_BLOCK {
                    return Err(format!(
                        "http2: a header block over {MAX_HEADER_BLOCK} bytes"
                    ));
                }
                c.hdr.extend_from_slice(block);
                if end_headers {
                    let b = std::mem::take(&mut c.hdr);
                    let end_stream = c.hdr_end_stream;
                    c.hdr_sid = 0;
                    let st = c.dec.status(&b);
                    c.hdr = b;
                    return self.headers_done(k, stream, end_stream, st?);
                }
            }
            Frame::Data {
                stream, end, flow, ..
            } => {
                c.recv_unacked += flow;
                if c.recv_unacked >= h2::RECV_WINDOW / 2 {
                    let n = c.recv_unacked;
                    control(self.run.sched, &mut self.local, &mut c.tx, |t| {
                        h2::window_update(t, 0, n)
                    });
                    c.recv_unacked = 0;
                }
                if let Some(&i) = c.streams.get(&stream) {
                    if end {
                        self.answered(i);
                    } else {
                        let u = &mut self.scheds[i];
                        u.recv_unacked += flow;
                        if u.recv_unacked >= h2::RECV_WINDOW / 2 {
                            let n = u.recv_unacked;
                            control(self.run.sched, &mut self.local, &mut c.tx, |t| {
                                h2::window_update(t, stream, n)
                            });
                            u.recv_unacked = 0;
                        }
                    }
                }
            }
            Frame::Reset { stream, code } => {
                if let Some(&i) = c.streams.get(&stream) {
                    let kind = format!("stream reset (RST_STREAM {})", h2::code_name(code));
                    self.stream_failed(i, &kind, mono_ns(), false);
                }
            }
            Frame::GoAway { last, code } => {
                c.goaway = Some(last);
                // Streams above `last` were not processed: sent again on a new connection.
                let mut again: Vec<(u32, usize)> = c
                    .streams
                    .iter()
                    .filter(|(&sid, _)| sid > last)
                    .map(|(&s, &i)| (s, i))
                    .collect();
                again.sort_unstable();
                for &(sid, i) in again.iter().rev() {
                    c.streams.remove(&sid);
                    let u = &mut self.scheds[i];
                    if u.sent {
                        self.run.sched.unsent(&mut self.local);
                    }
                    u.sid = 0;
                    u.sent = false;
                    // Its intended time is kept: the wait for a new connection is latency.
                    u.next_at = u.intended;
                    c.blocked.retain(|&b| b != i);
                    c.waiting.push_front(i);
                }
                if code != 0 && c.streams.is_empty() {
                    self.run.sched.failed(
                        &mut self.local,
                        mono_ns(),
                        &format!("http2: GOAWAY {}", h2::code_name(code)),
                        false,
                    );
                }
            }
        }
        Ok(())
    }

    /// A whole header block on `stream` with status `st`: an interim 1xx is skipped, the
    /// first final one is the reply's status; END_STREAM ends the stream.
    fn headers_done(
        &mut self,
        k: usize,
        stream: u32,
        end_stream: bool,
        st: Option<u16>,
    ) -> Result<(), String> {
        let Some(&i) = self.conns[k].streams.get(&stream) else {
            return Ok(());
        };
        let u = &mut self.scheds[i];
        match st {
            Some(s) if (100..200).contains(&s) => {}
            Some(s) if u.status == 0 => u.status = s,
            None if u.status == 0 => {
                let now = mono_ns();
                self.stream_failed(i, "http2: a reply without :status", now, true);
                return Ok(());
            }
            _ => {}
        }
        if end_stream {
            self.answered(i);
        }
        Ok(())
    }
}
