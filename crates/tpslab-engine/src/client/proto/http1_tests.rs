//! The HTTP/1.1 client's decoding, sans I/O: replies in any reads, chunked bodies and
//! trailers, interim replies, error statuses, malformed and unsolicited bytes.

use super::*;
use std::time::Duration;
use tpslab_plan::proto::Proto;
use tpslab_plan::ramp::RampPlan;

fn proto(head: bool) -> Http1 {
    Http1::new(
        "127.0.0.1:9".parse().unwrap(),
        b"GET / HTTP/1.1\r\nHost: h\r\n\r\n".to_vec(),
        head,
    )
}

/// Each reply decoded: its bytes and what it says.
type Decodes = Vec<(Vec<u8>, Reply)>;

/// Decodes `answers` as the users' loop does, one request in flight at a time: each
/// answer is what the server sends to one request (interim replies, then its reply),
/// read in pieces of `chunk` bytes, 1xx skipped, the reply consumed. Gives the replies
/// (their bytes and what they say); Err: the first failure, an answer that held no
/// whole reply, or bytes of an answer left unread after its reply (the loop reads
/// them with no request in flight).
fn replies(p: &Http1, answers: &[&[u8]], chunk: usize) -> Result<Decodes, String> {
    let mut u = p.user(0);
    let mut out = vec![];
    for answer in answers {
        p.encode(&mut u);
        let mut have = Vec::new();
        let (mut got, mut fed) = (None, 0);
        'read: for c in answer.chunks(chunk) {
            have.extend_from_slice(c);
            fed += c.len();
            loop {
                match p.decode(&mut u, &have) {
                    Decoded::Reply(r) => {
                        got = Some((have.drain(..r.len).collect::<Vec<u8>>(), r));
                        break 'read;
                    }
                    Decoded::Stale(n) => {
                        assert!(n > 0);
                        have.drain(..n);
                    }
                    Decoded::NeedMore => break,
                    Decoded::Invalid(e) => return Err(e),
                }
            }
        }
        let (bytes, r) = got.ok_or("no whole reply")?;
        // A reply is whole at the read that ends it: nothing of it is left over.
        assert!(have.is_empty(), "left over: {have:?}");
        if fed < answer.len() {
            return Err(format!(
                "{} bytes read with no request in flight",
                answer.len() - fed
            ));
        }
        out.push((bytes, r));
    }
    Ok(out)
}

/// A reply from nginx 1.26 (Debian), as read off the socket.
const NGINX_200: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.26.3\r\nDate: Fri, 27 Nov 2026 14:30:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 12\r\nLast-Modified: Fri, 27 Nov 2026 14:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"6747a3a0-c\"\r\nAccept-Ranges: bytes\r\n\r\nhello world\n";

const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";

/// Chunked with trailers.
const TRAILERS: &[u8] = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-B: 2\r\n\r\n";

#[test]
fn content_length_replies_in_any_reads() {
    let p = proto(false);
    for chunk in [1, 2, 7, 100, NGINX_200.len()] {
        let got = replies(&p, &[NGINX_200, NGINX_200], chunk).unwrap();
        assert_eq!(got.len(), 2, "reads of {chunk}");
        assert_eq!(got[0].0, NGINX_200);
        assert_eq!(
            got[0].1,
            Reply {
                status: 200,
                ..Reply::ok(NGINX_200.len())
            }
        );
    }
}

#[test]
fn chunked_replies_split_anywhere() {
    let p = proto(false);
    for chunk in 1..=TRAILERS.len().max(CHUNKED.len()) {
        let got = replies(&p, &[CHUNKED, TRAILERS], chunk).unwrap();
        assert_eq!(got.len(), 2, "reads of {chunk}");
        assert_eq!(got[0].0, CHUNKED);
        assert_eq!(got[1].0, TRAILERS.to_vec());
        assert_eq!(got[1].1.status, 201);
    }
}

