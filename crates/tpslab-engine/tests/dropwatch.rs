//! Drop reasons from `skb:kfree_skb` against the kernel (root): datagrams sent to a port
//! nobody listens on die as NO_SOCKET, datagrams a full socket cannot take as
//! SOCKET_RCVBUFF, in a network namespace of the test's own. The tracepoint is host-wide,
//! so the counts are at least the test's own drops (another process may drop too).

use crate::common;

use common::skip;
use std::net::UdpSocket;
use std::time::Duration;
use tpslab_engine::observe::dropwatch::{grown, DropReasons, DropSampler};
use tpslab_net::ns::NetNs;

/// `Udp: RcvbufErrors` and `NoPorts` of the calling thread's network namespace.
fn udp_counters() -> (u64, u64) {
    // /proc/net is the main thread's namespace; this thread's is under thread-self.
    let s = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
    let snmp = tpslab_proc::parse_snmp(s.as_bytes(), "/proc/net/snmp").unwrap();
    let u = snmp.udp.unwrap();
    (u.rcvbuf_errors, u.no_ports)
}

#[test]
fn no_socket_and_rcvbuf_drops_by_reason() {
    if !tpslab_net::is_root() {
        return skip("needs root");
    }
    let d = match DropReasons::start() {
        Ok(d) => d,
        Err(e) => return skip(&e.to_string()),
    };
    let sampler = DropSampler::start().unwrap();
    assert!(d.reasons() > 50, "{} reasons", d.reasons());
    let before = d.read().unwrap();
    let ns = NetNs::create().unwrap();
    let (rcvbuf, noports) = ns
        .run(|| {
            let (r0, n0) = udp_counters();
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            // A port nobody listens on: bound, then closed.
            let closed = UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap();
            for _ in 0..300 {
                let _ = tx.send_to(b"nobody", closed);
            }
            // A socket that never reads, with the smallest buffer: most of 2000 die.
            let rx =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
            rx.set_recv_buffer_size(1).unwrap();
            rx.bind(
                &"127.0.0.1:0"
                    .parse::<std::net::SocketAddr>()
                    .unwrap()
                    .into(),
            )
            .unwrap();
            let to = rx.local_addr().unwrap().as_socket().unwrap();
            for _ in 0..2000 {
                let _ = tx.send_to(&[0u8; 512], to);
            }
            std::thread::sleep(Duration::from_millis(50));
            let (r1, n1) = udp_counters();
            (r1 - r0, n1 - n0)
        })
        .unwrap();
    let after = d.read().unwrap();
    let g = grown(&before, &after);
    let of = |r: &str| g.iter().find(|(n, _)| n == r).map_or(0, |(_, c)| *c);
    eprintln!("namespace: RcvbufErrors {rcvbuf}, NoPorts {noports}; reasons: {g:?}");
    assert_eq!(noports, 300);
    assert!(rcvbuf > 1500, "{rcvbuf}");
    assert!(of("NO_SOCKET") >= noports, "{g:?}");
    assert!(of("SOCKET_RCVBUFF") >= rcvbuf, "{g:?}");
    // Sampled, one event per drop: the same drops, none lost.
    let s = sampler.stop();
    eprintln!("sampled: {s:?}");
    let sof = |r: &str| {
        s.by_reason
            .iter()
            .find(|(n, _)| n == r)
            .map_or(0, |(_, c)| *c)
    };
    assert_eq!(s.lost, 0);
    assert!(sof("NO_SOCKET") >= noports, "{s:?}");
    assert!(sof("SOCKET_RCVBUFF") >= rcvbuf, "{s:?}");
    // Where: named through /proc/kallsyms, in UDP's receive path (udp_queue_rcv_one_skb,
    // __udp4_lib_rcv, ...), and never more than the reason's count.
    let site = |r: &str| {
        s.by_site
            .iter()
            .filter(|(n, _, _)| n == r)
            .max_by_key(|x| x.2)
            .cloned()
    };
    for (reason, least) in [("NO_SOCKET", noports), ("SOCKET_RCVBUFF", rcvbuf)] {
        let (_, f, c) = site(reason).unwrap_or_else(|| panic!("no site for {reason}: {s:?}"));
        assert!(f.contains("udp"), "{reason} dropped in {f}");
        assert!(c >= least && c <= sof(reason), "{reason} at {f}: {c}");
    }
}
