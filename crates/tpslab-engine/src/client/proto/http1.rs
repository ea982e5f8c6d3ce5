//! `ramp http`: HTTP/1.1 with keep-alive, one connection per user. Every user sends the
//! same request, built once from the plan (method, path, `Host`, the user's headers,
//! `Content-Length` and the body). A reply's status line and headers are parsed by
//! `httparse` into a fixed array (no allocation per reply); its body ends by
//! `Content-Length` or chunked transfer coding (chunk sizes decoded here, a reply's
//! progress kept per user so bytes read in many pieces are scanned once), or is absent
//! (HEAD, 1xx, 204, 304).
//!
//! Counting: 2xx and 3xx are replies; 4xx and 5xx are failures of kind `http 4xx` and
//! `http 5xx` (the tally keeps replies and failures by kind, not status classes); 1xx
//! interim replies are skipped ([`Decoded::Stale`]); `Connection: close` (or an HTTP/1.0
//! reply without keep-alive) closes the connection after the reply. Not HTTP, or a reply
//! whose body would end only when the connection closes (neither length nor chunked):
//! [`Decoded::Invalid`] `http: ...`.
//!
//! One request is in flight per connection (no pipelining), so a server sends exactly one
//! final reply per request: bytes left over after a whole reply (a second response to one
//! request, or a response sent before the request that was taken for its reply) are
//! [`UNSOLICITED`], a protocol error that fails the request and closes the connection;
//! bytes that arrive while no request is in flight are the same error
//! ([`Exchange::UNSOLICITED`]: the users' loop watches an idle connection for them).

use std::net::SocketAddr;

use tpslab_plan::proto::Wire;

use super::tls::{client_for, TlsClient};
use super::{Decoded, Exchange, Opened, Reply, Transport};

/// Most header lines a reply may have.
const MAX_REPLY_HEADERS: usize = 96;

/// The failure kinds of error statuses.
const KIND_4XX: &str = "http 4xx";
const KIND_5XX: &str = "http 5xx";

/// The failure of a response no request asked for: bytes after a whole reply, or bytes
/// read while no request is in flight on the connection (a protocol error of its own
/// kind, `load http`'s `unsolicited`; the connection is closed).
use tpslab_record::http_counts::UNSOLICITED;

/// The failure an HTTP status counts as in a closed loop: `http 4xx`, `http 5xx`, else
/// none (a reply).
pub(crate) fn status_failure(code: u16) -> Option<&'static str> {
    match code {
        400..=499 => Some(KIND_4XX),
        500..=599 => Some(KIND_5XX),
        _ => None,
    }
}

/// HTTP/1.1 keep-alive request/reply.
#[derive(Debug, Clone)]
pub struct Http1 {
    target: SocketAddr,
    request: Vec<u8>,
    /// The request is HEAD: replies have no body whatever their headers say.
    head: bool,
    /// `https://`: each connection's TLS client (ALPN `http/1.1`).
    tls: Option<TlsClient>,
}

/// The ALPN protocol offered over TLS.
pub const ALPN: &[&[u8]] = &[b"http/1.1"];

/// How the body of the reply being read ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// This many bytes after the head.
    Length(usize),
    /// Chunked: the next chunk-size line starts at this offset (from the reply's start).
    Chunked(usize),
    /// Chunked, the last chunk read: its trailer section began at the first offset, and
    /// the next trailer line starts at the second (from the reply's start).
    Trailers(usize, usize),
}

/// The reply being read by a user: its head parsed once, its body's end searched from
/// where the last read left off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpUser {
    /// The parsed head of the reply being read: (its length with the blank line, how
    /// its body ends, its failure kind, whether the connection closes after it, its
    /// status code). None: no head parsed yet.
    cur: Option<(usize, Body, Option<&'static str>, bool, u16)>,
    /// Interim (1xx) replies skipped for the request in flight: more than
    /// [`MAX_INTERIM`] is a server that never answers (and would keep its user's loop
    /// reading forever).
    interim: u16,
}

/// The most interim (1xx) replies taken for one request.
pub const MAX_INTERIM: u16 = 16;

/// The longest reply head read (status line and headers), bytes: a head still not ended
/// beyond it is not HTTP (and would be parsed again on every read). Also the longest
/// trailer section of a chunked reply (`http: trailers over 65536 bytes`): a server that
/// streams trailer lines forever would otherwise hold its request until the reply cap.
pub const MAX_HEAD_BYTES: usize = 64 << 10;

impl Http1 {
    /// The protocol sending `request` (a whole HTTP/1.1 request) to `target`; `head`: its
    /// method is HEAD.
    pub fn new(target: SocketAddr, request: Vec<u8>, head: bool) -> Http1 {
        Http1 {
            target,
            request,
            head,
            tls: None,
        }
    }

