//! The run of a command whose flags and plan are [`tpslab_cli::fleet`]:
//! `tpslab fleet k8s|ssh`: how to start a fleet of agents for one plan and a start time a
//! little ahead. Kubernetes places them (an Indexed Job: the completion index is the agent
//! index), or ssh fans out; no controller of tpslab's own.
//!
//! The manifests and the script are made, quoted, by [`tpslab_run::fleet`]; the values
//! they hold are checked first by [`tpslab_plan::launch`].

use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::fleet::FleetCmd;
use tpslab_run::fleet;

/// Runs `tpslab fleet k8s|ssh`: prints the manifests or the script, or runs the script.
pub(crate) fn run(cmd: FleetCmd) -> Result<ExitCode> {
    match cmd {
        FleetCmd::K8s(a) => {
            print!("{}", a.plan()?.manifests()?);
            Ok(ExitCode::SUCCESS)
        }
        FleetCmd::Ssh(a) => {
            let l = a.plan()?;
            let script = l.script()?;
            if !l.how.run {
                print!("{script}");
                return Ok(ExitCode::SUCCESS);
            }
            Ok(if fleet::run_script(&script)? {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
