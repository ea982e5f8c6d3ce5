//! `tpslab probe idle`: after how long of idleness a path kills a TCP connection, and how.
//!
//! Each round opens one connection per idle interval of the ladder, sends nothing on it
//! and lets TCP keepalive test it: its first probe goes when the interval ends (triggered
//! from user space, `trigger_keepalive`, not left to a long kernel timer that fires
//! late), then `cnt` more one `intvl` apart. A path that still knows the flow
//! carries the probe and the server's kernel answers it (no application byte is sent);
//! a path that forgot it drops the probe (the kernel gives up with ETIMEDOUT) or answers
//! with a RST (ECONNRESET); a server that closed it sends a FIN. A control connection
//! probed every second stays busy for the whole study: if it dies, the result is not
//! evidence. Rounds narrow the bracket until it is within the resolution.
//!
//! With `udp`, each interval is a UDP mapping: one request to tpslab's responder
//! ([`responder`], `tpslab probe idle-responder`) asks for its reply after the idle
//! interval; a path that forgot the mapping drops the reply. The control asks for an
//! immediate reply every second. With `server_first`, the responder sets its own
//! keepalive on each connection (the far side probes first) and reports each fate on the
//! control connection.

mod control;
pub mod db;
mod lab;
mod payload;
mod responder;

use control::{ControlState, CONTROL_KEEPALIVE_CNT};
pub use lab::lab_study;
use payload::PayloadProbe;
pub use responder::responder;
use responder::{udp_reply_to, udp_request, SF_HELLO};

use crate::EngineError;
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};
use std::io::Read;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;
use tpslab_analysis::idle::{active_ends, bracket, ladder, PAYLOAD_PROVEN_MS, POLL_MS};
use tpslab_net::mono_ns;
use tpslab_plan::login::Login;
use tpslab_plan::probe::IdlePlan;
use tpslab_record::idle::{Conn, Fate, PayloadConn};
use tpslab_record::idle::{Goodbye, StatedSetting};

/// What a study found.
#[derive(Debug, Clone)]
pub struct Study {
    /// Every idle connection, in the order opened.
    pub conns: Vec<Conn>,
    /// The control connection's fate at the end.
    pub control: Fate,
    /// Each TCP control connection the path ended by itself (FIN or RST), ms after that
    /// control was opened; each was opened again.
    pub control_ends_ms: Vec<u64>,
    /// The payload connections of `--probe-data` (none without it).
    pub payload: Vec<PayloadConn>,
    /// Ended by `stop` before the bracket was narrow enough.
    pub interrupted: bool,
    /// The server's own idle-timeout settings (`--protocol`: asked on a connection of
    /// their own before the rounds; empty otherwise).
    pub stated: Vec<StatedSetting>,
}

/// Opens a connection to `addr` whose keepalive probes first after `idle_s` of silence,
/// then every `intvl_s`, giving up after `cnt` unanswered. Errors: the connect's.
fn open(addr: SocketAddr, idle_s: u64, intvl_s: u64, cnt: u64) -> std::io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.connect_timeout(&addr.into(), Duration::from_secs(5))?;
    let ka = TcpKeepalive::new()
        .with_time(Duration::from_secs(idle_s))
        .with_interval(Duration::from_secs(intvl_s))
        .with_retries(cnt as u32);
    s.set_tcp_keepalive(&ka)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

fn fate_of(e: &std::io::Error) -> Fate {
    match e.raw_os_error() {
        Some(libc::ETIMEDOUT) => Fate::Dropped,
        Some(libc::ECONNRESET) | Some(libc::EPIPE) => Fate::Reset,
        Some(n) => Fate::Error(tpslab_net::errno_name(n)),
        None => Fate::Error(e.to_string()),
    }
}

/// The connection's fate if it is known now: an error on the socket, or end of stream.
/// Bytes the server sends (a greeting) are read and ignored.
fn check(s: &TcpStream) -> Option<Fate> {
    if let Ok(Some(e)) = SockRef::from(s).take_error() {
        return Some(fate_of(&e));
    }
    let mut buf = [0u8; 4096];
    loop {
        match (&*s).read(&mut buf) {
            Ok(0) => return Some(Fate::Closed),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Some(fate_of(&e)),
        }
    }
}

