//! How vLLM speaks: the names of its metrics and the phrases of its log
//! (ready line, start-up memory and limits, decode reports).
//!
//! Where its metric names come from (checked against its code):
//! vLLM V1: `vllm/v1/metrics/loggers.py` (`PrometheusStatLogger`) and
//! `vllm/v1/spec_decode/metrics.py` (`SpecDecodingProm`). prometheus_client
//! appends `_total` to counters. `vllm:gpu_cache_usage_perc` and
//! `vllm:gpu_prefix_cache_{hits,queries}` are the older names, still emitted
//! as deprecated aliases by early V1 releases.

use crate::telemetry::engine_metrics::{MetricNames, NONE};
use crate::telemetry::logscan::text::{mem_after, num_after, u64_after};
use crate::telemetry::logscan::{set, DecodeBatch, MaxConcurrency, Scanner};

/// Its metrics: names in order of preference, current first.
pub const METRICS: MetricNames = MetricNames {
    prompt_tokens: &["vllm:prompt_tokens_total"],
    generation_tokens: &["vllm:generation_tokens_total"],
    requests_finished: &["vllm:request_success_total"],
    requests_running: &["vllm:num_requests_running"],
    requests_waiting: &["vllm:num_requests_waiting"],
    kv_cache_usage: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
    prefix_cache_hits: &[
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
    ],
    prefix_cache_queries: &[
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
    ],
    spec_drafts: &["vllm:spec_decode_num_drafts_total"],
    spec_draft_tokens: &["vllm:spec_decode_num_draft_tokens_total"],
    spec_accepted_tokens: &["vllm:spec_decode_num_accepted_tokens_total"],
    spec_accepted_per_pos: &["vllm:spec_decode_num_accepted_tokens_per_pos_total"],
    spec_accept_length_gauge: NONE,
    preemptions: &["vllm:num_preemptions_total"],
    power_watts: NONE,
};

impl Scanner {
    pub(in crate::telemetry) fn vllm(&mut self, line_number: usize, body: &str) {
        if body.contains("Application startup complete") {
            self.ready(line_number, body);
        }
        if let Some(gib) = mem_after(body, "Model loading took")
            .or_else(|| mem_after(body, "model weights took"))
            // The CPU build prints only the checkpoint's size.
            .or_else(|| mem_after(body, "Checkpoint size"))
        {
            self.facts.weights_gib = Some(gib);
        }
        set(
            &mut self.facts.kv_cache_gib,
            mem_after(body, "Available KV cache memory"),
        );
        // The CPU build: `Explicitly set (1.0/23.54) GiB for KV cache on
        // node 0.` (VLLM_CPU_KVCACHE_SPACE out of the node's memory).
        if body.contains("GiB for KV cache") {
            set(
                &mut self.facts.kv_cache_gib,
                num_after(body, "Explicitly set ("),
            );
        }
        set(
            &mut self.facts.kv_cache_tokens,
            // `GPU KV cache size` on GPUs, `CPU KV cache size` on the CPU
            // build (and other devices' names elsewhere).
            u64_after(body, "KV cache size"),
        );
        if let (Some(tokens), Some(factor)) = (
            u64_after(body, "Maximum concurrency for"),
            num_after(body, "per request"),
        ) {
            self.facts.max_concurrency = Some(MaxConcurrency {
                tokens_per_request: tokens,
                factor,
            });
            set(&mut self.facts.context_length, Some(tokens));
        }
        set(
            &mut self.facts.context_length,
            u64_after(body, "Using max model len"),
        );
        set(
            &mut self.facts.context_length,
            u64_after(body, "max_seq_len="),
        );
        set(
            &mut self.facts.max_running_requests,
            u64_after(body, "'max_num_seqs'").or_else(|| u64_after(body, "max_num_seqs=")),
        );
        if body.contains("Avg generation throughput") {
            let batch = DecodeBatch {
                line_number,
                running_requests: u64_after(body, "Running"),
                queue_requests: u64_after(body, "Waiting").or_else(|| u64_after(body, "Pending")),
                token_usage: num_after(body, "GPU KV cache usage")
                    .or_else(|| num_after(body, "KV cache usage"))
                    .map(|p| p / 100.0),
                gen_throughput: num_after(body, "Avg generation throughput"),
                ..DecodeBatch::default()
            };
            self.decode(batch);
        }
        if body.contains("SpecDecoding metrics") {
            if let Some(len) = num_after(body, "Mean acceptance length") {
                self.accept(len);
            }
        }
    }
}
