//! The record migration stays finished (issue 56): one path per type. Fails, naming the
//! file and line, on
//! - a re-export of another crate's item in a crate's `src/` (a second path for it: callers
//!   name the owning crate, `tpslab_plan::ramp::RampPlan`, never a re-export): a `pub use`
//!   (or `pub(crate) use`, `pub(super) use`) whose path does not start at `crate`, `self`,
//!   `super` or a module or enum the file declares (so `pub use tpslab_plan::X`, `pub use
//!   serde::Serialize`, and `pub use plan::X` after `use tpslab_plan as plan`), a `pub extern
//!   crate`, or a `pub type` that only renames a workspace crate's item;
//! - a `trait ...Ext` anywhere in the workspace (the extension traits that kept method
//!   syntax on the record's types: analysis is plain functions, `ramp::outcome(&rec)`);
//! - a path through the removed shim `tpslab_analysis::record` (in a `use` tree or in code),
//!   or a `record` module declared in tpslab-analysis again.
//!
//! Comments are not code: a doc line may name the old paths. A module of the workspace is
//! read from the files (no compiler), as import_graph.rs reads them.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

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

/// The workspace's crates as paths name them (`tpslab_plan`), from crates/*/Cargo.toml.
fn workspace_crates() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root().join("crates"))
        .expect("crates/")
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().replace('-', "_"))
        .collect();
    names.sort();
    names
}

/// Every Rust file: (the crate its `src/` belongs to, or None for test code, the file).
fn sources() -> Vec<(Option<String>, PathBuf)> {
    let mut out = vec![];
    let mut files = vec![];
    rust_files(&root().join("src"), &mut files);
    out.extend(files.drain(..).map(|f| (Some("tpslab".to_string()), f)));
    rust_files(&root().join("tests"), &mut files);
    out.extend(files.drain(..).map(|f| (None, f)));
    for c in workspace_crates() {
        let dir = root().join("crates").join(c.replace('_', "-"));
        rust_files(&dir.join("src"), &mut files);
        out.extend(files.drain(..).map(|f| (Some(c.clone()), f)));
        for sub in ["tests", "examples", "benches"] {
            rust_files(&dir.join(sub), &mut files);
            out.extend(files.drain(..).map(|f| (None, f)));
        }
    }
    out
}

