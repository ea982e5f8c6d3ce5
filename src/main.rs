//! tpslab: find where UDP datagrams die and why TPS stops growing.

mod agent;
mod bdp;
mod cli;
mod compare_cmd;
mod diagnose;
mod doctor;
mod flags;
mod fleet;
mod history;
mod input;
mod metrics;
mod out;
mod probe;
mod ramp;
mod report_cmd;
mod serve_tcp;
mod server_proc;
mod sweep;
mod tcp;
mod udp;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Die quietly on a closed stdout (`tpslab ... | head`) like other CLI tools, instead of
    // panicking in println!. The JSON record is written before anything is printed.
    tpslab_net::process::default_sigpipe();
    match cli::main() {
        Ok(code) => code,
        Err(e) => {
            // One line, no backtrace: name the bad value and what is allowed.
            eprintln!("tpslab: error: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::from(2)
        }
    }
}
