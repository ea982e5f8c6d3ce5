//! From samples to the observer's report: series, summaries, counter deltas, sources.

use super::*;

/// Sources of the series and deltas, for `--explain` and the JSON record.
pub fn sources() -> BTreeMap<String, String> {
    [
        ("server_rx_queue_bytes", "/proc/PID/net/udp{,6} rx_queue of the target socket(s), summed (bytes charged: skb truesize)"),
        ("server_drops", "/proc/PID/net/udp{,6} drops of the target socket(s), summed"),
        ("gen_rx_queue_bytes", "getsockopt(SO_MEMINFO) SK_MEMINFO_RMEM_ALLOC of the generator's socket(s), summed (bytes charged: skb truesize; includes up to a quarter of SO_RCVBUF already read, which /proc's rx_queue leaves out)"),
        ("gen_drops", "getsockopt(SO_MEMINFO) SK_MEMINFO_DROPS of the generator's socket(s), summed"),
        ("udp_in_datagrams", "/proc/PID/net/snmp Udp: InDatagrams + snmp6 Udp6InDatagrams (datagrams read by applications)"),
        ("udp_rcvbuf_errors", "/proc/PID/net/snmp Udp: RcvbufErrors + snmp6 Udp6RcvbufErrors"),
        ("udp_in_errors", "/proc/PID/net/snmp Udp: InErrors + Udp6InErrors"),
        ("udp_no_ports", "/proc/PID/net/snmp Udp: NoPorts + Udp6NoPorts"),
        ("udp_out_datagrams", "/proc/PID/net/snmp Udp: OutDatagrams + Udp6OutDatagrams"),
        ("udp_sndbuf_errors", "/proc/PID/net/snmp Udp: SndbufErrors + Udp6SndbufErrors"),
        ("udp_mem_errors", "/proc/PID/net/snmp Udp: MemErrors + Udp6MemErrors"),
        ("udp_in_csum_errors", "/proc/PID/net/snmp Udp: InCsumErrors + Udp6InCsumErrors"),
        ("softnet_dropped", "/proc/net/softnet_stat column 2, all CPUs (host-wide)"),
        ("tcp_rx_queue_bytes", "/proc/PID/net/tcp{,6} rx_queue of the process's connected TCP sockets, summed, every 100 ms"),
        ("tcp_tx_queue_bytes", "/proc/PID/net/tcp{,6} tx_queue of the process's connected TCP sockets, summed, every 100 ms"),
        ("tcp_listen_overflows", "/proc/PID/net/netstat TcpExt: ListenOverflows of the process's network namespace (every socket in it), every 100 ms: connection requests dropped at a full accept queue"),
        ("tcp_listen_drops", "/proc/PID/net/netstat TcpExt: ListenDrops of the process's network namespace: connection requests a listener dropped for any reason"),
        ("tcp_backlog_drop", "/proc/PID/net/netstat TcpExt: TCPBacklogDrop of the process's network namespace: segments dropped at a full socket backlog"),
        ("tcp_rcvq_drop", "/proc/PID/net/netstat TcpExt: TCPRcvQDrop of the process's network namespace: segments dropped at a receive queue over its memory limit"),
        ("tcp_retrans_segs", "/proc/PID/net/snmp Tcp: RetransSegs of the process's network namespace, every 100 ms"),
        ("tcp_timeouts", "/proc/PID/net/netstat TcpExt: TCPTimeouts of the process's network namespace: retransmission timer expiries"),
        ("tcp_accept_queue", "/proc/PID/net/tcp{,6} rx_queue of the process's listening TCP sockets (connections waiting for accept), every 100 ms"),
        ("softnet_processed", "/proc/net/softnet_stat column 1, all CPUs (host-wide)"),
        ("softnet_time_squeeze", "/proc/net/softnet_stat column 3, all CPUs (host-wide)"),
        ("dev_rx_drop", "/proc/PID/net/dev rx drop, all interfaces"),
        ("dev_tx_drop", "/proc/PID/net/dev tx drop, all interfaces"),
        ("ctxt", "/proc/stat ctxt (system-wide context switches)"),
        ("target_vol_ctxt", "/proc/PID/task/TID/status voluntary_ctxt_switches, target threads"),
        ("target_invol_ctxt", "/proc/PID/task/TID/status nonvoluntary_ctxt_switches, target threads"),
        ("target_cpu_pct", "/proc/PID/task/TID/schedstat run time, target threads, % of one CPU"),
        ("target_runq_wait_pct", "/proc/PID/task/TID/schedstat run-queue wait (runnable, no CPU), target threads, % of one CPU"),
        ("cpuN_busy_pct", "/proc/stat cpuN: (total - idle - iowait) / total"),
        ("softnet_cpuN_dropped", "/proc/net/softnet_stat row of CPU N (column 13, else row order): column 2"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The observer's report from its samples: series, their summaries, counter deltas over
/// the run and CPU shares per core, with the source of every figure.
pub(super) fn build_report(
    raws: &[Raw],
    interval: Duration,
    errors: Vec<String>,
    sched: Vec<String>,
) -> ObserverReport {
    let series = series(raws);
    let summaries = series
        .values
        .iter()
        .map(|(k, v)| (k.clone(), tpslab_analysis::stats::summary(v)))
        .collect();
    let (deltas, cpu_pct) = match (raws.first(), raws.last()) {
        (Some(a), Some(b)) => deltas(a, b),
        _ => Default::default(),
    };
    ObserverReport {
        interval_ms: interval.as_secs_f64() * 1e3,
        samples: raws.len(),
        sources: sources(),
        series,
        summaries,
        deltas,
        cpu_pct,
        target_sched: sched,
        target_rcvbuf_bytes: vec![],
        target_sockets: vec![],
        target_reader_threads: None,
        thread_waits: None,
        tcp_listen: None,
        notes: vec![],
        errors,
    }
}

/// The time series: queues at every sample; per-socket rates between samples; host-wide
/// rates over the slow interval containing each sample.
fn series(raws: &[Raw]) -> Series {
    let mut series = Series::default();
    let t0 = raws.first().map_or(0, |r| r.t_ns);
    let mut push = |name: &str, v: f64| series.values.entry(name.to_string()).or_default().push(v);
    // Host-wide counters were read only in slow samples: the rate of sample i is that of
    // the slow interval containing it (a step function at the slow resolution).
    let slow: Vec<usize> = (0..raws.len()).filter(|&i| raws[i].slow).collect();
    let bracket = |i: usize| -> (usize, usize) {
        let k = slow.partition_point(|&s| s < i);
        let b = slow.get(k).copied().unwrap_or(raws.len() - 1);
        let mut a = if k == 0 { 0 } else { slow[k - 1] };
        // The final sample is forced: a last interval much shorter than the slow period
        // would turn tick-sized counters (CPU time) into absurd rates; merge it.
        let short = raws[b].t_ns.saturating_sub(raws[a].t_ns) < SLOW_NS / 2;
        if b == raws.len() - 1 && short && k >= 2 {
            a = slow[k - 2];
        }
        (a, b)
    };
    let tcp = raws.iter().any(|r| r.tcp_sockets > 0);
    for (i, r) in raws.iter().enumerate() {
        push("server_rx_queue_bytes", r.srv_rxq as f64);
        push("gen_rx_queue_bytes", r.gen_rxq as f64);
        if tcp {
            push("tcp_rx_queue_bytes", r.tcp_rxq as f64);
            push("tcp_tx_queue_bytes", r.tcp_txq as f64);
            push("tcp_accept_queue", r.tcp_listen_rxq as f64);
        }
        if i == 0 {
            continue;
        }
        let p = &raws[i - 1];
        let dt = (r.t_ns.saturating_sub(p.t_ns) as f64 / 1e9).max(1e-9);
        let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
        push("server_drops_per_s", rate(r.srv_drops, p.srv_drops));
        if let (Some(a), Some(b)) = (p.io, r.io) {
            push("server_reads_per_s", rate(b.read, a.read));
        }
        if let (Some(a), Some(b)) = (p.gen_sent, r.gen_sent) {
            push("gen_sent_per_s", rate(b, a));
        }
        let (a, b) = bracket(i);
        let (ra, rb) = (&raws[a], &raws[b]);
        let sdt = (rb.t_ns.saturating_sub(ra.t_ns) as f64 / 1e9).max(1e-9);
        let srate = |x: u64, y: u64| y.saturating_sub(x) as f64 / sdt;
        push(
            "udp_in_datagrams_per_s",
            srate(ra.udp.in_datagrams, rb.udp.in_datagrams),
        );
        push(
            "udp_rcvbuf_errors_per_s",
            srate(ra.udp.rcvbuf_errors, rb.udp.rcvbuf_errors),
        );
        push(
            "softnet_dropped_per_s",
            srate(ra.softnet_dropped, rb.softnet_dropped),
        );
        push("ctxt_per_s", srate(ra.stat.ctxt, rb.stat.ctxt));
        push("target_vol_ctxt_per_s", srate(ra.task_vol, rb.task_vol));
        push(
            "target_invol_ctxt_per_s",
            srate(ra.task_invol, rb.task_invol),
        );
        if let (Some(x), Some(y)) = (ra.tcp_ext, rb.tcp_ext) {
            push(
                "tcp_listen_overflows_per_s",
                srate(x.listen_overflows, y.listen_overflows),
            );
            push(
                "tcp_retrans_segs_per_s",
                srate(x.retrans_segs, y.retrans_segs),
            );
        }
        push(
            "target_cpu_pct",
            100.0 * rb.task_run_ns.saturating_sub(ra.task_run_ns) as f64 / 1e9 / sdt,
        );
        push(
            "target_runq_wait_pct",
            100.0 * rb.task_wait_ns.saturating_sub(ra.task_wait_ns) as f64 / 1e9 / sdt,
        );
    }
    // Rates start at the second sample; the queue series start at the first.
    series.t_ms = raws.iter().map(|r| (r.t_ns - t0) as f64 / 1e6).collect();
    series
}

/// Per-CPU shares of time (user, system, softirq, busy), percent.
type CpuShares = BTreeMap<String, BTreeMap<String, f64>>;

/// Counter deltas from the first sample `a` to the last `b`, and each CPU's shares.
fn deltas(a: &Raw, b: &Raw) -> (BTreeMap<String, u64>, CpuShares) {
    let mut deltas = BTreeMap::new();
    let mut cpu_pct = BTreeMap::new();
    let d = |x: u64, y: u64| y.saturating_sub(x);
    for (k, v) in [
        ("server_drops", d(a.srv_drops, b.srv_drops)),
        ("gen_drops", d(a.gen_drops, b.gen_drops)),
        (
            "udp_in_datagrams",
            d(a.udp.in_datagrams, b.udp.in_datagrams),
        ),
        (
            "udp_out_datagrams",
            d(a.udp.out_datagrams, b.udp.out_datagrams),
        ),
        (
            "udp_rcvbuf_errors",
            d(a.udp.rcvbuf_errors, b.udp.rcvbuf_errors),
        ),
        (
            "udp_sndbuf_errors",
            d(a.udp.sndbuf_errors, b.udp.sndbuf_errors),
        ),
        ("udp_in_errors", d(a.udp.in_errors, b.udp.in_errors)),
        ("udp_no_ports", d(a.udp.no_ports, b.udp.no_ports)),
        ("udp_mem_errors", d(a.udp.mem_errors, b.udp.mem_errors)),
        (
            "udp_in_csum_errors",
            d(a.udp.in_csum_errors, b.udp.in_csum_errors),
        ),
        ("softnet_dropped", d(a.softnet_dropped, b.softnet_dropped)),
        (
            "softnet_processed",
            d(a.softnet_processed, b.softnet_processed),
        ),
        (
            "softnet_time_squeeze",
            d(a.softnet_squeeze, b.softnet_squeeze),
        ),
        ("dev_rx_drop", d(a.dev_rx_drop, b.dev_rx_drop)),
        ("dev_tx_drop", d(a.dev_tx_drop, b.dev_tx_drop)),
        ("ctxt", d(a.stat.ctxt, b.stat.ctxt)),
        ("target_vol_ctxt", d(a.task_vol, b.task_vol)),
        ("target_invol_ctxt", d(a.task_invol, b.task_invol)),
        ("target_run_ns", d(a.task_run_ns, b.task_run_ns)),
        ("target_runq_wait_ns", d(a.task_wait_ns, b.task_wait_ns)),
        ("server_sockets_found", b.srv_sockets as u64),
        ("tcp_sockets_found", b.tcp_sockets as u64),
    ] {
        deltas.insert(k.to_string(), v);
    }
    if let (Some(x), Some(y)) = (a.tcp_ext, b.tcp_ext) {
        let t = y.since(&x);
        for (k, v) in [
            ("tcp_listen_overflows", t.listen_overflows),
            ("tcp_listen_drops", t.listen_drops),
            ("tcp_backlog_drop", t.backlog_drop),
            ("tcp_rcvq_drop", t.rcvq_drop),
            ("tcp_retrans_segs", t.retrans_segs),
            ("tcp_timeouts", t.timeouts),
        ] {
            deltas.insert(k.to_string(), v);
        }
    }
    if let (Some(x), Some(y)) = (a.io, b.io) {
        deltas.insert("server_io_read".into(), d(x.read, y.read));
        deltas.insert("server_io_sent".into(), d(x.sent, y.sent));
        deltas.insert(
            "server_io_send_failed".into(),
            d(x.send_failed, y.send_failed),
        );
    }
    for (x, y) in a.softnet_per_cpu.iter().zip(&b.softnet_per_cpu) {
        let cpu = x.0;
        deltas.insert(format!("softnet_cpu{cpu}_processed"), d(x.1, y.1));
        deltas.insert(format!("softnet_cpu{cpu}_dropped"), d(x.2, y.2));
        deltas.insert(format!("softnet_cpu{cpu}_time_squeeze"), d(x.3, y.3));
    }
    for ((cpu, ta), (_, tb)) in a.stat.per_cpu.iter().zip(b.stat.per_cpu.iter()) {
        let total = tb.total().saturating_sub(ta.total()).max(1) as f64;
        // At most 100: each column is clamped at 0 on its own, and a CPU's idle and
        // iowait may go backwards (proc(5)), so a part could exceed the whole.
        let pct = |x: u64, y: u64| (100.0 * y.saturating_sub(x) as f64 / total).min(100.0);
        let mut m = BTreeMap::new();
        m.insert(
            "user".to_string(),
            pct(ta.user + ta.nice, tb.user + tb.nice),
        );
        m.insert("system".to_string(), pct(ta.system, tb.system));
        m.insert(
            "softirq".to_string(),
            pct(ta.softirq + ta.irq, tb.softirq + tb.irq),
        );
        m.insert("busy".to_string(), pct(ta.busy(), tb.busy()));
        cpu_pct.insert(format!("cpu{cpu}"), m);
    }
    (deltas, cpu_pct)
}