/// One idle connection (TCP) or mapping (UDP) being tested.
trait Idle {
    /// Its fate if known `elapsed_ms` after it was opened (`t` holds what the
    /// responder reported).
    fn poll(&mut self, elapsed_ms: u64, t: &Transport) -> Option<Fate>;

    /// Whether `fate`, known `at_ms` after it was opened, was the path (or the server)
    /// ending the connection by itself rather than the answer to its probe
    /// ([`Conn::active_end`]). No by default.
    fn active(&self, _fate: &Fate, _at_ms: u64) -> bool {
        false
    }

    /// What the server said before it ended the connection (`--protocol`). None by
    /// default.
    fn goodbye(&self) -> Option<Goodbye> {
        None
    }
}

/// A connection logged in with the plan's protocol ([`db::DbConn`]): silent until its
/// interval ends, then the protocol's no-op; alive when answered, dead when the server
/// (or the path) ends it first or the no-op goes unanswered until its verdict.
struct DbIdle {
    c: db::DbConn,
    idle_ms: u64,
    verdict_ms: u64,
    /// When its no-op was sent, ms after it was opened (logged in).
    pinged_ms: Option<u64>,
}

impl Idle for DbIdle {
    fn poll(&mut self, elapsed_ms: u64, _: &Transport) -> Option<Fate> {
        // What came first (a goodbye, an end), then the no-op when due: a server that
        // ended the connection before it is not charged a RST the no-op drew.
        for _ in 0..2 {
            match self.c.poll() {
                Err(e) => return Some(fate_of(&e)),
                Ok(db::Seen::Eof) => return Some(Fate::Closed),
                Ok(db::Seen::Reply) if self.pinged_ms.is_some() => return Some(Fate::Alive),
                Ok(_) => {}
            }
            if let Ok(Some(e)) = SockRef::from(&self.c.s).take_error() {
                return Some(fate_of(&e));
            }
            if self.pinged_ms.is_some() || elapsed_ms < self.idle_ms {
                break;
            }
            self.pinged_ms = Some(elapsed_ms);
            if let Err(e) = self.c.ping() {
                return Some(fate_of(&e));
            }
        }
        (elapsed_ms >= self.verdict_ms).then_some(Fate::Dropped)
    }

    fn active(&self, fate: &Fate, at_ms: u64) -> bool {
        match fate {
            // The server (its idle timeout) or a proxy ended it: dated by its end.
            Fate::Closed => true,
            Fate::Reset => self.pinged_ms.is_none_or(|p| at_ms > p + PROBE_ANSWER_MS),
            _ => false,
        }
    }

    fn goodbye(&self) -> Option<Goodbye> {
        self.c.goodbye.clone()
    }
}

/// A RST this long after a keepalive probe was sent is taken for its answer (a path that
/// forgot the flow); a later one, or one before any probe, ended the flow by itself.
const PROBE_ANSWER_MS: u64 = 1000;

/// A connection the responder probes first: its fate comes on the control connection.
struct ServerFirstIdle {
    s: TcpStream,
    conn: u32,
    /// No report by then: the responder failed.
    deadline_ms: u64,
}

impl Idle for ServerFirstIdle {
    fn poll(&mut self, elapsed_ms: u64, t: &Transport) -> Option<Fate> {
        // A FIN on this side with no report before it: the path (a proxy) ended the
        // flow itself; with a RST on the responder's side (a proxy may reset that one),
        // too. After any other report it is the responder closing a judged connection.
        // (The control is read before the probes, so a report sent before that close
        // is here by then.)
        let fin = matches!((&self.s).read(&mut [0u8; 64]), Ok(0));
        match t.fates.borrow_mut().remove(&self.conn) {
            Some(Fate::Reset) if fin => return Some(Fate::Closed),
            Some(f) => return Some(f),
            None if fin => return Some(Fate::Closed),
            None => {}
        }
        (elapsed_ms >= self.deadline_ms).then(|| Fate::Error("no report from the responder".into()))
    }

    /// A FIN (seen on this side, or by the responder) ended the flow by itself (a
    /// proxy's timeout), whatever its probe: dated when seen (a report: within the
    /// responder's tick and a poll of its end).
    fn active(&self, fate: &Fate, _at_ms: u64) -> bool {
        *fate == Fate::Closed
    }
}

