//! Helpers of this crate's integration tests.

/// Says why a test is skipped and counts it in the suite's skip list
/// (`TPSLAB_SKIP_LIST`, else target/tmp/tpslab-skipped.txt), like the workspace's
/// integration tests.
pub fn skip(why: &str) {
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
