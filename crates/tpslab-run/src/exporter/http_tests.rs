use super::*;
use proptest::prelude::*;

fn req(route: Route, head_only: bool) -> Option<Request> {
    Some(Request {
        route,
        head_only,
        format: Exposition::Prometheus,
    })
}

#[test]
fn classifies_paths_and_methods() {
    let get = |p: &str| classify(format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    assert_eq!(get("/metrics"), req(Route::Metrics, false));
    assert_eq!(get("/metrics?name[]=up"), req(Route::Metrics, false));
    assert_eq!(get("/"), req(Route::NotFound, false));
    assert_eq!(get("/metricsx"), req(Route::NotFound, false));
    assert_eq!(get("/metrics/"), req(Route::NotFound, false));
    assert_eq!(
        classify(b"HEAD /metrics HTTP/1.0\r\n\r\n"),
        req(Route::Metrics, true)
    );
    assert_eq!(
        classify(b"POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"),
        req(Route::MethodNotAllowed, false)
    );
    assert_eq!(
        classify(b"DELETE / HTTP/1.1\r\n\r\n"),
        req(Route::NotFound, false)
    );
    // Bare LF line ends are HTTP too; a pipelined second request is ignored.
    assert_eq!(
        classify(b"GET /metrics HTTP/1.1\nHost: x\n\nGET / HTTP/1.1\r\n\r\n"),
        req(Route::Metrics, false)
    );
    assert_eq!(
        classify(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
        req(Route::BadRequest, false)
    );
    assert_eq!(classify(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"), None);
    assert_eq!(classify(b""), None);
}

#[test]
fn a_head_over_the_limit_is_too_large_and_one_within_is_not() {
    let line = |n: usize| {
        let mut h = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        h.resize(h.len() + n, b'a');
        h
    };
    // An unfinished line of MAX_HEAD bytes: 431 without waiting for more.
    let mut partial = line(0);
    partial.resize(MAX_HEAD, b'a');
    assert_eq!(classify(&partial), req(Route::TooLarge, false));
    assert_eq!(classify(&partial[..MAX_HEAD - 1]), None);
    // A whole head of exactly MAX_HEAD bytes is answered; one byte more is not.
    let fixed = line(0).len() + 4;
    let mut exact = line(MAX_HEAD - fixed);
    exact.extend_from_slice(b"\r\n\r\n");
    assert_eq!(exact.len(), MAX_HEAD);
    assert_eq!(classify(&exact), req(Route::Metrics, false));
    let mut over = line(MAX_HEAD - fixed + 1);
    over.extend_from_slice(b"\r\n\r\n");
    assert_eq!(classify(&over), req(Route::TooLarge, false));
    // More headers than MAX_HEADERS, each small: 431 as well.
    let mut many = b"GET /metrics HTTP/1.1\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert!(many.len() < MAX_HEAD);
    assert_eq!(classify(&many), req(Route::TooLarge, false));
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

#[test]
fn answers_carry_length_type_and_close() {
    let om = "# TYPE up gauge\nup 1\n# EOF\n";
    let a = text(answer(
        Request {
            route: Route::Metrics,
            head_only: false,
            format: Exposition::OpenMetrics,
        },
        |f| {
            assert_eq!(f, Exposition::OpenMetrics);
            om.into()
        },
    ));
    assert!(a.starts_with("HTTP/1.1 200 OK\r\n"), "{a}");
    assert!(
        a.contains(
            "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
        ),
        "{a}"
    );
    assert!(
        a.contains(&format!("\r\nContent-Length: {}\r\n", om.len())),
        "{a}"
    );
    assert!(a.contains("\r\nConnection: close\r\n\r\n"), "{a}");
    assert!(a.ends_with(&format!("\r\n\r\n{om}")), "{a}");
    // HEAD: the same length, no body.
    let h = text(answer(
        Request {
            route: Route::Metrics,
            head_only: true,
            format: Exposition::OpenMetrics,
        },
        |f| {
            assert_eq!(f, Exposition::OpenMetrics);
            om.into()
        },
    ));
    assert!(
        h.contains(&format!("\r\nContent-Length: {}\r\n", om.len())),
        "{h}"
    );
    assert!(h.ends_with("\r\n\r\n"), "{h}");
    // The body is rendered only for a scrape.
    let n = text(answer(
        Request {
            route: Route::NotFound,
            head_only: false,
            format: Exposition::Prometheus,
        },
        |_| panic!("rendered for a 404"),
    ));
    assert!(n.starts_with("HTTP/1.1 404 Not Found\r\n"), "{n}");
    let m = text(answer(
        Request {
            route: Route::MethodNotAllowed,
            head_only: false,
            format: Exposition::Prometheus,
        },
        |_| String::new(),
    ));
    assert!(m.starts_with("HTTP/1.1 405 "), "{m}");
    assert!(m.contains("\r\nAllow: GET, HEAD\r\n"), "{m}");
    let t = text(answer(
        Request {
            route: Route::TooLarge,
            head_only: false,
            format: Exposition::Prometheus,
        },
        |_| String::new(),
    ));
    assert!(t.starts_with("HTTP/1.1 431 "), "{t}");
}

#[test]
fn a_scrape_gets_the_format_its_accept_header_asks_for() {
    let format = |headers: &str| {
        classify(format!("GET /metrics HTTP/1.1\r\nHost: h\r\n{headers}\r\n").as_bytes())
            .unwrap()
            .format
    };
    // What Debian's Prometheus 2.42 sends (captured with `nc -l` as its scrape target).
    let prometheus = "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n";
    assert_eq!(format(prometheus), Exposition::OpenMetrics);
    assert_eq!(
        format("Accept: text/plain;version=0.0.4\r\n"),
        Exposition::Prometheus
    );
    // No header, */*, curl's default: the text format, as client libraries answer.
    assert_eq!(format(""), Exposition::Prometheus);
    assert_eq!(format("Accept: */*\r\n"), Exposition::Prometheus);
    // Header names are case-insensitive; two Accept headers are one list.
    assert_eq!(
        format("accept: text/plain;q=0.2\r\nACCEPT: application/openmetrics-text\r\n"),
        Exposition::OpenMetrics
    );
    let a = text(answer(
        classify(format!("GET /metrics HTTP/1.1\r\n{prometheus}\r\n").as_bytes()).unwrap(),
        |f| f.from_openmetrics("# TYPE x counter\nx_total 1\n# EOF\n".into()),
    ));
    assert!(
        a.contains(
            "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
        ),
        "{a}"
    );
    assert!(a.ends_with("x_total 1\n# EOF\n"), "{a}");
    let t = text(answer(
        classify(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap(),
        |f| f.from_openmetrics("# TYPE x counter\nx_total 1\n# EOF\n".into()),
    ));
    assert!(
        t.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{t}"
    );
    assert!(
        t.ends_with("\r\n\r\n# TYPE x_total counter\nx_total 1\n"),
        "{t}"
    );
}

/// What the server's read loop does with `chunks` arriving one by one: the gate
/// (`ends_a_head` or a full buffer) then `classify`; the first answer, if any.
fn feed(chunks: &[&[u8]]) -> Option<Request> {
    let mut buf = Vec::new();
    for c in chunks {
        let at = buf.len();
        let room = MAX_HEAD - at;
        buf.extend_from_slice(&c[..c.len().min(room)]);
        if buf.len() >= MAX_HEAD || ends_a_head(&buf, at) {
            if let Some(r) = classify(&buf) {
                return Some(r);
            }
        }
    }
    None
}

proptest! {
    /// Whatever the bytes, classify answers or waits, never panics, and never waits past
    /// MAX_HEAD bytes.
    #[test]
    fn classify_is_total_and_bounded(b in proptest::collection::vec(any::<u8>(), 0..10_000)) {
        let r = classify(&b);
        if b.len() >= MAX_HEAD {
            prop_assert!(r.is_some());
        }
    }

    /// However a request is cut into reads (a head's end split between two of them
    /// too), the gated read loop answers it as a whole buffer would.
    #[test]
    fn reads_in_any_pieces_get_the_same_answer(
        cuts in proptest::collection::vec(0usize..60, 0..8),
        lf_only in any::<bool>(),
        path in prop_oneof![Just("/metrics"), Just("/metrics?a=b"), Just("/x")],
    ) {
        let eol = if lf_only { "\n" } else { "\r\n" };
        let whole = format!("GET {path} HTTP/1.1{eol}Host: h{eol}Accept: */*{eol}{eol}");
        let b = whole.as_bytes();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(b.len())).collect();
        cuts.sort_unstable();
        let mut chunks = vec![];
        let mut from = 0;
        for c in cuts.into_iter().chain([b.len()]) {
            chunks.push(&b[from..c]);
            from = c;
        }
        prop_assert_eq!(feed(&chunks), classify(b));
        prop_assert!(classify(b).is_some());
    }
}
