//! The documentation's command lines against the real command tree: every `tpslab` command
//! in a ```` ```sh ```` block of README.md, bench/README.md and docs/**/*.md must parse
//! with the current flags (a renamed flag, a gone subcommand or a value of a form the
//! flag no longer takes fails here, naming the page and line). Parsing only: the plans of
//! these lines name files and servers that exist where the example ran.
//!
//! Commands quoted in the prose (a code span starting `tpslab `, often a synopsis with
//! placeholders such as `HOST:PORT` or `[--min DUR]`) are checked more loosely: each
//! subcommand they name must exist and each `--flag` must be one of the command they
//! reach.
//!
//! A line's `tpslab` may follow a prefix (`ip netns exec NS`, `chrt -f 5`), and
//! `cargo run --release --` stands for `tpslab`; the command ends at a shell operator
//! (`&`, `;`, `|`, `&&`, a redirection). Lines ending in `\` continue on the next; the
//! body of a here-document is not shell. `$!` (the PID of the last background job) is read
//! as a PID.

use super::*;
use std::path::Path;

/// One command line found in a page: where, and its words after `tpslab`.
#[derive(Debug, PartialEq)]
struct DocCommand {
    place: String,
    words: Vec<String>,
}

/// The pages whose sh blocks are checked, relative to the repository's root.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("bench/README.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("docs/ exists").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Whether `w` ends the command: a shell operator or a redirection.
fn is_operator(w: &str) -> bool {
    matches!(w, "&" | ";" | "|" | "||" | "&&")
        || w.starts_with('>')
        || w.starts_with('<')
        || w.starts_with("2>")
        || w.starts_with("&>")
}

/// The `tpslab` commands of one shell line (already joined across `\`), as words.
fn commands_of(line: &str) -> Vec<Vec<String>> {
    let Some(words) = shlex::split(line) else {
        return vec![];
    };
    let mut out = vec![];
    let mut i = 0;
    while i < words.len() {
        let start = if words[i] == "tpslab" || words[i].ends_with("/tpslab") {
            Some(i + 1)
        } else if words[i..].starts_with(&["cargo", "run", "--release", "--"].map(String::from)) {
            Some(i + 4)
        } else {
            None
        };
        let Some(start) = start else {
            i += 1;
            continue;
        };
        let mut cmd = vec![];
        let mut j = start;
        while j < words.len() && !is_operator(&words[j]) {
            let w = &words[j];
            j += 1;
            if let Some(w) = w.strip_suffix(';') {
                cmd.push(w.to_string());
                break;
            }
            cmd.push(if w == "$!" { "4242".into() } else { w.clone() });
        }
        out.push(cmd);
        i = j;
    }
    out
}

/// Every `tpslab` command in the sh blocks of `text`, placed as `name:line`.
fn doc_commands(name: &str, text: &str) -> Vec<DocCommand> {
    let mut out = vec![];
    let mut in_sh = false;
    let mut heredoc: Option<String> = None;
    let mut pending = String::new();
    let mut pending_at = 0;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            pending.clear();
            continue;
        }
        if !in_sh {
            continue;
        }
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        if pending.is_empty() {
            pending_at = n + 1;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        if let Some(pos) = pending.find("<<") {
            let tag = pending[pos + 2..]
                .trim_start_matches('-')
                .trim()
                .trim_matches(|c| c == '\'' || c == '"');
            heredoc = Some(tag.split_whitespace().next().unwrap_or("").to_string());
        }
        for words in commands_of(&pending) {
            out.push(DocCommand {
                place: format!("{name}:{pending_at}"),
                words,
            });
        }
        pending.clear();
    }
    out
}

#[test]
fn a_shell_line_gives_its_tpslab_commands() {
    let page = "text\n```sh\nip netns exec srv tpslab serve udp --bind 0.0.0.0:9000 &\n\
                tpslab watch --pid $! --duration 60s --json s.json 2>/dev/null; echo done\n\
                cargo run --release -- diagnose\ncat > p.toml <<'EOF'\ntpslab = 1\nEOF\n\
                tpslab tcp --lab-rtt 30ms \\\n  --duration 5s | head\n```\n\
                ```\ntpslab not shell\n```\n";
    let got = doc_commands("p.md", page);
    let words: Vec<Vec<&str>> = got
        .iter()
        .map(|c| c.words.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(
        words,
        vec![
            vec!["serve", "udp", "--bind", "0.0.0.0:9000"],
            vec![
                "watch",
                "--pid",
                "4242",
                "--duration",
                "60s",
                "--json",
                "s.json"
            ],
            vec!["diagnose"],
            vec!["tcp", "--lab-rtt", "30ms", "--duration", "5s"],
        ]
    );
    assert_eq!(got[3].place, "p.md:9");
}

/// The command tree's verdict on `words` (after `tpslab`): None when it parses.
fn parse_error(words: &[String]) -> Option<String> {
    let args: Vec<OsString> = std::iter::once(OsString::from("tpslab"))
        .chain(words.iter().map(OsString::from))
        .collect();
    let mut cmd = Cli::command();
    match cmd
        .try_get_matches_from_mut(&args)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(_) => None,
        Err(e) => Some(usage_error(&cmd, e, &args)),
    }
}

