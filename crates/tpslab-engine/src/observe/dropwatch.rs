//! Why the kernel dropped packets, by reason: every `skb:kfree_skb` event carries a
//! `reason` (SOCKET_RCVBUFF, NO_SOCKET, NETFILTER_DROP, CPU_BACKLOG, QDISC_DROP, ...; kernel
//! 5.17+). One counting perf event per (reason, CPU), filtered `reason == N`, with the
//! reasons and their numbers read from the tracepoint's `format` file (they differ between
//! kernels). Host-wide: the tracepoint sees every network namespace, unlike the `Udp:`
//! counters. Needs root (perf tracepoints, tracefs). The sampler also keeps each drop's
//! `location` (the code address that freed the packet) and names it through
//! /proc/kallsyms at the end: `udp_queue_rcv_one_skb+0x437` for SOCKET_RCVBUFF.
//!
//! Cost (`cargo run --release -p tpslab-engine --example drop_reasons_cost`, this machine,
//! 300000 datagrams dropped at a closed port, 5 alternations, medians): without anything
//! 1571 ns per dropped datagram; [`DropReasons`], one filtered counter per (reason, CPU),
//! 1.80-1.88x (every drop passes through all 126 filters); one unfiltered counter per CPU
//! 1.01-1.05x; [`DropSampler`], one raw sample per drop into a 1 MiB ring per CPU, 1.11x
//! with 0 samples lost (the reader thread's own CPU, on the other core, not counted). So
//! the sampler is the one `run`, `load`, `diagnose` and `watch` use; the counters serve
//! tests.

use std::collections::BTreeMap;
use tpslab_net::perf::{tracefs_read, TracepointCounter};
use tpslab_proc::tracefs::parse_format;

/// Counters of `skb:kfree_skb` by reason, running since [`DropReasons::start`].
#[derive(Debug)]
pub struct DropReasons {
    /// (reason's name, one counter per online CPU).
    counters: Vec<(String, Vec<TracepointCounter>)>,
}

/// The online CPUs (/sys/devices/system/cpu/online), else 0..the count sysconf gives.
fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| tpslab_proc::parse_cpu_list(t.trim()).ok())
        .map(|v| v.into_iter().map(|c| c as u32).collect())
        .unwrap_or_else(|| (0..tpslab_net::online_cpus() as u32).collect())
}

impl DropReasons {
    /// Opens the counters. Errors (one line, for the report): no tracefs or no
    /// `skb:kfree_skb` with a `reason` (kernel before 5.17), no permission, too many
    /// file descriptors.
    pub fn start() -> Result<DropReasons, String> {
        let text = tracefs_read("events/skb/kfree_skb/format")
            .map_err(|e| format!("skb:kfree_skb not readable: {e}"))?;
        let f = parse_format(&text).ok_or("skb:kfree_skb format unreadable")?;
        if f.field("reason").is_none() {
            return Err("skb:kfree_skb has no reason field (kernel before 5.17)".into());
        }
        let reasons = f.symbols("reason");
        if reasons.is_empty() {
            return Err("skb:kfree_skb names no drop reasons".into());
        }
        let cpus = online_cpus();
        let mut counters = vec![];
        for (n, name) in reasons.into_iter().filter(|(_, n)| n != "MAX") {
            let filter = format!("reason == {n}");
            let per_cpu = cpus
                .iter()
                .map(|&c| TracepointCounter::open_cpu(f.id, c, &filter))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("counting skb:kfree_skb reason {name}: {e}"))?;
            counters.push((name, per_cpu));
        }
        Ok(DropReasons { counters })
    }

    /// Every reason with the drops counted so far (all CPUs), in the kernel's order.
    /// Errors: a counter could not be read.
    pub fn read(&self) -> Result<Vec<(String, u64)>, String> {
        self.counters
            .iter()
            .map(|(name, per_cpu)| {
                let n = per_cpu
                    .iter()
                    .map(|c| c.read())
                    .sum::<Result<u64, _>>()
                    .map_err(|e| format!("reading skb:kfree_skb {name}: {e}"))?;
                Ok((name.clone(), n))
            })
            .collect()
    }

    /// Reasons counted (each with one counter per CPU).
    pub fn reasons(&self) -> usize {
        self.counters.len()
    }
}

/// Drops by (reason's number, location), as the reader thread counts them.
type Counts = std::collections::HashMap<(u32, u64), u64>;

