//! The record's JSON Schema, `docs/record.schema.json`: every record fixture of the repository
//! validates against it, every kind it names has a fixture, and a broken record does not
//! validate. The validator is Python's `jsonschema` (draft 2020-12; Debian's
//! python3-jsonschema), so the test build compiles neither a validator nor the record's
//! `schema` feature. That the file is what the record types generate now is checked by
//! `.ci/run` (a generated file, checked as the formatting is); refresh it after changing a
//! record type:
//! `cargo run -p tpslab-record --features schema --example record_schema > docs/record.schema.json`

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `*.json` under `dir`, recursively.
fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.expect("directory entry").path();
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

/// The record fixtures: `tests/fixtures`, `crates/*/tests/fixtures`, `crates/*/testdata`.
fn fixtures() -> Vec<PathBuf> {
    let root = root();
    let mut files = Vec::new();
    json_files(&root.join("tests/fixtures"), &mut files);
    for c in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let c = c.expect("crates/ entry").path();
        json_files(&c.join("tests/fixtures"), &mut files);
        json_files(&c.join("testdata"), &mut files);
    }
    files.sort();
    files
}

fn read(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Validates each record with Python's `jsonschema` against `docs/record.schema.json`: the
/// schema's messages for each record, one line each (empty: valid). `None` (the test skips)
/// when python3 has no `jsonschema` module.
fn errors_of(records: &[Value]) -> Option<Vec<Vec<String>>> {
    const SCRIPT: &str = r#"
import json, sys
try:
    import jsonschema
except ImportError:
    sys.exit(3)
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
out = []
for rec in json.load(sys.stdin):
    out.append(["at /" + "/".join(str(p) for p in e.absolute_path) + ": " + e.message
                for e in v.iter_errors(rec)])
json.dump(out, sys.stdout)
"#;
    use std::io::Write;
    let schema = root().join("docs/record.schema.json");
    let mut child = std::process::Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(&schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let input = serde_json::to_vec(records).expect("records print");
    let mut stdin = child.stdin.take().expect("stdin piped");
    let feed = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("python3 runs");
    feed.join()
        .expect("feeder")
        .expect("python3 reads the records");
    if out.status.code() == Some(3) {
        return None;
    }
    assert!(
        out.status.success(),
        "python3 jsonschema failed: {}",
        out.status
    );
    let lists: Vec<Vec<String>> =
        serde_json::from_slice(&out.stdout).expect("the validator's answer is JSON");
    assert_eq!(lists.len(), records.len(), "one answer per record");
    Some(lists)
}

/// Counts a skip in the suite's skip list (`TPSLAB_SKIP_LIST`, else target/tmp), as the
/// workspace's other tests do.
fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let why = format!("record::{test}: {why}");
    eprintln!("skipping {why}");
    let list = std::env::var_os("TPSLAB_SKIP_LIST").map_or_else(
        || PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tpslab-skipped.txt"),
        PathBuf::from,
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(list)
    {
        let _ = std::io::Write::write_all(&mut f, format!("{why}\n").as_bytes());
    }
}

const NO_VALIDATOR: &str =
    "schema: python3's jsonschema module is missing (Debian: python3-jsonschema)";

#[test]
fn every_record_fixture_validates_and_every_kind_has_one() {
    let files = fixtures();
    let mut kinds = BTreeSet::new();
    let mut records = Vec::new();
    for f in &files {
        let rec = read(f);
        assert!(
            rec.get("schema").and_then(Value::as_str) == Some(tpslab_record::RECORD_SCHEMA),
            "{}: a JSON fixture that is not a {} record",
            f.display(),
            tpslab_record::RECORD_SCHEMA
        );
        kinds.insert(rec["kind"].as_str().unwrap_or_default().to_string());
        records.push(rec);
    }
    assert!(
        records.len() >= 15,
        "record fixtures found: {}",
        records.len()
    );
    let Some(answers) = errors_of(&records) else {
        return skip(NO_VALIDATOR);
    };
    let bad: Vec<String> = files
        .iter()
        .zip(&answers)
        .flat_map(|(f, errs)| errs.iter().map(move |e| format!("{}: {e}", f.display())))
        .collect();
    assert!(
        bad.is_empty(),
        "fixtures the schema refuses:\n{}",
        bad.join("\n")
    );
    // The kinds the schema names (its oneOf's `kind` constants) each have a fixture.
    let schema = read(&root().join("docs/record.schema.json"));
    let named: BTreeSet<String> = schema["oneOf"]
        .as_array()
        .expect("the body's kinds are a oneOf")
        .iter()
        .filter_map(|b| b["properties"]["kind"]["const"].as_str().map(String::from))
        .collect();
    assert_eq!(named.len(), 15, "kinds in the schema: {named:?}");
    let missing: Vec<_> = named.difference(&kinds).collect();
    assert!(
        missing.is_empty(),
        "kinds without a record fixture: {missing:?}"
    );
}

#[test]
fn a_broken_record_is_refused() {
    let good = read(&root().join("crates/tpslab-report/tests/fixtures/udp_run.json"));
    let broken = |path: &[&str], new: Option<Value>| {
        let mut rec = good.clone();
        let (last, parents) = path.split_last().expect("a path");
        let o = parents
            .iter()
            .fold(&mut rec, |v, k| &mut v[*k])
            .as_object_mut()
            .expect("an object");
        match new {
            Some(x) => o.insert(last.to_string(), x),
            None => o.remove(*last),
        };
        rec
    };
    // A figure read through nan::de (NaN written as null) has no default: the reader
    // refuses a record without it, and so must the schema.
    let sweep = read(&root().join("crates/tpslab-report/tests/fixtures/sweep.json"));
    let mut no_tps = sweep.clone();
    no_tps["runs"][0]["metrics"]
        .as_object_mut()
        .expect("a run's metrics")
        .remove("tps");
    let cases = [
        // A wrong type in a required field of the envelope, of a body, of a plan.
        (
            "meta.cpus a string",
            broken(&["meta", "cpus"], Some("two".into())),
        ),
        ("ledger a number", broken(&["ledger"], Some(7.into()))),
        (
            "plan.load.size_bytes negative",
            broken(&["plan", "load", "size_bytes"], Some((-1).into())),
        ),
        ("meta missing", broken(&["meta"], None)),
        ("kind unknown", broken(&["kind"], Some("udp_walk".into()))),
        (
            "schema of another release",
            broken(&["schema"], Some("tpslab.record/1".into())),
        ),
        ("a sweep run without tps", no_tps),
    ];
    let mut records = vec![good.clone(), sweep];
    records.extend(cases.iter().map(|(_, r)| r.clone()));
    let Some(answers) = errors_of(&records) else {
        return skip(NO_VALIDATOR);
    };
    assert!(answers[0].is_empty(), "udp_run.json: {:?}", answers[0]);
    assert!(answers[1].is_empty(), "sweep.json: {:?}", answers[1]);
    for ((what, rec), errs) in cases.iter().zip(&answers[2..]) {
        assert!(!errs.is_empty(), "the schema accepts a record with {what}");
        // serde refuses it too (the schema is no stricter than the reader, here).
        assert!(
            tpslab_record::Record::from_json(&rec.to_string()).is_err(),
            "tpslab reads a record with {what}"
        );
    }
}
