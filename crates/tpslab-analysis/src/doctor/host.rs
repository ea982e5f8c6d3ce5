//! The host below the sysctls: NIC ring sizes and drop counters, RPS, irqbalance, the CPU
//! frequency governor. What a host does not show (a VM without cpufreq, a NIC whose
//! driver reports no rings) is listed as skipped with the reason, not judged.

use tpslab_record::doctor::{Finding, Fix, Severity};

use tpslab_record::doctor::HostFacts;

/// A CPU mask with every one of `cpus` CPUs, as rps_cpus takes it (comma every 32 bits).
fn all_cpus_mask(cpus: u64) -> String {
    let cpus = cpus.clamp(1, 4096);
    let words: Vec<String> = (0..cpus.div_ceil(32))
        .rev()
        .map(|w| {
            let n = (cpus - w * 32).min(32);
            format!("{:x}", if n == 32 { u32::MAX } else { (1u32 << n) - 1 })
        })
        .collect();
    words.join(",")
}

/// Findings on the NICs, RPS, irqbalance and governors.
pub fn judge(h: &HostFacts) -> Vec<Finding> {
    let mut out = vec![];
    for n in &h.nics {
        let dropped: u64 = n.drops.values().max().copied().unwrap_or(0);
        if let Some((cur, max)) = n.rx_ring.filter(|(c, m)| c < m) {
            out.push(Finding {
                severity: if dropped > 0 { Severity::Warn } else { Severity::Info },
                what: format!(
                    "{}: RX ring of {cur} descriptors, the driver allows {max}: a longer ring absorbs longer bursts before the NIC drops{}",
                    n.name,
                    if dropped > 0 { " (and this NIC has dropped)" } else { "" }
                ),
                evidence: vec![format!("ethtool -g {}: RX {cur} of {max}", n.name)],
                fix: Some(Fix::action(format!("ethtool -G {} rx {max}", n.name))),
            });
        }
        if dropped > 0 {
            out.push(Finding {
                severity: Severity::Warn,
                what: format!(
                    "{}: {} receive drop counter(s) above 0 since boot, up to {} (drops by the NIC or its driver, before any socket could count them; the counters overlap, so they are not added)",
                    n.name,
                    n.drops.len(),
                    n.drops.values().max().copied().unwrap_or(0)
                ),
                evidence: n.drops.iter().map(|(k, v)| format!("{}: {k} = {v}", n.name)).collect(),
                fix: None,
            });
        }
        let rps_off = n
            .rps_cpus
            .iter()
            .all(|m| m.chars().all(|c| c == '0' || c == ','));
        if h.cpus > 1 && n.rx_queues < h.cpus && rps_off {
            out.push(Finding {
                severity: Severity::Info,
                what: format!(
                    "{}: {} receive queue(s) for {} CPUs and RPS off: all its receive processing (softirq) runs on the CPU(s) of its interrupt; RPS spreads it",
                    n.name, n.rx_queues, h.cpus
                ),
                evidence: vec![format!(
                    "/sys/class/net/{}/queues/rx-*/rps_cpus: {}",
                    n.name,
                    n.rps_cpus.join(" ")
                )],
                fix: Some(Fix::action(format!(
                    "echo {} > /sys/class/net/{}/queues/rx-0/rps_cpus",
                    all_cpus_mask(h.cpus),
                    n.name
                ))),
            });
        }
    }
    if let Some(pid) = h.irqbalance_pid {
        out.push(Finding {
            severity: Severity::Info,
            what: "irqbalance is running: it moves NIC interrupts between CPUs every 10 s, so a benchmark pinned with taskset or --cpus can find its softirq work moved".into(),
            evidence: vec![format!("irqbalance, PID {pid}")],
            fix: None,
        });
    }
    let slow: Vec<String> = h
        .governors
        .iter()
        .filter(|(g, _)| g.as_str() != "performance")
        .map(|(g, n)| format!("{g} on {n} CPU(s)"))
        .collect();
    if !slow.is_empty() {
        out.push(Finding {
            severity: Severity::Info,
            what: "CPU frequency scales with load: a CPU that sleeps between bursts wakes slowly and at low clock, which shows as latency and drops in short runs".into(),
            evidence: vec![format!("scaling_governor: {}", slow.join(", "))],
            fix: Some(Fix::action("cpupower frequency-set -g performance (for benchmarks)")),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tpslab_record::doctor::Nic;

    /// This machine: one virtio NIC, 256 of 256 descriptors, one queue, 2 CPUs.
    fn this_machine() -> HostFacts {
        HostFacts {
            cpus: 2,
            nics: vec![Nic {
                name: "eth0".into(),
                driver: Some("virtio_net".into()),
                rx_ring: Some((256, 256)),
                tx_ring: Some((256, 256)),
                rx_queues: 1,
                rps_cpus: vec!["0".into()],
                ..Default::default()
            }],
            skipped: vec!["CPU frequency: no cpufreq".into()],
            ..Default::default()
        }
    }

    #[test]
    fn a_single_queue_nic_without_rps_is_a_note() {
        let f = judge(&this_machine());
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Info);
        assert_eq!(
            f[0].fix,
            Some(Fix::action(
                "echo 3 > /sys/class/net/eth0/queues/rx-0/rps_cpus"
            ))
        );
    }

    #[test]
    fn short_rings_with_drops_irqbalance_and_powersave() {
        let mut h = this_machine();
        h.nics[0].rx_ring = Some((512, 4096));
        h.nics[0].rps_cpus = vec!["3".into()];
        h.nics[0].drops =
            BTreeMap::from([("rx_missed_errors".into(), 12), ("rx0_drops".into(), 3)]);
        h.irqbalance_pid = Some(812);
        h.governors = BTreeMap::from([("powersave".into(), 2)]);
        let f = judge(&h);
        let what: Vec<&str> = f.iter().map(|x| x.what.as_str()).collect();
        assert_eq!(f.len(), 4, "{what:#?}");
        assert_eq!(f[0].severity, Severity::Warn);
        assert_eq!(f[0].fix, Some(Fix::action("ethtool -G eth0 rx 4096")));
        assert!(
            f[1].what
                .starts_with("eth0: 2 receive drop counter(s) above 0 since boot, up to 12"),
            "{}",
            f[1].what
        );
        assert_eq!(
            f[1].evidence,
            ["eth0: rx0_drops = 3", "eth0: rx_missed_errors = 12"]
        );
        assert!(f[2].what.starts_with("irqbalance"));
        assert!(f[3].evidence[0].contains("powersave on 2 CPU(s)"));
    }

    #[test]
    fn cpu_masks() {
        assert_eq!(all_cpus_mask(2), "3");
        assert_eq!(all_cpus_mask(32), "ffffffff");
        assert_eq!(all_cpus_mask(40), "ff,ffffffff");
    }
}
