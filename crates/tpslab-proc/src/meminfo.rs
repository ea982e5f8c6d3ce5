//! /proc/meminfo.

/// Parses `MemTotal` of /proc/meminfo, bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut f = line["MemTotal:".len()..].split_whitespace();
    let kb: u64 = f.next()?.parse().ok()?;
    (f.next() == Some("kB")).then(|| kb.saturating_mul(1024))
}
