//! The live metrics endpoint (`--metrics-listen`): a thread answering scrapes (`GET
//! /metrics`, the Prometheus text format 0.0.4 or OpenMetrics as `Accept` asks) with the families last set, fed by a command's own
//! figures ([`Exporter::set`]) or its observer's samples ([`Exporter::sink`]). The
//! families and their encoding are the report layer's (`tpslab_report::metrics`); the
//! HTTP side, bounded in connections, bytes and time, is [`http`].

use anyhow::{Context, Result};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tpslab_engine::client::openloop::{HttpLiveSample, HttpLiveSink};
use tpslab_engine::observe::{LiveSample, LiveSink};
use tpslab_report::metrics::{
    Family, HttpLiveReading, HttpLiveState, LiveReading, LiveState, Shared,
};

pub mod http;

pub use http::listen;

/// A running metrics endpoint: a thread answering scrapes with what was last set, the
/// first family (the command's info) kept first. Stopped when dropped.
pub struct Exporter {
    shared: Shared,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Serves on `listener` (from [`listen`]) from a thread of its own, scrapes seeing
    /// `first` (the command's info family) until more is set. Returns once the thread
    /// serves. Errors: the thread could not start, or its epoll instance could not be made
    /// (`FLAG: ...`, `flag` naming the option that asked for the endpoint).
    pub fn serve(listener: TcpListener, first: Family, flag: &str) -> Result<Exporter> {
        let shared = Shared::default();
        shared.set(vec![first]);
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, st) = (shared.clone(), stop.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let handle = std::thread::Builder::new()
            .name("tpslab-metrics".into())
            .spawn(move || {
                // Built on its thread (an epoll instance's buffer is not Send); whether it
                // could be is said back before serve returns.
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
                server.run(&st, |format| {
                    let mut body = String::new();
                    let _ = prometheus_client::encoding::text::encode(&mut body, &registry);
                    format.from_openmetrics(body)
                })
            })
            .context("starting the metrics thread")?;
        ready_rx
            .recv()
            .context("the metrics thread ended before serving")?
            .with_context(|| flag.to_string())?;
        Ok(Exporter {
            shared,
            stop,
            handle: Some(handle),
        })
    }

    /// Replaces what scrapes see (the command's info family is kept first).
    pub fn set(&self, fams: Vec<Family>) {
        let command = self.shared.0.lock().unwrap_or_else(|e| e.into_inner())[0].clone();
        let mut all = vec![command];
        all.extend(fams);
        self.shared.set(all);
    }

    /// A live sink turning each observer sample into the families scrapes see (counts
    /// accumulated from the start: [`LiveState`]).
    pub fn sink(&self) -> LiveSink {
        let exporter = self.shared.clone();
        let state = Mutex::new(LiveState::default());
        LiveSink(Arc::new(move |s: &LiveSample| {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            let fams = st.update(&reading(s));
            let mut all = vec![exporter.0.lock().unwrap_or_else(|e| e.into_inner())[0].clone()];
            all.extend(fams);
            exporter.set(all);
        }))
    }

