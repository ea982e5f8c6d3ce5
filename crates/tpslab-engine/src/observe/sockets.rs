//! The target's and generator's sockets in /proc/net/udp{,6}: which are the target's
//! ([`SocketMatch`], as the kernel's delivery lookup scores them), the target's queue now,
//! per-socket drop tracking over a run, and the address pair of a socket's delivery lookup.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use tpslab_proc::{live, UdpCounters, UdpSocket};

/// Which sockets of /proc/net/udp{,6} are the target's.
#[derive(Debug, Clone, Default)]
pub struct SocketMatch {
    /// Exact inodes (when known, nothing else is used).
    pub inodes: Vec<u64>,
    /// Local port.
    pub port: Option<u16>,
    /// Local address (None: any).
    pub addr: Option<std::net::IpAddr>,
}

impl SocketMatch {
    /// Whether `s` is one of the target's sockets.
    pub fn matches(&self, s: &UdpSocket) -> bool {
        if !self.inodes.is_empty() {
            return self.inodes.contains(&s.inode);
        }
        let ip = s.local.ip();
        let v4_mapped = |a: std::net::IpAddr| match a {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map(std::net::IpAddr::V4).unwrap_or(a),
            a => a,
        };
        s.inode != 0
            && self.port == Some(s.local.port())
            && self
                .addr
                .is_none_or(|a| ip.is_unspecified() || v4_mapped(ip) == v4_mapped(a))
    }
}

impl SocketMatch {
    /// The target's sockets among `socks`: by inode when given; else those [`matches`]
    /// accepts that datagrams to `addr` reach, the best-scoring ones as the kernel's
    /// lookup scores them ([`delivery_score`]). An IPV6_V6ONLY `[::]` socket beside a
    /// 127.0.0.1 one on the port, or an AF_INET `0.0.0.0` one beside a `[::1]` target,
    /// is not the target's: its queue, limit and drops are not the server's.
    ///
    /// [`matches`]: SocketMatch::matches
    pub fn select<'a>(&self, socks: impl IntoIterator<Item = &'a UdpSocket>) -> Vec<&'a UdpSocket> {
        let found: Vec<&UdpSocket> = socks.into_iter().filter(|s| self.matches(s)).collect();
        let Some(addr) = self.addr.filter(|_| self.inodes.is_empty()) else {
            return found;
        };
        let best = found
            .iter()
            .filter_map(|s| delivery_score(addr, s.local))
            .max();
        found
            .into_iter()
            .filter(|s| best.is_some() && delivery_score(addr, s.local) == best)
            .collect()
    }
}

/// How well a socket bound to `local` matches a datagram to `target`, as the kernel's
/// UDP lookup scores it (`compute_score` in net/ipv4/udp.c and net/ipv6/udp.c): for
/// IPv4, an AF_INET socket 2, an AF_INET6 one 1, plus 4 when bound to the address itself
/// rather than the wildcard; for IPv6, an AF_INET6 socket 1, plus 4 when bound to the
/// address, and an AF_INET socket never (None). A v4-mapped target is IPv4. The kernel
/// delivers to the best-scoring sockets only (several when they score alike: one
/// SO_REUSEPORT group).
pub fn delivery_score(target: std::net::IpAddr, local: SocketAddr) -> Option<u8> {
    let v4 = match target {
        std::net::IpAddr::V4(_) => true,
        std::net::IpAddr::V6(a) => a.to_ipv4_mapped().is_some(),
    };
    let bound = if local.ip().is_unspecified() { 0 } else { 4 };
    match (v4, local) {
        (true, SocketAddr::V4(_)) => Some(2 + bound),
        (true, SocketAddr::V6(_)) => Some(1 + bound),
        (false, SocketAddr::V4(_)) => None,
        (false, SocketAddr::V6(_)) => Some(1 + bound),
    }
}

/// Reads the target's sockets ([`SocketMatch::select`]) under `root` (`<root>/net/udp`
/// and `udp6`): (sockets found, rx_queue bytes summed).
pub fn socket_queue(root: &std::path::Path, m: &SocketMatch) -> (usize, u64) {
    let mut socks = live::udp(root).unwrap_or_default();
    socks.extend(live::udp6(root).unwrap_or_default());
    m.select(&socks)
        .iter()
        .fold((0, 0), |(n, q), s| (n + 1, q + s.rx_queue))
}

