//! The fuzz target for reading records back (issue 32): real records (the fixtures)
//! mutated the way a corrupt or hostile file would be (numbers set to 0, u64::MAX, 1e308,
//! negative, null; arrays emptied; strings replaced) are either refused by
//! `Record::from_json` with an error, or render in every format without a panic and
//! without an impossible figure (inf, NaN). Bounded (256 cases) so it runs in CI.

use proptest::prelude::*;
use serde_json::Value;
use tpslab_record::Record;
use tpslab_report::{render, Format};

use crate::common::FIXTURES;

/// The fixtures mutated: every one (a compare record whose effects' `diff` or `ci_hi` is
/// `null`, read back as NaN, printed "NaN" until its renderer said "-").
fn fuzzed() -> Vec<&'static str> {
    FIXTURES.to_vec()
}

fn fixture(name: &str) -> Value {
    let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// JSON pointers of every number, string and array in `v`.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                leaves(x, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            out.push(at.clone());
            for (i, x) in a.iter().enumerate() {
                leaves(x, format!("{at}/{i}"), out);
            }
        }
        // Identifiers are not figures: any value is one (a seed of u64::MAX is printed).
        Value::Number(_) if at.ends_with("/seed") || at.ends_with("/run_id") => {}
        Value::Number(_) | Value::String(_) => out.push(at),
        Value::Bool(_) | Value::Null => {}
    }
}

/// The field a pointer names: its list indices as `*`.
fn field(p: &str) -> String {
    p.split('/')
        .map(|s| if s.parse::<usize>().is_ok() { "*" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

/// What a mutation puts in place of a value.
#[derive(Debug, Clone, Copy)]
enum Mutation {
    Zero,
    U64Max,
    Huge,
    Negative,
    Null,
    Empty,
    Text,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::Zero),
        Just(Mutation::U64Max),
        Just(Mutation::Huge),
        Just(Mutation::Negative),
        Just(Mutation::Null),
        Just(Mutation::Empty),
        Just(Mutation::Text),
    ]
}

fn apply(v: &mut Value, m: Mutation) {
    *v = match (m, &*v) {
        (Mutation::Zero, _) => Value::from(0),
        (Mutation::U64Max, _) => Value::from(u64::MAX),
        (Mutation::Huge, _) => Value::from(1e308),
        (Mutation::Negative, Value::Number(n)) => Value::from(-n.as_f64().unwrap_or(1.0) - 1.0),
        (Mutation::Negative, _) => Value::from(-1),
        (Mutation::Null, _) => Value::Null,
        (Mutation::Empty, Value::Array(_)) => Value::Array(vec![]),
        (Mutation::Empty, _) => Value::from(""),
        (Mutation::Text, _) => Value::from("cell99 <b>&\"x\"</b>\n"),
    };
}

/// Renders `rec` in every format: no panic (the property), and no figure printed as
/// inf or NaN, or with more digits than a count can have, by the terminal report.
fn render_everywhere(rec: &Record) -> Result<(), TestCaseError> {
    for f in [
        Format::Term,
        Format::Json,
        Format::Csv,
        Format::Html,
        Format::Metrics,
        Format::Svg,
    ] {
        let mut out = Vec::new();
        // A kind without a plot or table in a format is an error, never a panic.
        if render(&mut out, rec, f, true).is_ok() && f == Format::Term {
            let text = String::from_utf8_lossy(&out);
            for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
                // Not a number, or one of more digits than any count a run reaches
                // (2^53 has 16).
                let digits = word.bytes().filter(u8::is_ascii_digit).count();
                prop_assert!(
                    word != "inf" && word != "NaN" && digits <= 16,
                    "an impossible figure ({word}) in the {} report",
                    rec.kind()
                );
            }
        }
    }
    Ok(())
}

#[test]
fn every_fixture_renders_everywhere() {
    for name in FIXTURES {
        let rec = Record::from_json(&fixture(name).to_string()).unwrap();
        render_everywhere(&rec).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("FUZZ_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_record_is_refused_or_renders(
        which in 0..fuzzed().len(),
        picks in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>(), mutation()), 1..4),
    ) {
        let mut v = fixture(fuzzed()[which]);
        for (i, every, m) in picks {
            let mut at = vec![];
            leaves(&v, String::new(), &mut at);
            // Each field equally likely (a series' thousand values count as one), then its
            // first place or every place it has in the record's lists.
            let mut fields: Vec<String> = at.iter().map(|p| field(p)).collect();
            fields.sort();
            fields.dedup();
            let f = i.get(&fields).clone();
            let places: Vec<&String> = at.iter().filter(|p| field(p) == f).collect();
            let places = if every { places } else { places[..1].to_vec() };
            for p in places {
                if let Some(x) = v.pointer_mut(p) {
                    apply(x, m);
                }
            }
        }
        if let Ok(rec) = Record::from_json(&v.to_string()) {
            render_everywhere(&rec)?;
        }
    }
}

