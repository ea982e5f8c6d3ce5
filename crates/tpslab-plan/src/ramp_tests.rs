//! Tests of the parent module.
use super::*;

/// A plan that passes: TCP, length framing, 1..4 users.
fn tcp() -> RampPlan {
    RampPlan {
        proto: Proto::Tcp,
        target: "127.0.0.1:5001".parse().unwrap(),
        steps: vec![1, 2, 4],
        step: Duration::from_secs(3),
        warmup: Duration::from_secs(1),
        think: Duration::ZERO,
        timeout: Duration::from_secs(2),
        request: vec![0, 0, 0, 1, b'x'],
        framing: Framing::Length,
        seq_field: None,
        knee_gain: 0.2,
        builtin_server: None,
        server_pid: None,
        sample_interval: Duration::from_millis(10),
        load_threads: 0,
        connections: UserConnections::PerUser,
    }
}

fn udp() -> RampPlan {
    RampPlan {
        proto: Proto::Udp,
        request: vec![b'.'; 64],
        ..tcp()
    }
}

#[test]
fn the_defaults_of_both_protocols_pass() {
    assert_eq!(tcp().validate(), Ok(()));
    assert_eq!(udp().validate(), Ok(()));
    let dns = RampPlan {
        request: vec![0; 29],
        seq_field: Some((0, 2)),
        ..udp()
    };
    assert_eq!(dns.validate(), Ok(()));
    // The bounds themselves pass.
    let edges = RampPlan {
        steps: (1..=200).map(|i| i * 50).collect(),
        step: Duration::from_millis(100),
        warmup: Duration::ZERO,
        think: Duration::from_secs(600),
        timeout: Duration::from_millis(1),
        sample_interval: Duration::from_secs(60),
        framing: Framing::Fixed(crate::framing::MAX_FRAME),
        knee_gain: 0.999,
        ..tcp()
    };
    assert_eq!(edges.validate(), Ok(()));
    // Equal steps (no growth) are run as planned.
    assert_eq!(
        RampPlan {
            steps: vec![3, 3],
            ..tcp()
        }
        .validate(),
        Ok(())
    );
}