    /// The same over TLS with `client`.
    pub fn with_tls(self, client: TlsClient) -> Http1 {
        Http1 {
            tls: Some(client),
            ..self
        }
    }
}

/// Whether a comma-separated header value holds `token` (ASCII case ignored).
fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// A decimal Content-Length (digits only, no overflow).
fn parse_len(v: &[u8]) -> Option<usize> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 15 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0usize, |n, d| n * 10 + (d - b'0') as usize))
}

/// A chunk-size line's size (hex digits, before any `;extension`), at most 2^40.
fn parse_chunk_size(line: &[u8]) -> Option<usize> {
    let end = line.iter().position(|&b| b == b';').unwrap_or(line.len());
    let hex = line[..end].trim_ascii();
    if hex.is_empty() || hex.len() > 10 {
        return None;
    }
    let mut n = 0usize;
    for &b in hex {
        n = n * 16 + (b as char).to_digit(16)? as usize;
    }
    Some(n)
}

/// What the head of a reply says.
enum Head {
    /// A final reply: the head's length, how its body ends, its failure kind, whether the
    /// connection closes after it, its status code.
    Parsed(usize, Body, Option<&'static str>, bool, u16),
    /// A 1xx interim reply of this many bytes (it has no body).
    Interim(usize),
    /// Not a whole head yet.
    NeedMore,
    /// Not HTTP/1.x, or a reply this protocol cannot delimit.
    Invalid(String),
}

impl Http1 {
    fn head(&self, bytes: &[u8]) -> Head {
        let mut headers = [httparse::EMPTY_HEADER; MAX_REPLY_HEADERS];
        let mut r = httparse::Response::new(&mut headers);
        let n = match r.parse(bytes) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if bytes.len() > MAX_HEAD_BYTES => {
                return Head::Invalid(format!("http: a reply head over {MAX_HEAD_BYTES} bytes"))
            }
            Ok(httparse::Status::Partial) => return Head::NeedMore,
            Err(e) => return Head::Invalid(format!("http: {e}")),
        };
        let (Some(code), Some(version)) = (r.code, r.version) else {
            return Head::Invalid("http: a reply without a status".into());
        };
        if code == 101 {
            return Head::Invalid("http: 101 switching protocols (not HTTP/1.1 any more)".into());
        }
        if (100..200).contains(&code) {
            return Head::Interim(n);
        }
        let (mut len, mut chunked, mut close, mut keep) = (None, false, version == 0, false);
        for h in r.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                match parse_len(h.value) {
                    Some(l) if len.is_none_or(|o| o == l) => len = Some(l),
                    _ => return Head::Invalid("http: a bad Content-Length".into()),
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // Chunked must be the last coding; any other coding alone ends at close.
                let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(b"");
                chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
                if !chunked {
                    return Head::Invalid(
                        "http: a transfer coding that ends at close (not chunked)".into(),
                    );
                }
            } else if h.name.eq_ignore_ascii_case("connection") {
                close |= has_token(h.value, "close");
                keep |= has_token(h.value, "keep-alive");
            }
        }
        // HTTP/1.0 keeps the connection only when the server says keep-alive.
        if version == 0 && keep {
            close = has_close_header(r.headers);
        }
        let failed = status_failure(code);
        let body = if self.head || code == 204 || code == 304 {
            Body::Length(0)
        } else if chunked {
            Body::Chunked(n)
        } else if let Some(l) = len {
            Body::Length(l)
        } else {
            return Head::Invalid(
                "http: a reply without Content-Length or chunked coding (ends at close)".into(),
            );
        };
        Head::Parsed(n, body, failed, close, code)
    }
}

/// Whether any Connection header says close.
fn has_close_header(headers: &[httparse::Header]) -> bool {
    headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("connection") && has_token(h.value, "close"))
}

/// Where a chunked body stands: its end (the reply's length), or where to resume when more
/// bytes come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunks {
    /// The reply ends here (after the trailer section's blank line).
    End(usize),
    /// More bytes are needed; resume from this state.
    More(Body),
}

/// The end of a chunked body at state `at` (a chunk-size line's offset, or a trailer
/// line's) in `bytes`, or where to resume when more bytes are needed. Each byte is
/// scanned once over many reads. Errors: not chunked coding, trailers over
/// [`MAX_HEAD_BYTES`].
fn chunked_end(bytes: &[u8], at: Body) -> Result<Chunks, String> {
    let mut pos = match at {
        Body::Chunked(pos) => pos,
        Body::Trailers(start, t) => return trailers_end(bytes, start, t),
        Body::Length(_) => unreachable!("a chunked body's state"),
    };
    loop {
        let Some(eol) = memchr::memmem::find(&bytes[pos..], b"\r\n") else {
            if bytes.len() - pos > 1024 {
                return Err("http: a chunk-size line too long".into());
            }
            return Ok(Chunks::More(Body::Chunked(pos)));
        };
        let size = parse_chunk_size(&bytes[pos..pos + eol])
            .ok_or_else(|| "http: a bad chunk size".to_string())?;
        let data = pos + eol + 2;
        if size == 0 {
            return trailers_end(bytes, data, data);
        }
        let next = data + size + 2;
        if bytes.len() < next {
            return Ok(Chunks::More(Body::Chunked(pos)));
        }
        if &bytes[next - 2..next] != b"\r\n" {
            return Err("http: a chunk not ended by CRLF".into());
        }
        pos = next;
    }
}

