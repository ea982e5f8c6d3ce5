//! Tests of the parent module.
use super::*;

fn base() -> LedgerInputs {
    LedgerInputs {
        gen_attempted: 1000,
        gen_send_failed: 0,
        server_socket_drops: Some(0),
        gen_socket_drops: 0,
        softnet_drops: 0,
        nic_rx_drops: 0,
        no_ports: 0,
        server_read: Some(1000),
        server_reply_attempted: Some(1000),
        server_reply_failed: Some(0),
        server_counts_source: "tpslab server counts".into(),
        gen_read: 1000,
        replies_expected: true,
        server_socket_seen: true,
        kernel_drops: vec![],
        max_segments_per_send: 1,
    }
}

#[test]
fn clean_run_balances_to_zero() {
    let l = crate::ledger::build(&base());
    assert_eq!(l.request.unattributed, Some(0));
    assert_eq!(l.request.count("delivered"), 1000);
    assert_eq!(l.request.lost(), 0);
    let r = l.reply.unwrap();
    assert_eq!(r.unattributed, Some(0));
    assert_eq!(r.count("delivered"), 1000);
}

#[test]
fn socket_drops_and_failures_are_attributed() {
    let mut i = base();
    i.gen_send_failed = 10;
    i.server_socket_drops = Some(390);
    i.server_read = Some(600);
    i.server_reply_attempted = Some(600);
    i.server_reply_failed = Some(5);
    i.gen_socket_drops = 45;
    i.gen_read = 550;
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.unattributed, Some(0));
    assert_eq!(l.request.count("socket_drops"), 390);
    assert_eq!(l.request.lost(), 400);
    let r = l.reply.unwrap();
    assert_eq!(r.unattributed, Some(0));
    assert_eq!(r.count("send_failed"), 5);
    assert_eq!(r.count("socket_drops"), 45);
}

/// GSO sends of up to 63 datagrams into a UDP_GRO reader: a counted drop is one buffer.
/// Each is charged up to 63 datagrams, only up to what the path leaves unexplained, and
/// before the host-wide softnet counter (which may be another flow's).
#[test]
fn a_gro_buffer_drop_is_charged_per_datagram_up_to_the_gap() {
    let mut i = base();
    i.replies_expected = false;
    i.max_segments_per_send = 63;
    i.gen_attempted = 6300;
    i.server_read = Some(6300 - 2 * 63 - 5);
    i.server_socket_drops = Some(2);
    i.softnet_drops = 50;
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.count("socket_drops"), 126);
    assert_eq!(l.request.count("softnet_drops"), 5);
    assert_eq!(l.request.unattributed, Some(0));
    assert!(l.request.notes[0].contains("2 receive-buffer drops held 126 datagrams"));
    // A gap beyond 63 per drop stays unattributed: the bound is not stretched.
    i.softnet_drops = 0;
    i.server_read = Some(6300 - 200);
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.count("socket_drops"), 126);
    assert_eq!(l.request.unattributed, Some(200 - 126));
    // Without GSO each drop is one datagram, whatever the gap.
    i.max_segments_per_send = 1;
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.count("socket_drops"), 2);
    assert_eq!(l.request.unattributed, Some(198));
    assert!(l.request.notes.is_empty());
}

#[test]
fn shared_softnet_drops_go_to_the_request_path_first() {
    let mut i = base();
    i.server_read = Some(900);
    i.server_reply_attempted = Some(900);
    i.gen_read = 880;
    i.softnet_drops = 130; // 100 on the request path, 20 on the reply path, 10 foreign
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.count("softnet_drops"), 100);
    assert_eq!(l.request.unattributed, Some(0));
    let r = l.reply.unwrap();
    assert_eq!(r.count("softnet_drops"), 20);
    assert_eq!(r.unattributed, Some(0));
}

