//! A comparison in HTML: what differs between the records, each figure with its change
//! against the first, and each figure's interval per record.

use super::others::{figure, intervals};
use super::plot::Chart;
use super::{Item, Page, Section};
use tpslab_record::compare::CompareReport;

/// compare: what differs first, then each figure per record with its 95 % interval and
/// the change against the first.
pub(super) fn page(p: &mut Page, c: &CompareReport) -> Result<(), String> {
    use crate::term::compare::{changes, letter};
    p.title = format!("tpslab compare: {} {} records", c.labels.len(), c.of_kind);
    let letters: Vec<String> = (0..c.labels.len()).map(letter).collect();
    let mut s = Section::new("What differs (settings, not results)");
    s.items.push(Item::Table {
        title: String::new(),
        header: vec!["record".into(), "file".into()],
        rows: c
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| vec![letters[i].clone(), l.clone()])
            .collect(),
    });
    let mut header = vec!["setting".to_string()];
    header.extend(letters.iter().cloned());
    s.items.push(if c.differences.is_empty() {
        Item::List {
            title: String::new(),
            items: vec![
                "nothing in the plan, the server's settings, the sysctls or the host".into(),
            ],
        }
    } else {
        Item::Table {
            title: String::new(),
            header,
            rows: c
                .differences
                .iter()
                .map(|d| {
                    std::iter::once(d.what.clone())
                        .chain(d.values.iter().cloned())
                        .collect()
                })
                .collect(),
        }
    });
    p.sections.push(s);
    let mut s = Section::new("Figures, and their change against A");
    s.note = Some(c.method.clone());
    let mut header = vec!["figure".to_string()];
    header.extend(letters.iter().cloned());
    for l in &letters[1..] {
        header.push(format!("{l} - A [95 % CI]"));
        header.push(format!("{l}: the change is"));
    }
    let rows = c
        .figures
        .iter()
        .map(|f| {
            let mut row = vec![f.name.clone()];
            row.extend(f.values.iter().map(|v| {
                v.map_or("-".into(), |e| {
                    if e.n < 2 {
                        format!("{:.3}", e.mean)
                    } else {
                        format!("{:.3} ± {:.3}", e.mean, e.stddev)
                    }
                })
            }));
            for (d, m) in changes(f) {
                row.push(d);
                row.push(m);
            }
            row
        })
        .collect();
    s.items.push(Item::Table {
        title: String::new(),
        header,
        rows,
    });
    p.sections.push(s);
    let mut s = Section::new("Each figure with its 95 % interval, per record");
    s.columns = 2;
    for (k, f) in c.figures.iter().enumerate() {
        if !f.values.iter().flatten().any(|e| e.interval().is_some()) {
            continue;
        }
        let mut ch = Chart::new(&format!("figure-{k}"), &f.name, "record (A = 0)", &f.name);
        intervals(
            &mut ch,
            &f.values,
            ("mean", &f.source),
            "Student t over the batches (or a sweep cell's repeats), within the figure's bounds",
        );
        s.items.push(figure(&ch));
    }
    if !s.items.is_empty() {
        p.sections.push(s);
    }
    if !c.notes.is_empty() {
        let mut s = Section::new("Notes");
        s.items.push(Item::List {
            title: String::new(),
            items: c.notes.clone(),
        });
        p.sections.push(s);
    }
    Ok(())
}
