//! The observer between its full socket scans (one a second): a socket of the target
//! bound after the observer started is found while the run goes, not only by the last
//! sample, and its drops since it was bound are counted exactly.

use std::net::UdpSocket;
use std::time::{Duration, Instant};
use tpslab_engine::observe::{Observer, ObserverConfig};

/// Drops of the socket on `local` in this process's namespace (/proc/net/udp).
fn drops_of(local: std::net::SocketAddr) -> u64 {
    let text = std::fs::read_to_string("/proc/self/net/udp").unwrap();
    let socks = tpslab_proc::parse_udp(text.as_bytes(), "/proc/net/udp").unwrap();
    socks
        .iter()
        .find(|s| s.local == local)
        .and_then(|s| s.drops)
        .expect("the socket is listed")
}

#[test]
fn a_socket_bound_after_the_start_is_found_during_the_run_with_its_drops() {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = a.local_addr().unwrap().port();
    let obs = Observer::start(ObserverConfig {
        interval: Duration::from_millis(10),
        net_root: "/proc/self".into(),
        target_inodes: vec![],
        target_port: Some(port),
        target_addr: None,
        gen_sockets: None,
        target_pid: None,
        target_tids: vec![],
        count_io: None,
        read_probe: None,
        send_probe: None,
        tcp_inodes: vec![],
        live: None,
        live_latency: None,
    });
    // Several slow samples pass: socket A is followed by sock_diag lookups.
    std::thread::sleep(Duration::from_millis(350));
    let t_bound = Instant::now();
    let b = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    // The smallest buffer the kernel allows: most of the datagrams below are dropped.
    b.set_recv_buffer_size(1).unwrap();
    let b_addr: std::net::SocketAddr = format!("127.0.0.2:{port}").parse().unwrap();
    b.bind(&b_addr.into()).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..300 {
        tx.send_to(&[7u8; 1000], b_addr).unwrap();
    }
    let dropped = drops_of(b_addr);
    assert!(dropped > 200, "{dropped} dropped");
    // Longer than one scan period (1 s) and then some.
    std::thread::sleep(Duration::from_millis(1600));
    let bound_ms = t_bound.elapsed().as_secs_f64() * 1e3;
    let rep = obs.stop();
    assert_eq!(rep.deltas["server_sockets_found"], 2, "{:?}", rep.deltas);
    assert_eq!(rep.deltas["server_drops"], dropped, "{:?}", rep.deltas);
    // B's queue was seen while the run went, within about a scan period of its bind:
    // found by a scan during the run, not only by the last sample.
    let t = &rep.series.t_ms;
    let q = &rep.series.values["server_rx_queue_bytes"];
    let end = *t.last().unwrap();
    let seen = t
        .iter()
        .zip(q)
        .filter(|(_, &v)| v > 0.0)
        .map(|(&t, _)| t)
        .next()
        .expect("B's queue in a sample");
    assert!(
        seen < end - 100.0,
        "first seen at {seen:.0} ms, run ended at {end:.0} ms: only the last sample found it"
    );
    assert!(
        seen > end - bound_ms - 50.0,
        "seen at {seen:.0} ms, before B was bound ({:.0} ms before the end)",
        bound_ms
    );
    drop((a, b));
}

/// The generator's own sockets are read in place (getsockopt SO_MEMINFO), never through
/// the socket tables: their drops during the run are counted from the first sample's
/// baseline, their queue is in the series, and they are never taken for the target's
/// (here the target port is theirs).
#[test]
fn the_generators_own_sockets_are_read_in_place_from_a_baseline() {
    let gen = std::sync::Arc::new(
        tpslab_net::UdpSock::bind("127.0.0.1:0".parse().unwrap(), false).unwrap(),
    );
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = gen.local_addr();
    // Drops before the run are not the run's.
    for _ in 0..1000 {
        tx.send_to(&[1u8; 1000], to).unwrap();
    }
    let before = gen.meminfo().unwrap().drops;
    assert!(
        before > 0,
        "the default buffer holds fewer than 1000 datagrams"
    );
    let inode = gen.inode().unwrap();
    let g = gen.clone();
    let probe = tpslab_engine::observe::OwnSockets::new(vec![inode], move |into| {
        into.push(tpslab_engine::observe::OwnSocket {
            inode,
            connected: false,
            mem: g.meminfo().map_err(|e| e.to_string())?,
        });
        Ok(())
    });
    let obs = Observer::start(ObserverConfig {
        interval: Duration::from_millis(10),
        net_root: "/proc/self".into(),
        target_inodes: vec![],
        target_port: Some(to.port()),
        target_addr: None,
        gen_sockets: Some(probe),
        target_pid: None,
        target_tids: vec![],
        count_io: None,
        read_probe: None,
        send_probe: None,
        tcp_inodes: vec![],
        live: None,
        live_latency: None,
    });
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..500 {
        tx.send_to(&[1u8; 1000], to).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let during = gen.meminfo().unwrap().drops - before;
    assert!(
        during >= 500 - 10,
        "{during}: the queue was full, nearly all dropped"
    );
    let rep = obs.stop();
    assert_eq!(rep.deltas["gen_drops"], during, "{:?}", rep.deltas);
    assert_eq!(rep.deltas["server_drops"], 0, "{:?}", rep.deltas);
    assert_eq!(rep.deltas["server_sockets_found"], 0, "{:?}", rep.deltas);
    let q = &rep.series.values["gen_rx_queue_bytes"];
    assert!(
        q.iter().all(|&v| v > 0.0),
        "the full queue in every sample: {q:?}"
    );
}
