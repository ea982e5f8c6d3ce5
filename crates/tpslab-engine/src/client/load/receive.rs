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
    let mut flows = Flows::new(st);
    let mut rcv = Receiving::new(cfg, st, stream, window_start);
    let mut last_reply = mono_ns();
    loop {
        let n = flows.recv(&mut rb);
        // The realtime clock first, then the monotonic one: a kernel stamp t (realtime)
        // came after the send, so real - t <= now - sent holds for every true stamp and
        // the plausibility check below never rejects one for the few ns between the two
        // reads (it did, 1 in 20000, under load).
        let real = tpslab_net::real_ns();
        let now = mono_ns();
        if n == 0 {
            if st.sender_done.load(Acquire) && rcv.drained(now, last_reply, stop, target_idle) {
                break;
            }
            continue;
        }
        last_reply = now;
        rcv.res.read += n as u64;
        rcv.live_batch.clear();
        for i in 0..n {
            let data = rb.get(i);
            let Some((seq, intended, sent)) = rcv.request_of(data) else {
                if rcv.mode != MatchMode::Aggregate {
                    rcv.res.unmatched += 1;
                }
                continue;
            };
            if !rcv.first_answer(seq, data) {
                continue;
            }
            rcv.res.matched += 1;
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
            rcv.answered(seq, intended, sent, (rx, stamped), now);
        }
        rcv.hand_live();
    }
    let mut res = rcv.res;
    res.frames = rcv.frames.map(|b| {
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

/// A stream's reply sockets, read in turn.
struct Flows {
    fds: Vec<i32>,
    /// One flow: a blocking read on its socket (SO_RCVTIMEO 20 ms). Several: epoll tells
    /// which have replies (a failed epoll falls back to reading each in turn).
    ep: Option<tpslab_net::poll::Epoll>,
    ready: Vec<(u64, u32)>,
    turn: usize,
}

impl Flows {
    fn new(st: &Stream) -> Flows {
        let fds: Vec<_> = st.socks.iter().map(|k| k.fd()).collect();
        let ep = if fds.len() > 1 {
            tpslab_net::poll::Epoll::new(fds.len()).ok().filter(|ep| {
                st.socks
                    .iter()
                    .enumerate()
                    .all(|(i, k)| ep.add(k, i as u64, tpslab_net::poll::READABLE).is_ok())
            })
        } else {
            None
        };
        Flows {
            ready: Vec::with_capacity(fds.len()),
            fds,
            ep,
            turn: 0,
        }
    }

    /// Reads a batch of replies from the next flow with some into `rb`: how many (0
    /// after waiting 20 ms for none).
    #[inline]
    fn recv(&mut self, rb: &mut RecvBatch) -> usize {
        match self.ep.as_mut() {
            None => {
                self.turn = (self.turn + 1) % self.fds.len();
                rb.recv(self.fds[self.turn]).unwrap_or(0)
            }
            Some(ep) => {
                if self.ready.is_empty() {
                    let _ = ep.wait(&mut self.ready, 20);
                }
                match self.ready.pop() {
                    Some((i, _)) => rb.recv(self.fds[i as usize]).unwrap_or(0),
                    None => 0,
                }
            }
        }
    }
}

/// What a stream's receiver has matched and counted.
struct Receiving<'a> {
    cfg: &'a LoadConfig,
    st: &'a Stream,
    stream: u16,
    window_start: u64,
    mode: MatchMode,
    res: RecvResult,
    seen: SeenWindow,
    max_seq: Option<u64>,
    /// The user's sequence field's bits (all ones for 8 bytes or more).
    field_mask: u64,
    /// A live stream's latencies: gathered per batch, handed over under one lock.
    live: bool,
    live_batch: Vec<u64>,
    /// memcached's frames: a reply is answered when all its datagrams arrived.
    frames: Option<FrameBook>,
}

impl<'a> Receiving<'a> {
    fn new(cfg: &'a LoadConfig, st: &'a Stream, stream: u16, window_start: u64) -> Self {
        let live = st.live_lat.lock().map(|g| g.is_some()).unwrap_or(false);
        Receiving {
            cfg,
            st,
            stream,
            window_start,
            mode: cfg.match_mode(),
            res: RecvResult {
                lat_intended: Some(new_ns_histogram()),
                lat_actual: Some(new_ns_histogram()),
                lat_wakeup: Some(new_ns_histogram()),
                ..Default::default()
            },
            seen: SeenWindow::new(st.plan.total),
            max_seq: None,
            field_mask: cfg.seq_field.map_or(u64::MAX, |(_, l)| {
                if l >= 8 {
                    u64::MAX
                } else {
                    (1u64 << (l * 8)) - 1
                }
            }),
            live,
            live_batch: Vec::with_capacity(if live { 64 } else { 0 }),
            frames: cfg.frame_header().map(|_| FrameBook::default()),
        }
    }

    /// With the sender done and no reply read at `now`: whether to stop reading (every
    /// datagram sent answered, or no reply for the drain period).
    fn drained(
        &self,
        now: u64,
        last_reply: u64,
        stop: &AtomicBool,
        target_idle: &(dyn Fn() -> bool + Sync),
    ) -> bool {
        let st = self.st;
        let sent = st.sent.load(Relaxed);
        let idle = now.saturating_sub(last_reply.max(st.last_send_ns.load(Relaxed)));
        let all_in = match self.mode {
            MatchMode::Header | MatchMode::SeqField => self.res.matched >= sent,
            MatchMode::Aggregate | MatchMode::None => self.res.read >= sent,
        };
        let drain = self.cfg.drain.as_nanos() as u64;
        all_in
            || (idle > drain && target_idle())
            || idle > drain + 10_000_000_000
            || (stop.load(Relaxed) && idle > 100_000_000)
    }

    /// The request a reply answers: (sequence number, intended and actual send time, ns),
    /// None when it matches none of this stream's (or replies are not matched).
    #[inline]
    fn request_of(&self, data: &[u8]) -> Option<(u64, u64, u64)> {
        let (cfg, st) = (self.cfg, self.st);
        match self.mode {
            MatchMode::Header => Header::read(data)
                .filter(|h| {
                    h.run_id == cfg.run_id && h.stream == self.stream && h.seq < st.plan.total
                })
                .map(|h| (h.seq, h.intended_ns, h.sent_ns)),
            MatchMode::SeqField => {
                let (off, len) = cfg.seq_field.unwrap();
                wire::read_seq_field(data, off, len)
                    .and_then(|v| st.log.as_ref().unwrap().lookup(v, self.field_mask))
                    .filter(|(s, _, _)| *s < st.plan.total)
            }
            MatchMode::Aggregate | MatchMode::None => None,
        }
    }

    /// Whether the reply `data` to request `seq` answers it for the first time (with
    /// frames: completes it); else counted as a duplicate, a part, a mismatch or a
    /// misnumbered frame.
    #[inline]
    fn first_answer(&mut self, seq: u64, data: &[u8]) -> bool {
        if let Some(book) = self.frames.as_mut() {
            let Some((no, total)) = wire::memcached_frame(data) else {
                // A frame of this request numbered at or past its total (memcached
                // numbers a frame it sends again after a failed send anew).
                book.misnumbered += 1;
                return false;
            };
            if self.seen.contains(seq) {
                self.res.duplicates += 1;
                return false;
            }
            match book.add(seq, no, total) {
                Frame::Completed => {}
                Frame::Part => return false,
                Frame::Duplicate => {
                    self.res.duplicates += 1;
                    return false;
                }
                Frame::Mismatch => {
                    self.res.unmatched += 1;
                    return false;
                }
            }
        }
        if !self.seen.insert(seq) {
            self.res.duplicates += 1;
            return false;
        }
        true
    }

    /// Counts the first answer to request `seq` (sent at `sent`, intended at `intended`)
    /// that arrived at `rx` (kernel `stamped` or not) and was read at `now`, ns.
    #[inline]
    fn answered(
        &mut self,
        seq: u64,
        intended: u64,
        sent: u64,
        (rx, stamped): (u64, bool),
        now: u64,
    ) {
        let res = &mut self.res;
        if self.live {
            self.live_batch.push(rx.saturating_sub(intended));
        }
        match self.max_seq {
            Some(m) if seq < m => res.reordered += 1,
            _ => self.max_seq = Some(seq),
        }
        if intended >= self.window_start {
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

    /// Hands the batch's latencies to the live stream, under one lock.
    #[inline]
    fn hand_live(&self) {
        if self.live_batch.is_empty() {
            return;
        }
        if let Some(h) = self
            .st
            .live_lat
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            for &v in &self.live_batch {
                h.saturating_record(v);
            }
        }
    }
}
