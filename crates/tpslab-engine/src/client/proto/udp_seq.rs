//! `ramp udp`: one UDP socket per user; each request is the plan's datagram with a
//! sequence number written into it, and its reply is the datagram that echoes it. Without
//! a sequence field the first [`UDP_TAG_BYTES`] bytes carry the user's index and the
//! sequence number (4 bytes each, big-endian; tpslab's echo server sends them back); with
//! one (`--seq-field OFF:LEN`, a DNS id: 0:2) the sequence number's low LEN bytes go there.
//! A datagram that does not carry the current request's number answers an earlier request
//! (it came after its time-out): it is stale, skipped.

use std::net::SocketAddr;

use tpslab_plan::proto::Wire;
use tpslab_plan::proto::UDP_TAG_BYTES;

use super::{Decoded, Exchange, Opened, Reply, Transport};

/// Sequence-matched request/reply over UDP.
#[derive(Debug, Clone)]
pub struct UdpSeq {
    target: SocketAddr,
    request: Vec<u8>,
    /// (offset, length) of the sequence field; (0, 8): user index and sequence number.
    field: (usize, usize),
    /// Whether the field is the plan's (only the sequence number), else the default
    /// (user index, then sequence number).
    own_field: bool,
}

/// A user's request and the field its reply must carry.
#[derive(Debug, Clone)]
pub struct UdpUser {
    id: u32,
    seq: u32,
    /// Its own copy of the request, the current field written in.
    req: Vec<u8>,
    /// The field of the current request (its first `field.1` bytes).
    tag: [u8; 8],
}

impl Exchange for UdpSeq {
    type User = UdpUser;

    const TRANSPORT: Transport = Transport::Datagram;

    fn for_plan(w: &Wire<'_>) -> Self {
        UdpSeq {
            target: w.target,
            request: w.request.to_vec(),
            field: w.seq_field.unwrap_or((0, UDP_TAG_BYTES)),
            own_field: w.seq_field.is_some(),
        }
    }

    fn user(&self, id: usize) -> UdpUser {
        UdpUser {
            // The index as the reference echo server sees it: its low 32 bits.
            id: id as u32,
            seq: 0,
            req: self.request.clone(),
            tag: [0; 8],
        }
    }

    fn open(&self) -> Result<Opened, String> {
        super::udp_socket(self.target)
    }

    fn encode(&self, u: &mut UdpUser) {
        u.seq = u.seq.wrapping_add(1);
        let (off, len) = self.field;
        if self.own_field {
            let v = (u.seq as u64).to_be_bytes();
            u.tag = [0; 8];
            u.tag[..len].copy_from_slice(&v[8 - len..]);
        } else {
            u.tag[..4].copy_from_slice(&u.id.to_be_bytes());
            u.tag[4..].copy_from_slice(&u.seq.to_be_bytes());
        }
        // The plan was validated: the field lies inside the request.
        u.req[off..off + len].copy_from_slice(&u.tag[..len]);
    }

    fn request<'a>(&'a self, u: &'a UdpUser) -> &'a [u8] {
        &u.req
    }

    fn decode(&self, u: &mut UdpUser, bytes: &[u8]) -> Decoded {
        let (off, len) = self.field;
        let mine = off
            .checked_add(len)
            .and_then(|end| bytes.get(off..end))
            .is_some_and(|f| f == &u.tag[..len]);
        if mine {
            Decoded::Reply(Reply::ok(bytes.len()))
        } else {
            Decoded::Stale(bytes.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tpslab_plan::framing::Framing;
    use tpslab_plan::proto::Proto;
    use tpslab_plan::ramp::RampPlan;

    fn plan(request: Vec<u8>, seq_field: Option<(usize, usize)>) -> RampPlan {
        let p = RampPlan {
            proto: Proto::Udp,
            target: "127.0.0.1:53".parse().unwrap(),
            steps: vec![1],
            step: Duration::from_secs(1),
            warmup: Duration::ZERO,
            think: Duration::ZERO,
            timeout: Duration::from_secs(1),
            request,
            framing: Framing::Length,
            seq_field,
            knee_gain: 0.2,
            builtin_server: None,
            server_pid: None,
            sample_interval: Duration::from_millis(10),
            load_threads: 0,
            connections: tpslab_plan::ramp::UserConnections::PerUser,
        };
        p.validate().unwrap();
        p
    }

    #[test]
    fn the_default_tag_is_the_user_and_its_sequence() {
        let p = UdpSeq::for_plan(&plan(vec![b'.'; 12], None).wire());
        let mut u = p.user(0x0102_0304);
        p.encode(&mut u);
        assert_eq!(p.request(&u), b"\x01\x02\x03\x04\0\0\0\x01....");
        // The echo of this request is its reply; an echo of the one before is stale.
        let first = p.request(&u).to_vec();
        assert_eq!(p.decode(&mut u, &first), Decoded::Reply(Reply::ok(12)));
        p.encode(&mut u);
        assert_eq!(&p.request(&u)[4..8], b"\0\0\0\x02");
        assert_eq!(p.decode(&mut u, &first), Decoded::Stale(12));
        let second = p.request(&u).to_vec();
        assert_eq!(p.decode(&mut u, &second), Decoded::Reply(Reply::ok(12)));
        // Another user's reply is not this one's, even with the same sequence number.
        let mut other = p.user(9);
        p.encode(&mut other);
        p.encode(&mut other);
        assert_eq!(p.decode(&mut u, p.request(&other)), Decoded::Stale(12));
    }

    #[test]
    fn a_seq_field_carries_the_low_bytes_of_the_sequence() {
        // A DNS query: the 2-byte id at offset 0; the reply is longer than the query.
        let query = b"\xab\xcd\x01\x00\0\x01\0\0\0\0\0\0\x04ramp\x04test\0\0\x01\0\x01".to_vec();
        let p = UdpSeq::for_plan(&plan(query.clone(), Some((0, 2))).wire());
        let mut u = p.user(3);
        for _ in 0..0x1_0001 {
            p.encode(&mut u);
        }
        // 65537 requests: the field wraps to 0x0001; the rest of the query is untouched.
        assert_eq!(&p.request(&u)[..2], b"\0\x01");
        assert_eq!(p.request(&u)[2..], query[2..]);
        let mut reply = p.request(&u).to_vec();
        reply[2] |= 0x80;
        reply.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
        assert_eq!(
            p.decode(&mut u, &reply),
            Decoded::Reply(Reply::ok(reply.len()))
        );
        reply[1] = 2;
        assert_eq!(p.decode(&mut u, &reply), Decoded::Stale(reply.len()));
    }

    #[test]
    fn datagrams_too_short_for_the_field_are_stale() {
        let p = UdpSeq::for_plan(&plan(vec![0; 16], Some((8, 4))).wire());
        let mut u = p.user(0);
        p.encode(&mut u);
        let echo = p.request(&u).to_vec();
        // Cut inside the field, before it, empty: not the reply, and no panic.
        for n in [11, 8, 1, 0] {
            assert_eq!(p.decode(&mut u, &echo[..n]), Decoded::Stale(n), "{n} bytes");
        }
        assert_eq!(p.decode(&mut u, &echo[..12]), Decoded::Reply(Reply::ok(12)));
    }
}
