//! `tpslab probe pool`: S5 in miniature. A connection pool in one throwaway namespace
//! talks to an echo server in another, across the delay line's middlebox, which forgets
//! flows idle for longer than its timeout and drops their segments. The pool behaves as
//! c3p0 does: it tests its idle connections every `validate_every` (a test that gets no
//! answer closes the connection), closes those idle longer than `max_idle`, keeps
//! `min_idle` open, and hands out the connection idle longest. A request on a connection
//! the middlebox forgot gets no answer and fails after the query timeout, as S5's
//! queries did. Against a real path with `--protocol`, each pooled connection logs in as
//! `probe idle --protocol` does and its requests and validations are the protocol's
//! no-op, so a pooler's idle timeout for logged-in clients (pgbouncer's
//! client_idle_timeout) applies to them; the server's goodbye is kept with the request.

use crate::lab::idle::db::{DbConn, LoginError};
use crate::EngineError;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tpslab_net::mono_ns;
use tpslab_plan::login::Login;
use tpslab_plan::probe::PoolPlan;
use tpslab_plan::tcp::{IdleTimer, OnIdle};
use tpslab_record::idle::{Goodbye, Outcome, PoolRecord, PoolRequest};

/// A pooled connection: to an echo server, or logged in to a database.
struct Pooled {
    id: u64,
    s: Link,
    /// Last traffic on it (request or validation), ns.
    last_ns: u64,
}

enum Link {
    Echo(TcpStream),
    Db(Box<DbConn>),
}

impl Pooled {
    /// A request (`query`) or a validation (`ping`): the echo's line, or the database's
    /// no-op; what the server said while this request was on the connection, if it said
    /// anything (taken: a later request on the connection is not said to have met it).
    fn ask(&mut self, line: &[u8], timeout: std::time::Duration) -> (Outcome, Option<Goodbye>) {
        match &mut self.s {
            Link::Echo(s) => (ask(s, line), None),
            Link::Db(c) => {
                let t0 = mono_ns();
                let o = match c.ping_wait(timeout) {
                    Ok(true) => Outcome::Answered {
                        latency_us: (mono_ns() - t0) / 1000,
                    },
                    Ok(false) => Outcome::TimedOut,
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                        Outcome::Failed("EOF".into())
                    }
                    Err(e) => Outcome::Failed(errno(&e)),
                };
                (o, c.goodbye.take())
            }
        }
    }
}

/// Sends one line and waits for its echo: answered, timed out, or failed.
fn ask(s: &mut TcpStream, line: &[u8]) -> Outcome {
    let t0 = mono_ns();
    if let Err(e) = s.write_all(line) {
        return Outcome::Failed(errno(&e));
    }
    let mut got = 0;
    let mut buf = [0u8; 64];
    while got < line.len() {
        match s.read(&mut buf) {
            Ok(0) => return Outcome::Failed("EOF".into()),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Outcome::TimedOut
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Outcome::Failed(errno(&e)),
        }
    }
    Outcome::Answered {
        latency_us: (mono_ns() - t0) / 1000,
    }
}

fn errno(e: &std::io::Error) -> String {
    e.raw_os_error()
        .map_or_else(|| e.to_string(), tpslab_net::errno_name)
}

/// The pool's client side, run in the near namespace.
struct Client<'a> {
    plan: &'a PoolPlan,
    addr: SocketAddr,
    /// Who the plan's protocol logs in as (None: the echo's lines).
    login: Option<&'a Login>,
    /// A login the server refused before any connection was had: the run stops with it.
    refused: Option<String>,
    idle: VecDeque<Pooled>,
    next_id: u64,
    rec: PoolRecord,
}

