//! Tests of the parent module.
use super::*;

fn load() -> LoadConfig {
    LoadConfig {
        target: "127.0.0.1:9000".parse().unwrap(),
        rate_pps: 1000.0,
        size_bytes: 64,
        duration: Duration::from_secs(1),
        warmup: Duration::ZERO,
        burst: 1,
        threads: 1,
        drain: Duration::from_millis(100),
        run_id: 1,
        ..Default::default()
    }
}

#[test]
fn a_watch_is_bounded_and_watches_something() {
    let w = WatchPlan {
        pid: None,
        port: Some(53),
        interval: Duration::from_millis(10),
        duration: Duration::from_secs(10),
        no_drop_reasons: false,
    };
    assert_eq!(w.validate(), Ok(()));
    let e = WatchPlan {
        duration: Duration::from_secs(u64::MAX),
        ..w.clone()
    }
    .validate()
    .unwrap_err();
    assert!(e.to_string().starts_with("--duration "), "{e}");
    let e = WatchPlan { port: None, ..w }.validate().unwrap_err();
    assert!(e.to_string().contains("--pid PID or --port PORT"), "{e}");
}

#[test]
fn a_run_plan_round_trips_through_json_with_its_payload_in_hex() {
    let p = RunPlan::Udp(Box::new(UdpRunPlan {
        server: Some(ServerConfig::default()),
        load: LoadConfig {
            payload: Some(vec![0x12, 0x34, 0xff]),
            seq_field: Some((0, 2)),
            ..load()
        },
        interval: Duration::from_millis(10),
        target_pid: Some(42),
        watch_port: None,
        no_drop_reasons: false,
    }));
    let text = serde_json::to_string(&p).unwrap();
    assert!(
        text.contains("\"kind\":\"udp\"") && text.contains("\"payload\":\"1234ff\""),
        "{text}"
    );
    assert_eq!(serde_json::from_str::<RunPlan>(&text).unwrap(), p);
    let mut max = p.clone();
    if let RunPlan::Udp(u) = &mut max {
        u.load.rate_pps = f64::INFINITY;
    }
    let text = serde_json::to_string(&max).unwrap();
    assert!(text.contains("\"rate_pps\":\"max\""), "{text}");
    assert_eq!(serde_json::from_str::<RunPlan>(&text).unwrap(), max);
    let w = RunPlan::Watch(WatchPlan {
        pid: None,
        port: Some(53),
        interval: Duration::from_millis(10),
        duration: Duration::from_secs(10),
        no_drop_reasons: false,
    });
    let wtext = serde_json::to_string(&w).unwrap();
    assert!(
        !wtext.contains("no_drop_reasons"),
        "left out when false: {wtext}"
    );
    assert_eq!(serde_json::from_str::<RunPlan>(&wtext).unwrap(), w);
    let RunPlan::Watch(mut off) = w else {
        unreachable!("a watch")
    };
    off.no_drop_reasons = true;
    let off = RunPlan::Watch(off);
    assert_eq!(
        serde_json::from_str::<RunPlan>(&serde_json::to_string(&off).unwrap()).unwrap(),
        off
    );
    for bad in ["\"123\"", "\"zz\"", "\"+f\""] {
        let t = text.replace("\"1234ff\"", bad);
        assert!(serde_json::from_str::<RunPlan>(&t).is_err(), "{t}");
    }
}

