//! Flags shared by several commands, one group per module: the kinds of value
//! ([`units`]), the reference server's (`server`), a load's (`load`), the outputs and
//! the exit-code gates (`output`); each group with its conversion into a validated plan.

mod http;
mod load;
mod output;
mod server;
pub mod units;

pub use http::{HttpFlags, HttpRequestFlags};
pub use load::{load_config, LoadFlags};
pub use output::{check_output, gate_exit, is_stdout, GateFlags, OutputFlags, RecordFlag};
pub use server::{server_config, ServerFlags};
pub use units::{
    bitrate, check_interval, duration, duration_or_ns, rate_or_bitrate, size, BITRATE, DURATION,
    RATE_OR_BITRATE, SIZE,
};

/// The values the run uses without the user having given them: flags left at their
/// default (`--resolution 5s`) and defaults a command derives from other flags, each with
/// what to say of it, shown when an error names it (`cli::errors::name_defaults`).
static DEFAULTS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Notes a value the run uses that the user did not give: `shown` as errors write it
/// (`--resolution 2s`), `why` what it is (`derived default: ...`).
pub fn note_default(shown: String, why: String) {
    DEFAULTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((shown, why));
}

/// The values noted by [`note_default`] so far: (as errors write it, what it is).
pub fn noted_defaults() -> Vec<(String, String)> {
    DEFAULTS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
