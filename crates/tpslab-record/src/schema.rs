//! The record's JSON Schema (draft 2020-12), generated from the types with `schemars`
//! (feature `schema`): the envelope ([`crate::Record`]: `schema`, `kind`, `meta`) and one
//! body per kind, every type a body holds (plans from `tpslab_plan`, /proc snapshots from
//! `tpslab_proc`) in `$defs`. The repository keeps its output in `docs/record.schema.json`
//! (made by `cargo run -p tpslab-record --features schema --example record_schema`);
//! `.ci/run` checks it is current, tests/schema.rs validates the record fixtures against it.

use crate::{Record, RECORD_SCHEMA};

/// The schema as a JSON value: what [`Record`] serialises to, with `schema` pinned to
/// [`RECORD_SCHEMA`] (the only schema this release writes).
pub fn record_schema() -> serde_json::Value {
    let mut v = serde_json::to_value(schemars::schema_for!(Record))
        .expect("a schemars schema is plain JSON");
    if let Some(o) = v.as_object_mut() {
        o.insert("title".into(), RECORD_SCHEMA.into());
        if let Some(s) = o
            .get_mut("properties")
            .and_then(|p| p.get_mut("schema"))
            .and_then(|s| s.as_object_mut())
        {
            s.insert("const".into(), RECORD_SCHEMA.into());
        }
    }
    v
}

/// [`record_schema`] as the text of `docs/record.schema.json`: pretty-printed, ending
/// with a newline.
pub fn record_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&record_schema()).expect("JSON value prints");
    s.push('\n');
    s
}

/// The schema of an `f64` read through `crate::nan::de`: a number, or `null` where the
/// figure was NaN, and always present (the reader has no default for it). Used as
/// `schemars(with = "crate::schema::NanF64")`; `Option<f64>` there would make the field
/// optional, and `Option<f64>` with `required` would refuse the `null`.
pub struct NanF64;

impl schemars::JsonSchema for NanF64 {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NanF64".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["number", "null"],
            "format": "double"
        })
    }
}