#[test]
fn bytes_after_a_whole_reply_are_a_response_no_request_asked_for() {
    let p = proto(false);
    // A second response to one request, the start of one, a byte: whatever the reads.
    let second = [NGINX_200, NGINX_200].concat();
    let started = [CHUNKED, b"HTTP/1.1 200 OK\r\nContent-Le"].concat();
    let one = [TRAILERS, b"\n"].concat();
    // A 100 Continue, its reply, then a stray response.
    let interim = [b"HTTP/1.1 100 Continue\r\n\r\n", NGINX_200, NGINX_200].concat();
    for s in [&second, &started, &one, &interim] {
        assert_eq!(
            replies(&p, &[s], s.len()),
            Err(UNSOLICITED.to_string()),
            "{:?}",
            String::from_utf8_lossy(s)
        );
        // Read byte by byte, the reply is whole before the stray bytes come: the
        // users' loop then reads those with no request in flight.
        let e = replies(&p, &[s], 1).unwrap_err();
        assert!(e.ends_with("bytes read with no request in flight"), "{e}");
    }
    // The same bytes alone are a reply.
    assert_eq!(replies(&p, &[NGINX_200], NGINX_200.len()).unwrap().len(), 1);
    // A HEAD reply's Content-Length promises no body: a body sent anyway is stray.
    let head = [&NGINX_200[..NGINX_200.len() - 12], b"hello world\n"].concat();
    assert_eq!(
        replies(&proto(true), &[&head], head.len()),
        Err(UNSOLICITED.to_string())
    );
}

#[test]
fn trailers_are_scanned_once_and_capped() {
    let p = proto(false);
    let start = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
    // Trailer lines read one by one: each read resumes at the last line's end.
    let mut u = p.user(0);
    p.encode(&mut u);
    let mut have = start.to_vec();
    assert_eq!(p.decode(&mut u, &have), Decoded::NeedMore);
    for k in 0..100 {
        have.extend_from_slice(b"X-Trailer: 1\r\n");
        assert_eq!(p.decode(&mut u, &have), Decoded::NeedMore, "line {k}");
        let Some((_, Body::Trailers(s, t), ..)) = u.cur else {
            panic!("{:?}", u.cur)
        };
        assert_eq!(
            (s, t),
            (start.len(), have.len()),
            "resumes at the next line"
        );
    }
    have.extend_from_slice(b"\r\n");
    assert_eq!(
        p.decode(&mut u, &have),
        Decoded::Reply(Reply {
            status: 200,
            ..Reply::ok(have.len())
        })
    );
    // A server streaming trailer lines forever: invalid past 64 KiB, whatever the reads.
    let mut endless = start.to_vec();
    while endless.len() < start.len() + MAX_HEAD_BYTES + 100 {
        endless.extend_from_slice(b"X-Pad: aaaaaaaaaa\r\n");
    }
    for chunk in [1000, 4096, endless.len()] {
        let e = replies(&p, &[&endless], chunk).unwrap_err();
        assert_eq!(e, "http: trailers over 65536 bytes", "reads of {chunk}");
    }
    // A single trailer line that never ends: the same.
    let mut long = start.to_vec();
    long.resize(start.len() + MAX_HEAD_BYTES + 10, b'a');
    let e = replies(&p, &[&long], 4096).unwrap_err();
    assert_eq!(e, "http: trailers over 65536 bytes");
}

#[test]
fn no_body_for_head_204_304_and_interim_replies_skipped() {
    // HEAD: the Content-Length is the resource's, no body follows.
    let head = &NGINX_200[..NGINX_200.len() - 12];
    let got = replies(&proto(true), &[head, head], 5).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].0, head);
    let p = proto(false);
    let (r204, r304, r100, r200): (&[u8], &[u8], &[u8], &[u8]) = (
        b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nContent-Length: 99\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    );
    let continued = [r100, r200].concat();
    for chunk in [1, 3, continued.len()] {
        let got = replies(&p, &[r204, r304, &continued], chunk).unwrap();
        let bytes: Vec<&[u8]> = got.iter().map(|(b, _)| &b[..]).collect();
        assert_eq!(bytes, vec![r204, r304, r200], "reads of {chunk}");
        assert!(got.iter().all(|(_, r)| r.failed.is_none() && !r.close));
    }
}

#[test]
fn error_statuses_fail_by_class_and_close_is_kept() {
    let p = proto(false);
    let answers: [&[u8]; 5] = [
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbus",
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\nConnection: Keep-Alive, Close\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
    ];
    let got = replies(&p, &answers, 11).unwrap();
    let said: Vec<(Option<&str>, bool, u16)> = got
        .iter()
        .map(|(_, r)| (r.failed, r.close, r.status))
        .collect();
    assert_eq!(
        said,
        vec![
            (Some("http 5xx"), true, 503),
            (Some("http 4xx"), false, 404),
            (None, true, 302),
            (None, true, 200),
            (None, false, 200)
        ]
    );
}

