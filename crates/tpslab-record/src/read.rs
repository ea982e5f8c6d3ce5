//! Reading a record's JSON in bounded memory ([`Record::from_json`]): every part is
//! deserialised straight from the text into its type, never through serde's buffered
//! `Content` or a `serde_json::Value` (a flattened or internally tagged enum buffers the
//! whole map it reads: a 196 MB record took 6.4 GB that way).
//!
//! A first pass reads the envelope (`schema`, `kind`, `meta`; serde_json skips everything
//! else without allocating), then the body's type reads the same text (ignoring the
//! envelope's fields); a ramp's two halves (the run and its analysis) read it once each.
//! Series are refused while they are read once longer than any command writes
//! ([`bounded_vec`]), so a hostile file cannot make a reader hold them first.
//! Every other list and map is charged while it is read against one budget for the whole
//! text ([`crate::budget`]: twice its length plus 64 MiB), so a file of many tiny items
//! that become large values is refused before it holds many times its size.

use crate::budget::{self, budget_for, Budget};
use crate::envelope::{Body, DiagnoseRecord, Meta, NotVerified, RampReport, Record, RecordError};
use crate::envelope::{DIAGNOSE_SCHEMA_V1, RECORD_SCHEMA, RUN_SCHEMA_V1};
use crate::run::RunRecord;
use serde::de::{self, DeserializeSeed, IgnoredAny, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

/// The kinds a record of [`RECORD_SCHEMA`] may have, as written in `kind`.
pub const KINDS: &[&str] = &[
    "udp_run",
    "watch",
    "diagnose",
    "ramp",
    "sweep",
    "serve",
    "tcp",
    "serve_tcp",
    "doctor",
    "bdp",
    "probe_idle",
    "probe_pool",
    "load_http",
    "compare",
    "capacity",
];

impl Record {
    /// Reads a record of any schema in [`crate::READABLE_SCHEMAS`] and checks it
    /// ([`Record::check`]); another schema is an error naming it and the ones read.
    /// Memory: the text plus the record's types (each part read straight from the text;
    /// series longer than any command writes refused while read; all lists' items at most
    /// [`crate::budget::budget_for`] the text's length). Errors: not JSON or not
    /// a record's shape ([`RecordError::Parse`], with serde's line and column), a schema
    /// not read ([`RecordError::Schema`]), what no run writes ([`RecordError::Invalid`]).
    pub fn from_json(text: &str) -> Result<Record, RecordError> {
        Record::from_json_within(text, &Budget::new(budget_for(text.len())))
    }

    /// [`Record::from_json`] with the record's lists charged to `budget`.
    pub(crate) fn from_json_within(text: &str, budget: &Budget) -> Result<Record, RecordError> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            schema: String,
            kind: Option<String>,
            meta: Option<Meta>,
        }
        let head: Head = budget::from_str(text, budget)?;
        let rec = match head.schema.as_str() {
            RECORD_SCHEMA => {
                let missing = <serde_json::Error as de::Error>::missing_field;
                let kind = head.kind.ok_or_else(|| missing("kind"))?;
                let meta = head.meta.ok_or_else(|| missing("meta"))?;
                Record::with_meta(meta, body(&kind, text, budget)?)
            }
            RUN_SCHEMA_V1 => {
                let V1Run(r) = budget::from_str(text, budget)?;
                let watch = r.argv.get(1).is_some_and(|c| c == "watch");
                Record::new(if watch {
                    Body::Watch(r)
                } else {
                    Body::UdpRun(r)
                })
            }
            DIAGNOSE_SCHEMA_V1 => {
                let d: DiagnoseV1 = budget::from_str(text, budget)?;
                Record::new(Body::Diagnose(d.into()))
            }
            _ => return Err(RecordError::Schema { found: head.schema }),
        };
        rec.check()?;
        Ok(rec)
    }
}

