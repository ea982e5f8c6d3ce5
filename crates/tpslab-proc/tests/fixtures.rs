//! Parse saved /proc files (real ones from Linux 6.18, hand-written older
//! kernel formats, and malformed files) and check concrete values.

use std::net::SocketAddr;
use std::path::PathBuf;

use tpslab_proc::*;

fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn fixture(rel: &str) -> String {
    std::fs::read_to_string(path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn snmp_6_18() {
    let s = parse_snmp(fixture("linux-6.18/snmp").as_bytes(), "/proc/net/snmp").unwrap();
    assert_eq!(
        s.udp,
        Some(UdpCounters {
            in_datagrams: 33,
            no_ports: 0,
            in_errors: 48,
            out_datagrams: 84,
            rcvbuf_errors: 48,
            sndbuf_errors: 0,
            in_csum_errors: 0,
            ignored_multi: 0,
            mem_errors: 0,
        })
    );
    assert_eq!(s.udplite, Some(UdpCounters::default()));
}

#[test]
fn snmp_3_10_seven_udp_columns() {
    let s = parse_snmp(fixture("linux-3.10/snmp").as_bytes(), "/proc/net/snmp").unwrap();
    let u = s.udp.unwrap();
    assert_eq!(u.in_datagrams, 2239871234);
    assert_eq!(u.no_ports, 52261);
    assert_eq!(u.in_errors, 1873345);
    assert_eq!(u.out_datagrams, 2210012345);
    assert_eq!(u.rcvbuf_errors, 1873340);
    assert_eq!(u.in_csum_errors, 5);
    assert_eq!(u.ignored_multi, 0);
    assert_eq!(u.mem_errors, 0);
    assert_eq!(s.udplite, Some(UdpCounters::default()));
}

#[test]
fn snmp6_6_18() {
    let s = parse_snmp6(fixture("linux-6.18/snmp6").as_bytes(), "/proc/net/snmp6").unwrap();
    let u = s.udp6.unwrap();
    assert_eq!(u.out_datagrams, 1);
    assert_eq!(u.in_datagrams, 0);
    assert_eq!(s.udplite6, Some(UdpCounters::default()));
}

#[test]
fn udp_6_18() {
    let v = parse_udp(fixture("linux-6.18/udp").as_bytes(), "/proc/net/udp").unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].local, addr("127.0.0.1:9000"));
    assert_eq!(v[0].remote, addr("0.0.0.0:0"));
    assert_eq!(v[0].state, 7);
    assert_eq!(v[0].tx_queue, 0);
    assert_eq!(v[0].rx_queue, 0x680);
    assert_eq!(v[0].uid, 0);
    assert_eq!(v[0].inode, 6708);
    assert_eq!(v[0].refcnt, 2);
    assert_eq!(v[0].drops, Some(48));
    assert_eq!(v[1].local, addr("127.0.0.1:46062"));
    assert_eq!(v[1].remote, addr("127.0.0.1:9000"));
    assert_eq!(v[1].state, 1);
    assert_eq!(v[1].inode, 6711);
}

#[test]
fn udp6_6_18() {
    let v = parse_udp(fixture("linux-6.18/udp6").as_bytes(), "/proc/net/udp6").unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0].local, addr("[::]:52160"));
    assert_eq!(v[0].inode, 6712);
    assert_eq!(v[1].local, addr("[::1]:9001"));
    assert_eq!(v[1].rx_queue, 0x340);
    assert_eq!(v[1].inode, 6709);
    assert_eq!(v[2].local, addr("[::ffff:127.0.0.1]:9002"));
    assert_eq!(v[2].remote, addr("[::]:0"));
    assert_eq!(v[2].drops, Some(0));
}

#[test]
fn udp_3_10_and_2_6_18() {
    let v = parse_udp(fixture("linux-3.10/udp").as_bytes(), "/proc/net/udp").unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0].local, addr("0.0.0.0:68"));
    assert_eq!(v[1].local, addr("127.0.0.2:14999"));
    assert_eq!(v[1].uid, 995);
    assert_eq!(v[1].rx_queue, 0x3E300);
    assert_eq!(v[1].inode, 2241834);
    assert_eq!(v[1].drops, Some(1873340));
    assert_eq!(v[2].remote, addr("127.0.0.1:54465"));
    assert_eq!(v[2].tx_queue, 0x200);

    let v = parse_udp(fixture("linux-2.6.18/udp").as_bytes(), "/proc/net/udp").unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[1].local, addr("127.0.0.1:111"));
    assert_eq!(v[1].inode, 7399);
    assert!(v.iter().all(|s| s.drops.is_none()));
}