#[test]
fn reply_path_starts_from_what_the_server_read() {
    let mut i = base();
    i.server_reply_attempted = Some(900); // 100 read but never answered
    i.gen_read = 900;
    let l = crate::ledger::build(&i);
    let r = l.reply.unwrap();
    assert_eq!(r.attempted, 1000);
    assert_eq!(r.count("not_answered"), 100);
    assert_eq!(r.unattributed, Some(0));
    let sum: u64 = r.rows.iter().map(|x| x.count).sum();
    assert_eq!(sum, 1000);
}

#[test]
fn unexplained_loss_shows_as_unattributed() {
    let mut i = base();
    i.server_read = Some(990);
    i.server_reply_attempted = Some(990);
    i.gen_read = 990;
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.unattributed, Some(10));
    assert_eq!(l.request.lost(), 10);
}

#[test]
fn unknown_server_counts_leave_unattributed_unknown() {
    let mut i = base();
    i.server_read = None;
    i.server_reply_attempted = None;
    i.server_reply_failed = None;
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.unattributed, None);
    assert_eq!(l.reply.unwrap().unattributed, None);
}

#[test]
fn sink_has_no_reply_path_and_no_ports_counts() {
    let mut i = base();
    i.replies_expected = false;
    i.server_read = Some(0);
    i.no_ports = 1000;
    i.server_socket_seen = false;
    let l = crate::ledger::build(&i);
    assert!(l.reply.is_none());
    assert_eq!(l.request.count("no_ports"), 1000);
    assert_eq!(l.request.unattributed, Some(0));
}

#[test]
fn reads_of_other_traffic_make_the_path_inconsistent_not_negative_shares() {
    // The case: the namespace's InDatagrams taken for the server's reads.
    let mut i = base();
    i.gen_attempted = 110_000;
    i.server_read = Some(528_561);
    i.server_reply_attempted = Some(528_561);
    i.gen_read = 110_000;
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.unattributed, Some(-418_561));
    assert!(l.request.inconsistent.as_ref().unwrap().contains("418561"));
    assert_eq!(l.request.share_pct(528_561), None);
    assert_eq!(l.request.share_pct(0), None);
}

#[test]
fn shares_above_100_percent_are_never_given() {
    let l = crate::ledger::build(&base());
    assert_eq!(l.request.share_pct(1000), Some(100.0));
    assert_eq!(l.request.share_pct(1001), None);
}

#[test]
fn multi_datagram_replies_start_the_reply_path_from_what_was_sent() {
    // memcached: 3 frames per get.
    let mut i = base();
    i.server_reply_attempted = Some(3000);
    i.gen_read = 3000;
    let l = crate::ledger::build(&i);
    let r = l.reply.unwrap();
    assert_eq!(r.attempted, 3000);
    assert_eq!(r.unattributed, Some(0));
    assert!(r.inconsistent.is_none());
    assert!(r.notes.iter().any(|n| n.contains("3.00 per request")));
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("replies of several datagrams;")));
}

/// The non-root run: namespace counters (another program's UDP traffic included)
/// showed 3.21 sends per read of a one-reply echo server; that is not called frames.
#[test]
fn derived_counts_do_not_claim_multi_datagram_replies() {
    let mut i = base();
    i.server_counts_source =
        "derived: Udp InDatagrams / OutDatagrams / SndbufErrors deltas minus the generator's"
            .into();
    i.server_read = Some(1842);
    i.server_reply_attempted = Some(5921);
    i.gen_read = 1842;
    let l = crate::ledger::build(&i);
    let notes = l.reply.unwrap().notes.join("\n");
    assert!(notes.contains("3.21 per request"), "{notes}");
    assert!(notes.contains("or other traffic"), "{notes}");
    assert!(!notes.contains("the server sent"), "{notes}");
}

#[test]
fn foreign_no_ports_are_charged_only_up_to_the_gap() {
    // 50 NoPorts from another flow in the namespace; this run lost nothing.
    let mut i = base();
    i.no_ports = 50;
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.count("no_ports"), 0);
    assert_eq!(l.request.unattributed, Some(0));
    assert!(l
        .request
        .notes
        .iter()
        .any(|n| n.contains("50 datagrams of Udp: NoPorts")));
}

