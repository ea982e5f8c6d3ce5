//! `tpslab fleet k8s|ssh`: how to start a fleet of agents for one plan and a start time a
//! little ahead. Kubernetes places them (an Indexed Job: the completion index is the agent
//! index), or ssh fans out; no controller of tpslab's own.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub(crate) enum FleetCmd {
    /// Kubernetes manifests on standard output: a ConfigMap with the plan and an Indexed
    /// Job of M agents, each printing its record as its last log line (`kubectl apply -f
    /// -`; collect with the commands in the header, then `tpslab merge`).
    K8s(K8sArgs),
    /// A shell script on standard output that starts one agent per host over ssh, each
    /// record into --out; with --run, runs it here.
    Ssh(SshArgs),
}

#[derive(Args, Debug)]
pub(crate) struct Common {
    /// The fleet's load plan (TOML, as `tpslab agent --plan`).
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// How far ahead to set the common start (scheduling, image pulls, ssh logins must
    /// fit in it; at most the plan's max_wait).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    start_in: Duration,
}

#[derive(Args, Debug)]
pub(crate) struct K8sArgs {
    #[command(flatten)]
    common: Common,
    /// Agents (M), 1..=1024.
    #[arg(long)]
    agents: usize,
    /// The container image with tpslab in it (built from the repository's Dockerfile).
    #[arg(long, default_value = "tpslab:latest")]
    image: String,
    /// Kubernetes namespace.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Name of the Job and ConfigMap.
    #[arg(long, default_value = "tpslab-fleet")]
    name: String,
}

#[derive(Args, Debug)]
pub(crate) struct SshArgs {
    #[command(flatten)]
    common: Common,
    /// The hosts, comma-separated (one agent each, in order: agent 0 on the first).
    hosts: String,
    /// Folder for the agents' records (agent-N.json), made if missing.
    #[arg(long, default_value = "fleet-records")]
    out: PathBuf,
    /// The command that reaches a host (the host is appended, then the agent's command).
    #[arg(long, default_value = "ssh")]
    ssh: String,
    /// tpslab on the hosts.
    #[arg(long, default_value = "tpslab")]
    remote_tpslab: String,
    /// Run the script now (with sh) instead of printing it; exit 0 when every agent wrote
    /// its record.
    #[arg(long)]
    run: bool,
}

/// Runs `tpslab fleet`.
pub(crate) fn run(cmd: FleetCmd) -> Result<ExitCode> {
    match cmd {
        FleetCmd::K8s(a) => {
            let (text, plan, start) = prepare(&a.common)?;
            tpslab_plan::fleet::FleetPlan::share(&plan, 0, a.agents, 0)
                .map_err(|e| anyhow!("{}", e.to_string().replace("--of", "--agents")))?;
            print!("{}", k8s(&a, &text, &plan.hash(), &start));
            Ok(ExitCode::SUCCESS)
        }
        FleetCmd::Ssh(a) => ssh(&a),
    }
}

/// The plan's text (checked) and the start time in RFC 3339.
fn prepare(c: &Common) -> Result<(String, tpslab_plan::fleet::FleetPlan, String)> {
    let plan = crate::agent::read_plan(&c.plan)?;
    let text = crate::input::read_text("--plan", &c.plan, crate::input::PLAN_MAX_BYTES, false)?;
    let max_wait = plan.max_wait()?;
    if c.start_in.is_zero() || c.start_in >= max_wait {
        bail!(
            "--start-in {}: allowed above 0 and below the plan's max_wait {}",
            humantime::format_duration(c.start_in),
            humantime::format_duration(max_wait)
        );
    }
    let start = std::time::SystemTime::now() + c.start_in;
    // Whole seconds: easy to read, and the same on every agent's command line.
    let secs = start
        .duration_since(std::time::UNIX_EPOCH)
        .context("clock before 1970")?
        .as_secs();
    let start =
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs));
    Ok((text, plan, start.to_string()))
}

/// The ConfigMap and the Indexed Job, as YAML.
fn k8s(a: &K8sArgs, plan_text: &str, hash: &str, start: &str) -> String {
    let plan = crate::agent::read_plan(&a.common.plan).expect("checked");
    let cpus = plan.threads + 1;
    let labels = json!({"app.kubernetes.io/name": "tpslab", "tpslab/plan": &hash[..16]});
    let config = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("{}-plan", a.name), "namespace": a.namespace, "labels": labels},
        "data": {"plan.toml": plan_text},
    });
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": a.name, "namespace": a.namespace, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": a.agents,
            "parallelism": a.agents,
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "agent",
                        "image": a.image,
                        "command": [
                            "tpslab", "agent", "--plan", "/etc/tpslab/plan.toml",
                            "--index", "$(AGENT_INDEX)", "--of", a.agents.to_string(),
                            "--start-at", start, "--json", "-", "--no-history",
                        ],
                        "env": [{
                            "name": "AGENT_INDEX",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}},
                        }],
                        // Requests equal to limits in whole CPUs: Guaranteed QoS, so a
                        // node whose kubelet runs the static CPU manager pins the agent
                        // to cores of its own.
                        "resources": {
                            "requests": {"cpu": cpus.to_string(), "memory": "256Mi"},
                            "limits": {"cpu": cpus.to_string(), "memory": "256Mi"},
                        },
                        "volumeMounts": [{"name": "plan", "mountPath": "/etc/tpslab", "readOnly": true}],
                    }],
                    "volumes": [{"name": "plan", "configMap": {"name": format!("{}-plan", a.name)}}],
                },
            },
        },
    });
    let mut out = format!(
        "# tpslab fleet: {m} agents of plan {h}, starting together at {start}.\n\
         # Apply within {ahead} (the start is fixed in the Job):  kubectl apply -f this.yaml\n\
         # Each agent's last log line is its record; collect them, then merge:\n\
         #   for i in $(seq 0 {last}); do kubectl -n {ns} logs -l job-name={name},batch.kubernetes.io/job-completion-index=$i --tail=1 > agent-$i.json; done\n\
         #   tpslab merge agent-*.json   # add --server with a `tpslab watch --pid` record of the server\n",
        m = a.agents,
        h = &hash[..16],
        ahead = humantime::format_duration(a.common.start_in),
        last = a.agents - 1,
        ns = a.namespace,
        name = a.name,
    );
    for doc in [config, job] {
        out.push_str("---\n");
        yaml(&mut out, &doc, 0);
    }
    out
}

