//! Figures that may be NaN (not measured, or an interval of one run): serde writes them as
//! JSON `null`; [`de`] reads `null` back as NaN, so such a record round-trips.

use serde::{Deserialize, Deserializer};

/// Reads a number, or `null` as NaN.
pub fn de<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Option::<f64>::deserialize(d).map(|v| v.unwrap_or(f64::NAN))
}

fn word(v: f64) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

fn from_word<E: serde::de::Error>(w: &str) -> Result<f64, E> {
    match w {
        "NaN" => Ok(f64::NAN),
        "inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        _ => Err(E::custom(format!(
            "\"{w}\": allowed a number, \"inf\", \"-inf\" or \"NaN\""
        ))),
    }
}

/// A number, one of the words, or null (NaN), read by a visitor of its own (an untagged
/// enum would buffer whatever stands there, a list of any length included, before trying
/// each form).
struct NumOrWord(f64);

impl<'de> Deserialize<'de> for NumOrWord {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NumOrWord, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = NumOrWord;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, \"inf\", \"-inf\", \"NaN\" or null")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<NumOrWord, E> {
                Ok(NumOrWord(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<NumOrWord, E> {
                Ok(NumOrWord(v as f64))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<NumOrWord, E> {
                Ok(NumOrWord(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, w: &str) -> Result<NumOrWord, E> {
                from_word(w).map(NumOrWord)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<NumOrWord, E> {
                Ok(NumOrWord(f64::NAN))
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<NumOrWord, E> {
                Ok(NumOrWord(f64::NAN))
            }
        }
        d.deserialize_any(V)
    }
}

impl NumOrWord {
    fn value<E: serde::de::Error>(self) -> Result<f64, E> {
        Ok(self.0)
    }
}

/// An f64 that may be infinite or NaN (a fit's unbounded interval): finite values as
/// numbers, the others as `"inf"`, `"-inf"`, `"NaN"`, so the record reads back exactly.
pub mod word {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes a number, or its word when not finite.
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_str(super::word(*v))
        }
    }

    /// Reads a number, a word, or null (NaN).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        super::NumOrWord::deserialize(d)?.value()
    }

    /// The JSON Schema of what [`serialize`] writes and [`deserialize`] reads: a number,
    /// one of the words, or null.
    #[cfg(feature = "schema")]
    pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [{ "type": ["number", "null"] }, { "enum": ["inf", "-inf", "NaN"] }]
        })
    }
}

/// A pair of [`word`] values (an interval's bounds).
pub mod word_pair {
    use serde::ser::SerializeTuple;
    use serde::{Deserialize, Deserializer, Serializer};

    struct W(f64);
    impl serde::Serialize for W {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            super::word::serialize(&self.0, s)
        }
    }

    /// Writes `[lo, hi]`.
    pub fn serialize<S: Serializer>(v: &(f64, f64), s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&W(v.0))?;
        t.serialize_element(&W(v.1))?;
        t.end()
    }

    /// Reads `[lo, hi]`, each a number, a word, or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<(f64, f64), D::Error> {
        let (a, b) = <(super::NumOrWord, super::NumOrWord)>::deserialize(d)?;
        Ok((a.value()?, b.value()?))
    }

    /// The JSON Schema of `[lo, hi]`, each as [`super::word::schema`].
    #[cfg(feature = "schema")]
    pub fn schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let one = super::word::schema(g);
        schemars::json_schema!({
            "type": "array",
            "prefixItems": [one, one],
            "minItems": 2,
            "maxItems": 2
        })
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    struct T {
        #[serde(with = "super::word")]
        x: f64,
        #[serde(with = "super::word_pair")]
        ci: (f64, f64),
    }

    #[test]
    fn non_finite_figures_round_trip_exactly() {
        let t = T {
            x: f64::NEG_INFINITY,
            ci: (0.5, f64::INFINITY),
        };
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(text, r#"{"x":"-inf","ci":[0.5,"inf"]}"#);
        let back: T = serde_json::from_str(&text).unwrap();
        assert_eq!((back.x, back.ci), (f64::NEG_INFINITY, (0.5, f64::INFINITY)));
        let nan: T = serde_json::from_str(r#"{"x":null,"ci":["NaN",1]}"#).unwrap();
        assert!(nan.x.is_nan() && nan.ci.0.is_nan());
        assert!(serde_json::from_str::<T>(r#"{"x":"huge","ci":[1,2]}"#).is_err());
    }
}
