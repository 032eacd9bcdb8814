//! The engine-neutral view of a scrape delta, through per-engine metric-name
//! tables (each in its engine's file under `telemetry/dialect/`).
//!
//! Each engine names the same quantities differently, and names change across
//! versions. A [`MetricNames`] table lists, per common field, the candidate
//! sample names in order of preference (current name first, older names
//! after); the first one present in a delta is used.
//!
//! Each engine's table lives in its dialect file under `telemetry/dialect/`,
//! with where its names come from.
//!
//! Invariants: a field is `None` when its metric is absent from the delta (never
//! 0); counters are deltas, gauges are the `after` values; acceptance numbers
//! always travel with the string that defines them.

use serde::{Deserialize, Serialize};

use super::prometheus::MetricsDelta;
use super::TelemetryEngine;

/// Candidate sample names for each common field of one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricNames {
    /// Counter of prompt (prefill) tokens.
    pub prompt_tokens: &'static [&'static str],
    /// Counter of generated tokens.
    pub generation_tokens: &'static [&'static str],
    /// Counter of finished requests (summed over all labels, e.g. finish reasons).
    pub requests_finished: &'static [&'static str],
    /// Gauge of requests being executed.
    pub requests_running: &'static [&'static str],
    /// Gauge of requests queued.
    pub requests_waiting: &'static [&'static str],
    /// Gauge of KV-cache usage as a fraction in 0..=1.
    pub kv_cache_usage: &'static [&'static str],
    /// Counter of prompt tokens served from the prefix cache.
    pub prefix_cache_hits: &'static [&'static str],
    /// Counter of prompt tokens looked up in the prefix cache.
    pub prefix_cache_queries: &'static [&'static str],
    /// Counter of speculative verification steps (drafts).
    pub spec_drafts: &'static [&'static str],
    /// Counter of drafted tokens.
    pub spec_draft_tokens: &'static [&'static str],
    /// Counter of accepted draft tokens (bonus token excluded).
    pub spec_accepted_tokens: &'static [&'static str],
    /// Counter of accepted tokens per draft position, labelled `position`.
    pub spec_accepted_per_pos: &'static [&'static str],
    /// Engine-computed acceptance length gauge, where the engine has no counters.
    pub spec_accept_length_gauge: &'static [&'static str],
    /// Counter of requests preempted (evicted from the running batch).
    pub preemptions: &'static [&'static str],
    /// Gauge of the power the engine's GPUs draw, W (only engines that model it).
    pub power_watts: &'static [&'static str],
}

/// No metric of this kind.
pub(super) const NONE: &[&str] = &[];

/// The metric-name table of an engine (each kept with the rest of its
/// dialect, in `telemetry/dialect/`).
pub fn metric_names(engine: TelemetryEngine) -> &'static MetricNames {
    match engine {
        TelemetryEngine::Sglang => &super::dialect::sglang::METRICS,
        TelemetryEngine::Vllm => &super::dialect::vllm::METRICS,
        TelemetryEngine::Llamacpp => &super::dialect::llamacpp::METRICS,
        TelemetryEngine::Sim => &super::dialect::sim::METRICS,
    }
}

/// How acceptance length is defined wherever servebench reports it.
pub const ACCEPTANCE_LENGTH_DEFINITION: &str =
    "1 + accepted_tokens / drafts (tokens per verification step, bonus token counted)";

/// How acceptance rate is defined wherever servebench reports it.
pub const ACCEPTANCE_RATE_DEFINITION: &str = "accepted_tokens / draft_tokens";

/// Speculative-decoding counter increases over one measurement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecDecodeCounts {
    /// Verification steps; `None` when the source does not count them.
    pub drafts: Option<f64>,
    /// Tokens proposed by the drafter.
    pub draft_tokens: Option<f64>,
    /// Draft tokens the target model accepted (bonus token not included).
    pub accepted_tokens: Option<f64>,
    /// Accepted tokens per draft position, position 0 first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_per_position: Vec<f64>,
}

