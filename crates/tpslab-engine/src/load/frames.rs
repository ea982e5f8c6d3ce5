//! Replies of several datagrams (memcached's UDP frames): each request's frames counted
//! until all its total arrived; a reply is answered then, not at its first frame.

use std::collections::{BTreeSet, HashMap};

/// What one frame of a reply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frame {
    /// A frame not seen before; the reply still misses some.
    Part,
    /// The reply's last missing frame: it is complete now.
    Completed,
    /// A frame already read.
    Duplicate,
    /// Its total differs from the one the reply's first frame announced.
    Mismatch,
}

/// One reply still missing frames: its total, the frames read, which ones (the first 64
/// in a bit set, any later in a set allocated only when one arrives: memory follows
/// what was read, whatever total a server announces).
struct Partial {
    total: u16,
    got: u16,
    low: u64,
    high: BTreeSet<u16>,
}

/// The frames of one receiver's replies.
#[derive(Default)]
pub(super) struct FrameBook {
    open: HashMap<u64, Partial>,
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
    /// Counts frame `no` of `total` of request `seq` (a request not yet complete: the
    /// caller checks that first).
    pub(super) fn add(&mut self, seq: u64, no: u16, total: u16) -> Frame {
        let p = self.open.entry(seq).or_insert(Partial {
            total,
            got: 0,
            low: 0,
            high: BTreeSet::new(),
        });
        if p.total != total {
            return Frame::Mismatch;
        }
        let new = if no < 64 {
            let bit = 1u64 << no;
            let new = p.low & bit == 0;
            p.low |= bit;
            new
        } else {
            p.high.insert(no)
        };
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
        self.open.len() as u64
    }

    /// Frames announced by every reply of which one frame at least arrived.
    pub(super) fn expected(&self) -> u64 {
        self.expected_complete + self.open.values().map(|p| u64::from(p.total)).sum::<u64>()
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