#[test]
fn softnet_6_18_fifteen_columns() {
    let v = parse_softnet(
        fixture("linux-6.18/softnet_stat").as_bytes(),
        "/proc/net/softnet_stat",
    )
    .unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(
        v[1],
        SoftnetCpu {
            row: 1,
            processed: 0x35d,
            dropped: 0,
            time_squeeze: 0,
            received_rps: Some(0),
            flow_limit_count: Some(0),
            backlog_len: Some(0),
            cpu: Some(1),
        }
    );
    assert_eq!(v[0].processed, 0x12);
    assert_eq!(v[0].cpu, Some(0));
}

#[test]
fn softnet_3_10_eleven_columns() {
    let v = parse_softnet(
        fixture("linux-3.10/softnet_stat").as_bytes(),
        "/proc/net/softnet_stat",
    )
    .unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0].processed, 0x8b1e0c4a);
    assert_eq!(v[0].dropped, 0x1c2f1);
    assert_eq!(v[0].time_squeeze, 0x3a7e);
    assert_eq!(v[1].received_rps, Some(7));
    assert_eq!(v[2].flow_limit_count, Some(2));
    assert!(v.iter().all(|c| c.backlog_len.is_none() && c.cpu.is_none()));
    assert_eq!(v[2].row, 2);
}

#[test]
fn dev_6_18() {
    let v = parse_dev(fixture("linux-6.18/dev").as_bytes(), "/proc/net/dev").unwrap();
    let names: Vec<&str> = v.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["lo", "ifb0", "ifb1", "eth0"]);
    let eth0 = &v[3];
    assert_eq!(eth0.rx_bytes, 33524608);
    assert_eq!(eth0.rx_packets, 799);
    assert_eq!(eth0.tx_bytes, 46959);
    assert_eq!(eth0.tx_packets, 487);
    assert_eq!(eth0.rx_drop, 0);
    assert_eq!(v[0].rx_packets, 80);
}

#[test]
fn stat_6_18() {
    let k = parse_stat(fixture("linux-6.18/stat").as_bytes(), "/proc/stat").unwrap();
    assert_eq!(
        k.total,
        CpuTimes {
            user: 1493,
            nice: 0,
            system: 1231,
            idle: 26204,
            iowait: 219,
            irq: 0,
            softirq: 26,
            steal: 10,
        }
    );
    assert_eq!(k.total.busy(), 1493 + 1231 + 26 + 10);
    assert_eq!(k.total.total(), 1493 + 1231 + 26 + 10 + 26204 + 219);
    assert_eq!(k.per_cpu.len(), 2);
    assert_eq!(k.per_cpu[1].0, 1);
    assert_eq!(k.per_cpu[1].1.user, 1135);
    assert_eq!(k.per_cpu[1].1.softirq, 22);
    assert_eq!(k.ctxt, 235099);
    assert_eq!(k.processes, 2736);
    assert_eq!(k.procs_running, 2);
}

#[test]
fn pid_files_6_18() {
    let st = parse_status(fixture("linux-6.18/pid_status").as_bytes(), "status").unwrap();
    assert_eq!(
        st,
        TaskStatus {
            name: "python3".into(),
            state: 'S',
            voluntary_ctxt_switches: 124,
            nonvoluntary_ctxt_switches: 4,
            cpus_allowed_list: "0-1".into(),
            threads: Some(1),
        }
    );
    assert_eq!(parse_cpu_list(&st.cpus_allowed_list).unwrap(), vec![0, 1]);

    let t = parse_task_stat(&fixture("linux-6.18/pid_stat"), "stat").unwrap();
    assert_eq!(
        t,
        TaskStat {
            comm: "python3".into(),
            state: 'S',
            utime: 3,
            stime: 3,
            processor: 1,
            rt_priority: 0,
            policy: 0,
            num_threads: 1,
        }
    );

    // A thread of redis-server 7 before and after a second of 16 users sending PING:
    // the main thread's utime+stime grew by 36 ticks, a helper's stayed at 0.
    let main0 = parse_task_stat(&fixture("linux-6.18/task_stat_redis_main_t0"), "stat").unwrap();
    let main1 = parse_task_stat(&fixture("linux-6.18/task_stat_redis_main_t1"), "stat").unwrap();
    assert_eq!(
        (
            main0.comm.as_str(),
            main0.utime,
            main0.stime,
            main0.num_threads
        ),
        ("redis-server", 207, 1347, 5)
    );
    assert_eq!((main1.utime, main1.stime), (211, 1379));
    let bio = parse_task_stat(&fixture("linux-6.18/task_stat_redis_bio_t1"), "stat").unwrap();
    assert_eq!(
        (bio.comm.as_str(), bio.state, bio.utime, bio.stime),
        ("bio_close_file", 'S', 0, 0)
    );

    let s = parse_schedstat(fixture("linux-6.18/schedstat").as_bytes(), "schedstat").unwrap();
    assert_eq!(
        s,
        SchedStat {
            run_ns: 71899710,
            wait_ns: 305289,
            timeslices: 128,
        }
    );
}

