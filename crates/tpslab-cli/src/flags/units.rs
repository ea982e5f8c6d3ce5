//! The kinds of value a flag takes (a size, a packet rate, a bit rate, a duration): one
//! parser each, labelled with the flag, so every flag of a kind takes the same forms and
//! refuses with the same line; and the values several commands read alike (CPU lists,
//! `--work`, the sampling interval).

use anyhow::Result;
use std::time::Duration;
use tpslab_plan::limits;
use tpslab_plan::units;

/// The clap value parser of one kind of value: the kind's one parser in
/// [`tpslab_plan::units`], labelled with the flag it reads (`--rcvbuf`), so every flag of
/// the kind takes the same forms and refuses with the same line, `--FLAG VALUE: allowed
/// FORMS` (printed by `cli` as tpslab's one-line error). Each flag of a kind carries the
/// kind's value name ([`SIZE`], [`RATE`], [`BITRATE`], [`DURATION`]), which `--help` shows
/// and the command-line table test checks.
#[derive(Clone, Copy)]
pub struct Unit<T: Clone + Send + Sync + 'static>(
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
pub const SIZE: &str = "SIZE";
/// The value name of a packet-rate flag (`10000`, `10k`, `1.5M`, `100kpps`, `max`).
pub const RATE: &str = "RATE";
/// The value name of a bit-rate flag (`80mbit`, `1gbit`, `10MB/s`).
pub const BITRATE: &str = "BITRATE";
/// The value name of a duration flag (`200us`, `10ms`, `1.5s`, `1m`).
pub const DURATION: &str = "DURATION";

/// The value name of a rate flag whose kind another flag chooses (doctor's `--rate`: pps
/// with `--for udp`, bits/s with `--for tcp`).
pub const RATE_OR_BITRATE: &str = "RATE|BITRATE";

/// The parser of a [`RATE_OR_BITRATE`] flag: a value one of the two kinds reads, kept as
/// written for the command to read with the kind it chooses; refused naming both kinds.
pub fn rate_or_bitrate() -> Unit<String> {
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
pub fn size() -> Unit<u64> {
    Unit(units::parse_size)
}

/// A packet-rate flag's parser: datagrams per second, infinity for `max`
/// ([`units::parse_pps`]).
pub fn rate() -> Unit<f64> {
    Unit(units::parse_pps)
}

/// A bit-rate flag's parser: bits per second ([`units::parse_rate`]).
pub fn bitrate() -> Unit<f64> {
    Unit(units::parse_rate)
}

/// A duration flag's parser ([`units::parse_duration`]).
pub fn duration() -> Unit<Duration> {
    Unit(units::parse_duration)
}

/// `--pacing-slack`'s parser: `auto`, `0` or a duration ([`tpslab_plan::udp::parse_pacing_slack`]).
pub fn pacing_slack() -> Unit<tpslab_plan::udp::PacingSlack> {
    Unit(tpslab_plan::udp::parse_pacing_slack)
}

/// The value of a hidden `--X-ns` flag (the previous names of `--work` and `--serial`):
/// plain nanoseconds (`20000`) or a duration (`20us`).
pub fn duration_or_ns(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<u64>() {
        Ok(n) => Ok(Duration::from_nanos(n)),
        Err(_) => humantime::parse_duration(s)
            .map_err(|e| format!("{e}; allowed nanoseconds (20000) or a duration (20us)")),
    }
}

/// Parses a CPU list ("0-1,3") or "all" (every online CPU) and checks the CPUs exist.
pub fn parse_cpus(flag: &str, s: &str) -> Result<Vec<usize>> {
    Ok(tpslab_plan::units::parse_cpus(
        flag,
        s,
        tpslab_net::online_cpus(),
    )?)
}

/// Checks a sampling `--interval` against [`limits::SAMPLE_INTERVAL`].
pub fn check_interval(iv: Duration) -> Result<()> {
    limits::SAMPLE_INTERVAL.check("--interval", iv)?;
    Ok(())
}
