//! The one judgment of a measured level: `run` gives each cell the status it
//! says, `bench` flags the same levels, and the SLO search reads the stored
//! statuses, so a server judged fine by one is judged fine by all.

use crate::failure::{Failure, FailureClass};
use crate::metrics::level::LevelSummary;
use crate::telemetry::SpecDecodeCounts;

use super::CellStatus;

/// A measured level's status and the words for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgment {
    /// The status.
    pub status: CellStatus,
    /// Why it is not `ok`: the evidence stored with the cell.
    pub failure: Option<Failure>,
    /// Everything worth a look, the client's own warnings included.
    pub warnings: Vec<String>,
    /// The reasons the numbers are not believed (empty unless suspicious).
    pub suspicions: Vec<String>,
}

/// Judge a level from its summary. `exact_output`: requests forced their
/// output length (ignore_eos). `engine_spec`: the engine's own speculative
/// counters over the level, when it exports any.
pub fn judge(
    s: &LevelSummary,
    exact_output: bool,
    engine_spec: Option<&SpecDecodeCounts>,
) -> Judgment {
    let mut warnings = s.client.warnings.clone();
    if s.completed == 0 {
        let (class, n) = s
            .failures_by_class
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(k, n)| (*k, *n))
            .unwrap_or((FailureClass::Protocol, 0));
        let mut f = s
            .requests
            .iter()
            .find_map(|r| r.failure.clone())
            .unwrap_or_else(|| Failure::new(FailureClass::Protocol, "no request completed"));
        f.detail = format!(
            "all {} requests failed ({class} ×{n}); first: {}",
            s.failed, f.detail
        );
        return Judgment {
            status: CellStatus::Failed,
            failure: Some(f),
            warnings,
            suspicions: Vec::new(),
        };
    }
    // Fast answers that are not answers come first: their class says so.
    let degenerate = crate::metrics::output::degenerate_level(&s.requests);
    let mut suspicions: Vec<String> = degenerate.iter().cloned().collect();
    suspicions.extend(crate::metrics::judge::suspicions(&s.requests, exact_output));
    if let (Some(d), Some(0)) = (s.draft_tokens, s.accepted_draft_tokens) {
        if d > 0 {
            suspicions.push(nothing_accepted(d as f64));
        }
    }
    if !suspicions.is_empty() {
        warnings.extend(suspicions.iter().cloned());
        let class = if degenerate.is_some() {
            FailureClass::DegenerateOutput
        } else {
            FailureClass::Suspicious
        };
        return Judgment {
            status: CellStatus::Suspicious,
            failure: Some(Failure::new(class, suspicions.join("; "))),
            warnings,
            suspicions,
        };
    }
    if s.failed > 0 {
        let classes: Vec<String> = s
            .failures_by_class
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        warnings.push(format!(
            "{} of {} requests failed ({})",
            s.failed,
            s.failed + s.completed,
            classes.join(", ")
        ));
        return Judgment {
            status: CellStatus::Partial,
            failure: None,
            warnings,
            suspicions: Vec::new(),
        };
    }
    // The engine's counters see what a client cannot: drafts it made and
    // threw away without a single accepted token.
    if let Some(c) = engine_spec.filter(|c| crate::telemetry::is_spec_suspicious(c)) {
        let why = nothing_accepted(c.draft_tokens.unwrap_or(0.0));
        warnings.push(why.clone());
        return Judgment {
            status: CellStatus::Suspicious,
            failure: Some(Failure::new(FailureClass::Suspicious, why.clone())),
            warnings,
            suspicions: vec![why],
        };
    }
    Judgment {
        status: CellStatus::Ok,
        failure: None,
        warnings,
        suspicions: Vec::new(),
    }
}

