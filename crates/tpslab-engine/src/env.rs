//! Facts about the host for the run record.

use std::collections::BTreeMap;
use tpslab_analysis::record::Environment;

/// Sysctls that bear on UDP loss, recorded with every run.
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.ipv4.udp_mem",
    "net.ipv4.udp_rmem_min",
];

/// Reads a sysctl by its dotted name from /proc/sys; None when absent.
pub fn read_sysctl(name: &str) -> Option<String> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    Some(
        std::fs::read_to_string(path)
            .ok()?
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The network namespace of a process (`net:[INODE]`), or of this one with `None`.
pub fn netns(pid: Option<u32>) -> String {
    let p = pid.map_or("/proc/self/ns/net".to_string(), |p| {
        format!("/proc/{p}/ns/net")
    });
    std::fs::read_link(p)
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Collects the environment of this process.
pub fn environment() -> Environment {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    Environment {
        kernel: read("/proc/sys/kernel/osrelease"),
        hostname: read("/proc/sys/kernel/hostname"),
        cpus: tpslab_net::online_cpus(),
        sysctls: SYSCTLS
            .iter()
            .filter_map(|n| Some((n.to_string(), read_sysctl(n)?)))
            .collect::<BTreeMap<_, _>>(),
        netns: netns(None),
    }
}
