//! Request/response over TCP: the framing rules, and the reference server
//! (`tpslab serve tcp --mode echo|replace`) with an optional serialised section (S3's
//! `SELECT ... FOR UPDATE` in miniature).
//!
//! tpslab's own protocol frames every request and reply with a 4-byte big-endian length.
//! The server runs one thread per connection, or `threads` workers sharing the
//! connections through epoll; each request costs `work_ns` of CPU (in
//! parallel) and then `serial_ns` of waiting (a sleep, like a round trip to a database),
//! which with `serialize` happens while holding one process-wide lock: requests then
//! queue for the lock, and TPS cannot exceed 1 / serial_ns however many users come.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tpslab_net::{mono_ns, NetError};

use crate::EngineError;

use tpslab_plan::framing::{Framing, MAX_FRAME};

/// Reads frames from a stream, keeping bytes that arrived beyond a frame for the next.
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader {
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
        }
    }
}

impl FrameReader {
    /// A reader whose buffer starts at `bytes` (it grows to the largest frame read).
    pub fn with_capacity(bytes: usize) -> FrameReader {
        FrameReader {
            buf: vec![0; bytes.max(16)],
            start: 0,
            end: 0,
        }
    }

    /// Reads one frame from `s` and returns its length in bytes; the frame itself is
    /// what [`FrameReader::take`] returns until the next call. Errors: the peer closed (UnexpectedEof),
    /// a read timeout (WouldBlock/TimedOut), a length above MAX_FRAME (InvalidData).
    pub fn read(&mut self, s: &mut impl Read, f: &Framing) -> std::io::Result<usize> {
        self.read_by(s, |b| {
            frame_len(f, b).map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))
        })
    }

    /// Reads one request of the server's mode: a length-prefixed frame, or (HTTP) a
    /// request's head and its Content-Length body. Errors: as [`FrameReader::read`], and
    /// InvalidData for a request that is not HTTP/1.x.
    pub fn read_request(&mut self, s: &mut impl Read, mode: RrMode) -> std::io::Result<usize> {
        if mode == RrMode::Http {
            self.read_by(s, crate::serve::rr_http::request_len)
        } else {
            self.read(s, &Framing::Length)
        }
    }

    /// Reads until `len` finds a whole message at the start of the bytes kept: Some(its
    /// length), None: more bytes needed.
    fn read_by(
        &mut self,
        s: &mut impl Read,
        len: impl Fn(&[u8]) -> std::io::Result<Option<usize>>,
    ) -> std::io::Result<usize> {
        loop {
            if let Some(n) = len(&self.buf[self.start..self.end])? {
                return Ok(n);
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                if self.buf.len() >= MAX_FRAME + 4 {
                    return Err(std::io::Error::new(
                        ErrorKind::InvalidData,
                        "frame too long",
                    ));
                }
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let n = s.read(&mut self.buf[self.end..])?;
            if n == 0 {
                return Err(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "peer closed the connection",
                ));
            }
            self.end += n;
        }
    }

    /// The frame returned by the last [`FrameReader::read`] (with its length prefix or
    /// delimiter), and consumes it.
    pub fn take(&mut self, n: usize) -> &[u8] {
        let s = self.start;
        self.start += n;
        &self.buf[s..s + n]
    }
}

/// What the request/response server does with each request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RrMode {
    /// Reply with the body unchanged.
    Echo,
    /// S1: replace every "ping" with "pong", then reply.
    Replace,
    /// HTTP/1.1 keep-alive: each request answered 200 with its body, "ping"s replaced
    /// (`serve http`).
    Http,
}

/// Settings of the request/response server.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RrConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Echo or replace.
    pub mode: RrMode,
    /// CPU work per request, ns (busy loop, in parallel across connections).
    pub work_ns: u64,
    /// Waiting per request, ns (a sleep: a round trip to a backend).
    pub serial_ns: u64,
    /// Hold one process-wide lock during the `serial_ns` part.
    pub serialize: bool,
    /// 0: one thread per connection. N >= 1: N worker threads share all connections,
    /// each with its own epoll instance (connections dealt round-robin); a request being
    /// worked on holds up the other connections of its worker.
    pub threads: usize,
}