/// Sockets of this process read in place ([`tpslab_net::UdpSock::meminfo`]: one
/// getsockopt each, no netlink round trip, no table walk, in whatever namespace they
/// live): the generator's flows (about 0.6 us a socket here, against a sock_diag
/// lookup's two system calls and a netlink message each), read at every sample while
/// few (the sampler's `OWN_EVERY_SAMPLE_MAX`), else at the slow ones. A socket that
/// cannot be read is left out of that sample and its error kept in the record's
/// observer errors (SO_MEMINFO needs Linux 4.12).
#[derive(Clone)]
pub struct OwnSockets {
    inodes: Vec<u64>,
    read: std::sync::Arc<ReadOwn>,
}

/// What reads the sockets of an [`OwnSockets`] (appending to its argument; the first
/// error, the others still read).
type ReadOwn = dyn Fn(&mut Vec<OwnSocket>) -> Result<(), String> + Send + Sync;

/// One socket as [`OwnSockets`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OwnSocket {
    /// The socket's inode (/proc/net/udp's `inode`).
    pub inode: u64,
    /// Connected to a peer (a flow's socket).
    pub connected: bool,
    /// Receive memory and drops now.
    pub mem: tpslab_net::SockMem,
}

impl OwnSockets {
    /// A probe of the sockets `inodes` (known up front: never taken for the target's,
    /// read or not) whose `read` fills its argument with each socket read now (sockets
    /// that could not be read left out, the first error returned).
    pub fn new(
        inodes: Vec<u64>,
        read: impl Fn(&mut Vec<OwnSocket>) -> Result<(), String> + Send + Sync + 'static,
    ) -> OwnSockets {
        OwnSockets {
            inodes,
            read: std::sync::Arc::new(read),
        }
    }

    /// The sockets' inodes.
    pub fn inodes(&self) -> &[u64] {
        &self.inodes
    }

    /// Each socket now, into `into` (cleared first); the first error.
    pub fn read(&self, into: &mut Vec<OwnSocket>) -> Result<(), String> {
        into.clear();
        (self.read)(into)
    }
}

impl std::fmt::Debug for OwnSockets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnSockets")
    }
}

/// Drops of sockets tracked by inode: the first value seen (0 for a socket created during
/// the run) and the last, so a socket that closes keeps its count; the deepest receive
/// queue seen, bytes; and which sample saw it last. At most [`MAX_TRACKED`] sockets: past
/// that a closed one (the longest unseen) makes room, its drops kept in the total (the
/// third field) but no longer by socket; with every tracked one still open, a new socket
/// is not tracked (a watch of a server opening a socket per client runs for days).
#[derive(Debug, Default)]
pub(super) struct DropTrack(pub(super) BTreeMap<u64, Tracked>, u64, u64);

/// The most sockets a [`DropTrack`] holds (about 100 bytes each).
pub(super) const MAX_TRACKED: usize = 4096;

/// One tracked socket: drops at the first and last sample, deepest rx_queue (bytes),
/// connected (a remote port), the sample that saw it last, its local address (when read
/// from the socket tables).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Tracked {
    first: u64,
    last: u64,
    rxq_max: u64,
    connected: bool,
    seen: u64,
    local: Option<SocketAddr>,
}

