use super::*;
use bytes::Bytes;
use quinn::{ConnectionClose, TransportErrorCode};
use tpslab_plan::http::TlsSettings;

fn addr() -> SocketAddr {
    "127.0.0.1:4433".parse().unwrap()
}

fn closed(code: TransportErrorCode) -> ConnectionError {
    ConnectionError::ConnectionClosed(ConnectionClose {
        error_code: code,
        frame_type: None,
        reason: Bytes::new(),
    })
}

/// RFC 8446's names, as rustls numbers them; an unknown one by its number.
#[test]
fn alerts_are_named_as_the_rfc_spells_them() {
    assert_eq!(alert_name(120), "no_application_protocol");
    assert_eq!(alert_name(40), "handshake_failure");
    assert_eq!(alert_name(48), "unknown_ca");
    assert_eq!(alert_name(2), "alert 2");
}

/// A server's TLS alert ends the run naming it (ALPN's with its hint); no reply and no
/// common version too; a certificate this client refused, a reset or an application's
/// close are counted, not fatal.
#[test]
fn a_handshake_failure_is_named_and_the_fatal_ones_end_the_run() {
    let (kind, line) = handshake_failure(addr(), &closed(TransportErrorCode::crypto(120)));
    assert_eq!(kind, "tls: alert no_application_protocol from the server");
    assert_eq!(
        line.unwrap(),
        "the QUIC handshake with 127.0.0.1:4433 failed: the server sent TLS alert no_application_protocol (120) (it does not offer ALPN h3)"
    );
    let (kind, line) = handshake_failure(addr(), &ConnectionError::TimedOut);
    assert_eq!(kind, "timeout");
    assert!(line
        .unwrap()
        .contains("got no reply (nothing answers QUIC on UDP port 4433"));
    let (kind, line) = handshake_failure(addr(), &ConnectionError::VersionMismatch);
    assert!(kind.starts_with("http3: "), "{kind}");
    assert!(line.unwrap().contains("version negotiation"));
    let (kind, line) = handshake_failure(addr(), &closed(TransportErrorCode::PROTOCOL_VIOLATION));
    assert!(
        kind.starts_with("http3: QUIC error from the server"),
        "{kind}"
    );
    assert!(line.unwrap().contains("closed it with QUIC error"));
    assert_eq!(
        handshake_failure(addr(), &ConnectionError::Reset),
        ("connection reset".into(), None)
    );
}

/// The kinds `load http` counts by (its `error_slot`): timeouts, resets, closes.
#[test]
fn a_quic_end_counts_by_its_kind() {
    assert_eq!(quic_kind("timed out"), "timeout");
    assert_eq!(quic_kind("reset by peer"), "connection reset");
    assert_eq!(quic_kind("closed by peer: 0x100"), "closed by peer");
    assert_eq!(quic_kind("CIDs exhausted"), "http3: CIDs exhausted");
}

/// The URL's authority and path go as pseudo-headers, a Host header is left out, the
/// others kept; a method `http` refuses is one line.
#[test]
fn the_request_carries_the_url_and_headers_without_host() {
    let mut r = HttpRequest {
        url: "https://localhost:8443/a?b=1".into(),
        method: "POST".into(),
        headers: vec![
            ("Host".into(), "other".into()),
            ("x-test".into(), "1".into()),
        ],
        tls: TlsSettings::default(),
    };
    let q = request(&r).unwrap();
    assert_eq!(q.method(), "POST");
    assert_eq!(q.uri().authority().unwrap().as_str(), "localhost:8443");
    assert_eq!(q.uri().path_and_query().unwrap().as_str(), "/a?b=1");
    assert!(q.headers().get("host").is_none());
    assert_eq!(q.headers()["x-test"], "1");
    r.method = "BAD METHOD".into();
    assert!(request(&r)
        .unwrap_err()
        .starts_with("--http3: the request: "));
}

/// The limits are those said in docs/security.md.
#[test]
fn the_transport_bounds_what_a_server_can_make_the_client_hold() {
    let t = format!("{:?}", transport());
    for want in [
        "max_concurrent_bidi_streams: 0",
        "max_concurrent_uni_streams: 8",
        "stream_receive_window: 1048576",
        "receive_window: 8388608",
        "datagram_receive_buffer_size: None",
    ] {
        assert!(t.contains(want), "{want} not in {t}");
    }
}
