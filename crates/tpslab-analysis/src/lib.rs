//! Pure analysis for tpslab: summaries with spread, latency summaries from HDR histograms,
//! the loss ledger, the verdict, the judgements of every kind of run, all computed on the
//! record's types, named by their one path in [`tpslab_record`] (or [`tpslab_plan`] for a
//! plan a record embeds); nothing here re-exports them.
//!
//! Nothing here touches the network or /proc: a record read back from disk can be
//! re-analysed.

pub mod bdp;
pub mod buffer;
pub mod capacity;
pub mod capacity_ledger;
pub mod capacity_stream;
pub mod compare;
pub mod doctor;
pub mod drop_reason;
pub mod experiment;
pub mod gate;
pub mod idle;
pub mod idle_owner;
pub mod idle_stated;
pub mod ledger;
pub mod load_http;
pub mod merge;
pub mod nagle;
pub mod nan;
pub mod quic_server;
pub mod ramp;
pub mod ramp_listen;
pub mod ramp_rank;
pub mod ramp_threads;
pub mod reuseport;
pub mod rt_ledger;
pub mod runtime;
pub mod stats;
pub mod sweep;
pub mod tcp;
pub mod tcp_listen;
pub mod tcp_timers;
pub mod usl;
pub mod verdict;
pub mod waits;
