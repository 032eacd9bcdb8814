//! servebench's own time to build a cell's prompts: exact-length prompts
//! are counted with a tokenizer as they are made, which for long prompts
//! takes longer than the load they make.
//!
//! A trace replay builds its first [`REPLAY_AHEAD`] requests before its
//! schedule starts and the rest while it runs, each prompt counted whole
//! and each new block fitted to its length: the time grows with the
//! prompt tokens built, at a rate set by the counter. Measured on the
//! reference machine (release build, 2 cores) building requests of the
//! Mooncake synthetic slice (blocks of 512 tokens, almost all of their
//! own), as the time a cell took beyond its load:
//!
//! | counter | prompt tokens | build | tokens/s |
//! | --- | --- | --- | --- |
//! | SmolLM2's `tokenizer.json`, in process | 3.85 M (300 requests) | 33.0 s | 117 k |
//! | the simulator's `/tokenize` | 3.85 M (300 requests) | 21.0 s | 183 k |
//! | llama.cpp's `/tokenize` (xllamacpp) | 0.25 M, 0.51 M (10, 40 requests) | 15 s, 30 s | 17 k |
//! | vLLM's `/tokenize` (CPU build) | 0.25 M, 0.51 M (10, 40 requests) | 38 s, 77 s | 6.6 k |
//!
//! A server's tokenizer answers each count over HTTP, and a block is
//! counted several times while it is fitted, so the round trip dominates:
//! llama.cpp tokenized 85 k tokens in one call in 0.21 s (400 k tokens/s).
//! SGLang's endpoint is Python behind HTTP like vLLM's and takes its rate;
//! so do servers of unknown kind. Synthetic prompts of exact length are all
//! built before their level starts, at the same rates.

use crate::campaign::{PromptSource, WorkloadPoint};
use crate::engine::EngineKind;
use crate::load::schedule::LoadShape;

pub use crate::load::workloads::REPLAY_AHEAD;

/// Prompt tokens built per second when counted with a `tokenizer.json` in process.
pub const LOCAL_TOKENIZER_TOK_S: f64 = 117_000.0;

/// Prompt tokens built per second when counted through `engine`'s
/// `/tokenize` endpoint (see the table above).
pub fn server_tokenize_tok_s(engine: EngineKind) -> f64 {
    match engine {
        EngineKind::Sim => 183_000.0,
        EngineKind::Llamacpp => 17_000.0,
        EngineKind::Vllm | EngineKind::Sglang | EngineKind::Openai | EngineKind::Command => 6_600.0,
    }
}

/// Synthetic prompts shorter than this are random words, not counted.
const MIN_EXACT_TOKENS: u64 = crate::load::workloads::MIN_EXACT_TOKENS;

/// How a campaign's prompts are counted as they are built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PromptCounter {
    /// The model's `tokenizer.json`, in process.
    LocalTokenizer,
    /// The server's `/tokenize` endpoint (an approximation when it has none).
    ServerTokenize(EngineKind),
}

/// The time building a cell's prompts takes on this machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PromptBuild {
    /// How prompts are counted.
    pub counter: PromptCounter,
    /// This machine's CPU speed against the reference machine.
    pub cpu_factor: f64,
}

impl PromptBuild {
    /// Prompt tokens built per second here.
    pub fn tokens_per_s(&self) -> f64 {
        let rate = match self.counter {
            PromptCounter::LocalTokenizer => LOCAL_TOKENIZER_TOK_S,
            PromptCounter::ServerTokenize(engine) => server_tokenize_tok_s(engine),
        };
        rate * self.cpu_factor.max(1e-3)
    }

    /// Seconds the cell `w` adds to its load by building prompts: what is
    /// built before the load starts, plus, for a replay, what building the
    /// rest takes beyond the replay's own span (the schedule then waits for
    /// its prompts).
    pub fn cell_s(&self, w: &WorkloadPoint) -> f64 {
        let rate = self.tokens_per_s();
        match (&w.source, w.load) {
            (
                PromptSource::Trace {
                    requests,
                    mean_input,
                    span_s,
                    ..
                },
                load,
            ) => {
                let n = w.num_requests.map_or(*requests, |m| m.min(*requests)) as f64;
                let all_s = n * mean_input / rate;
                let head_s = all_s * (REPLAY_AHEAD as f64).min(n) / n.max(1.0);
                let rest_s = all_s - head_s;
                let replay_s = match load {
                    LoadShape::Replay { time_scale, .. } => span_s / time_scale.max(1e-9),
                    // Under a concurrency or a rate the rest is built as
                    // fast as it is sent; the load's own estimate covers it.
                    _ => f64::INFINITY,
                };
                head_s + (rest_s - replay_s).max(0.0)
            }
            (PromptSource::Synthetic, _) if w.input_len >= MIN_EXACT_TOKENS => {
                let n = w.num_requests.unwrap_or(0) + w.warmup;
                (n * w.input_len) as f64 / rate
            }
            _ => 0.0,
        }
    }
}

