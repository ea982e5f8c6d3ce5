//! The target's listen socket(s) over a window, by LISTEN-only sock_diag dumps of the
//! server's network namespace: how many connections waited for accept at most, each
//! listener's drops (sk_drops: connection requests the listener dropped, mostly at its
//! full accept queue or SYN queue; every `tcp_listendrop` counts, a failed child socket
//! too) and
//! its backlog limit. Shared by `ramp` (each step) and `capacity tcp|http` (each step's
//! window). A listener serves the target when its port is the target's and its address
//! the target's own or a wildcard ([`serves`]).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use tpslab_net::diag::{SockDiag, TcpSockInfo};

/// Whether a listen socket bound to `local` takes connections to `target`: the same
/// port, and `local`'s address the target's (an IPv4-mapped IPv6 address read as its
/// IPv4 one) or unspecified: 0.0.0.0 for an IPv4 target, :: for either family (a
/// dual-stack socket; a :: socket with IPV6_V6ONLY set is matched for an IPv4 target
/// too, as sock_diag's dump is not asked for that flag).
pub fn serves(local: SocketAddr, target: SocketAddr) -> bool {
    if local.port() != target.port() {
        return false;
    }
    let (l, t) = (local.ip().to_canonical(), target.ip().to_canonical());
    match l {
        IpAddr::V6(a) if a.is_unspecified() => true,
        IpAddr::V4(a) if a.is_unspecified() => t.is_ipv4(),
        _ => l == t,
    }
}

/// The process serving `target` on this host (`load http`'s server found by the URL's
/// address): the holders of the listen socket(s) that [`serves`] it in this network
/// namespace (a LISTEN-only sock_diag dump, then a scan of /proc/*/fd), reduced to their
/// tree's root by [`root_of`]. None: the target's address is not this host's, no
/// listener here, its holders unreadable (another user's process without root), or
/// unrelated processes holding it.
pub fn listener_owner(target: SocketAddr) -> Option<u32> {
    // An address of this host (a socket can be bound to it): a wildcard listener here
    // does not serve a target elsewhere on its port.
    std::net::UdpSocket::bind((target.ip(), 0)).ok()?;
    let mut d = SockDiag::open().ok()?;
    let inodes: std::collections::BTreeSet<u64> = d
        .tcp_dump(1 << 10)
        .ok()?
        .iter()
        .filter(|s| serves(s.local, target) && s.inode != 0)
        .map(|s| s.inode)
        .collect();
    let holders: Vec<(u32, u32)> = crate::observe::fd_holders::holders_of(&inodes)
        .into_keys()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let t = tpslab_proc::tree::parse_times(&stat, "stat").ok()?;
            Some((pid, t.ppid))
        })
        .collect();
    root_of(&holders)
}

/// Of the processes holding a listen socket, each `(pid, ppid)`: the one whose parent
/// holds none when it is the only such (a master and its workers, which inherit the
/// socket: the master; a lone server: itself); None for none or unrelated holders.
pub fn root_of(holders: &[(u32, u32)]) -> Option<u32> {
    let mut roots = holders
        .iter()
        .filter(|(_, ppid)| !holders.iter().any(|(p, _)| p == ppid))
        .map(|&(pid, _)| pid);
    match (roots.next(), roots.next()) {
        (Some(r), None) => Some(r),
        _ => None,
    }
}

/// What the target's listen socket(s) showed over a window, read by [`Listen::read`].
#[derive(Debug, Clone)]
pub struct Listen {
    /// The target (its listeners are those that [`serves`] it).
    pub target: SocketAddr,
    /// The most connections waiting for accept at one read, connections (sock_diag
    /// idiag_rqueue, all the target's listeners together: a SO_REUSEPORT group).
    pub queue_max: u64,
    /// The queue lengths of the reads that found a listener added up, connections (the
    /// mean accept queue: `queue_sum / queue_reads`).
    pub queue_sum: u64,
    /// The reads that found a listener.
    pub queue_reads: u64,
    /// Each listener's drops (sk_drops) at its first read and its last, by inode; 0 at
    /// the first for a listener first seen after the window's first read (made in it).
    pub drops: BTreeMap<u64, (u64, u64)>,
    /// The largest backlog limit seen, connections (idiag_wqueue of a listener:
    /// min(listen()'s backlog, net.core.somaxconn)).
    pub backlog: u64,
    /// A dump found a listener serving the target.
    pub seen: bool,
    /// The window's first read succeeded: the drops have a baseline (without it a
    /// listener's lifetime drops would count as the window's).
    pub based: bool,
}

impl Listen {
    /// Nothing read yet of `target`'s listeners.
    pub fn new(target: SocketAddr) -> Listen {
        Listen {
            target,
            queue_max: 0,
            queue_sum: 0,
            queue_reads: 0,
            drops: BTreeMap::new(),
            backlog: 0,
            seen: false,
            based: false,
        }
    }

