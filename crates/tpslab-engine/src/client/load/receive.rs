//! The receiving side of a load: replies matched to their requests (by tpslab's header
//! or the user's sequence field), duplicates and reordering, latency by kernel timestamp.

use super::frames::{Frame, FrameBook};
use super::*;

/// Which sequence numbers of a stream were answered, over a sliding window of the most
/// recent W sequence numbers (W a power of two, at most 2^24 = 2 MiB of bits): exact for
/// runs of up to W datagrams per stream; a reply older than the window cannot be checked
/// for duplication and counts as new.
struct SeenWindow {
    bits: Vec<u64>,
    mask: u64,
    /// One past the highest sequence number seen.
    hi: u64,
}

impl SeenWindow {
    fn new(total: u64) -> SeenWindow {
        let w = total.clamp(64, 1 << 24).next_power_of_two();
        SeenWindow {
            bits: vec![0; (w / 64) as usize],
            mask: w - 1,
            hi: 0,
        }
    }
    /// Marks `seq`; false when it was already marked (a duplicate).
    #[inline]
    fn insert(&mut self, seq: u64) -> bool {
        let w = self.mask + 1;
        if seq >= self.hi {
            if seq - self.hi >= w {
                self.bits.fill(0);
            } else {
                for s in self.hi..=seq {
                    let i = s & self.mask;
                    self.bits[(i / 64) as usize] &= !(1u64 << (i % 64));
                }
            }
            self.hi = seq + 1;
        } else if self.hi - seq > w {
            return true;
        }
        let (word, bit) = self.at(seq);
        let new = self.bits[word] & bit == 0;
        self.bits[word] |= bit;
        new
    }
    /// Whether `seq` is marked (false for one older than the window: unknown).
    #[inline]
    fn contains(&self, seq: u64) -> bool {
        if seq >= self.hi || self.hi - seq > self.mask + 1 {
            return false;
        }
        let (word, bit) = self.at(seq);
        self.bits[word] & bit != 0
    }
    #[inline]
    fn at(&self, seq: u64) -> (usize, u64) {
        let i = seq & self.mask;
        ((i / 64) as usize, 1u64 << (i % 64))
    }
}

