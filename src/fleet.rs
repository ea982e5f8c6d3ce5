//! `tpslab fleet k8s|ssh`: how to start a fleet of agents for one plan and a start time a
//! little ahead. Kubernetes places them (an Indexed Job: the completion index is the agent
//! index), or ssh fans out; no controller of tpslab's own.
//!
//! Nothing the user gives reaches the output unquoted: the ssh script is made of words
//! quoted by `shlex` (POSIX shell quoting), the manifests are serialised by `serde-saphyr`
//! (which double-quotes, with escapes, any string holding a line break other than `\n`,
//! U+0085, U+2028, U+2029 or another non-printable character, and any string a YAML 1.1
//! reader would take for a boolean or number), and the values that also go into comments
//! or are parsed again by a remote shell (names, hosts, the remote tpslab) are checked
//! first.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use std::path::{Path, PathBuf};
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
    /// The fleet's load plan (TOML, as `tpslab agent --plan`; a regular file of at most
    /// 1 MiB, the most a ConfigMap holds).
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// How far ahead to set the common start (scheduling, image pulls, ssh logins must
    /// fit in it; at most the plan's max_wait).
    #[arg(long, default_value = "60s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    start_in: Duration,
}

#[derive(Args, Debug)]
pub(crate) struct K8sArgs {
    #[command(flatten)]
    common: Common,
    /// Agents (M), 1..=1024.
    #[arg(long)]
    agents: usize,
    /// The container image with tpslab in it (built from the repository's Dockerfile); no
    /// white space or control characters.
    #[arg(long, default_value = "tpslab:latest")]
    image: String,
    /// Kubernetes namespace: an RFC 1123 label (a-z, 0-9, '-'; at most 63 characters).
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Name of the Job (the ConfigMap is NAME-plan): an RFC 1123 label short enough that
    /// NAME-INDEX, each pod's host name, fits in 63 characters (59 with up to 1000 agents).
    #[arg(long, default_value = "tpslab-fleet")]
    name: String,
}

#[derive(Args, Debug)]
pub(crate) struct SshArgs {
    #[command(flatten)]
    common: Common,
    /// The hosts, comma-separated (one agent each, in order: agent 0 on the first), each
    /// [USER@]HOST with HOST an RFC 1123 host name, an IPv4 address or an IPv6 address
    /// without brackets.
    hosts: String,
    /// Folder for the agents' records (agent-N.json), made if missing.
    #[arg(long, default_value = "fleet-records")]
    out: PathBuf,
    /// The command that reaches a host, split into words like a shell would (the host is
    /// appended, then the agent's command).
    #[arg(long, default_value = "ssh")]
    ssh: String,
    /// tpslab on the hosts: letters, digits and `/._+:@-` (ssh has it parsed again by the
    /// remote shell).
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
            plan.share(0, a.agents, 0)
                .map_err(|e| anyhow!("{}", e.to_string().replace("--of", "--agents")))?;
            check_k8s(&a)?;
            print!("{}", k8s(&a, &text, &plan, &start)?);
            Ok(ExitCode::SUCCESS)
        }
        FleetCmd::Ssh(a) => ssh(&a),
    }
}

/// The plan's text, read once (a regular file of at most
/// [`tpslab_run::input::PLAN_MAX_BYTES`], 1 MiB: what a ConfigMap holds), and its settings
/// parsed from that same text.
fn read_plan(path: &Path) -> Result<(String, tpslab_plan::fleet::FleetPlan)> {
    let text =
        tpslab_run::input::read_text("--plan", path, tpslab_run::input::PLAN_MAX_BYTES, false)?;
    let plan = tpslab_plan::fleet::FleetPlan::parse(&text)
        .map_err(|e| anyhow!("--plan {:?}: {e}", path.display().to_string()))?;
    Ok((text, plan))
}

