//! The HTTP/2 frames' tests: real nginx bytes, bad frames, the requests' encoding, and
//! property tests of the parser.

use super::*;
use proptest::prelude::*;

/// nginx 1.22.1's first bytes on an h2c connection (`listen 127.0.0.1:PORT http2`),
/// captured from a socket that sent the preface, an empty SETTINGS and `GET /`:
/// SETTINGS (MAX_CONCURRENT_STREAMS 128, INITIAL_WINDOW_SIZE 65536, MAX_FRAME_SIZE
/// 16777215), WINDOW_UPDATE of 2147418112 on the connection.
const NGINX_START: &[u8] = b"\x00\x00\x12\x04\x00\x00\x00\x00\x00\
    \x00\x03\x00\x00\x00\x80\x00\x04\x00\x01\x00\x00\x00\x05\x00\xff\xff\xff\
    \x00\x00\x04\x08\x00\x00\x00\x00\x00\x7f\xff\x00\x00";

/// What followed: the SETTINGS acknowledgement, the reply's HEADERS (`:status 200`,
/// server, date, content-type, content-length, last-modified, etag, accept-ranges)
/// and its DATA (`pong`, END_STREAM).
const NGINX_REPLY: &[u8] = b"\
    \x00\x00\x00\x04\x01\x00\x00\x00\x00\x00\x00\x68\x01\x04\x00\x00\x00\x01\x88\x76\
    \x89\xaa\x63\x55\xe5\x80\xae\x21\x2e\x1f\x61\x96\xdc\x34\xfd\x28\x27\x94\xd2\x7e\
    \xea\x08\x02\x71\x40\x39\x70\x20\xb8\x00\x29\x8b\x46\xff\x5f\x87\x49\x7c\xa5\x89\
    \xd3\x4d\x1f\x5c\x01\x34\x6c\x96\xdc\x34\xfd\x28\x27\x94\xd2\x7e\xea\x08\x02\x71\
    \x40\x39\x70\x0f\xdc\x6d\xf5\x31\x68\xdf\x00\x83\x2a\x47\x37\x8a\xfe\x5c\x8c\x03\
    \x74\x0c\xba\xb3\x5f\xcf\x00\x89\x19\x08\x5a\xd2\xb5\x83\xaa\x62\xa3\x84\x8f\xd2\
    \x4a\x8f\x00\x00\x04\x00\x01\x00\x00\x00\x01\x70\x6f\x6e\x67";

#[test]
fn nginx_settings_and_window_update_parse() {
    let (f, n) = parse(NGINX_START, DEFAULT_MAX_FRAME).unwrap().unwrap();
    assert_eq!(n, 27);
    let Frame::Settings { ack: false, params } = f else {
        panic!("{f:?}")
    };
    let s: Vec<_> = settings(params).collect();
    assert_eq!(
        s,
        vec![(3, 128), (4, 65536), (5, 16_777_215)],
        "MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE"
    );
    let (f, m) = parse(&NGINX_START[n..], DEFAULT_MAX_FRAME)
        .unwrap()
        .unwrap();
    assert_eq!(m, 13);
    assert_eq!(
        f,
        Frame::WindowUpdate {
            stream: 0,
            increment: 2_147_418_112
        }
    );
    // Every prefix short of a whole frame asks for more.
    for i in 0..27 {
        assert_eq!(parse(&NGINX_START[..i], DEFAULT_MAX_FRAME).unwrap(), None);
    }
}

#[test]
fn nginx_reply_decodes_to_its_status_and_body() {
    let b = NGINX_REPLY;
    let (f, n) = parse(b, DEFAULT_MAX_FRAME).unwrap().unwrap();
    assert_eq!(
        (f, n),
        (
            Frame::Settings {
                ack: true,
                params: &[]
            },
            9
        )
    );
    let (f, m) = parse(&b[n..], DEFAULT_MAX_FRAME).unwrap().unwrap();
    let Frame::Headers {
        stream: 1,
        end_stream: false,
        end_headers: true,
        continuation: false,
        block,
    } = f
    else {
        panic!("{f:?}")
    };
    assert_eq!(block.len(), 0x68);
    let mut dec = HeaderDecoder::default();
    assert_eq!(dec.status(block).unwrap(), Some(200));
    let (f, k) = parse(&b[n + m..], DEFAULT_MAX_FRAME).unwrap().unwrap();
    assert_eq!(
        f,
        Frame::Data {
            stream: 1,
            end: true,
            data: b"pong",
            flow: 4
        }
    );
    assert_eq!(n + m + k, b.len());
    // A block HPACK cannot decode is a protocol error.
    let mut dec = HeaderDecoder::default();
    assert!(dec.status(b"\xff\xff\xff\xff\xff\xff").is_err());
}

