//! The wire formats `probe idle --protocol` speaks, pure: PostgreSQL's messages (parsed by
//! `postgres-protocol`) and its time settings as SHOW writes them, MySQL's packets, its
//! handshake v10, auth switch and result rows, Redis's RESP2 and RESP3 values. Every
//! message is bounded by [`MAX_MESSAGE`].

use super::MAX_MESSAGE;
use crate::client::proto::resp::{Bounds, Scan};
use bytes::{Buf, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend;
use sha1::{Digest, Sha1};
use std::io;
use tpslab_plan::login::DbProtocol;
use tpslab_record::idle::Goodbye;

pub(super) fn too_long() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a message longer than {MAX_MESSAGE} bytes"),
    )
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed {what}"))
}

/// PostgreSQL's fields of an ErrorResponse as a goodbye: `FATAL: message`, SQLSTATE.
pub(super) fn pg_error(body: &backend::ErrorResponseBody) -> Goodbye {
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
pub(super) fn pg_next(buf: &mut BytesMut) -> io::Result<Option<backend::Message>> {
    if let Some(h) = backend::Header::parse(buf)? {
        if h.len() as usize + 1 > MAX_MESSAGE {
            return Err(too_long());
        }
    }
    backend::Message::parse(buf)
}

/// A setting in whole seconds as MySQL/MariaDB (`@@wait_timeout`) and Redis (`CONFIG GET
/// timeout`) write it, in ms. None: not a whole number of seconds, or more ms than a u64
/// holds (not a usable setting: a server's figure is not trusted).
pub(super) fn seconds_ms(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok()?.checked_mul(1000)
}

/// A PostgreSQL time setting as `SHOW` writes it (`0`, `250ms`, `2s`, `10min`, `1h`,
/// `1d`; a bare number counts milliseconds, the unit of `idle_session_timeout`), in ms.
/// None: not such a figure.
pub(super) fn pg_duration_ms(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().ok()?;
    let per = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1000,
        "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(per)
}

/// The next complete MySQL packet in `buf`: (sequence id, payload). Errors: one longer
/// than [`MAX_MESSAGE`].
pub(super) fn my_next(buf: &mut BytesMut) -> io::Result<Option<(u8, Vec<u8>)>> {
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
pub(super) fn my_packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut v = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
    v.extend_from_slice(payload);
    v
}

/// A MySQL ERR packet's payload (0xff, code, `#` and SQLSTATE, message) as a goodbye.
pub(super) fn my_error(p: &[u8]) -> Goodbye {
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

/// The authentication plugin `probe idle --protocol mysql` speaks.
pub(super) const NATIVE: &str = "mysql_native_password";

/// What a MySQL/MariaDB server's handshake v10 says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Handshake {
    /// The server's version (`10.11.19-MariaDB-0+deb12u1`).
    pub version: String,
    /// The scramble the first answer hashes (20 bytes from a real server).
    pub scramble: Vec<u8>,
    /// The authentication plugin it names for the first answer (empty: none named).
    pub plugin: String,
    /// Whether it offers TLS (CLIENT_SSL).
    pub tls: bool,
}

/// The handshake v10 packet `p` (protocol 10, version, thread id, scramble part 1,
/// filler, capabilities, charset, status, capabilities' upper half, scramble length, 10
/// reserved bytes, scramble part 2, the plugin's name). Errors: one line (not a handshake
/// v10, too short).
pub(super) fn my_handshake(p: &[u8]) -> Result<Handshake, String> {
    if p.first() != Some(&10) {
        return Err("not a MySQL/MariaDB handshake (protocol 10)".into());
    }
    let bad = || "a MySQL handshake too short".to_string();
    let ver_end = 1 + p[1..].iter().position(|&b| b == 0).ok_or_else(bad)?;
    let version = String::from_utf8_lossy(&p[1..ver_end]).into_owned();
    let mut i = ver_end + 1 + 4;
    let mut scramble = p.get(i..i + 8).ok_or_else(bad)?.to_vec();
    i += 9;
    let caps_lo = p.get(i..i + 2).ok_or_else(bad)?;
    let caps_lo = u16::from_le_bytes([caps_lo[0], caps_lo[1]]);
    i += 2 + 1 + 2;
    let caps_hi = p.get(i..i + 2).ok_or_else(bad)?;
    let caps = u32::from(caps_lo) | u32::from(u16::from_le_bytes([caps_hi[0], caps_hi[1]])) << 16;
    i += 2;
    let auth_len = usize::from(*p.get(i).ok_or_else(bad)?);
    i += 1 + 10;
    let part2 = auth_len.saturating_sub(8).max(13);
    let p2 = p.get(i..i + part2).ok_or_else(bad)?;
    scramble.extend_from_slice(p2.strip_suffix(&[0]).unwrap_or(p2));
    i += part2;
    // CLIENT_PLUGIN_AUTH: the plugin's name, NUL-terminated (or to the end).
    let plugin = if caps & 0x8_0000 != 0 {
        let rest = p.get(i..).unwrap_or(&[]);
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end]).into_owned()
    } else {
        String::new()
    };
    Ok(Handshake {
        version,
        scramble,
        plugin,
        tls: caps & 0x800 != 0,
    })
}

