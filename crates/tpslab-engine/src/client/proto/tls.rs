//! TLS for a stream protocol's connections (`https://`): rustls's sans-I/O client session
//! (`ClientConnection`) driven by the users' loop over the user's own non-blocking socket
//! (the loop, its epoll and its timers stay tpslab's; rustls only turns bytes into
//! records and back).
//!
//! [`TlsClient`] is made once per run from the plan's [`TlsSettings`]: the roots (the
//! system's, or `--cacert`'s only), or no verification at all (`--insecure`), the name
//! verified and sent as SNI (the URL's host; an IP address is verified as one and sends
//! no SNI), the ALPN protocols offered. Each connection then gets its own session
//! ([`TlsClient::session`]); sessions resume through the config's in-memory cache.
//!
//! Errors from rustls are `std::io::Error`s of kind `InvalidData` whose text starts with
//! `tls: ` (e.g. `tls: invalid peer certificate: UnknownIssuer`): counted as TLS
//! failures by kind, apart from the socket's own errors (reset, refused, ...).

use std::io::{self, ErrorKind, Read, Write};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tpslab_plan::http::TlsSettings;

/// A TLS client for one server: its configuration and the name it verifies.
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    /// `--insecure`: nothing verified.
    insecure: bool,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("name", &self.name)
            .field("insecure", &self.insecure)
            .field("alpn", &self.config.alpn_protocols)
            .finish()
    }
}

/// Accepts any certificate for any name (`--insecure`); handshake signatures are still
/// checked (a server must hold the key of the certificate it sent).
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl TlsClient {
    /// The client for `host` (a URL's host: a DNS name, an IPv4 address or `[IPv6]`)
    /// with `settings`, offering the ALPN protocols `alpn` (e.g. `http/1.1`). Errors (one
    /// line): a `--cacert` file without a certificate or with one that does not parse, no
    /// system roots, a host that is no DNS name nor IP address.
    pub fn new(settings: &TlsSettings, host: &str, alpn: &[&[u8]]) -> Result<TlsClient, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("tls: {e}"))?;
        let mut config = if settings.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
                .with_no_client_auth()
        } else {
            builder
                .with_root_certificates(roots(settings)?)
                .with_no_client_auth()
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(bare.to_string())
            .map_err(|e| format!("URL host \"{host}\": {e}"))?;
        Ok(TlsClient {
            config: Arc::new(config),
            name,
            insecure: settings.insecure,
        })
    }

    /// The rustls configuration (roots or `--insecure`, ALPN) and the name verified (sent
    /// as SNI unless an IP address), for a QUIC client (HTTP/3: quinn drives its own TLS
    /// 1.3 session with them).
    pub fn quic_parts(&self) -> (Arc<ClientConfig>, String) {
        (self.config.clone(), self.name.to_str().into_owned())
    }

    /// A new session for a connection (its ClientHello waiting to be written). Errors:
    /// rustls's, `tls: ...`.
    pub fn session(&self) -> Result<ClientConnection, String> {
        ClientConnection::new(self.config.clone(), self.name.clone())
            .map_err(|e| format!("tls: {e}"))
    }
}

/// The roots trusted: `--cacert`'s certificates only, else the system's. Errors: a file
/// without a certificate, one that is not a CA certificate webpki can use, no system root.
fn roots(settings: &TlsSettings) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if let Some(file) = &settings.cacert {
        let bad = |why: String| format!("--cacert {file}: {why}");
        for c in CertificateDer::pem_slice_iter(&settings.ca_pem) {
            let c = c.map_err(|e| bad(format!("not PEM certificates ({e})")))?;
            roots
                .add(c)
                .map_err(|e| bad(format!("a certificate that cannot be a root ({e})")))?;
        }
        if roots.is_empty() {
            return Err(bad(
                "no certificate (-----BEGIN CERTIFICATE-----) in it".into()
            ));
        }
    } else {
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        if roots.is_empty() {
            return Err(
                "https: no system CA certificates found (ca-certificates); give --cacert FILE or --insecure"
                    .into(),
            );
        }
    }
    Ok(roots)
}

