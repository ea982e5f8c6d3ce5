//! `tpslab serve tcp`: the sink, the source, and the request/response server that
//! `ramp tcp` loads (echo or S1's replace, with CPU work, waiting and a global lock).

use anyhow::Result;
use clap::{Args, ValueEnum};
use std::time::Duration;
use tpslab_plan::tcp::{ServeTcpFlags, ServeTcpMode, ServeTcpPlan};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServeMode {
    /// Read and discard everything.
    Sink,
    /// Write a stream to every connection (for `tpslab tcp --reverse`).
    Source,
    /// tpslab's framed request/response: reply with each request unchanged.
    Echo,
    /// Framed request/response, S1's work: replace every "ping" with "pong".
    Replace,
}

#[path = "serve_http.rs"]
pub mod serve_http;

#[derive(Args, Debug)]
pub struct ServeTcpArgs {
    /// Address to listen on, ADDR:PORT.
    #[arg(long, default_value = "127.0.0.1:5001")]
    pub bind: String,
    /// What to do with the bytes.
    #[arg(long, value_enum, default_value_t = ServeMode::Sink)]
    pub mode: ServeMode,
    /// SO_RCVBUF of each connection, e.g. 64KiB (default: autotuning; sink only).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub rcvbuf: Option<u64>,
    /// SO_SNDBUF of each connection, e.g. 64KiB (default: autotuning; source only).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub sndbuf: Option<u64>,
    /// Echo/replace: CPU work per request (busy loop, in parallel), e.g. 200us.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration(), conflicts_with = "work_ns")]
    pub work: Option<Duration>,
    /// The same in plain nanoseconds, or a duration (the previous name).
    #[arg(long, hide = true, value_parser = crate::flags::duration_or_ns)]
    pub work_ns: Option<Duration>,
    /// Echo/replace: waiting per request (a sleep, like a round trip to a database),
    /// e.g. 10ms; under one process-wide lock with --serialize.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration(), conflicts_with = "serial_ns")]
    pub serial: Option<Duration>,
    /// The same in plain nanoseconds, or a duration (the previous name).
    #[arg(long, hide = true, value_parser = crate::flags::duration_or_ns)]
    pub serial_ns: Option<Duration>,
    /// Echo/replace: run the --serial part of every request under one global lock
    /// (S3's SELECT ... FOR UPDATE in miniature): TPS cannot pass 1 / serial.
    #[arg(long)]
    pub serialize: bool,
    /// Echo/replace: 0 = one thread per connection; N = N worker threads sharing all
    /// connections through epoll (a request being worked on holds up its worker's
    /// other connections).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
}

impl ServeTcpArgs {
    /// The validated plan of the flags given (the output files checked first).
    pub fn plan(&self) -> Result<ServeTcpPlan> {
        let a = self;
        a.record.check(false)?;
        let mode = match a.mode {
            ServeMode::Sink => ServeTcpMode::Sink,
            ServeMode::Source => ServeTcpMode::Source,
            ServeMode::Echo => ServeTcpMode::Echo,
            ServeMode::Replace => ServeTcpMode::Replace,
        };
        Ok(ServeTcpFlags {
            bind: a.bind.clone(),
            mode,
            rcvbuf: a.rcvbuf,
            sndbuf: a.sndbuf,
            work: a.work.or(a.work_ns),
            serial: a.serial.or(a.serial_ns),
            serialize: a.serialize,
            threads: a.threads,
            duration: a.duration,
        }
        .plan()?)
    }
}
