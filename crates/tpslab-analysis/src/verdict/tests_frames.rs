//! memcached's multi-frame replies with a netfilter rule dropping 10 % of the reply
//! frames (`numgen random mod 10 == 0 drop`), the facts of real `diagnose udp` runs
//! trimmed: the verdict's where is the ledger row that holds the loss.

use super::*;
use tpslab_record::ReplyFrames;

/// The facts both runs share: 5000 `get`s of a 5000-byte value (4 frames each) at
/// 2000 pps, all read by memcached, counted exactly on its threads.
fn memcached() -> Facts {
    Facts {
        gen_valid: true,
        attempted: 5000,
        delivered: 5000,
        replies: true,
        unattributed: Some(0),
        reply_unattributed: Some(0),
        limit_bytes: Some(212_992),
        rxq_max_bytes: 11_648.0,
        rxq_share_low: 1.0,
        server_cpu_mean_pct: 7.8,
        capacity_pps: Some(21_116.0),
        offered_pps: 2000.0,
        burst: 1,
        burst_interval_s: 0.0005,
        size_bytes: 15,
        cpus: 2,
        port: 11511,
        exact_server: true,
        reader_threads: Some(1),
        sk_rcvbufs: vec![212_992],
        server_sockets: 1,
        ..Default::default()
    }
}

/// The rule on the generator's input hook: the server sent 20000 frames, 1994 were
/// dropped on the way in (the ledger's reply row `kernel:NETFILTER_DROP`), 1727 of 5000
/// replies arrived incomplete.
fn input_hook() -> Facts {
    Facts {
        replies_read: 18_006,
        window_loss_pct: Some(34.575),
        lost_total: 1994,
        kernel_drops: vec![("NETFILTER_DROP".into(), 0, 1994)],
        reply_attempted: 20_000,
        frames: Some(ReplyFrames {
            header: "memcached".into(),
            replies_complete: 3273,
            replies_incomplete: 1727,
            frames_received: 18_006,
            frames_expected: 20_000,
            frames_misnumbered: 0,
        }),
        ..memcached()
    }
}

/// The rule on the server's output hook: 2151 of its 22149 sends failed (EPERM), as many
/// NETFILTER_DROP events; memcached sent 1925 of those frames again numbered anew.
fn output_hook() -> Facts {
    Facts {
        replies_read: 19_998,
        window_loss_pct: Some(32.5),
        lost_total: 2151,
        reply_failed: 2151,
        reply_attempted: 22_149,
        sends_refused_by: Some(("NETFILTER_DROP".into(), 2151)),
        frames: Some(ReplyFrames {
            header: "memcached".into(),
            replies_complete: 3358,
            replies_incomplete: 1642,
            frames_received: 18_073,
            frames_expected: 20_000,
            frames_misnumbered: 1925,
        }),
        ..memcached()
    }
}

fn all_text(d: &Diagnosis) -> String {
    format!(
        "{} | {} | {:?} | {:?}",
        d.headline, d.layer, d.evidence, d.recommendations
    )
}

#[test]
fn reply_frames_dropped_on_the_way_in_are_the_firewalls() {
    let d = diagnose(&input_hook(), None);
    assert_eq!(d.case, Case::KernelDrop, "{}", d.headline);
    assert!(d.layer.starts_with("a netfilter rule"), "{}", d.layer);
    // The sends succeeded: not an output hook, and no hook is made up.
    assert!(d.layer.contains("on the way back"), "{}", d.layer);
    assert!(!d.layer.contains("output"), "{}", d.layer);
    assert!(
        d.headline
            .contains("10.0 % of reply frames: 1727 of 5000 replies incomplete"),
        "{}",
        d.headline
    );
    assert!(
        d.headline.contains("100.0 % of the datagrams lost"),
        "{}",
        d.headline
    );
    let all = all_text(&d);
    assert!(!all.contains("no kernel counter"), "{all}");
    assert!(!all.contains("another socket"), "{all}");
    assert!(
        all.contains("1727 of 5000 replies arrived incomplete (34.5 %"),
        "{all}"
    );
}

