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

use std::net::SocketAddr;

use tpslab_plan::ramp::{RampPlan, RampProto};

use super::tls::{client_for, TlsClient};
use super::{Decoded, Exchange, Opened, Reply, Transport};

/// Most header lines a reply may have.
const MAX_REPLY_HEADERS: usize = 96;

/// The failure kinds of error statuses.
const KIND_4XX: &str = "http 4xx";
const KIND_5XX: &str = "http 5xx";

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
/// beyond it is not HTTP (and would be parsed again on every read).
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

/// The end of a chunked body whose next chunk-size line is at `pos` in `bytes`: Ok(Ok(end
/// of the reply)), Ok(Err(position to resume from)) when more bytes are needed, or not
/// chunked coding.
fn chunked_end(bytes: &[u8], mut pos: usize) -> Result<Result<usize, usize>, String> {
    loop {
        let Some(eol) = memchr::memmem::find(&bytes[pos..], b"\r\n") else {
            if bytes.len() - pos > 1024 {
                return Err("http: a chunk-size line too long".into());
            }
            return Ok(Err(pos));
        };
        let size = parse_chunk_size(&bytes[pos..pos + eol])
            .ok_or_else(|| "http: a bad chunk size".to_string())?;
        let data = pos + eol + 2;
        if size == 0 {
            // Trailers: header lines, then a blank line.
            let mut t = data;
            loop {
                let Some(e) = memchr::memmem::find(&bytes[t..], b"\r\n") else {
                    return Ok(Err(pos));
                };
                if e == 0 {
                    return Ok(Ok(t + 2));
                }
                t += e + 2;
            }
        }
        let next = data + size + 2;
        if bytes.len() < next {
            return Ok(Err(pos));
        }
        if &bytes[next - 2..next] != b"\r\n" {
            return Err("http: a chunk not ended by CRLF".into());
        }
        pos = next;
    }
}

impl Exchange for Http1 {
    type User = HttpUser;

    const TRANSPORT: Transport = Transport::Stream;

    fn for_plan(plan: &RampPlan) -> Self {
        let RampProto::Http(h) = &plan.proto else {
            unreachable!("Http1 serves the plans of RampProto::Http")
        };
        // A validated plan's request builds (validate checked it).
        let request = h
            .bytes(&plan.request)
            .expect("a validated plan's HTTP request");
        // Methods are case-sensitive (RFC 9110 9.1): `head` is not HEAD, and its replies
        // may carry a body.
        let p = Http1::new(plan.target, request, h.method == "HEAD");
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
            Body::Chunked(pos) => match chunked_end(bytes, pos) {
                Ok(Ok(end)) => end,
                Ok(Err(resume)) => {
                    u.cur = Some((n, Body::Chunked(resume), failed, close, status));
                    return Decoded::NeedMore;
                }
                Err(e) => return Decoded::Invalid(e),
            },
        };
        u.cur = None;
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
mod tests {
    use super::*;
    use std::time::Duration;

    fn proto(head: bool) -> Http1 {
        Http1::new(
            "127.0.0.1:9".parse().unwrap(),
            b"GET / HTTP/1.1\r\nHost: h\r\n\r\n".to_vec(),
            head,
        )
    }

    /// Each reply decoded: its bytes and what it says.
    type Decodes = Vec<(Vec<u8>, Reply)>;

    /// Decodes `stream` as the users' loop does with reads of `chunk` bytes: whole replies
    /// consumed, 1xx skipped, the rest kept. Gives the replies (their bytes and what they
    /// say) and the bytes left over.
    fn replies(p: &Http1, stream: &[u8], chunk: usize) -> Result<(Decodes, usize), String> {
        let mut u = p.user(0);
        p.encode(&mut u);
        let (mut have, mut out) = (Vec::new(), vec![]);
        for c in stream.chunks(chunk) {
            have.extend_from_slice(c);
            loop {
                match p.decode(&mut u, &have) {
                    Decoded::Reply(r) => {
                        out.push((have.drain(..r.len).collect(), r));
                        p.encode(&mut u);
                    }
                    Decoded::Stale(n) => {
                        assert!(n > 0);
                        have.drain(..n);
                    }
                    Decoded::NeedMore => break,
                    Decoded::Invalid(e) => return Err(e),
                }
            }
        }
        Ok((out, have.len()))
    }

