//! Summaries of a series (mean, stddev, min, max, p50, p99) and of latency histograms
//! (the types are the record's, [`tpslab_record::stats`]), and the histograms themselves.

use tpslab_record::stats::{LatencySummary, Summary};

/// Nearest-rank percentile `q` (0..=100) of sorted samples; 0 for an empty slice.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A [`Summary`] of `xs` (count, mean, sample standard deviation, min, max, p50, p99;
/// NaNs are ignored). An empty input gives the all-zero summary.
pub fn summary(xs: &[f64]) -> Summary {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return Summary::default();
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    Summary {
        n,
        mean,
        stddev: var.sqrt(),
        min: v[0],
        max: v[n - 1],
        p50: percentile_sorted(&v, 50.0),
        p99: percentile_sorted(&v, 99.0),
    }
}

/// A [`LatencySummary`] of an HDR histogram of nanosecond values (count, mean,
/// quantiles and the ladder, ns); the all-zero summary for an empty histogram.
pub fn latency_summary(h: &hdrhistogram::Histogram<u64>) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    LatencySummary {
        count: h.len(),
        mean_ns: h.mean(),
        p50_ns: h.value_at_quantile(0.50),
        p90_ns: h.value_at_quantile(0.90),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
        ladder_ns: LatencySummary::LADDER.map(|q| {
            if q == 0.0 {
                h.min()
            } else if q == 1.0 {
                h.max()
            } else {
                h.value_at_quantile(q)
            }
        }),
    }
}

/// A new HDR histogram for nanosecond values from 1 ns to 100 s, 3 significant digits.
pub fn new_ns_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds")
}