/// Speculative acceptance derived from [`SpecDecodeCounts`], with its definitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecAcceptance {
    /// Mean tokens emitted per verification step; `None` without drafts.
    pub acceptance_length: Option<f64>,
    /// The formula behind `acceptance_length`.
    pub acceptance_length_definition: String,
    /// Fraction of drafted tokens accepted; `None` without draft tokens.
    pub acceptance_rate: Option<f64>,
    /// The formula behind `acceptance_rate`.
    pub acceptance_rate_definition: String,
    /// Per-position acceptance: accepted at position i / drafts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_position_rate: Vec<f64>,
    /// True when drafts were made but none accepted (see [`is_spec_suspicious`]).
    pub suspicious: bool,
}

/// Computes acceptance length and rate from counter increases.
pub fn spec_acceptance(counts: &SpecDecodeCounts) -> SpecAcceptance {
    let positive = |v: Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
    let acceptance_length = match (positive(counts.drafts), counts.accepted_tokens) {
        (Some(d), Some(a)) if a.is_finite() => Some(1.0 + a / d),
        _ => None,
    };
    let acceptance_rate = match (positive(counts.draft_tokens), counts.accepted_tokens) {
        (Some(t), Some(a)) if a.is_finite() => Some(a / t),
        _ => None,
    };
    let per_position_rate = match positive(counts.drafts) {
        Some(d) => counts.accepted_per_position.iter().map(|a| a / d).collect(),
        None => Vec::new(),
    };
    SpecAcceptance {
        acceptance_length,
        acceptance_length_definition: ACCEPTANCE_LENGTH_DEFINITION.to_string(),
        acceptance_rate,
        acceptance_rate_definition: ACCEPTANCE_RATE_DEFINITION.to_string(),
        per_position_rate,
        suspicious: is_spec_suspicious(counts),
    }
}

/// True when the drafter proposed work but the target accepted nothing.
///
/// A speculative config that drafts and never accepts is broken (wrong draft
/// model, kernel bug), so its throughput must not be reported as a result.
pub fn is_spec_suspicious(counts: &SpecDecodeCounts) -> bool {
    let drafted = counts.drafts.unwrap_or(0.0) > 0.0 || counts.draft_tokens.unwrap_or(0.0) > 0.0;
    drafted && counts.accepted_tokens.unwrap_or(0.0) <= 0.0
}

/// Sums of llama.cpp per-response `timings.draft_n` / `timings.draft_n_accepted`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftTotals {
    /// Responses that carried a `timings` object.
    pub responses: u64,
    /// Sum of `draft_n` (tokens drafted).
    pub draft_n: u64,
    /// Sum of `draft_n_accepted` (draft tokens accepted).
    pub draft_n_accepted: u64,
}

impl DraftTotals {
    /// As counts; llama.cpp's timings do not count verification steps, so no length.
    pub fn to_counts(self) -> SpecDecodeCounts {
        SpecDecodeCounts {
            drafts: None,
            draft_tokens: Some(self.draft_n as f64),
            accepted_tokens: Some(self.draft_n_accepted as f64),
            accepted_per_position: Vec::new(),
        }
    }
}

/// Sums llama.cpp draft counters over response bodies or final stream chunks.
///
/// Each value may be a whole response (with a `timings` object) or the
/// `timings` object itself. `draft_n` is absent when speculation drafted
/// nothing for that response, which counts as zero.
pub fn sum_llamacpp_timings<'a, I>(responses: I) -> DraftTotals
where
    I: IntoIterator<Item = &'a serde_json::Value>,
{
    let mut totals = DraftTotals::default();
    for value in responses {
        let timings = match value.get("timings") {
            Some(t) if t.is_object() => t,
            _ if value.get("predicted_n").is_some() || value.get("draft_n").is_some() => value,
            _ => continue,
        };
        totals.responses += 1;
        totals.draft_n = totals
            .draft_n
            .saturating_add(json_count(timings.get("draft_n")));
        totals.draft_n_accepted = totals
            .draft_n_accepted
            .saturating_add(json_count(timings.get("draft_n_accepted")));
    }
    totals
}

fn json_count(v: Option<&serde_json::Value>) -> u64 {
    match v {
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .unwrap_or(0),
        _ => 0,
    }
}