/// Drops by reason, sampled: one `skb:kfree_skb` sample per drop per CPU into a perf ring
/// (the reason read from each raw record at the offset the format file gives, 1 MiB per
/// CPU), drained by a thread when the kernel wakes it (half of a ring written), every
/// 100 ms, or every 200 us while drops pour in. One event per
/// drop, whatever the number of reasons; drops beyond what the rings hold are counted as
/// lost, never guessed.
#[derive(Debug)]
pub struct DropSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Written once to wake the reader at once when it is told to stop.
    wake: Option<std::io::PipeWriter>,
    thread: Option<std::thread::JoinHandle<(Counts, u64)>>,
    names: Vec<(u64, String)>,
    /// The drops by reason so far, as the reader thread adds them (for a live exporter).
    live: DropCounts,
}

/// The drops a running [`DropSampler`] has counted so far, by reason: shared with its
/// reader thread, which adds each drain's drops (one lock per drain that saw any).
#[derive(Debug, Clone, Default)]
pub struct DropCounts {
    /// The tracepoint's reason numbers and names (from its format file).
    names: std::sync::Arc<Vec<(u64, String)>>,
    /// (drops by reason number, samples lost) since the start.
    counts: std::sync::Arc<std::sync::Mutex<(std::collections::BTreeMap<u32, u64>, u64)>>,
}

/// What a [`DropCounts`] holds now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveDropReasons {
    /// Drops by reason (the kernel's names, `SOCKET_RCVBUFF`) since the sampler started,
    /// in the kernel's order of reasons; only reasons seen.
    pub by_reason: Vec<(String, u64)>,
    /// Samples the kernel could not write (a ring was full) since the start.
    pub lost: u64,
}

impl DropCounts {
    /// The drops counted so far.
    pub fn read(&self) -> LiveDropReasons {
        let g = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        LiveDropReasons {
            by_reason: g
                .0
                .iter()
                .map(|(&v, &n)| (reason_name(&self.names, u64::from(v)), n))
                .collect(),
            lost: g.1,
        }
    }

    /// Adds one drain's drops (`seen`: by reason number) and samples lost.
    fn add(&self, seen: &mut std::collections::BTreeMap<u32, u64>, lost: u64) {
        if seen.is_empty() && lost == 0 {
            return;
        }
        let mut g = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        for (v, n) in std::mem::take(seen) {
            *g.0.entry(v).or_default() += n;
        }
        g.1 += lost;
    }
}

/// The name of reason number `v` among `names`, else `reason V`.
fn reason_name(names: &[(u64, String)], v: u64) -> String {
    names
        .iter()
        .find(|(n, _)| *n == v)
        .map_or_else(|| format!("reason {v}"), |(_, s)| s.clone())
}

/// What a [`DropSampler`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledDrops {
    /// Drops by reason, largest first.
    pub by_reason: Vec<(String, u64)>,
    /// Samples the kernel could not write (a ring was full): drops not in `by_reason`.
    pub lost: u64,
    /// (reason, `function+0xoffset` that dropped, drops), largest first, at most
    /// [`DropReasons::MAX_SITES`](tpslab_record::DropReasons::MAX_SITES); empty
    /// when /proc/kallsyms hides its addresses.
    pub by_site: Vec<(String, String, u64)>,
}

impl DropSampler {
    /// Starts sampling on every online CPU. Errors as [`DropReasons::start`].
    pub fn start() -> Result<DropSampler, String> {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        let text = tracefs_read("events/skb/kfree_skb/format")
            .map_err(|e| format!("skb:kfree_skb not readable: {e}"))?;
        let f = parse_format(&text).ok_or("skb:kfree_skb format unreadable")?;
        let r = f
            .field("reason")
            .ok_or("skb:kfree_skb has no reason field (kernel before 5.17)")?;
        if r.size != 4 {
            return Err(format!(
                "skb:kfree_skb reason of {} bytes (4 expected)",
                r.size
            ));
        }
        let off = r.offset;
        // The code address that freed the packet; 0 when the format has none.
        let loc = f
            .field("location")
            .filter(|l| l.size == 8)
            .map(|l| l.offset);
        let mut rings = online_cpus()
            .into_iter()
            .map(|c| tpslab_net::perf_ring::RawSampler::open(f.id, c, 256))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("sampling skb:kfree_skb: {e}"))?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let (woken, wake) =
            std::io::pipe().map_err(|e| format!("a pipe to wake the drop-reason reader: {e}"))?;
        let live = DropCounts {
            names: std::sync::Arc::new(f.symbols("reason")),
            counts: Default::default(),
        };
        let to_live = live.clone();
        let thread = std::thread::Builder::new()
            .name("drop-reasons".into())
            .spawn(move || {
                let mut counts = std::collections::HashMap::new();
                let mut lost = 0;
                let mut by_reason = std::collections::BTreeMap::new();
                loop {
                    let last = st.load(Relaxed);
                    let mut seen = 0u64;
                    let mut lost_now = 0;
                    for ring in &mut rings {
                        lost_now += ring.drain(&mut |raw| {
                            if let Some(b) = raw.get(off..off + 4) {
                                let v = u32::from_ne_bytes(b.try_into().expect("4 bytes"));
                                let at = loc.and_then(|o| raw.get(o..o + 8)).map_or(0, |b| {
                                    u64::from_ne_bytes(b.try_into().expect("8 bytes"))
                                });
                                *counts.entry((v, at)).or_insert(0u64) += 1;
                                *by_reason.entry(v).or_insert(0u64) += 1;
                                seen += 1;
                            }
                        });
                    }
                    lost += lost_now;
                    to_live.add(&mut by_reason, lost_now);
                    if last {
                        return (counts, lost);
                    }
                    // A busy ring (a drop storm) is drained again soon; otherwise the
                    // reader sleeps until the kernel says half of a ring is written, or
                    // 100 ms pass (to see `stop`): a quiet host costs ten wake-ups a
                    // second, not a hundred.
                    if seen > 1000 {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    } else if tpslab_net::perf_ring::RawSampler::wait_any(
                        &rings,
                        std::os::fd::AsFd::as_fd(&woken),
                        std::time::Duration::from_millis(100),
                    )
                    .is_err()
                    {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                }
            })
            .map_err(|e| format!("spawning the drop-reason reader: {e}"))?;
        Ok(DropSampler {
            stop,
            wake: Some(wake),
            thread: Some(thread),
            names: f.symbols("reason"),
            live,
        })
    }

