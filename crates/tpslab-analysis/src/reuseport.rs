//! A SO_REUSEPORT group's balance, socket by socket: the kernel hashes each flow (source
//! address and port) to one socket of the group, so a load of a few flows can leave some
//! sockets idle while others fill and drop (uneven hashing); and a group whose shares are
//! even still drops at one socket whose reader drains less than the others (a slow
//! reader: one worker of a pre-forked server that sleeps, waits on a lock or works
//! longer per datagram). Pure functions of the per-socket facts
//! ([`tpslab_record::verdict::GroupSocket`]: reads from tpslab's own server's threads or
//! a foreign worker's threads (exact tracepoint counts), drops and deepest queue from
//! `/proc/net/udp`, the reader's sampled waits).

use tpslab_plan::udp::Steer;
use tpslab_record::verdict::{GroupReader, GroupSocket};
use tpslab_record::waits::WaitClass;

/// What made the group uneven.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// The datagrams' shares were uneven while the readers were alike: the kernel's hash
    /// (or the CPU steering) sent more to some sockets. Fix: more flows, or steering.
    UnevenHashing,
    /// These sockets (indices into the group) dropped while their share of the datagrams
    /// was at most 1.5 times an even one, their readers waited for datagrams less than
    /// half the time while the others' readers waited most of it, and they drained less
    /// than half of what the fastest of those drains per unit of busy time: those workers
    /// drain less than their share. Fix: those workers; more flows or steering would still hand
    /// them their share.
    SlowReader {
        /// The slow sockets, most datagrams lost first.
        sockets: Vec<usize>,
    },
}

/// One socket's figures, as the judgement reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct SocketFigures {
    /// Datagrams that reached it: read + dropped (None without reads).
    pub offered: Option<u64>,
    /// Its share of the group's datagrams, percent (None without reads).
    pub share_pct: Option<f64>,
    /// Of what reached it, the share it dropped, percent (None without reads).
    pub lost_pct: Option<f64>,
    /// Its reader's samples waiting for datagrams (the network class: blocked in
    /// recvfrom, poll, epoll_wait), percent; None when its reader is not known.
    pub waiting_pct: Option<f64>,
}

/// A socket whose reader waited for datagrams less than this share of the time (percent)
/// was busy (on a CPU) or blocked elsewhere (a sleep, a lock, disk) for most of the run.
const BUSY_READER_PCT: f64 = 50.0;

/// A slow socket loses at least this many times the share the others lose (a reader
/// that keeps up loses nothing but to bursts).
const SLOW_LOSS_RATIO: f64 = 4.0;

/// A slow reader drains less than this share of what the fastest waiting reader drains
/// per unit of its own time not spent waiting for datagrams (reads / (1 - waiting share)):
/// two alike workers, one offered more than it can take, drain alike per busy second and
/// are hashing's doing, not a slow reader's.
const SLOW_DRAIN_RATIO: f64 = 0.5;

/// Each socket's figures: its offered datagrams and share, what it lost of them, and how
/// often its reader waited for datagrams.
pub fn figures(group: &[GroupSocket]) -> Vec<SocketFigures> {
    let total: Option<u64> = group.iter().map(|s| Some(s.reads? + s.drops)).sum();
    group
        .iter()
        .map(|s| {
            let offered = s.reads.map(|r| r + s.drops);
            SocketFigures {
                offered,
                share_pct: match (offered, total) {
                    (Some(o), Some(t)) if t > 0 => Some(100.0 * o as f64 / t as f64),
                    _ => None,
                },
                lost_pct: offered
                    .filter(|&o| o > 0)
                    .map(|o| 100.0 * s.drops as f64 / o as f64),
                waiting_pct: s
                    .reader
                    .as_ref()
                    .and_then(|r| r.states.as_ref()?.share_pct(WaitClass::Network)),
            }
        })
        .collect()
}