/// A plan's time as the monotonic clock's nanoseconds (saturated).
fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Client<'_> {
    fn connect(&mut self) -> Result<Pooled, Outcome> {
        let s = match (self.plan.protocol, self.login) {
            (Some(proto), Some(login)) => match DbConn::login(self.addr, proto, login) {
                Ok(c) => Link::Db(Box::new(c)),
                Err(LoginError::Refused(m)) => {
                    let line =
                        format!("could not log in as {} ({}): {m}", login.user, proto.name());
                    if self.rec.opened == 0 {
                        self.refused = Some(line.clone());
                    }
                    return Err(Outcome::Failed(line));
                }
                Err(e) => return Err(Outcome::Failed(format!("logging in: {e}"))),
            },
            _ => {
                let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2))
                    .map_err(|e| Outcome::Failed(errno(&e)))?;
                let _ = s.set_nodelay(true);
                s.set_read_timeout(Some(self.plan.query_timeout))
                    .map_err(|e| Outcome::Failed(errno(&e)))?;
                Link::Echo(s)
            }
        };
        self.next_id += 1;
        self.rec.opened += 1;
        Ok(Pooled {
            id: self.next_id,
            s,
            last_ns: mono_ns(),
        })
    }

    /// Expiry of connections idle too long, and the minimum kept open.
    fn maintain(&mut self) {
        if let Some(max) = self.plan.max_idle.map(ns) {
            let now = mono_ns();
            let before = self.idle.len();
            self.idle.retain(|c| now - c.last_ns < max);
            self.rec.expired += (before - self.idle.len()) as u64;
        }
        while self.idle.len() < self.plan.min_idle {
            match self.connect() {
                Ok(c) => self.idle.push_back(c),
                Err(_) => break,
            }
        }
    }

    /// Tests every idle connection; the dead are closed.
    fn validate(&mut self) {
        let mut kept = VecDeque::new();
        while let Some(mut c) = self.idle.pop_front() {
            self.rec.validations += 1;
            if matches!(
                c.ask(b"ping\n", self.plan.query_timeout).0,
                Outcome::Answered { .. }
            ) {
                c.last_ns = mono_ns();
                kept.push_back(c);
            } else {
                self.rec.validations_failed += 1;
            }
        }
        self.idle = kept;
    }

    fn request(&mut self, t0: u64) {
        let at_ms = (mono_ns() - t0) / 1_000_000;
        let c = match self.idle.pop_front() {
            Some(c) => Ok(c),
            None => self.connect(),
        };
        let mut c = match c {
            Ok(c) => c,
            Err(outcome) => {
                self.rec.requests.push(PoolRequest {
                    at_ms,
                    conn: 0,
                    idle_ms: 0,
                    outcome,
                    goodbye: None,
                });
                return;
            }
        };
        let idle_ms = (mono_ns() - c.last_ns) / 1_000_000;
        let (outcome, goodbye) = c.ask(b"query\n", self.plan.query_timeout);
        let ok = matches!(outcome, Outcome::Answered { .. });
        self.rec.requests.push(PoolRequest {
            at_ms,
            conn: c.id,
            idle_ms,
            outcome,
            goodbye,
        });
        if ok {
            c.last_ns = mono_ns();
            self.idle.push_back(c);
        }
    }

    /// Runs the requests. Errors: the first login, refused (one line).
    fn run(
        mut self,
        stop: &AtomicBool,
        progress: &(dyn Fn(String) + Sync),
    ) -> Result<PoolRecord, String> {
        let t0 = mono_ns();
        self.maintain();
        if let Some(line) = self.refused.take() {
            return Err(line);
        }
        let mut next_validation = self.plan.validate_every.map(|v| t0 + ns(v));
        for k in 0..self.plan.requests {
            let due = t0 + (k as u64 + 1) * ns(self.plan.request_every);
            loop {
                if stop.load(Relaxed) {
                    self.rec.interrupted = true;
                    return Ok(self.rec);
                }
                let now = mono_ns();
                if next_validation.is_some_and(|v| v <= now) {
                    self.validate();
                    next_validation = next_validation
                        .zip(self.plan.validate_every)
                        .map(|(v, e)| v + ns(e));
                }
                self.maintain();
                if now >= due {
                    break;
                }
                let wake = next_validation.map_or(due, |v| v.min(due));
                let nap = wake.saturating_sub(now).min(20_000_000);
                std::thread::sleep(Duration::from_nanos(nap.max(1_000_000)));
            }
            self.request(t0);
            if let Some(line) = self.refused.take() {
                return Err(line);
            }
            if let Some(r) = self.rec.requests.last() {
                progress(format!(
                    "request {} of {}: connection {} idle {:.1} s: {}",
                    k + 1,
                    self.plan.requests,
                    r.conn,
                    r.idle_ms as f64 / 1e3,
                    match &r.outcome {
                        Outcome::Answered { latency_us } =>
                            format!("answered in {:.1} ms", *latency_us as f64 / 1e3),
                        Outcome::TimedOut => "no answer: timed out".into(),
                        Outcome::Failed(e) => format!("failed: {e}"),
                    }
                ));
            }
        }
        Ok(self.rec)
    }
}

