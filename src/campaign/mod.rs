//! Campaign files: the TOML schema as written by users ("raw") and loading
//! with errors that name the file, line and column.
//!
//! Every table denies unknown keys, closed sets are enums, and values whose
//! meaning is checked later (durations, SLOs, ids) keep their source span so
//! [`resolve()`] can point at them too.

pub mod launcher;
mod plain;
pub mod resolve;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::client::openai::Api;
use crate::engine::{EngineKind, Speculative};
use crate::load::schedule::Arrival;

pub use resolve::{resolve, Campaign, PromptSource, Scenarios, ServerConfig, WorkloadPoint};

/// A campaign file error with its position.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.located())]
pub struct CampaignError {
    /// The campaign file.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl CampaignError {
    /// `file:line:col: message`, or `message` alone where no position
    /// applies (line 0: the file itself could not be read).
    fn located(&self) -> String {
        if self.line == 0 {
            self.message.clone()
        } else {
            format!("{}:{}:{}: {}", self.path, self.line, self.col, self.message)
        }
    }
}

/// A value given either once or as a list (matrix axes, sweeps).
#[derive(Debug, Clone, PartialEq)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// A list of values.
    Many(Vec<T>),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Shape<T> {
            One(T),
            Many(Vec<T>),
        }
        // serde's own message here ("did not match any variant of untagged
        // enum") says nothing a user can act on: name what is accepted.
        let kind = match std::any::type_name::<T>() {
            "u32" | "u64" => "a whole number of at least 0",
            "f64" => "a number",
            "alloc::string::String" => "a string",
            other => other,
        };
        match Shape::<T>::deserialize(d) {
            Ok(Shape::One(v)) => Ok(OneOrMany::One(v)),
            Ok(Shape::Many(v)) => Ok(OneOrMany::Many(v)),
            Err(_) => Err(serde::de::Error::custom(format!(
                "expected {kind} or a list of them (e.g. `[1, 4, 16]`)"
            ))),
        }
    }
}

impl<T: Clone> OneOrMany<T> {
    /// The values as a list.
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// `[campaign]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMeta {
    /// Campaign name; results go to `<results_dir>/<name>/`.
    pub name: Spanned<String>,
    /// Results directory, relative to the campaign file (default `results`).
    #[serde(default)]
    pub results_dir: Option<Spanned<String>>,
    /// Free text shown in reports.
    #[serde(default)]
    pub description: Option<String>,
}

/// `[model]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// Model path or hub id handed to the engine.
    pub path: Spanned<String>,
    /// Name the server answers to (default: the path).
    #[serde(default)]
    pub name: Option<String>,
    /// Local Hugging Face directory or config.json for the memory model.
    #[serde(default)]
    pub config: Option<Spanned<String>>,
    /// tokenizer.json for exact prompt lengths.
    #[serde(default)]
    pub tokenizer: Option<Spanned<String>>,
}

/// `[engine]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEngine {
    /// sglang, vllm, llamacpp, sim, openai or command.
    pub kind: EngineKind,
    /// Program and leading arguments (default per engine).
    #[serde(default)]
    pub executable: Option<Spanned<Vec<String>>>,
    /// Flags added to every server of the campaign.
    #[serde(default)]
    pub args: Vec<Spanned<String>>,
    /// Environment added to every server.
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    /// Base URL of an `openai` endpoint.
    #[serde(default)]
    pub url: Option<Spanned<String>>,
    /// Engine version, part of every cell's identity when given.
    #[serde(default)]
    pub version: Option<String>,
    /// How to ask the engine for its build (argv), instead of its usual `--version`.
    #[serde(default)]
    pub version_command: Option<Spanned<Vec<String>>>,
    /// Name of the environment variable holding the API key sent as a bearer
    /// token with every request (the key itself never goes in the file).
    #[serde(default)]
    pub api_key_env: Option<Spanned<String>>,
    /// Environment variables (of `env` tables) whose values are secrets, in
    /// addition to those whose names or values look like credentials.
    #[serde(default)]
    pub secret_env: Vec<String>,
}

