use super::*;
use tpslab_record::{Body, Record};

/// A record of the fixtures: real `probe idle --protocol` runs on this machine (idle
/// intervals 1..4 or 1..5 s), each against a server configured with a 2 or 3 s timeout.
fn fixture(text: &str) -> IdleRecord {
    match Record::from_json(text).expect("a record").body {
        Body::ProbeIdle(r) => r,
        _ => panic!("a probe_idle record"),
    }
}

fn of(text: &str) -> Owner {
    owner(&fixture(text)).expect("an owner")
}

#[test]
fn servers_that_say_goodbye_are_named_with_their_setting() {
    // PostgreSQL 15, idle_session_timeout = 2s: FATAL 57P05 at (1.98 s, 2.05 s].
    let o = of(include_str!(
        "idle_fixtures/postgres_idle_session_timeout.json"
    ));
    assert_eq!(
        (o.who.as_str(), o.setting.as_str()),
        ("PostgreSQL", "idle_session_timeout")
    );
    assert!(o.named_by_server && o.evidence.contains("57P05"), "{o:?}");
    // pgbouncer 1.18, client_idle_timeout = 2: "FATAL: client_idle_timeout" (08P01).
    let o = of(include_str!(
        "idle_fixtures/pgbouncer_client_idle_timeout.json"
    ));
    assert_eq!(
        (o.who.as_str(), o.setting.as_str()),
        ("pgbouncer", "client_idle_timeout")
    );
    assert!(o.named_by_server, "{o:?}");
}

#[test]
fn ends_without_a_word_are_named_by_protocol_and_ending() {
    // haproxy (timeout client/server 3s) in front of PostgreSQL: a FIN, no ErrorResponse.
    let o = of(include_str!("idle_fixtures/haproxy_before_postgres.json"));
    assert_eq!(o.who, "a proxy on the path");
    assert!(o.setting.contains("haproxy timeout client"), "{o:?}");
    assert!(!o.named_by_server);
    // Redis, timeout 2: a FIN without a word: Redis's timeout, or a proxy's.
    let o = of(include_str!("idle_fixtures/redis_timeout.json"));
    assert_eq!(o.who, "Redis, or a proxy on the path");
    assert!(o.setting.contains("Redis's timeout"), "{o:?}");
    // MariaDB 10.11, wait_timeout = 2: a RST without an error packet.
    let o = of(include_str!("idle_fixtures/mariadb_wait_timeout.json"));
    assert_eq!(o.who, "MariaDB, or a middlebox on the path");
    assert!(o.setting.contains("wait_timeout"), "{o:?}");
    // The same PostgreSQL record without its goodbyes reads as a proxy's FIN: the
    // goodbye, not the ending, named PostgreSQL.
    let mut r = fixture(include_str!(
        "idle_fixtures/postgres_idle_session_timeout.json"
    ));
    r.conns.iter_mut().for_each(|c| c.goodbye = None);
    assert_eq!(owner(&r).unwrap().who, "a proxy on the path");
    // Nothing died: no owner.
    r.conns
        .retain(|c| c.fate == tpslab_record::idle::Fate::Alive);
    r.bracket = crate::idle::bracket(&r.conns);
    r.active_ends = None;
    assert_eq!(owner(&r), None);
}

#[test]
fn goodbyes_name_their_sender() {
    let g = |code: &str, m: &str| by_goodbye(&Goodbye::new(code, m)).map(|o| o.who);
    assert_eq!(
        g("08P01", "FATAL: client_login_timeout").as_deref(),
        Some("pgbouncer")
    );
    assert_eq!(
        g("4031", "The client was disconnected").as_deref(),
        Some("MySQL")
    );
    assert_eq!(
        g(
            "25P03",
            "FATAL: terminating connection due to idle-in-transaction timeout"
        )
        .as_deref(),
        Some("PostgreSQL")
    );
    assert_eq!(
        g(
            "57P01",
            "FATAL: terminating connection due to administrator command"
        ),
        None
    );
}

#[test]
fn a_postgres_goodbye_of_another_kind_is_the_servers_not_a_proxys() {
    // The PostgreSQL run, its goodbye made an admin's shutdown (57P01) before the FIN:
    // the server spoke, so no proxy is blamed (before: "a proxy on the path", its
    // evidence quoting the server's own ErrorResponse).
    let mut rec = fixture(include_str!(
        "idle_fixtures/postgres_idle_session_timeout.json"
    ));
    let mut n = 0;
    for c in rec.conns.iter_mut().filter(|c| c.goodbye.is_some()) {
        c.goodbye = Some(Goodbye::new(
            "57P01",
            "FATAL: terminating connection due to administrator command",
        ));
        n += 1;
    }
    assert!(n > 0, "the fixture has goodbyes");
    let o = owner(&rec).expect("an owner");
    assert!(o.who.starts_with("the PostgreSQL server"), "{o:?}");
    assert!(o.named_by_server && o.evidence.contains("57P01"), "{o:?}");
}
