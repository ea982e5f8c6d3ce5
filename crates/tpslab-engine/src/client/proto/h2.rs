//! HTTP/2's frames as `load http --http2` writes and reads them (RFC 9113), sans I/O: the
//! 9-byte frame header, the frames a client receives cut out of a connection's bytes
//! ([`parse`]), and the frames it writes (the preface and its SETTINGS, a request's
//! HEADERS/CONTINUATION and DATA, WINDOW_UPDATE, RST_STREAM, PING and SETTINGS
//! acknowledgements). Header blocks are HPACK: written by the `httlib-hpack` crate's encoder, read by
//! [`super::hpack`] (only `:status` and the dynamic table); the event loop
//! that drives connections and streams is `openloop::h2loop`.
//!
//! Errors are one line starting `http2: ` (counted as protocol failures).

/// What a client writes first on an HTTP/2 connection (RFC 9113 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The ALPN protocol offered over TLS.
pub const ALPN: &[&[u8]] = &[b"h2"];

/// Bytes of a frame's header.
pub const HEAD: usize = 9;

/// The largest frame payload a peer may send before its SETTINGS say otherwise (and
/// the one this client keeps: it never raises SETTINGS_MAX_FRAME_SIZE).
pub const DEFAULT_MAX_FRAME: u32 = 16_384;

/// The flow-control window every stream and connection starts with (RFC 9113 6.9.2).
pub const DEFAULT_WINDOW: i64 = 65_535;

/// The receive window this client announces per stream and for the connection, bytes
/// (as h2load's default `-w 30 -W 30`): replies are never held back by it.
pub const RECV_WINDOW: u32 = 1 << 30;

/// Frame types.
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0;
    /// HEADERS.
    pub const HEADERS: u8 = 1;
    /// PRIORITY.
    pub const PRIORITY: u8 = 2;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 4;
    /// PUSH_PROMISE.
    pub const PUSH_PROMISE: u8 = 5;
    /// PING.
    pub const PING: u8 = 6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 7;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u8 = 8;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 9;
}

/// Frame flags.
pub mod flag {
    /// DATA, HEADERS: the stream's last frame from this side.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the header block's last frame.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: padded.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: a priority block precedes the header block.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameters this client reads or writes.
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
}

/// Error code CANCEL (RFC 9113 7): a stream this client gave up on (its timeout).
pub const CANCEL: u32 = 0x8;

/// A frame's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Payload length, bytes (24 bits).
    pub len: u32,
    /// Type ([`kind`]).
    pub kind: u8,
    /// Flags ([`flag`]).
    pub flags: u8,
    /// Stream identifier (31 bits; 0: the connection).
    pub stream: u32,
}

/// A frame received, borrowing the connection's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// DATA: `data` without padding; `flow` the payload's length as flow control counts
    /// it (padding included).
    Data {
        /// Stream.
        stream: u32,
        /// END_STREAM set.
        end: bool,
        /// The data.
        data: &'a [u8],
        /// Bytes counted against the receive windows.
        flow: u32,
    },
    /// HEADERS (priority and padding removed) or CONTINUATION: a piece of a header block.
    Headers {
        /// Stream.
        stream: u32,
        /// END_STREAM set (HEADERS only).
        end_stream: bool,
        /// END_HEADERS set: the block is whole with this piece.
        end_headers: bool,
        /// CONTINUATION (not the block's first piece).
        continuation: bool,
        /// The piece of the HPACK block.
        block: &'a [u8],
    },
    /// RST_STREAM.
    Reset {
        /// Stream.
        stream: u32,
        /// Error code.
        code: u32,
    },
    /// SETTINGS: `params` is the payload, 6 bytes a parameter ([`settings`]).
    Settings {
        /// An acknowledgement of ours.
        ack: bool,
        /// The parameters.
        params: &'a [u8],
    },
    /// PING.
    Ping {
        /// An acknowledgement of ours.
        ack: bool,
        /// Its 8 bytes.
        data: [u8; 8],
    },
    /// GOAWAY: streams above `last` were not processed.
    GoAway {
        /// The last stream the server processes.
        last: u32,
        /// Error code (0: NO_ERROR, a graceful shutdown).
        code: u32,
    },
    /// WINDOW_UPDATE.
    WindowUpdate {
        /// Stream (0: the connection).
        stream: u32,
        /// Bytes added to the window (1..2^31-1).
        increment: u32,
    },
    /// PRIORITY, PUSH_PROMISE (refused by SETTINGS_ENABLE_PUSH 0: a protocol error if
    /// sent), or a type this client does not know: ignored.
    Other {
        /// Its type.
        kind: u8,
    },
}

