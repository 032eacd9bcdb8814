//! Server-log facts and failure classification.
//!
//! A benchmark number is only explainable next to what the server decided at
//! start-up (KV-cache capacity, request limits, hybrid-state cache) and what it
//! reported while running (decode batches, acceptance length, errors). This
//! module reads those facts out of an engine's log text.
//!
//! Engines change their log wording between versions, so every fact is found
//! by a key phrase inside a line, after the line's decorations (docker-compose
//! service name, `(EngineCore pid=N)`, vLLM `INFO mm-dd hh:mm:ss [file.py:N]`,
//! SGLang `[date time TP0]`, llama.cpp `[pid] t.t.t.t I`) are removed. Unknown
//! lines are skipped.
//!
//! Invariants:
//! - [`scan_log`] and [`classify_failure`] never panic, whatever the input.
//! - A fact that was not in the log is `None`; line numbers are 1-based.
//! - Memory sizes are reported in GiB. SGLang and older vLLM print "GB" but
//!   divide by 2^30, so their "GB" is taken as GiB; llama.cpp's MiB are
//!   converted.
//! - The error list keeps the first [`ERRORS_KEPT_HEAD`] and the last
//!   [`ERRORS_KEPT_TAIL`] error lines, so a crash loop cannot make a result
//!   file unbounded while both the root cause and the final failure survive.
//!
//! Each engine's phrases live in its dialect file (`telemetry/dialect/`);
//! here is what every engine shares: the facts and the scanner that gathers
//! them, failure classification (`classify`), and a line's decorations and
//! numbers (`text`).

use serde::{Deserialize, Serialize};

use super::TelemetryEngine;

mod classify;
#[cfg(test)]
mod tests;
pub(super) mod text;

pub use classify::classify_failure;
pub use text::strip_log_prefix;

use classify::{classify_line, TracebackState};

/// Error lines kept from the start of a log.
pub const ERRORS_KEPT_HEAD: usize = 25;
/// Error lines kept from the end of a log.
pub const ERRORS_KEPT_TAIL: usize = 75;

/// What went wrong, as far as a log line tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// GPU or host memory exhausted (CUDA OOM, KV cache that does not fit).
    OutOfMemory,
    /// A CUDA runtime error: illegal instruction, illegal memory access, ...
    CudaError,
    /// A collective-communication (NCCL) failure.
    NcclError,
    /// The server rejected a command-line flag or its value.
    UnknownArgument,
    /// The port (or another address) was already taken.
    AddressInUse,
    /// A Python exception ended a traceback; the evidence is its last line.
    PythonException,
}

impl FailureKind {
    /// Rank used to choose the cause among several; lower is more specific.
    fn priority(self) -> u8 {
        match self {
            Self::OutOfMemory => 0,
            Self::CudaError => 1,
            Self::NcclError => 2,
            Self::AddressInUse => 3,
            Self::UnknownArgument => 4,
            Self::PythonException => 5,
        }
    }
}

/// The classified cause of a failed start or a crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureCause {
    /// The class of failure.
    pub kind: FailureKind,
    /// The log line that shows it, without its timestamp/process decorations.
    pub evidence: String,
    /// 1-based line number of the evidence within the text given.
    pub line_number: usize,
}

/// One error line found in a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorLine {
    /// 1-based line number.
    pub line_number: usize,
    /// The class of error.
    pub kind: FailureKind,
    /// The line without decorations (for a traceback, its exception line).
    pub text: String,
}

/// The line that says the server is ready to accept requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyLine {
    /// 1-based line number.
    pub line_number: usize,
    /// The line without decorations.
    pub text: String,
}

/// `Maximum concurrency for N tokens per request: F x` (vLLM).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MaxConcurrency {
    /// Tokens per request the figure assumes (the maximum model length).
    pub tokens_per_request: u64,
    /// How many such requests fit in the KV cache at once.
    pub factor: f64,
}

/// Hybrid (Mamba / linear-attention) state cache sizes, from SGLang.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HybridState {
    /// `max_mamba_cache_size`: state slots, which bound concurrent requests.
    pub max_mamba_cache_size: Option<u64>,
    /// Convolution-state memory in GiB.
    pub conv_state_gib: Option<f64>,
    /// SSM-state memory in GiB.
    pub ssm_state_gib: Option<f64>,
    /// Intermediate SSM state kept for speculative decoding, GiB.
    pub intermediate_ssm_state_gib: Option<f64>,
    /// Intermediate convolution window kept for speculative decoding, GiB.
    pub intermediate_conv_window_gib: Option<f64>,
}

