//! Prometheus: `--metrics-listen ADDR:PORT` serves a command's figures in the OpenMetrics
//! text format while it runs (`GET /metrics`); `--metrics-file FILE` writes the record's
//! at the end in node_exporter's textfile-collector format (see `flags::RecordFlag`).
//! The families and their encoding are the report layer's (`tpslab_report::metrics`);
//! the endpoint's HTTP side, bounded in connections, bytes and time, is [`http`].

use anyhow::{anyhow, Context, Result};
use clap::Args;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tpslab_engine::observe::{LiveSample, LiveSink};
use tpslab_report::metrics::{labels, Family, Kind, Shared, Value};

mod http;

/// `--metrics-listen`, on the commands that run long enough to be scraped.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ListenFlag {
    /// Serve the figures in the OpenMetrics text format at http://ADDR:PORT/metrics while
    /// the command runs (for Prometheus to scrape), e.g. 127.0.0.1:9464. Plain HTTP without
    /// authentication: whoever reaches ADDR:PORT reads the figures; an address other than
    /// loopback (0.0.0.0, [::], a host's) is warned about on stderr.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) metrics_listen: Option<String>,
}

/// A running metrics endpoint: a thread answering scrapes with what was last set.
pub(crate) struct Exporter {
    shared: Shared,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl ListenFlag {
    /// Binds the endpoint now (before the run: a bad address or a port in use is an error
    /// up front); None without the flag.
    pub(crate) fn start(&self, command: &str) -> Result<Option<Exporter>> {
        let Some(a) = &self.metrics_listen else {
            return Ok(None);
        };
        let addr: SocketAddr = a.parse().map_err(|_| {
            anyhow!("--metrics-listen {a:?}: allowed ADDR:PORT, e.g. 127.0.0.1:9464")
        })?;
        let listener = http::listen(addr)
            .map_err(|e| anyhow!("--metrics-listen {a}: cannot listen there: {e}"))?;
        if let Some(w) = exposure(&addr) {
            eprintln!("{w}");
        }
        let addr = listener
            .local_addr()
            .context("--metrics-listen: the listener's address")?;
        let shared = Shared::default();
        shared.set(vec![info(command)]);
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, st) = (shared.clone(), stop.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let handle = std::thread::Builder::new()
            .name("tpslab-metrics".into())
            .spawn(move || {
                // Built on its thread (an epoll instance's buffer is not Send); whether it
                // could be is said back before start returns.
                let server = match http::Server::new(listener) {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let registry = tpslab_report::metrics::registry(sh);
                server.run(&st, || {
                    let mut body = String::new();
                    let _ = prometheus_client::encoding::text::encode(&mut body, &registry);
                    body
                })
            })
            .context("starting the metrics thread")?;
        ready_rx
            .recv()
            .context("the metrics thread ended before serving")?
            .context("--metrics-listen")?;
        eprintln!("tpslab: metrics at http://{addr}/metrics");
        Ok(Some(Exporter {
            shared,
            stop,
            handle: Some(handle),
        }))
    }
}

/// `tpslab_up`-like: which command serves these figures.
fn info(command: &str) -> Family {
    Family::one(
        "tpslab_exporter_info",
        "The tpslab command serving these figures, and its version.",
        Kind::Gauge,
        labels(&[("command", command), ("version", env!("CARGO_PKG_VERSION"))]),
        Value::Int(1),
    )
}

/// The warning line for a listening address other than loopback (a wildcard or a
/// host's), None for 127.0.0.0/8, ::1 and ::ffff:127.x.
fn exposure(addr: &SocketAddr) -> Option<String> {
    let ip = addr.ip().to_canonical();
    if ip.is_loopback() {
        return None;
    }
    let reach = if ip.is_unspecified() {
        "every interface"
    } else {
        "a non-loopback address"
    };
    Some(format!(
        "tpslab: warning: --metrics-listen {addr} is {reach}: the endpoint is plain HTTP without authentication, reachable from the network (127.0.0.1 or [::1] keeps it on this host)"
    ))
}

impl Exporter {
    /// Replaces what scrapes see (the command's info family is kept first).
    pub(crate) fn set(&self, fams: Vec<Family>) {
        let command = self.shared.0.lock().unwrap_or_else(|e| e.into_inner())[0].clone();
        let mut all = vec![command];
        all.extend(fams);
        self.shared.set(all);
    }

    /// A live sink turning each observer sample into the families scrapes see.
    pub(crate) fn sink(&self) -> LiveSink {
        let exporter = self.shared.clone();
        let state = Mutex::new(LiveState::default());
        LiveSink(Arc::new(move |s: &LiveSample| {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            let fams = st.update(s);
            let mut all = vec![exporter.0.lock().unwrap_or_else(|e| e.into_inner())[0].clone()];
            all.extend(fams);
            exporter.set(all);
        }))
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Both sinks (a JSON stream and an exporter), either, or none.
pub(crate) fn both(a: Option<LiveSink>, b: Option<LiveSink>) -> Option<LiveSink> {
    match (a, b) {
        (Some(a), Some(b)) => Some(LiveSink(Arc::new(move |s: &LiveSample| {
            (a.0)(s);
            (b.0)(s);
        }))),
        (a, b) => a.or(b),
    }
}

/// What a live exporter accumulates between samples: fixed size however long it runs.
#[derive(Default)]
struct LiveState {
    samples: u64,
    /// softnet drops per CPU since the start (updated at the samples that read them).
    softnet: BTreeMap<u64, u64>,
    /// Every interval's latency histogram added up (ns from the intended send time).
    latency: Option<hdrhistogram::Histogram<u64>>,
}

impl LiveState {
    fn update(&mut self, s: &LiveSample) -> Vec<Family> {
        self.samples += 1;
        for &(cpu, d) in &s.softnet_dropped_per_cpu {
            self.softnet.insert(cpu, d);
        }
        if let Some(h) = &s.latency_histogram {
            let acc = self
                .latency
                .get_or_insert_with(tpslab_analysis::stats::new_ns_histogram);
            let _ = acc.add(h);
        }
        live_families(s, self)
    }
}

fn counter(name: &str, help: &str, n: u64) -> Family {
    Family::one(name, help, Kind::Counter, vec![], Value::Int(n))
}

/// The families of the latest sample (counters from the start of the command).
fn live_families(s: &LiveSample, st: &LiveState) -> Vec<Family> {
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
    if let Some(h) = &st.latency {
        f.push(Family::one(
            "tpslab_latency_seconds",
            "Latency of the replies read since the start, seconds from the intended send time (no coordinated omission).",
            Kind::Histogram,
            labels(&[("from", "intended")]),
            tpslab_report::metrics::latency_value(h),
        ));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sent: u64, cpu1: u64, lat_ns: &[u64]) -> LiveSample {
        let mut h = tpslab_analysis::stats::new_ns_histogram();
        for &v in lat_ns {
            h.record(v).unwrap();
        }
        LiveSample {
            t_ms: 10.0,
            interval_ms: 10.0,
            offered_pps: None,
            delivered_pps: None,
            socket_drops: 7,
            rcvbuf_errors: 7,
            softnet_drops: cpu1,
            rx_queue_bytes: 4096,
            latency: None,
            sent: Some(sent),
            server_read: None,
            udp_in_datagrams: sent,
            softnet_dropped_per_cpu: if cpu1 > 0 { vec![(1, cpu1)] } else { vec![] },
            latency_histogram: (!lat_ns.is_empty()).then_some(h),
        }
    }

    #[test]
    fn only_loopback_listens_without_a_warning() {
        let w = |a: &str| exposure(&a.parse().unwrap());
        for quiet in [
            "127.0.0.1:9464",
            "127.8.9.1:1",
            "[::1]:9464",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert_eq!(w(quiet), None, "{quiet}");
        }
        let all = w("0.0.0.0:9464").unwrap();
        assert!(all.contains("0.0.0.0:9464 is every interface"), "{all}");
        assert!(all.contains("without authentication"), "{all}");
        assert!(!all.contains('\n'), "{all}");
        assert!(w("[::]:9464").unwrap().contains("every interface"));
        for host in ["10.1.2.3:9464", "[2001:db8::1]:9464", "[::ffff:10.0.0.1]:1"] {
            assert!(
                w(host).unwrap().contains("a non-loopback address"),
                "{host}"
            );
        }
    }

    #[test]
    fn live_counters_accumulate_across_samples() {
        let mut st = LiveState::default();
        st.update(&sample(100, 3, &[20_000, 30_000]));
        // A sample without the per-CPU reading keeps the last one; latency adds up.
        let f = st.update(&sample(250, 0, &[40_000]));
        let om = tpslab_report::metrics::openmetrics(&f);
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
    }
}
