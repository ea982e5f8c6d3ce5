//! The users of a closed-loop ramp, multiplexed: each loop thread owns a share of the users
//! (user i on loop i % loops) as state machines on one epoll instance, with their think
//! times, back-offs and per-request timeouts on a timer heap. Thousands of users cost a
//! socket and a few KiB each, not a thread each.
//!
//! A user: connects (TCP, non-blocking, within the timeout), writes its request, reads
//! the reply (TCP: one frame by the plan's framing; UDP: the datagram whose sequence field
//! matches, late replies to earlier requests skipped), counts it, thinks, and goes again.
//! A failed request is counted by kind; TCP then reconnects (after a failed connect, it
//! backs off for the timeout, at most 100 ms, so a dead server is not spun on).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tpslab_net::mono_ns;
use tpslab_net::poll::{Epoll, HANGUP, READABLE, WRITABLE};

use crate::ramp::{io_kind, RampProto, Shared};
use crate::rr::FrameReader;

/// Where a user is in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not yet among the active users.
    Off,
    /// Until its timer: thinking, or backing off before a reconnect.
    Waiting,
    /// TCP connect in flight.
    Connecting,
    /// Writing its request: bytes written so far.
    Sending(usize),
    /// Waiting for the reply.
    Reading,
}

struct User {
    id: usize,
    state: State,
    tcp: Option<TcpStream>,
    udp: Option<UdpSocket>,
    reader: FrameReader,
    /// UDP: its own copy of the request (the sequence field is written into it).
    req: Vec<u8>,
    seq: u32,
    tag: [u8; 8],
    /// When the current request started, ns.
    t0: u64,
    /// When its timer is due (a request's timeout, the end of a think time or a back-off),
    /// monotonic ns; 0: none.
    due: u64,
    /// The time of its entry in the timer heap that counts (0: none). An entry whose time
    /// is not this one was superseded by an earlier one and is skipped when popped.
    queued: u64,
    /// Bumped when its socket changes: events of a closed socket are ignored.
    sock_gen: u32,
    /// Interest registered now (0: not registered).
    interest: u32,
}

/// A loop's context: the shared ramp state, its epoll and its timers.
struct Loop<'a, 'p> {
    sh: &'a Shared<'p>,
    ep: Epoll,
    /// (time, user): at most about one live entry per user (see [`Loop::timer`]).
    timers: BinaryHeap<Reverse<(u64, usize)>>,
    scratch: Vec<u8>,
    timeout_ns: u64,
}

