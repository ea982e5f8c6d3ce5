use super::*;
use tpslab_record::{Body, Record};

/// A record of the fixtures (real runs): `kept_alive.json` (serve http, 2000 requests on
/// 10 connections), `closes_each.json` (python3 -m http.server, HTTP/1.0).
fn fixture(text: &str) -> LoadHttpRecord {
    match Record::from_json(text).expect("a record").body {
        Body::LoadHttp(l) => l,
        _ => panic!("a load_http record"),
    }
}

#[test]
fn a_server_closing_each_connection_is_named() {
    let rec = fixture(include_str!("load_http_fixtures/closes_each.json"));
    let f = reuse(&rec).unwrap();
    assert!(
        f.starts_with(
            "every connection closed after 1 request: the server does not keep connections alive"
        ),
        "{f}"
    );
    let kept = fixture(include_str!("load_http_fixtures/kept_alive.json"));
    let f = reuse(&kept).unwrap();
    assert_eq!(f, "connections kept alive: 200.0 requests each (10 made)");
    // A few requests per connection: closed after a count.
    let mut some = kept.clone();
    some.result.connections = 400;
    assert!(
        reuse(&some).unwrap().contains("after 5.0 requests each"),
        "{:?}",
        reuse(&some)
    );
}

#[test]
fn what_limited_the_run() {
    let kept = fixture(include_str!("load_http_fixtures/kept_alive.json"));
    assert_eq!(
        limited_by(&kept),
        "nothing: the plan's rate was kept and answered"
    );
    let mut behind = kept.clone();
    behind.result.behind = 100;
    behind.result.late = 100;
    assert!(
        limited_by(&behind).starts_with("the generator"),
        "{}",
        limited_by(&behind)
    );
    let mut slow = kept.clone();
    slow.result.late = 300;
    assert!(limited_by(&slow).starts_with("the server's answers: 300 sends held back"));
    let mut refused = kept.clone();
    refused.result.connect_errors.refused = 3;
    assert!(limited_by(&refused).starts_with("the server's connection handling"));
    let mut closed = kept;
    closed.plan.max_rate = true;
    assert!(limited_by(&closed).starts_with("the server's answers (closed loop"));
}
