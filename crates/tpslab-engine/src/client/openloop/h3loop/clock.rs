//! A loop thread's timer to the microsecond for its tasks: tokio's own sleeps are
//! rounded up to whole milliseconds (its timer wheel and epoll's timeout), which would
//! make nearly every intended send late by up to 1 ms and read as the generator's own
//! lag. One timerfd, watched by tokio's reactor, armed at the
//! earliest deadline of the thread's sleeping tasks (`tpslab_net::async_timer`); [`Clock::run`] wakes those due.

use std::cell::{Cell, RefCell};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::task::{Poll, Waker};

use tpslab_net::async_timer::AsyncTimer;
use tpslab_net::mono_ns;

/// A sleeping task: its deadline (ns) and how to wake it.
struct Entry(u64, Waker);

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.cmp(&o.0)
    }
}

/// One loop thread's timer (not `Sync`: its tasks share it on that thread).
pub(super) struct Clock {
    fd: AsyncTimer,
    heap: RefCell<BinaryHeap<Reverse<Entry>>>,
    /// The deadline the timerfd is armed for (u64::MAX: none).
    armed: Cell<u64>,
}

impl Clock {
    /// A clock on this thread's tokio reactor. Errors: timerfd_create's, the reactor's.
    pub(super) fn new() -> Result<Clock, tpslab_net::NetError> {
        Ok(Clock {
            fd: AsyncTimer::new()?,
            heap: RefCell::new(BinaryHeap::new()),
            armed: Cell::new(u64::MAX),
        })
    }

    /// Waits until `at` ([`mono_ns`] time): at once when past. Its deadline is on the heap
    /// once per waker (a task polled again before its time, as a join polls every future
    /// it holds, adds nothing).
    pub(super) async fn sleep_until(&self, at: u64) {
        let mut on: Option<Waker> = None;
        poll_fn(|cx| {
            if mono_ns() >= at {
                return Poll::Ready(());
            }
            if on.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                return Poll::Pending;
            }
            on = Some(cx.waker().clone());
            self.heap
                .borrow_mut()
                .push(Reverse(Entry(at, cx.waker().clone())));
            if at < self.armed.get() && self.fd.set_at(at).is_ok() {
                self.armed.set(at);
            }
            Poll::Pending
        })
        .await
    }

    /// Wakes the tasks whose deadline came, as long as it runs (never returns).
    pub(super) async fn run(&self) {
        loop {
            // A tokio tick as well: a wake-up the timerfd misses costs a millisecond at
            // most, never a stall.
            tokio::select! {
                _ = self.fd.expired() => {}
                _ = tokio::time::sleep(std::time::Duration::from_millis(1)) => {}
            }
            let now = mono_ns();
            let mut heap = self.heap.borrow_mut();
            while heap.peek().is_some_and(|e| e.0 .0 <= now) {
                if let Some(Reverse(Entry(_, w))) = heap.pop() {
                    w.wake();
                }
            }
            let next = heap.peek().map_or(u64::MAX, |e| e.0 .0);
            self.armed.set(u64::MAX);
            if next != u64::MAX && self.fd.set_at(next).is_ok() {
                self.armed.set(next);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;
    use tpslab_net::mono_ns;

    /// Sleeps of a fraction of a millisecond apart end within well under one of their
    /// deadlines (tokio's own would round each up to the next millisecond), whatever the
    /// order they began in.
    /// 20 deadlines 0.3 ms apart, begun in reverse order: how late each sleep ended, ns.
    fn lates() -> Vec<u64> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let c = Clock::new().unwrap();
            let sleeps = futures_util::future::join_all((0..20u64).map(|i| {
                let c = &c;
                async move {
                    let at = mono_ns() + 3_000_000 + (19 - i) * 300_000;
                    c.sleep_until(at).await;
                    mono_ns() - at
                }
            }));
            tokio::select! {
                l = sleeps => l,
                _ = c.run() => unreachable!(),
            }
        })
    }

    /// Sleeps end within well under a millisecond of their deadlines (tokio's own sleeps
    /// would end up to one late, their median about half of one), whatever the order
    /// they began in. Three tries: a busy host may hold the thread back for a few
    /// milliseconds once.
    #[test]
    fn sleeps_end_at_their_deadline_to_well_under_a_millisecond() {
        let mut tries = vec![];
        for _ in 0..3 {
            let mut l = lates();
            l.sort_unstable();
            if l[10] < 300_000 {
                return;
            }
            tries.push(l);
        }
        panic!("late by {tries:?} ns");
    }
}
