//! The summary of one load level, computed from its raw records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::goodput::{goodput, Goodput};
use super::stats::{latency_stats, Stats};
use crate::client::record::RequestRecord;
use crate::failure::FailureClass;
use crate::load::driver::LevelRun;
use crate::load::schedule::LoadShape;
use crate::util::units::Slo;

/// Dispatch lag p99 above which the client is suspected of limiting the load, ms.
pub const LAG_WARN_MS: f64 = 10.0;
/// Share of the client's cores in use above which it is suspected of limiting the load.
pub const CPU_WARN_SHARE: f64 = 0.8;

/// How the client itself fared while generating load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientStats {
    /// Actual minus scheduled send time.
    pub dispatch_lag_ms: Option<Stats>,
    /// User plus system CPU seconds the client process spent on the level.
    pub cpu_seconds: f64,
    /// `cpu_seconds` over wall time, in cores.
    pub cpu_cores_used: f64,
    /// Worker threads the client ran with.
    pub client_threads: usize,
    /// Reasons to distrust the level's numbers because of the client.
    pub warnings: Vec<String>,
}

/// Everything reported for one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelSummary {
    /// The load that was applied.
    pub load: LoadShape,
    /// Requests that completed.
    pub completed: usize,
    /// Requests that failed.
    pub failed: usize,
    /// Failed requests per class.
    pub failures_by_class: BTreeMap<FailureClass, usize>,
    /// Wall time of the measured part, s.
    pub duration_s: f64,
    /// Completed requests per second.
    pub request_throughput_rps: f64,
    /// Output tokens of completed requests per second.
    pub output_throughput_tok_s: f64,
    /// Input plus output tokens of completed requests per second.
    pub total_throughput_tok_s: f64,
    /// Time to first token.
    pub ttft_ms: Option<Stats>,
    /// Time per output token.
    pub tpot_ms: Option<Stats>,
    /// Inter-chunk latency.
    pub itl_ms: Option<Stats>,
    /// Inter-token latency.
    pub itl_per_token_ms: Option<Stats>,
    /// End-to-end latency.
    pub e2e_ms: Option<Stats>,
    /// Per-request decode speed, tokens/s.
    pub decode_tok_s: Option<Stats>,
    /// Goodput against each declared SLO.
    pub goodput: Vec<Goodput>,
    /// Speculative draft tokens proposed / accepted, summed over requests, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u64>,
    /// See `draft_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_draft_tokens: Option<u64>,
    /// Warm-up requests sent before measuring (excluded from all of the above).
    pub warmup_requests: u64,
    /// Warm-up requests that failed.
    pub warmup_failed: u64,
    /// Whether the level was interrupted.
    pub cancelled: bool,
    /// The client's own measurements.
    pub client: ClientStats,
    /// How the prompts were built and counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::load::workloads::SourceInfo>,
    /// Reasons the completed requests' numbers are not believable (see
    /// `metrics::judge`); empty when they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspicious: Vec<String>,
    /// Every measured request's raw record.
    pub requests: Vec<RequestRecord>,
}

/// Summarise a finished level.
pub fn summarize(
    load: LoadShape,
    run: LevelRun,
    slos: &[Slo],
    cpu_seconds: f64,
    client_threads: usize,
) -> LevelSummary {
    let records = run.records;
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.is_ok()).collect();
    let mut failures_by_class = BTreeMap::new();
    for r in records.iter().filter(|r| !r.is_ok()) {
        // A failed record always carries its failure (`RequestRecord::finish`);
        // one without is an exchange the client could not make sense of.
        let class = r
            .failure
            .as_ref()
            .map_or(FailureClass::Protocol, |f| f.class);
        *failures_by_class.entry(class).or_insert(0) += 1;
    }
    let out_tokens: u64 = ok.iter().filter_map(|r| r.credible_output_tokens()).sum();
    let in_tokens: u64 = ok
        .iter()
        .filter_map(|r| r.input_tokens.or(r.planned_input_tokens))
        .sum();
    let per_s = |v: f64| {
        if run.duration_s > 0.0 {
            v / run.duration_s
        } else {
            0.0
        }
    };
    let lat = latency_stats(ok.iter().copied());
    let lag = Stats::from_values(records.iter().map(|r| r.dispatch_lag_ms()).collect());
    let cores_used = per_s(cpu_seconds);
    let mut warnings = Vec::new();
    if let Some(l) = &lag {
        if l.p99 > LAG_WARN_MS {
            warnings.push(format!(
                "dispatch lag p99 is {:.1} ms: requests left later than scheduled, so the client (or a concurrency cap) limited the load",
                l.p99
            ));
        }
    }
    let unknown: Vec<&&RequestRecord> = ok.iter().filter(|r| r.chunk_tokens_unknown()).collect();
    if let Some(r) = unknown.first() {
        warnings.push(format!(
            "per-token ITL leaves out {} of {} completed requests: the server sent no per-chunk token counts and its usage ({} tokens) differs from the {} chunks streamed",
            unknown.len(),
            ok.len(),
            r.output_tokens.unwrap_or(0),
            r.chunks.len()
        ));
    }
    if client_threads > 0 && cores_used > CPU_WARN_SHARE * client_threads as f64 {
        warnings.push(format!(
            "the client used {cores_used:.2} of its {client_threads} cores: it may be the bottleneck, not the server"
        ));
    }
    let sum_opt = |f: fn(&RequestRecord) -> Option<u64>| {
        let v: Vec<u64> = ok.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    LevelSummary {
        load,
        completed: ok.len(),
        failed: records.len() - ok.len(),
        failures_by_class,
        duration_s: run.duration_s,
        request_throughput_rps: per_s(ok.len() as f64),
        output_throughput_tok_s: per_s(out_tokens as f64),
        total_throughput_tok_s: per_s((out_tokens + in_tokens) as f64),
        ttft_ms: lat.ttft_ms,
        tpot_ms: lat.tpot_ms,
        itl_ms: lat.itl_ms,
        itl_per_token_ms: lat.itl_per_token_ms,
        e2e_ms: lat.e2e_ms,
        decode_tok_s: lat.decode_tok_s,
        goodput: slos
            .iter()
            .map(|s| goodput(&records, s, run.duration_s))
            .collect(),
        draft_tokens: sum_opt(|r| r.draft_tokens),
        accepted_draft_tokens: sum_opt(|r| r.accepted_draft_tokens),
        warmup_requests: run.warmup_sent,
        warmup_failed: run.warmup_failed,
        cancelled: run.cancelled,
        client: ClientStats {
            dispatch_lag_ms: lag,
            cpu_seconds,
            cpu_cores_used: cores_used,
            client_threads,
            warnings,
        },
        source: None,
        suspicious: Vec::new(),
        requests: records,
    }
}
