//! The users of a closed-loop ramp, multiplexed: each loop thread owns a share of the users
//! (user i on loop i % loops) as state machines on one epoll instance, with their think
//! times, back-offs and per-request timeouts on a timer heap. Thousands of users cost a
//! socket and a few KiB each, not a thread each.
//!
//! A user: opens its socket (non-blocking; a connection is made within the timeout),
//! writes its request, reads the reply (cut out of the bytes read and matched to the
//! request by its protocol, [`crate::client::proto`]; late replies to earlier requests skipped),
//! counts it, thinks, and goes again. A failed request is counted by kind; a connection is
//! then closed and made again. After a failed connect (or a connection closed for bytes no
//! request asked for, [`Exchange::UNSOLICITED`]) it backs off before the next attempt:
//! [`BACKOFF_FIRST_NS`], doubling at each failure in a row up to [`BACKOFF_MAX_NS`], until
//! a reply comes, so a dead server is not spun on (each back-off counted,
//! [`Books::backed_off`]).
//!
//! `--timeout` bounds a request from the start of its write to the end of its reply,
//! however fast the reply's bytes come: the deadline is checked between reads too, not
//! only when the loop's timers run (a server streaming a reply without end would keep the
//! loop reading).
//!
//! The loop is generic over the protocol ([`Exchange`], monomorphised) and knows of it only
//! its [`Transport`]: a stream's bytes are kept per user until a reply is whole, a
//! datagram socket's are read into one buffer of the loop's. A protocol with a TLS client
//! ([`Exchange::tls`], `https://`) has a rustls session per connection, driven here over
//! the same socket ([`crate::client::proto::tls`]): its handshake after the connect (within the
//! same timeout, a failure counted as the connect's), the request written and the reply
//! read as its plaintext.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::AsRawFd;

use tpslab_net::mono_ns;
use tpslab_net::poll::{Epoll, HANGUP, READABLE, WRITABLE};

use crate::client::evloop::Waits;
use tpslab_record::gaps::ReplyGaps;

use crate::client::books::Books;
use crate::client::proto::tls::{self, Handshake};
use crate::client::proto::{io_kind, Exchange, Opened, Reply, WithExchange};
use tpslab_plan::proto::Transport;

/// Where a user is in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not yet among the active users.
    Off,
    /// Until its timer: thinking, or backing off before a reconnect.
    Waiting,
    /// Connect in flight.
    Connecting,
    /// TLS handshake in flight (the connect done).
    Handshaking,
    /// Writing its request: bytes written so far.
    Sending(usize),
    /// Waiting for the reply.
    Reading,
}

struct User<U> {
    id: usize,
    state: State,
    /// Its socket; None: opened at its next request.
    sock: Option<socket2::Socket>,
    /// Its connection's TLS session (a protocol with [`Exchange::tls`]); None: plain.
    tls: Option<Box<rustls::ClientConnection>>,
    /// A stream's bytes read and not yet taken by a whole reply (unused on datagrams).
    rx: RecvBuf,
    /// Its protocol's state: sequence number, request, ...
    p: U,
    /// When the current request started, ns.
    t0: u64,
    /// When the first bytes of the current request's reply were read, ns (0: none yet;
    /// streams only): against the reply's end, the time its bytes were held on the way
    /// ([`Books::answered`]). Taken from the clock read the deadline check makes before
    /// each read: no clock read or system call of its own.
    first: u64,
    /// When the current request was intended (the open loop's schedule), ns; then when
    /// the next one is (0: at once).
    intended: u64,
    next_at: u64,
    /// Since when it could send (its previous reply or failure, its connect), ns.
    ready: u64,
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
    /// Its last back-off, ns (0: none since its last reply).
    backoff_ns: u64,
}

/// Where a stream user's first reply is read: it grows (doubling) to the largest reply.
const RX_START: usize = 4096;

/// A user's first back-off after a failed connect, ns (1 ms).
pub const BACKOFF_FIRST_NS: u64 = 1_000_000;

/// Its longest back-off, ns (1 s): the first doubled at each failure in a row up to it.
pub const BACKOFF_MAX_NS: u64 = 1_000_000_000;

