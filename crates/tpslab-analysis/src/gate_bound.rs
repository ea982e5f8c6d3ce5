//! Thresholds on a run's figures in `--fail-on`'s one syntax: `p99<20ms`, `errors<0.1%`,
//! `rps>=5000`. As k6's thresholds, the expression is the condition that must HOLD:
//! `p99<20ms` passes while p99 is under 20 ms, `rps>=5000` while the rate is at least
//! 5000/s. A bound written on its figure's bad side (`p99>20ms`: latency is better low)
//! means what k6 means too (it passes while p99 is above 20 ms), and the report says so
//! beside its mark ([`Bound::reading`]). (`loss>1%` is not a bound: it is the UDP
//! commands' failure condition, [`super::FailOn::LossAbove`].)

use tpslab_record::stats::LatencySummary;

/// A latency quantile a bound names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantile {
    /// `p50`.
    P50,
    /// `p90`.
    P90,
    /// `p99`.
    P99,
    /// `p99.9` (also `p999`).
    P999,
    /// `max`.
    Max,
}

impl Quantile {
    /// The quantile's value in `s`, ns.
    pub fn of(self, s: &LatencySummary) -> u64 {
        match self {
            Quantile::P50 => s.p50_ns,
            Quantile::P90 => s.p90_ns,
            Quantile::P99 => s.p99_ns,
            Quantile::P999 => s.p999_ns,
            Quantile::Max => s.max_ns,
        }
    }

    /// As written in a bound: `p99`, `p99.9`, `max`.
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

/// What a bound is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// A latency quantile, ns (the bound's value is written as a duration).
    Latency(Quantile),
    /// Failed requests (and 4xx/5xx replies) of all requests, percent (`errors<0.1%`).
    ErrorShare,
    /// Requests a second: a load's achieved rate, a capacity search's sustained rate
    /// (`rps>=5000`, a capacity floor).
    Rps,
}

impl Figure {
    /// The name `--fail-on`'s `applies` lists use: `latency`, `error_share`, `rps`.
    pub fn kind(self) -> &'static str {
        match self {
            Figure::Latency(_) => "latency",
            Figure::ErrorShare => "error_share",
            Figure::Rps => "rps",
        }
    }

    /// Whether a lower value is the better one.
    fn low_is_good(self) -> bool {
        !matches!(self, Figure::Rps)
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

/// One bound: `FIGURE OP VALUE`, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// What it is on.
    pub figure: Figure,
    /// How it compares.
    pub op: Op,
    /// The value: ns for a latency, percent for the error share, requests/s for the rate.
    pub value: f64,
    /// As written (trimmed), e.g. `p99<20ms`.
    pub text: String,
}

impl Bound {
    /// A bound's form, `FIGURE<VALUE` (`<`, `<=`, `>`, `>=`): None when `t` has no
    /// comparison or names no figure a bound takes (`loss>1%` is [`super::FailOn`]'s
    /// own); Some(Err(allowed)) when the figure is named but the value is not one.
    pub fn parse(t: &str) -> Option<Result<Bound, String>> {
        let i = t.find(['<', '>'])?;
        let (name, rest) = (t[..i].trim(), &t[i..]);
        let (op, v) = if let Some(v) = rest.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = rest.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Op::Lt, v)
        } else {
            (Op::Gt, &rest[1..])
        };
        let v = v.trim();
        let q = match name {
            "p50" => Some(Quantile::P50),
            "p90" => Some(Quantile::P90),
            "p99" => Some(Quantile::P99),
            "p99.9" | "p999" => Some(Quantile::P999),
            "max" => Some(Quantile::Max),
            _ => None,
        };
        let (figure, value) = match (q, name) {
            (Some(q), _) => (
                Figure::Latency(q),
                tpslab_plan::units::parse_duration(name, v)
                    .map(|d| d.as_nanos() as f64)
                    .map_err(|_| format!("{name}: a duration (e.g. {name}<20ms)")),
            ),
            (None, "errors") => (
                Figure::ErrorShare,
                v.strip_suffix('%')
                    .and_then(|x| x.trim().parse::<f64>().ok())
                    .filter(|x| x.is_finite() && (0.0..=100.0).contains(x))
                    .ok_or_else(|| "errors: a share 0..=100 % (e.g. 'errors<0.1%')".into()),
            ),
            (None, "rps") => (
                Figure::Rps,
                tpslab_plan::units::parse_pps(name, v)
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| "rps: requests a second (e.g. 'rps>=5000', 5k)".into()),
            ),
            _ => return None,
        };
        Some(value.map(|value| Bound {
            figure,
            op,
            value,
            text: t.trim().to_string(),
        }))
    }

    /// Whether the comparison as written holds for `v`.
    fn holds(&self, v: f64) -> bool {
        match self.op {
            Op::Lt => v < self.value,
            Op::Le => v <= self.value,
            Op::Gt => v > self.value,
            Op::Ge => v >= self.value,
        }
    }

    /// Whether the bound is written on its figure's good side (`p99<20ms`, `rps>=5000`).
    fn on_good_side(&self) -> bool {
        matches!(self.op, Op::Lt | Op::Le) == self.figure.low_is_good()
    }

    /// Whether `v` passes: the comparison as written holds (k6's meaning, whichever side
    /// it is written on).
    pub fn passes(&self, v: f64) -> bool {
        self.holds(v)
    }

    /// What a bound written on its figure's bad side means, said beside its mark: `must
    /// hold (as in k6): passes while p99 is above 20 ms`. None on the good side, whose
    /// meaning is plain.
    pub fn reading(&self) -> Option<String> {
        if self.on_good_side() {
            return None;
        }
        let what = match self.figure {
            Figure::Latency(q) => q.name().to_string(),
            Figure::ErrorShare => "the error share".into(),
            Figure::Rps => "the rate".into(),
        };
        let v = match self.figure {
            Figure::Latency(_) => fmt_ns(self.value),
            Figure::ErrorShare => format!("{} %", self.value),
            Figure::Rps => format!("{}/s", self.value),
        };
        let side = match self.op {
            Op::Lt => "under",
            Op::Le => "at most",
            Op::Gt => "above",
            Op::Ge => "at least",
        };
        Some(format!(
            "must hold (as in k6): passes while {what} is {side} {v}"
        ))
    }
}

