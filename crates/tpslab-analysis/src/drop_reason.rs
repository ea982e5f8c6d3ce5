//! What a kernel drop reason (`skb:kfree_skb`'s `reason`, kernel 5.17+) means for a UDP
//! ledger: whether a ledger counter already covers it (then it is that row's
//! cross-check), whether it can be a datagram's fate that no counter sees (then it may
//! become a ledger row of its own), and in what words. Names only: the numbers differ
//! between kernels and are read from the tracepoint's `format` file.

/// What kind of drop a reason is, for the ledger and the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasonClass {
    /// Counted by a ledger row already (the row's layer key): its cross-check.
    Covered(&'static str),
    /// A firewall rule (netfilter, reverse-path filter, an LSM or a cgroup BPF program).
    Firewall,
    /// No route or no neighbour for the destination.
    Route,
    /// A bad checksum.
    Checksum,
    /// A queueing discipline or a tc filter dropped it.
    Qdisc,
    /// Malformed, too small, too big, or not for this host.
    Malformed,
    /// Any other reason a UDP datagram can be dropped for.
    Other,
    /// Not a UDP datagram's fate (TCP's and Unix sockets' reasons) or says nothing
    /// (`NOT_SPECIFIED`): never charged to a UDP ledger.
    NotUdp,
}

/// The class of a reason by its kernel name.
pub fn classify(reason: &str) -> ReasonClass {
    use ReasonClass::*;
    match reason {
        // __udp_enqueue_schedule_skb: both count in the socket's `drops`.
        "SOCKET_RCVBUFF" | "PROTO_MEM" | "SOCKET_FILTER" => Covered("socket_drops"),
        "NO_SOCKET" => Covered("no_ports"),
        "CPU_BACKLOG" => Covered("softnet_drops"),
        "NETFILTER_DROP" | "IP_RPFILTER" | "SECURITY_HOOK" | "BPF_CGROUP_EGRESS"
        | "XFRM_POLICY" => Firewall,
        "IP_OUTNOROUTES" | "IP_INNOROUTES" | "NEIGH_CREATEFAIL" | "NEIGH_FAILED"
        | "NEIGH_QUEUEFULL" | "NEIGH_DEAD" | "NEIGH_HH_FILLFAIL" | "NO_TX_TARGET" => Route,
        "UDP_CSUM" | "IP_CSUM" | "SKB_CSUM" | "ICMP_CSUM" => Checksum,
        r if r.starts_with("QDISC_")
            || r.starts_with("FQ_")
            || r.starts_with("TC_")
            || r == "CAKE_FLOOD"
            || r == "DUALPI2_STEP_DROP" =>
        {
            Qdisc
        }
        "PKT_TOO_SMALL" | "PKT_TOO_BIG" | "IP_INHDR" | "HDR_TRUNC" | "OTHERHOST"
        | "IP_INADDRERRORS" | "IP_INVALID_SOURCE" | "IP_INVALID_DEST" | "IP_LOCAL_SOURCE"
        | "IP_LOCALNET" | "INVALID_PROTO" | "UNHANDLED_PROTO" | "IP_NOPROTO" => Malformed,
        "NOT_SPECIFIED" => NotUdp,
        r if r.starts_with("TCP_") || r.starts_with("UNIX_") || r.starts_with("IPV6_NDISC") => {
            NotUdp
        }
        _ => Other,
    }
}

/// A reason's ledger label: what happened, in words, with the kernel's name.
pub fn label(reason: &str) -> String {
    let what = match (reason, classify(reason)) {
        ("NETFILTER_DROP", _) => "dropped by a firewall rule",
        ("IP_RPFILTER", _) => "dropped by the reverse-path filter",
        (_, ReasonClass::Firewall) => "dropped by a security policy",
        (_, ReasonClass::Route) => "dropped for lack of a route or neighbour",
        ("UDP_CSUM", _) => "dropped for a bad UDP checksum",
        (_, ReasonClass::Checksum) => "dropped for a bad checksum",
        (_, ReasonClass::Qdisc) => "dropped by a queueing discipline or tc filter",
        (_, ReasonClass::Malformed) => "dropped as malformed or not for this host",
        _ => "dropped by the kernel",
    };
    format!("{what} ({reason})")
}

/// The reasons among `by_reason` that no ledger counter covers and that can be a UDP
/// datagram's fate: the candidates for ledger rows of their own, in the order given.
pub fn uncovered(by_reason: &[(String, u64)]) -> Vec<(String, u64)> {
    by_reason
        .iter()
        .filter(|(r, n)| {
            *n > 0 && !matches!(classify(r), ReasonClass::Covered(_) | ReasonClass::NotUdp)
        })
        .cloned()
        .collect()
}

