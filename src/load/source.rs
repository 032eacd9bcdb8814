//! Request sources that turn workload settings into request bodies.

use std::sync::Arc;

use bytes::Bytes;
use rand::Rng;

use super::driver::{PreparedRequest, RequestSource, Work};
use crate::client::openai::{build_body, build_structured_body, Api, PromptBody};
use crate::util::rng::seeded;
use crate::workload::answer_check::AnswerCheck;
use crate::workload::structured::Structured;

const VOCAB: [&str; 32] = [
    "river", "stone", "copper", "lantern", "orbit", "meadow", "signal", "harbor", "velvet",
    "cinder", "quartz", "falcon", "ember", "glacier", "thicket", "prism", "tundra", "willow",
    "cobalt", "saddle", "beacon", "marble", "nectar", "pylon", "rustle", "summit", "timber",
    "vessel", "zephyr", "anchor", "bramble", "canyon",
];

/// Synthetic prompts of N random words, unique per request index and seed.
pub struct SyntheticSource {
    /// API the bodies are built for.
    pub api: Api,
    /// Served model name.
    pub model: String,
    /// Words per prompt.
    pub input_words: u64,
    /// Output tokens asked for.
    pub output_tokens: u64,
    /// Ask for exactly `output_tokens`.
    pub ignore_eos: bool,
    /// Seed mixed with the request index.
    pub seed: u64,
}

impl SyntheticSource {
    /// The prompt text for one request index.
    pub fn prompt(&self, index: u64) -> String {
        let mut rng = seeded(self.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ index);
        let mut s = String::with_capacity(self.input_words as usize * 8);
        // A leading request number keeps prompts distinct even for tiny lengths.
        for i in 0..self.input_words {
            if i > 0 {
                s.push(' ');
            }
            if i == 0 {
                s.push_str(&format!("r{index}"));
            } else {
                s.push_str(VOCAB[rng.random_range(0..VOCAB.len())]);
            }
        }
        s
    }
}

impl RequestSource for SyntheticSource {
    fn next_work(&mut self, index: u64) -> Option<Work> {
        let body = build_body(
            self.api,
            &self.model,
            PromptBody::Text(self.prompt(index)),
            self.output_tokens,
            self.ignore_eos,
        );
        Some(Work::Request(PreparedRequest {
            body: Bytes::from(body),
            planned_input_tokens: None,
            output_tokens: self.output_tokens,
            predicted_cached_tokens: None,
            label: Some("synthetic".into()),
            capture_text: false,
            check: None,
        }))
    }
}

/// One request's prompt, as a [`PromptFn`] makes it.
pub struct Prompt {
    /// The prompt text.
    pub text: String,
    /// Prompt tokens as the server will count them, when known.
    pub planned: Option<u64>,
    /// Prompt kind or source label.
    pub label: Option<String>,
    /// The check its answer must pass, when it has one.
    pub check: Option<Arc<AnswerCheck>>,
    /// Tools or a response format sent with it (chat).
    pub structured: Option<Arc<Structured>>,
}

/// Produces the prompt of a request index.
pub type PromptFn = Box<dyn FnMut(u64) -> Result<Prompt, String> + Send>;

/// A request source over any prompt generator, with bodies built ahead of
/// time so prompt construction never delays a scheduled request.
pub struct PromptFnSource {
    api: Api,
    model: String,
    output_tokens: u64,
    ignore_eos: bool,
    prompt: PromptFn,
    ready: std::collections::HashMap<u64, PreparedRequest>,
}

impl PromptFnSource {
    /// A source sending `prompt(i)` for request `i`.
    pub fn new(
        api: Api,
        model: String,
        output_tokens: u64,
        ignore_eos: bool,
        prompt: PromptFn,
    ) -> Self {
        Self {
            api,
            model,
            output_tokens,
            ignore_eos,
            prompt,
            ready: std::collections::HashMap::new(),
        }
    }

    fn make(&mut self, index: u64) -> Result<PreparedRequest, String> {
        let Prompt {
            text,
            planned,
            label,
            check,
            structured,
        } = (self.prompt)(index)?;
        let body = build_structured_body(
            self.api,
            &self.model,
            PromptBody::Text(text),
            self.output_tokens,
            self.ignore_eos,
            structured.as_deref(),
        );
        Ok(PreparedRequest {
            body: Bytes::from(body),
            planned_input_tokens: planned,
            output_tokens: self.output_tokens,
            predicted_cached_tokens: None,
            label,
            capture_text: false,
            check,
        })
    }

    /// Build requests `0..count` now; an error names the request that failed.
    pub fn prebuild(&mut self, count: u64) -> Result<(), String> {
        for i in 0..count {
            let r = self.make(i).map_err(|e| format!("request {i}: {e}"))?;
            self.ready.insert(i, r);
        }
        Ok(())
    }
}

impl RequestSource for PromptFnSource {
    fn next_work(&mut self, index: u64) -> Option<Work> {
        if let Some(r) = self.ready.remove(&index) {
            return Some(Work::Request(r));
        }
        self.make(index).ok().map(Work::Request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_have_the_asked_word_count_and_differ_per_index() {
        let s = SyntheticSource {
            api: Api::Completions,
            model: "m".into(),
            input_words: 50,
            output_tokens: 8,
            ignore_eos: true,
            seed: 1,
        };
        let a = s.prompt(0);
        let b = s.prompt(1);
        assert_eq!(a.split_ascii_whitespace().count(), 50);
        assert_ne!(a, b);
        assert_eq!(a, s.prompt(0));
    }
}
