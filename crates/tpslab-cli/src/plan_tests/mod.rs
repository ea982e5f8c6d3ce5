//! The commands' plans as tables: each row a command line (split as sh would), parsed by
//! the real command tree and turned into its plan by the command's `plan()` (flags ->
//! validated plan), then the texts its one-line error must say, or the plan's fields.
//! For `merge` and `compare`, whose work is reading and adding up records, the workflow
//! runs too. In a row, `{dir}` is a folder of the test's own, `{fx}` the report layer's
//! record fixtures, `{fleet}` the fleet fixtures. Rows may also be given as words
//! (`check`): a plan and what must hold of it, or the start of its error line.

use super::*;
use crate::fleet::FleetCmd;
use crate::probe::ProbeCmd;
use clap::{CommandFactory, FromArgMatches};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use tpslab_plan::udp::UdpRunPlan;
use tpslab_record::Record;

/// What a command line makes (one per row, so the variants' sizes do not matter).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Made {
    Serve(tpslab_run::udp::ServePlan),
    Udp(UdpRunPlan),
    Watch(tpslab_plan::udp::WatchPlan),
    Diagnose(tpslab_run::diagnose::DiagnosePlan),
    Sweep(Option<tpslab_plan::sweep::SweepPlan>),
    Agent(tpslab_run::agent::AgentPlan),
    Record(Record),
    Report(tpslab_run::report::ReportPlan),
    Ramp(tpslab_run::ramp::RampSetup),
    Tcp(tpslab_plan::tcp::TcpPlan),
    ServeTcp(tpslab_plan::tcp::ServeTcpPlan),
    Idle(tpslab_run::probe::IdleSetup),
    Pool(tpslab_plan::probe::PoolPlan),
    Responder(tpslab_plan::probe::ResponderPlan),
    Doctor(crate::doctor::DoctorPlan),
    Bdp(tpslab_plan::bdp::BdpPlan),
    LoadHttp(tpslab_plan::load_http::LoadHttpPlan),
    Capacity(tpslab_plan::capacity::CapacityPlan),
    K8s(tpslab_run::fleet::K8sLaunch),
    Ssh(tpslab_run::fleet::SshLaunch),
}

/// `s` with a row's placeholders filled in.
fn filled(dir: &Path, s: &str) -> String {
    let top = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    s.replace("{dir}", &dir.display().to_string())
        .replace(
            "{fx}",
            &format!("{top}/crates/tpslab-report/tests/fixtures"),
        )
        .replace("{fleet}", &format!("{top}/tests/fixtures/fleet"))
}

/// The plan the command line `line` (after `tpslab`) makes, or the error tpslab prints
/// for it: clap's usage error as [`usage_error`] rewrites it, or the plan's.
fn made(dir: &Path, line: &str) -> Result<Made, String> {
    let words = shlex::split(&filled(dir, line)).expect("a row sh can split");
    made_args(words.into_iter().map(OsString::from))
}

/// The plan of `tpslab` with the arguments `words`, or the error tpslab prints for it
/// (see [`made`]).
fn made_args(words: impl Iterator<Item = OsString>) -> Result<Made, String> {
    let args: Vec<OsString> = std::iter::once("tpslab".into()).chain(words).collect();
    let mut cmd = Cli::command();
    let cli = cmd
        .try_get_matches_from_mut(&args)
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|e| usage_error(&cmd, e, &args))?;
    let made = match cli.cmd {
        Cmd::Serve {
            proto: ServeProto::Udp(a),
        } => a.plan().map(Made::Serve),
        Cmd::Load {
            proto: LoadProto::Udp(a),
        } => a.plan().map(Made::Udp),
        Cmd::Load {
            proto: LoadProto::Http(a),
        } => a.plan().map(Made::LoadHttp),
        Cmd::Run {
            proto: RunProto::Udp(a),
        } => a.plan().map(Made::Udp),
        Cmd::Watch(a) => a.plan().map(Made::Watch),
        Cmd::Diagnose(a) => a.plan().map(Made::Diagnose),
        Cmd::Sweep(a) => a.plan().map(Made::Sweep),
        Cmd::Agent(a) => a.plan().map(Made::Agent),
        Cmd::Merge(a) => a
            .plan()
            .and_then(|p| tpslab_run::agent::merge(&p))
            .map(Made::Record),
        Cmd::Compare(a) => a
            .plan()
            .and_then(tpslab_run::compare::compare)
            .map(Made::Record),
        Cmd::Report(a) => a.plan().map(Made::Report),
        Cmd::Ramp { proto } => proto.plan().map(Made::Ramp),
        Cmd::Tcp(a) => a.plan().map(Made::Tcp),
        Cmd::Serve {
            proto: ServeProto::Tcp(a),
        } => a.plan().map(Made::ServeTcp),
        Cmd::Probe { what } => match what {
            ProbeCmd::Idle(a) => a.plan().map(Made::Idle),
            ProbeCmd::Pool(a) => a.plan().map(|(p, _)| Made::Pool(p)),
            ProbeCmd::IdleResponder(a) => a.plan().map(Made::Responder),
        },
        Cmd::Capacity { proto } => match proto {
            crate::capacity::CapacityCmd::Udp(a) => a.plan().map(Made::Capacity),
            crate::capacity::CapacityCmd::Http(a) => a.plan().map(Made::Capacity),
            crate::capacity::CapacityCmd::Tcp(a) => a.plan().map(Made::Capacity),
        },
        Cmd::Doctor(a) => a.plan().map(Made::Doctor),
        Cmd::Bdp(a) => a.plan().map(Made::Bdp),
        Cmd::Fleet { how } => match how {
            FleetCmd::K8s(a) => a.plan().map(Made::K8s),
            FleetCmd::Ssh(a) => a.plan().map(Made::Ssh),
        },
        other => panic!("not a command these tables cover: {other:?}"),
    };
    made.map_err(|e| format!("{e:#}"))
}

