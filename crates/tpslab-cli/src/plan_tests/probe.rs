//! The table rows of probe idle, probe pool and probe idle-responder.

use super::{
    check, file, joined, Made,
    Want::{Error, Plan},
    DURATION_FORMS,
};
use std::time::Duration;
use tpslab_plan::login::DbProtocol;
use tpslab_plan::probe::{IdleTarget, IdleTimer, OnIdle};
use tpslab_plan::probe::{PoolPlan, ResponderPlan};
use tpslab_run::probe::IdleSetup;

#[test]
fn probe_rows() {
    let bad_pool = file("bad.properties", b"keepaliveTime=soon\n");
    check(&[
        (
            &["probe", "idle", "127.0.0.1:9"],
            Plan(|p| {
                matches!(p, Made::Idle(IdleSetup { plan, pools, login })
            if matches!(plan.target, IdleTarget::Server { addr } if addr.port() == 9)
                && (plan.min_s, plan.max_s, plan.resolution_s, plan.connections) == (10, 3600, 5, 16)
                && !plan.udp && pools.is_empty() && login.is_none() && plan.protocol.is_none())
            }),
        ),
        // The derived resolution: half the range when that is below 5 s.
        (
            &[
                "probe",
                "idle",
                "--lab-idle-timeout",
                "3s",
                "--lab-on-idle",
                "reset",
                "--min",
                "1s",
                "--max",
                "5s",
                "--udp",
            ],
            Plan(|p| {
                matches!(p, Made::Idle(IdleSetup { plan, .. })
                if plan.target == IdleTarget::Lab { idle_timeout: std::time::Duration::from_secs(3), on_idle: OnIdle::Reset, timer: IdleTimer::Any }
                    && plan.resolution_s == 2 && plan.udp)
            }),
        ),
        // A proxy's behaviour: payload-only timer, FIN to both ends.
        (
            &[
                "probe",
                "idle",
                "--lab-idle-timeout",
                "2s",
                "--lab-on-idle",
                "fin",
                "--lab-timer",
                "payload",
                "--min",
                "1s",
                "--max",
                "5s",
            ],
            Plan(|p| {
                matches!(p, Made::Idle(IdleSetup { plan, .. })
                if plan.target == IdleTarget::Lab { idle_timeout: std::time::Duration::from_secs(2), on_idle: OnIdle::Fin, timer: IdleTimer::Payload })
            }),
        ),
        (
            &[
                "probe",
                "idle",
                "127.0.0.1:9",
                "--pool-config",
                file("hikari.properties", b"keepaliveTime=60000\n"),
            ],
            Plan(
                |p| matches!(p, Made::Idle(IdleSetup { pools, .. }) if pools.len() == 1 && pools[0].settings[0].value == "60000"),
            ),
        ),
        // A probe that logs in: the password from a file's first line, never in the plan.
        (
            &[
                "probe",
                "idle",
                "127.0.0.1:5432",
                "--protocol",
                "postgres",
                "--user",
                "app",
                "--password-file",
                file("pw", b"s3cret\nignored\n"),
                "--database",
                "appdb",
            ],
            Plan(|p| {
                matches!(p, Made::Idle(IdleSetup { plan, login: Some(l), .. })
                if plan.protocol == Some(DbProtocol::Postgres) && l.user == "app"
                    && l.password.as_deref() == Some("s3cret") && l.database.as_deref() == Some("appdb")
                    && !serde_json::to_string(plan).unwrap().contains("s3cret"))
            }),
        ),
        // Redis's user defaults to `default`, no password: none sent.
        (
            &["probe", "idle", "127.0.0.1:6379", "--protocol", "redis"],
            Plan(|p| {
                matches!(p, Made::Idle(IdleSetup { login: Some(l), .. }) if l.user == "default" && l.password.is_none())
            }),
        ),
        (
            &["probe", "idle", "127.0.0.1:5432", "--protocol", "postgres"],
            Error("--protocol postgres needs --user NAME: the user a pool's connection logs in as"),
        ),
        (
            &["probe", "idle", "--lab-idle-timeout", "3s", "--protocol", "mysql", "--user", "a"],
            Error("--protocol mysql logs in to a server: give its HOST:PORT, not --lab-idle-timeout"),
        ),
        (
            &["probe", "idle", "127.0.0.1:6379", "--protocol", "redis", "--password-env", "TPSLAB_NO_SUCH_VAR_59"],
            Error("--password-env TPSLAB_NO_SUCH_VAR_59: no such environment variable (or not UTF-8)"),
        ),
        (
            &["probe", "idle", "127.0.0.1:6379", "--protocol", "redis", "--password-file", "/"],
            Error("--password-file /: a directory; allowed a regular file"),
        ),
        (
            &["probe", "idle", "127.0.0.1:6379", "--protocol", "redis", "--password-file", file("big", &[b'x'; 5000])],
            Error("--password-file "),
        ),
        (
            &["probe", "idle", "127.0.0.1:6379", "--protocol", "redis", "--password-file", file("empty-pw", b"\nsecond\n")],
            Error("--password-file /"),
        ),
        (
            &["probe", "idle", "127.0.0.1:6379", "--user", "a"],
            Error("the following required arguments were not provided"),
        ),
        (
            &["probe", "idle"],
            Error("probe idle needs a target HOST:PORT, or --lab-idle-timeout DUR for the lab"),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--lab-idle-timeout", "10s"],
            Error("give a target HOST:PORT or --lab-idle-timeout, not both"),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--min", "10"],
            Error(joined("--min 10: ", DURATION_FORMS)),
        ),
        // `cli` then marks the values not given as defaults.
        (
            &[
                "probe",
                "idle",
                "--lab-idle-timeout",
                "3s",
                "--min",
                "1s",
                "--max",
                "2s",
            ],
            Error("--resolution 1s is not below the range --min 1s to --max 2s"),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--min", "2h"],
            Error("--max 1h is not above --min 2h"),
        ),
        (
            &[
                "probe",
                "idle",
                "127.0.0.1:9",
                "--udp",
                "--pool-config",
                "x.ini",
            ],
            Error("--pool-config judges TCP connection pools: not with --udp"),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--pool-config", "/dev/zero"],
            Error("--pool-config /dev/zero: a character device; allowed a regular file"),
        ),
        (
            &["probe", "pool", "--lab-idle-timeout", "5s"],
            Plan(|p| {
                matches!(p, Made::Pool(pp) if *pp == PoolPlan {
            idle_timeout: Duration::from_secs(5), validate_every: None, max_idle: None, min_idle: 2, requests: 6,
            request_every: Duration::from_secs(4), query_timeout: Duration::from_secs(2), target: None, protocol: None })
            }),
        ),
        (
            &["probe", "pool", "127.0.0.1:9", "--path-idle-timeout", "3s"],
            Plan(|p| {
                matches!(p, Made::Pool(pp) if pp.idle_timeout == Duration::from_secs(3)
                    && pp.target == Some("127.0.0.1:9".parse().unwrap()))
            }),
        ),
        // A pool that logs in as probe idle's connections do (issue 59).
        (
            &["probe", "pool", "127.0.0.1:6432", "--path-idle-timeout", "4s", "--protocol", "postgres", "--user", "app", "--password-file", file("pool-pw", b"s3cret\n")],
            Plan(|p| {
                matches!(p, Made::Pool(pp) if pp.protocol == Some(DbProtocol::Postgres)
                    && !serde_json::to_string(pp).unwrap().contains("s3cret"))
            }),
        ),
        (
            &["probe", "pool", "--lab-idle-timeout", "3s", "--protocol", "redis"],
            Error("--protocol redis logs in to a server: give its HOST:PORT, not --lab-idle-timeout"),
        ),
        (
            &["probe", "pool", "127.0.0.1:6432", "--path-idle-timeout", "4s", "--protocol", "mysql"],
            Error("--protocol mysql needs --user NAME"),
        ),
        (
            &["probe", "idle", "127.0.0.1:5432", "--protocol", "postgres", "--user", "a", "--allow-cleartext-password"],
            Plan(|p| matches!(p, Made::Idle(IdleSetup { login: Some(l), .. }) if l.allow_cleartext)),
        ),
        (
            &["probe", "pool", "127.0.0.1:9", "--lab-idle-timeout", "3s"],
            Error("--lab-idle-timeout sets the lab's middlebox: with HOST:PORT state the path's timeout as --path-idle-timeout DUR (what probe idle measured)"),
        ),
        (
            &["probe", "pool", "--path-idle-timeout", "3s"],
            Error("--path-idle-timeout states a real path's timeout: give HOST:PORT with it, or --lab-idle-timeout for the lab"),
        ),
        (
            &["probe", "pool", "127.0.0.1:9", "--path-idle-timeout", "0s"],
            Error("--path-idle-timeout 0s: allowed"),
        ),
        (
            &[
                "probe",
                "pool",
                "--lab-idle-timeout",
                "1s",
                "--requests",
                "0",
            ],
            Error("--requests 0: allowed 1..=1000"),
        ),
        (
            &[
                "probe",
                "idle-responder",
                "0.0.0.0:9100",
                "--duration",
                "10s",
            ],
            Plan(|p| {
                matches!(p, Made::Responder(r) if *r == ResponderPlan {
            bind: "0.0.0.0:9100".parse().unwrap(), duration: Some(Duration::from_secs(10)) })
            }),
        ),
        (
            &["probe", "idle-responder", "nowhere"],
            Error("bind \"nowhere\": allowed ADDR:PORT, e.g. 0.0.0.0:9100"),
        ),
        (
            &["probe", "idle-responder", "127.0.0.1:0", "--duration", "0s"],
            Error("--duration 0s: allowed 1ms..="),
        ),
    ]);
    // A pool setting that is not a number names itself.
    let e = super::made_args(
        ["probe", "idle", "127.0.0.1:9", "--pool-config", bad_pool]
            .into_iter()
            .map(Into::into),
    )
    .unwrap_err();
    assert!(e.contains("keepaliveTime"), "{e}");
}
