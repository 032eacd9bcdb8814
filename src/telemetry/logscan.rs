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

use serde::{Deserialize, Serialize};

use super::TelemetryEngine;

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

/// Classifies why a server failed from the tail of its log.
///
/// Returns the most specific cause found (out of memory, then CUDA, NCCL,
/// address in use, unknown argument, then a bare Python exception), with the
/// first line that shows it, preferring a line that says "error" over a
/// warning of the same class; `None` when no line matches.
pub fn classify_failure(log_tail: &str) -> Option<FailureCause> {
    let mut errors: Vec<ErrorLine> = Vec::new();
    let mut tb = TracebackState::default();
    for (idx, raw) in log_tail.lines().enumerate() {
        let line_number = idx + 1;
        let body = strip_log_prefix(raw);
        if let Some(e) = tb.feed(line_number, body) {
            errors.push(e);
        }
        if let Some(kind) = classify_line(body) {
            errors.push(ErrorLine {
                line_number,
                kind,
                text: body.trim().to_string(),
            });
        }
    }
    if let Some(e) = tb.finish() {
        errors.push(e);
    }
    errors
        .into_iter()
        .enumerate()
        // Within one class, a line that says "error" beats a warning that
        // merely mentions the same condition (e.g. "CUDA warning: ...").
        .min_by_key(|(i, e)| {
            let says_error = e.text.to_ascii_lowercase().contains("error");
            (e.kind.priority(), !says_error, *i)
        })
        .map(|(_, e)| FailureCause {
            kind: e.kind,
            evidence: e.text,
            line_number: e.line_number,
        })
}

/// Classifies one undecorated line, or `None` when it shows no error.
fn classify_line(body: &str) -> Option<FailureKind> {
    let lower = body.to_ascii_lowercase();
    let has = |needle: &str| lower.contains(needle);
    if has("out of memory")
        || has("outofmemoryerror")
        || has("cuda_error_out_of_memory")
        || has("cudamalloc failed")
        || has("not enough memory")
        || has("no available memory for the cache blocks")
        || has("insufficient memory")
    {
        return Some(FailureKind::OutOfMemory);
    }
    if has("nccl error")
        || has("ncclunhandledcudaerror")
        || has("ncclsystemerror")
        || has("ncclinternalerror")
        || has("ncclinvalidusage")
        || has("ncclremoteerror")
        || has("distbackenderror")
    {
        return Some(FailureKind::NcclError);
    }
    if has("cuda error")
        || has("cudaerror")
        || has("illegal memory access")
        || has("illegal instruction was encountered")
        || has("device-side assert triggered")
        || has("cuda_error_")
    {
        return Some(FailureKind::CudaError);
    }
    if has("address already in use")
        || has("errno 98")
        || has("couldn't bind http server socket")
        || has("could not bind")
    {
        return Some(FailureKind::AddressInUse);
    }
    if has("unrecognized arguments:")
        || has("error: invalid argument")
        || has("invalid choice:")
        || has("unknown argument")
    {
        return Some(FailureKind::UnknownArgument);
    }
    None
}

/// Tracks Python tracebacks so that their exception line can be reported.
#[derive(Default)]
struct TracebackState {
    active: bool,
    start_line: usize,
    exception: Option<(usize, String)>,
}

impl TracebackState {
    /// Feeds one undecorated line; returns an error when a traceback just ended.
    fn feed(&mut self, line_number: usize, body: &str) -> Option<ErrorLine> {
        let starts_traceback = body
            .trim_start()
            .starts_with("Traceback (most recent call last)");
        if !self.active {
            if starts_traceback {
                self.active = true;
                self.start_line = line_number;
                self.exception = None;
            }
            return None;
        }
        if starts_traceback
            || body.trim().is_empty()
            || body.starts_with([' ', '\t'])
            || body.starts_with("During handling of the above exception")
            || body.starts_with("The above exception was the direct cause")
        {
            return None;
        }
        if looks_like_exception(body) {
            // Chained tracebacks end with the exception that finally escaped,
            // so a later exception line replaces an earlier one.
            self.exception = Some((line_number, body.trim().to_string()));
            return None;
        }
        if self.exception.is_some() {
            let done = self.finish();
            // The line that ended one traceback may start another.
            let _ = self.feed(line_number, body);
            return done;
        }
        None
    }

