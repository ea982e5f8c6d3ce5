//! A [`Timer`] watched by tokio's reactor: HTTP/3's loop (quinn is asynchronous) wakes its
//! tasks at intended send times to the microsecond with it, where tokio's own sleeps are
//! rounded up to whole milliseconds.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use tokio::io::unix::AsyncFd;

use crate::poll::Timer;
use crate::NetError;

/// The timer's descriptor as tokio reads it.
struct Fd(Timer);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A one-shot timerfd (monotonic, [`crate::mono_ns`] time) registered with the current
/// tokio runtime's reactor.
pub struct AsyncTimer(AsyncFd<Fd>);

impl AsyncTimer {
    /// A disarmed timer on the current runtime (call it inside one). Errors:
    /// timerfd_create's, the reactor's registration.
    pub fn new() -> Result<AsyncTimer, NetError> {
        let fd = Fd(Timer::new()?);
        // SAFETY: `Fd` owns the timer's OwnedFd and the AsyncFd owns `Fd`: the descriptor
        // stays open, the same, and returned by every `as_raw_fd` until the AsyncFd drops.
        let a = unsafe { AsyncFd::register(fd) }
            .map_err(|e| NetError::io("registering a timerfd with tokio", e.into()))?;
        Ok(AsyncTimer(a))
    }

    /// Arms it for `deadline_ns` (one shot), replacing any deadline it had. Errors:
    /// timerfd_settime's.
    pub fn set_at(&self, deadline_ns: u64) -> Result<(), NetError> {
        self.0.get_ref().0.set_at(deadline_ns)
    }

    /// Waits until its deadline has come, and takes the expiry. A reactor error returns
    /// at once (the caller checks its deadlines anyway).
    pub async fn expired(&self) {
        if let Ok(mut g) = self.0.readable().await {
            g.get_inner().0.clear();
            g.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::AsyncTimer;
    use crate::mono_ns;

    /// Eleven waits for a deadline 0.5 ms away: how late each ended, ns, sorted.
    fn lates() -> Vec<u64> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut lates = rt.block_on(async {
            let t = AsyncTimer::new().unwrap();
            let mut lates = vec![];
            for _ in 0..11 {
                let at = mono_ns() + 500_000;
                t.set_at(at).unwrap();
                t.expired().await;
                let now = mono_ns();
                assert!(now >= at, "woken {} ns early", at - now);
                lates.push(now - at);
            }
            lates
        });
        lates.sort_unstable();
        lates
    }

    /// A deadline 0.5 ms away is kept to well under a millisecond (tokio's sleep would
    /// round it up to the next one). Three tries: a busy host may hold the thread back.
    #[test]
    fn it_wakes_a_task_at_its_deadline() {
        let mut tries = vec![];
        for _ in 0..3 {
            let l = lates();
            if l[5] < 300_000 {
                return;
            }
            tries.push(l);
        }
        panic!("late by {tries:?} ns");
    }
}
