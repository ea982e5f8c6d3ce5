//! [`TlsClient`] and the sans-I/O drive ([`handshake`], [`write`], [`read`]) over a
//! non-blocking loopback socket, against a rustls server in a thread holding a
//! self-signed certificate for `localhost` and 127.0.0.1 made by the openssl CLI:
//! `--cacert` trusts it by name and by address; another name, or another CA, fails the
//! handshake with a `tls: ` error that says why; `--insecure` takes any name.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tpslab_plan::http::TlsSettings;

use super::*;

/// A self-signed certificate made by openssl in `dir`: (certificate PEM, key PEM).
fn self_signed(dir: &Path, name: &str, cn: &str, san: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", &format!("/CN={cn}"), "-addext", san, "-addext"])
        // A server's certificate, not a CA's (webpki refuses a CA as end entity).
        .args(["basicConstraints=critical,CA:FALSE", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl (apt-get install openssl)");
    assert!(out.status.success(), "openssl: {out:?}");
    (cert, key)
}

/// A TLS server on a free loopback port, in a thread: for each of `conns` connections,
/// it answers one line with `pong\n` (a failed handshake just ends that connection).
fn server(cert: &Path, key: &Path, conns: usize) -> (u16, std::thread::JoinHandle<()>) {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let config = Arc::new(config);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        for _ in 0..conns {
            let Ok((s, _)) = l.accept() else { return };
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, s);
            let mut line = Vec::new();
            let mut b = [0u8; 64];
            while !line.contains(&b'\n') {
                match tls.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => line.extend_from_slice(&b[..n]),
                }
            }
            if line == b"ping\n" {
                let _ = tls.write_all(b"pong\n");
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }
        }
    });
    (port, t)
}

/// Connects to 127.0.0.1:`port` as `host` with `settings`, writes `ping\n` and reads the
/// reply to the end, all on a non-blocking socket (retried every millisecond within 10 s).
/// Errors: the client's, the drive's (`tls: ...`).
fn ping(settings: &TlsSettings, host: &str, port: u16) -> Result<Vec<u8>, String> {
    let client = TlsClient::new(settings, host, &[b"http/1.1"])?;
    let mut c = client.session()?;
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .map_err(|e| e.to_string())?;
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    s.connect(&addr.into()).map_err(|e| e.to_string())?;
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    let end = Instant::now() + Duration::from_secs(10);
    let wait = || {
        assert!(Instant::now() < end, "no progress within 10 s");
        std::thread::sleep(Duration::from_millis(1));
    };
    while handshake(&mut c, &s).map_err(|e| e.to_string())? != Handshake::Done {
        wait();
    }
    let mut off = 0;
    while !write(&mut c, &s, b"ping\n", &mut off).map_err(|e| e.to_string())? {
        wait();
    }
    let (mut got, mut b) = (Vec::new(), [0u8; 64]);
    loop {
        match read(&mut c, &s, &mut b) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait(),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn cacert(pem: &Path) -> TlsSettings {
    TlsSettings {
        insecure: false,
        cacert: Some(pem.display().to_string()),
        ca_pem: std::fs::read(pem).unwrap(),
    }
}

#[test]
fn cacert_verifies_the_name_insecure_takes_any_and_a_mismatch_says_why() {
    if !Path::new("/usr/bin/openssl").exists() {
        eprintln!("skipped: no /usr/bin/openssl (apt-get install openssl)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tpslab-tls-unit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = self_signed(
        &dir,
        "cert",
        "localhost",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
    );
    let (other, _) = self_signed(&dir, "other", "other", "subjectAltName=DNS:other");
    let (port, srv) = server(&cert, &key, 5);

    // Trusted by --cacert, by its DNS name (sent as SNI) and by its IP address.
    assert_eq!(ping(&cacert(&cert), "localhost", port).unwrap(), b"pong\n");
    assert_eq!(ping(&cacert(&cert), "127.0.0.1", port).unwrap(), b"pong\n");

    // A name the certificate does not hold: the handshake fails, saying which name.
    let e = ping(&cacert(&cert), "example.org", port).unwrap_err();
    assert!(
        e.starts_with("tls: invalid peer certificate: ")
            && e.contains("not valid for name \"example.org\"")
            && e.contains("localhost"),
        "{e}"
    );

    // Signed by no CA trusted: refused as such.
    let e = ping(&cacert(&other), "localhost", port).unwrap_err();
    assert!(
        e.starts_with("tls: invalid peer certificate: ") && e.contains("UnknownIssuer"),
        "{e}"
    );

    // --insecure: any certificate, any name.
    let insecure = TlsSettings {
        insecure: true,
        ..TlsSettings::default()
    };
    assert_eq!(ping(&insecure, "example.org", port).unwrap(), b"pong\n");
    srv.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    // A --cacert without a certificate is refused before any connect, naming the file.
    let bad = TlsSettings {
        insecure: false,
        cacert: Some("bad.pem".into()),
        ca_pem: b"hello\n".to_vec(),
    };
    let e = TlsClient::new(&bad, "localhost", &[]).unwrap_err();
    assert!(e.starts_with("--cacert bad.pem: no certificate"), "{e}");
}
