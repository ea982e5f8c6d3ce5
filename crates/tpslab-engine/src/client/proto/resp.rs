//! Redis's protocol (RESP, `--protocol redis`): one TCP connection per user, the same
//! command (the plan's request, a RESP array of bulk strings: `GET key`, `PING`) sent
//! again and again, and each reply read as one RESP value: a simple string (`+OK`), an
//! error (`-ERR ...`: a failure, `redis: error reply` with the error's first word,
//! `redis: error reply NOAUTH`), an integer, a bulk string, an array, or RESP3's null,
//! boolean, double, big number, blob error, verbatim string, map and set. A RESP3 push
//! (`>`) or attribute (`|`) answers no request: it is skipped.
//!
//! A reply is bounded: at most [`MAX_REPLY`] bytes, aggregates nested at most
//! [`MAX_DEPTH`] deep, a header line at most [`MAX_LINE`] bytes; past any of them the
//! bytes are not this protocol (the request fails, the connection is closed).
//!
//! A reply is scanned as its bytes arrive ([`Scan`]: where the next header starts, how
//! far its line was searched, the elements still to come of each aggregate open), so each
//! byte of a reply is looked at once however many reads bring it: the work of a reply is
//! O(its bytes), never O(bytes x reads).

use std::net::SocketAddr;
use std::sync::Mutex;

use tpslab_plan::proto::Wire;

use super::{Decoded, Exchange, Opened, Reply, Transport};

/// Most bytes of one reply (1 MiB). It bounds the memory a reply holds; the work of
/// scanning it is O(its bytes) ([`Scan`]).
pub const MAX_REPLY: usize = 1 << 20;

/// Deepest nesting of arrays, maps and sets in a reply.
pub const MAX_DEPTH: usize = 16;

/// Longest header line (`$5`, `:42`, `+OK`, `-ERR ...`), bytes with its CRLF.
pub const MAX_LINE: usize = 64 * 1024;

/// What a reply with no request in flight counts as (Redis answers only requests).
pub const UNSOLICITED: &str = "redis: a reply with no request in flight";

/// What an error reply counts as, with no usable first word (`-err`, `-`, `!3`'s text
/// lower-case): else this and the word, `redis: error reply NOAUTH`.
pub const ERROR_REPLY: &str = "redis: error reply";

/// Longest first word of an error reply kept in its kind (Redis's codes: `ERR`,
/// `WRONGTYPE`, `NOAUTH`, `NOPERM`, `READONLY`, `CLUSTERDOWN`, ...).
pub const MAX_ERROR_WORD: usize = 32;

/// Most distinct error kinds with a word a process keeps (each a few dozen bytes, kept
/// for the process's life: a failure's kind is a `&'static str`); past them an error
/// reply counts as [`ERROR_REPLY`] alone.
pub const MAX_ERROR_KINDS: usize = 64;

/// A Redis command sent again and again over TCP.
#[derive(Debug, Clone)]
pub struct Resp {
    target: SocketAddr,
    /// The command as RESP (encoded by the plan).
    request: Vec<u8>,
}

/// The bounds a [`Scan`] holds a value to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Aggregates open at once, at most [`MAX_DEPTH`].
    pub depth: usize,
    /// Bytes of the whole value (a bulk string's length too).
    pub bytes: usize,
    /// Bytes of a header line with its CRLF.
    pub line: usize,
}

/// A reply's bounds: [`MAX_DEPTH`], [`MAX_REPLY`], [`MAX_LINE`].
pub(crate) const REPLY: Bounds = Bounds {
    depth: MAX_DEPTH,
    bytes: MAX_REPLY,
    line: MAX_LINE,
};

/// Where the scan of one RESP value stands between reads (a user's state): the bytes
/// before `at` are validated and not looked at again.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Where the next header starts.
    at: usize,
    /// How far the header at `at` was searched for its CRLF (0: not yet).
    searched: usize,
    /// The end (its CRLF included) of the bulk string whose header was read; 0: none.
    bulk_end: usize,
    /// Elements still to come of each aggregate open, outermost first (`open` of them).
    left: [usize; MAX_DEPTH],
    open: usize,
    /// Bit i: the aggregate open at level i is an attribute inside an aggregate (it
    /// describes the element after it and is not one).
    attrs: u32,
}

/// A header's length or count (`$5`, `*-1`). Errors: not a decimal integer.
fn length(head: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(head)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| "redis: a length that is not a number".to_string())
}

