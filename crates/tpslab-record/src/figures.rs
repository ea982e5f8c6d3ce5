//! Every number of a record as it is written, checked as serde writes it (a
//! [`serde::Serializer`] that holds nothing but the path it is at: no JSON value of the
//! whole record is built, so checking a 200 MB record costs no more memory than its path).

use crate::estimate::MIN_RUNS_FOR_INTERVAL;
use serde::ser::{self, Serialize};
use std::fmt;
use tpslab_plan::limits::MAX_FIGURE;

/// Keys whose numbers are identifiers, not figures: any u64 is one.
const IDENTIFIERS: &[&str] = &["run_id", "seed"];

/// The fields of an estimate (an object with all of them is one).
const ESTIMATE: [&str; 5] = ["n", "mean", "stddev", "ci_lo", "ci_hi"];

/// Every number of `v` (as serde_json writes it) within [`MAX_FIGURE`] in magnitude (NaN
/// and infinities are written as `null`), and every estimate (an object with `n`, `mean`,
/// `stddev`, `ci_lo`, `ci_hi`) with the figures its `n` runs give: a mean of one run or
/// more, a spread of two or more, an interval of [`MIN_RUNS_FOR_INTERVAL`] or more. The
/// error names the number and its path (`18446744073709551615 at generator.attempted:
/// allowed figures up to 9007199254740992 in magnitude`).
pub(crate) fn check<T: Serialize + ?Sized>(v: &T) -> Result<(), String> {
    let mut w = Walk::default();
    v.serialize(&mut w).map_err(|Found(m)| m)
}

/// What was found wrong (or why the value does not serialise).
#[derive(Debug)]
struct Found(String);

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Found {}

impl ser::Error for Found {
    fn custom<T: fmt::Display>(m: T) -> Found {
        Found(format!("does not serialise: {m}"))
    }
}

/// What the last value written was, for the estimate of the object holding it.
#[derive(Clone, Copy, PartialEq)]
enum Last {
    /// A number (a whole one: its value).
    Number(Option<u64>),
    /// Anything else (null included).
    Other,
}

/// An object being written: which estimate fields it has, and whether each is a number.
#[derive(Default)]
struct Frame {
    has: [bool; 5],
    number: [bool; 5],
    n: Option<u64>,
}

#[derive(Default)]
struct Walk {
    /// The keys from the root to the value being written.
    at: Vec<String>,
    /// The objects being written, innermost last.
    frames: Vec<Frame>,
    last: Option<Last>,
}

impl Walk {
    fn path(&self) -> String {
        self.at.join(".")
    }

    fn number(&mut self, shown: &dyn fmt::Display, big: bool, whole: Option<u64>) -> R {
        self.last = Some(Last::Number(whole));
        if big
            && !self
                .at
                .last()
                .is_some_and(|k| IDENTIFIERS.contains(&k.as_str()))
        {
            return Err(Found(format!(
                "{shown} at {}: allowed figures up to {MAX_FIGURE} in magnitude",
                self.path()
            )));
        }
        Ok(())
    }

    fn other(&mut self) -> R {
        self.last = Some(Last::Other);
        Ok(())
    }

    /// Writes the value of the entry `key` of the innermost object.
    fn entry<T: Serialize + ?Sized>(&mut self, key: String, v: &T) -> R {
        let slot = ESTIMATE.iter().position(|k| *k == key);
        self.at.push(key);
        self.last = None;
        v.serialize(&mut *self)?;
        self.at.pop();
        if let (Some(i), Some(f)) = (slot, self.frames.last_mut()) {
            f.has[i] = true;
            let last = self.last.unwrap_or(Last::Other);
            f.number[i] = matches!(last, Last::Number(_));
            if i == 0 {
                f.n = match last {
                    Last::Number(n) => n,
                    Last::Other => None,
                };
            }
        }
        Ok(())
    }

    fn open(&mut self) {
        self.frames.push(Frame::default());
    }

    /// Ends the innermost object: its estimate checked.
    fn close(&mut self) -> R {
        let f = self.frames.pop().unwrap_or_default();
        self.last = Some(Last::Other);
        let Some(n) = f.n.filter(|_| f.has.iter().all(|&h| h)) else {
            return Ok(());
        };
        let needed = match n as usize {
            0 => 0,
            1 => 1,
            n if n < MIN_RUNS_FOR_INTERVAL => 2,
            _ => 4,
        };
        match (1..=needed).find(|&i| !f.number[i]) {
            Some(i) => Err(Found(format!(
                "an estimate of {n} run(s) without its {} at {}",
                ESTIMATE[i],
                self.path()
            ))),
            None => Ok(()),
        }
    }
}

type R = Result<(), Found>;

impl<'a> ser::Serializer for &'a mut Walk {
    type Ok = ();
    type Error = Found;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Variant<'a>;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Variant<'a>;