/// The slow sockets of the group, most lost first; empty when none is slow: some
/// socket dropped while its share was at most 1.5 times an even one, its reader waited
/// for datagrams less than half the time, it drained less than half of what the
/// fastest waiting reader drains per unit of time not spent waiting
/// ([`SLOW_DRAIN_RATIO`]), and every socket whose reader waited for datagrams most of
/// the time (there must be one) lost at most a quarter of the share the slow ones lost.
/// Every socket's reads and reader must be known.
fn slow_readers(group: &[GroupSocket], figs: &[SocketFigures]) -> Vec<usize> {
    let n = group.len() as f64;
    if figs
        .iter()
        .any(|f| f.share_pct.is_none() || f.waiting_pct.is_none())
    {
        return vec![];
    }
    let waiting: Vec<usize> = (0..group.len())
        .filter(|&i| figs[i].waiting_pct.unwrap_or(0.0) >= BUSY_READER_PCT)
        .collect();
    // Reads per unit of the reader's time not spent waiting for datagrams.
    let drain = |i: usize| {
        let busy = (1.0 - figs[i].waiting_pct.unwrap_or(100.0) / 100.0).max(0.01);
        group[i].reads.unwrap_or(0) as f64 / busy
    };
    let fastest = waiting.iter().map(|&i| drain(i)).fold(0.0, f64::max);
    let mut slow: Vec<usize> = (0..group.len())
        .filter(|&i| {
            let f = &figs[i];
            group[i].drops > 0
                && f.share_pct.unwrap_or(100.0) <= HIGH_SHARE * 100.0 / n
                && f.waiting_pct.unwrap_or(100.0) < BUSY_READER_PCT
                && drain(i) < SLOW_DRAIN_RATIO * fastest
        })
        .collect();
    let lost = |i: usize| figs[i].lost_pct.unwrap_or(0.0);
    let least_slow = slow.iter().map(|&i| lost(i)).fold(f64::INFINITY, f64::min);
    let most_waiting = waiting.iter().map(|&i| lost(i)).fold(0.0, f64::max);
    if slow.is_empty() || waiting.is_empty() || most_waiting * SLOW_LOSS_RATIO > least_slow {
        return vec![];
    }
    slow.sort_by(|&a, &b| lost(b).total_cmp(&lost(a)).then(a.cmp(&b)));
    slow
}

/// How uneven a group was, when it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Imbalance {
    /// Sockets in the group.
    pub sockets: usize,
    /// Sockets that read nothing (only when reads were counted).
    pub idle: usize,
    /// The busiest socket's share of the group's reads, percent (only when reads were
    /// counted).
    pub busiest_pct: Option<f64>,
    /// Sockets that dropped datagrams.
    pub dropping: usize,
    /// Drops of the whole group.
    pub drops: u64,
    /// Sockets that had room while others dropped: no drops and a queue never above half
    /// their limit (never above zero when the limit is unknown); beside a slow reader,
    /// also no drops with a reader that waited for datagrams most of the run.
    pub spare: usize,
    /// Flows the generator sent, when known.
    pub flows: Option<usize>,
    /// How tpslab's server spread datagrams (hash for a foreign server).
    pub steer: Steer,
    /// Whether every socket's limit was known (room judged against half of it; else only a
    /// queue that stayed empty counts as room).
    pub limits_known: bool,
    /// Uneven hashing or a slow reader.
    pub kind: Kind,
    /// Each socket's figures, in the group's order.
    pub figures: Vec<SocketFigures>,
    /// Each socket's reader, in the group's order (None when not told apart).
    pub readers: Vec<Option<GroupReader>>,
}

/// A socket reading less than this multiple of the group's mean makes the group uneven
/// (a load with enough flows keeps every socket within about ±20 % of the mean; a finding
/// needs a clear departure).
const LOW_SHARE: f64 = 0.5;
/// A socket reading more than this multiple of the group's mean makes the group uneven.
const HIGH_SHARE: f64 = 1.5;

