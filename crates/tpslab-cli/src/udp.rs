//! The UDP commands: `serve udp`, `load udp`, `run udp` and `watch`: their flags, the
//! validated plan they make ([`tpslab_run::udp`] runs it).

use crate::flags::{load_config, server_config, LoadFlags, OutputFlags, ServerFlags};
use crate::metrics::ListenFlag;
use crate::target::check_pid;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tpslab_plan::target::resolve;
use tpslab_plan::udp::Mode;
use tpslab_plan::udp::UdpRunPlan;
use tpslab_plan::udp::WatchPlan;
use tpslab_run::udp::ServePlan;

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub server: ServerFlags,
    /// Stop after this long (default: until Ctrl-C/SIGTERM).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
    #[command(flatten)]
    pub metrics: ListenFlag,
}

#[derive(Args, Debug)]
pub struct LoadUdpArgs {
    /// Server address, HOST:PORT.
    pub target: String,
    #[command(flatten)]
    pub load: LoadFlags,
    /// Sender threads (the --flows sockets dealt among them).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// PID of the server process: its network namespace, sockets and threads are watched,
    /// and (root, kernel 6.4+) the UDP datagrams its threads read and send are counted
    /// exactly, whatever else uses UDP on the host.
    #[arg(long)]
    pub pid: Option<u32>,
    #[command(flatten)]
    pub out: OutputFlags,
}

#[derive(Args, Debug)]
pub struct RunUdpArgs {
    #[command(flatten)]
    pub server: ServerFlags,
    #[command(flatten)]
    pub load: LoadFlags,
    /// Generator sender threads (one socket each); --threads is the server's.
    #[arg(long, default_value_t = 1)]
    pub load_threads: usize,
    #[command(flatten)]
    pub out: OutputFlags,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Process whose sockets (UDP and TCP, found through its descriptors), threads and
    /// namespace to watch; its threads' UDP reads and sends are counted (root).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Local port of the socket(s) to watch: UDP sockets bound to it, and TCP sockets
    /// (a listener and its connections) open on it when the watch starts.
    #[arg(long)]
    pub port: Option<u16>,
    /// How long to watch.
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Duration,
    /// Write one JSON object per sampling interval to FILE while watching (NDJSON, one
    /// write per line): time, delivered pps, drops so far, rx_queue.
    #[arg(long, value_name = "FILE")]
    pub json_stream: Option<PathBuf>,
    /// Sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub interval: Duration,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
    /// Show the source counter of every figure.
    #[arg(long)]
    pub explain: bool,
    /// Do not sample the kernel's drop reasons (skb:kfree_skb, root): spares the cost of
    /// one perf sample per dropped packet on the host while watching.
    #[arg(long)]
    pub no_drop_reasons: bool,
    #[command(flatten)]
    pub metrics: ListenFlag,
    /// Show the watch full screen while it goes, from the same samples --json-stream
    /// writes: delivered pps, this interval's drops by layer, the rx_queue against its
    /// SO_RCVBUF limit, softnet drops per CPU. Keys: q ends the watch as Ctrl-C does, p
    /// freezes the screen, ? help. Standard output must be a terminal.
    #[arg(long)]
    pub live: bool,
}

impl ServeArgs {
    /// The server's validated settings and how long it serves; the record's files checked.
    pub fn plan(&self) -> Result<ServePlan> {
        let server = server_config(&self.server)?;
        self.record.check(false)?;
        Ok(ServePlan {
            server,
            duration: self.duration,
        })
    }
}

impl LoadUdpArgs {
    /// The run against TARGET: the load (from its flags), the observer's interval, the
    /// server's PID; the gate and the output files checked.
    pub fn plan(&self) -> Result<UdpRunPlan> {
        let target = resolve(&self.target)?;
        let mut load = load_config(&self.load, self.threads, "--threads", target)?;
        load.keep_histograms = self.out.check()?;
        if self.out.live {
            crate::live::check()?;
        }
        if let Some(pid) = self.pid {
            check_pid(pid)?;
        }
        Ok(UdpRunPlan {
            server: None,
            load,
            interval: self.out.interval,
            target_pid: self.pid,
            watch_port: None,
            no_drop_reasons: self.out.no_drop_reasons,
        })
    }
}

impl RunUdpArgs {
    /// Our server (sink with --no-replies) and the load against it; the gate and the
    /// output files checked.
    pub fn plan(&self) -> Result<UdpRunPlan> {
        let mut srv = server_config(&self.server)?;
        if self.load.no_replies {
            srv.mode = Mode::Sink;
        }
        let mut load = load_config(&self.load, self.load_threads, "--load-threads", srv.bind)?;
        load.keep_histograms = self.out.check()?;
        if self.out.live {
            crate::live::check()?;
        }
        Ok(UdpRunPlan {
            server: Some(srv),
            load,
            interval: self.out.interval,
            target_pid: None,
            watch_port: None,
            no_drop_reasons: self.out.no_drop_reasons,
        })
    }
}

impl WatchArgs {
    /// What to watch, how often and how long (checked against the plan's limits); the
    /// process checked to exist, the output files checked.
    pub fn plan(&self) -> Result<WatchPlan> {
        let plan = WatchPlan {
            pid: self.pid,
            port: self.port,
            interval: self.interval,
            duration: self.duration,
            no_drop_reasons: self.no_drop_reasons,
        };
        plan.validate()?;
        self.record.check(true)?;
        if let Some(pid) = self.pid {
            check_pid(pid)?;
        }
        if self.live {
            crate::live::check()?;
        }
        Ok(plan)
    }
}
