//! Module import cycles, per crate: every crate of the workspace (crates/*/src and the
//! binary's src/) is read from its root file through its `mod` declarations, each
//! top-level module's references to another (`use crate::x::...`, `crate::x::Y` in code,
//! `super::x` from a top-level module, a `crate::Name` re-exported by the root from `x`)
//! make an edge, and a cycle among them fails naming its modules and the line behind each
//! edge. Test code (`#[cfg(test)]` items and the files they load) is left out: a test may
//! reach into any module. Also: the record crate stays a leaf (no tpslab crate but the plans,
//! the /proc parsers and, for `ClockStatus`, tpslab-net in its Cargo.toml).
//!
//! The graph is of top-level modules (`record`, `verdict`): a submodule belongs to its
//! top-level module, whose `mod.rs` declares it and which it may use back (`super::`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

/// Cycles that exist and are being removed elsewhere: (crate, its modules, sorted). A
/// listed cycle that is gone fails too, so the list cannot outlive it.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// The record crate may depend on these tpslab crates only (types a record embeds; from
/// tpslab-net only `ClockStatus`, the wall clock's status an agent's record keeps).
const RECORD_MAY_DEPEND_ON: &[&str] = &["tpslab-plan", "tpslab-proc", "tpslab-net"];

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate: (name, root file). Also read by architecture.rs (function lengths).
pub(crate) fn crates() -> Vec<(String, PathBuf)> {
    let ws = workspace();
    let mut out = vec![("tpslab".to_string(), ws.join("src/main.rs"))];
    let mut dirs: Vec<PathBuf> = fs::read_dir(ws.join("crates"))
        .expect("crates/")
        .map(|e| e.expect("a crates/ entry").path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        let root = d.join("src/lib.rs");
        assert!(root.exists(), "{name}: no src/lib.rs");
        out.push((name, root));
    }
    out
}

