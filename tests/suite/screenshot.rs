//! The README's screenshot of `--live` (docs/live-view.png) against the tmux capture it was
//! made from (docs/live-view.ansi, kept by docs/transcripts/live-screenshot.sh), cell for
//! cell (issue 60): a picture whose font pushed a row (braille from a fallback font of
//! another width), spilled text out of its box or drew a ragged border is refused.
//!
//! The capture's cells (character, colours as drawn) come from the script that drew the
//! page (`ansi_grid.py --cells`). The grid is measured in the picture, not assumed: the ink
//! of every vertical border glyph against its column and of every horizontal one against
//! its row, fitted by least squares (a border glyph more than 1.5 px off its line is a
//! ragged edge). Then each cell is read inside its box, 1 px in from each side: a
//! character with ink must have pixels off its background there, a blank cell none.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const COLS: usize = 120;
const ROWS: usize = 36;
/// Where to look for the border glyphs: the page's nominal grid (ansi_grid.py: a 4 px
/// margin, 14 px DejaVu Sans Mono, cells 1ch wide and 1.2em high), px.
const NOMINAL: (f64, f64, f64, f64) = (4.0, 4.0, 8.43, 16.8);
/// How far off its background a pixel is to count as ink (sum of the RGB differences).
const INK: u32 = 150;

#[derive(Clone)]
struct Cell {
    ch: char,
    fg: [u8; 3],
    bg: [u8; 3],
}

struct Picture {
    width: usize,
    height: usize,
    px: Vec<[u8; 3]>,
}

impl Picture {
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.px[y * self.width + x]
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn picture(path: &Path) -> Picture {
    let dec = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(path).expect("the screenshot"),
    ));
    let mut reader = dec.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "{}", path.display());
    let n = info.color_type.samples();
    assert!(n >= 3, "{}: not RGB", path.display());
    let px = buf[..info.buffer_size()]
        .chunks(n)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    Picture {
        width: info.width as usize,
        height: info.height as usize,
        px,
    }
}

fn rgb(v: &Value) -> [u8; 3] {
    let s = v.as_str().expect("#rrggbb");
    let h = |i: usize| u8::from_str_radix(&s[i..i + 2], 16).expect("hex");
    [h(1), h(3), h(5)]
}

/// The capture's cells as drawn, ROWS x COLS (blank past a line's end).
fn grid(ansi: &Path) -> Vec<Vec<Cell>> {
    let out = Command::new("python3")
        .arg(root().join("docs/transcripts/ansi_grid.py"))
        .arg("--cells")
        .arg(ansi)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON cells");
    let blank = Cell {
        ch: ' ',
        fg: rgb(&v["fg"]),
        bg: rgb(&v["bg"]),
    };
    let mut rows: Vec<Vec<Cell>> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .take(ROWS)
        .map(|r| {
            let mut row: Vec<Cell> = r
                .as_array()
                .unwrap()
                .iter()
                .map(|c| Cell {
                    ch: c[0].as_str().unwrap().chars().next().unwrap_or(' '),
                    fg: rgb(&c[1]),
                    bg: rgb(&c[2]),
                })
                .collect();
            row.resize(COLS, blank.clone());
            row.truncate(COLS);
            row
        })
        .collect();
    rows.resize(ROWS, vec![blank; COLS]);
    rows
}

fn off(a: [u8; 3], b: [u8; 3]) -> u32 {
    a.iter().zip(b).map(|(&x, y)| x.abs_diff(y) as u32).sum()
}

fn blank(ch: char) -> bool {
    ch == ' ' || ch == '\u{2800}'
}

/// Pixels of the box [x0, x1) x [y0, y1) (clipped to the picture) far off `bg`.
fn inked(p: &Picture, (x0, x1, y0, y1): (f64, f64, f64, f64), bg: [u8; 3]) -> Vec<(usize, usize)> {
    let clip = |v: f64, max: usize| (v.max(0.0) as usize).min(max);
    let (x0, x1) = (clip(x0, p.width), clip(x1, p.width));
    let (y0, y1) = (clip(y0, p.height), clip(y1, p.height));
    let mut v = vec![];
    for y in y0..y1 {
        for x in x0..x1 {
            if off(p.at(x, y), bg) > INK {
                v.push((x, y));
            }
        }
    }
    v
}

/// Pixels of the box (clipped to the picture) within [`INK`] of the colour `fg`.
fn glyph(p: &Picture, (x0, x1, y0, y1): (f64, f64, f64, f64), fg: [u8; 3]) -> Vec<(usize, usize)> {
    let clip = |v: f64, max: usize| (v.max(0.0) as usize).min(max);
    let mut v = vec![];
    for y in clip(y0, p.height)..clip(y1, p.height) {
        for x in clip(x0, p.width)..clip(x1, p.width) {
            if off(p.at(x, y), fg) < INK {
                v.push((x, y));
            }
        }
    }
    v
}

/// Least squares v = a + b*u.
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mu = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mv = points.iter().map(|p| p.1).sum::<f64>() / n;
    let suu: f64 = points.iter().map(|p| (p.0 - mu).powi(2)).sum();
    let b = points.iter().map(|p| (p.0 - mu) * (p.1 - mv)).sum::<f64>() / suu;
    (mv - b * mu, b)
}

