//! Flags shared by several commands, one group per module: the kinds of value
//! ([`units`]), the reference server's ([`server`]), a load's ([`load`]), the outputs and
//! the exit-code gates ([`output`]); each group with its conversion into a validated plan.

mod load;
mod output;
mod server;
pub(crate) mod units;

pub(crate) use load::{load_config, read_payload_file, LoadFlags};
pub(crate) use output::{gate_exit, GateFlags, OutputFlags, RecordFlag};
pub(crate) use server::{server_config, ServerFlags};
pub(crate) use units::{
    bitrate, check_interval, duration, duration_or_ns, rate_or_bitrate, size, BITRATE, DURATION,
    RATE_OR_BITRATE, SIZE,
};