/// The ledger layer key of a reason's own row: `kernel:` and the reason's name.
pub fn layer(reason: &str) -> String {
    format!("kernel:{reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_of_this_kernel_has_a_class_and_the_counted_ones_their_row() {
        let text = include_str!("../../tpslab-proc/tests/fixtures/linux-6.18/kfree_skb_format");
        let f = tpslab_proc::tracefs::parse_format(text).unwrap();
        let names: Vec<String> = f.symbols("reason").into_iter().map(|(_, n)| n).collect();
        assert!(names.len() > 100);
        let covered: Vec<&str> = names
            .iter()
            .filter_map(|n| match classify(n) {
                ReasonClass::Covered(l) => Some(l),
                _ => None,
            })
            .collect();
        assert_eq!(covered.len(), 5, "{covered:?}");
        assert_eq!(classify("NETFILTER_DROP"), ReasonClass::Firewall);
        assert_eq!(classify("QDISC_DROP"), ReasonClass::Qdisc);
        assert_eq!(classify("TC_INGRESS"), ReasonClass::Qdisc);
        assert_eq!(classify("IP_OUTNOROUTES"), ReasonClass::Route);
        assert_eq!(classify("UDP_CSUM"), ReasonClass::Checksum);
        assert_eq!(classify("TCP_LISTEN_OVERFLOW"), ReasonClass::NotUdp);
        assert_eq!(classify("SOME_FUTURE_REASON"), ReasonClass::Other);
    }

    #[test]
    fn only_reasons_no_counter_covers_become_rows() {
        let v = vec![
            ("SOCKET_RCVBUFF".to_string(), 900),
            ("NETFILTER_DROP".into(), 120),
            ("NOT_SPECIFIED".into(), 40),
            ("TCP_RESET".into(), 3),
            ("UDP_CSUM".into(), 0),
            ("QDISC_DROP".into(), 7),
        ];
        assert_eq!(
            uncovered(&v),
            [
                ("NETFILTER_DROP".to_string(), 120),
                ("QDISC_DROP".into(), 7)
            ]
        );
        assert_eq!(
            label("NETFILTER_DROP"),
            "dropped by a firewall rule (NETFILTER_DROP)"
        );
    }

    #[test]
    fn the_verdict_names_the_firewall_rule_the_route_and_the_checksum() {
        use crate::verdict::diagnose;
        use tpslab_record::verdict::Case;
        for (reason, words, layer) in [
            (
                "NETFILTER_DROP",
                "dropped by a netfilter rule (NETFILTER_DROP, 12.0 % of requests, 3.0 % of replies",
                "a netfilter rule (firewall) on both paths, after the sends succeeded",
            ),
            (
                "IP_OUTNOROUTES",
                "for lack of a route or neighbour (IP_OUTNOROUTES, 12.0 % of requests, 3.0 % of replies",
                "routing",
            ),
            (
                "UDP_CSUM",
                "bad checksums (UDP_CSUM, 12.0 % of requests, 3.0 % of replies",
                "checksum verification",
            ),
        ] {
            let mut f = crate::verdict::tests::s1();
            f.socket_drops = 1000;
            // 350000 attempted: 42000 requests, and 9231 of the 307000 replies.
            f.kernel_drops = vec![(reason.into(), 42_000, 9_210)];
            f.delivered = f.attempted - 43_000;
            // One reply per request read: the reply path starts from as many.
            f.reply_attempted = f.delivered;
            f.lost_total = 43_000 + 9_210;
            let d = diagnose(&f, None);
            assert_eq!(d.case, Case::KernelDrop, "{reason}");
            assert!(d.headline.contains(words), "{}", d.headline);
            assert!(d.layer.starts_with(layer), "{}", d.layer);
            assert!(d.evidence[0]
                .text
                .contains(&format!("42000 by kernel drop reason ({reason} 42000)")));
            assert!(d.fix.is_none(), "no buffer or thread fix for {reason}");
        }
        // Fewer than the socket buffer's drops: S1's verdict stands, the reason is evidence.
        let mut f = crate::verdict::tests::s1();
        f.kernel_drops = vec![("NETFILTER_DROP".into(), 10, 0)];
        assert_eq!(diagnose(&f, None).case, Case::SocketBufferBursts);
    }
}