/// `v` as block-style YAML at `indent` spaces: plain keys where safe, scalars as JSON
/// (valid YAML), multi-line strings as literal blocks.
fn yaml(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                out.push_str(&format!("{pad}{}:", key(k)));
                child(out, v, indent);
            }
        }
        Value::Array(items) => {
            for v in items {
                match v {
                    // "- first: ..." with the other keys under it.
                    Value::Object(m) if !m.is_empty() => {
                        let mut item = String::new();
                        yaml(&mut item, v, indent + 2);
                        out.push_str(&format!("{pad}- {}", &item[indent + 2..]));
                    }
                    _ => {
                        out.push_str(&format!("{pad}-"));
                        child(out, v, indent);
                    }
                }
            }
        }
        _ => out.push_str(&format!("{pad}{}\n", scalar(v))),
    }
}

/// A mapping key: plain when it is made of letters, digits and `._/-` (not starting with
/// `-`), else quoted.
fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && !k.starts_with('-')
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c));
    if plain {
        k.to_string()
    } else {
        scalar(&Value::String(k.to_string()))
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The value after `key:` or `-`: inline when scalar, else on the next lines.
fn child(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(_) | Value::Array(_) if !is_empty(v) => {
            out.push('\n');
            yaml(out, v, indent + 2);
        }
        // A literal block, when its text allows one (no leading blank on the first line,
        // no carriage returns, at most one final newline).
        Value::String(s)
            if s.contains('\n')
                && !s.contains('\r')
                && !s.starts_with([' ', '\t'])
                && !s.ends_with("\n\n") =>
        {
            out.push_str(if s.ends_with('\n') { " |\n" } else { " |-\n" });
            let pad = " ".repeat(indent + 2);
            for line in s.trim_end_matches('\n').split('\n') {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    out.push_str(&format!("{pad}{line}\n"));
                }
            }
        }
        _ => out.push_str(&format!(" {}\n", scalar(v))),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        // JSON strings are YAML double-quoted scalars: "on", "1" and "$(X)" stay strings.
        v => v.to_string(),
    }
}

/// The ssh fan-out.
fn ssh(a: &SshArgs) -> Result<ExitCode> {
    let (_, plan, start) = prepare(&a.common)?;
    let hosts: Vec<&str> = a.hosts.split(',').map(str::trim).collect();
    if hosts
        .iter()
        .any(|h| h.is_empty() || h.contains(['\'', '"', ' ']))
    {
        bail!(
            "hosts {:?}: allowed a comma-separated list of host names (no spaces or quotes)",
            a.hosts
        );
    }
    plan.share(0, hosts.len(), 0)
        .map_err(|e| anyhow!("{} hosts: {e}", hosts.len()))?;
    let plan_path = std::fs::canonicalize(&a.common.plan)?;
    let q = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut script = format!(
        "#!/bin/sh\n# tpslab fleet: {} agents of plan {}, starting together at {start}.\n# Run it within {} (the start is fixed here). The plan is sent on each agent's standard input.\nset -u\nmkdir -p {}\npids=\"\"\n",
        hosts.len(),
        &plan.hash()[..16],
        humantime::format_duration(a.common.start_in),
        q(&a.out.display().to_string()),
    );
    for (i, h) in hosts.iter().enumerate() {
        let rec = a.out.join(format!("agent-{i}.json"));
        let log = a.out.join(format!("agent-{i}.log"));
        script.push_str(&format!(
            "{ssh} {h} {tpslab} agent --plan - --index {i} --of {m} --start-at {start} --json - --no-history < {plan} > {rec} 2> {log} &\npids=\"$pids $!\"\n",
            ssh = a.ssh,
            tpslab = a.remote_tpslab,
            m = hosts.len(),
            plan = q(&plan_path.display().to_string()),
            rec = q(&rec.display().to_string()),
            log = q(&log.display().to_string()),
        ));
    }
    script.push_str(&format!(
        "failed=0\nfor p in $pids; do wait $p || failed=$((failed+1)); done\n[ $failed -eq 0 ] || echo \"tpslab fleet: $failed agent(s) failed: see {dir}/agent-N.log\" >&2\necho \"records in {dir}; merge: tpslab merge {dir}/agent-*.json\" >&2\nexit $failed\n",
        dir = a.out.display()
    ));
    if !a.run {
        print!("{script}");
        return Ok(ExitCode::SUCCESS);
    }
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .status()
        .context("running the fan-out with sh")?;
    Ok(if st.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
