//! A stream user's receive buffer: the bytes read and not yet consumed by a whole reply,
//! grown (doubling) up to the largest reply a frame allows.

use std::io::{ErrorKind, Read};
use tpslab_plan::framing::MAX_FRAME;

/// The most a stream's reply may hold before it is whole, bytes: a frame of
/// [`MAX_FRAME`] and its length prefix. Beyond it the request fails (`frame too long`).
const MAX_REPLY: usize = MAX_FRAME + 4;

/// A stream's bytes read and not yet consumed by a whole reply.
#[derive(Default)]
pub(super) struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl RecvBuf {
    pub(super) fn with_capacity(bytes: usize) -> RecvBuf {
        RecvBuf {
            buf: vec![0; bytes],
            start: 0,
            end: 0,
        }
    }

    /// The bytes read and not consumed.
    pub(super) fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Takes the first `n` pending bytes (all of them at most).
    pub(super) fn consume(&mut self, n: usize) {
        self.start += n.min(self.end - self.start);
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
    }

    /// One read of `s` after the pending bytes (moved to the front first; the buffer
    /// doubled when full, up to [`MAX_REPLY`]). Ok(0): the peer closed. Errors: the
    /// read's, or InvalidData `frame too long` when the buffer is full at its limit.
    pub(super) fn read_from(&mut self, s: &socket2::Socket) -> std::io::Result<usize> {
        let mut r = s;
        self.fill(|b| r.read(b))
    }

    /// One `read` into the free room after the pending bytes, as [`RecvBuf::read_from`]
    /// (a TLS session's plaintext, [`tls::read`]).
    pub(super) fn fill(
        &mut self,
        read: impl FnOnce(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            if self.buf.len() >= MAX_REPLY {
                return Err(std::io::Error::new(
                    ErrorKind::InvalidData,
                    "frame too long",
                ));
            }
            self.buf.resize((self.buf.len() * 2).max(16), 0);
        }
        let n = read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }
}
