//! A terminal report fitted to a width: each table laid out by comfy-table within it (its
//! cells wrapped, the widest columns first), each other line longer than it wrapped at a
//! space with a hanging indent ([`Fitted`]). No width (the default, and what the binary
//! sets when standard output is not a terminal): every line at its full length, the
//! bytes the report always had.
//!
//! The width is the process's ([`set_width`], once, by the binary: the terminal's columns)
//! unless a thread renders at its own ([`at_width`]: tests at 80 and 160 columns).

use comfy_table::{ColumnConstraint, ContentArrangement, Table, Width as ComfyWidth};
use std::cell::Cell;
use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The narrowest width a report is fitted to, columns (narrower is taken as this: a table
/// of eleven columns needs about this much for a character of each).
pub const MIN_WIDTH: usize = 40;

/// The process's width, columns; 0: none (full width).
static WIDTH: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's width while [`at_width`] runs: Some(None) full width.
    static SCOPED: Cell<Option<Option<usize>>> = const { Cell::new(None) };
}

/// Sets the width every report of the process is fitted to, columns (None: full width);
/// at least [`MIN_WIDTH`].
pub fn set_width(width: Option<usize>) {
    WIDTH.store(width.map_or(0, |w| w.max(MIN_WIDTH)), Relaxed);
}

/// The width reports are fitted to now on this thread, columns; None: full width.
pub fn width() -> Option<usize> {
    match SCOPED.with(Cell::get) {
        Some(w) => w.map(|w| w.max(MIN_WIDTH)),
        None => Some(WIDTH.load(Relaxed)).filter(|&w| w > 0),
    }
}

/// Runs `f` with this thread's reports fitted to `width` (None: full width), whatever the
/// process's width; the thread's width before is restored after.
pub fn at_width<T>(width: Option<usize>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Option<usize>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPED.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SCOPED.with(|s| s.replace(Some(width))));
    f()
}

/// `t` laid out within the width now ([`width`]): comfy-table's dynamic arrangement
/// (cells wrapped at spaces, a word longer than its column split); unchanged at full
/// width.
pub fn table(t: &mut Table) {
    if let Some(w) = width() {
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(u16::try_from(w).unwrap_or(u16::MAX));
    }
}

/// Writes `t` and a line feed, laid out within the width now: each column at least as
/// wide as its longest word (a number or a word is never split across lines; the rest of
/// a cell wraps at spaces), and when even that does not fit, columns left out, the
/// rightmost first (never the first), with a line after the table naming them. At full
/// width `t` as it is. Errors: the writer's.
pub fn put(w: &mut dyn Write, t: Table) -> io::Result<()> {
    let order: Vec<usize> = (1..t.column_iter().count()).rev().collect();
    put_dropping(w, t, &order)
}

/// [`put`], the columns left out first to last as `order` lists them (indices; columns
/// not in it are kept).
pub fn put_dropping(w: &mut dyn Write, mut t: Table, order: &[usize]) -> io::Result<()> {
    let Some(width) = width() else {
        return writeln!(w, "{t}");
    };
    let n = t.column_iter().count();
    let words: Vec<usize> = (0..n).map(|i| longest_word(&t, i)).collect();
    let header: Vec<String> = match t.header() {
        Some(h) => h
            .cell_iter()
            .map(|c| c.content().replace('\n', " "))
            .collect(),
        None => vec![],
    };
    // Each column: its content, a space either side, one between columns; two borders.
    let need = |shown: &[bool]| {
        1 + (0..n)
            .filter(|&i| shown[i])
            .map(|i| words[i] + 3)
            .sum::<usize>()
    };
    let mut shown = vec![true; n];
    let mut left_out = vec![];
    for &i in order {
        if need(&shown) <= width {
            break;
        }
        if i < n && shown[i] {
            shown[i] = false;
            left_out.push(
                header
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("#{}", i + 1)),
            );
        }
    }
    for (i, c) in t.column_iter_mut().enumerate() {
        let min = u16::try_from(words[i] + 2).unwrap_or(u16::MAX);
        c.set_constraint(match shown[i] {
            true => ColumnConstraint::LowerBoundary(ComfyWidth::Fixed(min)),
            false => ColumnConstraint::Hidden,
        });
    }
    writeln!(w, "{t}")?;
    if !left_out.is_empty() {
        writeln!(
            w,
            "(left out at {width} columns: {}; a wider terminal or a pipe shows them)",
            left_out.join(", ")
        )?;
    }
    Ok(())
}

