//! `--live`'s check before a run.

use anyhow::{bail, Result};
use std::io::IsTerminal;

/// Checks before a run that `--live` can be shown: standard output is a terminal.
/// Errors: one line (exit 2).
pub fn check() -> Result<()> {
    if !std::io::stdout().is_terminal() {
        bail!("--live: standard output is not a terminal (use --json-stream FILE to follow a run from a script)");
    }
    Ok(())
}
