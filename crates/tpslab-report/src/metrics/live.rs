//! The families a live exporter (`--metrics-listen`) serves while a command runs: which
//! command serves them, and the observer's figures accumulated from the start, fixed in
//! size however long the run lasts.

use super::{drops, labels, latency_value, Family, Kind, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What `--metrics-listen` serves while a sweep runs: the runs `done` of `planned`, and
/// the last run's figures ([`super::of_run`]) labelled `cell` (its levels, `cpus=1 sched=other`).
pub fn sweep_progress(
    done: usize,
    planned: usize,
    cell: &str,
    rec: &tpslab_record::RunRecord,
) -> Vec<Family> {
    let mut fams = vec![
        Family::one(
            "tpslab_sweep_runs_done",
            "Runs of the sweep finished so far.",
            Kind::Gauge,
            vec![],
            Value::Int(done as u64),
        ),
        Family::one(
            "tpslab_sweep_runs_planned",
            "Runs the sweep's plan holds.",
            Kind::Gauge,
            vec![],
            Value::Int(planned as u64),
        ),
    ];
    for mut f in super::of_run(rec) {
        for (l, _) in &mut f.series {
            l.extend(labels(&[("cell", cell)]));
        }
        fams.push(f);
    }
    fams
}

/// `tpslab_up`-like: which command serves these figures, and its version.
pub fn exporter_info(command: &str, version: &str) -> Family {
    Family::one(
        "tpslab_exporter_info",
        "The tpslab command serving these figures, and its version.",
        Kind::Gauge,
        labels(&[("command", command), ("version", version)]),
        Value::Int(1),
    )
}

/// One observer sample's figures as the exporter reads them (the engine's live sample):
/// counts from the start of the command, the receive queue now, softnet drops per CPU
/// (when read at this sample), the interval's reply latencies.
#[derive(Debug, Clone, Copy)]
pub struct LiveReading<'a> {
    /// Datagrams the generator's kernel accepted (None: no generator).
    pub sent: Option<u64>,
    /// Datagrams the server's threads read (None: not counted).
    pub server_read: Option<u64>,
    /// Udp InDatagrams (+ Udp6) of the target's namespace.
    pub udp_in_datagrams: u64,
    /// Udp RcvbufErrors (+ Udp6) of the target's namespace.
    pub rcvbuf_errors: u64,
    /// Drops at the watched socket(s).
    pub socket_drops: u64,
    /// rx_queue of the watched socket(s), bytes.
    pub rx_queue_bytes: u64,
    /// (CPU, softnet drops since the start), when read at this sample.
    pub softnet_dropped_per_cpu: &'a [(u64, u64)],
    /// The latencies of the replies read in the interval, ns from the intended send time.
    pub latency_histogram: Option<&'a hdrhistogram::Histogram<u64>>,
    /// The server's threads (with a target process), when read at this sample (every
    /// 100 ms), else empty.
    pub threads: &'a [tpslab_analysis::waits::LiveThread],
    /// The kernel's drops by reason since the start (the kernel's names) and the drop
    /// samples lost, when read at this sample (every 100 ms, with a drop sampler running).
    pub drop_reasons: Option<(&'a [(String, u64)], u64)>,
    /// Each watched socket's drops since the start as (inode, local address, drops), when
    /// read at this sample (every 100 ms), else empty.
    pub socket_drops_by_socket: &'a [(u64, std::net::SocketAddr, u64)],
}

/// What a live exporter accumulates between samples: bounded however long it runs (its
/// sockets are the observer's tracked ones, at most 4,096: `observe::sockets::MAX_TRACKED`).
#[derive(Default)]
pub struct LiveState {
    samples: u64,
    /// softnet drops per CPU since the start (updated at the samples that read them).
    softnet: BTreeMap<u64, u64>,
    /// Every interval's latency histogram added up (ns from the intended send time).
    latency: Option<hdrhistogram::Histogram<u64>>,
    /// The server's threads by state letter at the last sample that read them (None
    /// before one did).
    thread_states: Option<BTreeMap<char, u64>>,
    /// The kernel's drops by reason and samples lost at the last sample that read them.
    drop_reasons: Option<(Vec<(String, u64)>, u64)>,
    /// The reasons with a series of their own: the first [`drops::MAX_REASONS`] seen.
    reasons_kept: BTreeSet<String>,
    /// Each watched socket's drops at the last sample that read them.
    sockets: Vec<drops::SocketDrops>,
    /// The sockets (inodes) with a series of their own: the first [`drops::MAX_SOCKETS`].
    sockets_kept: BTreeSet<u64>,
}

impl LiveState {
    /// Takes in one sample; returns the families scrapes see now.
    pub fn update(&mut self, s: &LiveReading<'_>) -> Vec<Family> {
        self.samples += 1;
        for &(cpu, d) in s.softnet_dropped_per_cpu {
            self.softnet.insert(cpu, d);
        }
        if !s.threads.is_empty() {
            // R, S and D always (0 when none), so a state emptied reads 0, not stale.
            let mut by: BTreeMap<char, u64> = ['R', 'S', 'D'].map(|c| (c, 0)).into();
            for t in s.threads {
                *by.entry(t.state).or_default() += 1;
            }
            self.thread_states = Some(by);
        }
        if let Some((by, lost)) = s.drop_reasons {
            drops::keep(&mut self.reasons_kept, by, drops::MAX_REASONS);
            self.drop_reasons = Some((by.to_vec(), lost));
        }
        if !s.socket_drops_by_socket.is_empty() {
            self.sockets = s
                .socket_drops_by_socket
                .iter()
                .map(|&(inode, local, n)| (format!("udp:{local}"), inode, n))
                .collect();
            let by: Vec<(u64, u64)> = self.sockets.iter().map(|s| (s.1, s.2)).collect();
            drops::keep(&mut self.sockets_kept, &by, drops::MAX_SOCKETS);
        }
        if let Some(h) = s.latency_histogram {
            let acc = self
                .latency
                .get_or_insert_with(tpslab_analysis::stats::new_ns_histogram);
            let _ = acc.add(h);
        }
        live_families(s, self)
    }
}

/// The help of the live `tpslab_latency_seconds` (`--metrics-listen` of every command: one
/// help for the name).
pub(super) const LATENCY_HELP: &str = "Latency of the replies read since the start, seconds from the send time `from` names: intended (no coordinated omission), or actual (a closed loop's: service time).";

fn counter(name: &str, help: &str, n: u64) -> Family {
    Family::one(name, help, Kind::Counter, vec![], Value::Int(n))
}

/// The families of the latest sample (counters from the start of the command).
fn live_families(s: &LiveReading<'_>, st: &LiveState) -> Vec<Family> {
    let mut f = vec![counter(
        "tpslab_observer_samples",
        "Observer samples taken since the command started.",
        st.samples,
    )];
    if let Some(n) = s.sent {
        f.push(counter(
            "tpslab_generator_sent_datagrams",
            "Datagrams the generator's kernel accepted since the start (its own count).",
            n,
        ));
    }
    if let Some(n) = s.server_read {
        f.push(counter(
            "tpslab_server_read_datagrams",
            "Datagrams the server's threads read since the start (tpslab's server's own count, or a foreign server's counted by tracepoints).",
            n,
        ));
    }
    f.push(counter(
        "tpslab_udp_in_datagrams",
        "Udp: InDatagrams + Udp6InDatagrams of the target's namespace since the start, read every 100 ms (node_netstat_Udp_InDatagrams).",
        s.udp_in_datagrams,
    ));
    f.push(counter(
        "tpslab_udp_rcvbuf_errors",
        "Udp: RcvbufErrors + Udp6RcvbufErrors of the target's namespace since the start, read every 100 ms (node_netstat_Udp_RcvbufErrors).",
        s.rcvbuf_errors,
    ));
    f.push(counter(
        "tpslab_socket_drops",
        "Drops at the watched socket(s) since the start, /proc/net/udp `drops` (per socket; node_exporter has no such series).",
        s.socket_drops,
    ));
    f.push(Family::one(
        "tpslab_socket_rx_queue_bytes",
        "rx_queue of the watched socket(s) now, bytes (truesize charged against SO_RCVBUF).",
        Kind::Gauge,
        vec![],
        Value::Int(s.rx_queue_bytes),
    ));
    if !st.softnet.is_empty() {
        f.push(Family {
            name: "tpslab_softnet_dropped".into(),
            help: "softnet backlog drops per CPU since the start, /proc/net/softnet_stat column 2, read every 100 ms (node_softnet_dropped_total).".into(),
            kind: Kind::Counter,
            series: st
                .softnet
                .iter()
                .map(|(cpu, d)| (labels(&[("cpu", &cpu.to_string())]), Value::Int(*d)))
                .collect(),
        });
    }
    f.extend(drops::socket_family(
        &st.sockets,
        &st.sockets_kept,
        &drops::LIVE,
    ));
    if let Some((by, lost)) = &st.drop_reasons {
        f.extend(drops::reason_families(
            by,
            *lost,
            &st.reasons_kept,
            &drops::LIVE,
        ));
    }
    if let Some(by) = &st.thread_states {
        f.push(Family {
            name: "tpslab_server_threads".into(),
            help: "The watched server's threads by state at the last sample that read them (every 100 ms), /proc/PID/task/TID/stat field 3: R running or runnable, S sleeping, D uninterruptible (disk), others as the kernel names them.".into(),
            kind: Kind::Gauge,
            series: by
                .iter()
                .map(|(c, n)| (labels(&[("state", &c.to_string())]), Value::Int(*n)))
                .collect(),
        });
    }
    if let Some(h) = &st.latency {
        f.push(Family::one(
            "tpslab_latency_seconds",
            LATENCY_HELP,
            Kind::Histogram,
            labels(&[("from", "intended")]),
            latency_value(h),
        ));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_counters_accumulate_across_samples() {
        let hist = |lat_ns: &[u64]| {
            let mut h = tpslab_analysis::stats::new_ns_histogram();
            for &v in lat_ns {
                h.record(v).unwrap();
            }
            h
        };
        let thread = |tid, state| tpslab_analysis::waits::LiveThread {
            tid,
            comm: "srv".into(),
            state,
            wait: None,
        };
        let threads = [
            thread(1, 'S'),
            thread(2, 'R'),
            thread(3, 'S'),
            thread(4, 't'),
        ];
        let reading = |sent, cpus: &'static [(u64, u64)], h| LiveReading {
            sent: Some(sent),
            server_read: None,
            udp_in_datagrams: sent,
            rcvbuf_errors: 7,
            socket_drops: 7,
            rx_queue_bytes: 4096,
            softnet_dropped_per_cpu: cpus,
            latency_histogram: h,
            threads: if sent == 100 { &threads } else { &[] },
            drop_reasons: None,
            socket_drops_by_socket: &[],
        };
        let mut st = LiveState::default();
        let (h1, h2) = (hist(&[20_000, 30_000]), hist(&[40_000]));
        st.update(&reading(100, &[(1, 3)], Some(&h1)));
        // A sample without the per-CPU reading keeps the last one; latency adds up.
        let f = st.update(&reading(250, &[], Some(&h2)));
        let om = super::super::openmetrics(&f);
        assert!(
            om.contains("tpslab_generator_sent_datagrams_total 250\n"),
            "{om}"
        );
        assert!(
            om.contains("tpslab_softnet_dropped_total{cpu=\"1\"} 3\n"),
            "{om}"
        );
        assert!(om.contains("tpslab_observer_samples_total 2\n"), "{om}");
        assert!(
            om.contains("tpslab_latency_seconds_bucket{le=\"+Inf\",from=\"intended\"} 3\n"),
            "{om}"
        );
        // 20 us in (10, 25 us]; 30 and 40 us above.
        assert!(
            om.contains("tpslab_latency_seconds_bucket{le=\"0.000025\",from=\"intended\"} 1\n"),
            "{om}"
        );
        assert!(
            om.contains("tpslab_latency_seconds_bucket{le=\"0.00005\",from=\"intended\"} 3\n"),
            "{om}"
        );
        // The threads read at the first sample only: kept, R/S/D always present.
        for line in [
            "tpslab_server_threads{state=\"D\"} 0\n",
            "tpslab_server_threads{state=\"R\"} 1\n",
            "tpslab_server_threads{state=\"S\"} 2\n",
            "tpslab_server_threads{state=\"t\"} 1\n",
        ] {
            assert!(om.contains(line), "{line}: {om}");
        }
        let info = super::super::openmetrics(&[exporter_info("watch", "0.1.0")]);
        assert!(
            info.contains("tpslab_exporter_info{command=\"watch\",version=\"0.1.0\"} 1\n"),
            "{info}"
        );
    }
}