#[test]
fn bad_frames_are_connection_errors() {
    let mut b = vec![];
    write_head(&mut b, 20_000, kind::DATA, 0, 1);
    assert!(parse(&b, DEFAULT_MAX_FRAME).unwrap_err().contains("over"));
    for (k, stream, payload) in [
        (kind::SETTINGS, 1, &b""[..]),
        (kind::SETTINGS, 0, &b"12345"[..]),
        (kind::PING, 0, &b"1234"[..]),
        (kind::DATA, 0, &b"x"[..]),
        (kind::RST_STREAM, 1, &b"123"[..]),
        (kind::WINDOW_UPDATE, 0, &b"\x00\x00\x00\x00"[..]),
        (kind::GOAWAY, 0, &b"1234"[..]),
        (kind::PUSH_PROMISE, 1, &b"\x00\x00\x00\x02"[..]),
    ] {
        let mut b = vec![];
        write_head(&mut b, payload.len(), k, 0, stream);
        b.extend_from_slice(payload);
        let e = parse(&b, DEFAULT_MAX_FRAME).unwrap_err();
        assert!(e.starts_with("http2: "), "{e}");
    }
    // Padding longer than the frame.
    let mut b = vec![];
    write_head(&mut b, 2, kind::DATA, flag::PADDED, 1);
    b.extend_from_slice(&[5, 0]);
    assert!(parse(&b, DEFAULT_MAX_FRAME).is_err());
    // Padded DATA: the data without its padding, flow control with it.
    let mut b = vec![];
    write_head(&mut b, 6, kind::DATA, flag::PADDED, 3);
    b.extend_from_slice(&[2, b'a', b'b', b'c', 0, 0]);
    let (f, _) = parse(&b, DEFAULT_MAX_FRAME).unwrap().unwrap();
    assert_eq!(
        f,
        Frame::Data {
            stream: 3,
            end: false,
            data: b"abc",
            flow: 6
        }
    );
    // GOAWAY's last stream and code; an HTTP/1.1 answer to the preface is not a frame.
    let mut b = vec![];
    write_head(&mut b, 8, kind::GOAWAY, 0, 0);
    b.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 0]);
    assert_eq!(
        parse(&b, DEFAULT_MAX_FRAME).unwrap().unwrap().0,
        Frame::GoAway { last: 7, code: 0 }
    );
    assert!(parse(b"HTTP/1.1 400 Bad Request\r\n", DEFAULT_MAX_FRAME).is_err());
}

