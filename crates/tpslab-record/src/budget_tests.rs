use super::*;
use crate::Record;

fn fixtures_dir() -> String {
    format!(
        "{}/../tpslab-report/tests/fixtures",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Every fixture (records of every kind from real runs) reads within its budget, and what
/// its lists need is printed beside its length (the figures `budget_for`'s doc quotes).
#[test]
fn every_fixture_needs_less_than_its_budget() {
    let mut names: Vec<_> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    assert!(names.len() > 20, "{names:?}");
    for p in names {
        let text = std::fs::read_to_string(&p).unwrap();
        let budget = Budget::new(u64::MAX / 2);
        let rec = Record::from_json_within(&text, &budget);
        assert!(rec.is_ok(), "{}: {:?}", p.display(), rec.err());
        let ratio = budget.used() as f64 / text.len() as f64;
        eprintln!(
            "{}: {} bytes of text, {} of items ({ratio:.2}x)",
            p.file_name().unwrap().to_string_lossy(),
            text.len(),
            budget.used()
        );
        assert!(budget.used() < budget_for(text.len()), "{}", p.display());
    }
}

/// Items are charged their size: 1,000 `""` as Strings cost 24,000 bytes, and the read fails
/// past the budget with the line naming it.
#[test]
fn items_are_charged_their_size_and_refused_past_the_budget() {
    let text = format!("[{}]", vec!["\"\""; 1000].join(","));
    let b = Budget::new(1 << 20);
    let v: Vec<String> = from_str(&text, &b).unwrap();
    assert_eq!(v.len(), 1000);
    assert_eq!(b.used(), 1000 * std::mem::size_of::<String>() as u64);

    let b = Budget::new(23_999);
    let e = from_str::<Vec<String>>(&text, &b).unwrap_err().to_string();
    assert!(e.contains("more than 0 MiB of items"), "{e}");
    // Nested lists, maps and options are charged too (every level's items).
    let text = r#"{"a":[[null,null],[null]],"b":{"k":[1,2,3]}}"#;
    type T = std::collections::BTreeMap<String, serde_json::Value>;
    let b = Budget::new(1 << 20);
    let _: T = from_str(text, &b).unwrap();
    let value = std::mem::size_of::<serde_json::Value>() as u64;
    let key = std::mem::size_of::<String>() as u64;
    // 2 top keys + 2 top values; "a": 2 lists + 3 nulls; "b": 1 key + 1 value + 3 numbers.
    assert_eq!(
        b.used(),
        2 * key + 2 * value + 5 * value + key + value + 3 * value
    );
}

/// The review's hostile file: a record whose `meta.argv` holds millions of `""` (3 bytes
/// each of text, 24 as Strings) is refused while read, before its strings pass twice the
/// file's size plus 64 MiB; a record of millions of `null` options likewise.
#[test]
fn a_record_of_many_tiny_items_is_refused_while_read() {
    let fixture = std::fs::read_to_string(format!("{}/bdp.json", fixtures_dir())).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&fixture).unwrap();
    let n = 6_000_000;
    v["meta"]["argv"] = serde_json::Value::Array(vec![serde_json::Value::from(""); n]);
    let text = serde_json::to_string(&v).unwrap();
    let e = Record::from_json(&text).unwrap_err().to_string();
    assert!(
        e.contains("MiB of items: allowed up to twice the file's size plus 64 MiB"),
        "{e}"
    );
    // The same record with a few hundred items reads.
    v["meta"]["argv"] = serde_json::Value::Array(vec![serde_json::Value::from(""); 300]);
    Record::from_json(&serde_json::to_string(&v).unwrap()).unwrap();
}
