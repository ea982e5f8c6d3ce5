//! tpslab's responder, the far side of `probe idle --udp` and `--server-first`: UDP
//! requests answered after the idle time each asks for; TCP connections whose idle
//! interval is tested by the responder's own keepalive (the far side probes first), each
//! fate reported on the study's control connection.

use socket2::{SockRef, TcpKeepalive};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;
use tpslab_net::mono_ns;

/// The request a UDP probe sends: magic, nonce, the delay of the reply (ms).
pub(super) const UDP_REQ: &[u8; 8] = b"TPSLIDLQ";
/// The responder's reply: magic, the request's nonce.
pub(super) const UDP_REP: &[u8; 8] = b"TPSLIDLR";

pub(super) fn udp_request(nonce: u64, delay_ms: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(UDP_REQ);
    b[8..16].copy_from_slice(&nonce.to_be_bytes());
    b[16..].copy_from_slice(&delay_ms.to_be_bytes());
    b
}

/// Whether `buf` is the reply to `nonce`.
pub(super) fn udp_reply_to(buf: &[u8], nonce: u64) -> bool {
    buf.len() >= 16 && &buf[..8] == UDP_REP && buf[8..16] == nonce.to_be_bytes()
}

/// A server-first probe's hello: magic, study, connection number, idle seconds.
pub(super) const SF_HELLO: &[u8; 8] = b"TPSLSRVF";
/// A study's control connection hello: magic, study.
pub(super) const SF_CONTROL: &[u8; 8] = b"TPSLCTRL";
/// A fate report on the control connection: magic, connection number, fate code.
pub(super) const SF_FATE: &[u8; 8] = b"TPSLFATE";

/// A payload connection's hello (`--probe-data` with `--server-first`): magic, mode
/// ([`PAYLOAD_SINK`], [`PAYLOAD_SOURCE`], [`PAYLOAD_ECHO`]), 4 bytes reserved.
pub(super) const SF_PAYLOAD: &[u8; 8] = b"TPSLPAYL";
/// Read the near side's payload, send nothing.
pub(super) const PAYLOAD_SINK: u32 = 0;
/// Send a byte every second, ignore what comes.
pub(super) const PAYLOAD_SOURCE: u32 = 1;
/// Send back what comes.
pub(super) const PAYLOAD_ECHO: u32 = 2;
/// The responder's answer to a control connection's heartbeat byte: magic, 8 bytes of
/// zeros (the size of a fate report, so reports stay framed).
pub(super) const SF_BEAT: &[u8; 8] = b"TPSLBEAT";

/// Fate codes of [`SF_FATE`]: alive, dropped (ETIMEDOUT), reset, closed, other error.
pub(super) const FATE_CODES: [&str; 5] = ["alive", "dropped", "reset", "closed", "error"];

/// The most TCP connections the responder holds (probes, controls and hellos pending).
const MAX_TCP: usize = 1024;

/// A connection the responder holds.
struct Held {
    s: TcpStream,
    /// Bytes of its hello read so far.
    hello: Vec<u8>,
    /// Set once its hello was read: (study, connection number, probe due at, verdict
    /// due at, ns), and whether its probe went.
    probe: Option<(u64, u32, u64, u64)>,
    triggered: bool,
    /// A control connection's study.
    control: Option<u64>,
    /// A payload connection's mode, and when it last sent (source mode), ns.
    payload: Option<(u32, u64)>,
}

/// The TCP side: hellos read, keepalive set on probes, fates reported to controls.
struct TcpSide {
    held: Vec<Held>,
}

fn fate_code(e: &std::io::Error) -> u32 {
    match e.raw_os_error() {
        Some(libc::ETIMEDOUT) => 1,
        Some(libc::ECONNRESET) | Some(libc::EPIPE) => 2,
        _ => 4,
    }
}

impl TcpSide {
    fn accept(&mut self, l: &TcpListener) {
        while self.held.len() < MAX_TCP {
            let Ok((s, _)) = l.accept() else { return };
            if s.set_nonblocking(true).is_ok() {
                self.held.push(Held {
                    s,
                    hello: vec![],
                    probe: None,
                    triggered: false,
                    control: None,
                    payload: None,
                });
            }
        }
    }

