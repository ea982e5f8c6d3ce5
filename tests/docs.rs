//! The documentation kept true: README.md stays short, every relative link of README.md,
//! bench/README.md and docs/**/*.md points to a file that exists (and to a heading of it,
//! when it names one), and every `<!-- regen: COMMAND -->` block holds what COMMAND prints
//! with the binary built now (docs/regen.py rewrites them; see docs/README.md). The
//! commands of the pages' sh blocks are parsed by the command tree in a unit test of the
//! binary (`src/plan_tests/docs.rs`), which can reach it.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages of the guide: README.md, bench/README.md and every docs/**/*.md.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md"), root().join("bench/README.md")];
    let mut stack = vec![root().join("docs")];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap().flatten() {
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

fn name(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// The lines of `text` outside fenced blocks, with inline code spans blanked.
fn prose(text: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut kept = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                kept.push_str(part);
            }
        }
        out.push((n + 1, kept));
    }
    out
}

/// GitHub's anchor of a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (a repeated heading's second anchor gets `-1`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let mut s = base.clone();
        let mut k = 0;
        while set.contains(&s) {
            k += 1;
            s = format!("{base}-{k}");
        }
        set.insert(s);
    }
    set
}

/// The targets of a line's Markdown links `[text](target)`.
fn links(line: &str) -> Vec<String> {
    let mut out = vec![];
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].to_string());
        rest = &after[end..];
    }
    out
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug(" The trap in the sysctl files: `tpslab doctor`"),
        "the-trap-in-the-sysctl-files-tpslab-doctor"
    );
    assert_eq!(slug("Does tpslab need root?"), "does-tpslab-need-root");
    assert_eq!(slug("S5: a connection pool"), "s5-a-connection-pool");
    assert_eq!(
        links("see [a](b.md#c) and ![img](d.png), [x](https://e)"),
        ["b.md#c", "d.png", "https://e"]
    );
}

#[test]
fn readme_is_short() {
    let text = fs::read_to_string(root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: at most 300 (the rest goes to docs/)"
    );
    assert!(
        text.contains("(docs/README.md)"),
        "README.md links to the guide's index"
    );
}

#[test]
fn readme_sends_each_field_case_to_its_chapter() {
    // A reader with one of the five cases finds its chapter from the README.
    let text = fs::read_to_string(root().join("README.md")).unwrap();
    let chapters: Vec<String> = fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for case in 1..=5 {
        let prefix = format!("s{case}-");
        let chapter = chapters
            .iter()
            .find(|c| c.starts_with(&prefix) && c.ends_with(".md"))
            .unwrap_or_else(|| panic!("no docs/{prefix}*.md chapter"));
        assert!(
            text.contains(&format!("(docs/{chapter})")),
            "README.md does not link docs/{chapter}"
        );
    }
}

#[test]
fn relative_links_resolve() {
    let mut bad = vec![];
    let mut checked = 0;
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap();
        for (n, line) in prose(&text) {
            for target in links(&line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() {
                    page.clone()
                } else {
                    page.parent().unwrap().join(path)
                };
                let at = format!("{}:{n}: ({target})", name(&page));
                if !file.exists() {
                    bad.push(format!("{at}: no file {}", file.display()));
                    continue;
                }
                if !file
                    .canonicalize()
                    .unwrap()
                    .starts_with(root().canonicalize().unwrap())
                {
                    bad.push(format!("{at}: outside the repository"));
                }
                if let Some(a) = anchor {
                    let Ok(dest) = fs::read_to_string(&file) else {
                        bad.push(format!("{at}: an anchor into a file that is not text"));
                        continue;
                    };
                    if !anchors(&dest).contains(a) {
                        bad.push(format!("{at}: no heading #{a} in {}", name(&file)));
                    }
                }
            }
        }
    }
    assert!(
        checked >= 40,
        "only {checked} links found: the reader broke"
    );
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

/// One `<!-- regen: COMMAND -->` block: its page and line, command and body as written.
struct Regen {
    at: String,
    command: String,
    body: String,
}

fn regen_blocks(page: &Path, text: &str) -> Vec<Regen> {
    const OPEN: &str = "<!-- regen: ";
    const CLOSE: &str = "<!-- /regen -->";
    let mut out = vec![];
    let mut from = 0;
    // A marker starts a line (one quoted in prose does not).
    while let Some(i) = text[from..].find(&format!("\n{OPEN}")) {
        let start = from + i + 1;
        let line = text[..start].lines().count() + 1;
        let head_end = text[start..]
            .find(" -->\n")
            .expect("a regen marker ends with -->")
            + start;
        let command = text[start + OPEN.len()..head_end].to_string();
        let body_start = head_end + " -->\n".len();
        let close = text[body_start..]
            .find(CLOSE)
            .unwrap_or_else(|| panic!("{}:{line}: a regen block without {CLOSE}", name(page)))
            + body_start;
        out.push(Regen {
            at: format!("{}:{line}", name(page)),
            command,
            body: text[body_start..close].to_string(),
        });
        from = close + CLOSE.len();
    }
    out
}

/// What `command` prints now, as a fenced block: run by `sh -c` from the repository's
/// root with the binary under test first on PATH (as docs/regen.py runs it).
fn printed(command: &str) -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tpslab"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(root())
        .env("PATH", path)
        .output()
        .expect("run sh");
    let mut text = String::from_utf8(out.stdout).expect("UTF-8 output");
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    format!("```\n{text}```\n")
}

#[test]
fn regenerated_blocks_are_what_the_binary_prints() {
    let mut blocks = vec![];
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap();
        blocks.extend(regen_blocks(&page, &text));
    }
    assert!(
        blocks.len() >= 10,
        "only {} regen blocks found",
        blocks.len()
    );
    let mut stale = vec![];
    for b in &blocks {
        let now = printed(&b.command);
        assert!(
            now.lines().count() > 2,
            "{}: `{}` printed nothing",
            b.at,
            b.command
        );
        if now != b.body {
            stale.push(format!(
                "{}: `{}`\n--- in the page\n{}--- printed now\n{}",
                b.at, b.command, b.body, now
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "blocks that differ from what the binary prints (run python3 docs/regen.py):\n{}",
        stale.join("\n")
    );
}

#[test]
fn real_run_markers_say_when() {
    // A transcript that cannot be regenerated (root, a lab, minutes) says what ran and when.
    let mut bad = vec![];
    let mut seen = 0;
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap();
        for (n, line) in text.lines().enumerate() {
            let Some(rest) = line.trim().strip_prefix("<!-- ran: ") else {
                continue;
            };
            seen += 1;
            if !(rest.contains("UTC") || rest.contains("date not recorded")) {
                bad.push(format!("{}:{}: {line}", name(&page), n + 1));
            }
        }
    }
    assert!(seen >= 10, "only {seen} real-run markers found");
    assert!(
        bad.is_empty(),
        "real-run markers without a date:\n{}",
        bad.join("\n")
    );
}
