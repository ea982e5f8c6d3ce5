//! Targets and processes named on the command line, checked before a run.

use anyhow::Result;

/// A target `HOST:PORT` resolved ([`tpslab_plan::target::resolve`]).
pub use tpslab_plan::target::resolve;

/// `--pid PID` checked to exist.
pub fn check_pid(pid: u32) -> Result<()> {
    Ok(tpslab_plan::target::check_pid("--pid", pid)?)
}
