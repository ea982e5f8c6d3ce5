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
            if let Some((study, conn, probe_at, due)) = h.probe {
                if !h.triggered && now >= probe_at {
                    h.triggered = true;
                    if super::trigger_keepalive(&h.s, 1, 2).is_err() {
                        reports.push((study, conn, 4));
                        gone[i] = true;
                        continue;
                    }
                }
                let code = match SockRef::from(&h.s).take_error() {
                    Ok(Some(e)) => Some(fate_code(&e)),
                    _ => match (&h.s).read(&mut [0u8; 64]) {
                        Ok(0) => Some(3),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            (now >= due).then_some(0)
                        }
                        Err(e) => Some(fate_code(&e)),
                        Ok(_) => None,
                    },
                };
                if let Some(c) = code {
                    reports.push((study, conn, c));
                    gone[i] = true;
                }
                continue;
            }
            if h.control.is_some() {
                // A control sends nothing after its hello but a heartbeat byte a second
                // (payload for paths that count only that), each answered; an end of
                // stream ends it.
                match (&h.s).read(&mut [0u8; 64]) {
                    Ok(0) => gone[i] = true,
                    Ok(_) => {
                        let mut beat = [0u8; 16];
                        beat[..8].copy_from_slice(SF_BEAT);
                        let _ = (&h.s).write_all(&beat);
                    }
                    Err(_) => {}
                }
                continue;
            }
            if let Some((mode, sent)) = h.payload.as_mut() {
                let mut buf = [0u8; 4096];
                match (&h.s).read(&mut buf) {
                    Ok(0) => gone[i] = true,
                    Ok(n) if *mode == PAYLOAD_ECHO && (&h.s).write_all(&buf[..n]).is_err() => {
                        gone[i] = true
                    }
                    Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => gone[i] = true,
                    _ => {}
                }
                if *mode == PAYLOAD_SOURCE && now >= *sent + 1_000_000_000 {
                    *sent = now;
                    if matches!((&h.s).write(b"."), Err(e) if e.kind() != std::io::ErrorKind::WouldBlock)
                    {
                        gone[i] = true;
                    }
                }
                continue;
            }
            let mut buf = [0u8; 24];
            // A control's or payload connection's hello is 16 bytes, a probe's 24: read
            // no further than the hello, whatever follows it.
            for _ in 0..2 {
                let want = if h.hello.len() < 16 {
                    16 - h.hello.len()
                } else if &h.hello[..8] == SF_HELLO {
                    24 - h.hello.len()
                } else {
                    0
                };
                if want == 0 {
                    break;
                }
                match (&h.s).read(&mut buf[..want]) {
                    Ok(0) => gone[i] = true,
                    Ok(n) => h.hello.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => gone[i] = true,
                }
                if gone[i] || h.hello.len() < 16 {
                    break;
                }
            }
            let b = &h.hello;
            if b.len() >= 16 && &b[..8] == SF_CONTROL {
                h.control = Some(u64::from_be_bytes(b[8..16].try_into().expect("8 bytes")));
            } else if b.len() >= 16 && &b[..8] == SF_PAYLOAD {
                let mode = u32::from_be_bytes(b[8..12].try_into().expect("4 bytes"));
                h.payload = Some((mode, now));
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
                if SockRef::from(&h.s).set_tcp_keepalive(&ka).is_ok() {
                    let s = 1_000_000_000;
                    h.probe = Some((study, conn, now + idle * s, now + (idle + 3) * s));
                } else {
                    gone[i] = true;
                }
            } else if b.len() >= 8
                && ![&SF_CONTROL[..], &SF_HELLO[..], &SF_PAYLOAD[..]].contains(&&b[..8])
            {
                gone[i] = true;
            }
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