/// An echo server on the far side: each connection's bytes are sent back, until `done`.
fn echo_server(listener: TcpListener, done: Arc<AtomicBool>) {
    let mut threads: Vec<std::thread::JoinHandle<()>> = vec![];
    while !done.load(Relaxed) {
        // Connections that ended free their threads; at most 256 live at once.
        threads.retain(|t| !t.is_finished());
        if threads.len() >= 256 {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        match listener.accept() {
            Ok((mut s, _)) => {
                let d = done.clone();
                let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
                threads.push(std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while !d.load(Relaxed) {
                        match s.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock
                                        | std::io::ErrorKind::TimedOut
                                        | std::io::ErrorKind::Interrupted
                                ) => {}
                            Err(_) => break,
                        }
                    }
                }));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    for t in threads {
        let _ = t.join();
    }
}

/// Runs the pool of `plan` against `addr`, a real path (an echo server, or a proxy in
/// front of one; with the plan's `protocol`, a database or a pooler, logged in as
/// `login`), from this namespace, and returns what its requests met. Errors: the
/// server refused the first login (one line naming the user and its reason).
pub fn pool_at(
    plan: &PoolPlan,
    addr: SocketAddr,
    login: Option<&Login>,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> Result<PoolRecord, EngineError> {
    client(plan, addr, login)
        .run(stop, progress)
        .map_err(EngineError::Other)
}

/// The pool's client of `plan`, connecting to `addr`, nothing done yet.
fn client<'a>(plan: &'a PoolPlan, addr: SocketAddr, login: Option<&'a Login>) -> Client<'a> {
    Client {
        plan,
        addr,
        login,
        refused: None,
        idle: VecDeque::new(),
        next_id: 0,
        rec: PoolRecord {
            plan: *plan,
            requests: vec![],
            opened: 0,
            validations: 0,
            validations_failed: 0,
            expired: 0,
            interrupted: false,
        },
    }
}

/// Runs the pool of `plan` through the lab and returns what its requests met.
pub fn pool_lab(
    plan: &PoolPlan,
    stop: &AtomicBool,
    progress: &(dyn Fn(String) + Sync),
) -> Result<PoolRecord, EngineError> {
    let (a, _b, link, listener) =
        crate::lab::link::middlebox_lab(ns(plan.idle_timeout), OnIdle::Drop, IdleTimer::Any)?;
    let addr = listener
        .local_addr()
        .map_err(|e| EngineError::os("listener", e))?;
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let server = std::thread::Builder::new()
        .name("pool-echo".into())
        .spawn(move || echo_server(listener, d))
        .map_err(|e| EngineError::os("spawning the echo server", e))?;
    let client = client(plan, addr, None);
    let rec = a
        .run(|| client.run(stop, progress))
        .map_err(|e| EngineError::os("entering the near namespace", e))
        .and_then(|r| r.map_err(EngineError::Other));
    done.store(true, Relaxed);
    let _ = server.join();
    drop(link);
    rec
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_plan::login::DbProtocol;

    /// Review finding 4: a server's goodbye goes with the request that met it. A fake
    /// Redis answers the login's PING, then the first request's PING with an error and
    /// PONG, the second's with PONG alone: the first request keeps the error, the second
    /// (answered, nothing said) has none (it had the first's while it was kept on the
    /// connection).
    #[test]
    fn a_goodbye_goes_with_the_request_that_met_it_only() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let srv = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut b = [0u8; 256];
            for answer in [
                &b"+PONG\r\n"[..],
                b"-ERR said once\r\n+PONG\r\n",
                b"+PONG\r\n",
            ] {
                // Each request is one PING (14 bytes), read whole before answering.
                let mut got = 0;
                while got < 14 {
                    got += c.read(&mut b[got..]).unwrap();
                }
                c.write_all(answer).unwrap();
            }
            // Held open until the client is done.
            let _ = c.read(&mut b);
        });
        let login = Login::new("probe", None, None).unwrap();
        let conn = DbConn::login(addr, DbProtocol::Redis, &login).unwrap();
        let mut p = Pooled {
            id: 1,
            s: Link::Db(Box::new(conn)),
            last_ns: 0,
        };
        let t = Duration::from_secs(5);
        let (o1, g1) = p.ask(b"query\n", t);
        let (o2, g2) = p.ask(b"query\n", t);
        assert!(matches!(o1, Outcome::Answered { .. }), "{o1:?}");
        assert!(matches!(o2, Outcome::Answered { .. }), "{o2:?}");
        let g1 = g1.expect("the first request met the error");
        assert_eq!(
            (g1.code.as_str(), g1.message.as_str()),
            ("ERR", "ERR said once")
        );
        assert_eq!(g2, None, "the second request met nothing");
        drop(p);
        srv.join().unwrap();
    }
}
