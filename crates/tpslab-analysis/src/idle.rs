//! `tpslab probe idle`: the idle intervals each round tries ([`ladder`]), what became of
//! each connection ([`Fate`]), and the bracket the study narrows the path's idle timeout
//! to ([`bracket`]). Pure: the engine opens the connections and reports their fates.

pub use tpslab_record::idle::{Bracket, Conn, Fate, IdleRecord, Outcome, PoolRecord, PoolRequest};

/// The idle intervals to try, whole seconds, ascending, distinct: up to `n` from `lo` to
/// `hi` inclusive (`inclusive`, the first round: every second when they fit, else
/// log-spaced), or up to `n` evenly spaced strictly between them (a bisection round).
/// Empty when nothing fits.
pub fn ladder(lo: u64, hi: u64, n: usize, inclusive: bool) -> Vec<u64> {
    let mut v: Vec<u64> = if inclusive && hi.saturating_sub(lo) < n as u64 {
        // Every whole second fits.
        (lo.max(1)..=hi).collect()
    } else if inclusive {
        let (a, b) = (lo.max(1) as f64, hi.max(lo.max(1)) as f64);
        (0..n.max(2))
            .map(|i| (a * (b / a).powf(i as f64 / (n.max(2) - 1) as f64)).round() as u64)
            .collect()
    } else {
        (1..=n as u64)
            .map(|i| lo + (hi - lo) * i / (n as u64 + 1))
            .filter(|&t| t > lo && t < hi)
            .collect()
    };
    v.sort_unstable();
    v.dedup();
    v
}

/// The bracket of `conns`: the path's idle timeout lies in (alive_s, dead_s].
pub fn bracket(conns: &[Conn]) -> Bracket {
    Bracket {
        alive_s: conns
            .iter()
            .filter(|c| c.fate == Fate::Alive)
            .map(|c| c.idle_s)
            .max(),
        dead_s: conns
            .iter()
            .filter(|c| c.fate.dead())
            .map(|c| c.idle_s)
            .min(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladders() {
        assert_eq!(ladder(1, 10, 15, true), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(
            ladder(10, 3600, 15, true),
            [10, 15, 23, 35, 54, 82, 125, 190, 289, 440, 670, 1020, 1553, 2364, 3600]
        );
        assert_eq!(ladder(283, 430, 15, false).len(), 15);
        assert_eq!(ladder(2, 4, 15, false), [3]);
        assert_eq!(ladder(2, 3, 15, false), Vec::<u64>::new());
    }

    #[test]
    fn bracket_of_fates() {
        let c = |idle_s, fate| Conn {
            round: 1,
            idle_s,
            fate,
            decided_ms: 0,
        };
        let conns = [
            c(1, Fate::Alive),
            c(2, Fate::Alive),
            c(3, Fate::Dropped),
            c(4, Fate::Abandoned),
        ];
        let b = bracket(&conns);
        assert_eq!(
            b,
            Bracket {
                alive_s: Some(2),
                dead_s: Some(3)
            }
        );
        assert!(!b.inconsistent());
        let odd = bracket(&[c(2, Fate::Reset), c(5, Fate::Alive)]);
        assert!(odd.inconsistent());
        assert!(!Fate::Error("EHOSTUNREACH".into()).dead());
    }
}
