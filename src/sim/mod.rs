//! `servebench sim`: a real OpenAI-compatible HTTP server whose timing
//! follows the performance model in [`model`], with fault injection.
//!
//! It serves `POST /v1/completions`, `POST /v1/chat/completions` (streaming
//! and not), `GET /v1/models`, `GET /health`, `GET /metrics` (Prometheus
//! text, `sim:*` names) and `POST /tokenize`. [`serve`] takes a bound
//! listener and a shutdown token, so tests bind 127.0.0.1:0 in-process.
//! Given the same seed and the same request order it behaves the same.

pub mod model;
pub mod prefix_cache;
mod reply;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::openai::GenerateRequest;
use crate::util::rng::{seeded, SeededRng};

/// The simulator's performance model and faults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct SimConfig {
    /// Model name served at /v1/models.
    #[arg(long, default_value = "sim-model")]
    pub model_name: String,
    /// Require this bearer token on /v1 and /tokenize, as vLLM's `--api-key` does (HTTP 401 otherwise).
    #[arg(long)]
    #[serde(skip)]
    pub api_key: Option<String>,
    /// Prefill speed in tokens/s (0 = instant); prefills run one at a time.
    #[arg(long, default_value_t = 20_000.0, env = "SERVEBENCH_SIM_PREFILL_TOK_S")]
    pub prefill_tok_s: f64,
    /// Fixed part of time to first token, ms.
    #[arg(long, default_value_t = 5.0)]
    pub ttft_overhead_ms: f64,
    /// Decode step time with an empty batch, ms (0 = as fast as possible).
    #[arg(long, default_value_t = 10.0, env = "SERVEBENCH_SIM_DECODE_STEP_MS")]
    pub decode_step_ms: f64,
    /// Extra decode step time per running sequence, ms.
    #[arg(
        long,
        default_value_t = 0.05,
        env = "SERVEBENCH_SIM_DECODE_STEP_PER_SEQ_MS"
    )]
    pub decode_step_per_seq_ms: f64,
    /// Extra time of each decode step of a request with a response format
    /// or tools, ms: the per-token mask a grammar backend computes.
    #[arg(long, default_value_t = 0.0)]
    pub grammar_step_ms: f64,
    /// KV cache capacity in tokens; requests wait for room (prompt + output).
    #[arg(long, default_value_t = 262_144)]
    pub kv_capacity_tokens: u64,
    /// Most sequences decoding at once; others wait.
    #[arg(long, default_value_t = 256)]
    pub max_running_requests: u32,
    /// Data-parallel replicas behind the one port, each with its own slots,
    /// KV cache (--kv-capacity-tokens each), prefill lane, batch and prefix
    /// cache. A request goes to the replica with the fewest requests in
    /// flight, ties to the next in turn, as vLLM's DP load balancer does.
    #[arg(long, default_value_t = 1)]
    pub dp: u32,
    /// Power one replica's GPUs draw with nothing running, W (the
    /// `sim:power_watts` gauge, where a real server has `nvidia-smi`).
    #[arg(long, default_value_t = 100.0)]
    pub idle_power_w: f64,
    /// Power one replica's GPUs draw with a full batch
    /// (--max-running-requests), W; in between it rises in proportion to
    /// the running share.
    #[arg(long, default_value_t = 700.0)]
    pub peak_power_w: f64,
    /// Context window: prompt + max_tokens above it gets HTTP 400.
    #[arg(long, default_value_t = 32_768)]
    pub context_length: u64,
    /// Output length when the request sets no max_tokens.
    #[arg(long, default_value_t = 256)]
    pub default_max_tokens: u64,
    /// Answer stops "naturally" after this many tokens unless ignore_eos/min_tokens.
    #[arg(long)]
    pub eos_after: Option<u64>,
    /// Speculative draft tokens per step (0 = off).
    #[arg(long, default_value_t = 0)]
    pub spec_draft_tokens: u32,
    /// Probability that each successive draft token is accepted.
    #[arg(long, default_value_t = 0.7)]
    pub spec_acceptance: f64,
    /// Cost of a speculative step relative to a plain one.
    #[arg(long, default_value_t = 1.3)]
    pub spec_step_factor: f64,
    /// Seed for acceptance draws and fault choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fault: crash (log a CUDA error, exit non-zero) when request N+1 arrives.
    #[arg(long, env = "SERVEBENCH_SIM_CRASH_AFTER")]
    pub crash_after: Option<u64>,
    /// The line logged when crashing.
    #[arg(
        long,
        default_value = "CUDA error: an illegal instruction was encountered"
    )]
    pub crash_message: String,
    /// Fault: requests after the Nth never get an answer.
    #[arg(long)]
    pub hang_after: Option<u64>,
    /// Fault: requests after the Nth are answered at full speed with one
    /// word repeated, as a broken kernel or serving build does.
    #[arg(long, env = "SERVEBENCH_SIM_DEGENERATE_AFTER")]
    pub degenerate_after: Option<u64>,
    /// Fault: every answer departs from the right one after this many
    /// tokens, as a broken speculative-decoding kernel's does.
    #[arg(long)]
    pub diverge_after: Option<u64>,
    /// Fault: with speculative decoding, every accepted draft token is a
    /// wrong word, as a verification kernel that accepts what it should
    /// reject gives: fast, with the right acceptance, and wrong.
    #[arg(long)]
    pub wrong_drafts: bool,
    /// Fault: built-in checkable prompts (arithmetic, JSON extraction) get
    /// a wrong answer of the same length and speed: digits off by one,
    /// JSON brackets broken. Otherwise they get a right one.
    #[arg(
        long,
        env = "SERVEBENCH_SIM_WRONG_ANSWERS",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub wrong_answers: bool,
    /// Fault: built-in checkable prompts get answers that look right and
    /// are wrong: JSON with every expected key and wrong values, and the
    /// right figure named as a discarded guess before a wrong final answer.
    #[arg(long)]
    pub plausible_wrong_answers: bool,
    /// Fault: answers under a `json_schema` response format write their
    /// numbers as strings: the right values, and the schema broken.
    #[arg(long)]
    pub break_schema: bool,
    /// Fault: function calls come, in turn, without an id, with arguments
    /// cut short, or with deltas that have no `index`.
    #[arg(long)]
    pub malformed_tool_calls: bool,
    /// A reasoning model: the first this many output tokens of every chat
    /// answer are thinking, streamed apart from the answer.
    #[arg(long, default_value_t = 0)]
    pub reasoning_tokens: u64,
    /// The delta field reasoning streams in: `reasoning` (current vLLM) or
    /// `reasoning_content` (older vLLM, SGLang, llama.cpp).
    #[arg(long, default_value = "reasoning", value_parser = ["reasoning", "reasoning_content"])]
    pub reasoning_field: String,
    /// Report reasoning tokens in the usage's `completion_tokens_details`
    /// (vLLM does not; OpenAI does).
    #[arg(long)]
    pub reasoning_in_usage: bool,
    /// Fault: /health answers 503 for this long after start, ms.
    #[arg(long, default_value_t = 0)]
    pub startup_delay_ms: u64,
    /// Fault: fraction of requests answered with HTTP 500.
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// Fault: fraction of streams cut off half-way without `[DONE]`.
    #[arg(long, default_value_t = 0.0)]
    pub truncate_rate: f64,
    /// Keep a prefix cache in blocks of this many tokens (words) up to
    /// --kv-capacity-tokens, least recently used evicted first, and report
    /// its hits as usage `cached_tokens` (0 = no prefix cache, and no
    /// cached tokens reported).
    #[arg(long, default_value_t = 0)]
    pub prefix_cache_block: u64,
    /// Write log lines to stderr.
    #[arg(skip)]
    #[serde(skip)]
    pub log: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            cfg: SimConfig,
        }
        Wrapper::parse_from(["sim"]).cfg
    }
}

