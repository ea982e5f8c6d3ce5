use super::*;
use std::time::Duration;
use tpslab_plan::time::nanos;
use tpslab_record::{Body, Record};

/// A sample at `t_ms` with `acked` bytes and chronographs in us; 30 ms RTT, MSS
/// 1448, the state given by `flight`, `window`, `cwnd_segs`.
#[allow(clippy::too_many_arguments)]
fn sample(
    t_ms: u64,
    acked: u64,
    busy: u64,
    rwnd: u64,
    sndbuf: u64,
    flight: u64,
    window: u32,
    cwnd_segs: u32,
) -> TcpSample {
    TcpSample {
        t_ns: t_ms * 1_000_000,
        bytes_acked: acked,
        rtt_us: 30_000,
        mss: 1448,
        cwnd_segs,
        peer_window_bytes: window,
        in_flight_bytes: flight,
        busy_us: busy,
        rwnd_limited_us: rwnd,
        sndbuf_limited_us: sndbuf,
        chronos: true,
        ..Default::default()
    }
}

#[test]
fn s4_receive_window_limited_flow_despite_low_kernel_chronograph() {
    // 1 s at 64 KiB per 30 ms RTT: 2184533 bytes; flight at the window; the kernel's
    // rwnd_limited chronograph says only 22 % (as measured on 6.18).
    let s = [
        sample(1000, 100_000, 1_000_000, 220_000, 0, 65000, 65536, 134),
        sample(
            2000,
            100_000 + 2_184_533,
            2_000_000,
            440_000,
            12_000,
            65000,
            65536,
            134,
        ),
    ];
    let a = analyse(&s, 0, Some(131072)).unwrap();
    assert!((a.throughput_bps / 1e6 - 17.476).abs() < 0.01, "{a:?}");
    assert_eq!(a.held_by, Limit::ReceiveWindow);
    assert_eq!(a.shares, [1.0, 0.0, 0.0, 0.0]);
    let k = a.kernel_chronos.unwrap();
    assert!(
        (k[0] - 0.22).abs() < 1e-9 && (k[1] - 0.012).abs() < 1e-9,
        "{k:?}"
    );
    // The ceiling from the window and RTT is window / RTT.
    assert!((a.window_ceiling_bps / 1e6 - 17.476).abs() < 0.01);
    let v = verdict(&a);
    assert!(
        v.contains("receiver's window 100 %") && v.contains("17.5 Mbit/s"),
        "{v}"
    );
}

#[test]
fn each_limit_is_named() {
    // (busy us in 1 s, sndbuf us, flight, window, cwnd segs, SO_SNDBUF) -> limit
    let cases = [
        (
            (1_000_000, 0, 800_000, 818_000, 1300, None),
            Limit::ReceiveWindow,
        ),
        (
            (1_000_000, 0, 280_000, 620_000, 195, None),
            Limit::CongestionWindow,
        ),
        // S4 with only the sender's buffer at 64 KiB: flight 95 KB, far below both
        // windows; the kernel saw the buffer full 41 % of the time.
        (
            (1_000_000, 410_000, 95_000, 620_000, 193, None),
            Limit::SendBuffer,
        ),
        // Same without chronograph evidence: the granted buffer is half full.
        (
            (1_000_000, 0, 95_000, 620_000, 193, Some(131_072)),
            Limit::SendBuffer,
        ),
        // Busy a fifth of the time: the writer had nothing to send.
        (
            (200_000, 0, 1_000, 620_000, 193, Some(131_072)),
            Limit::Application,
        ),
        // Busy, but with room everywhere: still the application.
        (
            (1_000_000, 0, 20_000, 620_000, 193, Some(4_000_000)),
            Limit::Application,
        ),
    ];
    for ((busy, sndbuf, flight, window, cwnd, so_sndbuf), want) in cases {
        let s = [
            sample(0, 0, 0, 0, 0, flight, window, cwnd),
            sample(1000, 1000, busy, 0, sndbuf, flight, window, cwnd),
        ];
        let a = analyse(&s, 0, so_sndbuf).unwrap();
        assert_eq!(a.held_by, want, "{busy} {sndbuf} {flight} {window} {cwnd}");
        let sum: f64 = a.shares.iter().sum();
        assert!((sum - 1.0).abs() < 1e-9);
        assert!(!verdict(&a).is_empty());
    }
}

#[test]
fn shares_split_by_interval_time() {
    // 300 ms at the window, then 100 ms at cwnd.
    let s = [
        sample(0, 0, 0, 0, 0, 60_000, 65_536, 200),
        sample(300, 1, 300_000, 0, 0, 60_000, 65_536, 200),
        sample(400, 2, 400_000, 0, 0, 100_000, 900_000, 70),
    ];
    let a = analyse(&s, 0, None).unwrap();
    assert!(
        (a.shares[0] - 0.75).abs() < 1e-9 && (a.shares[2] - 0.25).abs() < 1e-9,
        "{:?}",
        a.shares
    );
    assert_eq!(a.held_by, Limit::ReceiveWindow);
}

