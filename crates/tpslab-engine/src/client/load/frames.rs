//! Replies of several datagrams (memcached's UDP frames): each request's frames counted
//! until all its total arrived; a reply is answered then, not at its first frame.
//!
//! Memory is bounded whatever a server sends: at most [`FrameBook::MAX_OPEN`] replies wait
//! for frames (the oldest is given up as incomplete past it: its request is out of the
//! send log's window by then anyway), and a reply announcing more than
//! [`FrameBook::MAX_TOTAL`] frames is not tracked.

use std::collections::BTreeMap;

/// What one frame of a reply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frame {
    /// A frame not seen before; the reply still misses some.
    Part,
    /// The reply's last missing frame: it is complete now.
    Completed,
    /// A frame already read.
    Duplicate,
    /// Its total differs from the one the reply's first frame announced, or is over
    /// [`FrameBook::MAX_TOTAL`].
    Mismatch,
}

/// One reply still missing frames: its total, the frames read, which ones (a bit set of
/// [`FrameBook::MAX_TOTAL`] bits: 128 bytes).
struct Partial {
    total: u16,
    got: u16,
    bits: [u64; FrameBook::MAX_TOTAL as usize / 64],
}

/// The frames of one receiver's replies.
#[derive(Default)]
pub(super) struct FrameBook {
    /// By request sequence number (increasing with the sends: the first is the oldest).
    open: BTreeMap<u64, Partial>,
    /// Replies given up incomplete to keep [`FrameBook::MAX_OPEN`], and the frames they
    /// announced.
    given_up: u64,
    given_up_expected: u64,
    /// Replies complete, frames read of all replies (distinct), frames announced by the
    /// complete ones.
    pub complete: u64,
    pub received: u64,
    /// Datagrams of a request whose frame header does not fit (a sequence number at or
    /// past the total, no datagrams, shorter than the header).
    pub misnumbered: u64,
    expected_complete: u64,
}

impl FrameBook {
    /// Replies waiting for frames at most: the send log's window (2^16 requests, a
    /// 16-bit request id); about 170 bytes each, so at most about 11 MB.
    pub const MAX_OPEN: usize = 1 << 16;
    /// Frames a reply may announce: memcached's largest item (1 MiB) in ~1,400-byte
    /// frames is about 750.
    pub const MAX_TOTAL: u16 = 1024;

    /// Counts frame `no` of `total` of request `seq` (a request not yet complete: the
    /// caller checks that first).
    pub(super) fn add(&mut self, seq: u64, no: u16, total: u16) -> Frame {
        if total > Self::MAX_TOTAL {
            return Frame::Mismatch;
        }
        if !self.open.contains_key(&seq) && self.open.len() >= Self::MAX_OPEN {
            if let Some((_, old)) = self.open.pop_first() {
                self.given_up += 1;
                self.given_up_expected += u64::from(old.total);
            }
        }
        let p = self.open.entry(seq).or_insert(Partial {
            total,
            got: 0,
            bits: [0; FrameBook::MAX_TOTAL as usize / 64],
        });
        if p.total != total {
            return Frame::Mismatch;
        }
        // The caller reads `no` below `total` from the header (at most MAX_TOTAL).
        let (word, bit) = (usize::from(no) / 64, 1u64 << (no % 64));
        let Some(w) = p.bits.get_mut(word) else {
            return Frame::Mismatch;
        };
        let new = *w & bit == 0;
        *w |= bit;
        if !new {
            return Frame::Duplicate;
        }
        p.got += 1;
        self.received += 1;
        if p.got < p.total {
            return Frame::Part;
        }
        self.open.remove(&seq);
        self.complete += 1;
        self.expected_complete += u64::from(total);
        Frame::Completed
    }

    /// Replies with some frames but not all.
    pub(super) fn incomplete(&self) -> u64 {
        self.open.len() as u64 + self.given_up
    }

    /// Frames announced by every reply of which one frame at least arrived.
    pub(super) fn expected(&self) -> u64 {
        self.expected_complete
            + self.given_up_expected
            + self.open.values().map(|p| u64::from(p.total)).sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_answered_at_its_last_frame_and_a_missing_one_leaves_it_incomplete() {
        let mut b = FrameBook::default();
        // Request 1: four frames, out of order, one read twice.
        assert_eq!(b.add(1, 2, 4), Frame::Part);
        assert_eq!(b.add(1, 0, 4), Frame::Part);
        assert_eq!(b.add(1, 0, 4), Frame::Duplicate);
        assert_eq!(b.add(1, 3, 4), Frame::Part);
        assert_eq!(b.add(1, 1, 4), Frame::Completed);
        // Request 2: frame 1 of 4 lost on the way.
        for no in [0, 2, 3] {
            assert_eq!(b.add(2, no, 4), Frame::Part);
        }
        // Request 3: a frame claiming another total is not counted.
        assert_eq!(b.add(3, 0, 2), Frame::Part);
        assert_eq!(b.add(3, 1, 3), Frame::Mismatch);
        assert_eq!((b.complete, b.incomplete()), (1, 2));
        assert_eq!((b.received, b.expected()), (8, 10));
    }

    /// A server that answers every request with one frame of two never completes one:
    /// the book holds at most MAX_OPEN of them, the oldest given up as incomplete, every
    /// reply still counted; a total over MAX_TOTAL is not tracked.
    #[test]
    fn a_server_that_never_completes_a_reply_is_held_to_max_open() {
        let mut b = FrameBook::default();
        let n = FrameBook::MAX_OPEN as u64 + 1000;
        for seq in 0..n {
            assert_eq!(b.add(seq, 0, 2), Frame::Part);
        }
        assert_eq!(b.open.len(), FrameBook::MAX_OPEN);
        assert_eq!(b.open.keys().next(), Some(&1000));
        assert_eq!((b.incomplete(), b.received, b.expected()), (n, n, 2 * n));
        assert_eq!(b.add(n, 0, FrameBook::MAX_TOTAL + 1), Frame::Mismatch);
        assert_eq!(b.open.len(), FrameBook::MAX_OPEN);
    }

    #[test]
    fn frames_past_64_are_counted_once() {
        let mut b = FrameBook::default();
        for no in 0..99 {
            assert_eq!(b.add(9, no, 100), Frame::Part);
        }
        assert_eq!(b.add(9, 70, 100), Frame::Duplicate);
        assert_eq!(b.add(9, 99, 100), Frame::Completed);
        assert_eq!((b.complete, b.received, b.expected()), (1, 100, 100));
    }
}
