//! Figures that may be NaN (not measured, or an interval of one run): serde writes them as
//! JSON `null`; [`de`] reads `null` back as NaN, so such a record round-trips.

use serde::{Deserialize, Deserializer};

/// Reads a number, or `null` as NaN.
pub fn de<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Option::<f64>::deserialize(d).map(|v| v.unwrap_or(f64::NAN))
}
