//! How fast this machine runs a kernel shaped like a CPU LLM decode step
//! right now: int8 dot products streamed over a buffer larger than the
//! caches, on one thread.
//!
//! A separate crate so that it is compiled with optimisation in every
//! profile (`[profile.dev.package.cpuprobe]` in the main manifest): the
//! figure must not depend on whether servebench itself was built for debug.

use std::time::Instant;

/// Bytes streamed per pass: beyond the last-level cache of common CPUs, as
/// a model's weights are.
const BUFFER_BYTES: usize = 48 << 20;

/// Passes timed; the median is reported.
const PASSES: usize = 5;

/// Measured throughput of the kernel, bytes per second (median of the passes).
pub fn int8_dot_bytes_per_s() -> f64 {
    let weights: Vec<i8> = (0..BUFFER_BYTES).map(|i| (i % 251) as i8).collect();
    let x: Vec<i8> = (0..4096).map(|i| (i % 13) as i8 - 6).collect();
    let mut rates = Vec::with_capacity(PASSES);
    let mut sink = 0i64;
    for _ in 0..PASSES {
        let start = Instant::now();
        sink = sink.wrapping_add(pass(&weights, &x));
        let s = start.elapsed().as_secs_f64().max(1e-9);
        rates.push(BUFFER_BYTES as f64 / s);
    }
    std::hint::black_box(sink);
    rates.sort_by(f64::total_cmp);
    rates[PASSES / 2]
}

/// One matrix-vector product: each 4096-byte row of `weights` dotted with `x`.
fn pass(weights: &[i8], x: &[i8]) -> i64 {
    let mut total = 0i64;
    for row in weights.chunks_exact(x.len()) {
        let mut acc = 0i32;
        for (w, v) in row.iter().zip(x) {
            acc = acc.wrapping_add(i32::from(*w) * i32::from(*v));
        }
        total = total.wrapping_add(i64::from(acc));
    }
    total
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_probe_reports_a_finite_positive_rate() {
        let r = super::int8_dot_bytes_per_s();
        assert!(r.is_finite() && r > 1e6, "{r}");
    }

    #[test]
    fn a_pass_computes_every_row_dot_product() {
        // Two rows of three: (1·1 + 2·-1 + 3·2) + (-4·1 + 5·-1 + 6·2) = 5 + 3.
        let weights = [1i8, 2, 3, -4, 5, 6];
        assert_eq!(super::pass(&weights, &[1, -1, 2]), 8);
    }
}
