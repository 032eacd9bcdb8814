//! How the built-in simulator speaks: the names of its metrics and the
//! phrases of its log (ready line, KV capacity and limits, decode reports).
//!
//! Where its metric names come from (checked against its code):
//! sim: the names servebench's simulator exports (see the simulator module).

use crate::telemetry::dialect::sglang::sglang_decode_batch;
use crate::telemetry::engine_metrics::{MetricNames, NONE};
use crate::telemetry::logscan::text::u64_after;
use crate::telemetry::logscan::{set, Scanner};

/// Its metrics: names in order of preference, current first.
pub const METRICS: MetricNames = MetricNames {
    prompt_tokens: &["sim:prompt_tokens_total"],
    generation_tokens: &["sim:generation_tokens_total"],
    requests_finished: &["sim:request_success_total"],
    requests_running: &["sim:num_requests_running"],
    requests_waiting: &["sim:num_requests_waiting"],
    kv_cache_usage: &["sim:kv_cache_usage_perc"],
    prefix_cache_hits: NONE,
    prefix_cache_queries: NONE,
    spec_drafts: &["sim:spec_decode_num_drafts_total"],
    spec_draft_tokens: &["sim:spec_decode_num_draft_tokens_total"],
    spec_accepted_tokens: &["sim:spec_decode_num_accepted_tokens_total"],
    spec_accepted_per_pos: NONE,
    spec_accept_length_gauge: NONE,
    preemptions: NONE,
    power_watts: &["sim:power_watts"],
};

impl Scanner {
    pub(in crate::telemetry) fn sim(&mut self, line_number: usize, body: &str) {
        if body.contains("sim: ready on") {
            self.ready(line_number, body);
        }
        if body.contains("sim: kv capacity") {
            set(
                &mut self.facts.kv_cache_tokens,
                u64_after(body, "kv capacity"),
            );
            set(
                &mut self.facts.max_running_requests,
                u64_after(body, "max running requests"),
            );
            set(
                &mut self.facts.context_length,
                u64_after(body, "context length"),
            );
        }
        // The simulator may print SGLang-style decode lines; reading them
        // costs nothing and keeps one decode format for both.
        if let Some(batch) = sglang_decode_batch(line_number, body) {
            self.decode(batch);
        }
    }
}
