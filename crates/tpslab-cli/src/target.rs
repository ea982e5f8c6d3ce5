//! Targets and processes named on the command line, checked before a run.

use anyhow::Result;

/// `--pid PID` checked to exist.
pub fn check_pid(pid: u32) -> Result<()> {
    Ok(tpslab_plan::target::check_pid("--pid", pid)?)
}
