//! Receive-buffer arithmetic: what the kernel charges per queued datagram (skb truesize),
//! how many datagrams a buffer holds, and the SO_RCVBUF a burst needs.
//!
//! Three sizes are easy to confuse:
//! - requested: the value passed to setsockopt(SO_RCVBUF);
//! - granted: what getsockopt(SO_RCVBUF) reads back, twice the request (capped first at
//!   net.core.rmem_max unless SO_RCVBUFFORCE) — the limit the kernel enforces; a socket
//!   that never asks gets net.core.rmem_default as its limit, not doubled;
//! - charged: the memory a queued datagram costs against that limit, its skb truesize
//!   (payload plus sk_buff and allocation overhead), which is what `rx_queue` in
//!   /proc/net/udp shows.

use tpslab_record::buffer::BufferNeed;

/// Datagrams a buffer limit holds when each is charged `truesize` bytes, on a kernel that
/// checks the limit including the new datagram (current Linux): floor(limit / truesize).
pub fn capacity_datagrams(limit_bytes: u64, truesize_bytes: u64) -> u64 {
    limit_bytes.checked_div(truesize_bytes).unwrap_or(0)
}

/// Rounds up to a multiple of 4096.
fn round_page(x: u64) -> u64 {
    x.div_ceil(4096).saturating_mul(4096)
}

/// The buffer that holds the measured backlog: `held` datagrams were queued when the
/// socket was full and at most `peak_dropped` were dropped within one burst interval, so
/// `held + peak_dropped` (at most `burst`, when bursts are known) had to wait at once.
/// Each is charged `truesize` bytes; `margin` (e.g. 2.0) covers larger bursts and
/// scheduling delays.
pub fn buffer_need(
    burst: u64,
    held: u64,
    peak_dropped: u64,
    truesize: u64,
    margin: f64,
) -> BufferNeed {
    let mut backlog = held + peak_dropped;
    if burst > 1 {
        backlog = backlog.min(burst);
    }
    let backlog = backlog.max(1);
    // f64 -> u64 saturates on absurd sizes instead of wrapping.
    let granted = round_page((backlog as f64 * truesize as f64 * margin).ceil() as u64);
    BufferNeed {
        burst,
        peak_backlog: backlog,
        truesize_bytes: truesize,
        granted_needed_bytes: granted,
        setsockopt_bytes: granted.div_ceil(2),
        margin,
    }
}

/// The margin diagnose and doctor put on a backlog: twice the datagrams that waited at
/// once (larger bursts, scheduling delays).
pub const BACKLOG_MARGIN: f64 = 2.0;

/// The buffer a burst of `burst` datagrams charged `truesize` bytes each needs when the
/// server reads nothing while it arrives (the worst case, and what a run that drops the
/// rest of a burst measures): [`buffer_need`] with the whole burst waiting.
pub fn burst_need(burst: u64, truesize: u64) -> BufferNeed {
    buffer_need(burst, 0, burst, truesize, BACKLOG_MARGIN)
}

/// The most datagrams dropped within one burst interval, as the samples can tell it:
/// [`peak_in_window`] over windows of `interval_s`, capped at `burst` when bursts are
/// sent (`burst > 1`). A window of samples can hold more than one burst's drops (the tail
/// of one burst and the next, when a burst is sent late, or a sample is read after the
/// drops it counts), while no more than its datagrams are dropped from one burst.
/// Returns (the figure, datagrams; the window's own count when the cap applied, else
/// None).
pub fn peak_burst_drops(
    t_s: &[f64],
    counts: &[f64],
    interval_s: f64,
    burst: u64,
) -> (u64, Option<u64>) {
    let peak = peak_in_window(t_s, counts, interval_s);
    if burst > 1 && peak > burst {
        (burst, Some(peak))
    } else {
        (peak, None)
    }
}

/// Most events in any window of `window_s` seconds, from per-interval counts:
/// `counts[i]` happened between `t_s[i]` and `t_s[i + 1]` (seconds, increasing). A window
/// always holds at least one interval.
pub fn peak_in_window(t_s: &[f64], counts: &[f64], window_s: f64) -> u64 {
    let n = counts.len().min(t_s.len().saturating_sub(1));
    let mut best = 0.0f64;
    let mut sum = 0.0;
    let mut lo = 0;
    for hi in 0..n {
        sum += counts[hi];
        while lo < hi && t_s[hi + 1] - t_s[lo] > window_s + 1e-9 {
            sum -= counts[lo];
            lo += 1;
        }
        best = best.max(sum);
    }
    best.round() as u64
}