/// Reads a frame header from the first [`HEAD`] bytes of `b` (None: fewer).
pub fn parse_head(b: &[u8]) -> Option<Head> {
    let h: &[u8; HEAD] = b.get(..HEAD)?.try_into().ok()?;
    Some(Head {
        len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
        kind: h[3],
        flags: h[4],
        stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
    })
}

/// Appends a frame header.
pub fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

fn err(why: impl std::fmt::Display) -> String {
    format!("http2: {why}")
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Cuts the first frame out of `b`: Ok(None) while it is not whole, else the frame and
/// its length on the wire. `max` is the largest payload this side allows
/// ([`DEFAULT_MAX_FRAME`]). Errors (connection errors, `http2: ...`): a payload over
/// `max`, a frame whose length its type forbids, padding longer than the payload, a
/// frame on the wrong stream (SETTINGS, PING, GOAWAY on a stream; DATA, HEADERS,
/// RST_STREAM on stream 0), a WINDOW_UPDATE of 0, a PUSH_PROMISE (push is disabled).
pub fn parse(b: &[u8], max: u32) -> Result<Option<(Frame<'_>, usize)>, String> {
    let Some(h) = parse_head(b) else {
        return Ok(None);
    };
    if h.len > max {
        return Err(err(format_args!(
            "a frame of {} bytes, over SETTINGS_MAX_FRAME_SIZE {max}",
            h.len
        )));
    }
    let total = HEAD + h.len as usize;
    let Some(p) = b.get(HEAD..total) else {
        return Ok(None);
    };
    Ok(Some((frame_of(&h, p)?, total)))
}

impl Head {
    /// Ok for a frame on a stream; a `NAME on stream 0` error on the connection's.
    #[inline]
    fn on_stream(&self, name: &str) -> Result<(), String> {
        if self.stream == 0 {
            Err(err(format_args!("{name} on stream 0")))
        } else {
            Ok(())
        }
    }

    /// Ok for a frame on the connection (stream 0); a `NAME on stream N` error else.
    #[inline]
    fn on_conn(&self, name: &str) -> Result<(), String> {
        if self.stream != 0 {
            Err(err(format_args!("{name} on stream {}", self.stream)))
        } else {
            Ok(())
        }
    }

    /// The range of payload `p` that is not padding (the pad length byte first, the
    /// padding last): all of it unless the frame is PADDED. Errors: no pad length byte,
    /// padding longer than the frame.
    #[inline]
    fn unpad(&self, p: &[u8]) -> Result<(usize, usize), String> {
        if self.flags & flag::PADDED == 0 {
            return Ok((0, p.len()));
        }
        let pad =
            *p.first()
                .ok_or_else(|| err("a padded frame without its pad length"))? as usize;
        if pad + 1 > p.len() {
            return Err(err("padding longer than the frame"));
        }
        Ok((1, p.len() - pad))
    }
}

/// The frame of header `h` and whole payload `p`. Errors: as [`parse`]'s but the length
/// over the maximum.
#[inline]
fn frame_of<'a>(h: &Head, p: &'a [u8]) -> Result<Frame<'a>, String> {
    Ok(match h.kind {
        kind::DATA => {
            h.on_stream("DATA")?;
            let (s, e) = h.unpad(p)?;
            Frame::Data {
                stream: h.stream,
                end: h.flags & flag::END_STREAM != 0,
                data: &p[s..e],
                flow: h.len,
            }
        }
        kind::HEADERS => {
            h.on_stream("HEADERS")?;
            let (mut s, e) = h.unpad(p)?;
            if h.flags & flag::PRIORITY != 0 {
                s += 5;
                if s > e {
                    return Err(err("HEADERS too short for its priority"));
                }
            }
            Frame::Headers {
                stream: h.stream,
                end_stream: h.flags & flag::END_STREAM != 0,
                end_headers: h.flags & flag::END_HEADERS != 0,
                continuation: false,
                block: &p[s..e],
            }
        }
        kind::CONTINUATION => {
            h.on_stream("CONTINUATION")?;
            Frame::Headers {
                stream: h.stream,
                end_stream: false,
                end_headers: h.flags & flag::END_HEADERS != 0,
                continuation: true,
                block: p,
            }
        }
        kind::RST_STREAM => {
            h.on_stream("RST_STREAM")?;
            if p.len() != 4 {
                return Err(err(format_args!("RST_STREAM of {} bytes", p.len())));
            }
            Frame::Reset {
                stream: h.stream,
                code: be32(p),
            }
        }
        kind::SETTINGS => {
            h.on_conn("SETTINGS")?;
            let ack = h.flags & flag::ACK != 0;
            if !p.len().is_multiple_of(6) || (ack && !p.is_empty()) {
                return Err(err(format_args!("SETTINGS of {} bytes", p.len())));
            }
            Frame::Settings { ack, params: p }
        }
        kind::PING => {
            h.on_conn("PING")?;
            let data: [u8; 8] = p
                .try_into()
                .map_err(|_| err(format_args!("PING of {} bytes", p.len())))?;
            Frame::Ping {
                ack: h.flags & flag::ACK != 0,
                data,
            }
        }
        kind::GOAWAY => {
            h.on_conn("GOAWAY")?;
            if p.len() < 8 {
                return Err(err(format_args!("GOAWAY of {} bytes", p.len())));
            }
            Frame::GoAway {
                last: be32(p) & 0x7fff_ffff,
                code: be32(&p[4..]),
            }
        }
        kind::WINDOW_UPDATE => {
            if p.len() != 4 {
                return Err(err(format_args!("WINDOW_UPDATE of {} bytes", p.len())));
            }
            let increment = be32(p) & 0x7fff_ffff;
            if increment == 0 {
                return Err(err("WINDOW_UPDATE of 0"));
            }
            Frame::WindowUpdate {
                stream: h.stream,
                increment,
            }
        }
        kind::PUSH_PROMISE => return Err(err("PUSH_PROMISE although push is disabled")),
        k => Frame::Other { kind: k },
    })
}

