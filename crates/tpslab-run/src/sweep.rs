//! `sweep`: a designed experiment over tunables. Its folder (`--out`) holds the plan and
//! one record per run, so a sweep interrupted is resumed ([`prepare`]); the runs go in the
//! plan's randomised order, each cell's settings applied and its sysctls restored after
//! it ([`run`]); the analysis says which setting helped, beyond noise.

use crate::Ctx;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use tpslab_analysis::sweep::analyse;
use tpslab_engine::client::udp_run::run_udp_streamed;
use tpslab_engine::host::guard::HostGuard;
use tpslab_plan::sweep::{cell_config, cells, check_plan, run_order, Cell, SweepPlan as Plan};
use tpslab_plan::udp::UdpRunPlan;
use tpslab_record::sweep::{RunMetrics, SweepRun};
use tpslab_record::{Body, Record, RunRecord, SweepReport};

/// The file of a sweep's plan in its folder.
pub fn plan_path(out: &Path) -> PathBuf {
    out.join("plan.json")
}

/// The file of the `rep`-th run of cell `cell` in the sweep's folder.
pub fn record_path(out: &Path, cell: usize, rep: usize) -> PathBuf {
    out.join(format!("cell{cell:02}-rep{rep}.json"))
}

/// A finished (not interrupted) run's record in `path`, of this release or the previous.
fn finished(path: &Path) -> Option<RunRecord> {
    let text = crate::input::read_text("", path, crate::input::RECORD_MAX_BYTES, false).ok()?;
    let rec = Record::from_json(&text).ok()?;
    match rec.body {
        Body::UdpRun(r) if !r.interrupted => Some(r),
        _ => None,
    }
}

/// Checks a new sweep's plan before anything is made: the plan's own checks, and root
/// when a factor is a host sysctl. Errors: one line naming the factor or the setting.
pub fn check_new(plan: &Plan) -> Result<()> {
    check_plan(plan)?;
    if let Some(f) = plan.factors.iter().find(|f| f.name.contains('.')) {
        if !tpslab_net::is_root() {
            bail!(
                "--factor {}: changing a sysctl needs root; run as root or drop the factor",
                f.name
            );
        }
    }
    Ok(())
}

/// Makes the sweep's folder `out` ready: for a new sweep (`plan` given, checked by
/// [`check_new`]), every sysctl level tried, the folder made (mode 0700, refused when it
/// holds a sweep already) and the plan saved in it; to resume (`plan` None), the folder
/// checked to be the user's own and its plan read back and checked as a new one is.
/// Returns the plan. Errors: one line naming `--out`, `--resume` or the factor.
pub fn prepare(plan: Option<Plan>, out: &Path) -> Result<Plan> {
    let plan_path = plan_path(out);
    let Some(plan) = plan else {
        own_folder(out).context("--resume")?;
        let text =
            crate::input::read_text("--resume", &plan_path, crate::input::PLAN_MAX_BYTES, false)?;
        let plan: Plan = serde_json::from_str(&text)
            .with_context(|| format!("--resume: {}", plan_path.display()))?;
        check_plan(&plan).with_context(|| format!("--resume: {}", plan_path.display()))?;
        check_sysctl_levels(&plan)?;
        return Ok(plan);
    };
    // No planted link on the way, before anything is tried or made.
    crate::outfile::check_folder("--out", out)?;
    check_sysctl_levels(&plan)?;
    let leftovers = std::fs::read_dir(out).is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("cell")))
    });
    if plan_path.exists() || leftovers {
        bail!(
            "--out {}: holds a sweep already; --resume to continue it or choose another folder",
            out.display()
        );
    }
    // Each missing folder made relative to the one before (never through a planted link).
    crate::outfile::make_folder("--out", out, 0o700)?;
    own_folder(out)?;
    crate::outfile::write_json("--out", &plan_path, &plan)?;
    Ok(plan)
}

/// `--out` is the user's own folder (reached without a planted link, owned by this user,
/// writable by neither group nor others, every folder above it one only this user or root
/// can change: [`crate::walk::chain_ok`]): its plan.json names the command
/// `--resume` runs (`server_cmd`) and its plan and records are read and written by name
/// after this check, so a folder another user can write to, or swap on the way, is refused.
fn own_folder(dir: &Path) -> Result<()> {
    use crate::walk;
    let chain = walk::How {
        create: None,
        chain: true,
    };
    let f = match walk::folder(None, dir, chain) {
        // The folder itself (the folders above passed, and only this user or root can
        // change them): said below, naming what is allowed.
        Err(walk::Refused::Chain(p, _)) if walk::same_path(&p, dir) => {
            walk::folder(None, dir, walk::How::default())
        }
        r => r,
    }
    .map_err(|r| anyhow::anyhow!("--out {}: {r}", dir.display()))?;
    let m =
        rustix::fs::fstat(&f.fd).map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    let euid = rustix::process::geteuid().as_raw();
    if m.st_uid != euid || m.st_mode & 0o022 != 0 {
        bail!(
            "--out {}: {}; allowed a folder of this user's that group and others cannot write (its plan names the command a resume runs)",
            dir.display(),
            if m.st_uid != euid {
                format!("owned by uid {}", m.st_uid)
            } else {
                format!("mode {:o}", m.st_mode & 0o7777)
            }
        );
    }
    Ok(())
}

