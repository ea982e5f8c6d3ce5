//! The run of a command whose flags and plan are [`tpslab_cli::serve_tcp`]:
//! `tpslab serve tcp`: the sink, the source, and the request/response server that
//! `ramp tcp` loads (echo or S1's replace, with CPU work, waiting and a global lock).

use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;
use tpslab_cli::serve_tcp::ServeTcpArgs;
use tpslab_plan::tcp::ServeTcpPlan;
use tpslab_record::Body;
use tpslab_report::term::tcp as render;

/// `tpslab serve tcp`: the header once listening, the counts at the end.
pub(crate) fn serve(a: ServeTcpArgs) -> Result<ExitCode> {
    serve_plan(&a.plan()?, &a.record)
}

/// Runs a TCP reference server's plan (`serve tcp`, `serve http`): the header once
/// listening (its address is what `ramp http` without a URL reads), the counts at the
/// end, then the record (kind serve_tcp) where `record` asks for it.
fn serve_plan(plan: &ServeTcpPlan, record: &tpslab_cli::flags::RecordFlag) -> Result<ExitCode> {
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

/// `tpslab serve http`: as `serve tcp` ([`serve_plan`]), in mode http.
pub(crate) fn serve_http(a: tpslab_cli::serve_tcp::serve_http::ServeHttpArgs) -> Result<ExitCode> {
    serve_plan(&a.plan()?, &a.record)
}