fn err_of<T: std::fmt::Debug>(r: Result<T, ParseError>) -> ParseError {
    r.expect_err("malformed fixture parsed OK")
}

#[test]
fn malformed_files_name_file_and_line() {
    let e = err_of(parse_softnet(
        fixture("malformed/softnet_stat_nonhex").as_bytes(),
        "/proc/net/softnet_stat",
    ));
    assert_eq!(
        e.to_string(),
        "/proc/net/softnet_stat line 3: field 2 \"zz\" is not hex"
    );

    let e = err_of(parse_softnet(
        fixture("malformed/softnet_stat_truncated").as_bytes(),
        "/proc/net/softnet_stat",
    ));
    assert_eq!(e.line, 2);
    assert!(e.msg.contains("at least 3"), "{e}");

    let e = err_of(parse_snmp(
        fixture("malformed/snmp_short_values").as_bytes(),
        "/proc/net/snmp",
    ));
    assert_eq!(e.file, "/proc/net/snmp");
    assert_eq!(e.line, 4);
    assert!(e.msg.contains("13 fields") && e.msg.contains("15"), "{e}");

    let e = err_of(parse_snmp(
        fixture("malformed/snmp_truncated").as_bytes(),
        "/proc/net/snmp",
    ));
    assert_eq!(e.line, 3);
    assert!(
        e.to_string()
            .starts_with("/proc/net/snmp line 3: Udp header"),
        "{e}"
    );

    let e = err_of(parse_udp(
        fixture("malformed/udp_truncated").as_bytes(),
        "/proc/net/udp",
    ));
    assert_eq!(e.line, 3);
    assert!(e.to_string().starts_with("/proc/net/udp line 3:"), "{e}");

    let e = err_of(parse_udp(
        fixture("malformed/udp_nonhex_port").as_bytes(),
        "/proc/net/udp",
    ));
    assert_eq!(e.line, 2);
    assert!(e.msg.contains("\"23G8\""), "{e}");

    let e = err_of(parse_dev(
        fixture("malformed/dev_nonnumeric").as_bytes(),
        "/proc/net/dev",
    ));
    assert_eq!(
        e.to_string(),
        "/proc/net/dev line 4: eth0: column 4 \"x\" is not decimal"
    );

    let e = err_of(parse_task_stat(
        &fixture("malformed/pid_stat_truncated"),
        "/proc/2686/stat",
    ));
    assert!(e.to_string().starts_with("/proc/2686/stat line 1:"), "{e}");
}

