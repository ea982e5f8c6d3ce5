//! The event-loop core of the client's loops, the users' loop (`users.rs`: a socket per
//! user) and the HTTP/2 loop (`openloop/h2loop`: streams on a few connections): their
//! epoll set made, or the loop's failure counted; and each turn's wait on it until the
//! loop's next due time, woken to the microsecond by a timerfd in the set (epoll's own
//! timeout is in whole milliseconds). The loops keep their due times on a heap of their
//! own and say which is next.

use std::time::Duration;

use tpslab_net::mono_ns;
use tpslab_net::poll::{Epoll, Timer, READABLE};

use crate::client::books::Books;

/// The token of the loop's [`Timer`] in its epoll set: a socket's token is below it.
pub(crate) const TIMER_TOKEN: u64 = u64::MAX;

/// The longest wait, ns: a loop looks at its clock (new users, time-outs, the run's end)
/// at least this often.
pub(crate) const MAX_WAIT_NS: u64 = 5_000_000;

/// A loop's epoll set (room for 1024 events a wait). None when it cannot be made: the
/// failure is counted in `books` (`epoll: ERROR`) and the loop's counts handed in (no
/// request in flight), so the caller returns at once.
pub(crate) fn epoll_for<B: Books>(books: &B) -> Option<Epoll> {
    match Epoll::new(1024) {
        Ok(ep) => Some(ep),
        Err(e) => {
            let mut l = books.local();
            books.failed(&mut l, mono_ns(), &format!("epoll: {e}"), false);
            books.finish(l, 0);
            None
        }
    }
}

/// A loop's waits on its epoll set: the timer that ends one at the next due time, and
/// the events buffer (allocated once).
pub(crate) struct Waits {
    /// In the set under [`TIMER_TOKEN`]; None without a descriptor left (due times then
    /// run up to a millisecond late).
    timer: Option<Timer>,
    /// The due time the timer is set for, ns (0: none).
    armed: u64,
    events: Vec<(u64, u32)>,
}

impl Waits {
    /// The waits on `ep`, its timer added to it.
    pub(crate) fn new(ep: &Epoll) -> Waits {
        Waits {
            timer: Timer::new()
                .ok()
                .filter(|t| ep.add(t, TIMER_TOKEN, READABLE).is_ok()),
            armed: 0,
            events: Vec::with_capacity(1024),
        }
    }

    /// Waits on `ep` until the loop's next due time `next` (monotonic ns; u64::MAX:
    /// none), at most [`MAX_WAIT_NS`], or only looks when `at_once`. Returns the sockets'
    /// events, (token, epoll event bits); the timer's are taken out (and it is cleared).
    /// None when the wait failed: the failure counted in `books` (`epoll_wait: ERROR`),
    /// after a pause of 1 ms (a failing wait must not spin).
    #[inline]
    pub(crate) fn wait<B: Books>(
        &mut self,
        ep: &mut Epoll,
        books: &B,
        local: &mut B::Local,
        next: u64,
        at_once: bool,
    ) -> Option<&[(u64, u32)]> {
        let now = mono_ns();
        let wait = if at_once {
            0
        } else {
            next.saturating_sub(now).min(MAX_WAIT_NS)
        };
        if let Some(t) = &self.timer {
            if next != self.armed && next < now + MAX_WAIT_NS && t.set_at(next).is_ok() {
                self.armed = next;
            }
        }
        self.events.clear();
        if let Err(e) = ep.wait_ns(&mut self.events, Duration::from_nanos(wait)) {
            books.failed(local, mono_ns(), &format!("epoll_wait: {e}"), false);
            std::thread::sleep(Duration::from_millis(1));
            return None;
        }
        // One pass: the timer's event (at most one) swapped out; the sockets' order does
        // not matter to the loops.
        if let Some(i) = self
            .events
            .iter()
            .position(|&(token, _)| token == TIMER_TOKEN)
        {
            if let Some(t) = &self.timer {
                t.clear();
            }
            self.armed = 0;
            self.events.swap_remove(i);
        }
        Some(&self.events)
    }
}
