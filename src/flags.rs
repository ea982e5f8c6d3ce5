//! Flags shared by several commands (the reference server's, a load's, the outputs, the
//! exit-code gates) and their conversion into validated plans.

use crate::out::MAX_UDP_PAYLOAD;
use anyhow::{anyhow, bail, Result};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::gate;
use tpslab_analysis::record::RunRecord;
use tpslab_engine::load::LoadConfig;
use tpslab_engine::server::{Mode, ServerConfig};
use tpslab_net::sched::SchedPolicy;
use tpslab_plan::limits;
use tpslab_plan::units;

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(crate) enum ModeArg {
    Replace,
    Echo,
    Sink,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ServerFlags {
    /// Address to bind (0.0.0.0 only when given explicitly).
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub(crate) bind: String,
    /// Server threads, one SO_REUSEPORT socket each.
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// recvmmsg batch size; 1 means plain recvfrom/sendto.
    #[arg(long, default_value_t = 1)]
    pub(crate) batch: usize,
    /// SO_RCVBUF request: bytes, or a size such as 2MiB or 64KiB (SO_RCVBUFFORCE when root
    /// and above net.core.rmem_max).
    #[arg(long, value_name = SIZE, value_parser = size())]
    pub(crate) rcvbuf: Option<u64>,
    /// replace: S1 find-and-replace then reply; echo: reply unchanged; sink: no reply.
    #[arg(long, value_enum, default_value = "replace")]
    pub(crate) mode: ModeArg,
    /// Extra busy work per datagram, e.g. 20us (a slower application).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration(), conflicts_with = "work_ns")]
    pub(crate) work: Option<Duration>,
    /// The same in plain nanoseconds, or a duration (the previous name).
    #[arg(long, hide = true, value_parser = duration_or_ns)]
    pub(crate) work_ns: Option<Duration>,
    /// CPUs the server threads may run on, e.g. 1 or 0-1 (like taskset).
    #[arg(long)]
    pub(crate) cpus: Option<String>,
    /// SO_BUSY_POLL in microseconds: busy-poll the device queue before sleeping in a
    /// receive (NAPI devices only; root to raise it).
    #[arg(long)]
    pub(crate) busy_poll: Option<u32>,
    /// UDP_GRO: read datagrams coalesced by GSO senders as one buffer (each still counted
    /// and answered one by one; replies leave as one GSO send).
    #[arg(long)]
    pub(crate) gro: bool,
    /// Scheduling policy: other, fifo:PRIO or rr:PRIO (like chrt).
    #[arg(long, default_value = "other")]
    pub(crate) sched: String,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct LoadFlags {
    /// Mean rate, datagrams per second (10000, 10k, 1.5M, 100kpps), or max (as fast as the
    /// path allows); default 10000, or burst / burst-interval when those are given.
    #[arg(long, value_name = RATE, value_parser = rate())]
    pub(crate) rate: Option<f64>,
    /// Datagram size (UDP payload), bytes or a size (1KiB); at least 40 to carry tpslab's
    /// header.
    #[arg(long, value_name = SIZE, value_parser = size(), default_value = "1024")]
    pub(crate) size: u64,
    /// Measurement window (after warm-up), e.g. 10s, 500ms.
    #[arg(long, default_value = "5s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) duration: Duration,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "500ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) warmup: Duration,
    /// Datagrams sent back-to-back per burst.
    #[arg(long, default_value_t = 1)]
    pub(crate) burst: u64,
    /// Interval between bursts, e.g. 50ms; the mean rate follows (burst / interval).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) burst_interval: Option<Duration>,
    /// Send this file's bytes instead of tpslab's header (a real protocol's request).
    #[arg(long)]
    pub(crate) payload_file: Option<PathBuf>,
    /// OFFSET:LEN of a field the server echoes (e.g. 0:2 for the DNS id): the sequence
    /// number is written there to match replies per packet.
    #[arg(long)]
    pub(crate) seq_field: Option<String>,
    /// One-way load: expect no replies.
    #[arg(long)]
    pub(crate) no_replies: bool,
    /// Send with UDP GSO (UDP_SEGMENT): datagrams due together leave in one send (falls
    /// back to plain sends where the kernel refuses).
    #[arg(long)]
    pub(crate) gso: bool,
    /// Pacing slack, 0..=2ms: wake once per group of datagrams due within it instead of
    /// once per datagram (each leaves up to this late, never early; its lag is still
    /// measured). 0 (the default): every datagram at its time, one wake-up each.
    #[arg(long, default_value = "0s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) pacing_slack: Duration,
    /// CPUs the generator's threads may run on, e.g. 0 (default: not pinned).
    #[arg(long)]
    pub(crate) load_cpus: Option<String>,
    /// Wait this long for late replies after the last send.
    #[arg(long, default_value = "500ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) drain: Duration,
}

/// `--json FILE`, the same on every command that writes a record.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct RecordFlag {
    /// Write the command's record to FILE: JSON, schema tpslab.record/2, one kind per
    /// command (`-`: standard output, where the report does not use it); `tpslab report
    /// FILE` renders it again.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Also write the report as one self-contained HTML page to FILE (plots of what was
    /// measured, every series named with its source; opens offline).
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
    /// Do not append this run to the history (`tpslab history`).
    #[arg(long)]
    pub(crate) no_history: bool,
    /// Also write the record's figures to FILE in Prometheus' text format, for
    /// node_exporter's textfile collector (written whole, then renamed into place).
    #[arg(long, value_name = "FILE")]
    pub(crate) metrics_file: Option<PathBuf>,
}

impl RecordFlag {
    /// Checks before the run that the record and report files can be written; `--json -`
    /// only where `json_stdout_ok`.
    pub(crate) fn check(&self, json_stdout_ok: bool) -> Result<()> {
        if let Some(p) = &self.json {
            crate::out::check_output("--json", p, json_stdout_ok)?;
        }
        if let Some(p) = &self.html {
            crate::out::check_output("--html", p, false)?;
        }
        if let Some(p) = &self.metrics_file {
            crate::out::check_output("--metrics-file", p, false)?;
        }
        Ok(())
    }

    /// Whether a record is kept anywhere (a file, or the history).
    pub(crate) fn wanted(&self) -> bool {
        self.json.is_some()
            || self.html.is_some()
            || self.metrics_file.is_some()
            || !self.no_history
    }

    /// The files the record goes to, for [`crate::out::emit`].
    pub(crate) fn outputs(&self) -> crate::out::Outputs<'_> {
        crate::out::Outputs {
            json: self.json.as_deref(),
            html: self.html.as_deref(),
            metrics: self.metrics_file.as_deref(),
            history: !self.no_history,
            extra: vec![],
        }
    }
}

