//! tpslab: find where UDP datagrams die and why TPS stops growing.

mod agent;
mod bdp;
mod capacity;
mod cli;
mod compare_cmd;
mod diagnose;
mod doctor;
mod flags;
mod fleet;
mod history_cmd;
mod load_http;
mod metrics;
mod out;
mod probe;
mod ramp;
mod report_cmd;
mod serve_tcp;
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
            eprintln!(
                "tpslab: error: {}",
                printable(&format!("{e:#}").replace('\n', " "))
            );
            ExitCode::from(2)
        }
    }
}

/// `s` safe to print on a terminal: a value the user (or a file) gave, with its control
/// characters escaped ([`out::escaped`]); line feeds stay (clap's messages have several lines).
pub(crate) fn printable(s: &str) -> String {
    out::escaped(s, &['\n'])
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(
            super::printable("--rate \u{1b}[31mx\0y\rz\u{85}\u{2028}: allowed"),
            "--rate \\u{1b}[31mx\\u{0}y\\u{d}z\\u{85}\\u{2028}: allowed"
        );
        assert_eq!(super::printable("two\nlines, ümlaut"), "two\nlines, ümlaut");
    }
}
