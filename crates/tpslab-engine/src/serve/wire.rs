//! The datagram header tpslab's generator writes and its server echoes, and the S1
//! find-and-replace workload.
//!
//! Layout (little-endian, [`HEADER_LEN`] = 40 bytes):
//! `magic u32 "TPSL" | version u8 | flags u8 | stream u16 | run_id u64 | seq u64 |
//! intended_ns u64 | sent_ns u64`. Times are CLOCK_MONOTONIC ns of the generator's host.

/// Bytes of the header.
pub const HEADER_LEN: usize = tpslab_plan::limits::HEADER_LEN;
/// The magic "TPSL".
pub const MAGIC: u32 = u32::from_le_bytes(*b"TPSL");
/// Header version.
pub const VERSION: u8 = 1;
/// The word the S1 workload looks for in each payload...
pub const FIND: &[u8] = b"ping";
/// ...and replaces it with (same length, so a reply has the request's size).
pub const REPLACE: &[u8] = b"pong";

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Generator stream (one per sender thread/socket).
    pub stream: u16,
    /// Run identifier; replies of other runs are ignored.
    pub run_id: u64,
    /// Sequence number within the stream, from 0.
    pub seq: u64,
    /// Intended send time, ns (monotonic).
    pub intended_ns: u64,
    /// Actual send time, ns (monotonic, read just before the send call).
    pub sent_ns: u64,
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf` (which must be at least
    /// that long).
    #[inline]
    pub fn write(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        buf[4] = VERSION;
        buf[5] = 0;
        buf[6..8].copy_from_slice(&self.stream.to_le_bytes());
        buf[8..16].copy_from_slice(&self.run_id.to_le_bytes());
        buf[16..24].copy_from_slice(&self.seq.to_le_bytes());
        buf[24..32].copy_from_slice(&self.intended_ns.to_le_bytes());
        buf[32..40].copy_from_slice(&self.sent_ns.to_le_bytes());
    }

    /// Reads a header; None when `buf` is too short or the magic/version do not match.
    #[inline]
    pub fn read(buf: &[u8]) -> Option<Header> {
        if buf.len() < HEADER_LEN
            || u32::from_le_bytes(buf[0..4].try_into().ok()?) != MAGIC
            || buf[4] != VERSION
        {
            return None;
        }
        let u64_at = |o: usize| u64::from_le_bytes(buf[o..o + 8].try_into().unwrap());
        Some(Header {
            stream: u16::from_le_bytes([buf[6], buf[7]]),
            run_id: u64_at(8),
            seq: u64_at(16),
            intended_ns: u64_at(24),
            sent_ns: u64_at(32),
        })
    }
}

/// Fills a payload body with readable text containing [`FIND`] so the S1 workload has
/// something to replace: "tpslab ping 0123456789 " repeated.
pub fn fill_body(body: &mut [u8]) {
    const PATTERN: &[u8] = b"tpslab ping 0123456789 ";
    for (i, b) in body.iter_mut().enumerate() {
        *b = PATTERN[i % PATTERN.len()];
    }
}

/// The S1 workload: replaces every [`FIND`] with [`REPLACE`] in `data` (in place), skipping
/// the header when the datagram carries one. Returns the number of replacements.
#[inline]
pub fn find_and_replace(finder: &memchr::memmem::Finder<'_>, data: &mut [u8]) -> usize {
    let start = if Header::read(data).is_some() {
        HEADER_LEN
    } else {
        0
    };
    let mut pos = start;
    let mut n = 0;
    while let Some(i) = finder.find(&data[pos..]) {
        let at = pos + i;
        data[at..at + REPLACE.len()].copy_from_slice(REPLACE);
        pos = at + REPLACE.len();
        n += 1;
    }
    n
}

/// Writes the low `len` bytes of `seq` big-endian at `offset` (network order, as protocol
/// fields such as the DNS id are).
#[inline]
pub fn write_seq_field(buf: &mut [u8], offset: usize, len: usize, seq: u64) {
    let bytes = seq.to_be_bytes();
    buf[offset..offset + len].copy_from_slice(&bytes[8 - len..]);
}

/// Reads a big-endian field of `len` bytes at `offset`; None when `buf` is too short.
#[inline]
pub fn read_seq_field(buf: &[u8], offset: usize, len: usize) -> Option<u64> {
    let f = buf.get(offset..offset.checked_add(len)?)?;
    Some(f.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64))
}

/// memcached's UDP frame header at the start of a reply datagram: (sequence number,
/// total datagrams), both 16-bit network order at bytes 2..4 and 4..6; None when the
/// datagram is shorter than the 8-byte header or the numbers do not fit (no datagrams,
/// or a sequence number at or past the total).
pub fn memcached_frame(buf: &[u8]) -> Option<(u16, u16)> {
    let h = buf.get(..8)?;
    let seq = u16::from_be_bytes([h[2], h[3]]);
    let total = u16::from_be_bytes([h[4], h[5]]);
    (seq < total).then_some((seq, total))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_memcached_frame_header_is_read_and_a_bad_one_refused() {
        // Frame 2 of 4 of request 7, from a real reply's first bytes.
        assert_eq!(
            memcached_frame(b"\x00\x07\x00\x02\x00\x04\x00\x00VALUE"),
            Some((2, 4))
        );
        assert_eq!(memcached_frame(b"\x00\x07\x00\x04\x00\x04\x00\x00"), None);
        assert_eq!(memcached_frame(b"\x00\x07\x00\x00\x00\x00\x00\x00"), None);
        assert_eq!(memcached_frame(b"\x00\x07\x00\x00\x00\x01\x00"), None);
    }

    use super::*;

    #[test]
    fn header_roundtrip_and_rejects() {
        let h = Header {
            stream: 3,
            run_id: 0xdead_beef,
            seq: 123_456_789,
            intended_ns: 42,
            sent_ns: 43,
        };
        let mut buf = [0u8; 64];
        h.write(&mut buf);
        assert_eq!(Header::read(&buf), Some(h));
        assert_eq!(Header::read(&buf[..39]), None);
        buf[0] = b'X';
        assert_eq!(Header::read(&buf), None);
    }

    #[test]
    fn replace_skips_header_and_changes_every_match() {
        let mut buf = vec![0u8; 1024];
        Header {
            stream: 0,
            run_id: 1,
            seq: 2,
            intended_ns: 3,
            sent_ns: 4,
        }
        .write(&mut buf);
        fill_body(&mut buf[HEADER_LEN..]);
        let before = buf.clone();
        let finder = memchr::memmem::Finder::new(FIND);
        let n = find_and_replace(&finder, &mut buf);
        // "tpslab ping 0123456789 " is 23 bytes: 984 body bytes hold 42 full patterns and a
        // partial one that contains "ping" too (984 % 23 = 18 >= 11).
        assert_eq!(n, 43);
        assert_eq!(&buf[..HEADER_LEN], &before[..HEADER_LEN]);
        assert!(finder.find(&buf).is_none());
        assert_eq!(buf.len(), before.len());
    }

    #[test]
    fn seq_field_big_endian_roundtrip() {
        let mut buf = [0u8; 12];
        write_seq_field(&mut buf, 0, 2, 0x1_2345);
        assert_eq!(&buf[..2], &[0x23, 0x45]);
        assert_eq!(read_seq_field(&buf, 0, 2), Some(0x2345));
        assert_eq!(read_seq_field(&buf, 11, 2), None);
    }
}
