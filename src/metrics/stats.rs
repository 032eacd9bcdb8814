//! Summary statistics over samples, and the per-level aggregates.

use serde::{Deserialize, Serialize};

use crate::client::record::RequestRecord;

/// Summary of a sample: count, mean, spread and percentiles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub count: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Smallest sample.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
}

impl Stats {
    /// Summarise `values`; `None` when there are none (never a zero-filled summary).
    pub fn from_values(mut values: Vec<f64>) -> Option<Stats> {
        values.retain(|v| v.is_finite());
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        Some(Stats {
            count: values.len(),
            mean,
            std: var.sqrt(),
            min: values[0],
            p50: percentile(&values, 50.0),
            p90: percentile(&values, 90.0),
            p95: percentile(&values, 95.0),
            p99: percentile(&values, 99.0),
            max: values[values.len() - 1],
        })
    }
}

/// Percentile `p` (0–100) of sorted values, interpolating between closest ranks.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Per-request TPOT in ms, when the request has at least two output tokens.
pub fn tpot_ms(r: &RequestRecord) -> Option<f64> {
    let (ttft, e2e, out) = (r.ttft_ms?, r.e2e_ms?, r.credible_output_tokens()?);
    (out >= 2).then(|| (e2e - ttft) / (out - 1) as f64)
}

/// Per-request decode speed in tokens/s, when defined.
pub fn decode_tok_s(r: &RequestRecord) -> Option<f64> {
    let (ttft, e2e, out) = (r.ttft_ms?, r.e2e_ms?, r.credible_output_tokens()?);
    let span = e2e - ttft;
    (out >= 2 && span > 0.0).then(|| (out - 1) as f64 / (span / 1000.0))
}

/// Latency distributions of the completed requests of a level.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Time to first token.
    pub ttft_ms: Option<Stats>,
    /// Time to first answer token, where a request streamed reasoning first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfa_ms: Option<Stats>,
    /// Time per output token.
    pub tpot_ms: Option<Stats>,
    /// Inter-chunk latency.
    pub itl_ms: Option<Stats>,
    /// Inter-token latency (chunk gap spread over its tokens).
    pub itl_per_token_ms: Option<Stats>,
    /// End-to-end latency.
    pub e2e_ms: Option<Stats>,
    /// Per-request decode speed.
    pub decode_tok_s: Option<Stats>,
    /// Open-loop levels (a rate, a trace replay): time to first token from
    /// the request's scheduled send time, so a late send counts against
    /// the latency instead of hiding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_from_schedule_ms: Option<Stats>,
    /// Open-loop levels: end-to-end latency from the scheduled send time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_from_schedule_ms: Option<Stats>,
}

/// Time to first token and end-to-end latency of completed requests from
/// their scheduled send time.
pub fn from_schedule<'a>(
    records: impl IntoIterator<Item = &'a RequestRecord>,
) -> (Option<Stats>, Option<Stats>) {
    let (mut ttft, mut e2e) = (Vec::new(), Vec::new());
    for r in records.into_iter().filter(|r| r.is_ok()) {
        let lag = r.dispatch_lag_ms();
        ttft.extend(r.ttft_ms.map(|t| t + lag));
        e2e.extend(r.e2e_ms.map(|t| t + lag));
    }
    (Stats::from_values(ttft), Stats::from_values(e2e))
}