/// An auth switch request's payload (0xfe, the plugin's name, NUL, its data): the plugin
/// and its data (a trailing NUL dropped).
pub(super) fn my_auth_switch(p: &[u8]) -> (String, &[u8]) {
    let rest = p.get(1..).unwrap_or(&[]);
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let plugin = String::from_utf8_lossy(&rest[..end]).into_owned();
    let data = rest.get(end + 1..).unwrap_or(&[]);
    (plugin, data.strip_suffix(&[0]).unwrap_or(data))
}

/// The line refusing a login whose authentication plugin the probe does not speak.
pub(super) fn unsupported_plugin(plugin: &str) -> String {
    format!("authentication plugin {plugin} not supported: probe idle --protocol mysql speaks {NATIVE} only")
}

/// A length-encoded integer of MySQL's at `p[*i]`, `*i` moved past it. None: too short,
/// or 0xfb (NULL) / 0xff.
fn lenenc(p: &[u8], i: &mut usize) -> Option<u64> {
    let first = *p.get(*i)?;
    let (n, len) = match first {
        0..=0xfa => (u64::from(first), 1),
        0xfc => (
            u64::from(u16::from_le_bytes(p.get(*i + 1..*i + 3)?.try_into().ok()?)),
            3,
        ),
        0xfd => {
            let b = p.get(*i + 1..*i + 4)?;
            (
                u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16,
                4,
            )
        }
        0xfe => (
            u64::from_le_bytes(p.get(*i + 1..*i + 9)?.try_into().ok()?),
            9,
        ),
        _ => return None,
    };
    *i += len;
    Some(n)
}

/// The column count that starts a MySQL result set (None: not one).
pub(super) fn my_column_count(p: &[u8]) -> Option<u64> {
    let mut i = 0;
    lenenc(p, &mut i).filter(|_| i == p.len())
}

/// Whether `p` is an EOF packet (0xfe, shorter than 9 bytes).
pub(super) fn my_is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xfe) && p.len() < 9
}

/// A text result row: each column's value (None: NULL). None: malformed.
pub(super) fn my_row(p: &[u8]) -> Option<Vec<Option<String>>> {
    let mut i = 0;
    let mut out = vec![];
    while i < p.len() {
        if p[i] == 0xfb {
            out.push(None);
            i += 1;
            continue;
        }
        let n = usize::try_from(lenenc(p, &mut i)?).ok()?;
        let v = p.get(i..i.checked_add(n)?)?;
        out.push(Some(String::from_utf8_lossy(v).into_owned()));
        i += n;
    }
    Some(out)
}

