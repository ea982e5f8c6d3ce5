//! The datagrams beneath `load http --http3` against a server on this host: its QUIC
//! socket found by the URL's address ([`crate::observe::owner::resolve`], as `diagnose udp` finds
//! a UDP server), watched over the run by the observer `diagnose udp` uses (its drops and
//! receive queue against SO_RCVBUF, the namespace's UDP counters, softnet, its
//! process's threads: their exact reads by tracepoints and where they wait) with kernel
//! drop reasons beside it, and the request path's ledger at datagram level built by
//! [`tpslab_analysis::ledger`] from quinn's datagrams sent.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tpslab_record::ledger::LedgerInputs;
use tpslab_record::quic::QuicPaths;
use tpslab_record::quic_server::{QuicServerUdp, QuicStack};

use crate::observe::dropwatch::DropSampler;
use crate::observe::{Observer, ObserverConfig};

/// The observer's sampling interval over an HTTP/3 run (`diagnose udp`'s default).
const INTERVAL: Duration = Duration::from_millis(10);

/// What watches the server's socket while the run goes.
pub(in crate::client::openloop) struct Beneath {
    address: SocketAddr,
    observer: Observer,
    drops: Result<DropSampler, String>,
    target: Option<tpslab_record::run::TargetProcess>,
    stack: Option<QuicStack>,
    limits: [Option<u64>; 3],
    notes: Vec<String>,
}