#[test]
fn live_wrappers_on_fixture_root() {
    // live::* only join paths under the root, so a directory laid out like
    // procfs works. Build one in a temp dir from the 6.18 fixtures.
    let root = std::env::temp_dir().join(format!("tpslab-proc-test-{}", std::process::id()));
    let net = root.join("net");
    std::fs::create_dir_all(&net).unwrap();
    for f in ["snmp", "udp", "softnet_stat", "dev"] {
        std::fs::copy(path(&format!("linux-6.18/{f}")), net.join(f)).unwrap();
    }
    std::fs::copy(path("linux-6.18/stat"), root.join("stat")).unwrap();
    let task = root.join("task/2686");
    std::fs::create_dir_all(&task).unwrap();
    std::fs::copy(path("linux-6.18/pid_status"), task.join("status")).unwrap();
    std::fs::copy(path("linux-6.18/schedstat"), task.join("schedstat")).unwrap();

    assert_eq!(live::snmp(&root).unwrap().udp.unwrap().rcvbuf_errors, 48);
    assert_eq!(live::snmp6(&root).unwrap(), None);
    assert!(live::udp6(&root).unwrap().is_empty());
    assert_eq!(live::udp(&root).unwrap().len(), 2);
    assert_eq!(live::softnet(&root).unwrap().len(), 2);
    assert_eq!(live::dev(&root).unwrap().len(), 4);
    assert_eq!(live::stat(&root).unwrap().ctxt, 235099);
    // Directory or file path both work for per-task files.
    assert_eq!(live::task_status(&task).unwrap().name, "python3");
    assert_eq!(live::task_status(&task.join("status")).unwrap().state, 'S');
    assert_eq!(live::schedstat(&task).unwrap().timeslices, 128);
    let e = live::task_stat(&task).unwrap_err();
    assert!(e.is_not_found(), "{e}");

    std::fs::write(net.join("softnet_stat"), "0 0 zz\n").unwrap();
    let e = live::softnet(&root).unwrap_err();
    assert!(matches!(e, ProcError::Parse(_)));
    assert!(e.to_string().contains("net/softnet_stat line 1:"), "{e}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn live_proc_smoke() {
    let root = std::path::Path::new("/proc");
    if !root.join("net/snmp").exists() {
        return;
    }
    assert!(live::snmp(root).unwrap().udp.is_some());
    live::snmp6(root).unwrap();
    live::udp(root).unwrap();
    live::udp6(root).unwrap();
    assert!(!live::softnet(root).unwrap().is_empty());
    assert!(!live::dev(root).unwrap().is_empty());
    assert!(live::stat(root).unwrap().total.total() > 0);
    let me = std::process::id();
    let tids = live::task_ids(me);
    assert!(tids.contains(&me));
    let task = PathBuf::from(format!("/proc/{me}/task/{me}"));
    live::task_status(&task).unwrap();
    live::task_stat(&task.join("stat")).unwrap();
    live::schedstat(&task).unwrap();

    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    let inodes = live::socket_inodes(me);
    let mine = live::udp(root)
        .unwrap()
        .into_iter()
        .find(|s| s.local.port() == port)
        .expect("own socket in /proc/net/udp");
    assert!(inodes.contains(&mine.inode));
    assert!(live::task_ids(u32::MAX).is_empty());
    assert!(live::socket_inodes(u32::MAX).is_empty());
}

#[test]
fn ethtool_rings_and_statistics() {
    use tpslab_proc::ethtool::*;
    // This machine's virtio_net NIC (ethtool 6.1).
    let r = parse_rings(&fixture("ethtool/virtio_net-g.txt"));
    assert_eq!(
        r,
        Rings {
            rx: Some((256, 256)),
            tx: Some((256, 256))
        }
    );
    // An ixgbe port left at its default (hand-written in ethtool's format).
    let r = parse_rings(&fixture("ethtool/ixgbe-g.txt"));
    assert_eq!(r.rx, Some((512, 4096)));
    assert_eq!(
        parse_rings("netlink error: Operation not supported"),
        Rings::default()
    );
    let s = parse_stats(&fixture("ethtool/virtio_net-S.txt"));
    assert_eq!(s[0], ("rx_drops".to_string(), 0));
    assert!(s.iter().any(|(k, _)| k == "rx0_kicks"));
    let drops: Vec<&str> = s
        .iter()
        .filter(|(k, _)| is_drop_counter(k))
        .map(|(k, _)| k.as_str())
        .collect();
    assert!(
        drops.contains(&"rx0_drops") && drops.contains(&"rx_xdp_drops"),
        "{drops:?}"
    );
    assert!(!drops.contains(&"rx0_kicks"));
    // mlx5 names its drops differently (hand-written excerpt of a real counter set).
    let s = parse_stats(&fixture("ethtool/mlx5-S-excerpt.txt"));
    let drops: Vec<(&str, u64)> = s
        .iter()
        .filter(|(k, v)| is_drop_counter(k) && *v > 0)
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        drops,
        [("rx_out_of_buffer", 48211), ("rx_discards_phy", 1290)]
    );
}

#[test]
fn meminfo_total() {
    use tpslab_proc::meminfo::parse_mem_total;
    let m = fixture("linux-6.18/meminfo");
    assert_eq!(parse_mem_total(&m), Some(24_684_084 * 1024));
    assert_eq!(parse_mem_total("MemTotal: 12"), None);
    assert_eq!(parse_mem_total(""), None);
}

