//! The engine's parsers of user and peer input never panic: framings (`--framing`), frames
//! read from a server's byte stream, datagram headers and sequence fields read from
//! replies, sysctl values (sweep levels and the journal), scheduling policies (`--sched`).

use proptest::prelude::*;
use std::io::Cursor;
use tpslab_engine::serve::rr::FrameReader;
use tpslab_engine::serve::wire::{read_seq_field, Header};
use tpslab_net::sched::SchedPolicy;
use tpslab_plan::framing::{Framing, MAX_FRAME};
use tpslab_plan::sysctl::canonical;

proptest! {
    #[test]
    fn framings_parse_or_refuse_in_one_line(s in "(length|fixed:|delim:)?(\\PC|\\\\){0,20}") {
        match Framing::parse(&s) {
            Ok(Framing::Fixed(n)) => prop_assert!((1..=MAX_FRAME).contains(&n)),
            Ok(Framing::Delimiter(d)) => prop_assert!(!d.is_empty()),
            Ok(Framing::Length) => prop_assert_eq!(s.as_str(), "length"),
            Err(e) => prop_assert!(!e.contains('\n') || s.contains('\n')),
        }
    }

    #[test]
    fn frames_from_any_byte_stream_are_whole_or_an_error(
        bytes in proptest::collection::vec(any::<u8>(), 0..2000),
        which in 0u8..3, n in 1usize..64
    ) {
        let f = match which {
            0 => Framing::Length,
            1 => Framing::Fixed(n),
            _ => Framing::Delimiter(b"\r\n".to_vec()),
        };
        let mut r = FrameReader::default();
        let mut s = Cursor::new(bytes.clone());
        let mut total = 0;
        // Every frame lies within what was sent; the stream ends in an error (EOF or a
        // bad length), never a panic or an endless loop.
        for _ in 0..4000 {
            match r.read(&mut s, &f) {
                Ok(len) => {
                    prop_assert!(len >= 1 && total + len <= bytes.len());
                    let frame = r.take(len).to_vec();
                    prop_assert_eq!(&frame[..], &bytes[total..total + len]);
                    total += len;
                }
                Err(_) => break,
            }
        }
    }

    #[test]
    fn headers_and_seq_fields_from_any_reply(
        b in proptest::collection::vec(any::<u8>(), 0..100), o in 0usize..120, far in any::<usize>(), l in 0usize..10
    ) {
        let _ = Header::read(&b);
        let l = l.min(8);
        if let Some(v) = read_seq_field(&b, o, l) {
            prop_assert!(o + l <= b.len());
            prop_assert!(l == 8 || v < 1u64 << (8 * l));
        }
        // An offset near the integer limit is None, not a wrap.
        prop_assert!(read_seq_field(&b, far | (usize::MAX >> 1), l.max(1)).is_none());
    }

    #[test]
    fn sysctl_values_canonicalise_idempotently(s in "[0-9a-fA-FxX+ \\t-]{0,30}") {
        if let Some(c) = canonical(&s) {
            prop_assert_eq!(canonical(&c), Some(c.clone()));
            prop_assert!(c.split(' ').all(|f| f.parse::<u64>().is_ok()));
        }
    }

    #[test]
    fn sched_policies_parse_or_refuse(s in "(other|fifo|rr|FIFO)?:?[0-9]{0,4}|\\PC{0,12}") {
        match s.parse::<SchedPolicy>() {
            Ok(SchedPolicy::Fifo(p)) | Ok(SchedPolicy::Rr(p)) => prop_assert!((1..=99).contains(&p)),
            Ok(SchedPolicy::Other) => {}
            Err(e) => prop_assert!(e.contains("allowed")),
        }
    }
}
