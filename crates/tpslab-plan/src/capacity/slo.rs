//! A capacity search's objective: `--slo 'p99<20ms,loss<0.1%,errors<0.1%,rate>=99%'`
//! ([`Slo`], parsed by [`Slo::parse`]), each part an [`Objective`].

use crate::PlanError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A latency quantile an objective bounds (of the latency from the intended send time,
/// corrected for coordinated omission).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Quantile {
    /// The median.
    P50,
    /// The 90th percentile.
    P90,
    /// The 99th percentile.
    P99,
    /// The 99.9th percentile.
    P999,
    /// The largest latency seen.
    Max,
}

impl Quantile {
    /// Every quantile, in the order of their names in [`Quantile::name`].
    pub const ALL: [Quantile; 5] = [
        Quantile::P50,
        Quantile::P90,
        Quantile::P99,
        Quantile::P999,
        Quantile::Max,
    ];

    /// Its name in an objective: `p50`, `p90`, `p99`, `p99.9`, `max`.
    pub fn name(self) -> &'static str {
        match self {
            Quantile::P50 => "p50",
            Quantile::P90 => "p90",
            Quantile::P99 => "p99",
            Quantile::P999 => "p99.9",
            Quantile::Max => "max",
        }
    }
}

/// One objective a step must meet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Objective {
    /// A latency quantile below (or, `inclusive`, at most) `limit`.
    Latency {
        /// Which quantile.
        quantile: Quantile,
        /// The bound (JSON: `limit_ns`, integer ns).
        #[serde(rename = "limit_ns", with = "crate::time::ns")]
        #[cfg_attr(feature = "schema", schemars(with = "u64"))]
        limit: Duration,
        /// `<=` (true) rather than `<`.
        inclusive: bool,
    },
    /// Requests lost in the measurement window, % of those sent, below the bound.
    Loss {
        /// The bound, % (0..=100).
        limit_pct: f64,
        /// `<=` (true) rather than `<`.
        inclusive: bool,
    },
    /// Requests that failed (the kernel refused the send; for HTTP, an error reply), % of
    /// those attempted, below the bound.
    Errors {
        /// The bound, % (0..=100).
        limit_pct: f64,
        /// `<=` (true) rather than `<`.
        inclusive: bool,
    },
    /// Answered requests per second, % of the intended rate, at least (or, not
    /// `inclusive`, above) the bound.
    Rate {
        /// The bound, % of the intended rate (above 0, at most 100).
        min_pct: f64,
        /// `>=` (true) rather than `>`.
        inclusive: bool,
    },
}

/// The objective: every one of its parts must hold for a step to pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Slo {
    /// The parts, as given (each name at most once).
    pub objectives: Vec<Objective>,
}

/// What `--slo` accepts, for its error line.
pub const SLO_FORMS: &str = "objectives separated by commas: p50|p90|p99|p99.9|max<DURATION (e.g. p99<20ms), loss<PCT and errors<PCT (e.g. loss<0.1%), rate>=PCT of the intended rate (e.g. rate>=99%); `<=` and `>` too";

pub(super) fn pct_text(v: f64) -> String {
    format!("{v}%")
}

impl fmt::Display for Objective {
    /// The objective as `--slo` takes it: `p99<20ms`, `loss<=0.1%`, `rate>=99%`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lt = |inc: bool| if inc { "<=" } else { "<" };
        match *self {
            Objective::Latency {
                quantile,
                limit,
                inclusive,
            } => write!(
                f,
                "{}{}{}",
                quantile.name(),
                lt(inclusive),
                humantime::format_duration(limit)
            ),
            Objective::Loss {
                limit_pct,
                inclusive,
            } => write!(f, "loss{}{}", lt(inclusive), pct_text(limit_pct)),
            Objective::Errors {
                limit_pct,
                inclusive,
            } => write!(f, "errors{}{}", lt(inclusive), pct_text(limit_pct)),
            Objective::Rate { min_pct, inclusive } => write!(
                f,
                "rate{}{}",
                if inclusive { ">=" } else { ">" },
                pct_text(min_pct)
            ),
        }
    }
}

impl fmt::Display for Slo {
    /// The objectives as `--slo` takes them, joined by commas.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.objectives.iter().map(|o| o.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

impl Objective {
    /// The name its part of `--slo` starts with (`p99`, `loss`, `rate`): one objective
    /// per name.
    pub fn name(&self) -> &'static str {
        match self {
            Objective::Latency { quantile, .. } => quantile.name(),
            Objective::Loss { .. } => "loss",
            Objective::Errors { .. } => "errors",
            Objective::Rate { .. } => "rate",
        }
    }

    /// Whether `value` meets it (ns for a latency, % otherwise); a value not known
    /// (None) does not.
    pub fn holds(&self, value: Option<f64>) -> bool {
        let Some(v) = value.filter(|v| v.is_finite()) else {
            return false;
        };
        match *self {
            Objective::Latency {
                limit, inclusive, ..
            } => {
                let l = limit.as_nanos() as f64;
                if inclusive {
                    v <= l
                } else {
                    v < l
                }
            }
            Objective::Loss {
                limit_pct,
                inclusive,
            }
            | Objective::Errors {
                limit_pct,
                inclusive,
            } => {
                if inclusive {
                    v <= limit_pct
                } else {
                    v < limit_pct
                }
            }
            Objective::Rate { min_pct, inclusive } => {
                if inclusive {
                    v >= min_pct
                } else {
                    v > min_pct
                }
            }
        }
    }
}