impl SimConfig {
    /// Check values that would make the model meaningless.
    pub fn validate(&self) -> Result<(), String> {
        let frac = |name: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!("--{name} must be between 0 and 1, got {v}"))
            }
        };
        frac("spec-acceptance", self.spec_acceptance)?;
        frac("error-rate", self.error_rate)?;
        frac("truncate-rate", self.truncate_rate)?;
        for (name, v) in [
            ("prefill-tok-s", self.prefill_tok_s),
            ("ttft-overhead-ms", self.ttft_overhead_ms),
            ("decode-step-ms", self.decode_step_ms),
            ("decode-step-per-seq-ms", self.decode_step_per_seq_ms),
            ("grammar-step-ms", self.grammar_step_ms),
            ("spec-step-factor", self.spec_step_factor),
            ("idle-power-w", self.idle_power_w),
            ("peak-power-w", self.peak_power_w),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(format!("--{name} must be a non-negative number, got {v}"));
            }
        }
        if self.max_running_requests == 0 || self.kv_capacity_tokens == 0 {
            return Err("--max-running-requests and --kv-capacity-tokens must be positive".into());
        }
        // Each replica is a few semaphores; far more than any box holds GPUs
        // is a typo, not a layout.
        if !(1..=MAX_REPLICAS).contains(&self.dp) {
            return Err(format!(
                "--dp must be between 1 and {MAX_REPLICAS}, got {}",
                self.dp
            ));
        }
        Ok(())
    }
}

