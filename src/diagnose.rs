//! `tpslab diagnose`: probe, run, verdict, recommendation, verification run.

use crate::flags::{self, LoadFlags};
use crate::out;
use crate::rerun::{cannot_restart, rerun_argv, sh_line};
use crate::server_proc::ServerProcess;
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;
use tpslab_analysis::prelude::*;
use tpslab_analysis::record::{Body, DiagnoseRecord, NotVerified, Record, RunRecord};
use tpslab_analysis::verdict::{diagnose, Facts, Fix};
use tpslab_engine::guard::HostGuard;
use tpslab_engine::load::LoadConfig;
use tpslab_engine::probe::probe_truesize;
use tpslab_engine::server::ServerConfig;
use tpslab_engine::udp_run::{run_udp, UdpRunPlan};
use tpslab_net::sched::SchedPolicy;

#[derive(Args, Debug)]
pub(crate) struct DiagnoseArgs {
    #[command(subcommand)]
    pub(crate) target: Option<DiagProto>,
    /// Apply the recommendation for a second run and show before/after (default for the
    /// built-in scenario; host sysctls are journaled and always restored).
    #[arg(long, global = true)]
    pub(crate) verify: bool,
    /// Built-in scenario: diagnose only, no verification run.
    #[arg(long, global = true)]
    pub(crate) no_verify: bool,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, global = true, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) interval: Duration,
    /// Write the diagnosis with the full run records (JSON, schema tpslab.record/2, kind diagnose).
    #[arg(long, global = true)]
    pub(crate) json: Option<PathBuf>,
    /// Also write the diagnosis as one self-contained HTML page to FILE: the verdict,
    /// then before and after side by side on the same axes.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
    /// Also write the figures of the last run (after the fix, when there was one) to FILE
    /// in Prometheus' text format, for node_exporter's textfile collector.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) metrics_file: Option<PathBuf>,
    /// Do not append this diagnosis to the history (`tpslab history`).
    #[arg(long, global = true)]
    pub(crate) no_history: bool,
    /// Show the source counter of every figure.
    #[arg(long, global = true)]
    pub(crate) explain: bool,
    /// Exit 1 when the first run ("as is") meets one of these, comma-separated:
    /// 'loss>PCT%', invalid, errors. Quote it, e.g. --fail-on 'loss>1%': unquoted, the shell
    /// reads > as a redirection.
    #[arg(long, global = true, value_name = "CONDITIONS")]
    pub(crate) fail_on: Option<String>,
    /// Exit 3 when the first run is not valid evidence (RUN INVALID).
    #[arg(long, global = true)]
    pub(crate) strict: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum DiagProto {
    /// A UDP server on this host (yours, found by --pid or its port).
    Udp(DiagUdpArgs),
}

#[derive(Args, Debug)]
pub(crate) struct DiagUdpArgs {
    /// Server address, HOST:PORT (not with --server-cmd).
    pub(crate) target: Option<String>,
    /// Start the user's server for each run: a shell command with {port} (e.g.
    /// 'cd srv && java UdpServer.java {port}'), run by `sh -c` as its own process group
    /// that is stopped after the run and dies with tpslab; the group's process owning the
    /// UDP socket on the port is the server watched; with --verify the
    /// recommended host sysctls are applied before it starts again, so the fix is proven
    /// on the user's own server.
    #[arg(long)]
    pub(crate) server_cmd: Option<String>,
    #[command(flatten)]
    pub(crate) load: LoadFlags,
    /// Sender threads (one socket each).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// PID of the server: its network namespace, sockets and threads are watched, and
    /// (root, kernel 6.4+) the UDP datagrams its threads read and send are counted exactly.
    #[arg(long)]
    pub(crate) pid: Option<u32>,
    /// Local port of the server's socket, when it differs from TARGET's port.
    #[arg(long)]
    pub(crate) port: Option<u16>,
}

/// S1's mean rate where the host can drain it (datagrams per second).
const S1_RATE_PPS: f64 = 100_000.0;
/// S1's bursts are this far apart.
const S1_BURST_INTERVAL: Duration = Duration::from_millis(50);

