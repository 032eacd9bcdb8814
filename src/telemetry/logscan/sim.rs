//! What the built-in simulator's log says: its ready line, KV capacity and
//! limits, and SGLang-style decode lines.

use super::sglang::sglang_decode_batch;
use super::text::u64_after;
use super::{set, Scanner};

impl Scanner {
    pub(super) fn sim(&mut self, line_number: usize, body: &str) {
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
