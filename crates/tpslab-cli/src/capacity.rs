//! `tpslab capacity udp HOST:PORT --slo 'p99<20ms,loss<0.1%'` (or `capacity http URL`, `capacity tcp`): the highest rate a server
//! sustains within an objective, found by open-loop steps at rates a search chooses
//! ([`tpslab_run::capacity`]), with the layer that gives first.

use crate::flags::units::{rate, size, RATE, SIZE};
use crate::flags::{load_config, LoadFlags};
use crate::target::check_pid;
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;
use tpslab_plan::capacity::{
    min_rate_for_bursts, parse_pct, CapacityLoad, CapacityPlan, CapacitySearch, HttpStep, RateUnit,
    Slo,
};
use tpslab_plan::limits::{HTTP_RATE, MAX_RATE_PPS, STEP_DURATION, WARMUP};
use tpslab_plan::target::resolve;
use tpslab_plan::udp::UdpRunPlan;

/// `capacity`'s protocols.
#[derive(Subcommand, Debug)]
pub enum CapacityCmd {
    /// Find the highest rate of UDP datagrams a server sustains within the objective.
    Udp(CapacityUdpArgs),
    /// Find the highest rate of HTTP requests a server sustains within the objective
    /// (each step `load http`'s open loop, after a warm-up run at its rate).
    Http(CapacityHttpArgs),
    /// Find the highest rate of framed TCP requests a server sustains within the objective
    /// (`ramp tcp`'s protocol as an open loop; without HOST:PORT, tpslab's own server).
    Tcp(CapacityTcpArgs),
}

/// The search's flags, the same for every protocol.
#[derive(Args, Debug)]
pub struct SearchFlags {
    /// The objective every step must meet, comma-separated: p50|p90|p99|p99.9|max<DURATION
    /// (latency from the intended send time), loss<PCT (no reply), errors<PCT (sends
    /// refused; HTTP: failed connects and requests, 4xx and 5xx replies), rate>=PCT
    /// (answered, of the intended rate).
    #[arg(long, default_value = "p99<20ms,loss<0.1%,errors<0.1%")]
    pub slo: String,
    /// Exit 1 when the capacity found is below a floor: 'rps>=N' (requests or datagrams a
    /// second sustained by the search; none sustained fails it). Printed first in the
    /// report with its mark. Quote it: unquoted, the shell reads > as a redirection.
    #[arg(long, value_name = "CONDITIONS")]
    pub fail_on: Option<String>,
    /// The first rate tried; the search doubles it until a step fails.
    #[arg(long, default_value = "1000", value_name = RATE, value_parser = rate())]
    pub start_rate: f64,
    /// The highest rate tried: a server that passes there sustains at least it.
    #[arg(long, default_value = "1M", value_name = RATE, value_parser = rate())]
    pub max_rate: f64,
    /// How close the failing rate must come above the passing one, % (0.5..=50).
    #[arg(long, default_value = "5%")]
    pub resolution: String,
    /// Steps at each end of the final bracket (1..=10): the call is k of n.
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// The whole search's time at most: no step starts that would end after it (Ctrl-C
    /// ends it too, with the best bracket so far). With --fix-and-retry, each search's.
    #[arg(long, default_value = "5m", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub budget: Duration,
    /// Each step's measured window (after its warm-up).
    #[arg(long, default_value = "2s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub step_duration: Duration,
    /// Each step's warm-up, excluded from its figures.
    #[arg(long, default_value = "500ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub warmup: Duration,
}

impl SearchFlags {
    /// The objective and the resolution, each step's length and the rates (at most
    /// `most`, counted in `unit`), each refused naming its flag.
    fn check(&self, most: f64, unit: RateUnit) -> Result<(Slo, f64)> {
        let slo = Slo::parse("--slo", &self.slo)?;
        if let Some(f) = &self.fail_on {
            tpslab_analysis::gate::parse(f, tpslab_analysis::gate::applies::CAPACITY)
                .map_err(anyhow::Error::msg)?;
        }
        let resolution_pct = parse_pct("--resolution", &self.resolution)?;
        STEP_DURATION.check("--step-duration", self.step_duration)?;
        WARMUP.check("--warmup", self.warmup)?;
        for (label, r) in [
            ("--start-rate", self.start_rate),
            ("--max-rate", self.max_rate),
        ] {
            if !r.is_finite() {
                bail!("{label} max: allowed a rate above 0 up to {most:.0} {unit} (the search sets each step's rate; max is not one)");
            }
        }
        Ok((slo, resolution_pct))
    }

