//! `diagnose`: the built-in S1 scenario calibrated to the host, or the user's server; the
//! first run, the verdict, the fix applied (our server's flags, host sysctls journaled and
//! restored) and the verification run.

pub mod rerun;

use crate::server_proc::ServerProcess;
use crate::Ctx;
use anyhow::Result;
use rerun::{cannot_restart, rerun_argv, sh_line};
use std::ffi::OsString;
use std::time::Duration;
use tpslab_analysis::verdict::diagnose;
use tpslab_engine::client::udp_run::{run_udp, run_udp_streamed};
use tpslab_engine::host::guard::HostGuard;
use tpslab_engine::host::probe::probe_truesize;
use tpslab_net::sched::SchedPolicy;
use tpslab_plan::udp::LoadConfig;
use tpslab_plan::udp::ServerConfig;
use tpslab_plan::udp::UdpRunPlan;
use tpslab_record::verdict::Fix;
use tpslab_record::{Body, DiagnoseRecord, NotVerified, Record, RunRecord};

/// S1's mean rate where the host can drain it (datagrams per second).
pub const S1_RATE_PPS: f64 = 100_000.0;
/// S1's bursts are this far apart.
const S1_BURST_INTERVAL: Duration = Duration::from_millis(50);

/// The server a diagnosis is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Server {
    /// The built-in S1 scenario's reference server (its rate calibrated to the host first).
    BuiltIn,
    /// A running server at TARGET (as the user wrote it).
    At(String),
    /// The user's server, started for each run by this shell command (with `{port}`).
    Started(String),
}

/// A diagnosis: the first run, whose server, the scenario in words, whether to verify.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnosePlan {
    /// The first run ("as is"); for [`Server::Started`] its target is replaced by the
    /// started server's address, for [`Server::BuiltIn`] its rate by the calibrated one.
    pub first: UdpRunPlan,
    /// Whose server.
    pub server: Server,
    /// The scenario in words (for the built-in one: said after the calibration).
    pub scenario: String,
    /// Apply the recommended fix and run again.
    pub verify: bool,
    /// This invocation's arguments, program name first: the command line the record
    /// suggests to run again (with the change made, or with `--server-cmd`).
    pub argv: Vec<OsString>,
}

impl DiagnosePlan {
    /// The built-in S1 scenario sampled every `interval`, verified unless `no_verify`.
    pub fn built_in(interval: Duration, no_verify: bool, argv: Vec<OsString>) -> DiagnosePlan {
        DiagnosePlan {
            first: s1_plan(interval, S1_RATE_PPS),
            server: Server::BuiltIn,
            // Said by `calibrate_s1`, with the rate.
            scenario: String::new(),
            verify: !no_verify,
            argv,
        }
    }
}

/// `diagnose udp`'s server as given: `HOST:PORT` of a running one (with `--pid`,
/// `--port` to watch it), or `--server-cmd 'COMMAND {port}'` to start one.
#[derive(Debug, Clone, Default)]
pub struct UdpTarget {
    /// `HOST:PORT`.
    pub target: Option<String>,
    /// `--server-cmd`.
    pub server_cmd: Option<String>,
    /// `--pid`.
    pub pid: Option<u32>,
    /// `--port`.
    pub port: Option<u16>,
}