    /// The drops counted so far, shared with the reader thread (for a live exporter).
    pub fn live(&self) -> DropCounts {
        self.live.clone()
    }

    /// [`DropSampler::start`], unless `off` (`--no-drop-reasons`): then the reason for
    /// the record.
    pub fn start_unless(off: bool) -> Result<DropSampler, String> {
        if off {
            return Err("--no-drop-reasons given".into());
        }
        DropSampler::start()
    }

    /// Stops sampling (after a last drain) and returns what it saw.
    pub fn stop(mut self) -> SampledDrops {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.wake_reader();
        let (counts, lost) = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let name = |v: u64| reason_name(&self.names, v);
        let mut reasons = std::collections::BTreeMap::<String, u64>::new();
        let mut sites = std::collections::BTreeMap::<(String, String), u64>::new();
        // Read only when something was dropped at an address not named before in this
        // process (the table is some 120000 lines), keeping only the symbols that name
        // the sampled drop sites.
        let mut addrs: Vec<u64> = counts.keys().map(|k| k.1).filter(|a| *a != 0).collect();
        addrs.sort_unstable();
        addrs.dedup();
        let names = site_names(&addrs, || {
            std::fs::File::open("/proc/kallsyms")
                .map(|f| std::io::BufReader::with_capacity(64 << 10, f))
        });
        for ((v, at), c) in counts {
            let reason = name(u64::from(v));
            if let Some(site) = names.get(&at).cloned().flatten() {
                *sites.entry((reason.clone(), site)).or_default() += c;
            }
            *reasons.entry(reason).or_default() += c;
        }
        let mut by_reason: Vec<(String, u64)> = reasons.into_iter().collect();
        by_reason.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        let mut by_site: Vec<(String, String, u64)> =
            sites.into_iter().map(|((r, f), c)| (r, f, c)).collect();
        by_site.sort_by(|x, y| y.2.cmp(&x.2).then(x.0.cmp(&y.0)).then(x.1.cmp(&y.1)));
        by_site.truncate(tpslab_record::DropReasons::MAX_SITES);
        SampledDrops {
            by_reason,
            lost,
            by_site,
        }
    }
}

/// Drop sites named so far in this process, by code address (None: no symbol names it),
/// at most [`SITE_NAMES_MAX`]: a ramp or capacity search stops a sampler every step, and
/// reading /proc/kallsyms each time (0.1 s of a quiet CPU, several times that on a busy
/// one) made the next step's first reads late past its window.
static SITE_NAMES: std::sync::Mutex<BTreeMap<u64, Option<String>>> =
    std::sync::Mutex::new(BTreeMap::new());

/// Addresses [`SITE_NAMES`] keeps (a few dozen drop sites are usual; past the cap a site is
/// read again each time).
const SITE_NAMES_MAX: usize = 4096;