#[test]
fn requests_encode_as_headers_and_continuations() {
    let req = tpslab_plan::http::HttpRequest {
        url: "http://127.0.0.1:8080/x?y".into(),
        method: "GET".into(),
        headers: vec![("X-Test".into(), "1".into())],
        tls: Default::default(),
    };
    let h = request_headers(&req, 0).unwrap();
    let (first, rest) = header_blocks(&h, 4096);
    // The later block refers to the entry the first one added: shorter.
    assert!(rest.len() < first.len(), "{first:?} {rest:?}");
    let mut dec = HeaderDecoder::keeping();
    for b in [&first, &rest, &rest] {
        let got = dec.fields(b).unwrap();
        assert_eq!(
            got,
            vec![
                (b":method".to_vec(), b"GET".to_vec()),
                (b":scheme".to_vec(), b"http".to_vec()),
                (b":authority".to_vec(), b"127.0.0.1:8080".to_vec()),
                (b":path".to_vec(), b"/x?y".to_vec()),
                (b"x-test".to_vec(), b"1".to_vec()),
            ]
        );
    }
    // No dynamic table: the same literal block every time, after a size update.
    let (first0, rest0) = header_blocks(&h, 0);
    assert_eq!(&first0[1..], &rest0[..]);
    let mut dec = HeaderDecoder::keeping();
    assert_eq!(dec.fields(&first0).unwrap().len(), 5);
    assert_eq!(dec.fields(&rest0).unwrap().len(), 5);
    // Cut at 4 bytes a frame: HEADERS then CONTINUATIONs, END_HEADERS on the last.
    let mut out = vec![];
    let n = headers(&mut out, 5, &first, true, 4);
    assert_eq!(n, out.len());
    let (mut at, mut block, mut frames) = (0, vec![], 0);
    while at < out.len() {
        let (f, m) = parse(&out[at..], DEFAULT_MAX_FRAME).unwrap().unwrap();
        let Frame::Headers {
            stream: 5,
            end_stream,
            end_headers,
            continuation,
            block: b,
        } = f
        else {
            panic!("{f:?}")
        };
        assert_eq!(continuation, frames > 0);
        assert_eq!(end_stream, frames == 0);
        assert_eq!(end_headers, at + m == out.len());
        block.extend_from_slice(b);
        at += m;
        frames += 1;
    }
    assert_eq!(block, first);
    assert_eq!(frames, first.len().div_ceil(4));
}

#[test]
fn the_client_start_is_a_preface_settings_and_a_window_update() {
    let mut out = vec![];
    client_start(&mut out);
    assert!(out.starts_with(PREFACE));
    let b = &out[PREFACE.len()..];
    let (f, n) = parse(b, DEFAULT_MAX_FRAME).unwrap().unwrap();
    let Frame::Settings { ack: false, params } = f else {
        panic!("{f:?}")
    };
    assert_eq!(
        settings(params).collect::<Vec<_>>(),
        vec![(2, 0), (4, RECV_WINDOW)]
    );
    let (f, m) = parse(&b[n..], DEFAULT_MAX_FRAME).unwrap().unwrap();
    assert_eq!(
        f,
        Frame::WindowUpdate {
            stream: 0,
            increment: RECV_WINDOW - 65_535
        }
    );
    assert_eq!(n + m, b.len());
}

proptest! {
    /// Any bytes: the parser never panics, and a frame it cuts is as long as its
    /// header says and within the limit.
    #[test]
    fn the_parser_takes_any_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(Some((_, n))) = parse(&b, 32) {
            let h = parse_head(&b).unwrap();
            prop_assert_eq!(n, HEAD + h.len as usize);
            prop_assert!(h.len <= 32 && n <= b.len());
        }
    }

    /// Frames written are read back as written, one after another, whatever the
    /// split of the bytes.
    #[test]
    fn written_frames_read_back(
        stream in 1u32..0x7fff_ffff,
        payload in proptest::collection::vec(any::<u8>(), 0..100),
        end in any::<bool>(),
        inc in 1u32..0x7fff_ffff,
        cut in 0usize..200,
    ) {
        let mut b = vec![];
        data(&mut b, stream, &payload, end);
        window_update(&mut b, stream, inc);
        rst_stream(&mut b, stream, CANCEL);
        goaway(&mut b, stream, 0xb);
        let cut = cut.min(b.len());
        if let Some((_, n)) = parse(&b[..cut], DEFAULT_MAX_FRAME).unwrap() {
            prop_assert_eq!(n, HEAD + payload.len());
        }
        let (f, n) = parse(&b, DEFAULT_MAX_FRAME).unwrap().unwrap();
        prop_assert_eq!(f, Frame::Data { stream, end, data: &payload, flow: payload.len() as u32 });
        let (f, m) = parse(&b[n..], DEFAULT_MAX_FRAME).unwrap().unwrap();
        prop_assert_eq!(f, Frame::WindowUpdate { stream, increment: inc });
        let (f, _) = parse(&b[n + m..], DEFAULT_MAX_FRAME).unwrap().unwrap();
        prop_assert_eq!(f, Frame::Reset { stream, code: CANCEL });
        let (f, _) = parse(&b[n + m + HEAD + 4..], DEFAULT_MAX_FRAME).unwrap().unwrap();
        prop_assert_eq!(f, Frame::GoAway { last: stream, code: 0xb });
    }
}
