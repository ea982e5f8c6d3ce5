//! `tpslab fleet k8s|ssh`: how to start a fleet of agents for one plan and a start time a
//! little ahead. Kubernetes places them (an Indexed Job: the completion index is the agent
//! index), or ssh fans out; no controller of tpslab's own.
//!
//! The manifests and the script are made, quoted, by [`tpslab_run::fleet`]; the values
//! they hold are checked first by [`tpslab_plan::launch`].

use anyhow::Result;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;
use tpslab_plan::launch::{K8sPlan, SshPlan};

#[derive(Subcommand, Debug)]
pub enum FleetCmd {
    /// Kubernetes manifests on standard output: a ConfigMap with the plan and an Indexed
    /// Job of M agents, each printing its record as its last log line (`kubectl apply -f
    /// -`; collect with the commands in the header, then `tpslab merge`).
    K8s(K8sArgs),
    /// A shell script on standard output that starts one agent per host over ssh, each
    /// record into --out; with --run, runs it here.
    Ssh(SshArgs),
}

#[derive(Args, Debug)]
pub struct Common {
    /// The fleet's load plan (TOML, as `tpslab agent --plan`; a regular file of at most
    /// 1 MiB, the most a ConfigMap holds).
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,
    /// How far ahead to set the common start (scheduling, image pulls, ssh logins must
    /// fit in it; at most the plan's max_wait).
    #[arg(long, default_value = "60s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub start_in: Duration,
}

#[derive(Args, Debug)]
pub struct K8sArgs {
    #[command(flatten)]
    pub common: Common,
    /// Agents (M), 1..=1024.
    #[arg(long)]
    pub agents: usize,
    /// The container image with tpslab in it (built from the repository's Dockerfile); no
    /// white space or control characters.
    #[arg(long, default_value = "tpslab:latest")]
    pub image: String,
    /// Kubernetes namespace: an RFC 1123 label (a-z, 0-9, '-'; at most 63 characters).
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Name of the Job (the ConfigMap is NAME-plan): an RFC 1123 label short enough that
    /// NAME-INDEX, each pod's host name, fits in 63 characters (59 with up to 1000 agents).
    #[arg(long, default_value = "tpslab-fleet")]
    pub name: String,
}

#[derive(Args, Debug)]
pub struct SshArgs {
    #[command(flatten)]
    pub common: Common,
    /// The hosts, comma-separated (one agent each, in order: agent 0 on the first), each
    /// `[USER@]HOST` with HOST an RFC 1123 host name, an IPv4 address or an IPv6 address
    /// without brackets.
    pub hosts: String,
    /// Folder for the agents' records (agent-N.json), made if missing.
    #[arg(long, default_value = "fleet-records")]
    pub out: PathBuf,
    /// The command that reaches a host, split into words like a shell would (the host is
    /// appended, then the agent's command).
    #[arg(long, default_value = "ssh")]
    pub ssh: String,
    /// tpslab on the hosts: letters, digits and `/._+:@-` (ssh has it parsed again by the
    /// remote shell).
    #[arg(long, default_value = "tpslab")]
    pub remote_tpslab: String,
    /// Run the script now (with sh) instead of printing it; exit 0 when every agent wrote
    /// its record.
    #[arg(long)]
    pub run: bool,
}

use tpslab_run::fleet::{K8sLaunch, SshLaunch};

impl K8sArgs {
    /// The Job's settings checked against the fleet's plan ([`K8sLaunch::read`]).
    pub fn plan(&self) -> Result<K8sLaunch> {
        let how = K8sPlan {
            agents: self.agents,
            image: self.image.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            start_in: self.common.start_in,
        };
        K8sLaunch::read(how, &self.common.plan)
    }
}

impl SshArgs {
    /// The hosts and ssh settings checked against the fleet's plan ([`SshLaunch::read`]).
    pub fn plan(&self) -> Result<SshLaunch> {
        let how = SshPlan::new(
            &self.hosts,
            &self.ssh,
            &self.remote_tpslab,
            self.out.clone(),
            self.common.start_in,
            self.run,
        );
        SshLaunch::read(how, &self.common.plan)
    }
}