impl DiagnosePlan {
    /// The diagnosis of someone's UDP server `t`, sampled every `interval`: one of a target
    /// or a command (with `{port}`; then no `--pid`, `--port`), the PID checked to exist,
    /// then the load `load` makes for the target (the started server's port is filled in
    /// later). Errors: one line naming the flags.
    pub fn udp(
        t: &UdpTarget,
        load: impl FnOnce(std::net::SocketAddr) -> Result<LoadConfig>,
        interval: Duration,
        verify: bool,
        argv: Vec<OsString>,
    ) -> Result<DiagnosePlan> {
        use anyhow::bail;
        let target = match (&t.target, &t.server_cmd) {
            (Some(t), None) => tpslab_plan::target::resolve(t)?,
            (None, Some(cmd)) => {
                if !cmd.contains("{port}") {
                    bail!("--server-cmd \"{cmd}\": must contain {{port}}, where tpslab puts the port to listen on");
                }
                if t.pid.is_some() || t.port.is_some() {
                    bail!("--server-cmd starts the server itself: --pid and --port do not apply");
                }
                // Replaced by the port the started server listens on.
                std::net::SocketAddr::from(([127, 0, 0, 1], 0))
            }
            (Some(_), Some(_)) => bail!(
                "diagnose udp: give HOST:PORT of a running server, or --server-cmd to start one, not both"
            ),
            (None, None) => bail!(
                "diagnose udp: give HOST:PORT of the server (with --pid PID), or --server-cmd 'COMMAND {{port}}'"
            ),
        };
        if let Some(pid) = t.pid {
            tpslab_plan::target::check_pid("--pid", pid)?;
        }
        let load = load(target)?;
        let (server, scenario) = match (&t.server_cmd, &t.target) {
            (Some(cmd), _) => (
                Server::Started(cmd.clone()),
                format!("UDP server started by tpslab: {cmd}"),
            ),
            (None, t) => (
                Server::At(t.clone().unwrap_or_default()),
                format!("UDP server at {target}"),
            ),
        };
        Ok(DiagnosePlan {
            first: UdpRunPlan {
                server: None,
                load,
                interval,
                target_pid: t.pid,
                watch_port: t.port,
                no_drop_reasons: false,
            },
            server,
            scenario,
            verify,
            argv,
        })
    }
}

/// The built-in S1 scenario: the reference server as S1's (one thread, default buffer,
/// find-and-replace on 1024-byte messages) under bursts every 50 ms at `rate_pps` mean
/// (S1's 100 k pps where the host drains it, see `calibrate_s1`): a mean rate it
/// drains, bursts the default buffer cannot hold.
pub fn s1_plan(interval: Duration, rate_pps: f64) -> UdpRunPlan {
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
            // One source port per thread, as the scenario/plan always ran.
            flows: 0,
            payload: None,
            seq_field: None,
            expect_replies: true,
            drain: Duration::from_millis(500),
            run_id: tpslab_net::mono_ns(),
            cpus: vec![],
            gso: false,
            // Exact, not auto: S1 is a burst shape (auto would choose exact for bursts
            // anyway); each burst leaves at its time, as the scenario was calibrated.
            pacing_slack: tpslab_plan::udp::PacingSlack::exact(),

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

/// What applying a fix to a plan does: the sysctls to set, a description of each change,
/// and the sysctls (`KEY=VALUE`) that could not be applied.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Applied {
    /// Host sysctls to set for the second run (journaled, restored after it).
    pub sysctls: Vec<(String, String)>,
    /// Each change, in words.
    pub what: Vec<String>,
    /// Socket-level sysctls (`KEY=VALUE`) left out: a server tpslab did not start and
    /// cannot restart would not see them.
    pub skipped: Vec<String>,
}

/// Applies a fix to a plan: our server through its flags; host sysctls only where they
/// take effect and a flag cannot do it (`restartable`: the user's server is started by
/// tpslab, after the sysctls are set).
pub fn apply_fix(plan: &mut UdpRunPlan, fix: &Fix, restartable: bool) -> Applied {
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
    Applied {
        sysctls,
        what: applied,
        skipped,
    }
}

/// S1's premise is a mean rate the server drains, bursts its buffer cannot hold. On a
/// host where the generator and the reference server together answer fewer than twice
/// S1's 100 k pps, the built-in scenario's mean is half of what they answer at full
/// speed (TPS of a 0.4 s run at `--rate max`, the same server and datagrams), rounded
/// down to 1000 pps, at least 10 k pps; bursts stay 50 ms apart. Returns the plan, the
/// scenario in words, and a note on the calibration when it lowered the rate.
fn calibrate_s1(plan: &UdpRunPlan, ctx: &Ctx) -> Result<(UdpRunPlan, String, Option<String>)> {
    let mut cal = plan.clone();
    cal.load.rate_pps = f64::INFINITY;
    cal.load.burst = 1;
    cal.load.warmup = Duration::from_millis(100);
    cal.load.duration = Duration::from_millis(300);
    cal.load.drain = Duration::from_millis(100);
    cal.load.run_id = plan.load.run_id.wrapping_sub(1);
    let rec = ctx.phase("calibrating: S1's server at full speed", 0.4, || {
        run_udp(cal, &ctx.stop)
    })?;
    let tps = rec.generator.as_ref().map_or(0.0, |g| g.tps);
    let (plan, scenario, note) = s1_calibrated(plan.interval, tps);
    Ok((plan, scenario, note))
}

