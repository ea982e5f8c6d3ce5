//! HTTP/2 load's connections: the connect, TLS handshake and preface, the writes of
//! what each connection has queued, its reads, and its close (made again at once, or
//! after a back-off following a failure). The frames read are handled in
//! [`super::frames`], the streams on them in [`super::streams`].

use std::io::{ErrorKind, Read};

use tpslab_net::mono_ns;
use tpslab_net::poll::{HANGUP, READABLE, WRITABLE};

use super::guard::{self, Fault};
use super::{control, CState, Loop};
use crate::client::books::Books;
use crate::client::proto::h2;
use crate::client::proto::tls::{self, Handshake};
use crate::client::proto::{connect, io_kind, Opened};

impl<B: Books> Loop<'_, '_, B> {
    /// Starts connection `k`: a non-blocking connect.
    pub(super) fn open(&mut self, k: usize) {
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
    pub(super) fn connected(&mut self, k: usize) {
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

    pub(super) fn handshake(&mut self, k: usize) {
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
    pub(super) fn start_h2(&mut self, k: usize) {
        let c = &mut self.conns[k];
        c.state = CState::Settings;
        c.tx.clear();
        c.tx_off = 0;
        control(self.run.sched, &mut self.local, &mut c.tx, h2::client_start);
        self.flush(k);
    }

    pub(super) fn connect_failed(&mut self, k: usize, kind: &str) {
        self.run.sched.failed(
            &mut self.local,
            mono_ns(),
            &format!("connect: {kind}"),
            false,
        );
        self.close(k, true);
    }

    /// Closes connection `k` (its streams must be gone already): made again at once, or
    /// after a back-off following a failure: 1 ms after a connection that answered, else
    /// twice the slot's last, up to 1 s ([`crate::client::users::next_backoff`]), each counted
    /// ([`Books::backed_off`]: the record's `reconnect_backoffs`).
    pub(super) fn close(&mut self, k: usize, back_off: bool) {
        let now = mono_ns();
        // The schedules waiting for a stream of this connection wait on for the next, their
        // waits (and timeouts) counted from when they began.
        let c = &mut self.conns[k];
        if c.served {
            c.backoff_ns = 0;
        }
        let retry_at = if back_off {
            c.backoff_ns = crate::client::users::next_backoff(c.backoff_ns);
            self.run.sched.backed_off(&mut self.local, now);
            now + c.backoff_ns
        } else {
            now
        };
        // Streams still listed: none when called right; their schedules go on.
        for (_, i) in c.streams.drain() {
            self.scheds[i].sid = 0;
        }
        c.reset(retry_at);
    }

    /// Connection `k`'s server passed one of the client's limits or sent what HTTP/2
    /// forbids (`f`): a GOAWAY (ENHANCE_YOUR_CALM for a flood, PROTOCOL_ERROR else) added
    /// to its write buffer and written if the socket takes it at once, the fault counted
    /// by kind in the record, its streams failed with the fault's kind (none in flight:
    /// the connection counted once among the connects' errors, so a fault in the
    /// SETTINGS exchange is never "no errors"), and the connection closed, backing off.
    pub(super) fn fault(&mut self, k: usize, f: Fault) {
        f.count(&mut self.seen_now().faults);
        let c = &mut self.conns[k];
        control(self.run.sched, &mut self.local, &mut c.tx, |t| {
            h2::goaway(t, 0, f.code())
        });
        if let Some(s) = c.sock.as_ref() {
            // One try, never a wait: the socket is non-blocking.
            let _ = match c.tls.as_deref_mut() {
                Some(t) => tls::write(t, s, &c.tx, &mut c.tx_off).map(|_| ()),
                None => s
                    .send_with_flags(&c.tx[c.tx_off..], libc::MSG_NOSIGNAL)
                    .map(|_| ()),
            };
        }
        let kind = f.kind();
        if c.streams.is_empty() {
            self.run.sched.failed(
                &mut self.local,
                mono_ns(),
                &format!("connect: {kind}"),
                false,
            );
        }
        self.conn_failed(k, kind);
    }

    /// Fails every stream of connection `k` with `kind` and closes it (backing off).
    pub(super) fn conn_failed(&mut self, k: usize, kind: &str) {
        let now = mono_ns();
        let ids: Vec<usize> = self.conns[k].streams.values().copied().collect();
        for i in ids {
            self.stream_failed(i, kind, now, false);
        }
        self.close(k, true);
    }

    pub(super) fn watch(&mut self, k: usize, interest: u32) {
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

    pub(super) fn flush_all(&mut self) {
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
    pub(super) fn flush(&mut self, k: usize) {
        let c = &mut self.conns[k];
        let Some(s) = c.sock.as_ref() else { return };
        let full = !guard::tx_room(c.tx.len(), c.tx_off);
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
                c.guard.written();
                self.watch(k, READABLE);
            }
            Ok(false) => self.watch(k, READABLE | WRITABLE),
            Err(e) => return self.conn_failed(k, &io_kind(&e)),
        }
        // The buffer was full and the socket took some: requests go on.
        let c = &self.conns[k];
        if full && guard::tx_room(c.tx.len(), c.tx_off) {
            self.unblock(k);
            self.drain_waiting(k);
        }
    }

    pub(super) fn on_event(&mut self, k: usize, ev: u32) {
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

    /// Reads connection `k` until nothing is waiting, handling each whole frame: at most
    /// [`guard::READS_PER_EVENT`] reads (the rest at the loop's next turn).
    pub(super) fn read(&mut self, k: usize) {
        for _ in 0..guard::READS_PER_EVENT {
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
                        // A server that answered nothing on it is not called at once again.
                        let served = c.served;
                        self.close(k, !served)
                    } else {
                        self.conn_failed(k, "closed by peer")
                    };
                }
                Ok(n) => {
                    c.rx_end += n;
                    self.run.sched.read(&mut self.local, n);
                    if let Err(f) = self.frames(k) {
                        return self.fault(k, f);
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
        // The budget is spent: a plain socket's readiness says there is more; TLS
        // plaintext left in the session is read at the loop's next turn.
        let c = &mut self.conns[k];
        c.more = c.tls.is_some() && c.sock.is_some();
    }
}
