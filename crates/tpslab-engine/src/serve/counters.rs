//! Small lock-free counters shared between a hot-path thread and reporters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const MAX_ERRNO: usize = 160;

/// Counts of failed calls by errno (0..160; larger values share the last slot).
pub struct ErrnoCounts([AtomicU64; MAX_ERRNO]);

impl Default for ErrnoCounts {
    fn default() -> Self {
        ErrnoCounts(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl ErrnoCounts {
    /// Adds `n` failures with `errno`.
    #[inline]
    pub fn add(&self, errno: i32, n: u64) {
        let i = (errno.max(0) as usize).min(MAX_ERRNO - 1);
        self.0[i].fetch_add(n, Relaxed);
    }

    /// Adds the non-zero counts into `map` keyed by errno name ("ENOBUFS").
    pub fn merge_into(&self, map: &mut BTreeMap<String, u64>) {
        for (errno, c) in self.0.iter().enumerate() {
            let v = c.load(Relaxed);
            if v > 0 {
                *map.entry(tpslab_net::errno_name(errno as i32)).or_default() += v;
            }
        }
    }
}
