use super::*;
use crate::UdpSock;
use std::time::Duration;

fn pair() -> (UdpSock, UdpSock) {
    let a = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
    let b = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
    a.connect(b.local_addr()).unwrap();
    b.set_read_timeout(Duration::from_millis(200)).unwrap();
    a.set_read_timeout(Duration::from_millis(200)).unwrap();
    (a, b)
}

#[test]
fn batch_send_receive_reply_roundtrip() {
    let (a, b) = pair();
    let mut sb = SendBatch::new(8, 100);
    for i in 0..5 {
        sb.slot_mut(i)[0] = i as u8;
        sb.set_len(i, 10 + i);
    }
    let out = sb.send(&a, 5, |_, _| panic!("no error expected"));
    assert_eq!(
        out,
        SendOutcome {
            sent: 5,
            failed: 0,
            gso_turned_off: false
        }
    );
    let mut rb = RecvBatch::new(4, 64);
    let mut got = vec![];
    while got.len() < 5 {
        let n = rb.recv(b.fd()).unwrap();
        assert!(n > 0, "timed out with {} of 5", got.len());
        assert!(n <= 4, "recvmmsg must not exceed the batch");
        for i in 0..n {
            let m = rb.meta(i);
            got.push((rb.get(i)[0], m.len));
            assert_eq!(m.peer, Some(a.local_addr()));
            assert!(!m.truncated && m.gro_segment.is_none() && m.rx_realtime_ns.is_none());
            rb.get_mut(i)[1] = 0xAB;
        }
        assert_eq!(rb.reply(b.fd(), n, |_, _| panic!()).sent, n);
    }
    assert_eq!(
        got,
        (0..5)
            .map(|i| (i as u8, 10 + i as usize))
            .collect::<Vec<_>>()
    );
    // Replies come back with the edit and the original length.
    let mut rb2 = RecvBatch::new(8, 64);
    let mut n_back = 0;
    while n_back < 5 {
        let n = rb2.recv(a.fd()).unwrap();
        assert!(n > 0);
        for i in 0..n {
            assert_eq!(rb2.get(i)[1], 0xAB);
            assert_eq!(rb2.meta(i).len, 10 + rb2.get(i)[0] as usize);
        }
        n_back += n;
    }
}

#[test]
fn truncated_datagram_is_flagged_with_full_length() {
    let (a, b) = pair();
    a.send(&[7u8; 300]).unwrap();
    let mut rb = RecvBatch::new(2, 100);
    assert_eq!(rb.recv(b.fd()).unwrap(), 1);
    assert!(rb.truncated(0));
    assert_eq!(rb.len(0), 300);
    assert_eq!(rb.get(0).len(), 100);
}

