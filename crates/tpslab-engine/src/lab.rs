//! One UDP run: optional in-process reference server, observer and generator, composed
//! into a run record with a ledger.

use crate::load::{LoadConfig, UdpLoad};
use crate::observe::{Observer, ObserverConfig};
use crate::server::{Mode, ServerConfig, UdpServer};
use crate::EngineError;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;
use tpslab_analysis::record::{GeneratorReport, ObserverReport, RunRecord, ServerReport, SCHEMA};
use tpslab_analysis::{Ledger, LedgerInputs};
use tpslab_net::mono_ns;

/// A UDP run.
#[derive(Debug, Clone)]
pub struct UdpRunPlan {
    /// Our server, started in this process (None: the target is someone else's).
    pub server: Option<ServerConfig>,
    /// The load (its target is replaced by the server's address when the server is ours).
    pub load: LoadConfig,
    /// Observer sampling interval.
    pub interval: Duration,
    /// A foreign target's process, for its network namespace, sockets and threads.
    pub target_pid: Option<u32>,
    /// Local port of the target's socket(s), when it differs from the target's port.
    pub watch_port: Option<u16>,
}

/// Everything a run produced.
pub struct UdpRunOutcome {
    /// The record, ready for JSON.
    pub record: RunRecord,
}

/// Waits until the server has read nothing new for 60 ms (its queue is empty), at most 5 s.
fn wait_server_quiet(server: &UdpServer) {
    let deadline = mono_ns() + 5_000_000_000;
    let mut last = server.received();
    while mono_ns() < deadline {
        std::thread::sleep(Duration::from_millis(60));
        let now = server.received();
        if now == last {
            return;
        }
        last = now;
    }
}

/// Runs the plan. `stop` (set by SIGINT/SIGTERM) ends the load early; the record is still
/// complete and marked interrupted.
pub fn run_udp(mut plan: UdpRunPlan, stop: &AtomicBool) -> Result<RunRecord, EngineError> {
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let t0 = mono_ns();
    let server = match &plan.server {
        Some(cfg) => {
            let s = UdpServer::start(cfg.clone())?;
            plan.load.target = s.local_addr();
            Some(s)
        }
        None => None,
    };
    let load = UdpLoad::prepare(plan.load.clone())?;
    let own_pid = std::process::id();
    let obs_cfg = ObserverConfig {
        interval: plan.interval,
        net_root: match (server.is_some(), plan.target_pid) {
            (false, Some(pid)) => PathBuf::from(format!("/proc/{pid}")),
            _ => PathBuf::from("/proc/self"),
        },
        target_inodes: server
            .as_ref()
            .map(|s| s.socket_inodes().to_vec())
            .unwrap_or_default(),
        target_port: Some(plan.watch_port.unwrap_or(plan.load.target.port())),
        gen_inodes: load.socket_inodes(),
        target_pid: if server.is_some() {
            Some(own_pid)
        } else {
            plan.target_pid
        },
        target_tids: server
            .as_ref()
            .map(|s| s.tids().to_vec())
            .unwrap_or_default(),
    };
    let observer = Observer::start(obs_cfg);
    let gen = load.run(stop).report;
    if let Some(s) = &server {
        wait_server_quiet(s);
    }
    let obs = observer.stop();
    let srv = server.map(|s| s.stop());
    let same_ns = plan
        .target_pid
        .is_none_or(|p| crate::env::netns(Some(p)) == crate::env::netns(None));
    let mut notes = vec![];
    let (ledger, gen) = build_ledger(&plan, gen, srv.as_ref(), &obs, same_ns, &mut notes);
    let plan_json = serde_json::json!({
        "kind": "udp",
        "server": plan.server,
        "load": {
            "target": plan.load.target.to_string(),
            "rate_pps": plan.load.rate_pps,
            "size_bytes": plan.load.datagram_len(),
            "duration_s": plan.load.duration.as_secs_f64(),
            "warmup_s": plan.load.warmup.as_secs_f64(),
            "burst": plan.load.burst,
            "burst_interval_ns": plan.load.burst_interval_ns(),
            "threads": plan.load.threads,
            "payload_file_bytes": plan.load.payload.as_ref().map(|p| p.len()),
            "seq_field": plan.load.seq_field,
            "expect_replies": plan.load.expect_replies,
            "drain_s": plan.load.drain.as_secs_f64(),
            "run_id": plan.load.run_id,
        },
        "interval_ms": plan.interval.as_secs_f64() * 1e3,
        "target_pid": plan.target_pid,
    });
    Ok(RunRecord {
        schema: SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        argv: std::env::args().collect(),
        started_unix_ms,
        elapsed_s: (mono_ns() - t0) as f64 / 1e9,
        interrupted: stop.load(Relaxed),
        plan: plan_json,
        environment: crate::env::environment(),
        server: srv,
        generator: Some(gen),
        observer: Some(obs),
        ledger: Some(ledger),
        notes,
    })
}

