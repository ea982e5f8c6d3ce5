//! `tpslab serve tcp`: the sink, the source, and the request/response server that
//! `ramp tcp` loads (echo or S1's replace, with CPU work, waiting and a global lock).

use anyhow::Result;
use clap::{Args, ValueEnum};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::record::Body;
use tpslab_plan::tcp::{ServeTcpFlags, ServeTcpMode, ServeTcpPlan};
use tpslab_report::term::tcp as render;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServeMode {
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
pub(crate) mod serve_http;

#[derive(Args, Debug)]
pub(crate) struct ServeTcpArgs {
    /// Address to listen on, ADDR:PORT.
    #[arg(long, default_value = "127.0.0.1:5001")]
    bind: String,
    /// What to do with the bytes.
    #[arg(long, value_enum, default_value_t = ServeMode::Sink)]
    pub(crate) mode: ServeMode,
    /// SO_RCVBUF of each connection, e.g. 64KiB (default: autotuning; sink only).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    rcvbuf: Option<u64>,
    /// SO_SNDBUF of each connection, e.g. 64KiB (default: autotuning; source only).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    sndbuf: Option<u64>,
    /// Echo/replace: CPU work per request (busy loop, in parallel), e.g. 200us.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration(), conflicts_with = "work_ns")]
    work: Option<Duration>,
    /// The same in plain nanoseconds, or a duration (the previous name).
    #[arg(long, hide = true, value_parser = crate::flags::duration_or_ns)]
    work_ns: Option<Duration>,
    /// Echo/replace: waiting per request (a sleep, like a round trip to a database),
    /// e.g. 10ms; under one process-wide lock with --serialize.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration(), conflicts_with = "serial_ns")]
    serial: Option<Duration>,
    /// The same in plain nanoseconds, or a duration (the previous name).
    #[arg(long, hide = true, value_parser = crate::flags::duration_or_ns)]
    serial_ns: Option<Duration>,
    /// Echo/replace: run the --serial part of every request under one global lock
    /// (S3's SELECT ... FOR UPDATE in miniature): TPS cannot pass 1 / serial.
    #[arg(long)]
    serialize: bool,
    /// Echo/replace: 0 = one thread per connection; N = N worker threads sharing all
    /// connections through epoll (a request being worked on holds up its worker's
    /// other connections).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    duration: Option<Duration>,
    #[command(flatten)]
    record: crate::flags::RecordFlag,
}

impl ServeTcpArgs {
    /// The validated plan of the flags given (the output files checked first).
    pub(crate) fn plan(&self) -> Result<ServeTcpPlan> {
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

/// `tpslab serve tcp`: the header once listening, the counts at the end.
pub(crate) fn serve(a: ServeTcpArgs) -> Result<ExitCode> {
    serve_plan(&a.plan()?, &a.record)
}

/// Runs a TCP reference server's plan (`serve tcp`, `serve http`): the header once
/// listening (its address is what `ramp http` without a URL reads), the counts at the
/// end, then the record (kind serve_tcp) where `record` asks for it.
fn serve_plan(plan: &ServeTcpPlan, record: &crate::flags::RecordFlag) -> Result<ExitCode> {
    let ctx = tpslab_run::Ctx {
        progress: std::sync::Arc::new(tpslab_run::Silent),
        ..crate::out::ctx(None)?
    };
    let serving = tpslab_run::serve_tcp::start(plan)?;
    let mut out = std::io::stdout().lock();
    render::serve_header(&mut out, &serving.record)?;
    out.flush()?;
    let rec = tpslab_run::serve_tcp::serve(serving, &ctx);
    let Body::ServeTcp(r) = &rec.body else {
        unreachable!("a serve_tcp record")
    };
    render::serve_end(&mut out, r)?;
    drop(out);
    crate::out::emit_files(&rec, record)?;
    Ok(ExitCode::SUCCESS)
}