/// `[[build]]`: one build of the engine, a matrix axis by its name.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBuild {
    /// The name servers and `build = [...]` axes refer to it by.
    pub name: Spanned<String>,
    /// Program and leading arguments of this build (default: `[engine] executable`).
    #[serde(default)]
    pub executable: Option<Spanned<Vec<String>>>,
    /// Environment of this build's servers, over `[engine] env`.
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    /// How to ask this build for its version (default: the engine's usual command).
    #[serde(default)]
    pub version_command: Option<Spanned<Vec<String>>>,
    /// The version this build should report; a detected one that
    /// contradicts it draws a warning.
    #[serde(default)]
    pub version: Option<String>,
}

/// `[hardware]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHardware {
    /// GPU indices servebench may use (default: none, CPU-only engines).
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// GPUs never to use (busy with production, say).
    #[serde(default)]
    pub exclude_gpus: Vec<u32>,
    /// Memory of one GPU, e.g. `96GiB`.
    #[serde(default)]
    pub gpu_memory: Option<Spanned<String>>,
    /// The GPU model (e.g. `h100`, `h200`, `a100`, `l40s`, `b200`), for ETAs from its bandwidth.
    #[serde(default)]
    pub gpu: Option<Spanned<String>>,
    /// Memory bandwidth of one GPU, e.g. `1.8TB/s`: for a GPU the table lacks, or in its place.
    #[serde(default)]
    pub gpu_bandwidth: Option<Spanned<String>>,
    /// Dense BF16 throughput of one GPU, TFLOPS (prefill speed).
    #[serde(default)]
    pub gpu_bf16_tflops: Option<Spanned<f64>>,
    /// Use GPUs even when `nvidia-smi` shows another process's memory on them (default false).
    #[serde(default)]
    pub use_busy_gpus: bool,
    /// What one GPU costs an hour, in dollars: the reports' cost per million output tokens.
    #[serde(default)]
    pub gpu_hour_cost: Option<Spanned<f64>>,
}

/// One server config (`[[server]]` or `[defaults]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// Server id: names its results folder and log.
    #[serde(default)]
    pub id: Option<Spanned<String>>,
    /// Tensor-parallel size.
    #[serde(default)]
    pub tp: Option<u32>,
    /// Data-parallel replicas of the model.
    #[serde(default)]
    pub dp: Option<u32>,
    /// Attention data-parallel groups inside the TP group (SGLang).
    #[serde(default)]
    pub dp_attention: Option<u32>,
    /// Expert-parallel size.
    #[serde(default)]
    pub ep: Option<u32>,
    /// Pipeline stages.
    #[serde(default)]
    pub pp: Option<u32>,
    /// SGLang mem-fraction-static / vLLM gpu-memory-utilization.
    #[serde(default)]
    pub mem_fraction: Option<f64>,
    /// Max running requests / max-num-seqs / llama.cpp slots.
    #[serde(default)]
    pub max_running_requests: Option<u32>,
    /// Context length.
    #[serde(default)]
    pub context_length: Option<u64>,
    /// Speculative decoding.
    #[serde(default)]
    pub speculative: Option<Speculative>,
    /// The engine's tool-call parser (vLLM, SGLang `--tool-call-parser`).
    #[serde(default)]
    pub tool_call_parser: Option<String>,
    /// The engine's grammar backend (SGLang `--grammar-backend`, vLLM's
    /// structured-outputs backend).
    #[serde(default)]
    pub grammar_backend: Option<String>,
    /// Extra flags for this server.
    #[serde(default)]
    pub args: Vec<Spanned<String>>,
    /// Extra environment for this server.
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    /// A config known to fail (a fault-injection demo, a known-broken build
    /// kept for the record): its failures are reported but do not make the
    /// exit code say the campaign failed.
    #[serde(default)]
    pub expected_failure: Option<bool>,
    /// The `[[build]]` this server runs (default: `[engine]` as written).
    #[serde(default)]
    pub build: Option<Spanned<String>>,
}

/// A speculative axis entry: a settings table or the string `none`.
#[derive(Debug, Clone, PartialEq)]
pub enum SpecEntry {
    /// `"none"`: autoregressive decoding.
    Name(String),
    /// Speculative settings.
    Settings(Speculative),
}

impl<'de> Deserialize<'de> for SpecEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Not an untagged enum: its one message ("did not match any
        // variant") would hide what is wrong inside the table.
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => Ok(SpecEntry::Name(s)),
            table => Speculative::deserialize(table)
                .map(SpecEntry::Settings)
                .map_err(|e| serde::de::Error::custom(e.message())),
        }
    }
}

