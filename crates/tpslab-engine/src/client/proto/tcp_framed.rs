//! `ramp tcp`: one TCP connection per user; the same request (framed by its maker: the
//! payload file verbatim, or tpslab's length-prefixed body) is sent again and again, and
//! each reply ends by the plan's [`Framing`]: a 4-byte big-endian length prefix, a fixed
//! size, or a delimiter. A stream keeps order and a user has one request in flight, so the
//! next whole frame is its reply.

use std::net::SocketAddr;

use crate::serve::rr::frame_len;
use tpslab_plan::framing::Framing;
use tpslab_plan::proto::Wire;

use super::{Decoded, Exchange, Opened, Reply, Transport};

/// Framed request/reply over TCP.
#[derive(Debug, Clone)]
pub struct TcpFramed {
    target: SocketAddr,
    request: Vec<u8>,
    framing: Framing,
}

impl Exchange for TcpFramed {
    /// Nothing per user: every user sends the same bytes, and the reply's bytes are the
    /// loop's.
    type User = ();

    const TRANSPORT: Transport = Transport::Stream;

    fn for_plan(w: &Wire<'_>) -> Self {
        TcpFramed {
            target: w.target,
            request: w.request.to_vec(),
            framing: w.framing.clone(),
        }
    }

    fn user(&self, _id: usize) {}

    fn open(&self) -> Result<Opened, String> {
        super::connect(self.target)
    }

    fn encode(&self, _u: &mut ()) {}

    fn request<'a>(&'a self, _u: &'a ()) -> &'a [u8] {
        &self.request
    }

    fn decode(&self, _u: &mut (), bytes: &[u8]) -> Decoded {
        match frame_len(&self.framing, bytes) {
            Ok(Some(n)) => Decoded::Reply(Reply::ok(n)),
            Ok(None) => Decoded::NeedMore,
            Err(e) => Decoded::Invalid(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_plan::framing::MAX_FRAME;

    fn proto(framing: Framing) -> TcpFramed {
        TcpFramed {
            target: "127.0.0.1:9".parse().unwrap(),
            request: b"\0\0\0\x02hi".to_vec(),
            framing,
        }
    }

    /// Decodes `stream` as the loop does with reads of `chunk` bytes: whole replies are
    /// consumed, bytes beyond them kept for the next.
    fn replies(p: &TcpFramed, stream: &[u8], chunk: usize) -> Result<Vec<Vec<u8>>, String> {
        let (mut have, mut out) = (Vec::new(), vec![]);
        for c in stream.chunks(chunk) {
            have.extend_from_slice(c);
            loop {
                match p.decode(&mut (), &have) {
                    Decoded::Reply(r) => {
                        assert_eq!((r.failed, r.close), (None, false));
                        out.push(have.drain(..r.len).collect());
                    }
                    Decoded::NeedMore => break,
                    Decoded::Invalid(e) => return Err(e),
                    Decoded::Stale(n) => panic!("a stream of frames has no stale replies: {n}"),
                }
            }
        }
        assert!(have.len() < 64, "left over: {have:?}");
        Ok(out)
    }

    #[test]
    fn length_frames_whole_in_any_reads() {
        let p = proto(Framing::Length);
        let stream = b"\0\0\0\x03abc\0\0\0\0\0\0\0\x01z";
        let want: Vec<Vec<u8>> = vec![
            b"\0\0\0\x03abc".to_vec(),
            vec![0; 4],
            b"\0\0\0\x01z".to_vec(),
        ];
        // A byte at a time (partial prefix, partial body), and all three in one read.
        for chunk in [1, 2, 3, 5, stream.len()] {
            assert_eq!(
                replies(&p, stream, chunk).unwrap(),
                want,
                "reads of {chunk}"
            );
        }
        // Nothing whole yet.
        assert_eq!(p.decode(&mut (), b""), Decoded::NeedMore);
        assert_eq!(p.decode(&mut (), b"\0\0\0"), Decoded::NeedMore);
        assert_eq!(p.decode(&mut (), b"\0\0\0\x03ab"), Decoded::NeedMore);
    }

    #[test]
    fn fixed_and_delimited_frames() {
        let p = proto(Framing::Fixed(3));
        assert_eq!(
            replies(&p, b"abcdefg", 2).unwrap(),
            vec![b"abc".to_vec(), b"def".to_vec()]
        );
        let p = proto(Framing::Delimiter(b"\r\n".to_vec()));
        // The delimiter split across reads, and two lines in one read.
        assert_eq!(
            replies(&p, b"+OK\r\n:1\r\n$-1\r\n", 4).unwrap(),
            vec![b"+OK\r\n".to_vec(), b":1\r\n".to_vec(), b"$-1\r\n".to_vec()]
        );
        assert_eq!(
            replies(&p, b"a\r\nb\r\n", 64).unwrap(),
            vec![b"a\r\n".to_vec(), b"b\r\n".to_vec()]
        );
        assert_eq!(p.decode(&mut (), b"abc\r"), Decoded::NeedMore);
    }

    #[test]
    fn a_length_above_the_limit_is_a_protocol_error() {
        let p = proto(Framing::Length);
        let too_long = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert_eq!(
            p.decode(&mut (), &too_long),
            Decoded::Invalid("frame length 16777217 above 16777216".into())
        );
        // After a good frame, in the same read.
        let mut s = b"\0\0\0\x01a".to_vec();
        s.extend_from_slice(&[0xff; 4]);
        assert_eq!(
            replies(&p, &s, s.len()).unwrap_err(),
            "frame length 4294967295 above 16777216"
        );
        // The largest allowed length is not an error: it waits for the body.
        let max = (MAX_FRAME as u32).to_be_bytes();
        assert_eq!(p.decode(&mut (), &max), Decoded::NeedMore);
    }

    #[test]
    // A user of this protocol keeps nothing (its state is `()`); the test reads as any
    // protocol's would.
    #[allow(clippy::let_unit_value)]
    fn every_user_sends_the_plans_bytes() {
        let p = proto(Framing::Length);
        let mut u = p.user(7);
        p.encode(&mut u);
        assert_eq!(p.request(&u), b"\0\0\0\x02hi");
        p.encode(&mut u);
        assert_eq!(p.request(&u), b"\0\0\0\x02hi");
    }
}
