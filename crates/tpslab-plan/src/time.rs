//! How a plan's times (`Duration` in memory) are written in JSON: as the integer
//! nanoseconds (`_ns` fields) or float milliseconds (`_ms` fields) earlier versions
//! wrote, so records of every version read back. Used with `#[serde(with = ...)]`.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// A duration as integer nanoseconds, saturated at `u64::MAX` (584 years: past every
/// limit): the engine's clocks count u64 ns. Inlined: the users' loop calls it per reply,
/// and this crate builds at opt-level 1.
#[inline]
pub fn nanos(d: &Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A `Duration` as integer nanoseconds.
pub mod ns {
    use super::*;

    /// Writes `d` as its nanoseconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(nanos(d))
    }

    /// Reads integer nanoseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_nanos)
    }
}

/// An `Option<Duration>` as integer nanoseconds or `null`.
pub mod opt_ns {
    use super::*;

    /// Writes `d` as its nanoseconds, `None` as `null`.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&nanos(d)),
            None => s.serialize_none(),
        }
    }

    /// Reads integer nanoseconds or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(d).map(|o| o.map(Duration::from_nanos))
    }
}

/// A `Duration` as float milliseconds (`d.as_secs_f64() * 1e3`, as `_ms` fields were
/// always written).
pub mod ms {
    use super::*;
    use serde::de::Error;

    /// Writes `d` as its milliseconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }

    /// Reads float milliseconds. Errors: a negative or non-finite number, or one beyond
    /// `Duration`'s range.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v / 1e3)
            .map_err(|_| D::Error::custom(format!("{v} ms: allowed a finite number >= 0")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct T {
        #[serde(with = "ns")]
        a_ns: Duration,
        #[serde(with = "opt_ns")]
        b_ns: Option<Duration>,
        #[serde(with = "opt_ns")]
        c_ns: Option<Duration>,
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct M {
        #[serde(with = "ms")]
        a_ms: Duration,
    }

    #[test]
    fn milliseconds_are_written_as_they_were_and_bad_ones_refused() {
        let m = M {
            a_ms: Duration::from_millis(10),
        };
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"a_ms":10.0}"#);
        let back: M = serde_json::from_str(r#"{"a_ms":0.25}"#).unwrap();
        assert_eq!(back.a_ms, Duration::from_micros(250));
        let e = serde_json::from_str::<M>(r#"{"a_ms":-1.0}"#).unwrap_err();
        assert!(
            e.to_string()
                .contains("-1 ms: allowed a finite number >= 0"),
            "{e}"
        );
    }

    #[test]
    fn durations_are_written_as_the_nanoseconds_they_were() {
        let t = T {
            a_ns: Duration::from_millis(1500),
            b_ns: Some(Duration::from_nanos(7)),
            c_ns: None,
        };
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(j, r#"{"a_ns":1500000000,"b_ns":7,"c_ns":null}"#);
        assert_eq!(serde_json::from_str::<T>(&j).unwrap(), t);
        let max = T {
            a_ns: Duration::MAX,
            ..t
        };
        assert!(serde_json::to_string(&max)
            .unwrap()
            .starts_with(&format!("{{\"a_ns\":{}", u64::MAX)));
    }
}