/// `text` without comments, string and char literals (each replaced by spaces, newlines
/// kept so line numbers stay).
pub(crate) fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_char(prev(&b, i)) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.extend(b[i..j.min(b.len())].iter().map(|&c| blank(c)));
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && is_char_literal(&b, i) {
            // 'x', '\n', '\'' (not a lifetime).
            let end = if b[i + 1] == '\\' {
                (i + 3..b.len()).find(|&j| b[j] == '\'').unwrap_or(i)
            } else {
                i + 2
            };
            out.extend(b[i..=end].iter().map(|&c| blank(c)));
            i = end + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev(b: &[char], i: usize) -> char {
    if i == 0 {
        ' '
    } else {
        b[i - 1]
    }
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether the `'` at `i` opens a char literal (`'a'`, `'\n'`) rather than a lifetime.
fn is_char_literal(b: &[char], i: usize) -> bool {
    matches!(
        (b.get(i + 1), b.get(i + 2)),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}

/// One reference from code to a module path: where it is, and the path as written
/// (`crate::a::b` -> (0, ["a", ...]); `super::super::x` -> (2, ["x"])): supers counted,
/// then the first segment of each path it names (a `{...}` group names several).
struct Reference {
    line: usize,
    supers: usize,
    crate_root: bool,
    first: Vec<String>,
}

/// The first segments named after `crate::` / `super::` at `at` (a word or a group).
fn first_segments(code: &[char], mut at: usize) -> Vec<String> {
    while at < code.len() && code[at].is_whitespace() {
        at += 1;
    }
    if code.get(at) == Some(&'{') {
        // The items of a group, at its own depth: each item's first word.
        let mut out = vec![];
        let mut depth = 0;
        let mut expect = true;
        let mut i = at;
        while i < code.len() {
            let c = code[i];
            match c {
                '{' => {
                    depth += 1;
                    expect = depth == 1;
                    i += 1;
                }
                '}' => {
                    depth -= 1;
                    i += 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' => {
                    expect = depth == 1;
                    i += 1;
                }
                c if ident_char(c) && expect && depth == 1 => {
                    let start = i;
                    while i < code.len() && ident_char(code[i]) {
                        i += 1;
                    }
                    out.push(code[start..i].iter().collect());
                    expect = false;
                }
                _ => i += 1,
            }
        }
        return out;
    }
    let start = at;
    while at < code.len() && ident_char(code[at]) {
        at += 1;
    }
    if start == at {
        return vec![];
    }
    vec![code[start..at].iter().collect()]
}

/// References in `code` (comments and literals already blanked) to module paths.
fn references(code: &str) -> Vec<Reference> {
    let chars: Vec<char> = code.chars().collect();
    let mut line_of = Vec::with_capacity(chars.len());
    let mut line = 1;
    for &c in &chars {
        line_of.push(line);
        if c == '\n' {
            line += 1;
        }
    }
    let word_at = |i: usize, w: &str| -> bool {
        w.chars()
            .enumerate()
            .all(|(k, c)| chars.get(i + k) == Some(&c))
            && !ident_char(prev(&chars, i))
    };
    let mut out = vec![];
    let mut i = 0;
    while i < chars.len() {
        if word_at(i, "crate::") {
            out.push(Reference {
                line: line_of[i],
                supers: 0,
                crate_root: true,
                first: first_segments(&chars, i + "crate::".len()),
            });
            i += "crate::".len();
        } else if word_at(i, "super::") {
            let start = i;
            let mut supers = 0;
            while word_at(i, "super::") {
                supers += 1;
                i += "super::".len();
            }
            out.push(Reference {
                line: line_of[start],
                supers,
                crate_root: false,
                first: first_segments(&chars, i),
            });
        } else {
            i += 1;
        }
    }
    out
}

/// A module's source: the file, its path in the crate, and its code lines with the test
/// items blanked (`#[cfg(test)]`), which also gives the non-test `mod` declarations.
pub(crate) struct Module {
    pub(crate) file: PathBuf,
    path: Vec<String>,
    pub(crate) code: String,
    /// Per line (1-based): how many inline modules (`mod x { ... }`) it is inside.
    inline: Vec<usize>,
}

/// An item's text without its visibility (`pub`, `pub(crate)`, `pub(super)`).
fn without_vis(t: &str) -> &str {
    t.strip_prefix("pub(crate) ")
        .or_else(|| t.strip_prefix("pub(super) "))
        .or_else(|| t.strip_prefix("pub "))
        .unwrap_or(t)
}

/// Per line of `code` (index 0 unused): the inline modules it is inside.
fn inline_depths(code: &str) -> Vec<usize> {
    let mut out = vec![0];
    let mut depth = 0usize;
    let mut open: Vec<usize> = vec![];
    for l in code.lines() {
        out.push(open.len());
        let opens_mod = without_vis(l.trim())
            .strip_prefix("mod ")
            .is_some_and(|d| d.trim_end().ends_with('{'));
        let mut first = true;
        for c in l.chars() {
            match c {
                '{' => {
                    depth += 1;
                    if opens_mod && first {
                        open.push(depth);
                    }
                    first = false;
                }
                '}' => {
                    if open.last() == Some(&depth) {
                        open.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        }
    }
    out
}

/// `code` with every `#[cfg(test)]` item blanked (to its `;` or its closing brace), and
/// the `mod` declarations left: (name, #[path], whether declared `mod x;`, line).
pub(crate) fn strip_tests(code: &str) -> (String, Vec<(String, Option<String>, usize)>) {
    let mut out: Vec<String> = vec![];
    let mut mods = vec![];
    let lines: Vec<&str> = code.lines().collect();
    let mut i = 0;
    // #[path = "..."] is a string, blanked by code_only: read it from the raw text instead.
    while i < lines.len() {
        let t = lines[i].trim();
        if t.starts_with("#[cfg(test)]") {
            // Blank this item: its attributes, then up to the end of its body or `;`.
            out.push(String::new());
            i += 1;
            let mut depth = 0i64;
            let mut opened = false;
            while i < lines.len() {
                let l = lines[i];
                out.push(String::new());
                i += 1;
                for c in l.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                let tl = l.trim();
                if tl.starts_with("#[") && !opened {
                    continue;
                }
                if (opened && depth == 0) || (!opened && tl.ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        out.push(lines[i].to_string());
        i += 1;
    }
    for (n, l) in out.iter().enumerate() {
        if let Some(decl) = without_vis(l.trim()).strip_prefix("mod ") {
            if let Some(name) = decl.strip_suffix(';') {
                mods.push((name.trim().to_string(), None, n + 1));
            }
        }
    }
    (out.join("\n"), mods)
}

/// The `#[path = "..."]` on the line before `line` (1-based) of the raw text, if any.
fn path_attr(raw: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = raw.lines().collect();
    let mut i = line.checked_sub(2)?;
    loop {
        let t = lines.get(i)?.trim();
        if let Some(p) = t.strip_prefix("#[path = \"") {
            return p.strip_suffix("\"]").map(String::from);
        }
        if !t.starts_with("#[") {
            return None;
        }
        i = i.checked_sub(1)?;
    }
}

/// The file `mod NAME;` at `line` of `file` (raw text `raw`) loads: its `#[path]`, else
/// `NAME.rs` or `NAME/mod.rs` beside a crate root or a `mod.rs` (`root_like`), else in
/// the folder named after `file`.
fn child_file(file: &Path, raw: &str, root_like: bool, name: &str, line: usize) -> PathBuf {
    let dir = file.parent().unwrap().to_path_buf();
    if let Some(p) = path_attr(raw, line) {
        return dir.join(p);
    }
    let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
    let base = if root_like || stem == "mod" {
        dir
    } else {
        dir.join(&stem)
    };
    let flat = base.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        base.join(name).join("mod.rs")
    }
}

/// Every non-test module of the crate rooted at `root`.
pub(crate) fn modules(root: &Path) -> Vec<Module> {
    let mut out = vec![];
    let mut todo = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((file, path)) = todo.pop() {
        let raw = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (code, mods) = strip_tests(&code_only(&raw));
        for (name, _, line) in mods {
            let child = child_file(&file, &raw, path.is_empty(), &name, line);
            assert!(
                child.exists(),
                "{}:{line}: mod {name}; has no file {}",
                file.display(),
                child.display()
            );
            let mut p = path.clone();
            p.push(name);
            todo.push((child, p));
        }
        let inline = inline_depths(&code);
        out.push(Module {
            file,
            path,
            code,
            inline,
        });
    }
    out
}

/// Every file the crate rooted at `root` loads through its `mod NAME;` declarations,
/// its test modules' (`#[cfg(test)]`) included.
fn loaded_files(root: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut todo = vec![(root.to_path_buf(), true)];
    while let Some((file, root_like)) = todo.pop() {
        if !out.insert(file.clone()) {
            continue;
        }
        let Ok(raw) = fs::read_to_string(&file) else {
            continue;
        };
        for (n, l) in code_only(&raw).lines().enumerate() {
            let decl = without_vis(l.trim()).strip_prefix("mod ");
            if let Some(name) = decl.and_then(|d| d.strip_suffix(';')) {
                todo.push((
                    child_file(&file, &raw, root_like, name.trim(), n + 1),
                    false,
                ));
            }
        }
    }
    out
}

/// The `.rs` files under the folder of the crate root `root` that no `mod NAME;` loads
/// (sorted): files the compiler never sees, or modules declared where this walk cannot
/// see them, e.g. by a macro (`$(pub mod $module;)*`), whose code every check built on
/// [`modules`] (import cycles, function lengths, one path per type) would skip.
pub(crate) fn unloaded(root: &Path) -> Vec<PathBuf> {
    let loaded = loaded_files(root);
    let mut all = vec![];
    let mut dirs = vec![root.parent().unwrap().to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && !loaded.contains(&p) {
                all.push(p);
            }
        }
    }
    all.sort();
    all
}

/// Every source file of every crate is a module the walk reads: a module declared by a
/// macro (the engine's `protocols!` once did) would be left out of the checks unseen.
#[test]
fn every_source_file_is_a_module_the_walk_reads() {
    let mut missing = vec![];
    for (name, root) in crates() {
        for f in unloaded(&root) {
            missing.push(format!("{name}: {}", f.display()));
        }
    }
    assert!(
        missing.is_empty(),
        "source files no `mod NAME;` declares (declare each module plainly, not through a macro, or remove the file):\n{}",
        missing.join("\n")
    );
}

/// A module declared through a macro is not walked, and is found as unloaded; a plain
/// one, a `#[path]` test module and a folder module are loaded.
#[test]
fn a_module_declared_by_a_macro_is_found_unloaded() {
    let dir = std::env::temp_dir().join(format!("tpslab-unloaded-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("wing")).unwrap();
    fs::write(
        dir.join("lib.rs"),
        "macro_rules! protocols {\n    ($($m:ident,)*) => { $(pub mod $m;)* };\n}\nprotocols! {\n    hidden,\n}\npub mod plain;\npub(crate) mod wing;\n#[cfg(test)]\n#[path = \"plain_tests.rs\"]\nmod tests;\n",
    )
    .unwrap();
    for f in ["hidden.rs", "plain.rs", "plain_tests.rs", "wing/deep.rs"] {
        fs::write(dir.join(f), "pub fn f() {}\n").unwrap();
    }
    fs::write(dir.join("wing/mod.rs"), "mod deep;\n").unwrap();
    let walked: Vec<String> = modules(&dir.join("lib.rs"))
        .iter()
        .map(|m| m.path.join("::"))
        .collect();
    let found = unloaded(&dir.join("lib.rs"));
    fs::remove_dir_all(&dir).unwrap();
    assert!(!walked.contains(&"hidden".to_string()), "{walked:?}");
    assert!(walked.contains(&"wing::deep".to_string()), "{walked:?}");
    assert_eq!(found, [dir.join("hidden.rs")]);
}

/// Names the crate root re-exports from a top-level module (`pub use ledger::{Ledger,
/// LedgerRow};` -> Ledger -> ledger).
fn root_reexports(root_code: &str, tops: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in root_code.split(';') {
        let s = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
        // `use` or `pub use` at the root: either makes `crate::Name` valid below it.
        let Some(rest) = s
            .strip_prefix("use ")
            .or_else(|| s.rfind(" use ").map(|i| &s[i + " use ".len()..]))
        else {
            continue;
        };
        let Some((m, names)) = rest.split_once("::") else {
            continue;
        };
        if !tops.contains(m) {
            continue;
        }
        for n in names
            .split(|c: char| !ident_char(c))
            .filter(|w| !w.is_empty() && *w != "self" && *w != "as")
        {
            out.insert(n.to_string(), m.to_string());
        }
    }
    out
}

/// Edges between the top-level modules of the crate rooted at `root`: (from, to) -> the
/// first place that makes it (`file:line`).
fn edges(root: &Path) -> (BTreeSet<String>, BTreeMap<(String, String), String>) {
    let ws = workspace();
    let mods = modules(root);
    let tops: BTreeSet<String> = mods
        .iter()
        .filter_map(|m| m.path.first().cloned())
        .collect();
    let root_code = &mods
        .iter()
        .find(|m| m.path.is_empty())
        .expect("the root")
        .code;
    let reexported = root_reexports(root_code, &tops);
    let top_of = |seg: &str| -> Option<String> {
        if tops.contains(seg) {
            Some(seg.to_string())
        } else {
            reexported.get(seg).cloned()
        }
    };
    let mut out = BTreeMap::new();
    for m in &mods {
        let Some(from) = m.path.first() else {
            continue;
        };
        for r in references(&m.code) {
            // The module the path starts from: the root, or an ancestor of this one.
            let depth = m.path.len() + m.inline.get(r.line).copied().unwrap_or(0);
            let targets: Vec<String> = if r.crate_root || r.supers >= depth {
                r.first.iter().filter_map(|s| top_of(s)).collect()
            } else {
                // Within this module's own ancestors, below the root: its own top.
                vec![m.path[0].clone()]
            };
            for to in targets {
                if &to != from {
                    let at = format!(
                        "{}:{}",
                        m.file.strip_prefix(&ws).unwrap_or(&m.file).display(),
                        r.line
                    );
                    out.entry((from.clone(), to)).or_insert(at);
                }
            }
        }
    }
    (tops, out)
}

/// The strongly connected components of more than one module (Tarjan).
fn cycles(
    nodes: &BTreeSet<String>,
    edges: &BTreeMap<(String, String), String>,
) -> Vec<Vec<String>> {
    struct T<'a> {
        adj: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.adj.get(v).cloned().unwrap_or_default() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = vec![];
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        adj: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on: BTreeSet::new(),
        out: vec![],
    };
    for (a, b) in edges.keys() {
        t.adj.entry(a.as_str()).or_default().push(b.as_str());
    }
    for n in nodes {
        if !t.index.contains_key(n.as_str()) {
            visit(&mut t, n);
        }
    }
    t.out.sort();
    t.out
}

/// One cycle through `scc`'s first module, each edge with where it is made:
/// "a -> b (src/a.rs:3) -> a (src/b.rs:9)".
fn describe(scc: &[String], edges: &BTreeMap<(String, String), String>) -> String {
    let start = &scc[0];
    let inside: BTreeSet<&String> = scc.iter().collect();
    // Breadth-first from start back to start, within the component.
    let mut came: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    let mut back = None;
    while let Some(v) = queue.pop_front() {
        for ((a, b), _) in edges.range((v.clone(), String::new())..) {
            if a != v {
                break;
            }
            if !inside.contains(b) {
                continue;
            }
            if b == start {
                back = Some(v);
                break;
            }
            if !came.contains_key(b) {
                came.insert(b, v);
                queue.push_back(b);
            }
        }
        if back.is_some() {
            break;
        }
    }
    let mut chain = vec![];
    let mut v = back.expect("a component has a cycle through each of its modules");
    while v != start {
        chain.push(v.clone());
        v = came[v];
    }
    chain.reverse();
    let mut path = vec![start.clone()];
    path.extend(chain);
    path.push(start.clone());
    let mut text = start.clone();
    for w in path.windows(2) {
        text += &format!(" -> {} ({})", w[1], edges[&(w[0].clone(), w[1].clone())]);
    }
    text
}

#[test]
fn no_crate_has_a_module_import_cycle() {
    let mut problems = vec![];
    let mut known_seen = BTreeSet::new();
    for (name, root) in crates() {
        let (nodes, edges) = edges(&root);
        for scc in cycles(&nodes, &edges) {
            let known = KNOWN_CYCLES.iter().position(|(c, m)| {
                *c == name && m.iter().copied().eq(scc.iter().map(String::as_str))
            });
            match known {
                Some(i) => {
                    known_seen.insert(i);
                }
                None => problems.push(format!(
                    "{name}: {scc:?} import each other, e.g. {}",
                    describe(&scc, &edges)
                )),
            }
        }
    }
    for (i, (c, m)) in KNOWN_CYCLES.iter().enumerate() {
        if !known_seen.contains(&i) {
            problems.push(format!(
                "{c}: the known cycle {m:?} is gone (or changed): remove it from KNOWN_CYCLES"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "module import cycles:\n{}",
        problems.join("\n")
    );
}

/// The parser sees through what is not code, follows `#[path]`, and finds a cycle made
/// by a `use` in one module and a path in code in another.
#[test]
fn a_cycle_is_found_and_named_with_its_lines() {
    let dir = std::env::temp_dir().join(format!("tpslab-import-graph-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("a")).unwrap();
    fs::write(
        dir.join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod c;\npub use c::Thing;\n#[cfg(test)]\nmod t {\n    use crate::b;\n}\n",
    )
    .unwrap();
    fs::write(
        dir.join("a/mod.rs"),
        "mod inner;\n// use crate::c;\nconst S: &str = \"crate::c::X\";\n#[path = \"x_tests.rs\"]\n#[cfg(test)]\nmod tests;\n",
    )
    .unwrap();
    fs::write(dir.join("a/inner.rs"), "use super::super::{b, c::Y};\n").unwrap();
    fs::write(dir.join("a/x_tests.rs"), "use crate::b;\n").unwrap();
    fs::write(dir.join("b.rs"), "pub fn f() -> crate::Thing { todo!() }\n").unwrap();
    fs::write(
        dir.join("c.rs"),
        "pub struct Thing;\nuse crate::{\n    a,\n};\n",
    )
    .unwrap();
    let (nodes, edges) = edges(&dir.join("lib.rs"));
    let e: Vec<(&str, &str)> = edges
        .keys()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    // a/inner.rs names b and c; b names c through the root's re-export; c names a. The
    // comment, the string and the test module add nothing.
    assert_eq!(e, vec![("a", "b"), ("a", "c"), ("b", "c"), ("c", "a")]);
    let found = cycles(&nodes, &edges);
    assert_eq!(found, vec![vec!["a", "b", "c"]]);
    let text = describe(&found[0], &edges);
    assert!(text.starts_with("a -> "), "{text}");
    assert!(text.contains("-> a ("), "{text}");
    assert!(text.contains("c.rs:2)"), "{text}");
    fs::remove_dir_all(&dir).unwrap();
}

/// The record crate is a leaf: no tpslab crate in any of its dependency tables but the
/// plans, the /proc parsers, tpslab-net (for `ClockStatus`) and itself.
#[test]
fn the_record_crate_depends_on_no_other_tpslab_crate() {
    let toml = fs::read_to_string(workspace().join("crates/tpslab-record/Cargo.toml")).unwrap();
    let mut section = String::new();
    let mut found = vec![];
    for line in toml.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            section = t.trim_matches(|c| c == '[' || c == ']').to_string();
            // [dependencies.tpslab-x] form.
            if let Some(dep) = section.split('.').find(|s| s.starts_with("tpslab")) {
                if section.contains("dependencies") {
                    found.push(dep.to_string());
                }
            }
            continue;
        }
        if section.ends_with("dependencies") {
            if let Some((key, _)) = t.split_once('=') {
                let key = key.trim().trim_matches('"');
                if key.starts_with("tpslab") {
                    found.push(key.to_string());
                }
            }
        }
    }
    assert!(
        found.iter().any(|d| d == "tpslab-plan"),
        "the parser found no tpslab-plan in {toml}"
    );
    // Itself (a dev-dependency on its own `schema` feature, for tests/schema.rs) is not
    // another crate.
    let other: Vec<&String> = found
        .iter()
        .filter(|d| !RECORD_MAY_DEPEND_ON.contains(&d.as_str()) && *d != "tpslab-record")
        .collect();
    assert!(
        other.is_empty(),
        "tpslab-record must stay a leaf (only {RECORD_MAY_DEPEND_ON:?}), but depends on {other:?}"
    );
}