#[test]
fn malformed_replies_are_invalid() {
    let p = proto(false);
    let e = |s: &[u8]| match p.decode(&mut HttpUser::default(), s) {
        Decoded::Invalid(e) => e,
        d => panic!("{:?}: {d:?}", String::from_utf8_lossy(s)),
    };
    assert_eq!(e(b"SSH-2.0-OpenSSH_9.2\r\n"), "http: invalid HTTP version");
    assert!(e(b"HTTP/1.1 2x0 OK\r\n\r\n").starts_with("http: "));
    assert_eq!(
        e(b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"),
        "http: a bad Content-Length"
    );
    assert_eq!(
        e(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        "http: a bad Content-Length"
    );
    assert!(e(b"HTTP/1.1 200 OK\r\n\r\n").contains("ends at close"));
    assert!(e(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n").contains("ends at close"));
    assert!(e(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").contains("101"));
    assert_eq!(
        e(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
        "http: a bad chunk size"
    );
    assert_eq!(
        e(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n"),
        "http: a chunk not ended by CRLF"
    );
    // A partial head is not an error.
    assert_eq!(
        p.decode(&mut HttpUser::default(), b"HTTP/1.1 200 O"),
        Decoded::NeedMore
    );
    assert_eq!(p.decode(&mut HttpUser::default(), b""), Decoded::NeedMore);
}

#[test]
fn a_server_that_never_ends_its_interim_replies_or_its_head_is_invalid() {
    let p = proto(false);
    let cont = b"HTTP/1.1 100 Continue\r\n\r\n";
    // 16 interim replies, then the answer: taken.
    let mut ok = cont.repeat(MAX_INTERIM as usize);
    ok.extend_from_slice(NGINX_200);
    assert_eq!(replies(&p, &[&ok], ok.len()).unwrap().len(), 1);
    // Each request has its own count: the same again on the next request.
    assert_eq!(replies(&p, &[&ok, &ok], 7).unwrap().len(), 2);
    // One more: a server flooding 1xx would keep its user's loop reading forever.
    let flood = cont.repeat(MAX_INTERIM as usize + 1);
    let e = replies(&p, &[&flood], flood.len()).unwrap_err();
    assert_eq!(e, "http: more than 16 interim (1xx) replies to one request");
    // A head that never ends.
    let mut endless = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
    endless.resize(MAX_HEAD_BYTES + 2, b'a');
    let e = replies(&p, &[&endless], 4096).unwrap_err();
    assert_eq!(e, "http: a reply head over 65536 bytes");
}

#[test]
fn a_closed_connection_forgets_the_reply_being_read() {
    let p = proto(false);
    let mut u = p.user(3);
    p.encode(&mut u);
    assert_eq!(
        p.decode(&mut u, &NGINX_200[..NGINX_200.len() - 3]),
        Decoded::NeedMore
    );
    assert!(u.cur.is_some());
    p.closed(&mut u);
    assert_eq!(u, HttpUser::default());
    assert_eq!(p.request(&u), b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
}

#[test]
fn the_plans_request_is_built_once() {
    let plan = RampPlan {
        proto: Proto::Http(tpslab_plan::http::HttpRequest {
            url: "http://127.0.0.1:8080/x".into(),
            method: "HEAD".into(),
            headers: vec![("Accept".into(), "*/*".into())],
            tls: Default::default(),
        }),
        target: "127.0.0.1:8080".parse().unwrap(),
        steps: vec![1],
        step: Duration::from_secs(1),
        warmup: Duration::ZERO,
        think: Duration::ZERO,
        timeout: Duration::from_secs(1),
        request: vec![],
        framing: tpslab_plan::framing::Framing::Length,
        seq_field: None,
        knee_gain: 0.2,
        builtin_server: None,
        server_pid: None,
        sample_interval: Duration::from_millis(10),
        load_threads: 0,
        connections: tpslab_plan::ramp::UserConnections::PerUser,
    };
    plan.validate().unwrap();
    let p = Http1::for_plan(&plan.wire());
    assert!(p.head);
    assert_eq!(
        p.request(&p.user(0)),
        format!(
            "HEAD /x HTTP/1.1\r\nHost: {}\r\nAccept: */*\r\n\r\n",
            plan.target
        )
        .as_bytes()
    );
}