/// Each row breaks one setting; the error is the command's text for it.
#[test]
fn each_bad_setting_is_named_with_the_flags_text() {
    type Edit = fn(&mut RampPlan);
    let rows: Vec<(RampPlan, Edit, &str)> = vec![
        (tcp(), |p| p.steps = vec![], "ramp steps must be non-empty and increasing"),
        (tcp(), |p| p.steps = vec![4, 2], "ramp steps must be non-empty and increasing"),
        (
            tcp(),
            |p| p.steps = vec![0, 5],
            "--users 0..5: allowed FIRST..LAST with 1 <= FIRST <= LAST <= 10000, e.g. 1..200",
        ),
        (
            tcp(),
            |p| p.steps = vec![1, 10_001],
            "--users 1..10001: allowed FIRST..LAST with 1 <= FIRST <= LAST <= 10000, e.g. 1..200",
        ),
        (
            tcp(),
            |p| p.steps = (1..=201).collect(),
            "--users 1..201: 201 steps, allowed at most 200",
        ),
        (
            tcp(),
            |p| p.step = Duration::from_millis(50),
            "--step-duration 50ms: allowed 100ms..=1h",
        ),
        (tcp(), |p| p.warmup = Duration::from_secs(601), "--warmup 10m 1s: allowed 0s..=10m"),
        (tcp(), |p| p.think = Duration::from_secs(700), "--think 11m 40s: allowed 0s..=10m"),
        (tcp(), |p| p.timeout = Duration::ZERO, "--timeout 0s: allowed 1ms..=10m"),
        (tcp(), |p| p.sample_interval = Duration::from_micros(500), "--interval 500us: allowed 1ms..=1m"),
        (tcp(), |p| p.knee_gain = 2.0, "--knee-gain 2: allowed above 0 and below 1"),
        (tcp(), |p| p.knee_gain = 0.0, "--knee-gain 0: allowed above 0 and below 1"),
        (tcp(), |p| p.knee_gain = f64::NAN, "--knee-gain NaN: allowed above 0 and below 1"),
        (
            tcp(),
            |p| p.framing = Framing::Fixed(0),
            "--framing \"fixed:0\": allowed length, fixed:BYTES (1..=16777216) or delim:TEXT (e.g. delim:\\r\\n)",
        ),
        (
            tcp(),
            |p| p.framing = Framing::Delimiter(vec![]),
            "--framing \"delim:\": allowed length, fixed:BYTES (1..=16777216) or delim:TEXT (e.g. delim:\\r\\n)",
        ),
        (tcp(), |p| p.seq_field = Some((0, 2)), "--seq-field applies to ramp udp"),
        (
            tcp(),
            |p| p.request = vec![],
            "the request is empty: each user sends at least one byte (--size, --payload-file)",
        ),
        (
            udp(),
            |p| p.framing = Framing::Delimiter(b"\n".to_vec()),
            "--framing applies to ramp tcp",
        ),
        (udp(), |p| p.request = vec![1; 7], "--size 7: allowed 8..=65507 bytes"),
        (udp(), |p| p.request = vec![1; 65_508], "--size 65508: allowed 8..=65507 bytes"),
        (
            udp(),
            |p| p.seq_field = Some((63, 2)),
            "--seq-field \"63:2\": allowed OFFSET:LEN with LEN 1..=8 inside the 64-byte payload, e.g. 0:2",
        ),
        (
            udp(),
            |p| p.seq_field = Some((0, 9)),
            "--seq-field \"0:9\": allowed OFFSET:LEN with LEN 1..=8 inside the 64-byte payload, e.g. 0:2",
        ),
        (
            udp(),
            |p| p.seq_field = Some((usize::MAX, 2)),
            "--seq-field \"18446744073709551615:2\": allowed OFFSET:LEN with LEN 1..=8 inside the 64-byte payload, e.g. 0:2",
        ),
        (
            udp(),
            |p| {
                p.seq_field = Some((0, 2));
                p.request = vec![];
            },
            "--payload-file 0: allowed 1..=65507 bytes",
        ),
        (
            tcp(),
            |p| p.target = "127.0.0.1:0".parse().unwrap(),
            "target \"127.0.0.1:0\": port 0 is not a port a server listens on; allowed 1..=65535",
        ),
    ];
    for (mut p, edit, want) in rows {
        edit(&mut p);
        let got = p.validate().map_err(|e| e.to_string());
        assert_eq!(got, Err(want.to_string()), "{p:?}");
    }
}

#[test]
fn the_flags_own_checks_give_the_same_text_as_the_plans() {
    // What `tpslab ramp` said before the plan checked itself, for the same values.
    let e = crate::units::parse_seq_field("--seq-field", "63:2", 64).unwrap_err();
    let mut p = udp();
    p.seq_field = Some((63, 2));
    assert_eq!(p.validate().unwrap_err(), e);
    let e = STEP_DURATION
        .check("--step-duration", Duration::from_millis(50))
        .unwrap_err();
    p = tcp();
    p.step = Duration::from_millis(50);
    assert_eq!(p.validate().unwrap_err(), e);
}

#[test]
fn the_plan_serialises_as_before() {
    // Records embed the plan: its JSON (field names, order, defaults) must not change.
    let mut p = udp();
    p.request = vec![1; 8];
    let j = serde_json::to_string(&p).unwrap();
    assert_eq!(
        j,
        r#"{"proto":"udp","target":"127.0.0.1:5001","steps":[1,2,4],"step_ns":3000000000,"warmup_ns":1000000000,"think_ns":0,"timeout_ns":2000000000,"request":[1,1,1,1,1,1,1,1],"framing":"Length","seq_field":null,"knee_gain":0.2,"builtin_server":null,"server_pid":null,"sample_ns":10000000}"#
    );
    p.load_threads = 2;
    let back: RampPlan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);
    assert_eq!(Proto::Tcp.name(), "tcp");
    assert_eq!(Proto::Udp.name(), "udp");
}

fn http() -> RampPlan {
    RampPlan {
        proto: Proto::Http(crate::http::HttpRequest {
            url: "http://127.0.0.1:5001/index.html".into(),
            method: "GET".into(),
            headers: vec![],
            tls: Default::default(),
        }),
        request: vec![],
        ..tcp()
    }
}

