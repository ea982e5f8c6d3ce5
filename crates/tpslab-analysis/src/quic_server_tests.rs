use super::*;
use tpslab_record::quic_server::QuicStack;

/// `load_http_fixtures/caddy_h3_result.json`: the result of a real run (`load http
/// https://localhost:8443/ --http3 --insecure --rate 2000 --connections 4 --streams 4
/// --duration 2s` against Debian's Caddy 2.6.2 run as nobody in a network namespace; its
/// observer's series left out): Caddy's socket found by its address, SO_RCVBUF 4 MiB
/// granted (twice the 2 MiB its quic-go asks for, under rmem_max 4 MiB), no drop, the
/// request path balanced (5137 sent, 5137 read by Caddy's threads).
fn caddy() -> LoadHttpResult {
    serde_json::from_str(include_str!("load_http_fixtures/caddy_h3_result.json")).unwrap()
}

/// The fixture with `n` of the datagrams Caddy read dropped at its socket instead (the
/// path still balances), `rmem_max` as given.
fn dropped(n: u64, rmem_max: u64) -> LoadHttpResult {
    let mut r = caddy();
    let u = r.server_udp.as_mut().unwrap();
    u.rmem_max = Some(rmem_max);
    for row in &mut u.ledger.request.rows {
        match row.layer.as_str() {
            "socket_drops" => row.count = n,
            "delivered" => row.count -= n,
            _ => {}
        }
    }
    r
}

#[test]
fn the_real_caddy_run_drops_nothing_and_names_what_quic_go_asked() {
    let v = judge(&caddy()).unwrap();
    assert_eq!(
        v.headline,
        "no datagram dropped at the receive buffer of caddy (quic-go) at 127.0.0.1:8443"
    );
    assert!(
        v.lines[0].starts_with("Socket: SO_RCVBUF 4 MiB (4194304 B) granted; rx_queue peaked at 8320 B; 0 of 5137 client datagrams dropped"),
        "{:?}",
        v.lines
    );
    assert!(
        v.lines[1].starts_with("Asked: quic-go asks for 2 MiB (2097152 B)")
            && v.lines[1].ends_with("net.core.rmem_max 4 MiB (4194304 B) allows it"),
        "{}",
        v.lines[1]
    );
    assert!(
        v.lines[2].starts_with("QUIC cost: 0 packets of 5140 declared lost"),
        "{}",
        v.lines[2]
    );
    assert!(v.sysctls.is_empty());
}

/// quic-go asking 7 MiB under the default rmem_max: the verdict names rmem_max and
/// wmem_max at 7,340,032 B, the fix `--verify` applies.
#[test]
fn drops_at_a_quic_go_socket_capped_by_rmem_max_name_the_7_mib_it_asks_for() {
    let mut r = dropped(400, 212_992);
    let u = r.server_udp.as_mut().unwrap();
    u.stack = Some(QuicStack {
        name: "quic-go".into(),
        package: "github.com/quic-go/quic-go".into(),
        asks_bytes: 7 << 20,
        send_too: true,
        source: "test".into(),
    });
    u.observer.target_rcvbuf_bytes = vec![425_984];
    u.wmem_max = Some(212_992);
    let v = judge(&r).unwrap();
    assert_eq!(
        v.headline,
        "receive-buffer loss at caddy (quic-go) at 127.0.0.1:8443: it asks for 7 MiB (7340032 B) and net.core.rmem_max (208 KiB (212992 B)) caps it"
    );
    assert!(
        v.lines[0].contains("400 of 5137 client datagrams dropped at its receive buffer (7.79 %)"),
        "{}",
        v.lines[0]
    );
    assert_eq!(
        v.sysctls,
        [
            ("net.core.rmem_max".to_string(), "7340032".to_string()),
            ("net.core.wmem_max".to_string(), "7340032".to_string())
        ]
    );
    assert!(v.lines.iter().any(
        |l| l.starts_with("Fix: sysctl -w net.core.rmem_max=7340032 net.core.wmem_max=7340032")
    ));
}

