//! `fleet k8s|ssh`: how to start a fleet of agents for one plan and a start time a little
//! ahead. Kubernetes places them (an Indexed Job: the completion index is the agent
//! index), or ssh fans out; no controller of tpslab's own.
//!
//! Nothing the user gives reaches the output unquoted: the ssh script is made of words
//! quoted by `shlex` (POSIX shell quoting), the manifests are serialised by `serde-saphyr`
//! (which double-quotes, with escapes, any string holding a line break other than `\n`,
//! U+0085, U+2028, U+2029 or another non-printable character, and any string a YAML 1.1
//! reader would take for a boolean or number), and the values that also go into comments
//! or are parsed again by a remote shell (names, hosts, the remote tpslab) are checked
//! first ([`tpslab_plan::launch`]).

use anyhow::{anyhow, Context, Result};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use tpslab_plan::fleet::FleetPlan;
use tpslab_plan::launch::{K8sPlan, SshPlan};

/// `fleet k8s`: how, and the fleet's plan (its text goes into the ConfigMap).
#[derive(Debug)]
pub struct K8sLaunch {
    /// The Job's settings, checked.
    pub how: K8sPlan,
    /// The plan file as read.
    pub text: String,
    /// The plan, parsed and checked.
    pub fleet: FleetPlan,
}

/// `fleet ssh`: how, the fleet's plan, and its absolute path (the script copies it).
#[derive(Debug)]
pub struct SshLaunch {
    /// The hosts and the ssh settings, checked.
    pub how: SshPlan,
    /// The plan, parsed and checked.
    pub fleet: FleetPlan,
    /// The plan file's absolute path, UTF-8.
    pub plan_path: String,
}

impl K8sLaunch {
    /// Reads the fleet's plan at `plan` and checks `how` against it, then alone.
    pub fn read(how: K8sPlan, plan: &Path) -> Result<K8sLaunch> {
        let (text, fleet) = crate::input::read_fleet_plan(plan, false)?;
        how.check_fleet(&fleet)?;
        how.validate()?;
        Ok(K8sLaunch { how, text, fleet })
    }

    /// The manifests, starting a little ahead ([`start_time`], [`k8s`]).
    pub fn manifests(&self) -> Result<String> {
        k8s(
            &self.how,
            &self.text,
            &self.fleet,
            &start_time(self.how.start_in)?,
        )
    }
}

impl SshLaunch {
    /// Checks `how`, reads the fleet's plan at `plan`, checks `how` against it; the plan's
    /// path made absolute (it must be UTF-8: the script quotes it).
    pub fn read(how: SshPlan, plan: &Path) -> Result<SshLaunch> {
        how.validate()?;
        let (_, fleet) = crate::input::read_fleet_plan(plan, false)?;
        how.check_fleet(&fleet)?;
        let plan_path = std::fs::canonicalize(plan)?;
        let plan_path = plan_path.to_str().ok_or_else(|| {
            anyhow!(
                "--plan {:?}: allowed a UTF-8 path",
                plan_path.display().to_string()
            )
        })?;
        Ok(SshLaunch {
            how,
            fleet,
            plan_path: plan_path.to_string(),
        })
    }

    /// The script, starting a little ahead ([`start_time`], [`ssh_script`]).
    pub fn script(&self) -> Result<String> {
        let start = start_time(self.how.start_in)?;
        ssh_script(&self.how, &self.plan_path, &self.fleet.hash(), &start)
    }
}

/// The common start `start_in` from now, in RFC 3339 to the whole second (easy to read,
/// the same on every agent's command line).
pub fn start_time(start_in: Duration) -> Result<String> {
    let start = std::time::SystemTime::now() + start_in;
    let secs = start
        .duration_since(std::time::UNIX_EPOCH)
        .context("clock before 1970")?
        .as_secs();
    Ok(
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs))
            .to_string(),
    )
}