/// One periodic decode statistics line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecodeBatch {
    /// 1-based line number.
    pub line_number: usize,
    /// Requests in the running batch.
    pub running_requests: Option<u64>,
    /// Tokens held in the KV cache (`#token` / `#full token`).
    pub num_tokens: Option<u64>,
    /// KV-cache usage fraction (`token usage`; vLLM's percentage / 100).
    pub token_usage: Option<f64>,
    /// Full-attention KV usage fraction on hybrid models.
    pub full_token_usage: Option<f64>,
    /// Hybrid-state slot usage fraction on hybrid models.
    pub mamba_usage: Option<f64>,
    /// Speculative acceptance length as the engine reports it.
    pub accept_length: Option<f64>,
    /// Speculative acceptance rate as the engine reports it.
    pub accept_rate: Option<f64>,
    /// Generation throughput, tokens/s.
    pub gen_throughput: Option<f64>,
    /// Requests waiting in the queue.
    pub queue_requests: Option<u64>,
    /// Whether the batch ran as a CUDA graph.
    pub cuda_graph: Option<bool>,
}

/// Summary of all decode statistics lines of a log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecodeSummary {
    /// Number of decode statistics lines.
    pub count: usize,
    /// The last one.
    pub last: Option<DecodeBatch>,
    /// Mean of the reported generation throughputs, tokens/s.
    pub mean_gen_throughput: Option<f64>,
    /// Largest running batch seen.
    pub max_running_requests: Option<u64>,
    /// Largest queue seen.
    pub max_queue_requests: Option<u64>,
    /// Largest KV usage fraction seen (full-attention usage on hybrid models).
    pub max_token_usage: Option<f64>,
    /// Mean of the reported acceptance lengths (engine's own definition).
    pub mean_accept_length: Option<f64>,
    /// How many acceptance-length reports the mean covers.
    pub accept_length_reports: usize,
}

/// Everything servebench takes from one server log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogFacts {
    /// Engine whose formats were expected.
    pub engine: TelemetryEngine,
    /// Number of lines read.
    pub lines_scanned: usize,
    /// Memory taken by the model weights, GiB (per GPU where the engine says so).
    pub weights_gib: Option<f64>,
    /// KV-cache capacity in tokens.
    pub kv_cache_tokens: Option<u64>,
    /// Total KV-cache memory, GiB.
    pub kv_cache_gib: Option<f64>,
    /// K-cache memory, GiB.
    pub k_cache_gib: Option<f64>,
    /// V-cache memory, GiB.
    pub v_cache_gib: Option<f64>,
    /// SGLang's `max_total_num_tokens`.
    pub max_total_num_tokens: Option<u64>,
    /// Concurrent request limit (SGLang `max_running_requests`, vLLM
    /// `max_num_seqs`, llama.cpp slots).
    pub max_running_requests: Option<u64>,
    /// Context length per request.
    pub context_length: Option<u64>,
    /// vLLM's concurrency estimate at the maximum model length.
    pub max_concurrency: Option<MaxConcurrency>,
    /// Hybrid-state cache, when the model has one.
    pub hybrid_state: Option<HybridState>,
    /// Periodic decode statistics.
    pub decode: DecodeSummary,
    /// The first readiness line.
    pub ready: Option<ReadyLine>,
    /// Error lines (bounded, see the module invariants).
    pub errors: Vec<ErrorLine>,
    /// Error lines found but not kept in `errors`.
    pub errors_dropped: usize,
}

/// Reads the facts of a server log written by `engine`.
pub fn scan_log(engine: TelemetryEngine, text: &str) -> LogFacts {
    let mut scanner = Scanner::new(engine);
    for (idx, raw) in text.lines().enumerate() {
        scanner.line(idx + 1, raw);
    }
    scanner.finish()
}

pub(in crate::telemetry) struct Scanner {
    pub(in crate::telemetry) facts: LogFacts,
    tb: TracebackState,
    error_tail: std::collections::VecDeque<ErrorLine>,
    gen_sum: f64,
    gen_n: usize,
    accept_sum: f64,
    pub(in crate::telemetry) hybrid: HybridState,
    pub(in crate::telemetry) has_hybrid: bool,
    pub(in crate::telemetry) llamacpp_buffers_mib: f64,
    pub(in crate::telemetry) legacy_slots: Option<u64>,
}