/// Every level of every sysctl factor, written once and restored at once (the host
/// guard), so a level the kernel refuses stops the sweep before its first run, not at its
/// cell. Errors: one line naming the factor, the level and the kernel's answer.
fn check_sysctl_levels(plan: &Plan) -> Result<()> {
    for f in plan.factors.iter().filter(|f| f.name.contains('.')) {
        for level in &f.levels {
            HostGuard::check_accepted(&f.name, level).map_err(|e| {
                anyhow::anyhow!(
                    "--factor {}: level \"{level}\": the kernel does not take it ({e})",
                    f.name
                )
            })?;
        }
    }
    Ok(())
}

/// Runs one cell's repetition (the `i`-th run of the sweep), the user's server started
/// for it with `--server-cmd`, its sysctls applied and restored; its record is written to
/// `path` before anything else happens to it.
fn run_cell(plan: &Plan, cell: &Cell, i: usize, path: &Path, ctx: &Ctx) -> Result<RunRecord> {
    let (srv, mut load, sysctls) = cell_config(plan, cell)?;
    load.run_id = plan.seed ^ ((i as u64) << 40) ^ tpslab_net::mono_ns();
    let guard = if sysctls.is_empty() {
        None
    } else {
        Some(HostGuard::apply(&sysctls)?)
    };
    let interval = plan.interval;
    let rec = match &plan.server_cmd {
        None => run_udp_streamed(
            UdpRunPlan {
                server: Some(srv),
                load,
                interval,
                target_pid: None,
                watch_port: None,
                no_drop_reasons: false,
            },
            &ctx.stop,
            ctx.live.clone(),
        )?,
        Some(cmd) => {
            let user = crate::server_proc::ServerProcess::user_udp(cmd, &srv.cpus, srv.sched)?;
            load.target = user.addr;
            let pid = user.pid();
            let rec = run_udp_streamed(
                UdpRunPlan {
                    server: None,
                    load,
                    interval,
                    target_pid: Some(pid),
                    watch_port: None,
                    no_drop_reasons: false,
                },
                &ctx.stop,
                ctx.live.clone(),
            )?;
            drop(user);
            rec
        }
    };
    drop(guard);
    let rec = Record::new(Body::UdpRun(rec));
    crate::outfile::write_json("--out", path, &rec)?;
    let Body::UdpRun(rec) = rec.body else {
        unreachable!("made as a UDP run above")
    };
    Ok(rec)
}

/// What a sweep tells whoever watches it run.
pub enum Event<'a> {
    /// The next run is of this cell (read back from the folder when done before).
    Next(&'a Cell),
    /// A run is done.
    Done {
        /// Runs done so far, this one included.
        done: usize,
        /// Runs the plan holds.
        planned: usize,
        /// Its cell.
        cell: &'a Cell,
        /// Its record.
        record: &'a RunRecord,
    },
}