#[test]
fn receiver_side_window_bound_or_not() {
    let rx = |t_ms: u64, got: u64, wnd: u32| TcpSample {
        t_ns: t_ms * 1_000_000,
        bytes_received: got,
        rcv_rtt_us: 30_000,
        rcv_wnd_bytes: wnd,
        timestamps: true,
        ..Default::default()
    };
    // 80 KiB window at 30 ms: 21.8 Mbit/s allowed; 20 Mbit/s made: window-bound.
    let s = [rx(0, 0, 81920), rx(1000, 2_500_000, 81920)];
    let a = analyse_receiver(&s, 0).unwrap();
    assert!(
        (a.throughput_bps - 20e6).abs() < 1.0 && a.window_bound == Some(true),
        "{a:?}"
    );
    assert!(verdict_receiver(&a).contains("held by this side's receive window"));
    // A 1 MiB window at 30 ms allows 280 Mbit/s; 20 made: the sender side holds it.
    let s = [rx(0, 0, 1 << 20), rx(1000, 2_500_000, 1 << 20)];
    let a = analyse_receiver(&s, 0).unwrap();
    assert_eq!(a.window_bound, Some(false));
    assert!(verdict_receiver(&a).contains("sending side"));
    // Without timestamps the receiver's RTT is one window's time: no verdict.
    let mut s = s;
    s[1].timestamps = false;
    let a = analyse_receiver(&s, 0).unwrap();
    assert_eq!(a.window_bound, None);
    assert!(verdict_receiver(&a).contains("cannot be told"));
    // No advertised window reported (older kernels): no verdict.
    assert!(analyse_receiver(&[rx(0, 0, 0), rx(1000, 1, 0)], 0).is_none());
}

#[test]
fn skip_and_degenerate_inputs() {
    let s = [
        sample(0, 0, 0, 0, 0, 1, 65536, 10),
        sample(500, 10, 500_000, 0, 0, 1, 65536, 10),
        sample(1500, 1_000_010, 1_500_000, 0, 0, 1, 65536, 10),
    ];
    // Skipping the first 0.5 s uses the last two samples only.
    let a = analyse(&s, 400_000_000, None).unwrap();
    assert_eq!(a.bytes, 1_000_000);
    assert!((a.seconds - 1.0).abs() < 1e-12);
    assert!(analyse(&s[..1], 0, None).is_none());
    assert!(analyse(&[], 0, None).is_none());
    // Without chronographs the window evidence still decides.
    let mut no_chrono = s;
    for x in &mut no_chrono {
        x.chronos = false;
        x.in_flight_bytes = 65000;
    }
    let a = analyse(&no_chrono, 0, None).unwrap();
    assert_eq!(a.held_by, Limit::ReceiveWindow);
    assert!(a.kernel_chronos.is_none());
}

// The judgement a `tpslab tcp` record keeps is a function of its samples and plan.

fn fixture() -> TcpRecord {
    let text = include_str!("../../tpslab-report/tests/fixtures/tcp_lab.json");
    match Record::from_json(text).expect("a record").body {
        Body::Tcp(t) => t,
        _ => panic!("a tcp record"),
    }
}

#[test]
fn the_judgement_is_a_function_of_the_samples_and_the_plan() {
    let rec = fixture();
    for run in &rec.runs {
        let again = crate::tcp::judge_run(run.flow.clone(), run.lab.clone(), nanos(&rec.plan.skip));
        assert_eq!(&again, run);
    }
    // S4 in the lab: the first run, window-bound, misses 80 Mbit/s; the gate says so.
    let first = rec.runs[0].analysis.as_ref().unwrap();
    assert_eq!(first.held_by, tpslab_record::tcp::Limit::ReceiveWindow);
    let o = crate::tcp::outcome(&rec);
    assert!(o.invalid.is_empty());
    assert!(o
        .target
        .unwrap()
        .unwrap()
        .contains("short of the 80.0 Mbit/s target"));
    // Too few samples after the skip: invalid, never judged.
    let mut short = rec.clone();
    short.plan.skip = Duration::from_nanos(u64::MAX);
    short.runs = vec![crate::tcp::judge_run(
        rec.runs[0].flow.clone(),
        None,
        u64::MAX,
    )];
    assert!(short.runs[0].analysis.is_none() && short.runs[0].verdict.is_none());
    assert_eq!(crate::tcp::outcome(&short).invalid.len(), 1);
}

#[test]
fn a_watched_flow_is_judged_by_the_way_its_data_moved() {
    let rec = fixture();
    let samples = rec.runs[0].flow.samples.clone();
    let flow = |samples: Vec<TcpSample>| WatchedFlow {
        local: "127.0.0.1:40000".parse().unwrap(),
        remote: "127.0.0.1:5001".parse().unwrap(),
        inode: 1,
        sndbuf: 131072,
        rcvbuf: 131072,
        samples,
    };
    let w = crate::tcp::judge_watched(flow(samples.clone()), nanos(&rec.plan.skip));
    assert_eq!(w.direction, Direction::Sending);
    assert!(w.throughput_bps() > 1e6 && w.rtt_ms() > 29.0);
    let still: Vec<TcpSample> = samples
        .iter()
        .map(|s| TcpSample {
            bytes_acked: 7,
            ..*s
        })
        .collect();
    let idle = crate::tcp::judge_watched(flow(still), 0);
    assert_eq!(idle.direction, Direction::Idle);
    assert!(idle.verdict.is_none() && idle.throughput_bps() == 0.0);
}