/// S1's plan for a host whose generator and reference server answered `tps` per second
/// together at full speed (see `calibrate_s1`), the scenario in words, and the note
/// when the rate was lowered.
fn s1_calibrated(interval: Duration, tps: f64) -> (UdpRunPlan, String, Option<String>) {
    let rate = ((tps / 2.0 / 1000.0).floor() * 1000.0).clamp(10_000.0, S1_RATE_PPS);
    let plan = s1_plan(interval, rate);
    let scenario = format!(
        "built-in S1: reference server, default buffer, bursts of {} x 1024 B every 50 ms ({rate:.0} pps mean)",
        plan.load.burst
    );
    let note = (rate < S1_RATE_PPS).then(|| {
        format!(
            "S1's mean rate lowered from {S1_RATE_PPS:.0} to {rate:.0} pps: at full speed this host's generator and reference server answered {tps:.0} per s together (0.4 s calibration run), and S1's server must drain the mean rate with room to spare"
        )
    });
    (plan, scenario, note)
}

/// One run of `p`: with [`Server::Started`] the user's server is started for it (its
/// address and PID put in the plan) and stopped after.
fn run_once(server: &Server, mut p: UdpRunPlan, ctx: &Ctx) -> Result<RunRecord> {
    match server {
        Server::Started(cmd) => {
            let user = ServerProcess::user_udp(cmd, &[], SchedPolicy::Other)?;
            p.load.target = user.addr;
            p.target_pid = Some(user.pid());
            let r = run_udp_streamed(p, &ctx.stop, ctx.live.clone());
            drop(user);
            Ok(r?)
        }
        Server::BuiltIn | Server::At(_) => Ok(run_udp_streamed(p, &ctx.stop, ctx.live.clone())?),
    }
}

/// Runs a diagnosis: (for the built-in scenario, the calibration, then) the truesize probe,
/// the first run as the phase "run 1: as is" (not "1/2": whether a second follows is
/// known only after it), the verdict, and with `plan.verify` the
/// fix applied and the second run as "run 2: with the fix", host sysctls restored after
/// it. A fix that cannot be applied, or a second run that fails, becomes a note or the
/// record's `not_verified`, never the loss of the first run's diagnosis.
///
/// Returns the diagnose record (interrupted when `ctx.stop` was set). Errors: the
/// calibration, the probe or the first run failed (the server cannot start, the target
/// cannot be found).
pub fn run(plan: &DiagnosePlan, ctx: &Ctx) -> Result<Record> {
    let mut notes = vec![];
    let (first, scenario) = match plan.server {
        Server::BuiltIn => {
            let (p, words, note) = calibrate_s1(&plan.first, ctx)?;
            notes.extend(note);
            (p, words)
        }
        _ => (plan.first.clone(), plan.scenario.clone()),
    };
    let probe = probe_truesize(first.load.datagram_len(), None)?;
    let before = ctx.phase("run 1: as is", run_secs(&first), || {
        run_once(&plan.server, first.clone(), ctx)
    })?;
    let facts = tpslab_analysis::verdict::facts_of(&before, Some(&probe));
    let diag = diagnose(&facts, Some(&probe));
    let mut v = Verification::default();
    if plan.verify && !ctx.stopped() {
        v = verify(
            plan,
            &first,
            &before,
            diag.fix.as_ref(),
            !diag.recommendations.is_empty(),
            ctx,
        );
    }
    notes.extend(v.notes);
    let interrupted = ctx.stopped();
    if interrupted && plan.verify && v.after.is_none() {
        notes.push(
            "interrupted: the verification run was skipped (or cut short); nothing was proven"
                .into(),
        );
    }
    Ok(Record::new(Body::Diagnose(DiagnoseRecord {
        interrupted,
        scenario,
        probe,
        facts,
        diagnosis: diag,
        before,
        applied: v.applied,
        after: v.after,
        restored: v.restored,
        notes,
        not_verified: v.not_verified,
    })))
}

