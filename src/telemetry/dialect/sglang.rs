//! How SGLang speaks: the names of its metrics and the phrases of its log
//! (ready line, start-up memory and limits, decode reports).
//!
//! Where its metric names come from (checked against its code):
//! SGLang: `python/sglang/srt/metrics/collector.py` (`SchedulerMetricsCollector`,
//! `TokenizerMetricsCollector`). SGLang exports speculative decoding only as
//! the windowed gauges `sglang:spec_accept_length` / `sglang:spec_accept_rate`,
//! not as counters, so no acceptance can be differenced from its `/metrics`.

use crate::telemetry::engine_metrics::{MetricNames, NONE};
use crate::telemetry::logscan::text::{find_key, leading_number, mem_after, to_u64, u64_after};
use crate::telemetry::logscan::{set, DecodeBatch, Scanner};

/// Its metrics: names in order of preference, current first.
pub const METRICS: MetricNames = MetricNames {
    prompt_tokens: &["sglang:prompt_tokens_total"],
    generation_tokens: &["sglang:generation_tokens_total"],
    requests_finished: &["sglang:num_requests_total"],
    requests_running: &["sglang:num_running_reqs"],
    requests_waiting: &["sglang:num_queue_reqs"],
    kv_cache_usage: &["sglang:token_usage"],
    prefix_cache_hits: &["sglang:cached_tokens_total"],
    // SGLang's prompt-token counter includes cached tokens, so it is the
    // number of prompt tokens that were looked up in the radix cache.
    prefix_cache_queries: &["sglang:prompt_tokens_total"],
    spec_drafts: NONE,
    spec_draft_tokens: NONE,
    spec_accepted_tokens: NONE,
    spec_accepted_per_pos: NONE,
    spec_accept_length_gauge: &["sglang:spec_accept_length"],
    // Retractions are SGLang's preemptions; the counter's name moved.
    preemptions: &[
        "sglang:num_retracted_requests_total",
        "sglang:num_retracted_reqs_total",
    ],
    power_watts: NONE,
};

impl Scanner {
    pub(in crate::telemetry) fn sglang(&mut self, line_number: usize, body: &str) {
        if body.contains("The server is fired up and ready to roll") {
            self.ready(line_number, body);
        }
        if body.contains("Load weight end") {
            set(&mut self.facts.weights_gib, mem_after(body, "mem usage"));
        }
        if body.contains("KV Cache is allocated") {
            set(&mut self.facts.kv_cache_tokens, u64_after(body, "#tokens"));
            set(&mut self.facts.k_cache_gib, mem_after(body, "K size"));
            set(&mut self.facts.v_cache_gib, mem_after(body, "V size"));
            set(&mut self.facts.kv_cache_gib, mem_after(body, "KV size"));
            if let (None, Some(k), Some(v)) = (
                self.facts.kv_cache_gib,
                self.facts.k_cache_gib,
                self.facts.v_cache_gib,
            ) {
                self.facts.kv_cache_gib = Some(k + v);
            }
        }
        if find_key(body, "max_total_num_tokens=").is_some() {
            set(
                &mut self.facts.max_total_num_tokens,
                u64_after(body, "max_total_num_tokens="),
            );
            set(
                &mut self.facts.max_running_requests,
                u64_after(body, "max_running_requests="),
            );
            set(
                &mut self.facts.context_length,
                u64_after(body, "context_len="),
            );
        }
        if body.contains("Mamba Cache is allocated") {
            self.has_hybrid = true;
            let h = &mut self.hybrid;
            set(
                &mut h.max_mamba_cache_size,
                u64_after(body, "max_mamba_cache_size"),
            );
            set(&mut h.conv_state_gib, mem_after(body, "conv_state size"));
            set(&mut h.ssm_state_gib, mem_after(body, "ssm_state size"));
            set(
                &mut h.intermediate_ssm_state_gib,
                mem_after(body, "intermediate_ssm_state_cache size"),
            );
            set(
                &mut h.intermediate_conv_window_gib,
                mem_after(body, "intermediate_conv_window_cache size"),
            );
        }
        if let Some(batch) = sglang_decode_batch(line_number, body) {
            self.decode(batch);
        }
    }
}

/// Parses `Decode batch. #running-req: 1, ...` and `Decode batch, ...` lines.
pub(in crate::telemetry) fn sglang_decode_batch(
    line_number: usize,
    body: &str,
) -> Option<DecodeBatch> {
    let at = body.find("Decode batch")?;
    let rest = body.get(at + "Decode batch".len()..)?;
    let rest = rest.strip_prefix(['.', ','])?;
    let mut batch = DecodeBatch {
        line_number,
        ..DecodeBatch::default()
    };
    for part in rest.split(',') {
        let Some((key, value)) = part.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        let num = || leading_number(value).map(|(v, _)| v);
        match key {
            "#running-req" => batch.running_requests = num().and_then(to_u64),
            "#token" => batch.num_tokens = num().and_then(to_u64),
            "#full token" => batch.num_tokens = num().and_then(to_u64),
            "token usage" => batch.token_usage = num(),
            "full token usage" => batch.full_token_usage = num(),
            "mamba usage" => batch.mamba_usage = num(),
            "accept len" => batch.accept_length = num(),
            "accept rate" => batch.accept_rate = num(),
            "#queue-req" => batch.queue_requests = num().and_then(to_u64),
            "cuda graph" => {
                batch.cuda_graph = value.parse::<bool>().ok().or(match value {
                    "True" => Some(true),
                    "False" => Some(false),
                    _ => None,
                })
            }
            k if k.starts_with("gen throughput") => batch.gen_throughput = num(),
            _ => {}
        }
    }
    Some(batch)
}
