//! `tpslab serve http`: the reference request/response server speaking HTTP/1.1
//! keep-alive (each request answered 200 with its body, "ping"s replaced), with the CPU
//! work, waiting and global lock of `serve tcp` (S3 in miniature behind HTTP).

use anyhow::Result;
use clap::Args;
use std::time::Duration;
use tpslab_plan::tcp::{ServeTcpFlags, ServeTcpMode, ServeTcpPlan};

#[derive(Args, Debug)]
pub struct ServeHttpArgs {
    /// Address to listen on, ADDR:PORT.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// CPU work per request (busy loop, in parallel), e.g. 200us.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub work: Option<Duration>,
    /// Waiting per request (a sleep, like a round trip to a database), e.g. 10ms; under
    /// one process-wide lock with --serialize.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub serial: Option<Duration>,
    /// Run the --serial part of every request under one global lock (S3's SELECT ... FOR
    /// UPDATE in miniature): TPS cannot pass 1 / serial.
    #[arg(long)]
    pub serialize: bool,
    /// 0 = one thread per connection; N = N worker threads sharing all connections
    /// through epoll.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
}

impl ServeHttpArgs {
    /// The validated plan (a `serve tcp` plan of mode http; the output files checked
    /// first).
    pub fn plan(&self) -> Result<ServeTcpPlan> {
        let a = self;
        a.record.check(false)?;
        Ok(ServeTcpFlags {
            bind: a.bind.clone(),
            mode: ServeTcpMode::Http,
            rcvbuf: None,
            sndbuf: None,
            work: a.work,
            serial: a.serial,
            serialize: a.serialize,
            threads: a.threads,
            duration: a.duration,
        }
        .plan()?)
    }
}
