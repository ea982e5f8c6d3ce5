//! `ethtool` output: ring sizes (`ethtool -g IF`) and driver statistics (`ethtool -S IF`).
//! The text is the same for every driver (the driver chooses only the statistics' names).

/// RX and TX ring sizes of a NIC, descriptors: (current, pre-set maximum); None where
/// the driver prints `n/a` or nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rings {
    /// Receive ring.
    pub rx: Option<(u64, u64)>,
    /// Transmit ring.
    pub tx: Option<(u64, u64)>,
}

/// Parses `ethtool -g IF`: the `RX:` and `TX:` lines under `Pre-set maximums:` and
/// under `Current hardware settings:`. A ring is known when both are numbers.
pub fn parse_rings(text: &str) -> Rings {
    #[derive(PartialEq)]
    enum Part {
        None,
        Max,
        Cur,
    }
    let mut part = Part::None;
    let (mut max, mut cur) = ([None, None], [None, None]);
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Pre-set maximums") {
            part = Part::Max;
            continue;
        }
        if t.starts_with("Current hardware settings") {
            part = Part::Cur;
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            continue;
        };
        let i = match k.trim() {
            "RX" => 0,
            "TX" => 1,
            _ => continue,
        };
        let v = v.trim().parse::<u64>().ok();
        match part {
            Part::Max => max[i] = v,
            Part::Cur => cur[i] = v,
            Part::None => {}
        }
    }
    let pair = |i: usize| Some((cur[i]?, max[i]?));
    Rings {
        rx: pair(0),
        tx: pair(1),
    }
}

/// Parses `ethtool -S IF` (`name: value` lines under `NIC statistics:`) into (name,
/// value) pairs in order; lines that are not a name and a whole number are skipped.
pub fn parse_stats(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let k = k.trim();
            let v = v.trim().parse::<u64>().ok()?;
            (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), v))
        })
        .collect()
}

/// Whether a driver statistic counts received packets the NIC or driver dropped (not a
/// `tx` counter): its name says
/// drop, miss, discard, fifo, no buffer or out of buffer (virtio_net `rx0_drops`, mlx5
/// `rx_out_of_buffer`, ixgbe `rx_no_buffer_count`, i40e `rx_dropped`).
pub fn is_drop_counter(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    // Transmit side counters (tx_*, txN_*) are not receive drops.
    if n.starts_with("tx") {
        return false;
    }
    ["drop", "miss", "discard", "fifo", "no_buf", "out_of_buffer"]
        .iter()
        .any(|w| n.contains(w))
}