/// Building beyond which `plan` suggests counting prompts in process, s.
pub const SLOW_BUILD_S: f64 = 30.0;

impl PromptBuild {
    /// A warning for `plan` when the cell's prompts are counted through a
    /// server and that takes long: a `tokenizer.json` counts them faster.
    pub fn advice(&self, w: &WorkloadPoint) -> Option<String> {
        if !matches!(self.counter, PromptCounter::ServerTokenize(_)) {
            return None;
        }
        let slow = self.cell_s(w);
        if slow <= SLOW_BUILD_S {
            return None;
        }
        let local = PromptBuild {
            counter: PromptCounter::LocalTokenizer,
            ..*self
        };
        Some(format!(
            "building its prompts through the server's /tokenize takes about {slow:.0} s ({:.1} k prompt tokens/s); `[model] tokenizer` (the model's tokenizer.json) counts them in process in about {:.0} s",
            self.tokens_per_s() / 1000.0,
            local.cell_s(w)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::Campaign;

    fn replay(scale: f64, requests: u64, mean_input: f64, span_s: f64) -> WorkloadPoint {
        let text = r#"
[campaign]
name = "t"
[model]
path = "m"
[engine]
kind = "sim"
[[server]]
id = "a"
[[workload]]
name = "w"
input_len = 64
output_len = 8
concurrency = 1
num_requests = 4
"#;
        let (raw, src) = crate::campaign::parse(std::path::Path::new("c.toml"), text).unwrap();
        let c: Campaign = crate::campaign::resolve::resolve(raw, &src).unwrap();
        let mut w = c.workloads[0].clone();
        w.source = PromptSource::Trace {
            path: "t.jsonl".into(),
            format: crate::workload::trace::TraceFormat::Mooncake,
            digest: "0".into(),
            settings: Default::default(),
            requests,
            span_s,
            mean_input,
            mean_output: 10.0,
        };
        w.num_requests = Some(requests);
        w.load = LoadShape::Replay {
            time_scale: scale,
            max_concurrency: None,
        };
        w
    }

    #[test]
    fn a_replay_waits_for_its_first_prompts_and_for_the_rest_only_beyond_its_span() {
        let b = PromptBuild {
            counter: PromptCounter::ServerTokenize(EngineKind::Sim),
            cpu_factor: 1.0,
        };
        let rate = b.tokens_per_s();
        // 300 requests: all built before the schedule starts.
        let w = replay(1000.0, 300, 12_840.0, 86.8);
        let all = 300.0 * 12_840.0 / rate;
        assert!((b.cell_s(&w) - all).abs() < 1e-9);
        assert!((all - 21.05).abs() < 0.1, "{all}");
        // 1,024 requests: half before the schedule, the other half while
        // it runs, which a slow schedule hides and a fast one does not.
        let slow = replay(1.0, 1024, 1000.0, 10_000.0);
        let head = 512.0 * 1000.0 / rate;
        assert!((b.cell_s(&slow) - head).abs() < 1e-9);
        let fast = replay(1000.0, 1024, 1000.0, 1000.0);
        assert!((b.cell_s(&fast) - (2.0 * head - 1.0)).abs() < 1e-9);
        // In process, faster than the simulator's endpoint by its rate; a
        // slower machine builds slower.
        let local = PromptBuild {
            counter: PromptCounter::LocalTokenizer,
            cpu_factor: 0.5,
        };
        assert!((local.cell_s(&w) - 300.0 * 12_840.0 / (LOCAL_TOKENIZER_TOK_S * 0.5)).abs() < 1e-9);
    }

    #[test]
    fn a_long_build_through_a_server_suggests_the_tokenizer_file() {
        let w = replay(1000.0, 300, 12_840.0, 86.8);
        let vllm = PromptBuild {
            counter: PromptCounter::ServerTokenize(EngineKind::Vllm),
            cpu_factor: 1.0,
        };
        let advice = vllm.advice(&w).unwrap();
        assert!(
            advice.contains("about 584 s (6.6 k prompt tokens/s)"),
            "{advice}"
        );
        assert!(advice.contains("in about 33 s"), "{advice}");
        // Short, or already in process: nothing to say.
        assert_eq!(vllm.advice(&replay(1000.0, 10, 1000.0, 1.0)), None);
        let local = PromptBuild {
            counter: PromptCounter::LocalTokenizer,
            cpu_factor: 1.0,
        };
        assert_eq!(local.advice(&w), None);
    }
}
