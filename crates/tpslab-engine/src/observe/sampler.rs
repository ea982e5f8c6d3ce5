//! The sampling thread's state: what it reads each interval and how.

use super::*;

/// Time from one full scan of the socket tables to the next, ns: the first slow sample
/// this long after the last scan scans (at `--interval` 100 ms or longer every sample is
/// slow; the first and last samples always scan). Between scans the followed
/// sockets are read by sock_diag lookups; a scan walks every bucket of the kernel's UDP
/// hash table (16384 here) once per file read, and at every slow sample it was a fifth
/// of the observer's CPU time. A socket opened during the run is found by the next scan,
/// its drops since it was created included.
const SCAN_PERIOD_NS: u64 = 1_000_000_000;

/// Most of the generator's own sockets read at every sample (one getsockopt each, about
/// 0.6 us here); with more (`--flows`), they are read at the slow samples only (100 ms).
/// The observer at 10 ms took 0.58 % of a core with 1 flow, 0.63 % with 32 and 1.4 % with
/// 128 when each was read at every sample, 0.72 %, 0.86 % and 0.65 % with this cap (perf
/// stat task-clock of its thread over 3 s beside `load udp --rate max` following udprecv
/// by address, quiet host; 3ea3715's sock_diag lookups: 1.43 % at 32 flows, 4.4 % at 128).
const OWN_EVERY_SAMPLE_MAX: usize = 32;

/// The observer thread's state and readers.
pub(super) struct Sampler {
    pub(super) cfg: ObserverConfig,
    /// The target's sockets read by sock_diag between scans, as last scanned.
    /// None: the followed sockets cannot be told apart by a lookup (scan every sample).
    pub(super) followed: Option<Vec<UdpSocket>>,
    /// sock_diag in the target's network namespace.
    pub(super) diag: Option<tpslab_net::diag::SockDiag>,
    /// The generator's sockets by inode (never the target's), from `cfg.gen_sockets`.
    pub(super) gen_inodes: BTreeSet<u64>,
    /// The generator's sockets as last read (a buffer kept between samples).
    pub(super) own: Vec<super::OwnSocket>,
    /// Whether IPv6 sockets are watched (udp6 is read only then).
    pub(super) v6: bool,
    pub(super) target: SocketMatch,
    pub(super) srv_track: DropTrack,
    pub(super) gen_track: DropTrack,
    pub(super) first: bool,
    /// When the socket tables were last scanned in full, monotonic ns (0: never).
    pub(super) last_scan_ns: u64,
    /// The next sample scans the socket tables (the last sample of a run).
    pub(super) scan_now: bool,
    pub(super) tids: Vec<u32>,
    pub(super) errors: BTreeSet<String>,
    pub(super) proc_root: PathBuf,
    pub(super) io: Option<crate::observe::sockio::ProcessUdpIo>,
    /// SO_RCVBUF limit (sk_rcvbuf, bytes) of each target socket by inode, from sock_diag.
    pub(super) srv_rcvbuf: BTreeMap<u64, u64>,
    /// When a UDP dump last read a SO_REUSEPORT group's limits, monotonic ns (0: never).
    pub(super) last_group_ns: u64,
    /// Where the target process's threads wait, sampled with every slow sample.
    pub(super) waits: Option<crate::observe::waits::WaitSampler>,
    /// The followed TCP listen sockets by inode: (local address, backlog limit from
    /// sock_diag, most connections seen in the accept queue).
    pub(super) listeners: BTreeMap<u64, (SocketAddr, Option<u32>, u64)>,
    /// net.core.somaxconn in the target's namespace (read once, when TCP is followed).
    pub(super) somaxconn: Option<u64>,
    /// The kernel's drops by reason for the live samples, once the observer is given a
    /// drop sampler ([`super::Observer::live_drops`]).
    pub(super) live_drops: Arc<std::sync::OnceLock<crate::observe::dropwatch::DropCounts>>,
}

impl Sampler {
    /// The backlog limit of the listen socket `inode` (sock_diag `idiag_wqueue`, in the
    /// target's namespace); None when not found.
    fn backlog(&mut self, inode: u64) -> Option<u32> {
        // 1 << 10: TCP_LISTEN.
        let dump = self.diag.as_mut()?.tcp_dump(1 << 10).ok()?;
        dump.into_iter()
            .find(|l| l.inode == inode)
            .map(|l| l.wqueue)
    }

    /// The followed listen sockets as the record holds them; None when no TCP socket is
    /// followed.
    pub(super) fn tcp_listen(&self) -> Option<tpslab_record::TcpListen> {
        if self.cfg.tcp_inodes.is_empty() {
            return None;
        }
        Some(tpslab_record::TcpListen {
            sockets: self
                .listeners
                .values()
                .map(|(a, b, q)| tpslab_record::ListenSocket {
                    local: a.to_string(),
                    backlog: *b,
                    accept_queue_max: *q,
                })
                .collect(),
            somaxconn: self.somaxconn,
        })
    }