fn build_ledger(
    plan: &UdpRunPlan,
    mut gen: GeneratorReport,
    srv: Option<&ServerReport>,
    obs: &ObserverReport,
    same_ns: bool,
    notes: &mut Vec<String>,
) -> (Ledger, GeneratorReport) {
    let d = |k: &str| obs.deltas.get(k).copied().unwrap_or(0);
    let found = d("server_sockets_found") > 0;
    let replies_expected =
        plan.load.expect_replies && srv.is_none_or(|s| s.mode != Mode::Sink.to_string());
    let (server_read, reply_attempted, reply_failed, source) = match srv {
        Some(s) => (
            Some(s.received),
            Some(s.answered + s.reply_failed),
            Some(s.reply_failed),
            "tpslab server's own counts".to_string(),
        ),
        None if found => {
            // Namespace-wide counters, minus the generator's own traffic when it shares the
            // namespace: exact only when nothing else uses UDP there.
            let (own_in, own_out) = if same_ns {
                (gen.replies_read, gen.sent)
            } else {
                (0, 0)
            };
            notes.push(
                "server counts derived from Udp: InDatagrams/OutDatagrams of the target's network \
                 namespace minus the generator's own; exact only when no other UDP traffic \
                 shares that namespace"
                    .into(),
            );
            let read = d("udp_in_datagrams").saturating_sub(own_in);
            let out = d("udp_out_datagrams").saturating_sub(own_out);
            (
                Some(read),
                Some(out + d("udp_sndbuf_errors")),
                Some(d("udp_sndbuf_errors")),
                "derived: Udp InDatagrams / OutDatagrams / SndbufErrors deltas minus the generator's".to_string(),
            )
        }
        // No socket on the port: nothing can have been read or answered there.
        None => (
            Some(0),
            Some(0),
            Some(0),
            "no socket on the target port".to_string(),
        ),
    };
    if !found {
        notes.push(format!(
            "no socket of the target found on port {} in {}: counted as no listener (pass --pid if the server runs in another network namespace)",
            plan.load.target.port(),
            if plan.target_pid.is_some() {
                "the target's namespace"
            } else {
                "this namespace"
            }
        ));
    }
    let inputs = LedgerInputs {
        gen_attempted: gen.attempted,
        gen_send_failed: gen.send_failed,
        server_socket_drops: Some(d("server_drops")),
        gen_socket_drops: d("gen_drops"),
        softnet_drops: d("softnet_dropped"),
        nic_rx_drops: d("dev_rx_drop"),
        no_ports: d("udp_no_ports"),
        server_read,
        server_reply_attempted: reply_attempted,
        server_reply_failed: reply_failed,
        server_counts_source: source,
        gen_read: gen.replies_read,
        replies_expected,
    };
    if inputs.gen_socket_drops > 0 {
        gen.invalid_reasons.push(format!(
            "the generator's own sockets dropped {} replies (/proc/net/udp drops): reply loss is the tool's",
            inputs.gen_socket_drops
        ));
        gen.valid = false;
    }
    (Ledger::build(&inputs), gen)
}
