//! tpslab's record: one versioned JSON document per command run ([`Record`], schema
//! [`RECORD_SCHEMA`]): the metadata ([`Meta`]), and a body per kind ([`Body`]): a UDP run
//! or a watch ([`RunRecord`]), a diagnosis ([`DiagnoseRecord`]), a ramp, a sweep, the
//! servers, a TCP flow, doctor, bdp, the probes, a comparison. Records of the previous release
//! (`tpslab.run/1`, `tpslab.diagnose/1`) are still read ([`Record::from_json`]), and every
//! record read is checked ([`Record::check`]).
//!
//! This crate holds the types a record is made of, their serialisation, their checks and
//! the figures read straight off them; it is a leaf: nothing here computes a ledger, a
//! verdict or a statistic (`tpslab_analysis` does, on these types), and it depends on no
//! tpslab crate but the plans ([`tpslab_plan`]) and the /proc parsers ([`tpslab_proc`])
//! whose types a record embeds.
//!
//! Modules follow the analysis that fills them: [`run`] (a UDP run), [`ledger`],
//! [`stats`], [`gaps`], [`histogram`], [`waits`], [`runtime`], [`buffer`], [`verdict`], [`tcp`],
//! [`ramp`] and [`usl`], [`sweep`] and [`estimate`], [`doctor`], [`bdp`], [`idle`], [`compare`],
//! [`merge`]; [`nan`] holds the serde helpers for figures that may be NaN.

#![warn(missing_docs)]

pub mod bdp;
pub mod budget;
pub mod buffer;
pub mod capacity;
pub mod compare;
pub mod doctor;
mod envelope;
pub mod estimate;
mod figures;
pub mod gaps;
pub mod histogram;
pub mod http_counts;
pub mod http_series;
pub mod idle;
pub mod ledger;
pub mod load_http;
pub mod merge;
pub mod nan;
pub mod quic;
pub mod quic_server;
pub mod ramp;
mod read;
pub mod rt_ledger;
pub mod run;
pub mod runtime;
#[cfg(feature = "schema")]
pub mod schema;
pub mod stats;
pub mod sweep;
mod target;
pub mod tcp;
pub mod usl;
mod valid;
pub mod verdict;
pub mod waits;

pub use envelope::{
    Body, DiagnoseRecord, Meta, NotVerified, RampReport, Record, RecordError, ServeRecord,
    SweepReport, DIAGNOSE_SCHEMA_V1, READABLE_SCHEMAS, RECORD_SCHEMA, RUN_SCHEMA_V1,
};
pub use read::KINDS;
pub use run::{
    AgentInfo, DropReasons, Environment, GeneratorReport, LatencyHistograms, ListenSocket,
    ObserverReport, ReplyFrames, RunRecord, Series, ServerReport, SocketReader, TargetProcess,
    TargetSocket, TcpListen,
};
pub use tcp::{ServeTcpRecord, TcpRecord};

/// Whether a count is 0: such a field is left out of a record (`skip_serializing_if`),
/// and records written before it read it as 0 (`#[serde(default)]`).
pub(crate) fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}