/// The (identifier, value) pairs of a SETTINGS payload ([`Frame::Settings`]).
pub fn settings(params: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    params
        .chunks_exact(6)
        .map(|c| (u16::from_be_bytes([c[0], c[1]]), be32(&c[2..])))
}

/// The name of an error code (RFC 9113 7), for failures' kinds.
pub fn code_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "an unknown error code",
    }
}

/// Appends what a client writes first: the preface, its SETTINGS (push disabled, a
/// stream window of [`RECV_WINDOW`]) and a WINDOW_UPDATE raising the connection's
/// window to [`RECV_WINDOW`].
pub fn client_start(out: &mut Vec<u8>) {
    out.extend_from_slice(PREFACE);
    write_head(out, 12, kind::SETTINGS, 0, 0);
    for (id, v) in [
        (setting::ENABLE_PUSH, 0),
        (setting::INITIAL_WINDOW_SIZE, RECV_WINDOW),
    ] {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
    window_update(out, 0, RECV_WINDOW - DEFAULT_WINDOW as u32);
}

/// Appends a WINDOW_UPDATE of `increment` (1..2^31-1) bytes for `stream` (0: the
/// connection).
pub fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
}

/// Appends a RST_STREAM of `code`.
pub fn rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends a GOAWAY: no stream above `last` will be processed, error `code` (RFC 9113
/// 6.8; a client names 0, it processes no stream of the server's).
pub fn goaway(out: &mut Vec<u8>, last: u32, code: u32) {
    write_head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends the acknowledgement of the peer's SETTINGS.
pub fn settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Appends the acknowledgement of the peer's PING.
pub fn ping_ack(out: &mut Vec<u8>, data: &[u8; 8]) {
    write_head(out, 8, kind::PING, flag::ACK, 0);
    out.extend_from_slice(data);
}

/// Appends a request's header block `block` on `stream` as a HEADERS frame and, when it
/// is over `max_frame` bytes, CONTINUATION frames; END_STREAM when the request has no
/// body (`end_stream`). Returns the bytes appended.
pub fn headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: u32,
) -> usize {
    let before = out.len();
    let mut pieces = block.chunks(max_frame.max(1) as usize).peekable();
    let mut first = true;
    // An empty block is still one HEADERS frame.
    let empty: &[u8] = &[];
    let mut next = pieces.next().or(Some(empty));
    while let Some(p) = next {
        next = pieces.next();
        let mut flags = if next.is_none() { flag::END_HEADERS } else { 0 };
        let kind = if first {
            if end_stream {
                flags |= flag::END_STREAM;
            }
            kind::HEADERS
        } else {
            kind::CONTINUATION
        };
        write_head(out, p.len(), kind, flags, stream);
        out.extend_from_slice(p);
        first = false;
    }
    out.len() - before
}

/// Appends a DATA frame of `data` (at most the peer's max frame size) on `stream`.
pub fn data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    write_head(out, data.len(), kind::DATA, flags, stream);
    out.extend_from_slice(data);
}