    fn finish(&mut self) -> Option<ErrorLine> {
        if !self.active {
            return None;
        }
        self.active = false;
        let (line_number, text) = self.exception.take().unwrap_or_else(|| {
            (
                self.start_line,
                "Traceback (most recent call last): (no exception line)".to_string(),
            )
        });
        Some(ErrorLine {
            line_number,
            kind: FailureKind::PythonException,
            text,
        })
    }
}

/// `pkg.mod.SomeError: message` or a bare `KeyboardInterrupt`.
fn looks_like_exception(body: &str) -> bool {
    let head = match body.split_once(':') {
        Some((h, _)) => h,
        None => body.trim_end(),
    };
    let mut chars = head.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    let is_ident = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    let last = head.rsplit('.').next().unwrap_or(head);
    is_ident
        && (last.ends_with("Error")
            || last.ends_with("Exception")
            || last.ends_with("Interrupt")
            || last.ends_with("Exit")
            || last.ends_with("Warning")
            || last == "AssertionError")
}

struct Scanner {
    facts: LogFacts,
    tb: TracebackState,
    error_tail: std::collections::VecDeque<ErrorLine>,
    gen_sum: f64,
    gen_n: usize,
    accept_sum: f64,
    hybrid: HybridState,
    has_hybrid: bool,
    llamacpp_buffers_mib: f64,
    legacy_slots: Option<u64>,
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

    fn ready(&mut self, line_number: usize, body: &str) {
        if self.facts.ready.is_none() {
            self.facts.ready = Some(ReadyLine {
                line_number,
                text: body.trim().to_string(),
            });
        }
    }

