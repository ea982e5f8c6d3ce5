//! Redis's protocol (RESP, `--protocol redis`): one TCP connection per user, the same
//! command (the plan's request, a RESP array of bulk strings: `GET key`, `PING`) sent
//! again and again, and each reply read as one RESP value: a simple string (`+OK`), an
//! error (`-ERR ...`: a failure, `redis: error reply`), an integer, a bulk string, an
//! array, or RESP3's null, boolean, double, big number, blob error, verbatim string, map
//! and set. A RESP3 push (`>`) or attribute (`|`) answers no request: it is skipped.
//!
//! A reply is bounded: at most [`MAX_REPLY`] bytes, aggregates nested at most
//! [`MAX_DEPTH`] deep, a header line at most [`MAX_LINE`] bytes; past any of them the
//! bytes are not this protocol (the request fails, the connection is closed).

use std::net::SocketAddr;

use tpslab_plan::proto::Wire;

use super::{Decoded, Exchange, Opened, Reply, Transport};

/// Most bytes of one reply (1 MiB): a value is decoded again from its start as more of it
/// arrives, so the bound also bounds that work.
pub const MAX_REPLY: usize = 1 << 20;

/// Deepest nesting of arrays, maps and sets in a reply.
pub const MAX_DEPTH: usize = 16;

/// Longest header line (`$5`, `:42`, `+OK`, `-ERR ...`), bytes with its CRLF.
pub const MAX_LINE: usize = 64 * 1024;

/// What a reply with no request in flight counts as (Redis answers only requests).
pub const UNSOLICITED: &str = "redis: a reply with no request in flight";

/// A Redis command sent again and again over TCP.
#[derive(Debug, Clone)]
pub struct Resp {
    target: SocketAddr,
    /// The command as RESP (encoded by the plan).
    request: Vec<u8>,
}

/// The index of the CRLF ending the line that starts at `at`; None: not all read yet.
/// Errors: no CRLF within [`MAX_LINE`] bytes.
fn line_end(b: &[u8], at: usize) -> Result<Option<usize>, String> {
    let window = &b[at..b.len().min(at + MAX_LINE)];
    match memchr::memmem::find(window, b"\r\n") {
        Some(i) => Ok(Some(at + i)),
        None if window.len() >= MAX_LINE => Err(format!(
            "redis: a line of more than {MAX_LINE} bytes without CRLF"
        )),
        None => Ok(None),
    }
}

/// A header's length or count (`$5`, `*-1`). Errors: not a decimal integer.
fn length(head: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(head)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| "redis: a length that is not a number".to_string())
}

/// The end (exclusive) of the RESP value starting at `b[at]`, `depth` aggregates deep:
/// None when its bytes are not all read yet. Errors: not RESP, or past a bound.
fn value_end(b: &[u8], at: usize, depth: usize) -> Result<Option<usize>, String> {
    if depth > MAX_DEPTH {
        return Err(format!("redis: a reply nested more than {MAX_DEPTH} deep"));
    }
    let Some(&kind) = b.get(at) else {
        return Ok(None);
    };
    let Some(eol) = line_end(b, at)? else {
        return Ok(None);
    };
    let (head, next) = (&b[at + 1..eol], eol + 2);
    let end = match kind {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => next,
        b'$' | b'!' | b'=' => match length(head)? {
            // `$-1`: RESP2's null bulk string.
            -1 if kind == b'$' => next,
            n if n < 0 || n as usize > MAX_REPLY => {
                return Err(format!("redis: a bulk length {n} outside 0..={MAX_REPLY}"))
            }
            n => {
                let end = next + n as usize + 2;
                if b.len() < end {
                    return Ok(None);
                }
                if &b[end - 2..end] != b"\r\n" {
                    return Err("redis: a bulk string without its CRLF".into());
                }
                end
            }
        },
        b'*' | b'~' | b'>' | b'%' | b'|' => match length(head)? {
            // `*-1`: RESP2's null array.
            -1 if kind == b'*' => next,
            // Each element is at least 3 bytes (`_\r\n`).
            n if n < 0 || n as usize > MAX_REPLY / 3 => {
                return Err(format!("redis: an aggregate of {n} elements"))
            }
            n => {
                let pairs = matches!(kind, b'%' | b'|');
                let mut pos = next;
                for _ in 0..(n as usize) * if pairs { 2 } else { 1 } {
                    match value_end(b, pos, depth + 1)? {
                        Some(e) => pos = e,
                        None => return Ok(None),
                    }
                    if pos > MAX_REPLY {
                        break;
                    }
                }
                pos
            }
        },
        c => {
            return Err(format!(
                "redis: a reply starting with byte 0x{c:02x}, not a RESP type"
            ))
        }
    };
    if end > MAX_REPLY {
        return Err(format!("redis: a reply of more than {MAX_REPLY} bytes"));
    }
    Ok(Some(end))
}