/// The back-off after one of `last` ns (0: the first of a run of failures).
pub(crate) fn next_backoff(last: u64) -> u64 {
    match last {
        0 => BACKOFF_FIRST_NS,
        b => b.saturating_mul(2).min(BACKOFF_MAX_NS),
    }
}

/// A loop's context: the shared ramp state, its protocol, its epoll and its timers.
struct Loop<'a, B: Books, P> {
    sh: &'a B,
    proto: &'a P,
    ep: Epoll,
    /// (time, user): at most about one live entry per user (see [`Loop::timer`]).
    timers: BinaryHeap<Reverse<(u64, usize)>>,
    /// Datagrams: every user's are read here (a stream's into the user's own buffer).
    scratch: Vec<u8>,
    timeout_ns: u64,
    /// This loop's own counts.
    local: B::Local,
}

/// The users `ids` (increasing) of one loop thread, run with the plan's protocol until
/// the ramp is done: `Protocol::with(Users { .. })` calls [`run_loop`] for its type.
pub(crate) struct Users<'a, B> {
    /// The run's clock and counts.
    pub(crate) sh: &'a B,
    /// This loop's users.
    pub(crate) ids: Vec<usize>,
}

impl<B: Books> WithExchange for Users<'_, B> {
    type Out = ();
    fn with<P: Exchange>(self, p: &P) {
        run_loop(self.sh, p, self.ids)
    }
}

/// Runs the users `ids` (increasing) on this thread until the run is done.
pub(crate) fn run_loop<B: Books, P: Exchange>(sh: &B, proto: &P, ids: Vec<usize>) {
    let Some(ep) = crate::client::evloop::epoll_for(sh) else {
        return;
    };
    let stream = P::TRANSPORT == Transport::Stream;
    let mut users: Vec<User<P::User>> = ids
        .into_iter()
        .map(|id| User {
            id,
            state: State::Off,
            sock: None,
            tls: None,
            // Small at first: it grows to a reply's size.
            rx: if stream {
                RecvBuf::with_capacity(RX_START)
            } else {
                RecvBuf::default()
            },
            p: proto.user(id),
            t0: 0,
            first: 0,
            intended: 0,
            next_at: sh.first_due(id),
            ready: 0,
            due: 0,
            queued: 0,
            sock_gen: 0,
            interest: 0,
            backoff_ns: 0,
        })
        .collect();
    // Wakes the wait at the next timer to the microsecond: an open loop's intended send
    // times, think times.
    let mut waits = Waits::new(&ep);
    let mut lp = Loop {
        sh,
        proto,
        ep,
        timers: BinaryHeap::new(),
        // The largest datagram.
        scratch: if stream { vec![] } else { vec![0; 65536] },
        timeout_ns: sh.timeout_ns().max(1_000_000),
        local: sh.local(),
    };
    let mut started = 0;
    while !sh.done() {
        let active = sh.users_at(mono_ns());
        while started < users.len() && users[started].id < active {
            lp.start(&mut users[started], started);
            started += 1;
        }
        lp.due_timers(&mut users);
        // Wake for the next timer, and at least every 5 ms to see new users and the end.
        let next = lp.timers.peek().map_or(u64::MAX, |r| r.0 .0);
        let Some(events) = waits.wait(&mut lp.ep, sh, &mut lp.local, next, false) else {
            continue;
        };
        for &(token, ev) in events {
            let (i, g) = ((token >> 32) as usize, token as u32);
            if let Some(u) = users.get_mut(i).filter(|u| u.sock_gen == g) {
                lp.on_event(u, i, ev);
            }
        }
    }
    // Requests started and not ended: waiting for their reply, or still being written
    // (the server read no more of them): cut off at the end, never lost from the counts.
    let in_flight = users
        .iter()
        .filter(|u| matches!(u.state, State::Reading | State::Sending(_)))
        .count() as u64;
    sh.finish(lp.local, in_flight);
}

