//! The payload connections of `probe idle --probe-data`: open for the whole study, each
//! carries payload every second in one direction or both, so the study can tell whether
//! payload (the near side's, the far side's) resets the path's idle timer.
//!
//! Against any server, one connection sends the user's bytes every second and reads
//! whatever comes back (an echo's answers make it a both-ways probe). With
//! `--server-first` (tpslab's responder on the far side) three connections ask the
//! responder, by a hello, to read and answer nothing (the near side's payload alone), to
//! send a byte every second itself (the far side's alone), or to echo (both). A zero-
//! payload ACK is not among them: ordinary sockets cannot send one (raw sockets could).

use super::fate_of;
use super::responder::{PAYLOAD_ECHO, PAYLOAD_SINK, PAYLOAD_SOURCE, SF_PAYLOAD};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use tpslab_analysis::idle::{PAYLOAD_EVERY_MS, PAYLOAD_SILENCE_MS};
use tpslab_net::mono_ns;
use tpslab_record::idle::{Fate, PayloadConn, PayloadWay};

/// One payload connection being watched.
pub(super) struct PayloadProbe {
    s: TcpStream,
    /// Which way it was asked to carry payload (a near-side probe against any server
    /// is `Near` until the far side answers).
    way: PayloadWay,
    /// The bytes it sends (empty: it sends nothing, the far side does).
    data: Vec<u8>,
    /// When it was opened, mono ns.
    opened: u64,
    /// When it next sends, ms after its open.
    next_ms: u64,
    /// When the far side's payload last came, ms after its open.
    last_rx_ms: u64,
    answered: u64,
    /// Its fate and when it was known, once known.
    done: Option<(Fate, u64)>,
}

fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.connect_timeout(&addr.into(), Duration::from_secs(5))?;
    // Payload unacknowledged this long: the path forgot the flow (ETIMEDOUT).
    s.set_tcp_user_timeout(Some(Duration::from_millis(PAYLOAD_SILENCE_MS)))?;
    Ok(s.into())
}

impl PayloadProbe {
    /// Opens the payload connections of a study against `addr`: one sending `data`
    /// every second (any server), or (`server_first`) the responder's three: near side
    /// only, far side only, both ways. Errors: a connect's, a hello's write.
    pub(super) fn open_all(
        addr: SocketAddr,
        data: &[u8],
        server_first: bool,
    ) -> std::io::Result<Vec<PayloadProbe>> {
        let one = |way: PayloadWay, mode: Option<u32>| -> std::io::Result<PayloadProbe> {
            let mut s = connect(addr)?;
            if let Some(mode) = mode {
                let mut hello = [0u8; 16];
                hello[..8].copy_from_slice(SF_PAYLOAD);
                hello[8..12].copy_from_slice(&mode.to_be_bytes());
                s.write_all(&hello)?;
            }
            s.set_nonblocking(true)?;
            Ok(PayloadProbe {
                s,
                way,
                data: if way == PayloadWay::Far {
                    vec![]
                } else {
                    data.to_vec()
                },
                opened: mono_ns(),
                next_ms: PAYLOAD_EVERY_MS,
                last_rx_ms: 0,
                answered: 0,
                done: None,
            })
        };
        if !server_first {
            return Ok(vec![one(PayloadWay::Near, None)?]);
        }
        Ok(vec![
            one(PayloadWay::Near, Some(PAYLOAD_SINK))?,
            one(PayloadWay::Far, Some(PAYLOAD_SOURCE))?,
            one(PayloadWay::Both, Some(PAYLOAD_ECHO))?,
        ])
    }

    /// How long it has been open, ms.
    pub(super) fn age_ms(&self) -> u64 {
        (mono_ns() - self.opened) / 1_000_000
    }

    /// Whether it is still alive (its fate not known).
    pub(super) fn alive(&self) -> bool {
        self.done.is_none()
    }

    /// Sends when due, reads what came, and dates its end: a FIN (closed), a RST, its
    /// payload unacknowledged for [`PAYLOAD_SILENCE_MS`] (ETIMEDOUT: dropped), or (far
    /// side's payload) none for that long (dropped).
    pub(super) fn poll(&mut self) {
        if self.done.is_some() {
            return;
        }
        let age = self.age_ms();
        let end = |f: Fate| Some((f, age));
        self.done = (|| {
            if let Ok(Some(e)) = SockRef::from(&self.s).take_error() {
                return end(fate_of(&e));
            }
            let mut buf = [0u8; 4096];
            loop {
                match (&self.s).read(&mut buf) {
                    Ok(0) => return end(Fate::Closed),
                    Ok(n) => {
                        self.answered += n as u64;
                        self.last_rx_ms = age;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return end(fate_of(&e)),
                }
            }
            if self.way == PayloadWay::Far {
                // The responder sends every second from its open.
                let since = age.saturating_sub(self.last_rx_ms);
                return (since > PAYLOAD_SILENCE_MS).then_some((Fate::Dropped, age));
            }
            if age >= self.next_ms {
                self.next_ms = age + PAYLOAD_EVERY_MS;
                match (&self.s).write(&self.data) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return end(fate_of(&e)),
                }
            }
            None
        })();
    }

    /// What it showed: its fate (alive at `age` when still open) and when.
    pub(super) fn record(&self) -> PayloadConn {
        let (fate, decided_ms) = self
            .done
            .clone()
            .unwrap_or_else(|| (Fate::Alive, self.age_ms()));
        PayloadConn {
            // A near-side probe the far side answered carried payload both ways.
            way: if self.way == PayloadWay::Near && self.answered > 0 {
                PayloadWay::Both
            } else {
                self.way
            },
            fate,
            decided_ms,
            answered_bytes: self.answered,
        }
    }
}
