//! The TCP plan's tests: every limit and combination checked with the flag named, buffers
//! limited and shown in their unit, a flow carrying its plan's settings, and a plan's
//! round trip through JSON.

use super::*;

fn plan(mode: TcpMode) -> TcpPlan {
    TcpPlan {
        mode,
        duration: Duration::from_secs(10),
        interval: Duration::from_millis(100),
        skip: Duration::from_secs(1),
        sndbuf: None,
        rcvbuf: None,
        write_bytes: 131072,
        target_rate_bps: None,
    }
}

fn lab(rtt_ms: u64) -> TcpMode {
    TcpMode::Lab {
        link: LinkConfig {
            delay: Duration::from_micros(rtt_ms * 500),
            ..Default::default()
        },
        sink_rcvbuf: None,
        verify: true,
    }
}

#[test]
fn every_limit_and_combination_is_checked_with_the_flag_named() {
    let to = TcpMode::Send {
        target: "127.0.0.1:5001".parse().unwrap(),
    };
    assert_eq!(plan(to).validate(), Ok(()));
    assert_eq!(plan(lab(30)).validate(), Ok(()));
    let cases: Vec<(TcpPlan, &str)> = vec![
        (
            TcpPlan {
                duration: Duration::from_secs(1),
                ..plan(to)
            },
            "--skip 1s leaves",
        ),
        (
            TcpPlan {
                interval: Duration::from_micros(500),
                ..plan(to)
            },
            "--interval 500us",
        ),
        (
            TcpPlan {
                sndbuf: Some(1 << 31),
                ..plan(to)
            },
            "--sndbuf 2147483648",
        ),
        (
            TcpPlan {
                write_bytes: 0,
                ..plan(to)
            },
            "--write-size 0",
        ),
        (
            TcpPlan {
                rcvbuf: Some(65536),
                ..plan(to)
            },
            "--rcvbuf applies with --reverse",
        ),
        (
            TcpPlan {
                target_rate_bps: Some(f64::NAN),
                ..plan(to)
            },
            "--target-rate NaN",
        ),
        (plan(lab(11_000)), "--lab-rtt 11s"),
        (plan(lab(0)), "--lab-rtt 0s"),
        (
            TcpPlan {
                mode: TcpMode::Reverse {
                    target: "127.0.0.1:1".parse().unwrap(),
                },
                sndbuf: Some(65536),
                ..plan(to)
            },
            "--sndbuf is the sender's",
        ),
        (
            plan(TcpMode::Watch {
                pid: None,
                port: None,
            }),
            "--watch-pid",
        ),
    ];
    for (p, want) in cases {
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
}

#[test]
fn buffers_are_limited_and_shown_in_their_unit() {
    assert_eq!(check_buffer("--sndbuf", 65536), Ok(65536));
    let e = check_buffer("--sndbuf", 2 << 30).unwrap_err().to_string();
    assert_eq!(e, "--sndbuf 2GiB: allowed 1KiB to 1023MiB");
    let e = check_write_size(32 << 20).unwrap_err().to_string();
    assert_eq!(e, "--write-size 32MiB: allowed 1 byte to 16MiB");
    let e = check_buffer("--sink-rcvbuf", 1000).unwrap_err().to_string();
    assert_eq!(e, "--sink-rcvbuf 1000: allowed 1KiB to 1023MiB");
}

#[test]
fn the_flow_of_a_plan_carries_its_settings() {
    let p = TcpPlan {
        rcvbuf: Some(65536),
        ..plan(TcpMode::Reverse {
            target: "127.0.0.1:1".parse().unwrap(),
        })
    };
    let f = p.flow("127.0.0.1:1".parse().unwrap(), None);
    assert!(f.reverse);
    assert_eq!(f.rcvbuf, Some(65536));
    assert_eq!(
        (f.duration, f.write_bytes),
        (Duration::from_secs(10), 131072)
    );
}

#[test]
fn a_plan_round_trips_through_json_with_its_mode_named() {
    let p = plan(lab(30));
    let v = serde_json::to_value(p).unwrap();
    assert_eq!(v["mode"], "lab");
    assert_eq!(v["link"]["delay_ns"], 15_000_000);
    assert_eq!(serde_json::from_value::<TcpPlan>(v).unwrap(), p);
}
