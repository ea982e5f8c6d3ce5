//! `tpslab ramp http [URL]`: the flags of `ramp tcp` (users, steps, think time, the
//! built-in server's) with the URL as the target, and `--method`, `--header`, `--body`.

use super::{RampArgs, RampProto, RampSetup};
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use tpslab_plan::http::{parse_header, HttpRequest};
use tpslab_plan::ramp::HTTP_BODY_BYTES;

/// `ramp http`'s own flags; the rest are `ramp tcp`'s (TARGET is the URL,
/// `http://HOST[:PORT]/PATH`).
#[derive(Args, Debug)]
pub(crate) struct RampHttpArgs {
    /// The request's method.
    #[arg(long, default_value = "GET")]
    method: String,
    /// A request header, 'NAME: VALUE' (repeatable); Host is the URL's unless given.
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    headers: Vec<String>,
    /// The request's body: this file's bytes (a regular file of at most 1 MiB), sent with
    /// its Content-Length.
    #[arg(long)]
    body: Option<PathBuf>,
    #[command(flatten)]
    pub(super) ramp: RampArgs,
}

impl RampHttpArgs {
    /// The validated setup: the URL, method and headers checked first, then the flags
    /// `ramp tcp` checks, then the body read. Errors: one line.
    pub(super) fn plan(&self) -> Result<RampSetup> {
        let r = &self.ramp;
        if r.payload_file.is_some() {
            bail!("--payload-file applies to ramp tcp|udp; ramp http sends --body FILE");
        }
        if r.size != 1024 {
            bail!("--size applies to ramp tcp|udp; ramp http sends --body FILE");
        }
        let headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let req = HttpRequest {
            // Without a URL: the built-in server's, known once it is started.
            url: r
                .target
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1/".into()),
            method: self.method.clone(),
            headers,
        };
        req.check()?;
        let body = match &self.body {
            Some(p) => tpslab_run::input::read_bytes("--body", p, HTTP_BODY_BYTES, false)?,
            None => vec![],
        };
        let mut setup = r.plan(RampProto::Http(req))?;
        setup.plan.request = body;
        Ok(setup)
    }
}
