//! `tpslab history`'s list in a terminal: one row per stored run, then where they are kept.

use std::io::{self, Write};

/// One stored run as `history` lists it.
#[derive(Debug, Clone, Copy)]
pub struct Listed<'a> {
    /// Its id in the history.
    pub id: i64,
    /// When it started, as shown (UTC to the second, or `not recorded`).
    pub started: &'a str,
    /// The record's kind.
    pub kind: &'a str,
    /// The record's target (empty: none, shown `-`).
    pub target: &'a str,
    /// Whether it was interrupted.
    pub interrupted: bool,
    /// The first line of what it found.
    pub headline: &'a str,
}

/// The table of `rows` (id, start, kind, target, what it found) and the line saying how
/// many runs came from the database at `from`.
pub fn list(w: &mut dyn Write, rows: &[Listed], from: &str) -> io::Result<()> {
    let mut t = super::table(&["id", "started (UTC)", "kind", "target", "found"]);
    for i in 1..5 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Left);
        }
    }
    for r in rows {
        t.add_row(vec![
            r.id.to_string(),
            r.started.to_string(),
            r.kind.to_string(),
            if r.target.is_empty() {
                "-".into()
            } else {
                r.target.to_string()
            },
            format!(
                "{}{}",
                if r.interrupted { "(interrupted) " } else { "" },
                r.headline
            ),
        ]);
    }
    writeln!(w, "{t}")?;
    writeln!(w, "{} run(s) from {from}", rows.len())
}
