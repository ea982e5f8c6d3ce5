//! A record's files (`--json`, `--html`, `--metrics-file`, a command's own) written
//! together, each failure kept, and the `--json-stream` sink.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use tpslab_engine::observe::{LiveSample, LiveSink};
use tpslab_record::Record;

/// A command's own file: flag, path, a name for the status line, the rendered bytes (or
/// why they could not be rendered).
pub type Extra<'a> = (&'static str, &'a Path, &'static str, Result<Vec<u8>>);

/// What [`write_files`] did.
#[derive(Debug, Default)]
pub struct Written {
    /// One status line per file written (`record written to r.json`).
    pub written: Vec<String>,
    /// One line per output that failed (`--json /dev/full: No space left on device`).
    pub failed: Vec<String>,
    /// The bytes asked for on standard output (a path `-`), not written yet.
    pub stdout: Option<Vec<u8>>,
}

/// Writes `rec` as JSON to `json`, its HTML page to `html`, its metrics to `metrics`,
/// then each of `extra`, each with [`super::write`] (a path `-` is kept for standard
/// output instead), and appends it to the history when `history` (a failure there is said
/// on stderr, not counted). Every file is attempted whatever failed before.
pub fn write_files(
    rec: &Record,
    json: Option<&Path>,
    html: Option<&Path>,
    metrics: Option<&Path>,
    extra: Vec<Extra<'_>>,
    history: bool,
) -> Written {
    let mut w = Written::default();
    let mut file = |flag: &str, path: &Path, what: &str, bytes: Result<Vec<u8>>| match bytes {
        Err(e) => w.failed.push(format!("{flag} {}: {e:#}", path.display())),
        Ok(b) if path.as_os_str() == "-" => w.stdout = Some(b),
        Ok(b) => match super::write(flag, path, &b) {
            Ok(()) => w
                .written
                .push(format!("{what} written to {}", path.display())),
            Err(e) => w.failed.push(e.0),
        },
    };
    if let Some(p) = json {
        file("--json", p, "record", super::json_bytes(rec));
    }
    if let Some(p) = html {
        let mut page = Vec::new();
        let r = tpslab_report::html::record(&mut page, rec)
            .map(|_| page)
            .context("rendering the HTML report");
        file("--html", p, "HTML report", r);
    }
    if let Some(p) = metrics {
        // Labelled with the file's name: two producers' files in one textfile folder
        // never give the same series.
        let name = (p.as_os_str() != "-")
            .then(|| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .flatten();
        let text = tpslab_report::metrics::record_text(rec, name.as_deref());
        file("--metrics-file", p, "metrics", Ok(text.into_bytes()));
    }
    for (flag, p, what, bytes) in extra {
        file(flag, p, what, bytes);
    }
    if history {
        if let Err(e) = crate::history::append(rec) {
            // Escaped, line feeds too: the folder's name is the environment's.
            let why = tpslab_report::term::escaped(&format!("{e:#}"), &[]);
            eprintln!("tpslab: not recorded in the history: {why}");
        }
    }
    w
}

/// `--json-stream FILE`: a sink writing each sample as one JSON line, flushed (the file
/// is created now; a line that cannot be written is said once on stderr, the run goes on).
pub fn json_stream(path: &Path) -> Result<LiveSink> {
    let write = ndjson(path)?;
    Ok(LiveSink(Arc::new(move |s: &LiveSample| write(s))))
}

/// [`json_stream`] for an open loop of HTTP requests (`load http --json-stream FILE`): one
/// line per [`tpslab_engine::client::openloop::HttpLiveSample`].
pub fn json_stream_http(path: &Path) -> Result<tpslab_engine::client::openloop::HttpLiveSink> {
    let write = ndjson(path)?;
    Ok(tpslab_engine::client::openloop::HttpLiveSink(Arc::new(
        move |s| write(s),
    )))
}

/// Writes each value given as one JSON line to `path` (created now). Errors: as
/// [`super::create_stream`]'s.
fn ndjson<T: serde::Serialize>(path: &Path) -> Result<impl Fn(&T) + Send + Sync> {
    let f = super::create_stream("--json-stream", path)?;
    let state = std::sync::Mutex::new((f, false));
    let name = path.display().to_string();
    Ok(move |s: &T| {
        let mut line = serde_json::to_vec(s).unwrap_or_default();
        line.push(b'\n');
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        // One write per line: a reader following the file sees whole lines.
        // A FIFO whose reader went away fails the line (EPIPE), not the run.
        let file = &mut st.0;
        if let Err(e) = tpslab_net::process::without_sigpipe(|| file.write_all(&line)) {
            if !st.1 {
                eprintln!("tpslab: --json-stream {name}: {e}; the run goes on");
                st.1 = true;
            }
        }
    })
}
