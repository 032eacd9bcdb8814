//! Seeded bootstrap resampling behind every interval in the report: the
//! same results always give the same bounds.

use crate::metrics::stats::percentile;

/// Bootstrap resamples behind every confidence interval.
pub const BOOTSTRAP_RESAMPLES: usize = 200;

/// A small deterministic generator (SplitMix64) for bootstrap resampling.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform index below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// 95% bootstrap interval of `stat` over resamples of `values`.
pub fn bootstrap<T: Copy>(
    values: &[T],
    rng: &mut SplitMix,
    stat: impl Fn(&[T]) -> f64,
) -> (f64, f64) {
    if values.len() < 2 {
        let v = stat(values);
        return (v, v);
    }
    let mut buf = Vec::with_capacity(values.len());
    let mut stats: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            buf.clear();
            buf.extend((0..values.len()).map(|_| values[rng.below(values.len())]));
            stat(&buf)
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    (percentile(&stats, 2.5), percentile(&stats, 97.5))
}

/// The median (p50) of `v`.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 50.0)
}

/// Whether a point's repetitions agree: the 95% bootstrap interval of the
/// median of `values` (one per repetition, as the report computes it) is at
/// most `target` of the median wide. Returns the sentence saying so.
pub fn repetitions_agree(values: &[f64], target: f64) -> Option<String> {
    if values.len() < 2 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let centre = median(values);
    if centre <= 0.0 {
        return None;
    }
    let mut rng = SplitMix::new(0x5eed);
    let (low, high) = bootstrap(values, &mut rng, median);
    let width = (high - low) / centre;
    (width <= target).then(|| {
        format!(
            "{} repetitions agree: output throughput median {centre:.1} tok/s, 95% bootstrap interval [{low:.1}, {high:.1}], {:.1}% wide (target {:.1}%)",
            values.len(),
            width * 100.0,
            target * 100.0
        )
    })
}

#[cfg(test)]
mod agreement_tests {
    use super::repetitions_agree;

    #[test]
    fn close_repetitions_agree_and_spread_ones_do_not() {
        let ok = repetitions_agree(&[100.0, 102.0], 0.05).unwrap();
        assert!(
            ok.contains("2 repetitions agree") && ok.contains("target 5.0%"),
            "{ok}"
        );
        assert!(repetitions_agree(&[100.0, 120.0], 0.05).is_none());
        assert!(repetitions_agree(&[100.0, 110.0, 90.0, 105.0, 95.0], 0.05).is_none());
        assert!(
            repetitions_agree(&[100.0], 0.5).is_none(),
            "one value is no interval"
        );
        assert!(repetitions_agree(&[0.0, 0.0], 0.5).is_none());
    }
}
