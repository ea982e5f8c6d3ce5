//! The user-space delay line, for real: two fresh namespaces joined by TUN devices.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use tpslab_engine::lab::link::{Link, ADDR_A, ADDR_B};
use tpslab_net::ns::NetNs;
use tpslab_plan::tcp::LinkConfig;

fn root() -> bool {
    // SAFETY-free check: the effective uid from /proc.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_owned));
    if euid.as_deref() != Some("0") {
        crate::common::skip("needs root (CAP_SYS_ADMIN for namespaces, CAP_NET_ADMIN for TUN)");
        return false;
    }
    true
}

/// Median UDP round trip A -> B -> A over `n` pings, ns; and how many came back. Each ping
/// waits up to `wait` for its reply (a late reply is still counted when it comes, and the
/// last ones get another `wait`), so a lossy link costs `wait` per lost ping, not more.
fn ping(a: &NetNs, b: &NetNs, n: usize, wait: Duration) -> (u64, usize) {
    let server = b
        .run(|| UdpSocket::bind(SocketAddr::from((ADDR_B, 7007))).unwrap())
        .unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok((len, peer)) = server.recv_from(&mut buf) {
            if &buf[..len] == b"end" {
                break;
            }
            server.send_to(&buf[..len], peer).unwrap();
        }
    });
    let client = a
        .run(|| UdpSocket::bind(SocketAddr::from((ADDR_A, 0))).unwrap())
        .unwrap();
    client.set_read_timeout(Some(wait)).unwrap();
    client.connect(SocketAddr::from((ADDR_B, 7007))).unwrap();
    let mut rtts = vec![];
    let mut answered = vec![false; n];
    let mut buf = [0u8; 64];
    for i in 0..n as u32 {
        let t = tpslab_net::mono_ns();
        client.send(&i.to_be_bytes()).unwrap();
        // Until this ping's reply or the wait; earlier pings' late replies are counted.
        while let Ok(4) = client.recv(&mut buf) {
            let j = u32::from_be_bytes(buf[..4].try_into().unwrap());
            if let Some(seen) = answered.get_mut(j as usize) {
                *seen = true;
            }
            if j == i {
                rtts.push(tpslab_net::mono_ns() - t);
                break;
            }
        }
    }
    while let Ok(4) = client.recv(&mut buf) {
        let j = u32::from_be_bytes(buf[..4].try_into().unwrap());
        if let Some(seen) = answered.get_mut(j as usize) {
            *seen = true;
        }
    }
    // The echo's end, five times over a lossy link (each lost with the link's loss): else
    // it waits out its 2 s read timeout.
    for _ in 0..5 {
        client.send(b"end").unwrap();
    }
    echo.join().unwrap();
    rtts.sort_unstable();
    let got = answered.iter().filter(|&&a| a).count();
    (rtts.get(rtts.len() / 2).copied().unwrap_or(0), got)
}

#[test]
fn measured_rtt_matches_the_configured_delay() {
    if !root() {
        return;
    }
    let (a, b) = (NetNs::create().unwrap(), NetNs::create().unwrap());
    let cfg = LinkConfig {
        delay: Duration::from_millis(15),
        ..Default::default()
    };
    let link = Link::start(&a, &b, cfg).unwrap();
    let (median, got) = ping(&a, &b, 40, Duration::from_millis(100));
    let st = link.stop();
    assert_eq!(got, 40, "every ping answered: {st:?}");
    let rtt_ms = median as f64 / 1e6;
    eprintln!("configured RTT 30 ms, measured median {rtt_ms:.3} ms; {st:?}");
    assert!(
        (rtt_ms - 30.0).abs() <= 3.0,
        "RTT {rtt_ms} ms not within 10 % of 30 ms"
    );
    assert_eq!(st[0].delivered + st[0].on_line_at_stop, st[0].packets_in);
    assert_eq!(
        st[0].dropped_loss + st[0].dropped_queue + st[0].line_full,
        0
    );
}

#[test]
fn loss_setting_drops_that_share_and_counts_it() {
    if !root() {
        return;
    }
    let (a, b) = (NetNs::create().unwrap(), NetNs::create().unwrap());
    let cfg = LinkConfig {
        delay: Duration::from_micros(100),
        loss: 0.2,
        ..Default::default()
    };
    let link = Link::start(&a, &b, cfg).unwrap();
    // 100 us each way: a reply is in well within 20 ms, and a later one is still counted.
    let (_, got) = ping(&a, &b, 300, Duration::from_millis(20));
    let st = link.stop();
    // Each ping crosses twice: P(answered) = 0.8^2 = 0.64.
    let share = got as f64 / 300.0;
    assert!((0.52..0.76).contains(&share), "answered {share}: {st:?}");
    let a2b = st[0];
    assert_eq!(
        a2b.delivered + a2b.dropped_loss + a2b.on_line_at_stop,
        a2b.packets_in,
        "every packet accounted for: {a2b:?}"
    );
    let p = a2b.dropped_loss as f64 / a2b.packets_in as f64;
    assert!((0.13..0.27).contains(&p), "drop share {p}");
}