    /// The search's bounds, for rates counted in `unit`, tried down to `min_rate`.
    fn search(
        &self,
        slo: Slo,
        resolution_pct: f64,
        unit: RateUnit,
        min_rate: f64,
    ) -> CapacitySearch {
        CapacitySearch {
            slo,
            start_rate: self.start_rate,
            max_rate: self.max_rate,
            resolution_pct,
            repeats: self.repeats,
            budget: self.budget,
            min_rate,
            unit,
            fail_on: self.fail_on.clone(),
        }
    }
}

/// `capacity http`'s flags: the URL, the search's, and the open loop's as `load http`
/// takes them (without its rate and duration: the search sets each step's).
#[derive(Args, Debug)]
pub struct CapacityHttpArgs {
    /// The URL, `http[s]://HOST[:PORT]/PATH`.
    pub url: String,
    #[command(flatten)]
    pub search: SearchFlags,
    #[command(flatten)]
    pub http: crate::flags::HttpFlags,
    /// PID of the server process on this host: its threads are judged at a failing step
    /// (saturated or waiting).
    #[arg(long)]
    pub pid: Option<u32>,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
    /// Show the search full screen while it goes: each step's rate and call and the
    /// bracket so far, above the step running now (intended vs achieved requests/s,
    /// latency, replies by status class and errors by kind, connections open). Keys: q
    /// ends the search as Ctrl-C does, p freezes the screen, ? help. Standard output must
    /// be a terminal.
    #[arg(long)]
    pub live: bool,
}

impl CapacityHttpArgs {
    /// The validated plan: the search's flags, then the request (URL, method, headers),
    /// the whole plan with the open loop at the start rate (as `load http` checks it),
    /// then the URL resolved and the TLS trust and body read. Errors: one line naming the
    /// flag.
    pub fn plan(&self) -> Result<CapacityPlan> {
        let unit = RateUnit::RequestsPerSecond;
        let (slo, resolution_pct) = self.search.check(HTTP_RATE, unit)?;
        self.record.check(true)?;
        if let Some(pid) = self.pid {
            check_pid(pid)?;
        }
        let search = self.search.search(slo, resolution_pct, unit, 1.0);
        let whole = |load| CapacityPlan {
            load: CapacityLoad::Http(HttpStep {
                load,
                warmup: self.search.warmup,
                pid: self.pid,
            }),
            search: search.clone(),
            server_cmd: None,
            fix_and_retry: false,
        };
        let load = self.http.plan(
            &self.url,
            self.search.start_rate,
            self.search.step_duration,
            || Ok(()),
            |p| Ok(whole(p.clone()).validate()?),
        )?;
        Ok(whole(load))
    }
}

/// `capacity tcp`'s flags: the search's, the request as `ramp tcp` takes it, the open
/// loop's connections, and the server (HOST:PORT, `--server-cmd`, or tpslab's own).
#[derive(Args, Debug)]
pub struct CapacityTcpArgs {
    /// Server address, HOST:PORT (without it and --server-cmd, tpslab's reference server
    /// `serve tcp --mode replace` is started with the --server-* flags).
    pub target: Option<String>,
    /// Start the user's TCP server for the search: a shell command with {port}, run by
    /// `sh -c` as its own process group, stopped at the end; the group's process owning a
    /// TCP socket on the port is the server watched.
    #[arg(long)]
    pub server_cmd: Option<String>,
    /// Refused for TCP: no verdict names a fix tpslab can apply yet (see capacity udp).
    #[arg(long)]
    pub fix_and_retry: bool,
    #[command(flatten)]
    pub search: SearchFlags,
    /// Request body size with tpslab's own protocol, bytes.
    #[arg(long, value_name = SIZE, value_parser = size(), default_value = "1024")]
    pub size: u64,
    /// Send this file's bytes as each request instead (verbatim, with its framing).
    #[arg(long)]
    pub payload_file: Option<PathBuf>,
    /// How a reply ends: length (4-byte prefix, tpslab's protocol), fixed:BYTES or
    /// delim:TEXT (e.g. delim:\r\n).
    #[arg(long, default_value = "length")]
    pub framing: String,
    #[arg(long, default_value = "framed", value_name = "PROTOCOL", help = tpslab_plan::proto::PROTOCOL_FLAG_HELP)]
    pub protocol: String,
    /// Connections, each sending at RATE/CONNECTIONS requests a second on its own
    /// schedule, one request in flight (no pipelining).
    #[arg(long, default_value_t = 10)]
    pub connections: usize,
    /// How long a request (or a connect) may wait (and the grace for replies outstanding
    /// at the end, at most 2 s of it).
    #[arg(long, default_value = "2s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub timeout: Duration,
    /// Event-loop threads (0: one per CPU, at most one per connection).
    #[arg(long, default_value_t = 0)]
    pub load_threads: usize,
    /// PID of the server process (with HOST:PORT).
    #[arg(long)]
    pub pid: Option<u32>,
    /// tpslab's server: CPU work per request.
    #[arg(long, default_value = "0s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub server_work: Duration,
    /// tpslab's server: waiting per request (a sleep, like a database round trip).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub server_serial: Duration,
    /// tpslab's server: hold one global lock during --server-serial.
    #[arg(long)]
    pub serialize: bool,
    /// tpslab's server: 0 = a thread per connection; N = N epoll workers sharing them.
    #[arg(long, default_value_t = 0)]
    pub server_threads: usize,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
    /// Show the search full screen while it goes, as `capacity http --live` (each
    /// reply counted as `other`: a framed reply has no status). Standard output must be
    /// a terminal.
    #[arg(long)]
    pub live: bool,
}