#[test]
fn a_renamed_flag_in_a_page_fails() {
    let page =
        "```sh\ntpslab run udp --rate 10k --duration 1s\ntpslab run udp --rcvbuff 2MiB\n```\n";
    let cmds = doc_commands("p.md", page);
    assert_eq!(parse_error(&cmds[0].words), None);
    let e = parse_error(&cmds[1].words).expect("--rcvbuff is not a flag");
    assert!(e.contains("--rcvbuff"), "{e}");
}

#[test]
fn every_documented_command_line_parses() {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut all = vec![];
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        all.extend(doc_commands(&name, &text));
    }
    let pages_found = all.len();
    all.extend(transcript_commands(&root));
    // The guide's sh blocks hold dozens of commands; a handful means the reader broke.
    assert!(
        pages_found >= 30 && all.len() >= pages_found + 25,
        "only {} commands found: {all:?}",
        all.len()
    );
    let bad: Vec<String> = all
        .iter()
        .filter_map(|c| {
            parse_error(&c.words).map(|e| format!("{}: tpslab {}: {e}", c.place, c.words.join(" ")))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "documented commands the CLI refuses:\n{}",
        bad.join("\n")
    );
}

/// The `tpslab` commands of the scripts docs/regen.py runs for the pages' lab blocks
/// (`<!-- regen lab: sh docs/transcripts/NAME.sh ARGS | FILTER -->`), placed as
/// `docs/transcripts/NAME.sh:line`; a script's `"$@"` stands for the ARGS of each block
/// that runs it, and a one-letter variable (`$s`, `$w`: the scripts keep PIDs in them) for
/// a PID.
fn transcript_commands(root: &Path) -> Vec<DocCommand> {
    let mut calls: Vec<(String, Vec<String>)> = vec![];
    for page in pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("<!-- regen lab: sh docs/transcripts/") else {
                continue;
            };
            let script = rest
                .split(" | ")
                .next()
                .unwrap_or(rest)
                .trim_end_matches(" -->");
            let words = shlex::split(script).unwrap_or_default();
            if let Some((file, args)) = words.split_first() {
                calls.push((file.clone(), args.to_vec()));
            }
        }
    }
    let mut out = vec![];
    let mut files: Vec<&String> = calls.iter().map(|(f, _)| f).collect();
    files.sort();
    files.dedup();
    for file in files {
        let name = format!("docs/transcripts/{file}");
        let text = std::fs::read_to_string(root.join(&name))
            .unwrap_or_else(|e| panic!("{name}, run by a lab block: {e}"));
        // The script is shell throughout: read as one sh block (its line numbers kept).
        for c in doc_commands(&name, &format!("```sh\n{text}```\n")) {
            let at = c.place.rsplit_once(':').map(|(p, l)| {
                let l: usize = l.parse().unwrap_or(1);
                format!("{p}:{}", l.saturating_sub(1))
            });
            let place = at.unwrap_or(c.place.clone());
            let pid = |w: &String| {
                let is_pid =
                    w.len() == 2 && w.starts_with('$') && w.as_bytes()[1].is_ascii_lowercase();
                if is_pid {
                    "4242".to_string()
                } else {
                    w.clone()
                }
            };
            let c = DocCommand {
                place: c.place.clone(),
                words: c.words.iter().map(pid).collect(),
            };
            if c.words.iter().any(|w| w == "$@") {
                for (_, args) in calls.iter().filter(|(f, _)| f == file) {
                    let words = c
                        .words
                        .iter()
                        .flat_map(|w| {
                            if w == "$@" {
                                args.clone()
                            } else {
                                vec![w.clone()]
                            }
                        })
                        .collect();
                    out.push(DocCommand {
                        place: place.clone(),
                        words,
                    });
                }
            } else {
                out.push(DocCommand {
                    place,
                    words: c.words,
                });
            }
        }
    }
    out
}