/// Reads replies for one stream until the sender is done and either every sent datagram
/// was answered or no reply came for the drain period.
pub(super) fn receiver(
    cfg: &LoadConfig,
    st: &Stream,
    stream: u16,
    window_start: u64,
    stop: &AtomicBool,
    target_idle: &(dyn Fn() -> bool + Sync),
) -> RecvResult {
    if !cfg.cpus.is_empty() {
        let _ = tpslab_net::sched::set_affinity(&cfg.cpus);
    }
    // With control buffers: the kernel's receive timestamp of each reply (SO_TIMESTAMPNS)
    // makes the RTT end when the reply reached the socket, not when this thread woke.
    let mut rb = RecvBatch::with_gro(64, 2048.max(cfg.datagram_len()));
    let mut res = RecvResult {
        lat_intended: Some(new_ns_histogram()),
        lat_actual: Some(new_ns_histogram()),
        lat_wakeup: Some(new_ns_histogram()),
        ..Default::default()
    };
    let mut seen = SeenWindow::new(st.plan.total);
    let mut max_seq: Option<u64> = None;
    let field_mask = cfg.seq_field.map_or(u64::MAX, |(_, l)| {
        if l >= 8 {
            u64::MAX
        } else {
            (1u64 << (l * 8)) - 1
        }
    });
    // One flow: a blocking read on its socket (SO_RCVTIMEO 20 ms). Several: epoll tells
    // which have replies (a failed epoll falls back to reading each in turn).
    let fds: Vec<_> = st.socks.iter().map(|k| k.fd()).collect();
    let mut ep = if fds.len() > 1 {
        tpslab_net::poll::Epoll::new(fds.len()).ok().filter(|ep| {
            st.socks
                .iter()
                .enumerate()
                .all(|(i, k)| ep.add(k, i as u64, tpslab_net::poll::READABLE).is_ok())
        })
    } else {
        None
    };
    let mut ready: Vec<(u64, u32)> = Vec::with_capacity(fds.len());
    let mut turn = 0usize;
    let mut last_reply = mono_ns();
    // A live stream's latencies: gathered per batch, handed over under one lock.
    let live = st.live_lat.lock().map(|g| g.is_some()).unwrap_or(false);
    let mut live_batch: Vec<u64> = Vec::with_capacity(if live { 64 } else { 0 });
    let mode = cfg.match_mode();
    // memcached's frames: a reply is answered when all its datagrams arrived.
    let mut frames = cfg.frame_header().map(|_| FrameBook::default());
    loop {
        let n = match ep.as_mut() {
            None => {
                turn = (turn + 1) % fds.len();
                rb.recv(fds[turn]).unwrap_or(0)
            }
            Some(ep) => {
                if ready.is_empty() {
                    let _ = ep.wait(&mut ready, 20);
                }
                match ready.pop() {
                    Some((i, _)) => rb.recv(fds[i as usize]).unwrap_or(0),
                    None => 0,
                }
            }
        };
        // The realtime clock first, then the monotonic one: a kernel stamp t (realtime)
        // came after the send, so real - t <= now - sent holds for every true stamp and
        // the plausibility check below never rejects one for the few ns between the two
        // reads (it did, 1 in 20000, under load).
        let real = tpslab_net::real_ns();
        let now = mono_ns();
        if n == 0 {
            if st.sender_done.load(Acquire) {
                let sent = st.sent.load(Relaxed);
                let idle = now.saturating_sub(last_reply.max(st.last_send_ns.load(Relaxed)));
                let all_in = match mode {
                    MatchMode::Header | MatchMode::SeqField => res.matched >= sent,
                    MatchMode::Aggregate | MatchMode::None => res.read >= sent,
                };
                let drain = cfg.drain.as_nanos() as u64;
                if all_in
                    || (idle > drain && target_idle())
                    || idle > drain + 10_000_000_000
                    || (stop.load(Relaxed) && idle > 100_000_000)
                {
                    break;
                }
            }
            continue;
        }
        last_reply = now;
        res.read += n as u64;
        live_batch.clear();
        for i in 0..n {
            let data = rb.get(i);
            let found = match mode {
                MatchMode::Header => Header::read(data)
                    .filter(|h| {
                        h.run_id == cfg.run_id && h.stream == stream && h.seq < st.plan.total
                    })
                    .map(|h| (h.seq, h.intended_ns, h.sent_ns)),
                MatchMode::SeqField => {
                    let (off, len) = cfg.seq_field.unwrap();
                    wire::read_seq_field(data, off, len)
                        .and_then(|v| st.log.as_ref().unwrap().lookup(v, field_mask))
                        .filter(|(s, _, _)| *s < st.plan.total)
                }
                MatchMode::Aggregate | MatchMode::None => None,
            };
            let Some((seq, intended, sent)) = found else {
                if mode != MatchMode::Aggregate {
                    res.unmatched += 1;
                }
                continue;
            };
            if let Some(book) = frames.as_mut() {
                let Some((no, total)) = wire::memcached_frame(data) else {
                    // A frame of this request numbered at or past its total (memcached
                    // numbers a frame it sends again after a failed send anew).
                    book.misnumbered += 1;
                    continue;
                };
                if seen.contains(seq) {
                    res.duplicates += 1;
                    continue;
                }
                match book.add(seq, no, total) {
                    Frame::Completed => {}
                    Frame::Part => continue,
                    Frame::Duplicate => {
                        res.duplicates += 1;
                        continue;
                    }
                    Frame::Mismatch => {
                        res.unmatched += 1;
                        continue;
                    }
                }
            }
            if !seen.insert(seq) {
                res.duplicates += 1;
                continue;
            }
            res.matched += 1;
            // Arrival on the monotonic clock: now, less the time it waited in the socket
            // by the kernel's realtime stamp (both clocks read together). A stamp from
            // the future, or one older than the send, means the wall clock stepped: use
            // our own clock for that reply.
            let (rx, stamped) = match rb.meta(i).rx_realtime_ns {
                Some(t) if t <= real && real - t <= now.saturating_sub(sent) => {
                    (now - (real - t), true)
                }
                _ => (now, false),
            };
            if live {
                live_batch.push(rx.saturating_sub(intended));
            }
            match max_seq {
                Some(m) if seq < m => res.reordered += 1,
                _ => max_seq = Some(seq),
            }
            if intended >= window_start {
                res.window_answered += 1;
                res.rx_timestamped += u64::from(stamped);
                if let Some(h) = res.lat_intended.as_mut() {
                    h.saturating_record(rx.saturating_sub(intended));
                }
                if let Some(h) = res.lat_actual.as_mut() {
                    h.saturating_record(rx.saturating_sub(sent));
                }
                if let Some(h) = res.lat_wakeup.as_mut() {
                    h.saturating_record(now.saturating_sub(sent));
                }
            }
        }
        if !live_batch.is_empty() {
            if let Some(h) = st
                .live_lat
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
            {
                for &v in &live_batch {
                    h.saturating_record(v);
                }
            }
        }
    }
    res.frames = frames.map(|b| {
        [
            b.complete,
            b.incomplete(),
            b.received,
            b.expected(),
            b.misnumbered,
        ]
    });
    res
}