/// The picture against the capture: Ok((cells agreeing, cells compared)) when no border
/// glyph is off its fitted line and at least 99.5 % of the cells agree, else the problems.
fn compare(p: &Picture, g: &[Vec<Cell>]) -> Result<(usize, usize), Vec<String>> {
    let (x0, y0, w0, h0) = NOMINAL;
    // (column or row, ink centre, the other coordinate) of each border glyph.
    let (mut vert, mut horiz) = (vec![], vec![]);
    for (r, row) in g.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            let (cx, cy) = (x0 + c as f64 * w0, y0 + r as f64 * h0);
            let (vertical, axis_box) = match cell.ch {
                '│' | '┃' | '║' => (true, (cx, cx + w0, cy + 0.3 * h0, cy + 0.7 * h0)),
                '─' | '━' | '═' => (false, (cx + 0.3 * w0, cx + 0.7 * w0, cy, cy + h0)),
                _ => continue,
            };
            // The glyph's own pixels: near its colour (a neighbour's chart dots are not).
            let ink = glyph(p, axis_box, cell.fg);
            if ink.is_empty() {
                continue;
            }
            let n = ink.len() as f64;
            if vertical {
                let m = ink.iter().map(|&(x, _)| x as f64).sum::<f64>() / n;
                vert.push((c as f64, m, r));
            } else {
                let m = ink.iter().map(|&(_, y)| y as f64).sum::<f64>() / n;
                horiz.push((r as f64, m, c));
            }
        }
    }
    if vert.len() < 10 || horiz.len() < 10 {
        return Err(vec![format!(
            "only {} vertical and {} horizontal border glyphs found where the capture has them",
            vert.len(),
            horiz.len()
        )]);
    }
    let pts = |v: &[(f64, f64, usize)]| v.iter().map(|&(u, m, _)| (u, m)).collect::<Vec<_>>();
    let ((ax, w), (ay, h)) = (fit(&pts(&vert)), fit(&pts(&horiz)));
    eprintln!(
        "grid: x = {ax:.2} + {w:.3} c, y = {ay:.2} + {h:.3} r ({} and {} border glyphs)",
        vert.len(),
        horiz.len()
    );
    let mut problems = vec![];
    for &(c, m, r) in &vert {
        let d = m - (ax + w * c);
        if d.abs() > 1.5 {
            problems.push(format!(
                "row {}: the border in column {} is {d:+.1} px off its line",
                r + 1,
                c + 1.0
            ));
        }
    }
    for &(r, m, c) in &horiz {
        let d = m - (ay + h * r);
        if d.abs() > 1.5 {
            problems.push(format!(
                "column {}: the border in row {} is {d:+.1} px off its line",
                c + 1,
                r + 1.0
            ));
        }
    }
    // A cell's box from the fit: its centre at (ax + w*c, ay + h*r).
    let (left, top) = (ax - w / 2.0, ay - h / 2.0);
    let (mut agree, mut total, mut bad) = (0, 0, vec![]);
    for (r, row) in g.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            if !blank(cell.ch) && off(cell.fg, cell.bg) <= INK {
                continue; // ink the colour of its background: nothing to see
            }
            let (bx, by) = (left + w * c as f64, top + h * r as f64);
            let cell_box = (bx.ceil(), (bx + w).floor(), by.ceil(), (by + h).floor());
            let has_ink = !inked(p, cell_box, cell.bg).is_empty();
            total += 1;
            if has_ink != blank(cell.ch) {
                agree += 1;
            } else if bad.len() < 8 {
                let what = if has_ink { "has ink" } else { "is drawn blank" };
                bad.push(format!(
                    "row {} column {} ({:?}) {what}",
                    r + 1,
                    c + 1,
                    cell.ch
                ));
            }
        }
    }
    if (agree as f64) < 0.995 * total as f64 {
        problems.push(format!(
            "{} of {total} cells differ from the capture: {}",
            total - agree,
            bad.join("; ")
        ));
    }
    if problems.is_empty() {
        Ok((agree, total))
    } else {
        Err(problems)
    }
}

#[test]
fn the_readmes_screenshot_shows_its_capture_cell_for_cell() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.contains("(docs/live-view.png)"),
        "the README shows the screenshot"
    );
    let pic = picture(&root().join("docs/live-view.png"));
    let g = grid(&root().join("docs/live-view.ansi"));
    let (agree, total) = compare(&pic, &g).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    eprintln!("docs/live-view.png: {agree} of {total} cells as captured, borders straight");
    assert!(total > COLS * ROWS / 2, "{total} cells compared");

    // The check refuses what it exists to: the capture one column to the right of the
    // picture, one row down, and one row of the picture pushed by half a cell (what a
    // fallback font of another width did to the first screenshot).
    let right: Vec<Vec<Cell>> = g
        .iter()
        .map(|row| {
            let mut r = vec![row[0].clone()];
            r.extend(row[..COLS - 1].iter().cloned());
            r.iter_mut().take(1).for_each(|c| c.ch = ' ');
            r
        })
        .collect();
    assert!(
        compare(&pic, &right).is_err(),
        "a capture one column off passed"
    );
    let mut down = vec![g[0].clone()];
    down.extend(g[..ROWS - 1].iter().cloned());
    assert!(
        compare(&pic, &down).is_err(),
        "a capture one row off passed"
    );
    let row = (0..ROWS)
        .find(|&r| g[r].iter().filter(|c| c.ch == '│').count() >= 2)
        .expect("a row with borders");
    let mut pushed = Picture {
        width: pic.width,
        height: pic.height,
        px: pic.px.clone(),
    };
    let (_, y0, _, h0) = NOMINAL;
    let (ya, yb) = (
        (y0 + row as f64 * h0) as usize,
        (y0 + (row + 1) as f64 * h0) as usize,
    );
    for y in ya..yb {
        let line = &mut pushed.px[y * pic.width..(y + 1) * pic.width];
        line.rotate_right(4);
    }
    let p = compare(&pushed, &g).expect_err("a row pushed by half a cell passed");
    assert!(
        p.iter()
            .any(|l| l.contains(&format!("row {}: the border", row + 1))),
        "{p:?}"
    );
}