/// The text with every `//` comment blanked (line numbers kept); string literals are
/// left alone, so a `//` inside one ends nothing.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut cut = line.len();
        for (i, c) in line.char_indices() {
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            }
            if !in_str && c == '/' && prev == '/' {
                cut = i - 1;
                break;
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

/// The `use` statements of a file's code: (line, declared `pub` or `pub(..)`, the tree
/// after `use`).
fn uses(code: &str) -> Vec<(usize, bool, String)> {
    let mut out = vec![];
    let mut open: Option<(usize, bool, String)> = None;
    for (i, line) in code.lines().enumerate() {
        let t = line.trim();
        if let Some((_, _, tree)) = open.as_mut() {
            tree.push(' ');
            tree.push_str(t);
        } else {
            let (is_pub, rest) = if let Some(r) = t.strip_prefix("pub use ") {
                (true, r)
            } else if let Some(r) = t.strip_prefix("use ") {
                (false, r)
            } else if t.starts_with("pub(") {
                match t.find(") use ") {
                    Some(at) => (true, &t[at + ") use ".len()..]),
                    None => continue,
                }
            } else {
                continue;
            };
            open = Some((i + 1, is_pub, rest.to_string()));
        }
        if let Some((n, p, tree)) = open.take() {
            match tree.find(';') {
                Some(end) => out.push((n, p, tree[..end].trim().to_string())),
                None => open = Some((n, p, tree)),
            }
        }
    }
    out
}

/// The paths a use tree names, one per leaf: `a::{b, c::{d as e}}` gives `a::b`, `a::c::d`.
fn leaves(tree: &str) -> Vec<String> {
    fn walk(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree = tree.trim();
        if let (Some(open), true) = (tree.find('{'), tree.ends_with('}')) {
            let pre = format!("{prefix}{}", &tree[..open]);
            let inner = &tree[open + 1..tree.len() - 1];
            let (mut depth, mut start) = (0, 0);
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&pre, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            walk(&pre, &inner[start..], out);
        } else if !tree.is_empty() {
            let path = tree.split(" as ").next().unwrap_or(tree).trim();
            out.push(format!("{prefix}{path}").replace(' ', ""));
        }
    }
    let mut out = vec![];
    walk("", tree, &mut out);
    out
}

/// Whether the file's code declares a module or an enum `name` (`mod x;`, `pub mod x {`,
/// `enum X {`): a path from it is the crate's own.
fn declares(code: &str, name: &str) -> bool {
    code.lines().any(|l| {
        let t = l.trim_start();
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let t = match t.strip_prefix("pub(") {
            Some(r) => r.split_once(") ").map_or(t, |(_, rest)| rest),
            None => t,
        };
        ["mod ", "enum "].iter().any(|k| {
            t.strip_prefix(k).is_some_and(|r| {
                r.strip_prefix(name)
                    .is_some_and(|after| after.starts_with([';', ' ', '{', '<']))
            })
        })
    })
}

/// What breaks the one-path rule in one file: `crate_name` is the crate whose `src/` holds
/// it (None for test code, which re-exports nothing), `crates` the workspace's crates.
fn findings(crate_name: Option<&str>, label: &str, text: &str, crates: &[String]) -> Vec<String> {
    let shim = ["tpslab_analysis", "record"].join("::");
    let code = code_only(text);
    let mut out = vec![];
    for (line, is_pub, tree) in uses(&code) {
        for leaf in leaves(&tree) {
            let leaf = leaf.trim_start_matches("::");
            let first = leaf.split("::").next().unwrap_or("");
            let own = ["crate", "self", "super"].contains(&first)
                || crate_name == Some(first)
                || declares(&code, first);
            if is_pub && crate_name.is_some() && !own {
                out.push(format!("{label}:{line}: `pub use {leaf}` re-exports another crate's item (name it by its owner's path)"));
            }
            if leaf == shim || leaf.starts_with(&format!("{shim}::")) {
                out.push(format!(
                    "{label}:{line}: `{leaf}` goes through the removed shim (use tpslab_record)"
                ));
            }
        }
    }
    for (i, line) in code.lines().enumerate() {
        let t = line.trim_start();
        let decl = t.strip_prefix("pub ").unwrap_or(t);
        let decl = match decl.strip_prefix("pub(") {
            Some(r) => r.split_once(") ").map_or(decl, |(_, rest)| rest),
            None => decl,
        };
        let decl = decl.strip_prefix("unsafe ").unwrap_or(decl);
        if let Some(rest) = decl.strip_prefix("trait ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name.ends_with("Ext") {
                let n = i + 1;
                out.push(format!("{label}:{n}: trait {name}: an extension trait on a record type (make its methods plain functions of the analysis module)"));
            }
        }
        if crate_name.is_some() && decl.starts_with("extern crate ") && t != decl {
            let n = i + 1;
            out.push(format!(
                "{label}:{n}: `{}` re-exports another crate (name it by its own path)",
                t.trim_end()
            ));
        }
        if let Some((_, rhs)) = decl.strip_prefix("type ").and_then(|r| r.split_once('=')) {
            let rhs = rhs.trim().trim_start_matches("::");
            let first = rhs.split("::").next().unwrap_or("");
            if t != decl
                && crate_name.is_some()
                && rhs.contains("::")
                && crates.iter().any(|c| c == first)
            {
                let n = i + 1;
                out.push(format!(
                    "{label}:{n}: `{}` renames another crate's item (name it by its owner's path)",
                    t.trim_end()
                ));
            }
        }
        let is_use = t.starts_with("use ") || t.starts_with("pub use ") || t.starts_with("pub(");
        if !is_use && line.contains(&format!("{shim}::")) {
            let n = i + 1;
            out.push(format!(
                "{label}:{n}: a path through the removed shim {shim} (use tpslab_record)"
            ));
        }
    }
    out
}