/// The plan's text (checked) and the start time in RFC 3339.
fn prepare(c: &Common) -> Result<(String, tpslab_plan::fleet::FleetPlan, String)> {
    let (text, plan) = read_plan(&c.plan)?;
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

/// Whether `s` is an RFC 1123 label of at most `max` characters, lowercase as Kubernetes
/// wants its names: a-z, 0-9 and '-', starting and ending with a letter or digit.
fn is_k8s_label(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The longest Job name for `agents` agents: each pod's host name is NAME-INDEX, an
/// RFC 1123 label of at most 63 characters (the label `job-name` also holds NAME, at
/// most 63).
fn max_job_name(agents: usize) -> usize {
    63 - 1 - agents.saturating_sub(1).to_string().len()
}

/// Refuses a --name, --namespace or --image Kubernetes would refuse (or that would need
/// quoting in the header's commands).
fn check_k8s(a: &K8sArgs) -> Result<()> {
    let label =
        "a lowercase RFC 1123 label (a-z, 0-9 and '-', starting and ending with a letter or digit)";
    let max = max_job_name(a.agents);
    if !is_k8s_label(&a.name, max) {
        bail!(
            "--name {:?}: allowed {label} of at most {max} characters (NAME-INDEX is each pod's host name, at most 63)",
            a.name
        );
    }
    if !is_k8s_label(&a.namespace, 63) {
        bail!(
            "--namespace {:?}: allowed {label} of at most 63 characters",
            a.namespace
        );
    }
    if a.image.is_empty()
        || a.image.len() > 4096
        || a.image.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        bail!(
            "--image {:?}: allowed an image reference of 1..=4096 bytes without white space or control characters",
            a.image
        );
    }
    Ok(())
}

/// The header, then the ConfigMap and the Indexed Job as YAML documents. The header takes
/// only checked names (no line breaks), counts and times.
fn k8s(
    a: &K8sArgs,
    plan_text: &str,
    plan: &tpslab_plan::fleet::FleetPlan,
    start: &str,
) -> Result<String> {
    let hash = plan.hash();
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

/// Whether `s` is an RFC 1123 host name: dot-separated labels of ASCII letters, digits
/// and '-' (1..=63 each, not starting or ending with '-'), at most 253 in all.
fn is_host_name(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// Whether `h` is a host `fleet ssh` accepts: `[USER@]HOST`, HOST an RFC 1123 host name,
/// an IPv4 address or an IPv6 address without brackets (and no zone), USER 1..=32 ASCII
/// letters, digits, '_', '.' or '-' not starting with '-'. None of these characters is
/// special to a shell, and none starts with '-' (an option to ssh).
fn is_host(h: &str) -> bool {
    let (user, host) = match h.split_once('@') {
        Some((u, host)) => (Some(u), host),
        None => (None, h),
    };
    let user_ok = user.is_none_or(|u| {
        !u.is_empty()
            && u.len() <= 32
            && !u.starts_with('-')
            && u.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
    });
    user_ok
        && (is_host_name(host)
            || host.parse::<std::net::Ipv4Addr>().is_ok()
            || host.parse::<std::net::Ipv6Addr>().is_ok())
}

/// Whether `s` is a path the remote shell reads back as itself: letters, digits and
/// `/._+:@-`, not starting with '-'.
fn is_plain_path(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"/._+:@-".contains(&c))
}

/// `words` as one shell command line, each word quoted (POSIX shell quoting, by shlex).
fn sh_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<String> {
    shlex::try_join(words).map_err(|e| anyhow!("quoting for sh: {e}"))
}

/// One word quoted for sh.
fn sh_word(word: &str) -> Result<String> {
    sh_words([word])
}

/// The ssh fan-out script for `hosts` (checked), the plan at `plan_path`, each agent's
/// record into `out`, never over an existing file nor through a symbolic link to one
/// (`set -C`: the shell opens a new record with O_EXCL).
fn ssh_script(
    a: &SshArgs,
    hosts: &[&str],
    ssh: &[String],
    out: &str,
    plan_path: &str,
    hash: &str,
    start: &str,
) -> Result<String> {
    let m = hosts.len().to_string();
    let mut script = format!(
        "#!/bin/sh\n# tpslab fleet: {m} agents of plan {h}, starting together at {start}.\n# Run it within {ahead} (the start is fixed here). The plan is sent on each agent's standard input.\n# Records are never overwritten (set -C): an agent-N.json or .log already there, or a link in its place, fails that agent.\nset -Cu\n{mkdir}\npids=''\n",
        h = &hash[..16],
        ahead = humantime::format_duration(a.common.start_in),
        mkdir = sh_words(["mkdir", "-p", "--", out])?,
    );
    let file = |name: String| {
        Path::new(out)
            .join(name)
            .to_str()
            .expect("UTF-8 joined to UTF-8")
            .to_string()
    };
    for (i, h) in hosts.iter().enumerate() {
        let index = i.to_string();
        let agent = [
            *h,
            &a.remote_tpslab,
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

/// The ssh fan-out.
fn ssh(a: &SshArgs) -> Result<ExitCode> {
    let hosts: Vec<&str> = a.hosts.split(',').map(|h| h.trim_matches(' ')).collect();
    if let Some(bad) = hosts.iter().find(|h| !is_host(h)) {
        bail!(
            "host {bad:?}: allowed a comma-separated list of [USER@]HOST, HOST an RFC 1123 host name (letters, digits, '-' and '.'), an IPv4 address or an IPv6 address without brackets"
        );
    }
    let ssh = match shlex::split(&a.ssh) {
        Some(w) if !w.is_empty() => w,
        _ => bail!(
            "--ssh {:?}: allowed a command that splits into shell words (quotes closed), e.g. \"ssh -o BatchMode=yes\" or \"ip netns exec\"",
            a.ssh
        ),
    };
    if !is_plain_path(&a.remote_tpslab) {
        bail!(
            "--remote-tpslab {:?}: allowed a path of letters, digits and /._+:@- not starting with '-' (ssh has it parsed again by the remote shell)",
            a.remote_tpslab
        );
    }
    let out = match a.out.to_str() {
        Some(o) if !o.is_empty() => o,
        _ => bail!(
            "--out {:?}: allowed a non-empty UTF-8 path",
            a.out.display().to_string()
        ),
    };
    let (_, plan, start) = prepare(&a.common)?;
    plan.share(0, hosts.len(), 0)
        .map_err(|e| anyhow!("{} hosts: {e}", hosts.len()))?;
    let plan_path = std::fs::canonicalize(&a.common.plan)?;
    let plan_path = plan_path.to_str().ok_or_else(|| {
        anyhow!(
            "--plan {:?}: allowed a UTF-8 path",
            plan_path.display().to_string()
        )
    })?;
    let script = ssh_script(a, &hosts, &ssh, out, plan_path, &plan.hash(), &start)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hosts_are_host_names_or_addresses_with_an_optional_user() {
        for ok in [
            "h1",
            "A1",
            "agent-0.example.com",
            "tpslab-t123-0",
            "10.203.0.10",
            "root@10.0.0.1",
            "user.name_x@h",
            "::1",
            "fe80::1",
            "2001:db8::5",
            "ops@2001:db8::5",
            &format!("{}.b", "a".repeat(63)),
        ] {
            assert!(is_host(ok), "{ok:?} refused");
        }
        for bad in [
            "",
            "a;b",
            "a b",
            "$(x)",
            "`x`",
            "a|b",
            "a&b",
            "a>b",
            "a\tb",
            "a\nb",
            "h\u{2028}",
            "h\u{85}",
            "-oProxyCommand=x",
            "-a",
            "a-",
            "a..b",
            ".a",
            "a.",
            "[::1]",
            "fe80::1%eth0",
            "@h",
            "u@",
            "-u@h",
            "a@b@c",
            "u$x@h",
            "a_b",
            "é",
            &"a".repeat(64),
            &format!("{}@h", "u".repeat(33)),
        ] {
            assert!(!is_host(bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn kubernetes_names_are_lowercase_labels_that_leave_room_for_the_index() {
        for ok in ["a", "0", "on", "a-b", "tpslab-fleet", &"a".repeat(63)] {
            assert!(is_k8s_label(ok, 63), "{ok:?} refused");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a.b",
            "a b",
            "a\n",
            &"a".repeat(64),
        ] {
            assert!(!is_k8s_label(bad, 63), "{bad:?} accepted");
        }
        // NAME-INDEX, the pod's host name, at most 63: the last index is agents - 1.
        for (agents, max) in [
            (1, 61),
            (10, 61),
            (11, 60),
            (100, 60),
            (101, 59),
            (1000, 59),
            (1001, 58),
            (1024, 58),
        ] {
            assert_eq!(max_job_name(agents), max, "{agents} agents");
            let last = format!("{}-{}", "a".repeat(max), agents - 1);
            assert_eq!(last.len(), 63, "{agents} agents");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        /// A host or remote tpslab accepted is one shell word as it stands, the same to
        /// the local shell and to the remote shell ssh hands it to, and never an option.
        #[test]
        fn accepted_hosts_and_paths_need_no_quoting(
            s in prop_oneof![
                "[a-zA-Z0-9_.@:/+-]{1,12}",
                "[a-z0-9]{1,4}(\\.[a-z0-9-]{1,4}){0,3}",
                "([a-z]{1,3}@)?[0-9a-f:]{2,12}",
                any::<String>(),
            ]
        ) {
            for accepted in [is_host(&s), is_plain_path(&s)] {
                if accepted {
                    prop_assert_eq!(shlex::try_quote(&s).unwrap(), s.as_str());
                    prop_assert!(!s.starts_with('-'));
                }
            }
        }
    }
}
