use super::*;
use crate::idle_owner::owner;
use tpslab_record::{Body, Record};

/// A record of the fixtures (real `probe idle --protocol` runs on this machine, idle
/// intervals 1..4 or 1..5 s, each server configured with a 2 or 3 s timeout), with the
/// server's settings as a logged-in probe would have read them.
fn with(text: &str, stated: &[(&str, Option<u64>, &str)]) -> IdleRecord {
    let mut r = match Record::from_json(text).expect("a record").body {
        Body::ProbeIdle(r) => r,
        _ => panic!("a probe_idle record"),
    };
    r.stated = stated
        .iter()
        .map(|&(name, v, said)| StatedSetting::new(name, &format!("ask {name}"), v, said))
        .collect();
    r
}

const REDIS: &str = include_str!("idle_fixtures/redis_timeout.json");
const MARIADB: &str = include_str!("idle_fixtures/mariadb_wait_timeout.json");
const POSTGRES: &str = include_str!("idle_fixtures/postgres_idle_session_timeout.json");
const HAPROXY: &str = include_str!("idle_fixtures/haproxy_before_postgres.json");

#[test]
fn an_end_on_the_stated_setting_names_the_server() {
    // Redis, timeout 2: its FINs at (2.56 s, 2.61 s], whole seconds counted.
    let r = with(REDIS, &[("timeout", Some(2000), "2")]);
    let st = stated(&r).unwrap();
    assert_eq!(st.verdict, Verdict::Server, "{}", st.line);
    assert!(
        st.line.contains("timeout = 2 s (ask timeout)"),
        "{}",
        st.line
    );
    let o = owner(&r).unwrap();
    assert_eq!((o.who.as_str(), o.by_setting), ("Redis", true), "{o:?}");
    assert!(o.setting.contains("timeout = 2 s"), "{o:?}");
    // MariaDB, wait_timeout 2: its RSTs at (1.96 s, 2.01 s]; interactive_timeout is
    // not the one that governs a pool's connection.
    let r = with(
        MARIADB,
        &[
            ("wait_timeout", Some(2000), "2"),
            ("interactive_timeout", Some(28_800_000), "28800"),
        ],
    );
    assert_eq!(stated(&r).unwrap().verdict, Verdict::Server);
    assert_eq!(owner(&r).unwrap().who, "MariaDB");
    // PostgreSQL named itself by its goodbye (57P05); the setting agrees and is shown.
    let r = with(POSTGRES, &[("idle_session_timeout", Some(2000), "2s")]);
    assert_eq!(stated(&r).unwrap().verdict, Verdict::Server);
    let o = owner(&r).unwrap();
    assert!(o.named_by_server && !o.by_setting, "{o:?}");
}

#[test]
fn an_end_before_the_setting_or_with_it_off_is_the_paths() {
    // The same Redis ends, the server stating 10 s or off: a proxy ended them first.
    for (v, said) in [(10_000, "10"), (0, "0")] {
        let r = with(REDIS, &[("timeout", Some(v), said)]);
        let st = stated(&r).unwrap();
        assert_eq!(st.verdict, Verdict::PathFirst, "{}", st.line);
        assert!(st.line.contains("something in the path"), "{}", st.line);
        let o = owner(&r).unwrap();
        assert_eq!(o.who, "a proxy on the path", "{o:?}");
        assert!(
            o.by_setting && o.evidence.contains("the server states timeout"),
            "{o:?}"
        );
    }
    // haproxy in front of PostgreSQL, the role's idle_session_timeout off: the FIN
    // without an ErrorResponse was already the proxy's; the setting says it too.
    let r = with(HAPROXY, &[("idle_session_timeout", Some(0), "0")]);
    assert_eq!(stated(&r).unwrap().verdict, Verdict::PathFirst);
    assert_eq!(owner(&r).unwrap().who, "a proxy on the path");
    // MariaDB's RSTs, wait_timeout 8 h (the default): a middlebox ended them.
    let r = with(MARIADB, &[("wait_timeout", Some(28_800_000), "28800")]);
    assert_eq!(owner(&r).unwrap().who, "a middlebox on the path");
}

#[test]
fn a_setting_the_connections_outlived_did_not_apply() {
    // PostgreSQL's ends at (1.97 s, 2.05 s] against a stated 0.5 s: not that setting.
    let r = with(POSTGRES, &[("idle_session_timeout", Some(500), "500ms")]);
    let st = stated(&r).unwrap();
    assert_eq!(st.verdict, Verdict::NotApplied, "{}", st.line);
    // Nothing died up to --max 4 s: a stated 2 s did not apply, a stated 60 s was
    // beyond the intervals tried, an unset one never ends them.
    let mut r = with(REDIS, &[("timeout", Some(2000), "2")]);
    r.conns
        .retain(|c| c.fate == tpslab_record::idle::Fate::Alive);
    r.bracket = crate::idle::bracket(&r.conns);
    r.active_ends = None;
    assert_eq!(stated(&r).unwrap().verdict, Verdict::NotApplied);
    r.stated[0].value_ms = Some(60_000);
    assert_eq!(stated(&r).unwrap().verdict, Verdict::NotReached);
    r.stated[0].value_ms = Some(0);
    assert_eq!(stated(&r).unwrap().verdict, Verdict::NotReached);
}

#[test]
fn a_setting_not_told_leaves_the_owner_open_and_says_so() {
    // A Redis user without +config (NOPERM): the owner stays "Redis, or a proxy".
    let r = with(
        REDIS,
        &[(
            "timeout",
            None,
            "NOPERM this user has no permissions to run the 'config|get' command",
        )],
    );
    let st = stated(&r).unwrap();
    assert_eq!(st.verdict, Verdict::Unknown);
    assert!(
        st.line.contains("NOPERM") && st.line.contains("whether Redis or something in the path"),
        "{}",
        st.line
    );
    assert_eq!(owner(&r).unwrap().who, "Redis, or a proxy on the path");
    // Not asked (a record written before this was asked): no line, the owner unsettled.
    let r = with(REDIS, &[]);
    assert_eq!(stated(&r), None);
    assert!(!owner(&r).unwrap().by_setting);
}

#[test]
fn real_records_with_the_servers_answers_are_judged_so() {
    // Redis 7.0 (timeout 2), a named user by HELLO 3 AUTH: CONFIG GET timeout said 2,
    // the FINs came at (2.37 s, 2.44 s]: Redis's own.
    let read = |text: &str| match Record::from_json(text).unwrap().body {
        Body::ProbeIdle(r) => r,
        _ => panic!("a probe_idle record"),
    };
    let r = read(include_str!(
        "idle_fixtures/redis_hello_stated_timeout.json"
    ));
    assert_eq!(r.stated.len(), 1, "the record kept the answer");
    assert_eq!(stated(&r).unwrap().verdict, Verdict::Server);
    assert_eq!(owner(&r).unwrap().who, "Redis");
    // pgbouncer 1.18 (client_idle_timeout = 4) before PostgreSQL 15: SHOW through it
    // said idle_session_timeout 0; pgbouncer's goodbye names it, the setting agrees
    // that the server did not end them.
    let r = read(include_str!("idle_fixtures/pgbouncer_stated_off.json"));
    assert_eq!(r.stated.len(), 2);
    let st = stated(&r).unwrap();
    assert_eq!(st.verdict, Verdict::PathFirst, "{}", st.line);
    let o = owner(&r).unwrap();
    assert_eq!((o.who.as_str(), o.named_by_server), ("pgbouncer", true));
}
