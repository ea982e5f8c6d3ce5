//! The lab's middlebox: a flow table that forgets idle flows, like the proxies, load
//! balancers, firewalls and NATs of S5. A flow (protocol and both ends) idle for longer
//! than the timeout is forgotten; a later TCP segment of it that is not a SYN is dropped
//! silently or answered with a RST in both directions; a UDP datagram of a forgotten
//! mapping from the far side (B) is dropped. Flows are created by a TCP SYN (either side)
//! or a UDP datagram from the near side (A). IPv4 only (the delay line's addresses).

use std::collections::HashMap;
use std::net::Ipv4Addr;

pub use tpslab_plan::tcp::OnIdle;

/// A flow: protocol, then the near side's (A) address and port, then the far side's.
type FlowKey = (u8, Ipv4Addr, u16, Ipv4Addr, u16);

/// The most flows remembered at once; beyond it new flows are refused (dropped).
pub const MAX_FLOWS: usize = 65_536;

/// What happens to a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Forwarded.
    Pass,
    /// Dropped silently (a forgotten flow, or a table full).
    Drop,
    /// Dropped, and these RSTs are written: to the sender (back into the TUN the packet
    /// came from) and to the receiver (on to the other side).
    Reset {
        /// RST for the packet's sender.
        to_sender: Vec<u8>,
        /// RSTs for the packet's receiver, in order (one of them carries exactly the
        /// sequence number it expects).
        to_receiver: Vec<Vec<u8>>,
    },
}

/// The fields of an IPv4 TCP or UDP packet the table needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packet {
    proto: u8,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    /// TCP only: sequence and acknowledgement numbers, flags, payload length.
    seq: u32,
    ack: u32,
    flags: u8,
    payload: u32,
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;
const TCP: u8 = 6;
const UDP: u8 = 17;

fn parse(p: &[u8]) -> Option<Packet> {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return None;
    }
    // A fragment after the first has no ports: it passes.
    if u16::from_be_bytes([p[6], p[7]]) & 0x1fff != 0 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len());
    let proto = p[9];
    let l4 = p.get(ihl..total)?;
    let ip = |o: usize| Ipv4Addr::new(p[o], p[o + 1], p[o + 2], p[o + 3]);
    let be16 = |o: usize| u16::from_be_bytes([l4[o], l4[o + 1]]);
    let be32 = |o: usize| u32::from_be_bytes([l4[o], l4[o + 1], l4[o + 2], l4[o + 3]]);
    let mut pk = Packet {
        proto,
        src: ip(12),
        dst: ip(16),
        sport: 0,
        dport: 0,
        seq: 0,
        ack: 0,
        flags: 0,
        payload: 0,
    };
    match proto {
        TCP if l4.len() >= 20 => {
            let off = usize::from(l4[12] >> 4) * 4;
            pk.sport = be16(0);
            pk.dport = be16(2);
            pk.seq = be32(4);
            pk.ack = be32(8);
            pk.flags = l4[13];
            pk.payload = l4.len().saturating_sub(off) as u32;
            Some(pk)
        }
        UDP if l4.len() >= 8 => {
            pk.sport = be16(0);
            pk.dport = be16(2);
            Some(pk)
        }
        _ => None,
    }
}

/// The Internet checksum of `data` added to `sum`.
fn checksum(mut sum: u32, data: &[u8]) -> u16 {
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A 40-byte IPv4 TCP segment with no payload and both checksums.
fn segment(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&40u16.to_be_bytes());
    p[6] = 0x40; // DF
    p[8] = 64;
    p[9] = TCP;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let c = checksum(0, &p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&src.octets());
    pseudo[4..8].copy_from_slice(&dst.octets());
    pseudo[9] = TCP;
    pseudo[10..12].copy_from_slice(&20u16.to_be_bytes());
    let sum: u32 = pseudo
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let c = checksum(sum, &p[20..]);
    p[36..38].copy_from_slice(&c.to_be_bytes());
    p
}