    fn decode(&mut self, batch: DecodeBatch) {
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

    fn accept(&mut self, length: f64) {
        self.accept_sum += length;
        self.facts.decode.accept_length_reports += 1;
    }

    fn sglang(&mut self, line_number: usize, body: &str) {
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

    fn vllm(&mut self, line_number: usize, body: &str) {
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

    fn llamacpp(&mut self, line_number: usize, body: &str) {
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

    fn sim(&mut self, line_number: usize, body: &str) {
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
fn set<T>(slot: &mut Option<T>, value: Option<T>) {
    if slot.is_none() {
        *slot = value;
    }
}

/// Parses `Decode batch. #running-req: 1, ...` and `Decode batch, ...` lines.
fn sglang_decode_batch(line_number: usize, body: &str) -> Option<DecodeBatch> {
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

/// Removes timestamps, levels, process tags and container names from a line.
pub fn strip_log_prefix(line: &str) -> &str {
    let mut s = line.trim_end_matches(['\r', '\n']);
    for _ in 0..8 {
        let before = s.len();
        s = strip_compose(s);
        s = strip_process_tag(s);
        s = strip_bracketed_stamp(s);
        s = strip_vllm_level(s);
        s = strip_llamacpp_stamp(s);
        if s.len() == before {
            break;
        }
    }
    s
}

/// `service-name    | rest` (docker compose).
fn strip_compose(s: &str) -> &str {
    let Some(bar) = s.find(" | ") else {
        return s;
    };
    let name = s.get(..bar).unwrap_or("").trim_end();
    if !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        s.get(bar + 3..).unwrap_or(s)
    } else {
        s
    }
}

/// `(EngineCore_DP0 pid=151) rest`.
fn strip_process_tag(s: &str) -> &str {
    if !s.starts_with('(') {
        return s;
    }
    match s.find(')') {
        Some(close) if s.get(..close).is_some_and(|t| t.contains("pid=")) => {
            s.get(close + 1..).map(|r| r.trim_start()).unwrap_or(s)
        }
        _ => s,
    }
}

/// `[2025-09-03 18:33:18 TP0] rest`, `[rank0]: rest`, `[41123] rest`.
fn strip_bracketed_stamp(s: &str) -> &str {
    if !s.starts_with('[') {
        return s;
    }
    let Some(close) = s.find(']') else {
        return s;
    };
    let inner = s.get(1..close).unwrap_or("");
    let dated = inner.len() >= 10
        && inner.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && inner.as_bytes()[4] == b'-';
    // Older SGLang prints only the time: `[04:40:55 TP0]`.
    let timed = inner.len() >= 8
        && inner.as_bytes()[..2].iter().all(u8::is_ascii_digit)
        && inner.as_bytes()[2] == b':';
    let pid = !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit());
    let rank = inner.starts_with("rank") && inner[4..].bytes().all(|b| b.is_ascii_digit());
    if dated || timed || pid || rank {
        let rest = s.get(close + 1..).unwrap_or("");
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        rest.trim_start()
    } else {
        s
    }
}

/// `INFO 09-03 16:28:10 [file.py:123] rest` and the older `INFO 01-30 03:18:12 file.py:848] rest`.
fn strip_vllm_level(s: &str) -> &str {
    const LEVELS: [&str; 6] = [
        "DEBUG ",
        "INFO ",
        "WARNING ",
        "ERROR ",
        "CRITICAL ",
        "WARN ",
    ];
    let Some(level) = LEVELS.iter().find(|l| s.starts_with(**l)) else {
        return s;
    };
    let rest = s.get(level.len()..).unwrap_or("").trim_start();
    let b = rest.as_bytes();
    let dated = b.len() >= 15
        && b[2] == b'-'
        && b[5] == b' '
        && b[8] == b':'
        && b[11] == b':'
        && b[..2].iter().all(u8::is_ascii_digit);
    if !dated {
        return s;
    }
    let after_time = rest.get(14..).unwrap_or("").trim_start();
    match after_time.find("] ") {
        Some(end) if end < 80 && !after_time.get(..end).unwrap_or("").contains(' ') => {
            after_time.get(end + 2..).unwrap_or(after_time)
        }
        _ => after_time,
    }
}

/// llama.cpp's `0.08.500.798 I rest` / `214.40.099.656 W rest`.
fn strip_llamacpp_stamp(s: &str) -> &str {
    let Some(space) = s.find(' ') else {
        return s;
    };
    let stamp = s.get(..space).unwrap_or("");
    let looks_like_stamp = stamp.len() >= 7
        && stamp.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && stamp.bytes().filter(|b| *b == b'.').count() == 3;
    if !looks_like_stamp {
        return s;
    }
    let rest = s.get(space + 1..).unwrap_or("");
    let bytes = rest.as_bytes();
    if bytes.len() >= 2 && matches!(bytes[0], b'I' | b'W' | b'E' | b'D') && bytes[1] == b' ' {
        rest.get(2..).unwrap_or(rest)
    } else {
        rest
    }
}

/// Index just past `key`, where `key` is not glued to a preceding identifier.
fn find_key(hay: &str, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    let mut start = 0;
    while let Some(pos) = hay.get(start..)?.find(key) {
        let abs = start + pos;
        let glued = hay
            .get(..abs)
            .and_then(|p| p.chars().next_back())
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !glued || !key.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            return Some(abs + key.len());
        }
        start = abs + key.len();
    }
    None
}

/// A leading decimal number (thousands commas allowed) and the text after it.
fn leading_number(s: &str) -> Option<(f64, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits_start = i;
    let mut text = String::new();
    if digits_start == 1 && b[0] == b'-' {
        text.push('-');
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || c == b'.' {
            text.push(c as char);
            i += 1;
        } else if c == b',' && i + 1 < b.len() && b[i + 1].is_ascii_digit() && i > digits_start {
            // "75,840 tokens" but not "580364, chunked"
            i += 1;
        } else if (c == b'e' || c == b'E')
            && i > digits_start
            && i + 1 < b.len()
            && (b[i + 1].is_ascii_digit() || b[i + 1] == b'-' || b[i + 1] == b'+')
        {
            text.push('e');
            i += 1;
            if b[i] == b'-' || b[i] == b'+' {
                text.push(b[i] as char);
                i += 1;
            }
        } else {
            break;
        }
    }
    let value = text.trim_end_matches('.').parse::<f64>().ok()?;
    value.is_finite().then(|| (value, s.get(i..).unwrap_or("")))
}

fn skip_separators(s: &str) -> &str {
    s.trim_start_matches([' ', '\t', '=', ':'])
}

fn num_after(hay: &str, key: &str) -> Option<f64> {
    let at = find_key(hay, key)?;
    leading_number(skip_separators(hay.get(at..)?)).map(|(v, _)| v)
}

fn to_u64(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0 && v <= u64::MAX as f64).then(|| v.round() as u64)
}

fn u64_after(hay: &str, key: &str) -> Option<u64> {
    num_after(hay, key).and_then(to_u64)
}

/// Converts a number followed by a memory unit to GiB.
fn mem_value(s: &str) -> Option<f64> {
    let (value, rest) = leading_number(skip_separators(s))?;
    let unit: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let factor = match unit.as_str() {
        "GiB" | "GB" | "G" => 1.0,
        "MiB" | "MB" | "M" => 1.0 / 1024.0,
        "KiB" | "KB" | "kB" | "K" => 1.0 / (1024.0 * 1024.0),
        "TiB" | "TB" => 1024.0,
        _ => return None,
    };
    Some(value * factor)
}

fn mem_after(hay: &str, key: &str) -> Option<f64> {
    let at = find_key(hay, key)?;
    mem_value(hay.get(at..)?)
}

/// `K (f16): 1024.00 MiB`: the size after the closing parenthesis.
fn mem_after_paren(hay: &str, key: &str) -> Option<f64> {
    let at = find_key(hay, key)?;
    let rest = hay.get(at..)?;
    let close = rest.find(')')?;
    mem_value(rest.get(close + 1..)?)
}

/// The number immediately before `key`, e.g. `16384` in `( 16384 cells`.
fn u64_before(hay: &str, key: &str) -> Option<u64> {
    number_before_key(hay, key).and_then(to_u64)
}

fn number_before_key(hay: &str, key: &str) -> Option<f64> {
    let at = hay.find(key)?;
    let head = hay.get(..at)?.trim_end();
    let start = head
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .map_or(0, |i| i + 1);
    leading_number(head.get(start..)?).map(|(v, _)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_removed() {
        let cases = [
            (
                "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1",
                "Decode batch. #running-req: 1",
            ),
            (
                "(EngineCore_DP0 pid=26283) INFO 11-06 10:51:48 [kv_cache_utils.py:1229] GPU KV cache size: 75,840 tokens",
                "GPU KV cache size: 75,840 tokens",
            ),
            (
                "vllm-mxfp4  | (APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: x",
                "vllm.v1.engine.exceptions.EngineDeadError: x",
            ),
            (
                "INFO 01-30 03:18:14 kv_cache_utils.py:398] Maximum concurrency for 2048 tokens per request: 10.79x",
                "Maximum concurrency for 2048 tokens per request: 10.79x",
            ),
            (
                "[42027] 2.29.118.093 I statistics ngram-map-k: #calls",
                "statistics ngram-map-k: #calls",
            ),
            (
                "llama-server    | [41123] 0.10.154.587 I srv    load_model: initializing slots, n_slots = 2",
                "srv    load_model: initializing slots, n_slots = 2",
            ),
            ("[04:40:55 TP0] Decode batch. #token: 1", "Decode batch. #token: 1"),
            ("plain line", "plain line"),
            ("", ""),
            ("[", "["),
            ("(x", "(x"),
            ("INFO 1", "INFO 1"),
            ("1.2.3.4 é", "é"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_log_prefix(input), want, "{input}");
        }
    }

    #[test]
    fn numbers_and_memory_values() {
        assert_eq!(leading_number("75,840 tokens").map(|x| x.0), Some(75840.0));
        assert_eq!(
            leading_number("580364, chunked").map(|x| x.0),
            Some(580364.0)
        );
        assert_eq!(leading_number("2.48x").map(|x| x.0), Some(2.48));
        assert_eq!(leading_number("1.5e3 ").map(|x| x.0), Some(1500.0));
        assert_eq!(leading_number("-").map(|x| x.0), None);
        assert_eq!(leading_number("").map(|x| x.0), None);
        assert_eq!(mem_value(": 0.13GB"), Some(0.13));
        assert_eq!(mem_value(" = 2048.00 MiB"), Some(2.0));
        assert_eq!(mem_value(" 7 bananas"), None);
        assert_eq!(
            u64_after(
                "profiled_max_total_num_tokens=1, max_total_num_tokens=7",
                "max_total_num_tokens="
            ),
            Some(7)
        );
        assert_eq!(u64_after("KV size: 3 GB", "V size"), None);
        assert_eq!(u64_before("( 16384 cells,", " cells"), Some(16384));
    }

    #[test]
    fn traceback_reports_the_final_exception() {
        let log = "\
starting
Traceback (most recent call last):
  File \"a.py\", line 1, in <module>
    main()
ValueError: first

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File \"a.py\", line 3, in <module>
RuntimeError: second
next line of the server
";
        let facts = scan_log(TelemetryEngine::Sglang, log);
        let py: Vec<&ErrorLine> = facts
            .errors
            .iter()
            .filter(|e| e.kind == FailureKind::PythonException)
            .collect();
        assert_eq!(py.len(), 1);
        assert_eq!(py[0].text, "RuntimeError: second");
        assert_eq!(py[0].line_number, 11);
        let cause = classify_failure(log).unwrap();
        assert_eq!(cause.kind, FailureKind::PythonException);
        assert_eq!(cause.evidence, "RuntimeError: second");
    }

    #[test]
    fn unterminated_traceback_is_reported_at_end() {
        let facts = scan_log(
            TelemetryEngine::Vllm,
            "Traceback (most recent call last):\n  File \"x\"\n",
        );
        assert_eq!(facts.errors.len(), 1);
        assert_eq!(facts.errors[0].line_number, 1);
    }

    #[test]
    fn classify_failure_causes() {
        let cases = [
            ("usage: x\nx: error: unrecognized arguments: --bogus 1\n", FailureKind::UnknownArgument),
            ("error: invalid argument: --frobnicate\n", FailureKind::UnknownArgument),
            ("OSError: [Errno 98] Address already in use\n", FailureKind::AddressInUse),
            (
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
                FailureKind::OutOfMemory,
            ),
            (
                "RuntimeError: CUDA error: an illegal instruction was encountered\n",
                FailureKind::CudaError,
            ),
            (
                "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled cuda error\n",
                FailureKind::NcclError,
            ),
        ];
        for (log, kind) in cases {
            let cause = classify_failure(log).unwrap_or_else(|| panic!("{log}"));
            assert_eq!(cause.kind, kind, "{log}");
        }
        assert_eq!(classify_failure("all good\nready\n"), None);
        assert_eq!(classify_failure(""), None);
    }

    #[test]
    fn error_list_is_bounded() {
        let mut log = String::new();
        for i in 0..1000 {
            log.push_str(&format!(
                "CUDA error: an illegal memory access was encountered {i}\n"
            ));
        }
        let facts = scan_log(TelemetryEngine::Vllm, &log);
        assert_eq!(facts.errors.len(), ERRORS_KEPT_HEAD + ERRORS_KEPT_TAIL);
        assert_eq!(
            facts.errors_dropped,
            1000 - ERRORS_KEPT_HEAD - ERRORS_KEPT_TAIL
        );
        assert_eq!(facts.errors[0].line_number, 1);
        assert_eq!(facts.errors.last().unwrap().line_number, 1000);
    }

    #[test]
    fn hostile_input_never_panics() {
        let inputs = [
            "Decode batch.",
            "Decode batch,",
            "Decode batch, : , :, #running-req: x, accept len: 1e999999",
            "KV Cache is allocated. #tokens: , K size: GB",
            "max_total_num_tokens=",
            "Maximum concurrency for tokens per request: x",
            "llama_kv_cache: size = ( cells K ( V (",
            "llama_kv_cache: cells",
            "[\u{1F600}] \u{1F600}",
            "(\u{1F600} pid=) é",
            "INFO 0é-00 00:00:00 [x] y",
            "Traceback (most recent call last):",
            "\u{0}\u{0}\u{0}",
            "sim: kv capacity , max running requests , context length",
            "eval time = tokens per second",
            "draft acceptance rate = nope",
        ];
        for engine in TelemetryEngine::ALL {
            for input in inputs {
                let _ = scan_log(engine, input);
                let _ = classify_failure(input);
            }
            let _ = scan_log(engine, &inputs.join("\n"));
        }
    }
}
