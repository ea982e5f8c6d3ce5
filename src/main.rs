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
            eprintln!("tpslab: error: {}", error_line(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// `s` safe to print on a terminal ([`tpslab_cli::printable`]).
pub(crate) use tpslab_cli::printable;

/// A word of an error line longer than this is cut (a 100 KB URL or payload is not echoed
/// whole), characters.
const WORD_MAX_CHARS: usize = 200;

/// An error's message as the one line printed: line feeds as spaces, control characters
/// shown escaped once ([`printable`]), and each word over [`WORD_MAX_CHARS`] cut to its
/// first and last 60 characters around `...[N bytes]...` (the rest of the line, what is
/// allowed, stays whole).
fn error_line(msg: &str) -> String {
    let line = printable(&msg.replace('\n', " "));
    line.split(' ')
        .map(|w| {
            let n = w.chars().count();
            if n <= WORD_MAX_CHARS {
                return w.to_string();
            }
            let head: String = w.chars().take(60).collect();
            let tail: String = w.chars().skip(n - 60).collect();
            format!("{head}...[{} bytes]...{tail}", w.len())
        })
        .collect::<Vec<_>>()
        .join(" ")
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
        // Short words, and a control character escaped once.
        assert_eq!(
            super::error_line("--rate \u{1b}x: bad"),
            "--rate \\u{1b}x: bad"
        );
    }
}