/// The built-in S1 scenario: the reference server as S1's (one thread, default buffer,
/// find-and-replace on 1024-byte messages) under bursts every 50 ms at `rate_pps` mean
/// (S1's 100 k pps where the host drains it, see [`calibrate_s1`]): a mean rate it
/// drains, bursts the default buffer cannot hold.
fn s1_plan(interval: Duration, rate_pps: f64) -> UdpRunPlan {
    UdpRunPlan {
        server: Some(ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            ..ServerConfig::default()
        }),
        load: LoadConfig {
            target: "127.0.0.1:0".parse().unwrap(),
            rate_pps,
            size_bytes: 1024,
            duration: Duration::from_secs(3),
            warmup: Duration::from_millis(500),
            burst: (rate_pps * S1_BURST_INTERVAL.as_secs_f64()).round() as u64,
            threads: 1,
            payload: None,
            seq_field: None,
            expect_replies: true,
            drain: Duration::from_millis(500),
            run_id: tpslab_net::mono_ns(),
            cpus: vec![],
            gso: false,
            pacing_slack: Duration::ZERO,

            phase: Duration::ZERO,

            keep_histograms: false,
        },
        interval,
        target_pid: None,
        watch_port: None,
        no_drop_reasons: false,
    }
}

fn run_secs(p: &UdpRunPlan) -> f64 {
    (p.load.warmup + p.load.duration).as_secs_f64()
}

/// Applies a fix to a plan: our server through its flags; host sysctls only where they
/// take effect and a flag cannot do it. Returns the sysctls to set, a description of each
/// change, and the sysctls (`KEY=VALUE`) that could not be applied: socket-level ones for
/// a server tpslab did not start and cannot restart.
fn apply_fix(
    plan: &mut UdpRunPlan,
    fix: &Fix,
    restartable: bool,
) -> (Vec<(String, String)>, Vec<String>, Vec<String>) {
    let mut applied = vec![];
    let mut sysctls = vec![];
    let mut skipped = vec![];
    let ours = plan.server.is_some();
    if let Some(srv) = plan.server.as_mut() {
        if let Some(r) = fix.rcvbuf {
            srv.rcvbuf = Some(r);
            applied.push(format!("server --rcvbuf {r}"));
        }
        if let Some(t) = fix.threads {
            srv.threads = t;
            applied.push(format!("server --threads {t}"));
            // SO_REUSEPORT spreads by flow: at least one sender flow per server thread.
            if plan.load.threads < t {
                plan.load.threads = t;
                applied.push(format!("the same mean load spread over {t} sender flows"));
            }
        }
        if let Some(b) = fix.batch {
            srv.batch = b;
            applied.push(format!("server --batch {b}"));
        }
    }
    for (k, v) in &fix.sysctls {
        let socket_level = k == "net.core.rmem_max" || k == "net.core.rmem_default";
        if socket_level && !ours && !restartable {
            // Reaches only sockets created after the change: the server must restart.
            skipped.push(format!("{k}={v}"));
        } else if ours && socket_level && (tpslab_net::is_root() || k == "net.core.rmem_default") {
            // Our server asks for its buffer itself (SO_RCVBUFFORCE as root): no host-wide
            // change needed; rmem_default would only enlarge every other socket.
        } else {
            sysctls.push((k.clone(), v.clone()));
        }
    }
    for (k, v) in &sysctls {
        applied.push(format!("sysctl {k}={v} (host-wide; restored afterwards)"));
    }
    if restartable && !ours && !sysctls.is_empty() {
        applied.push("the server started again after the change (--server-cmd)".into());
    }
    (sysctls, applied, skipped)
}

/// The first run's plan, the scenario in words, and whether to verify a fix: the built-in
/// S1, or the user's server (at HOST:PORT, or started from `--server-cmd`).
fn plan(a: &DiagnoseArgs) -> Result<(UdpRunPlan, String, bool)> {
    Ok(match &a.target {
        // Scenario words and the rate come from `calibrate_s1`.
        None => (
            s1_plan(a.interval, S1_RATE_PPS),
            String::new(),
            !a.no_verify,
        ),
        Some(DiagProto::Udp(u)) => {
            let target = match (&u.target, &u.server_cmd) {
                (Some(t), None) => out::resolve(t)?,
                (None, Some(cmd)) => {
                    if !cmd.contains("{port}") {
                        bail!("--server-cmd \"{cmd}\": must contain {{port}}, where tpslab puts the port to listen on");
                    }
                    if u.pid.is_some() || u.port.is_some() {
                        bail!("--server-cmd starts the server itself: --pid and --port do not apply");
                    }
                    // Replaced by the port the started server listens on.
                    "127.0.0.1:0".parse().unwrap()
                }
                (Some(_), Some(_)) => bail!(
                    "diagnose udp: give HOST:PORT of a running server, or --server-cmd to start one, not both"
                ),
                (None, None) => bail!(
                    "diagnose udp: give HOST:PORT of the server (with --pid PID), or --server-cmd 'COMMAND {{port}}'"
                ),
            };
            if let Some(pid) = u.pid {
                out::check_pid(pid)?;
            }
            let load = flags::load_config(&u.load, u.threads, "--threads", target)?;
            (
                UdpRunPlan {
                    server: None,
                    load,
                    interval: a.interval,
                    target_pid: u.pid,
                    watch_port: u.port,
                    no_drop_reasons: false,
                },
                match &u.server_cmd {
                    Some(cmd) => format!("UDP server started by tpslab: {cmd}"),
                    None => format!("UDP server at {target}"),
                },
                a.verify,
            )
        }
    })
}

