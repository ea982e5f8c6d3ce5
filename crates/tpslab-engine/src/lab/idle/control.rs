//! The control connection of `probe idle`: busy every second for the whole study, so
//! its death says whether the path or the server failed (or, for TCP, whether the path's
//! timer ignores keepalive: [`ControlState`] dates each end and opens it again).

use super::responder::{udp_reply_to, udp_request, FATE_CODES, SF_BEAT, SF_CONTROL, SF_FATE};
use super::{check, fate_of, open, Transport};

use socket2::SockRef;
use std::io::Read;
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;
use tpslab_net::mono_ns;
use tpslab_record::idle::Fate;

/// The control: busy every second for the whole study. TCP: a connection with keepalive
/// every second. UDP: a mapping asked for an immediate reply every second, each due
/// within 2 s.
pub(super) enum Control {
    Tcp(TcpStream),
    /// Server first: the responder reports each connection's fate here; a heartbeat
    /// byte every second (each answered), so that paths counting only payload keep it.
    Reports {
        s: TcpStream,
        buf: Vec<u8>,
        next_beat_ms: u64,
    },
    Udp {
        s: UdpSocket,
        next_ms: u64,
        waiting: Option<(u64, u64)>,
    },
}

impl Control {
    fn open(t: &Transport) -> std::io::Result<Control> {
        if t.plan.server_first {
            let mut s = open(t.addr, 1, 1, CONTROL_KEEPALIVE_CNT)?;
            let mut hello = [0u8; 16];
            hello[..8].copy_from_slice(SF_CONTROL);
            hello[8..].copy_from_slice(&t.study.to_be_bytes());
            s.set_nonblocking(false)?;
            std::io::Write::write_all(&mut s, &hello)?;
            s.set_nonblocking(true)?;
            return Ok(Control::Reports {
                s,
                buf: vec![],
                next_beat_ms: 0,
            });
        }
        if !t.plan.udp {
            return t.control_tcp().map(Control::Tcp);
        }
        let s = t.udp_socket()?;
        // The responder must answer at once, or the study cannot tell anything.
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        let nonce = t.nonce();
        s.send(&udp_request(nonce, 0))?;
        let mut buf = [0u8; 64];
        loop {
            let n = s.recv(&mut buf).map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    std::io::Error::new(
                        e.kind(),
                        "no answer in 2 s: is `tpslab probe idle-responder` running there?",
                    )
                }
                _ => e,
            })?;
            if udp_reply_to(&buf[..n], nonce) {
                break;
            }
        }
        s.set_nonblocking(true)?;
        Ok(Control::Udp {
            s,
            next_ms: 1000,
            waiting: None,
        })
    }

    /// Its fate if it ended; `now_ms` since the study started; `t` sends the requests.
    fn poll(&mut self, now_ms: u64, t: &Transport) -> Option<Fate> {
        match self {
            Control::Tcp(s) => check(s),
            Control::Reports {
                s,
                buf,
                next_beat_ms,
            } => {
                if let Ok(Some(e)) = SockRef::from(&*s).take_error() {
                    return Some(fate_of(&e));
                }
                if now_ms >= *next_beat_ms {
                    *next_beat_ms = now_ms + 1000;
                    if let Err(e) = std::io::Write::write(&mut &*s, b".") {
                        if e.kind() != std::io::ErrorKind::WouldBlock {
                            return Some(fate_of(&e));
                        }
                    }
                }
                let mut b = [0u8; 1024];
                loop {
                    match (&*s).read(&mut b) {
                        Ok(0) => return Some(Fate::Closed),
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Some(fate_of(&e)),
                    }
                }
                while buf.len() >= 16 {
                    let m: Vec<u8> = buf.drain(..16).collect();
                    if &m[..8] == SF_BEAT {
                        continue;
                    }
                    if &m[..8] != SF_FATE {
                        return Some(Fate::Error("a report that is not the responder's".into()));
                    }
                    let conn = u32::from_be_bytes(m[8..12].try_into().expect("4 bytes"));
                    let code = u32::from_be_bytes(m[12..16].try_into().expect("4 bytes"));
                    let fate = match FATE_CODES.get(code as usize).copied() {
                        Some("alive") => Fate::Alive,
                        Some("dropped") => Fate::Dropped,
                        Some("reset") => Fate::Reset,
                        Some("closed") => Fate::Closed,
                        _ => Fate::Error("reported by the responder".into()),
                    };
                    t.fates.borrow_mut().insert(conn, fate);
                }
                None
            }
            Control::Udp {
                s,
                next_ms,
                waiting,
            } => {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.recv(&mut buf) {
                    if waiting.is_some_and(|(nonce, _)| udp_reply_to(&buf[..n], nonce)) {
                        *waiting = None;
                    }
                }
                if waiting.is_some_and(|(_, sent)| now_ms > sent + 2000) {
                    return Some(Fate::Dropped);
                }
                if waiting.is_none() && now_ms >= *next_ms {
                    let nonce = t.nonce();
                    if let Err(e) = s.send(&udp_request(nonce, 0)) {
                        return Some(fate_of(&e));
                    }
                    *waiting = Some((nonce, now_ms));
                    *next_ms = now_ms + 1000;
                }
                None
            }
        }
    }
}

