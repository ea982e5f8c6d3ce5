//! The host guard against the real kernel (root): a sysctl write the kernel refuses
//! restores what was already written and raises no false "changed since" alarm; a value
//! written with a leading zero is journaled as the number the kernel read.

use crate::common;

use tpslab_engine::host::guard::HostGuard;

fn read(name: &str) -> String {
    tpslab_engine::host::env::read_sysctl(name).expect("readable sysctl")
}

fn root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

#[test]
fn refused_write_restores_the_rest_without_a_false_alarm() {
    if !root() {
        common::skip("needs root");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tpslab-guard-it-{}", std::process::id()));
    std::env::set_var("TPSLAB_STATE_DIR", &dir);
    let max0 = read("net.core.rmem_max");
    let def0 = read("net.core.rmem_default");
    let bumped = (max0.parse::<u64>().unwrap() + 4096).to_string();
    // rmem_default is an int: 2^32 does not fit, the kernel refuses it (EINVAL).
    let r = HostGuard::apply(&[
        ("net.core.rmem_max".into(), bumped),
        ("net.core.rmem_default".into(), "4294967296".into()),
    ]);
    let err = r
        .err()
        .expect("the kernel refuses 2^32 for an int sysctl")
        .to_string();
    assert!(err.contains("net.core.rmem_default=4294967296"), "{err}");
    // Only rmem_max was written, and only it is restored: no "changed since" for the
    // write that never happened.
    assert!(!err.contains("not restored"), "{err}");
    assert_eq!(read("net.core.rmem_max"), max0, "rmem_max not restored");
    assert_eq!(read("net.core.rmem_default"), def0);
    assert!(
        !dir.join("host-settings-journal.json").exists(),
        "journal left behind"
    );

    // Octal as the kernel reads it (a leading 0): written as that number in decimal,
    // journaled and compared as such, restored.
    let want = max0.parse::<u64>().unwrap() + 8192;
    let mut g = HostGuard::apply(&[("net.core.rmem_max".into(), format!("0{want:o}"))])
        .expect("apply an octal value");
    assert_eq!(read("net.core.rmem_max"), want.to_string());
    let done = g.restore();
    assert!(done.skipped.is_empty(), "{:?}", done.skipped);
    assert_eq!(read("net.core.rmem_max"), max0);
    let _ = std::fs::remove_dir_all(&dir);
}
