//! The raw record of one request: every statistic is derived from these.
//!
//! Times are milliseconds. `scheduled_ms` and `sent_ms` count from the start
//! of the load level; `ttft_ms`, `e2e_ms` and chunk times count from the
//! moment the request was sent.

use serde::{Deserialize, Serialize};

use crate::failure::Failure;

/// Final status of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Completed with a well-formed stream.
    Ok,
    /// Failed; see `failure`.
    Failed,
}

/// How a request ended, before it is folded into the record.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Completed.
    Ok,
    /// Failed with this evidence.
    Failed(Failure),
}

/// Everything observed about one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// When the schedule wanted it sent, ms since level start.
    pub scheduled_ms: f64,
    /// When it was actually sent, ms since level start.
    pub sent_ms: f64,
    /// Send → first content chunk, ms; absent if none arrived.
    pub ttft_ms: Option<f64>,
    /// Send → first chunk carrying answer text (not only reasoning), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_answer_ms: Option<f64>,
    /// Output tokens spent on reasoning: the usage's
    /// `completion_tokens_details.reasoning_tokens`, else counted from the
    /// chunks that carried only reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Whether `reasoning_tokens` came from the server's usage.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reasoning_from_usage: bool,
    /// Send → last byte of the response, ms.
    pub e2e_ms: Option<f64>,
    /// `[ms since send, tokens]` for every content chunk.
    pub chunks: Vec<(f64, u32)>,
    /// Prompt tokens the client planned to send, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_input_tokens: Option<u64>,
    /// Prompt tokens reported by the server.
    pub input_tokens: Option<u64>,
    /// Output tokens reported by the server (or counted from chunks).
    pub output_tokens: Option<u64>,
    /// Output tokens asked for (`max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_output_tokens: Option<u64>,
    /// Prompt tokens served from the prefix cache, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Prompt tokens an infinite prefix cache would serve, as a trace's
    /// block ids predict (replays of traces with block ids only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_cached_tokens: Option<u64>,
    /// Whether per-chunk token counts came from the server's continuous usage.
    #[serde(default)]
    pub tokens_per_chunk_from_server: bool,
    /// Speculative draft tokens proposed (llama.cpp `timings.draft_n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u64>,
    /// Speculative draft tokens accepted (llama.cpp `timings.draft_n_accepted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_draft_tokens: Option<u64>,
    /// Prompt kind, dataset or scenario label, when the source names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Multi-turn session index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// Turn index within the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Which unit of the level's work it was: the same index (and turn)
    /// asks the same thing on every server at the same workload point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// Times the request was re-sent because a reused connection had been closed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// The answer's text, kept only when a later request needs it (multi-turn).
    #[serde(skip)]
    pub text: Option<String>,
    /// The reply's function calls, until they are judged and answered.
    #[serde(skip)]
    pub tool_calls: Option<super::tool_calls::ToolCalls>,
    /// The functions the reply called, in order (what a turn of an agent
    /// session called, kept after its calls are answered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub called: Vec<String>,
    /// What is kept of a completed answer to judge it: its digest, and its
    /// text for the cell's sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputText>,
    /// Whether the answer passed its prompt's check (a built-in prompt
    /// whose right answer is known); absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_check: Option<bool>,
    /// Why the answer failed its check, in one line (expected against found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_reason: Option<String>,
    /// Final status.
    pub status: Status,
    /// Failure class and evidence when `status` is `failed`.
    pub failure: Option<Failure>,
}

/// What servebench keeps of an answer: enough to tell two answers apart and
/// to judge one, without storing every answer of a large cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputText {
    /// The first 16 hex digits of the SHA-256 of the whole answer text:
    /// equal digests, equal answers.
    pub digest: String,
    /// Characters in the answer.
    pub chars: u64,
    /// The answer itself, for the first answers of a cell up to
    /// `metrics::level::OUTPUT_SAMPLE_BYTES` in all; absent beyond.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl OutputText {
    /// The digest and size of `text`, keeping the text.
    pub fn of(text: String) -> Self {
        let digest = crate::util::hash::sha256_hex(text.as_bytes(), 16);
        OutputText {
            digest,
            chars: text.chars().count() as u64,
            text: Some(text),
        }
    }
}

impl RequestRecord {
    /// A record for a request scheduled and sent at these level-relative times.
    pub fn new(scheduled_ms: f64, sent_ms: f64) -> Self {
        Self {
            scheduled_ms,
            sent_ms,
            ttft_ms: None,
            first_answer_ms: None,
            reasoning_tokens: None,
            reasoning_from_usage: false,
            e2e_ms: None,
            chunks: Vec::new(),
            planned_input_tokens: None,
            input_tokens: None,
            output_tokens: None,
            requested_output_tokens: None,
            cached_tokens: None,
            predicted_cached_tokens: None,
            tokens_per_chunk_from_server: false,
            draft_tokens: None,
            accepted_draft_tokens: None,
            label: None,
            session: None,
            turn: None,
            retries: 0,
            index: None,
            text: None,
            tool_calls: None,
            called: Vec::new(),
            output: None,
            answer_check: None,
            answer_reason: None,
            status: Status::Ok,
            failure: None,
        }
    }

    /// Note a content chunk that arrived `at_ms` after sending.
    pub fn push_chunk(&mut self, at_ms: f64, tokens: u32) {
        if self.ttft_ms.is_none() {
            self.ttft_ms = Some(at_ms);
        }
        self.chunks.push((at_ms, tokens));
    }

    /// Note a chunk that carried answer text: the first one is the time to
    /// the first answer token (after any reasoning).
    pub fn note_answer(&mut self, at_ms: f64) {
        if self.first_answer_ms.is_none() {
            self.first_answer_ms = Some(at_ms);
        }
    }

    /// Record the outcome and the end time.
    pub fn finish(&mut self, outcome: Outcome, end_ms: f64) {
        self.e2e_ms = Some(end_ms);
        match outcome {
            Outcome::Ok => {
                self.status = Status::Ok;
                self.failure = None;
            }
            Outcome::Failed(f) => {
                self.status = Status::Failed;
                self.failure = Some(f);
            }
        }
    }

    /// Whether the request completed.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }

    /// Output tokens that statistics may count: the reported count, but never
    /// more than was asked for (a usage above `max_tokens` is not believable).
    pub fn credible_output_tokens(&self) -> Option<u64> {
        let o = self.output_tokens?;
        Some(self.requested_output_tokens.map_or(o, |q| o.min(q)))
    }

    /// Whether the chunks' token counts are unknown and cannot be right: no
    /// per-chunk counts from the server, and a total the chunks do not add up to.
    pub fn chunk_tokens_unknown(&self) -> bool {
        let carried: u64 = self.chunks.iter().map(|c| u64::from(c.1)).sum();
        !self.tokens_per_chunk_from_server && self.output_tokens.is_some_and(|o| o != carried)
    }

    /// Dispatch lag: how late the request left against its schedule, ms.
    pub fn dispatch_lag_ms(&self) -> f64 {
        (self.sent_ms - self.scheduled_ms).max(0.0)
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}
