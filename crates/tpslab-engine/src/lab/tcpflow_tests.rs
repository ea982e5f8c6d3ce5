use super::*;

#[test]
fn flow_into_sink_on_loopback_counts_every_byte() {
    let sink = SinkServer::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        rcvbuf: None,
        source: false,
        sndbuf: None,
    })
    .unwrap();
    let plan = FlowPlan {
        target: sink.local_addr(),
        duration: std::time::Duration::from_millis(300),
        interval: std::time::Duration::from_millis(50),
        sndbuf: Some(256 * 1024),
        write_bytes: 64 * 1024,
        reverse: false,
        rcvbuf: None,
    };
    let s = connect(plan.target, plan.sndbuf, None, Duration::from_secs(1)).unwrap();
    let rec = run_flow(s, plan, 0, &AtomicBool::new(false)).unwrap();
    assert!(rec.error.is_none(), "{:?}", rec.error);
    assert!(rec.sndbuf_granted >= 256 * 1024);
    assert!(rec.samples.len() >= 5, "{}", rec.samples.len());
    let acked = rec.samples.last().unwrap().bytes_acked;
    assert!(acked > 1_000_000, "{acked}");
    // Acked bytes were read by the sink (it may have read a little more since).
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while sink.bytes() < acked && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(sink.bytes() >= acked && sink.bytes() <= rec.bytes_written);
    assert_eq!(sink.connections(), 1);
}

#[test]
fn reverse_flow_from_a_source_counts_what_it_reads() {
    let src = SinkServer::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        rcvbuf: None,
        source: true,
        sndbuf: None,
    })
    .unwrap();
    let plan = FlowPlan {
        target: src.local_addr(),
        duration: std::time::Duration::from_millis(300),
        interval: std::time::Duration::from_millis(50),
        sndbuf: None,
        write_bytes: 64 * 1024,
        reverse: true,
        rcvbuf: Some(1 << 20),
    };
    let s = connect(plan.target, None, plan.rcvbuf, Duration::from_secs(1)).unwrap();
    let rec = run_flow(s, plan, 0, &AtomicBool::new(false)).unwrap();
    assert!(rec.error.is_none(), "{:?}", rec.error);
    assert_eq!(rec.bytes_written, 0);
    let got = rec.samples.last().unwrap().bytes_received;
    // What TCP received is what was read, plus what still waits in the queue.
    assert!(
        rec.bytes_read > 1_000_000 && got >= rec.bytes_read,
        "{got} {}",
        rec.bytes_read
    );
    // The window is advertised (tcpi_rcv_wnd read); it may be 0 at one sample when
    // the reader fell behind on a loaded machine, so not "at the last sample".
    assert!(rec.samples.iter().any(|s| s.rcv_wnd_bytes > 0));
    assert!(src.stop() >= got);
}

#[test]
fn watch_finds_this_process_flow_by_pid() {
    let sink = SinkServer::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        rcvbuf: None,
        source: false,
        sndbuf: None,
    })
    .unwrap();
    let plan = FlowPlan {
        target: sink.local_addr(),
        duration: std::time::Duration::from_millis(600),
        interval: std::time::Duration::from_millis(50),
        sndbuf: None,
        write_bytes: 64 * 1024,
        reverse: false,
        rcvbuf: None,
    };
    let s = connect(plan.target, None, None, Duration::from_secs(1)).unwrap();
    let mine = s.local_addr().unwrap();
    let stop = AtomicBool::new(false);
    let flows = std::thread::scope(|sc| {
        let h = sc.spawn(|| run_flow(s, plan, 0, &stop).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        let flows = watch_flows(
            Some(std::process::id()),
            None,
            300_000_000,
            50_000_000,
            &stop,
            None,
        )
        .unwrap();
        h.join().unwrap();
        flows
    });
    let f = flows
        .iter()
        .find(|f| f.local == mine)
        .expect("the sending flow");
    assert!(f.samples.len() >= 5, "{}", f.samples.len());
    let (a, b) = (
        f.samples[0].bytes_acked,
        f.samples.last().unwrap().bytes_acked,
    );
    assert!(b > a, "bytes acknowledged grew: {a} -> {b}");
    // The sink's accepted side is in this process too: its flow receives.
    let peer = flows
        .iter()
        .find(|f| f.remote == mine)
        .expect("the sink's side");
    assert!(peer.samples.last().unwrap().bytes_received > 0);
}

#[test]
fn refused_connection_is_an_error_naming_the_target() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    let e = connect(a, None, None, Duration::from_secs(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("connect {a}")), "{e}");
}