#[test]
fn pool_configurations() {
    use tpslab_proc::pool_conf::*;
    let parse = |name: &str| parse_pool_conf(name, &fixture(&format!("pool/{name}")));
    let c = parse("s5-before.hibernate.cfg.xml").unwrap();
    assert_eq!(c.kind, PoolKind::C3p0);
    let keys: Vec<&str> = c.settings.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "hibernate.c3p0.min_size",
            "hibernate.c3p0.max_size",
            "hibernate.c3p0.timeout",
            "hibernate.c3p0.idle_test_period",
            "hibernate.c3p0.preferredTestQuery"
        ]
    );
    let t = c.get("idle_test_period").unwrap();
    assert_eq!((t.line, t.value.as_str()), (14, "3000"));
    assert_eq!(
        c.get("preferred_test_query").unwrap().value,
        "SELECT 1 FROM DUAL"
    );
    let h = parse("application.properties").unwrap();
    assert_eq!(h.kind, PoolKind::Hikari);
    assert_eq!(
        h.get("maximumPoolSize").unwrap().value,
        "10",
        "kebab-case key"
    );
    assert_eq!(h.get("keepaliveTime"), None);
    let p = parse("pgbouncer.ini").unwrap();
    assert_eq!(p.kind, PoolKind::Pgbouncer);
    assert_eq!(p.get("server_check_delay").unwrap().line, 11);
    // Errors name the file and the line.
    let e = parse("broken.hibernate.cfg.xml").unwrap_err();
    assert_eq!((e.line, e.path.as_str()), (5, "broken.hibernate.cfg.xml"));
    assert!(
        e.to_string()
            .starts_with("broken.hibernate.cfg.xml:5: not well-formed XML"),
        "{e}"
    );
    let e = parse_pool_conf("pool.yaml", "a: 1").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("pool.yaml:0: not a pool configuration"),
        "{e}"
    );
    // An unclosed section: rust-ini reads to the end of the file looking for `]`.
    let e = parse_pool_conf("pgbouncer.ini", "[pgbouncer\nx=1\n").unwrap_err();
    assert!(
        e.to_string().starts_with("pgbouncer.ini:3: expecting"),
        "{e}"
    );
    let e = parse_pool_conf("app.properties", "server.port=8080\n").unwrap_err();
    assert!(e.to_string().contains("no c3p0.* or HikariCP key"), "{e}");
}

#[test]
fn kfree_skb_format_6_18() {
    use tpslab_proc::tracefs::parse_format;
    let f = parse_format(&fixture("linux-6.18/kfree_skb_format")).unwrap();
    assert_eq!((f.name.as_str(), f.id), ("kfree_skb", 2310));
    let r = f.field("reason").unwrap();
    assert_eq!(
        (r.offset, r.size, r.ty.as_str()),
        (36, 4, "enum skb_drop_reason")
    );
    assert_eq!(f.field("protocol").unwrap().offset, 32);
    let s = f.symbols("reason");
    assert_eq!(s.len(), 127);
    assert_eq!(s[0], (2, "NOT_SPECIFIED".to_string()));
    assert!(s.contains(&(6, "SOCKET_RCVBUFF".to_string())));
    assert!(s.contains(&(71, "CPU_BACKLOG".to_string())));
    assert_eq!(s.last().unwrap(), &(128, "MAX".to_string()));
    assert!(f.symbols("protocol").is_empty());
    assert_eq!(parse_format("garbage"), None);
}

/// /proc/net/netstat and the `Tcp:` line of /proc/net/snmp of this kernel: the TCP
/// counters by name.
#[test]
fn tcp_counters_6_18() {
    use tpslab_proc::netstat::{parse_pairs, TcpCounters};
    let n = parse_pairs(
        fixture("linux-6.18/netstat").as_bytes(),
        "/proc/net/netstat",
    )
    .unwrap();
    let s = parse_pairs(fixture("linux-6.18/snmp").as_bytes(), "/proc/net/snmp").unwrap();
    assert_eq!(n["IpExt.InOctets"], 939152098302);
    assert_eq!(s["Tcp.MaxConn"], -1);
    assert_eq!(s["Tcp.OutRsts"], 6);
    let c = TcpCounters::from_pairs(&s, &n);
    assert_eq!(
        c,
        TcpCounters {
            listen_overflows: 0,
            listen_drops: 0,
            backlog_drop: 0,
            rcvq_drop: 0,
            retrans_segs: 0,
            timeouts: 5,
        }
    );
}

/// `TcpExt: DelayedACKs` read from a namespace's root (here a folder holding this
/// kernel's /proc/net/netstat), and an unreadable root named in the error.
#[test]
fn delayed_acks_6_18() {
    let root = std::env::temp_dir().join(format!("tpslab-delack-{}", std::process::id()));
    std::fs::create_dir_all(root.join("net")).unwrap();
    std::fs::write(root.join("net/netstat"), fixture("linux-6.18/netstat")).unwrap();
    assert_eq!(tpslab_proc::live::delayed_acks(&root).unwrap(), 3429);
    // A root with no net/netstat (the file read above stays open in this thread).
    let e = tpslab_proc::live::delayed_acks(&root.join("gone"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("gone/net/netstat"), "{e}");
    std::fs::remove_dir_all(&root).unwrap();
}