impl Scanner {
    fn new(engine: TelemetryEngine) -> Self {
        Scanner {
            facts: LogFacts {
                engine,
                lines_scanned: 0,
                weights_gib: None,
                kv_cache_tokens: None,
                kv_cache_gib: None,
                k_cache_gib: None,
                v_cache_gib: None,
                max_total_num_tokens: None,
                max_running_requests: None,
                context_length: None,
                max_concurrency: None,
                hybrid_state: None,
                decode: DecodeSummary::default(),
                ready: None,
                errors: Vec::new(),
                errors_dropped: 0,
            },
            tb: TracebackState::default(),
            error_tail: std::collections::VecDeque::new(),
            gen_sum: 0.0,
            gen_n: 0,
            accept_sum: 0.0,
            hybrid: HybridState::default(),
            has_hybrid: false,
            llamacpp_buffers_mib: 0.0,
            legacy_slots: None,
        }
    }

    fn line(&mut self, line_number: usize, raw: &str) {
        self.facts.lines_scanned = line_number;
        let body = strip_log_prefix(raw);
        if let Some(e) = self.tb.feed(line_number, body) {
            self.push_error(e);
        }
        if let Some(kind) = classify_line(body) {
            self.push_error(ErrorLine {
                line_number,
                kind,
                text: body.trim().to_string(),
            });
        }
        match self.facts.engine {
            TelemetryEngine::Sglang => self.sglang(line_number, body),
            TelemetryEngine::Vllm => self.vllm(line_number, body),
            TelemetryEngine::Llamacpp => self.llamacpp(line_number, body),
            TelemetryEngine::Sim => self.sim(line_number, body),
        }
    }

    fn push_error(&mut self, e: ErrorLine) {
        if self.facts.errors.len() < ERRORS_KEPT_HEAD {
            self.facts.errors.push(e);
            return;
        }
        self.error_tail.push_back(e);
        if self.error_tail.len() > ERRORS_KEPT_TAIL {
            self.error_tail.pop_front();
            self.facts.errors_dropped += 1;
        }
    }

    pub(in crate::telemetry) fn ready(&mut self, line_number: usize, body: &str) {
        if self.facts.ready.is_none() {
            self.facts.ready = Some(ReadyLine {
                line_number,
                text: body.trim().to_string(),
            });
        }
    }

    pub(in crate::telemetry) fn decode(&mut self, batch: DecodeBatch) {
        let d = &mut self.facts.decode;
        d.count += 1;
        if let Some(g) = batch.gen_throughput {
            self.gen_sum += g;
            self.gen_n += 1;
        }
        if let Some(r) = batch.running_requests {
            d.max_running_requests = Some(d.max_running_requests.map_or(r, |m| m.max(r)));
        }
        if let Some(q) = batch.queue_requests {
            d.max_queue_requests = Some(d.max_queue_requests.map_or(q, |m| m.max(q)));
        }
        if let Some(u) = batch.token_usage.or(batch.full_token_usage) {
            d.max_token_usage = Some(d.max_token_usage.map_or(u, |m| m.max(u)));
        }
        if let Some(a) = batch.accept_length {
            self.accept(a);
        }
        self.facts.decode.last = Some(batch);
    }

    pub(in crate::telemetry) fn accept(&mut self, length: f64) {
        self.accept_sum += length;
        self.facts.decode.accept_length_reports += 1;
    }

    fn finish(mut self) -> LogFacts {
        if let Some(e) = self.tb.finish() {
            self.push_error(e);
        }
        self.facts.errors.extend(self.error_tail.drain(..));
        if self.gen_n > 0 {
            self.facts.decode.mean_gen_throughput = Some(self.gen_sum / self.gen_n as f64);
        }
        if self.facts.decode.accept_length_reports > 0 {
            self.facts.decode.mean_accept_length =
                Some(self.accept_sum / self.facts.decode.accept_length_reports as f64);
        }
        if self.has_hybrid {
            self.facts.hybrid_state = Some(self.hybrid);
        }
        set(&mut self.facts.max_running_requests, self.legacy_slots);
        if self.facts.weights_gib.is_none() && self.llamacpp_buffers_mib > 0.0 {
            self.facts.weights_gib = Some(self.llamacpp_buffers_mib / 1024.0);
        }
        self.facts
    }
}

/// Keeps the first value seen: later duplicates come from other TP ranks.
pub(in crate::telemetry) fn set<T>(slot: &mut Option<T>, value: Option<T>) {
    if slot.is_none() {
        *slot = value;
    }
}
