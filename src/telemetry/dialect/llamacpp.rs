//! How llama.cpp speaks: the names of its metrics and the phrases of its log
//! (ready line, start-up memory and limits, decode reports).
//!
//! Where its metric names come from (checked against its code):
//! llama.cpp: `tools/server/server-task.cpp`
//! (`server_task_result_metrics::to_metrics`; `tools/server/server.cpp` in
//! older trees). `llamacpp:kv_cache_usage_ratio` existed only in builds
//! before ggml-org/llama.cpp PR #13660 removed it; `llamacpp:prompt_tokens_total`
//! excludes cached prompt tokens, which `llamacpp:prompt_tokens_cached_total`
//! counts in newer builds.

use crate::telemetry::engine_metrics::{MetricNames, NONE};
use crate::telemetry::logscan::text::{
    leading_number, mem_after, mem_after_paren, num_after, number_before_key, to_u64, u64_after,
    u64_before,
};
use crate::telemetry::logscan::{set, DecodeBatch, Scanner};

/// Its metrics: names in order of preference, current first.
pub const METRICS: MetricNames = MetricNames {
    prompt_tokens: &["llamacpp:prompt_tokens_total"],
    generation_tokens: &["llamacpp:tokens_predicted_total"],
    requests_finished: NONE,
    requests_running: &["llamacpp:requests_processing"],
    requests_waiting: &["llamacpp:requests_deferred"],
    kv_cache_usage: &["llamacpp:kv_cache_usage_ratio"],
    prefix_cache_hits: &["llamacpp:prompt_tokens_cached_total"],
    // Derived in `common_from_delta`: processed + cached prompt tokens.
    prefix_cache_queries: NONE,
    spec_drafts: &["llamacpp:spec_decode_num_drafts_total"],
    spec_draft_tokens: &["llamacpp:spec_decode_num_draft_tokens_total"],
    spec_accepted_tokens: &["llamacpp:spec_decode_num_accepted_tokens_total"],
    spec_accepted_per_pos: &["llamacpp:spec_decode_num_accepted_tokens_per_pos_total"],
    spec_accept_length_gauge: NONE,
    preemptions: NONE,
    power_watts: NONE,
};

impl Scanner {
    pub(in crate::telemetry) fn llamacpp(&mut self, line_number: usize, body: &str) {
        if body.contains("server is listening on")
            || body.contains("llama_server: listening on")
            || (body.contains("all slots are idle") && self.facts.ready.is_none())
        {
            self.ready(line_number, body);
        }
        if body.starts_with("print_info:") || body.starts_with("llm_load_print_meta:") {
            set(
                &mut self.facts.weights_gib,
                mem_after(body, "file size").or_else(|| mem_after(body, "model size")),
            );
        }
        if body.contains("model buffer size") {
            if let Some(gib) = mem_after(body, "model buffer size") {
                self.llamacpp_buffers_mib += gib * 1024.0;
            }
        }
        // Both the current `llama_context:` and the older
        // `llama_new_context_with_model:` print the KV cell count as n_ctx.
        if body.starts_with("llama_context:") || body.starts_with("llama_new_context_with_model:") {
            set(&mut self.facts.kv_cache_tokens, u64_after(body, "n_ctx"));
            set(&mut self.facts.context_length, u64_after(body, "n_ctx_seq"));
            set(
                &mut self.facts.context_length,
                u64_after(body, "n_ctx_per_seq"),
            );
            if let Some(gib) = mem_after(body, "KV self size") {
                self.facts.kv_cache_gib = Some(gib);
                set(&mut self.facts.k_cache_gib, mem_after_paren(body, "K ("));
                set(&mut self.facts.v_cache_gib, mem_after_paren(body, "V ("));
            }
        }
        if body.starts_with("llama_kv_cache") && body.contains(" cells") {
            set(&mut self.facts.kv_cache_gib, mem_after(body, "size"));
            set(&mut self.facts.kv_cache_tokens, u64_before(body, " cells"));
            set(&mut self.facts.k_cache_gib, mem_after_paren(body, "K ("));
            set(&mut self.facts.v_cache_gib, mem_after_paren(body, "V ("));
        }
        set(
            &mut self.facts.max_running_requests,
            u64_after(body, "n_slots"),
        );
        if body.contains("new slot") {
            set(&mut self.facts.context_length, u64_after(body, "n_ctx"));
            set(
                &mut self.facts.context_length,
                u64_after(body, "n_ctx_slot"),
            );
        }
        // Builds from early 2024 list slots as `-> Slot N - max context: C`.
        if let Some(rest) = body.trim_start().strip_prefix("-> Slot") {
            if let Some(id) = leading_number(rest.trim_start()).and_then(|(v, _)| to_u64(v)) {
                let slots = id.saturating_add(1);
                self.legacy_slots = Some(self.legacy_slots.map_or(slots, |s| s.max(slots)));
            }
            set(
                &mut self.facts.context_length,
                u64_after(body, "max context"),
            );
        }
        let trimmed = body.trim_start();
        if trimmed.starts_with("eval time") && trimmed.contains("tokens per second") {
            let batch = DecodeBatch {
                line_number,
                gen_throughput: number_before_key(trimmed, "tokens per second"),
                ..DecodeBatch::default()
            };
            self.decode(batch);
        }
        if body.contains("draft acceptance rate") {
            if let Some(rate) = num_after(body, "draft acceptance rate =") {
                if let Some(last) = self.facts.decode.last.as_mut() {
                    last.accept_rate = Some(rate);
                }
            }
        }
    }
}
