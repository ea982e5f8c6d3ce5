//! tpslab: find where UDP datagrams die and why TPS stops growing.

mod cli;
mod report;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::main() {
        Ok(code) => code,
        Err(e) => {
            // One line, no backtrace: name the bad value and what is allowed.
            eprintln!("tpslab: error: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::from(2)
        }
    }
}