/// Compute the latency distributions over completed requests.
pub fn latency_stats<'a>(records: impl IntoIterator<Item = &'a RequestRecord>) -> LatencyStats {
    let (mut ttft, mut tpot, mut itl, mut itl_tok, mut e2e, mut dec) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let mut ttfa = Vec::new();
    let mut reasoned = false;
    for r in records.into_iter().filter(|r| r.is_ok()) {
        ttft.extend(r.ttft_ms);
        ttfa.extend(r.first_answer_ms);
        reasoned |= r.reasoning_tokens.is_some_and(|n| n > 0);
        e2e.extend(r.e2e_ms);
        tpot.extend(tpot_ms(r));
        dec.extend(decode_tok_s(r));
        // Spreading a gap over tokens it may not have carried would give a
        // wrong per-token number; such requests are left out (and warned of).
        let per_token_known = !r.chunk_tokens_unknown();
        for w in r.chunks.windows(2) {
            let gap = w[1].0 - w[0].0;
            itl.push(gap);
            if !per_token_known {
                continue;
            }
            let k = w[1].1.max(1);
            let per = gap / k as f64;
            itl_tok.extend(std::iter::repeat_n(per, k as usize));
        }
    }
    LatencyStats {
        ttft_ms: Stats::from_values(ttft),
        // Only where some answer came after reasoning: otherwise it is TTFT.
        ttfa_ms: if reasoned {
            Stats::from_values(ttfa)
        } else {
            None
        },
        tpot_ms: Stats::from_values(tpot),
        itl_ms: Stats::from_values(itl),
        itl_per_token_ms: Stats::from_values(itl_tok),
        e2e_ms: Stats::from_values(e2e),
        decode_tok_s: Stats::from_values(dec),
        ttft_from_schedule_ms: None,
        e2e_from_schedule_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::record::Outcome;
    use crate::failure::{Failure, FailureClass};

    fn rec(ttft: f64, gaps: &[(f64, u32)], out: u64) -> RequestRecord {
        let mut r = RequestRecord::new(0.0, 0.0);
        let mut t = ttft;
        r.push_chunk(t, 1);
        for &(g, k) in gaps {
            t += g;
            r.push_chunk(t, k);
        }
        r.output_tokens = Some(out);
        r.finish(Outcome::Ok, t);
        r
    }

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let s = Stats::from_values((1..=5).map(f64::from).collect()).unwrap();
        assert_eq!((s.min, s.p50, s.max, s.count), (1.0, 3.0, 5.0, 5));
        assert!((s.p90 - 4.6).abs() < 1e-9);
        assert!((s.std - 2f64.sqrt()).abs() < 1e-9);
        assert!(Stats::from_values(vec![]).is_none());
    }

    #[test]
    fn three_tokens_per_chunk_gives_a_third_of_the_chunk_gap_per_token() {
        let r = rec(50.0, &[(30.0, 3), (30.0, 3), (30.0, 3)], 10);
        let s = latency_stats([&r]);
        let itl = s.itl_ms.unwrap();
        let per_tok = s.itl_per_token_ms.unwrap();
        assert!((itl.p50 - 30.0).abs() < 1e-9);
        assert!((per_tok.p50 - 10.0).abs() < 1e-9);
        assert_eq!(per_tok.count, 9);
        // TPOT = (140 - 50) / (10 - 1) = 10 ms; decode speed = 9 / 0.09 s = 100 tok/s.
        assert!((s.tpot_ms.unwrap().p50 - 10.0).abs() < 1e-9);
        assert!((s.decode_tok_s.unwrap().p50 - 100.0).abs() < 1e-9);
    }

    #[test]
    fn unknown_chunk_counts_leave_per_token_itl_out_and_lying_usage_is_capped() {
        // 16 tokens in 4 chunks, the count known only from the final usage.
        let mut r = rec(10.0, &[(3.0, 1), (3.0, 1), (3.0, 1)], 16);
        let s = latency_stats([&r]);
        assert!(s.itl_per_token_ms.is_none());
        assert_eq!(s.itl_ms.unwrap().count, 3);
        // A usage above max_tokens counts as max_tokens in TPOT.
        r.output_tokens = Some(80);
        r.requested_output_tokens = Some(4);
        r.tokens_per_chunk_from_server = true;
        // (19 - 10) / (4 - 1) = 3 ms, not 9 / 79.
        assert!((latency_stats([&r]).tpot_ms.unwrap().p50 - 3.0).abs() < 1e-9);
    }

    #[test]
    fn failed_requests_never_enter_latency_statistics() {
        let ok = rec(10.0, &[(5.0, 1)], 2);
        let mut bad = rec(0.0, &[], 1);
        bad.finish(
            Outcome::Failed(Failure::new(FailureClass::Protocol, "cut")),
            0.0,
        );
        let s = latency_stats([&ok, &bad]);
        assert_eq!(s.ttft_ms.unwrap().count, 1);
        assert_eq!(s.ttft_ms.unwrap().min, 10.0);
    }
}
