//! Connections of `probe idle --protocol` that log in as a pool's connection would:
//! PostgreSQL's start-up and authentication (trust, cleartext, md5, SCRAM-SHA-256; the
//! messages and SCRAM from `postgres-protocol`), MySQL/MariaDB's handshake with
//! mysql_native_password, Redis's AUTH; then the protocol's no-op (`;`, COM_PING, PING)
//! and the server's own goodbye (an ErrorResponse, an error packet, a Redis error) kept
//! when it ends the connection. The I/O is blocking with timeouts while logging in, then
//! non-blocking; every message is bounded by [`MAX_MESSAGE`].

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::{backend, frontend};
use sha1::{Digest, Sha1};
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

fn too_long() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a message longer than {MAX_MESSAGE} bytes"),
    )
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
    /// What the server said before it ended the connection.
    pub goodbye: Option<Goodbye>,
    /// While logging in: when the login's time ([`LOGIN_TIMEOUT`]) runs out; every read
    /// waits at most until then (a server that keeps sending small messages, or one byte
    /// at a time, cannot hold the probe longer).
    deadline: Option<Instant>,
}

/// PostgreSQL's fields of an ErrorResponse as a goodbye: `FATAL: message`, SQLSTATE.
fn pg_error(body: &backend::ErrorResponseBody) -> Goodbye {
    let (mut sev, mut code, mut msg) = (String::new(), String::new(), String::new());
    let mut fields = body.fields();
    while let Ok(Some(f)) = fields.next() {
        match f.type_() {
            b'S' if sev.is_empty() => sev = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            b'V' => sev = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            b'C' => code = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            b'M' => msg = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            _ => {}
        }
    }
    Goodbye::new(&code, &format!("{sev}: {msg}"))
}

/// The next complete PostgreSQL message in `buf` (None: not yet). Errors: one longer
/// than [`MAX_MESSAGE`], a malformed one.
fn pg_next(buf: &mut BytesMut) -> io::Result<Option<backend::Message>> {
    if let Some(h) = backend::Header::parse(buf)? {
        if h.len() as usize + 1 > MAX_MESSAGE {
            return Err(too_long());
        }
    }
    backend::Message::parse(buf)
}

/// The next complete MySQL packet in `buf`: (sequence id, payload). Errors: one longer
/// than [`MAX_MESSAGE`].
fn my_next(buf: &mut BytesMut) -> io::Result<Option<(u8, Vec<u8>)>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = usize::from(buf[0]) | usize::from(buf[1]) << 8 | usize::from(buf[2]) << 16;
    if len > MAX_MESSAGE {
        return Err(too_long());
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    let seq = buf[3];
    let p = buf.split_to(4 + len);
    Ok(Some((seq, p[4..].to_vec())))
}

/// A MySQL packet of `payload` with sequence id `seq`.
fn my_packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut v = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
    v.extend_from_slice(payload);
    v
}

/// A MySQL ERR packet's payload (0xff, code, `#` and SQLSTATE, message) as a goodbye.
fn my_error(p: &[u8]) -> Goodbye {
    let code = p.get(1..3).map_or(0, |c| u16::from_le_bytes([c[0], c[1]]));
    let rest = p.get(3..).unwrap_or(&[]);
    let msg = match rest.first() {
        Some(b'#') => rest.get(6..).unwrap_or(&[]),
        _ => rest,
    };
    Goodbye::new(&code.to_string(), &String::from_utf8_lossy(msg))
}

/// mysql_native_password's answer to `scramble`: SHA1(pw) XOR SHA1(scramble, SHA1(SHA1(pw)));
/// empty for an empty password.
pub fn native_password(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return vec![];
    }
    let s1 = Sha1::digest(password);
    let s2 = Sha1::digest(s1);
    let mut h = Sha1::new();
    h.update(scramble);
    h.update(s2);
    let s3 = h.finalize();
    s1.iter().zip(s3.iter()).map(|(a, b)| a ^ b).collect()
}

/// The next complete Redis line in `buf` (without its CRLF). Errors: one longer than
/// [`MAX_MESSAGE`].
fn redis_next(buf: &mut BytesMut) -> io::Result<Option<String>> {
    match memchr::memmem::find(buf, b"\r\n") {
        Some(i) => {
            let line = buf.split_to(i + 2);
            Ok(Some(String::from_utf8_lossy(&line[..i]).into_owned()))
        }
        None if buf.len() > MAX_MESSAGE => Err(too_long()),
        None => Ok(None),
    }
}