#[test]
fn a_sound_plan_passes_and_every_limit_is_named() {
    assert_eq!(load().validate(), Ok(()));
    assert_eq!(ServerConfig::default().validate(), Ok(()));
    let cases: Vec<(LoadConfig, &str)> = vec![
        (
            LoadConfig {
                rate_pps: 0.0,
                ..load()
            },
            "--rate 0: allowed",
        ),
        (
            LoadConfig {
                rate_pps: 2e8,
                ..load()
            },
            "--rate 200000000: allowed",
        ),
        (
            LoadConfig {
                rate_pps: f64::NAN,
                ..load()
            },
            "--rate NaN: allowed",
        ),
        (LoadConfig { burst: 0, ..load() }, "--burst 0: allowed 1..="),
        (
            LoadConfig {
                flows: 2000,
                ..load()
            },
            "--flows 2000: allowed 1..=1024",
        ),
        (
            LoadConfig {
                flows: 1,
                threads: 2,
                ..load()
            },
            "--flows 1 is fewer than the 2 sender threads",
        ),
        (
            LoadConfig {
                pacing_slack: PacingSlack::Given(Duration::from_millis(3)),

                phase: Duration::ZERO,

                keep_histograms: false,
                ..load()
            },
            "--pacing-slack 3ms: allowed 0s..=2ms",
        ),
        (
            LoadConfig {
                rate_pps: f64::INFINITY,
                pacing_slack: PacingSlack::Given(Duration::from_millis(1)),

                phase: Duration::ZERO,

                keep_histograms: false,
                ..load()
            },
            "--pacing-slack does not apply",
        ),
        (
            LoadConfig {
                rate_pps: f64::INFINITY,
                burst: 2,
                ..load()
            },
            "--burst does not apply",
        ),
        (
            LoadConfig {
                size_bytes: 39,
                ..load()
            },
            "--size 39: allowed 40..=65507 bytes",
        ),
        (
            LoadConfig {
                payload: Some(vec![]),
                ..load()
            },
            "--payload-file 0: allowed 1..=65507 bytes",
        ),
        (
            LoadConfig {
                seq_field: Some((0, 2)),
                ..load()
            },
            "--seq-field needs --payload-file",
        ),
        (
            LoadConfig {
                payload: Some(vec![0; 10]),
                seq_field: Some((usize::MAX, 2)),
                ..load()
            },
            "inside the 10-byte payload",
        ),
        (
            LoadConfig {
                duration: Duration::ZERO,
                ..load()
            },
            "--duration 0s: allowed 1ns..=1day",
        ),
        (
            LoadConfig {
                warmup: Duration::from_secs(7200),
                ..load()
            },
            "--warmup 2h: allowed",
        ),
        (
            LoadConfig {
                drain: Duration::from_secs(61),
                ..load()
            },
            "--drain 1m 1s: allowed",
        ),
        (
            LoadConfig {
                threads: 0,
                ..load()
            },
            "--load-threads 0: allowed 1..=256",
        ),
    ];
    for (cfg, want) in cases {
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains(want), "{e:?} lacks {want:?}");
    }
    let s = ServerConfig::default;
    for (cfg, want) in [
        (
            ServerConfig { threads: 0, ..s() },
            "--threads 0: allowed 1..=1024",
        ),
        (
            ServerConfig { batch: 1025, ..s() },
            "--batch 1025: allowed 1..=1024",
        ),
        (
            ServerConfig {
                rcvbuf: Some(0),
                ..s()
            },
            "--rcvbuf 0: allowed 1..=1073741823 bytes",
        ),
        (
            ServerConfig {
                work: Duration::from_secs(2),
                ..s()
            },
            "--work 2s: allowed 0s..=1s",
        ),
        (
            ServerConfig {
                busy_poll_us: Some(u32::MAX),
                ..s()
            },
            "--busy-poll 4294967295: allowed 0..=1000000 us",
        ),
    ] {
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains(want), "{e:?} lacks {want:?}");
    }
}

#[test]
fn the_mean_rate_follows_the_bursts_and_a_rate_that_disagrees_is_refused() {
    let ms = Duration::from_millis;
    assert_eq!(mean_rate(None, 1, None), Ok(10_000.0));
    assert_eq!(mean_rate(Some(f64::INFINITY), 1, None), Ok(f64::INFINITY));
    assert_eq!(mean_rate(None, 100, Some(ms(10))), Ok(10_000.0));
    // Within half a datagram per second: agrees.
    assert!((mean_rate(Some(3333.0), 100, Some(ms(30))).unwrap() - 3333.333).abs() < 0.001);
    let e = mean_rate(Some(5000.0), 100, Some(ms(10)))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "--rate 5000 disagrees with --burst 100 --burst-interval 10ms (10000 pps mean); give --rate with --burst, or --burst with --burst-interval");
    let e = mean_rate(None, 100, Some(ms(0))).unwrap_err().to_string();
    assert_eq!(
        e,
        "--burst-interval 0: allowed a positive duration, e.g. 50ms"
    );
    let e = mean_rate(None, 100_000_000, Some(ms(1)))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--burst 100000000"), "{e}");
    assert!(mean_rate(None, 0, None)
        .unwrap_err()
        .to_string()
        .starts_with("--burst 0: allowed 1..="));
}

