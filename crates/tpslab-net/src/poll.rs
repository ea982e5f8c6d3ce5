//! epoll(7), level-triggered, for the request/response server's shared worker threads:
//! rustix's epoll (no `unsafe` here) behind a small API of tokens and interest bits.

use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};
use rustix::event::Timespec;
use rustix::io::Errno;
use std::os::fd::{AsFd, OwnedFd};

use crate::NetError;

/// Readable (or the peer closed: a read returns 0).
pub const READABLE: u32 = EventFlags::IN.bits();
/// Writable.
pub const WRITABLE: u32 = EventFlags::OUT.bits();
/// Hang-up or error on the descriptor.
pub const HANGUP: u32 = EventFlags::HUP.bits() | EventFlags::ERR.bits() | EventFlags::RDHUP.bits();

/// An epoll instance; descriptors are registered with a caller-chosen token.
pub struct Epoll {
    fd: OwnedFd,
    buf: Vec<Event>,
}

fn io(what: impl Into<String>, e: Errno) -> NetError {
    NetError::io(what, std::io::Error::from(e))
}

impl Epoll {
    /// A new instance that reports at most `max_events` per wait. Errors: EMFILE.
    pub fn new(max_events: usize) -> Result<Epoll, NetError> {
        let fd = epoll::create(CreateFlags::CLOEXEC).map_err(|e| io("epoll_create1", e))?;
        let empty = Event {
            flags: EventFlags::empty(),
            data: EventData::new_u64(0),
        };
        Ok(Epoll {
            fd,
            buf: vec![empty; max_events.max(1)],
        })
    }

    fn flags(interest: u32) -> EventFlags {
        // Half-close reports only matter while reading; watched while only writing,
        // a peer that shut down its side would wake the wait forever (level-triggered).
        let i = if interest & READABLE != 0 {
            interest | EventFlags::RDHUP.bits()
        } else {
            interest
        };
        EventFlags::from_bits_retain(i)
    }

    /// Watches `fd` for `interest` (READABLE, WRITABLE or both) under `token`.
    pub fn add(&self, fd: impl AsFd, token: u64, interest: u32) -> Result<(), NetError> {
        epoll::add(
            &self.fd,
            fd,
            EventData::new_u64(token),
            Self::flags(interest),
        )
        .map_err(|e| io("epoll_ctl ADD", e))
    }

    /// Changes the interest of a watched `fd`.
    pub fn modify(&self, fd: impl AsFd, token: u64, interest: u32) -> Result<(), NetError> {
        epoll::modify(
            &self.fd,
            fd,
            EventData::new_u64(token),
            Self::flags(interest),
        )
        .map_err(|e| io("epoll_ctl MOD", e))
    }

    /// Stops watching `fd` (closing it does too).
    pub fn delete(&self, fd: impl AsFd) -> Result<(), NetError> {
        epoll::delete(&self.fd, fd).map_err(|e| io("epoll_ctl DEL", e))
    }

    /// Waits up to `timeout` (nanosecond precision where the kernel has epoll_pwait2) and
    /// appends (token, events) of ready descriptors to `out`; EINTR returns nothing.
    pub fn wait_ns(
        &mut self,
        out: &mut Vec<(u64, u32)>,
        timeout: std::time::Duration,
    ) -> Result<(), NetError> {
        let t = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let n = match epoll::wait(&self.fd, &mut self.buf[..], Some(&t)) {
            Ok(n) => n,
            Err(Errno::INTR) => return Ok(()),
            Err(e) => return Err(io("epoll_wait", e)),
        };
        out.extend(self.buf[..n].iter().map(|ev| {
            let (flags, data) = (ev.flags, ev.data);
            (data.u64(), flags.bits())
        }));
        Ok(())
    }

    /// Waits up to `timeout_ms` (negative: without limit) and appends (token, events) of
    /// ready descriptors to `out`. An interrupted wait (EINTR) returns with nothing.
    pub fn wait(&mut self, out: &mut Vec<(u64, u32)>, timeout_ms: i32) -> Result<(), NetError> {
        let t = (timeout_ms >= 0).then(|| Timespec {
            tv_sec: (timeout_ms / 1000).into(),
            tv_nsec: ((timeout_ms % 1000) * 1_000_000).into(),
        });
        let n = match epoll::wait(&self.fd, &mut self.buf[..], t.as_ref()) {
            Ok(n) => n,
            Err(Errno::INTR) => return Ok(()),
            Err(e) => return Err(io("epoll_wait", e)),
        };
        out.extend(self.buf[..n].iter().map(|ev| {
            let (flags, data) = (ev.flags, ev.data);
            (data.u64(), flags.bits())
        }));
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
        ep.add(&s, 42, READABLE).unwrap();
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
        ep.delete(&s).unwrap();
        // A file that cannot be polled: EPERM, an error, not a panic.
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert!(ep.add(&f, 1, READABLE).is_err());
    }
}

/// A timer descriptor (timerfd on CLOCK_MONOTONIC, the clock of [`crate::mono_ns`]):
/// readable from its deadline until [`Timer::clear`]. Watched in an [`Epoll`] it wakes a
/// wait at a deadline to the microsecond, where epoll_pwait's own timeout is rounded up
/// to whole milliseconds (epoll_pwait2 is not assumed: kernels before 5.11 lack it).
pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    /// A disarmed, non-blocking timer. Errors: EMFILE.
    pub fn new() -> Result<Timer, NetError> {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .map_err(|e| io("timerfd_create", e))?;
        Ok(Timer { fd })
    }

    /// Arms it for `deadline_ns` ([`crate::mono_ns`] time; one shot), replacing any
    /// deadline it had; a deadline already past makes it readable at once.
    pub fn set_at(&self, deadline_ns: u64) -> Result<(), NetError> {
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags};
        let at = deadline_ns.max(1);
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: (at / 1_000_000_000) as _,
                tv_nsec: (at % 1_000_000_000) as _,
            },
        };
        timerfd_settime(&self.fd, TimerfdTimerFlags::ABSTIME, &spec)
            .map(|_| ())
            .map_err(|e| io("timerfd_settime", e))
    }

    /// Takes its expiry (it is readable no more until the next deadline).
    pub fn clear(&self) {
        let mut b = [0u8; 8];
        // Nothing to read (EAGAIN: not expired) is fine.
        let _ = rustix::io::read(&self.fd, &mut b);
    }
}

impl AsFd for Timer {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod timer_tests {
    use super::*;

    #[test]
    fn a_timer_wakes_an_epoll_wait_at_its_deadline_to_well_under_a_millisecond() {
        let mut ep = Epoll::new(4).unwrap();
        let t = Timer::new().unwrap();
        ep.add(&t, 7, READABLE).unwrap();
        let mut late = vec![];
        for _ in 0..20 {
            let at = crate::mono_ns() + 300_000;
            t.set_at(at).unwrap();
            let mut ev = vec![];
            while ev.is_empty() {
                ep.wait_ns(&mut ev, std::time::Duration::from_millis(50))
                    .unwrap();
            }
            let now = crate::mono_ns();
            assert_eq!(ev[0].0, 7);
            assert!(now >= at, "woken before its deadline");
            late.push(now - at);
            t.clear();
        }
        late.sort();
        // The median wake-up: a rounded-up epoll timeout would be ~700 us late.
        assert!(late[10] < 400_000, "late by {late:?} ns");
    }
}