/// Counters of the request/response server.
#[derive(Debug, Default)]
struct RrCounters {
    requests: AtomicU64,
    connections: AtomicU64,
    errors: AtomicU64,
}

/// The running server; stops when dropped or with [`RrServer::stop`].
pub struct RrServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    counters: Arc<RrCounters>,
    accept: Option<JoinHandle<()>>,
}

/// Final counts of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrReport {
    /// Requests answered.
    pub requests: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Connections that ended with an error other than the peer closing.
    pub errors: u64,
}

/// Listen backlog asked for (the kernel holds it to net.core.somaxconn): a step of
/// thousands of users connecting at once must not lose SYNs to a short accept queue.
pub const LISTEN_BACKLOG: i32 = 4096;

/// A listening socket on `addr` with [`LISTEN_BACKLOG`] (std's is 128).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(LISTEN_BACKLOG)?;
    Ok(s.into())
}

impl RrServer {
    /// Binds and starts accepting. Errors: the address is taken or not local.
    pub fn start(cfg: RrConfig) -> Result<RrServer, EngineError> {
        let l = listen(cfg.listen).map_err(|e| NetError::io(format!("bind {}", cfg.listen), e))?;
        l.set_nonblocking(true)
            .map_err(|e| NetError::io("O_NONBLOCK", e))?;
        let addr = l.local_addr().map_err(|e| NetError::io("getsockname", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(RrCounters::default());
        let (st, co) = (stop.clone(), counters.clone());
        let accept = std::thread::Builder::new()
            .name("tps-rr-accept".into())
            .spawn(move || {
                let lock = Arc::new(Mutex::new(()));
                let mut conns = vec![];
                let inboxes: Vec<Arc<Mutex<Vec<TcpStream>>>> =
                    (0..cfg.threads).map(|_| Arc::default()).collect();
                for (i, inbox) in inboxes.iter().enumerate() {
                    let (st, co2, lock, inbox) =
                        (st.clone(), co.clone(), lock.clone(), inbox.clone());
                    let h = std::thread::Builder::new()
                        .name(format!("tps-rr-w{i}"))
                        .spawn(move || worker(&inbox, cfg, &st, &co2, &lock));
                    match h {
                        Ok(h) => conns.push(h),
                        Err(_) => {
                            co.errors.fetch_add(1, Relaxed);
                        }
                    }
                }
                let mut next = 0;
                while !st.load(Relaxed) {
                    match l.accept() {
                        Ok((s, _)) => {
                            co.connections.fetch_add(1, Relaxed);
                            if !inboxes.is_empty() {
                                let mut q = inboxes[next % inboxes.len()]
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner());
                                q.push(s);
                                next += 1;
                                continue;
                            }
                            let (st, co, lock) = (st.clone(), co.clone(), lock.clone());
                            let h = std::thread::Builder::new()
                                .name("tps-rr-conn".into())
                                .spawn(move || serve_conn(s, cfg, &st, &co, &lock));
                            if let Ok(h) = h {
                                conns.push(h);
                            }
                            conns.retain(|h: &JoinHandle<()>| !h.is_finished());
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
                for h in conns {
                    let _ = h.join();
                }
            })
            .map_err(|e| EngineError::os("spawning the accept thread", e))?;
        Ok(RrServer {
            addr,
            stop,
            counters,
            accept: Some(accept),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Counts so far.
    pub fn report(&self) -> RrReport {
        RrReport {
            requests: self.counters.requests.load(Relaxed),
            connections: self.counters.connections.load(Relaxed),
            errors: self.counters.errors.load(Relaxed),
        }
    }

    /// Stops (within about 100 ms) and returns the final counts.
    pub fn stop(mut self) -> RrReport {
        self.halt();
        self.report()
    }

    fn halt(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

impl Drop for RrServer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn serve_conn(
    mut s: TcpStream,
    cfg: RrConfig,
    stop: &AtomicBool,
    c: &RrCounters,
    lock: &Mutex<()>,
) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
    let finder = memchr::memmem::Finder::new(crate::serve::wire::FIND);
    let mut r = FrameReader::default();
    let mut out = Vec::with_capacity(2048);
    while !stop.load(Relaxed) {
        let n = match r.read_request(&mut s, cfg.mode) {
            Ok(n) => n,
            Err(e) if crate::retryable(&e) => continue,
            Err(e) => {
                if !matches!(
                    e.kind(),
                    ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
                ) {
                    c.errors.fetch_add(1, Relaxed);
                }
                return;
            }
        };
        out.clear();
        let close = process(r.take(n), &mut out, &cfg, &finder, lock);
        // A client that stops reading must not hold this thread (and stop()) forever.
        let mut sent = 0;
        while sent < out.len() {
            match s.write(&out[sent..]) {
                Ok(n) => sent += n,
                Err(e) if crate::retryable(&e) => {
                    if stop.load(Relaxed) {
                        return;
                    }
                }
                Err(_) => {
                    c.errors.fetch_add(1, Relaxed);
                    return;
                }
            }
        }
        c.requests.fetch_add(1, Relaxed);
        if close {
            return;
        }
    }
}

/// Works on one request (a frame with its length prefix, or an HTTP request) and appends
/// the reply. True: the connection closes after it (an HTTP `Connection: close`).
fn process(
    req: &[u8],
    out: &mut Vec<u8>,
    cfg: &RrConfig,
    finder: &memchr::memmem::Finder<'_>,
    lock: &Mutex<()>,
) -> bool {
    let start = out.len();
    let mut close = false;
    if cfg.mode == RrMode::Http {
        close = crate::serve::rr_http::reply(req, out, finder);
    } else {
        out.extend_from_slice(req);
    }
    if cfg.mode == RrMode::Replace {
        crate::serve::wire::find_and_replace(finder, &mut out[start + 4..]);
    }
    if cfg.work_ns > 0 {
        let t = mono_ns();
        while mono_ns().wrapping_sub(t) < cfg.work_ns {
            std::hint::spin_loop();
        }
    }
    if cfg.serial_ns > 0 {
        let d = Duration::from_nanos(cfg.serial_ns);
        if cfg.serialize {
            let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
            std::thread::sleep(d);
        } else {
            std::thread::sleep(d);
        }
    }
    close
}

/// A connection of a shared worker.
struct Conn {
    s: TcpStream,
    r: FrameReader,
    out: Vec<u8>,
    sent: usize,
    /// What epoll watches for now (READABLE, or WRITABLE while replies are pending).
    interest: u32,
    /// The last reply says the connection closes (HTTP `Connection: close`): no more
    /// requests are read, and it closes once that reply is all written.
    closing: bool,
}

/// A shared worker: its connections arrive in `inbox`; epoll says which to serve.
fn worker(
    inbox: &Mutex<Vec<TcpStream>>,
    cfg: RrConfig,
    stop: &AtomicBool,
    c: &RrCounters,
    lock: &Mutex<()>,
) {
    use std::collections::HashMap;
    use tpslab_net::poll::{Epoll, HANGUP, READABLE, WRITABLE};
    let Ok(mut ep) = Epoll::new(256) else {
        c.errors.fetch_add(1, Relaxed);
        return;
    };
    let finder = memchr::memmem::Finder::new(crate::serve::wire::FIND);
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut next_token = 0u64;
    let mut ready = vec![];
    while !stop.load(Relaxed) {
        let new: Vec<TcpStream> =
            std::mem::take(&mut *inbox.lock().unwrap_or_else(|e| e.into_inner()));
        for s in new {
            let _ = s.set_nodelay(true);
            if s.set_nonblocking(true).is_err() || ep.add(&s, next_token, READABLE).is_err() {
                c.errors.fetch_add(1, Relaxed);
                continue;
            }
            conns.insert(
                next_token,
                Conn {
                    s,
                    r: FrameReader::default(),
                    out: Vec::with_capacity(2048),
                    sent: 0,
                    interest: READABLE,
                    closing: false,
                },
            );
            next_token += 1;
        }
        ready.clear();
        if ep.wait(&mut ready, 10).is_err() {
            c.errors.fetch_add(1, Relaxed);
            return;
        }
        for &(tok, ev) in &ready {
            let Some(k) = conns.get_mut(&tok) else {
                continue;
            };
            let mut close = false;
            // Read (and work) only when the last replies are out: a client that sends
            // and never reads cannot make this grow without bound.
            if ev & (READABLE | HANGUP) != 0 && k.sent == k.out.len() && !k.closing {
                close = k.serve(&cfg, &finder, lock, c);
            }
            close = k.flush(close, c) || close;
            if k.closing && k.sent == k.out.len() {
                close = true;
            }
            if !close {
                // Pending replies: wait for room to write, not for more requests.
                let want = if k.sent == k.out.len() {
                    READABLE
                } else {
                    WRITABLE
                };
                if want != k.interest && ep.modify(&k.s, tok, want).is_ok() {
                    k.interest = want;
                }
            }
            if close {
                if let Some(k) = conns.remove(&tok) {
                    let _ = ep.delete(&k.s);
                }
            }
        }
    }
}

impl Conn {
    /// Reads and serves the requests that came, their replies appended to `out` (empty
    /// before): at most 64 requests or 64 KiB of replies per turn, so a client that
    /// pipelines faster than the work goes cannot hold the worker or grow `out`. Returns
    /// whether the connection ended (the peer's close, or an error, counted in `c`).
    #[inline]
    fn serve(
        &mut self,
        cfg: &RrConfig,
        finder: &memchr::memmem::Finder<'_>,
        lock: &Mutex<()>,
        c: &RrCounters,
    ) -> bool {
        self.out.clear();
        self.sent = 0;
        let mut frames = 0;
        while frames < 64 && self.out.len() < 64 * 1024 {
            frames += 1;
            match self.r.read_request(&mut self.s, cfg.mode) {
                Ok(n) => {
                    let last = process(self.r.take(n), &mut self.out, cfg, finder, lock);
                    c.requests.fetch_add(1, Relaxed);
                    if last {
                        // Closed once this reply is out, not before.
                        self.closing = true;
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    if !matches!(
                        e.kind(),
                        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
                    ) {
                        c.errors.fetch_add(1, Relaxed);
                    }
                    return true;
                }
            }
        }
        false
    }

    /// Sends what is pending (also the replies to requests that came with the peer's
    /// close, `closing`); keeps the rest for when the socket is writable. Returns whether
    /// a write failed (counted in `c` unless the peer had closed).
    #[inline]
    fn flush(&mut self, closing: bool, c: &RrCounters) -> bool {
        while self.sent < self.out.len() {
            match self.s.write(&self.out[self.sent..]) {
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    if !closing {
                        c.errors.fetch_add(1, Relaxed);
                    }
                    return true;
                }
            }
        }
        false
    }
}

/// The end of the first whole frame of `have` by framing `f`: Some(length in bytes, with
/// its length prefix or delimiter), None when more bytes are needed. Errors: a length
/// prefix above [`MAX_FRAME`] (`frame length N above 16777216`).
pub fn frame_len(f: &Framing, have: &[u8]) -> Result<Option<usize>, String> {
    Ok(match f {
        Framing::Length => {
            let Some(&[a, b, c, d]) = have.first_chunk::<4>() else {
                return Ok(None);
            };
            let len = u32::from_be_bytes([a, b, c, d]) as usize;
            if len > MAX_FRAME {
                return Err(format!("frame length {len} above {MAX_FRAME}"));
            }
            (have.len() >= 4 + len).then_some(4 + len)
        }
        Framing::Fixed(n) => (have.len() >= *n).then_some(*n),
        Framing::Delimiter(d) => memchr::memmem::find(have, d).map(|i| i + d.len()),
    })
}

/// One framed request of tpslab's protocol: the 4-byte length, then `body`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + body.len());
    v.extend_from_slice(&(body.len() as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

#[cfg(test)]
#[path = "rr_tests.rs"]
mod tests;
