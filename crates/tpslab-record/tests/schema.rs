//! The record's JSON Schema: `docs/record.schema.json` is what the types generate now, every
//! record fixture of the repository validates against it, and a broken record does not.
//! Refresh the file after changing a record type:
//! `cargo run -p tpslab-record --features schema --example record_schema > docs/record.schema.json`

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const REFRESH: &str =
    "cargo run -p tpslab-record --features schema --example record_schema > docs/record.schema.json";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&tpslab_record::schema::record_schema())
        .expect("the generated schema is a valid draft 2020-12 schema")
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

/// The schema's messages for `v`, one line each (empty: valid).
fn errors(v: &jsonschema::Validator, rec: &Value) -> Vec<String> {
    v.iter_errors(rec)
        .map(|e| format!("at {}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn docs_schema_file_is_what_the_types_generate() {
    let path = root().join("docs/record.schema.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = tpslab_record::schema::record_schema_text();
    assert!(
        committed == generated,
        "docs/record.schema.json is not what the record types generate now; refresh it: {REFRESH}"
    );
}

#[test]
fn every_record_fixture_validates_and_every_kind_has_one() {
    let v = validator();
    let files = fixtures();
    let mut kinds = BTreeSet::new();
    let mut bad = Vec::new();
    for f in &files {
        let rec = read(f);
        assert!(
            rec.get("schema").and_then(Value::as_str) == Some(tpslab_record::RECORD_SCHEMA),
            "{}: a JSON fixture that is not a {} record",
            f.display(),
            tpslab_record::RECORD_SCHEMA
        );
        kinds.insert(rec["kind"].as_str().unwrap_or_default().to_string());
        for e in errors(&v, &rec) {
            bad.push(format!("{}: {e}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "fixtures the schema refuses:\n{}",
        bad.join("\n")
    );
    // The kinds the schema names (its oneOf's `kind` constants) each have a fixture.
    let schema = tpslab_record::schema::record_schema();
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
    let v = validator();
    let good = read(&root().join("crates/tpslab-report/tests/fixtures/udp_run.json"));
    assert!(errors(&v, &good).is_empty());
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
    for (what, rec) in [
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
    ] {
        assert!(
            !errors(&v, &rec).is_empty(),
            "the schema accepts a record with {what}"
        );
        // serde refuses it too (the schema is no stricter than the reader, here).
        assert!(
            tpslab_record::Record::from_json(&rec.to_string()).is_err(),
            "tpslab reads a record with {what}"
        );
    }
    // A figure read through nan::de (NaN written as null) has no default: the reader
    // refuses a record without it, and so must the schema.
    let mut sweep = read(&root().join("crates/tpslab-report/tests/fixtures/sweep.json"));
    assert!(errors(&v, &sweep).is_empty());
    sweep["runs"][0]["metrics"]
        .as_object_mut()
        .expect("a run's metrics")
        .remove("tps");
    assert!(
        !errors(&v, &sweep).is_empty(),
        "the schema accepts a sweep run without tps"
    );
    assert!(
        tpslab_record::Record::from_json(&sweep.to_string()).is_err(),
        "tpslab reads a sweep run without tps"
    );
}