/// The engine-neutral view of one measurement's metrics delta.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommonMetrics {
    /// Engine whose names were used.
    pub engine: TelemetryEngine,
    /// Prompt tokens processed during the interval.
    pub prompt_tokens: Option<f64>,
    /// Tokens generated during the interval.
    pub generation_tokens: Option<f64>,
    /// Requests finished during the interval.
    pub requests_finished: Option<f64>,
    /// Requests running at the `after` scrape.
    pub requests_running: Option<f64>,
    /// Requests waiting at the `after` scrape.
    pub requests_waiting: Option<f64>,
    /// KV-cache usage fraction at the `after` scrape (largest over engines).
    pub kv_cache_usage: Option<f64>,
    /// Prompt tokens served from the prefix cache during the interval.
    pub prefix_cache_hits: Option<f64>,
    /// Prompt tokens looked up in the prefix cache during the interval.
    pub prefix_cache_queries: Option<f64>,
    /// Speculative counters, when the engine exports any.
    pub spec: Option<SpecDecodeCounts>,
    /// Acceptance derived from `spec`.
    pub spec_acceptance: Option<SpecAcceptance>,
    /// An engine-computed acceptance length gauge (SGLang), as reported, window unknown.
    pub spec_accept_length_reported: Option<f64>,
    /// Metric names whose counters were reset during the interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counter_resets: Vec<String>,
}

fn first_counter(delta: &MetricsDelta, names: &[&str], resets: &mut Vec<String>) -> Option<f64> {
    names.iter().find_map(|n| {
        let v = delta.counter(n)?;
        if delta.was_reset(n) {
            resets.push((*n).to_string());
        }
        Some(v)
    })
}

fn first_gauge_sum(delta: &MetricsDelta, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| delta.gauge_sum(n))
}

fn first_gauge_max(delta: &MetricsDelta, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| delta.gauge_max(n))
}

/// Maps a metrics delta to common fields using the engine's name table.
///
/// Counts (tokens, requests) are summed over label sets so data-parallel
/// engines add up; usage fractions take the largest value, the one that
/// limits admission.
pub fn common_from_delta(engine: TelemetryEngine, delta: &MetricsDelta) -> CommonMetrics {
    let names = metric_names(engine);
    let mut resets = Vec::new();
    let prompt_tokens = first_counter(delta, names.prompt_tokens, &mut resets);
    let prefix_cache_hits = first_counter(delta, names.prefix_cache_hits, &mut resets);
    let mut prefix_cache_queries = first_counter(delta, names.prefix_cache_queries, &mut resets);
    if engine == TelemetryEngine::Llamacpp && prefix_cache_queries.is_none() {
        if let (Some(hits), Some(processed)) = (prefix_cache_hits, prompt_tokens) {
            prefix_cache_queries = Some(hits + processed);
        }
    }

    let drafts = first_counter(delta, names.spec_drafts, &mut resets);
    let draft_tokens = first_counter(delta, names.spec_draft_tokens, &mut resets);
    let accepted_tokens = first_counter(delta, names.spec_accepted_tokens, &mut resets);
    let accepted_per_position = names
        .spec_accepted_per_pos
        .iter()
        .map(|n| per_position(delta, n))
        .find(|v| !v.is_empty())
        .unwrap_or_default();
    let spec = (drafts.is_some() || draft_tokens.is_some() || accepted_tokens.is_some()).then_some(
        SpecDecodeCounts {
            drafts,
            draft_tokens,
            accepted_tokens,
            accepted_per_position,
        },
    );
    let spec_acceptance = spec.as_ref().map(spec_acceptance);
    let generation_tokens = first_counter(delta, names.generation_tokens, &mut resets);
    let requests_finished = first_counter(delta, names.requests_finished, &mut resets);

    resets.sort();
    resets.dedup();
    CommonMetrics {
        engine,
        prompt_tokens,
        generation_tokens,
        requests_finished,
        requests_running: first_gauge_sum(delta, names.requests_running),
        requests_waiting: first_gauge_sum(delta, names.requests_waiting),
        kv_cache_usage: first_gauge_max(delta, names.kv_cache_usage),
        prefix_cache_hits,
        prefix_cache_queries,
        spec,
        spec_acceptance,
        spec_accept_length_reported: first_gauge_max(delta, names.spec_accept_length_gauge),
        counter_resets: resets,
    }
}

