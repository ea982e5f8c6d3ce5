//! The sending side of an open-loop load: each stream's datagrams at their intended
//! times, batched with sendmmsg (and GSO where the path takes it).

use super::*;

/// Sleeps most of the way to `deadline` (monotonic ns), then spins the rest. The sender
/// thread sets its timer slack to 1 ns (see [`sender`]) so that sleeps end within a few
/// microseconds and only the last stretch needs to spin: pacing without burning a core.
#[inline]
fn wait_until(deadline: u64) {
    const SPIN_NS: u64 = 15_000;
    loop {
        let now = mono_ns();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(left - SPIN_NS));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Sleeps until `deadline` (monotonic ns), without spinning: for pacing with a slack,
/// where a few microseconds late do not matter. One absolute clock_nanosleep per
/// wake-up and no clock read (the caller reads the clock once after it, for the
/// datagrams' send times): wake-ups are what pacing with a slack costs.
#[inline]
fn sleep_until(deadline: u64) {
    tpslab_net::sleep_until_mono_ns(deadline);
}

/// Marks a stream's sender done when dropped, also when the sender panics: its reply
/// receiver then ends after the drain period instead of waiting for ever.
struct SenderDone<'a>(&'a AtomicBool);

impl Drop for SenderDone<'_> {
    fn drop(&mut self) {
        self.0.store(true, Release);
    }
}

/// Messages per send call.
const BATCH: usize = 64;

/// Sends one stream's plan. Returns (lag of every datagram, lag of each burst start).
pub(super) fn sender(
    cfg: &LoadConfig,
    st: &Stream,
    stream: u16,
    start: u64,
    window_start: u64,
    stop: &AtomicBool,
) -> (Histogram<u64>, Histogram<u64>) {
    let _done = SenderDone(&st.sender_done);
    let mut sending = Sending::new(cfg, st, stream);
    // Default timer slack (50 us) would make every sleep overshoot; 1 ns keeps hrtimer
    // sleeps precise.
    tpslab_net::sched::set_timer_slack_ns(1);
    if !cfg.cpus.is_empty() {
        let _ = tpslab_net::sched::set_affinity(&cfg.cpus);
    }
    let plan = st.plan;
    let mut seq = 0u64;
    // Open loop is bounded in time as well as in count: a generator that falls behind
    // stops at the planned end (plus a grace of 100 ms) and reports what it did not send.
    let max = cfg.is_max();
    let run_end = start + (cfg.warmup + cfg.duration).as_nanos() as u64;
    let hard_end = if max { run_end } else { run_end + 100_000_000 };
    // With a pacing slack the sender wakes once per group: at the first unsent
    // datagram's time plus the slack, when it sends every datagram due by then.
    let slack = pacing_slack_used(cfg).as_nanos() as u64;
    while seq < plan.total && !stop.load(Relaxed) {
        let due = plan.intended(start, seq);
        if slack == 0 {
            wait_until(due);
        } else {
            sleep_until(due + slack);
        }
        let now = mono_ns();
        if now > hard_end {
            break;
        }
        let n = sending.fill(seq, now, start, window_start);
        sending.send(n, now);
        seq += n as u64;
    }
    st.window_attempted.store(sending.window_attempted, Relaxed);
    st.max_segments.store(sending.max_segments as u64, Relaxed);
    st.not_sent
        .store(if max { 0 } else { plan.total - seq }, Relaxed);
    st.sender_done.store(true, Release);
    (sending.lag, sending.burst_lag)
}

/// The datagram length, bytes, above which a batch's datagrams share one body (a header
/// slot each, then the body: two iovecs a message) instead of a whole slot each: a batch
/// of distinct slots is then over 16 KiB of source for the kernel's copies, more than
/// half of a 32 KiB L1 data cache (below it the second iovec would cost and save nothing).
pub(super) const SHARED_BODY_FROM: usize = 16 * 1024 / BATCH;

/// A stream's sender between its send calls: its messages (bodies filled once) and
/// what it has counted.
struct Sending<'a> {
    cfg: &'a LoadConfig,
    st: &'a Stream,
    stream: u16,
    /// The datagrams' length, bytes (at least 1).
    len: usize,
    /// Segments per message: 1, or with GSO as many as fit in 64 KiB (at most 64).
    per_msg: usize,
    sb: SendBatch,
    /// Datagrams in each message of the last send.
    in_msg: [usize; BATCH],
    /// Most datagrams one message carried that the kernel took.
    max_segments: usize,
    lag: Histogram<u64>,
    burst_lag: Histogram<u64>,
    window_attempted: u64,
    /// Send calls so far (the stream's flows take them in turn).
    calls: usize,
}

