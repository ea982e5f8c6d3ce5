//! A user-space delay line between two network namespaces: netem for kernels without it.
//!
//! Each namespace gets a point-to-point TUN device (`tpsl-a` with 10.77.0.1 in A,
//! `tpsl-b` with 10.77.0.2 in B). One thread per direction reads the packets one side
//! routes into its TUN, drops a share at random (`loss`), serialises them at `rate_bps`
//! behind a FIFO of at most `queue_packets` (tail drop, like a router port), holds each
//! for the one-way `delay_ns` and writes it into the other TUN. RTT = 2 x delay_ns plus
//! the forwarding cost (tens of microseconds, measured by the tests). With
//! `idle_timeout_ns` a middlebox ([`crate::lab::middlebox`]) sits in front of the line and
//! forgets flows idle for longer (S5).

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tpslab_net::mono_ns;
use tpslab_net::ns::NetNs;
use tpslab_net::tun::{self, Tun};

use crate::lab::middlebox::{FlowTable, Verdict};
use crate::EngineError;

/// Address of side A (on `tpsl-a` in namespace A).
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Address of side B (on `tpsl-b` in namespace B).
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
use tpslab_plan::limits::MAX_LINE_PACKETS;
use tpslab_plan::tcp::LinkConfig;
use tpslab_record::tcp::DirStats;

#[derive(Default)]
struct DirCounters {
    packets_in: AtomicU64,
    bytes_in: AtomicU64,
    delivered: AtomicU64,
    dropped_loss: AtomicU64,
    dropped_queue: AtomicU64,
    line_full: AtomicU64,
    write_errors: AtomicU64,
    on_line_at_stop: AtomicU64,
    forgotten: AtomicU64,
    resets_sent: AtomicU64,
}

impl DirCounters {
    fn snapshot(&self) -> DirStats {
        DirStats {
            packets_in: self.packets_in.load(Relaxed),
            bytes_in: self.bytes_in.load(Relaxed),
            delivered: self.delivered.load(Relaxed),
            dropped_loss: self.dropped_loss.load(Relaxed),
            dropped_queue: self.dropped_queue.load(Relaxed),
            line_full: self.line_full.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            on_line_at_stop: self.on_line_at_stop.load(Relaxed),
            forgotten: self.forgotten.load(Relaxed),
            resets_sent: self.resets_sent.load(Relaxed),
        }
    }
}

/// A running delay line. Stops (and removes both TUN devices) when dropped.
pub struct Link {
    stop: Arc<AtomicBool>,
    counters: Arc<[DirCounters; 2]>,
    threads: Vec<JoinHandle<()>>,
    /// The configuration it runs with.
    pub config: LinkConfig,
}

impl Link {
    /// Creates `tpsl-a` in `a` and `tpsl-b` in `b`, addresses them (ADDR_A, ADDR_B) and
    /// starts forwarding. Errors: bad config, no CAP_NET_ADMIN, a device name taken.
    pub fn start(a: &NetNs, b: &NetNs, config: LinkConfig) -> Result<Link, EngineError> {
        config.check().map_err(EngineError::Other)?;
        let make = |ns: &NetNs, name: &str, local: Ipv4Addr, peer: Ipv4Addr| {
            ns.run(|| -> Result<Tun, EngineError> {
                let t = Tun::create(name)?;
                tun::config_p2p(name, local, peer, config.mtu, 1000)?;
                Ok(t)
            })
            .map_err(|e| EngineError::os(format!("entering a namespace for {name}"), e))?
        };
        let ta = Arc::new(make(a, "tpsl-a", ADDR_A, ADDR_B)?);
        let tb = Arc::new(make(b, "tpsl-b", ADDR_B, ADDR_A)?);
        let stop = Arc::new(AtomicBool::new(false));
        let counters: Arc<[DirCounters; 2]> = Arc::new(Default::default());
        let table = config.idle_timeout.map(|t| {
            Arc::new(Mutex::new(
                FlowTable::new(tpslab_plan::time::nanos(&t), config.on_idle)
                    .with_timer(config.timer),
            ))
        });
        let mut threads = vec![];
        for (dir, (from, to)) in [(ta.clone(), tb.clone()), (tb, ta)].into_iter().enumerate() {
            let counters = counters.clone();
            let table = table.clone();
            let seed = config.seed.wrapping_add(dir as u64 * 0x9e37_79b9_7f4a_7c15);
            let st = stop.clone();
            let h = std::thread::Builder::new()
                .name(format!("link-{}", ["a2b", "b2a"][dir]))
                .spawn(move || {
                    let mb = table.as_ref().map(|t| (&**t, dir == 0));
                    forward(&from, &to, config, seed, &st, &counters[dir], mb)
                });
            match h {
                Ok(h) => threads.push(h),
                Err(e) => {
                    stop.store(true, Relaxed);
                    for h in threads {
                        let _ = h.join();
                    }
                    return Err(EngineError::os("spawning the link thread", e));
                }
            }
        }
        Ok(Link {
            stop,
            counters,
            threads,
            config,
        })
    }