/// The group's imbalance, or None when it has fewer than two sockets, nothing was read or
/// dropped, the sockets were even (every socket's reads within [0.5, 1.5] x the mean;
/// without reads: drops in every socket, or none with room), or datagrams were spread at
/// random (`--reuseport-steer random`: unevenness is then not the group's doing).
///
/// A slow reader first (needs every socket's reads and reader, a foreign pre-forked
/// server's): a socket that dropped while its share of the datagrams (read + dropped) was
/// at most 1.5 times an even share, whose reader waited for datagrams less than half the
/// time, beside sockets whose readers waited for them most of the time and lost at most a
/// quarter of its share ([`Kind::SlowReader`]). Else uneven reads are uneven hashing
/// ([`Kind::UnevenHashing`]).
pub fn judge(group: &[GroupSocket], flows: Option<usize>, steer: Steer) -> Option<Imbalance> {
    let n = group.len();
    if n < 2 || steer == Steer::Random {
        return None;
    }
    let reads: Option<Vec<u64>> = group.iter().map(|s| s.reads).collect();
    let drops: u64 = group.iter().map(|s| s.drops).sum();
    let dropping = group.iter().filter(|s| s.drops > 0).count();
    let had_room = |s: &GroupSocket| {
        s.drops == 0
            && match s.rcvbuf_bytes.filter(|&l| l > 0) {
                Some(limit) => s.rx_queue_max_bytes * 2 <= limit,
                None => s.rx_queue_max_bytes == 0,
            }
    };
    let figs = figures(group);
    let slow = slow_readers(group, &figs);
    let mut out = Imbalance {
        kind: if slow.is_empty() {
            Kind::UnevenHashing
        } else {
            Kind::SlowReader { sockets: slow }
        },
        figures: figs,
        readers: group.iter().map(|s| s.reader.clone()).collect(),
        sockets: n,
        idle: 0,
        busiest_pct: None,
        dropping,
        drops,
        spare: 0,
        flows,
        steer,
        limits_known: group.iter().all(|s| s.rcvbuf_bytes.is_some_and(|l| l > 0)),
    };
    match reads {
        Some(r) => {
            let total: u64 = r.iter().sum();
            if total == 0 {
                return None;
            }
            let mean = total as f64 / n as f64;
            let low = |x: u64| (x as f64) < LOW_SHARE * mean;
            // Uneven reads, or uneven shares of what reached the sockets (read +
            // dropped: a socket offered twice its share that drops reads no more than
            // the others).
            let offered_mean = (total + drops) as f64 / n as f64;
            let uneven_offered = r.iter().zip(group).any(|(&x, s)| {
                let o = (x + s.drops) as f64;
                o < LOW_SHARE * offered_mean || o > HIGH_SHARE * offered_mean
            });
            let uneven =
                uneven_offered || r.iter().any(|&x| low(x) || x as f64 > HIGH_SHARE * mean);
            if !uneven && out.kind == Kind::UnevenHashing {
                return None;
            }
            out.idle = r.iter().filter(|&&x| x == 0).count();
            out.busiest_pct = r.iter().max().map(|&m| 100.0 * m as f64 / total as f64);
            out.spare = match out.kind {
                // Beside a slow reader, a socket that dropped nothing and whose reader
                // waited for datagrams most of the run had room, even if its queue once
                // passed half its limit while its reader was off a CPU (seen beside
                // stress-ng); a busy reader's socket keeps the queue's test.
                Kind::SlowReader { .. } => (0..n)
                    .filter(|&i| {
                        let waited = out.figures[i]
                            .waiting_pct
                            .is_some_and(|w| w >= BUSY_READER_PCT);
                        group[i].drops == 0 && (waited || had_room(&group[i]))
                    })
                    .count(),
                Kind::UnevenHashing => group.iter().filter(|s| had_room(s)).count(),
            };
        }
        None => {
            // Without reads only drops and queues speak: some sockets dropped while
            // others never came near their limit.
            out.spare = group.iter().filter(|s| had_room(s)).count();
            if dropping == 0 || out.spare == 0 {
                return None;
            }
        }
    }
    Some(out)
}

impl Imbalance {
    /// Whether the imbalance explains the group's drops: some sockets dropped while others
    /// had room (more buffer on every socket is then not the fix; spreading the load is).
    pub fn explains_drops(&self) -> bool {
        self.drops > 0 && self.dropping > 0 && self.spare > 0
    }