/// Why the simulator stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The crash fault fired.
    #[error("simulated crash: {0}")]
    Crashed(String),
    /// Accepting connections failed.
    #[error("accept failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Most data-parallel replicas one simulator serves.
pub const MAX_REPLICAS: u32 = 1024;

#[derive(Default)]
struct Counters {
    requests_arrived: AtomicU64,
    running: AtomicU64,
    waiting: AtomicU64,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    success: AtomicU64,
    kv_used: AtomicU64,
    drafts: AtomicU64,
    draft_tokens: AtomicU64,
    accepted_tokens: AtomicU64,
}

struct Shared {
    cfg: SimConfig,
    /// Totals over the replicas, as /metrics reports them.
    counters: Counters,
    replicas: Vec<Replica>,
    /// Where the next search for the least loaded replica starts.
    next_replica: AtomicU64,
    ready_at: Instant,
    crash: CancellationToken,
    crashed: AtomicBool,
    created: u64,
}

/// One data-parallel replica: a copy of the model with its own batch.
struct Replica {
    slots: Arc<Semaphore>,
    kv: Arc<Semaphore>,
    prefill: tokio::sync::Mutex<()>,
    prefix_cache: Option<std::sync::Mutex<prefix_cache::PrefixCache>>,
    /// Requests sent here and not yet finished, waiting ones included.
    in_flight: AtomicU64,
    /// Sequences decoding here: its batch, which sets its step time.
    running: AtomicU64,
}

impl Replica {
    fn new(cfg: &SimConfig) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(cfg.max_running_requests as usize)),
            kv: Arc::new(Semaphore::new(
                cfg.kv_capacity_tokens.min(Semaphore::MAX_PERMITS as u64) as usize,
            )),
            prefill: tokio::sync::Mutex::new(()),
            prefix_cache: (cfg.prefix_cache_block > 0).then(|| {
                std::sync::Mutex::new(prefix_cache::PrefixCache::new(
                    cfg.prefix_cache_block,
                    cfg.kv_capacity_tokens,
                ))
            }),
            in_flight: AtomicU64::new(0),
            running: AtomicU64::new(0),
        }
    }
}

impl Shared {
    fn new(cfg: SimConfig) -> Arc<Self> {
        Arc::new(Shared {
            replicas: (0..cfg.dp.max(1)).map(|_| Replica::new(&cfg)).collect(),
            next_replica: AtomicU64::new(0),
            counters: Counters::default(),
            ready_at: Instant::now() + Duration::from_millis(cfg.startup_delay_ms),
            crash: CancellationToken::new(),
            crashed: AtomicBool::new(false),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            cfg,
        })
    }

    /// The replica with the fewest requests in flight, searching from the
    /// next in turn so that equal loads are served round-robin; the request
    /// is counted there until the returned guard drops.
    fn assign(self: &Arc<Self>) -> Assigned {
        let n = self.replicas.len();
        let start = self.next_replica.fetch_add(1, Ordering::Relaxed) as usize % n;
        let index = (0..n)
            .map(|i| (start + i) % n)
            .min_by_key(|&i| self.replicas[i].in_flight.load(Ordering::Relaxed))
            .unwrap_or(0);
        self.replicas[index]
            .in_flight
            .fetch_add(1, Ordering::Relaxed);
        Assigned {
            shared: self.clone(),
            index,
        }
    }
}

/// A request's place on a replica, counted in flight until it drops.
struct Assigned {
    shared: Arc<Shared>,
    index: usize,
}

impl Assigned {
    fn replica(&self) -> &Replica {
        &self.shared.replicas[self.index]
    }
}

impl Drop for Assigned {
    fn drop(&mut self) {
        self.replica().in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Keeps the running gauges and KV usage right however a stream ends.
struct Admission {
    shared: Arc<Shared>,
    replica: usize,
    kv_tokens: u64,
    _slot: OwnedSemaphorePermit,
    _kv: OwnedSemaphorePermit,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.shared.replicas[self.replica]
            .running
            .fetch_sub(1, Ordering::Relaxed);
        self.shared.counters.running.fetch_sub(1, Ordering::Relaxed);
        self.shared
            .counters
            .kv_used
            .fetch_sub(self.kv_tokens, Ordering::Relaxed);
    }
}

struct WaitingGuard<'a>(&'a AtomicU64);
impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serve the simulator on `listener` until `shutdown` fires or a crash fault.
pub async fn serve(
    listener: TcpListener,
    cfg: SimConfig,
    shutdown: CancellationToken,
) -> Result<(), SimError> {
    let shared = Shared::new(cfg);
    let app = Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route("/tokenize", post(tokenize))
        .route("/reset_prefix_cache", post(reset_prefix_cache))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            require_api_key,
        ))
        .with_state(shared.clone());
    if shared.cfg.log {
        let addr = listener.local_addr()?;
        eprintln!(
            "sim: kv capacity {} tokens, max running requests {}, context length {}, {} replica(s)",
            shared.cfg.kv_capacity_tokens,
            shared.cfg.max_running_requests,
            shared.cfg.context_length,
            shared.replicas.len()
        );
        eprintln!("sim: ready on {addr}");
    }
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(s) => s,
                    // Out of descriptors or a reset during accept: keep serving.
                    Err(_) => { tokio::time::sleep(Duration::from_millis(5)).await; continue; }
                };
                let _ = stream.set_nodelay(true);
                let svc = hyper_util::service::TowerToHyperService::new(app.clone());
                conns.spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = shared.crash.cancelled() => {
                conns.abort_all();
                return Err(SimError::Crashed(shared.cfg.crash_message.clone()));
            }
            _ = shutdown.cancelled() => {
                conns.abort_all();
                return Ok(());
            }
        }
    }
}