/// A Redis command of `args` in RESP.
fn redis_command(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// A Redis error line (`-WRONGPASS invalid ...`) as a goodbye: its first word the code.
fn redis_error(line: &str) -> Goodbye {
    let l = line.trim_start_matches('-');
    let code = l.split_whitespace().next().unwrap_or("");
    Goodbye::new(code, l)
}

/// A word about TLS when a refusal reads like the server requires it (PostgreSQL's "no
/// encryption"/"SSL off", MySQL's "insecure transport", pgbouncer's "SSL required").
fn tls_hint(m: &str) -> &'static str {
    let l = m.to_ascii_lowercase();
    if [
        "no encryption",
        "ssl off",
        "insecure transport",
        "ssl required",
        "requires ssl",
    ]
    .iter()
    .any(|w| l.contains(w))
    {
        " (the server requires TLS, which probe idle --protocol does not speak)"
    } else {
        ""
    }
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
                    return refused(format!(
                        "{} (SQLSTATE {}){}",
                        g.message,
                        g.code,
                        tls_hint(&g.message)
                    ));
                }
                backend::Message::AuthenticationCleartextPassword => {
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
            return refused(format!("{} (error {})", g.message, g.code));
        }
        if hs.first() != Some(&10) {
            return refused("not a MySQL/MariaDB handshake (protocol 10)");
        }
        // Handshake v10: version, thread id, scramble part 1, filler, capabilities, ...
        let bad = || LoginError::Refused("a MySQL handshake too short".into());
        let ver_end = 1 + hs[1..].iter().position(|&b| b == 0).ok_or_else(bad)?;
        let mut i = ver_end + 1 + 4;
        let mut scramble = hs.get(i..i + 8).ok_or_else(bad)?.to_vec();
        i += 9 + 2 + 1 + 2 + 2;
        let auth_len = usize::from(*hs.get(i).ok_or_else(bad)?);
        i += 1 + 10;
        let part2 = auth_len.saturating_sub(8).max(13);
        let p2 = hs.get(i..i + part2).ok_or_else(bad)?;
        scramble.extend_from_slice(p2.strip_suffix(&[0]).unwrap_or(p2));
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
        let auth = native_password(pw, &scramble);
        p.push(auth.len() as u8);
        p.extend_from_slice(&auth);
        if let Some(d) = &login.database {
            p.extend_from_slice(d.as_bytes());
            p.push(0);
        }
        p.extend_from_slice(b"mysql_native_password\0");
        self.s.write_all(&my_packet(1, &p))?;
        loop {
            let (seq, r) = self.my_read()?;
            match r.first() {
                Some(0x00) => return Ok(()),
                Some(0xff) => {
                    let g = my_error(&r);
                    return refused(format!(
                        "{} (error {}){}",
                        g.message,
                        g.code,
                        tls_hint(&g.message)
                    ));
                }
                Some(0xfe) => {
                    // Auth switch: the plugin's name, then its data.
                    let rest = &r[1..];
                    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                    let plugin = String::from_utf8_lossy(&rest[..end]).into_owned();
                    if plugin != "mysql_native_password" {
                        return refused(format!("the server asks for the {plugin} authentication plugin: probe idle --protocol mysql does mysql_native_password"));
                    }
                    let data = rest.get(end + 1..).unwrap_or(&[]);
                    let data = data.strip_suffix(&[0]).unwrap_or(data);
                    let a = native_password(pw, data);
                    self.s.write_all(&my_packet(seq.wrapping_add(1), &a))?;
                }
                _ => return refused("the server asks for more authentication than mysql_native_password (caching_sha2_password?): not supported"),
            }
        }
    }

    fn redis_line(&mut self) -> Result<String, LoginError> {
        loop {
            if let Some(l) = redis_next(&mut self.buf)? {
                return Ok(l);
            }
            self.fill()?;
        }
    }

    fn redis_login(&mut self, login: &Login) -> Result<(), LoginError> {
        if let Some(pw) = &login.password {
            let cmd = if login.user == "default" {
                redis_command(&[b"AUTH", pw.as_bytes()])
            } else {
                redis_command(&[b"AUTH", login.user.as_bytes(), pw.as_bytes()])
            };
            self.s.write_all(&cmd)?;
            let l = self.redis_line()?;
            if l.starts_with('-') {
                return refused(format!("AUTH: {}", l.trim_start_matches('-')));
            }
        }
        // A PING says whether the server lets this connection in (NOAUTH otherwise).
        self.s.write_all(&redis_command(&[b"PING"]))?;
        let l = self.redis_line()?;
        if l.starts_with('-') {
            let hint = if l.starts_with("-NOAUTH") {
                ": give --password-env VAR or --password-file FILE"
            } else {
                ""
            };
            return refused(format!("PING: {}{hint}", l.trim_start_matches('-')));
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
                DbProtocol::Redis => match redis_next(&mut self.buf)? {
                    None => break,
                    Some(l) if l.starts_with('-') => {
                        self.goodbye = Some(redis_error(&l));
                        false
                    }
                    Some(l) => l == "+PONG",
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

#[cfg(test)]
#[path = "db_tests.rs"]
mod tests;