    /// One sentence: what was uneven, and why (the flow count when known); for a slow
    /// reader, which socket, its share and loss, and where its reader waited.
    pub fn sentence(&self) -> String {
        if let Kind::SlowReader { sockets } = &self.kind {
            return self.slow_sentence(sockets);
        }
        let n = self.sockets;
        let room = if self.limits_known {
            "no drops, queue below half the limit"
        } else {
            "no drops, queue never above 0"
        };
        let what = match self.busiest_pct {
            Some(b) if self.idle > 0 => format!(
                "{} of its {n} sockets read nothing and the busiest read {b:.0} % of the datagrams",
                self.idle
            ),
            Some(b) => format!(
                "its {n} sockets read unevenly: the busiest read {b:.0} % of the datagrams ({:.0} % each if even)",
                100.0 / n as f64
            ),
            None => format!(
                "{} of its {n} sockets dropped {} datagrams while {} had room ({room})",
                self.dropping, self.drops, self.spare
            ),
        };
        let why = match (self.steer, self.flows) {
            (Steer::Cpu, _) => "; each datagram went to the socket of the CPU that received it (--reuseport-steer cpu), so sockets of CPUs that received nothing stay idle".to_string(),
            (_, Some(f)) if f < 4 * n => format!(
                "; the load came in {f} flow{} and SO_REUSEPORT hashes each flow (source address and port) to one socket",
                if f == 1 { "" } else { "s" }
            ),
            _ => "; SO_REUSEPORT hashes each flow (source address and port) to one socket, unless the server attached a BPF program of its own".into(),
        };
        format!("the server's SO_REUSEPORT group is uneven: {what}{why}")
    }

    /// The slow sockets' readers, named: "PID 4242 (python3)", several joined by "and".
    pub fn slow_names(&self) -> String {
        let Kind::SlowReader { sockets } = &self.kind else {
            return String::new();
        };
        sockets
            .iter()
            .map(|&i| self.readers[i].as_ref().map_or("?".into(), reader_name))
            .collect::<Vec<_>>()
            .join(" and ")
    }

    fn slow_sentence(&self, sockets: &[usize]) -> String {
        let n = self.sockets;
        let each: Vec<String> = sockets
            .iter()
            .map(|&i| {
                let f = &self.figures[i];
                let r = self.readers[i].as_ref();
                format!(
                    "socket {} of {n} (read by {}) was offered {:.0} % of the datagrams ({:.0} % each if even) and dropped {:.0} % of them; its reader waited for datagrams {:.0} % of the run{}",
                    i + 1,
                    r.map_or("?".into(), reader_name),
                    f.share_pct.unwrap_or(0.0),
                    100.0 / n as f64,
                    f.lost_pct.unwrap_or(0.0),
                    f.waiting_pct.unwrap_or(0.0),
                    r.and_then(reader_wait).map_or(String::new(), |w| format!(" and spent {w}")),
                )
            })
            .collect();
        let others = (0..n)
            .filter(|i| !sockets.contains(i))
            .filter_map(|i| self.figures[i].lost_pct)
            .fold(0.0, f64::max);
        format!(
            "the server's SO_REUSEPORT group has a slow reader: {}; the other sockets, whose readers waited for datagrams, dropped at most {others:.0} % of theirs: the share was even, the draining was not",
            each.join("; "),
        )
    }

    /// The fixes, in the order to try them: more flows, steering by CPU, a reuseport BPF
    /// program; each a line for the user's server and tpslab's own. For a slow reader:
    /// that worker, named by PID, by where it waited; then taking it out of the group.
    pub fn fixes(&self) -> Vec<String> {
        if let Kind::SlowReader { sockets } = &self.kind {
            let mut out: Vec<String> = sockets
                .iter()
                .filter_map(|&i| self.readers[i].as_ref())
                .map(worker_fix)
                .collect();
            // A thread's socket closes with it, not with the process.
            let thread = sockets
                .iter()
                .any(|&i| self.readers[i].as_ref().is_some_and(|r| !r.tids.is_empty()));
            out.push(format!(
                "until it is fixed, take {} out of the group ({}: the kernel hashes its flows over the other sockets at once); more flows or reuseport BPF steering would still hand it its share",
                self.slow_names(),
                if thread {
                    "close that thread's socket"
                } else {
                    "stop that worker"
                }
            ));
            return out;
        }
        let random = "spread per datagram: a reuseport BPF program that returns a random socket (SKF_AD_RANDOM; order within a flow is no longer kept) (tpslab: serve udp --reuseport-steer random)".to_string();
        if self.steer == Steer::Cpu {
            return vec![
                "spread the receive work over as many CPUs as the group has sockets: RSS queues on the NIC, or RPS (/sys/class/net/DEV/queues/rx-N/rps_cpus)".into(),
                random,
            ];
        }
        vec![
            format!(
                "more flows from the clients: more source ports (sockets) per client, {} or more in all (4 per server socket: a hash of 4n flows over n sockets leaves about 2 % of them idle, of n flows 37 %) (tpslab: load udp --flows N sends from N ports; 32 by default)",
                4 * self.sockets
            ),
            "steer by CPU: a reuseport BPF program that returns the receiving CPU (SO_ATTACH_REUSEPORT_CBPF with SKF_AD_CPU), one socket per CPU, with RSS/RPS spreading packets over the CPUs (tpslab: serve udp --reuseport-steer cpu)".into(),
            format!("or {random}"),
        ]
    }
}

