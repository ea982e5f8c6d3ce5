//! The traits that carry analysis onto the record's types ([`tpslab_record`]):
//! `use tpslab_analysis::prelude::*;` makes `Summary::of`, `Ledger::build`,
//! `Facts::from_record`, `TcpRun::judge`, `RunMetrics::of`, `rec.outcome()` ... callable
//! as they were when the types lived here.

pub use crate::experiment::EstimateExt;
pub use crate::ledger::LedgerExt;
pub use crate::ramp::RampRecordExt;
pub use crate::stats::{LatencySummaryExt, SummaryExt};
pub use crate::sweep::RunMetricsExt;
pub use crate::tcp::{TcpRecordExt, TcpRunExt, WatchedReportExt};
pub use crate::usl::UslFitExt;
pub use crate::verdict::FactsExt;
pub use crate::waits::{ThreadStatesExt, ThreadWaitsExt};