/// A non-blocking socket as rustls reads and writes it (writes with MSG_NOSIGNAL: a
/// connection the peer reset fails with EPIPE, no SIGPIPE).
struct Sock<'a>(&'a socket2::Socket);

impl Read for Sock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut s = self.0;
        s.read(buf)
    }
}

impl Write for Sock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send_with_flags(buf, libc::MSG_NOSIGNAL)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The TLS client of `req`'s `https://` URL offering ALPN `alpn`; None for `http://`.
/// Errors: the URL's ([`tpslab_plan::http::HttpRequest::check`]), [`TlsClient::new`]'s.
/// Called when a plan is made (a bad `--cacert` is one line before any load) and again
/// when it runs.
pub fn client_for(
    req: &tpslab_plan::http::HttpRequest,
    alpn: &[&[u8]],
) -> Result<Option<TlsClient>, String> {
    let u = req.check().map_err(|e| e.to_string())?;
    if !u.tls {
        return Ok(None);
    }
    TlsClient::new(&req.tls, &u.host, alpn).map(Some)
}

/// A rustls error as the loop counts it: `tls: TEXT`, kind InvalidData.
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, format!("tls: {e}"))
}

/// Writes the session's pending records to `s`: Ok(true) when all are written, Ok(false)
/// when the socket is full (write again when it turns writable). Errors: the socket's.
pub fn flush(c: &mut ClientConnection, s: &socket2::Socket) -> io::Result<bool> {
    while c.wants_write() {
        match c.write_tls(&mut Sock(s)) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// What the handshake waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Done: the session carries data (its last flight may still be buffered; the first
    /// write flushes it).
    Done,
    /// The socket to turn writable.
    Writable,
    /// The socket to turn readable.
    Readable,
}

/// Drives the handshake as far as the socket lets it. Errors: the socket's; the peer
/// closing (`tls: closed by peer in the handshake`); rustls's (`tls: ...`).
pub fn handshake(c: &mut ClientConnection, s: &socket2::Socket) -> io::Result<Handshake> {
    loop {
        if !flush(c, s)? {
            return Ok(Handshake::Writable);
        }
        if !c.is_handshaking() {
            return Ok(Handshake::Done);
        }
        match c.read_tls(&mut Sock(s)) {
            Ok(0) => {
                return Err(io::Error::new(
                    ErrorKind::InvalidData,
                    "tls: closed by peer in the handshake",
                ))
            }
            Ok(_) => {
                if let Err(e) = c.process_new_packets() {
                    // Its alert, if the socket takes it.
                    let _ = flush(c, s);
                    return Err(tls_error(e));
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Handshake::Readable),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Gives the session what is left of `data` (from `*off`, moved as it is taken) and
/// writes its records: Ok(true) when all of `data` is taken and written, Ok(false) when
/// the socket is full (call again when it turns writable). Errors: the socket's.
pub fn write(
    c: &mut ClientConnection,
    s: &socket2::Socket,
    data: &[u8],
    off: &mut usize,
) -> io::Result<bool> {
    loop {
        if *off < data.len() {
            *off += c.writer().write(&data[*off..])?;
        }
        if !flush(c, s)? {
            return Ok(false);
        }
        if *off >= data.len() {
            return Ok(true);
        }
    }
}

/// Reads plaintext into `buf` as a socket read would: Ok(n > 0) bytes, Ok(0) the peer
/// closed (with close_notify, or without: `closed by peer` as UnexpectedEof), WouldBlock
/// when nothing is waiting. Errors: the socket's; rustls's (`tls: ...`).
pub fn read(c: &mut ClientConnection, s: &socket2::Socket, buf: &mut [u8]) -> io::Result<usize> {
    let mut eof = false;
    loop {
        match c.reader().read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock && eof => return Ok(0),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        match c.read_tls(&mut Sock(s)) {
            Ok(n) => {
                eof = n == 0;
                if let Err(e) = c.process_new_packets() {
                    let _ = flush(c, s);
                    return Err(tls_error(e));
                }
                // A key update's reply, an alert: written if the socket takes it.
                if c.wants_write() {
                    flush(c, s)?;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