    /// Counters so far: [A to B, B to A].
    pub fn stats(&self) -> [DirStats; 2] {
        [self.counters[0].snapshot(), self.counters[1].snapshot()]
    }

    /// Stops forwarding, removes the devices and returns the final counters.
    pub fn stop(mut self) -> [DirStats; 2] {
        self.halt();
        self.stats()
    }

    fn halt(&mut self) {
        self.stop.store(true, Relaxed);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A lab for idle studies: two throwaway namespaces (near, far) joined by a delay line
/// whose middlebox forgets flows idle for `idle_timeout_ns` (idle as `timer` counts it),
/// then does `on_idle`, and a non-blocking TCP listener on the far side (ADDR_B, a free
/// port). Dropping the returned values removes it all.
pub fn middlebox_lab(
    idle_timeout_ns: u64,
    on_idle: tpslab_plan::tcp::OnIdle,
    timer: tpslab_plan::tcp::IdleTimer,
) -> Result<(NetNs, NetNs, Link, std::net::TcpListener), EngineError> {
    let ns = |what| NetNs::create().map_err(|e| EngineError::os(format!("creating {what}"), e));
    let (a, b) = (ns("the near namespace")?, ns("the far namespace")?);
    let link = Link::start(
        &a,
        &b,
        LinkConfig {
            idle_timeout: Some(std::time::Duration::from_nanos(idle_timeout_ns)),
            on_idle,
            timer,
            ..Default::default()
        },
    )?;
    let listener = b
        .run(|| std::net::TcpListener::bind((ADDR_B, 0)))
        .and_then(|r| r)
        .map_err(|e| EngineError::os("listening in the far namespace", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| EngineError::os("listener", e))?;
    Ok((a, b, link, listener))
}

/// xorshift64*: the loss coin, cheap and repeatable.
fn next_unit(s: &mut u64) -> f64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
}

/// The line of one direction: what a packet arriving now meets.
struct Line {
    /// When the rate limiter finishes the last packet accepted, ns.
    free_at: u64,
    /// Finish times of packets accepted and not yet serialised (the queue).
    tx_done: VecDeque<u64>,
    /// Packets on the line: (due, buffer index, length).
    due: VecDeque<(u64, usize, usize)>,
}

impl Line {
    /// Accepts a packet of `len` bytes arriving at `now`: its due time, or `None` when
    /// the queue is full (tail drop).
    fn admit(&mut self, now: u64, len: usize, cfg: &LinkConfig) -> Option<u64> {
        let Some(rate) = cfg.rate_bps else {
            return Some(now + tpslab_plan::time::nanos(&cfg.delay));
        };
        while self.tx_done.front().is_some_and(|&t| t <= now) {
            self.tx_done.pop_front();
        }
        // The packet being serialised is not waiting; the rest are.
        if self.tx_done.len() > cfg.queue_packets {
            return None;
        }
        let start = self.free_at.max(now);
        let done = start + (len as f64 * 8.0 * 1e9 / rate) as u64;
        self.free_at = done;
        self.tx_done.push_back(done);
        Some(done + tpslab_plan::time::nanos(&cfg.delay))
    }
}

/// The middlebox in front of one direction: the shared table, and whether packets of this
/// direction come from the near side (A).
type Middlebox<'a> = Option<(&'a Mutex<FlowTable>, bool)>;

/// Writes the FINs of the flows the middlebox ends at `now` ([`FlowTable::expire`]) at
/// once, into the TUN of the end each is for (`from` is the side this direction reads).
fn end_flows(table: &mut FlowTable, from_a: bool, now: u64, from: &Tun, to: &Tun, c: &DirCounters) {
    for e in table.expire(now) {
        let tun = if e.to_a == from_a { from } else { to };
        if tun.write(&e.packet).is_err() {
            c.write_errors.fetch_add(1, Relaxed);
        }
    }
}

/// What the middlebox does to a packet just read (`Pass`: on to the line).
fn middlebox(mb: Middlebox, pkt: &[u8], now: u64, from: &Tun, to: &Tun, c: &DirCounters) -> bool {
    let Some((table, from_a)) = mb else {
        return true;
    };
    let verdict = {
        let mut t = table.lock().unwrap_or_else(|e| e.into_inner());
        // Flows due to end are ended before this packet is judged (it is then one of
        // an ended flow).
        end_flows(&mut t, from_a, now, from, to, c);
        t.judge(pkt, from_a, now)
    };
    match verdict {
        Verdict::Pass => true,
        Verdict::Drop => {
            c.forgotten.fetch_add(1, Relaxed);
            false
        }
        Verdict::Reset {
            to_sender,
            to_receiver,
        } => {
            c.forgotten.fetch_add(1, Relaxed);
            // Written back into the sender's TUN (its namespace receives it) and on to
            // the receiver, at once: a middlebox's RST does not cross the delay line.
            let out =
                std::iter::once((from, &to_sender)).chain(to_receiver.iter().map(|r| (to, r)));
            for (tun, rst) in out {
                if tun.write(rst).is_ok() {
                    c.resets_sent.fetch_add(1, Relaxed);
                } else {
                    c.write_errors.fetch_add(1, Relaxed);
                }
            }
            false
        }
    }
}

fn forward(
    from: &Tun,
    to: &Tun,
    cfg: LinkConfig,
    seed: u64,
    stop: &AtomicBool,
    c: &DirCounters,
    mb: Middlebox,
) {
    // 1 ns timer slack keeps the wake-ups for due packets at their time, not 50 us late.
    tpslab_net::sched::set_timer_slack_ns(1);
    let mut rng = seed | 1;
    let mtu = cfg.mtu as usize;
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut scratch = vec![0u8; 65536];
    let mut line = Line {
        free_at: 0,
        tx_done: VecDeque::new(),
        due: VecDeque::new(),
    };
    const IDLE_NS: u64 = 20_000_000;
    while !stop.load(Relaxed) {
        let now = mono_ns();
        // The near side's thread ends timed-out flows between packets too (a quiet
        // flow has no packet to end it at).
        if let Some((table, true)) = mb {
            let mut t = table.lock().unwrap_or_else(|e| e.into_inner());
            end_flows(&mut t, true, now, from, to, c);
        }
        while let Some(&(due, i, len)) = line.due.front() {
            if due > now {
                break;
            }
            line.due.pop_front();
            match to.write(&bufs[i][..len]) {
                Ok(_) => c.delivered.fetch_add(1, Relaxed),
                Err(_) => c.write_errors.fetch_add(1, Relaxed),
            };
            free.push(i);
        }
        let wait = line
            .due
            .front()
            .map_or(IDLE_NS, |&(d, _, _)| d.saturating_sub(now).min(IDLE_NS));
        if wait > 0 && !tun::wait_readable(from.fd(), wait) {
            continue;
        }
        // Read what is waiting now, at most a batch, so due packets and `stop` are
        // never starved by a sender faster than this thread.
        for _ in 0..64 {
            let slot = match free.pop() {
                Some(i) => Some(i),
                None if bufs.len() < MAX_LINE_PACKETS => {
                    bufs.push(vec![0u8; mtu.max(1500)]);
                    Some(bufs.len() - 1)
                }
                None => None,
            };
            let buf: &mut [u8] = match slot {
                Some(i) => &mut bufs[i],
                None => &mut scratch,
            };
            let len = match from.read(buf) {
                Ok(n) => n,
                Err(_) => {
                    if let Some(i) = slot {
                        free.push(i);
                    }
                    break;
                }
            };
            let now = mono_ns();
            c.packets_in.fetch_add(1, Relaxed);
            c.bytes_in.fetch_add(len as u64, Relaxed);
            let Some(i) = slot else {
                c.line_full.fetch_add(1, Relaxed);
                continue;
            };
            if !middlebox(mb, &bufs[i][..len], now, from, to, c) {
                free.push(i);
                continue;
            }
            if cfg.loss > 0.0 && next_unit(&mut rng) < cfg.loss {
                c.dropped_loss.fetch_add(1, Relaxed);
                free.push(i);
                continue;
            }
            match line.admit(now, len, &cfg) {
                Some(due) => line.due.push_back((due, i, len)),
                None => {
                    c.dropped_queue.fetch_add(1, Relaxed);
                    free.push(i);
                }
            }
        }
    }
    c.on_line_at_stop.store(line.due.len() as u64, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limiter_serialises_and_tail_drops() {
        let cfg = LinkConfig {
            delay: std::time::Duration::from_millis(1),
            rate_bps: Some(8e6), // 1 byte per us
            queue_packets: 2,
            ..Default::default()
        };
        let mut l = Line {
            free_at: 0,
            tx_done: VecDeque::new(),
            due: VecDeque::new(),
        };
        // 1000-byte packets take 1 ms each on the wire.
        assert_eq!(l.admit(0, 1000, &cfg), Some(2_000_000));
        assert_eq!(l.admit(0, 1000, &cfg), Some(3_000_000));
        assert_eq!(l.admit(0, 1000, &cfg), Some(4_000_000));
        // One on the wire, two waiting: the fourth is dropped.
        assert_eq!(l.admit(0, 1000, &cfg), None);
        // After the first left the wire there is room again.
        assert_eq!(l.admit(1_000_000, 1000, &cfg), Some(5_000_000));
        // An idle line serialises from the arrival time.
        assert_eq!(l.admit(10_000_000, 500, &cfg), Some(11_500_000));
    }

    #[test]
    fn no_rate_means_only_delay() {
        let cfg = LinkConfig {
            delay: std::time::Duration::from_millis(15),
            ..Default::default()
        };
        let mut l = Line {
            free_at: 0,
            tx_done: VecDeque::new(),
            due: VecDeque::new(),
        };
        for t in [0, 1, 1, 5] {
            assert_eq!(l.admit(t, 1500, &cfg), Some(t + 15_000_000));
        }
    }

    #[test]
    fn loss_coin_is_fair() {
        let mut s = 7u64;
        let n = 100_000;
        let hits = (0..n).filter(|_| next_unit(&mut s) < 0.1).count();
        assert!((9_500..10_500).contains(&hits), "{hits}");
    }

    #[test]
    fn config_ranges() {
        let ok = LinkConfig::default();
        assert!(ok.check().is_ok());
        let bad = |f: fn(&mut LinkConfig)| {
            let mut c = LinkConfig::default();
            f(&mut c);
            c.check().unwrap_err()
        };
        assert!(bad(|c| c.loss = 1.0).contains("loss 1"));
        assert!(bad(|c| c.rate_bps = Some(0.0)).contains("rate 0"));
        assert!(bad(|c| c.queue_packets = 0).contains("queue 0"));
        assert!(bad(|c| c.mtu = 100).contains("mtu 100"));
    }
}