/// The figures a bound is judged on, each None when the run did not measure it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Latency of the answered requests (`load http`: from the intended send time; a
    /// closed loop's: from the send).
    pub latency: Option<LatencySummary>,
    /// Failed requests (and 4xx/5xx replies) of all requests, percent.
    pub error_pct: Option<f64>,
    /// Requests a second, and what it is (`achieved`, `sustained by the search`).
    pub rps: Option<(f64, String)>,
}

impl Figures {
    /// The figure `f` measured, in the bound's unit, with how it reads
    /// (`p99 9.40 ms`, `errors 0.012 %`, `rps 23124.0 (achieved)`); None unmeasured.
    pub fn value(&self, f: Figure) -> Option<(f64, String)> {
        match f {
            Figure::Latency(q) => self.latency.as_ref().filter(|l| l.count > 0).map(|l| {
                let v = q.of(l) as f64;
                (v, format!("{} {}", q.name(), fmt_ns(v)))
            }),
            Figure::ErrorShare => self.error_pct.map(|p| (p, format!("errors {p:.3} %"))),
            Figure::Rps => self
                .rps
                .as_ref()
                .map(|(r, what)| (*r, format!("rps {r:.1} ({what})"))),
        }
    }
}

/// Nanoseconds with a readable unit (as the reports write them).
fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(t: &str) -> Bound {
        Bound::parse(t).unwrap().unwrap()
    }

    #[test]
    fn parses_each_figure_and_refuses_bad_values() {
        let p = b("p99<20ms");
        assert_eq!(
            (p.figure, p.op, p.value),
            (Figure::Latency(Quantile::P99), Op::Lt, 20e6)
        );
        assert_eq!(b("p99.9 <= 1us").value, 1e3);
        assert_eq!(b("p999<1s").figure, Figure::Latency(Quantile::P999));
        let e = b("errors<0.1%");
        assert_eq!((e.figure, e.value), (Figure::ErrorShare, 0.1));
        let r = b("rps>=5k");
        assert_eq!((r.figure, r.op, r.value), (Figure::Rps, Op::Ge, 5000.0));
        assert!(Bound::parse("loss>1%").is_none());
        assert!(Bound::parse("errors").is_none());
        for bad in [
            "p99<20",
            "errors<0.1",
            "errors<101%",
            "rps>=fast",
            "rps>=max",
        ] {
            assert!(Bound::parse(bad).unwrap().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bound_is_the_condition_that_must_hold_as_in_k6() {
        // Thresholds (k6): must hold.
        assert!(b("p99<20ms").passes(19e6));
        assert!(!b("p99<20ms").passes(20e6));
        assert!(b("rps>=5000").passes(5000.0));
        assert!(!b("rps>=5000").passes(4999.0));
        assert!(!b("errors<0.1%").passes(0.2));
        assert_eq!(b("p99<20ms").reading(), None);
        assert_eq!(b("rps>=5000").reading(), None);
        // Written on the bad side: still the condition that must hold, as k6 reads it
        // (it failed here when it held), and said so.
        assert!(b("p99>20ms").passes(21e6));
        assert!(!b("p99>20ms").passes(20e6));
        assert!(b("rps<5000").passes(4000.0));
        assert!(!b("rps<5000").passes(6000.0));
        assert!(!b("errors>=1%").passes(0.5));
        assert_eq!(
            b("p99>20ms").reading().as_deref(),
            Some("must hold (as in k6): passes while p99 is above 20.00 ms")
        );
        assert_eq!(
            b("rps<5000").reading().as_deref(),
            Some("must hold (as in k6): passes while the rate is under 5000/s")
        );
    }
}