impl<B: Books, P: Exchange> Loop<'_, B, P> {
    /// Runs the timers due now: a user's whose due time moved later since its entry was
    /// queued is queued again at its time.
    #[inline]
    fn due_timers(&mut self, users: &mut [User<P::User>]) {
        let now = mono_ns();
        while let Some(&Reverse((t, i))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let u = &mut users[i];
            if u.queued != t {
                continue;
            }
            u.queued = 0;
            if u.due > now {
                // Its timer moved later since this entry was queued (the request it
                // timed out on was answered, a new one started): queued again at its time.
                u.queued = u.due;
                self.timers.push(Reverse((u.due, i)));
            } else if u.due != 0 {
                u.due = 0;
                self.on_timer(u, i);
            }
        }
    }
}

impl<B: Books, P: Exchange> Loop<'_, B, P> {
    fn token(i: usize, u: &User<P::User>) -> u64 {
        ((i as u64) << 32) | u.sock_gen as u64
    }

    /// What an idle connection (its user thinking, or connected ahead of its schedule) is
    /// watched for: bytes, when the protocol says any is a failure
    /// ([`Exchange::UNSOLICITED`]); else nothing (hang-ups still wake it).
    const IDLE: u32 = if P::UNSOLICITED.is_some() {
        READABLE
    } else {
        0
    };

    /// Sets the user's timer to `at` (replacing the one it had). Pushed on the heap only
    /// when earlier than its queued entry: a request's timeout, set at every request,
    /// usually moves later, and the queued entry re-queues itself at the new time when it
    /// comes. The heap holds about one entry per user instead of one per request (at
    /// 200,000 requests a second and a 2 s timeout that was 400,000 entries, a cache miss
    /// per level of every pop).
    fn timer(&mut self, u: &mut User<P::User>, i: usize, at: u64) {
        u.due = at;
        if u.queued == 0 || at < u.queued {
            u.queued = at;
            self.timers.push(Reverse((at, i)));
        }
    }

    /// Watches the user's socket for `interest` (0: nothing; hang-ups still wake it).
    /// Registered already for the same events: no system call (a request's write asks
    /// for READABLE each time; an epoll_ctl per request cost ~1 us of a 90 us round trip).
    fn watch(&mut self, u: &mut User<P::User>, i: usize, interest: u32) {
        if u.interest == interest | (1 << 31) {
            return;
        }
        let tok = Self::token(i, u);
        let Some(s) = &u.sock else { return };
        let r = if u.interest == 0 {
            self.ep.add(s, tok, interest)
        } else {
            self.ep.modify(s, tok, interest)
        };
        match r {
            Ok(()) => u.interest = interest | (1 << 31),
            Err(e) => self.sh.failed(
                &mut self.local,
                mono_ns(),
                &format!("epoll_ctl: {e}"),
                false,
            ),
        }
    }

    fn close(&mut self, u: &mut User<P::User>) {
        // Closing the descriptor removes it from the epoll set.
        u.sock = None;
        u.tls = None;
        u.interest = 0;
        u.sock_gen = u.sock_gen.wrapping_add(1);
        if P::TRANSPORT == Transport::Stream {
            u.rx = RecvBuf::with_capacity(RX_START);
        }
        self.proto.closed(&mut u.p);
    }

    /// Begins the user's next request: opening its socket first when it has none. Past
    /// the plan's end (or once stopped) the user stops instead: off, its connection
    /// closed (a datagram socket stays open, its late replies read and dropped until the
    /// loop ends).
    fn start(&mut self, u: &mut User<P::User>, i: usize) {
        if !self.sh.may_send(mono_ns()) {
            return self.off(u);
        }
        if u.sock.is_some() {
            return self.go(u, i);
        }
        match self.proto.open() {
            Ok(Opened { socket, ready }) => {
                u.sock = Some(socket);
                u.interest = 0;
                u.sock_gen = u.sock_gen.wrapping_add(1);
                if ready {
                    self.sh.opened(&mut self.local);
                    let deadline = mono_ns() + self.timeout_ns;
                    self.connected(u, i, deadline);
                } else {
                    u.state = State::Connecting;
                    self.watch(u, i, WRITABLE);
                    let at = mono_ns() + self.timeout_ns;
                    self.timer(u, i, at);
                }
            }
            Err(kind) => {
                self.sh.failed(&mut self.local, mono_ns(), &kind, false);
                self.close(u);
                self.back_off(u, i);
            }
        }
    }

    /// The connection is made: its TLS handshake begins (within the connect's own
    /// timeout: connect and handshake share one `--timeout`), or, plain, the user goes
    /// on.
    fn connected(&mut self, u: &mut User<P::User>, i: usize, deadline: u64) {
        let Some(client) = self.proto.tls() else {
            return self.go(u, i);
        };
        match client.session() {
            Ok(c) => {
                u.tls = Some(Box::new(c));
                u.state = State::Handshaking;
                self.timer(u, i, deadline);
                self.handshake(u, i);
            }
            Err(kind) => self.connect_failed(u, i, &kind),
        }
    }

    /// Drives the TLS handshake as far as the socket lets it; done, the user goes on. A
    /// failure is the connect's (`connect: tls: ...`, or the socket's error).
    fn handshake(&mut self, u: &mut User<P::User>, i: usize) {
        let (Some(c), Some(s)) = (u.tls.as_deref_mut(), u.sock.as_ref()) else {
            return;
        };
        match tls::handshake(c, s) {
            Ok(Handshake::Done) => self.go(u, i),
            Ok(Handshake::Writable) => self.watch(u, i, WRITABLE),
            Ok(Handshake::Readable) => self.watch(u, i, READABLE),
            Err(e) => self.connect_failed(u, i, &io_kind(&e)),
        }
    }

    /// With its socket ready: sends the user's next request now if it is due, else waits
    /// for its intended time (an open loop's user connected ahead of its schedule).
    fn go(&mut self, u: &mut User<P::User>, i: usize) {
        let now = mono_ns();
        u.ready = u.ready.max(now);
        if u.next_at <= now {
            return self.send(u, i);
        }
        u.state = State::Waiting;
        if P::TRANSPORT == Transport::Stream {
            self.watch(u, i, Self::IDLE);
        }
        let at = u.next_at;
        self.timer(u, i, at);
    }

    /// Stops the user for the rest of the run (see [`Loop::start`]).
    fn off(&mut self, u: &mut User<P::User>) {
        u.state = State::Off;
        u.due = 0;
        if P::TRANSPORT == Transport::Stream && u.sock.is_some() {
            self.close(u);
        }
    }

    fn connect_failed(&mut self, u: &mut User<P::User>, i: usize, kind: &str) {
        self.sh.failed(
            &mut self.local,
            mono_ns(),
            &format!("connect: {kind}"),
            false,
        );
        self.close(u);
        self.back_off(u, i);
    }

    /// Waits before trying again: [`next_backoff`] after the user's last (counted).
    fn back_off(&mut self, u: &mut User<P::User>, i: usize) {
        u.state = State::Waiting;
        u.backoff_ns = next_backoff(u.backoff_ns);
        let now = mono_ns();
        self.sh.backed_off(&mut self.local, now);
        let at = now + u.backoff_ns;
        self.timer(u, i, at);
    }

    /// Starts a request: its clock, its timeout, its bytes (none past the plan's end: a
    /// connect can finish after it).
    fn send(&mut self, u: &mut User<P::User>, i: usize) {
        u.t0 = mono_ns();
        u.first = 0;
        if !self.sh.may_send(u.t0) || !self.sh.claim() {
            return self.off(u);
        }
        u.intended = if u.next_at == 0 { u.t0 } else { u.next_at };
        let at = u.t0 + self.timeout_ns;
        self.timer(u, i, at);
        self.proto.encode(&mut u.p);
        u.state = State::Sending(0);
        self.write(u, i);
    }

    /// The reply arrived: counted (as a reply, or as the failure it reports); the
    /// connection closed if it says so; think, or go again.
    fn answered(&mut self, u: &mut User<P::User>, i: usize, r: Reply) {
        let now = mono_ns();
        self.sh
            .answered(&mut self.local, u.intended, u.t0, u.first, now, &r);
        // A held reply (rare: tens of ms between its first byte and its last, small, as
        // ReplyGaps counts it): its connection's least RTT, the part of the gap that is
        // not the delayed-ACK timer. No getsockopt for any other reply.
        if u.first != 0 && ReplyGaps::is_held(now.saturating_sub(u.first), r.len) {
            let rtt = u.sock.as_ref().and_then(|s| {
                tpslab_net::tcp::tcp_info(s.as_raw_fd())
                    .ok()?
                    .min_rtt_us
                    .filter(|&r| r > 0)
            });
            if let Some(us) = rtt {
                self.sh
                    .held_rtt(&mut self.local, now, u64::from(us) * 1_000);
            }
        }
        u.ready = now;
        u.backoff_ns = 0;
        if r.close {
            self.close(u);
        }
        self.next(u, i, now);
    }

    /// After a reply: the next request at once when it is due (a closed loop without a
    /// think time, an open loop behind its schedule), else at its time.
    fn next(&mut self, u: &mut User<P::User>, i: usize, now: u64) {
        u.next_at = self.sh.next_due(u.intended, now);
        if u.next_at > now {
            u.state = State::Waiting;
            // A connection is watched while its user thinks for hang-ups only (and bytes
            // no request asked for, when they are the protocol's failure); a datagram
            // socket is, for late replies to be read and dropped.
            if P::TRANSPORT == Transport::Stream && u.sock.is_some() {
                self.watch(u, i, Self::IDLE);
            }
            let at = u.next_at;
            self.timer(u, i, at);
        } else {
            self.start(u, i);
        }
    }

    /// A request failed: counted by kind; a connection is dropped (a datagram socket is
    /// kept: late replies are told apart by the protocol). The next request starts from
    /// the timer (after the think time, or at the loop's next pass): never from here, so
    /// failures that repeat at once cannot recurse.
    fn fail(&mut self, u: &mut User<P::User>, i: usize, kind: &str) {
        let now = mono_ns();
        let in_flight = u.state == State::Reading;
        self.sh.failed(&mut self.local, now, kind, in_flight);
        if matches!(u.state, State::Sending(_)) {
            self.sh.abandoned();
        }
        u.ready = now;
        if P::TRANSPORT == Transport::Stream {
            self.close(u);
        }
        u.state = State::Waiting;
        u.next_at = self.sh.next_due(u.intended, now);
        let at = u.next_at.max(now);
        self.timer(u, i, at);
    }

    fn on_timer(&mut self, u: &mut User<P::User>, i: usize) {
        match u.state {
            State::Off => {}
            State::Waiting => self.start(u, i),
            State::Connecting | State::Handshaking => self.connect_failed(u, i, "timeout"),
            State::Sending(_) | State::Reading => self.fail(u, i, "timeout"),
        }
    }

    fn on_event(&mut self, u: &mut User<P::User>, i: usize, ev: u32) {
        match (u.state, P::TRANSPORT) {
            (State::Connecting, _) => {
                let err = u.sock.as_ref().map(|s| s.take_error());
                match err {
                    Some(Ok(None)) if ev & HANGUP == 0 => {
                        self.sh.opened(&mut self.local);
                        // The connect's timer (set when it began) is its deadline.
                        let deadline = u.due;
                        self.connected(u, i, deadline)
                    }
                    Some(Ok(Some(e))) | Some(Err(e)) => self.connect_failed(u, i, &io_kind(&e)),
                    _ => self.connect_failed(u, i, "connection refused"),
                }
            }
            (State::Handshaking, _) => self.handshake(u, i),
            (State::Sending(_), _) => self.write(u, i),
            (State::Reading, Transport::Stream) => self.read_stream(u, i),
            // Waiting or not, a datagram socket is read: late replies and errors (an
            // ICMP port unreachable) would wake the level-triggered wait until they are.
            (_, Transport::Datagram) => self.read_datagrams(u, i),
            // Idle with bytes the protocol counts as a failure (or a hang-up).
            (State::Waiting, Transport::Stream) if P::UNSOLICITED.is_some() => self.read_idle(u, i),
            // Thinking with a connection the server closed: reconnect when the think ends.
            (State::Waiting, Transport::Stream) if ev & HANGUP != 0 => self.close(u),
            _ => {}
        }
    }
}

mod io;
mod recv_buf;
use recv_buf::RecvBuf;

#[cfg(test)]
#[path = "users_tests.rs"]
mod tests;