/// The RSTs that end the flow of `pk` on both ends. The sender's: sequence = the
/// packet's ACK (what the sender expects us to use), else an ACK of what it sent. The
/// receiver's must carry exactly the sequence number it expects (RFC 5961: an inexact RST
/// only draws a challenge ACK): the packet's own for data and FIN; for a segment with
/// neither it is the packet's + 1 for a keepalive probe (which carries snd_una - 1) or the
/// packet's for a pure ACK: both are sent, + 1 first (the receiver ignores the other once
/// reset).
fn resets(pk: &Packet) -> (Vec<u8>, Vec<Vec<u8>>) {
    let to_sender = if pk.flags & ACK != 0 {
        segment(pk.dst, pk.src, pk.dport, pk.sport, pk.ack, 0, RST)
    } else {
        let len = pk.payload + u32::from(pk.flags & (SYN | FIN) != 0);
        segment(
            pk.dst,
            pk.src,
            pk.dport,
            pk.sport,
            0,
            pk.seq.wrapping_add(len),
            RST | ACK,
        )
    };
    let rst = |seq: u32| segment(pk.src, pk.dst, pk.sport, pk.dport, seq, 0, RST);
    let to_receiver = if pk.payload == 0 && pk.flags & FIN == 0 {
        vec![rst(pk.seq.wrapping_add(1)), rst(pk.seq)]
    } else {
        vec![rst(pk.seq)]
    };
    (to_sender, to_receiver)
}

/// Flows seen, with when each was last seen (ns).
#[derive(Debug)]
pub struct FlowTable {
    timeout_ns: u64,
    on_idle: OnIdle,
    last_seen: HashMap<FlowKey, u64>,
}

impl FlowTable {
    /// A table that forgets flows idle for more than `timeout_ns`.
    pub fn new(timeout_ns: u64, on_idle: OnIdle) -> FlowTable {
        FlowTable {
            timeout_ns,
            on_idle,
            last_seen: HashMap::new(),
        }
    }

    /// Flows remembered now.
    pub fn len(&self) -> usize {
        self.last_seen.len()
    }

    /// Whether no flow is remembered.
    pub fn is_empty(&self) -> bool {
        self.last_seen.is_empty()
    }