#[test]
fn refused_datagrams_are_reported_not_lost() {
    // Connected to a port with no listener: the ICMP port unreachable makes later sends
    // fail with ECONNREFUSED; every datagram is either sent or reported failed.
    let a = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
    let dead = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
    let port = dead.local_addr();
    drop(dead);
    a.connect(port).unwrap();
    let mut sb = SendBatch::new(16, 64);
    let mut errs = vec![];
    let mut total = SendOutcome::default();
    for _ in 0..20 {
        let o = sb.send(&a, 16, |_, e| errs.push(e));
        total.sent += o.sent;
        total.failed += o.failed;
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(total.sent + total.failed, 320);
    assert_eq!(errs.len(), total.failed);
    assert!(
        total.failed > 0,
        "expected ECONNREFUSED from the pending ICMP error"
    );
    assert!(errs.iter().all(|&e| e == libc::ECONNREFUSED));
}

#[test]
fn gso_send_arrives_coalesced_with_gro_and_goes_back_as_segments() {
    let (a, b) = pair();
    if a.set_gso(100).is_err() || b.set_gro(true).is_err() {
        eprintln!("skipping: no UDP GSO/GRO in this kernel");
        return;
    }
    // One send of 10 x 100 bytes (the last 50): 10 datagrams on the wire.
    let mut buf = vec![0u8; 950];
    for (i, c) in buf.chunks_mut(100).enumerate() {
        c.fill(i as u8);
    }
    assert_eq!(a.send(&buf).unwrap(), 950);
    let mut rb = RecvBatch::with_gro(8, 65536);
    assert_eq!(rb.recv(b.fd()).unwrap(), 1, "one coalesced datagram");
    assert_eq!(rb.len(0), 950);
    assert_eq!(rb.gro_size(0), Some(100));
    // Echoed back as one GSO send: the sender (GRO off) reads 10 datagrams.
    a.set_gso(0).unwrap();
    assert_eq!(rb.reply(b.fd(), 1, |_, e| panic!("errno {e}")).sent, 1);
    let mut back = RecvBatch::new(16, 2048);
    let mut lens = vec![];
    while lens.len() < 10 {
        let n = back.recv(a.fd()).unwrap();
        assert!(n > 0, "got {} of 10 segments", lens.len());
        for i in 0..n {
            assert!(back.get(i).iter().all(|&x| x == lens.len() as u8));
            lens.push(back.len(i));
        }
    }
    assert_eq!(lens, [100, 100, 100, 100, 100, 100, 100, 100, 100, 50]);
    // Without coalescing, a plain datagram reports no segment size and replies plainly.
    a.send(&[7u8; 40]).unwrap();
    assert_eq!(rb.recv(b.fd()).unwrap(), 1);
    assert_eq!(rb.gro_size(0), None);
    assert_eq!(rb.reply(b.fd(), 1, |_, e| panic!("errno {e}")).sent, 1);
    assert_eq!(back.recv(a.fd()).unwrap(), 1);
    assert_eq!(back.len(0), 40);
}

#[test]
fn a_refused_gso_send_switches_the_sockets_gso_off() {
    let (a, b) = pair();
    if !a.enable_gso(100) {
        eprintln!("skipping: no UDP GSO in this kernel");
        return;
    }
    let mut sb = SendBatch::new(4, 1000);
    for i in 0..3 {
        sb.set_len(i, 1000);
    }
    // One good GSO send first: 10 datagrams on the wire.
    let ok = sb.send(&a, 1, |_, e| panic!("errno {e}"));
    assert_eq!((ok.sent, ok.gso_turned_off), (1, false));
    a.set_no_check(true).unwrap();
    let mut errs = vec![];
    let out = sb.send(&a, 3, |i, e| errs.push((i, e)));
    assert_eq!((out.sent, out.failed), (0, 3), "{errs:?}");
    assert!(errs.iter().all(|&(_, e)| e == libc::EINVAL), "{errs:?}");
    assert!(out.gso_turned_off && a.gso_refused() && a.gso_segment() == 0);
    // Without GSO, a datagram per message goes out (checksum or not).
    sb.set_len(0, 100);
    let after = sb.send(&a, 1, |_, e| panic!("errno {e}"));
    assert_eq!((after.sent, after.gso_turned_off), (1, false));
    let mut rb = RecvBatch::new(16, 2048);
    let mut got = 0;
    while got < 11 {
        let n = rb.recv(b.fd()).unwrap();
        assert!(n > 0, "got {got} of 11");
        got += n;
    }
}

#[test]
fn recv_times_out_with_zero() {
    let (_a, b) = pair();
    b.set_read_timeout(Duration::from_millis(20)).unwrap();
    let mut rb = RecvBatch::new(4, 64);
    assert_eq!(rb.recv(b.fd()).unwrap(), 0);
}

#[test]
fn without_peers_receives_the_same_datagrams_and_no_address() {
    let (a, b) = pair();
    for i in 0..3u8 {
        a.send(&[i; 20]).unwrap();
    }
    let mut rb = RecvBatch::new(4, 64).without_peers();
    let mut got = vec![];
    while got.len() < 3 {
        let n = rb.recv(b.fd()).unwrap();
        assert!(n > 0, "timed out with {} of 3", got.len());
        for i in 0..n {
            let m = rb.meta(i);
            assert_eq!(m.peer, None);
            got.push((rb.get(i)[0], m.len));
        }
    }
    assert_eq!(got, vec![(0, 20), (1, 20), (2, 20)]);
    // The kernel was given no address buffer: the slots' address storage is untouched.
    assert!(rb.addrs.iter().all(|s| s.ss_family == 0));
}

#[test]
fn a_shared_tail_follows_each_messages_own_head() {
    let (a, b) = pair();
    let tail: Vec<u8> = (0..200u8).collect();
    let mut sb = SendBatch::with_shared_tail(8, 4, &tail);
    assert_eq!(sb.capacity(), 8);
    for i in 0..4 {
        assert_eq!(sb.slot_mut(i).len(), 4, "the slot is the head alone");
        sb.slot_mut(i).copy_from_slice(&[i as u8 + 1; 4]);
    }
    sb.set_len(1, 50); // the head and the tail's first 46 bytes
    sb.set_len(2, 3); // within the head: no tail
    sb.set_len(3, 10_000); // at most the head and the whole tail
    let out = sb.send(&a, 4, |_, e| panic!("errno {e}"));
    assert_eq!((out.sent, out.failed), (4, 0));
    let mut rb = RecvBatch::new(8, 512);
    let mut got = vec![];
    while got.len() < 4 {
        let n = rb.recv(b.fd()).unwrap();
        assert!(n > 0, "timed out with {} of 4", got.len());
        for i in 0..n {
            got.push(rb.get(i).to_vec());
        }
    }
    got.sort_by_key(|d| d[0]);
    let want = |head: u8, tail_len: usize| {
        let mut d = vec![head; 4];
        d.extend_from_slice(&tail[..tail_len]);
        d
    };
    assert_eq!(got[0], want(1, 200), "a new batch's messages are whole");
    assert_eq!(got[1], want(2, 46));
    assert_eq!(got[2], vec![3u8; 3]);
    assert_eq!(got[3], want(4, 200));
}