impl CapacityTcpArgs {
    /// The validated plan: the search's flags, the output files, then the step
    /// ([`tpslab_run::capacity::tcp_step`]) and the whole plan. Errors: one line naming
    /// the flag.
    pub fn plan(&self) -> Result<CapacityPlan> {
        let unit = RateUnit::RequestsPerSecond;
        let (slo, resolution_pct) = self.search.check(HTTP_RATE, unit)?;
        self.record.check(true)?;
        let step = tpslab_run::capacity::tcp_step(&tpslab_run::capacity::TcpFlags {
            proto: tpslab_plan::proto::Proto::from_flag(&self.protocol)?,
            target: self.target.clone(),
            server_cmd: self.server_cmd.is_some(),
            size: self.size,
            payload_file: self.payload_file.clone(),
            framing: self.framing.clone(),
            connections: self.connections,
            timeout: self.timeout,
            load_threads: self.load_threads,
            pid: self.pid,
            builtin: tpslab_plan::capacity::BuiltinTcpServer {
                work: self.server_work,
                serial: self.server_serial,
                serialize: self.serialize,
                threads: self.server_threads,
            },
            rate: self.search.start_rate,
            window: self.search.step_duration,
            warmup: self.search.warmup,
        })?;
        let plan = CapacityPlan {
            load: CapacityLoad::Tcp(step),
            search: self.search.search(slo, resolution_pct, unit, 1.0),
            server_cmd: self.server_cmd.clone(),
            fix_and_retry: self.fix_and_retry,
        };
        plan.validate()?;
        Ok(plan)
    }
}