    fn note<T>(&mut self, r: Result<T, tpslab_proc::ProcError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.errors.insert(e.to_string());
                None
            }
        }
    }

    /// Reads the UDP socket tables of `root`, udp6 only when IPv6 sockets are watched.
    fn sockets(&mut self, root: &std::path::Path) -> Vec<UdpSocket> {
        let mut socks: Vec<UdpSocket> = self.note(live::udp(root)).unwrap_or_default();
        if self.v6 {
            socks.extend(self.note(live::udp6(root)).unwrap_or_default());
        }
        socks
    }

    /// Reads the socket tables and rebuilds the list of target sockets followed by
    /// sock_diag.
    fn scan(&mut self, r: &mut Raw) {
        let root = self.cfg.net_root.clone();
        let socks = self.sockets(&root);
        let first = std::mem::replace(&mut self.first, false);
        let mut followed = vec![];
        // The target's sockets: those its datagrams reach, never the generator's.
        let target: BTreeSet<u64> = self
            .target
            .select(socks.iter().filter(|s| !self.gen_inodes.contains(&s.inode)))
            .iter()
            .map(|s| s.inode)
            .collect();
        for s in &socks {
            if target.contains(&s.inode) {
                if !self.srv_rcvbuf.contains_key(&s.inode) {
                    if let Some(d) = self.diag.as_mut() {
                        if let Ok(Some(m)) = d.lookup(lookup_local(s), lookup_remote(s)) {
                            if m.inode == s.inode {
                                self.srv_rcvbuf.insert(s.inode, m.rcvbuf);
                            }
                        }
                    }
                }
                r.srv_rxq += s.rx_queue;
                self.srv_track
                    .see(s, s.drops.unwrap_or(0), s.rx_queue, first);
                followed.push(s.clone());
            }
        }
        self.group_rcvbufs(&target, r.t_ns);
        // A socket the scan missed (its listing shifted between two page reads) is kept
        // while a lookup still finds it.
        let previous = self.followed.take().unwrap_or_default();
        for s in previous {
            if followed.iter().any(|f| f.inode == s.inode) {
                continue;
            }
            let Some(d) = self.diag.as_mut() else {
                continue;
            };
            if let Ok(Some(m)) = d.lookup(lookup_local(&s), lookup_remote(&s)) {
                if m.inode == s.inode {
                    self.srv_rcvbuf.insert(s.inode, m.rcvbuf);
                    r.srv_rxq += m.rx_queue;
                    self.srv_track.see(&s, m.drops, m.rx_queue, false);
                    followed.push(s);
                }
            }
        }
        // An unconnected socket is found by its local address: sockets sharing one
        // (SO_REUSEPORT) cannot be told apart by a lookup, so those stay on the scan.
        let mut locals: Vec<SocketAddr> = followed
            .iter()
            .filter(|s| s.remote.port() == 0)
            .map(|s| s.local)
            .collect();
        locals.sort();
        let unique = locals.windows(2).all(|w| w[0] != w[1]);
        self.followed = unique.then_some(followed);
    }

    /// The SO_RCVBUF limit of every target socket a lookup could not single out (the
    /// members of a SO_REUSEPORT group share their address: a lookup finds one of them),
    /// from one sock_diag UDP dump of the target's namespace at each scan while the
    /// target has two or more sockets or one without a known limit: at once for a socket
    /// without one, else at most once per [`SCAN_PERIOD_NS`] (a group is scanned at every
    /// sample: its members cannot be followed by lookups; a limit set during the run shows
    /// within a second). `now_ns`: the sample's monotonic time.
    fn group_rcvbufs(&mut self, target: &BTreeSet<u64>, now_ns: u64) {
        let known = target.iter().all(|i| self.srv_rcvbuf.contains_key(i));
        if known
            && (target.len() < 2
                || (self.last_group_ns != 0
                    && now_ns.saturating_sub(self.last_group_ns) < SCAN_PERIOD_NS))
        {
            return;
        }
        self.last_group_ns = now_ns;
        let v6 = self.v6;
        let Some(d) = self.diag.as_mut() else { return };
        match d.udp_dump(v6) {
            Ok(all) => {
                for s in all {
                    if target.contains(&s.mem.inode) {
                        self.srv_rcvbuf.insert(s.mem.inode, s.mem.rcvbuf);
                    }
                }
            }
            Err(e) => {
                self.errors
                    .insert(format!("sock_diag UDP dump (each socket's SO_RCVBUF): {e}"));
            }
        }
    }

    /// Reads the followed target sockets by sock_diag; false when that is not possible
    /// or a socket was not found as it was (then the caller scans /proc).
    fn diag_fast(&mut self, r: &mut Raw) -> bool {
        let Some(followed) = self.followed.take() else {
            return false;
        };
        // Nothing followed (yet): new sockets are found by the next scan.
        let mut found = true;
        for s in &followed {
            let Some(d) = self.diag.as_mut() else {
                found = false;
                break;
            };
            match d.lookup(lookup_local(s), lookup_remote(s)) {
                Ok(Some(m)) if m.inode == s.inode => {
                    self.srv_rcvbuf.insert(s.inode, m.rcvbuf);
                    r.srv_rxq += m.rx_queue;
                    self.srv_track.see(s, m.drops, m.rx_queue, false);
                }
                _ => {
                    found = false;
                    break;
                }
            }
        }
        self.followed = Some(followed);
        found
    }

    /// Reads the generator's own sockets in place (every sample). The first reading of
    /// each is its baseline: they exist before the run, so one first read later (a
    /// failed read before) counts from there, never its drops from before the run.
    fn own_sockets(&mut self, r: &mut Raw) {
        let Some(p) = self.cfg.gen_sockets.as_ref() else {
            return;
        };
        if let Err(e) = p.read(&mut self.own) {
            self.errors.insert(format!(
                "the generator's sockets (getsockopt SO_MEMINFO): {e}"
            ));
        }
        for s in &self.own {
            let first = !self.gen_track.0.contains_key(&s.inode);
            r.gen_rxq += s.mem.rx_queue_bytes;
            self.gen_track.see_inode(
                s.inode,
                s.connected,
                s.mem.drops,
                s.mem.rx_queue_bytes,
                first,
            );
        }
    }

    /// One sample. The followed sockets' queues and drops are read every time; the
    /// host-wide counters (snmp, softnet, dev, stat) and the target threads' CPU time and
    /// context switches only when `slow` (the first and last samples always are): they
    /// change slowly and cost most.
    pub(super) fn sample(&mut self, prev: Option<&Raw>, slow: bool) -> Raw {
        let mut r = match (prev, slow) {
            (Some(p), false) => Raw {
                // Fast samples carry the scalars of the last slow one; the per-CPU tables
                // are read from the first and last samples only, so they are not copied.
                slow: false,
                softnet_per_cpu: Vec::new(),
                threads: Vec::new(),
                stat: KernelStat {
                    per_cpu: Vec::new(),
                    ..p.stat.clone()
                },
                ..p.clone()
            },
            _ => Raw {
                slow: true,
                ..Default::default()
            },
        };
        r.t_ns = mono_ns();
        self.srv_track.tick();
        (r.srv_sockets, r.srv_rxq) = (0, 0);
        // Between scans the followed sockets are read by exact sock_diag lookups; the
        // full /proc scan (which also finds new sockets) runs at the first and last
        // samples, at the first slow sample SCAN_PERIOD_NS after the last scan, and
        // whenever a lookup does not find what it followed.
        let scan = slow
            && (prev.is_none()
                || std::mem::take(&mut self.scan_now)
                || r.t_ns.saturating_sub(self.last_scan_ns) >= SCAN_PERIOD_NS
                // No target socket found yet (a server not yet bound): looked for at
                // every slow sample, when one can match at all (a remote target has
                // neither inodes nor a port here: nothing to look for).
                || ((!self.target.inodes.is_empty() || self.target.port.is_some())
                    && self
                        .followed
                        .as_ref()
                        .is_some_and(|f| f.is_empty())));
        if scan {
            self.last_scan_ns = r.t_ns;
        }
        if scan || !self.diag_fast(&mut r) {
            r.srv_rxq = 0;
            self.scan(&mut r);
        }
        // The generator's sockets at every sample while they are few, else at the slow
        // ones (their queue and drops carried between): the cost of a sample stays
        // within OWN_EVERY_SAMPLE_MAX reads whatever --flows is.
        if slow || self.gen_inodes.len() <= OWN_EVERY_SAMPLE_MAX {
            r.gen_rxq = 0;
            self.own_sockets(&mut r);
        }
        if let Some(io) = self.io.as_mut() {
            // Every thread is read while datagrams wait: the drain rate must not miss a
            // thread that had been idle.
            let backlog = r.srv_rxq > 0 || prev.is_some_and(|p| p.srv_rxq > 0);
            r.io = Some(io.read(slow || backlog));
        } else if let Some(p) = &self.cfg.read_probe {
            r.io = Some(crate::observe::sockio::UdpIo {
                read: p.get(),
                ..Default::default()
            });
        }
        r.gen_sent = self.cfg.send_probe.as_ref().map(|p| p.get());
        r.srv_drops = self.srv_track.total();
        r.gen_drops = self.gen_track.total();
        r.srv_sockets = self.srv_track.0.len();
        if r.slow {
            self.slow_counters(&mut r);
        }
        r
    }

    /// A slow sample's reads into `r`: the target threads' waits, the followed TCP
    /// sockets, the host-wide counters (snmp, softnet, dev, stat) and the target
    /// threads' context switches and CPU time.
    fn slow_counters(&mut self, r: &mut Raw) {
        let root = self.cfg.net_root.clone();
        let proc_root = self.proc_root.clone();
        if let Some(w) = self.waits.as_mut() {
            w.sample();
            r.threads = w.now().to_vec();
        }
        if !self.cfg.tcp_inodes.is_empty() {
            (r.tcp_sockets, r.tcp_listen_rxq, r.tcp_rxq, r.tcp_txq) = (0, 0, 0, 0);
            for s in self.note(live::tcp(&root)).unwrap_or_default() {
                if self.cfg.tcp_inodes.contains(&s.inode) {
                    r.tcp_sockets += 1;
                    // State 0x0A = TCP_LISTEN: rx_queue is the accept queue.
                    if s.state == 0x0A {
                        r.tcp_listen_rxq += s.rx_queue;
                        if !self.listeners.contains_key(&s.inode) {
                            let backlog = self.backlog(s.inode);
                            self.listeners.insert(s.inode, (s.local, backlog, 0));
                        }
                        if let Some(l) = self.listeners.get_mut(&s.inode) {
                            l.2 = l.2.max(s.rx_queue);
                        }
                    } else {
                        r.tcp_rxq += s.rx_queue;
                        r.tcp_txq += s.tx_queue;
                    }
                }
            }
        }
        if !self.cfg.tcp_inodes.is_empty() {
            r.tcp_ext = self.note(live::tcp_counters(&root));
        }
        if let Some(s) = self.note(live::snmp(&root)) {
            if let Some(u) = s.udp {
                add_udp(&mut r.udp, &u);
            }
        }
        if let Some(Some(s6)) = self.note(live::snmp6(&root)) {
            if let Some(u) = s6.udp6 {
                add_udp(&mut r.udp, &u);
            }
        }
        for c in self.note(live::softnet(&proc_root)).unwrap_or_default() {
            r.softnet_processed += c.processed;
            r.softnet_dropped += c.dropped;
            r.softnet_squeeze += c.time_squeeze;
            r.softnet_per_cpu.push((
                c.cpu.unwrap_or(c.row as u64),
                c.processed,
                c.dropped,
                c.time_squeeze,
            ));
        }
        for d in self.note(live::dev(&root)).unwrap_or_default() {
            r.dev_rx_drop += d.rx_drop;
            r.dev_tx_drop += d.tx_drop;
        }
        if let Some(st) = self.note(live::stat(&proc_root)) {
            r.stat = st;
        }
        if self.cfg.target_pid.is_some() {
            // /proc/TID/task/TID: a thread of any process the target spans.
            for tid in self.tids.clone() {
                let dir = proc_root
                    .join(tid.to_string())
                    .join("task")
                    .join(tid.to_string());
                if let Ok(s) = live::task_status(&dir.join("status")) {
                    r.task_vol += s.voluntary_ctxt_switches;
                    r.task_invol += s.nonvoluntary_ctxt_switches;
                }
                if let Ok(s) = live::schedstat(&dir.join("schedstat")) {
                    r.task_run_ns += s.run_ns;
                    r.task_wait_ns += s.wait_ns;
                }
            }
        }
    }
}

pub(super) fn target_sched(s: &Sampler) -> Vec<String> {
    if s.cfg.target_pid.is_none() {
        return vec![];
    }
    let policy_name = |p: u64| match p {
        0 => "other".to_string(),
        1 => "fifo".into(),
        2 => "rr".into(),
        3 => "batch".into(),
        5 => "idle".into(),
        6 => "deadline".into(),
        p => format!("policy{p}"),
    };
    s.tids
        .iter()
        .filter_map(|tid| {
            // /proc/TID/task/TID: a thread of any process the target spans.
            let dir = s
                .proc_root
                .join(tid.to_string())
                .join("task")
                .join(tid.to_string());
            let st = live::task_stat(&dir).ok()?;
            let status = live::task_status(&dir).ok()?;
            let prio = if st.rt_priority > 0 {
                format!(":{}", st.rt_priority)
            } else {
                String::new()
            };
            Some(format!(
                "{tid} {} {}{} cpus {}",
                st.comm,
                policy_name(st.policy),
                prio,
                status.cpus_allowed_list
            ))
        })
        .collect()
}