/// The words for speculative decoding that accepted none of its drafts.
fn nothing_accepted(drafted: f64) -> String {
    format!("speculative decoding proposed {drafted:.0} draft tokens and accepted none")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::record::{Outcome, RequestRecord};
    use crate::load::driver::LevelRun;
    use crate::load::schedule::LoadShape;

    /// A level of `ok` answers of 4 tokens (asked 4) and `failed` timeouts.
    fn level(ok: usize, failed: usize) -> LevelSummary {
        let mut records = Vec::new();
        for i in 0..ok {
            let mut r = RequestRecord::new(i as f64, i as f64);
            for t in 0..4 {
                r.push_chunk(i as f64 + 1.0 + t as f64, 1);
            }
            r.output_tokens = Some(4);
            r.requested_output_tokens = Some(4);
            r.finish(Outcome::Ok, i as f64 + 6.0);
            records.push(r);
        }
        for i in 0..failed {
            let mut r = RequestRecord::new(i as f64, i as f64);
            r.finish(
                Outcome::Failed(Failure::new(FailureClass::Timeout, "no answer in 60s")),
                i as f64 + 60.0,
            );
            records.push(r);
        }
        let run = LevelRun {
            records,
            duration_s: 10.0,
            warmup_sent: 0,
            warmup_failed: 0,
            cancelled: false,
        };
        crate::metrics::level::summarize(LoadShape::Concurrency { value: 1 }, run, &[], 0.0, 1)
    }

    fn drafts(proposed: f64, accepted: f64) -> SpecDecodeCounts {
        SpecDecodeCounts {
            drafts: Some(proposed / 4.0),
            draft_tokens: Some(proposed),
            accepted_tokens: Some(accepted),
            accepted_per_position: Vec::new(),
        }
    }

    #[test]
    fn every_request_failed_is_a_failure_with_the_first_evidence() {
        let j = judge(&level(0, 3), true, None);
        assert_eq!(j.status, CellStatus::Failed);
        let f = j.failure.unwrap();
        assert_eq!(f.class, FailureClass::Timeout);
        assert!(
            f.detail
                .starts_with("all 3 requests failed (timeout ×3); first: no answer"),
            "{}",
            f.detail
        );
    }

    #[test]
    fn drafts_with_nothing_accepted_read_the_same_from_the_client_or_the_engine() {
        let mut client = level(2, 0);
        client.draft_tokens = Some(40);
        client.accepted_draft_tokens = Some(0);
        let by_client = judge(&client, true, None);
        let by_engine = judge(&level(2, 0), true, Some(&drafts(40.0, 0.0)));
        for j in [&by_client, &by_engine] {
            assert_eq!(j.status, CellStatus::Suspicious);
            assert_eq!(
                j.suspicions,
                ["speculative decoding proposed 40 draft tokens and accepted none"]
            );
            assert_eq!(j.failure.as_ref().unwrap().class, FailureClass::Suspicious);
        }
        // Accepted drafts, or no drafts at all, are fine.
        assert_eq!(
            judge(&level(2, 0), true, Some(&drafts(40.0, 9.0))).status,
            CellStatus::Ok
        );
        assert_eq!(
            judge(&level(2, 0), true, Some(&drafts(0.0, 0.0))).status,
            CellStatus::Ok
        );
    }

    #[test]
    fn some_failed_requests_make_a_partial_cell_that_says_how_many() {
        // A partial level stays partial even when the engine's drafts were
        // all rejected: the failed requests are the first thing to fix.
        let j = judge(&level(3, 1), true, Some(&drafts(40.0, 0.0)));
        assert_eq!(j.status, CellStatus::Partial);
        assert!(j.failure.is_none());
        assert!(
            j.warnings
                .iter()
                .any(|w| w == "1 of 4 requests failed (timeout=1)"),
            "{:?}",
            j.warnings
        );
        let ok = judge(&level(3, 0), true, None);
        assert_eq!((ok.status, ok.failure), (CellStatus::Ok, None));
    }

    #[test]
    fn degenerate_answers_make_the_level_suspicious_with_their_own_class() {
        let mut s = level(4, 0);
        for r in &mut s.requests[..2] {
            r.output = Some(crate::client::record::OutputText::of("lambda ".repeat(32)));
        }
        let j = judge(&s, true, None);
        assert_eq!(j.status, CellStatus::Suspicious);
        let f = j.failure.unwrap();
        assert_eq!(f.class, FailureClass::DegenerateOutput);
        assert!(
            f.detail.starts_with(
                "2 of 2 answers are degenerate; first: `lambda` repeats over 32 of 32 words"
            ),
            "{}",
            f.detail
        );
        assert!(
            f.detail.contains("\"lambda lambda"),
            "the excerpt is the evidence: {}",
            f.detail
        );
    }

    #[test]
    fn short_answers_under_ignore_eos_make_the_level_suspicious() {
        let mut s = level(2, 0);
        s.requests[0].output_tokens = Some(1);
        let j = judge(&s, true, None);
        assert_eq!(j.status, CellStatus::Suspicious);
        assert!(
            j.suspicions[0].contains("fewer output tokens than asked"),
            "{:?}",
            j.suspicions
        );
        assert_eq!(judge(&s, false, None).status, CellStatus::Ok);
    }
}
