//! Who serves a UDP address on this host: the sockets bound to it in a network namespace
//! (`<root>/net/udp` and `udp6`, matched as the observer matches them: the address itself,
//! its v4-mapped form, or the wildcard) and the processes holding them (the
//! `socket:[INODE]` links in every `/proc/PID/fd`). Socket inodes are unique on the host,
//! so a process in any namespace is found by them.
//!
//! [`resolve`] turns a run's target (and the `--pid` the user gave, if any) into the
//! processes to follow, or a one-line refusal when the given PID holds no socket there.
//! The choice is the pure [`choose`], tested on tables.

use crate::observe::fd_holders::scan_holders;
use crate::observe::SocketMatch;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The target's sockets and who holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holders {
    /// The sockets on the target (local address, inode), in table order.
    pub sockets: Vec<(SocketAddr, u64)>,
    /// PID -> the target's socket inodes it holds (PIDs sorted).
    pub by_pid: BTreeMap<u32, Vec<u64>>,
    /// Processes whose descriptors could not be read (another user's, without root).
    pub unreadable: usize,
}

/// The processes a run follows for its target, and how they were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The process the record names (the given `--pid`, or the lowest PID holding the
    /// socket); None when no process could be found.
    pub pid: Option<u32>,
    /// Every process holding one of the target's sockets (pre-forked workers, several
    /// processes in one SO_REUSEPORT group), `pid` first.
    pub pids: Vec<u32>,
    /// How they were found, in words ("its UDP socket on 127.0.0.1:9500"); None when
    /// the user gave `--pid` and it holds the socket (nothing was looked up on its behalf).
    pub found_by: Option<String>,
    /// Why no process was found or followed in full (a note for the record); None when
    /// nothing is missing.
    pub missing: Option<String>,
}

/// The short name of a process (`/proc/PID/comm`), or "?".
pub fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The UDP sockets under `net_root` (`/proc/self` or `/proc/PID`) that are the target's
/// ([`SocketMatch::select`]: those its datagrams reach).
fn target_sockets(net_root: &Path, m: &SocketMatch) -> Vec<(SocketAddr, u64)> {
    let mut socks = tpslab_proc::live::udp(net_root).unwrap_or_default();
    socks.extend(tpslab_proc::live::udp6(net_root).unwrap_or_default());
    m.select(&socks)
        .iter()
        .map(|s| (s.local, s.inode))
        .collect()
}

/// The target's sockets in the namespace of `net_root` and the processes holding them.
pub fn holders(net_root: &Path, target: SocketAddr, port: Option<u16>) -> Holders {
    let m = SocketMatch {
        inodes: vec![],
        port: Some(port.unwrap_or(target.port())),
        addr: Some(target.ip()),
    };
    let sockets = target_sockets(net_root, &m);
    let inodes: BTreeSet<u64> = sockets.iter().map(|s| s.1).collect();
    let (by_pid, unreadable) = scan_holders(Path::new("/proc"), &inodes);
    Holders {
        sockets,
        by_pid,
        unreadable,
    }
}

/// The UDP sockets `pid` holds in its own namespace (local addresses), for a refusal;
/// None when its descriptors cannot be read (another user's process, without root).
pub fn udp_sockets_of(pid: u32) -> Option<Vec<SocketAddr>> {
    std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let fds = tpslab_proc::live::socket_inodes(pid);
    let root = PathBuf::from(format!("/proc/{pid}"));
    let mut socks = tpslab_proc::live::udp(&root).unwrap_or_default();
    socks.extend(tpslab_proc::live::udp6(&root).unwrap_or_default());
    let mut v: Vec<SocketAddr> = socks
        .iter()
        .filter(|s| fds.binary_search(&s.inode).is_ok())
        .map(|s| s.local)
        .collect();
    v.sort();
    v.dedup();
    Some(v)
}

/// Names `pids` for a message: "PID 4242 (python3)", "PIDs 10 (nginx), 11 (nginx)".
fn named(pids: &[u32], comm: &dyn Fn(u32) -> String) -> String {
    let list: Vec<String> = pids.iter().map(|p| format!("{p} ({})", comm(*p))).collect();
    match list.len() {
        1 => format!("PID {}", list[0]),
        _ => format!("PIDs {}", list.join(", ")),
    }
}

