//! How long Linux TCP takes to give up on a dead peer, from its settings: the
//! retransmission model of `tcp_retries2` (net/ipv4/tcp_timer.c `tcp_model_timeout`, as of
//! 6.15 with `tcp_rto_max_ms`) and keepalive (`tcp_keepalive_timer`).

/// The kernel's TCP_RTO_MIN, ms: the base of the `tcp_retries2` model whatever the
/// connection's RTT or `tcp_rto_min_us` (those set the real first RTO, so the model is a
/// lower bound: the kernel gives up at the first RTO that ends after it).
pub const RTO_BASE_MS: u64 = 200;

/// The kernel's default `tcp_rto_max_ms` (TCP_RTO_MAX), ms.
pub const RTO_MAX_DEFAULT_MS: u64 = 120_000;

/// The time after the first retransmission of unacknowledged data at which the kernel
/// gives up with ETIMEDOUT when no TCP_USER_TIMEOUT is set, ms: with N = `retries2` and
/// T = ilog2(rto_max / 200 ms), (2^(N+1) - 1) x 200 ms when N <= T, else
/// (2^(T+1) - 1) x 200 ms + (N - T) x rto_max. `rto_max_ms` is `net.ipv4.tcp_rto_max_ms`
/// (120000 by default; 1000..=120000). Defaults (15, 120000): 924600 ms, the figure in
/// ip-sysctl.rst.
pub fn retries2_give_up_ms(retries2: u64, rto_max_ms: u64) -> u64 {
    // The kernel takes 1000..=120000; a record read back may hold anything.
    let rto_max = rto_max_ms.clamp(RTO_BASE_MS, 1000 * RTO_MAX_DEFAULT_MS);
    let thresh = u64::from((rto_max / RTO_BASE_MS).ilog2());
    if retries2 <= thresh {
        ((2u64 << retries2) - 1) * RTO_BASE_MS
    } else {
        (((2u64 << thresh) - 1) * RTO_BASE_MS)
            .saturating_add((retries2 - thresh).saturating_mul(rto_max))
    }
}

/// The idle time after which keepalive declares a silent peer dead, s: the first probe
/// after `time`, then `probes` probes `intvl` apart, the connection dropped when the last
/// is unanswered (time + intvl x probes; 7200 + 75 x 9 = 7875 s by default). Keepalive
/// runs only on sockets with SO_KEEPALIVE, and not while data waits to be acknowledged.
pub fn keepalive_dead_after_s(time: u64, intvl: u64, probes: u64) -> u64 {
    time.saturating_add(intvl.saturating_mul(probes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_documented_figures() {
        // ip-sysctl.rst: "The default value of 15 yields a hypothetical timeout of 924.6
        // seconds"; tcp(7): a value of 8 gives about 100 s.
        assert_eq!(retries2_give_up_ms(15, RTO_MAX_DEFAULT_MS), 924_600);
        assert_eq!(retries2_give_up_ms(8, RTO_MAX_DEFAULT_MS), 102_200);
        assert_eq!(retries2_give_up_ms(0, RTO_MAX_DEFAULT_MS), 200);
        // tcp_rto_max_ms = 1000: T = 2, 7 x 200 ms + 13 x 1 s.
        assert_eq!(retries2_give_up_ms(15, 1000), 14_400);
        assert_eq!(keepalive_dead_after_s(7200, 75, 9), 7875);
        // Absurd settings do not overflow.
        assert!(retries2_give_up_ms(u64::from(u32::MAX), RTO_MAX_DEFAULT_MS) > 0);
        assert!(retries2_give_up_ms(70, u64::MAX) > 0);
    }
}
