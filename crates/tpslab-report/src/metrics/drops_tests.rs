use super::*;
use crate::metrics::{openmetrics, LiveReading, LiveState};

fn reading<'a>(
    reasons: Option<(&'a [(String, u64)], u64)>,
    sockets: &'a [(u64, std::net::SocketAddr, u64)],
) -> LiveReading<'a> {
    LiveReading {
        sent: None,
        server_read: None,
        udp_in_datagrams: 0,
        rcvbuf_errors: 0,
        socket_drops: 0,
        rx_queue_bytes: 0,
        softnet_dropped_per_cpu: &[],
        latency_histogram: None,
        threads: &[],
        drop_reasons: reasons,
        socket_drops_by_socket: sockets,
    }
}

/// The value of the sample line starting with `series ` in `text`.
fn value(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

#[test]
fn the_first_reasons_seen_keep_their_series_and_later_ones_sum_under_other() {
    let mut st = LiveState::default();
    // 20 reasons at once: the 16 largest get a series.
    let first: Vec<(String, u64)> = (0..20).map(|i| (format!("R{i:02}"), 100 + i)).collect();
    let om = openmetrics(&st.update(&reading(Some((first.as_slice(), 2)), &[])));
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"R19\"}"),
        Some(119)
    );
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"R04\"}"),
        Some(104)
    );
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"R03\"}"),
        None
    );
    // R00..R03 summed.
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"other\"}"),
        Some(100 + 101 + 102 + 103)
    );
    assert_eq!(value(&om, "tpslab_kernel_drops_lost_total"), Some(2));
    assert!(om.contains("# HELP tpslab_kernel_drops "), "{om}");
    // Later R00 outgrows every kept reason and a new reason comes: neither takes a kept
    // reason's place, so every series only grows.
    let mut later = first.clone();
    later[0].1 = 10_000;
    later.push(("SOCKET_RCVBUFF".into(), 5));
    // A sample that did not read them keeps the last reading.
    st.update(&reading(None, &[]));
    let om = openmetrics(&st.update(&reading(Some((later.as_slice(), 2)), &[])));
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"R04\"}"),
        Some(104)
    );
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"other\"}"),
        Some(10_000 + 101 + 102 + 103 + 5)
    );
    assert_eq!(om.matches("tpslab_kernel_drops_total{").count(), 17, "{om}");
    let om = openmetrics(&st.update(&reading(None, &[])));
    assert_eq!(om.matches("tpslab_kernel_drops_total{").count(), 17, "{om}");
}

#[test]
fn no_drop_sampler_no_reason_series() {
    let mut st = LiveState::default();
    let om = openmetrics(&st.update(&reading(None, &[])));
    assert!(!om.contains("tpslab_kernel_drops"), "{om}");
    assert!(!om.contains("tpslab_target_socket_drops"), "{om}");
    // A sampler that saw nothing yet: lost 0, no reason series.
    let om = openmetrics(&st.update(&reading(Some((&[][..], 0)), &[])));
    assert!(om.contains("tpslab_kernel_drops_lost_total 0\n"), "{om}");
    assert!(!om.contains("\ntpslab_kernel_drops_total{"), "{om}");
}

#[test]
fn each_socket_has_a_series_up_to_the_cap_then_other() {
    let mut st = LiveState::default();
    let a: std::net::SocketAddr = "0.0.0.0:5300".parse().unwrap();
    let socks: Vec<(u64, std::net::SocketAddr, u64)> = (0..40).map(|i| (1000 + i, a, i)).collect();
    let om = openmetrics(&st.update(&reading(None, &socks)));
    assert_eq!(
        value(
            &om,
            "tpslab_target_socket_drops_total{socket=\"udp:0.0.0.0:5300\",inode=\"1039\"}"
        ),
        Some(39)
    );
    // 32 of their own (the largest: 8..39), 0..7 summed.
    assert_eq!(
        value(
            &om,
            "tpslab_target_socket_drops_total{socket=\"other\",inode=\"\"}"
        ),
        Some((0..8).sum())
    );
    assert_eq!(om.matches("tpslab_target_socket_drops_total{").count(), 33);
    // A socket opened later (a worker started again) while 32 have series: summed
    // under other, no kept socket's series taken.
    let mut later = socks.clone();
    later.push((7, a, 100));
    let om = openmetrics(&st.update(&reading(None, &later)));
    assert_eq!(
        value(
            &om,
            "tpslab_target_socket_drops_total{socket=\"other\",inode=\"\"}"
        ),
        Some((0..8).sum::<u64>() + 100)
    );
    assert_eq!(om.matches("tpslab_target_socket_drops_total{").count(), 33);
    // An IPv6 socket is named by its address in brackets.
    let v6: std::net::SocketAddr = "[::1]:53".parse().unwrap();
    let om = openmetrics(&LiveState::default().update(&reading(None, &[(7, v6, 3)])));
    assert_eq!(
        value(
            &om,
            "tpslab_target_socket_drops_total{socket=\"udp:[::1]:53\",inode=\"7\"}"
        ),
        Some(3)
    );
}

#[test]
fn a_records_file_keeps_its_largest_reasons_and_the_groups_sockets() {
    // A real watch's record: 22538 drops at the socket's receive buffer.
    let text = include_str!("../../tests/fixtures/watch.json");
    let rec = tpslab_record::Record::from_json(text).unwrap();
    let om = openmetrics(&crate::metrics::of_record(&rec));
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"SOCKET_RCVBUFF\"}"),
        Some(22538)
    );
    assert_eq!(value(&om, "tpslab_kernel_drops_lost_total"), Some(0));
    // Many reasons: the 16 largest, the rest summed; a group's sockets by address.
    let reasons = tpslab_record::DropReasons {
        by_reason: (0..18).map(|i| (format!("R{i:02}"), 50 - i)).collect(),
        lost: 1,
        ..Default::default()
    };
    let group = [
        tpslab_record::TargetSocket {
            inode: 11,
            local: Some("0.0.0.0:5300".into()),
            drops: 9,
            ..Default::default()
        },
        tpslab_record::TargetSocket {
            inode: 12,
            drops: 0,
            ..Default::default()
        },
    ];
    let om = openmetrics(&of_record(Some(&reasons), &group));
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"R15\"}"),
        Some(35)
    );
    assert_eq!(
        value(&om, "tpslab_kernel_drops_total{reason=\"other\"}"),
        Some(34 + 33)
    );
    assert_eq!(
        value(
            &om,
            "tpslab_target_socket_drops_total{socket=\"udp:0.0.0.0:5300\",inode=\"11\"}"
        ),
        Some(9)
    );
    // A record from before sockets kept their address.
    assert_eq!(
        value(
            &om,
            "tpslab_target_socket_drops_total{socket=\"udp\",inode=\"12\"}"
        ),
        Some(0)
    );
    // Reasons not read: no series that would read as zero drops.
    let off = tpslab_record::DropReasons {
        unavailable: Some("--no-drop-reasons given".into()),
        ..Default::default()
    };
    assert!(of_record(Some(&off), &[]).is_empty());
}
