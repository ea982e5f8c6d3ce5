//! The command line's dispatch: [`tpslab_cli::parse`] reads it; each command's plan runs
//! through its workflow (`commands`), whose record is written and printed (`out`).

use crate::commands::{
    agent, bdp, capacity, compare_cmd, diagnose, doctor, fleet, history_cmd, load_http, probe,
    ramp, report_cmd, serve_tcp, sweep, tcp, udp,
};
use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::{Cli, Cmd, LoadProto, NoRun, RunProto, ServeProto};

/// `tpslab --version`: the release and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TPSLAB_COMMIT"), ")");

/// Parses the command line and runs it.
pub fn main() -> Result<ExitCode> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match tpslab_cli::parse(&args, VERSION) {
        Ok(c) => c,
        // --help and --version, on standard output.
        Err(NoRun::Shown(e)) => e.exit(),
        Err(NoRun::Usage(text)) => {
            eprint!("{text}");
            return Ok(ExitCode::from(2));
        }
    };
    run(cli).map_err(|e| anyhow::anyhow!(tpslab_cli::name_defaults(&format!("{e:#}"))))
}

fn run(cli: Cli) -> Result<ExitCode> {
    crate::out::set_quiet(cli.quiet);
    // Reports fit the terminal; a pipe gets them whole.
    tpslab_report::term::fit::set_width(tpslab_cli::help::report_width());
    // Shell integration touches nothing on the host.
    match &cli.cmd {
        Cmd::Completions { shell } => {
            let mut cmd = tpslab_cli::command(VERSION);
            clap_complete::generate(*shell, &mut cmd, "tpslab", &mut std::io::stdout());
            return Ok(ExitCode::SUCCESS);
        }
        Cmd::Man { dir } => return man(dir.as_deref()),
        _ => {}
    }
    // Settings a killed tpslab left changed are restored before anything else runs.
    let rec = tpslab_engine::host::guard::recover();
    for (k, v) in &rec.restored {
        eprintln!("tpslab: restored {k}={v}, left changed by an interrupted tpslab run");
    }
    for s in &rec.skipped {
        eprintln!("tpslab: host setting from an interrupted run not restored: {s}");
    }
    match cli.cmd {
        Cmd::Serve {
            proto: ServeProto::Udp(a),
        } => udp::serve(a),
        Cmd::Load {
            proto: LoadProto::Udp(a),
        } => udp::load(a),
        Cmd::Load {
            proto: LoadProto::Http(a),
        } => load_http::run(a),
        Cmd::Run {
            proto: RunProto::Udp(a),
        } => udp::run(a),
        Cmd::Serve {
            proto: ServeProto::Tcp(a),
        } => serve_tcp::serve(a),
        Cmd::Serve {
            proto: ServeProto::Http(a),
        } => serve_tcp::serve_http(a),
        Cmd::Tcp(a) => tcp::run(*a),
        Cmd::Doctor(a) => doctor::run(a),
        Cmd::Probe { what } => probe::run(what),
        Cmd::Ramp { proto } => ramp::run(proto),
        Cmd::Diagnose(a) => diagnose::run(a),
        Cmd::Capacity { proto } => capacity::run(proto),
        Cmd::Bdp(a) => bdp::run(&a),
        Cmd::Report(a) => report_cmd::run(a),
        Cmd::Compare(a) => compare_cmd::run(a),
        Cmd::History(a) => history_cmd::run(a),
        Cmd::Sweep(a) => sweep::run(*a),
        Cmd::Watch(a) => udp::watch(a),
        Cmd::Agent(a) => agent::agent(*a),
        Cmd::Merge(a) => agent::merge(a),
        Cmd::Fleet { how } => fleet::run(how),
        Cmd::Completions { .. } | Cmd::Man { .. } => unreachable!("handled above"),
    }
}

/// `tpslab man`: the man pages from the command-line definitions (clap_mangen) and the
/// sections `man.rs` adds; `--dir` is created when missing.
fn man(dir: Option<&std::path::Path>) -> Result<ExitCode> {
    use anyhow::{bail, Context};
    let mut cmd = tpslab_cli::command(VERSION).disable_help_subcommand(true);
    cmd.build();
    match dir {
        None => crate::man::render(&cmd, None, &mut std::io::stdout())
            .context("writing the man page to standard output")?,
        Some(d) => {
            if d.exists() && !d.is_dir() {
                bail!("--dir {}: not a folder", d.display());
            }
            std::fs::create_dir_all(d).with_context(|| format!("--dir {}", d.display()))?;
            let pages = crate::man::write_pages(cmd, d)
                .with_context(|| format!("--dir {}", d.display()))?;
            eprintln!(
                "tpslab: {} man pages written to {}",
                pages.len(),
                d.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
