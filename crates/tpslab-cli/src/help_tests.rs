//! `-h` and `--help` of every command at 80 columns, and the first clause of help texts.

use super::*;

/// Every command of the tree (the root, then each subcommand, depth first) built at
/// `width` columns, with its path (`tpslab diagnose udp`).
fn every_command(width: usize) -> Vec<(String, Command)> {
    fn walk(c: &Command, path: &str, out: &mut Vec<(String, Command)>) {
        out.push((path.to_string(), c.clone()));
        for s in c.get_subcommands() {
            walk(s, &format!("{path} {}", s.get_name()), out);
        }
    }
    let mut root = crate::command("0.0.0 (test)").term_width(width);
    root.build();
    let mut out = vec![];
    walk(&root, "tpslab", &mut out);
    out
}

/// The lines of `text` wider than `width` (characters), each with its command.
fn too_wide(path: &str, flag: &str, text: &str, width: usize) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().count() > width)
        .map(|l| format!("{path} {flag} ({} columns): {l}", l.chars().count()))
        .collect()
}

#[test]
fn every_commands_help_fits_80_columns() {
    let all = every_command(80);
    assert!(all.len() > 40, "{} commands", all.len());
    let mut wide = vec![];
    for (path, mut c) in all {
        let short = c.render_help().to_string();
        let long = c.render_long_help().to_string();
        wide.extend(too_wide(&path, "-h", &short, 80));
        wide.extend(too_wide(&path, "--help", &long, 80));
    }
    assert!(
        wide.is_empty(),
        "{} lines:\n{}",
        wide.len(),
        wide.join("\n")
    );
}

#[test]
fn short_help_says_each_first_clause_and_long_help_the_whole() {
    let all = every_command(80);
    let (_, mut c) = all
        .into_iter()
        .find(|(p, _)| p == "tpslab diagnose udp")
        .expect("tpslab diagnose udp");
    let (short, long) = (
        c.render_help().to_string(),
        c.render_long_help().to_string(),
    );
    assert!(
        short.len() * 3 < long.len() * 2,
        "-h {} bytes, --help {}:\n{short}",
        short.len(),
        long.len()
    );
    // --server-cmd: its first clause in -h, the rest only in --help.
    assert!(
        short.contains("Start the user's server for each run"),
        "{short}"
    );
    assert!(!short.contains("process group"), "{short}");
    assert!(long.contains("process group"), "{long}");
    assert!(short.contains("see more with '--help'"), "{short}");
}

#[test]
fn wider_columns_give_longer_lines() {
    let longest = |w: usize| {
        let (_, mut c) = every_command(w)
            .into_iter()
            .find(|(p, _)| p == "tpslab diagnose udp")
            .unwrap();
        let text = c.render_long_help().to_string();
        text.lines().map(|l| l.chars().count()).max().unwrap()
    };
    let (narrow, wide) = (longest(80), longest(160));
    assert!(narrow <= 80 && wide > 100 && wide <= 160, "{narrow} {wide}");
}

#[test]
fn the_first_clause_ends_at_a_sentence_or_clause_outside_brackets() {
    let cases: &[(&str, Option<&str>)] = &[
        ("One clause only.", None),
        ("No period at all", None),
        (
            "Mean rate, datagrams per second (10000, 10k; 1.5M), or max; default 10000",
            Some("Mean rate, datagrams per second (10000, 10k; 1.5M), or max"),
        ),
        (
            "Start the user's server for each run: a shell command with {port}",
            Some("Start the user's server for each run"),
        ),
        // A label before the colon: the clause goes on.
        (
            "Built-in scenario: diagnose only, no verification run",
            None,
        ),
        (
            "Print the script on standard output, e.g. `a > b. c`. Then more.",
            Some("Print the script on standard output, e.g. `a > b. c`"),
        ),
        (
            "A size in bytes (1.5 KiB. or so). Rest.",
            Some("A size in bytes (1.5 KiB. or so)"),
        ),
        (
            "HOST:PORT of the server. Its rest",
            Some("HOST:PORT of the server"),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(first_clause(text).as_deref(), *want, "{text:?}");
    }
}