/// Without a known stack, the grant says what was asked: at the cap (at least
/// rmem_max: raise it), the default itself (never asked: not the host's limit), or below
/// the cap (got it all: its readers fell behind).
#[test]
fn an_unknown_server_is_judged_by_what_its_socket_was_granted() {
    let at = |grant: u64| {
        let mut r = dropped(10, 1 << 20);
        let u = r.server_udp.as_mut().unwrap();
        u.stack = None;
        u.target = None;
        u.observer.target_rcvbuf_bytes = vec![grant];
        (asked(u), judge(&r).unwrap())
    };
    let (a, v) = at(2 << 20);
    assert_eq!(a, Asked::AtLeastCap(1 << 20));
    assert!(
        v.headline.ends_with(
            "its socket asked for at least the 1 MiB (1048576 B) net.core.rmem_max allows"
        ),
        "{}",
        v.headline
    );
    assert_eq!(
        v.sysctls,
        [("net.core.rmem_max".to_string(), (4u64 << 20).to_string())]
    );
    // A socket that never set SO_RCVBUF holds net.core.rmem_default itself (not twice,
    // which is what one asking for the default gets: aioquic's socket showed 212992).
    assert_eq!(at(2 * 212_992).0, Asked::Granted(212_992));
    // A default above twice rmem_max (which does not cap it): a socket holding it never
    // asked; one holding exactly twice the cap when that is the default too is the cap's.
    let mut r = dropped(10, 1 << 16);
    let u = r.server_udp.as_mut().unwrap();
    u.stack = None;
    u.observer.target_rcvbuf_bytes = vec![212_992];
    assert_eq!(asked(u), Asked::Default);
    u.rmem_max = Some(212_992 / 2);
    assert_eq!(asked(u), Asked::AtLeastCap(212_992 / 2));
    let (a, v) = at(212_992);
    assert_eq!(a, Asked::Default);
    assert!(
        v.headline.contains("the server at 127.0.0.1:8443"),
        "{}",
        v.headline
    );
    assert!(
        v.headline.ends_with(
            "its socket never set its buffer and runs on net.core.rmem_default (208 KiB (212992 B))"
        ),
        "{}",
        v.headline
    );
    // The default raised to what quic-go asks (rmem_max does not cap it), to verify.
    assert_eq!(
        v.sysctls,
        [("net.core.rmem_default".to_string(), "7340032".to_string())]
    );
    assert!(v.lines.iter().any(|l| l.starts_with(
        "Fix: sysctl -w net.core.rmem_default=7340032 (7 MiB (7340032 B), what quic-go asks"
    )));
    // A default at quic-go's request already, and still dropping: four times it.
    let mut r = dropped(10, 1 << 20);
    let u = r.server_udp.as_mut().unwrap();
    (u.stack, u.rmem_default) = (None, Some(8 << 20));
    u.observer.target_rcvbuf_bytes = vec![8 << 20];
    assert_eq!(
        judge(&r).unwrap().sysctls,
        [(
            "net.core.rmem_default".to_string(),
            (32u64 << 20).to_string()
        )]
    );
    let (a, v) = at(1 << 20);
    assert_eq!(a, Asked::Granted(1 << 19));
    assert!(
        v.headline.ends_with("its readers fell behind"),
        "{}",
        v.headline
    );
    assert!(v.sysctls.is_empty());
}

/// A request path that does not balance, or no server side, gives no verdict.
#[test]
fn no_verdict_without_a_balanced_path_or_the_server_side() {
    let mut r = caddy();
    r.server_udp.as_mut().unwrap().ledger.request.inconsistent = Some("test".into());
    assert!(judge(&r).is_none());
    let mut r = caddy();
    r.server_udp = None;
    assert!(judge(&r).is_none());
}

/// quic-go run as root forces its 7 MiB past rmem_max (SO_RCVBUFFORCE): the socket got
/// what it asked for, so drops are its readers', not the host's limit, and nothing is
/// applied; a send limit already above the request is never lowered.
#[test]
fn a_forced_grant_is_not_blamed_on_rmem_max_and_wmem_max_is_never_lowered() {
    let quic_go = || QuicStack {
        name: "quic-go".into(),
        package: "github.com/quic-go/quic-go".into(),
        asks_bytes: 7 << 20,
        send_too: true,
        source: "test".into(),
    };
    let mut r = dropped(400, 212_992);
    let u = r.server_udp.as_mut().unwrap();
    u.stack = Some(quic_go());
    u.observer.target_rcvbuf_bytes = vec![14 << 20];
    let v = judge(&r).unwrap();
    assert!(
        v.headline.contains("got what it asked for"),
        "{}",
        v.headline
    );
    assert!(v.sysctls.is_empty(), "{:?}", v.sysctls);
    assert!(v.lines[1].contains("granted it in full"), "{}", v.lines[1]);
    // Capped, with wmem_max at 16 MiB: only rmem_max is raised.
    let mut r = dropped(400, 212_992);
    let u = r.server_udp.as_mut().unwrap();
    u.stack = Some(quic_go());
    u.observer.target_rcvbuf_bytes = vec![425_984];
    u.wmem_max = Some(16 << 20);
    let v = judge(&r).unwrap();
    assert_eq!(
        v.sysctls,
        [("net.core.rmem_max".to_string(), "7340032".to_string())]
    );
}

/// Sizes under 1 MiB read in KiB, never "0.00 MiB" (rmem_max 4096 in a real run).
#[test]
fn sizes_under_a_mib_are_given_in_kib() {
    use crate::quic_server::mib;
    assert_eq!(mib(4096), "4 KiB (4096 B)");
    assert_eq!(mib(20800), "20.31 KiB (20800 B)");
    assert_eq!(mib(1 << 20), "1 MiB (1048576 B)");
    assert_eq!(mib(7_340_032), "7 MiB (7340032 B)");
    assert_eq!(mib(3 << 19), "1.50 MiB (1572864 B)");
}
