//! The HTML format: one self-contained page per record for people to look at, the
//! verdict and its evidence first, then plots of what was measured, each series named
//! with its source counter. It opens offline: the plots are SVG drawn by plotters
//! (inline, no font read or embedded), the style and a small self-check script are
//! inline, and a Content-Security-Policy forbids loading anything else. The page ends
//! with the terminal report, so nothing the terminal says is missing.
//!
//! The page is a minijinja template (`page.html`, HTML-escaped) over a `Page` built per
//! kind in `kinds`.

use serde::Serialize;
use std::io::{self, Write};
use tpslab_record::{Meta, Record};

pub use crate::units::{started, utc};

mod compare;
mod kinds;
mod load_http;
mod others;
pub(crate) mod plot;

use plot::Figure;

const TEMPLATE: &str = include_str!("page.html");

/// The verdict box.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Verdict {
    /// "VERDICT", "RUN INVALID", ...
    pub label: String,
    pub headline: String,
    pub detail: Option<String>,
    /// (text, source).
    pub evidence: Vec<Evidence>,
    pub recommendations: Vec<Advice>,
    /// Nothing is wrong (a green box).
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Evidence {
    pub text: String,
    pub source: String,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Advice {
    pub what: String,
    pub why: String,
    pub lines: Vec<String>,
}

/// One segment of a bar.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Segment {
    pub label: String,
    pub value_text: String,
    pub source: String,
    /// Share of the bar, % (0..=100).
    pub width: f64,
    pub colour: String,
}

/// A bar split into segments (a ledger path, a CPU's time).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Bar {
    pub label: String,
    pub total_text: String,
    pub segments: Vec<Segment>,
}

/// One item of a section.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Item {
    Figure(Figure),
    Bars {
        id: String,
        title: String,
        bars: Vec<Bar>,
    },
    Table {
        title: String,
        header: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    List {
        title: String,
        items: Vec<String>,
    },
}

/// A titled part of the page; its items in one or two columns (before | after).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Section {
    pub title: String,
    pub note: Option<String>,
    pub columns: usize,
    pub items: Vec<Item>,
}

impl Section {
    pub(crate) fn new(title: &str) -> Section {
        Section {
            title: title.into(),
            note: None,
            columns: 1,
            items: vec![],
        }
    }
}

/// Everything the template shows.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Page {
    pub title: String,
    pub kind: String,
    pub meta: Meta,
    pub started: String,
    /// What the command was aimed at ([`Record::target`]).
    pub target: String,
    pub elapsed: String,
    pub command: String,
    pub alerts: Vec<String>,
    pub verdict: Option<Verdict>,
    pub sections: Vec<Section>,
    /// The terminal report.
    pub text: String,
}

/// Renders `rec` as one HTML page into `w`. Errors: a plot that cannot be drawn or a
/// failed write (io::Error).
pub fn record(w: &mut dyn Write, rec: &Record) -> io::Result<()> {
    let page = page(rec)?;
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_formatter(no_controls);
    env.add_template("page.html", TEMPLATE)
        .map_err(|e| io::Error::other(format!("the HTML template: {e}")))?;
    let html = env
        .get_template("page.html")
        .and_then(|t| t.render(minijinja::value::Serde(&page)))
        .map_err(|e| io::Error::other(format!("rendering the HTML report: {e}")))?;
    w.write_all(html.as_bytes())
}

/// The template's formatter: every string is HTML-escaped as minijinja's default does,
/// after its control characters (ESC, BEL, CR, NUL, C1) and the Unicode line, paragraph
/// and bidirectional-override characters (U+202A..U+202E, U+2066..U+2069, which reorder
/// what a reader sees) are shown escaped (`\u{1b}`): strings come from records, which may
/// come from another host or user. Line feeds and tabs stay (the `<pre>` of the terminal
/// report). The plots' SVG (marked safe) is passed through the same filter and stays safe.
fn no_controls(
    out: &mut minijinja::Output,
    state: &mut minijinja::State,
    value: &minijinja::Value,
) -> Result<(), minijinja::Error> {
    use minijinja::Value;
    let Some(s) = value.as_str().filter(|s| s.chars().any(unsafe_char)) else {
        return minijinja::escape_formatter(out, state, value);
    };
    let clean = visible(s);
    let v = if value.is_safe() {
        Value::from_safe_string(clean)
    } else {
        Value::from(clean)
    };
    minijinja::escape_formatter(out, state, &v)
}

/// A character that must not reach the page raw: a control (but line feed and tab), a
/// Unicode line or paragraph separator, a bidirectional embedding, override or isolate.
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with each [`unsafe_char`] written as its escape (`\u{202e}`).
fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// The page of a record.
pub(crate) fn page(rec: &Record) -> io::Result<Page> {
    let mut text = Vec::new();
    // The page's copy of the report whole, whatever terminal the command runs in.
    crate::term::fit::at_width(None, || crate::term::record(&mut text, rec, true))?;
    let m = &rec.meta;
    let mut p = Page {
        title: format!("tpslab {}", rec.kind().replace('_', " ")),
        kind: rec.kind().into(),
        meta: m.clone(),
        started: started(m.started_unix_ms),
        target: rec.target(),
        elapsed: format!("{:.1} s", m.elapsed_s),
        command: m
            .argv
            .iter()
            .enumerate()
            .map(|(i, a)| if i == 0 { "tpslab".into() } else { a.clone() })
            .collect::<Vec<_>>()
            .join(" "),
        alerts: vec![],
        verdict: None,
        sections: vec![],
        text: String::from_utf8_lossy(&text).into_owned(),
    };
    kinds::fill(&mut p, rec).map_err(io::Error::other)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    /// A record's strings (its command line here, shown in the header and in the
    /// terminal report at the end) reach the page with their control and bidirectional
    /// characters escaped: no raw ESC (a terminal sequence when the page is `cat`), BEL,
    /// CR or U+202E (which reverses what a reader sees) is left in the HTML.
    #[test]
    fn a_records_control_and_bidi_characters_reach_the_page_escaped() {
        let text = include_str!("../../tests/fixtures/bdp.json");
        let mut rec = tpslab_record::Record::from_json(text).unwrap();
        rec.meta.argv = vec![
            "tpslab".into(),
            "bdp".into(),
            "\u{1b}]52;c;aGk=\u{7}\u{1b}[31mred\rx\u{202e}fdp.exe".into(),
        ];
        let mut out = Vec::new();
        super::record(&mut out, &rec).unwrap();
        let html = String::from_utf8(out).unwrap();
        for raw in ['\u{1b}', '\u{7}', '\r', '\u{202e}'] {
            assert!(!html.contains(raw), "{raw:?} raw in the page");
        }
        assert!(html.contains("\\u{1b}]52;c;aGk=\\u{7}"), "the escape shown");
        assert!(html.contains("x\\u{202e}fdp.exe"), "the override shown");
        // Line feeds stay: the terminal report keeps its lines.
        assert!(html.matches('\n').count() > 20);
    }
}