/// Runs the users `ids` (increasing) on this thread until the ramp is done.
pub(crate) fn run_loop(sh: &Shared, ids: Vec<usize>) {
    let ep = match Epoll::new(1024) {
        Ok(ep) => ep,
        Err(e) => {
            sh.err(mono_ns(), &format!("epoll: {e}"));
            return;
        }
    };
    let udp = sh.plan.proto == RampProto::Udp;
    let mut users: Vec<User> = ids
        .into_iter()
        .map(|id| User {
            id,
            state: State::Off,
            tcp: None,
            udp: None,
            // Small at first: it grows to a reply's size.
            reader: FrameReader::with_capacity(4096),
            req: if udp { sh.plan.request.clone() } else { vec![] },
            seq: 0,
            tag: [0; 8],
            t0: 0,
            due: 0,
            queued: 0,
            sock_gen: 0,
            interest: 0,
        })
        .collect();
    let mut lp = Loop {
        sh,
        ep,
        timers: BinaryHeap::new(),
        scratch: if udp { vec![0; 65536] } else { vec![] },
        timeout_ns: sh.plan.timeout_ns.max(1_000_000),
    };
    let mut started = 0;
    let mut events = Vec::with_capacity(1024);
    while !sh.done.load(Relaxed) {
        let active = sh.users_at(mono_ns());
        while started < users.len() && users[started].id < active {
            lp.start(&mut users[started], started);
            started += 1;
        }
        let now = mono_ns();
        while let Some(&Reverse((t, i))) = lp.timers.peek() {
            if t > now {
                break;
            }
            lp.timers.pop();
            let u = &mut users[i];
            if u.queued != t {
                continue;
            }
            u.queued = 0;
            if u.due > now {
                // Its timer moved later since this entry was queued (the request it
                // timed out on was answered, a new one started): queued again at its time.
                u.queued = u.due;
                lp.timers.push(Reverse((u.due, i)));
            } else if u.due != 0 {
                u.due = 0;
                lp.on_timer(u, i);
            }
        }
        // Wake for the next timer, and at least every 5 ms to see new users and the end.
        let next = lp.timers.peek().map_or(u64::MAX, |r| r.0 .0);
        let wait = next.saturating_sub(mono_ns()).min(5_000_000);
        events.clear();
        if let Err(e) = lp.ep.wait_ns(&mut events, Duration::from_nanos(wait)) {
            sh.err(mono_ns(), &format!("epoll_wait: {e}"));
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        for &(token, ev) in &events {
            let (i, g) = ((token >> 32) as usize, token as u32);
            if let Some(u) = users.get_mut(i).filter(|u| u.sock_gen == g) {
                lp.on_event(u, i, ev);
            }
        }
    }
}

impl Loop<'_, '_> {
    fn token(i: usize, u: &User) -> u64 {
        ((i as u64) << 32) | u.sock_gen as u64
    }

    /// Sets the user's timer to `at` (replacing the one it had). Pushed on the heap only
    /// when earlier than its queued entry: a request's timeout, set at every request,
    /// usually moves later, and the queued entry re-queues itself at the new time when it
    /// comes. The heap holds about one entry per user instead of one per request (at
    /// 200,000 requests a second and a 2 s timeout that was 400,000 entries, a cache miss
    /// per level of every pop).
    fn timer(&mut self, u: &mut User, i: usize, at: u64) {
        u.due = at;
        if u.queued == 0 || at < u.queued {
            u.queued = at;
            self.timers.push(Reverse((at, i)));
        }
    }

    /// Watches the user's socket for `interest` (0: nothing; hang-ups still wake it).
    /// Registered already for the same events: no system call (a request's write asks
    /// for READABLE each time; an epoll_ctl per request cost ~1 us of a 90 us round trip).
    fn watch(&mut self, u: &mut User, i: usize, interest: u32) {
        if u.interest == interest | (1 << 31) {
            return;
        }
        let tok = Self::token(i, u);
        let r = match (&u.tcp, &u.udp) {
            (Some(s), _) if u.interest == 0 => self.ep.add(s, tok, interest),
            (Some(s), _) => self.ep.modify(s, tok, interest),
            (None, Some(s)) if u.interest == 0 => self.ep.add(s, tok, interest),
            (None, Some(s)) => self.ep.modify(s, tok, interest),
            (None, None) => return,
        };
        match r {
            Ok(()) => u.interest = interest | (1 << 31),
            Err(e) => self.sh.err(mono_ns(), &format!("epoll_ctl: {e}")),
        }
    }

    fn close(&mut self, u: &mut User) {
        // Closing the descriptor removes it from the epoll set.
        u.tcp = None;
        u.interest = 0;
        u.sock_gen = u.sock_gen.wrapping_add(1);
        u.reader = FrameReader::with_capacity(4096);
    }

    /// Begins the user's next request: connecting first when it has no connection.
    fn start(&mut self, u: &mut User, i: usize) {
        match self.sh.plan.proto {
            RampProto::Tcp if u.tcp.is_none() => self.connect(u, i),
            RampProto::Udp if u.udp.is_none() => match udp_socket(self.sh.plan.target) {
                Ok(s) => {
                    u.udp = Some(s);
                    u.interest = 0;
                    u.sock_gen = u.sock_gen.wrapping_add(1);
                    self.watch(u, i, READABLE);
                    self.send(u, i);
                }
                Err(e) => {
                    self.sh.err(mono_ns(), &format!("socket: {e}"));
                    self.back_off(u, i);
                }
            },
            _ => self.send(u, i),
        }
    }

    fn connect(&mut self, u: &mut User, i: usize) {
        match tcp_connect(self.sh.plan.target) {
            Ok((s, done)) => {
                u.tcp = Some(s);
                u.interest = 0;
                u.sock_gen = u.sock_gen.wrapping_add(1);
                if done {
                    self.send(u, i);
                } else {
                    u.state = State::Connecting;
                    self.watch(u, i, WRITABLE);
                    let at = mono_ns() + self.timeout_ns;
                    self.timer(u, i, at);
                }
            }
            Err(e) => self.connect_failed(u, i, &io_kind(&e)),
        }
    }

    fn connect_failed(&mut self, u: &mut User, i: usize, kind: &str) {
        self.sh.err(mono_ns(), &format!("connect: {kind}"));
        self.close(u);
        self.back_off(u, i);
    }

    /// Waits before trying again: the timeout, at most 100 ms.
    fn back_off(&mut self, u: &mut User, i: usize) {
        u.state = State::Waiting;
        let at = mono_ns() + self.timeout_ns.min(100_000_000);
        self.timer(u, i, at);
    }

    /// Starts a request: its clock, its timeout, its bytes.
    fn send(&mut self, u: &mut User, i: usize) {
        u.t0 = mono_ns();
        let at = u.t0 + self.timeout_ns;
        self.timer(u, i, at);
        match self.sh.plan.proto {
            RampProto::Tcp => {
                u.state = State::Sending(0);
                self.write(u, i);
            }
            RampProto::Udp => {
                self.tag(u);
                let r = match &u.udp {
                    Some(s) => s.send(&u.req),
                    None => return,
                };
                match r {
                    Ok(_) => u.state = State::Reading,
                    Err(e) => self.fail(u, i, &format!("send: {}", io_kind(&e))),
                }
            }
        }
    }

    /// Writes the next sequence number into the user's UDP request.
    fn tag(&self, u: &mut User) {
        u.seq = u.seq.wrapping_add(1);
        let plan = self.sh.plan;
        match plan.seq_field {
            None => {
                u.tag[..4].copy_from_slice(&(u.id as u32).to_be_bytes());
                u.tag[4..].copy_from_slice(&u.seq.to_be_bytes());
                u.req[..8].copy_from_slice(&u.tag);
            }
            Some((off, len)) => {
                let v = (u.seq as u64).to_be_bytes();
                u.tag = [0; 8];
                u.tag[..len].copy_from_slice(&v[8 - len..]);
                u.req[off..off + len].copy_from_slice(&u.tag[..len]);
            }
        }
    }

    /// Writes what is left of the request; then waits for the reply.
    fn write(&mut self, u: &mut User, i: usize) {
        let State::Sending(mut off) = u.state else {
            return;
        };
        let req = &self.sh.plan.request;
        loop {
            let Some(s) = u.tcp.as_mut() else { return };
            match s.write(&req[off..]) {
                Ok(n) => {
                    off += n;
                    if off == req.len() {
                        u.state = State::Reading;
                        self.watch(u, i, READABLE);
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    u.state = State::Sending(off);
                    self.watch(u, i, WRITABLE);
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return self.fail(u, i, &io_kind(&e)),
            }
        }
    }

    /// The reply arrived: counted; think, or go again.
    fn done(&mut self, u: &mut User, i: usize) {
        let now = mono_ns();
        self.sh.ok(now, now - u.t0);
        self.next(u, i, now);
    }

    fn next(&mut self, u: &mut User, i: usize, now: u64) {
        let think = self.sh.plan.think_ns;
        if think > 0 {
            u.state = State::Waiting;
            if u.tcp.is_some() {
                self.watch(u, i, 0);
            }
            self.timer(u, i, now + think);
        } else {
            self.start(u, i);
        }
    }

    /// A request failed: counted by kind; TCP drops its connection. The next request
    /// starts from the timer (after the think time, or at the loop's next pass): never
    /// from here, so failures that repeat at once cannot recurse.
    fn fail(&mut self, u: &mut User, i: usize, kind: &str) {
        let now = mono_ns();
        self.sh.err(now, kind);
        if self.sh.plan.proto == RampProto::Tcp {
            self.close(u);
        }
        u.state = State::Waiting;
        self.timer(u, i, now + self.sh.plan.think_ns);
    }

    fn on_timer(&mut self, u: &mut User, i: usize) {
        match u.state {
            State::Off => {}
            State::Waiting => self.start(u, i),
            State::Connecting => self.connect_failed(u, i, "timeout"),
            State::Sending(_) | State::Reading => self.fail(u, i, "timeout"),
        }
    }

    fn on_event(&mut self, u: &mut User, i: usize, ev: u32) {
        match (u.state, self.sh.plan.proto) {
            (State::Connecting, _) => {
                let err = u.tcp.as_ref().map(|s| s.take_error());
                match err {
                    Some(Ok(None)) if ev & HANGUP == 0 => self.send(u, i),
                    Some(Ok(Some(e))) | Some(Err(e)) => self.connect_failed(u, i, &io_kind(&e)),
                    _ => self.connect_failed(u, i, "connection refused"),
                }
            }
            (State::Sending(_), _) => self.write(u, i),
            (State::Reading, RampProto::Tcp) => self.read_tcp(u, i),
            (_, RampProto::Udp) => self.read_udp(u, i),
            // Thinking with a connection the server closed: reconnect when the think ends.
            (State::Waiting, RampProto::Tcp) if ev & HANGUP != 0 => self.close(u),
            _ => {}
        }
    }

    fn read_tcp(&mut self, u: &mut User, i: usize) {
        let Some(s) = u.tcp.as_mut() else { return };
        match u.reader.read(&mut NoRetry(s), &self.sh.plan.framing) {
            Ok(n) => {
                u.reader.take(n);
                self.done(u, i);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => self.fail(u, i, &io_kind(&e)),
        }
    }

    /// Reads every datagram waiting: the one carrying the current request's sequence
    /// field completes it; others (late replies to earlier requests) are skipped.
    fn read_udp(&mut self, u: &mut User, i: usize) {
        let (off, len) = self.sh.plan.seq_field.unwrap_or((0, 8));
        loop {
            let Some(s) = u.udp.as_ref() else { return };
            match s.recv(&mut self.scratch) {
                Ok(n) => {
                    let mine = u.state == State::Reading
                        && n >= off + len
                        && self.scratch[off..off + len] == u.tag[..len];
                    if mine {
                        self.done(u, i);
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    if u.state == State::Reading {
                        self.fail(u, i, &io_kind(&e));
                    }
                    return;
                }
            }
        }
    }
}

/// A stream read that gives up at the first EINTR like a timeout would not: the loop
/// retries on its next event.
struct NoRetry<'a>(&'a mut TcpStream);

impl Read for NoRetry<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.read(buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => {
                Err(std::io::Error::new(ErrorKind::WouldBlock, e))
            }
            r => r,
        }
    }
}

/// A non-blocking TCP connect to `target`: the stream and whether it is connected
/// already (else in progress: writable when done).
fn tcp_connect(target: SocketAddr) -> std::io::Result<(TcpStream, bool)> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(target),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    s.set_nonblocking(true)?;
    s.set_nodelay(true)?;
    let done = match s.connect(&target.into()) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
        Err(e) => return Err(e),
    };
    Ok((TcpStream::from(s), done))
}

/// A non-blocking UDP socket connected to `target`.
fn udp_socket(target: SocketAddr) -> std::io::Result<UdpSocket> {
    let bind: SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let u = UdpSocket::bind(bind)?;
    u.connect(target)?;
    u.set_nonblocking(true)?;
    Ok(u)
}