    /// Reads hellos, judges probes, reports fates; drops what ended.
    fn tick(&mut self) {
        let now = mono_ns();
        let mut reports: Vec<(u64, u32, u32)> = vec![];
        let mut gone = vec![false; self.held.len()];
        for (i, h) in self.held.iter_mut().enumerate() {
            gone[i] = if h.probe.is_some() {
                h.judge_probe(now, &mut reports)
            } else if h.control.is_some() {
                h.answer_control()
            } else if h.payload.is_some() {
                h.serve_payload(now)
            } else {
                h.read_hello(now)
            };
        }
        for (study, conn, code) in reports {
            let mut msg = [0u8; 16];
            msg[..8].copy_from_slice(SF_FATE);
            msg[8..12].copy_from_slice(&conn.to_be_bytes());
            msg[12..].copy_from_slice(&code.to_be_bytes());
            if let Some(c) = self.held.iter().find(|h| h.control == Some(study)) {
                let _ = (&c.s).write_all(&msg);
            }
        }
        let mut i = 0;
        self.held.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
    }
}

impl Held {
    /// A probe connection at `now` (ns): its keepalive triggered once its interval is
    /// over, its fate (study, connection, code) pushed to `reports` once it has one.
    /// Returns whether it ended.
    fn judge_probe(&mut self, now: u64, reports: &mut Vec<(u64, u32, u32)>) -> bool {
        let Some((study, conn, probe_at, due)) = self.probe else {
            return false;
        };
        if !self.triggered && now >= probe_at {
            self.triggered = true;
            if super::trigger_keepalive(&self.s, 1, 2).is_err() {
                reports.push((study, conn, 4));
                return true;
            }
        }
        let code = match SockRef::from(&self.s).take_error() {
            Ok(Some(e)) => Some(fate_code(&e)),
            _ => match (&self.s).read(&mut [0u8; 64]) {
                Ok(0) => Some(3),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => (now >= due).then_some(0),
                Err(e) => Some(fate_code(&e)),
                Ok(_) => None,
            },
        };
        if let Some(c) = code {
            reports.push((study, conn, c));
            return true;
        }
        false
    }

    /// A control connection: it sends nothing after its hello but a heartbeat byte a
    /// second (payload for paths that count only that), each answered; an end of stream
    /// ends it. Returns whether it ended.
    fn answer_control(&mut self) -> bool {
        match (&self.s).read(&mut [0u8; 64]) {
            Ok(0) => return true,
            Ok(_) => {
                let mut beat = [0u8; 16];
                beat[..8].copy_from_slice(SF_BEAT);
                let _ = (&self.s).write_all(&beat);
            }
            Err(_) => {}
        }
        false
    }

    /// A payload connection at `now` (ns): what comes read (and echoed in echo mode), a
    /// byte a second sent in source mode. Returns whether it ended.
    fn serve_payload(&mut self, now: u64) -> bool {
        let Some((mode, sent)) = self.payload.as_mut() else {
            return false;
        };
        let mut gone = false;
        let mut buf = [0u8; 4096];
        match (&self.s).read(&mut buf) {
            Ok(0) => gone = true,
            Ok(n) if *mode == PAYLOAD_ECHO && (&self.s).write_all(&buf[..n]).is_err() => {
                gone = true
            }
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => gone = true,
            _ => {}
        }
        if *mode == PAYLOAD_SOURCE && now >= *sent + 1_000_000_000 {
            *sent = now;
            if matches!((&self.s).write(b"."), Err(e) if e.kind() != std::io::ErrorKind::WouldBlock)
            {
                gone = true;
            }
        }
        gone
    }

