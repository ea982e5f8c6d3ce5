//! tpslab: find where UDP datagrams die and why TPS stops growing.

mod cli;
mod commands;
mod man;
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
            eprintln!("tpslab: error: {}", error_line(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// An error's message as the one line printed ([`tpslab_cli::error_line`]).
use tpslab_cli::error_line;

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(
            tpslab_cli::printable("--rate \u{1b}[31mx\0y\rz\u{85}\u{2028}: allowed"),
            "--rate \\u{1b}[31mx\\u{0}y\\u{d}z\\u{85}\\u{2028}: allowed"
        );
        assert_eq!(
            tpslab_cli::printable("two\nlines, ümlaut"),
            "two\nlines, ümlaut"
        );
    }

    #[test]
    fn an_error_line_cuts_a_long_word_and_keeps_the_rest() {
        let url = format!("http://h/{}", "a".repeat(100_000));
        let line = super::error_line(&format!("{url}: allowed a URL\nof at most 8 KiB"));
        assert!(line.len() < 300, "{}", line.len());
        assert!(line.starts_with("http://h/aaa"), "{line}");
        assert!(line.contains("...[100010 bytes]..."), "{line}");
        assert!(
            line.ends_with("aaa: allowed a URL of at most 8 KiB"),
            "{line}"
        );
        // Many long words: the line itself is cut in its middle, its end kept.
        let many = format!("{} : allowed a duration", "ab ".repeat(20_000));
        let line = super::error_line(&many);
        assert!(line.chars().count() < 1100, "{}", line.len());
        assert!(line.ends_with(": allowed a duration"), "{line}");
        // Short words, and a control character escaped once.
        assert_eq!(
            super::error_line("--rate \u{1b}x: bad"),
            "--rate \\u{1b}x: bad"
        );
    }
}