/// The decision, pure: which processes to follow for `target`, given the sockets found
/// there and their holders, the `--pid` the user gave, and what that PID holds (None:
/// its descriptors cannot be read, so whether it holds the socket cannot be checked).
/// `Err` is the one-line refusal of a `--pid` that holds none of the target's sockets.
pub fn choose(
    target: SocketAddr,
    given: Option<u32>,
    h: &Holders,
    comm: &dyn Fn(u32) -> String,
    given_holds: &dyn Fn(u32) -> Option<Vec<SocketAddr>>,
) -> Result<Resolved, String> {
    let all: Vec<u32> = h.by_pid.keys().copied().collect();
    let on = format!("UDP socket on {target}");
    match given {
        Some(pid) => chosen_pid(pid, target, h, comm, given_holds),
        None if !all.is_empty() => Ok(Resolved {
            pid: Some(all[0]),
            found_by: Some(format!("found by its {on}")),
            missing: (h.unreadable > 0).then(|| {
                format!(
                    "other holders of the socket may be missed: {}",
                    hidden(h.unreadable)
                )
            }),
            pids: all,
        }),
        None => Ok(Resolved {
            pid: None,
            pids: vec![],
            found_by: None,
            missing: (!h.sockets.is_empty()).then(|| {
                format!(
                    "the server's process was not found (its {on} is there, inode {}){}: its reads cannot be counted; pass --pid PID of the server",
                    h.sockets[0].1,
                    if h.unreadable > 0 {
                        format!(": {}", hidden(h.unreadable))
                    } else {
                        String::new()
                    }
                )
            }),
        }),
    }
}

