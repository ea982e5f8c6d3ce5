//! `tpslab compare`'s record: what differs between the records compared, and each
//! figure's value and change with its spread. Comparing is `tpslab_analysis::compare`.

use crate::estimate::{Effect, Estimate};
use serde::{Deserialize, Serialize};

/// Something that differs between the records (a setting, not a result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Difference {
    /// What: `plan server.rcvbuf`, `sysctl net.core.rmem_default`, `kernel`.
    pub what: String,
    /// Its value in each record, in order ("-" when absent).
    pub values: Vec<String>,
}

/// One figure across the records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FigureRow {
    /// Name with its unit ("socket loss %").
    pub name: String,
    /// Where it comes from.
    pub source: String,
    /// Per record: the estimate (n = batches, or 1 for a whole-run figure).
    pub values: Vec<Option<Estimate>>,
    /// Per record after the first: its difference from the first (Welch; None when either
    /// lacks the figure).
    pub effects: Vec<Option<Effect>>,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CompareReport {
    /// The compared records' kind (`udp_run`, `diagnose` ...).
    pub of_kind: String,
    /// How each record is named (its file, or its history id).
    pub labels: Vec<String>,
    /// Settings that differ, most telling first: the server's sockets as they were, the
    /// plan, then sysctls, then the host.
    pub differences: Vec<Difference>,
    /// The figures.
    pub figures: Vec<FigureRow>,
    /// How spread and significance were found.
    pub method: String,
    /// Caveats.
    pub notes: Vec<String>,
}
