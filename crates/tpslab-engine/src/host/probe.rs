//! Calibration: what the kernel charges per queued datagram (skb truesize) and how many
//! datagrams a receive buffer holds, measured with two loopback sockets in this network
//! namespace. Bounded: stops at the first drop, or 64 datagrams beyond what the buffer
//! should hold (at most 200000).

use crate::EngineError;
use std::time::Duration;
use tpslab_net::UdpSock;
use tpslab_record::buffer::TruesizeProbe;

/// The probe socket's rx_queue and drops from /proc/self/net/udp. Read up to 3 times: the
/// table is walked while other sockets come and go, and a walk can step over a line (a
/// unit test missed its socket once with other tests' sockets opening beside it).
fn queue_of(inode: u64) -> Result<(u64, u64), EngineError> {
    for _ in 0..3 {
        let socks = tpslab_proc::live::udp(std::path::Path::new("/proc/self"))
            .map_err(|e| EngineError::Other(e.to_string()))?;
        if let Some(s) = socks.iter().find(|s| s.inode == inode) {
            return Ok((s.rx_queue, s.drops.unwrap_or(0)));
        }
    }
    Err(EngineError::Other(format!(
        "probe socket inode {inode} not in /proc/self/net/udp"
    )))
}

/// Sends `size`-byte datagrams to an unread socket with the default receive buffer
/// (or `rcvbuf` when given): rx_queue after 8 datagrams gives the charge per datagram;
/// sending on until the first drop gives the full queue.
pub fn probe_truesize(size: usize, rcvbuf: Option<u64>) -> Result<TruesizeProbe, EngineError> {
    let rx = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false)?;
    if let Some(b) = rcvbuf {
        rx.set_rcvbuf(b)?;
    }
    let tx = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false)?;
    tx.connect(rx.local_addr())?;
    let inode = rx.inode()?;
    let buf = vec![0x5au8; size.max(1)];
    let send = |n: usize| -> Result<(), EngineError> {
        for _ in 0..n {
            tx.send(&buf)
                .map_err(|e| EngineError::os("probe send", e))?;
        }
        Ok(())
    };
    const FIRST: u64 = 8;
    send(FIRST as usize)?;
    std::thread::sleep(Duration::from_millis(5));
    let (q, d0) = queue_of(inode)?;
    let mut probe = TruesizeProbe {
        size_bytes: size as u64,
        queued: FIRST,
        rx_queue_bytes: q,
        granted_bytes: rx.rcvbuf_bytes()?,
        ..Default::default()
    };
    if d0 > 0 {
        // The buffer cannot even hold 8: measure with what it held.
        probe.queued = FIRST - d0;
    }
    let mut sent = FIRST;
    let mut drops = d0;
    // The buffer holds about granted / truesize datagrams: stop a little beyond that.
    let bound = probe
        .granted_bytes
        .checked_div(probe.truesize_bytes())
        .map_or(200_000, |n| (n + 64).min(200_000));
    while drops == 0 && sent < bound {
        send(1)?;
        sent += 1;
        drops = queue_of(inode)?.1;
    }
    let (full, d) = queue_of(inode)?;
    probe.full_queued = sent - d;
    probe.full_rx_queue_bytes = full;
    Ok(probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_queue_is_a_whole_number_of_truesizes() {
        let p = probe_truesize(1024, None).unwrap();
        let t = p.truesize_bytes();
        assert!(t > 1024 && t < 8192, "truesize {t} for 1024 B");
        assert_eq!(p.rx_queue_bytes, t * p.queued);
        assert_eq!(p.full_rx_queue_bytes, t * p.full_queued);
        // The full queue is within one datagram of the limit, on either kernel rule.
        assert!(p.full_rx_queue_bytes + t > p.granted_bytes);
        assert!(p.full_rx_queue_bytes < p.granted_bytes + t);
    }

    #[test]
    fn small_datagrams_cost_less_but_more_than_their_payload() {
        let small = probe_truesize(64, None).expect("probe 64").truesize_bytes();
        let big = probe_truesize(1472, None)
            .expect("probe 1472")
            .truesize_bytes();
        assert!(
            small > 64 && small < big,
            "64 B -> {small}, 1472 B -> {big}"
        );
    }
}
