//! What `-h` and `--help` print: `--help` every help text whole, `-h` each one's first
//! clause ([`first_clause`]), both wrapped ([`sized`]) to `COLUMNS` when set, else to the
//! width of the terminal on standard output (at most [`MAX_WIDTH`]), else (piped) to
//! [`MAX_WIDTH`].

use clap::Command;

/// The widest help is wrapped to when the width comes from the terminal, columns (lines
/// longer than this are hard to read; `COLUMNS` set wider is taken as given).
pub const MAX_WIDTH: usize = 100;

/// `cmd` with each help text split in two (recursively, subcommands and their arguments):
/// the short help (`-h`, and the list of subcommands) its first clause, the long help
/// (`--help`, the man pages) the whole text. A text of one clause stays as it is.
pub fn split(cmd: Command) -> Command {
    let mut cmd = cmd.mut_args(|a| {
        let Some(help) = a.get_help().map(|h| h.to_string()) else {
            return a;
        };
        let long = a.get_long_help().map(|h| h.to_string());
        match first_clause(&help) {
            Some(short) => a.help(short).long_help(long.unwrap_or(help)),
            None => a,
        }
    });
    if let Some(about) = cmd.get_about().map(|h| h.to_string()) {
        if let Some(short) = first_clause(&about) {
            let long = cmd.get_long_about().map_or(about, |h| h.to_string());
            cmd = cmd.about(short).long_about(long);
        }
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for n in names {
        cmd = cmd.mut_subcommand(n, split);
    }
    cmd
}

/// `cmd` wrapped to `COLUMNS` when that holds a width (a whole number over 0), else to
/// the width of the terminal on standard output up to [`MAX_WIDTH`], else to
/// [`MAX_WIDTH`] (only standard output counts: the same text in a pipe whatever the
/// terminal behind standard error or input).
pub fn sized(cmd: Command) -> Command {
    let columns = std::env::var("COLUMNS").ok();
    let width = match columns.and_then(|c| c.trim().parse::<usize>().ok()) {
        Some(w) if w > 0 => w,
        _ => terminal_size::terminal_size_of(std::io::stdout())
            .map_or(MAX_WIDTH, |(w, _)| usize::from(w.0).min(MAX_WIDTH)),
    };
    cmd.term_width(width)
}

/// The width a terminal report is fitted to (`tpslab_report::term::fit`), columns:
/// None (full width) when standard output is not a terminal (a pipe, a file); else
/// `COLUMNS` when it holds a width, else the terminal's.
pub fn report_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let columns = std::env::var("COLUMNS").ok();
    match columns.and_then(|c| c.trim().parse::<usize>().ok()) {
        Some(w) if w > 0 => Some(w),
        _ => terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0)),
    }
}

/// Words before a `. ` that do not end a sentence.
const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "vs", "cf", "approx"];

/// Fewest words before a `: ` that ends the first clause (fewer: a label, `Built-in
/// scenario: ...`, whose clause goes on).
const COLON_WORDS: usize = 4;

/// The first clause of `text`: what comes before its first `. `, `; ` or `: ` (a colon
/// after at least [`COLON_WORDS`] words) outside parentheses, brackets and backquotes,
/// with no trailing period. None when that is the whole text (nothing to shorten).
pub fn first_clause(text: &str) -> Option<String> {
    let text = text.trim();
    let mut depth = 0i32;
    let mut quoted = false;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        match c {
            '`' => quoted = !quoted,
            '(' | '[' if !quoted => depth += 1,
            ')' | ']' if !quoted => depth -= 1,
            '.' | ';' | ':' if !quoted && depth == 0 => {
                let next = chars.get(k + 1).map(|p| p.1);
                if !matches!(next, Some(' ' | '\n')) {
                    continue;
                }
                let head = &text[..i];
                let last = head.rsplit([' ', '(']).next().unwrap_or("");
                if c == '.' && ABBREVIATIONS.contains(&last) {
                    continue;
                }
                if c == ':' && head.split_whitespace().count() < COLON_WORDS {
                    continue;
                }
                return Some(head.trim_end().to_string());
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
#[path = "help_tests.rs"]
mod tests;
