//! tpslab: find where UDP datagrams die and why TPS stops growing.

mod cli;
mod diagnose;
mod ramp;
mod report_cmd;
mod sweep;
mod tcp;
mod userserver;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Die quietly on a closed stdout (`tpslab ... | head`) like other CLI tools, instead of
    // panicking in println!. The JSON record is written before anything is printed.
    // SAFETY: setting a signal disposition to SIG_DFL at start-up, before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    match cli::main() {
        Ok(code) => code,
        Err(e) => {
            // One line, no backtrace: name the bad value and what is allowed.
            eprintln!("tpslab: error: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::from(2)
        }
    }
}