#[test]
fn softnet_drops_are_not_called_no_listener_when_the_socket_was_there() {
    let mut i = base();
    i.server_read = Some(900);
    i.server_reply_attempted = Some(900);
    i.gen_read = 900;
    i.softnet_drops = 100;
    i.no_ports = 40; // background: late DNS replies elsewhere in the namespace
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.count("softnet_drops"), 100);
    assert_eq!(l.request.count("no_ports"), 0);
    assert_eq!(l.request.unattributed, Some(0));
    // No socket: NoPorts first.
    i.server_socket_seen = false;
    i.server_read = Some(0);
    i.server_socket_drops = Some(0);
    i.no_ports = 1000;
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.count("no_ports"), 1000);
}

#[test]
fn a_reason_no_counter_covers_becomes_a_row_instead_of_unattributed() {
    // An nftables rule drops 120 requests and 30 replies; 25 more were another
    // namespace's (the tracepoint is host-wide).
    let mut i = base();
    i.server_read = Some(880);
    i.server_reply_attempted = Some(880);
    i.gen_read = 850;
    i.kernel_drops = vec![("NETFILTER_DROP".into(), 175)];
    let l = crate::ledger::build(&i);
    let nf = crate::drop_reason::layer("NETFILTER_DROP");
    assert_eq!(l.request.count(&nf), 120);
    assert_eq!(l.request.unattributed, Some(0));
    let r = l.reply.unwrap();
    assert_eq!(r.count(&nf), 30);
    assert_eq!(r.unattributed, Some(0));
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("25 NETFILTER_DROP drops")));
    // The row sits before `delivered`, and its source names the reason.
    let at = l.request.rows.iter().position(|x| x.layer == nf).unwrap();
    assert_eq!(l.request.rows[at + 1].layer, "delivered");
    assert!(l.request.rows[at]
        .source
        .contains("skb:kfree_skb reason NETFILTER_DROP"));
}

#[test]
fn reasons_come_after_every_counter_and_never_past_the_gap() {
    // Socket drops explain everything: a host-wide NETFILTER_DROP is not this run's.
    let mut i = base();
    i.server_socket_drops = Some(100);
    i.server_read = Some(900);
    i.server_reply_attempted = Some(900);
    i.gen_read = 900;
    i.softnet_drops = 0;
    i.kernel_drops = vec![("NETFILTER_DROP".into(), 50)];
    let l = crate::ledger::build(&i);
    assert_eq!(l.request.count("kernel:NETFILTER_DROP"), 0);
    assert!(!l
        .request
        .rows
        .iter()
        .any(|r| r.layer.starts_with("kernel:")));
    assert_eq!(l.request.unattributed, Some(0));
    // Unknown balance: nothing charged.
    i.server_read = None;
    let l = crate::ledger::build(&i);
    assert!(!l
        .request
        .rows
        .iter()
        .any(|r| r.layer.starts_with("kernel:")));
}

proptest::proptest! {
    /// Whatever the split of a run's datagrams, the request path rows plus unattributed
    /// sum to the attempted count.
    #[test]
    fn request_rows_always_sum(att in 0u64..1_000_000, f in 0u64..1000, d in 0u64..1000,
                               s in 0u64..1000, nic in 0u64..100, np in 0u64..100, r in 0u64..1_000_000) {
        let i = LedgerInputs { gen_attempted: att, gen_send_failed: f.min(att), server_socket_drops: Some(d),
            softnet_drops: s, nic_rx_drops: nic, no_ports: np, server_read: Some(r), max_segments_per_send: (d % 65).max(1), ..base() };
        let l = crate::ledger::build(&i);
        let sum: i64 = l.request.rows.iter().map(|x| x.count as i64).sum::<i64>() + l.request.unattributed.unwrap();
        proptest::prop_assert_eq!(sum, att as i64);
    }
}
