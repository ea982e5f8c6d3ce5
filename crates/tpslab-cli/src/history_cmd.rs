//! `tpslab history`: lists the runs in the history (`tpslab_run::history`, the SQLite
//! store every record is appended to), renders one again, or prints where it is kept.

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub cmd: Option<HistoryCmd>,
    /// Only runs of this kind (udp_run, diagnose, ramp, sweep, tcp, ...).
    #[arg(long)]
    pub kind: Option<String>,
    /// Only runs whose target contains this text.
    #[arg(long)]
    pub target: Option<String>,
    /// Only runs started on or after this day (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// At most this many runs, the latest.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
}

#[derive(Subcommand, Debug)]
pub enum HistoryCmd {
    /// Render one stored run again, as `tpslab report` does.
    Show {
        /// Its id (the first column of `tpslab history`).
        id: i64,
        /// Write it as an HTML page to FILE instead.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Write the stored record to FILE (`-`: standard output).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Print where the history is kept.
    Path,
}
