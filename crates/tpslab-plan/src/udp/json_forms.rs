//! How a few of the UDP plans' fields are written in JSON (serde's `with` and
//! `skip_serializing_if` helpers, with their JSON Schemas): a payload as hex, a rate that
//! may be `"max"`, a pacing slack that may be `"auto"`.

/// `Option<Vec<u8>>` as a lowercase hex string in JSON (a payload file's bytes).
pub(super) mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(b) => {
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                s.serialize_some(&hex)
            }
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let Some(h) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        if h.len() % 2 != 0 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom(
                "payload: allowed an even number of hex digits",
            ));
        }
        (0..h.len())
            .step_by(2)
            .map(|i| {
                h.get(i..i + 2)
                    .and_then(|x| u8::from_str_radix(x, 16).ok())
                    .ok_or_else(|| serde::de::Error::custom("payload: not hex"))
            })
            .collect::<Result<Vec<u8>, _>>()
            .map(Some)
    }

    /// The JSON Schema of the payload: hex digits in pairs, or null.
    #[cfg(feature = "schema")]
    pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": ["string", "null"], "pattern": "^([0-9a-fA-F]{2})*$" })
    }
}

/// A rate in pps as a JSON number, or `"max"` for infinity (JSON has no infinity: serde
/// would write null and never read it back).
pub(super) mod rate_or_max {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_infinite() {
            s.serialize_str("max")
        } else {
            s.serialize_f64(*v)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Rate {
            Pps(f64),
            Word(String),
        }
        match Rate::deserialize(d)? {
            Rate::Pps(r) => Ok(r),
            Rate::Word(w) if w == "max" => Ok(f64::INFINITY),
            Rate::Word(w) => Err(serde::de::Error::custom(format!(
                "rate \"{w}\": allowed a number of pps or \"max\""
            ))),
        }
    }

    /// The JSON Schema of a rate: packets per second, or `"max"`.
    #[cfg(feature = "schema")]
    pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "anyOf": [{ "type": "number" }, { "const": "max" }] })
    }
}

pub(super) fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// A [`PacingSlack`](crate::udp::PacingSlack) in JSON: `"auto"`, or the given slack as serde writes a `Duration`
/// (`{"secs": 0, "nanos": 1000000}`), as `pacing_slack` was always written.
pub(super) mod pacing_slack {
    use crate::udp::PacingSlack;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(v: &PacingSlack, s: S) -> Result<S::Ok, S::Error> {
        match v {
            PacingSlack::Auto => s.serialize_str("auto"),
            PacingSlack::Given(d) => d.serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PacingSlack, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Slack {
            Given(Duration),
            Word(String),
        }
        match Slack::deserialize(d)? {
            Slack::Given(d) => Ok(PacingSlack::Given(d)),
            Slack::Word(w) if w == "auto" => Ok(PacingSlack::Auto),
            Slack::Word(w) => Err(serde::de::Error::custom(format!(
                "pacing_slack \"{w}\": allowed a duration or \"auto\""
            ))),
        }
    }

    /// The JSON Schema of a pacing slack: a `Duration`, or `"auto"`.
    #[cfg(feature = "schema")]
    pub fn schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let d = g.subschema_for::<Duration>();
        schemars::json_schema!({ "anyOf": [d, { "const": "auto" }] })
    }
}