/// Checks every row: the command line's error says each text given. All rows are tried;
/// the failures are listed together.
fn refused(dir: &Path, rows: &[(&str, &[&str])]) {
    let mut failed = vec![];
    for (line, texts) in rows {
        match made(dir, line) {
            Ok(m) => failed.push(format!("{line}: accepted: {m:?}")),
            Err(e) => {
                for t in texts.iter().map(|t| filled(dir, t)) {
                    if !e.contains(&t) {
                        failed.push(format!("{line}: {e:?} does not say {t:?}"));
                    }
                }
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The plan of a command line that must be accepted.
fn accepted(dir: &Path, line: &str) -> Made {
    made(dir, line).unwrap_or_else(|e| panic!("{line}: refused: {e}"))
}

/// A 29-byte DNS query (id at 0..2) as `{dir}/payload.bin`, and 70 000 bytes (more than a
/// UDP datagram holds) as `{dir}/big-payload.bin`.
fn payload_files(dir: &Path) {
    let mut q = vec![0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x06tpslab\x04test\x00\x00\x01\x00\x01");
    assert_eq!(q.len(), 29);
    std::fs::write(dir.join("payload.bin"), q).unwrap();
    std::fs::write(dir.join("big-payload.bin"), vec![7u8; 70_000]).unwrap();
}

/// What a row expects.
enum Want {
    /// A plan, and what holds of it.
    Plan(fn(&Made) -> bool),
    /// An error line that starts with this (the whole line where it names no OS text).
    Error(&'static str),
}
use Want::{Error, Plan};

/// An error's first line without `tpslab: error: ` or clap's `error: `.
fn first_line(e: &str) -> &str {
    let line = e.lines().next().unwrap_or_default();
    let line = line.strip_prefix("tpslab: ").unwrap_or(line);
    line.strip_prefix("error: ").unwrap_or(line)
}

/// Runs the rows; every failing row is named, then the test fails.
fn check(rows: &[(&[&str], Want)]) {
    let mut failed = vec![];
    for (words, want) in rows {
        let got = made_args(words.iter().map(OsString::from));
        let ok = match (&got, want) {
            (Ok(p), Plan(f)) => f(p),
            (Err(e), Error(w)) => first_line(e).starts_with(w),
            _ => false,
        };
        if !ok {
            failed.push(format!("tpslab {}: {got:?}", words.join(" ")));
        }
    }
    assert!(failed.is_empty(), "rows failed:\n{}", failed.join("\n"));
}

/// A scratch folder for the rows' input files (this process's own).
fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpslab-plan-rows-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `name` in [`scratch`] holding `bytes`, as a leaked &str for a row's words.
fn file(name: &str, bytes: &[u8]) -> &'static str {
    let p = scratch().join(name);
    std::fs::write(&p, bytes).unwrap();
    Box::leak(p.to_str().unwrap().to_string().into_boxed_str())
}

/// `a` then `b`, for a row's expected line (leaked once per row: tests only).
fn joined(a: &str, b: &str) -> &'static str {
    Box::leak(format!("{a}{b}").into_boxed_str())
}

const SIZE_FORMS: &str = "allowed bytes (65536) or a size with a unit: KiB, MiB, GiB (binary; K, M, G the same) or KB, MB, GB (decimal), e.g. 64KiB, 2MiB";
const BITRATE_FORMS: &str = "allowed a number with a unit: bit, kbit, mbit, gbit (or bps, kbps, mbps, gbps, Mb/s; kB/s, MB/s, GB/s for bytes), e.g. 80mbit";
const DURATION_FORMS: &str = "allowed a duration with a unit: ns, us, ms, s, m (minutes), h, d, e.g. 200us, 10ms, 1.5s, 1m, 1h30m";

mod capacity;
mod docs;
mod files;
mod load_http;
mod probe;
mod ramp_tcp;
mod rest;
mod runs;
mod udp;