/// S1's premise is a mean rate the server drains, bursts its buffer cannot hold. On a
/// host where the generator and the reference server together answer fewer than twice
/// S1's 100 k pps, the built-in scenario's mean is half of what they answer at full
/// speed (TPS of a 0.4 s run at `--rate max`, the same server and datagrams), rounded
/// down to 1000 pps, at least 10 k pps; bursts stay 50 ms apart. Returns the plan, the
/// scenario in words, and a note on the calibration when it lowered the rate.
fn calibrate_s1(
    plan: UdpRunPlan,
    stop: &AtomicBool,
) -> Result<(UdpRunPlan, String, Option<String>)> {
    let mut cal = plan.clone();
    cal.load.rate_pps = f64::INFINITY;
    cal.load.burst = 1;
    cal.load.warmup = Duration::from_millis(100);
    cal.load.duration = Duration::from_millis(300);
    cal.load.drain = Duration::from_millis(100);
    cal.load.run_id = plan.load.run_id.wrapping_sub(1);
    let rec = out::with_progress("calibrating: S1's server at full speed", 0.4, || {
        run_udp(cal, stop)
    })?;
    let tps = rec.generator.as_ref().map_or(0.0, |g| g.tps);
    let rate = ((tps / 2.0 / 1000.0).floor() * 1000.0).clamp(10_000.0, S1_RATE_PPS);
    let plan = s1_plan(plan.interval, rate);
    let scenario = format!(
        "built-in S1: reference server, default buffer, bursts of {} x 1024 B every 50 ms ({rate:.0} pps mean)",
        plan.load.burst
    );
    let note = (rate < S1_RATE_PPS).then(|| {
        format!(
            "S1's mean rate lowered from {S1_RATE_PPS:.0} to {rate:.0} pps: at full speed this host's generator and reference server answered {tps:.0} per s together (0.4 s calibration run), and S1's server must drain the mean rate with room to spare"
        )
    });
    Ok((plan, scenario, note))
}