/// The body of kind `kind`, read from the record's whole text (its type ignores the
/// envelope's fields), its lists charged to `budget`.
fn body(kind: &str, text: &str, budget: &Budget) -> Result<Body, serde_json::Error> {
    fn part<'a, T: Deserialize<'a>>(text: &'a str, budget: &Budget) -> serde_json::Result<T> {
        budget::from_str(text, budget)
    }
    Ok(match kind {
        "udp_run" => Body::UdpRun(part(text, budget)?),
        "watch" => Body::Watch(part(text, budget)?),
        "diagnose" => Body::Diagnose(part(text, budget)?),
        "ramp" => Body::Ramp(RampReport {
            run: part(text, budget)?,
            analysis: part(text, budget)?,
        }),
        "sweep" => Body::Sweep(part(text, budget)?),
        "serve" => Body::Serve(part(text, budget)?),
        "tcp" => Body::Tcp(part(text, budget)?),
        "serve_tcp" => Body::ServeTcp(part(text, budget)?),
        "doctor" => Body::Doctor(part(text, budget)?),
        "bdp" => Body::Bdp(part(text, budget)?),
        "probe_idle" => Body::ProbeIdle(part(text, budget)?),
        "probe_pool" => Body::ProbePool(part(text, budget)?),
        "load_http" => Body::LoadHttp(part(text, budget)?),
        "compare" => Body::Compare(part(text, budget)?),
        "capacity" => Body::Capacity(part(text, budget)?),
        _ => return Err(de::Error::unknown_variant(kind, KINDS)),
    })
}

/// A run record of the previous release: its plan was untyped JSON, skipped here (the
/// rest of the record reads as it was).
struct V1Run(RunRecord);

impl<'de> Deserialize<'de> for V1Run {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<V1Run, D::Error> {
        without_keys(d, &["plan"]).map(V1Run)
    }
}

/// A diagnose record of the previous release: [`DiagnoseRecord`] with runs of the
/// previous release.
#[derive(Deserialize)]
struct DiagnoseV1 {
    interrupted: bool,
    scenario: String,
    probe: crate::buffer::TruesizeProbe,
    facts: crate::verdict::Facts,
    diagnosis: crate::verdict::Diagnosis,
    before: V1Run,
    applied: Vec<String>,
    after: Option<V1Run>,
    restored: Vec<(String, String)>,
    notes: Vec<String>,
    #[serde(default)]
    not_verified: Option<NotVerified>,
}

impl From<DiagnoseV1> for DiagnoseRecord {
    fn from(d: DiagnoseV1) -> DiagnoseRecord {
        DiagnoseRecord {
            interrupted: d.interrupted,
            scenario: d.scenario,
            probe: d.probe,
            facts: d.facts,
            diagnosis: d.diagnosis,
            before: d.before.0,
            applied: d.applied,
            after: d.after.map(|a| a.0),
            restored: d.restored,
            notes: d.notes,
            not_verified: d.not_verified,
        }
    }
}

/// `T` read from a map whose keys in `skip` are passed over unread (each value skipped
/// without being held), streaming: the other entries go to `T`'s own visitor as they come.
pub(crate) fn without_keys<'de, T, D>(d: D, skip: &'static [&'static str]) -> Result<T, D::Error>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    struct V<T>(&'static [&'static str], PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(de::value::MapAccessDeserializer::new(Skipping {
                map,
                skip: self.0,
            }))
        }
    }
    d.deserialize_map(V(skip, PhantomData))
}

/// A map's entries without those whose keys are in `skip`.
struct Skipping<A> {
    map: A,
    skip: &'static [&'static str],
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Skipping<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<String>()? {
            if self.skip.contains(&key.as_str()) {
                self.map.next_value::<IgnoredAny>()?;
                continue;
            }
            return seed.deserialize(key.into_deserializer()).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// A list of at most `max` items, refused while read once longer (`what`: the field and
/// its items, e.g. `observer series t_ms`; `why`: who writes at most `max`). The error
/// names both: `observer series t_ms of more than 20000 samples: allowed up to 20000 (what
/// an observer keeps)`.
pub(crate) fn bounded_vec<'de, T, D>(
    d: D,
    what: &'static str,
    max: usize,
    why: &'static str,
) -> Result<Vec<T>, D::Error>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    d.deserialize_seq(Bounded {
        what,
        max,
        why,
        _t: PhantomData,
    })
}

