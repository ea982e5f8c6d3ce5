//! ARCHITECTURE.md against the code: every file or folder it names (a `code span` ending
//! in `.rs` or `/`) exists, and every Rust name it gives (`Format::ALL`, `out::emit`,
//! `Facts.blocked_on`, `validate()`) is still a word of the workspace's code, so a page that
//! sends a newcomer to a file or a type that moved fails here instead.
//!
//! Paths are taken from the repository's root, then under `crates/`, then as the end of a
//! source file's path (`proto/mod.rs`); a bare file name (`emit.rs`) from anywhere under a
//! crate's `src/` or `tests/`. `CMD` in a span is a placeholder.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The workspace's source files: `src/`, `tests/` and every crate's `src/` and `tests/`.
fn sources() -> Vec<PathBuf> {
    let mut files = vec![];
    rust_files(&root().join("src"), &mut files);
    rust_files(&root().join("tests"), &mut files);
    for c in fs::read_dir(root().join("crates")).unwrap().flatten() {
        rust_files(&c.path().join("src"), &mut files);
        rust_files(&c.path().join("tests"), &mut files);
    }
    files
}

/// Every identifier in the sources (but this file's, which names gone ones on purpose).
fn words(files: &[PathBuf]) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    let this = root().join(file!());
    for f in files.iter().filter(|f| **f != this) {
        let text = fs::read_to_string(f).unwrap();
        for w in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !w.is_empty() {
                set.insert(w.to_string());
            }
        }
    }
    set
}

/// The page's code spans, with their line numbers (fenced blocks left out).
fn spans(page: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    let mut fenced = false;
    for (n, line) in page.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            out.push((n + 1, inside.to_string()));
        }
    }
    out
}

/// Whether `span` names a file or folder that exists.
fn path_exists(span: &str, files: &[PathBuf]) -> bool {
    let r = root();
    if !span.contains('/') {
        return files
            .iter()
            .any(|f| f.file_name().is_some_and(|n| n == span));
    }
    let s = span.trim_end_matches('/');
    // A path inside a crate the text has named (`proto/mod.rs`, `verdict/`).
    let inside = files.iter().any(|f| {
        f.to_str()
            .is_some_and(|f| f.ends_with(&format!("/{s}")) || f.contains(&format!("/{s}/")))
    });
    r.join(s).exists() || r.join("crates").join(s).exists() || inside
}

/// The Rust names of a span that is code: `a::b::C`, `Facts.blocked_on`, `check()`,
/// `protocols!`; None for flags, shell, commands and other text.
fn names(span: &str) -> Option<Vec<String>> {
    let s = span.trim_end_matches("()").trim_end_matches('!');
    let ok = !s.is_empty()
        && s.chars().all(|c| c.is_alphanumeric() || "_:.-".contains(c))
        && s.chars().next().is_some_and(|c| c.is_alphabetic())
        && !s.ends_with(':');
    if !ok {
        return None;
    }
    Some(
        s.split([':', '.'])
            .filter(|p| !p.is_empty())
            .map(|p| p.replace('-', "_"))
            .collect(),
    )
}

/// Words the page uses in code spans that are not Rust names of this workspace.
const NOT_NAMES: &[&str] = &["O_EXCL", "unsafe", "sysctl", "Args"];