/// Accepted tokens per position, ordered by the numeric `position` label.
fn per_position(delta: &MetricsDelta, name: &str) -> Vec<f64> {
    let by_label = delta.counter_by_label(name, "position");
    let mut indexed: Vec<(usize, f64)> = by_label
        .iter()
        .filter_map(|(k, v)| k.parse::<usize>().ok().map(|i| (i, *v)))
        .collect();
    indexed.sort_by_key(|(i, _)| *i);
    // Positions are dense from 0 in every engine that exports them; a gap
    // would misalign the vector, so fill it with zero rather than shifting.
    let len = indexed.last().map_or(0, |(i, _)| i + 1).min(1024);
    let mut out = vec![0.0; len];
    for (i, v) in indexed {
        if let Some(slot) = out.get_mut(i) {
            *slot = v;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::prometheus::{delta, parse};

    fn d(before: &str, after: &str) -> MetricsDelta {
        delta(&parse(before).unwrap(), &parse(after).unwrap())
    }

    #[test]
    fn acceptance_counts_the_bonus_token() {
        let counts = SpecDecodeCounts {
            drafts: Some(10.0),
            draft_tokens: Some(30.0),
            accepted_tokens: Some(18.0),
            accepted_per_position: vec![8.0, 6.0, 4.0],
        };
        let a = spec_acceptance(&counts);
        assert_eq!(a.acceptance_length, Some(2.8));
        assert_eq!(a.acceptance_rate, Some(0.6));
        assert_eq!(a.per_position_rate, vec![0.8, 0.6, 0.4]);
        assert!(a
            .acceptance_length_definition
            .contains("bonus token counted"));
        assert_eq!(a.acceptance_rate_definition, ACCEPTANCE_RATE_DEFINITION);
        assert!(!a.suspicious);
    }

    #[test]
    fn zero_accepted_is_suspicious_and_zero_drafts_gives_no_length() {
        let none_accepted = SpecDecodeCounts {
            drafts: Some(5.0),
            draft_tokens: Some(15.0),
            accepted_tokens: Some(0.0),
            accepted_per_position: vec![],
        };
        assert!(is_spec_suspicious(&none_accepted));
        assert!(spec_acceptance(&none_accepted).suspicious);

        let idle = SpecDecodeCounts {
            drafts: Some(0.0),
            draft_tokens: Some(0.0),
            accepted_tokens: Some(0.0),
            accepted_per_position: vec![],
        };
        assert!(!is_spec_suspicious(&idle));
        let a = spec_acceptance(&idle);
        assert_eq!(a.acceptance_length, None);
        assert_eq!(a.acceptance_rate, None);
    }

    #[test]
    fn llamacpp_timings_are_summed() {
        let bodies: Vec<serde_json::Value> = vec![
            serde_json::json!({"timings": {"predicted_n": 64, "draft_n": 40, "draft_n_accepted": 31}}),
            serde_json::json!({"timings": {"predicted_n": 64}}),
            serde_json::json!({"choices": [], "usage": {"completion_tokens": 3}}),
            serde_json::json!({"predicted_n": 10, "draft_n": 8, "draft_n_accepted": 2}),
            serde_json::json!({"timings": {"draft_n": -4, "draft_n_accepted": "x"}}),
        ];
        let t = sum_llamacpp_timings(&bodies);
        assert_eq!(t.responses, 4);
        assert_eq!(t.draft_n, 48);
        assert_eq!(t.draft_n_accepted, 33);
        let a = spec_acceptance(&t.to_counts());
        assert_eq!(a.acceptance_length, None);
        assert_eq!(a.acceptance_rate, Some(33.0 / 48.0));
    }

    #[test]
    fn vllm_delta_maps_to_common_fields() {
        let before = "\
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 100.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 50.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"m\"} 1.0
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 10.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 20.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 13.0
";
        let after = "\
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 1100.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 2098.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"m\"} 9.0
vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"} 2.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 110.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 220.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 163.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"1\"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} 90.0
";
        let c = common_from_delta(TelemetryEngine::Vllm, &d(before, after));
        assert_eq!(c.prompt_tokens, Some(1000.0));
        assert_eq!(c.generation_tokens, Some(2048.0));
        assert_eq!(c.requests_finished, Some(10.0));
        assert_eq!(c.requests_running, Some(3.0));
        assert_eq!(c.requests_waiting, Some(0.0));
        assert_eq!(c.kv_cache_usage, Some(0.25));
        assert_eq!(c.prefix_cache_hits, None);
        let spec = c.spec.as_ref().unwrap();
        assert_eq!(spec.drafts, Some(100.0));
        assert_eq!(spec.accepted_per_position, vec![90.0, 60.0]);
        let a = c.spec_acceptance.as_ref().unwrap();
        assert_eq!(a.acceptance_length, Some(2.5));
        assert_eq!(a.acceptance_rate, Some(0.75));
        assert!(c.counter_resets.is_empty());
    }

    #[test]
    fn older_vllm_names_are_used_when_current_ones_are_absent() {
        let after = "\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name=\"m\"} 30.0
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 40.0
";
        let c = common_from_delta(TelemetryEngine::Vllm, &d("", after));
        assert_eq!(c.kv_cache_usage, Some(0.5));
        assert_eq!(c.prefix_cache_hits, Some(30.0));
        assert_eq!(c.prefix_cache_queries, Some(40.0));
        assert!(c.spec.is_none());
    }

    #[test]
    fn llamacpp_reset_is_flagged_and_queries_are_derived() {
        let before = "\
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 500
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 10
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 9000
";
        let after = "\
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 800
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 110
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 120
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 4
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 16
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 0
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
";
        let c = common_from_delta(TelemetryEngine::Llamacpp, &d(before, after));
        assert_eq!(c.prompt_tokens, Some(300.0));
        assert_eq!(c.prefix_cache_hits, Some(100.0));
        assert_eq!(c.prefix_cache_queries, Some(400.0));
        assert_eq!(c.generation_tokens, Some(120.0));
        assert_eq!(
            c.counter_resets,
            vec!["llamacpp:tokens_predicted_total".to_string()]
        );
        assert_eq!(c.requests_finished, None);
        assert_eq!(c.kv_cache_usage, None);
        assert!(c.spec_acceptance.as_ref().unwrap().suspicious);
    }

    #[test]
    fn sim_names_are_the_ones_the_simulator_exports() {
        let names = metric_names(TelemetryEngine::Sim);
        let all: Vec<&str> = [
            names.requests_running,
            names.requests_waiting,
            names.prompt_tokens,
            names.generation_tokens,
            names.requests_finished,
            names.kv_cache_usage,
            names.spec_drafts,
            names.spec_draft_tokens,
            names.spec_accepted_tokens,
            names.power_watts,
        ]
        .concat();
        assert_eq!(
            all,
            vec![
                "sim:num_requests_running",
                "sim:num_requests_waiting",
                "sim:prompt_tokens_total",
                "sim:generation_tokens_total",
                "sim:request_success_total",
                "sim:kv_cache_usage_perc",
                "sim:spec_decode_num_drafts_total",
                "sim:spec_decode_num_draft_tokens_total",
                "sim:spec_decode_num_accepted_tokens_total",
                "sim:power_watts",
            ]
        );
    }

    #[test]
    fn every_table_uses_its_engine_prefix() {
        for engine in TelemetryEngine::ALL {
            let n = metric_names(engine);
            let prefix = format!("{}:", engine.as_str());
            for list in [
                n.prompt_tokens,
                n.generation_tokens,
                n.requests_finished,
                n.requests_running,
                n.requests_waiting,
                n.kv_cache_usage,
                n.prefix_cache_hits,
                n.prefix_cache_queries,
                n.spec_drafts,
                n.spec_draft_tokens,
                n.spec_accepted_tokens,
                n.spec_accepted_per_pos,
                n.spec_accept_length_gauge,
                n.preemptions,
                n.power_watts,
            ] {
                for name in list {
                    assert!(name.starts_with(&prefix), "{name} in {engine} table");
                }
            }
        }
    }
}