impl DropTrack {
    /// The next sample begins.
    pub(super) fn tick(&mut self) {
        self.1 += 1;
    }
    pub(super) fn see(&mut self, s: &UdpSocket, drops: u64, rx_queue: u64, first_sample: bool) {
        self.see_inode(s.inode, s.remote.port() != 0, drops, rx_queue, first_sample);
        if let Some(t) = self.0.get_mut(&s.inode) {
            t.local = Some(s.local);
        }
    }
    pub(super) fn see_inode(
        &mut self,
        inode: u64,
        connected: bool,
        drops: u64,
        rx_queue: u64,
        first_sample: bool,
    ) {
        let now = self.1;
        if self.0.len() >= MAX_TRACKED && !self.0.contains_key(&inode) {
            let Some((&gone, _)) = self
                .0
                .iter()
                .filter(|(_, t)| t.seen < now)
                .min_by_key(|(_, t)| t.seen)
            else {
                return;
            };
            if let Some(t) = self.0.remove(&gone) {
                self.2 += t.last.saturating_sub(t.first);
            }
        }
        let e = self.0.entry(inode).or_insert(Tracked {
            first: if first_sample { drops } else { 0 },
            ..Default::default()
        });
        e.last = drops;
        e.rxq_max = e.rxq_max.max(rx_queue);
        e.connected = connected;
        e.seen = now;
    }
    /// Each socket tracked with its local address (inode order): (inode, local address,
    /// drops since the first sample); closed ones keep their count.
    pub(super) fn by_socket(&self) -> Vec<(u64, SocketAddr, u64)> {
        self.0
            .iter()
            .filter_map(|(&inode, t)| Some((inode, t.local?, t.last.saturating_sub(t.first))))
            .collect()
    }
    /// Drops since the first sample of every socket seen, those no longer tracked too.
    pub(super) fn total(&self) -> u64 {
        self.2
            + self
                .0
                .values()
                .map(|t| t.last.saturating_sub(t.first))
                .sum::<u64>()
    }
    /// Each socket of a SO_REUSEPORT group, in inode order: the unconnected target sockets
    /// the last sample saw (not one closed during the run, nor a connected socket on the
    /// port, which only its peer's datagrams reach); empty with fewer than two.
    pub(super) fn group(&self, rcvbuf: &BTreeMap<u64, u64>) -> Vec<tpslab_record::TargetSocket> {
        let members: Vec<(&u64, &Tracked)> = self
            .0
            .iter()
            .filter(|(_, t)| !t.connected && t.seen == self.1)
            .collect();
        if members.len() < 2 {
            return vec![];
        }
        members
            .into_iter()
            .map(|(&inode, t)| tpslab_record::TargetSocket {
                inode,
                drops: t.last.saturating_sub(t.first),
                rx_queue_max_bytes: t.rxq_max,
                rcvbuf_bytes: rcvbuf.get(&inode).copied(),
                local: t.local.map(|a| a.to_string()),
                ..Default::default()
            })
            .collect()
    }
}

/// The group `group` with each socket's holders (a scan of /proc/*/fd) and, where the
/// server's threads were counted (`io`), its readers ([`assign_readers`]; `seen`: the
/// sockets each thread was seen waiting to read, [`crate::observe::waits::WaitSampler::read_sockets`]);
/// unchanged without counts.
pub(super) fn with_readers(
    mut group: Vec<tpslab_record::TargetSocket>,
    io: Option<&crate::observe::sockio::ProcessUdpIo>,
    seen: Option<&BTreeMap<u32, BTreeMap<u64, u64>>>,
) -> Vec<tpslab_record::TargetSocket> {
    let Some(io) = io else { return group };
    if group.is_empty() {
        return group;
    }
    let inodes: std::collections::BTreeSet<u64> = group.iter().map(|t| t.inode).collect();
    let by_pid = crate::observe::fd_holders::holders_of(&inodes);
    let thread_of =
        |pid: u32, tid: u32| std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists();
    let none = BTreeMap::new();
    assign_readers(
        &mut group,
        &by_pid,
        &io.reads_by_thread(),
        &thread_of,
        seen.unwrap_or(&none),
    );
    group
}

/// A reading thread: its TID, its UDP reads, and the socket it reads (inode, samples seen
/// waiting on it), when known.
type ThreadRead = (u32, u64, Option<(u64, u64)>);

/// The reading threads of a process holding the group's sockets `held` (`threads`: its
/// threads' TIDs and UDP reads), each with the socket it reads: the one of `held` it was
/// seen waiting to read most (`seen`: TID -> inode -> samples), else, when exactly one
/// reading thread and one of `held` are left without, that one (seen 0). None when a
/// reading thread is left without a socket (whose reads are whose cannot be told).
fn thread_sockets(
    pid: u32,
    threads: &[(u32, u64)],
    held: &[u64],
    seen: &BTreeMap<u32, BTreeMap<u64, u64>>,
) -> Option<Vec<(u64, tpslab_record::SocketReader)>> {
    let mut out: Vec<ThreadRead> = threads
        .iter()
        .filter(|r| r.1 > 0)
        .map(|&(tid, reads)| {
            let best = seen.get(&tid).and_then(|m| {
                m.iter()
                    .filter(|e| held.contains(e.0))
                    .max_by_key(|e| (*e.1, std::cmp::Reverse(*e.0)))
                    .map(|(&i, &n)| (i, n))
            });
            (tid, reads, best)
        })
        .collect();
    let left: Vec<usize> = (0..out.len()).filter(|&k| out[k].2.is_none()).collect();
    let free: Vec<u64> = held
        .iter()
        .copied()
        .filter(|i| !out.iter().any(|r| r.2.is_some_and(|(s, _)| s == *i)))
        .collect();
    if let ([k], [i]) = (&left[..], &free[..]) {
        out[*k].2 = Some((*i, 0));
    }
    out.into_iter()
        .map(|(tid, reads, best)| {
            let (inode, seen) = best?;
            Some((
                inode,
                tpslab_record::SocketReader {
                    pid,
                    tid,
                    reads,
                    seen,
                },
            ))
        })
        .collect()
}

