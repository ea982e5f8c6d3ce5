//! What the live view's snapshot tests share: the recorded inputs in `testdata/live/` (see
//! its README), a view drawn into ratatui's TestBackend as text, and the comparison with
//! the saved screens (`BLESS_LIVE=1` writes them again; read the diff).

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tpslab_report::live::LiveFrame;

/// The text of `testdata/live/NAME`. Panics naming the file when it cannot be read.
pub fn data(name: &str) -> String {
    let p = format!("{}/testdata/live/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// The lines of a recorded `--json-stream` file, each read as the view reads one.
pub fn frames(name: &str) -> Vec<LiveFrame> {
    data(name)
        .lines()
        .map(|l| LiveFrame::from_line(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect()
}

/// The screen `draw` makes on a `w` x `h` terminal, a line of text per row (trailing
/// blanks cut).
pub fn screen(w: u16, h: u16, draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(draw).unwrap();
    let buf = t.backend().buffer().clone();
    let mut s = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

/// Checks `got` against the saved screen `testdata/live/FILE` (with `BLESS_LIVE` set,
/// writes it instead). Panics at the first line that differs.
pub fn assert_screen(got: &str, file: &str) {
    let p = format!("{}/testdata/live/{file}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("BLESS_LIVE").is_some() {
        std::fs::write(&p, got).unwrap();
        return;
    }
    let want = data(file);
    if got != want {
        let n = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{file}: differs at line {}:\n  want: {:?}\n  got:  {:?}\n{got}",
            n + 1,
            want.lines().nth(n),
            got.lines().nth(n)
        );
    }
}