#[test]
fn a_pacing_slack_reads_back_auto_given_and_absent_as_exact() {
    let json = |c: &LoadConfig| serde_json::to_value(c).unwrap();
    let back = |v: serde_json::Value| serde_json::from_value::<LoadConfig>(v).unwrap();
    // The command line's default is auto, written as such.
    let auto = load();
    assert_eq!(auto.pacing_slack, PacingSlack::Auto);
    assert_eq!(json(&auto)["pacing_slack"], "auto");
    assert_eq!(back(json(&auto)), auto);
    // A given slack keeps the shape plans always had.
    let given = LoadConfig {
        pacing_slack: PacingSlack::Given(Duration::from_millis(1)),
        ..load()
    };
    assert_eq!(
        json(&given)["pacing_slack"],
        serde_json::json!({"secs": 0, "nanos": 1_000_000})
    );
    assert_eq!(back(json(&given)), given);
    // Exact is left out, and a plan without the field (written before auto) ran exact.
    let exact = LoadConfig {
        pacing_slack: PacingSlack::exact(),
        ..load()
    };
    let mut v = json(&exact);
    assert!(v.get("pacing_slack").is_none());
    assert_eq!(back(v.clone()).pacing_slack, PacingSlack::exact());
    v["pacing_slack"] = "soon".into();
    let e = serde_json::from_value::<LoadConfig>(v)
        .unwrap_err()
        .to_string();
    assert!(e.contains("allowed a duration or \"auto\""), "{e}");
    // The flag's forms.
    use crate::udp::parse_pacing_slack as p;
    assert_eq!(p("--pacing-slack", "auto").unwrap(), PacingSlack::Auto);
    assert_eq!(p("--pacing-slack", "0").unwrap(), PacingSlack::exact());
    assert_eq!(
        p("--pacing-slack", "250us").unwrap(),
        PacingSlack::Given(Duration::from_micros(250))
    );
    assert_eq!(
        p("--pacing-slack", "soon").unwrap_err().to_string(),
        "--pacing-slack soon: allowed auto, 0 (exact) or a duration (200us, 1ms)"
    );
    assert_eq!(PacingSlack::Auto.to_string(), "auto");
    assert_eq!(PacingSlack::exact().to_string(), "0");
    assert_eq!(
        PacingSlack::Given(Duration::from_micros(250)).to_string(),
        "250us"
    );
}

#[test]
fn a_memcached_request_is_framed_and_a_dns_query_is_not() {
    let get = b"\x00\x00\x00\x00\x00\x01\x00\x00get k\r\n".to_vec();
    let with = |payload: Vec<u8>, seq_field| LoadConfig {
        payload: Some(payload),
        seq_field,
        ..load()
    };
    assert_eq!(
        with(get.clone(), Some((0, 2))).frame_header(),
        Some(FrameHeader::Memcached)
    );
    assert!(is_memcached_request(
        b"\x00\x07\x00\x00\x00\x01\x00\x00stats\r\n"
    ));
    // The request id must be the field replies are matched by.
    assert_eq!(with(get.clone(), Some((2, 2))).frame_header(), None);
    assert_eq!(with(get.clone(), None).frame_header(), None);
    // A request of several datagrams, a word that is not a command, a command glued to
    // its argument, too short: not memcached.
    assert!(!is_memcached_request(
        b"\x00\x00\x00\x00\x00\x02\x00\x00get k\r\n"
    ));
    assert!(!is_memcached_request(
        b"\x00\x00\x00\x00\x00\x01\x00\x00getk\r\n"
    ));
    assert!(!is_memcached_request(
        b"\x00\x00\x00\x00\x00\x01\x00\x00hello k\r\n"
    ));
    assert!(!is_memcached_request(b"\x00\x00\x00\x00\x00\x01\x00"));
    // A DNS query with flags 0, one question, no answers: the same 8 bytes, then counts
    // and a name.
    let dns = b"\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\x07example\x03com\x00\x00\x01\x00\x01";
    assert_eq!(with(dns.to_vec(), Some((0, 2))).frame_header(), None);
}
