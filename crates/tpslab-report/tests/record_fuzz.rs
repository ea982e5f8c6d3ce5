//! The fuzz target for reading records back (issue 32): real records (the fixtures)
//! mutated the way a corrupt or hostile file would be (numbers set to 0, u64::MAX, 1e308,
//! negative, null; arrays emptied; strings replaced) are either refused by
//! `Record::from_json` with an error, or render in every format without a panic and
//! without an impossible figure (inf, NaN). Bounded (256 cases) so it runs in CI.

use proptest::prelude::*;
use serde_json::Value;
use tpslab_analysis::record::Record;
use tpslab_report::{render, Format};

mod common;
use common::FIXTURES;

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
