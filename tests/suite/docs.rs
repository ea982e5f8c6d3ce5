//! The documentation kept true: README.md stays short, every relative link of README.md,
//! bench/README.md and docs/**/*.md points to a file that exists (and to a heading of it,
//! when it names one), and every `<!-- regen: COMMAND -->` block holds what COMMAND prints
//! with the binary built now (docs/regen.py rewrites them; see docs/README.md). The
//! commands of the pages' sh blocks are parsed by the command tree in a unit test of the
//! command-line crate (`crates/tpslab-cli/src/plan_tests/docs.rs`), which can reach it.

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

/// One `<!-- regen lab: sh docs/transcripts/NAME.sh ARGS [| FILTER] -->` block (a run that
/// needs root and a lab, re-run by `docs/regen.py --lab`): where, the `ran:` line before
/// it, the script's name and arguments, the filter and the body as written.
struct LabBlock {
    at: String,
    ran: Option<String>,
    command: String,
    name: String,
    args: String,
    filter: Option<String>,
    body: String,
}

fn lab_blocks(page: &Path, text: &str) -> Vec<LabBlock> {
    const OPEN: &str = "<!-- regen lab: ";
    const CLOSE: &str = "<!-- /regen -->";
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    for (n, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix(OPEN) else {
            continue;
        };
        let at = format!("{}:{}", name(page), n + 1);
        let command = rest
            .strip_suffix(" -->")
            .unwrap_or_else(|| panic!("{at}: a lab marker ends with -->"))
            .to_string();
        let (script, filter) = match command.split_once(" | ") {
            Some((s, f)) => (s.trim(), Some(f.trim().to_string())),
            None => (command.trim(), None),
        };
        let tail = script
            .strip_prefix("sh docs/transcripts/")
            .unwrap_or_else(|| panic!("{at}: a lab block runs `sh docs/transcripts/NAME.sh`"));
        let (file, args) = tail.split_once(' ').unwrap_or((tail, ""));
        let script_name = file
            .strip_suffix(".sh")
            .unwrap_or_else(|| panic!("{at}: {file} is not a .sh script"));
        let end = lines[n + 1..]
            .iter()
            .position(|l| *l == CLOSE)
            .unwrap_or_else(|| panic!("{at}: a lab block without {CLOSE}"))
            + n
            + 1;
        let mut body = lines[n + 1..end].join("\n");
        if !body.is_empty() {
            body.push('\n');
        }
        out.push(LabBlock {
            at,
            ran: (n > 0)
                .then(|| lines[n - 1])
                .filter(|l| l.starts_with("<!-- ran: "))
                .map(str::to_string),
            command: command.clone(),
            name: script_name.to_string(),
            args: args.trim().to_string(),
            filter,
            body,
        });
    }
    out
}

/// The kept record of a lab block's run (docs/regen.py's `record_name`): NAME.json.gz, or
/// NAME_ARGS.json.gz with the arguments' runs of other than letters and digits as `-`.
fn record_of(b: &LabBlock) -> PathBuf {
    let mut slug = String::new();
    for c in b.args.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let file = if slug.is_empty() {
        format!("{}.json.gz", b.name)
    } else {
        format!("{}_{slug}.json.gz", b.name)
    };
    root().join("docs/transcripts").join(file)
}

fn all_lab_blocks() -> Vec<LabBlock> {
    let mut blocks = vec![];
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap();
        blocks.extend(lab_blocks(&page, &text));
    }
    blocks
}

#[test]
fn lab_blocks_name_their_script_and_when_it_ran() {
    let blocks = all_lab_blocks();
    assert!(blocks.len() >= 25, "only {} lab blocks found", blocks.len());
    let mut bad = vec![];
    for b in &blocks {
        let script = root().join(format!("docs/transcripts/{}.sh", b.name));
        if !script.exists() {
            bad.push(format!("{}: no {}", b.at, script.display()));
        }
        match &b.ran {
            Some(ran) if ran.contains(" UTC") => {}
            _ => bad.push(format!(
                "{}: a lab block follows a `<!-- ran: ...; DATE UTC; ... -->` line",
                b.at
            )),
        }
        if !b.body.starts_with("```\n") || !b.body.ends_with("```\n") || b.body.lines().count() < 3
        {
            bad.push(format!(
                "{}: `{}`: an empty or unfenced block",
                b.at, b.command
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn lab_blocks_are_what_report_prints_of_their_kept_records() {
    // A lab run is kept as its record: the current code's report of it, through the
    // block's filter, must be the block (after a change to a report's text:
    // `python3 docs/regen.py --records`; after a change to what a run does: `--lab`).
    let dir = std::env::temp_dir().join(format!("tpslab-docs-records-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    let mut stale = vec![];
    for (i, b) in all_lab_blocks().iter().enumerate() {
        let rec = record_of(b);
        if !rec.exists() {
            continue;
        }
        let json = dir.join(format!("{i}.json"));
        let unzip = Command::new("gzip")
            .arg("-dc")
            .arg(&rec)
            .output()
            .expect("run gzip");
        assert!(unzip.status.success(), "gzip -dc {}", rec.display());
        fs::write(&json, unzip.stdout).unwrap();
        let report = format!("tpslab report '{}'", json.display());
        let command = match &b.filter {
            Some(f) => format!("{report} | {f}"),
            None => report,
        };
        let now = printed(&command);
        checked += 1;
        if now != b.body {
            stale.push(format!(
                "{}: `{}` (record {})\n--- in the page\n{}--- the report of its record now\n{}",
                b.at,
                b.command,
                name(&rec),
                b.body,
                now
            ));
        }
    }
    let _ = fs::remove_dir_all(&dir);
    // No record kept for a block that is gone (or whose command changed).
    let used: BTreeSet<PathBuf> = all_lab_blocks().iter().map(record_of).collect();
    let orphans: Vec<String> = fs::read_dir(root().join("docs/transcripts"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz") && !used.contains(p))
        .map(|p| name(&p))
        .collect();
    assert!(
        orphans.is_empty(),
        "records no lab block uses (delete them): {orphans:?}"
    );
    assert!(
        checked >= 15,
        "only {checked} lab blocks with a kept record"
    );
    assert!(
        stale.is_empty(),
        "lab blocks that differ from the report of their record \
         (python3 docs/regen.py --records):\n{}",
        stale.join("\n")
    );
}