/// The longest word (display cells between spaces or line feeds, [`cells`]) of column
/// `i`'s cells and header.
fn longest_word(t: &Table, i: usize) -> usize {
    let head = t
        .header()
        .and_then(|h| h.cell_iter().nth(i))
        .map(|c| c.content());
    t.column_cells_iter(i)
        .flatten()
        .map(|c| c.content())
        .chain(head)
        .flat_map(|s| s.split_whitespace().map(cells).collect::<Vec<_>>())
        .max()
        .unwrap_or(0)
}

/// The characters a table's line starts with (tpslab's `UTF8_BORDERS_ONLY` tables): such
/// lines are the table's own layout, never wrapped as text.
const TABLE_EDGES: &[char] = &['┌', '│', '└', '├', '╞', '╘', '╒', '╪', '┆'];

/// A writer that wraps each line longer than `width` columns (display cells) before passing
/// it on: at the last space that fits, continued with the line's own indent plus two
/// spaces; a word longer than the room is split. Lines of tables pass as they are. With
/// no width everything passes unchanged. Call [`Fitted::finish`] at the end (a last line
/// without a line feed).
pub struct Fitted<'a> {
    inner: &'a mut dyn Write,
    width: Option<usize>,
    line: Vec<u8>,
}

impl<'a> Fitted<'a> {
    /// A writer into `inner` fitting lines to `width` columns (None: unchanged).
    pub fn new(inner: &'a mut dyn Write, width: Option<usize>) -> Fitted<'a> {
        Fitted {
            inner,
            width,
            line: Vec::new(),
        }
    }

    /// Writes what is left of the last line. Errors: the writer's.
    pub fn finish(mut self) -> io::Result<()> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.put(&line)?;
        }
        self.inner.flush()
    }

    fn put(&mut self, line: &[u8]) -> io::Result<()> {
        let Some(w) = self.width else {
            return self.inner.write_all(line);
        };
        let text = String::from_utf8_lossy(line);
        let (body, end) = match text.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (&*text, ""),
        };
        self.inner.write_all(wrap(body, w).join("\n").as_bytes())?;
        self.inner.write_all(end.as_bytes())
    }
}