/// Refuse API requests without the configured bearer token, as an engine
/// started with an API key does; health and metrics stay open.
async fn require_api_key(
    State(s): State<Arc<Shared>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(key) = &s.cfg.api_key else {
        return next.run(req).await;
    };
    let path = req.uri().path();
    let guarded = path.starts_with("/v1") || path == "/tokenize";
    let given = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if guarded && given != Some(key.as_str()) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(serde_json::json!({"error": {"message": "Unauthorized", "code": 401}})),
        )
            .into_response();
    }
    next.run(req).await
}

async fn health(State(s): State<Arc<Shared>>) -> Response {
    if Instant::now() < s.ready_at {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"error": {"message": "Loading model", "code": 503}})),
        )
            .into_response();
    }
    (StatusCode::OK, "OK").into_response()
}

async fn models(State(s): State<Arc<Shared>>) -> Response {
    Json(serde_json::json!({
        "object": "list",
        "data": [{
            "id": s.cfg.model_name,
            "object": "model",
            "owned_by": "servebench-sim",
            "max_model_len": s.cfg.context_length,
        }]
    }))
    .into_response()
}

#[derive(Deserialize)]
struct TokenizeRequest {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

async fn tokenize(State(s): State<Arc<Shared>>, Json(req): Json<TokenizeRequest>) -> Response {
    let text = req.prompt.or(req.content).unwrap_or_default();
    let tokens: Vec<u64> = text
        .split_ascii_whitespace()
        .map(|w| {
            w.bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
                % 50_000
        })
        .collect();
    Json(serde_json::json!({
        "count": tokens.len(),
        "max_model_len": s.cfg.context_length,
        "tokens": tokens,
    }))
    .into_response()
}

/// Empty the prefix cache, answering as vLLM does: `{"success": false}`
/// while requests run or wait (they hold blocks), else `true`.
async fn reset_prefix_cache(State(s): State<Arc<Shared>>) -> Response {
    let busy = s.counters.running.load(Ordering::Relaxed) > 0
        || s.counters.waiting.load(Ordering::Relaxed) > 0;
    if !busy {
        for c in s.replicas.iter().filter_map(|r| r.prefix_cache.as_ref()) {
            c.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
        if s.cfg.log {
            eprintln!("sim: prefix cache reset");
        }
    }
    Json(serde_json::json!({ "success": !busy })).into_response()
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    let c = &s.counters;
    let capacity = s.cfg.kv_capacity_tokens as f64 * s.replicas.len() as f64;
    let kv_frac = c.kv_used.load(Ordering::Relaxed) as f64 / capacity;
    let mut out = String::with_capacity(2048);
    let mut metric = |name: &str, kind: &str, help: &str, value: String| {
        out.push_str(&format!("# HELP sim:{name} {help}\n# TYPE sim:{name} {kind}\nsim:{name}{{model_name=\"{}\"}} {value}\n", s.cfg.model_name));
    };
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
    // One series a line: the tables read as the exposition they produce.
    #[rustfmt::skip]
    let gauges = [
        ("num_requests_running", "Sequences decoding now.", &c.running),
        ("num_requests_waiting", "Requests waiting for a slot or KV space.", &c.waiting),
    ];
    for (name, help, value) in gauges {
        metric(name, "gauge", help, load(value));
    }
    metric(
        "power_watts",
        "gauge",
        "Power the simulated GPUs draw: idle plus the running share of the peak.",
        format!(
            "{}",
            power_watts(&s.cfg, c.running.load(Ordering::Relaxed), s.replicas.len())
        ),
    );
    metric(
        "kv_cache_usage_perc",
        "gauge",
        "Fraction of KV capacity reserved by running sequences.",
        format!("{kv_frac}"),
    );
    #[rustfmt::skip]
    let counters = [
        ("prompt_tokens_total", "Prompt tokens processed.", &c.prompt_tokens),
        ("generation_tokens_total", "Tokens generated.", &c.generation_tokens),
        ("request_success_total", "Requests finished normally.", &c.success),
        ("spec_decode_num_drafts_total", "Speculative verification steps.", &c.drafts),
        ("spec_decode_num_draft_tokens_total", "Draft tokens proposed.", &c.draft_tokens),
        ("spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", &c.accepted_tokens),
    ];
    for (name, help, value) in counters {
        metric(name, "counter", help, load(value));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

/// The simulated power of `replicas` replicas with `running` sequences in
/// all: each replica's idle power, plus the span to its peak in proportion
/// to the share of the slots that run (up to all of them).
fn power_watts(cfg: &SimConfig, running: u64, replicas: usize) -> f64 {
    let slots = f64::from(cfg.max_running_requests.max(1)) * replicas as f64;
    let busy = (running as f64 / slots).min(1.0);
    replicas as f64 * (cfg.idle_power_w + (cfg.peak_power_w - cfg.idle_power_w).max(0.0) * busy)
}

async fn completions(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    generate(s, body, false).await
}

async fn chat(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    generate(s, body, true).await
}

fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "error": {"message": message, "type": kind, "param": null, "code": status.as_u16()}
    });
    (status, Json(body)).into_response()
}

async fn generate(s: Arc<Shared>, body: Bytes, chat: bool) -> Response {
    let req: GenerateRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "BadRequestError",
                &format!("invalid request body: {e}"),
            )
        }
    };
    if chat && req.messages.is_none() {
        return error_response(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            "chat requests need `messages`",
        );
    }
    if !chat && req.prompt.is_none() {
        return error_response(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            "completions requests need `prompt`",
        );
    }
    if Instant::now() < s.ready_at {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "Loading model",
        );
    }
    let n = s.counters.requests_arrived.fetch_add(1, Ordering::Relaxed) + 1;
    if s.cfg.crash_after.is_some_and(|limit| n > limit) {
        if !s.crashed.swap(true, Ordering::SeqCst) && s.cfg.log {
            eprintln!("{}", s.cfg.crash_message);
        }
        s.crash.cancel();
        std::future::pending::<()>().await;
    }
    if s.cfg.hang_after.is_some_and(|limit| n > limit) {
        std::future::pending::<()>().await;
    }
    let mut rng = seeded(s.cfg.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    if s.cfg.error_rate > 0.0 && rng.random::<f64>() < s.cfg.error_rate {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "simulated internal error",
        );
    }
    let prompt = model::prompt_tokens(&req);
    let max_tokens = req
        .output_limit()
        .unwrap_or(s.cfg.default_max_tokens)
        .max(1);
    if let Some(msg) = model::context_overflow_message(&s.cfg, prompt, max_tokens) {
        return error_response(StatusCode::BAD_REQUEST, "BadRequestError", &msg);
    }
    let forced = req.ignore_eos || req.min_tokens.is_some_and(|m| m >= max_tokens);
    let reply = reply::reply_for(&req, &s.cfg, n);
    let structured = req.tools.is_some() || req.response_format.is_some();
    let target = match (reply.length(structured), s.cfg.eos_after) {
        (Some(len), _) => len.clamp(1, max_tokens),
        (None, Some(e)) if !forced => e.clamp(1, max_tokens),
        _ => max_tokens,
    };
    let truncate_at = (s.cfg.truncate_rate > 0.0 && rng.random::<f64>() < s.cfg.truncate_rate)
        .then_some((target / 2).max(1));
    let opts = req.stream_options.unwrap_or_default();
    let assigned = s.assign();
    let grammar_ms = if structured {
        s.cfg.grammar_step_ms
    } else {
        0.0
    };
    let gen = Generation {
        shared: s.clone(),
        id: n,
        chat,
        prompt,
        max_tokens,
        target,
        include_usage: opts.include_usage,
        continuous: opts.continuous_usage_stats,
        emitted: 0,
        next_at: Instant::now(),
        rng,
        truncate_at,
        degenerate: s.cfg.degenerate_after.is_some_and(|limit| n > limit),
        text_seed: prompt_seed(&req),
        reply,
        grammar_ms,
        cache_keys: match &assigned.replica().prefix_cache {
            Some(c) => c
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .keys(&prompt_words(&req)),
            None => Vec::new(),
        },
        cached: 0,
        stage: Stage::Start,
        admission: None,
        assigned,
    };
    if req.stream {
        let stream = futures_util::stream::unfold(gen, |mut g| async move {
            let item = g.next_sse().await?;
            Some((item, g))
        });
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(stream))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    } else {
        gen.collect().await
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Start,
    Admit,
    Decode,
    Tail,
    Done,
}