/// A header list: (name, value) pairs.
pub type HeaderList = Vec<(Vec<u8>, Vec<u8>)>;

/// A request's header list as HTTP/2 sends it: the pseudo-headers (`:method`,
/// `:scheme`, `:authority`: the user's `Host` header if given, else the URL's,
/// `:path`), then the user's headers with lower-case names (but `Host`), and
/// `content-length` when there is a body or the method usually has one.
pub fn request_headers(
    req: &tpslab_plan::http::HttpRequest,
    body_len: usize,
) -> Result<HeaderList, String> {
    let u = req.check().map_err(|e| e.to_string())?;
    let host = req
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map_or(u.authority.clone(), |(_, v)| v.clone());
    let mut h: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b":method".to_vec(), req.method.as_bytes().to_vec()),
        (
            b":scheme".to_vec(),
            if u.tls { &b"https"[..] } else { &b"http"[..] }.to_vec(),
        ),
        (b":authority".to_vec(), host.into_bytes()),
        (b":path".to_vec(), u.path.into_bytes()),
    ];
    for (n, v) in &req.headers {
        if !n.eq_ignore_ascii_case("host") {
            h.push((n.to_ascii_lowercase().into_bytes(), v.as_bytes().to_vec()));
        }
    }
    if body_len > 0 || ["POST", "PUT", "PATCH"].contains(&req.method.as_str()) {
        h.push((
            b"content-length".to_vec(),
            body_len.to_string().into_bytes(),
        ));
    }
    Ok(h)
}

/// The two header blocks of a connection's requests: the first one's (which adds the
/// headers HPACK indexes to the server's dynamic table) and every later one's (the same
/// headers, referring to those entries; the block is the same for each since the table
/// no longer changes). With `table` under 4096 (the server's SETTINGS_HEADER_TABLE_SIZE)
/// nothing is indexed and the first block begins with a table size update to 0.
pub fn header_blocks(headers: &[(Vec<u8>, Vec<u8>)], table: u32) -> (Vec<u8>, Vec<u8>) {
    let mut enc = httlib_hpack::Encoder::with_dynamic_size(4096);
    // With indexing, as an index where the table has the header already.
    let flags = if table < 4096 { 0 } else { 0x4 | 0x10 };
    let mut block = || {
        let mut b = vec![];
        for (n, v) in headers {
            // Names are lower-case tokens, values checked: the encoder takes them.
            let _ = enc.encode((n.clone(), v.clone(), flags), &mut b);
        }
        b
    };
    let (mut first, rest) = (block(), block());
    if table < 4096 {
        first.insert(0, 0x20);
    }
    (first, rest)
}

pub use super::hpack::HeaderDecoder;

#[cfg(test)]
#[path = "h2_tests.rs"]
mod tests;