    fn serialize_bool(self, _: bool) -> R {
        self.other()
    }
    fn serialize_i8(self, v: i8) -> R {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> R {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> R {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> R {
        let whole = u64::try_from(v).ok();
        self.number(&v, v.unsigned_abs() > MAX_FIGURE, whole)
    }
    fn serialize_i128(self, v: i128) -> R {
        let whole = u64::try_from(v).ok();
        self.number(&v, v.unsigned_abs() > MAX_FIGURE as u128, whole)
    }
    fn serialize_u8(self, v: u8) -> R {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> R {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> R {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> R {
        self.number(&v, v > MAX_FIGURE, Some(v))
    }
    fn serialize_u128(self, v: u128) -> R {
        self.number(&v, v > MAX_FIGURE as u128, u64::try_from(v).ok())
    }
    fn serialize_f32(self, v: f32) -> R {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> R {
        // serde_json writes NaN and the infinities as null.
        match serde_json::Number::from_f64(v) {
            Some(n) => self.number(&n, v.abs() > MAX_FIGURE as f64, None),
            None => self.other(),
        }
    }
    fn serialize_char(self, _: char) -> R {
        self.other()
    }
    fn serialize_str(self, _: &str) -> R {
        self.other()
    }
    fn serialize_bytes(self, _: &[u8]) -> R {
        // A list of bytes: every one within the bound.
        self.other()
    }
    fn serialize_none(self) -> R {
        self.other()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_unit(self) -> R {
        self.other()
    }
    fn serialize_unit_struct(self, _: &'static str) -> R {
        self.other()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> R {
        self.other()
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> R {
        self.open();
        self.entry(variant.into(), v)?;
        self.close()
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Found> {
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, Found> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Found> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Variant<'a>, Found> {
        self.at.push(variant.into());
        Ok(Variant(self))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, Found> {
        self.open();
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Found> {
        self.open();
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Variant<'a>, Found> {
        self.at.push(variant.into());
        self.open();
        Ok(Variant(self))
    }
}

impl ser::SerializeSeq for &mut Walk {
    type Ok = ();
    type Error = Found;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        v.serialize(&mut **self)
    }
    fn end(self) -> R {
        self.other()
    }
}

impl ser::SerializeTuple for &mut Walk {
    type Ok = ();
    type Error = Found;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        v.serialize(&mut **self)
    }
    fn end(self) -> R {
        self.other()
    }
}

impl ser::SerializeTupleStruct for &mut Walk {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        v.serialize(&mut **self)
    }
    fn end(self) -> R {
        self.other()
    }
}

impl ser::SerializeMap for &mut Walk {
    type Ok = ();
    type Error = Found;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> R {
        // The key as serde_json writes it: a string, a number or a unit variant's name.
        let key = serde_json::to_value(k).map_err(|e| Found(format!("a key: {e}")))?;
        let key = match key {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        };
        self.at.push(key);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        let key = self.at.pop().unwrap_or_default();
        self.entry(key, v)
    }
    fn end(self) -> R {
        self.close()
    }
}

impl ser::SerializeStruct for &mut Walk {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> R {
        self.entry(key.into(), v)
    }
    fn end(self) -> R {
        self.close()
    }
}

/// A tuple or struct variant: written as `{variant: ...}`, its name on the path.
struct Variant<'a>(&'a mut Walk);

impl ser::SerializeTupleVariant for Variant<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        v.serialize(&mut *self.0)
    }
    fn end(self) -> R {
        self.0.at.pop();
        self.0.other()
    }
}

impl ser::SerializeStructVariant for Variant<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> R {
        self.0.entry(key.into(), v)
    }
    fn end(self) -> R {
        self.0.close()?;
        self.0.at.pop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked_where_serde_json_writes_them() {
        #[derive(serde::Serialize)]
        struct Inner {
            seed: u64,
            x: Vec<f64>,
        }
        #[derive(serde::Serialize)]
        enum E {
            V { count: u64 },
        }
        #[derive(serde::Serialize)]
        struct T {
            a: Inner,
            e: E,
            m: std::collections::BTreeMap<u32, i64>,
        }
        let t = |x: f64, count: u64, m: i64| T {
            a: Inner {
                seed: u64::MAX,
                x: vec![1.0, x, f64::NAN],
            },
            e: E::V { count },
            m: [(7, m)].into(),
        };
        assert_eq!(check(&t(2.0, 3, -4)), Ok(()));
        assert_eq!(check(&t(f64::INFINITY, 3, -4)), Ok(()), "written as null");
        assert_eq!(
            check(&t(1e300, 3, 4)),
            Err("1e+300 at a.x: allowed figures up to 9007199254740992 in magnitude".into())
        );
        assert!(check(&t(1.0, u64::MAX, 4))
            .unwrap_err()
            .starts_with("18446744073709551615 at e.V.count:"));
        assert!(check(&t(1.0, 3, i64::MIN))
            .unwrap_err()
            .starts_with("-9223372036854775808 at m.7:"));
    }

    #[test]
    fn an_estimate_without_the_figures_its_runs_give_is_refused() {
        let mut e = crate::estimate::Estimate {
            n: 3,
            mean: 1.0,
            stddev: 0.5,
            ci_lo: 0.0,
            ci_hi: f64::NAN,
            ..Default::default()
        };
        #[derive(serde::Serialize)]
        struct T<'a> {
            cells: Vec<std::collections::BTreeMap<&'a str, crate::estimate::Estimate>>,
        }
        let t = |e| T {
            cells: vec![[("tps", e)].into()],
        };
        assert_eq!(
            check(&t(e)),
            Err("an estimate of 3 run(s) without its ci_hi at cells.tps".into())
        );
        e.n = 2;
        assert_eq!(check(&t(e)), Ok(()));
        e.stddev = f64::NAN;
        assert_eq!(
            check(&t(e)),
            Err("an estimate of 2 run(s) without its stddev at cells.tps".into())
        );
    }
}