/// A RESP value (Redis's protocol, versions 2 and 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resp {
    /// `+`: a simple string.
    Simple(String),
    /// `-` or `!`: an error.
    Error(String),
    /// `:`: an integer.
    Int(i64),
    /// `$` or `=`: a bulk or verbatim string (None: null).
    Bulk(Option<Vec<u8>>),
    /// `*`, `~`, `%`: an array, set or map (a map's keys and values in turn; None: null).
    Array(Option<Vec<Resp>>),
    /// `>`: RESP3's push, data the server sends unasked (not an answer).
    Push(Vec<Resp>),
    /// `_`, `#`, `,`, `(`: RESP3's null, boolean, double, big number, as written.
    Other(String),
}

impl Resp {
    /// The value as text, for a string, an integer or RESP3's scalars.
    pub fn text(&self) -> Option<String> {
        match self {
            Resp::Simple(s) | Resp::Other(s) => Some(s.clone()),
            Resp::Int(n) => Some(n.to_string()),
            Resp::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

/// Aggregates nested deeper than this are refused (an attribute, `|`, counts as a level
/// for the value it describes).
const RESP_DEPTH: u32 = 8;

/// Most bytes of one RESP value with its elements, and of the bytes buffered unread (a
/// read past it is refused: `DbConn::fill`, `DbConn::poll`): 2 x [`MAX_MESSAGE`], 131,072.
pub(super) const RESP_VALUE_BYTES: usize = 2 * MAX_MESSAGE;

/// What [`resp_next`]'s scan holds a value to: [`RESP_DEPTH`], [`RESP_VALUE_BYTES`], a
/// line of [`MAX_MESSAGE`].
const RESP_BOUNDS: Bounds = Bounds {
    depth: RESP_DEPTH as usize,
    bytes: RESP_VALUE_BYTES,
    line: MAX_MESSAGE,
};

/// The next complete RESP value in `buf`, taken from it (None: not complete yet). A
/// RESP3 attribute (`|`) before a value is skipped. `scan` is where the value was scanned
/// to by the last call (the connection's; [`Scan::default`] for a new one): each byte is
/// scanned once however many reads bring it, and the value is parsed once, when whole.
/// Errors: a malformed value, a line or string longer than [`MAX_MESSAGE`], a value
/// longer than [`RESP_VALUE_BYTES`], aggregates deeper than [`RESP_DEPTH`].
pub(super) fn resp_next(buf: &mut BytesMut, scan: &mut Scan) -> io::Result<Option<Resp>> {
    loop {
        let end = match scan.step(buf, RESP_BOUNDS) {
            Ok(Some(end)) => end,
            Ok(None) if buf.len() > RESP_VALUE_BYTES => {
                *scan = Scan::default();
                return Err(too_long());
            }
            Ok(None) => return Ok(None),
            Err(e) => {
                *scan = Scan::default();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        };
        if buf[0] == b'|' {
            // An attribute before the value: skipped (each on its own, so a chain of
            // them is a loop, not a recursion).
            buf.advance(end);
            continue;
        }
        return match resp_parse(&buf[..end], 0)? {
            Some((v, n)) if n == end => {
                buf.advance(n);
                Ok(Some(v))
            }
            _ => Err(malformed("RESP (a value's end)")),
        };
    }
}

/// The RESP value at `b`'s start, `depth` aggregates deep, and its length (None: not
/// whole). Errors: as [`resp_next`]'s.
pub(super) fn resp_parse(b: &[u8], depth: u32) -> io::Result<Option<(Resp, usize)>> {
    let Some(end) = memchr::memmem::find(b, b"\r\n") else {
        return if b.len() > MAX_MESSAGE {
            Err(too_long())
        } else {
            Ok(None)
        };
    };
    if end == 0 {
        return Err(malformed("RESP (an empty line)"));
    }
    if end > MAX_MESSAGE {
        return Err(too_long());
    }
    let text = String::from_utf8_lossy(&b[1..end]).into_owned();
    let after = end + 2;
    let num = || {
        text.parse::<i64>()
            .map_err(|_| malformed("RESP (a length or integer)"))
    };
    let v = match b[0] {
        b'+' => Resp::Simple(text),
        b'-' => Resp::Error(text),
        b':' => Resp::Int(num()?),
        b'_' | b'#' | b',' | b'(' => Resp::Other(text),
        b'$' | b'=' | b'!' => {
            let n = num()?;
            if n < 0 {
                return Ok(Some((Resp::Bulk(None), after)));
            }
            let n = n as usize;
            if n > MAX_MESSAGE {
                return Err(too_long());
            }
            if b.len() < after + n + 2 {
                return Ok(None);
            }
            if &b[after + n..after + n + 2] != b"\r\n" {
                return Err(malformed("RESP (a string's end)"));
            }
            let data = b[after..after + n].to_vec();
            let v = if b[0] == b'!' {
                Resp::Error(String::from_utf8_lossy(&data).into_owned())
            } else {
                Resp::Bulk(Some(data))
            };
            return Ok(Some((v, after + n + 2)));
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = num()?;
            if n < 0 {
                return Ok(Some((Resp::Array(None), after)));
            }
            if depth >= RESP_DEPTH {
                return Err(malformed("RESP (nested too deep)"));
            }
            // A map's or an attribute's pairs: twice its count (checked: a count near
            // i64::MAX is refused, not overflowed).
            let count = if matches!(b[0], b'%' | b'|') {
                n.checked_mul(2)
            } else {
                Some(n)
            };
            let count = match count {
                Some(c) if c as u64 <= MAX_MESSAGE as u64 => c as usize,
                _ => return Err(too_long()),
            };
            let mut at = after;
            let mut items = Vec::with_capacity(count.min(64));
            for _ in 0..count {
                let Some((v, used)) = resp_parse(&b[at..], depth + 1)? else {
                    return Ok(None);
                };
                items.push(v);
                at += used;
            }
            let v = match b[0] {
                // An attribute: what it describes follows, a level deeper (so RESP_DEPTH
                // bounds a chain of attributes too).
                b'|' => return Ok(resp_parse(&b[at..], depth + 1)?.map(|(v, used)| (v, at + used))),
                b'>' => Resp::Push(items),
                _ => Resp::Array(Some(items)),
            };
            return Ok(Some((v, at)));
        }
        _ => return Err(malformed("RESP (an unknown type)")),
    };
    Ok(Some((v, after)))
}

/// A Redis command of `args` in RESP.
pub(super) fn redis_command(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// A Redis error (`WRONGPASS invalid ...`) as a goodbye: its first word the code.
pub(super) fn redis_error(e: &str) -> Goodbye {
    let l = e.trim_start_matches('-');
    let code = l.split_whitespace().next().unwrap_or("");
    Goodbye::new(code, l)
}

/// Whether a server's refusal of a login says it requires TLS: PostgreSQL's pg_hba.conf
/// refusal of a connection with "no encryption" (then a server that answers an
/// SSLRequest with `S` requires it), MySQL's and MariaDB's "insecure transport"
/// (require_secure_transport; MySQL's error 3159), pgbouncer's "SSL required".
pub(super) fn says_tls_required(proto: DbProtocol, g: &Goodbye) -> bool {
    let l = g.message.to_ascii_lowercase();
    match proto {
        DbProtocol::Postgres => {
            (g.code == "28000" && l.contains("no encryption")) || l.contains("ssl required")
        }
        DbProtocol::Mysql => g.code == "3159" || l.contains("insecure transport"),
        DbProtocol::Redis => false,
    }
}

/// A word after MySQL's "Access denied" (1045) from a server that offers TLS: MariaDB
/// refuses a connection without TLS so under require_secure_transport or a user's REQUIRE
/// SSL, in the same words as a wrong password. Empty otherwise.
pub(super) fn tls_maybe(offers_tls: bool, g: &Goodbye) -> &'static str {
    if offers_tls && g.code == "1045" {
        " (this server offers TLS, which --protocol mysql has not yet: one that requires it (require_secure_transport, a user's REQUIRE SSL) refuses a login without it in these same words)"
    } else {
        ""
    }
}

/// The line for a server that requires TLS.
pub(super) fn tls_line(proto: DbProtocol, g: &Goodbye) -> String {
    format!(
        "server requires TLS; --protocol {} has no TLS yet (it said: {} ({}))",
        proto.name(),
        g.message,
        g.code
    )
}
