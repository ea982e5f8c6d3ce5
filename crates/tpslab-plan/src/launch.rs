//! How `tpslab fleet` launches a fleet of agents for one plan ([`crate::fleet::FleetPlan`]):
//! Kubernetes manifests ([`K8sPlan`]) or an ssh fan-out ([`SshPlan`]). Every value that
//! reaches a manifest's comment lines or a remote shell is checked here: Kubernetes names
//! are RFC 1123 labels, hosts are `[USER@]HOST` without a character a shell treats
//! specially, the remote tpslab a plain path.

use crate::fleet::FleetPlan;
use crate::PlanError;
use std::path::PathBuf;
use std::time::Duration;

/// `fleet k8s`: an Indexed Job of `agents` agents and the ConfigMap holding the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct K8sPlan {
    /// Agents (M), 1..=[`crate::fleet::MAX_AGENTS`].
    pub agents: usize,
    /// The container image with tpslab in it.
    pub image: String,
    /// The Kubernetes namespace.
    pub namespace: String,
    /// The Job's name (the ConfigMap is NAME-plan).
    pub name: String,
    /// How far ahead the common start is set.
    pub start_in: Duration,
}

impl K8sPlan {
    /// Checks the names Kubernetes would refuse (or that would need quoting in the
    /// header's commands): `--name` an RFC 1123 label leaving room for `-INDEX` in 63
    /// characters, `--namespace` a label, `--image` without white space or control
    /// characters. Errors name the flag and show the value quoted.
    pub fn validate(&self) -> Result<(), PlanError> {
        let label = "a lowercase RFC 1123 label (a-z, 0-9 and '-', starting and ending with a letter or digit)";
        let max = max_job_name(self.agents);
        if !is_k8s_label(&self.name, max) {
            return Err(PlanError::Conflict(format!(
                "--name {:?}: allowed {label} of at most {max} characters (NAME-INDEX is each pod's host name, at most 63)",
                self.name
            )));
        }
        if !is_k8s_label(&self.namespace, 63) {
            return Err(PlanError::Conflict(format!(
                "--namespace {:?}: allowed {label} of at most 63 characters",
                self.namespace
            )));
        }
        if self.image.is_empty()
            || self.image.len() > 4096
            || self
                .image
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(PlanError::Conflict(format!(
                "--image {:?}: allowed an image reference of 1..=4096 bytes without white space or control characters",
                self.image
            )));
        }
        Ok(())
    }

    /// Checks the launch against the fleet's plan: the start within its `max_wait`, and
    /// `agents` shares of it (an error about `--of` names `--agents`).
    pub fn check_fleet(&self, fleet: &FleetPlan) -> Result<(), PlanError> {
        check_start_in(self.start_in, fleet)?;
        fleet
            .share(0, self.agents, 0)
            .map_err(|e| PlanError::Conflict(e.to_string().replace("--of", "--agents")))?;
        Ok(())
    }
}

/// `fleet ssh`: one agent per host, each started through `ssh`, each record into `out`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshPlan {
    /// The hosts, in order (agent 0 on the first), as given (spaces around each trimmed).
    pub hosts: Vec<String>,
    /// The command that reaches a host, as written (split into words like a shell would).
    pub ssh: String,
    /// tpslab on the hosts.
    pub remote_tpslab: String,
    /// Folder for the agents' records.
    pub out: PathBuf,
    /// How far ahead the common start is set.
    pub start_in: Duration,
    /// Run the script here instead of printing it.
    pub run: bool,
}

impl SshPlan {
    /// The plan of `hosts` as written (comma-separated) and the other flags.
    pub fn new(
        hosts: &str,
        ssh: &str,
        remote_tpslab: &str,
        out: PathBuf,
        start_in: Duration,
        run: bool,
    ) -> SshPlan {
        SshPlan {
            hosts: hosts
                .split(',')
                .map(|h| h.trim_matches(' ').to_string())
                .collect(),
            ssh: ssh.to_string(),
            remote_tpslab: remote_tpslab.to_string(),
            out,
            start_in,
            run,
        }
    }

    /// Checks, in this order: every host ([`is_host`]), `--ssh` splits into words,
    /// `--remote-tpslab` is a plain path ([`is_plain_path`]), `--out` a non-empty UTF-8
    /// path. Errors name the value, quoted.
    pub fn validate(&self) -> Result<(), PlanError> {
        if let Some(bad) = self.hosts.iter().find(|h| !is_host(h)) {
            return Err(PlanError::Conflict(format!(
                "host {bad:?}: allowed a comma-separated list of [USER@]HOST, HOST an RFC 1123 host name (letters, digits, '-' and '.'), an IPv4 address or an IPv6 address without brackets"
            )));
        }
        if self.ssh_words().is_none() {
            return Err(PlanError::Conflict(format!(
                "--ssh {:?}: allowed a command that splits into shell words (quotes closed), e.g. \"ssh -o BatchMode=yes\" or \"ip netns exec\"",
                self.ssh
            )));
        }
        if !is_plain_path(&self.remote_tpslab) {
            return Err(PlanError::Conflict(format!(
                "--remote-tpslab {:?}: allowed a path of letters, digits and /._+:@- not starting with '-' (ssh has it parsed again by the remote shell)",
                self.remote_tpslab
            )));
        }
        if self.out_str().is_none() {
            return Err(PlanError::Conflict(format!(
                "--out {:?}: allowed a non-empty UTF-8 path",
                self.out.display().to_string()
            )));
        }
        Ok(())
    }

