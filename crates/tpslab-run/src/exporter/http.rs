//! The HTTP side of `--metrics-listen`: one thread, one epoll loop over non-blocking
//! sockets, bounded in connections ([`MAX_CONNS`]), in request-head bytes ([`MAX_HEAD`])
//! and in time per connection ([`DEADLINE`]); requests are parsed by `httparse` and every
//! answer closes its connection. Slow or idle clients cannot lock a scrape out: when the
//! connections are all taken, the oldest one that has not sent a whole request makes room.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tpslab_net::poll::{Epoll, READABLE, WRITABLE};
use tpslab_net::NetError;
use tpslab_report::metrics::Exposition;

/// Connections open at once, at most (the listener's own descriptor and the epoll
/// instance's come on top).
pub const MAX_CONNS: usize = 64;
/// Bytes of a request head (request line and headers, up to the empty line), at most;
/// a longer one is answered 431.
pub const MAX_HEAD: usize = 8 * 1024;
/// Time from the accept to the last byte of the answer, at most; then the connection is
/// closed whatever its state.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// After an answer, how long the rest of what the client sends is read and discarded
/// (so that closing does not reset the connection before the client has read the answer).
const LINGER: Duration = Duration::from_secs(1);
/// Headers of one request, at most (more: 431).
const MAX_HEADERS: usize = 64;
/// Connections the kernel completes before they are accepted, at most (the listen
/// backlog): a burst of clients waits there, costing no descriptor, instead of having its
/// SYNs dropped (and a scrape among them retried a second later).
const BACKLOG: i32 = 1024;
/// Connections accepted per wake-up, at most: the ones already open are read in between.
const ACCEPT_BATCH: usize = 16;
/// How long the listener is left alone after an accept error such as EMFILE (the pending
/// connections wait in the backlog instead of waking the loop in a spin).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// The loop's longest sleep: how soon a stop request is seen.
const TICK: Duration = Duration::from_millis(200);
const LISTENER: u64 = u64::MAX;

const TEXT: &str = "text/plain; charset=utf-8";

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// GET or HEAD of `/metrics` (or `/metrics?...`): 200 with the metrics in the format
    /// its `Accept` header asks for ([`Exposition::negotiate`]).
    Metrics,
    /// Any other path: 404.
    NotFound,
    /// `/metrics` with a method other than GET or HEAD: 405.
    MethodNotAllowed,
    /// A head over `MAX_HEAD` bytes or `MAX_HEADERS` headers: 431.
    TooLarge,
    /// Not HTTP/1.x: 400.
    BadRequest,
}

/// A whole request head, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub route: Route,
    /// HEAD: the answer's headers without its body.
    pub head_only: bool,
    /// The text format the `Accept` header asks for (the Prometheus text format 0.0.4
    /// without one).
    pub format: Exposition,
}

/// What the bytes read so far on a connection (`buf`, from its first byte) ask for; None
/// while the head is incomplete and under [`MAX_HEAD`] bytes. Bytes after the head (a
/// body, a pipelined request) are ignored.
pub fn classify(buf: &[u8]) -> Option<Request> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let bad = |route| {
        Some(Request {
            route,
            head_only: false,
            format: Exposition::Prometheus,
        })
    };
    match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n > MAX_HEAD => bad(Route::TooLarge),
        Ok(httparse::Status::Complete(_)) => {
            let (Some(method), Some(path)) = (req.method, req.path) else {
                return bad(Route::BadRequest);
            };
            let head_only = method == "HEAD";
            let route = if path != "/metrics" && !path.starts_with("/metrics?") {
                Route::NotFound
            } else if method == "GET" || head_only {
                Route::Metrics
            } else {
                Route::MethodNotAllowed
            };
            // Several Accept headers are one list (RFC 9110 5.3).
            let accept: Vec<&str> = req
                .headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case("accept"))
                .filter_map(|h| std::str::from_utf8(h.value).ok())
                .collect();
            let format =
                Exposition::negotiate((!accept.is_empty()).then(|| accept.join(",")).as_deref());
            Some(Request {
                route,
                head_only,
                format,
            })
        }
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => bad(Route::TooLarge),
        Ok(httparse::Status::Partial) => None,
        Err(httparse::Error::TooManyHeaders) => bad(Route::TooLarge),
        Err(_) => bad(Route::BadRequest),
    }
}

