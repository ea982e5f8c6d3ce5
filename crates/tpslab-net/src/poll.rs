//! epoll(7), level-triggered, for the request/response server's shared worker threads.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::NetError;

/// Readable (or the peer closed: a read returns 0).
pub const READABLE: u32 = libc::EPOLLIN as u32;
/// Writable.
pub const WRITABLE: u32 = libc::EPOLLOUT as u32;
/// Hang-up or error on the descriptor.
pub const HANGUP: u32 = (libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32;

/// An epoll instance; descriptors are registered with a caller-chosen token.
pub struct Epoll {
    fd: OwnedFd,
    buf: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new instance that reports at most `max_events` per wait. Errors: EMFILE.
    pub fn new(max_events: usize) -> Result<Epoll, NetError> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(NetError::last("epoll_create1"));
        }
        Ok(Epoll {
            // SAFETY: fd was just created.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; max_events.max(1)],
        })
    }

    fn ctl(
        &self,
        op: i32,
        fd: RawFd,
        token: u64,
        interest: u32,
        what: &str,
    ) -> Result<(), NetError> {
        let mut ev = libc::epoll_event {
            // Half-close reports only matter while reading; watched while only writing,
            // a peer that shut down its side would wake the wait forever (level-triggered).
            events: if interest & READABLE != 0 {
                interest | libc::EPOLLRDHUP as u32
            } else {
                interest
            },
            u64: token,
        };
        // SAFETY: a valid epoll fd and event struct.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) } != 0 {
            return Err(NetError::last(format!("epoll_ctl {what} fd {fd}")));
        }
        Ok(())
    }

    /// Watches `fd` for `interest` (READABLE, WRITABLE or both) under `token`.
    pub fn add(&self, fd: RawFd, token: u64, interest: u32) -> Result<(), NetError> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, interest, "ADD")
    }

    /// Changes the interest of a watched `fd`.
    pub fn modify(&self, fd: RawFd, token: u64, interest: u32) -> Result<(), NetError> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, interest, "MOD")
    }

    /// Stops watching `fd` (closing it does too).
    pub fn delete(&self, fd: RawFd) -> Result<(), NetError> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0, "DEL")
    }

    /// Waits up to `timeout_ms` and appends (token, events) of ready descriptors to
    /// `out`. An interrupted wait (EINTR) returns with nothing.
    pub fn wait(&mut self, out: &mut Vec<(u64, u32)>, timeout_ms: i32) -> Result<(), NetError> {
        // SAFETY: the kernel writes at most buf.len() events into buf.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr(),
                self.buf.len() as i32,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(());
            }
            return Err(NetError::io("epoll_wait", e));
        }
        for ev in &self.buf[..n as usize] {
            let (events, token) = (ev.events, ev.u64);
            out.push((token, events));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reports_readable_and_hangup_by_token() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut ep = Epoll::new(8).unwrap();
        ep.add(s.as_raw_fd(), 42, READABLE).unwrap();
        let mut out = vec![];
        ep.wait(&mut out, 0).unwrap();
        assert!(out.is_empty(), "nothing to read yet");
        c.write_all(b"x").unwrap();
        ep.wait(&mut out, 1000).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 42);
        assert!(out[0].1 & READABLE != 0);
        drop(c);
        out.clear();
        ep.wait(&mut out, 1000).unwrap();
        assert!(out[0].1 & HANGUP != 0, "{:x}", out[0].1);
        ep.delete(s.as_raw_fd()).unwrap();
        assert!(ep.add(-1, 1, READABLE).is_err());
    }
}