/// Explains a queue reading above the buffer limit (the S2 riddle: 213312 with SO_RCVBUF
/// 212992): on kernels that checked the limit before adding a datagram, a full queue is
/// the first multiple of truesize at or above the limit. Returns the (datagrams, truesize)
/// pairs with truesize between 256 and 4096 bytes (multiples of 64, as allocations are)
/// that explain the reading: `n * t == reading` and `(n - 1) * t <= limit`.
pub fn explain_overshoot(reading: u64, limit: u64) -> Vec<(u64, u64)> {
    (4..=64)
        .map(|k| k * 64)
        .filter(|t| reading.is_multiple_of(*t))
        .map(|t| (reading / t, t))
        .filter(|&(n, t)| reading > limit && (n - 1) * t <= limit)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::buffer::TruesizeProbe;

    /// Figures measured on this project's machine (kernel 6.18, ../shared/limits/README.md
    /// and `tpslab run udp`): 1024-byte datagrams are charged 2304 bytes; the default
    /// 212992-byte buffer holds 92 of them and a full queue reads 211968.
    #[test]
    fn default_buffer_holds_92_datagrams_of_1024_bytes() {
        assert_eq!(capacity_datagrams(212992, 2304), 92);
        assert_eq!(92 * 2304, 211968);
        let p = TruesizeProbe {
            size_bytes: 1024,
            queued: 10,
            rx_queue_bytes: 23040,
            granted_bytes: 212992,
            full_queued: 92,
            full_rx_queue_bytes: 211968,
        };
        assert_eq!(p.truesize_bytes(), 2304);
        assert!(!p.overshoots());
    }

    #[test]
    fn s2_riddle_is_a_full_queue_checked_before_adding() {
        let pairs = explain_overshoot(213312, 212992);
        // 303 datagrams charged 704 bytes each: 302 x 704 = 212608 < 212992, so the 303rd
        // was admitted and the queue read 213312.
        assert!(pairs.contains(&(303, 704)), "{pairs:?}");
        for (n, t) in &pairs {
            assert_eq!(n * t, 213312);
            assert!((n - 1) * t < 212992);
        }
        // A reading at or below the limit needs no overshoot explanation.
        assert!(explain_overshoot(211968, 212992).is_empty());
    }

    #[test]
    fn s1_backlog_from_measured_drops() {
        // The `run udp` of docs/s1-udp-loss.md: 208417 drops over 70 bursts of 5000, 92 held: about 2977 + 92 waited.
        let n = buffer_need(5000, 92, 2977, 2304, 2.0);
        assert_eq!(n.peak_backlog, 3069);
        assert_eq!(n.granted_needed_bytes, round_page(3069 * 2304 * 2));
        assert_eq!(n.setsockopt_bytes * 2, n.granted_needed_bytes);
        // Never more than the whole burst.
        assert_eq!(buffer_need(5000, 92, 9000, 2304, 2.0).peak_backlog, 5000);
        // Paced load (burst 1): no cap.
        assert_eq!(buffer_need(1, 92, 500, 2304, 2.0).peak_backlog, 592);
    }

    #[test]
    fn peak_window_sums_neighbouring_samples() {
        let t: Vec<f64> = (0..10).map(|i| i as f64 * 0.01).collect();
        let c = [0.0, 100.0, 200.0, 0.0, 0.0, 0.0, 50.0, 50.0, 50.0, 0.0];
        // 5 intervals of 10 ms: 100 + 200 + 0 + 0 + 0.
        assert_eq!(peak_in_window(&t, &c, 0.05), 300);
        assert_eq!(peak_in_window(&t, &c, 0.025), 300);
        assert_eq!(peak_in_window(&t, &c, 0.015), 200);
        assert_eq!(peak_in_window(&t, &c, 0.001), 200);
        assert_eq!(peak_in_window(&t, &c, 1.0), 450);
    }

    /// The diagnose fixture's series in small: bursts every 50 ms sampled every ~10 ms;
    /// a window of samples no longer than 50 ms holds the tail of one burst (908) and
    /// most of the next (4495): 5403, more than the burst of 5000 it is said to be within.
    #[test]
    fn drops_within_one_burst_interval_never_exceed_the_burst() {
        let t = [2.0006, 2.0114, 2.0221, 2.0306, 2.0407, 2.05, 2.0609];
        let counts = [3100.0, 908.0, 0.0, 0.0, 0.0, 4495.0];
        assert_eq!(peak_in_window(&t, &counts, 0.05), 5403);
        assert_eq!(
            peak_burst_drops(&t, &counts, 0.05, 5000),
            (5000, Some(5403))
        );
        // Below the burst: the window's count as it is.
        assert_eq!(peak_burst_drops(&t, &counts, 0.05, 8000), (5403, None));
        // Paced (no bursts): no cap.
        assert_eq!(peak_burst_drops(&t, &counts, 0.1, 1), (8503, None));
    }
}
