//! `serve http`'s requests and replies: an HTTP/1.1 request is its head (parsed by
//! `httparse`) and a Content-Length body; the reply is `200 OK` with the request's body
//! ("ping"s replaced by "pong"s, `pong\n` for an empty one), keep-alive unless the request
//! says `Connection: close` (or is HTTP/1.0 without keep-alive).

use std::io::{Error, ErrorKind, Write};

/// Most header lines a request may have.
const MAX_REQUEST_HEADERS: usize = 64;

fn invalid(why: &str) -> Error {
    Error::new(ErrorKind::InvalidData, format!("http: {why}"))
}

/// The head's length, the body's length and whether the connection closes after the reply
/// (None: the head is not whole yet); HEAD requests say so. Errors: not HTTP/1.x, a bad
/// Content-Length, a chunked body (not served).
fn parse(b: &[u8]) -> std::io::Result<Option<(usize, usize, bool, bool)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_REQUEST_HEADERS];
    let mut r = httparse::Request::new(&mut headers);
    let n = match r.parse(b) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(invalid(&e.to_string())),
    };
    let (mut len, mut close, mut keep) = (0usize, r.version == Some(0), false);
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .filter(|&l| l <= tpslab_plan::framing::MAX_FRAME)
                .ok_or_else(|| invalid("a bad Content-Length"))?;
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(invalid("a chunked request body (not served)"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for t in h.value.split(|&c| c == b',') {
                close |= t.trim_ascii().eq_ignore_ascii_case(b"close");
                keep |= t.trim_ascii().eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    if r.version == Some(0) && keep {
        close = r.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("connection")
                && h.value
                    .split(|&c| c == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
        });
    }
    let head = r.method == Some("HEAD");
    Ok(Some((n, len, close, head)))
}

/// The length of the whole request at the start of `b` (head and body), None while it is
/// not all there. Errors: InvalidData, as the server closes the connection for.
pub(crate) fn request_len(b: &[u8]) -> std::io::Result<Option<usize>> {
    Ok(match parse(b)? {
        Some((n, len, _, _)) => (b.len() >= n + len).then_some(n + len),
        None => None,
    })
}

/// Appends the reply to the whole request `req` (as [`request_len`] cut it) to `out`;
/// true when the connection closes after it.
pub(crate) fn reply(req: &[u8], out: &mut Vec<u8>, finder: &memchr::memmem::Finder<'_>) -> bool {
    let Ok(Some((n, len, close, head))) = parse(req) else {
        // request_len accepted it: not reached; close to be safe.
        out.extend_from_slice(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return true;
    };
    let body = &req[n..n + len];
    let body_len = if body.is_empty() { 5 } else { body.len() };
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "HTTP/1.1 200 OK\r\nServer: tpslab\r\nContent-Type: text/plain\r\nContent-Length: {body_len}\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    );
    if !head {
        if body.is_empty() {
            out.extend_from_slice(b"pong\n");
        } else {
            let start = out.len();
            out.extend_from_slice(body);
            crate::serve::wire::find_and_replace(finder, &mut out[start..]);
        }
    }
    close
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(req: &[u8]) -> (Vec<u8>, bool) {
        let f = memchr::memmem::Finder::new(crate::serve::wire::FIND);
        let n = request_len(req).unwrap().unwrap();
        assert_eq!(n, req.len());
        let mut out = vec![];
        let close = reply(req, &mut out, &f);
        (out, close)
    }

    #[test]
    fn requests_are_cut_by_their_head_and_length() {
        let get = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        for i in 0..get.len() {
            assert_eq!(request_len(&get[..i]).unwrap(), None, "{i} bytes");
        }
        let mut two = get.to_vec();
        two.extend_from_slice(b"POST /x HTTP/1.1\r\nContent-Length: 4\r\n\r\nping");
        assert_eq!(request_len(&two).unwrap(), Some(get.len()));
        assert_eq!(request_len(&two[get.len()..two.len() - 1]).unwrap(), None);
        assert!(request_len(b"\x00\x00\x00\x04ping").is_err());
        assert!(request_len(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(request_len(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n").is_err());
    }

    #[test]
    fn replies_keep_alive_or_close() {
        let (out, close) = answer(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(out, b"HTTP/1.1 200 OK\r\nServer: tpslab\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\npong\n");
        assert!(!close);
        let (out, close) =
            answer(b"POST / HTTP/1.1\r\nConnection: close\r\nContent-Length: 9\r\n\r\nping.ping");
        assert!(close);
        assert!(
            out.ends_with(b"Content-Length: 9\r\nConnection: close\r\n\r\npong.pong"),
            "{}",
            String::from_utf8_lossy(&out)
        );
        let (out, _) = answer(b"HEAD / HTTP/1.1\r\n\r\n");
        assert!(out.ends_with(b"Content-Length: 5\r\n\r\n"));
        assert!(answer(b"GET / HTTP/1.0\r\n\r\n").1);
        assert!(!answer(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").1);
    }
}