#[test]
fn frames_the_server_could_not_send_are_frames_not_replies() {
    let d = diagnose(&output_hook(), None);
    assert_eq!(d.case, Case::ReplySendFailed, "{}", d.headline);
    assert!(
        d.headline
            .contains("could not send 2151 reply frames (1642 replies incomplete"),
        "{}",
        d.headline
    );
    assert!(!d.headline.contains("2151 replies"), "{}", d.headline);
    assert!(d.layer.contains("netfilter rule"), "{}", d.layer);
    assert!(d.layer.contains("sending side"), "{}", d.layer);
    let all = all_text(&d);
    assert!(all.contains("1925 more were numbered at or past"), "{all}");
    // Without the firewall's drops the failed sends are only the server's.
    let f = Facts {
        sends_refused_by: None,
        ..output_hook()
    };
    let d = diagnose(&f, None);
    assert_eq!(d.layer, "the server's reply sends");
    assert!(!all_text(&d).contains("netfilter"), "{}", all_text(&d));
    // Without a frame header a failed send is a reply.
    let f = Facts {
        frames: None,
        sends_refused_by: None,
        ..output_hook()
    };
    assert!(diagnose(&f, None)
        .headline
        .starts_with("The server could not send 2151 replies"));
}

/// Two findings at once: the headline is the larger with its share, the other follows
/// with its own; shares stay within 0..=100 and add up to 100.
#[test]
fn the_headline_is_the_largest_share_and_the_others_follow() {
    let f = Facts {
        socket_drops: 600,
        delivered: 4400,
        lost_total: 2594,
        ..input_hook()
    };
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::KernelDrop, "{}", d.headline);
    assert!(
        d.headline.contains("76.9 % of the datagrams lost"),
        "{}",
        d.headline
    );
    let line = &d.evidence[1].text;
    assert_eq!(
        line,
        "the loss by contribution (2594 datagrams lost, both paths): kernel drop reasons (NETFILTER_DROP) 1994 (76.9 %); the server socket's receive buffer 600 (23.1 %)"
    );
    // The socket buffer larger: it leads.
    let f = Facts {
        socket_drops: 2500,
        delivered: 2500,
        lost_total: 4494,
        ..input_hook()
    };
    let d = diagnose(&f, None);
    assert!(
        matches!(d.case, Case::SocketBufferBursts | Case::AppTooSlow),
        "{:?} {}",
        d.case,
        d.headline
    );
    assert!(d.evidence[1].text.contains(": the server socket's receive buffer 2500 (55.6 %); kernel drop reasons (NETFILTER_DROP) 1994 (44.4 %)"), "{}", d.evidence[1].text);
    // A ledger that does not balance gives no share.
    let f = Facts {
        inconsistent: Some("counters exceed what was sent".into()),
        ..input_hook()
    };
    let d = diagnose(&f, None);
    assert!(
        !all_text(&d).contains("% of the datagrams lost"),
        "{}",
        all_text(&d)
    );
}

/// Loss in a ledger row no verdict names (the generator's own socket dropping 8000
/// reply frames) is in the total the shares are taken of: the firewall's 1994 are 20.0 %
/// of the 9994 lost, not 100 % (the review's case), and the rest is said.
#[test]
fn shares_are_of_every_datagram_lost_not_only_the_named_rows() {
    let f = Facts {
        lost_total: 9994,
        ..input_hook()
    };
    let d = diagnose(&f, None);
    let text = all_text(&d);
    assert!(text.contains("20.0 % of the datagrams lost"), "{text}");
    assert!(
        text.contains("other ledger rows (the generator's own socket, ...) 8000 (80.0 %)"),
        "{text}"
    );
}
