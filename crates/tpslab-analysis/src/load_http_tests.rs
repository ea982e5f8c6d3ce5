use super::*;
use tpslab_record::{Body, Record};

/// A record of the fixtures (real runs): `kept_alive.json` (serve http, 2000 requests on
/// 10 connections), `closes_each.json` (python3 -m http.server, HTTP/1.0),
/// `closed_generator.json` (`--rate max --connections 50 --load-threads 1` for 1 s against
/// serve http on this 2-core host: one loop thread wanting a CPU 99 % of its time),
/// `closed_server.json` (`--rate max --connections 4` against serve http `--serial 5ms
/// --serialize`: its loop threads asleep, waiting for replies).
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
    // Every request answered 503 while 100 of 2000 went late: the server's answers
    // explain more (all of them) than the generator's lateness (5 %).
    let mut failing = behind.clone();
    failing.result.status.s5xx = failing.result.status.s2xx;
    failing.result.status.s2xx = 0;
    assert!(
        limited_by(&failing).starts_with("the server's answers: 0 sends held back by a late reply on their connection, 2000 of 2000 requests failed"),
        "{}",
        limited_by(&failing)
    );
    // A few failures beside more lateness: still the generator.
    let mut few = behind.clone();
    few.result.status.s5xx = 10;
    few.result.status.s2xx -= 10;
    assert!(
        limited_by(&few).starts_with("the generator"),
        "{}",
        limited_by(&few)
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

/// A closed loop names the generator when its loop threads wanted a CPU nearly all the
/// time (it always named the server), and the server when they waited on it.
#[test]
fn a_closed_loop_names_the_generator_when_its_threads_were_busy() {
    let g = fixture(include_str!("load_http_fixtures/closed_generator.json"));
    let c = g.result.loop_cpu.unwrap();
    assert!(c.busy() > 0.95, "{c:?}");
    assert_eq!(
        limited_by(&g),
        "the generator: its 1 loop thread wanted a CPU 99 % of its time (on one 77 %, waiting for one 23 %; closed loop: the rate is this generator's pace, not the server's: give it more CPUs or --load-threads, or put the server on another host)"
    );
    let s = fixture(include_str!("load_http_fixtures/closed_server.json"));
    assert!(s.result.loop_cpu.unwrap().busy() < 0.1);
    assert!(
        limited_by(&s).starts_with("the server's answers (closed loop"),
        "{}",
        limited_by(&s)
    );
    // An open loop's generator is judged by its late sends, not by its CPU.
    let mut open = g.clone();
    open.plan.max_rate = false;
    assert!(!limited_by(&open).starts_with("the generator"));
    // An older record (no loop_cpu) is judged as before.
    let mut old = g;
    old.result.loop_cpu = None;
    assert!(limited_by(&old).starts_with("the server's answers (closed loop"));
}

/// `rps>=N` on a fixed-rate run judges the replies, not the sends: a plan sent whole to
/// a server that answered half of it fails its floor.
#[test]
fn rps_judges_the_rate_answered() {
    let kept = fixture(include_str!("load_http_fixtures/kept_alive.json"));
    let full = outcome(&kept, false).figures.rps.unwrap();
    assert_eq!(full.1, "answered/s");
    assert!((full.0 - kept.answered() as f64 / kept.plan.duration.as_secs_f64()).abs() < 1e-9);
    let mut half = kept.clone();
    half.result.status.s2xx /= 2;
    half.result.unanswered = kept.result.sent - half.result.status.s2xx;
    let (rate, _) = outcome(&half, false).figures.rps.unwrap();
    assert!((rate - full.0 / 2.0).abs() < 1.0, "{rate} vs {}", full.0);
    assert!(half.achieved_rate() > rate * 1.9, "sent rate unchanged");
}