#[test]
fn the_workspace_has_one_path_per_type() {
    let crates = workspace_crates();
    assert!(
        crates.iter().any(|c| c == "tpslab_record") && crates.len() >= 9,
        "{crates:?}"
    );
    let mut found = vec![];
    let files = sources();
    assert!(files.len() > 300, "{} files", files.len());
    for (owner, f) in &files {
        let text = fs::read_to_string(f).unwrap();
        let label = f.strip_prefix(root()).unwrap().display().to_string();
        found.extend(findings(owner.as_deref(), &label, &text, &crates));
    }
    let analysis = root().join("crates/tpslab-analysis/src");
    for gone in ["record.rs", "record/mod.rs"] {
        if analysis.join(gone).exists() {
            found.push(format!(
                "crates/tpslab-analysis/src/{gone}: the shim is back"
            ));
        }
    }
    let lib = code_only(&fs::read_to_string(analysis.join("lib.rs")).unwrap());
    if lib.lines().any(|l| l.trim().ends_with("mod record;")) {
        found.push("crates/tpslab-analysis/src/lib.rs: declares `mod record` again".into());
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

fn crates() -> Vec<String> {
    [
        "tpslab_plan",
        "tpslab_record",
        "tpslab_analysis",
        "tpslab_net",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn a_reexport_of_another_crates_item_is_found_in_every_form() {
    let c = crates();
    let one = "pub use tpslab_plan::ramp::RampPlan;\n";
    assert_eq!(findings(Some("tpslab_record"), "r.rs", one, &c).len(), 1);
    let grouped =
        "pub use tpslab_record::{\n    ramp::{Listener as L,\n Overrun},\n    Record,\n};\n";
    let f = findings(Some("tpslab_analysis"), "a.rs", grouped, &c);
    assert_eq!(f.len(), 3, "{f:?}");
    assert!(
        f[0].starts_with("a.rs:1: `pub use tpslab_record::ramp::Listener`"),
        "{f:?}"
    );
    assert_eq!(
        findings(
            Some("tpslab_plan"),
            "p.rs",
            "    pub use ::tpslab_net::ClockStatus;",
            &c
        )
        .len(),
        1
    );
    // Narrower visibility, a crate outside the workspace, a name imported from another
    // crate, a `pub extern crate` and a `pub type` that renames another crate's item are
    // second paths too.
    for text in [
        "pub(crate) use tpslab_plan::Y;",
        "pub(super) use tpslab_plan::{Y, Z as W};",
        "pub use serde::Serialize;",
        "use tpslab_plan as plan;\npub use plan::ramp::RampPlan;",
        "use tpslab_plan::ramp;\npub use ramp::RampPlan;",
        "pub extern crate tpslab_plan;",
        "pub use tpslab_plan as plan;",
        "pub type Plan = tpslab_plan::ramp::RampPlan;",
        "pub(crate) type Plan = ::tpslab_plan::ramp::RampPlan;",
    ] {
        let f = findings(Some("tpslab_analysis"), "a.rs", text, &c);
        assert!(
            !f.is_empty() && f.iter().all(|l| l.contains("another crate")),
            "{text}: {f:?}"
        );
    }
    // Its own items (from its root, its modules, an enum it declares), private imports,
    // its own type aliases and comments pass.
    let fine = "mod ledger;\npub mod verdict {\n}\npub enum Kind {\n    A,\n}\npub use crate::ledger::Ledger;\npub use ledger::{build, Ledger};\npub use verdict::*;\npub use Kind::*;\npub use self::ledger::Row;\nuse tpslab_plan::X;\npub type Labels = Vec<(String, String)>;\npub type Mine = crate::ledger::Ledger;\nextern crate alloc;\n// pub use tpslab_plan::Z;\n/// pub use tpslab_plan::Z;\npub use tpslab_analysis::stats::summary;\n";
    let f = findings(Some("tpslab_analysis"), "a.rs", fine, &c);
    assert!(f.is_empty(), "{f:?}");
    // Test code re-exports nothing a caller could name.
    assert!(findings(None, "t.rs", one, &c).is_empty());
}

#[test]
fn an_extension_trait_is_found_and_a_std_one_in_use_is_not() {
    let c = crates();
    for decl in [
        "pub trait SummaryExt {",
        "trait FactsExt: Sized {",
        "    pub(crate) trait UslFitExt {",
        "pub unsafe trait RawExt {}",
    ] {
        let f = findings(Some("tpslab_analysis"), "s.rs", decl, &c);
        assert_eq!(f.len(), 1, "{decl}: {f:?}");
        assert!(f[0].contains("an extension trait"), "{f:?}");
    }
    let fine = "use std::os::unix::fs::MetadataExt;\nimpl MetadataExt for X {}\n// trait OldExt\npub trait Extent {}\nlet s = \"trait QuotedExt\";\n";
    assert!(findings(Some("tpslab_analysis"), "s.rs", fine, &c).is_empty());
}

#[test]
fn a_path_through_the_shim_is_found_in_a_use_tree_and_in_code() {
    let c = crates();
    let shim = ["tpslab_analysis", "record"].join("::");
    for text in [
        format!("use {shim}::Record;"),
        format!(
            "use tpslab_analysis::{{stats, {}::{{Body, Record}}}};",
            "record"
        ),
        format!("    let r = {shim}::Record::from_json(&t)?;"),
        format!("fn f(r: &{shim}::tcp::TcpRecord) {{}}"),
    ] {
        let f = findings(Some("tpslab_run"), "x.rs", &text, &c);
        assert!(
            !f.is_empty() && f.iter().all(|l| l.contains("shim")),
            "{text}: {f:?}"
        );
    }
    let fine = format!("use tpslab_record::Record;\n// was {shim}::Record\nlet x = tpslab_analysis::ramp::outcome(&r);\n");
    assert!(findings(Some("tpslab_run"), "x.rs", &fine, &c).is_empty());
}
