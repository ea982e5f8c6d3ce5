//! The reference server's flags (`serve udp`, `run udp`, `sweep`) and the validated
//! server configuration they make.

use super::units::{duration_or_ns, parse_cpus, size, SIZE};
use anyhow::{anyhow, Result};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::time::Duration;
use tpslab_net::sched::SchedPolicy;
use tpslab_plan::udp::Steer;
use tpslab_plan::udp::{Mode, ServerConfig};

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    Replace,
    Echo,
    Sink,
}

#[derive(Args, Debug, Clone)]
pub struct ServerFlags {
    /// Address to bind (0.0.0.0 only when given explicitly).
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub bind: String,
    /// Server threads, one SO_REUSEPORT socket each.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// recvmmsg batch size; 1 means plain recvfrom/sendto.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// SO_RCVBUF request: bytes, or a size such as 2MiB or 64KiB (SO_RCVBUFFORCE when root
    /// and above net.core.rmem_max).
    #[arg(long, value_name = SIZE, value_parser = size())]
    pub rcvbuf: Option<u64>,
    /// replace: S1 find-and-replace then reply; echo: reply unchanged; sink: no reply.
    #[arg(long, value_enum, default_value = "replace")]
    pub mode: ModeArg,
    /// Extra busy work per datagram, e.g. 20us (a slower application).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration(), conflicts_with = "work_ns")]
    pub work: Option<Duration>,
    /// The same in plain nanoseconds, or a duration (the previous name).
    #[arg(long, hide = true, value_parser = duration_or_ns)]
    pub work_ns: Option<Duration>,
    /// CPUs the server threads may run on, e.g. 1 or 0-1 (like taskset).
    #[arg(long)]
    pub cpus: Option<String>,
    /// SO_BUSY_POLL: busy-poll the device queue this long before sleeping in a receive,
    /// in whole microseconds, e.g. 50us (NAPI devices only; root to raise it).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub busy_poll: Option<Duration>,
    /// UDP_GRO: read datagrams coalesced by GSO senders as one buffer (each still counted
    /// and answered one by one; replies leave as one GSO send).
    #[arg(long)]
    pub gro: bool,
    /// Scheduling policy: other, fifo:PRIO or rr:PRIO (like chrt).
    #[arg(long, default_value = "other")]
    pub sched: String,
    /// How datagrams are spread over the threads' SO_REUSEPORT sockets: hash (the
    /// kernel's per-flow hash), cpu (a reuseport BPF program: the receiving CPU's socket),
    /// random (a BPF program: a random socket per datagram, even with few flows).
    #[arg(long, default_value = "hash", value_name = "hash|cpu|random", value_parser = |s: &str| s.parse::<Steer>())]
    pub reuseport_steer: Steer,
}

/// The validated server configuration from its flags. Errors: one line naming the flag.
pub fn server_config(f: &ServerFlags) -> Result<ServerConfig> {
    let bind: SocketAddr = f.bind.parse().map_err(|_| {
        anyhow!(
            "--bind \"{}\": allowed ADDR:PORT, e.g. 127.0.0.1:9000",
            f.bind
        )
    })?;
    let cpus = match &f.cpus {
        None => vec![],
        Some(s) => parse_cpus("--cpus", s)?,
    };
    let sched: SchedPolicy = f
        .sched
        .parse()
        .map_err(|e: String| anyhow!("--sched: {e}"))?;
    let cfg = ServerConfig {
        bind,
        threads: f.threads,
        batch: f.batch,
        rcvbuf: f.rcvbuf,
        mode: match f.mode {
            ModeArg::Replace => Mode::Replace,
            ModeArg::Echo => Mode::Echo,
            ModeArg::Sink => Mode::Sink,
        },
        // `--work` or its previous name `--work-ns` (clap refuses both together).
        work: f.work.or(f.work_ns).unwrap_or_default(),
        cpus,
        sched,
        busy_poll_us: f.busy_poll.map(busy_poll_us).transpose()?,
        gro: f.gro,
        steer: f.reuseport_steer,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// `--busy-poll`'s duration in SO_BUSY_POLL's unit, microseconds (above `u32::MAX` it is
/// `u32::MAX`, which the plan's limit refuses). Errors: not whole microseconds.
fn busy_poll_us(d: Duration) -> Result<u32> {
    if !d.subsec_nanos().is_multiple_of(1000) {
        anyhow::bail!(
            "--busy-poll {}: allowed whole microseconds (SO_BUSY_POLL's unit), e.g. 50us",
            humantime::format_duration(d)
        );
    }
    Ok(u32::try_from(d.as_micros()).unwrap_or(u32::MAX))
}