/// `[[matrix]]`: a Cartesian product of server settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMatrix {
    /// Id template with `{tp}`, `{dp}`, `{dp_attention}`, `{ep}`, `{pp}`,
    /// `{method}`, `{budget}`, `{mem_fraction}`, `{max_running_requests}`,
    /// `{context_length}`, `{build}` placeholders.
    pub id: Spanned<String>,
    /// Tensor-parallel sizes.
    #[serde(default)]
    pub tp: Option<OneOrMany<u32>>,
    /// Data-parallel replica counts.
    #[serde(default)]
    pub dp: Option<OneOrMany<u32>>,
    /// Attention data-parallel sizes.
    #[serde(default)]
    pub dp_attention: Option<OneOrMany<u32>>,
    /// Expert-parallel sizes.
    #[serde(default)]
    pub ep: Option<OneOrMany<u32>>,
    /// Pipeline-stage counts.
    #[serde(default)]
    pub pp: Option<OneOrMany<u32>>,
    /// Memory fractions.
    #[serde(default)]
    pub mem_fraction: Option<OneOrMany<f64>>,
    /// Max running requests.
    #[serde(default)]
    pub max_running_requests: Option<OneOrMany<u32>>,
    /// Context lengths.
    #[serde(default)]
    pub context_length: Option<OneOrMany<u64>>,
    /// Speculative variants (`"none"` for autoregressive).
    #[serde(default)]
    pub speculative: Option<Spanned<Vec<SpecEntry>>>,
    /// Draft-token budgets applied to every speculative variant.
    #[serde(default)]
    pub budget: Option<OneOrMany<u32>>,
    /// Grammar backends (xgrammar, outlines, llguidance, …).
    #[serde(default)]
    pub grammar_backend: Option<OneOrMany<String>>,
    /// Extra flags for every server of this matrix.
    #[serde(default)]
    pub args: Vec<Spanned<String>>,
    /// Extra environment for every server of this matrix.
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    /// `[[build]]` names: every config once per build.
    #[serde(default)]
    pub build: Option<Spanned<OneOrMany<String>>>,
}