impl Write for Fitted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.width.is_none() {
            return self.inner.write(buf);
        }
        for &b in buf {
            self.line.push(b);
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.put(&line)?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Display cells `s` takes in a terminal (unicode-width: a CJK ideograph or an emoji 2, a
/// combining mark or a control character 0, other characters 1).
pub fn cells(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// Display cells of one character ([`cells`]).
fn char_cells(c: char) -> usize {
    unicode_width::UnicodeWidthChar::width(c).unwrap_or(0)
}

/// `line` (no line feed) as lines of at most `width` display cells ([`cells`]):
/// unchanged when it fits, is a table's, or `width` is 0 (no room to wrap into); else
/// broken at the last space that fits (a word longer than the room split between
/// characters), each piece after the first indented by the line's own indent plus two
/// spaces (at most half the width). Every piece holds at least one character, so a
/// character wider than the room (a CJK one at width 1) stands alone on its line.
pub fn wrap(line: &str, width: usize) -> Vec<String> {
    if width == 0 || cells(line) <= width || line.trim_start().starts_with(TABLE_EDGES) {
        return vec![line.to_string()];
    }
    let indent = line.len() - line.trim_start_matches(' ').len();
    // At most half the width: the room after it is at least 1.
    let hang = " ".repeat((indent + 2).min(width / 2));
    let mut out = vec![];
    let mut rest: Vec<char> = line.trim_end().chars().collect();
    let mut first = true;
    while !rest.is_empty() {
        let lead = if first { "" } else { hang.as_str() };
        let room = width - lead.len();
        let mut used = 0;
        let fit = rest
            .iter()
            .take_while(|&&c| {
                used += char_cells(c);
                used <= room
            })
            .count();
        if fit == rest.len() {
            out.push(format!("{lead}{}", rest.iter().collect::<String>()));
            break;
        }
        // The last space within the room (after any indent; one just past it too),
        // else split the word after the characters that fit (one at least).
        let start = if first { indent } else { 0 };
        let cut = (start + 1..=fit).rev().find(|&i| rest[i] == ' ');
        let (piece, skip) = match cut {
            Some(i) => (i, i + 1),
            None => (fit.max(1), fit.max(1)),
        };
        let head: String = rest[..piece].iter().collect();
        // A piece of the indent alone (a width narrower than it) is no line.
        if !head.trim().is_empty() {
            out.push(format!("{lead}{}", head.trim_end()));
        }
        rest.drain(..skip);
        let spaces = rest.iter().take_while(|&&c| c == ' ').count();
        rest.drain(..spaces);
        first = false;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_wraps_at_spaces_with_its_indent_and_two_more() {
        let line =
            "  verdict: the server socket's buffer overflowed during bursts, 2,000 datagrams";
        let got = wrap(line, 40);
        assert_eq!(
            got,
            [
                "  verdict: the server socket's buffer",
                "    overflowed during bursts, 2,000",
                "    datagrams"
            ]
        );
        assert!(got.iter().all(|l| l.chars().count() <= 40));
    }

    #[test]
    fn a_word_longer_than_the_room_is_split_and_tables_pass() {
        let path = format!("file {}", "x".repeat(50));
        let got = wrap(&path, 40);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got.iter().all(|l| l.chars().count() <= 40), "{got:?}");
        assert_eq!(got.concat().replace(' ', ""), path.replace(' ', ""));
        let row = format!("│ {} │", "y".repeat(60));
        assert_eq!(wrap(&row, 40), [row]);
    }

    #[test]
    fn widths_count_display_cells_and_every_width_ends() {
        // Ten CJK ideographs are 20 cells, 10 characters: wrapped at 12 cells.
        let cjk = "注意 缓冲区溢出了 数据报";
        assert_eq!(cells(cjk), 24);
        let got = wrap(cjk, 12);
        assert_eq!(got, ["注意", "  缓冲区溢出", "  了 数据报"]);
        assert!(got.iter().all(|l| cells(l) <= 12), "{got:?}");
        // An emoji is 2 cells: "ok 🚀🚀🚀🚀" is 11 characters' worth at 7 chars.
        let rocket = "ok 🚀🚀🚀🚀 done";
        let got = wrap(rocket, 8);
        assert!(got.iter().all(|l| cells(l) <= 8), "{got:?}");
        assert_eq!(got.concat().replace(' ', ""), rocket.replace(' ', ""));
        // Width 0: nothing to wrap into, the line as it is (it looped forever).
        assert_eq!(wrap("a line that is long", 0), ["a line that is long"]);
        // Width 1: a character a line, the wide one alone past it; indents ignored.
        assert_eq!(wrap("ab c", 1), ["a", "b", "c"]);
        assert_eq!(wrap("  x 注y", 1), ["x", "注", "y"]);
        for w in 0..12 {
            for line in [cjk, rocket, "    indented words here", "x"] {
                let got = wrap(line, w);
                assert_eq!(
                    got.concat().replace(' ', ""),
                    line.replace(' ', ""),
                    "{line:?} at {w}: {got:?}"
                );
            }
        }
    }

    #[test]
    fn fitted_wraps_only_with_a_width_and_keeps_a_last_line_without_feed() {
        let text = "short\nthis line is longer than twenty columns\nend";
        let mut full = Vec::new();
        let mut f = Fitted::new(&mut full, None);
        f.write_all(text.as_bytes()).unwrap();
        f.finish().unwrap();
        assert_eq!(String::from_utf8(full).unwrap(), text);
        let mut out = Vec::new();
        let mut f = Fitted::new(&mut out, Some(20));
        f.write_all(text.as_bytes()).unwrap();
        f.finish().unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "short\nthis line is longer\n  than twenty\n  columns\nend"
        );
    }

    #[test]
    fn a_threads_width_overrides_the_process_and_is_restored() {
        assert_eq!(at_width(Some(80), width), Some(80));
        assert_eq!(at_width(Some(10), width), Some(MIN_WIDTH));
        assert_eq!(at_width(None, || at_width(Some(90), width)), Some(90));
        assert_eq!(at_width(Some(90), || at_width(None, width)), None);
    }
}