    /// What happens to `packet` arriving at `now_ns` from the near side (`from_a`) or the
    /// far side. Packets that are not IPv4 TCP or UDP pass.
    pub fn judge(&mut self, packet: &[u8], from_a: bool, now_ns: u64) -> Verdict {
        let Some(pk) = parse(packet) else {
            return Verdict::Pass;
        };
        let key = if from_a {
            (pk.proto, pk.src, pk.sport, pk.dst, pk.dport)
        } else {
            (pk.proto, pk.dst, pk.dport, pk.src, pk.sport)
        };
        if let Some(last) = self.last_seen.get_mut(&key) {
            if now_ns.saturating_sub(*last) <= self.timeout_ns {
                *last = now_ns;
                return Verdict::Pass;
            }
            self.last_seen.remove(&key);
        }
        let opens = match pk.proto {
            TCP => {
                (pk.flags & SYN != 0 && pk.flags & ACK == 0)
                    || (from_a && self.on_idle == OnIdle::Reopen && pk.flags & RST == 0)
            }
            _ => from_a,
        };
        if opens {
            if self.last_seen.len() >= MAX_FLOWS {
                let t = self.timeout_ns;
                self.last_seen
                    .retain(|_, last| now_ns.saturating_sub(*last) <= t);
                if self.last_seen.len() >= MAX_FLOWS {
                    return Verdict::Drop;
                }
            }
            self.last_seen.insert(key, now_ns);
            return Verdict::Pass;
        }
        match self.on_idle {
            OnIdle::Reset if pk.proto == TCP && pk.flags & RST == 0 => {
                let (to_sender, to_receiver) = resets(&pk);
                Verdict::Reset {
                    to_sender,
                    to_receiver,
                }
            }
            _ => Verdict::Drop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

    fn tcp(from_a: bool, seq: u32, ack: u32, flags: u8) -> Vec<u8> {
        if from_a {
            segment(A, B, 40000, 9000, seq, ack, flags)
        } else {
            segment(B, A, 9000, 40000, seq, ack, flags)
        }
    }

    fn udp(from_a: bool) -> Vec<u8> {
        let mut p = tcp(from_a, 0, 0, 0);
        p[9] = UDP;
        p.truncate(28);
        p[2..4].copy_from_slice(&28u16.to_be_bytes());
        p
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_flow_idle_past_the_timeout_is_forgotten() {
        let mut t = FlowTable::new(20 * S, OnIdle::Drop);
        // Not a SYN: an unknown flow.
        assert_eq!(t.judge(&tcp(true, 1, 1, ACK), true, 0), Verdict::Drop);
        assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        assert_eq!(
            t.judge(&tcp(false, 500, 101, SYN | ACK), false, S),
            Verdict::Pass
        );
        assert_eq!(t.judge(&tcp(true, 101, 501, ACK), true, S), Verdict::Pass);
        // Idle exactly the timeout: still known; each packet refreshes it.
        assert_eq!(
            t.judge(&tcp(true, 100, 501, ACK), true, 21 * S),
            Verdict::Pass
        );
        assert_eq!(
            t.judge(&tcp(false, 501, 101, ACK), false, 41 * S),
            Verdict::Pass
        );
        // Idle longer: forgotten, both directions.
        assert_eq!(
            t.judge(&tcp(true, 100, 501, ACK), true, 61 * S + 1),
            Verdict::Drop
        );
        assert_eq!(
            t.judge(&tcp(false, 501, 101, ACK), false, 61 * S + 2),
            Verdict::Drop
        );
        assert!(t.is_empty());
        // A new connection with the same ends opens it again.
        assert_eq!(t.judge(&tcp(true, 7, 0, SYN), true, 62 * S), Verdict::Pass);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn reset_mode_answers_both_ends_with_exact_sequence_numbers() {
        let mut t = FlowTable::new(S, OnIdle::Reset);
        assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        // A's keepalive probe after 5 s: seq = snd_una - 1 = 100, no payload, ACK 501.
        let Verdict::Reset {
            to_sender,
            to_receiver,
        } = t.judge(&tcp(true, 100, 501, ACK), true, 5 * S)
        else {
            panic!("a reset");
        };
        let s = parse(&to_sender).unwrap();
        assert_eq!((s.src, s.dst, s.sport, s.dport), (B, A, 9000, 40000));
        assert_eq!((s.seq, s.flags), (501, RST), "A expects 501 from B");
        let r = parse(&to_receiver[0]).unwrap();
        assert_eq!((r.src, r.dst, r.sport, r.dport), (A, B, 40000, 9000));
        assert_eq!(
            (r.seq, r.flags),
            (101, RST),
            "B expects 101 from A after a probe"
        );
        assert_eq!(
            parse(&to_receiver[1]).unwrap().seq,
            100,
            "or 100 after a pure ACK"
        );
        // A FIN carries exactly what the receiver expects.
        let Verdict::Reset {
            to_receiver: fin, ..
        } = t.judge(&tcp(true, 101, 501, FIN | ACK), true, 10 * S)
        else {
            panic!("a reset");
        };
        assert_eq!(fin.len(), 1);
        assert_eq!(parse(&fin[0]).unwrap().seq, 101);
        // Both are valid IPv4 and TCP checksums (the sum over each, with the pseudo
        // header for TCP, folds to zero).
        for p in [&to_sender, &to_receiver[0], &to_receiver[1]] {
            assert_eq!(checksum(0, &p[..20]), 0);
            let mut pseudo = p[12..20].to_vec();
            pseudo.extend_from_slice(&[0, TCP, 0, 20]);
            let sum: u32 = pseudo
                .chunks(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .sum();
            assert_eq!(checksum(sum, &p[20..]), 0);
        }
        // A RST of a forgotten flow is not answered.
        assert_eq!(t.judge(&tcp(true, 101, 0, RST), true, 6 * S), Verdict::Drop);
    }

    #[test]
    fn reopen_mode_lets_the_near_side_pick_a_flow_up_again() {
        let mut t = FlowTable::new(S, OnIdle::Reopen);
        assert_eq!(t.judge(&tcp(true, 100, 0, SYN), true, 0), Verdict::Pass);
        // Forgotten: the far side's probe is dropped; the near side's opens it again.
        assert_eq!(
            t.judge(&tcp(false, 500, 101, ACK), false, 5 * S),
            Verdict::Drop
        );
        assert_eq!(
            t.judge(&tcp(true, 100, 501, ACK), true, 6 * S),
            Verdict::Pass
        );
        assert_eq!(
            t.judge(&tcp(false, 501, 101, ACK), false, 6 * S),
            Verdict::Pass
        );
    }

    #[test]
    fn udp_mappings_open_from_the_near_side_only() {
        let mut t = FlowTable::new(30 * S, OnIdle::Reset);
        assert_eq!(
            t.judge(&udp(false), false, 0),
            Verdict::Drop,
            "no mapping yet"
        );
        assert_eq!(t.judge(&udp(true), true, 0), Verdict::Pass);
        assert_eq!(t.judge(&udp(false), false, 29 * S), Verdict::Pass);
        assert_eq!(
            t.judge(&udp(false), false, 60 * S),
            Verdict::Drop,
            "UDP is never reset"
        );
        // Anything else passes untouched.
        assert_eq!(t.judge(&[0x60, 0, 0, 0], true, 0), Verdict::Pass);
        assert_eq!(t.judge(&[], true, 0), Verdict::Pass);
    }
}
