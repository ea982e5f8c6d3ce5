//! A record read under a memory budget: every item of every list and every entry of every
//! map is charged the size of the value it becomes ([`std::mem::size_of`] of its type)
//! before it is read, and the read fails once the charges pass the budget. The budget is
//! [`budget_for`] the text's length: a hostile file of many short items that each become a
//! large value (30 M `""` in `meta.argv`, 18 M `null` in a list of options) is refused while
//! it is read, where it took 9-15x its size in memory before.
//!
//! What is charged is the items' own slots, not what they own on the heap beyond them: a
//! string's bytes (at most the text's), a list's spare capacity (a `Vec` grows by doubling, so
//! at most as much again). Memory while reading is therefore at most the text, plus its
//! strings (at most the text again), plus twice the budget.
//!
//! The wrapper passes every call through to serde_json's deserializer unchanged; only the
//! seeds of lists' items and maps' keys and values are charged.

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess};
use serde::de::{VariantAccess, Visitor};
use serde::Deserialize;
use std::cell::Cell;
use std::fmt;

/// The bytes of items a record of `text_len` bytes may become: twice its length plus
/// 64 MiB. Records tpslab writes need at most 0.6x their length plus the observer's series
/// (the largest share, measured on every fixture and on a 223 MB `tcp --lab-rtt` record:
/// `budget::tests`); the 64 MiB covers the small records whose lists of zeros need up to 4x
/// (`0,` is 2 bytes of text and 8 of f64).
pub fn budget_for(text_len: usize) -> u64 {
    2 * text_len as u64 + (64 << 20)
}

/// What is left of a read's budget, shared by every part read from one text.
pub(crate) struct Budget {
    left: Cell<u64>,
    max: u64,
}

impl Budget {
    pub(crate) fn new(max: u64) -> Budget {
        Budget {
            left: Cell::new(max),
            max,
        }
    }

    /// The bytes charged so far.
    #[cfg(test)]
    pub(crate) fn used(&self) -> u64 {
        self.max - self.left.get()
    }

    fn charge<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        // A zero-sized item still costs its visit: one byte each, so a list of `[]`s
        // is bounded too.
        let bytes = bytes.max(1) as u64;
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(E::custom(format_args!(
                "the record's lists hold more than {} MiB of items: allowed up to twice \
                 the file's size plus 64 MiB (what tpslab's records need)",
                self.max >> 20
            ))),
        }
    }
}

/// `T` read from `text` with every list item and map entry charged to `budget`.
/// Errors: serde_json's (with line and column), including the budget's.
pub(crate) fn from_str<'a, T: Deserialize<'a>>(
    text: &'a str,
    budget: &Budget,
) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = T::deserialize(Charged {
        inner: &mut de,
        budget,
    })?;
    de.end()?;
    Ok(v)
}

/// A deserializer, visitor, access or seed whose lists and maps are charged.
struct Charged<'b, X> {
    inner: X,
    budget: &'b Budget,
}

impl<'b, X> Charged<'b, X> {
    fn wrap<Y>(&self, inner: Y) -> Charged<'b, Y> {
        Charged {
            inner,
            budget: self.budget,
        }
    }
}

// A seed: the value it makes is charged, and read through a charged deserializer.
impl<'de, 'b, T: DeserializeSeed<'de>> DeserializeSeed<'de> for Charged<'b, T> {
    type Value = T::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T::Value, D::Error> {
        self.budget.charge(std::mem::size_of::<T::Value>())?;
        let d = self.wrap(d);
        self.inner.deserialize(d)
    }
}

/// A seed passed through uncharged (an enum's variant name, a value already charged as the
/// item holding it) but read through a charged deserializer.
struct Through<'b, T> {
    inner: T,
    budget: &'b Budget,
}

impl<'de, 'b, T: DeserializeSeed<'de>> DeserializeSeed<'de> for Through<'b, T> {
    type Value = T::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T::Value, D::Error> {
        self.inner.deserialize(Charged {
            inner: d,
            budget: self.budget,
        })
    }
}

impl<'de, 'b, A: SeqAccess<'de>> SeqAccess<'de> for Charged<'b, A> {
    type Error = A::Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let seed = self.wrap(seed);
        self.inner.next_element_seed(seed)
    }
    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'de, 'b, A: MapAccess<'de>> MapAccess<'de> for Charged<'b, A> {
    type Error = A::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let seed = self.wrap(seed);
        self.inner.next_key_seed(seed)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let seed = self.wrap(seed);
        self.inner.next_value_seed(seed)
    }
    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'de, 'b, A: EnumAccess<'de>> EnumAccess<'de> for Charged<'b, A> {
    type Error = A::Error;
    type Variant = Charged<'b, A::Variant>;
    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), A::Error> {
        let budget = self.budget;
        let (v, variant) = self.inner.variant_seed(Through {
            inner: seed,
            budget,
        })?;
        Ok((
            v,
            Charged {
                inner: variant,
                budget,
            },
        ))
    }
}

impl<'de, 'b, A: VariantAccess<'de>> VariantAccess<'de> for Charged<'b, A> {
    type Error = A::Error;
    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        let budget = self.budget;
        self.inner.newtype_variant_seed(Through {
            inner: seed,
            budget,
        })
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, A::Error> {
        let v = self.wrap(v);
        self.inner.tuple_variant(len, v)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, A::Error> {
        let v = self.wrap(v);
        self.inner.struct_variant(fields, v)
    }
}

/// Visitor methods passed through unchanged.
macro_rules! pass_visit {
    ($($name:ident($t:ty)),* $(,)?) => {$(
        fn $name<E: de::Error>(self, x: $t) -> Result<V::Value, E> {
            self.inner.$name(x)
        }
    )*};
}

impl<'de, 'b, V: Visitor<'de>> Visitor<'de> for Charged<'b, V> {
    type Value = V::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }
    pass_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        let d = self.wrap(d);
        self.inner.visit_some(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        let d = self.wrap(d);
        self.inner.visit_newtype_struct(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        let seq = self.wrap(seq);
        self.inner.visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let map = self.wrap(map);
        self.inner.visit_map(map)
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        let data = self.wrap(data);
        self.inner.visit_enum(data)
    }
}

/// Deserializer methods whose visitor is wrapped, with their extra arguments.
macro_rules! pass_de {
    ($($name:ident($($arg:ident: $t:ty),*)),* $(,)?) => {$(
        fn $name<V: Visitor<'de>>(self, $($arg: $t,)* v: V) -> Result<V::Value, D::Error> {
            let v = self.wrap(v);
            self.inner.$name($($arg,)* v)
        }
    )*};
}

impl<'de, 'b, D: Deserializer<'de>> Deserializer<'de> for Charged<'b, D> {
    type Error = D::Error;
    pass_de!(
        deserialize_any(),
        deserialize_bool(),
        deserialize_i8(),
        deserialize_i16(),
        deserialize_i32(),
        deserialize_i64(),
        deserialize_i128(),
        deserialize_u8(),
        deserialize_u16(),
        deserialize_u32(),
        deserialize_u64(),
        deserialize_u128(),
        deserialize_f32(),
        deserialize_f64(),
        deserialize_char(),
        deserialize_str(),
        deserialize_string(),
        deserialize_bytes(),
        deserialize_byte_buf(),
        deserialize_option(),
        deserialize_unit(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_seq(),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_map(),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
        deserialize_identifier(),
        deserialize_ignored_any(),
    );
    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