/// The end of a trailer section that began at `start`, its next line at `t`: header lines,
/// then a blank line. Errors: a section over [`MAX_HEAD_BYTES`].
fn trailers_end(bytes: &[u8], start: usize, mut t: usize) -> Result<Chunks, String> {
    loop {
        let Some(e) = memchr::memmem::find(&bytes[t..], b"\r\n") else {
            if bytes.len() - start > MAX_HEAD_BYTES {
                return Err(format!("http: trailers over {MAX_HEAD_BYTES} bytes"));
            }
            return Ok(Chunks::More(Body::Trailers(start, t)));
        };
        if e == 0 {
            return Ok(Chunks::End(t + 2));
        }
        t += e + 2;
        if t - start > MAX_HEAD_BYTES {
            return Err(format!("http: trailers over {MAX_HEAD_BYTES} bytes"));
        }
    }
}

impl Exchange for Http1 {
    type User = HttpUser;

    const TRANSPORT: Transport = Transport::Stream;

    const UNSOLICITED: Option<&'static str> = Some(UNSOLICITED);

    fn for_plan(w: &Wire<'_>) -> Self {
        let h = w
            .proto
            .http_request()
            .expect("Http1 serves the plans of Proto::Http");
        // A validated plan's request builds (validate checked it).
        let request = h.bytes(w.request).expect("a validated plan's HTTP request");
        // Methods are case-sensitive (RFC 9110 9.1): `head` is not HEAD, and its replies
        // may carry a body.
        let p = Http1::new(w.target, request, h.method == "HEAD");
        // Checked when the plan was made (client_for, a bad --cacert one line then).
        match client_for(h, ALPN).expect("a checked plan's TLS settings") {
            Some(c) => p.with_tls(c),
            None => p,
        }
    }

    fn tls(&self) -> Option<&TlsClient> {
        self.tls.as_ref()
    }

    fn user(&self, _id: usize) -> HttpUser {
        HttpUser::default()
    }

    fn open(&self) -> Result<Opened, String> {
        super::connect(self.target)
    }

    fn encode(&self, u: &mut HttpUser) {
        u.cur = None;
        u.interim = 0;
    }

    fn request<'a>(&'a self, _u: &'a HttpUser) -> &'a [u8] {
        &self.request
    }

    fn decode(&self, u: &mut HttpUser, bytes: &[u8]) -> Decoded {
        let (n, body, failed, close, status) = match u.cur {
            Some(c) => c,
            None => match self.head(bytes) {
                Head::Parsed(n, b, f, c, s) => (n, b, f, c, s),
                Head::Interim(_) if u.interim >= MAX_INTERIM => {
                    return Decoded::Invalid(format!(
                        "http: more than {MAX_INTERIM} interim (1xx) replies to one request"
                    ))
                }
                Head::Interim(n) => {
                    u.interim += 1;
                    return Decoded::Stale(n);
                }
                Head::NeedMore => return Decoded::NeedMore,
                Head::Invalid(e) => return Decoded::Invalid(e),
            },
        };
        let end = match body {
            Body::Length(l) => {
                let end = n.saturating_add(l);
                if bytes.len() < end {
                    u.cur = Some((n, body, failed, close, status));
                    return Decoded::NeedMore;
                }
                end
            }
            Body::Chunked(_) | Body::Trailers(..) => match chunked_end(bytes, body) {
                Ok(Chunks::End(end)) => end,
                Ok(Chunks::More(at)) => {
                    u.cur = Some((n, at, failed, close, status));
                    return Decoded::NeedMore;
                }
                Err(e) => return Decoded::Invalid(e),
            },
        };
        u.cur = None;
        // One request in flight: nothing may follow its reply.
        if bytes.len() > end {
            return Decoded::Invalid(UNSOLICITED.into());
        }
        Decoded::Reply(Reply {
            len: end,
            failed,
            close,
            status,
        })
    }

    fn closed(&self, u: &mut HttpUser) {
        u.cur = None;
    }
}

#[cfg(test)]
#[path = "http1_tests.rs"]
mod tests;