    /// Adds one LISTEN-only dump of the namespace `d` was opened in; `first`: the
    /// window's first read (the drops' baseline). A dump that fails adds nothing.
    pub fn read(&mut self, d: &mut SockDiag, first: bool) {
        // 1 << 10: TCP_LISTEN (the kernel filters: the dump holds no connection).
        if let Ok(socks) = d.tcp_dump(1 << 10) {
            self.add(&socks, first);
        }
    }

    /// Adds one dump's sockets (see [`Listen::read`]).
    pub fn add(&mut self, socks: &[TcpSockInfo], first: bool) {
        self.based |= first;
        let mut queue = 0;
        let mut found = false;
        for s in socks.iter().filter(|s| serves(s.local, self.target)) {
            self.seen = true;
            found = true;
            queue += s.rqueue as u64;
            self.backlog = self.backlog.max(s.wqueue as u64);
            let base = if first { s.drops } else { 0 };
            self.drops.entry(s.inode).or_insert((base, s.drops)).1 = s.drops;
        }
        self.queue_max = self.queue_max.max(queue);
        if found {
            self.queue_sum += queue;
            self.queue_reads += 1;
        }
    }

    /// The mean accept queue over the reads that found a listener; None without one.
    pub fn queue_mean(&self) -> Option<tpslab_record::ramp::AcceptQueueMean> {
        (self.queue_reads > 0).then(|| tpslab_record::ramp::AcceptQueueMean {
            connections: self.queue_sum as f64 / self.queue_reads as f64,
            reads: self.queue_reads,
        })
    }

    /// Connection requests the target's listeners dropped over the window (the growth of
    /// their sk_drops since the first read), when a listener was seen and the first read
    /// gave a baseline.
    pub fn dropped(&self) -> Option<u64> {
        (self.seen && self.based)
            .then(|| self.drops.values().map(|(a, b)| b.saturating_sub(*a)).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listeners_owner_is_its_holders_root() {
        // nginx: the master (100, started by 1) and its workers (101, 102) hold it.
        assert_eq!(root_of(&[(101, 100), (100, 1), (102, 100)]), Some(100));
        // A lone server; a worker whose master closed the socket is its own root.
        assert_eq!(root_of(&[(4242, 4000)]), Some(4242));
        assert_eq!(root_of(&[(101, 100), (102, 100)]), None);
        // Two unrelated processes (SO_REUSEPORT servers), or none: nobody chosen.
        assert_eq!(root_of(&[(200, 1), (300, 1)]), None);
        assert_eq!(root_of(&[]), None);
    }

    fn sock(local: &str, inode: u64, rqueue: u32, backlog: u32, drops: u64) -> TcpSockInfo {
        TcpSockInfo {
            local: local.parse().unwrap(),
            remote: "0.0.0.0:0".parse().unwrap(),
            state: 10,
            inode,
            info: None,
            sndbuf: 0,
            rcvbuf: 0,
            rqueue,
            wqueue: backlog,
            drops,
        }
    }

    #[test]
    fn a_listener_serves_its_own_address_or_a_wildcard_on_the_port() {
        let t4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let t6: SocketAddr = "[::1]:8080".parse().unwrap();
        let s = |l: &str, t| serves(l.parse().unwrap(), t);
        assert!(s("127.0.0.1:8080", t4));
        assert!(s("0.0.0.0:8080", t4));
        assert!(s("[::]:8080", t4));
        assert!(s("[::ffff:127.0.0.1]:8080", t4));
        assert!(s("[::]:8080", t6));
        assert!(s("[::1]:8080", t6));
        // Another address, another port, a v4 wildcard for a v6 target: not the target's.
        assert!(!s("127.0.0.2:8080", t4));
        assert!(!s("10.0.0.1:8080", t4));
        assert!(!s("127.0.0.1:8081", t4));
        assert!(!s("0.0.0.0:8080", t6));
        assert!(!s("127.0.0.1:8080", t6));
    }

    #[test]
    fn the_window_counts_the_targets_listeners_only_from_their_first_read() {
        let t: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let mut l = Listen::new(t);
        assert_eq!(l.dropped(), None);
        // Another address on the same port (its drops and queue are not the target's).
        l.add(
            &[
                sock("127.0.0.1:80", 1, 2, 128, 40),
                sock("10.1.1.1:80", 9, 50, 4096, 1000),
            ],
            true,
        );
        l.add(
            &[
                sock("127.0.0.1:80", 1, 5, 128, 47),
                sock("10.1.1.1:80", 9, 60, 4096, 2000),
                // A SO_REUSEPORT member made in the window: all its drops count.
                sock("0.0.0.0:80", 2, 1, 128, 3),
            ],
            false,
        );
        assert_eq!(l.dropped(), Some(10));
        assert_eq!(l.queue_max, 6);
        let mean = l.queue_mean().expect("a listener was read");
        assert_eq!((mean.connections, mean.reads), (4.0, 2));
        assert_eq!(l.backlog, 128);
        // Without a first read, no baseline: no figure.
        let mut late = Listen::new(t);
        late.add(&[sock("127.0.0.1:80", 1, 0, 128, 47)], false);
        assert_eq!(late.dropped(), None);
        assert!(late.seen);
    }
}
