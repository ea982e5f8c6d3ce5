//! compare's unit tests.

use super::*;

#[test]
fn differences_put_the_sockets_and_plan_first_and_skip_what_is_equal() {
    let a: BTreeMap<String, String> = [
        ("host kernel", "6.18"),
        ("plan server.rcvbuf", "null"),
        ("sysctl net.core.rmem_default", "212992"),
        ("plan load.rate_pps", "100000"),
        ("server SO_RCVBUF granted", "425984"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut b = a.clone();
    b.insert("host kernel".into(), "6.19".into());
    b.insert("plan server.rcvbuf".into(), "11520000".into());
    b.insert("sysctl net.core.rmem_default".into(), "23040000".into());
    b.insert("server SO_RCVBUF granted".into(), "23040000".into());
    let d = differences(&[a, b]);
    let what: Vec<&str> = d.iter().map(|d| d.what.as_str()).collect();
    assert_eq!(
        what,
        [
            "server SO_RCVBUF granted",
            "plan server.rcvbuf",
            "sysctl net.core.rmem_default",
            "host kernel"
        ]
    );
    assert_eq!(d[1].values, ["null", "11520000"]);
}

/// A TCP capacity record of a search that sustained `lo` and failed at `hi`, on
/// `target` with `pid`, the server tpslab's own (`builtin`) or someone's.
fn tcp_capacity(
    target: &str,
    pid: u32,
    builtin: bool,
    lo: f64,
    hi: f64,
) -> tpslab_record::capacity::CapacityRecord {
    use std::time::Duration;
    use tpslab_plan::capacity::{
        BuiltinTcpServer, CapacityLoad, CapacityPlan, CapacitySearch, RateUnit, Slo, TcpStep,
    };
    use tpslab_record::capacity::*;
    CapacityRecord {
        plan: CapacityPlan {
            load: CapacityLoad::Tcp(TcpStep {
                target: target.parse().unwrap(),
                request: vec![],
                request_bytes: 1028,
                framing: tpslab_plan::framing::Framing::Length,
                rate: 500.0,
                connections: 10,
                duration: Duration::from_secs(1),
                timeout: Duration::from_secs(2),
                load_threads: 0,
                warmup: Duration::ZERO,
                pid: Some(pid),
                builtin: builtin.then_some(BuiltinTcpServer {
                    work: Duration::from_micros(500),
                    serial: Duration::ZERO,
                    serialize: false,
                    threads: 1,
                }),
                proto: tpslab_plan::proto::Proto::Tcp,
            }),
            search: CapacitySearch {
                slo: Slo::parse("--slo", "p99<20ms").unwrap(),
                start_rate: 500.0,
                max_rate: 1e6,
                resolution_pct: 5.0,
                repeats: 1,
                budget: Duration::from_secs(30),
                min_rate: 1.0,
                unit: RateUnit::RequestsPerSecond,
                fail_on: None,
            },
            server_cmd: None,
            fix_and_retry: false,
        },
        steps: vec![],
        conclusion: Conclusion::Bracket {
            sustains_pps: lo,
            fails_pps: hi,
        },
        boundary: None,
        interrupted: false,
        environment: Default::default(),
        notes: vec![],
        retry: None,
    }
}

#[test]
fn a_started_servers_port_and_pid_are_no_difference_someones_server_is() {
    // tpslab's own server (and --server-cmd's): a new port and PID every run.
    let a = tcp_capacity("127.0.0.1:40001", 100, true, 1900.0, 2000.0);
    let b = tcp_capacity("127.0.0.1:40002", 200, true, 1900.0, 2000.0);
    let d = differences(&[capacity_settings(&a), capacity_settings(&b)]);
    assert!(d.is_empty(), "{d:?}");
    let mut cmd_a = a.clone();
    let mut cmd_b = b.clone();
    for (c, srv) in [
        (&mut cmd_a, "srv {port}"),
        (&mut cmd_b, "srv --fast {port}"),
    ] {
        c.plan.server_cmd = Some(srv.into());
        if let tpslab_plan::capacity::CapacityLoad::Tcp(t) = &mut c.plan.load {
            t.builtin = None;
        }
    }
    let d = differences(&[capacity_settings(&cmd_a), capacity_settings(&cmd_b)]);
    let what: Vec<&str> = d.iter().map(|d| d.what.as_str()).collect();
    assert_eq!(what, ["plan server_cmd"], "{d:?}");
    // Someone's server at two addresses: a difference worth listing.
    let a = tcp_capacity("127.0.0.1:40001", 100, false, 1900.0, 2000.0);
    let b = tcp_capacity("127.0.0.1:40002", 100, false, 1900.0, 2000.0);
    let d = differences(&[capacity_settings(&a), capacity_settings(&b)]);
    let what: Vec<&str> = d.iter().map(|d| d.what.as_str()).collect();
    assert_eq!(what, ["plan tcp.target"], "{d:?}");
}

#[test]
fn a_retry_shows_the_capacities_with_the_fix_and_what_was_applied() {
    let mut a = tcp_capacity("127.0.0.1:40001", 100, true, 1900.0, 2000.0);
    let names = |c: &tpslab_record::capacity::CapacityRecord| -> Vec<(String, f64)> {
        capacity_figures(c)
            .into_iter()
            .map(|(k, e)| (k.name, e.mean))
            .collect()
    };
    assert_eq!(
        names(&a),
        [
            ("capacity: sustains requests/s".to_string(), 1900.0),
            ("capacity: fails requests/s".to_string(), 2000.0)
        ]
    );
    let second = tcp_capacity("127.0.0.1:40001", 100, true, 2600.0, 2700.0);
    a.retry = Some(Box::new(tpslab_record::capacity::CapacityRetry {
        applied: vec!["sysctl net.core.rmem_default=921600".into()],
        restored: vec![],
        search: second,
    }));
    assert_eq!(
        names(&a)[2..],
        [
            (
                "capacity with the fix: sustains requests/s".to_string(),
                2600.0
            ),
            (
                "capacity with the fix: fails requests/s".to_string(),
                2700.0
            )
        ]
    );
    assert_eq!(
        capacity_settings(&a)["retry applied"],
        "sysctl net.core.rmem_default=921600"
    );
}

#[test]
fn flatten_names_nested_leaves() {
    let v = serde_json::json!({"server": {"rcvbuf": 5, "sched": {"policy": "other"}}, "x": "y"});
    let f = flatten("plan", &v);
    assert_eq!(f["plan server.rcvbuf"], "5");
    assert_eq!(f["plan server.sched.policy"], "other");
    assert_eq!(f["plan x"], "y");
}