    /// A connection whose hello is not read whole yet, at `now` (ns): reads more of it,
    /// and once whole makes it a control, a payload connection or a probe (its
    /// keepalive parked until its interval ends). Returns whether it ended (or is not
    /// tpslab's).
    fn read_hello(&mut self, now: u64) -> bool {
        let mut gone = false;
        let mut buf = [0u8; 24];
        // A control's or payload connection's hello is 16 bytes, a probe's 24: read
        // no further than the hello, whatever follows it.
        for _ in 0..2 {
            let want = if self.hello.len() < 16 {
                16 - self.hello.len()
            } else if &self.hello[..8] == SF_HELLO {
                24 - self.hello.len()
            } else {
                0
            };
            if want == 0 {
                break;
            }
            match (&self.s).read(&mut buf[..want]) {
                Ok(0) => gone = true,
                Ok(n) => self.hello.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => gone = true,
            }
            if gone || self.hello.len() < 16 {
                break;
            }
        }
        let b = &self.hello;
        if b.len() >= 16 && &b[..8] == SF_CONTROL {
            self.control = Some(u64::from_be_bytes(b[8..16].try_into().expect("8 bytes")));
        } else if b.len() >= 16 && &b[..8] == SF_PAYLOAD {
            let mode = u32::from_be_bytes(b[8..12].try_into().expect("4 bytes"));
            self.payload = Some((mode, now));
        } else if b.len() == 24 && &b[..8] == SF_HELLO {
            let study = u64::from_be_bytes(b[8..16].try_into().expect("8 bytes"));
            let conn = u32::from_be_bytes(b[16..20].try_into().expect("4 bytes"));
            let idle = u64::from(u32::from_be_bytes(b[20..24].try_into().expect("4 bytes")))
                .clamp(1, 2 * 3600);
            // Parked until the interval ends, then triggered (see the client's).
            let ka = TcpKeepalive::new()
                .with_time(Duration::from_secs(super::KEEPIDLE_PARKED_S))
                .with_interval(Duration::from_secs(1))
                .with_retries(2);
            if SockRef::from(&self.s).set_tcp_keepalive(&ka).is_ok() {
                let s = 1_000_000_000;
                self.probe = Some((study, conn, now + idle * s, now + (idle + 3) * s));
            } else {
                gone = true;
            }
        } else if b.len() >= 8
            && ![&SF_CONTROL[..], &SF_HELLO[..], &SF_PAYLOAD[..]].contains(&&b[..8])
        {
            gone = true;
        }
        gone
    }
}

/// tpslab's responder, the far side of `probe idle --udp` and `--server-first`, until
/// `stop`. UDP: each request (20 bytes: magic, nonce, delay in ms) is answered with a
/// reply of the same size, from the same socket, after the delay asked (at most 2 h; at
/// most 65536 pending). TCP (`tcp`): a probe connection's hello (study, number, idle
/// seconds) sets the responder's keepalive on it, so the far side probes first; its fate
/// (answered, ETIMEDOUT, RST, FIN) is reported on the study's control connection. At
/// most 1024 TCP connections at once. Returns the UDP requests answered.
pub fn responder(
    s: &UdpSocket,
    tcp: Option<&TcpListener>,
    stop: &AtomicBool,
) -> std::io::Result<u64> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    if let Some(l) = tcp {
        l.set_nonblocking(true)?;
    }
    let mut side = TcpSide { held: vec![] };
    let mut tcp_at = 0u64;
    let mut pending: BinaryHeap<Reverse<(u64, u64, SocketAddr)>> = BinaryHeap::new();
    let mut answered = 0u64;
    let mut buf = [0u8; 64];
    while !stop.load(Relaxed) {
        let wait = pending
            .peek()
            .map_or(10, |Reverse((due, _, _))| {
                due.saturating_sub(mono_ns()) / 1_000_000
            })
            .clamp(1, 10);
        s.set_read_timeout(Some(Duration::from_millis(wait)))?;
        if let Ok((n, peer)) = s.recv_from(&mut buf) {
            if n == 20 && &buf[..8] == UDP_REQ && pending.len() < 65_536 {
                let nonce = u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"));
                let delay_ms =
                    u64::from(u32::from_be_bytes(buf[16..20].try_into().expect("4 bytes")))
                        .min(2 * 3600 * 1000);
                pending.push(Reverse((mono_ns() + delay_ms * 1_000_000, nonce, peer)));
            }
        }
        let now = mono_ns();
        while pending
            .peek()
            .is_some_and(|Reverse((due, _, _))| *due <= now)
        {
            let Reverse((_, nonce, peer)) = pending.pop().expect("peeked");
            let mut rep = [0u8; 20];
            rep[..8].copy_from_slice(UDP_REP);
            rep[8..16].copy_from_slice(&nonce.to_be_bytes());
            if s.send_to(&rep, peer).is_ok() {
                answered += 1;
            }
        }
        // The TCP side every 20 ms: its verdicts are whole seconds.
        if let Some(l) = tcp.filter(|_| now >= tcp_at) {
            tcp_at = now + 20_000_000;
            side.accept(l);
            side.tick();
        }
    }
    Ok(answered)
}