/// Unanswered keepalive probes (one a second) before a TCP control's kernel gives up.
pub(super) const CONTROL_KEEPALIVE_CNT: u64 = 3;

/// Control connections opened again after the path ended one by itself, at most: a
/// server that closes every connection at once would otherwise be reconnected to forever.
const CONTROL_REOPENS: usize = 20;

/// The control connection and what became of the ones before it.
pub(super) struct ControlState {
    c: Control,
    /// When it was opened (mono ns).
    opened: u64,
    /// Each TCP control the path ended by itself, ms after its open.
    pub(super) ends_ms: Vec<u64>,
}

impl ControlState {
    pub(super) fn open(t: &Transport) -> std::io::Result<ControlState> {
        Ok(ControlState {
            c: Control::open(t)?,
            opened: mono_ns(),
            ends_ms: vec![],
        })
    }

    /// Whether no control has ended so far and this one is a TCP connection tested by
    /// its own keepalive alone.
    pub(super) fn silent_tcp_unended(&self) -> bool {
        matches!(self.c, Control::Tcp(_)) && self.ends_ms.is_empty()
    }

    /// How long the current control has been open, ms.
    pub(super) fn age_ms(&self) -> u64 {
        (mono_ns() - self.opened) / 1_000_000
    }

    /// Its fate if it failed; `now_ms` since the study started. A TCP control ended by a
    /// FIN or RST (a path whose timer ignores its keepalives, a server's idle timeout),
    /// or whose keepalives went unanswered (a path that forgot it silently), is dated and
    /// opened again: whether that end was the timeout being measured is the analysis's
    /// call (`tpslab_analysis::idle::keepalive_counts`); a reconnect refused is a
    /// failure. A silent end is dated by its first unanswered probe, the kernel's
    /// give-up ([`CONTROL_KEEPALIVE_CNT`] probes one second apart) less that.
    pub(super) fn poll(&mut self, now_ms: u64, t: &Transport) -> Option<Fate> {
        let f = self.c.poll(now_ms, t)?;
        let ended_by_path = matches!(self.c, Control::Tcp(_))
            && matches!(f, Fate::Closed | Fate::Reset | Fate::Dropped)
            && self.ends_ms.len() < CONTROL_REOPENS;
        if !ended_by_path {
            return Some(f);
        }
        let mut end_ms = (mono_ns() - self.opened) / 1_000_000;
        if f == Fate::Dropped {
            end_ms = end_ms.saturating_sub(CONTROL_KEEPALIVE_CNT * 1000);
        }
        self.ends_ms.push(end_ms);
        match Control::open(t) {
            Ok(c) => {
                self.c = c;
                self.opened = mono_ns();
                None
            }
            Err(e) => Some(fate_of(&e)),
        }
    }
}