#[derive(Args, Debug, Clone)]
pub(crate) struct OutputFlags {
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) interval: Duration,
    #[command(flatten)]
    pub(crate) record: RecordFlag,
    #[command(flatten)]
    pub(crate) metrics: crate::metrics::ListenFlag,
    /// Write one JSON object per sampling interval to FILE while the run goes (NDJSON,
    /// one write per line): time, offered and delivered pps, drops so far, rx_queue, and
    /// the latency of the replies read in the interval.
    #[arg(long, value_name = "FILE")]
    pub(crate) json_stream: Option<PathBuf>,
    /// Show the source counter of every figure.
    #[arg(long)]
    pub(crate) explain: bool,
    /// Do not sample the kernel's drop reasons (skb:kfree_skb, root): spares the cost of
    /// one perf sample per dropped packet on the host while the run lasts.
    #[arg(long)]
    pub(crate) no_drop_reasons: bool,
    #[command(flatten)]
    pub(crate) gate: GateFlags,
}

/// Exit codes for CI pipelines: 0 ok; 1 a --fail-on condition met; 2 usage or
/// environment; 3 the run was not valid evidence (with --strict); 130 interrupted.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct GateFlags {
    /// Exit 1 when the run meets one of these, comma-separated: 'loss>PCT%' (load, run,
    /// diagnose: window loss; ramp: requests failed or timed out), invalid (not valid
    /// evidence: the generator was a bottleneck, no reply at all, a run of a sweep),
    /// errors (send or reply failures, ECONNREFUSED from a closed port included; failed
    /// requests; sweep runs with either), target (tcp: --target-rate not reached). Quote
    /// it, e.g. --fail-on 'loss>1%,invalid': unquoted, the shell reads > as a redirection.
    #[arg(long, value_name = "CONDITIONS")]
    pub(crate) fail_on: Option<String>,
    /// Exit 3 when the run is not valid evidence (RUN INVALID).
    #[arg(long)]
    pub(crate) strict: bool,
}

