//! Helpers of this crate's integration tests.

/// Says why a test is skipped and counts it in the suite's skip list
/// (`TPSLAB_SKIP_LIST`, else target/tmp/tpslab-skipped.txt), like the workspace's
/// integration tests: `engine::MODULE::TEST: WHY`, the test named by libtest's name of its
/// thread.
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let why = format!("engine::{test}: {why}");
    eprintln!("skipping {why}");
    let list = std::env::var_os("TPSLAB_SKIP_LIST").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tpslab-skipped.txt"),
        std::path::PathBuf::from,
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(list)
    {
        let _ = std::io::Write::write_all(&mut f, format!("{why}\n").as_bytes());
    }
}