/// Runs the sweep prepared in `out` ([`prepare`]): each run in the plan's order, a run
/// whose record is in `out` already read back instead; ends early at `ctx.stop` or at a
/// run interrupted (noted: `--resume` continues). `on` hears of every run.
///
/// Returns the sweep's record (its analysis against the baseline cell), or None when it
/// was interrupted before a run of the baseline cell finished. Errors: a run failed, or
/// no run of the baseline cell finished.
pub fn run(
    plan: &Plan,
    out: &Path,
    ctx: &Ctx,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<Option<Record>> {
    let started = crate::Started::now();
    let cells = cells(&plan.factors, plan.design);
    let order = run_order(cells.len(), plan.repeat, plan.seed);
    let mut runs: Vec<SweepRun> = vec![];
    let mut notes = vec![];
    for (i, &(c, rep)) in order.iter().enumerate() {
        if ctx.stopped() {
            notes.push(format!(
                "interrupted after {i} of {} runs: --resume continues",
                order.len()
            ));
            break;
        }
        let path = record_path(out, c, rep);
        let cell = &cells[c];
        on(Event::Next(cell));
        let rec = match finished(&path) {
            Some(r) => r,
            None => {
                let rec = run_cell(plan, cell, i, &path, ctx)?;
                if rec.interrupted {
                    notes.push(format!(
                        "run {} of cell {} interrupted; not counted",
                        rep,
                        cell.label()
                    ));
                    break;
                }
                rec
            }
        };
        runs.push(SweepRun {
            cell: c,
            rep,
            metrics: tpslab_analysis::sweep::metrics(&rec),
        });
        on(Event::Done {
            done: runs.len(),
            planned: order.len(),
            cell,
            record: &rec,
        });
    }
    let metrics = metrics(&runs);
    if metrics.iter().all(|(c, _)| *c != 0) {
        if ctx.stopped() {
            return Ok(None);
        }
        bail!("no run of the baseline cell finished: nothing to compare");
    }
    let result = analyse(&cells, &metrics, plan.objective);
    let meta = started.meta(ctx.stopped());
    Ok(Some(Record::with_meta(
        meta,
        Body::Sweep(SweepReport {
            plan: plan.clone(),
            out: out.display().to_string(),
            runs,
            result,
            notes,
        }),
    )))
}

/// The runs' figures by cell, as the analysis and the exit-code gate read them.
pub fn metrics(runs: &[SweepRun]) -> Vec<(usize, RunMetrics)> {
    runs.iter().map(|r| (r.cell, r.metrics.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn plan() -> Plan {
        let mut p = tpslab_plan::sweep::s2_plan(7, std::time::Duration::from_millis(10));
        p.factors = vec![tpslab_plan::sweep::parse_factor("rcvbuf=212992,4194304").unwrap()];
        p
    }

    #[test]
    fn a_new_sweep_saves_its_plan_and_a_resume_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("s");
        let p = prepare(Some(plan()), &out).unwrap();
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let back = prepare(None, &out).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&p).unwrap()
        );
        // The folder holds a sweep: a new one is refused, not mixed in.
        let e = prepare(Some(plan()), &out).unwrap_err().to_string();
        assert!(e.contains("holds a sweep already; --resume"), "{e}");
    }

    #[test]
    fn a_folder_others_can_write_is_not_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("s");
        prepare(Some(plan()), &out).unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = format!("{:#}", prepare(None, &out).unwrap_err());
        assert!(
            e.contains("mode 777; allowed a folder of this user's"),
            "{e}"
        );
        let e = format!("{:#}", prepare(None, &dir.path().join("none")).unwrap_err());
        assert!(e.starts_with("--resume: --out "), "{e}");
    }

    #[test]
    fn a_folder_above_that_others_can_write_is_refused() {
        // Resumed: the sweep's folder is this user's, the one above open to all (non-sticky).
        let dir = tempfile::tempdir().unwrap();
        let above = dir.path().join("above");
        let out = above.join("s");
        prepare(Some(plan()), &out).unwrap();
        std::fs::set_permissions(&above, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = format!("{:#}", prepare(None, &out).unwrap_err());
        assert!(
            e.contains(&format!("folder {}: mode 777", above.display())),
            "{e}"
        );
        // New: under another user's folder anyone can write, nothing is made.
        if std::os::unix::fs::chown(&above, Some(65534), Some(65534)).is_ok() {
            let new = above.join("t");
            let e = format!("{:#}", prepare(Some(plan()), &new).unwrap_err());
            assert!(e.contains("owned by uid 65534"), "{e}");
            assert!(!new.exists());
        }
    }

    #[test]
    fn runs_done_before_are_read_back_not_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("s");
        let p = prepare(Some(plan()), &out).unwrap();
        // Every run's record is there already (a finished UDP run each).
        let order = run_order(2, p.repeat, p.seed);
        let fixture = include_str!("../../tpslab-report/tests/fixtures/udp_run.json");
        for &(c, rep) in &order {
            let rec = Record::from_json(fixture).unwrap();
            let path = record_path(&out, c, rep);
            crate::outfile::write_json("--out", &path, &rec).unwrap();
            assert!(finished(&path).is_some(), "read back as a finished run");
        }
        let mut next = 0;
        let mut done = vec![];
        let rec = run(&p, &out, &Ctx::silent(), &mut |e| match e {
            Event::Next(_) => next += 1,
            Event::Done {
                done: d, planned, ..
            } => done.push((d, planned)),
        })
        .unwrap()
        .unwrap();
        assert_eq!(next, order.len());
        assert_eq!(done.last(), Some(&(order.len(), order.len())));
        let Body::Sweep(s) = &rec.body else {
            panic!("a sweep")
        };
        assert_eq!(s.runs.len(), order.len());
        assert!(s.notes.is_empty(), "{:?}", s.notes);
    }

    #[test]
    fn a_sweep_stopped_before_its_baseline_ran_has_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("s");
        let p = prepare(Some(plan()), &out).unwrap();
        let ctx = Ctx::silent();
        ctx.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(run(&p, &out, &ctx, &mut |_| {}).unwrap().is_none());
    }
}