impl GateFlags {
    /// The parsed conditions, of those this command can judge (checked before the run).
    pub(crate) fn conditions(&self, allowed: &[&str]) -> Result<Vec<gate::FailOn>> {
        match &self.fail_on {
            None => Ok(vec![]),
            Some(s) => gate::parse(s, allowed).map_err(|e| anyhow!(e)),
        }
    }

    /// The exit code of a run's outcome, with its reasons printed to stderr.
    pub(crate) fn exit(&self, o: &gate::Outcome, allowed: &[&str]) -> Result<ExitCode> {
        let (code, why) = gate::exit_code(o, &self.conditions(allowed)?, self.strict);
        if code != 0 {
            for w in why {
                eprintln!("tpslab: exit {code}: {w}");
            }
        }
        Ok(ExitCode::from(code))
    }
}

/// The exit code of a UDP run record under `gate`.
pub(crate) fn gate_exit(rec: &RunRecord, gate: &GateFlags) -> Result<ExitCode> {
    gate.exit(&gate::udp_outcome(rec), gate::applies::UDP_RUN)
}

pub(crate) fn server_config(f: &ServerFlags) -> Result<ServerConfig> {
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
        work_ns: work_ns(f.work, f.work_ns)?,
        cpus,
        sched,
        busy_poll_us: f.busy_poll,
        gro: f.gro,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// The clap value parser of one kind of value: the kind's one parser in
/// [`tpslab_plan::units`], labelled with the flag it reads (`--rcvbuf`), so every flag of
/// the kind takes the same forms and refuses with the same line, `--FLAG VALUE: allowed
/// FORMS` (printed by `cli` as tpslab's one-line error). Each flag of a kind carries the
/// kind's value name ([`SIZE`], [`RATE`], [`BITRATE`], [`DURATION`]), which `--help` shows
/// and the command-line table test checks.
#[derive(Clone, Copy)]
pub(crate) struct Unit<T: Clone + Send + Sync + 'static>(
    fn(&str, &str) -> Result<T, tpslab_plan::PlanError>,
);

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Unit<T> {
    type Value = T;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let label = arg.map_or_else(String::new, |a| match a.get_long() {
            Some(l) => format!("--{l}"),
            None => a.get_id().to_string().to_uppercase(),
        });
        let text = value.to_string_lossy();
        (self.0)(&label, &text).map_err(|e| {
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n"))
        })
    }
}

/// The value name of a size flag (bytes: `2MiB`, `64KiB`, `1000000`).
pub(crate) const SIZE: &str = "SIZE";
/// The value name of a packet-rate flag (`10000`, `10k`, `1.5M`, `100kpps`, `max`).
pub(crate) const RATE: &str = "RATE";
/// The value name of a bit-rate flag (`80mbit`, `1gbit`, `10MB/s`).
pub(crate) const BITRATE: &str = "BITRATE";
/// The value name of a duration flag (`200us`, `10ms`, `1.5s`, `1m`).
pub(crate) const DURATION: &str = "DURATION";

/// The value name of a rate flag whose kind another flag chooses (doctor's `--rate`: pps
/// with `--for udp`, bits/s with `--for tcp`).
pub(crate) const RATE_OR_BITRATE: &str = "RATE|BITRATE";

/// The parser of a [`RATE_OR_BITRATE`] flag: a value one of the two kinds reads, kept as
/// written for the command to read with the kind it chooses; refused naming both kinds.
pub(crate) fn rate_or_bitrate() -> Unit<String> {
    Unit(|label, s| {
        if units::parse_pps(label, s).is_ok() || units::parse_rate(label, s).is_ok() {
            return Ok(s.to_string());
        }
        Err(tpslab_plan::PlanError::value(
            label,
            s,
            format!(
                "{} (--for udp), or {} (--for tcp)",
                units::pps_forms(),
                units::BITRATE_FORMS
            ),
        ))
    })
}

/// A size flag's parser: bytes ([`units::parse_size`]).
pub(crate) fn size() -> Unit<u64> {
    Unit(units::parse_size)
}

/// A packet-rate flag's parser: datagrams per second, infinity for `max`
/// ([`units::parse_pps`]).
pub(crate) fn rate() -> Unit<f64> {
    Unit(units::parse_pps)
}