/// The whole answer to `req` (status line, headers, body unless HEAD), HTTP/1.1 with
/// `Connection: close`; `metrics` is called only for [`Route::Metrics`], with the format
/// to render.
pub fn answer(req: Request, metrics: impl FnOnce(Exposition) -> String) -> Vec<u8> {
    let (status, ctype, body, extra) = match req.route {
        Route::Metrics => ("200 OK", req.format.content_type(), metrics(req.format), ""),
        Route::NotFound => (
            "404 Not Found",
            TEXT,
            "tpslab: metrics are at /metrics\n".to_string(),
            "",
        ),
        Route::MethodNotAllowed => (
            "405 Method Not Allowed",
            TEXT,
            "tpslab: /metrics answers GET and HEAD\n".to_string(),
            "Allow: GET, HEAD\r\n",
        ),
        Route::TooLarge => (
            "431 Request Header Fields Too Large",
            TEXT,
            format!(
                "tpslab: a request head is {MAX_HEAD} bytes and {MAX_HEADERS} headers at most\n"
            ),
            "",
        ),
        Route::BadRequest => (
            "400 Bad Request",
            TEXT,
            "tpslab: not an HTTP/1.x request\n".to_string(),
            "",
        ),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !req.head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// Whether the bytes appended at `from` completed an empty line (`\n\n` or `\n\r\n`,
/// looking back far enough to catch one split across reads): only then is a head worth
/// parsing, so a client sending a byte at a time costs a scan of its bytes, not a parse
/// of its whole buffer per byte.
fn ends_a_head(buf: &[u8], from: usize) -> bool {
    let tail = &buf[from.saturating_sub(2)..];
    tail.windows(2).any(|w| w == b"\n\n") || tail.windows(3).any(|w| w == b"\n\r\n")
}

enum State {
    /// The request head so far (at most [`MAX_HEAD`] bytes).
    Reading(Vec<u8>),
    /// The answer, written up to `at`.
    Writing { out: Vec<u8>, at: usize },
    /// Answered and shut down for writing; what still comes is read and dropped until
    /// the client closes or `until`.
    Draining { until: Instant },
}

struct Conn {
    sock: TcpStream,
    /// When it was accepted: the eviction order.
    since: Instant,
    state: State,
}

impl Conn {
    fn expires(&self) -> Instant {
        match self.state {
            State::Draining { until } => until,
            _ => self.since + DEADLINE,
        }
    }
}

/// A listener on `addr` with SO_REUSEADDR (as std's) and a backlog of `BACKLOG`.
/// Errors: the address is not this host's (EADDRNOTAVAIL), in use (EADDRINUSE), a
/// privileged port without the right (EACCES).
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    Ok(s.into())
}

/// The listening endpoint and its connections.
pub struct Server {
    listener: TcpListener,
    ep: Epoll,
    conns: Vec<Option<Conn>>,
    /// Set while the listener is left alone after an accept error.
    paused_until: Option<Instant>,
}

impl Server {
    /// Serves on `listener` (made non-blocking here). Errors: the epoll instance (EMFILE).
    pub fn new(listener: TcpListener) -> Result<Server, NetError> {
        listener
            .set_nonblocking(true)
            .map_err(|e| NetError::io("metrics listener O_NONBLOCK", e))?;
        let ep = Epoll::new(MAX_CONNS + 1)?;
        ep.add(&listener, LISTENER, READABLE)?;
        Ok(Server {
            listener,
            ep,
            conns: (0..MAX_CONNS).map(|_| None).collect(),
            paused_until: None,
        })
    }

    /// Answers requests until `stop` (seen within `TICK`); `metrics` renders the body
    /// of each scrape in the format it asked for.
    pub fn run(mut self, stop: &AtomicBool, metrics: impl Fn(Exposition) -> String) {
        let mut events = Vec::with_capacity(MAX_CONNS + 1);
        while !stop.load(Relaxed) {
            let now = Instant::now();
            self.expire(now);
            if self.paused_until.is_some_and(|t| now >= t)
                && self.ep.add(&self.listener, LISTENER, READABLE).is_ok()
            {
                self.paused_until = None;
            }
            let next = self
                .conns
                .iter()
                .flatten()
                .map(Conn::expires)
                .chain(self.paused_until)
                .min()
                .map_or(TICK, |t| t.saturating_duration_since(now).min(TICK));
            events.clear();
            if self.ep.wait_ns(&mut events, next).is_err() {
                // Not expected of a valid epoll instance; never a spin.
                std::thread::sleep(TICK);
                continue;
            }
            for &(token, _) in &events {
                if token == LISTENER {
                    self.accept(&metrics);
                } else {
                    self.step(token as usize, &metrics);
                }
            }
        }
    }

    fn accept(&mut self, metrics: &dyn Fn(Exposition) -> String) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((sock, _)) => self.admit(sock, metrics),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                    ) => {}
                Err(_) => {
                    // EMFILE, ENFILE, ENOBUFS: the backlog waits a little.
                    if self.ep.delete(&self.listener).is_ok() {
                        self.paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                    }
                    return;
                }
            }
        }
    }

    fn admit(&mut self, sock: TcpStream, metrics: &dyn Fn(Exposition) -> String) {
        if sock.set_nonblocking(true).is_err() {
            return;
        }
        let slot = match self.conns.iter().position(Option::is_none) {
            Some(i) => i,
            None => match self.evict(metrics) {
                Some(i) => i,
                // Every one is being answered (each within its deadline): the newcomer
                // is closed, the scrapes in progress finish.
                None => return,
            },
        };
        if self.ep.add(&sock, slot as u64, READABLE).is_err() {
            return;
        }
        self.conns[slot] = Some(Conn {
            sock,
            since: Instant::now(),
            state: State::Reading(Vec::new()),
        });
    }

    /// Frees a slot: an answered connection still draining, else the oldest one that has
    /// not sent a whole request (read once more first: a request that has arrived is
    /// answered, not dropped). None when every connection is being answered.
    fn evict(&mut self, metrics: &dyn Fn(Exposition) -> String) -> Option<usize> {
        for _ in 0..=MAX_CONNS {
            let draining = self.conns.iter().position(|c| {
                matches!(
                    c,
                    Some(Conn {
                        state: State::Draining { .. },
                        ..
                    })
                )
            });
            if let Some(i) = draining {
                self.conns[i] = None;
                return Some(i);
            }
            let i = self
                .conns
                .iter()
                .enumerate()
                .filter_map(|(i, c)| match c {
                    Some(
                        c @ Conn {
                            state: State::Reading(_),
                            ..
                        },
                    ) => Some((c.since, i)),
                    _ => None,
                })
                .min()?
                .1;
            self.read(i, metrics);
            match &self.conns[i] {
                None => return Some(i),
                Some(Conn {
                    state: State::Reading(_),
                    ..
                }) => {
                    self.conns[i] = None;
                    return Some(i);
                }
                // Its request had come: answered (or being answered); look again.
                Some(_) => {}
            }
        }
        None
    }

    fn expire(&mut self, now: Instant) {
        for c in &mut self.conns {
            if c.as_ref().is_some_and(|c| c.expires() <= now) {
                *c = None;
            }
        }
    }

    fn step(&mut self, i: usize, metrics: &dyn Fn(Exposition) -> String) {
        match self.conns.get(i) {
            Some(Some(Conn {
                state: State::Reading(_),
                ..
            })) => self.read(i, metrics),
            Some(Some(Conn {
                state: State::Writing { .. },
                ..
            })) => self.write(i),
            Some(Some(Conn {
                state: State::Draining { .. },
                ..
            })) => self.drain(i),
            _ => {}
        }
    }

    /// Reads what has come of the request head; answers it once whole (or too large).
    fn read(&mut self, i: usize, metrics: &dyn Fn(Exposition) -> String) {
        let Some(Conn {
            sock,
            state: State::Reading(buf),
            ..
        }) = &mut self.conns[i]
        else {
            return;
        };
        let req = loop {
            let at = buf.len();
            let room = (MAX_HEAD - at).min(4096);
            buf.resize(at + room, 0);
            let r = sock.read(&mut buf[at..]);
            buf.truncate(at + *r.as_ref().unwrap_or(&0));
            match r {
                Ok(0) => {
                    // Closed (or half-closed) before a whole request: nothing to answer.
                    self.conns[i] = None;
                    return;
                }
                Ok(_) if buf.len() >= MAX_HEAD || ends_a_head(buf, at) => {
                    if let Some(req) = classify(buf) {
                        break req;
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.conns[i] = None;
                    return;
                }
            }
        };
        let out = answer(req, metrics);
        let Some(c) = &mut self.conns[i] else { return };
        if self.ep.modify(&c.sock, i as u64, WRITABLE).is_err() {
            self.conns[i] = None;
            return;
        }
        c.state = State::Writing { out, at: 0 };
        self.write(i);
    }

    fn write(&mut self, i: usize) {
        let Some(Conn {
            sock,
            state: State::Writing { out, at },
            since,
        }) = &mut self.conns[i]
        else {
            return;
        };
        while *at < out.len() {
            match sock.write(&out[*at..]) {
                Ok(0) => break,
                Ok(n) => *at += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        if *at < out.len() || sock.shutdown(Shutdown::Write).is_err() {
            self.conns[i] = None;
            return;
        }
        let until = (Instant::now() + LINGER).min(*since + DEADLINE);
        if self.ep.modify(&*sock, i as u64, READABLE).is_err() {
            self.conns[i] = None;
            return;
        }
        if let Some(c) = &mut self.conns[i] {
            c.state = State::Draining { until };
        }
        self.drain(i);
    }

    fn drain(&mut self, i: usize) {
        let Some(c) = &mut self.conns[i] else { return };
        let mut scratch = [0u8; 4096];
        // A bounded number of reads per wake-up: one client cannot hold the loop (the
        // rest is read at the next ones, until the client closes or the linger ends).
        let mut reads = 0;
        let closed = loop {
            match c.sock.read(&mut scratch) {
                Ok(0) => break true,
                Ok(_) => {
                    reads += 1;
                    if reads == 16 {
                        break false;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                Err(_) => break true,
            }
        };
        if closed {
            self.conns[i] = None;
        }
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
