//! HTTP/3 over QUIC (`load http --http3`, RFC 9114 over RFC 9000): what the loop in
//! `openloop/h3loop` needs apart from its I/O, each tested alone: the ALPN, the QUIC
//! transport's limits against a server that misbehaves ([`transport`]), the request as
//! `http::Request` ([`request`]), and what a failed handshake or stream is called
//! ([`handshake_failure`], [`stream_failure`]): the kinds `load http` counts failures by
//! and the one line a run ends with when nothing at the URL speaks HTTP/3.
//!
//! QUIC is quinn's, HTTP/3 framing and QPACK the h3 crate's; TLS 1.3 is rustls's, with
//! the roots, `--cacert` and `--insecure` of [`super::tls::TlsClient`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quinn::{ConnectionError, TransportConfig, VarInt};
use tpslab_plan::http::HttpRequest;

/// The ALPN HTTP/3 is offered under (RFC 9114 3.1).
pub const ALPN: &[&[u8]] = &[b"h3"];

/// A stream's receive window: reply bytes the server may send on one request's stream
/// ahead of the client's reads, bytes.
pub const STREAM_WINDOW: u32 = 1 << 20;

/// A connection's receive window, all its streams together, bytes: what one connection
/// can make the client buffer unread at most.
pub const CONN_WINDOW: u32 = 8 << 20;

/// Unidirectional streams the server may have open at once: HTTP/3's control stream,
/// QPACK's encoder and decoder streams, and a few unknown (grease) ones; push streams are
/// never allowed (no MAX_PUSH_ID is sent).
pub const UNI_STREAMS: u32 = 8;

/// A reply's header section at most, bytes (SETTINGS_MAX_FIELD_SECTION_SIZE; HTTP/2's
/// header block bound).
pub const FIELD_SECTION: u64 = 65_536;

/// A connection with nothing received for this long is closed (QUIC's idle timeout; the
/// keep-alive below holds a connection between sparse requests).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A PING after this long without sending: a connection idle between two intended sends
/// stays open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The QUIC transport's limits: the server may open no bidirectional stream and at most
/// [`UNI_STREAMS`] unidirectional ones; [`STREAM_WINDOW`] per stream and [`CONN_WINDOW`]
/// per connection of unread data; no DATAGRAM frames; [`IDLE_TIMEOUT`], [`KEEP_ALIVE`].
pub fn transport() -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(0))
        .max_concurrent_uni_streams(VarInt::from_u32(UNI_STREAMS))
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONN_WINDOW))
        .datagram_receive_buffer_size(None)
        .keep_alive_interval(Some(KEEP_ALIVE));
    // 30 s fits QUIC's idle timeout (at most 2^62 ms): cannot fail.
    if let Ok(idle) = quinn::IdleTimeout::try_from(IDLE_TIMEOUT) {
        t.max_idle_timeout(Some(idle));
    }
    Arc::new(t)
}

/// The request as h3 sends it: method, `https://` URL (its authority and path become
/// `:authority` and `:path`), the plan's headers (`Host` left out: it is `:authority`).
/// Errors: a URL, method or header `http` refuses (one line).
pub fn request(req: &HttpRequest) -> Result<http::Request<()>, String> {
    let mut b = http::Request::builder()
        .method(req.method.as_str())
        .uri(req.url.as_str());
    for (n, v) in &req.headers {
        if n.eq_ignore_ascii_case("host") {
            continue;
        }
        b = b.header(n.as_str(), v.as_str());
    }
    b.body(()).map_err(|e| format!("--http3: the request: {e}"))
}

/// A TLS alert's name as RFC 8446 6 spells it (`no_application_protocol`), from rustls's
/// `AlertDescription` (`NoApplicationProtocol`); unknown ones as `alert N`.
pub fn alert_name(code: u8) -> String {
    let d = format!("{:?}", rustls::AlertDescription::from(code));
    if d.contains('(') {
        return format!("alert {code}");
    }
    let mut s = String::new();
    let mut lower = false;
    for ch in d.chars() {
        // A word starts at an upper-case letter after a lower-case one (`UnknownCA`).
        if ch.is_ascii_uppercase() && lower {
            s.push('_');
        }
        lower = ch.is_ascii_lowercase();
        s.push(ch.to_ascii_lowercase());
    }
    s
}