/// A bit-rate flag's parser: bits per second ([`units::parse_rate`]).
pub(crate) fn bitrate() -> Unit<f64> {
    Unit(units::parse_rate)
}

/// A duration flag's parser ([`units::parse_duration`]).
pub(crate) fn duration() -> Unit<Duration> {
    Unit(units::parse_duration)
}

/// The value of a hidden `--X-ns` flag (the previous names of `--work` and `--serial`):
/// plain nanoseconds (`20000`) or a duration (`20us`).
pub(crate) fn duration_or_ns(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<u64>() {
        Ok(n) => Ok(Duration::from_nanos(n)),
        Err(_) => humantime::parse_duration(s)
            .map_err(|e| format!("{e}; allowed nanoseconds (20000) or a duration (20us)")),
    }
}

/// `--work` (or its previous name `--work-ns`; clap refuses both together), ns.
pub(crate) fn work_ns(d: Option<Duration>, old: Option<Duration>) -> Result<u64> {
    let d = d.or(old).unwrap_or_default();
    u64::try_from(d.as_nanos()).map_err(|_| {
        anyhow!(
            "--work {}: allowed {}",
            humantime::format_duration(d),
            limits::WORK.allowed()
        )
    })
}

/// Parses a CPU list ("0-1,3") or "all" (every online CPU) and checks the CPUs exist.
pub(crate) fn parse_cpus(flag: &str, s: &str) -> Result<Vec<usize>> {
    Ok(tpslab_plan::units::parse_cpus(
        flag,
        s,
        tpslab_net::online_cpus(),
    )?)
}

/// The load plan from `load`'s flags; `threads_flag` names the generator-threads flag of
/// the calling command (`--threads` for `load`, `--load-threads` for `run`).
pub(crate) fn load_config(
    f: &LoadFlags,
    threads: usize,
    threads_flag: &str,
    target: SocketAddr,
) -> Result<LoadConfig> {
    limits::BURST.check("--burst", f.burst)?;
    let given = f.rate;
    let rate = match (f.burst_interval, given) {
        (Some(iv), given) => {
            if iv.is_zero() {
                bail!("--burst-interval 0: allowed a positive duration, e.g. 50ms");
            }
            let implied = f.burst as f64 / iv.as_secs_f64();
            if !implied.is_finite() || implied > limits::MAX_RATE_PPS {
                bail!(
                    "--burst {} --burst-interval {}: {implied:.0} pps mean; allowed up to {:.0} pps",
                    f.burst,
                    humantime::format_duration(iv),
                    limits::MAX_RATE_PPS
                );
            }
            // A --rate that disagrees with what the bursts imply would be silently replaced.
            // Within half a datagram per second: --rate 3333 agrees with 100 per 30ms.
            if let Some(r) = given.filter(|r| (r - implied).abs() > 0.5f64.max(1e-6 * implied)) {
                bail!(
                    "--rate {} disagrees with --burst {} --burst-interval {} ({} pps mean); give --rate with --burst, or --burst with --burst-interval",
                    if r.is_infinite() { "max".to_string() } else { format!("{r}") },
                    f.burst,
                    humantime::format_duration(iv),
                    if implied.fract() == 0.0 {
                        format!("{implied:.0}")
                    } else {
                        format!("{implied:.3}")
                    }
                );
            }
            implied
        }
        (None, Some(r)) => r,
        (None, None) => 10_000.0,
    };
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

/// Reads a `--payload-file`: a regular file (not a device or pipe, which could be endless)
/// of 1..=65507 bytes (the largest UDP payload), read with that cap ([`crate::input`]).
pub(crate) fn read_payload_file(p: &std::path::Path) -> Result<Vec<u8>> {
    let bytes = tpslab_run::input::read_bytes("--payload-file", p, MAX_UDP_PAYLOAD as u64, false)?;
    if bytes.is_empty() {
        bail!(
            "--payload-file {}: 0 bytes; allowed 1..={MAX_UDP_PAYLOAD}",
            p.display()
        );
    }
    Ok(bytes)
}

/// Checks a sampling `--interval` against [`limits::SAMPLE_INTERVAL`].
pub(crate) fn check_interval(iv: Duration) -> Result<()> {
    limits::SAMPLE_INTERVAL.check("--interval", iv)?;
    Ok(())
}