/// The code spans of `text` outside fenced blocks (a span may wrap across lines), with
/// the line each starts on.
fn code_spans(text: &str) -> Vec<(usize, String)> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            prose.push('\n');
            continue;
        }
        if !fenced {
            prose.push_str(line);
        }
        prose.push('\n');
    }
    let mut out = vec![];
    let mut line = 1;
    for (i, part) in prose.split('`').enumerate() {
        if i % 2 == 1 {
            out.push((line, part.replace('\n', " ")));
        }
        line += part.matches('\n').count();
    }
    out
}

/// What a quoted command names that the command tree does not have: a subcommand
/// (`tpslab probe idel`) or a `--flag` of the command reached (`tpslab bdp --bufer`).
fn unknown_in_synopsis(words: &[String]) -> Vec<String> {
    // Built: global flags propagated to the subcommands, `help` added.
    let mut root = Cli::command();
    root.build();
    let mut cmd = &root;
    let mut bad = vec![];
    let mut descending = true;
    for w in words {
        let w = w.trim_start_matches('[').trim_end_matches(']');
        if is_operator(w) {
            break;
        }
        if let Some(flag) = w.strip_prefix("--") {
            descending = false;
            let name = flag.split('=').next().unwrap_or(flag);
            let known = name.is_empty()
                || ["help", "version", "quiet"].contains(&name)
                || cmd.get_arguments().any(|a| a.get_long() == Some(name));
            if !known {
                bad.push(format!("--{name} (not a flag of `{}`)", cmd.get_name()));
            }
        } else if descending && cmd.has_subcommands() {
            match cmd.find_subcommand(w) {
                Some(sub) => cmd = sub,
                None if w.chars().all(|c| c.is_ascii_lowercase() || c == '-') => {
                    bad.push(format!("{w} (not a subcommand of `{}`)", cmd.get_name()));
                    descending = false;
                }
                // A placeholder or an alternation (`tcp|http|udp`): nothing more to check.
                None => descending = false,
            }
        } else {
            descending = false;
        }
    }
    bad
}

#[test]
fn a_quoted_synopsis_is_checked_word_by_word() {
    let words = |s: &str| shlex::split(s).unwrap();
    assert!(unknown_in_synopsis(&words(
        "probe idle HOST:PORT [--min DUR] --lab-on-idle drop"
    ))
    .is_empty());
    assert!(unknown_in_synopsis(&words("ramp tcp|http|udp")).is_empty());
    assert_eq!(
        unknown_in_synopsis(&words("bdp --rtt 30ms --bufer 64KiB")),
        ["--bufer (not a flag of `bdp`)"]
    );
    assert_eq!(
        unknown_in_synopsis(&words("probe idel HOST:PORT")),
        ["idel (not a subcommand of `probe`)"]
    );
    let spans = code_spans("a `tpslab run\nudp` b\n```\n`x`\n```\nc `tpslab bdp`\n");
    assert_eq!(
        spans,
        [
            (1, "tpslab run udp".to_string()),
            (6, "tpslab bdp".to_string())
        ]
    );
}

#[test]
fn every_command_quoted_in_the_prose_names_real_subcommands_and_flags() {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let top: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let mut seen = 0;
    let mut bad = vec![];
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        for (line, span) in code_spans(&text) {
            // `tpslab CMD ...`, or `CMD SUB --flag ...` naming a command without the
            // binary (prose often does: `serve udp --threads 4`).
            let rest = match span.strip_prefix("tpslab ") {
                Some(rest) => rest,
                None if span.contains(" --")
                    && top
                        .iter()
                        .any(|t| span.split(' ').next() == Some(t.as_str())) =>
                {
                    span.as_str()
                }
                None => continue,
            };
            seen += 1;
            // Markdown escapes `|` in tables; a span that is not shell (an odd quote) is
            // read word by word.
            let rest = rest.replace("\\|", "|");
            let words = shlex::split(&rest)
                .unwrap_or_else(|| rest.split_whitespace().map(String::from).collect());
            for w in unknown_in_synopsis(&words) {
                bad.push(format!("{name}:{line}: `{span}`: {w}"));
            }
        }
    }
    assert!(seen >= 50, "only {seen} quoted commands found");
    assert!(
        bad.is_empty(),
        "quoted commands the CLI does not have:\n{}",
        bad.join("\n")
    );
}