/// A QUIC transport error code's TLS alert, if it is one (0x100 + alert, RFC 9001 4.8).
fn crypto_alert(code: quinn::TransportErrorCode) -> Option<u8> {
    let c = u64::from(code);
    (0x100..0x200).contains(&c).then_some((c & 0xff) as u8)
}

/// A failed QUIC handshake: the kind it counts as among `load http`'s connect failures
/// (`timeout`, `tls: ...`, `connection reset`, `closed by peer`, `http3: ...`) and,
/// when it says nothing at the URL speaks HTTP/3 (no reply, no common QUIC version, a
/// TLS alert or a QUIC error from the server), the end of the one line the run ends with
/// (what the handshake with `addr` did). A certificate this client refuses is counted,
/// not fatal, as `load http` counts it over TCP (the server does speak HTTP/3).
pub fn handshake_failure(addr: SocketAddr, e: &ConnectionError) -> (String, Option<String>) {
    match e {
        ConnectionError::TimedOut => ("timeout".into(), Some(no_reply(addr))),
        ConnectionError::VersionMismatch => (
            "http3: QUIC version negotiation failed".into(),
            Some(format!(
                "the QUIC handshake with {addr} failed at version negotiation: the server offers no QUIC version this client speaks (1)"
            )),
        ),
        ConnectionError::ConnectionClosed(c) => match crypto_alert(c.error_code) {
            Some(a) => {
                let name = alert_name(a);
                let hint = if a == 120 {
                    " (it does not offer ALPN h3)"
                } else {
                    ""
                };
                (
                    format!("tls: alert {name} from the server"),
                    Some(format!(
                        "the QUIC handshake with {addr} failed: the server sent TLS alert {name} ({a}){hint}"
                    )),
                )
            }
            None => (
                format!("http3: QUIC error from the server: {}", c.error_code),
                Some(format!(
                    "the QUIC handshake with {addr} failed: the server closed it with QUIC error {c}"
                )),
            ),
        },
        ConnectionError::TransportError(t) => match crypto_alert(t.code) {
            // This client refused the server's TLS: rustls's reason.
            Some(_) => (format!("tls: {}", t.reason), None),
            None => (format!("http3: {e}"), None),
        },
        ConnectionError::ApplicationClosed(_) => ("closed by peer".into(), None),
        ConnectionError::Reset => ("connection reset".into(), None),
        ConnectionError::LocallyClosed | ConnectionError::CidsExhausted => {
            (format!("http3: {e}"), None)
        }
    }
}

/// The line's end for a handshake that got no reply within its time.
pub fn no_reply(addr: SocketAddr) -> String {
    format!(
        "the QUIC handshake with {addr} got no reply (nothing answers QUIC on UDP port {}, or a firewall drops it)",
        addr.port()
    )
}

/// The kind a request's failure counts as, from h3's error (`stream reset` for the
/// server's RESET_STREAM or STOP_SENDING, `timeout`, `closed by peer`, `connection
/// reset`, else `http3: ...`, a protocol error).
pub fn stream_failure(e: &h3::error::StreamError) -> String {
    use h3::error::{ConnectionError as H3Conn, StreamError};
    use h3::quic::ConnectionErrorIncoming as In;
    match e {
        StreamError::RemoteTerminate { code, .. } => format!("stream reset ({code})"),
        StreamError::ConnectionError { 0: c, .. } => match c {
            H3Conn::Timeout { .. } | H3Conn::Remote { 0: In::Timeout, .. } => "timeout".into(),
            H3Conn::Remote {
                0: In::ApplicationClose { .. },
                ..
            } => "closed by peer".into(),
            H3Conn::Remote {
                0: In::Undefined(u),
                ..
            } => quic_kind(&u.to_string()),
            _ => format!("http3: {c}"),
        },
        StreamError::RemoteClosing { .. } => "closed by peer".into(),
        _ => format!("http3: {e}"),
    }
}

/// The kind of a QUIC connection's end from its text (quinn's `ConnectionError`'s
/// Display).
fn quic_kind(text: &str) -> String {
    match text {
        "timed out" => "timeout".into(),
        "reset by peer" => "connection reset".into(),
        t if t.starts_with("closed by peer") || t.starts_with("aborted by peer") => {
            "closed by peer".into()
        }
        t => format!("http3: {t}"),
    }
}

#[cfg(test)]
#[path = "h3_tests.rs"]
mod tests;
