//! A comparison in a terminal: what differs between the records first, then each figure
//! with its spread and its change against the first record, and whether that change is
//! distinguishable from noise.

use super::table;
use std::io::{self, Write};
use tpslab_record::compare::{CompareReport, FigureRow};
use tpslab_record::estimate::Estimate;

/// Letters naming the records in tables: A, B, C ...
pub fn letter(i: usize) -> String {
    if i < 26 {
        ((b'A' + i as u8) as char).to_string()
    } else {
        format!("R{}", i + 1)
    }
}

/// A figure as shown; "-" for one that is not a number (a `null` read back as NaN).
fn num(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        "-".into()
    } else if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

fn value(e: &Option<Estimate>) -> String {
    match e {
        None => "-".into(),
        Some(e) if e.n < 2 => num(e.mean),
        Some(e) => format!("{} ± {}", num(e.mean), num(e.stddev)),
    }
}

/// "B - A" cells: the difference with its interval and what it means, per later record.
pub fn changes(f: &FigureRow) -> Vec<(String, String)> {
    f.effects
        .iter()
        .map(|e| match e {
            None => ("-".into(), "missing on one side".into()),
            Some(e) if !e.diff.is_finite() => ("-".into(), "no difference recorded".into()),
            Some(e) if !e.ci_lo.is_finite() => (
                format!("{:+}", num(e.diff)),
                "one value each: no test".into(),
            ),
            Some(e) => (
                format!("{:+} [{}, {}]", num(e.diff), num(e.ci_lo), num(e.ci_hi)),
                if e.significant {
                    "distinguishable from noise".into()
                } else {
                    "within noise".into()
                },
            ),
        })
        .collect()
}

/// Prints a comparison.
pub fn record(w: &mut dyn Write, c: &CompareReport) -> io::Result<()> {
    writeln!(
        w,
        "tpslab compare: {} {} records",
        c.labels.len(),
        c.of_kind
    )?;
    for (i, l) in c.labels.iter().enumerate() {
        writeln!(w, "  {} = {l}", letter(i))?;
    }
    writeln!(w)?;
    let letters: Vec<String> = (0..c.labels.len()).map(letter).collect();
    if c.differences.is_empty() {
        writeln!(
            w,
            "What differs: nothing in the plan, the server's settings, the sysctls or the host."
        )?;
    } else {
        writeln!(w, "What differs (settings, not results):")?;
        let mut h = vec!["setting"];
        h.extend(letters.iter().map(String::as_str));
        let mut t = table(&h);
        for d in &c.differences {
            let mut row = vec![d.what.clone()];
            row.extend(d.values.iter().cloned());
            t.add_row(row);
        }
        crate::term::fit::put(w, t)?;
    }
    writeln!(w)?;
    writeln!(
        w,
        "Figures (mean ± stddev; change against A with its 95 % interval):"
    )?;
    let mut h: Vec<String> = vec!["figure".into()];
    h.extend(letters.iter().cloned());
    for l in &letters[1..] {
        h.push(format!("{l} - A"));
        h.push(format!("{l}: the change is"));
    }
    let hs: Vec<&str> = h.iter().map(String::as_str).collect();
    let mut t = table(&hs);
    for f in &c.figures {
        let mut row = vec![f.name.clone()];
        row.extend(f.values.iter().map(value));
        for (d, m) in changes(f) {
            row.push(d);
            row.push(m);
        }
        t.add_row(row);
    }
    crate::term::fit::put(w, t)?;
    writeln!(w, "Method: {}.", c.method)?;
    for n in &c.notes {
        writeln!(w, "Note: {n}")?;
    }
    Ok(())
}