#[test]
fn http_plans() {
    assert_eq!(http().validate(), Ok(()));
    assert_eq!(
        Proto::Http(crate::http::HttpRequest {
            url: String::new(),
            method: String::new(),
            headers: vec![],
            tls: Default::default(),
        })
        .name(),
        "http"
    );
    let e = |p: RampPlan| p.validate().unwrap_err().to_string();
    assert_eq!(
        e(RampPlan {
            target: "127.0.0.1:80".parse().unwrap(),
            ..http()
        }),
        "URL \"http://127.0.0.1:5001/index.html\" has port 5001, the target 127.0.0.1:80 another"
    );
    assert_eq!(
        e(RampPlan {
            request: vec![0; (crate::proto::HTTP_BODY_BYTES + 1) as usize],
            ..http()
        }),
        "--body 1048577 bytes: allowed at most 1048576 bytes"
    );
    assert_eq!(
        e(RampPlan {
            framing: Framing::Fixed(3),
            ..http()
        }),
        "--framing applies to ramp tcp"
    );
    assert_eq!(
        e(RampPlan {
            seq_field: Some((0, 2)),
            ..http()
        }),
        "--seq-field applies to ramp udp"
    );
    let mut tls = http();
    tls.proto = Proto::Http(crate::http::HttpRequest {
        url: "https://127.0.0.1:5001/".into(),
        method: "GET".into(),
        headers: vec![],
        tls: Default::default(),
    });
    assert_eq!(tls.validate(), Ok(()));
    // A record says the protocol and the URL; tcp and udp stay plain names.
    let j = serde_json::to_string(&http().proto).unwrap();
    assert_eq!(
        j,
        r#"{"http":{"url":"http://127.0.0.1:5001/index.html","method":"GET","headers":[]}}"#
    );
    assert_eq!(serde_json::to_string(&Proto::Tcp).unwrap(), r#""tcp""#);
}

/// `--protocol redis[:COMMAND]` (tpslab-plan/src/proto.rs): its flag value, its request
/// (the command as a RESP array of bulk strings) and its checks.
#[test]
fn redis_is_a_protocol_of_its_flag_value_request_and_checks() {
    use crate::proto::Builtin;
    assert_eq!(
        Proto::from_flag("redis"),
        Ok(Proto::Redis(vec!["PING".into()]))
    );
    let get = Proto::from_flag("redis:GET  key").unwrap();
    assert_eq!(get, Proto::Redis(vec!["GET".into(), "key".into()]));
    assert_eq!(get.name(), "redis");
    // Output names the command that runs it: there is no `ramp redis`.
    assert_eq!(get.command(), "tcp --protocol redis");
    assert_eq!([Proto::Tcp.command(), Proto::Udp.command()], ["tcp", "udp"]);
    assert_eq!(
        Proto::from_flag("memcached").unwrap_err().to_string(),
        "--protocol \"memcached\": allowed framed, redis or redis:COMMAND (e.g. 'redis:GET key')"
    );
    assert!(get.builtin().unwrap_err().to_string().contains("HOST:PORT"));
    assert_eq!(Proto::Tcp.builtin(), Ok(Builtin::Framed));
    let (req, seq) = get.request(None, vec![b'.'; 1024], false, None).unwrap();
    assert_eq!(
        (&req[..], seq),
        (&b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"[..], None)
    );
    // The framed protocol's flags do not apply.
    for (payload, size, framing, seq) in [
        (Some(vec![1]), 1024, false, None),
        (None, 64, false, None),
        (None, 1024, true, None),
        (None, 1024, false, Some("0:2")),
    ] {
        assert!(get.request(payload, vec![0; size], framing, seq).is_err());
    }
    let plan = RampPlan {
        proto: get.clone(),
        request: req.clone(),
        ..tcp()
    };
    assert_eq!(plan.validate(), Ok(()));
    let e = |p: RampPlan| p.validate().unwrap_err().to_string();
    assert_eq!(
        e(RampPlan {
            request: b"PING\r\n".to_vec(),
            ..plan.clone()
        }),
        "the request has 6 bytes, the command 22 as RESP: the plan's request is its command"
    );
    assert_eq!(
        e(RampPlan {
            proto: Proto::Redis(vec![]),
            request: b"*0\r\n".to_vec(),
            ..plan.clone()
        }),
        "--protocol \"redis:\": allowed redis:COMMAND of 1..=64 words, at most 65536 bytes as RESP"
    );
    assert_eq!(
        e(RampPlan {
            framing: Framing::Fixed(5),
            ..plan
        }),
        "--framing applies to --protocol framed"
    );
}

/// `ramp http --http3`: an `https://` URL's users on QUIC connections; refused on another
/// protocol, with `--http2`, over `http://`, or with a connection-specific header.
#[test]
fn http3_needs_an_https_url_and_is_not_http2() {
    let req = |url: &str, headers: Vec<(String, String)>| crate::http::HttpRequest {
        url: url.into(),
        method: "GET".into(),
        headers,
        tls: Default::default(),
    };
    let h3 = RampPlan {
        proto: Proto::Http(req("https://localhost:5001/", vec![])),
        request: vec![],
        connections: UserConnections::Http3(2),
        ..tcp()
    };
    assert_eq!(h3.validate(), Ok(()));
    let plain = RampPlan {
        proto: Proto::Http(req("http://localhost:5001/", vec![])),
        ..h3.clone()
    };
    let e = plain.validate().unwrap_err().to_string();
    assert!(e.contains("https://HOST[:PORT]/PATH with --http3"), "{e}");
    // Both in a record: refused on reading (a plan cannot hold both).
    let mut both = serde_json::to_value(&h3).unwrap();
    both["http2_connections"] = 2.into();
    let e = serde_json::from_value::<RampPlan>(both)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--http2 and --http3 are two protocols"), "{e}");
    let back: RampPlan = serde_json::from_value(serde_json::to_value(&h3).unwrap()).unwrap();
    assert_eq!(back, h3);
    let tcp3 = RampPlan {
        connections: UserConnections::Http3(2),
        ..tcp()
    };
    assert_eq!(
        tcp3.validate().unwrap_err().to_string(),
        "--http3 applies to ramp http"
    );
    let upgrade = RampPlan {
        proto: Proto::Http(req(
            "https://localhost:5001/",
            vec![("Connection".into(), "close".into())],
        )),
        ..h3.clone()
    };
    let e = upgrade.validate().unwrap_err().to_string();
    assert!(e.contains("no connection-specific header"), "{e}");
    let many = RampPlan {
        connections: UserConnections::Http3(10_001),
        ..h3.clone()
    };
    let e = many.validate().unwrap_err().to_string();
    assert!(e.contains("--connections"), "{e}");
    // Users 1, 2, 4: a fifth connection would have no user.
    let idle = RampPlan {
        connections: UserConnections::Http3(5),
        ..h3.clone()
    };
    assert_eq!(
        idle.validate().unwrap_err().to_string(),
        "--connections 5: allowed 1..=4: at most the last step's users (a connection without a user would stay idle)"
    );
    assert_eq!(
        RampPlan {
            connections: UserConnections::Http3(4),
            ..h3
        }
        .validate(),
        Ok(())
    );
}

/// A ramp's connections between two fields, as in a plan.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Holder {
    a: u8,
    #[serde(flatten, with = "super::connection_keys")]
    c: UserConnections,
    b: u8,
}

/// Each way of connecting writes the keys records always had, in the field's place, and
/// reads back as itself; 0 is a connection per user.
#[test]
fn user_connections_are_written_as_the_keys_records_had_and_read_back() {
    for (c, json) in [
        (UserConnections::PerUser, r#"{"a":1,"b":2}"#),
        (
            UserConnections::Http2(3),
            r#"{"a":1,"http2_connections":3,"b":2}"#,
        ),
        (
            UserConnections::Http3(4),
            r#"{"a":1,"http3_connections":4,"b":2}"#,
        ),
    ] {
        let h = Holder { a: 1, c, b: 2 };
        assert_eq!(serde_json::to_string(&h).unwrap(), json);
        assert_eq!(serde_json::from_str::<Holder>(json).unwrap(), h);
    }
    let h: Holder =
        serde_json::from_str(r#"{"a":1,"http2_connections":0,"http3_connections":0,"b":2}"#)
            .unwrap();
    assert_eq!(h.c, UserConnections::PerUser);
    // In a whole plan: the keys where the fields were, last.
    let p = RampPlan {
        connections: UserConnections::Http2(2),
        ..tcp()
    };
    let text = serde_json::to_string(&p).unwrap();
    assert!(text.ends_with(r#","http2_connections":2}"#), "{text}");
}