/// [`choose`] with `--pid` given: followed with the socket's other holders when it holds
/// it, as given when what it holds cannot be read, else refused (one line naming what it
/// holds and who holds the target).
fn chosen_pid(
    pid: u32,
    target: SocketAddr,
    h: &Holders,
    comm: &dyn Fn(u32) -> String,
    given_holds: &dyn Fn(u32) -> Option<Vec<SocketAddr>>,
) -> Result<Resolved, String> {
    let all: Vec<u32> = h.by_pid.keys().copied().collect();
    let on = format!("UDP socket on {target}");
    if h.by_pid.contains_key(&pid) {
        let mut pids = vec![pid];
        pids.extend(all.iter().copied().filter(|p| *p != pid));
        let found_by = (pids.len() > 1).then(|| {
            format!(
                "{} also hold{} a {on} (one shared by a fork, or their own of one SO_REUSEPORT group): followed with it",
                named(&pids[1..], comm),
                if pids.len() == 2 { "s" } else { "" }
            )
        });
        return Ok(Resolved {
            pid: Some(pid),
            pids,
            found_by,
            missing: None,
        });
    }
    let Some(holds) = given_holds(pid) else {
        // Another user's process, without root: what it holds cannot be read, so
        // it is followed as given (its CPU and queue still count), never refused
        // for a socket tpslab could not see.
        return Ok(Resolved {
            pid: Some(pid),
            pids: vec![pid],
            found_by: None,
            missing: Some(format!(
                "--pid {pid} ({}) could not be checked against the {on}: its /proc/{pid}/fd needs root (another user's process); followed as given",
                comm(pid)
            )),
        });
    };
    let holds_list = || {
        holds
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if h.sockets.is_empty() {
        // Nothing on the target in the PID's namespace: the ledger reports it as
        // no listener, which is the finding; the PID's own sockets say what it is.
        return Err(format!(
            "--pid {pid} ({}): no UDP socket is bound to {target} in its network namespace{}",
            comm(pid),
            if holds.is_empty() {
                ", and it holds no UDP socket at all".to_string()
            } else {
                format!("; it holds UDP sockets on {}", holds_list())
            }
        ));
    }
    let owner = if all.is_empty() {
        if h.unreadable > 0 {
            format!("its holder was not found: {}", hidden(h.unreadable))
        } else {
            "no process holding it was found".to_string()
        }
    } else {
        format!("it is held by {}", named(&all, comm))
    };
    Err(format!(
        "--pid {pid} ({}) holds no {on} ({}); {owner}",
        comm(pid),
        if holds.is_empty() {
            "it holds no UDP socket".to_string()
        } else {
            format!("it holds UDP sockets on {}", holds_list())
        }
    ))
}

/// Why `n` processes were not searched for the socket.
fn hidden(n: usize) -> String {
    format!(
        "{n} process(es) of other users could not be searched for it (their /proc/PID/fd needs root)"
    )
}

/// [`choose`] on this host: the target's sockets in the namespace of `given` (this one
/// when None) and their holders.
pub fn resolve(
    target: SocketAddr,
    given: Option<u32>,
    port: Option<u16>,
) -> Result<Resolved, String> {
    let root = given.map_or(PathBuf::from("/proc/self"), |p| {
        PathBuf::from(format!("/proc/{p}"))
    });
    let shown = SocketAddr::new(target.ip(), port.unwrap_or(target.port()));
    let h = holders(&root, target, port);
    let r = choose(shown, given, &h, &comm, &udp_sockets_of);
    match (r, given) {
        // Nothing there in the given PID's namespace, but the target is served in this
        // one: the PID is in another namespace than the server; name the holder.
        (Err(e), Some(pid))
            if h.sockets.is_empty()
                && crate::host::env::netns(Some(pid)) != crate::host::env::netns(None) =>
        {
            let here = holders(Path::new("/proc/self"), target, port);
            let pids: Vec<u32> = here.by_pid.keys().copied().collect();
            if pids.is_empty() {
                Err(e)
            } else {
                Err(format!(
                    "{e}: it runs in another network namespace than tpslab, where {shown} is held by {}",
                    named(&pids, &comm)
                ))
            }
        }
        (r, _) => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn h(sockets: &[(&str, u64)], by_pid: &[(u32, &[u64])], unreadable: usize) -> Holders {
        Holders {
            sockets: sockets.iter().map(|(a, i)| (sa(a), *i)).collect(),
            by_pid: by_pid.iter().map(|(p, v)| (*p, v.to_vec())).collect(),
            unreadable,
        }
    }

    fn comm(p: u32) -> String {
        match p {
            1 => "systemd".into(),
            4242 => "python3".into(),
            _ => "named".into(),
        }
    }

    fn holds_none(_: u32) -> Option<Vec<SocketAddr>> {
        Some(vec![])
    }

    fn holds_dns(_: u32) -> Option<Vec<SocketAddr>> {
        Some(vec![sa("0.0.0.0:53")])
    }

    /// Another user's process, seen by a user without root.
    fn unreadable(_: u32) -> Option<Vec<SocketAddr>> {
        None
    }

    #[test]
    fn found_by_address_alone_follows_every_holder() {
        let t = sa("127.0.0.1:9500");
        let one = h(&[("127.0.0.1:9500", 7)], &[(4242, &[7])], 0);
        let r = choose(t, None, &one, &comm, &holds_none).unwrap();
        assert_eq!(r.pid, Some(4242));
        assert_eq!(r.pids, vec![4242]);
        assert_eq!(
            r.found_by.as_deref(),
            Some("found by its UDP socket on 127.0.0.1:9500")
        );
        assert_eq!(r.missing, None);
        // Pre-forked: parent and worker hold the same socket; SO_REUSEPORT: two sockets.
        let fork = h(
            &[("0.0.0.0:9500", 7), ("0.0.0.0:9500", 8)],
            &[(30, &[7]), (31, &[7, 8]), (32, &[8])],
            0,
        );
        let r = choose(t, None, &fork, &comm, &holds_none).unwrap();
        assert_eq!(r.pids, vec![30, 31, 32]);
        assert_eq!(r.pid, Some(30));
    }

    #[test]
    fn a_given_pid_that_holds_the_socket_leads_and_the_others_join() {
        let t = sa("127.0.0.1:9500");
        let fork = h(&[("0.0.0.0:9500", 7)], &[(30, &[7]), (31, &[7])], 0);
        let r = choose(t, Some(31), &fork, &comm, &holds_none).unwrap();
        assert_eq!(r.pids, vec![31, 30]);
        assert_eq!(r.pid, Some(31));
        assert!(r.found_by.unwrap().contains("PID 30 (named) also holds"));
        let alone = h(&[("0.0.0.0:9500", 7)], &[(31, &[7])], 0);
        let r = choose(t, Some(31), &alone, &comm, &holds_none).unwrap();
        assert_eq!((r.pids, r.found_by), (vec![31], None));
    }

    #[test]
    fn a_given_pid_without_the_socket_is_refused_naming_the_owner() {
        let t = sa("127.0.0.1:9500");
        let one = h(&[("127.0.0.1:9500", 7)], &[(4242, &[7])], 0);
        let e = choose(t, Some(1), &one, &comm, &holds_none).unwrap_err();
        assert_eq!(
            e,
            "--pid 1 (systemd) holds no UDP socket on 127.0.0.1:9500 (it holds no UDP socket); it is held by PID 4242 (python3)"
        );
        let e = choose(t, Some(1), &one, &comm, &holds_dns).unwrap_err();
        assert!(e.contains("it holds UDP sockets on 0.0.0.0:53"), "{e}");
        // The holder hidden from a non-root user: said so, not "nobody".
        let hidden = h(&[("127.0.0.1:9500", 7)], &[], 3);
        let e = choose(t, Some(1), &hidden, &comm, &holds_none).unwrap_err();
        assert!(e.contains("3 process(es) of other users"), "{e}");
        // Nothing on the target at all.
        let e = choose(t, Some(1), &Holders::default(), &comm, &holds_dns).unwrap_err();
        assert!(
            e.contains("no UDP socket is bound to 127.0.0.1:9500") && e.contains("0.0.0.0:53"),
            "{e}"
        );
    }

    #[test]
    fn a_given_pid_whose_descriptors_cannot_be_read_is_followed_not_refused() {
        // Not root, the server another user's: its socket is seen, its holder is not
        // (the given PID among the processes that cannot be searched). Before, this was
        // refused as "holds no UDP socket ... (it holds no UDP socket)".
        let t = sa("127.0.0.1:9500");
        let hidden = h(&[("127.0.0.1:9500", 7)], &[], 87);
        let r = choose(t, Some(4242), &hidden, &comm, &unreadable).unwrap();
        assert_eq!(
            (r.pid, r.pids.clone(), r.found_by),
            (Some(4242), vec![4242], None)
        );
        let m = r.missing.unwrap();
        assert!(
            m.contains("--pid 4242 (python3) could not be checked") && m.contains("needs root"),
            "{m}"
        );
    }

    #[test]
    fn no_process_found_is_said_with_its_reason() {
        let t = sa("127.0.0.1:9500");
        let hidden = h(&[("127.0.0.1:9500", 7)], &[], 2);
        let r = choose(t, None, &hidden, &comm, &holds_none).unwrap();
        assert_eq!(r.pid, None);
        let m = r.missing.unwrap();
        assert!(
            m.contains("inode 7") && m.contains("2 process(es)") && m.contains("--pid"),
            "{m}"
        );
        // No socket at all: nothing missing here (the ledger reports no listener).
        let r = choose(t, None, &Holders::default(), &comm, &holds_none).unwrap();
        assert_eq!((r.pid, r.missing), (None, None));
    }

    #[test]
    fn only_the_sockets_the_targets_datagrams_reach_are_the_servers() {
        let pick = |t: &str, socks: &[(&str, u64)]| -> Vec<u64> {
            let m = SocketMatch {
                inodes: vec![],
                port: Some(9500),
                addr: Some(t.parse().unwrap()),
            };
            let socks: Vec<tpslab_proc::udp::UdpSocket> = socks
                .iter()
                .map(|(a, i)| tpslab_proc::udp::UdpSocket {
                    local: sa(a),
                    inode: *i,
                    ..Default::default()
                })
                .collect();
            m.select(&socks).iter().map(|s| s.inode).collect()
        };
        // A v6-only [::] socket of another process beside the server's 127.0.0.1 one: the
        // IPv4 datagrams go to 127.0.0.1 only.
        assert_eq!(
            pick("127.0.0.1", &[("[::]:9500", 1), ("127.0.0.1:9500", 2)]),
            vec![2]
        );
        // An AF_INET wildcard never sees IPv6: [::1]'s server is the [::1] socket.
        assert_eq!(
            pick("::1", &[("0.0.0.0:9500", 1), ("[::1]:9500", 2)]),
            vec![2]
        );
        assert_eq!(pick("::1", &[("0.0.0.0:9500", 1)]), Vec::<u64>::new());
        // AF_INET before AF_INET6 for IPv4, both wildcards.
        assert_eq!(
            pick("127.0.0.1", &[("[::]:9500", 1), ("0.0.0.0:9500", 2)]),
            vec![2]
        );
        // A dual-stack [::] alone serves IPv4; a v4-mapped bind beats the wildcard.
        assert_eq!(pick("127.0.0.1", &[("[::]:9500", 1)]), vec![1]);
        assert_eq!(
            pick(
                "127.0.0.1",
                &[("[::]:9500", 1), ("[::ffff:127.0.0.1]:9500", 2)]
            ),
            vec![2]
        );
        // One SO_REUSEPORT group: every socket of it; another port or address: none.
        assert_eq!(
            pick(
                "127.0.0.1",
                &[
                    ("0.0.0.0:9500", 1),
                    ("0.0.0.0:9500", 2),
                    ("0.0.0.0:9501", 3)
                ]
            ),
            vec![1, 2]
        );
        assert_eq!(
            pick("127.0.0.1", &[("127.0.0.2:9500", 1)]),
            Vec::<u64>::new()
        );
    }

    #[test]
    fn finds_this_hosts_holder_of_a_real_socket() {
        // The socket is found; its only holder is this process, which is left out (the
        // generator never serves its own target).
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let h0 = holders(Path::new("/proc/self"), addr, None);
        assert_eq!(h0.sockets.len(), 1, "{h0:?}");
        // This process is never its own target's holder.
        assert!(h0.by_pid.is_empty(), "{h0:?}");
        let other = holders(Path::new("/proc/self"), sa("127.0.0.1:9"), Some(1));
        assert!(other.sockets.iter().all(|s| s.0.port() == 1));
    }
}