/// Runs `tpslab diagnose`.
pub fn run(a: DiagnoseArgs) -> Result<ExitCode> {
    flags::check_interval(a.interval)?;
    if let Some(p) = &a.json {
        out::check_output("--json", p, true)?;
    }
    if let Some(p) = &a.metrics_file {
        out::check_output("--metrics-file", p, false)?;
    }
    if let Some(p) = &a.html {
        out::check_output("--html", p, false)?;
    }
    let gate = flags::GateFlags {
        fail_on: a.fail_on.clone(),
        strict: a.strict,
    };
    gate.conditions(tpslab_analysis::gate::applies::UDP_RUN)?;
    let (plan, scenario, verify) = plan(&a)?;
    let server_cmd = match &a.target {
        Some(DiagProto::Udp(u)) => u.server_cmd.clone(),
        None => None,
    };
    if a.verify && a.no_verify {
        bail!("--verify and --no-verify contradict each other: give one");
    }
    // One run: with --server-cmd the user's server is started for it and stopped after.
    let run_once = |mut p: UdpRunPlan, stop: &AtomicBool| -> Result<RunRecord> {
        match &server_cmd {
            None => Ok(run_udp(p, stop)?),
            Some(cmd) => {
                let user = ServerProcess::user_udp(cmd, &[], SchedPolicy::Other)?;
                p.load.target = user.addr;
                p.target_pid = Some(user.pid());
                let r = run_udp(p, stop);
                drop(user);
                Ok(r?)
            }
        }
    };
    let stop = out::install_signals()?;
    let mut notes = vec![];
    let (plan, scenario) = if a.target.is_none() {
        let (p, words, note) = calibrate_s1(plan, &stop)?;
        notes.extend(note);
        (p, words)
    } else {
        (plan, scenario)
    };
    let probe = probe_truesize(plan.load.datagram_len(), None)?;
    let before = out::with_progress("run 1/2: as is", run_secs(&plan), || {
        run_once(plan.clone(), &stop)
    })?;
    let facts = Facts::from_record(&before, Some(&probe));
    let diag = diagnose(&facts, Some(&probe));
    let mut applied = vec![];
    let mut restored = vec![];
    let mut after = None;
    let mut not_verified = None;
    if verify && !stop.load(Relaxed) {
        match &diag.fix {
            None if diag.recommendations.is_empty() => {
                notes.push("nothing to verify: no change was recommended".into())
            }
            None => {
                let argv = rerun_argv(std::env::args_os());
                not_verified = Some(NotVerified {
                    why: "the recommended changes are the server's own (its code, its threads, its CPUs): tpslab cannot apply them for a second run, so nothing was verified; make them and run the same diagnosis again".into(),
                    run: argv.as_ref().ok().map(|argv| {
                        sh_line(
                            &argv
                                .iter()
                                .filter(|w| *w != "--verify")
                                .cloned()
                                .collect::<Vec<_>>(),
                        )
                    }),
                    run_note: argv.err(),
                })
            }
            Some(fix) => {
                let mut plan2 = plan.clone();
                plan2.load.run_id = plan.load.run_id.wrapping_add(1);
                let (sysctls, what, skipped) = apply_fix(&mut plan2, fix, server_cmd.is_some());
                applied = what;
                if applied.is_empty() && server_cmd.is_none() && plan.server.is_none() {
                    not_verified = Some(cannot_restart(&skipped, &before, &a));
                } else if applied.is_empty() {
                    not_verified = Some(NotVerified {
                        why: "nothing recommended is a change tpslab can apply for a second run: nothing was verified".into(),
                        run: None,
                        run_note: None,
                    });
                } else {
                    if !skipped.is_empty() {
                        notes.push(format!("not applied for the verification run: {} (reaches only sockets created after the change, and tpslab cannot restart this server)", skipped.join(", ")));
                    }
                    // A failure here must not lose the first run's diagnosis: it becomes a note.
                    let guard = if sysctls.is_empty() {
                        Ok(None)
                    } else {
                        HostGuard::apply(&sysctls).map(Some)
                    };
                    match guard {
                        Err(e) => {
                            not_verified = Some(NotVerified {
                                why: format!(
                                    "the fix could not be applied ({e}): nothing was verified"
                                ),
                                run: None,
                                run_note: None,
                            })
                        }
                        Ok(mut guard) => {
                            let r = out::with_progress(
                                "run 2/2: with the fix",
                                run_secs(&plan2),
                                || run_once(plan2, &stop),
                            );
                            if let Some(g) = guard.as_mut() {
                                let done = g.restore();
                                restored = done.restored;
                                notes.extend(
                                    done.skipped
                                        .into_iter()
                                        .map(|s| format!("not restored: {s}")),
                                );
                            }
                            match r {
                                Ok(rec) => after = Some(rec),
                                Err(e) => notes.push(format!("verification run failed: {e}")),
                            }
                        }
                    }
                }
            }
        }
    }
    let interrupted = stop.load(Relaxed);
    if interrupted && verify && after.is_none() {
        notes.push(
            "interrupted: the verification run was skipped (or cut short); nothing was proven"
                .into(),
        );
    }
    let rec = Record::new(Body::Diagnose(DiagnoseRecord {
        interrupted,
        scenario,
        probe,
        facts,
        diagnosis: diag,
        before,
        applied,
        after,
        restored,
        notes,
        not_verified,
    }));
    let Body::Diagnose(d) = &rec.body else {
        unreachable!("made as a diagnosis above")
    };
    let outputs = out::Outputs {
        json: a.json.as_deref(),
        html: a.html.as_deref(),
        metrics: a.metrics_file.as_deref(),
        history: !a.no_history,
        extra: vec![],
    };
    out::emit(&rec, outputs, out::Terminal::Report { explain: a.explain })?;
    diagnose_exit(d, &gate)
}

/// The exit code: the first run's under the gate; 130 when any part was interrupted.
fn diagnose_exit(rec: &DiagnoseRecord, gate: &flags::GateFlags) -> Result<ExitCode> {
    if rec.interrupted {
        eprintln!("tpslab: exit 130: interrupted by a signal");
        return Ok(ExitCode::from(130));
    }
    flags::gate_exit(&rec.before, gate)
}