/// A percentage `0.1%` (or `0.1`): a finite number, at least 0.
fn parse_pct_value(s: &str) -> Option<f64> {
    let t = s.trim();
    let t = t.strip_suffix('%').unwrap_or(t).trim();
    t.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)
}

/// Parses a percentage flag (`--resolution 5%`, `5`): a number above 0 up to 100, with or
/// without `%`. The error is `LABEL VALUE: allowed a percentage above 0 up to 100, e.g. 5%`.
pub fn parse_pct(label: &str, s: &str) -> Result<f64, PlanError> {
    parse_pct_value(s)
        .filter(|v| *v > 0.0 && *v <= 100.0)
        .ok_or_else(|| PlanError::value(label, s, "a percentage above 0 up to 100, e.g. 5%"))
}

impl Slo {
    /// Parses `--slo` (labelled `label`): objectives separated by commas ([`SLO_FORMS`]),
    /// e.g. `p99<20ms,loss<0.1%,errors<0.1%,rate>=99%`. Errors (one line naming the part
    /// that is wrong and what is allowed for it): an empty objective, an unknown name, a
    /// comparison that does not fit the name (`p99>5ms`), a value that is not a duration
    /// or a percentage, a bound no step can meet (`p99<0s`, `loss<0%`, `rate>=0%` or
    /// above 100 %), a name given twice.
    pub fn parse(label: &str, s: &str) -> Result<Slo, PlanError> {
        let mut objectives: Vec<Objective> = vec![];
        if s.trim().is_empty() {
            return Err(PlanError::value(label, s, SLO_FORMS));
        }
        for part in s.split(',') {
            let o = parse_objective(label, part.trim())?;
            if objectives.iter().any(|x| x.name() == o.name()) {
                return Err(PlanError::value(
                    label,
                    s,
                    format!("each objective once ({} is given twice)", o.name()),
                ));
            }
            objectives.push(o);
        }
        Ok(Slo { objectives })
    }
}

fn parse_objective(label: &str, part: &str) -> Result<Objective, PlanError> {
    let split = part.find(['<', '>', '=']);
    let Some(i) = split else {
        return Err(PlanError::value(label, part, SLO_FORMS));
    };
    let name = part[..i].trim();
    let rest = &part[i..];
    let (op, value) = ["<=", ">=", "<", ">"]
        .iter()
        .find_map(|op| rest.strip_prefix(op).map(|v| (*op, v.trim())))
        .ok_or_else(|| PlanError::value(label, part, SLO_FORMS))?;
    let lower_bound = op.starts_with('<');
    let inclusive = op.ends_with('=');
    if let Some(quantile) = Quantile::ALL
        .into_iter()
        .find(|q| q.name() == name || (name == "p999" && *q == Quantile::P999))
    {
        let allowed = format!(
            "{}<DURATION with a duration above 0, e.g. {}<20ms",
            quantile.name(),
            quantile.name()
        );
        if !lower_bound {
            return Err(PlanError::value(label, part, allowed));
        }
        let d = humantime::parse_duration(value)
            .map_err(|_| PlanError::value(label, part, allowed.clone()))?;
        // Written as integer ns: a bound beyond u64 ns (584 years) is kept at that.
        let limit = Duration::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        if limit.is_zero() {
            return Err(PlanError::value(label, part, allowed));
        }
        return Ok(Objective::Latency {
            quantile,
            limit,
            inclusive,
        });
    }
    match name {
        "loss" | "errors" => {
            let allowed = format!(
                "{name}<PCT or {name}<=PCT with a percentage up to 100 (above 0 with <), e.g. {name}<0.1%"
            );
            let v = parse_pct_value(value)
                .filter(|v| *v <= 100.0 && (inclusive || *v > 0.0))
                .filter(|_| lower_bound)
                .ok_or_else(|| PlanError::value(label, part, allowed))?;
            Ok(if name == "loss" {
                Objective::Loss {
                    limit_pct: v,
                    inclusive,
                }
            } else {
                Objective::Errors {
                    limit_pct: v,
                    inclusive,
                }
            })
        }
        "rate" => {
            let allowed =
                "rate>=PCT of the intended rate with a percentage above 0 up to 100 (below 100 with >), e.g. rate>=99%";
            let v = parse_pct_value(value)
                .filter(|v| *v > 0.0 && *v <= 100.0 && (inclusive || *v < 100.0))
                .filter(|_| !lower_bound)
                .ok_or_else(|| PlanError::value(label, part, allowed))?;
            Ok(Objective::Rate {
                min_pct: v,
                inclusive,
            })
        }
        _ => Err(PlanError::value(label, part, SLO_FORMS)),
    }
}