/// The keepalive idle time a probe connection starts with, s (TCP_KEEPIDLE's largest):
/// its probe is triggered from user space instead ([`trigger_keepalive`]).
pub(crate) const KEEPIDLE_PARKED_S: u64 = 32_767;

/// Sends the first keepalive probe now: TCP_KEEPIDLE set to 1 s on a connection idle for
/// longer re-arms its keepalive timer to fire at once (net/ipv4/tcp.c
/// `tcp_sock_set_keepidle_locked`). A timer left to fire after a long idle time is late by
/// up to the timer wheel's granularity at that range (4096 or 32768 jiffies: seconds to
/// tens of seconds for minutes of idleness); this one fires within a jiffy.
pub(crate) fn trigger_keepalive(s: &TcpStream, intvl_s: u64, cnt: u64) -> std::io::Result<()> {
    let ka = TcpKeepalive::new()
        .with_time(Duration::from_secs(1))
        .with_interval(Duration::from_secs(intvl_s))
        .with_retries(cnt as u32);
    SockRef::from(s).set_tcp_keepalive(&ka)
}

/// A TCP connection whose keepalive tests the path when its interval ends.
struct TcpIdle {
    s: TcpStream,
    idle_ms: u64,
    intvl_s: u64,
    cnt: u64,
    /// When its first keepalive probe was sent, ms after it was opened.
    triggered_ms: Option<u64>,
    verdict_ms: u64,
}

impl Idle for TcpIdle {
    fn poll(&mut self, elapsed_ms: u64, _: &Transport) -> Option<Fate> {
        if self.triggered_ms.is_none() && elapsed_ms >= self.idle_ms {
            self.triggered_ms = Some(elapsed_ms);
            if let Err(e) = trigger_keepalive(&self.s, self.intvl_s, self.cnt) {
                return Some(fate_of(&e));
            }
        }
        if let Some(f) = check(&self.s) {
            return Some(f);
        }
        // An ACK after the probe went is its answer (the connection was silent since
        // its handshake): the path knew the flow at its interval. Judged now, before
        // later probes meet a path whose timer they did not reset.
        let answered = self.triggered_ms.is_some_and(|p| {
            tpslab_net::tcp::last_ack_recv_ms(self.s.as_raw_fd())
                .is_ok_and(|ago| u64::from(ago) + p < elapsed_ms)
        });
        (answered || elapsed_ms >= self.verdict_ms).then_some(Fate::Alive)
    }

    fn active(&self, fate: &Fate, at_ms: u64) -> bool {
        match fate {
            // A path that forgets a flow drops or resets its segments; a FIN is sent only
            // by one that ends it (a proxy's timeout, the server's).
            Fate::Closed => true,
            Fate::Reset => self
                .triggered_ms
                .is_none_or(|p| at_ms > p + PROBE_ANSWER_MS),
            _ => false,
        }
    }
}

/// A UDP mapping whose reply comes back after the idle interval.
struct UdpIdle {
    s: UdpSocket,
    nonce: u64,
    verdict_ms: u64,
}

impl Idle for UdpIdle {
    fn poll(&mut self, elapsed_ms: u64, _: &Transport) -> Option<Fate> {
        let mut buf = [0u8; 64];
        loop {
            match self.s.recv(&mut buf) {
                Ok(n) if udp_reply_to(&buf[..n], self.nonce) => return Some(Fate::Alive),
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return (elapsed_ms >= self.verdict_ms).then_some(Fate::Dropped)
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Some(fate_of(&e)),
            }
        }
    }
}

/// How a study reaches its target: TCP connections or UDP mappings.
struct Transport<'a> {
    plan: &'a IdlePlan,
    /// Who `--protocol` logs in as (None without it).
    login: Option<&'a Login>,
    addr: SocketAddr,
    nonce: std::cell::Cell<u64>,
    /// Server first: this study's number, and the fates the responder reported by
    /// connection number.
    study: u64,
    fates: std::cell::RefCell<std::collections::HashMap<u32, Fate>>,
}