    /// A reply from nginx 1.26 (Debian), as read off the socket.
    const NGINX_200: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.26.3\r\nDate: Fri, 27 Nov 2026 14:30:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 12\r\nLast-Modified: Fri, 27 Nov 2026 14:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"6747a3a0-c\"\r\nAccept-Ranges: bytes\r\n\r\nhello world\n";

    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";

    #[test]
    fn content_length_replies_in_any_reads() {
        let p = proto(false);
        let mut stream = NGINX_200.to_vec();
        stream.extend_from_slice(NGINX_200);
        for chunk in [1, 2, 7, 100, stream.len()] {
            let (got, left) = replies(&p, &stream, chunk).unwrap();
            assert_eq!(got.len(), 2, "reads of {chunk}");
            assert_eq!(got[0].0, NGINX_200);
            assert_eq!(
                got[0].1,
                Reply {
                    status: 200,
                    ..Reply::ok(NGINX_200.len())
                }
            );
            assert_eq!(left, 0);
        }
    }

    #[test]
    fn chunked_replies_split_anywhere() {
        let p = proto(false);
        let mut stream = CHUNKED.to_vec();
        // With trailers, then a pipelined leftover (the start of a next reply).
        let trailers = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-B: 2\r\n\r\n";
        stream.extend_from_slice(trailers);
        stream.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Le");
        for chunk in 1..=stream.len() {
            let (got, left) = replies(&p, &stream, chunk).unwrap();
            assert_eq!(got.len(), 2, "reads of {chunk}");
            assert_eq!(got[0].0, CHUNKED);
            assert_eq!(got[1].0, trailers.to_vec());
            assert_eq!(left, 27, "the next reply's start stays");
        }
    }

