//! What a watched TCP server's listen sockets and its namespace's TCP counters say: an
//! accept queue that overflowed (a classic TPS plateau: clients wait for SYN
//! retransmissions), one at its limit, segments dropped at full socket queues.

use tpslab_record::{ObserverReport, TcpListen};

/// One line on the listen sockets: address, backlog limit, most connections seen waiting,
/// and somaxconn.
pub fn describe(l: &TcpListen) -> String {
    let socks: Vec<String> = l
        .sockets
        .iter()
        .map(|s| {
            format!(
                "{} backlog {}, up to {} waiting for accept",
                s.local,
                s.backlog.map_or("?".to_string(), |b| b.to_string()),
                s.accept_queue_max
            )
        })
        .collect();
    let somax = l
        .somaxconn
        .map_or(String::new(), |s| format!("; net.core.somaxconn {s}"));
    if socks.is_empty() {
        format!("no listen socket among the followed TCP sockets{somax}")
    } else {
        format!("{}{somax}", socks.join("; "))
    }
}

/// Findings from the observer's TCP figures, most serious first; empty when nothing is
/// wrong or nothing TCP was watched. The counters are the server namespace's (every
/// socket in it), the queues the server's own sockets'.
pub fn findings(o: &ObserverReport) -> Vec<String> {
    let Some(l) = &o.tcp_listen else {
        return vec![];
    };
    let d = |k: &str| o.deltas.get(k).copied().unwrap_or(0);
    let mut out = vec![];
    let dropped = d("tcp_listen_overflows").max(d("tcp_listen_drops"));
    let capped = |b: u32| {
        if l.somaxconn == Some(u64::from(b)) {
            " (capped by net.core.somaxconn)"
        } else {
            ""
        }
    };
    let limits: Vec<String> = l
        .sockets
        .iter()
        .filter_map(|s| {
            let b = s.backlog?;
            Some(format!(
                "{} has a backlog of {b}{} and held up to {} waiting",
                s.local,
                capped(b),
                s.accept_queue_max
            ))
        })
        .collect();
    if dropped > 0 {
        let limits = if limits.is_empty() {
            String::new()
        } else {
            format!("; {}", limits.join("; "))
        };
        out.push(format!(
            "ACCEPT QUEUE FULL: {dropped} connection requests were dropped at a full accept queue (TcpExt ListenOverflows/ListenDrops of the server's namespace){limits}. Clients wait for SYN retransmissions (1 s, then 3 s, ...) instead of being served: raise the listen backlog (listen(fd, N)) and net.core.somaxconn, and accept connections faster"
        ));
    } else {
        for s in &l.sockets {
            if let Some(b) = s
                .backlog
                .filter(|&b| b > 0 && s.accept_queue_max >= u64::from(b))
            {
                out.push(format!(
                    "the accept queue of {} reached its backlog of {b}{} ({} waiting) though no request was dropped while watched: the next burst of connections will be",
                    s.local,
                    capped(b),
                    s.accept_queue_max
                ));
            }
        }
    }
    let (bl, rq) = (d("tcp_backlog_drop"), d("tcp_rcvq_drop"));
    if bl + rq > 0 {
        out.push(format!(
            "{} TCP segments were dropped at full socket queues (TcpExt TCPBacklogDrop {bl}, TCPRcvQDrop {rq}, the server's namespace): a reader that falls behind or a receive buffer (SO_RCVBUF, tcp_rmem) too small; the peers retransmit them",
            bl + rq
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::ListenSocket;

    fn watched(backlog: Option<u32>, max: u64, deltas: &[(&str, u64)]) -> ObserverReport {
        ObserverReport {
            tcp_listen: Some(TcpListen {
                sockets: vec![ListenSocket {
                    local: "127.0.0.1:7312".into(),
                    backlog,
                    accept_queue_max: max,
                }],
                somaxconn: Some(4096),
            }),
            deltas: deltas.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn an_overflowing_accept_queue_is_named_with_its_limits() {
        let f = findings(&watched(
            Some(1),
            2,
            &[("tcp_listen_overflows", 8), ("tcp_listen_drops", 8)],
        ));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("ACCEPT QUEUE FULL: 8 connection requests were dropped at a full accept queue (TcpExt ListenOverflows/ListenDrops of the server's namespace); 127.0.0.1:7312 has a backlog of 1 and held up to 2 waiting."),
            "{}",
            f[0]
        );
        // A backlog equal to somaxconn says who capped it.
        let f = findings(&watched(Some(4096), 4097, &[("tcp_listen_drops", 3)]));
        assert!(
            f[0].contains("a backlog of 4096 (capped by net.core.somaxconn)"),
            "{f:?}"
        );
    }

    #[test]
    fn a_full_queue_without_drops_and_socket_queue_drops() {
        let f = findings(&watched(Some(16), 16, &[]));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("reached its backlog of 16"), "{}", f[0]);
        let f = findings(&watched(
            Some(16),
            3,
            &[("tcp_backlog_drop", 2), ("tcp_rcvq_drop", 5)],
        ));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].starts_with("7 TCP segments were dropped"), "{}", f[0]);
        // Nothing wrong, or nothing TCP watched: nothing said.
        assert!(findings(&watched(Some(16), 3, &[("tcp_retrans_segs", 9)])).is_empty());
        assert!(findings(&ObserverReport::default()).is_empty());
    }

    #[test]
    fn describe_lists_each_listener() {
        let o = watched(Some(1), 2, &[]);
        assert_eq!(
            describe(o.tcp_listen.as_ref().unwrap()),
            "127.0.0.1:7312 backlog 1, up to 2 waiting for accept; net.core.somaxconn 4096"
        );
        assert_eq!(
            describe(&TcpListen::default()),
            "no listen socket among the followed TCP sockets"
        );
    }
}