/// `[[workload]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    /// Workload name (used by `--only workload=...` and in cell names).
    pub name: Spanned<String>,
    /// completions or chat (default completions; scenarios need chat).
    #[serde(default)]
    pub api: Option<Api>,
    /// Built-in prompt kinds: a name, a list, or `all`; absent = synthetic text of `input_len` tokens.
    #[serde(default)]
    pub prompt_kinds: Option<Spanned<OneOrMany<String>>>,
    /// Prompts from a ShareGPT JSON or JSONL file (relative to the campaign file).
    #[serde(default)]
    pub dataset: Option<Spanned<String>>,
    /// Checkable prompts of the campaign's own: a JSONL of prompt, check
    /// (number, text, json, regex) and expected answer (relative to the campaign file).
    #[serde(default)]
    pub checks: Option<Spanned<String>>,
    /// `sharegpt` or `jsonl` (default: from the file extension).
    #[serde(default)]
    pub dataset_format: Option<crate::workload::DatasetFormat>,
    /// Multi-turn sessions: a built-in scenario (`calculator`, `etl-debug`) or a scenario file.
    #[serde(default)]
    pub scenario: Option<Spanned<String>>,
    /// Prompt tokens (exact with the model's tokenizer); a list sweeps.
    #[serde(default)]
    pub input_len: Option<OneOrMany<u64>>,
    /// Output tokens; a list sweeps.
    #[serde(default)]
    pub output_len: Option<OneOrMany<u64>>,
    /// Closed-loop concurrency levels.
    #[serde(default)]
    pub concurrency: Option<Spanned<OneOrMany<u32>>>,
    /// Open-loop request rates (requests/s).
    #[serde(default)]
    pub rate: Option<Spanned<OneOrMany<f64>>>,
    /// Arrival process for rates.
    #[serde(default)]
    pub arrival: Option<Arrival>,
    /// Gamma shape for `arrival = "gamma"`.
    #[serde(default)]
    pub burstiness: Option<f64>,
    /// Cap on in-flight requests for rates.
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// Measured requests per cell.
    #[serde(default)]
    pub num_requests: Option<u64>,
    /// Dispatch window per cell, e.g. `60s`.
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// Warm-up requests per cell.
    #[serde(default)]
    pub warmup: Option<u64>,
    /// Force exact output lengths (default true).
    #[serde(default)]
    pub ignore_eos: Option<bool>,
    /// `tool_choice` for requests that offer tools: `auto`, `required` or
    /// `none` (left out, the server's default).
    #[serde(default)]
    pub tool_choice: Option<Spanned<crate::client::openai::ToolChoice>>,
    /// Tokens of prompt shared by all requests (prefix caching); default 0.
    #[serde(default)]
    pub shared_prefix: Option<u64>,
    /// SLOs such as `ttft=2s,tpot=50ms`.
    #[serde(default)]
    pub slo: Vec<Spanned<String>>,
    /// Share of a point's requests that must meet every bound of an SLO
    /// for the point to meet it (0.9 when not given): 0.95 for 95 %.
    #[serde(default)]
    pub attainment: Option<Spanned<f64>>,
    /// Seed for prompts and arrivals.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Search the load axis for the highest load meeting latency bounds,
    /// instead of measuring fixed `concurrency`/`rate` levels.
    #[serde(default)]
    pub search: Option<Spanned<RawSearch>>,
    /// A production trace to replay on its own schedule (relative to the
    /// campaign file): its prompts, lengths, prefix blocks and arrivals.
    #[serde(default)]
    pub trace: Option<Spanned<String>>,
    /// `mooncake`, `azure` or `burstgpt` (default: from the file).
    #[serde(default)]
    pub trace_format: Option<Spanned<String>>,
    /// Traffic multiples to replay at (trace times divided by it); a list sweeps.
    #[serde(default)]
    pub time_scale: Option<OneOrMany<f64>>,
    /// Longest gap between two sends after scaling, e.g. `5s`.
    #[serde(default)]
    pub max_idle_gap: Option<Spanned<String>>,
    /// Trace time at which the replay starts, e.g. `10m`.
    #[serde(default)]
    pub trace_start: Option<Spanned<String>>,
    /// Trace time at which it stops (exclusive).
    #[serde(default)]
    pub trace_end: Option<Spanned<String>>,
    /// Prompt tokens per hash id (default 512).
    #[serde(default)]
    pub block_size: Option<u64>,
    /// Factor on the trace's prompt lengths and block size.
    #[serde(default)]
    pub length_scale: Option<f64>,
    /// Factor on the trace's output lengths.
    #[serde(default)]
    pub output_scale: Option<f64>,
    /// Longest prompt + output sent; longer requests are clamped and counted.
    #[serde(default)]
    pub max_context: Option<u64>,
}

/// `search = { slo = "ttft_p99=1s,tpot_p50=30ms", over = "concurrency", min = 1, max = 256 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSearch {
    /// Bounds every passing probe meets, `METRIC_STAT=DURATION` joined by commas.
    pub slo: Spanned<String>,
    /// `concurrency` or `rate`.
    pub over: crate::search::Axis,
    /// Lowest load, the first probe.
    pub min: f64,
    /// Highest load.
    pub max: f64,
    /// Grid spacing (default `min`).
    #[serde(default)]
    pub step: Option<f64>,
}