#[test]
fn every_file_and_name_the_architecture_page_gives_exists() {
    let page = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let files = sources();
    let known = words(&files);
    let mut missing = vec![];
    let mut checked = (0, 0);
    for (line, span) in spans(&page) {
        if span.contains("CMD") || span.starts_with('-') || span.contains(' ') {
            continue;
        }
        if span.ends_with(".rs") || span.ends_with('/') || span.contains("/src") {
            checked.0 += 1;
            if !path_exists(&span, &files) {
                missing.push(format!("line {line}: no file or folder `{span}`"));
            }
            continue;
        }
        if NOT_NAMES.contains(&span.as_str()) {
            continue;
        }
        let Some(parts) = names(&span) else {
            continue;
        };
        checked.1 += 1;
        for p in parts {
            if !known.contains(&p) {
                missing.push(format!("line {line}: `{span}`: no `{p}` in the code"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md:\n{}",
        missing.join("\n")
    );
    // The page names dozens of each; a parser that found none would check nothing.
    assert!(checked.0 > 40 && checked.1 > 40, "checked {checked:?}");
}

#[test]
fn a_moved_file_or_a_gone_name_is_caught() {
    let files = sources();
    let known = words(&files);
    assert!(path_exists("tpslab-run/src/outfile.rs", &files));
    assert!(path_exists("emit.rs", &files));
    assert!(!path_exists("src/metrics/http.rs", &files));
    assert!(!path_exists("nonexistent.rs", &files));
    assert!(path_exists("proto/mod.rs", &files));
    assert!(!path_exists("tpslab-engine/src/observe.rs", &files));
    let gone = names("report_cmd::FormatArg").unwrap();
    assert!(gone.iter().any(|p| !known.contains(p)), "{gone:?}");
    let here = names("tpslab_analysis::verdict::facts_of").unwrap();
    assert!(here.iter().all(|p| known.contains(p)), "{here:?}");
    assert_eq!(names("--json"), None);
    assert_eq!(names("/proc/*/fd"), None);
    assert_eq!(
        spans("a `x` b `y::z`\n```\n`no`\n```\n`w`"),
        [(1, "x".into()), (1, "y::z".into()), (5, "w".into())]
    );
}

/// The integration tests are one binary per crate (issue 55: one compile of the shared
/// helpers and one link instead of one per file): every file of tests/suite, and of each
/// crate's tests/, is a module declared in that folder's main.rs (a file left out would
/// never run); no test file sits beside tests/suite in tests/, and a crate whose tests/
/// holds a test file says `autotests = false` (else cargo would build each file as a binary of its own).
#[test]
fn every_integration_test_is_a_module_of_its_crates_one_binary() {
    let loose: Vec<String> = fs::read_dir(root().join("tests"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    assert!(
        loose.is_empty(),
        "test files outside tests/suite (move them there and declare them in main.rs): {loose:?}"
    );
    let mut folders = vec![root().join("tests/suite")];
    for e in fs::read_dir(root().join("crates")).unwrap().flatten() {
        let tests = e.path().join("tests");
        let has_rs = fs::read_dir(&tests).is_ok_and(|d| {
            d.flatten()
                .any(|f| f.file_name().to_string_lossy().ends_with(".rs"))
        });
        if has_rs {
            let manifest = fs::read_to_string(e.path().join("Cargo.toml")).unwrap();
            assert!(
                manifest.lines().any(|l| l.trim() == "autotests = false"),
                "{} has tests/ but no `autotests = false`",
                e.path().display()
            );
            folders.push(tests);
        }
    }
    let mut missing = vec![];
    for folder in &folders {
        let main = fs::read_to_string(folder.join("main.rs"))
            .unwrap_or_else(|e| panic!("{}/main.rs: {e}", folder.display()));
        let declared: BTreeSet<String> = main
            .lines()
            .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
            .map(str::to_string)
            .collect();
        for e in fs::read_dir(folder).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if let Some(stem) = n.strip_suffix(".rs").filter(|s| *s != "main") {
                if !declared.contains(stem) {
                    missing.push(folder.join(n).display().to_string());
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not declared in their main.rs: {missing:?}"
    );
}

/// The two registries of the request/reply protocols, the only production files that may
/// match on a `Proto` (besides the renderers): the plan crate's (each variant's name,
/// transport, request and checks) and the engine's (each variant's `Exchange`).
const PROTO_REGISTRIES: [&str; 2] = [
    "crates/tpslab-plan/src/proto.rs",
    "crates/tpslab-engine/src/client/proto/mod.rs",
];

/// The two registries of a capacity search's step loads, the only production files that
/// may match on a `CapacityLoad` (besides the renderers): the plan crate's (each load's
/// window, warm-up, target, words and checks) and the run's (each load's engine).
const CAPACITY_LOAD_REGISTRIES: [&str; 2] = [
    "crates/tpslab-plan/src/capacity/load.rs",
    "crates/tpslab-run/src/capacity.rs",
];

/// The renderers, which may say a protocol's own words (`crates/tpslab-report/src/`).
const RENDERERS: &str = "crates/tpslab-report/src/";

/// A file's production code: `//` comments blanked (line numbers kept), and nothing from
/// its first `#[cfg(test)]` on (the repo keeps tests at a file's end or in `*_tests.rs`).
fn production_code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = match line.find("//") {
            // A `//` inside a string literal (a URL) is not a comment: an odd number of
            // quotes before it means it is inside one.
            Some(i) if line[..i].matches('"').count() % 2 == 0 => &line[..i],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The end of the balanced group (`(..)` or `{..}`) opening at `b[i]`.
fn group_end(b: &[u8], i: usize) -> usize {
    let (open, close) = (b[i], if b[i] == b'(' { b')' } else { b'}' });
    let mut depth = 0usize;
    for (j, &c) in b.iter().enumerate().skip(i) {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return j + 1;
            }
        }
    }
    b.len()
}

/// The `(` of the parenthesised group (a tuple, a call, `Some(..)`) that holds `code[at..]`,
/// None when a block or a statement ends first.
fn enclosing_paren(b: &[u8], at: usize) -> Option<usize> {
    let (mut parens, mut braces) = (0usize, 0usize);
    for i in (0..at).rev() {
        match b[i] {
            b')' => parens += 1,
            b'(' if parens == 0 => return Some(i),
            b'(' => parens -= 1,
            b'}' => braces += 1,
            b'{' if braces == 0 => return None,
            b'{' => braces -= 1,
            b';' if parens == 0 && braces == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The lines (1-based) of `code` that match on a protocol: a `Proto::X` or `RampProto::X`
/// (with its fields) in a pattern: a `match` arm (`=>`, a guard's `if`), an or-pattern
/// (`|`), an `if let`/`let .. else` (`Proto::X(h) =`), or inside `matches!(..)`. A variant
/// made (`Proto::Http(req)` as a value) is not a match.
fn proto_matches(code: &str) -> Vec<usize> {
    enum_matches(code, "Proto", &["Proto", "RampProto"])
}

/// The lines (1-based) of `code` that match on a variant of an enum named one of `names`,
/// each ending in `tail` (`Proto`: `Proto::X`, `RampProto::X`), as [`proto_matches`] tells
/// a pattern from a value.
fn enum_matches(code: &str, tail: &str, names: &[&str]) -> Vec<usize> {
    let b = code.as_bytes();
    let mut lines = vec![];
    let mut from = 0;
    let sep = format!("{tail}::");
    while let Some(k) = code[from..].find(&sep) {
        let at = from + k;
        from = at + sep.len();
        let start = code[..at]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        if !names.contains(&&code[start..at + tail.len()]) {
            continue;
        }
        let mut i = at + sep.len();
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$') {
            i += 1;
        }
        let skip_ws = |mut i: usize| {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            i
        };
        i = skip_ws(i);
        if i < b.len() && (b[i] == b'(' || b[i] == b'{') {
            i = skip_ws(group_end(b, i));
        }
        // In a tuple or a `Some(..)`: what follows the group (`(None, Proto::Udp) =>`).
        let mut inner = at;
        while i < b.len() && (b[i] == b')' || b[i] == b',') {
            let Some(open) = enclosing_paren(b, inner) else {
                break;
            };
            inner = open;
            i = skip_ws(group_end(b, open));
        }
        let rest = &code[i..];
        let in_pattern = rest.starts_with("=>")
            || (rest.starts_with('|') && !rest.starts_with("||"))
            || (rest.starts_with('=') && !rest.starts_with("=="))
            || rest.starts_with("if ");
        let in_matches = code[..at].rfind("matches!(").is_some_and(|m| {
            let between = &code[m + 8..at];
            between.matches('(').count() > between.matches(')').count()
        });
        if in_pattern || in_matches {
            lines.push(code[..at].matches('\n').count() + 1);
        }
    }
    lines
}

/// Every production file's path from the repository and its production code, but the
/// test files (`*_tests.rs`, `tests.rs`, a `tests` or `plan_tests` folder).
fn production_files() -> Vec<(String, String)> {
    let mut files = vec![];
    rust_files(&root().join("src"), &mut files);
    for c in fs::read_dir(root().join("crates")).unwrap().flatten() {
        rust_files(&c.path().join("src"), &mut files);
    }
    let mut out = vec![];
    for f in &files {
        let rel = f
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .to_string();
        let name = f.file_name().unwrap().to_string_lossy();
        let test_file = name.ends_with("_tests.rs")
            || name == "tests.rs"
            || rel.split('/').any(|d| d == "tests" || d == "plan_tests");
        if !test_file {
            out.push((rel, production_code(&fs::read_to_string(f).unwrap())));
        }
    }
    out
}

/// `file:line` of every match `matches` finds in production code outside `registries` and
/// the renderers.
fn matches_outside(registries: &[&str], matches: impl Fn(&str) -> Vec<usize>) -> Vec<String> {
    let mut found = vec![];
    for (rel, code) in production_files() {
        if registries.contains(&rel.as_str()) || rel.starts_with(RENDERERS) {
            continue;
        }
        found.extend(matches(&code).into_iter().map(|l| format!("{rel}:{l}")));
    }
    found
}

#[test]
fn the_protocol_is_matched_on_only_in_its_registries_and_the_renderers() {
    let found = matches_outside(&PROTO_REGISTRIES, proto_matches);
    assert!(
        found.is_empty(),
        "the protocol matched on outside {PROTO_REGISTRIES:?} and the renderers (give the Proto a method in tpslab-plan/src/proto.rs instead): {found:?}"
    );
}

#[test]
fn a_capacity_searchs_load_is_matched_on_only_in_its_registries_and_the_renderers() {
    let found = matches_outside(&CAPACITY_LOAD_REGISTRIES, |code| {
        enum_matches(code, "CapacityLoad", &["CapacityLoad"])
    });
    assert!(
        found.is_empty(),
        "a capacity search's load matched on outside {CAPACITY_LOAD_REGISTRIES:?} and the renderers (give the CapacityLoad a method in tpslab-plan/src/capacity/load.rs instead): {found:?}"
    );
    // The same finder sees the kinds of match the protocol's test is shown.
    for m in [
        "match l {\n    CapacityLoad::Udp(r) => 1,\n}",
        "let CapacityLoad::Udp(first) = &rec.plan.load else { return };",
        "let s = matches!(&c.plan.load, CapacityLoad::Tcp(t) if t.builtin.is_some());",
    ] {
        assert_eq!(
            enum_matches(m, "CapacityLoad", &["CapacityLoad"]).len(),
            1,
            "{m}"
        );
    }
    let made = "plan.load = CapacityLoad::Udp(run);";
    assert!(enum_matches(made, "CapacityLoad", &["CapacityLoad"]).is_empty());
}

#[test]
fn a_match_on_the_protocol_is_told_from_a_protocol_made() {
    let matched = [
        "match p {\n    Proto::Tcp => 1,\n}",
        "match p {\n    Proto::Http(h) => h,\n}",
        "match p {\n    Proto::Tcp | Proto::Udp => 1,\n}",
        "match (a, &p) {\n    (None, RampProto::Udp) => 1,\n}",
        "match p {\n    Proto::Http(h) if h.url.is_empty() => 1,\n}",
        "match p {\n    Proto::Redis { .. } => 1,\n}",
        "if let Proto::Http(h) = &mut plan.proto {}",
        "let Proto::Http(h) = &plan.proto else { return };",
        "let http = matches!(plan.proto, Proto::Http(_));",
        "let t = matches!(p, tpslab_plan::proto::Proto::Tcp);",
        "match (p, b) {\n    (Proto::Http(h), true) => 1,\n}",
        "match p {\n    Some(Proto::Tcp) => 1,\n}",
    ];
    for m in matched {
        assert_eq!(
            proto_matches(&production_code(m)).len(),
            1 + m.matches(" | ").count(),
            "{m}"
        );
    }
    let made = [
        "let p = Proto::Tcp;",
        "setup(Proto::Http(req), outputs)?",
        "Ok(Proto::Redis(args))",
        "x = Proto::from_flag(&a.protocol)?;",
        "if p == Proto::Tcp {}",
        "// match p { Proto::Tcp => 1 }",
        "use tpslab_plan::proto::Proto;",
        "match p { DbProtocol::Redis => 1 }",
        "match x {\n    Some(y) => f(Proto::Tcp, y),\n}",
        "let (a, b) = (x, Proto::Udp);",
        "assert_eq!(p, Proto::Tcp);",
        "#[cfg(test)]\nmod tests { fn f() { if let Proto::Tcp = p {} } }",
    ];
    for m in made {
        assert!(proto_matches(&production_code(m)).is_empty(), "{m}");
    }
    // The line is the match's.
    assert_eq!(
        proto_matches("fn f() {\n    match p {\n        Proto::Tcp => 1,\n    }\n}"),
        vec![3]
    );
}

/// A production function is at most this many lines, from its `fn` to its closing brace
/// (issue 56: functions grew while files were split; a longer one becomes named steps).
const MAX_FN_LINES: usize = 120;

/// Production functions still over MAX_FN_LINES, being split: (file, name). A listed one
/// that is no longer over it fails too, so the list only shrinks.
const KNOWN_LONG: &[(&str, &str)] = &[];

/// The functions with a body in `code` (comments, literals and `#[cfg(test)]` items
/// already blanked: `import_graph::modules` gives it so): (name, line of its `fn`, lines
/// from that line to its closing brace's). A declaration without a body (`fn f();` in a
/// trait) and a function pointer type (`fn(u8)`) are not functions.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let line_at = |i: usize| code[..i].matches('\n').count() + 1;
    let mut out = vec![];
    let mut from = 0;
    while let Some(k) = code[from..].find("fn") {
        let at = from + k;
        from = at + 2;
        let keyword =
            (at == 0 || !word(b[at - 1])) && b.get(at + 2).is_some_and(|c| c.is_ascii_whitespace());
        if !keyword {
            continue;
        }
        let mut j = at + 2;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        let name_start = j;
        while j < b.len() && word(b[j]) {
            j += 1;
        }
        if j == name_start {
            continue;
        }
        let name = code[name_start..j].to_string();
        // The body's `{`: the first outside the signature's parentheses and brackets,
        // unless a `;` ends the declaration first.
        let mut depth = 0i32;
        let open = loop {
            match b.get(j) {
                None => break None,
                Some(b'(' | b'[') => depth += 1,
                Some(b')' | b']') => depth -= 1,
                Some(b';') if depth == 0 => break None,
                Some(b'{') if depth == 0 => break Some(j),
                _ => {}
            }
            j += 1;
        };
        let Some(open) = open else {
            continue;
        };
        let first = line_at(at);
        let last = line_at(group_end(b, open) - 1);
        out.push((name, first, last - first + 1));
    }
    out
}

#[test]
fn no_production_function_is_over_120_lines() {
    let mut long = vec![];
    let mut listed_short = vec![];
    let mut seen = 0;
    for (_, lib) in crate::import_graph::crates() {
        for m in crate::import_graph::modules(&lib) {
            let rel = m
                .file
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .to_string();
            for (name, line, lines) in functions(&m.code) {
                seen += 1;
                let known = KNOWN_LONG.contains(&(rel.as_str(), name.as_str()));
                if lines > MAX_FN_LINES && !known {
                    long.push(format!("{rel}:{line}: fn {name} is {lines} lines"));
                } else if lines <= MAX_FN_LINES && known {
                    listed_short.push(format!("{rel}:{line}: fn {name} ({lines} lines)"));
                }
            }
        }
    }
    // The workspace has thousands of functions: a parser that found few would check nothing.
    assert!(seen > 2000, "found {seen} functions");
    let missing: Vec<_> = KNOWN_LONG
        .iter()
        .filter(|(f, n)| {
            let text = fs::read_to_string(root().join(f)).unwrap_or_default();
            !functions(&crate::import_graph::code_only(&text))
                .iter()
                .any(|(name, ..)| name == n)
        })
        .collect();
    assert!(
        long.is_empty(),
        "production functions over {MAX_FN_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
    assert!(
        listed_short.is_empty() && missing.is_empty(),
        "in KNOWN_LONG but no longer over {MAX_FN_LINES} lines (take them off the list): {listed_short:?} {missing:?}"
    );
}

#[test]
fn a_long_function_is_found_with_its_line_and_test_code_is_not() {
    let body = |name: &str, lines: usize| {
        // `fn` line, lines - 2 statements, closing brace: `lines` lines in all.
        let mut f = format!("pub(crate) fn {name}<T: Into<u8>>(x: [u8; 2], f: fn(u8) -> u8) -> Option<u8>\nwhere\n    T: Copy,\n{{\n");
        for i in 0..lines - 5 {
            f.push_str(&format!(
                "    let _a{i} = \"}} fn fake() {{\"; // fn commented() {{\n"
            ));
        }
        f.push_str("}\n");
        f
    };
    let text = format!(
        "//! A module.\ntrait T {{\n    fn declared(&self) -> u8;\n}}\n{}{}#[cfg(test)]\nmod tests {{\n{}}}\nimpl X {{\n    {}}}\n",
        body("long", MAX_FN_LINES + 1),
        body("fits", MAX_FN_LINES),
        body("a_test", 300),
        body("method", MAX_FN_LINES + 5),
    );
    let (code, _) = crate::import_graph::strip_tests(&crate::import_graph::code_only(&text));
    let found = functions(&code);
    let fits_at = 5 + MAX_FN_LINES + 1;
    let method_at = fits_at + MAX_FN_LINES + 2 + 300 + 2;
    assert_eq!(
        found,
        [
            ("long".to_string(), 5, MAX_FN_LINES + 1),
            ("fits".to_string(), fits_at, MAX_FN_LINES),
            ("method".to_string(), method_at, MAX_FN_LINES + 5),
        ]
    );
}

/// What sits in `dir` besides folders and `lib.rs`, sorted: the engine's top folder holds
/// its wings and lib.rs only (issue 56).
fn loose_files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file() && e.file_name() != "lib.rs")
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    out.sort();
    out
}

#[test]
fn the_engines_top_folder_holds_its_wings_and_lib_rs_only() {
    let src = root().join("crates/tpslab-engine/src");
    let loose = loose_files(&src);
    assert!(
        loose.is_empty(),
        "crates/tpslab-engine/src: {loose:?} outside a wing (move it into the wing of its concern)"
    );
    // Each wing is a module whose comment says what lives there.
    let mut wings = vec![];
    for e in fs::read_dir(&src)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
    {
        let name = e.file_name().to_string_lossy().to_string();
        let doc = fs::read_to_string(e.path().join("mod.rs")).unwrap_or_default();
        assert!(
            doc.starts_with("//! "),
            "{name}/mod.rs: no module comment saying what lives in the wing"
        );
        wings.push(name);
    }
    wings.sort();
    assert_eq!(wings, ["client", "host", "lab", "observe", "serve"]);
}

#[test]
fn a_loose_file_beside_the_wings_is_found() {
    let dir = std::env::temp_dir().join(format!("tpslab-wings-{}", std::process::id()));
    fs::create_dir_all(dir.join("client")).unwrap();
    for f in ["lib.rs", "client/mod.rs", "ramp.rs"] {
        fs::write(dir.join(f), "//! x\n").unwrap();
    }
    let found = loose_files(&dir);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, ["ramp.rs"]);
}
