//! The sweep's TOML plan file (`--plan`): every field optional, factors' levels strings or
//! numbers; what it sets is applied over the plan made so far.

use super::{factor_of, Design, Objective, Plan};
use crate::udp::Mode;
use crate::units::Written;
use crate::PlanError;
use serde::Deserialize;
use std::time::Duration;

/// The TOML plan file: every field optional; factors' levels may be strings or numbers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    design: Option<String>,
    repeat: Option<usize>,
    objective: Option<String>,
    server_cmd: Option<String>,
    server: Option<PlanServer>,
    load: Option<PlanLoad>,
    #[serde(default)]
    factor: Vec<PlanFactor>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanServer {
    threads: Option<usize>,
    batch: Option<usize>,
    rcvbuf: Option<Written>,
    mode: Option<String>,
    work_ns: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanLoad {
    rate: Option<Written>,
    size: Option<Written>,
    burst: Option<u64>,
    burst_interval: Option<String>,
    duration: Option<String>,
    warmup: Option<String>,
    no_replies: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFactor {
    name: String,
    levels: Vec<toml::Value>,
}

pub fn apply_plan_file(plan: &mut Plan, label: &str, text: &str) -> Result<(), PlanError> {
    let bad = |what: String| msg!("{label}: {what}");
    let f: PlanFile = toml::from_str(text).map_err(|e| bad(e.to_string().replace('\n', " ")))?;
    let dur = |k: &str, v: &str| crate::units::parse_duration(k, v).map_err(|e| bad(e.to_string()));
    if let Some(s) = f.server {
        plan.server.threads = s.threads.unwrap_or(plan.server.threads);
        plan.server.batch = s.batch.unwrap_or(plan.server.batch);
        if let Some(b) = &s.rcvbuf {
            plan.server.rcvbuf = Some(
                crate::units::parse_size("server.rcvbuf", &b.to_string())
                    .map_err(|e| bad(e.to_string()))?,
            );
        }
        if let Some(w) = s.work_ns {
            plan.server.work = Duration::from_nanos(w);
        }
        if let Some(m) = s.mode {
            plan.server.mode = match m.as_str() {
                "replace" => Mode::Replace,
                "echo" => Mode::Echo,
                "sink" => Mode::Sink,
                _ => {
                    return Err(bad(format!(
                        "server.mode \"{m}\": allowed replace, echo, sink"
                    )))
                }
            };
        }
    }
    if let Some(l) = f.load {
        if let Some(r) = &l.rate {
            plan.load.rate_pps = crate::units::parse_pps("load.rate", &r.to_string())
                .map_err(|e| bad(e.to_string()))?;
        }
        if let Some(b) = &l.size {
            let b = crate::units::parse_size("load.size", &b.to_string())
                .map_err(|e| bad(e.to_string()))?;
            plan.load.size_bytes = usize::try_from(b).unwrap_or(usize::MAX);
        }
        plan.load.burst = l.burst.unwrap_or(plan.load.burst);
        if let Some(v) = &l.duration {
            plan.load.duration = dur("load.duration", v)?;
        }
        if let Some(v) = &l.warmup {
            plan.load.warmup = dur("load.warmup", v)?;
        }
        if let Some(v) = &l.burst_interval {
            let iv = dur("load.burst_interval", v)?;
            if iv.is_zero() {
                return Err(bad(format!(
                    "load.burst_interval \"{v}\": allowed a positive duration, e.g. 50ms"
                )));
            }
            plan.load.rate_pps = plan.load.burst as f64 / iv.as_secs_f64();
        }
        if l.no_replies == Some(true) {
            plan.load.expect_replies = false;
            plan.server.mode = Mode::Sink;
        }
    }
    if !f.factor.is_empty() {
        plan.factors = f
            .factor
            .iter()
            .map(|x| {
                let levels: Vec<String> = x
                    .levels
                    .iter()
                    .map(|v| match v {
                        toml::Value::String(s) => s.clone(),
                        v => v.to_string(),
                    })
                    .collect();
                factor_of(&x.name, levels)
            })
            .collect::<Result<_, PlanError>>()?;
    }
    if let Some(d) = f.design {
        plan.design = Design::parse(&format!("{label}: design"), &d)?;
    }
    plan.repeat = f.repeat.unwrap_or(plan.repeat);
    if let Some(o) = f.objective {
        plan.objective = Objective::parse(&format!("{label}: objective"), &o)?;
    }
    if f.server_cmd.is_some() {
        plan.server_cmd = f.server_cmd;
    }
    Ok(())
}
