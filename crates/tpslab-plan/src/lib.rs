//! Plans: what a run will do, validated before anything runs.
//!
//! Every limit on a setting is stated once, in [`limits`], and checked by the one
//! validation of each plan type ([`udp::ServerConfig::validate`],
//! [`udp::LoadConfig::validate`], [`ramp::RampPlan::validate`], ...), whichever way the
//! plan was made: command-line flags, a TOML plan file, a sweep factor's level, or a plan
//! read back from a record. Values
//! written by users (sizes, rates, durations, sequence fields) are parsed by [`units`]
//! with checked arithmetic: every bad input is a [`PlanError`], never a panic or a wrap.

pub mod bdp;
pub mod capacity;
pub mod doctor;
pub mod fleet;
pub mod framing;
pub mod http;
pub mod launch;
pub mod limits;
pub mod load_http;
pub mod login;
pub mod probe;
pub mod proto;
pub mod ramp;
pub mod sweep;
pub mod sysctl;
pub mod target;
pub mod tcp;
pub mod time;
pub mod udp;
pub mod units;

mod error;
pub use error::PlanError;