    #[test]
    fn no_body_for_head_204_304_and_interim_replies_skipped() {
        // HEAD: the Content-Length is the resource's, no body follows.
        let head = &NGINX_200[..NGINX_200.len() - 12];
        let mut two = head.to_vec();
        two.extend_from_slice(head);
        let (got, left) = replies(&proto(true), &two, 5).unwrap();
        assert_eq!((got.len(), left), (2, 0));
        assert_eq!(got[1].0, head);
        let p = proto(false);
        let (r204, r304, r100, r200): (&[u8], &[u8], &[u8], &[u8]) = (
            b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n",
            b"HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nContent-Length: 99\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        );
        let s = [r204, r304, r100, r200].concat();
        for chunk in [1, 3, s.len()] {
            let (got, left) = replies(&p, &s, chunk).unwrap();
            let bytes: Vec<&[u8]> = got.iter().map(|(b, _)| &b[..]).collect();
            assert_eq!(bytes, vec![r204, r304, r200], "reads of {chunk}");
            assert!(got.iter().all(|(_, r)| r.failed.is_none() && !r.close));
            assert_eq!(left, 0);
        }
    }

    #[test]
    fn error_statuses_fail_by_class_and_close_is_kept() {
        let p = proto(false);
        let s = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbusHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\nConnection: Keep-Alive, Close\r\n\r\nHTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
        let (got, _) = replies(&p, s, 11).unwrap();
        let said: Vec<(Option<&str>, bool, u16)> = got
            .iter()
            .map(|(_, r)| (r.failed, r.close, r.status))
            .collect();
        assert_eq!(
            said,
            vec![
                (Some("http 5xx"), true, 503),
                (Some("http 4xx"), false, 404),
                (None, true, 302),
                (None, true, 200),
                (None, false, 200)
            ]
        );
    }

    #[test]
    fn malformed_replies_are_invalid() {
        let p = proto(false);
        let e = |s: &[u8]| match p.decode(&mut HttpUser::default(), s) {
            Decoded::Invalid(e) => e,
            d => panic!("{:?}: {d:?}", String::from_utf8_lossy(s)),
        };
        assert_eq!(e(b"SSH-2.0-OpenSSH_9.2\r\n"), "http: invalid HTTP version");
        assert!(e(b"HTTP/1.1 2x0 OK\r\n\r\n").starts_with("http: "));
        assert_eq!(
            e(b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"),
            "http: a bad Content-Length"
        );
        assert_eq!(
            e(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            "http: a bad Content-Length"
        );
        assert!(e(b"HTTP/1.1 200 OK\r\n\r\n").contains("ends at close"));
        assert!(e(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n").contains("ends at close"));
        assert!(e(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").contains("101"));
        assert_eq!(
            e(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            "http: a bad chunk size"
        );
        assert_eq!(
            e(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n"),
            "http: a chunk not ended by CRLF"
        );
        // A partial head is not an error.
        assert_eq!(
            p.decode(&mut HttpUser::default(), b"HTTP/1.1 200 O"),
            Decoded::NeedMore
        );
        assert_eq!(p.decode(&mut HttpUser::default(), b""), Decoded::NeedMore);
    }

    #[test]
    fn a_server_that_never_ends_its_interim_replies_or_its_head_is_invalid() {
        let p = proto(false);
        let cont = b"HTTP/1.1 100 Continue\r\n\r\n";
        // 16 interim replies, then the answer: taken.
        let mut ok = cont.repeat(MAX_INTERIM as usize);
        ok.extend_from_slice(NGINX_200);
        assert_eq!(replies(&p, &ok, ok.len()).unwrap().0.len(), 1);
        // Each request has its own count: the same again on the next request.
        let twice = ok.repeat(2);
        assert_eq!(replies(&p, &twice, 7).unwrap().0.len(), 2);
        // One more: a server flooding 1xx would keep its user's loop reading forever.
        let flood = cont.repeat(MAX_INTERIM as usize + 1);
        let e = replies(&p, &flood, flood.len()).unwrap_err();
        assert_eq!(e, "http: more than 16 interim (1xx) replies to one request");
        // A head that never ends.
        let mut endless = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
        endless.resize(MAX_HEAD_BYTES + 2, b'a');
        let e = replies(&p, &endless, 4096).unwrap_err();
        assert_eq!(e, "http: a reply head over 65536 bytes");
    }

    #[test]
    fn a_closed_connection_forgets_the_reply_being_read() {
        let p = proto(false);
        let mut u = p.user(3);
        p.encode(&mut u);
        assert_eq!(
            p.decode(&mut u, &NGINX_200[..NGINX_200.len() - 3]),
            Decoded::NeedMore
        );
        assert!(u.cur.is_some());
        p.closed(&mut u);
        assert_eq!(u, HttpUser::default());
        assert_eq!(p.request(&u), b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    }

    #[test]
    fn the_plans_request_is_built_once() {
        let plan = RampPlan {
            proto: RampProto::Http(tpslab_plan::http::HttpRequest {
                url: "http://127.0.0.1:8080/x".into(),
                method: "HEAD".into(),
                headers: vec![("Accept".into(), "*/*".into())],
                tls: Default::default(),
            }),
            target: "127.0.0.1:8080".parse().unwrap(),
            steps: vec![1],
            step: Duration::from_secs(1),
            warmup: Duration::ZERO,
            think: Duration::ZERO,
            timeout: Duration::from_secs(1),
            request: vec![],
            framing: tpslab_plan::framing::Framing::Length,
            seq_field: None,
            knee_gain: 0.2,
            builtin_server: None,
            server_pid: None,
            sample_interval: Duration::from_millis(10),
            load_threads: 0,
            http2_connections: 0,
        };
        plan.validate().unwrap();
        let p = Http1::for_plan(&plan);
        assert!(p.head);
        assert_eq!(
            p.request(&p.user(0)),
            format!(
                "HEAD /x HTTP/1.1\r\nHost: {}\r\nAccept: */*\r\n\r\n",
                plan.target
            )
            .as_bytes()
        );
    }
}