/// What a header told a [`Scan`].
enum Next {
    /// Its line is not whole yet.
    NeedMore,
    /// A value ended here (exclusive).
    Ended(usize),
    /// The scan goes on at its new place: a bulk string's header read, an aggregate
    /// opened, an empty attribute skipped.
    Inside,
}

impl Scan {
    /// Scans `b` (the bytes given to the last call with more appended; none taken from
    /// its start since) on from where the last call stopped: Some(end) when the value
    /// starting at `b[0]` is whole (its end, exclusive; the scan is then reset), None
    /// when more bytes are needed. A RESP3 attribute (`|`) inside an aggregate is part of
    /// the element after it; at the start it is a value of its own. Errors: not RESP, or
    /// past a bound of `lim` (reset the scan, as [`Scan::default`], before another value).
    pub(crate) fn step(&mut self, b: &[u8], lim: Bounds) -> Result<Option<usize>, String> {
        debug_assert!(lim.depth <= MAX_DEPTH);
        loop {
            let end = if self.bulk_end != 0 {
                let end = self.bulk_end;
                if b.len() < end {
                    return Ok(None);
                }
                if &b[end - 2..end] != b"\r\n" {
                    return Err("redis: a bulk string without its CRLF".into());
                }
                self.bulk_end = 0;
                end
            } else {
                match self.header(b, lim)? {
                    Next::NeedMore => return Ok(None),
                    Next::Inside => continue,
                    Next::Ended(end) => end,
                }
            };
            // A value ended at `end`: it is an element of the innermost aggregate open,
            // which may end with it, and so on outwards.
            if end > lim.bytes {
                return Err(format!("redis: a reply of more than {} bytes", lim.bytes));
            }
            self.at = end;
            while self.open > 0 {
                let i = self.open - 1;
                self.left[i] -= 1;
                if self.left[i] > 0 {
                    break;
                }
                self.open -= 1;
                if self.attrs & (1 << i) != 0 {
                    // An attribute ended: the element it describes is still to come.
                    break;
                }
            }
            if self.open == 0 {
                *self = Scan::default();
                return Ok(Some(end));
            }
        }
    }

    /// Reads the header at `self.at` of `b`, its line's CRLF searched from where the
    /// last call stopped. Errors: as [`Scan::step`]'s.
    #[inline]
    fn header(&mut self, b: &[u8], lim: Bounds) -> Result<Next, String> {
        let at = self.at;
        let Some(&kind) = b.get(at) else {
            return Ok(Next::NeedMore);
        };
        // The line's CRLF, searched from where the last call stopped (one byte
        // back: a CR may have ended it).
        let from = at.max(self.searched.saturating_sub(1));
        let limit = b.len().min(at + lim.line);
        let eol = match memchr::memmem::find(&b[from.min(limit)..limit], b"\r\n") {
            Some(i) => from + i,
            None if limit - at >= lim.line => {
                return Err(format!(
                    "redis: a line of more than {} bytes without CRLF",
                    lim.line
                ))
            }
            None => {
                self.searched = limit;
                return Ok(Next::NeedMore);
            }
        };
        self.searched = 0;
        let (head, next) = (&b[at + 1..eol], eol + 2);
        match kind {
            b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Ok(Next::Ended(next)),
            b'$' | b'!' | b'=' => match length(head)? {
                // `$-1`: RESP2's null bulk string.
                -1 if kind == b'$' => Ok(Next::Ended(next)),
                n if n < 0 || n as u64 > lim.bytes as u64 => Err(format!(
                    "redis: a bulk length {n} outside 0..={}",
                    lim.bytes
                )),
                n => {
                    let end = next + n as usize + 2;
                    if end > lim.bytes {
                        return Err(format!("redis: a reply of more than {} bytes", lim.bytes));
                    }
                    self.bulk_end = end;
                    self.at = next;
                    Ok(Next::Inside)
                }
            },
            b'*' | b'~' | b'>' | b'%' | b'|' => match length(head)? {
                // `*-1`: RESP2's null array.
                -1 if kind == b'*' => Ok(Next::Ended(next)),
                // Each element is at least 3 bytes (`_\r\n`).
                n if n < 0 || n as u64 > (lim.bytes / 3) as u64 => {
                    Err(format!("redis: an aggregate of {n} elements"))
                }
                n => self.aggregate(kind, n as usize, next, lim),
            },
            c => Err(format!(
                "redis: a reply starting with byte 0x{c:02x}, not a RESP type"
            )),
        }
    }