/// The header, then the ConfigMap (holding `plan_text`) and the Indexed Job as YAML
/// documents. The header takes only checked names (no line breaks), counts and times.
pub fn k8s(k: &K8sPlan, plan_text: &str, plan: &FleetPlan, start: &str) -> Result<String> {
    let hash = plan.hash();
    let cpus = plan.threads + 1;
    let labels = json!({"app.kubernetes.io/name": "tpslab", "tpslab/plan": &hash[..16]});
    let config = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("{}-plan", k.name), "namespace": k.namespace, "labels": labels},
        "data": {"plan.toml": plan_text},
    });
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": k.name, "namespace": k.namespace, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": k.agents,
            "parallelism": k.agents,
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "agent",
                        "image": k.image,
                        "command": [
                            "tpslab", "agent", "--plan", "/etc/tpslab/plan.toml",
                            "--index", "$(AGENT_INDEX)", "--of", k.agents.to_string(),
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
                    "volumes": [{"name": "plan", "configMap": {"name": format!("{}-plan", k.name)}}],
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
        m = k.agents,
        h = &hash[..16],
        ahead = humantime::format_duration(k.start_in),
        last = k.agents - 1,
        ns = k.namespace,
        name = k.name,
    );
    // Every string a plain or quoted scalar, never a block scalar: libyaml, and so the
    // YAML readers ported from it (kubectl's), refuses a literal block whose first line
    // starts with a tab, and a folded one changes with its reader's folding rules.
    let mut yaml = serde_saphyr::SerializerOptions::default();
    yaml.prefer_block_scalars = false;
    for doc in [config, job] {
        out.push_str("---\n");
        out.push_str(
            &serde_saphyr::to_string_with_options(&doc, yaml.clone())
                .context("writing the manifests as YAML")?,
        );
    }
    Ok(out)
}

/// `words` as one shell command line, each word quoted (POSIX shell quoting, by shlex).
fn sh_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<String> {
    shlex::try_join(words).map_err(|e| anyhow!("quoting for sh: {e}"))
}

/// One word quoted for sh.
fn sh_word(word: &str) -> Result<String> {
    sh_words([word])
}

/// The ssh fan-out script of a validated `s` (hosts, `--ssh` words, `--out`), the plan at
/// `plan_path` sent on each agent's standard input, each agent's record into `--out`,
/// never over an existing file nor through a symbolic link to one (`set -C`: the shell
/// opens a new record with O_EXCL). Errors: `s` not validated, a word shlex cannot quote
/// (a NUL byte).
pub fn ssh_script(s: &SshPlan, plan_path: &str, hash: &str, start: &str) -> Result<String> {
    let ssh = s
        .ssh_words()
        .ok_or_else(|| anyhow!("--ssh {:?}: not shell words", s.ssh))?;
    let out = s
        .out_str()
        .ok_or_else(|| anyhow!("--out: not a UTF-8 path"))?;
    let m = s.hosts.len().to_string();
    let mut script = format!(
        "#!/bin/sh\n# tpslab fleet: {m} agents of plan {h}, starting together at {start}.\n# Run it within {ahead} (the start is fixed here). The plan is sent on each agent's standard input.\n# Records are never overwritten (set -C): an agent-N.json or .log already there, or a link in its place, fails that agent.\nset -Cu\n{mkdir}\npids=''\n",
        h = &hash[..16],
        ahead = humantime::format_duration(s.start_in),
        mkdir = sh_words(["mkdir", "-p", "--", out])?,
    );
    let file = |name: String| {
        Path::new(out)
            .join(name)
            .to_str()
            .expect("UTF-8 joined to UTF-8")
            .to_string()
    };
    for (i, h) in s.hosts.iter().enumerate() {
        let index = i.to_string();
        let agent = [
            h.as_str(),
            &s.remote_tpslab,
            "agent",
            "--plan",
            "-",
            "--index",
            &index,
            "--of",
            &m,
            "--start-at",
            start,
            "--json",
            "-",
            "--no-history",
        ];
        let cmd = sh_words(ssh.iter().map(String::as_str).chain(agent))?;
        script.push_str(&format!(
            "{cmd} < {plan} > {rec} 2> {log} &\npids=\"$pids $!\"\n",
            plan = sh_word(plan_path)?,
            rec = sh_word(&file(format!("agent-{i}.json")))?,
            log = sh_word(&file(format!("agent-{i}.log")))?,
        ));
    }
    // The folder shown quoted, as a shell would take it back, then quoted again as
    // printf's argument; "$failed" (a count) is the one expansion. The exit status is 0 or
    // 1 (`exit $failed` would be 0 after 256 failures).
    let shown = sh_word(out)?;
    script.push_str("failed=0\nfor p in $pids; do wait \"$p\" || failed=$((failed+1)); done\n");
    script.push_str(&format!(
        "[ \"$failed\" -eq 0 ] || {} \"$failed\" {} >&2\n",
        sh_words(["printf", "tpslab fleet: %s agent(s) failed: see %s\\n"])?,
        sh_word(&format!("{shown}/agent-N.log"))?,
    ));
    script.push_str(&format!(
        "{} >&2\n[ \"$failed\" -eq 0 ]\n",
        sh_words([
            "printf",
            "records in %s; merge: tpslab merge %s\\n",
            &shown,
            &format!("{shown}/agent-*.json"),
        ])?
    ));
    Ok(script)
}

