//! The terminal format: a record as people read it in a terminal (verdict and validity
//! first, then tables), into any `io::Write`. What a command prints is this rendering of
//! its record, so `tpslab report FILE` prints the same bytes again. Fitted to the width
//! [`fit::width`] says (the terminal's; full width when not a terminal).

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, Table};
use std::io::{self, Write};
use tpslab_record::{Body, Record};

pub mod bdp;
pub mod capacity;
pub mod compare;
mod diagnose;
pub mod doctor;
pub mod fit;
mod fleet;
pub mod history;
pub mod idle;
pub mod load_http;
mod load_http_quic;
mod ramp;
mod run;
mod safe;
mod sweep;
pub mod tcp;
pub mod thresholds;
pub mod waits;

pub use diagnose::print_diagnosis;
pub use ramp::{ramp_header, ramp_results};
pub use run::{print_record, print_server, serve_header};
pub use safe::{escaped, terminal_safe};
pub use sweep::{sweep_header, sweep_results};

/// A table with tpslab's borders, the first column left-aligned and the rest right, laid
/// out within the width now ([`fit::table`]).
pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    fit::table(&mut t);
    t.set_header(header.iter().map(Cell::new).collect::<Vec<_>>());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// "label (ENOBUFS x3, EAGAIN x1)", or the label alone without errors.
pub(super) fn with_errnos(label: &str, errors: &std::collections::BTreeMap<String, u64>) -> String {
    if errors.is_empty() {
        return label.to_string();
    }
    let list: Vec<String> = errors.iter().map(|(k, v)| format!("{k} x{v}")).collect();
    format!("{label} ({})", list.join(", "))
}

pub use crate::units::fmt_ns;

/// Renders any record: a UDP run or watch ([`print_record`]), a diagnosis
/// ([`print_diagnosis`]), ...; its tables and lines fitted to [`fit::width`].
pub fn record(w: &mut dyn Write, rec: &Record, explain: bool) -> io::Result<()> {
    let mut f = fit::Fitted::new(w, fit::width());
    record_of(&mut f, rec, explain)?;
    f.finish()
}

fn record_of(w: &mut dyn Write, rec: &Record, explain: bool) -> io::Result<()> {
    match &rec.body {
        Body::UdpRun(r) => print_record(w, r, explain),
        Body::Watch(r) => {
            // A watch has no load line to say what it looked at: this says it, and when.
            writeln!(
                w,
                "Watched {}, from {} for {:.1} s",
                match rec.target() {
                    t if t.is_empty() => "(target not recorded)".to_string(),
                    t => t,
                },
                crate::units::started(rec.meta.started_unix_ms),
                rec.meta.elapsed_s
            )?;
            print_record(w, r, explain)
        }
        Body::Ramp(r) => {
            ramp_header(w, &r.run.plan)?;
            ramp_results(w, r)
        }
        Body::Serve(s) => {
            serve_header(w, &s.server)?;
            print_server(w, &s.server, s.elapsed_s)
        }
        Body::Sweep(r) => {
            sweep_header(w, &r.plan, &r.out)?;
            sweep_results(w, r)
        }
        Body::Tcp(t) => tcp::record(w, t),
        Body::ServeTcp(s) => {
            tcp::serve_header(w, s)?;
            tcp::serve_end(w, s)
        }
        Body::Diagnose(d) => print_diagnosis(w, d, explain),
        Body::Doctor(d) => doctor::record(w, d),
        Body::Bdp(b) => bdp::record(w, b),
        Body::ProbeIdle(r) => idle::record(w, r),
        Body::ProbePool(r) => idle::pool_record(w, r),
        Body::LoadHttp(l) => {
            load_http::header(w, &l.plan)?;
            load_http::record(w, l, rec.meta.interrupted)
        }
        Body::Compare(c) => compare::record(w, c),
        Body::Capacity(c) => capacity::record(w, c, rec.meta.elapsed_s),
    }
}