/// What the verification step did.
#[derive(Default)]
struct Verification {
    applied: Vec<String>,
    restored: Vec<(String, String)>,
    after: Option<RunRecord>,
    not_verified: Option<NotVerified>,
    notes: Vec<String>,
}

/// The verification: `fix` applied to `first` and run again, or why not (`recommended`:
/// the diagnosis recommended something, a change of the server's own when `fix` is None).
fn verify(
    plan: &DiagnosePlan,
    first: &UdpRunPlan,
    before: &RunRecord,
    fix: Option<&Fix>,
    recommended: bool,
    ctx: &Ctx,
) -> Verification {
    let mut v = Verification::default();
    let Some(fix) = fix else {
        if recommended {
            v.not_verified = Some(own_change(&plan.argv));
        } else {
            v.notes
                .push("nothing to verify: no change was recommended".into());
        }
        return v;
    };
    let mut second = first.clone();
    second.load.run_id = first.load.run_id.wrapping_add(1);
    let started = matches!(plan.server, Server::Started(_));
    let a = apply_fix(&mut second, fix, started);
    v.applied = a.what;
    if v.applied.is_empty() && !started && first.server.is_none() {
        let target = match &plan.server {
            Server::At(t) => t.as_str(),
            _ => "",
        };
        v.not_verified = Some(cannot_restart(&a.skipped, before, target, &plan.argv));
        return v;
    }
    if v.applied.is_empty() {
        v.not_verified = Some(NotVerified {
            why: "nothing recommended is a change tpslab can apply for a second run: nothing was verified".into(),
            run: None,
            run_note: None,
        });
        return v;
    }
    if !a.skipped.is_empty() {
        v.notes.push(format!("not applied for the verification run: {} (reaches only sockets created after the change, and tpslab cannot restart this server)", a.skipped.join(", ")));
    }
    // A failure here must not lose the first run's diagnosis: it becomes a note.
    let guard = if a.sysctls.is_empty() {
        Ok(None)
    } else {
        HostGuard::apply(&a.sysctls).map(Some)
    };
    let mut guard = match guard {
        Err(e) => {
            v.not_verified = Some(NotVerified {
                why: format!("the fix could not be applied ({e}): nothing was verified"),
                run: None,
                run_note: None,
            });
            return v;
        }
        Ok(g) => g,
    };
    let r = ctx.phase("run 2: with the fix", run_secs(&second), || {
        run_once(&plan.server, second, ctx)
    });
    if let Some(g) = guard.as_mut() {
        let done = g.restore();
        v.restored = done.restored;
        v.notes.extend(
            done.skipped
                .into_iter()
                .map(|s| format!("not restored: {s}")),
        );
    }
    match r {
        Ok(rec) => v.after = Some(rec),
        Err(e) => v.notes.push(format!("verification run failed: {e}")),
    }
    v
}

