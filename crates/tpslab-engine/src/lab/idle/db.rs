//! Connections of `probe idle --protocol` that log in as a pool's connection would:
//! PostgreSQL's start-up and authentication (trust, md5, SCRAM-SHA-256, cleartext only
//! when allowed; the messages and SCRAM from `postgres-protocol`), MySQL/MariaDB's
//! handshake with mysql_native_password, Redis's HELLO 3 or AUTH; then the protocol's
//! no-op (`;`, COM_PING, PING) and the server's own goodbye (an ErrorResponse, an error
//! packet, a Redis error) kept when it ends the connection; the server's own idle-timeout
//! settings asked on a logged-in connection (`db_ask.rs`). The I/O is blocking with
//! timeouts while logging in and asking, then non-blocking; every message is bounded by
//! [`MAX_MESSAGE`] (the wire formats: `db_wire.rs`).

#[path = "db_ask.rs"]
mod ask;
#[path = "db_wire.rs"]
mod wire;

pub use wire::native_password;
use wire::*;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::{backend, frontend};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use tpslab_plan::login::{DbProtocol, Login};
use tpslab_record::idle::Goodbye;

/// The longest message a server may send a probe, bytes (a PostgreSQL message, a MySQL
/// packet, a Redis line): a longer one ends the connection as an error.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// How long a login may take, from the connect to the server's last message of it.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a probe could not log in.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The connection failed (connect, read, write, the login's time running out).
    #[error("{}", io_text(.0))]
    Io(#[from] io::Error),
    /// The server refused the login, or asked for what the probe does not do: one line,
    /// the server's own words where it gave some.
    #[error("{0}")]
    Refused(String),
}

/// An I/O error's line; a timed-out read (WouldBlock or TimedOut) says the login's limit.
fn io_text(e: &io::Error) -> String {
    if matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ) {
        format!("no answer within {} s", LOGIN_TIMEOUT.as_secs())
    } else {
        e.to_string()
    }
}

fn refused<T>(m: impl Into<String>) -> Result<T, LoginError> {
    Err(LoginError::Refused(m.into()))
}

/// What a non-blocking read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Nothing complete yet.
    Nothing,
    /// The answer to the no-op.
    Reply,
    /// The server ended the connection (a FIN; its goodbye, if any, read before).
    Eof,
}

/// A logged-in connection.
pub struct DbConn {
    /// The socket (non-blocking once logged in).
    pub s: TcpStream,
    proto: DbProtocol,
    buf: BytesMut,
    /// How far the RESP value at `buf`'s start was scanned (Redis only).
    scan: crate::client::proto::resp::Scan,
    /// What the server said before it ended the connection.
    pub goodbye: Option<Goodbye>,
    /// While logging in: when the login's time ([`LOGIN_TIMEOUT`]) runs out; every read
    /// waits at most until then (a server that keeps sending small messages, or one byte
    /// at a time, cannot hold the probe longer).
    deadline: Option<Instant>,
}

impl DbConn {
    /// Connects to `addr` and logs in with `proto` as `login`, all of it within
    /// [`LOGIN_TIMEOUT`] from the connect's start; returns the connection non-blocking. Errors: the connection's, or
    /// the server's refusal (one line, the password never in it).
    pub fn login(addr: SocketAddr, proto: DbProtocol, login: &Login) -> Result<DbConn, LoginError> {
        let deadline = Instant::now() + LOGIN_TIMEOUT;
        let s = TcpStream::connect_timeout(&addr, LOGIN_TIMEOUT)?;
        s.set_read_timeout(Some(LOGIN_TIMEOUT))?;
        s.set_write_timeout(Some(LOGIN_TIMEOUT))?;
        s.set_nodelay(true)?;
        let mut c = DbConn {
            s,
            proto,
            buf: BytesMut::new(),
            scan: Default::default(),
            goodbye: None,
            deadline: Some(deadline),
        };
        match proto {
            DbProtocol::Postgres => c.pg_login(login)?,
            DbProtocol::Mysql => c.my_login(login)?,
            DbProtocol::Redis => c.redis_login(login)?,
        }
        c.deadline = None;
        c.s.set_nonblocking(true)?;
        Ok(c)
    }