impl Transport<'_> {
    fn nonce(&self) -> u64 {
        let n = self.nonce.get().wrapping_add(1);
        self.nonce.set(n);
        n
    }

    /// A connection logged in with the plan's protocol (None: no protocol). Errors: the
    /// connection's, or the server's refusal as one line (ErrorKind::PermissionDenied).
    fn login(&self) -> Option<std::io::Result<db::DbConn>> {
        let (proto, login) = (self.plan.protocol?, self.login?);
        Some(
            db::DbConn::login(self.addr, proto, login).map_err(|e| match e {
                db::LoginError::Io(e) => std::io::Error::new(
                    e.kind(),
                    format!(
                        "logging in as {} ({}): {}",
                        login.user,
                        proto.name(),
                        db::LoginError::Io(e)
                    ),
                ),
                db::LoginError::Refused(m) => std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("could not log in as {} ({}): {m}", login.user, proto.name()),
                ),
            }),
        )
    }

    /// The control's TCP connection: keepalive every second (`open`), logged in with the
    /// plan's protocol when there is one.
    fn control_tcp(&self) -> std::io::Result<TcpStream> {
        let Some(c) = self.login() else {
            return open(self.addr, 1, 1, CONTROL_KEEPALIVE_CNT);
        };
        let s = c?.s;
        let ka = TcpKeepalive::new()
            .with_time(Duration::from_secs(1))
            .with_interval(Duration::from_secs(1))
            .with_retries(CONTROL_KEEPALIVE_CNT as u32);
        SockRef::from(&s).set_tcp_keepalive(&ka)?;
        Ok(s)
    }

    /// Opens a probe idle for `idle_s`.
    fn open(&self, idle_s: u64) -> std::io::Result<Box<dyn Idle>> {
        let verdict_ms = self.plan.verdict_after_s(idle_s) * 1000;
        if let Some(c) = self.login() {
            return Ok(Box::new(DbIdle {
                c: c?,
                idle_ms: idle_s * 1000,
                verdict_ms,
                pinged_ms: None,
            }));
        }
        if self.plan.server_first {
            let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))?;
            let conn = self.nonce() as u32;
            let mut hello = [0u8; 24];
            hello[..8].copy_from_slice(SF_HELLO);
            hello[8..16].copy_from_slice(&self.study.to_be_bytes());
            hello[16..20].copy_from_slice(&conn.to_be_bytes());
            hello[20..].copy_from_slice(&(idle_s as u32).to_be_bytes());
            std::io::Write::write_all(&mut s, &hello)?;
            s.set_nonblocking(true)?;
            return Ok(Box::new(ServerFirstIdle {
                s,
                conn,
                deadline_ms: verdict_ms + 3000,
            }));
        }
        if !self.plan.udp {
            let (intvl_s, cnt) = (self.plan.keepalive_intvl_s, self.plan.keepalive_cnt);
            let s = open(self.addr, KEEPIDLE_PARKED_S, intvl_s, cnt)?;
            return Ok(Box::new(TcpIdle {
                s,
                idle_ms: idle_s * 1000,
                intvl_s,
                cnt,
                triggered_ms: None,
                verdict_ms,
            }));
        }
        let s = self.udp_socket()?;
        let nonce = self.nonce();
        s.send(&udp_request(nonce, (idle_s * 1000) as u32))?;
        Ok(Box::new(UdpIdle {
            s,
            nonce,
            verdict_ms,
        }))
    }

    fn udp_socket(&self) -> std::io::Result<UdpSocket> {
        let local: SocketAddr = if self.addr.is_ipv4() {
            "0.0.0.0:0".parse().expect("literal")
        } else {
            "[::]:0".parse().expect("literal")
        };
        let s = UdpSocket::bind(local)?;
        s.connect(self.addr)?;
        s.set_nonblocking(true)?;
        Ok(s)
    }
}

