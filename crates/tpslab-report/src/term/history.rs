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
    crate::term::fit::put(w, t)?;
    writeln!(w, "{} run(s) from {from}", rows.len())
}

#[cfg(test)]
mod tests {
    use super::{list, Listed};
    use crate::term::fit::at_width;

    /// Two runs as `tpslab history` lists them (headlines as the history stores them).
    fn rows() -> [Listed<'static>; 2] {
        [
            Listed {
                id: 41,
                started: "2026-11-23 21:42:38",
                kind: "capacity",
                target: "127.0.0.1:39704",
                interrupted: false,
                headline: "sustains 4,625 pps (4,625 passes 2/2; 4,750 fails 2/2: loss 2.5 % > 0.10 %); first to give: the application (too slow for the mean rate)",
            },
            Listed {
                id: 42,
                started: "2026-11-23 21:44:02",
                kind: "diagnose",
                target: "",
                interrupted: true,
                headline: "The server socket's receive buffer (SO_RCVBUF 212992 B) overflowed during bursts: 10,000 datagrams died at the socket buffer",
            },
        ]
    }

    fn listed(width: Option<usize>) -> String {
        let mut out = Vec::new();
        at_width(width, || {
            list(
                &mut out,
                &rows(),
                "/root/.local/share/tpslab/history.sqlite",
            )
        })
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_list_fits_the_width_with_every_word_and_is_whole_when_piped() {
        for w in [80, 160] {
            let text = listed(Some(w));
            let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > w).collect();
            assert!(wide.is_empty(), "at {w}: {wide:?}\n{text}");
            // Every word of each headline is there (cells wrap, nothing is cut).
            let words: String = text.replace(['│', '\n'], " ");
            for r in rows() {
                for word in r.headline.split(' ') {
                    assert!(words.contains(word), "at {w}: {word:?} missing\n{text}");
                }
            }
        }
        // Full width: one line per run, as long as it takes.
        let full = listed(None);
        assert!(full.lines().any(|l| l.chars().count() > 160), "{full}");
        assert_eq!(full.lines().count(), 7, "{full}");
    }
}