struct Bounded<T> {
    what: &'static str,
    max: usize,
    why: &'static str,
    _t: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Bounded<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a list of at most {} items", self.max)
    }

    fn visit_seq<S: de::SeqAccess<'de>>(self, mut seq: S) -> Result<Vec<T>, S::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(x) = seq.next_element()? {
            if out.len() == self.max {
                return Err(de::Error::custom(too_long(self.what, self.max, self.why)));
            }
            out.push(x);
        }
        Ok(out)
    }
}

/// The phrase of a list longer than any command writes.
pub(crate) fn too_long(what: &str, max: usize, why: &str) -> String {
    format!("{what} of more than {max} items: allowed up to {max} ({why})")
}

/// An observer's named series ([`crate::run::Series::values`]): at most
/// [`tpslab_plan::limits::OBSERVER_SERIES`] names of at most
/// [`tpslab_plan::limits::OBSERVER_SAMPLES`] values each, refused while read once over.
pub(crate) fn series_values<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, Vec<f64>>, D::Error> {
    use tpslab_plan::limits::{OBSERVER_SAMPLES, OBSERVER_SERIES};
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = BTreeMap<String, Vec<f64>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of named series")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(name) = map.next_key::<String>()? {
                if out.len() == OBSERVER_SERIES {
                    return Err(de::Error::custom(too_long(
                        "observer series values",
                        OBSERVER_SERIES,
                        "the names an observer writes",
                    )));
                }
                let v = map.next_value_seed(SeriesSeed)?;
                out.insert(name, v);
            }
            Ok(out)
        }
    }
    struct SeriesSeed;
    impl<'de> DeserializeSeed<'de> for SeriesSeed {
        type Value = Vec<f64>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<f64>, D::Error> {
            bounded_vec(
                d,
                "an observer series",
                OBSERVER_SAMPLES,
                "the samples an observer keeps",
            )
        }
    }
    d.deserialize_map(V)
}

/// An observer's sample times ([`crate::run::Series::t_ms`]), at most
/// [`tpslab_plan::limits::OBSERVER_SAMPLES`].
pub(crate) fn series_times<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    bounded_vec(
        d,
        "observer series t_ms",
        tpslab_plan::limits::OBSERVER_SAMPLES,
        "the samples an observer keeps",
    )
}

/// One TCP flow's TCP_INFO samples, at most [`tpslab_plan::limits::FLOW_SAMPLES`].
pub(crate) fn tcp_samples<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<crate::tcp::TcpSample>, D::Error> {
    bounded_vec(
        d,
        "a flow's samples",
        tpslab_plan::limits::FLOW_SAMPLES,
        "the TCP_INFO samples `tcp` keeps of one flow",
    )
}

/// A ramp's steps, at most [`tpslab_plan::limits::RAMP_STEPS`].
pub(crate) fn ramp_steps<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<crate::ramp::StepResult>, D::Error> {
    bounded_vec(
        d,
        "a ramp's steps",
        tpslab_plan::limits::RAMP_STEPS,
        "the steps a ramp plans",
    )
}

/// A ramp's ledgers, one per step at most: [`tpslab_plan::limits::RAMP_STEPS`].
pub(crate) fn ramp_ledgers<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<crate::rt_ledger::RtLedger>, D::Error> {
    bounded_vec(
        d,
        "a ramp's ledgers",
        tpslab_plan::limits::RAMP_STEPS,
        "the steps a ramp plans",
    )
}

/// A ledger's parts, at most one of each [`crate::rt_ledger::RtPart`].
pub(crate) fn ledger_parts<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<crate::rt_ledger::LedgerPart>, D::Error> {
    bounded_vec(
        d,
        "a ledger's parts",
        crate::rt_ledger::RtPart::ALL.len(),
        "one of each part",
    )
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