/// Fills each socket's holders (the PIDs of `by_pid`, PID -> the group's inodes it
/// holds, that hold it) and readers: the threads (`reads`: thread id, datagrams read)
/// of the processes that hold it and no other socket of the group (`thread_of(pid,
/// tid)`: the thread is that process's) that read, or, when none of a process's threads
/// read, its main thread with 0 (a worker whose socket got nothing). A process holding
/// several of the group's sockets whose threads read (one process, a thread per
/// socket) gives each socket the threads seen waiting to read it ([`thread_sockets`]:
/// `seen`, TID -> inode -> samples); when one of its reading threads cannot be placed
/// (a parent reading beside its workers, a thread never seen waiting) its sockets get
/// no readers: whose reads are whose cannot be told.
pub(super) fn assign_readers(
    group: &mut [tpslab_record::TargetSocket],
    by_pid: &BTreeMap<u32, Vec<u64>>,
    reads: &[(u32, u64)],
    thread_of: &dyn Fn(u32, u32) -> bool,
    seen: &BTreeMap<u32, BTreeMap<u64, u64>>,
) {
    let of = |pid: u32| -> Vec<(u32, u64)> {
        let mine = reads
            .iter()
            .copied()
            .filter(|&(tid, _)| thread_of(pid, tid));
        let read: Vec<(u32, u64)> = mine.clone().filter(|r| r.1 > 0).collect();
        if read.is_empty() {
            mine.filter(|r| r.0 == pid).collect()
        } else {
            read
        }
    };
    let reads_some = |pid: u32| of(pid).iter().any(|r| r.1 > 0);
    // Each process holding several sockets whose threads read: its threads by socket.
    let placed: BTreeMap<u32, Option<Vec<(u64, tpslab_record::SocketReader)>>> = by_pid
        .iter()
        .filter(|e| e.1.len() > 1 && reads_some(*e.0))
        .map(|(&p, v)| (p, thread_sockets(p, &of(p), v, seen)))
        .collect();
    for t in group.iter_mut() {
        t.holders = by_pid
            .iter()
            .filter(|(_, v)| v.contains(&t.inode))
            .map(|(&p, _)| p)
            .collect();
        let shared: Vec<u32> = t
            .holders
            .iter()
            .copied()
            .filter(|p| placed.contains_key(p))
            .collect();
        let alone = t
            .holders
            .iter()
            .filter(|&&p| by_pid[&p].len() == 1)
            .flat_map(|&pid| {
                of(pid)
                    .into_iter()
                    .map(move |(tid, reads)| tpslab_record::SocketReader {
                        pid,
                        tid,
                        reads,
                        seen: 0,
                    })
            });
        t.readers = if shared.is_empty() {
            alone.collect()
        } else if shared.iter().all(|p| placed[p].is_some()) {
            // Threads of one process, a socket each (with any worker holding it alone).
            let mut r: Vec<tpslab_record::SocketReader> = shared
                .iter()
                .flat_map(|p| placed[p].iter().flatten())
                .filter(|(i, _)| *i == t.inode)
                .map(|(_, r)| r.clone())
                .collect();
            r.extend(alone);
            r
        } else {
            vec![]
        };
    }
}
pub(super) fn add_udp(a: &mut UdpCounters, b: &UdpCounters) {
    a.in_datagrams += b.in_datagrams;
    a.no_ports += b.no_ports;
    a.in_errors += b.in_errors;
    a.out_datagrams += b.out_datagrams;
    a.rcvbuf_errors += b.rcvbuf_errors;
    a.sndbuf_errors += b.sndbuf_errors;
    a.in_csum_errors += b.in_csum_errors;
    a.ignored_multi += b.ignored_multi;
    a.mem_errors += b.mem_errors;
}

