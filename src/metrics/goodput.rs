//! Goodput: how many requests met every declared SLO bound.

use serde::{Deserialize, Serialize};

use super::stats::tpot_ms;
use crate::client::record::RequestRecord;
use crate::util::units::Slo;

/// Goodput of one level against one SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// The bounds that were applied.
    pub slo: Slo,
    /// Completed requests meeting every bound.
    pub good_requests: usize,
    /// `good_requests` over all requests of the level (failed ones included).
    pub share: f64,
    /// `good_requests` per second of level wall time.
    pub rate_rps: f64,
}

/// Whether a completed request meets every bound of `slo`.
pub fn meets(r: &RequestRecord, slo: &Slo) -> bool {
    if !r.is_ok() {
        return false;
    }
    let within = |bound: Option<f64>, value: Option<f64>| match bound {
        None => true,
        Some(b) => value.is_some_and(|v| v <= b),
    };
    // A single-token answer has no TPOT; it cannot violate a TPOT bound.
    let tpot = tpot_ms(r).or(Some(0.0));
    within(slo.ttft_ms, r.ttft_ms) && within(slo.tpot_ms, tpot) && within(slo.e2e_ms, r.e2e_ms)
}

/// Evaluate `slo` over all requests of a level lasting `duration_s`.
pub fn goodput(records: &[RequestRecord], slo: &Slo, duration_s: f64) -> Goodput {
    let good = records.iter().filter(|r| meets(r, slo)).count();
    Goodput {
        slo: *slo,
        good_requests: good,
        share: if records.is_empty() {
            0.0
        } else {
            good as f64 / records.len() as f64
        },
        rate_rps: if duration_s > 0.0 {
            good as f64 / duration_s
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::record::Outcome;
    use crate::failure::{Failure, FailureClass};

    fn rec(ttft: f64, e2e: f64, out: u64) -> RequestRecord {
        let mut r = RequestRecord::new(0.0, 0.0);
        r.push_chunk(ttft, 1);
        r.output_tokens = Some(out);
        r.finish(Outcome::Ok, e2e);
        r
    }

    #[test]
    fn every_bound_must_hold_and_failures_count_against() {
        let slo = Slo {
            ttft_ms: Some(100.0),
            tpot_ms: Some(10.0),
            e2e_ms: None,
            attainment: None,
        };
        let fast = rec(50.0, 140.0, 10); // tpot 10
        let slow_first = rec(150.0, 200.0, 10);
        let slow_decode = rec(50.0, 500.0, 10); // tpot 50
        let mut failed = rec(10.0, 20.0, 2);
        failed.finish(
            Outcome::Failed(Failure::new(FailureClass::Timeout, "t")),
            20.0,
        );
        let g = goodput(&[fast, slow_first, slow_decode, failed], &slo, 2.0);
        assert_eq!(g.good_requests, 1);
        assert_eq!(g.share, 0.25);
        assert_eq!(g.rate_rps, 0.5);
    }
}