impl Exchange for Resp {
    /// Nothing per user: every user sends the same command, and the reply's bytes are
    /// the loop's.
    type User = ();

    const TRANSPORT: Transport = Transport::Stream;

    const UNSOLICITED: Option<&'static str> = Some(UNSOLICITED);

    fn for_plan(w: &Wire<'_>) -> Self {
        Resp {
            target: w.target,
            request: w.request.to_vec(),
        }
    }

    fn user(&self, _id: usize) {}

    fn open(&self) -> Result<Opened, String> {
        super::connect(self.target)
    }

    fn encode(&self, _u: &mut ()) {}

    fn request<'a>(&'a self, _u: &'a ()) -> &'a [u8] {
        &self.request
    }

    fn decode(&self, _u: &mut (), bytes: &[u8]) -> Decoded {
        match value_end(bytes, 0, 0) {
            Err(e) => Decoded::Invalid(e),
            Ok(None) if bytes.len() > MAX_REPLY => {
                Decoded::Invalid(format!("redis: a reply of more than {MAX_REPLY} bytes"))
            }
            Ok(None) => Decoded::NeedMore,
            Ok(Some(n)) => match bytes[0] {
                b'>' | b'|' => Decoded::Stale(n),
                b'-' | b'!' => Decoded::Reply(Reply {
                    failed: Some("redis: error reply"),
                    ..Reply::ok(n)
                }),
                _ => Decoded::Reply(Reply::ok(n)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp() -> Resp {
        Resp {
            target: "127.0.0.1:6379".parse().unwrap(),
            request: b"*1\r\n$4\r\nPING\r\n".to_vec(),
        }
    }

    /// Decodes `stream` as the users' loop does with reads of `chunk` bytes: (each reply's
    /// bytes, whether it failed); stale values skipped.
    fn replies(stream: &[u8], chunk: usize) -> Result<Vec<(Vec<u8>, bool)>, String> {
        let p = resp();
        let (mut have, mut out) = (Vec::new(), vec![]);
        for c in stream.chunks(chunk) {
            have.extend_from_slice(c);
            loop {
                match p.decode(&mut (), &have) {
                    Decoded::Reply(r) => {
                        out.push((have.drain(..r.len).collect(), r.failed.is_some()))
                    }
                    Decoded::Stale(n) => drop(have.drain(..n)),
                    Decoded::NeedMore => break,
                    Decoded::Invalid(e) => return Err(e),
                }
            }
        }
        assert!(have.is_empty(), "left over: {have:?}");
        Ok(out)
    }

    /// Replies of Debian's redis-server 7.0.15 as read from its socket (`--port P --save
    /// ''`, commands sent by a Python socket): PING, GET of a missing key, SET, GET of a set
    /// key, an unknown command, INCRBY, LRANGE, then after HELLO 3 (its map) RESP3's null
    /// (GET of a missing key), HGETALL's map and SMEMBERS's set.
    const CAPTURED: &[&[u8]] = &[
        b"+PONG\r\n",
        b"$-1\r\n",
        b"+OK\r\n",
        b"$5\r\nhello\r\n",
        b"-ERR unknown command 'NOPE', with args beginning with: \r\n",
        b":42\r\n",
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$0\r\n\r\n",
        b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:3\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
        b"_\r\n",
        b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n",
        b"~1\r\n$1\r\nm\r\n",
    ];

    /// RESP3's other types, written from its specification (redis-server 7 sent none of
    /// them to the commands above): boolean, double, big number, verbatim string, blob
    /// error, and arrays nested with a null inside.
    const SPEC: &[&[u8]] = &[
        b"#t\r\n",
        b",3.14\r\n",
        b"(12345678901234567890\r\n",
        b"=7\r\ntxt:abc\r\n",
        b"!3\r\nERR\r\n",
        b"*2\r\n*1\r\n:1\r\n_\r\n",
    ];

    #[test]
    fn every_kind_of_reply_is_whole_in_any_reads() {
        let all: Vec<&[u8]> = CAPTURED.iter().chain(SPEC).copied().collect();
        let stream: Vec<u8> = all.concat();
        // Errors fail their request: `-ERR ...` and the blob error `!3`.
        let want: Vec<(Vec<u8>, bool)> = all
            .iter()
            .map(|r| (r.to_vec(), r[0] == b'-' || r[0] == b'!'))
            .collect();
        assert_eq!(want.iter().filter(|w| w.1).count(), 2);
        // A byte at a time (a CRLF split, a length split, a bulk split), and at once.
        for chunk in [1, 2, 3, 7, stream.len()] {
            assert_eq!(replies(&stream, chunk).unwrap(), want, "reads of {chunk}");
        }
        let p = resp();
        assert_eq!(p.decode(&mut (), b""), Decoded::NeedMore);
        assert_eq!(p.decode(&mut (), b"$5\r\nhel"), Decoded::NeedMore);
        assert_eq!(p.decode(&mut (), b"*2\r\n:1\r\n"), Decoded::NeedMore);
    }

    #[test]
    fn a_push_or_an_attribute_answers_no_request() {
        let push = b">2\r\n$7\r\nmessage\r\n$2\r\nhi\r\n";
        let attr = b"|1\r\n$3\r\nttl\r\n:3\r\n";
        let mut s = push.to_vec();
        s.extend_from_slice(attr);
        s.extend_from_slice(b"+OK\r\n");
        assert_eq!(
            replies(&s, 4).unwrap(),
            vec![(b"+OK\r\n".to_vec(), false)]
        );
        assert_eq!(resp().decode(&mut (), push), Decoded::Stale(push.len()));
    }

    #[test]
    fn bytes_that_are_not_resp_or_past_a_bound_fail() {
        let p = resp();
        let invalid = |b: &[u8]| match p.decode(&mut (), b) {
            Decoded::Invalid(e) => e,
            d => panic!("{b:?}: {d:?}"),
        };
        assert_eq!(
            invalid(b"HTTP/1.1 200 OK\r\n"),
            "redis: a reply starting with byte 0x48, not a RESP type"
        );
        assert_eq!(invalid(b"$x\r\n"), "redis: a length that is not a number");
        assert_eq!(invalid(b"$3\r\nabcde"), "redis: a bulk string without its CRLF");
        assert_eq!(
            invalid(b"$1048577\r\n"),
            "redis: a bulk length 1048577 outside 0..=1048576"
        );
        assert_eq!(invalid(b"$-2\r\n"), "redis: a bulk length -2 outside 0..=1048576");
        assert_eq!(invalid(b"%-1\r\n"), "redis: an aggregate of -1 elements");
        assert_eq!(
            invalid(b"*999999999\r\n"),
            "redis: an aggregate of 999999999 elements"
        );
        // Nested past the bound, before any element.
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 2);
        assert_eq!(invalid(&deep), "redis: a reply nested more than 16 deep");
        // A line without its end, past the longest header.
        let long = vec![b'+'; MAX_LINE + 1];
        assert_eq!(
            invalid(&long),
            "redis: a line of more than 65536 bytes without CRLF"
        );
        // Whole values that add up past the bound: an array of 1 KiB bulk strings.
        let mut big = b"*2000\r\n".to_vec();
        for _ in 0..2000 {
            big.extend_from_slice(b"$1024\r\n");
            big.extend_from_slice(&[b'x'; 1024]);
            big.extend_from_slice(b"\r\n");
        }
        assert_eq!(invalid(&big), "redis: a reply of more than 1048576 bytes");
        // Its first half is still only more to read.
        assert_eq!(p.decode(&mut (), &big[..500_000]), Decoded::NeedMore);
        // At the bounds: a bulk of exactly MAX_REPLY bytes with its header (`$1048564`
        // and CRLF: 10 bytes) and CRLF.
        let n = MAX_REPLY - 10 - 2;
        let mut edge = format!("${n}\r\n").into_bytes();
        edge.resize(edge.len() + n, b'y');
        edge.extend_from_slice(b"\r\n");
        assert_eq!(edge.len(), MAX_REPLY);
        assert_eq!(p.decode(&mut (), &edge), Decoded::Reply(Reply::ok(MAX_REPLY)));
        let ok_deep = [b"*1\r\n".repeat(MAX_DEPTH), b":1\r\n".to_vec()].concat();
        assert_eq!(
            p.decode(&mut (), &ok_deep),
            Decoded::Reply(Reply::ok(ok_deep.len()))
        );
    }

    #[test]
    // A user of this protocol keeps nothing (its state is `()`).
    #[allow(clippy::let_unit_value)]
    fn every_user_sends_the_plans_command() {
        let p = resp();
        let mut u = p.user(3);
        p.encode(&mut u);
        assert_eq!(p.request(&u), b"*1\r\n$4\r\nPING\r\n");
    }
}