/// The names of `addrs` (sorted, deduplicated): from [`SITE_NAMES`], reading the table
/// `open` gives for the ones not named before (an error or a hidden table: none named).
fn site_names<R: std::io::BufRead>(
    addrs: &[u64],
    open: impl FnOnce() -> std::io::Result<R>,
) -> BTreeMap<u64, Option<String>> {
    let mut known = SITE_NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let new: Vec<u64> = addrs
        .iter()
        .copied()
        .filter(|a| !known.contains_key(a))
        .collect();
    let mut out: BTreeMap<u64, Option<String>> = addrs
        .iter()
        .filter_map(|a| known.get(a).map(|n| (*a, n.clone())))
        .collect();
    if !new.is_empty() {
        // A table that could not be read names nothing this time and is read again next
        // time (only what was read is kept).
        let read = open().and_then(|r| tpslab_proc::kallsyms::Kallsyms::for_addresses(r, &new));
        for a in new {
            let n = read.as_ref().ok().and_then(|syms| syms.name(a));
            if read.is_ok() && known.len() < SITE_NAMES_MAX {
                known.insert(a, n.clone());
            }
            out.insert(a, n);
        }
    }
    out
}

/// What a sampler started with [`DropSampler::start`] saw, as the record holds it: the
/// drops by reason and samples lost, or why none were read.
pub fn finish(started: Result<DropSampler, String>) -> tpslab_record::DropReasons {
    match started {
        Ok(d) => {
            let s = d.stop();
            tpslab_record::DropReasons {
                by_reason: s.by_reason,
                lost: s.lost,
                unavailable: None,
                by_site: s.by_site,
            }
        }
        Err(e) => tpslab_record::DropReasons {
            unavailable: Some(e),
            ..Default::default()
        },
    }
}

impl DropSampler {
    /// Ends the reader's wait at once (it then sees `stop`): closing the pipe's write end
    /// makes its read end readable.
    fn wake_reader(&mut self) {
        self.wake.take();
    }
}

impl Drop for DropSampler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.wake_reader();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reasons that grew from `before` to `after` (both from [`DropReasons::read`]), with
/// how much, largest first.
pub fn grown(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = after
        .iter()
        .map(|(name, a)| {
            let b = before
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, b)| *b);
            (name.clone(), a.saturating_sub(b))
        })
        .filter(|(_, d)| *d > 0)
        .collect();
    v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_sites_are_read_from_the_table_once_per_process() {
        // Addresses far above any real kernel's (no other test names them).
        let table = "ffffffffff000000 t site_a\nffffffffff000100 T site_b\n";
        let reads = std::cell::Cell::new(0);
        let open = || {
            reads.set(reads.get() + 1);
            Ok(std::io::Cursor::new(table))
        };
        let (a, b) = (0xffff_ffff_ff00_0010, 0xffff_ffff_ff00_0104);
        let first = site_names(&[a, b], open);
        assert_eq!(first[&a].as_deref(), Some("site_a+0x10"));
        assert_eq!(first[&b].as_deref(), Some("site_b+0x4"));
        assert_eq!(reads.get(), 1);
        // The next step's sampler with the same sites reads nothing.
        let again = site_names(&[a, b], open);
        assert_eq!(again, first);
        assert_eq!(reads.get(), 1, "the table read again for known sites");
        // A new site: read once more, for it alone; the known one from the cache.
        let c = 0xffff_ffff_ff00_0180;
        let third = site_names(&[a, c], open);
        assert_eq!(reads.get(), 2);
        assert_eq!(third[&c].as_deref(), Some("site_b+0x80"));
        assert_eq!(third.len(), 2);
    }

    #[test]
    fn live_counts_add_up_drains_by_name_and_count_lost_samples() {
        let c = DropCounts {
            names: std::sync::Arc::new(vec![(2, "NO_SOCKET".into()), (6, "SOCKET_RCVBUFF".into())]),
            counts: Default::default(),
        };
        let seen = c.clone();
        assert_eq!(c.read(), LiveDropReasons::default());
        let mut drain = std::collections::BTreeMap::from([(6, 5), (2, 1)]);
        seen.add(&mut drain, 0);
        assert!(drain.is_empty(), "a drain's counts are taken");
        seen.add(&mut std::collections::BTreeMap::from([(6, 3), (99, 1)]), 4);
        assert_eq!(
            c.read(),
            LiveDropReasons {
                by_reason: vec![
                    ("NO_SOCKET".into(), 1),
                    ("SOCKET_RCVBUFF".into(), 8),
                    ("reason 99".into(), 1)
                ],
                lost: 4
            }
        );
    }

    #[test]
    fn grown_keeps_what_grew_largest_first() {
        let b = vec![("NO_SOCKET".to_string(), 5), ("SOCKET_RCVBUFF".into(), 1)];
        let a = vec![
            ("NO_SOCKET".to_string(), 7),
            ("SOCKET_RCVBUFF".into(), 101),
            ("QDISC_DROP".into(), 0),
            ("CPU_BACKLOG".into(), 2),
        ];
        assert_eq!(
            grown(&b, &a),
            [
                ("SOCKET_RCVBUFF".to_string(), 100),
                ("CPU_BACKLOG".into(), 2),
                ("NO_SOCKET".into(), 2)
            ]
        );
    }
}
