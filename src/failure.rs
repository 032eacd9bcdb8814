//! Failure classes: every failed request or cell carries one, with evidence.
//!
//! A failure is data, never a zero: statistics skip failed requests and count
//! them by class instead (SPEC section 8).

use serde::{Deserialize, Serialize};

use crate::telemetry::FailureKind;

/// Why a request or a cell did not produce a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The server process did not start.
    StartFailed,
    /// The server never became healthy in time.
    HealthTimeout,
    /// The server died while a cell was running.
    Crashed,
    /// HTTP 400 saying the input is longer than the context.
    ContextOverflow,
    /// Any other non-success HTTP status.
    HttpError,
    /// The request (or cell) ran past its time limit.
    Timeout,
    /// A malformed or truncated stream.
    Protocol,
    /// The connection could not be made or was reset.
    Connection,
    /// It ran, but the numbers are not believable.
    Suspicious,
    /// It ran fast, but its answers are degenerate (a word or a short unit
    /// repeated over the answer, text that is not text, or no text).
    DegenerateOutput,
    /// Its answers differ from the baseline's early and often (greedy
    /// decoding should give the same answers).
    OutputMismatch,
    /// Its answers fail their prompts' checks clearly more often than the
    /// baseline's answers to the same prompts.
    WrongAnswers,
    /// The requests could not be built (prompt source, tokenizer, dataset).
    Workload,
    /// The cluster scheduler ended the job (cancelled, pre-empted, time limit, node failure).
    Scheduler,
    /// The plan found the cell cannot run as configured (GPUs, memory,
    /// context, an engine that cannot express it), so it was not started.
    Infeasible,
    /// A reasoning model spent the whole output budget thinking: no answer.
    ReasoningExhausted,
}

impl FailureClass {
    /// The snake_case name used in result files and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StartFailed => "start_failed",
            Self::HealthTimeout => "health_timeout",
            Self::Crashed => "crashed",
            Self::ContextOverflow => "context_overflow",
            Self::HttpError => "http_error",
            Self::Timeout => "timeout",
            Self::Protocol => "protocol",
            Self::Connection => "connection",
            Self::Suspicious => "suspicious",
            Self::DegenerateOutput => "degenerate_output",
            Self::OutputMismatch => "output_mismatch",
            Self::WrongAnswers => "wrong_answers",
            Self::Workload => "workload",
            Self::Scheduler => "scheduler",
            Self::Infeasible => "infeasible",
            Self::ReasoningExhausted => "reasoning_exhausted",
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure with its class and the evidence that explains it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// The class of failure.
    pub class: FailureClass,
    /// Human-readable evidence: status and body, error text, log line.
    pub detail: String,
    /// HTTP status when one was received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Classified cause from the server log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<FailureKind>,
    /// The server-log lines that show what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_excerpt: Option<String>,
}

impl Failure {
    /// A failure without an HTTP status.
    pub fn new(class: FailureClass, detail: impl Into<String>) -> Self {
        Self {
            class,
            detail: detail.into(),
            status: None,
            cause: None,
            log_excerpt: None,
        }
    }

    /// Attach the server log's tail and the cause classified from it; the
    /// evidence line is appended to the detail.
    pub fn with_log(mut self, tail: &str) -> Self {
        if let Some(c) = crate::telemetry::logscan::classify_failure(tail) {
            self.detail = format!("{}: {}", self.detail, c.evidence);
            self.cause = Some(c.kind);
        }
        if !tail.trim().is_empty() {
            self.log_excerpt = Some(truncate(tail, 8192));
        }
        self
    }

    /// The log's last line with anything on it, where no classified cause
    /// already names why: the line a reader looks at first.
    pub fn unclassified_log_line(&self) -> Option<String> {
        if self.cause.is_some() {
            return None;
        }
        let line = self
            .log_excerpt
            .as_deref()?
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty() && !l.starts_with("====="))?;
        Some(truncate(line, 300))
    }

    /// Classify a non-success HTTP answer from its status and body.
    pub fn from_http(status: u16, body: &str) -> Self {
        let class = if status == 400 && mentions_context_overflow(body) {
            FailureClass::ContextOverflow
        } else if status == 408 || status == 504 {
            FailureClass::Timeout
        } else {
            FailureClass::HttpError
        };
        Self {
            class,
            detail: truncate(body, 4096),
            status: Some(status),
            cause: None,
            log_excerpt: None,
        }
    }
}

/// Whether an error body says the input exceeds the context window, in any of
/// the phrasings vLLM, SGLang, llama.cpp and OpenAI use.
pub fn mentions_context_overflow(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    [
        "maximum context length",
        "context length",
        "context size",
        "exceed_context_size",
        "context_length_exceeded",
        "longer than the model",
        "too long",
    ]
    .iter()
    .any(|p| b.contains(p))
}

/// Cut `s` to at most `max` bytes on a character boundary, marking the cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} bytes cut]", &s[..end], s.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_overflow_bodies_of_each_engine_are_recognised() {
        let llamacpp = r#"{"error":{"code":400,"message":"request (1401 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error"}}"#;
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","type":"BadRequestError","code":400}"#;
        let sglang = r#"{"object":"error","message":"The input (40000 tokens) is longer than the model's context length (32768 tokens).","code":400}"#;
        for body in [llamacpp, vllm, sglang] {
            assert_eq!(
                Failure::from_http(400, body).class,
                FailureClass::ContextOverflow,
                "{body}"
            );
        }
        assert_eq!(
            Failure::from_http(400, r#"{"error":"bad json"}"#).class,
            FailureClass::HttpError
        );
        assert_eq!(
            Failure::from_http(500, "context length").class,
            FailureClass::HttpError
        );
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = "ééééé";
        let t = truncate(s, 3);
        assert!(t.starts_with('é') && t.contains("bytes cut"));
        assert_eq!(truncate("abc", 10), "abc");
    }
}