/// Why changes of the server's own (its code, threads, CPUs) were not verified, with the
/// same diagnosis to run again once they are made (`argv`: this one's, without
/// `--verify`).
fn own_change(argv: &[OsString]) -> NotVerified {
    let argv = rerun_argv(argv.iter().cloned());
    NotVerified {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(target: &str) -> UdpRunPlan {
        UdpRunPlan {
            server: None,
            load: LoadConfig {
                target: target.parse().unwrap(),
                ..LoadConfig::default()
            },
            interval: Duration::from_millis(10),
            target_pid: None,
            watch_port: None,
            no_drop_reasons: false,
        }
    }

    fn fix(sysctls: &[(&str, &str)]) -> Fix {
        Fix {
            sysctls: sysctls
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn s1_is_calibrated_down_to_half_what_the_host_answers() {
        let (p, words, note) = s1_calibrated(Duration::from_millis(10), 500_000.0);
        assert_eq!((p.load.rate_pps, p.load.burst), (S1_RATE_PPS, 5000));
        assert!(words.contains("bursts of 5000 x 1024 B every 50 ms (100000 pps mean)"));
        assert_eq!(note, None);
        let (p, _, note) = s1_calibrated(Duration::from_millis(10), 61_900.0);
        assert_eq!((p.load.rate_pps, p.load.burst), (30_000.0, 1500));
        assert!(note.unwrap().contains("lowered from 100000 to 30000 pps"));
        // Never below 10 k pps.
        let (p, _, _) = s1_calibrated(Duration::from_millis(10), 0.0);
        assert_eq!(p.load.rate_pps, 10_000.0);
    }

    #[test]
    fn a_fix_reaches_our_server_by_its_flags_and_a_foreign_one_by_sysctls_it_sees() {
        let mut ours = s1_plan(Duration::from_millis(10), S1_RATE_PPS);
        let f = Fix {
            threads: Some(4),
            batch: Some(32),
            ..fix(&[("net.core.netdev_max_backlog", "4000")])
        };
        let a = apply_fix(&mut ours, &f, false);
        let srv = ours.server.as_ref().unwrap();
        assert_eq!((srv.threads, srv.batch, ours.load.threads), (4, 32, 4));
        assert_eq!(
            a.sysctls,
            vec![("net.core.netdev_max_backlog".into(), "4000".into())]
        );
        assert_eq!(a.what[1], "the same mean load spread over 4 sender flows");
        // A running server not ours: a buffer sysctl would not reach its socket.
        let mut theirs = at("127.0.0.1:9");
        let f = fix(&[("net.core.rmem_default", "4194304")]);
        let a = apply_fix(&mut theirs, &f, false);
        assert!(a.sysctls.is_empty() && a.what.is_empty());
        assert_eq!(a.skipped, vec!["net.core.rmem_default=4194304".to_string()]);
        // Started by tpslab (--server-cmd): set, and the server started again after it.
        let a = apply_fix(&mut theirs, &f, true);
        assert_eq!(a.sysctls.len(), 1);
        assert_eq!(
            a.what.last().unwrap(),
            "the server started again after the change (--server-cmd)"
        );
    }

    #[test]
    fn a_change_of_the_servers_own_names_the_diagnosis_to_run_again() {
        let argv: Vec<OsString> = [
            "/usr/bin/tpslab",
            "diagnose",
            "udp",
            "127.0.0.1:9",
            "--verify",
        ]
        .map(OsString::from)
        .into();
        let nv = own_change(&argv);
        assert_eq!(nv.run.as_deref(), Some("tpslab diagnose udp 127.0.0.1:9"));
        assert!(nv.why.contains("the server's own"));
    }

    #[test]
    fn a_foreign_server_that_cannot_restart_is_not_verified_and_says_how_to() {
        // Nothing listens at the target: the verification is refused before any run.
        let plan = DiagnosePlan {
            first: at("127.0.0.1:9"),
            server: Server::At("127.0.0.1:9".into()),
            scenario: "UDP server at 127.0.0.1:9".into(),
            verify: true,
            argv: ["tpslab", "diagnose", "udp", "127.0.0.1:9", "--verify"]
                .map(OsString::from)
                .into(),
        };
        let v = verify(
            &plan,
            &plan.first,
            &RunRecord::default(),
            Some(&fix(&[("net.core.rmem_max", "8388608")])),
            true,
            &Ctx::silent(),
        );
        let nv = v.not_verified.unwrap();
        assert!(
            nv.why.contains(
                "net.core.rmem_max=8388608 reaches only sockets created after the change"
            ),
            "{}",
            nv.why
        );
        assert_eq!(
            nv.run.as_deref(),
            Some("tpslab diagnose udp --server-cmd 'COMMAND {port}' --verify")
        );
        assert!(v.after.is_none() && v.applied.is_empty());
    }
}