    /// One blocking read into the buffer. Errors: end of stream, a full buffer.
    fn fill(&mut self) -> io::Result<()> {
        if let Some(d) = self.deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.s.set_read_timeout(Some(left))?;
        }
        let mut b = [0u8; 8192];
        let n = self.s.read(&mut b)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        if self.buf.len() + n > 2 * MAX_MESSAGE {
            return Err(too_long());
        }
        self.buf.extend_from_slice(&b[..n]);
        Ok(())
    }

    fn pg_login(&mut self, login: &Login) -> Result<(), LoginError> {
        let mut out = BytesMut::new();
        let mut params = vec![
            ("user", login.user.as_str()),
            ("application_name", "tpslab probe idle"),
        ];
        if let Some(d) = &login.database {
            params.push(("database", d.as_str()));
        }
        frontend::startup_message(params, &mut out)?;
        self.s.write_all(&out)?;
        let mut scram: Option<ScramSha256> = None;
        let need_pw = || {
            login.password.as_deref().map(str::as_bytes).ok_or_else(|| {
                LoginError::Refused(
                    "the server asks for a password: give --password-env VAR or --password-file FILE"
                        .into(),
                )
            })
        };
        loop {
            let Some(m) = pg_next(&mut self.buf)? else {
                self.fill()?;
                continue;
            };
            let mut out = BytesMut::new();
            match m {
                backend::Message::ReadyForQuery(_) => return Ok(()),
                backend::Message::ErrorResponse(b) => {
                    let g = pg_error(&b);
                    if says_tls_required(DbProtocol::Postgres, &g)
                        && self.s.peer_addr().is_ok_and(pg_offers_tls)
                    {
                        return refused(tls_line(DbProtocol::Postgres, &g));
                    }
                    return refused(format!("{} (SQLSTATE {})", g.message, g.code));
                }
                backend::Message::AuthenticationCleartextPassword => {
                    if !login.allow_cleartext {
                        return refused("the server asks for the password in clear (its password method; no TLS here): refused, the password not sent; give --allow-cleartext-password to send it so, or have the server ask for scram-sha-256");
                    }
                    frontend::password_message(need_pw()?, &mut out)?;
                }
                backend::Message::AuthenticationMd5Password(b) => {
                    let h = postgres_protocol::authentication::md5_hash(
                        login.user.as_bytes(),
                        need_pw()?,
                        b.salt(),
                    );
                    frontend::password_message(h.as_bytes(), &mut out)?;
                }
                backend::Message::AuthenticationSasl(b) => {
                    let mut mechs = b.mechanisms();
                    let mut has = false;
                    while let Some(x) = mechs.next()? {
                        has |= x == SCRAM_SHA_256;
                    }
                    if !has {
                        return refused("the server offers no SASL mechanism but SCRAM-SHA-256-PLUS (TLS channel binding), which probe idle --protocol does not speak");
                    }
                    let sc = ScramSha256::new(need_pw()?, ChannelBinding::unsupported());
                    frontend::sasl_initial_response(SCRAM_SHA_256, sc.message(), &mut out)?;
                    scram = Some(sc);
                }
                backend::Message::AuthenticationSaslContinue(b) => {
                    let Some(sc) = scram.as_mut() else {
                        return refused("a SCRAM continuation before its start");
                    };
                    sc.update(b.data())?;
                    frontend::sasl_response(sc.message(), &mut out)?;
                }
                backend::Message::AuthenticationSaslFinal(b) => {
                    let Some(sc) = scram.as_mut() else {
                        return refused("a SCRAM final message before its start");
                    };
                    if sc.finish(b.data()).is_err() {
                        return refused("the server's SCRAM-SHA-256 signature does not verify: not the server that holds this password");
                    }
                }
                backend::Message::AuthenticationOk
                | backend::Message::ParameterStatus(_)
                | backend::Message::BackendKeyData(_)
                | backend::Message::NoticeResponse(_) => {}
                backend::Message::AuthenticationGss
                | backend::Message::AuthenticationKerberosV5
                | backend::Message::AuthenticationSspi
                | backend::Message::AuthenticationScmCredential
                | backend::Message::AuthenticationGssContinue(_) => {
                    return refused("the server asks for GSSAPI/Kerberos/SSPI authentication: probe idle --protocol postgres does trust, password, md5 and SCRAM-SHA-256")
                }
                _ => return refused("an unexpected message during PostgreSQL's start-up"),
            }
            if !out.is_empty() {
                self.s.write_all(&out)?;
            }
        }
    }

    fn my_read(&mut self) -> Result<(u8, Vec<u8>), LoginError> {
        loop {
            if let Some(p) = my_next(&mut self.buf)? {
                return Ok(p);
            }
            self.fill()?;
        }
    }

    fn my_login(&mut self, login: &Login) -> Result<(), LoginError> {
        let (_, hs) = self.my_read()?;
        if hs.first() == Some(&0xff) {
            let g = my_error(&hs);
            if says_tls_required(DbProtocol::Mysql, &g) {
                return refused(tls_line(DbProtocol::Mysql, &g));
            }
            return refused(format!("{} (error {})", g.message, g.code));
        }
        let hs = my_handshake(&hs).map_err(LoginError::Refused)?;
        let pw = login.password.as_deref().unwrap_or("").as_bytes();
        // CLIENT_LONG_PASSWORD | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION | PLUGIN_AUTH,
        // and CONNECT_WITH_DB with a database.
        let mut caps: u32 = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x8_0000;
        if login.database.is_some() {
            caps |= 0x8;
        }
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(45); // utf8mb4_general_ci
        p.extend_from_slice(&[0u8; 23]);
        p.extend_from_slice(login.user.as_bytes());
        p.push(0);
        let auth = native_password(pw, &hs.scramble);
        p.push(auth.len() as u8);
        p.extend_from_slice(&auth);
        if let Some(d) = &login.database {
            p.extend_from_slice(d.as_bytes());
            p.push(0);
        }
        p.extend_from_slice(NATIVE.as_bytes());
        p.push(0);
        self.s.write_all(&my_packet(1, &p))?;
        // The plugin the server is speaking: the handshake's, or an auth switch's.
        let mut plugin = hs.plugin.clone();
        loop {
            let (seq, r) = self.my_read()?;
            match r.first() {
                Some(0x00) => return Ok(()),
                Some(0xff) => {
                    let g = my_error(&r);
                    if says_tls_required(DbProtocol::Mysql, &g) {
                        return refused(tls_line(DbProtocol::Mysql, &g));
                    }
                    return refused(format!(
                        "{} (error {}){}",
                        g.message,
                        g.code,
                        tls_maybe(hs.tls, &g)
                    ));
                }
                Some(0xfe) => {
                    let (name, data) = my_auth_switch(&r);
                    if name != NATIVE {
                        return refused(unsupported_plugin(&name));
                    }
                    let a = native_password(pw, data);
                    self.s.write_all(&my_packet(seq.wrapping_add(1), &a))?;
                    plugin = name;
                }
                // More data of a plugin's own exchange (caching_sha2_password's 0x01).
                _ => {
                    return refused(unsupported_plugin(
                        if plugin.is_empty() || plugin == NATIVE {
                            "(more than mysql_native_password's answer)"
                        } else {
                            &plugin
                        },
                    ))
                }
            }
        }
    }

    /// The next RESP value of the server's. Errors: the connection's, a malformed value.
    fn redis_value(&mut self) -> Result<Resp, LoginError> {
        loop {
            if let Some(v) = resp_next(&mut self.buf, &mut self.scan)? {
                return Ok(v);
            }
            self.fill()?;
        }
    }

    /// `args` sent, the answer read; a RESP3 push (`>`) before it skipped.
    fn redis_ask(&mut self, args: &[&[u8]]) -> Result<Resp, LoginError> {
        self.s.write_all(&redis_command(args))?;
        loop {
            match self.redis_value()? {
                Resp::Push(_) => {}
                v => return Ok(v),
            }
        }
    }

    fn redis_login(&mut self, login: &Login) -> Result<(), LoginError> {
        if let Some(pw) = &login.password {
            let (user, pw) = (login.user.as_bytes(), pw.as_bytes());
            // A user named: HELLO 3 AUTH (Redis 6 and later, RESP3); an older server's
            // error (unknown command, NOPROTO) falls back to AUTH.
            let hello = if login.user != "default" {
                match self.redis_ask(&[b"HELLO", b"3", b"AUTH", user, pw])? {
                    Resp::Error(e)
                        if e.starts_with("ERR unknown command") || e.starts_with("NOPROTO") =>
                    {
                        false
                    }
                    Resp::Error(e) => return refused(format!("HELLO: {e}")),
                    _ => true,
                }
            } else {
                false
            };
            if !hello {
                let v = if login.user == "default" {
                    self.redis_ask(&[b"AUTH", pw])?
                } else {
                    self.redis_ask(&[b"AUTH", user, pw])?
                };
                if let Resp::Error(e) = v {
                    return refused(format!("AUTH: {e}"));
                }
            }
        }
        // A PING says whether the server lets this connection in (NOAUTH otherwise).
        if let Resp::Error(e) = self.redis_ask(&[b"PING"])? {
            let hint = if e.starts_with("NOAUTH") {
                ": give --password-env VAR or --password-file FILE"
            } else {
                ""
            };
            return refused(format!("PING: {e}{hint}"));
        }
        Ok(())
    }

    /// Sends the protocol's no-op: PostgreSQL's empty query `;`, MySQL's COM_PING,
    /// Redis's PING. Errors: the write's (a RST seen: ECONNRESET, EPIPE).
    pub fn ping(&mut self) -> io::Result<()> {
        let bytes = match self.proto {
            DbProtocol::Postgres => {
                let mut b = BytesMut::new();
                frontend::query(";", &mut b)?;
                b.to_vec()
            }
            DbProtocol::Mysql => my_packet(0, &[0x0e]),
            DbProtocol::Redis => redis_command(&[b"PING"]),
        };
        (&self.s).write_all(&bytes)
    }

    /// Reads what has come without blocking: the no-op's answer, the end of the stream,
    /// or nothing yet; an error message from the server is kept as its goodbye. Errors:
    /// the socket's (ECONNRESET for a RST), a message over [`MAX_MESSAGE`].
    pub fn poll(&mut self) -> io::Result<Seen> {
        let mut seen = Seen::Nothing;
        let mut b = [0u8; 8192];
        let mut eof = false;
        // An error (a RST) is returned after what came before it is parsed: a server
        // that says goodbye and resets keeps its goodbye.
        let mut failed = None;
        loop {
            match (&self.s).read(&mut b) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&b[..n]);
                    if self.buf.len() > 2 * MAX_MESSAGE {
                        return Err(too_long());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        loop {
            let reply = match self.proto {
                DbProtocol::Postgres => match pg_next(&mut self.buf)? {
                    None => break,
                    Some(backend::Message::ErrorResponse(e)) => {
                        self.goodbye = Some(pg_error(&e));
                        false
                    }
                    Some(backend::Message::ReadyForQuery(_)) => true,
                    Some(_) => false,
                },
                DbProtocol::Mysql => match my_next(&mut self.buf)? {
                    None => break,
                    Some((_, p)) if p.first() == Some(&0xff) => {
                        self.goodbye = Some(my_error(&p));
                        false
                    }
                    Some((_, p)) => p.first() == Some(&0x00),
                },
                DbProtocol::Redis => match resp_next(&mut self.buf, &mut self.scan)? {
                    None => break,
                    Some(Resp::Error(e)) => {
                        self.goodbye = Some(redis_error(&e));
                        false
                    }
                    Some(v) => v == Resp::Simple("PONG".into()),
                },
            };
            if reply {
                seen = Seen::Reply;
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(if eof { Seen::Eof } else { seen })
    }
}

impl DbConn {
    /// Sends the no-op and waits up to `timeout` for its answer (a pooled connection's
    /// request or validation): Ok(true) answered, Ok(false) no answer in time. Errors:
    /// the connection ended (UnexpectedEof for a FIN; a RST's ECONNRESET), its goodbye
    /// kept in [`DbConn::goodbye`].
    pub fn ping_wait(&mut self, timeout: Duration) -> io::Result<bool> {
        // A connection the server already ended (its goodbye and FIN read now) is not
        // written to: its end, not the RST a write would draw, is what it met.
        if self.poll()? == Seen::Eof {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "EOF"));
        }
        self.ping()?;
        let end = Instant::now() + timeout;
        loop {
            match self.poll()? {
                Seen::Reply => return Ok(true),
                Seen::Eof => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "EOF")),
                Seen::Nothing => {}
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            // Blocks until something comes (read by the poll above) or the time is up.
            self.s.set_nonblocking(false)?;
            self.s.set_read_timeout(Some(left))?;
            let r = self.s.peek(&mut [0u8; 1]);
            self.s.set_nonblocking(true)?;
            if let Err(e) = r {
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) {
                    return Ok(false);
                }
            }
        }
    }
}

/// Whether the PostgreSQL server at `addr` offers TLS: it answers an SSLRequest with `S`
/// (within [`LOGIN_TIMEOUT`]); the connection is closed after that byte.
fn pg_offers_tls(addr: SocketAddr) -> bool {
    let ask = || -> io::Result<bool> {
        let mut s = TcpStream::connect_timeout(&addr, LOGIN_TIMEOUT)?;
        s.set_read_timeout(Some(LOGIN_TIMEOUT))?;
        let mut b = BytesMut::new();
        frontend::ssl_request(&mut b);
        s.write_all(&b)?;
        let mut one = [0u8; 1];
        s.read_exact(&mut one)?;
        Ok(one[0] == b'S')
    };
    ask().unwrap_or(false)
}

#[cfg(test)]
#[path = "db_tests.rs"]
mod tests;