/// Every field of every fixture with every mutation, at its first place and at all of
/// them (some 14 000 records, a minute in release): `--ignored` to run it.
#[test]
#[ignore]
fn every_field_with_every_mutation() {
    let muts = [
        Mutation::Zero,
        Mutation::U64Max,
        Mutation::Huge,
        Mutation::Negative,
        Mutation::Null,
        Mutation::Empty,
        Mutation::Text,
    ];
    std::panic::set_hook(Box::new(|_| {}));
    let mut bad = std::collections::BTreeMap::<String, Vec<String>>::new();
    for name in fuzzed() {
        let v0 = fixture(name);
        let mut at = vec![];
        leaves(&v0, String::new(), &mut at);
        let mut fields: Vec<String> = at.iter().map(|p| field(p)).collect();
        fields.sort();
        fields.dedup();
        for f in &fields {
            for m in muts {
                for every in [false, true] {
                    let mut v = v0.clone();
                    let places: Vec<&String> = at.iter().filter(|p| &field(p) == f).collect();
                    let places = if every { places } else { places[..1].to_vec() };
                    for p in places {
                        if let Some(x) = v.pointer_mut(p) {
                            apply(x, m);
                        }
                    }
                    let text = v.to_string();
                    let r = std::panic::catch_unwind(|| {
                        if let Ok(rec) = Record::from_json(&text) {
                            render_everywhere(&rec).map_err(|e| e.to_string())
                        } else {
                            Ok(())
                        }
                    });
                    let what = match r {
                        Ok(Ok(())) => continue,
                        Ok(Err(e)) => e,
                        Err(p) => format!(
                            "PANIC {}",
                            p.downcast_ref::<String>()
                                .cloned()
                                .or(p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default()
                        ),
                    };
                    bad.entry(format!("{name} {f}"))
                        .or_default()
                        .push(format!("{m:?}/{every}: {}", &what[..what.len().min(150)]));
                }
            }
        }
    }
    for (k, v) in &bad {
        println!("{k}\n    {}", v.join("\n    "));
    }
    assert!(bad.is_empty(), "{} field(s) fail", bad.len());
}

/// JSON pointers of every value in `v` (objects and lists included), and of every object.
fn places(v: &Value, at: String, all: &mut Vec<String>, objects: &mut Vec<String>) {
    all.push(at.clone());
    match v {
        Value::Object(m) => {
            objects.push(at.clone());
            for (k, x) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                places(x, format!("{at}/{k}"), all, objects);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                places(x, format!("{at}/{i}"), all, objects);
            }
        }
        _ => {}
    }
}

/// Any JSON value: scalars of every kind (huge and negative numbers), lists and objects
/// (keys a record has among them), a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300f64..1e300).prop_map(Value::from),
        "[a-z_]{0,12}".prop_map(Value::from),
        Just(Value::from("inf")),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z_]{1,8}",
                    Just("kind".to_string()),
                    Just("n".to_string()),
                    Just("mean".to_string())
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A change to a record's shape.
#[derive(Debug, Clone)]
enum Reshape {
    /// The value at a place replaced.
    Replace(prop::sample::Index, Value),
    /// A key of an object removed.
    Remove(prop::sample::Index, prop::sample::Index),
    /// A key added to an object (the envelope's among them).
    Add(prop::sample::Index, String, Value),
}

fn reshape() -> impl Strategy<Value = Reshape> {
    let key = prop_oneof![
        "[a-z_]{1,8}",
        Just("kind".to_string()),
        Just("meta".to_string()),
        Just("schema".to_string()),
        Just("plan".to_string()),
        Just("samples".to_string()),
    ];
    prop_oneof![
        (any::<prop::sample::Index>(), json_value()).prop_map(|(i, v)| Reshape::Replace(i, v)),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(i, k)| Reshape::Remove(i, k)),
        (any::<prop::sample::Index>(), key, json_value())
            .prop_map(|(i, k, v)| Reshape::Add(i, k, v)),
    ]
}

fn apply_reshape(v: &mut Value, r: &Reshape) {
    let (mut all, mut objects) = (vec![], vec![]);
    places(v, String::new(), &mut all, &mut objects);
    if objects.is_empty() {
        // The record itself replaced by a scalar or a list: nothing more to reshape.
        return;
    }
    match r {
        Reshape::Replace(i, x) => {
            if let Some(p) = v.pointer_mut(&i.get(&all).clone()) {
                *p = x.clone();
            }
        }
        Reshape::Remove(i, k) => {
            if let Some(m) = v
                .pointer_mut(&i.get(&objects).clone())
                .and_then(Value::as_object_mut)
            {
                let keys: Vec<String> = m.keys().cloned().collect();
                if !keys.is_empty() {
                    m.remove(k.get(&keys));
                }
            }
        }
        Reshape::Add(i, k, x) => {
            if let Some(m) = v
                .pointer_mut(&i.get(&objects).clone())
                .and_then(Value::as_object_mut)
            {
                m.insert(k.clone(), x.clone());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("FUZZ_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256), failure_persistence: None, ..ProptestConfig::default() })]

    /// Any record `Record::from_json` reads (its fields in any order, keys removed or
    /// added, values of any shape put anywhere) passes its check and reads back as it is
    /// written; anything else is a `RecordError`, never a panic.
    #[test]
    fn a_reshaped_record_is_read_whole_or_refused(
        which in 0..fuzzed().len(),
        changes in prop::collection::vec(reshape(), 1..4),
        reverse in any::<bool>(),
    ) {
        let mut v = fixture(fuzzed()[which]);
        for c in &changes {
            apply_reshape(&mut v, c);
        }
        // The envelope's fields last or first: serde_json's map keeps keys sorted.
        let text = match (reverse, v.as_object()) {
            (true, Some(m)) => {
                let parts: Vec<String> =
                    m.iter().rev().map(|(k, x)| format!("{}:{x}", Value::from(k.as_str()))).collect();
                format!("{{{}}}", parts.join(","))
            }
            _ => v.to_string(),
        };
        if let Ok(rec) = Record::from_json(&text) {
            prop_assert!(rec.check().is_ok());
            let written = serde_json::to_string(&rec).unwrap();
            let back = Record::from_json(&written);
            prop_assert!(back.is_ok(), "{:?}", back.err());
            prop_assert_eq!(serde_json::to_string(&back.unwrap()).unwrap(), written);
        }
    }
}
