//! `tpslab sweep`'s settings as given on the command line, laid over the plan they start
//! from (the flags' own baseline, `--scenario s2`, then a `--plan` file).

use super::{parse_factor, Design, Objective, SweepPlan, SCHEMA};
use crate::limits;
use crate::udp::{LoadConfig, ServerConfig};
use crate::PlanError;
use std::time::Duration;

/// What the command line sets over a sweep's plan, as typed; None or empty: left as the
/// plan has it.
#[derive(Debug, Clone, Default)]
pub struct SweepFlags {
    /// `--server-cmd`.
    pub server_cmd: Option<String>,
    /// `--factor NAME=L1,L2,...` (repeatable): replace the plan's factors.
    pub factors: Vec<String>,
    /// `--design`.
    pub design: Option<String>,
    /// `--repeat`.
    pub repeat: Option<usize>,
    /// `--objective`.
    pub objective: Option<String>,
}

impl SweepPlan {
    /// The plan of the flags alone: `server` and `load` as the baseline, the design one
    /// factor at a time, 3 runs per cell, loss as the objective, no factor yet.
    pub fn of_flags(
        server: ServerConfig,
        load: LoadConfig,
        seed: u64,
        interval: Duration,
    ) -> SweepPlan {
        SweepPlan {
            schema: SCHEMA.into(),
            factors: vec![],
            design: Design::Ofat,
            repeat: 3,
            seed,
            objective: Objective::Loss,
            server,
            load,
            interval,
            scenario: None,
            server_cmd: None,
        }
    }
}

impl SweepFlags {
    /// Sets what was given over `plan`, in the order of the errors: the server command,
    /// the factors (a plan needs one), the design, the repeat count (checked against
    /// [`limits::REPEAT`]), the objective.
    pub fn apply(&self, plan: &mut SweepPlan) -> Result<(), PlanError> {
        if self.server_cmd.is_some() {
            plan.server_cmd = self.server_cmd.clone();
        }
        if !self.factors.is_empty() {
            plan.factors = self
                .factors
                .iter()
                .map(|f| parse_factor(f))
                .collect::<Result<_, _>>()?;
        }
        if plan.factors.is_empty() {
            return Err(PlanError::Conflict(
                "no factor: give --factor NAME=L1,L2,... (or --scenario s2)".into(),
            ));
        }
        if let Some(d) = &self.design {
            plan.design = Design::parse("--design", d)?;
        }
        if let Some(r) = self.repeat {
            plan.repeat = r;
            limits::REPEAT.check("--repeat", r as u64)?;
        }
        if let Some(o) = &self.objective {
            plan.objective = Objective::parse("--objective", o)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_override_the_plan_they_are_given_in_order() {
        let mut plan = super::super::s2_plan(1, Duration::from_millis(10));
        let f = SweepFlags {
            repeat: Some(5),
            design: Some("ofat".into()),
            ..Default::default()
        };
        f.apply(&mut plan).unwrap();
        assert_eq!(
            (plan.repeat, plan.design, plan.factors.len()),
            (5, Design::Ofat, 2)
        );
        plan.factors.clear();
        assert_eq!(
            f.apply(&mut plan).unwrap_err().to_string(),
            "no factor: give --factor NAME=L1,L2,... (or --scenario s2)"
        );
        let f = SweepFlags {
            factors: vec!["batch=1,8".into()],
            repeat: Some(0),
            ..Default::default()
        };
        let e = f.apply(&mut plan).unwrap_err().to_string();
        assert!(e.starts_with("--repeat 0: allowed "), "{e}");
    }
}