/// One request's generation, advanced one stream event at a time.
struct Generation {
    shared: Arc<Shared>,
    id: u64,
    chat: bool,
    prompt: u64,
    max_tokens: u64,
    target: u64,
    include_usage: bool,
    continuous: bool,
    emitted: u64,
    next_at: Instant,
    rng: SeededRng,
    truncate_at: Option<u64>,
    /// Answer with one word repeated (`--degenerate-after`).
    degenerate: bool,
    /// Where the answer's words start: a function of the prompt alone, so
    /// every server answers the same prompt with the same text.
    text_seed: u64,
    /// The answer to a built-in checkable prompt: its reference words
    /// (each with its leading space, one per token) or a function call,
    /// right or wrong as the faults say.
    reply: reply::Reply,
    /// Extra time per decode step for a constrained request, ms.
    grammar_ms: f64,
    /// The prompt's prefix-cache block keys (with a prefix cache).
    cache_keys: Vec<u64>,
    /// Prompt tokens found in the prefix cache.
    cached: u64,
    stage: Stage,
    admission: Option<Admission>,
    /// The replica serving it.
    assigned: Assigned,
}

/// The prompt's tokens in order as words: each chat message's template
/// tokens (its role, repeated) before its content.
fn prompt_words(req: &GenerateRequest) -> Vec<&str> {
    use crate::client::openai::PromptInput;
    if let Some(msgs) = &req.messages {
        return msgs
            .iter()
            .flat_map(|m| {
                std::iter::repeat_n(m.role.as_str(), model::CHAT_TOKENS_PER_MESSAGE as usize)
                    .chain(m.content.split_ascii_whitespace())
            })
            .collect();
    }
    match &req.prompt {
        Some(PromptInput::Text(t)) => t.split_ascii_whitespace().collect(),
        Some(PromptInput::Texts(ts)) => {
            ts.iter().flat_map(|t| t.split_ascii_whitespace()).collect()
        }
        _ => Vec::new(),
    }
}