    /// A sink turning each interval of an open (or, `closed_loop`, closed) loop of HTTP
    /// requests into the families scrapes see (`load http`: counts accumulated from the
    /// start, [`HttpLiveState`]).
    pub fn http_sink(&self, closed_loop: bool) -> HttpLiveSink {
        let exporter = self.shared.clone();
        let state = Mutex::new(HttpLiveState::new(closed_loop));
        HttpLiveSink(Arc::new(move |s: &HttpLiveSample| {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            let fams = st.update(&HttpLiveReading {
                intended_rps: s.intended_rps,
                sent_rps: s.sent_rps,
                answered_rps: s.answered_rps,
                sent: s.sent,
                status: &s.status,
                errors: &s.errors,
                connect_errors: &s.connect_errors,
                in_flight: s.in_flight,
                connections: s.connections,
                latency_histogram: s.latency_histogram.as_ref(),
            });
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

/// An observer sample's figures as the report layer's live families read them.
fn reading(s: &LiveSample) -> LiveReading<'_> {
    LiveReading {
        sent: s.sent,
        server_read: s.server_read,
        udp_in_datagrams: s.udp_in_datagrams,
        rcvbuf_errors: s.rcvbuf_errors,
        socket_drops: s.socket_drops,
        rx_queue_bytes: s.rx_queue_bytes,
        softnet_dropped_per_cpu: &s.softnet_dropped_per_cpu,
        latency_histogram: s.latency_histogram.as_ref(),
        threads: &s.threads,
        drop_reasons: s
            .drop_reasons
            .as_ref()
            .map(|d| (d.by_reason.as_slice(), d.lost)),
        socket_drops_by_socket: &s.socket_drops_by_socket,
    }
}

/// Both sinks (a JSON stream and an exporter), either, or none.
pub fn both(a: Option<LiveSink>, b: Option<LiveSink>) -> Option<LiveSink> {
    match (a, b) {
        (Some(a), Some(b)) => Some(LiveSink(Arc::new(move |s: &LiveSample| {
            (a.0)(s);
            (b.0)(s);
        }))),
        (a, b) => a.or(b),
    }
}

/// Both HTTP sinks, either, or none.
pub fn both_http(a: Option<HttpLiveSink>, b: Option<HttpLiveSink>) -> Option<HttpLiveSink> {
    match (a, b) {
        (Some(a), Some(b)) => Some(HttpLiveSink(Arc::new(move |s: &HttpLiveSample| {
            (a.0)(s);
            (b.0)(s);
        }))),
        (a, b) => a.or(b),
    }
}

/// The warning line for a listening address other than loopback (a wildcard or a
/// host's), None for 127.0.0.0/8, ::1 and ::ffff:127.x.
pub fn exposure(addr: &SocketAddr) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_scrape_sees_the_info_first_then_what_was_set_and_the_samples() {
        use std::io::{Read, Write};
        let l = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let info = tpslab_report::metrics::exporter_info("test", "0");
        let e = Exporter::serve(l, info, "--metrics-listen").unwrap();
        let scrape = || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        };
        let first = scrape();
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(
            first.contains("tpslab_exporter_info{command=\"test\",version=\"0\"} 1\n"),
            "{first}"
        );
        let sink = e.sink();
        let mut h = tpslab_analysis::stats::new_ns_histogram();
        h.record(20_000).unwrap();
        (sink.0)(&LiveSample {
            t_ms: 10.0,
            interval_ms: 10.0,
            offered_pps: None,
            delivered_pps: None,
            socket_drops: 7,
            rcvbuf_errors: 7,
            softnet_drops: 0,
            rx_queue_bytes: 4096,
            latency: None,
            sent: Some(100),
            server_read: None,
            udp_in_datagrams: 100,
            softnet_dropped_per_cpu: vec![(1, 3)],
            latency_histogram: Some(h),
            rcvbuf_limit_bytes: Some(8192),
            threads: vec![],
            drop_reasons: Some(tpslab_engine::observe::dropwatch::LiveDropReasons {
                by_reason: vec![("SOCKET_RCVBUFF".into(), 7)],
                lost: 0,
            }),
            socket_drops_by_socket: vec![(4242, "127.0.0.1:5300".parse().unwrap(), 7)],
        });
        let live = scrape();
        assert!(live.contains("tpslab_exporter_info{"), "{live}");
        assert!(
            live.contains("tpslab_generator_sent_datagrams_total 100\n"),
            "{live}"
        );
        assert!(
            live.contains("tpslab_softnet_dropped_total{cpu=\"1\"} 3\n"),
            "{live}"
        );
        // The sample's drop reasons and per-socket drops reach the scrape.
        assert!(
            live.contains("tpslab_kernel_drops_total{reason=\"SOCKET_RCVBUFF\"} 7\n"),
            "{live}"
        );
        assert!(
            live.contains(
                "tpslab_target_socket_drops_total{socket=\"udp:127.0.0.1:5300\",inode=\"4242\"} 7\n"
            ),
            "{live}"
        );
        e.set(vec![]);
        let set = scrape();
        assert!(set.contains("tpslab_exporter_info{"), "{set}");
        assert!(!set.contains("tpslab_generator_sent"), "{set}");
    }
}