/// `capacity udp`'s flags: the load's (as `load udp` takes them, without its rate and
/// duration: the search sets each step's rate, `--step-duration` its length) and the
/// search's.
#[derive(Args, Debug)]
pub struct CapacityUdpArgs {
    /// Server address, HOST:PORT (not with --server-cmd).
    pub target: Option<String>,
    /// Start the user's server for the search: a shell command with {port} (e.g.
    /// 'java UdpServer.java {port}'), run by `sh -c` as its own process group, stopped at
    /// the end; the group's process owning the UDP socket on the port is the server
    /// watched. With --fix-and-retry it is started again after the change, so a fix that
    /// reaches only new sockets (net.core.rmem_default) is searched on the user's server.
    #[arg(long)]
    pub server_cmd: Option<String>,
    /// Apply the fix the verdict recommends at the first failing rate (host sysctls,
    /// journaled and restored; root), search again from the rate sustained, report both
    /// capacities. The second search has its own --budget.
    #[arg(long)]
    pub fix_and_retry: bool,
    #[command(flatten)]
    pub search: SearchFlags,
    /// Datagram size (UDP payload), bytes or a size (1KiB); at least 40.
    #[arg(long, value_name = SIZE, value_parser = size(), default_value = "1024")]
    pub size: u64,
    /// Datagrams sent back-to-back per burst (the burst interval follows each step's
    /// rate).
    #[arg(long, default_value_t = 1)]
    pub burst: u64,
    /// Sender threads (the load spreads over 32 source ports, one socket each, dealt
    /// among them; with more threads, one port each).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// PID of the server process (its namespace, sockets and threads are watched; found
    /// by its socket when on this host and not given).
    #[arg(long)]
    pub pid: Option<u32>,
    /// CPUs the generator's threads may run on, e.g. 0 (default: not pinned).
    #[arg(long)]
    pub load_cpus: Option<String>,
    /// Send this file's bytes instead of tpslab's header (a real protocol's request).
    #[arg(long)]
    pub payload_file: Option<PathBuf>,
    /// OFFSET:LEN of a field the server echoes (e.g. 0:2 for the DNS id).
    #[arg(long)]
    pub seq_field: Option<String>,
    /// Send with UDP GSO (UDP_SEGMENT).
    #[arg(long)]
    pub gso: bool,
    /// Pacing slack: auto, 0 or a duration up to 2ms (see `load udp --help`). Default 0,
    /// exact: a step's latency objective is judged from each datagram's own intended time,
    /// and a late send is the generator's, never the server's.
    #[arg(long, default_value = "0", value_name = "auto|0|DURATION", value_parser = crate::flags::units::pacing_slack())]
    pub pacing_slack: tpslab_plan::udp::PacingSlack,
    /// Wait this long for late replies after each step's last send.
    #[arg(long, default_value = "500ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub drain: Duration,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub interval: Duration,
    /// Do not sample the kernel's drop reasons (skb:kfree_skb, root).
    #[arg(long)]
    pub no_drop_reasons: bool,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
    /// Show the search full screen while it goes: each step's rate and call and the
    /// bracket so far, above the step running now (offered vs delivered pps, this
    /// interval's drops by layer, the rx_queue against its SO_RCVBUF limit, latency).
    /// Keys: q ends the search as Ctrl-C does, p freezes the screen, ? help. Standard
    /// output must be a terminal.
    #[arg(long)]
    pub live: bool,
}

impl CapacityUdpArgs {
    /// The validated plan: the objective, each step's length and the rates first (each
    /// refused naming its flag), then the load as `load udp` checks it, the target
    /// resolved, the PID checked, the search's bounds.
    pub fn plan(&self) -> Result<CapacityPlan> {
        let (slo, resolution_pct) = self.search.check(MAX_RATE_PPS, RateUnit::Pps)?;
        self.record.check(true)?;
        let target = match (&self.target, &self.server_cmd) {
            (Some(t), None) => resolve(t)?,
            // Replaced by the port the started server listens on.
            (None, Some(_)) => std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            (Some(_), Some(_)) => bail!(
                "capacity udp: give HOST:PORT of a running server, or --server-cmd to start one, not both"
            ),
            (None, None) => bail!(
                "capacity udp: give HOST:PORT of the server, or --server-cmd 'COMMAND {{port}}'"
            ),
        };
        if self.server_cmd.is_some() && self.pid.is_some() {
            bail!("--server-cmd starts the server itself: --pid does not apply");
        }
        if self.fix_and_retry && !tpslab_net::is_root() {
            bail!("--fix-and-retry applies the fix as host sysctls (journaled and restored): run as root");
        }
        let flags = LoadFlags {
            rate: Some(self.search.start_rate),
            size: self.size,
            duration: self.search.step_duration,
            warmup: self.search.warmup,
            burst: self.burst,
            burst_interval: None,
            payload_file: self.payload_file.clone(),
            seq_field: self.seq_field.clone(),
            no_replies: false,
            gso: self.gso,
            pacing_slack: self.pacing_slack,
            flows: None,
            load_cpus: self.load_cpus.clone(),
            drain: self.drain,
        };
        let load = load_config(&flags, self.threads, "--threads", target)?;
        if let Some(pid) = self.pid {
            check_pid(pid)?;
        }
        crate::flags::units::check_interval(self.interval)?;
        let plan = CapacityPlan {
            load: CapacityLoad::Udp(UdpRunPlan {
                server: None,
                load,
                interval: self.interval,
                target_pid: self.pid,
                watch_port: None,
                no_drop_reasons: self.no_drop_reasons,
            }),
            // Bursts: no step below the rate at which its window holds a few of them.
            search: self.search.search(
                slo,
                resolution_pct,
                RateUnit::Pps,
                min_rate_for_bursts(self.burst, self.search.step_duration),
            ),
            server_cmd: self.server_cmd.clone(),
            fix_and_retry: self.fix_and_retry,
        };
        plan.validate()?;
        if self.live {
            crate::live::check()?;
        }
        Ok(plan)
    }
}