/// `[run]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    /// Server id the speedups are computed against.
    #[serde(default)]
    pub baseline: Option<Spanned<String>>,
    /// How long a server may take to become healthy (default 10m).
    #[serde(default)]
    pub health_timeout: Option<Spanned<String>>,
    /// Limit for one request (default 10m).
    #[serde(default)]
    pub request_timeout: Option<Spanned<String>>,
    /// Time between SIGTERM and SIGKILL when stopping a server (default 15s).
    #[serde(default)]
    pub grace_period: Option<Spanned<String>>,
    /// Measure each cell this many times (default 1), or `"auto"`: repeat
    /// until the repetitions agree (see `repetitions_target`).
    #[serde(default)]
    pub repetitions: Option<Spanned<Repetitions>>,
    /// With `repetitions = "auto"`: the relative width of the 95% interval of
    /// a point's output throughput over its repetitions that is narrow enough (default `5%`).
    #[serde(default)]
    pub repetitions_target: Option<Spanned<String>>,
    /// With `repetitions = "auto"`: most repetitions per point (default 5).
    #[serde(default)]
    pub max_repetitions: Option<Spanned<u32>>,
    /// Start-up time for the ETA, overriding the per-engine prior (sim/llama.cpp ~1 s, vLLM/SGLang ~1 min + weight loading).
    #[serde(default)]
    pub startup_estimate: Option<Spanned<String>>,
    /// Per-request decode speed for the ETA, tokens/s, of one GPU without drafting, overriding the GPU/CPU prior (used when there is none: 50); TP and drafting priors apply on top.
    #[serde(default)]
    pub decode_tok_s_estimate: Option<f64>,
    /// Prefill speed for the ETA, tokens/s, overriding the prior (used when there is none: 5000).
    #[serde(default)]
    pub prefill_tok_s_estimate: Option<f64>,
    /// Requests sent to each launched server once it is healthy, before its first cell, so one-time costs (JIT, graph capture, allocator growth) stay out of the measurements (default 1; 0 = none).
    #[serde(default)]
    pub server_warmup: Option<Spanned<u32>>,
    /// Stop searching a server config once it cannot beat the best one found so far (default false).
    #[serde(default)]
    pub stop_losers: Option<bool>,
    /// After a crash, restart the server once and retry the remaining cells (default false).
    #[serde(default)]
    pub retry_after_crash: Option<bool>,
    /// Empty the engine's prefix cache before each cell (vLLM `POST
    /// /reset_prefix_cache`, SGLang `/flush_cache`), so no cell is served
    /// from text an earlier cell sent (default false).
    #[serde(default)]
    pub reset_prefix_cache: Option<Spanned<bool>>,
    /// How often a cell's timeline samples the engine's `/metrics`, the
    /// GPUs and the client, ms (default 250; 0 = no timeline).
    #[serde(default)]
    pub sample_interval_ms: Option<Spanned<u64>>,
    /// Write the report files into the results directory at the end of `run` (default true).
    #[serde(default)]
    pub report: Option<bool>,
    /// What `run` measures: `"grid"`, every cell (the default), or
    /// `"answer"`, only the cells that can change the answer.
    #[serde(default)]
    pub goal: Option<Spanned<Goal>>,
}

/// What a run measures.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Goal {
    /// Every cell of the campaign.
    #[default]
    Grid,
    /// Only what can change the answer: servers run leader first and a
    /// later server's point is measured in full only where a short probe
    /// shows it could still win (see [`crate::goal`]).
    Answer,
}

/// `repetitions`: a count, or `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Repetitions {
    /// Exactly this many.
    Count(u32),
    /// Until the repetitions agree, within a cap.
    Auto,
}

impl<'de> Deserialize<'de> for Repetitions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Shape {
            Count(u32),
            Word(String),
        }
        match Shape::deserialize(d) {
            Ok(Shape::Count(n)) => Ok(Repetitions::Count(n)),
            Ok(Shape::Word(w)) if w == "auto" => Ok(Repetitions::Auto),
            _ => Err(serde::de::Error::custom(
                "expected a whole number of repetitions or \"auto\"",
            )),
        }
    }
}

/// The whole campaign file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCampaign {
    /// `[campaign]`.
    pub campaign: RawMeta,
    /// `[model]`.
    pub model: RawModel,
    /// `[engine]`.
    pub engine: RawEngine,
    /// `[hardware]`.
    #[serde(default)]
    pub hardware: RawHardware,
    /// `[defaults]` applied to every server.
    #[serde(default)]
    pub defaults: RawServer,
    /// `[[server]]` entries.
    #[serde(default, rename = "server")]
    pub servers: Vec<RawServer>,
    /// `[[matrix]]` entries.
    #[serde(default)]
    pub matrix: Vec<RawMatrix>,
    /// `[[build]]` entries: engine builds compared side by side.
    #[serde(default, rename = "build")]
    pub builds: Vec<RawBuild>,
    /// `[[workload]]` entries.
    #[serde(default, rename = "workload")]
    pub workloads: Vec<RawWorkload>,
    /// `[run]`.
    #[serde(default)]
    pub run: RawRun,
    /// `[launcher]`.
    #[serde(default)]
    pub launcher: Option<Spanned<launcher::RawLauncher>>,
}

/// Source text of a campaign, kept to turn byte spans into line:column.
#[derive(Debug, Clone)]
pub struct Source {
    /// Path as given.
    pub path: PathBuf,
    /// File content.
    pub text: String,
}