/// One round: a probe per interval of `idles`, each judged at its verdict time or when
/// the path ends it; ends early once every shorter interval is judged after one died.
#[allow(clippy::too_many_arguments)]
fn round(
    t: &Transport,
    n: u32,
    idles: &[u64],
    control: &mut ControlState,
    payload: &mut [PayloadProbe],
    study_t0: u64,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> (Vec<Conn>, Option<Fate>) {
    let t0 = mono_ns();
    let ms = |now: u64| (now - t0) / 1_000_000;
    let mut probes: Vec<Option<Box<dyn Idle>>> = vec![];
    let mut opened: Vec<u64> = vec![];
    let mut conns: Vec<Conn> = vec![];
    for &idle in idles {
        let c = t.open(idle);
        // Each probe's clock starts when it is open (its keepalive timer's does).
        opened.push(mono_ns());
        conns.push(Conn {
            round: n,
            idle_s: idle,
            fate: c.as_ref().err().map_or(Fate::Abandoned, fate_of),
            decided_ms: 0,
            active_end: false,
            seen_open_ms: 0,
            goodbye: None,
        });
        probes.push(c.ok());
    }
    let mut decided: Vec<bool> = probes.iter().map(|p| p.is_none()).collect();
    let mut control_fate = None;
    let mut last_note = t0;
    while !decided.iter().all(|d| *d) {
        if stop.load(Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(POLL_MS));
        let now = mono_ns();
        // The control first: the responder's reports (server first) are read before the
        // probes they judge.
        if control_fate.is_none() {
            control_fate = control.poll((now - study_t0) / 1_000_000, t);
        }
        payload.iter_mut().for_each(PayloadProbe::poll);
        // The probes dated after that (a control's reconnect can take a while).
        let now = mono_ns();
        for (i, p) in probes.iter_mut().enumerate() {
            let Some(p) = p.as_mut().filter(|_| !decided[i]) else {
                continue;
            };
            let since_open = (now - opened[i]) / 1_000_000;
            match p.poll(since_open, t) {
                Some(f) => {
                    conns[i].active_end = p.active(&f, since_open);
                    if !conns[i].active_end {
                        conns[i].seen_open_ms = 0;
                    }
                    conns[i].goodbye = p.goodbye();
                    conns[i].fate = f;
                    conns[i].decided_ms = since_open;
                    decided[i] = true;
                }
                // Seen open now: an end it meets later came after this (a poll can be
                // late, e.g. behind the control's reconnect).
                None => conns[i].seen_open_ms = since_open,
            }
        }
        // Once one died, longer intervals would die too: stop when every shorter one
        // is judged.
        if let Some(d) = bracket(&conns).dead_s {
            let shorter_judged = conns
                .iter()
                .zip(&decided)
                .all(|(c, &dec)| dec || c.idle_s > d);
            if shorter_judged {
                break;
            }
        }
        if now - last_note >= 10_000_000_000 {
            last_note = now;
            let waiting = conns
                .iter()
                .zip(&decided)
                .filter(|(_, d)| !**d)
                .map(|(c, _)| t.plan.verdict_after_s(c.idle_s))
                .max()
                .unwrap_or(0);
            progress(format!(
                "round {n}: {} of {} judged; at most {} s left in this round",
                decided.iter().filter(|d| **d).count(),
                decided.len(),
                waiting.saturating_sub(ms(now) / 1000)
            ));
        }
    }
    (conns, control_fate)
}

/// After the rounds: keeps the control and the payload connections up until they prove
/// what keeps a path open, or the control ends (its fate returned) or `stop`.
///
/// A silent control alive at the end says TCP keepalive resets the path's timer only if
/// it lived long enough to have died otherwise: past the timeout's upper end, then its
/// next keepalive and the kernel's give-up on a path that drops silently. A payload
/// connection still open shows that its payload resets the timer only once it outlived
/// the timeout's upper end by its next payload and the silence that would have ended it.
fn outlive(
    t: &Transport,
    conns: &[Conn],
    control: &mut ControlState,
    payload: &mut [PayloadProbe],
    study_t0: u64,
    stop: &AtomicBool,
) -> Option<Fate> {
    let d = bracket(conns).dead_s?;
    let mut control_fate = None;
    let need_ms = (d + 1 + CONTROL_KEEPALIVE_CNT) * 1000 + POLL_MS;
    while control_fate.is_none()
        && control.silent_tcp_unended()
        && control.age_ms() < need_ms
        && !stop.load(Relaxed)
    {
        std::thread::sleep(Duration::from_millis(POLL_MS));
        control_fate = control.poll((mono_ns() - study_t0) / 1_000_000, t);
        payload.iter_mut().for_each(PayloadProbe::poll);
    }
    let need_ms = (d + 1) * 1000 + PAYLOAD_PROVEN_MS + POLL_MS;
    while control_fate.is_none()
        && payload.iter().any(|p| p.alive() && p.age_ms() < need_ms)
        && !stop.load(Relaxed)
    {
        std::thread::sleep(Duration::from_millis(POLL_MS));
        control_fate = control.poll((mono_ns() - study_t0) / 1_000_000, t);
        payload.iter_mut().for_each(PayloadProbe::poll);
    }
    control_fate
}

/// The progress line opening round `n` of probes idle for `idles` (s each).
fn round_line(n: u32, idles: &[u64], udp: bool) -> String {
    format!(
        "round {n}: {} {} idle for {} s",
        idles.len(),
        if udp { "mapping(s)" } else { "connection(s)" },
        idles
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Runs the study against `addr` until the bracket is within the plan's resolution, no
/// interval up to the longest killed a connection, the shortest already did, or `stop`.
/// `progress` gets a line every 10 s of waiting. `login`: who the plan's `protocol` logs
/// in as (None without one). Errors: the target refuses the control connection, or its
/// login (one line naming the user and the server's reason, no timeout guessed).
pub fn study(
    plan: &IdlePlan,
    addr: SocketAddr,
    login: Option<&Login>,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Study, EngineError> {
    let t = Transport {
        plan,
        login,
        addr,
        nonce: std::cell::Cell::new(u64::from(std::process::id()) << 32),
        study: mono_ns() ^ (u64::from(std::process::id()) << 40),
        fates: Default::default(),
    };
    let study_t0 = mono_ns();
    let mut control =
        ControlState::open(&t).map_err(|e| EngineError::os(format!("connecting to {addr}"), e))?;
    let stated = match t.login() {
        Some(Ok(mut c)) => c.ask_settings(),
        _ => vec![],
    };
    let mut payload = match plan.probe_data {
        Some(d) => PayloadProbe::open_all(addr, d.bytes(), plan.server_first)
            .map_err(|e| EngineError::os(format!("opening a payload connection to {addr}"), e))?,
        None => vec![],
    };
    let mut conns: Vec<Conn> = vec![];
    let (mut lo, mut hi, mut first) = (plan.min_s, plan.max_s, true);
    let mut control_fate = None;
    let mut prev = None;
    for n in 1u32.. {
        let idles = ladder(lo, hi, plan.connections - 1, first);
        if idles.is_empty() {
            break;
        }
        progress(round_line(n, &idles, plan.udp));
        let (c, cf) = round(
            &t,
            n,
            &idles,
            &mut control,
            &mut payload,
            study_t0,
            stop,
            progress,
        );
        conns.extend(c);
        control_fate = control_fate.or(cf);
        let b = bracket(&conns);
        if stop.load(Relaxed) || control_fate.is_some() || b.inconsistent() {
            break;
        }
        // Connections the path ended by itself date the timeout to within their spread:
        // no bisection can narrow it more.
        if active_ends(&conns)
            .is_some_and(|e| e.last_ms - e.first_ms + POLL_MS <= plan.resolution_s * 1000)
        {
            break;
        }
        match (b.alive_s, b.dead_s) {
            // A round that moved neither end (every probe failed to open, say) would
            // repeat itself: stop.
            (Some(a), Some(d)) if d - a > plan.resolution_s && prev != Some((a, d)) => {
                prev = Some((a, d));
                (lo, hi, first) = (a, d, false)
            }
            _ => break,
        }
    }
    if control_fate.is_none() {
        control_fate = outlive(&t, &conns, &mut control, &mut payload, study_t0, stop);
    }
    let end_ms = (mono_ns() - study_t0) / 1_000_000;
    let fate = control_fate
        .or_else(|| control.poll(end_ms, &t))
        .unwrap_or(Fate::Alive);
    Ok(Study {
        conns,
        control: fate,
        control_ends_ms: control.ends_ms,
        payload: payload.iter().map(PayloadProbe::record).collect(),
        interrupted: stop.load(Relaxed),
        stated,
    })
}