/// A seed from the request's prompt (text, texts, tokens or messages).
fn prompt_seed(req: &GenerateRequest) -> u64 {
    let text = serde_json::to_string(&(&req.prompt, &req.messages)).unwrap_or_default();
    // FNV-1a: stable across runs and processes, unlike the std hasher.
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const WORDS: [&str; 16] = [
    " the", " model", " serves", " tokens", " quickly", " and", " each", " step", " decodes",
    " one", " more", " word", " for", " every", " running", " request",
];

enum Event {
    Role,
    Tokens(u64),
    Finish,
}

impl Generation {
    /// Advance to the next event; `None` at the end.
    async fn next_event(&mut self) -> Option<Result<Event, std::io::Error>> {
        loop {
            match self.stage {
                Stage::Start => {
                    self.stage = Stage::Admit;
                    if self.chat {
                        return Some(Ok(Event::Role));
                    }
                }
                Stage::Admit => {
                    self.admit().await;
                    self.stage = Stage::Decode;
                    self.emitted = 1;
                    let running = self.assigned.replica().running.load(Ordering::Relaxed);
                    self.next_at = Instant::now()
                        + ms(model::step_ms(&self.shared.cfg, running) + self.grammar_ms);
                    return Some(Ok(Event::Tokens(1)));
                }
                Stage::Decode => {
                    if self.emitted >= self.target {
                        self.stage = Stage::Tail;
                        continue;
                    }
                    if self.truncate_at.is_some_and(|t| self.emitted >= t) {
                        self.stage = Stage::Done;
                        return Some(Err(std::io::Error::other("simulated truncated stream")));
                    }
                    if self.next_at > Instant::now() {
                        tokio::time::sleep_until(self.next_at).await;
                    }
                    let cfg = &self.shared.cfg;
                    let mut k = 1;
                    if cfg.spec_draft_tokens > 0 {
                        // Tokens past the requested length are never emitted, so
                        // they are not counted as accepted either.
                        let room = (self.target - self.emitted).saturating_sub(1) as u32;
                        let accepted = model::draw_accepted(
                            &mut self.rng,
                            cfg.spec_draft_tokens,
                            cfg.spec_acceptance,
                        )
                        .min(room);
                        let c = &self.shared.counters;
                        c.drafts.fetch_add(1, Ordering::Relaxed);
                        c.draft_tokens
                            .fetch_add(cfg.spec_draft_tokens as u64, Ordering::Relaxed);
                        c.accepted_tokens
                            .fetch_add(accepted as u64, Ordering::Relaxed);
                        k += accepted as u64;
                    }
                    let k = k.min(self.target - self.emitted);
                    self.emitted += k;
                    let running = self.assigned.replica().running.load(Ordering::Relaxed);
                    self.next_at += ms(model::step_ms(cfg, running) + self.grammar_ms);
                    return Some(Ok(Event::Tokens(k)));
                }
                Stage::Tail => {
                    self.stage = Stage::Done;
                    let c = &self.shared.counters;
                    c.generation_tokens
                        .fetch_add(self.emitted, Ordering::Relaxed);
                    c.success.fetch_add(1, Ordering::Relaxed);
                    self.admission = None;
                    return Some(Ok(Event::Finish));
                }
                Stage::Done => return None,
            }
        }
    }

    /// Wait for a running slot and KV room, then prefill.
    async fn admit(&mut self) {
        let s = self.shared.clone();
        let index = self.assigned.index;
        let r = &s.replicas[index];
        let kv_tokens = (self.prompt + self.max_tokens).min(s.cfg.kv_capacity_tokens) as u32;
        s.counters.waiting.fetch_add(1, Ordering::Relaxed);
        let (slot, kv) = {
            let _waiting = WaitingGuard(&s.counters.waiting);
            let slot = r
                .slots
                .clone()
                .acquire_owned()
                .await
                .expect("semaphore never closed");
            let kv =
                r.kv.clone()
                    .acquire_many_owned(kv_tokens.max(1))
                    .await
                    .expect("semaphore never closed");
            (slot, kv)
        };
        r.running.fetch_add(1, Ordering::Relaxed);
        s.counters.running.fetch_add(1, Ordering::Relaxed);
        s.counters
            .kv_used
            .fetch_add(kv_tokens as u64, Ordering::Relaxed);
        s.counters
            .prompt_tokens
            .fetch_add(self.prompt, Ordering::Relaxed);
        self.admission = Some(Admission {
            shared: s.clone(),
            replica: index,
            kv_tokens: kv_tokens as u64,
            _slot: slot,
            _kv: kv,
        });
        if let Some(c) = &r.prefix_cache {
            self.cached = c
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .lookup(&self.cache_keys, self.prompt);
        }
        let prefill = model::prefill_ms(&s.cfg, self.prompt.saturating_sub(self.cached));
        if prefill > 0.0 {
            let _lane = r.prefill.lock().await;
            tokio::time::sleep(ms(prefill)).await;
        }
        // Blocks are cached once computed, not while their prefill runs.
        if let Some(c) = &r.prefix_cache {
            c.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(&self.cache_keys);
        }
        if s.cfg.ttft_overhead_ms > 0.0 {
            tokio::time::sleep(ms(s.cfg.ttft_overhead_ms)).await;
        }
    }

    fn text(&self, first: u64, k: u64) -> String {
        if self.degenerate {
            return " lambda".repeat(k as usize);
        }
        let diverge = self.shared.cfg.diverge_after;
        let wrong_drafts = self.shared.cfg.wrong_drafts;
        (first..first + k)
            .map(|i| {
                // A diverging answer takes other words from token N on; a
                // wrong draft is any token of a step after its first (the
                // verified one).
                let shift = if diverge.is_some_and(|d| i >= d) || (wrong_drafts && i > first) {
                    7
                } else {
                    0
                };
                match self.reply.words().get(i as usize) {
                    Some(w) if shift == 0 => w.as_str(),
                    _ => WORDS[((i + self.text_seed + shift) % WORDS.len() as u64) as usize],
                }
            })
            .collect()
    }

    fn usage_json(&self) -> serde_json::Value {
        let mut u = serde_json::json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.emitted,
            "total_tokens": self.prompt + self.emitted,
        });
        let cfg = &self.shared.cfg;
        if cfg.prefix_cache_block > 0 {
            u["prompt_tokens_details"] = serde_json::json!({"cached_tokens": self.cached});
        }
        if cfg.reasoning_in_usage && self.chat && cfg.reasoning_tokens > 0 {
            u["completion_tokens_details"] =
                serde_json::json!({"reasoning_tokens": self.emitted.min(cfg.reasoning_tokens)});
        }
        u
    }

    fn finish_reason(&self) -> &'static str {
        if self.reply.call().is_some() {
            "tool_calls"
        } else if self.emitted >= self.max_tokens {
            "length"
        } else {
            "stop"
        }
    }

    fn chunk(&self, choice: serde_json::Value, usage: bool) -> Bytes {
        let object = if self.chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        };
        let prefix = if self.chat { "chatcmpl" } else { "cmpl" };
        let mut v = serde_json::json!({
            "id": format!("{prefix}-sim-{}", self.id),
            "object": object,
            "created": self.shared.created,
            "model": self.shared.cfg.model_name,
            "choices": [choice],
        });
        if usage {
            v["usage"] = self.usage_json();
        }
        Bytes::from(format!("data: {v}\n\n"))
    }

    /// The next SSE frame.
    async fn next_sse(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        let ev = match self.next_event().await? {
            Ok(e) => e,
            Err(e) => return Some(Err(e)),
        };
        let out = match ev {
            Event::Role => self.chunk(
                serde_json::json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}),
                false,
            ),
            Event::Tokens(k) => {
                let first = self.emitted - k;
                let choice = if let Some(call) = self.reply.call().filter(|_| self.chat) {
                    serde_json::json!({"index": 0, "delta": call.delta(first, k), "finish_reason": null})
                } else if self.chat {
                    // Tokens before `reasoning_tokens` are thinking, in their
                    // own field; a chunk across the boundary carries both.
                    let cut = self.shared.cfg.reasoning_tokens.clamp(first, first + k);
                    let mut delta = serde_json::Map::new();
                    if cut > first {
                        delta.insert(
                            self.shared.cfg.reasoning_field.clone(),
                            self.text(first, cut - first).into(),
                        );
                    }
                    if cut < first + k {
                        delta.insert("content".into(), self.text(cut, first + k - cut).into());
                    }
                    serde_json::json!({"index": 0, "delta": delta, "finish_reason": null})
                } else {
                    let text = self.text(first, k);
                    serde_json::json!({"index": 0, "text": text, "logprobs": null, "finish_reason": null})
                };
                self.chunk(choice, self.continuous)
            }
            Event::Finish => {
                let reason = self.finish_reason();
                let choice = if self.chat {
                    serde_json::json!({"index": 0, "delta": {}, "finish_reason": reason})
                } else {
                    serde_json::json!({"index": 0, "text": "", "logprobs": null, "finish_reason": reason})
                };
                let mut out = self.chunk(choice, self.continuous).to_vec();
                if self.include_usage {
                    let v = serde_json::json!({
                        "id": format!("sim-{}", self.id),
                        "object": if self.chat { "chat.completion.chunk" } else { "text_completion" },
                        "created": self.shared.created,
                        "model": self.shared.cfg.model_name,
                        "choices": [],
                        "usage": self.usage_json(),
                    });
                    out.extend_from_slice(format!("data: {v}\n\n").as_bytes());
                }
                out.extend_from_slice(b"data: [DONE]\n\n");
                Bytes::from(out)
            }
        };
        Some(Ok(out))
    }

    /// Run the whole generation and answer with one JSON body.
    async fn collect(mut self) -> Response {
        let mut text = String::new();
        while let Some(ev) = self.next_event().await {
            match ev {
                Ok(Event::Tokens(k)) => text.push_str(&self.text(self.emitted - k, k)),
                Ok(_) => {}
                Err(e) => {
                    return error_response(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "InternalServerError",
                        &e.to_string(),
                    )
                }
            }
        }
        let reason = self.finish_reason();
        let choice = if self.chat {
            serde_json::json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": reason})
        } else {
            serde_json::json!({"index": 0, "text": text, "finish_reason": reason})
        };
        Json(serde_json::json!({
            "id": format!("sim-{}", self.id),
            "object": if self.chat { "chat.completion" } else { "text_completion" },
            "created": self.shared.created,
            "model": self.shared.cfg.model_name,
            "choices": [choice],
            "usage": self.usage_json(),
        }))
        .into_response()
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_to_the_replica_with_the_fewest_in_flight_and_equal_loads_take_turns() {
        let shared = Shared::new(SimConfig {
            dp: 3,
            ..SimConfig::default()
        });
        let held: Vec<Assigned> = (0..3).map(|_| shared.assign()).collect();
        let mut at: Vec<usize> = held.iter().map(|a| a.index).collect();
        at.sort();
        assert_eq!(at, [0, 1, 2], "one each while all are equally loaded");
        drop(held);
        let busy: Vec<Assigned> = (0..2).map(|_| shared.assign()).collect();
        let mut others = busy.iter().map(|a| a.index).collect::<Vec<_>>();
        others.sort();
        // The third request finds the one replica without a request.
        let third = shared.assign();
        assert!(!others.contains(&third.index), "{others:?} {}", third.index);
        let in_flight: u64 = shared
            .replicas
            .iter()
            .map(|r| r.in_flight.load(Ordering::Relaxed))
            .sum();
        assert_eq!(in_flight, 3);
        assert!(SimConfig {
            dp: 0,
            ..SimConfig::default()
        }
        .validate()
        .is_err());
    }
}