/// The local address of the kernel's delivery lookup for `s` (loopback for a wildcard
/// bind).
pub(super) fn lookup_local(s: &UdpSocket) -> SocketAddr {
    if s.local.ip().is_unspecified() {
        let lo: std::net::IpAddr = if s.local.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        SocketAddr::new(lo, s.local.port())
    } else {
        s.local
    }
}

/// The peer of the delivery lookup: the connected peer, or any (port 1) for an unconnected
/// socket.
pub(super) fn lookup_remote(s: &UdpSocket) -> SocketAddr {
    if s.remote.port() != 0 {
        s.remote
    } else {
        SocketAddr::new(lookup_local(s).ip(), 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::{SocketReader, TargetSocket};

    fn sock(inode: u64) -> TargetSocket {
        TargetSocket {
            inode,
            ..Default::default()
        }
    }

    /// A watch of a server opening a socket per client: the tracked sockets stay at
    /// MAX_TRACKED, a closed one makes room and its drops stay in the total.
    #[test]
    fn closed_sockets_make_room_and_keep_their_drops_in_the_total() {
        let mut t = DropTrack::default();
        for i in 0..(MAX_TRACKED as u64 + 100) {
            t.tick();
            // Each socket lives one sample with one drop: the next sample sees a new one.
            t.see_inode(i + 1, true, 1, 0, false);
        }
        assert_eq!(t.0.len(), MAX_TRACKED);
        assert_eq!(t.total(), MAX_TRACKED as u64 + 100);
        // All of them open at once: a new one is left out, nothing evicted.
        let mut full = DropTrack::default();
        full.tick();
        for i in 0..(MAX_TRACKED as u64 + 1) {
            full.see_inode(i + 1, true, 1, 0, false);
        }
        assert_eq!(full.0.len(), MAX_TRACKED);
        assert_eq!(full.total(), MAX_TRACKED as u64);
    }

    #[test]
    fn each_socket_keeps_its_address_and_its_drops_since_first_seen() {
        // Two members of a SO_REUSEPORT group on 0.0.0.0:5300 (/proc/net/udp's layout),
        // sampled twice: 7 drops before the watch started are not the watch's.
        let table = |d1: u64, d2: u64| {
            let text = format!(
                "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
                 \x20 1: 00000000:14B4 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 7001 2 0000000000000000 {d1}\n\
                 \x20 2: 00000000:14B4 00000000:0000 07 00000000:00034000 00:00000000 00000000     0        0 7002 2 0000000000000000 {d2}\n"
            );
            tpslab_proc::udp::parse_udp(text.as_bytes(), "udp").unwrap()
        };
        let mut t = DropTrack::default();
        for (i, socks) in [table(7, 0), table(10, 25)].into_iter().enumerate() {
            t.tick();
            for s in &socks {
                t.see(s, s.drops.unwrap(), s.rx_queue, i == 0);
            }
        }
        let a: SocketAddr = "0.0.0.0:5300".parse().unwrap();
        assert_eq!(t.by_socket(), [(7001, a, 3), (7002, a, 25)]);
        let g = t.group(&BTreeMap::new());
        assert_eq!(g.len(), 2);
        assert!(
            g.iter().all(|s| s.local.as_deref() == Some("0.0.0.0:5300")),
            "{g:?}"
        );
        assert_eq!((g[0].drops, g[1].rx_queue_max_bytes), (3, 0x34000));
    }

    #[test]
    fn each_workers_threads_read_the_socket_it_holds_alone() {
        // A pre-forked server: PID 10 (threads 10, 12) holds socket 7, PID 11 socket 8;
        // the parent 9 holds both and reads nothing.
        let by_pid: BTreeMap<u32, Vec<u64>> =
            [(9, vec![7, 8]), (10, vec![7]), (11, vec![8])].into();
        let reads = [(9, 0), (10, 500), (12, 20), (13, 0), (11, 90)];
        let thread_of = |pid: u32, tid: u32| match tid {
            10 | 12 | 13 => pid == 10,
            t => pid == t,
        };
        let mut g = vec![sock(7), sock(8)];
        assign_readers(&mut g, &by_pid, &reads, &thread_of, &BTreeMap::new());
        assert_eq!(g[0].holders, vec![9, 10]);
        let r = |pid, tid, reads| SocketReader {
            pid,
            tid,
            reads,
            seen: 0,
        };
        assert_eq!(g[0].readers, vec![r(10, 10, 500), r(10, 12, 20)]);
        assert_eq!(g[1].readers, vec![r(11, 11, 90)]);
        // A worker whose socket got nothing: its main thread, with 0.
        let reads = [(10, 500), (11, 0), (14, 0)];
        let thread_of = |pid: u32, tid: u32| pid == tid || (pid, tid) == (11, 14);
        let mut g = vec![sock(7), sock(8)];
        assign_readers(&mut g, &by_pid, &reads, &thread_of, &BTreeMap::new());
        assert_eq!(g[1].readers, vec![r(11, 11, 0)]);
        // The parent reads too: whose reads are whose cannot be told.
        let reads = [(10, 500), (11, 90), (9, 5)];
        let thread_of = |pid: u32, tid: u32| pid == tid;
        let mut g = vec![sock(7), sock(8)];
        assign_readers(&mut g, &by_pid, &reads, &thread_of, &BTreeMap::new());
        assert!(g.iter().all(|t| t.readers.is_empty()), "{g:?}");
        // One process holding every socket (threads reading each): not told apart.
        let one: BTreeMap<u32, Vec<u64>> = [(5, vec![7, 8])].into();
        let mut g = vec![sock(7), sock(8)];
        assign_readers(
            &mut g,
            &one,
            &[(5, 100), (6, 100)],
            &|_, _| true,
            &BTreeMap::new(),
        );
        assert!(g
            .iter()
            .all(|t| t.readers.is_empty() && t.holders == vec![5]));
    }

    #[test]
    fn one_processs_threads_read_the_sockets_they_were_seen_waiting_on() {
        // One process (PID 5) holding both sockets of the group, a thread per socket:
        // thread 6 seen blocked reading socket 8 in 40 samples (and 7 once), thread 7
        // never seen waiting to read (busy or asleep: a slow reader); the main thread 5
        // reads nothing.
        let one: BTreeMap<u32, Vec<u64>> = [(5, vec![7, 8])].into();
        let reads = [(5, 0), (6, 4000), (7, 1800)];
        let seen: BTreeMap<u32, BTreeMap<u64, u64>> = [(6, [(8, 40), (7, 1)].into())].into();
        let mut g = vec![sock(7), sock(8)];
        assign_readers(&mut g, &one, &reads, &|_, _| true, &seen);
        let r = |tid, reads, seen| SocketReader {
            pid: 5,
            tid,
            reads,
            seen,
        };
        // Socket 8: thread 6 as seen; socket 7: the one left, to the one thread left.
        assert_eq!(g[1].readers, vec![r(6, 4000, 40)]);
        assert_eq!(g[0].readers, vec![r(7, 1800, 0)]);
        assert!(g.iter().all(|t| t.holders == vec![5]));
        // Both seen: each as seen.
        let seen: BTreeMap<u32, BTreeMap<u64, u64>> =
            [(6, [(8, 40)].into()), (7, [(7, 3)].into())].into();
        let mut g = vec![sock(7), sock(8)];
        assign_readers(&mut g, &one, &reads, &|_, _| true, &seen);
        assert_eq!(g[0].readers, vec![r(7, 1800, 3)]);
        // Three reading threads, one seen: two left for one socket, not told apart.
        let reads = [(6, 4000), (7, 1800), (9, 100)];
        let seen: BTreeMap<u32, BTreeMap<u64, u64>> = [(6, [(8, 40)].into())].into();
        let mut g = vec![sock(7), sock(8)];
        assign_readers(&mut g, &one, &reads, &|_, _| true, &seen);
        assert!(g.iter().all(|t| t.readers.is_empty()), "{g:?}");
        // A socket seen that is not the group's is no reading of it.
        let reads = [(6, 4000), (7, 1800)];
        let seen: BTreeMap<u32, BTreeMap<u64, u64>> = [(6, [(99, 50)].into())].into();
        let mut g = vec![sock(7), sock(8)];
        assign_readers(&mut g, &one, &reads, &|_, _| true, &seen);
        assert!(g.iter().all(|t| t.readers.is_empty()), "{g:?}");
    }
}
