//! A UDP load's flags (`load udp`, `run udp`, `diagnose udp`, `sweep`) and the validated
//! load they make.

use super::units::{parse_cpus, rate, size, RATE, SIZE};
use anyhow::Result;
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tpslab_plan::udp::LoadConfig;
use tpslab_plan::units;

#[derive(Args, Debug, Clone)]
pub struct LoadFlags {
    /// Mean rate, datagrams per second (10000, 10k, 1.5M, 100kpps), or max (as fast as the
    /// path allows); default 10000, or burst / burst-interval when those are given.
    #[arg(long, value_name = RATE, value_parser = rate())]
    pub rate: Option<f64>,
    /// Datagram size (UDP payload), bytes or a size (1KiB); at least 40 to carry tpslab's
    /// header.
    #[arg(long, value_name = SIZE, value_parser = size(), default_value = "1024")]
    pub size: u64,
    /// Measurement window (after warm-up), e.g. 10s, 500ms.
    #[arg(long, default_value = "5s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Duration,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "500ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub warmup: Duration,
    /// Datagrams sent back-to-back per burst.
    #[arg(long, default_value_t = 1)]
    pub burst: u64,
    /// Interval between bursts, e.g. 50ms; the mean rate follows (burst / interval).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub burst_interval: Option<Duration>,
    /// Send this file's bytes instead of tpslab's header (a real protocol's request).
    #[arg(long)]
    pub payload_file: Option<PathBuf>,
    /// OFFSET:LEN of a field the server echoes (e.g. 0:2 for the DNS id): the sequence
    /// number is written there to match replies per packet.
    #[arg(long)]
    pub seq_field: Option<String>,
    /// One-way load: expect no replies.
    #[arg(long)]
    pub no_replies: bool,
    /// Send with UDP GSO (UDP_SEGMENT): datagrams due together leave in one send (falls
    /// back to plain sends where the kernel refuses).
    #[arg(long)]
    pub gso: bool,
    /// Pacing slack: auto, 0 or a duration up to 2ms. A duration: wake once per group of
    /// datagrams due within it instead of once per datagram (each leaves up to this late,
    /// never early; its lag is measured). 0: every datagram at its time, one wake-up
    /// each. auto (the default): max(one inter-arrival gap, 100us) per sender thread,
    /// exact below 1000 pps per thread and with bursts.
    #[arg(long, default_value = "auto", value_name = "auto|0|DURATION", value_parser = super::units::pacing_slack())]
    pub pacing_slack: tpslab_plan::udp::PacingSlack,
    /// Flows: source ports (one socket each) the load is spread over, dealt to the sender
    /// threads (at least one each); default 32, or one per thread with more threads: 4 for
    /// each socket of a server's SO_REUSEPORT group of up to 8, so its hash leaves few idle.
    #[arg(long, value_name = "N")]
    pub flows: Option<usize>,
    /// CPUs the generator's threads may run on, e.g. 0 (default: not pinned).
    #[arg(long)]
    pub load_cpus: Option<String>,
    /// Wait this long for late replies after the last send.
    #[arg(long, default_value = "500ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub drain: Duration,
}

/// The load plan from `load`'s flags; `threads_flag` names the generator-threads flag of
/// the calling command (`--threads` for `load`, `--load-threads` for `run`).
pub fn load_config(
    f: &LoadFlags,
    threads: usize,
    threads_flag: &str,
    target: SocketAddr,
) -> Result<LoadConfig> {
    let rate = tpslab_plan::udp::mean_rate(f.rate, f.burst, f.burst_interval)?;
    let payload = match &f.payload_file {
        None => None,
        Some(p) => Some(read_payload_file(p)?),
    };
    let seq_field = match (&f.seq_field, &payload) {
        (None, _) => None,
        (Some(s), Some(p)) => Some(units::parse_seq_field("--seq-field", s, p.len())?),
        // Refused by the validation below, naming both flags.
        (Some(_), None) => Some((0, 1)),
    };
    let run_id = tpslab_net::mono_ns() ^ ((std::process::id() as u64) << 32);
    let cpus = match &f.load_cpus {
        None => vec![],
        Some(s) => parse_cpus("--load-cpus", s)?,
    };
    let cfg = LoadConfig {
        target,
        rate_pps: rate,
        size_bytes: usize::try_from(f.size).unwrap_or(usize::MAX),
        duration: f.duration,
        warmup: f.warmup,
        burst: f.burst,
        threads,
        flows: f
            .flows
            .unwrap_or(tpslab_plan::limits::DEFAULT_FLOWS.max(threads)),
        payload,
        seq_field,
        expect_replies: !f.no_replies,
        drain: f.drain,
        run_id,
        cpus,
        gso: f.gso,
        pacing_slack: f.pacing_slack,

        phase: Duration::ZERO,

        keep_histograms: false,
    };
    cfg.validate().map_err(|e| {
        e.relabel(|l| match l {
            "--load-threads" => threads_flag.to_string(),
            l => l.to_string(),
        })
    })?;
    Ok(cfg)
}

use tpslab_run::input::read_payload_file;