impl<'a> Sending<'a> {
    fn new(cfg: &'a LoadConfig, st: &'a Stream, stream: u16) -> Self {
        let len = cfg.datagram_len().max(1);
        let per_msg = if st.gso {
            (65_000 / len).clamp(1, 64)
        } else {
            1
        };
        let mut sb = if per_msg == 1 && cfg.payload.is_none() && len > SHARED_BODY_FROM {
            // Datagrams that differ only in their header share one body: the kernel
            // copies each from the same bytes, as the kernel-limit sender's do (issue 61).
            let mut body = vec![0u8; len - HEADER_LEN];
            wire::fill_body(&mut body);
            SendBatch::with_shared_tail(BATCH, HEADER_LEN, &body)
        } else {
            SendBatch::new(BATCH, len * per_msg)
        };
        for i in 0..BATCH {
            for seg in sb.slot_mut(i).chunks_mut(len) {
                match &cfg.payload {
                    Some(p) => seg.copy_from_slice(p),
                    None => {
                        let at = HEADER_LEN.min(seg.len());
                        wire::fill_body(&mut seg[at..])
                    }
                }
            }
        }
        Sending {
            cfg,
            st,
            stream,
            len,
            per_msg,
            sb,
            in_msg: [0usize; BATCH],
            max_segments: 0,
            lag: new_ns_histogram(),
            burst_lag: new_ns_histogram(),
            window_attempted: 0,
            calls: 0,
        }
    }

    /// Writes the headers (or sequence fields) of the datagrams due at `now` from `seq`
    /// on into the batch, at most a batch's worth, counting their lag; returns how many.
    #[inline]
    fn fill(&mut self, seq: u64, now: u64, start: u64, window_start: u64) -> usize {
        let (cfg, st, plan) = (self.cfg, self.st, self.st.plan);
        let (len, per_msg, max) = (self.len, self.per_msg, cfg.is_max());
        let mut n = 0usize;
        while n < BATCH * per_msg && seq + (n as u64) < plan.total {
            let s = seq + n as u64;
            let intended = if max { now } else { plan.intended(start, s) };
            if intended > now {
                break;
            }
            if intended >= window_start {
                // Schedule figures cover the window only: warm-up absorbs start-up effects.
                if s.is_multiple_of(plan.burst) {
                    self.burst_lag.saturating_record(now - intended);
                }
                self.lag.saturating_record(now - intended);
                self.window_attempted += 1;
            }
            let (m, j) = (n / per_msg, n % per_msg);
            // A shared body leaves the header alone in the slot.
            let slot = self.sb.slot_mut(m);
            let end = ((j + 1) * len).min(slot.len());
            let slot = &mut slot[j * len..end];
            match (cfg.payload.is_some(), cfg.seq_field) {
                (false, _) => Header {
                    stream: self.stream,
                    run_id: cfg.run_id,
                    seq: s,
                    intended_ns: intended,
                    sent_ns: now,
                }
                .write(slot),
                (true, Some((off, flen))) => {
                    wire::write_seq_field(slot, off, flen, s);
                    if let Some(log) = &st.log {
                        log.record(s, intended, now);
                    }
                }
                (true, None) => {}
            }
            n += 1;
        }
        n
    }

    /// Sends the `n` datagrams filled at `now` in one call, on the stream's next flow,
    /// and counts them (sent, failed by errno, attempted).
    #[inline]
    fn send(&mut self, n: usize, now: u64) {
        let (st, len, per_msg) = (self.st, self.len, self.per_msg);
        let msgs = n.div_ceil(per_msg);
        for (m, k) in self.in_msg.iter_mut().enumerate().take(msgs) {
            *k = (n - m * per_msg).min(per_msg);
            self.sb.set_len(m, *k * len);
        }
        // A refused message refuses all the datagrams it carried.
        let mut failed = 0usize;
        let mut refused = [false; BATCH];
        // The stream's flows in turn, one send call each.
        let sock = &st.socks[self.calls % st.socks.len()];
        self.calls = self.calls.wrapping_add(1);
        let in_msg = &self.in_msg;
        let out = self.sb.send(sock, msgs, |m, errno| {
            failed += in_msg[m];
            refused[m] = true;
            st.errors.add(errno, in_msg[m] as u64);
        });
        if per_msg > 1 {
            let most = (0..msgs).filter(|&m| !refused[m]).map(|m| in_msg[m]).max();
            self.max_segments = self.max_segments.max(most.unwrap_or(0));
        } else if n > failed {
            self.max_segments = self.max_segments.max(1);
        }
        if out.gso_turned_off {
            // The path cannot segment (the socket switched GSO off): the rest of the run
            // goes one datagram per message; the refused datagrams stay counted as failed.
            self.per_msg = 1;
        }
        st.sent.fetch_add((n - failed) as u64, Relaxed);
        st.failed.fetch_add(failed as u64, Relaxed);
        st.attempted.fetch_add(n as u64, Relaxed);
        st.last_send_ns.store(now, Relaxed);
    }
}