    /// An aggregate of type `kind` with `n` elements (or pairs) whose header ends at
    /// `next`: opened (its elements to come), or an empty one a value (an empty attribute
    /// inside an aggregate: nothing). Errors: nested deeper than `lim` allows.
    #[inline]
    fn aggregate(&mut self, kind: u8, n: usize, next: usize, lim: Bounds) -> Result<Next, String> {
        let pairs = matches!(kind, b'%' | b'|');
        let count = n * if pairs { 2 } else { 1 };
        let attr = kind == b'|' && self.open > 0;
        if count == 0 {
            if attr {
                // An empty attribute: the element is still to come.
                self.at = next;
                return Ok(Next::Inside);
            }
            return Ok(Next::Ended(next));
        }
        if self.open >= lim.depth {
            return Err(format!(
                "redis: a reply nested more than {} deep",
                lim.depth
            ));
        }
        self.left[self.open] = count;
        self.attrs &= !(1 << self.open);
        if attr {
            self.attrs |= 1 << self.open;
        }
        self.open += 1;
        self.at = next;
        Ok(Next::Inside)
    }
}

/// The kind an error reply counts as: [`ERROR_REPLY`] and the error's first word when it
/// is 1..=[`MAX_ERROR_WORD`] capital letters (`-NOAUTH Authentication required.`: `redis:
/// error reply NOAUTH`), else [`ERROR_REPLY`] alone. `text`: the error's text, after `-`
/// or a blob error's bytes. Each kind with a word is made once per process (at most
/// [`MAX_ERROR_KINDS`]), so a reply is decoded without allocating after its first.
pub fn error_kind(text: &[u8]) -> &'static str {
    static KINDS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let word = text.split(|&c| c == b' ').next().unwrap_or_default();
    if word.is_empty() || word.len() > MAX_ERROR_WORD || !word.iter().all(u8::is_ascii_uppercase) {
        return ERROR_REPLY;
    }
    // Capital letters: UTF-8.
    let word = std::str::from_utf8(word).unwrap_or_default();
    let mut kinds = KINDS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(k) = kinds
        .iter()
        .find(|k| k.len() == ERROR_REPLY.len() + 1 + word.len() && k.ends_with(word))
    {
        return k;
    }
    if kinds.len() >= MAX_ERROR_KINDS {
        return ERROR_REPLY;
    }
    let k: &'static str = Box::leak(format!("{ERROR_REPLY} {word}").into_boxed_str());
    kinds.push(k);
    k
}

impl Exchange for Resp {
    /// Where the reply being read is scanned to.
    type User = Scan;

    const TRANSPORT: Transport = Transport::Stream;

    const UNSOLICITED: Option<&'static str> = Some(UNSOLICITED);

    fn for_plan(w: &Wire<'_>) -> Self {
        Resp {
            target: w.target,
            request: w.request.to_vec(),
        }
    }

    fn user(&self, _id: usize) -> Scan {
        Scan::default()
    }

    fn open(&self) -> Result<Opened, String> {
        super::connect(self.target)
    }

    fn encode(&self, u: &mut Scan) {
        *u = Scan::default();
    }

    fn request<'a>(&'a self, _u: &'a Scan) -> &'a [u8] {
        &self.request
    }

    fn decode(&self, u: &mut Scan, bytes: &[u8]) -> Decoded {
        match u.step(bytes, REPLY) {
            Err(e) => {
                *u = Scan::default();
                Decoded::Invalid(e)
            }
            Ok(None) if bytes.len() > MAX_REPLY => {
                *u = Scan::default();
                Decoded::Invalid(format!("redis: a reply of more than {MAX_REPLY} bytes"))
            }
            Ok(None) => Decoded::NeedMore,
            Ok(Some(n)) => match bytes[0] {
                b'>' | b'|' => Decoded::Stale(n),
                b'-' => Decoded::Reply(Reply {
                    failed: Some(error_kind(&bytes[1..n - 2])),
                    ..Reply::ok(n)
                }),
                b'!' => {
                    // `!LEN\r\nTEXT\r\n`: the text after the header's CRLF.
                    let text = memchr::memmem::find(&bytes[..n], b"\r\n")
                        .map_or(&[][..], |e| &bytes[(e + 2).min(n - 2)..n - 2]);
                    Decoded::Reply(Reply {
                        failed: Some(error_kind(text)),
                        ..Reply::ok(n)
                    })
                }
                _ => Decoded::Reply(Reply::ok(n)),
            },
        }
    }

    fn closed(&self, u: &mut Scan) {
        *u = Scan::default();
    }
}

#[cfg(test)]
#[path = "resp_tests.rs"]
mod tests;