/// Counts of `h`'s values (ns) per bucket: `counts[i]` are those in
/// `(bounds_ns[i-1], bounds_ns[i]]`, the last entry those above every bound (a Prometheus histogram's +Inf
/// bucket, not cumulative). Values are HdrHistogram's (3 significant digits): each is
/// taken at the highest value equivalent to it.
pub fn bucket_counts(h: &hdrhistogram::Histogram<u64>, bounds_ns: &[u64]) -> Vec<u64> {
    let mut counts = vec![0u64; bounds_ns.len() + 1];
    for v in h.iter_recorded() {
        let x = v.value_iterated_to();
        let i = bounds_ns.partition_point(|&b| b < x);
        counts[i] += v.count_at_value();
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_record::histogram::{decode_histogram, encode_histogram};

    #[test]
    fn a_histogram_is_decoded_within_its_bounds_or_refused_before_allocating() {
        use base64::Engine;
        use std::io::Write;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        // A plain V2 header that announces a 512 MiB payload it does not have.
        let mut plain = vec![];
        plain.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
        plain.extend_from_slice(&(512u32 << 20).to_be_bytes());
        plain.extend_from_slice(&0u32.to_be_bytes());
        plain.extend_from_slice(&3u32.to_be_bytes());
        plain.extend_from_slice(&1u64.to_be_bytes());
        plain.extend_from_slice(&100_000_000_000u64.to_be_bytes());
        plain.extend_from_slice(&1f64.to_be_bytes());
        assert_eq!(
            decode_histogram(&b64(&plain)).unwrap_err(),
            "a payload of 536870912 bytes in 40 bytes"
        );
        // A deflate bomb: 2 MiB of zeros in a few KB.
        let mut z = flate2::write::ZlibEncoder::new(vec![], flate2::Compression::best());
        z.write_all(&plain).unwrap();
        z.write_all(&vec![0u8; 2 << 20]).unwrap();
        let z = z.finish().unwrap();
        assert!(z.len() < 10_000);
        let mut bomb = 0x1c84_9314u32.to_be_bytes().to_vec();
        bomb.extend_from_slice(&(z.len() as u32).to_be_bytes());
        bomb.extend_from_slice(&z);
        assert_eq!(
            decode_histogram(&b64(&bomb)).unwrap_err(),
            "inflates to more than 1048576 bytes"
        );
        // A range beyond tpslab's, and text beyond its bound.
        let wide = hdrhistogram::Histogram::<u64>::new_with_bounds(1, u64::MAX / 2, 5).unwrap();
        assert!(decode_histogram(&encode_histogram(&wide))
            .unwrap_err()
            .ends_with("allowed 1..=100000000000 ns at up to 3 digits"));
        assert!(decode_histogram(&"A".repeat(2 << 20))
            .unwrap_err()
            .starts_with("2097152 bytes of text"));
        // Every count set (each a 6-byte varint, the longest counts within 2^53 in
        // all): still within the bounds.
        let mut full = new_ns_histogram();
        let mut v = 1;
        while v <= 100_000_000_000 {
            full.record_n(v, v | (1 << 38)).unwrap();
            v = full.next_non_equivalent(v);
        }
        let text = encode_histogram(&full);
        assert!(text.len() < 400_000, "{}", text.len());
        assert_eq!(decode_histogram(&text).unwrap(), full);
    }

    #[test]
    fn histograms_survive_their_encoding_and_fill_buckets() {
        let mut h = new_ns_histogram();
        for v in [1_000u64, 2_000, 2_000, 50_000, 3_000_000_000] {
            h.record(v).unwrap();
        }
        let text = encode_histogram(&h);
        let back = decode_histogram(&text).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.value_at_quantile(0.99), h.value_at_quantile(0.99));
        assert!(decode_histogram("not base64!")
            .unwrap_err()
            .contains("base64"));
        assert!(decode_histogram("aGVsbG8=")
            .unwrap_err()
            .contains("HdrHistogram"));
        // (.., 1 us], (1, 10 us], (10 us, 1 s], above.
        assert_eq!(
            bucket_counts(&h, &[1_000, 10_000, 1_000_000_000]),
            vec![1, 2, 1, 1]
        );
    }

    #[test]
    fn summary_known_values() {
        let s = crate::stats::summary(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.n, 8);
        assert_eq!(s.mean, 5.0);
        // Sample stddev of this classic set: sqrt(32/7).
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!((s.min, s.max, s.p50, s.p99), (2.0, 9.0, 4.0, 9.0));
    }

    #[test]
    fn latency_ladder_runs_from_min_to_max_and_never_falls() {
        let mut h = new_ns_histogram();
        for v in 1..=100_000u64 {
            h.record(v * 10).unwrap();
        }
        let s = crate::stats::latency_summary(&h);
        let l = s.ladder();
        assert_eq!(l.len(), LatencySummary::LADDER.len());
        assert_eq!(l[0], (0.0, h.min()));
        assert_eq!(*l.last().unwrap(), (1.0, s.max_ns));
        assert!(l.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        // The ladder's p99 is the summary's.
        assert!(l.contains(&(0.99, s.p99_ns)));
        // A summary without a ladder (an older record) reads back and says so.
        let old: LatencySummary = serde_json::from_str(
            r#"{"count":1,"mean_ns":5.0,"p50_ns":5,"p90_ns":5,"p99_ns":5,"p999_ns":5,"max_ns":5}"#,
        )
        .unwrap();
        assert!(old.ladder().is_empty());
    }

    #[test]
    fn summary_empty_and_single() {
        assert_eq!(crate::stats::summary(&[]), Summary::default());
        let s = crate::stats::summary(&[3.0]);
        assert_eq!(
            (s.n, s.mean, s.stddev, s.p50, s.p99),
            (1, 3.0, 0.0, 3.0, 3.0)
        );
    }

    #[test]
    fn percentile_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        assert_eq!(percentile_sorted(&v, 50.0), 50.0);
        assert_eq!(percentile_sorted(&v, 99.0), 99.0);
        assert_eq!(percentile_sorted(&v, 100.0), 100.0);
        assert_eq!(percentile_sorted(&v, 0.0), 1.0);
    }

    #[test]
    fn latency_from_histogram() {
        let mut h = new_ns_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let l = crate::stats::latency_summary(&h);
        assert_eq!(l.count, 1000);
        // 3 significant digits: within 0.1 %.
        assert!((l.p50_ns as f64 - 500_000.0).abs() / 500_000.0 < 0.002);
        assert!((l.p99_ns as f64 - 990_000.0).abs() / 990_000.0 < 0.002);
        assert!(l.max_ns >= 999_000);
    }
}
