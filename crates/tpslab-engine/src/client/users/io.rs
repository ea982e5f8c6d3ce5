//! A user's socket I/O: writing its request (over TLS or not) and reading its reply, a
//! stream's bytes kept until the protocol finds a whole reply, a datagram socket's read
//! into the loop's buffer with late replies skipped.

use super::{Loop, State, User};
use crate::client::books::Books;
use crate::client::proto::tls;
use crate::client::proto::{io_kind, Decoded, Exchange};
use std::io::{ErrorKind, Read};
use tpslab_net::mono_ns;
use tpslab_net::poll::{READABLE, WRITABLE};
use tpslab_plan::proto::Transport;

impl<B: Books, P: Exchange> Loop<'_, B, P> {
    /// Writes what is left of the request; then waits for the reply.
    pub(super) fn write(&mut self, u: &mut User<P::User>, i: usize) {
        let State::Sending(mut off) = u.state else {
            return;
        };
        let proto = self.proto;
        if let (Some(c), Some(s)) = (u.tls.as_deref_mut(), u.sock.as_ref()) {
            let req = proto.request(&u.p);
            let len = req.len();
            return match tls::write(c, s, req, &mut off) {
                Ok(true) => {
                    let ready = u.ready;
                    self.sh
                        .sent(&mut self.local, u.intended, ready, mono_ns(), len);
                    u.state = State::Reading;
                    self.watch(u, i, READABLE);
                }
                Ok(false) => {
                    u.state = State::Sending(off);
                    self.watch(u, i, WRITABLE);
                }
                Err(e) => self.fail(u, i, &io_kind(&e)),
            };
        }
        loop {
            let Some(s) = u.sock.as_ref() else { return };
            let req = proto.request(&u.p);
            // MSG_NOSIGNAL: a write to a connection the peer reset fails with EPIPE
            // instead of raising SIGPIPE (whose default action tpslab keeps).
            match s.send_with_flags(&req[off..], libc::MSG_NOSIGNAL) {
                Ok(n) => {
                    off += n;
                    if off >= req.len() {
                        // When the load really was sent (checked against the plan).
                        let ready = u.ready;
                        self.sh
                            .sent(&mut self.local, u.intended, ready, mono_ns(), req.len());
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
                Err(e) => {
                    let kind = match P::TRANSPORT {
                        Transport::Stream => io_kind(&e),
                        Transport::Datagram => format!("send: {}", io_kind(&e)),
                    };
                    return self.fail(u, i, &kind);
                }
            }
        }
    }

    /// Reads the connection until the protocol finds the reply in the bytes kept, or no
    /// more bytes are waiting, or the request's timeout passes (checked between reads: a
    /// reply whose bytes keep coming would never let the loop's timers run).
    pub(super) fn read_stream(&mut self, u: &mut User<P::User>, i: usize) {
        let proto = self.proto;
        loop {
            match proto.decode(&mut u.p, u.rx.pending()) {
                Decoded::Reply(r) => {
                    u.rx.consume(r.len);
                    return self.answered(u, i, r);
                }
                Decoded::Stale(n) if n > 0 => {
                    u.rx.consume(n);
                    // Those bytes were another reply's: the current one's first byte is
                    // among the rest, or still to come.
                    if u.rx.pending().is_empty() {
                        u.first = 0;
                    }
                    continue;
                }
                Decoded::Stale(_) | Decoded::NeedMore => {}
                Decoded::Invalid(kind) => return self.fail(u, i, &kind),
            }
            // The request's timer (set when its write began) is its deadline. The same
            // clock read dates the reply's first bytes, if this read brings them.
            let now = mono_ns();
            if u.due != 0 && now >= u.due {
                return self.fail(u, i, "timeout");
            }
            let Some(s) = u.sock.as_ref() else { return };
            if B::QUICKACK {
                // Before the read: an ACK the kernel is delaying for the bytes waiting
                // goes now (a failure leaves the delayed ACKs as they were: counted in
                // the re-timing's gaps, never a request's failure).
                let _ = tpslab_net::tcp::set_quickack(std::os::fd::AsRawFd::as_raw_fd(s));
            }
            let got = match u.tls.as_deref_mut() {
                Some(c) => u.rx.fill(|b| tls::read(c, s, b)),
                None => u.rx.read_from(s),
            };
            match got {
                Ok(0) => return self.fail(u, i, "closed by peer"),
                Ok(n) => {
                    if u.first == 0 {
                        u.first = now;
                    }
                    self.sh.read(&mut self.local, n)
                }
                // EINTR: tried again at the next wake-up (the wait is level-triggered).
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    return
                }
                Err(e) => return self.fail(u, i, &io_kind(&e)),
            }
        }
    }

    /// An idle connection (no request in flight) turned readable: bytes read are a failure
    /// of the protocol's [`Exchange::UNSOLICITED`] kind (no request's), the connection
    /// closed and made again after a back-off; the peer's close (or an error) closes it
    /// quietly, as a hang-up while thinking does.
    pub(super) fn read_idle(&mut self, u: &mut User<P::User>, i: usize) {
        let Some(s) = u.sock.as_ref() else { return };
        let got = match u.tls.as_deref_mut() {
            Some(c) => u.rx.fill(|b| tls::read(c, s, b)),
            None => u.rx.read_from(s),
        };
        match got {
            Ok(0) => self.close(u),
            Ok(n) => {
                self.sh.read(&mut self.local, n);
                // The connection's failure, no request's: counted with the failed connects
                // (answered and failed requests never add up to more than were sent).
                let kind = P::UNSOLICITED.unwrap_or("bytes with no request in flight");
                let kind = format!("connect: {kind}");
                self.sh.failed(&mut self.local, mono_ns(), &kind, false);
                self.close(u);
                self.back_off(u, i);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(_) => self.close(u),
        }
    }

    /// Reads every datagram waiting: the one the protocol takes for the current request's
    /// reply completes it; others (late replies to earlier requests, anything read while
    /// no request waits) are skipped.
    pub(super) fn read_datagrams(&mut self, u: &mut User<P::User>, i: usize) {
        let proto = self.proto;
        loop {
            let Some(s) = u.sock.as_ref() else { return };
            let mut r = s;
            match r.read(&mut self.scratch) {
                Ok(n) => {
                    self.sh.read(&mut self.local, n);
                    if u.state != State::Reading {
                        continue;
                    }
                    match proto.decode(&mut u.p, &self.scratch[..n]) {
                        Decoded::Reply(r) => return self.answered(u, i, r),
                        Decoded::Invalid(kind) => return self.fail(u, i, &kind),
                        Decoded::Stale(_) | Decoded::NeedMore => {}
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