/// Runs a fan-out script with `sh -c` here; true when every agent wrote its record (the
/// script's exit status 0).
pub fn run_script(script: &str) -> Result<bool> {
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .status()
        .context("running the fan-out with sh")?;
    Ok(st.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "target = \"10.0.0.1:9000\"\nrate = \"30000\"\nthreads = 2\n";

    #[test]
    fn the_manifests_start_every_agent_of_the_plan_at_once() {
        let fleet = FleetPlan::parse(PLAN).unwrap();
        let k = K8sPlan {
            agents: 3,
            image: "tpslab:latest".into(),
            namespace: "load".into(),
            name: "f1".into(),
            start_in: Duration::from_secs(60),
        };
        let y = k8s(&k, PLAN, &fleet, "2030-01-01T00:00:00Z").unwrap();
        let hash = &fleet.hash()[..16];
        assert!(y.starts_with(&format!(
            "# tpslab fleet: 3 agents of plan {hash}, starting together at 2030-01-01T00:00:00Z.\n# Apply within 1m "
        )), "{y}");
        assert!(
            y.contains("for i in $(seq 0 2); do kubectl -n load logs -l job-name=f1,"),
            "{y}"
        );
        assert_eq!(
            y.matches("\n---\n").count() + usize::from(y.starts_with("---\n")),
            2,
            "{y}"
        );
        // Guaranteed QoS: threads + 1 whole CPUs requested and limited.
        assert_eq!(
            y.matches("cpu: '3'").count() + y.matches("cpu: \"3\"").count(),
            2,
            "{y}"
        );
        assert!(y.contains("name: f1-plan"), "{y}");
    }

    #[test]
    fn the_ssh_script_quotes_every_word_and_never_overwrites() {
        let s = SshPlan::new(
            "u@h1,h2",
            "ssh -o 'BatchMode=yes'",
            "/opt/tpslab",
            "recs dir".into(),
            Duration::from_secs(90),
            false,
        );
        s.validate().unwrap();
        let hash = "0123456789abcdef0123";
        let sh = ssh_script(&s, "/p/plan file.toml", hash, "2030-01-01T00:00:00Z").unwrap();
        assert!(sh.starts_with("#!/bin/sh\n# tpslab fleet: 2 agents of plan 0123456789abcdef, starting together at 2030-01-01T00:00:00Z.\n# Run it within 1m 30s "), "{sh}");
        assert!(sh.contains("\nset -Cu\nmkdir -p -- 'recs dir'\n"), "{sh}");
        assert!(sh.contains("\nssh -o 'BatchMode=yes' u@h1 /opt/tpslab agent --plan - --index 0 --of 2 --start-at 2030-01-01T00:00:00Z --json - --no-history < '/p/plan file.toml' > 'recs dir/agent-0.json' 2> 'recs dir/agent-0.log' &\n"), "{sh}");
        assert!(sh.contains(" --index 1 --of 2 "), "{sh}");
        assert!(sh.ends_with("[ \"$failed\" -eq 0 ]\n"), "{sh}");
        let st = std::process::Command::new("sh")
            .args(["-n", "-c", &sh])
            .status()
            .unwrap();
        assert!(st.success(), "{sh}");
        assert!(run_script("exit 0").unwrap());
        assert!(!run_script("exit 1").unwrap());
    }
}