    /// Checks the launch against the fleet's plan: the start within its `max_wait`, and a
    /// share for each host (`N hosts: ...`).
    pub fn check_fleet(&self, fleet: &FleetPlan) -> Result<(), PlanError> {
        check_start_in(self.start_in, fleet)?;
        fleet
            .share(0, self.hosts.len(), 0)
            .map_err(|e| PlanError::Conflict(format!("{} hosts: {e}", self.hosts.len())))?;
        Ok(())
    }

    /// `--ssh` split into words as a shell would (None: quotes not closed, or no word).
    pub fn ssh_words(&self) -> Option<Vec<String>> {
        shlex::split(&self.ssh).filter(|w| !w.is_empty())
    }

    /// `--out` as text (None: empty or not UTF-8).
    pub fn out_str(&self) -> Option<&str> {
        self.out.to_str().filter(|o| !o.is_empty())
    }
}

/// `--start-in` above 0 and below the plan's `max_wait`.
fn check_start_in(start_in: Duration, fleet: &FleetPlan) -> Result<(), PlanError> {
    let max_wait = fleet.max_wait()?;
    if start_in.is_zero() || start_in >= max_wait {
        return Err(PlanError::Conflict(format!(
            "--start-in {}: allowed above 0 and below the plan's max_wait {}",
            humantime::format_duration(start_in),
            humantime::format_duration(max_wait)
        )));
    }
    Ok(())
}

/// Whether `s` is an RFC 1123 label of at most `max` characters, lowercase as Kubernetes
/// wants its names: a-z, 0-9 and '-', starting and ending with a letter or digit.
pub fn is_k8s_label(s: &str, max: usize) -> bool {
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
pub fn max_job_name(agents: usize) -> usize {
    63 - 1 - agents.saturating_sub(1).to_string().len()
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
pub fn is_host(h: &str) -> bool {
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
pub fn is_plain_path(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"/._+:@-".contains(&c))
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

    #[test]
    fn launches_are_checked_against_the_fleets_plan() {
        let fleet = FleetPlan::parse("target = \"10.0.0.1:9\"\nmax_wait = \"5m\"\n").unwrap();
        let k8s = K8sPlan {
            agents: 2,
            image: "tpslab:latest".into(),
            namespace: "default".into(),
            name: "tpslab-fleet".into(),
            start_in: Duration::from_secs(60),
        };
        assert_eq!((k8s.validate(), k8s.check_fleet(&fleet)), (Ok(()), Ok(())));
        let late = K8sPlan {
            start_in: Duration::from_secs(300),
            ..k8s.clone()
        };
        assert_eq!(
            late.check_fleet(&fleet).unwrap_err().to_string(),
            "--start-in 5m: allowed above 0 and below the plan's max_wait 5m"
        );
        let many = K8sPlan {
            agents: 2000,
            ..k8s.clone()
        };
        assert!(many
            .check_fleet(&fleet)
            .unwrap_err()
            .to_string()
            .starts_with("--agents 2000: allowed 1..=1024"));
        let ssh = SshPlan::new(
            "h1, h2",
            "ssh -o BatchMode=yes",
            "tpslab",
            "fleet-records".into(),
            Duration::from_secs(60),
            false,
        );
        assert_eq!(ssh.hosts, ["h1", "h2"]);
        assert_eq!((ssh.validate(), ssh.check_fleet(&fleet)), (Ok(()), Ok(())));
        assert_eq!(ssh.ssh_words().unwrap(), ["ssh", "-o", "BatchMode=yes"]);
        let bad = |f: fn(&mut SshPlan)| {
            let mut p = ssh.clone();
            f(&mut p);
            p.validate().unwrap_err().to_string()
        };
        assert!(bad(|p| p.hosts[1] = "a;b".into()).starts_with("host \"a;b\": allowed"));
        assert!(bad(|p| p.ssh = "ssh '".into()).starts_with("--ssh \"ssh '\": allowed"));
        assert!(bad(|p| p.remote_tpslab = "-x".into()).starts_with("--remote-tpslab \"-x\""));
        assert!(bad(|p| p.out = "".into()).starts_with("--out \"\": allowed"));
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