/// "PID 4242 (python3)", "PIDs 10, 11 (nginx)"; a thread of a process reading several
/// sockets of the group, "thread 4244 of PID 4242 (python3), socket 81234".
pub fn reader_name(r: &GroupReader) -> String {
    let pids: Vec<String> = r.pids.iter().map(|p| p.to_string()).collect();
    if !r.tids.is_empty() {
        let tids: Vec<String> = r.tids.iter().map(|t| t.to_string()).collect();
        return format!(
            "{} {} of PID {} ({}), socket {}",
            if tids.len() == 1 { "thread" } else { "threads" },
            tids.join(", "),
            pids.join(", "),
            r.comm,
            r.inode
        );
    }
    match pids.len() {
        1 => format!("PID {} ({})", pids[0], r.comm),
        _ => format!("PIDs {} ({})", pids.join(", "), r.comm),
    }
}

/// Where a reader spent the run other than waiting for datagrams: its largest class
/// besides the network's, "75 % of the run sleeping (in clock_nanosleep: 47 of 63
/// samples)"; None without samples or when nothing but the network took 5 % or more.
pub fn reader_wait(r: &GroupReader) -> Option<String> {
    let st = r.states.as_ref()?;
    let (class, share) = WaitClass::ALL
        .into_iter()
        .filter(|&c| c != WaitClass::Network)
        .filter_map(|c| Some((c, st.share_pct(c)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if share < 5.0 {
        return None;
    }
    let call = match class {
        WaitClass::OnCpu | WaitClass::Runnable | WaitClass::Stolen | WaitClass::Other => None,
        c => crate::waits::top_syscall(st, c),
    };
    let seen = st.by_class.get(&class).copied().unwrap_or(0);
    Some(format!(
        "{share:.0} % of the run {}{}",
        class.label(),
        match call {
            Some(c) => format!(" (in {c}: {seen} of {} samples)", st.samples),
            None => format!(" ({seen} of {} samples)", st.samples),
        }
    ))
}

/// What to change in a slow worker, by where its reader waited.
fn worker_fix(r: &GroupReader) -> String {
    let who = reader_name(r);
    let pid = r.pids.first().copied().unwrap_or(0);
    let class = r.states.as_ref().and_then(|st| {
        WaitClass::ALL
            .into_iter()
            .filter(|&c| c != WaitClass::Network)
            .filter_map(|c| Some((c, st.share_pct(c)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    });
    let what = match class.map(|c| c.0) {
        Some(WaitClass::Sleep) => "it sleeps in the loop that reads its socket: remove the sleep, or hand each datagram to other threads and keep the reading loop free of it",
        Some(WaitClass::Lock) => "it waits on a lock (futex) in the loop that reads its socket: shorten what the lock holds, or take the reading loop out of it",
        Some(WaitClass::Disk) | Some(WaitClass::File) => "it waits on disk or file I/O in the loop that reads its socket: move that I/O off the reading loop",
        Some(WaitClass::OnCpu) => "its thread is on a CPU most of the run: its work per datagram costs more than the other workers' (profile it: perf top -p PID)",
        Some(WaitClass::Runnable) | Some(WaitClass::Stolen) => "its thread waits for a CPU: other work shares its CPU (see its affinity: taskset -cp PID; the CPU's load: mpstat -P ALL 1)",
        _ => "see where its thread waits: cat /proc/PID/task/*/stack (root)",
    };
    // A thread of a process reading several sockets: its own files are under the task.
    let path = match r.tids.first() {
        Some(tid) => format!("{pid}/task/{tid}"),
        None => pid.to_string(),
    };
    format!(
        "fix the {} {who}: {}",
        if r.tids.is_empty() {
            "worker"
        } else {
            "reader"
        },
        what.replace("/proc/PID/task/*", &format!("/proc/{path}"))
            .replace("PID", &pid.to_string())
    )
}

#[cfg(test)]
#[path = "reuseport_tests.rs"]
mod tests;
