//! `tpslab probe idle`: after how long of idleness a path kills a TCP connection, and how.
//!
//! Each round opens one connection per idle interval of the ladder, sends nothing on it
//! and lets TCP keepalive test it: its first probe is due after the interval
//! (TCP_KEEPIDLE), then `cnt` more one `intvl` apart. A path that still knows the flow
//! carries the probe and the server's kernel answers it (no application byte is sent);
//! a path that forgot it drops the probe (the kernel gives up with ETIMEDOUT) or answers
//! with a RST (ECONNRESET); a server that closed it sends a FIN. A control connection
//! probed every second stays busy for the whole study: if it dies, the result is not
//! evidence. Rounds narrow the bracket until it is within the resolution.

use crate::link::{Link, ADDR_B};
use crate::EngineError;
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tpslab_analysis::idle::{bracket, ladder, Conn, Fate};
use tpslab_net::mono_ns;
use tpslab_net::ns::NetNs;
use tpslab_plan::probe::IdlePlan;
use tpslab_plan::tcp::{LinkConfig, OnIdle};

/// What a study found.
#[derive(Debug, Clone)]
pub struct Study {
    /// Every idle connection, in the order opened.
    pub conns: Vec<Conn>,
    /// The control connection's fate at the end.
    pub control: Fate,
    /// Ended by `stop` before the bracket was narrow enough.
    pub interrupted: bool,
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

/// One round: a connection per interval of `idles`, each judged at its verdict time or
/// when the path ends it; ends early once every shorter interval is judged after one died.
fn round(
    plan: &IdlePlan,
    addr: SocketAddr,
    n: u32,
    idles: &[u64],
    control: &TcpStream,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> (Vec<Conn>, Option<Fate>) {
    let t0 = mono_ns();
    let ms = |now: u64| (now - t0) / 1_000_000;
    let mut open_conns: Vec<(u64, Option<TcpStream>)> = vec![];
    let mut conns: Vec<Conn> = vec![];
    for &idle in idles {
        let c = open(addr, idle, plan.keepalive_intvl_s, plan.keepalive_cnt);
        let fate = c.as_ref().err().map(fate_of);
        conns.push(Conn {
            round: n,
            idle_s: idle,
            fate: fate.unwrap_or(Fate::Abandoned),
            decided_ms: 0,
        });
        open_conns.push((idle, c.ok()));
    }
    let mut decided: Vec<bool> = open_conns.iter().map(|(_, s)| s.is_none()).collect();
    let mut control_fate = None;
    let mut last_note = t0;
    while !decided.iter().all(|d| *d) {
        if stop.load(Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        let now = mono_ns();
        for (i, (idle, s)) in open_conns.iter().enumerate() {
            let Some(s) = s.as_ref().filter(|_| !decided[i]) else {
                continue;
            };
            let fate = check(s)
                .or_else(|| (ms(now) >= plan.verdict_after_s(*idle) * 1000).then_some(Fate::Alive));
            if let Some(f) = fate {
                conns[i].fate = f;
                conns[i].decided_ms = ms(now);
                decided[i] = true;
            }
        }
        if control_fate.is_none() {
            control_fate = check(control);
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
                .map(|(c, _)| plan.verdict_after_s(c.idle_s))
                .max()
                .unwrap_or(0);
            progress(format!(
                "round {n}: {} of {} connections judged; at most {} s left in this round",
                decided.iter().filter(|d| **d).count(),
                decided.len(),
                waiting.saturating_sub(ms(now) / 1000)
            ));
        }
    }
    (conns, control_fate)
}

/// Runs the study against `addr` until the bracket is within the plan's resolution, no
/// interval up to the longest killed a connection, the shortest already did, or `stop`.
/// `progress` gets a line every 10 s of waiting. Errors: the target refuses the control
/// connection.
pub fn study(
    plan: &IdlePlan,
    addr: SocketAddr,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Study, EngineError> {
    let control =
        open(addr, 1, 1, 3).map_err(|e| EngineError::os(format!("connecting to {addr}"), e))?;
    let mut conns: Vec<Conn> = vec![];
    let (mut lo, mut hi, mut first) = (plan.min_s, plan.max_s, true);
    let mut control_fate = None;
    for n in 1u32.. {
        let idles = ladder(lo, hi, plan.connections - 1, first);
        if idles.is_empty() {
            break;
        }
        progress(format!(
            "round {n}: {} connection(s) idle for {} s",
            idles.len(),
            idles
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let (c, cf) = round(plan, addr, n, &idles, &control, stop, progress);
        conns.extend(c);
        control_fate = control_fate.or(cf);
        let b = bracket(&conns);
        if stop.load(Relaxed) || control_fate.is_some() || b.inconsistent() {
            break;
        }
        match (b.alive_s, b.dead_s) {
            (Some(a), Some(d)) if d - a > plan.resolution_s => (lo, hi, first) = (a, d, false),
            _ => break,
        }
    }
    let control = control_fate
        .or_else(|| check(&control))
        .unwrap_or(Fate::Alive);
    Ok(Study {
        conns,
        control,
        interrupted: stop.load(Relaxed),
    })
}

/// The study in tpslab's lab: two throwaway namespaces joined by the delay line, whose
/// middlebox forgets flows idle for `idle_timeout_ns` and then drops or resets; a
/// listener on the far side accepts and holds the connections (reads nothing).
pub fn lab_study(
    plan: &IdlePlan,
    idle_timeout_ns: u64,
    on_idle: OnIdle,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Study, EngineError> {
    let ns = |what| NetNs::create().map_err(|e| EngineError::os(format!("creating {what}"), e));
    let (a, b) = (ns("the near namespace")?, ns("the far namespace")?);
    let link = Link::start(
        &a,
        &b,
        LinkConfig {
            idle_timeout_ns: Some(idle_timeout_ns),
            on_idle,
            ..Default::default()
        },
    )?;
    let listener = b
        .run(|| TcpListener::bind((ADDR_B, 0)))
        .and_then(|r| r)
        .map_err(|e| EngineError::os("listening in the far namespace", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| EngineError::os("listener", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| EngineError::os("listener", e))?;
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let max_held = plan.connections * 64;
    let holder = std::thread::Builder::new()
        .name("idle-listener".into())
        .spawn(move || {
            let mut held = vec![];
            while !d.load(Relaxed) {
                match listener.accept() {
                    Ok((s, _)) if held.len() < max_held => held.push(s),
                    Ok(_) => {}
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
        .map_err(|e| EngineError::os("spawning the listener thread", e))?;
    let result = a
        .run(|| study(plan, addr, stop, progress))
        .map_err(|e| EngineError::os("entering the near namespace", e))
        .and_then(|r| r);
    done.store(true, Relaxed);
    let _ = holder.join();
    drop(link);
    result
}
