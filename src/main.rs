//! tpslab: find where UDP datagrams die and why TPS stops growing.

mod cli;
mod commands;
mod metrics;
mod out;

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

/// `s` safe to print on a terminal ([`tpslab_cli::printable`]).
pub(crate) use tpslab_cli::printable;

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
