//! Before a run: whether something at the URL speaks HTTP/3 (one handshake, not
//! counted), and the client's bind address.

use std::net::SocketAddr;
use std::time::Duration;

use crate::client::proto::h3;

/// The unspecified address of `target`'s family, port 0: a client's bind.
pub(super) fn any_port(target: SocketAddr) -> SocketAddr {
    match target {
        SocketAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

/// Whether something at `target` speaks HTTP/3: one QUIC handshake (ALPN h3) within
/// `timeout`, closed at once, before a run's connections are made (not counted). Errors
/// (one line, `URL: no HTTP/3 connection: ...`): no reply, no QUIC version in common, a TLS
/// alert or QUIC error from the server ([`h3::handshake_failure`]); a failure that does
/// not say so (a certificate this client refuses) is left to the run to count.
pub(crate) fn preflight(
    client: &quinn::ClientConfig,
    target: SocketAddr,
    server_name: &str,
    url: &str,
    timeout: Duration,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let line = rt.block_on(async {
        let ep = quinn::Endpoint::client(any_port(target))
            .map_err(|e| format!("a UDP socket for QUIC: {e}"))?;
        let connecting = ep
            .connect_with(client.clone(), target, server_name)
            .map_err(|e| format!("--http3: {e}"))?;
        let line = match tokio::time::timeout(timeout, connecting).await {
            Err(_) => Some(h3::no_reply(target)),
            Ok(Err(e)) => h3::handshake_failure(target, &e).1,
            Ok(Ok(c)) => {
                c.close(0u32.into(), b"");
                None
            }
        };
        // Its CONNECTION_CLOSE sent (or not: nothing waits on it).
        let _ = tokio::time::timeout(Duration::from_millis(100), ep.wait_idle()).await;
        Ok::<_, String>(line)
    })?;
    match line {
        Some(l) => Err(format!("{url}: no HTTP/3 connection: {l}")),
        None => Ok(()),
    }
}