impl Source {
    /// Build an error at a byte offset.
    pub fn error_at(&self, offset: usize, message: impl Into<String>) -> CampaignError {
        let (line, col) = line_col(&self.text, offset);
        CampaignError {
            path: self.path.display().to_string(),
            line,
            col,
            message: message.into(),
        }
    }

    /// Build an error at a spanned value.
    pub fn error<T>(&self, at: &Spanned<T>, message: impl Into<String>) -> CampaignError {
        self.error_at(at.span().start, message)
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

/// Parse campaign text (no file access).
pub fn parse(path: &Path, text: &str) -> Result<(RawCampaign, Source), CampaignError> {
    let source = Source {
        path: path.to_path_buf(),
        text: text.to_string(),
    };
    match toml::from_str::<RawCampaign>(text) {
        Ok(raw) => Ok((raw, source)),
        Err(e) => {
            let offset = e.span().map(|s| s.start).unwrap_or(0);
            Err(source.error_at(offset, plain::plain(e.message())))
        }
    }
}

/// Read and parse a campaign file.
pub fn load(path: &Path) -> Result<(RawCampaign, Source), CampaignError> {
    let text = std::fs::read_to_string(path).map_err(|e| CampaignError {
        path: path.display().to_string(),
        line: 0,
        col: 0,
        message: format!(
            "cannot read {}: {}",
            path.display(),
            crate::util::fsx::io_reason(&e)
        ),
    })?;
    parse(path, &text)
}

/// Read, parse and resolve a campaign file.
pub fn load_campaign(path: &Path) -> Result<Campaign, CampaignError> {
    let (raw, source) = load(path)?;
    let mut c = resolve(raw, &source)?;
    c.model.config_digest = config_digest(c.model.config.as_deref());
    c.model.tokenizer_digest = c
        .model
        .tokenizer
        .as_deref()
        .and_then(|t| crate::workload::file_digest(t).ok());
    c.register_secrets();
    Ok(c)
}

/// The digest of the config.json that `[model] config` names, when it is
/// on disk: read once here, part of every cell's identity.
fn config_digest(config: Option<&Path>) -> Option<String> {
    let p = config?;
    let file = if p.is_dir() {
        p.join("config.json")
    } else {
        p.to_path_buf()
    };
    crate::workload::file_digest(&file).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest valid campaign; other tests of this module add to it.
    pub(super) const MINIMAL: &str = r#"
[campaign]
name = "t"

[model]
path = "m"

[engine]
kind = "sim"

[[workload]]
name = "w"
concurrency = 1
num_requests = 2
"#;

    fn err(text: &str) -> CampaignError {
        match parse(Path::new("c.toml"), text) {
            Err(e) => e,
            Ok((raw, src)) => resolve(raw, &src).unwrap_err(),
        }
    }

    #[test]
    fn minimal_campaign_parses() {
        let (raw, _) = parse(Path::new("c.toml"), MINIMAL).unwrap();
        assert_eq!(raw.workloads.len(), 1);
    }

    #[test]
    fn unknown_key_names_file_line_column_and_allowed_keys() {
        let text = MINIMAL.replace("num_requests = 2", "num_requests = 2\nconcurency = 4");
        let e = err(&text);
        assert_eq!((e.path.as_str(), e.line), ("c.toml", 15));
        assert_eq!(e.col, 1);
        assert!(
            e.message.contains("concurency") && e.message.contains("concurrency"),
            "{}",
            e.message
        );
    }

    #[test]
    fn wrong_type_and_bad_enum_point_at_the_value() {
        let e = err(&MINIMAL.replace("num_requests = 2", "num_requests = \"two\""));
        assert_eq!(e.line, 14);
        assert!(
            e.message.contains("expected a whole number"),
            "{}",
            e.message
        );
        let e = err(&MINIMAL.replace("kind = \"sim\"", "kind = \"tgi\""));
        assert_eq!((e.line, e.col), (9, 8));
        assert!(
            e.message.contains("sglang") && e.message.contains("llamacpp"),
            "{}",
            e.message
        );
    }

    #[test]
    fn missing_model_is_reported() {
        let text = MINIMAL.replace("[model]\npath = \"m\"\n", "");
        let e = err(&text);
        assert!(e.message.contains("model"), "{}", e.message);
        assert!(e.line >= 1);
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncé\nx", 6), (2, 3));
        assert_eq!(line_col("abc", 0), (1, 1));
    }
}
