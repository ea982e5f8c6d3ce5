//! `load http --http2`'s byte counts against a minimal h2c server in the test (a thread
//! that counts what it reads and writes): bytes_out is every byte the client wrote, the
//! connection's own frames (preface, SETTINGS, WINDOW_UPDATE, SETTINGS and PING acks)
//! with the requests; bytes_in every byte it read. Apart from tests/suite/load_http2.rs, whose
//! exact counts of requests sent a parallel run would disturb on a busy 2-core host.

use crate::common;

use serde_json::Value;

use common::load_http as load;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// What the server saw: bytes read, bytes written, the frames read (type, flags).
struct Counted {
    read: u64,
    written: u64,
    seen: Vec<(u8, u8)>,
}

/// A minimal h2c server on one connection, in a thread: it sends SETTINGS and a PING
/// first, acknowledges the client's SETTINGS, answers each HEADERS with a HEADERS of
/// `:status 200` (HPACK 0x88) ending the stream, and reads until the client closes.
fn h2_counting_server(listener: std::net::TcpListener) -> std::thread::JoinHandle<Counted> {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        // SETTINGS (none), PING with 8 bytes of data.
        let mut first = vec![0, 0, 0, 4, 0, 0, 0, 0, 0];
        first.extend_from_slice(&[0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        s.write_all(&first).unwrap();
        let (mut read, mut written) = (0u64, first.len() as u64);
        let (mut buf, mut seen) = (Vec::new(), Vec::new());
        let mut preface = false;
        let mut chunk = [0u8; 65536];
        loop {
            let got = match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            read += got as u64;
            buf.extend_from_slice(&chunk[..got]);
            if !preface {
                if buf.len() < 24 {
                    continue;
                }
                assert_eq!(&buf[..24], b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
                buf.drain(..24);
                preface = true;
            }
            let mut out = Vec::new();
            while buf.len() >= 9 {
                let len = (buf[0] as usize) << 16 | (buf[1] as usize) << 8 | buf[2] as usize;
                if buf.len() < 9 + len {
                    break;
                }
                let (kind, flags) = (buf[3], buf[4]);
                let sid = &buf[5..9];
                seen.push((kind, flags));
                match kind {
                    // HEADERS: the reply, END_STREAM | END_HEADERS.
                    1 => {
                        out.extend_from_slice(&[0, 0, 1, 1, 5]);
                        out.extend_from_slice(sid);
                        out.push(0x88);
                    }
                    // SETTINGS: acknowledged.
                    4 if flags & 1 == 0 => out.extend_from_slice(&[0, 0, 0, 4, 1, 0, 0, 0, 0]),
                    _ => {}
                }
                buf.drain(..9 + len);
            }
            if !out.is_empty() {
                if s.write_all(&out).is_err() {
                    break;
                }
                written += out.len() as u64;
            }
        }
        Counted {
            read,
            written,
            seen,
        }
    })
}

#[test]
fn h2c_bytes_out_count_the_connections_own_frames() {
    // Every byte the client wrote, as the server read it: the preface, SETTINGS, the
    // connection's WINDOW_UPDATE, the SETTINGS and PING acks beside the requests.
    // Exact counts need the whole plan sent: a generator a busy host held back past the
    // run's end sends fewer (the plan ends on time); such a run is retried on a new
    // server, up to 3 times, then counted as spoiled.
    let test = "http2_bytes::h2c_bytes_out_count_the_connections_own_frames";
    let Some((
        Counted {
            read,
            written,
            seen,
        },
        r,
    )) = common::retry(test, 3, || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = h2_counting_server(listener);
        let url = format!("http://127.0.0.1:{port}/");
        let args = [
            "--http2",
            "--rate",
            "200",
            "--connections",
            "1",
            "--duration",
            "1s",
        ];
        let (code, _, err, r) = load(&url, &args, "h2c-bytes");
        assert_eq!(code, Some(0), "{err}");
        let counted = server.join().expect("server thread");
        common::plan_sent(&r)?;
        Ok((counted, r))
    })
    else {
        return;
    };
    let res = &r["result"];
    assert_eq!(n(&res["status"]["s2xx"]), 200, "{res}");
    for k in ["errors", "connect_errors"] {
        if let Some(e) = res.get(k).and_then(|e| e.as_object()) {
            assert!(e.values().all(|v| v == 0), "{k}: {res}");
        }
    }
    // SETTINGS ack (4, ACK), PING ack (6, ACK), WINDOW_UPDATE (8) on the connection.
    for f in [(4, 1), (6, 1), (8, 0)] {
        assert!(seen.contains(&f), "frame {f:?} not among {seen:?}");
    }
    assert_eq!(n(&res["bytes_out"]), read, "{res}");
    assert_eq!(n(&res["bytes_in"]), written, "{res}");
}
