//! tpslab's workflows: what each command does between its validated plan and its record.
//!
//! A workflow takes a plan (validated by `tpslab-plan`) and a [`Ctx`] (the stop signal, the
//! per-interval live sink, progress), drives the engine, and returns one
//! `tpslab_record::Record`; it prints nothing and decides no exit code. The
//! binary (`src/`) builds plans from flags and hands the record to its one epilogue
//! (files, history, terminal, exit code). Another front end (a live view, an HTTP API, a
//! library user) calls the same functions.
//!
//! Beside the workflows: [`history`] (the SQLite run history), [`server_proc`] (the
//! servers a run starts and stops), [`input`] / [`outfile`] (how files are read and
//! written as root: regular files only, size caps, never through a planted link).

pub mod agent;
pub mod bdp;
pub mod capacity;
pub mod compare;
pub mod diagnose;
pub mod doctor;
pub mod exporter;
pub mod fleet;
pub mod history;
pub mod input;
pub mod live;
pub mod load_http;
pub mod outfile;
pub mod pool_config;
pub mod probe;
pub mod ramp;
pub mod report;
pub mod serve_tcp;
pub mod server_proc;
pub mod sweep;
pub mod tcp;
pub mod udp;
pub mod walk;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tpslab_engine::observe::LiveSink;

/// Shows how a phase of a run advances (a progress bar on a terminal; nothing for a library
/// user or when output is not a terminal).
pub trait Progress: Send + Sync {
    /// A phase called `label` planned to last `secs` seconds begins; it ends when the
    /// returned guard is dropped.
    fn phase(&self, label: &str, secs: f64) -> Box<dyn Send + '_>;

    /// One line about the run's course (an idle probe's round, a pool's request), for a
    /// user watching; not part of the record.
    fn line(&self, line: &str);

    /// A capacity search's steps judged so far (the whole list, after each step), for a
    /// live view; shown nowhere else.
    fn capacity_steps(&self, _steps: &[tpslab_record::capacity::CapacityStep]) {}
}

/// Progress that shows nothing: for tests and library users.
pub struct Silent;

impl Progress for Silent {
    fn phase(&self, _label: &str, _secs: f64) -> Box<dyn Send + '_> {
        Box::new(())
    }
    fn line(&self, _line: &str) {}
}

/// What every workflow is given besides its plan.
#[derive(Clone)]
pub struct Ctx {
    /// Set (by SIGINT/SIGTERM, or a live view's `q`) to end the run early: the workflow
    /// ends its current step, returns the record of what ran, marked interrupted.
    pub stop: Arc<AtomicBool>,
    /// Receives one sample per observer interval (`--json-stream`, `--metrics-listen`,
    /// a live view); `None`: nobody listens.
    pub live: Option<LiveSink>,
    /// Receives one sample per interval of an open loop of HTTP requests (`load http`,
    /// `capacity http`: `--json-stream`, a live view); `None`: nobody listens.
    pub http_live: Option<tpslab_engine::client::openloop::HttpLiveSink>,
    /// How phases and progress lines are shown.
    pub progress: Arc<dyn Progress>,
}

impl Ctx {
    /// A context nobody watches, with its own stop flag: for tests and library users.
    pub fn silent() -> Ctx {
        Ctx {
            stop: Arc::new(AtomicBool::new(false)),
            live: None,
            http_live: None,
            progress: Arc::new(Silent),
        }
    }

    /// Runs `f` as a phase called `label` planned for `secs` seconds.
    pub fn phase<T>(&self, label: &str, secs: f64, f: impl FnOnce() -> T) -> T {
        let _shown = self.progress.phase(label, secs);
        f()
    }

    /// Whether the run was asked to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// When a command started, for its record's metadata: this host's facts, the wall clock
/// (ms since the Unix epoch) and the monotonic clock.
pub struct Started {
    env: tpslab_record::Environment,
    unix_ms: u64,
    t0: u64,
}

impl Started {
    /// Now.
    pub fn now() -> Started {
        Started {
            env: tpslab_engine::host::env::environment(),
            unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            t0: tpslab_net::mono_ns(),
        }
    }

    /// The metadata of a command that ran from then until now.
    pub fn meta(&self, interrupted: bool) -> tpslab_record::Meta {
        self.meta_for((tpslab_net::mono_ns() - self.t0) as f64 / 1e9, interrupted)
    }

    /// The metadata of a command that ran for `elapsed_s` seconds (measured by it).
    pub fn meta_for(&self, elapsed_s: f64, interrupted: bool) -> tpslab_record::Meta {
        tpslab_record::Meta::new(&self.env, self.unix_ms, elapsed_s, interrupted)
    }
}