/// A `net.core` sysctl of this network namespace, bytes.
fn core_sysctl(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The most of the server's executable read to tell its QUIC stack, bytes (256 MiB: the
/// largest Go servers are a few hundred MiB with debug info; their package paths are
/// in the first part).
pub(crate) const MAX_EXE_SCAN: u64 = 256 << 20;

/// The QUIC implementation an executable carries, by its Go packages' names (function
/// names in its symbol table): quic-go before its move to github.com/quic-go (v0.33)
/// asks for 2 MiB, later releases for 7 MiB, receive and send buffer alike. Reads the
/// file 1 MiB at a time; None when it names neither, or cannot be read.
pub(crate) fn quic_stack(exe: &std::path::Path) -> Option<QuicStack> {
    use std::io::Read;
    const KNOWN: [(&[u8], u64, bool, &str); 2] = [
        (
            b"github.com/quic-go/quic-go.",
            7 << 20,
            true,
            "quic-go's protocol.DesiredReceiveBufferSize and DesiredSendBufferSize, 7 MiB in its releases as github.com/quic-go/quic-go",
        ),
        (
            b"github.com/lucas-clemente/quic-go.",
            2 << 20,
            false,
            "quic-go's protocol.DesiredReceiveBufferSize, 2 MiB in its releases as github.com/lucas-clemente/quic-go (up to v0.32)",
        ),
    ];
    let f = std::fs::File::open(exe).ok()?;
    // A regular file only, and only its first MAX_EXE_SCAN bytes (a Go binary's
    // package paths sit in its first tens of MiB).
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut f = f.take(MAX_EXE_SCAN);
    let overlap = 64;
    let mut buf = vec![0u8; (1 << 20) + overlap];
    let mut keep = 0;
    loop {
        let n = f.read(&mut buf[keep..]).ok()?;
        if n == 0 {
            return None;
        }
        let end = keep + n;
        for (needle, asks, send_too, source) in KNOWN {
            if memchr::memmem::find(&buf[..end], needle).is_some() {
                return Some(QuicStack {
                    name: "quic-go".into(),
                    package: String::from_utf8_lossy(&needle[..needle.len() - 1]).into_owned(),
                    asks_bytes: asks,
                    send_too,
                    source: source.into(),
                });
            }
        }
        keep = overlap.min(end);
        buf.copy_within(end - keep..end, 0);
    }
}

/// The longest the server is given, once the last connection closed, to read what its
/// socket still holds before the observer's last sample.
const DRAIN: Duration = Duration::from_millis(200);

/// Waits (at most [`DRAIN`]) until no UDP socket bound to `address` (its port, on its
/// address or a wildcard) holds a datagram, by sock_diag dumps of this namespace every
/// 2 ms: datagrams a busy server had not read yet when the run ended (a CONNECTION_CLOSE)
/// are then counted read, not left unattributed in the ledger (seen beside stress-ng: 1 of
/// 1,561 client datagrams). Returns at once when the sockets cannot be dumped.
fn drain(address: SocketAddr) {
    let Ok(mut d) = tpslab_net::diag::SockDiag::open() else {
        return;
    };
    let deadline = std::time::Instant::now() + DRAIN;
    loop {
        let Ok(socks) = d.udp_dump(true) else {
            return;
        };
        let queued: u64 = socks
            .iter()
            .filter(|s| {
                s.local.port() == address.port()
                    && (s.local.ip() == address.ip() || s.local.ip().is_unspecified())
            })
            .map(|s| s.mem.rx_queue)
            .sum();
        if queued == 0 || std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

impl Beneath {
    /// Starts watching the server at `target` when its address is this host's; None for
    /// a server elsewhere (nothing of its side can be seen from here). Errors: the
    /// target's sockets could not be looked up (as `diagnose udp`'s).
    pub(in crate::client::openloop) fn start(
        target: SocketAddr,
    ) -> Result<Option<Beneath>, String> {
        if !crate::client::udp_run::is_local_ip(target.ip()) {
            return Ok(None);
        }
        let resolved = crate::observe::owner::resolve(target, None, None)?;
        let mut notes: Vec<String> = resolved.missing.iter().cloned().collect();
        let mut tids = vec![];
        for p in &resolved.pids {
            tids.extend(tpslab_proc::live::task_ids(*p));
        }
        let target_proc = resolved.pid.and_then(|pid| {
            crate::host::env::target_process(pid).map(|mut t| {
                t.found_by.clone_from(&resolved.found_by);
                t.others = resolved.pids.iter().skip(1).copied().collect();
                t
            })
        });
        let stack = resolved
            .pid
            .and_then(|pid| quic_stack(&PathBuf::from(format!("/proc/{pid}/exe"))));
        if resolved.pid.is_some() && stack.is_none() {
            notes.push("the server's QUIC implementation was not recognised in its executable: what its socket asked for is judged from what it was granted".into());
        }
        let cfg = ObserverConfig {
            interval: INTERVAL,
            net_root: PathBuf::from("/proc/self"),
            target_inodes: vec![],
            target_port: Some(target.port()),
            target_addr: Some(target.ip()),
            gen_sockets: None,
            target_pid: resolved.pid,
            target_tids: tids.clone(),
            count_io: (!tids.is_empty()).then_some((tids, true)),
            read_probe: None,
            send_probe: None,
            tcp_inodes: vec![],
            live: None,
            live_latency: None,
        };
        Ok(Some(Beneath {
            address: target,
            observer: Observer::start(cfg),
            drops: DropSampler::start_unless(false),
            target: target_proc,
            stack,
            limits: [
                core_sysctl("rmem_max"),
                core_sysctl("rmem_default"),
                core_sysctl("wmem_max"),
            ],
            notes,
        }))
    }

    /// Stops watching (after every connection closed) and balances the request path:
    /// `quic`'s datagrams sent, and `send_failed` the kernel refused, against where the
    /// host saw them end.
    pub(in crate::client::openloop) fn finish(
        self,
        quic: &QuicPaths,
        send_failed: u64,
    ) -> QuicServerUdp {
        drain(self.address);
        let obs = self.observer.stop();
        let drop_reasons = crate::observe::dropwatch::finish(self.drops);
        let mut notes = self.notes;
        let d = |k: &str| obs.deltas.get(k).copied().unwrap_or(0);
        let found = d("server_sockets_found") > 0;
        let exact = obs.deltas.contains_key("server_io_read");
        let (server_read, source) = if obs.deltas.contains_key("server_io_read") {
            (
                Some(d("server_io_read")),
                obs.sources
                    .get("server_io_read")
                    .cloned()
                    .unwrap_or_default(),
            )
        } else if found {
            notes.push("NOT EXACT: the server's reads are its namespace's Udp InDatagrams minus the datagrams quinn received (its threads could not be counted: run as root on kernel 6.4+)".into());
            (
                Some(d("udp_in_datagrams").saturating_sub(quic.datagrams_received)),
                "derived: Udp InDatagrams delta minus the datagrams the client's sockets read"
                    .to_string(),
            )
        } else {
            notes.push(format!(
                "no UDP socket on {} was seen during the run: the server's side is unknown",
                self.address
            ));
            (None, "not observed".to_string())
        };
        let kernel_drops = tpslab_analysis::drop_reason::uncovered(&drop_reasons.by_reason);
        let inputs = LedgerInputs {
            gen_attempted: quic.datagrams_sent + send_failed,
            gen_send_failed: send_failed,
            server_socket_drops: found.then(|| d("server_drops")),
            gen_socket_drops: 0,
            softnet_drops: d("softnet_dropped"),
            nic_rx_drops: d("dev_rx_drop").saturating_sub(d("softnet_dropped")),
            no_ports: d("udp_no_ports"),
            server_read,
            server_reply_attempted: exact.then(|| d("server_io_sent") + d("server_io_send_failed")),
            server_reply_failed: exact.then(|| d("server_io_send_failed")),
            server_counts_source: source,
            gen_read: quic.datagrams_received,
            replies_expected: exact,
            server_socket_seen: found,
            kernel_drops,
            max_segments_per_send: 0,
        };
        notes.push("the client's datagrams are counted at its UDP sockets (every datagram handed to the kernel, handshakes that failed or timed out included; quinn-udp reports a send the kernel refused as made, so such a datagram counts as sent and then unattributed, not as 'failed to send'); the reply path, with the server's threads counted exactly, is its sends against the datagrams the client's sockets read (a GSO send counts one: a server sending with UDP_SEGMENT makes it inconsistent)".into());
        QuicServerUdp {
            address: self.address.to_string(),
            target: self.target.map(|mut t| {
                t.exact_counts = obs.deltas.contains_key("server_io_read");
                t
            }),
            stack: self.stack,
            ledger: tpslab_analysis::ledger::build(&inputs),
            observer: obs,
            drop_reasons: Some(drop_reasons),
            rmem_max: self.limits[0],
            rmem_default: self.limits[1],
            wmem_max: self.limits[2],
            notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::quic_stack;

    /// quic-go is told by its package path, either one; 7 MiB for the new path, 2 MiB for
    /// the old; a name split across two 1 MiB reads is still found; anything else is None.
    #[test]
    fn quic_go_is_told_by_its_package_path_in_the_executable() {
        let dir = std::env::temp_dir().join(format!("tpslab-quic-stack-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = |name: &str, body: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, body).unwrap();
            quic_stack(&p)
        };
        let mut new = vec![0u8; (1 << 20) - 10];
        new.extend_from_slice(b"github.com/quic-go/quic-go.(*Transport).listen");
        let s = at("new", &new).unwrap();
        assert_eq!(
            (s.package.as_str(), s.asks_bytes, s.send_too),
            ("github.com/quic-go/quic-go", 7_340_032, true)
        );
        let s = at(
            "old",
            b"xx github.com/lucas-clemente/quic-go.(*baseServer).run",
        )
        .unwrap();
        assert_eq!((s.asks_bytes, s.send_too), (2_097_152, false));
        assert!(at("none", b"github.com/quic-go/qpack.Decoder quiche").is_none());
        assert!(quic_stack(&dir.join("absent")).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
