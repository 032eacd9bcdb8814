//! Engine adapters: turn a normalized server config into the engine's own
//! command line, and know the engine's health, metrics and exact-length
//! dialect.
//!
//! One file per engine holds its flag names and the start-up and stop
//! priors the plan assumes ([`Lifecycle`]); every flag emitted must exist in
//! that engine's real CLI (each file cites the source it was checked
//! against). What the lower layers know of an engine sits in their own
//! per-engine file, the same name in each: `telemetry/dialect/<engine>.rs`
//! (metric names, log phrases) and `memory/engine_rules/<engine>.rs` (how it
//! sizes its memory). Arguments are always an argv list, never a shell string; user
//! `extra_args` pass through untouched after the generated ones.

pub mod layout;
pub mod llamacpp;
pub mod placeholders;
pub mod sglang;
pub mod version;
pub mod vllm;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which serving engine a server config runs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// SGLang (`python -m sglang.launch_server`).
    Sglang,
    /// vLLM (`vllm serve`).
    Vllm,
    /// llama.cpp (`llama-server`).
    Llamacpp,
    /// The built-in simulator (`servebench sim`).
    Sim,
    /// An external OpenAI-compatible endpoint that servebench does not launch.
    Openai,
    /// A user-supplied command template.
    Command,
}

impl EngineKind {
    /// Every engine, for error messages listing the allowed values.
    pub const ALL: [EngineKind; 6] = [
        EngineKind::Sglang,
        EngineKind::Vllm,
        EngineKind::Llamacpp,
        EngineKind::Sim,
        EngineKind::Openai,
        EngineKind::Command,
    ];

    /// The lowercase name used in campaign files.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Sglang => "sglang",
            EngineKind::Vllm => "vllm",
            EngineKind::Llamacpp => "llamacpp",
            EngineKind::Sim => "sim",
            EngineKind::Openai => "openai",
            EngineKind::Command => "command",
        }
    }

    /// Whether servebench starts this engine's process itself.
    pub fn launches(self) -> bool {
        self != EngineKind::Openai
    }

    /// Whether a freshly started server pays one-time costs on its first
    /// requests (the simulator does not, nor does an external server that
    /// servebench did not start).
    pub fn has_cold_start(self) -> bool {
        !matches!(self, EngineKind::Openai | EngineKind::Sim)
    }

    /// Path polled for readiness: 200 means ready.
    pub fn health_path(self) -> &'static str {
        "/health"
    }

    /// Path of the Prometheus metrics endpoint.
    pub fn metrics_path(self) -> &'static str {
        "/metrics"
    }

    /// The default program and leading arguments when the campaign names none.
    pub fn default_executable(self) -> Vec<String> {
        let v: &[&str] = match self {
            EngineKind::Sglang => &["python3", "-m", "sglang.launch_server"],
            EngineKind::Vllm => &["vllm", "serve"],
            EngineKind::Llamacpp => &["llama-server"],
            EngineKind::Sim | EngineKind::Openai | EngineKind::Command => &[],
        };
        v.iter().map(|s| s.to_string()).collect()
    }

    /// What to install when this engine cannot run here, in one line.
    pub fn install_hint(self) -> &'static str {
        match self {
            EngineKind::Sglang => "install SGLang into the Python of `[engine] executable` (`pip install sglang`)",
            EngineKind::Vllm => "install vLLM (`pip install vllm`) or point `[engine] executable` at its `vllm`",
            EngineKind::Llamacpp => "install llama.cpp's `llama-server` on the PATH, or `pip install xllamacpp` for the `llama-server` script `servebench init` writes, or point `[engine] executable` at one",
            EngineKind::Sim | EngineKind::Openai | EngineKind::Command => "check `[engine] executable`",
        }
    }

    /// What the plan assumes of this engine's start and stop before any is measured.
    pub fn lifecycle(self) -> Lifecycle {
        match self {
            EngineKind::Sglang => sglang::LIFECYCLE,
            EngineKind::Vllm => vllm::LIFECYCLE,
            EngineKind::Llamacpp => llamacpp::LIFECYCLE,
            EngineKind::Sim => Lifecycle::fixed(0.2, 0.05),
            // Already running: servebench neither starts nor stops it.
            EngineKind::Openai => Lifecycle::fixed(0.0, 0.0),
            // A user's command: unknown, so a few seconds.
            EngineKind::Command => Lifecycle::fixed(5.0, 0.5),
        }
    }

    /// How this engine empties its prefix cache on request, when it can.
    pub fn prefix_cache_reset(self) -> Option<PrefixCacheReset> {
        match self {
            EngineKind::Vllm => Some(vllm::PREFIX_CACHE_RESET),
            EngineKind::Sglang => Some(sglang::PREFIX_CACHE_RESET),
            EngineKind::Sim => Some(PrefixCacheReset {
                path: "/reset_prefix_cache",
                enable_env: None,
            }),
            // llama.cpp keeps a prompt per slot and has no endpoint that
            // empties them all; an external or command server is unknown.
            EngineKind::Llamacpp | EngineKind::Openai | EngineKind::Command => None,
        }
    }

    /// The telemetry dialect for metrics and logs, when there is one.
    pub fn telemetry(self) -> Option<crate::telemetry::TelemetryEngine> {
        match self {
            EngineKind::Sglang => Some(crate::telemetry::TelemetryEngine::Sglang),
            EngineKind::Vllm => Some(crate::telemetry::TelemetryEngine::Vllm),
            EngineKind::Llamacpp => Some(crate::telemetry::TelemetryEngine::Llamacpp),
            EngineKind::Sim => Some(crate::telemetry::TelemetryEngine::Sim),
            EngineKind::Openai | EngineKind::Command => None,
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An engine's start-up and stop priors: what the plan's time estimate
/// assumes before a server of the engine has been measured
/// (`plan::eta::startup_prior_s` turns them into seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lifecycle {
    /// Start-up seconds of the engine itself: on top of the Python runtime's
    /// shared start-up when `python` (negative when it comes up sooner).
    pub startup_s: f64,
    /// Whether it starts a Python runtime: imports, engine core and memory
    /// profiling, and compilation unless told to run eager.
    pub python: bool,
    /// How fast it reads the weights at start-up, GB/s (None: it reads none).
    pub load_gb_per_s: Option<f64>,
    /// Start-up seconds each tensor-parallel rank beyond the first adds.
    pub startup_s_per_extra_rank: f64,
    /// Whether its start-up is CPU work on the host, so a CPU host's speed scales it.
    pub startup_is_cpu_work: bool,
    /// From asking it to stop until it and its process tree are gone, s.
    pub stop_s: f64,
}

impl Lifecycle {
    /// Fixed start-up and stop times, for engines that read no weights and
    /// whose start-up is not CPU work worth scaling.
    const fn fixed(startup_s: f64, stop_s: f64) -> Self {
        Lifecycle {
            startup_s,
            python: false,
            load_gb_per_s: None,
            startup_s_per_extra_rank: 0.0,
            startup_is_cpu_work: false,
            stop_s,
        }
    }
}

/// Speculative decoding methods servebench knows how to express per engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpecMethod {
    /// EAGLE draft head (SGLang `EAGLE`, vLLM `eagle`); a tree when topk > 1.
    Eagle,
    /// EAGLE-3 draft head.
    Eagle3,
    /// The model's own multi-token-prediction layers (SGLang `NEXTN`/`EAGLE`, vLLM `mtp`).
    Mtp,
    /// Block-diffusion drafter (SGLang `DFLASH`); its block size is the budget.
    Dflash,
    /// A DFlash drafter's block searched as a tree (SGLang `DDTREE`): the
    /// budget is the tree's size, and the target verifies budget + 1 tokens.
    Ddtree,
    /// A separate small draft model (SGLang `STANDALONE`, vLLM `draft_model`, llama.cpp `-md`).
    DraftModel,
    /// Prompt-lookup n-gram drafting (SGLang `NGRAM`, vLLM `ngram`, llama.cpp `ngram-*`).
    Ngram,
}

impl SpecMethod {
    /// Every method, for parsing and error messages.
    pub const ALL: [SpecMethod; 7] = [
        SpecMethod::Eagle,
        SpecMethod::Eagle3,
        SpecMethod::Mtp,
        SpecMethod::Dflash,
        SpecMethod::Ddtree,
        SpecMethod::DraftModel,
        SpecMethod::Ngram,
    ];

    /// The kebab-case name used in campaign files.
    pub fn as_str(self) -> &'static str {
        match self {
            SpecMethod::Eagle => "eagle",
            SpecMethod::Eagle3 => "eagle3",
            SpecMethod::Mtp => "mtp",
            SpecMethod::Dflash => "dflash",
            SpecMethod::Ddtree => "ddtree",
            SpecMethod::DraftModel => "draft-model",
            SpecMethod::Ngram => "ngram",
        }
    }
}

impl<'de> Deserialize<'de> for SpecMethod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        SpecMethod::ALL
            .into_iter()
            .find(|m| m.as_str() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = SpecMethod::ALL.iter().map(|m| m.as_str()).collect();
                serde::de::Error::custom(format!(
                    "unknown speculative method `{name}`; known: {}. An algorithm servebench \
                     has no rules for goes in `algorithm = \"{name}\"` instead of method, \
                     passed to the engine as written (with budget_flag for its budget)",
                    known.join(", ")
                ))
            })
    }
}

/// Speculative decoding settings of one server config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Speculative {
    /// The drafting method.
    pub method: Option<SpecMethod>,
    /// Draft model path (draft-model, eagle heads, dflash drafter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<String>,
    /// The drafter's `config.json` (or its directory) for the memory model,
    /// when `draft_model` is a hub id rather than a local directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_config: Option<String>,
    /// The drafter's weights in all, e.g. `3.2GiB`, for the memory model
    /// when no config is at hand; split over the TP ranks as the engine does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_size: Option<String>,
    /// Drafting steps per verification (SGLang `--speculative-num-steps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_steps: Option<u32>,
    /// Branching factor of the draft tree (SGLang `--speculative-eagle-topk`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topk: Option<u32>,
    /// Draft tokens per step — the "budget" — passed in each engine's own
    /// meaning: SGLang `--speculative-num-draft-tokens` counts the verified
    /// tree including its root (a chain of 3 drafts is 4), while vLLM
    /// `num_speculative_tokens` and llama.cpp `--spec-draft-n-max` count
    /// drafted tokens only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_draft_tokens: Option<u32>,
    /// Simulator only: probability each successive draft token is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<f64>,
    /// llama.cpp only: the `--spec-type` value for n-gram drafting (e.g. `ngram-simple`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llamacpp_type: Option<String>,
    /// An algorithm servebench has no rules for, passed to the engine as
    /// written (SGLang `--speculative-algorithm`, vLLM's config `method`);
    /// instead of `method`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// SGLang only, with `algorithm`: the flag that takes the budget
    /// (`num_draft_tokens`), e.g. `--speculative-jetspec-budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_flag: Option<String>,
}

impl Speculative {
    /// The drafting's name as campaigns and reports show it: the method, or
    /// a pass-through algorithm in lower case.
    pub fn name(&self) -> Option<String> {
        match (&self.method, &self.algorithm) {
            (Some(m), _) => Some(m.as_str().to_string()),
            (None, Some(a)) => Some(a.to_lowercase()),
            (None, None) => None,
        }
    }

    /// Tokens the target verifies per step, where servebench knows it: the
    /// budget, or for DDTree the budget plus the tree's root. `None` for an
    /// unset budget or a pass-through algorithm.
    pub fn verified_tokens_per_step(&self) -> Option<u32> {
        if self.algorithm.is_some() {
            return None;
        }
        let n = self.num_draft_tokens?;
        Some(match self.method {
            Some(SpecMethod::Ddtree) => n.saturating_add(1),
            _ => n,
        })
    }
}

/// Everything needed to start one server, engine-independent and normalized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSpec {
    /// The engine.
    pub engine: EngineKind,
    /// Program and leading arguments (empty = the engine default).
    pub executable: Vec<String>,
    /// Model path or hub id handed to the engine.
    pub model_path: String,
    /// Name the server should answer to in `model`.
    pub served_model_name: Option<String>,
    /// Listen address.
    pub host: String,
    /// Listen port.
    pub port: u16,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Data-parallel replicas.
    #[serde(default = "layout::one")]
    pub dp: u32,
    /// Attention data-parallel groups inside the TP group.
    #[serde(default = "layout::one")]
    pub dp_attention: u32,
    /// Expert-parallel size.
    #[serde(default = "layout::one")]
    pub ep: u32,
    /// Pipeline stages.
    #[serde(default = "layout::one")]
    pub pp: u32,
    /// SGLang `--mem-fraction-static` / vLLM `--gpu-memory-utilization`.
    pub mem_fraction: Option<f64>,
    /// SGLang `--max-running-requests` / vLLM `--max-num-seqs` / llama.cpp `--parallel`.
    pub max_running_requests: Option<u32>,
    /// SGLang `--context-length` / vLLM `--max-model-len` / llama.cpp `--ctx-size`.
    pub context_length: Option<u64>,
    /// Speculative decoding, if any.
    pub speculative: Option<Speculative>,
    /// The engine's parser of tool calls (vLLM and SGLang `--tool-call-parser`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_parser: Option<String>,
    /// The engine's grammar backend for structured outputs (SGLang
    /// `--grammar-backend`, vLLM's structured-outputs `backend`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar_backend: Option<String>,
    /// Flags appended verbatim after the generated ones.
    pub extra_args: Vec<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
}

impl ServerSpec {
    /// Its parallel layout.
    pub fn layout(&self) -> layout::Layout {
        layout::Layout {
            tp: self.tp,
            dp: self.dp,
            dp_attention: self.dp_attention,
            ep: self.ep,
            pp: self.pp,
        }
    }
}

/// An engine's endpoint that empties its prefix cache: `POST` to `path`
/// answers 200 when the cache was emptied (and, like vLLM's, may say
/// `{"success": false}` while requests still hold blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixCacheReset {
    /// The path, on the server's base URL.
    pub path: &'static str,
    /// An environment variable (and its value) the engine needs before it
    /// serves the endpoint at all.
    pub enable_env: Option<(&'static str, &'static str)>,
}

/// Why an engine cannot express a server config.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{engine}: {message}")]
pub struct EngineError {
    /// The engine that refused.
    pub engine: EngineKind,
    /// What it cannot do, in a sentence.
    pub message: String,
}

impl EngineError {
    /// An error for `engine`.
    pub fn new(engine: EngineKind, message: impl Into<String>) -> Self {
        Self {
            engine,
            message: message.into(),
        }
    }
}

/// Whether the campaign's own `args` name a flag containing `name` (its
/// `--no-` form included), so a flag servebench adds for its own needs
/// defers to the campaign's choice.
pub(crate) fn mentions(spec: &ServerSpec, name: &str) -> bool {
    spec.extra_args
        .iter()
        .any(|a| a.starts_with("--") && a.contains(name))
}

/// Build the argv to start `spec` (program first). `self_exe` is this
/// servebench executable, used by the simulator engine.
pub fn command_line(spec: &ServerSpec, self_exe: &str) -> Result<Vec<String>, EngineError> {
    let mut argv = if spec.executable.is_empty() {
        spec.engine.default_executable()
    } else {
        spec.executable.clone()
    };
    match spec.engine {
        EngineKind::Sim if argv.is_empty() => {
            argv = vec![self_exe.to_string(), "sim".to_string()];
        }
        EngineKind::Command => {
            if argv.is_empty() {
                return Err(EngineError::new(
                    spec.engine,
                    "a `command` engine needs `executable` with the full command template",
                ));
            }
            argv = argv.iter().map(|a| fill_launch(spec, a)).collect();
        }
        _ => {}
    }
    let generated = generated_args(spec)?;
    if argv.is_empty() {
        return Err(EngineError::new(spec.engine, "no executable to run"));
    }
    argv.extend(generated);
    argv.extend(spec.extra_args.iter().map(|a| fill_launch(spec, a)));
    Ok(argv)
}

/// The arguments the adapter generates from `spec`'s settings, between the
/// executable and the campaign's own `args`.
fn generated_args(spec: &ServerSpec) -> Result<Vec<String>, EngineError> {
    if spec.engine != EngineKind::Openai {
        spec.layout()
            .check(spec.engine)
            .map_err(|m| EngineError::new(spec.engine, m.to_string()))?;
    }
    match spec.engine {
        EngineKind::Sglang => sglang::args(spec),
        EngineKind::Vllm => vllm::args(spec),
        EngineKind::Llamacpp => llamacpp::args(spec),
        EngineKind::Sim => sim_args(spec),
        EngineKind::Command => Ok(Vec::new()),
        EngineKind::Openai => Err(EngineError::new(
            spec.engine,
            "an external endpoint is not launched",
        )),
    }
}

/// Other spellings of flags the adapters generate, per engine (each from the
/// engine's own parser: SGLang's and vLLM's argparse aliases, llama.cpp's
/// short forms).
const FLAG_ALIASES: &[(EngineKind, &str, &str)] = &[
    (EngineKind::Sglang, "--tensor-parallel-size", "--tp-size"),
    (EngineKind::Sglang, "--model", "--model-path"),
    (EngineKind::Vllm, "-tp", "--tensor-parallel-size"),
    (EngineKind::Llamacpp, "-m", "--model"),
    (EngineKind::Llamacpp, "-c", "--ctx-size"),
    (EngineKind::Llamacpp, "-np", "--parallel"),
    (EngineKind::Llamacpp, "-a", "--alias"),
];

/// Every spelling an engine's parser takes for a parallel size beyond TP,
/// with the setting servebench writes it from. Sizes are set through the
/// settings only: a size in `args` would hold GPUs the plan does not count.
const LAYOUT_FLAGS: &[(EngineKind, &str, &str)] = &[
    (EngineKind::Sglang, "--dp-size", "dp"),
    (EngineKind::Sglang, "--data-parallel-size", "dp"),
    (EngineKind::Sglang, "--attn-dp-size", "dp_attention"),
    (
        EngineKind::Sglang,
        "--attention-data-parallel-size",
        "dp_attention",
    ),
    (EngineKind::Sglang, "--enable-dp-attention", "dp_attention"),
    (EngineKind::Sglang, "--ep-size", "ep"),
    (EngineKind::Sglang, "--expert-parallel-size", "ep"),
    (EngineKind::Sglang, "--ep", "ep"),
    (EngineKind::Sglang, "--pp-size", "pp"),
    (EngineKind::Sglang, "--pipeline-parallel-size", "pp"),
    (EngineKind::Vllm, "--data-parallel-size", "dp"),
    (EngineKind::Vllm, "-dp", "dp"),
    (EngineKind::Vllm, "--enable-expert-parallel", "ep"),
    (EngineKind::Vllm, "--no-enable-expert-parallel", "ep"),
    (EngineKind::Vllm, "-ep", "ep"),
    (EngineKind::Vllm, "--pipeline-parallel-size", "pp"),
    (EngineKind::Vllm, "-pp", "pp"),
    (EngineKind::Sim, "--dp", "dp"),
];

/// A layout size of `spec` by its setting's name.
fn layout_size(spec: &ServerSpec, setting: &str) -> u32 {
    let l = spec.layout();
    match setting {
        "dp" => l.dp,
        "dp_attention" => l.dp_attention,
        "ep" => l.ep,
        _ => l.pp,
    }
}

/// The campaign setting a generated flag comes from, for error messages.
fn setting_of(flag: &str) -> &'static str {
    match flag {
        "--tp-size" | "--tensor-parallel-size" => "tp",
        "--mem-fraction-static" | "--gpu-memory-utilization" => "mem_fraction",
        "--max-running-requests" | "--max-num-seqs" | "--parallel" => "max_running_requests",
        "--context-length" | "--max-model-len" | "--ctx-size" => "context_length",
        "--model-path" | "--model" => "[model] path",
        "--served-model-name" | "--alias" | "--model-name" => "[model] name",
        "--host" | "--port" => "the address servebench starts the server on",
        "--tool-call-parser" | "--enable-auto-tool-choice" => "tool_call_parser",
        "--grammar-backend" | "--structured-outputs-config" => "grammar_backend",
        _ => "speculative",
    }
}

/// A flag in a server's `args` that the adapter also generates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatedFlag {
    /// Index of the flag in `extra_args`.
    pub index: usize,
    /// The flag as written in `args`.
    pub written: String,
    /// The flag and value the adapter generates.
    pub generated: String,
    /// The campaign setting the generated flag comes from.
    pub setting: &'static str,
    /// Whether the flag sets a parallel size, which holds GPUs.
    pub layout: bool,
}

impl std::fmt::Display for RepeatedFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.layout {
            return write!(
                f,
                "`{}` in args sets a parallel size, which servebench sets from {} (now `{}`): \
                 the server would hold GPUs the plan does not count, so set {} instead of the flag",
                self.written, self.setting, self.generated, self.setting
            );
        }
        write!(
            f,
            "`{}` in args repeats `{}`, which servebench generates from {}; the engine would \
             take one of them while the plan checks the other, so set {} instead of the flag",
            self.written, self.generated, self.setting, self.setting
        )
    }
}

/// The flags of `spec.extra_args` that repeat a generated one (under any of
/// its spellings, `--flag=value` included). Empty when the adapter refuses
/// `spec`: that error is reported on its own.
pub fn repeated_flags(spec: &ServerSpec) -> Vec<RepeatedFlag> {
    let Ok(generated) = generated_args(spec) else {
        return Vec::new();
    };
    let canonical = |flag: &str| -> String {
        FLAG_ALIASES
            .iter()
            .find(|(e, alias, _)| *e == spec.engine && *alias == flag)
            .map(|(_, _, c)| c.to_string())
            .unwrap_or_else(|| flag.to_string())
    };
    let mut out = Vec::new();
    for (index, arg) in spec.extra_args.iter().enumerate() {
        if !arg.starts_with('-') || arg.len() < 2 {
            continue;
        }
        let written_name = arg.split('=').next().unwrap_or(arg);
        if let Some((_, _, setting)) = LAYOUT_FLAGS
            .iter()
            .find(|(e, f, _)| *e == spec.engine && *f == written_name)
        {
            out.push(RepeatedFlag {
                index,
                written: arg.clone(),
                generated: format!("{setting} = {}", layout_size(spec, setting)),
                setting,
                layout: true,
            });
            continue;
        }
        let name = canonical(written_name);
        let Some(at) = generated.iter().position(|g| canonical(g) == name) else {
            continue;
        };
        let value = generated
            .get(at + 1)
            .filter(|v| !v.starts_with('-'))
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        out.push(RepeatedFlag {
            index,
            written: arg.clone(),
            generated: format!("{}{value}", generated[at]),
            setting: setting_of(&generated[at]),
            layout: false,
        });
    }
    out
}

/// Every flag of an engine's own parser, as one release has it: SGLang's
/// `ServerArgs.add_cli_args` and vLLM's `make_arg_parser`, written out by
/// `scripts/engine-flags.py`.
fn parser_flags(engine: EngineKind) -> Option<(&'static str, &'static str)> {
    match engine {
        EngineKind::Sglang => Some(("sglang 0.5.23", include_str!("flags/sglang-0.5.23.txt"))),
        EngineKind::Vllm => Some(("vllm 0.32.0", include_str!("flags/vllm-0.32.0.txt"))),
        _ => None,
    }
}

/// Warnings for flags in `spec.extra_args` that the engine's parser (as of
/// the release its flag list comes from) does not have: a misspelt flag is
/// found at plan time instead of when the server refuses to start.
pub fn unknown_flags(spec: &ServerSpec) -> Vec<String> {
    let Some((release, list)) = parser_flags(spec.engine) else {
        return Vec::new();
    };
    let known: std::collections::HashSet<&str> = list.lines().collect();
    let mut out = Vec::new();
    for arg in &spec.extra_args {
        // Values such as `-1` or JSON are not flags.
        let is_flag = arg.starts_with("--")
            || (arg.starts_with('-') && arg[1..].starts_with(|c: char| c.is_ascii_alphabetic()));
        if !is_flag {
            continue;
        }
        let mut name = arg.split('=').next().unwrap_or(arg).to_string();
        if spec.engine == EngineKind::Vllm {
            // vLLM's parser takes `--max_model_len` and dotted JSON keys
            // (`--compilation-config.mode`).
            name = name.split('.').next().unwrap_or(&name).replace('_', "-");
        }
        if !known.contains(name.as_str()) {
            out.push(format!(
                "`{arg}` is not a flag of {release} (its parser's {} flags): check the \
                 spelling, or that the release you run has it",
                known.len()
            ));
        }
    }
    out
}

/// The environment to start `spec` with, its launch placeholders filled.
pub fn environment(spec: &ServerSpec) -> BTreeMap<String, String> {
    spec.env
        .iter()
        .map(|(k, v)| (k.clone(), fill_launch(spec, v)))
        .collect()
}

fn sim_args(spec: &ServerSpec) -> Result<Vec<String>, EngineError> {
    let mut a = vec![
        "--host".to_string(),
        spec.host.clone(),
        "--port".to_string(),
        spec.port.to_string(),
        "--model-name".to_string(),
        spec.served_model_name
            .clone()
            .unwrap_or_else(|| spec.model_path.clone()),
    ];
    if let Some(n) = spec.max_running_requests {
        a.extend(["--max-running-requests".into(), n.to_string()]);
    }
    if spec.dp > 1 {
        a.extend(["--dp".into(), spec.dp.to_string()]);
    }
    if let Some(c) = spec.context_length {
        a.extend(["--context-length".into(), c.to_string()]);
    }
    if let Some(s) = &spec.speculative {
        let k = s.num_draft_tokens.unwrap_or(4);
        a.extend(["--spec-draft-tokens".into(), k.to_string()]);
        if let Some(p) = s.acceptance {
            a.extend(["--spec-acceptance".into(), p.to_string()]);
        }
    }
    Ok(a)
}

/// `text` with the placeholders known at launch filled from `spec` (the
/// server's own settings were filled when the campaign was resolved; `{tp}`
/// is filled here too for `command` executables, which are campaign-wide).
fn fill_launch(spec: &ServerSpec, text: &str) -> String {
    placeholders::fill(text, |name| {
        Some(match name {
            "host" => spec.host.clone(),
            "port" => spec.port.to_string(),
            "model" => spec.model_path.clone(),
            "tp" => spec.tp.to_string(),
            "served_model_name" => spec
                .served_model_name
                .clone()
                .unwrap_or_else(|| spec.model_path.clone()),
            _ => return None,
        })
    })
}

/// Append `flag value` to an argv.
pub(crate) fn push(a: &mut Vec<String>, flag: &str, value: impl ToString) {
    a.push(flag.to_string());
    a.push(value.to_string());
}

/// The names SGLang and vLLM give the server settings they share.
pub(crate) struct ServerFlags {
    /// Tensor-parallel size.
    pub tp: &'static str,
    /// Memory fraction.
    pub mem_fraction: &'static str,
    /// Max running requests.
    pub max_running: &'static str,
    /// Context length.
    pub context: &'static str,
}

impl ServerFlags {
    /// The flags [`push_server_flags`] can emit under these names, then
    /// `own`, the adapter's other flags, so each flag name is written once.
    /// `N` is the total; a wrong one fails to compile.
    pub(crate) const fn known_flags<const N: usize>(
        &self,
        own: &[&'static str],
    ) -> [&'static str; N] {
        let shared = [
            "--host",
            "--port",
            "--served-model-name",
            self.tp,
            self.mem_fraction,
            self.max_running,
            self.context,
        ];
        assert!(
            N == shared.len() + own.len(),
            "N counts the shared and own flags"
        );
        let mut out = [""; N];
        let mut i = 0;
        while i < N {
            out[i] = if i < shared.len() {
                shared[i]
            } else {
                own[i - shared.len()]
            };
            i += 1;
        }
        out
    }
}

/// Validate and append host, port, served name, TP, memory fraction, max
/// running requests and context length under the engine's flag names.
pub(crate) fn push_server_flags(
    spec: &ServerSpec,
    f: &ServerFlags,
    a: &mut Vec<String>,
) -> Result<(), EngineError> {
    let err = |m: String| EngineError::new(spec.engine, m);
    push(a, "--host", &spec.host);
    push(a, "--port", spec.port);
    if let Some(name) = &spec.served_model_name {
        push(a, "--served-model-name", name);
    }
    push(a, f.tp, spec.tp);
    if let Some(m) = spec.mem_fraction {
        if !(m > 0.0 && m <= 1.0) {
            return Err(err(format!(
                "mem_fraction must be in (0, 1] ({}), got {m}",
                f.mem_fraction
            )));
        }
        push(a, f.mem_fraction, m);
    }
    if let Some(n) = spec.max_running_requests {
        if n == 0 {
            return Err(err("max_running_requests must be at least 1".into()));
        }
        push(a, f.max_running, n);
    }
    if let Some(c) = spec.context_length {
        if c == 0 {
            return Err(err(
                "context_length must be at least 1; omit it to use the model's own".into(),
            ));
        }
        push(a, f.context, c);
    }
    Ok(())
}

/// The checks every adapter makes before reading `s`, so the three engines
/// refuse the same mistakes with the same words: settings meant for another
/// engine, and settings without a method. `None`: nothing to emit.
pub(crate) fn spec_method(
    s: &Speculative,
    engine: EngineKind,
    supported: &str,
) -> Result<Option<SpecMethod>, String> {
    if s.acceptance.is_some() {
        return Err(format!(
            "speculative.acceptance is a simulator-only setting; remove it for {engine}"
        ));
    }
    if engine != EngineKind::Llamacpp && s.llamacpp_type.is_some() {
        return Err(format!(
            "speculative.llamacpp_type applies to llama.cpp only; remove it for {engine}"
        ));
    }
    if s.algorithm.is_some() || s.budget_flag.is_some() {
        return Err(format!(
            "{engine} takes no speculative algorithm by name (algorithm, budget_flag); \
             use a method: {supported}"
        ));
    }
    match s.method {
        Some(method) => Ok(Some(method)),
        None if *s == Speculative::default() => Ok(None),
        None => Err(format!(
            "speculative settings need a method (one of: {supported})"
        )),
    }
}

/// A pass-through algorithm: its name as the engine spells it and the flag
/// that takes its budget, when the campaign names one.
pub(crate) struct PassThrough<'a> {
    /// The algorithm's name, as written.
    pub name: &'a str,
    /// The flag that takes the budget.
    pub budget_flag: Option<&'a str>,
}

/// `s`'s pass-through algorithm, if it names one, checked for settings that
/// cannot go with it; `None`: `s` names a method (see [`spec_method`]).
pub(crate) fn pass_through(s: &Speculative) -> Result<Option<PassThrough<'_>>, String> {
    let Some(name) = s.algorithm.as_deref() else {
        if s.budget_flag.is_some() {
            return Err(
                "speculative.budget_flag goes with algorithm (a pass-through algorithm); \
                 known methods have their own budget flags"
                    .into(),
            );
        }
        return Ok(None);
    };
    if let Some(m) = s.method {
        return Err(format!(
            "speculative sets both method ({}) and algorithm ({name}); use method for an \
             algorithm servebench knows, algorithm for one it passes through",
            m.as_str()
        ));
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "speculative algorithm {name:?} must be a name of letters, digits, `_` and `-`"
        ));
    }
    if let Some(f) = s.budget_flag.as_deref() {
        if !f.starts_with("--") || f.len() < 3 || f.contains(char::is_whitespace) {
            return Err(format!(
                "speculative budget_flag {f:?} must be one flag such as --speculative-x-budget"
            ));
        }
    }
    Ok(Some(PassThrough {
        name,
        budget_flag: s.budget_flag.as_deref(),
    }))
}

/// Refuse what an engine that drafts a single chain of `num_draft_tokens`
/// cannot express: a tree (topk above 1) or a separate step count. `name` is
/// the engine as users know it, `length` where the chain length goes.
pub(crate) fn chain_only(s: &Speculative, name: &str, length: &str) -> Result<(), String> {
    if let Some(k) = s.topk.filter(|k| *k > 1) {
        return Err(format!(
            "{name} drafts a single chain; topk {k} (a draft tree) cannot be expressed, \
             use topk 1 or unset"
        ));
    }
    if s.num_steps.is_some() {
        return Err(format!(
            "{name} has no separate draft-step count; the chain length is \
             num_draft_tokens ({length}), so leave num_steps unset"
        ));
    }
    Ok(())
}

/// The value following `flag` in an argv.
#[cfg(test)]
pub(crate) fn value_of<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter()
        .position(|a| a == flag)
        .map(|i| argv[i + 1].as_str())
}

/// The message `spec` is refused with.
#[cfg(test)]
pub(crate) fn err_of(spec: &ServerSpec) -> String {
    command_line(spec, "x").unwrap_err().to_string()
}

#[cfg(test)]
pub(crate) fn test_spec(engine: EngineKind) -> ServerSpec {
    ServerSpec {
        engine,
        executable: Vec::new(),
        model_path: "/models/m".into(),
        served_model_name: Some("m".into()),
        host: "127.0.0.1".into(),
        port: 30000,
        tp: 1,
        dp: 1,
        dp_attention: 1,
        ep: 1,
        pp: 1,
        mem_fraction: None,
        max_running_requests: None,
        context_length: None,
        speculative: None,
        tool_call_parser: None,
        grammar_backend: None,
        extra_args: Vec::new(),
        env: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error `engine`'s adapter gives for `spec` changed by `change`.
    fn err_with(engine: EngineKind, change: impl FnOnce(&mut ServerSpec)) -> String {
        let mut spec = test_spec(engine);
        change(&mut spec);
        err_of(&spec)
    }

    /// The error `engine`'s adapter gives for speculative settings `s`.
    fn spec_err(engine: EngineKind, s: Speculative) -> String {
        err_with(engine, |spec| spec.speculative = Some(s))
    }

    #[test]
    fn plain_configs_give_the_model_then_the_shared_flags() {
        for (engine, model, tp) in [
            (
                EngineKind::Sglang,
                &["--model-path", "/models/m"][..],
                "--tp-size",
            ),
            // `vllm serve` takes the model as a positional argument.
            (
                EngineKind::Vllm,
                &["/models/m"][..],
                "--tensor-parallel-size",
            ),
        ] {
            let mut want = engine.default_executable();
            want.extend(model.iter().map(|s| s.to_string()));
            let shared = ["--host", "127.0.0.1", "--port", "30000"];
            let named = ["--served-model-name", "m", tp, "1"];
            want.extend(shared.into_iter().chain(named).map(String::from));
            // Asked of every server: per-request cached prompt tokens.
            want.push(match engine {
                EngineKind::Sglang => "--enable-cache-report".into(),
                _ => "--enable-prompt-tokens-details".into(),
            });
            assert_eq!(command_line(&test_spec(engine), "x").unwrap(), want);
            // A campaign that says otherwise is followed.
            let mut own = test_spec(engine);
            own.extra_args = vec!["--no-enable-prompt-tokens-details".into()];
            let line = command_line(&own, "x").unwrap();
            if engine == EngineKind::Vllm {
                assert!(!line.contains(&"--enable-prompt-tokens-details".to_string()));
            }
        }
    }

    #[test]
    fn shared_server_flags_reject_bad_resources() {
        for (engine, mem_flag) in [
            (EngineKind::Sglang, "--mem-fraction-static"),
            (EngineKind::Vllm, "--gpu-memory-utilization"),
        ] {
            assert!(err_with(engine, |s| s.tp = 0).contains("tp must be at least 1"));
            for m in [0.0, 1.5] {
                let msg = err_with(engine, |s| s.mem_fraction = Some(m));
                assert!(msg.contains("mem_fraction must be in (0, 1]"), "{msg}");
                assert!(msg.contains(mem_flag), "{msg}");
            }
            let msg = err_with(engine, |s| s.max_running_requests = Some(0));
            assert!(msg.contains("max_running_requests"), "{msg}");
            let msg = err_with(engine, |s| s.context_length = Some(0));
            assert!(msg.contains("context_length"), "{msg}");
        }
    }

    #[test]
    fn every_adapter_refuses_misplaced_or_methodless_speculative_settings() {
        for (engine, supported) in [
            (EngineKind::Sglang, sglang::SUPPORTED),
            (EngineKind::Vllm, vllm::SUPPORTED),
            (EngineKind::Llamacpp, llamacpp::SUPPORTED),
        ] {
            let msg = spec_err(
                engine,
                Speculative {
                    method: Some(SpecMethod::Ngram),
                    acceptance: Some(0.7),
                    ..Default::default()
                },
            );
            assert!(msg.starts_with(&format!("{engine}: ")), "{msg}");
            assert!(msg.contains("simulator-only"), "{msg}");
            let msg = spec_err(
                engine,
                Speculative {
                    num_draft_tokens: Some(4),
                    ..Default::default()
                },
            );
            assert!(
                msg.contains("need a method") && msg.contains(supported),
                "{msg}"
            );
            let msg = spec_err(
                engine,
                Speculative {
                    method: Some(SpecMethod::Ngram),
                    draft_model: Some("/d".into()),
                    ..Default::default()
                },
            );
            assert!(msg.contains("takes no draft_model"), "{msg}");
            let mut spec = test_spec(engine);
            spec.speculative = Some(Speculative::default());
            assert!(command_line(&spec, "x").is_ok());
        }
        for engine in [EngineKind::Sglang, EngineKind::Vllm] {
            let msg = spec_err(
                engine,
                Speculative {
                    method: Some(SpecMethod::Ngram),
                    num_draft_tokens: Some(2),
                    llamacpp_type: Some("ngram-simple".into()),
                    ..Default::default()
                },
            );
            assert!(msg.contains("llama.cpp only"), "{msg}");
        }
    }

    #[test]
    fn chain_drafters_refuse_trees_and_step_counts() {
        let base = Speculative {
            method: Some(SpecMethod::DraftModel),
            draft_model: Some("/models/d.gguf".into()),
            num_draft_tokens: Some(16),
            ..Default::default()
        };
        for engine in [EngineKind::Vllm, EngineKind::Llamacpp] {
            let msg = spec_err(
                engine,
                Speculative {
                    topk: Some(8),
                    ..base.clone()
                },
            );
            assert!(
                msg.starts_with(&format!("{engine}: ")) && msg.contains("topk 8"),
                "{msg}"
            );
            let msg = spec_err(
                engine,
                Speculative {
                    num_steps: Some(3),
                    ..base.clone()
                },
            );
            assert!(msg.contains("no separate draft-step count"), "{msg}");
            let msg = spec_err(
                engine,
                Speculative {
                    num_draft_tokens: Some(0),
                    ..base.clone()
                },
            );
            assert!(msg.contains("at least 1"), "{msg}");
        }
    }

    #[test]
    fn each_engine_writes_a_layout_in_its_own_flags_once() {
        let argv = |engine: EngineKind, l: layout::Layout| {
            let mut s = test_spec(engine);
            (s.tp, s.dp, s.dp_attention, s.ep, s.pp) = (l.tp, l.dp, l.dp_attention, l.ep, l.pp);
            command_line(&s, "servebench").map(|a| a.join(" "))
        };
        let l = |tp, dp, dp_attention, ep, pp| layout::Layout {
            tp,
            dp,
            dp_attention,
            ep,
            pp,
        };
        let v = argv(EngineKind::Vllm, l(2, 4, 1, 8, 1)).unwrap();
        assert!(
            v.contains("--tensor-parallel-size 2 ")
                && v.contains("--data-parallel-size 4 ")
                && v.contains("--enable-expert-parallel"),
            "{v}"
        );
        let v = argv(EngineKind::Vllm, l(4, 1, 1, 1, 2)).unwrap();
        assert!(v.contains("--pipeline-parallel-size 2"), "{v}");
        assert!(
            !v.contains("--data-parallel-size") && !v.contains("expert"),
            "{v}"
        );
        let sg = argv(EngineKind::Sglang, l(8, 1, 8, 8, 1)).unwrap();
        assert!(
            sg.contains("--tp-size 8 ")
                && sg.contains("--attn-dp-size 8 ")
                && sg.contains("--ep-size 8 "),
            "{sg}"
        );
        assert!(
            !sg.contains("--dp-size") && !sg.contains("--enable-dp-attention"),
            "{sg}"
        );
        let sg = argv(EngineKind::Sglang, l(2, 4, 1, 1, 1)).unwrap();
        assert!(sg.contains("--dp-size 4 "), "{sg}");
        let sim = argv(EngineKind::Sim, l(2, 4, 1, 1, 1)).unwrap();
        assert!(sim.contains("--dp 4"), "{sim}");
        assert!(argv(EngineKind::Sim, l(2, 1, 1, 2, 1))
            .unwrap_err()
            .to_string()
            .contains("no model of attention"));
        assert!(argv(EngineKind::Llamacpp, l(1, 2, 1, 1, 1))
            .unwrap_err()
            .to_string()
            .contains("run replicas as separate servers"));
        // TP alone writes no layout flag: command lines without layouts are
        // as they were.
        let plain = argv(EngineKind::Vllm, l(1, 1, 1, 1, 1)).unwrap();
        assert!(
            !plain.contains("data-parallel") && !plain.contains("pipeline"),
            "{plain}"
        );
    }

    #[test]
    fn sim_runs_this_executable_with_its_own_flags() {
        let mut s = test_spec(EngineKind::Sim);
        s.context_length = Some(4096);
        s.speculative = Some(Speculative {
            method: Some(SpecMethod::Eagle),
            num_draft_tokens: Some(3),
            acceptance: Some(0.5),
            ..Default::default()
        });
        s.extra_args = vec!["--crash-after".into(), "2".into()];
        let argv = command_line(&s, "/bin/servebench").unwrap();
        assert_eq!(&argv[..2], ["/bin/servebench", "sim"]);
        let joined = argv.join(" ");
        assert!(joined.contains("--port 30000") && joined.contains("--context-length 4096"));
        assert!(joined.contains("--spec-draft-tokens 3 --spec-acceptance 0.5"));
        assert!(joined.ends_with("--crash-after 2"));
    }

    #[test]
    fn command_templates_expand_placeholders_and_openai_is_not_launched() {
        let mut s = test_spec(EngineKind::Command);
        s.executable = vec![
            "my-server".into(),
            "--listen={host}:{port}".into(),
            "{model}".into(),
        ];
        let argv = command_line(&s, "x").unwrap();
        assert_eq!(
            argv,
            vec!["my-server", "--listen=127.0.0.1:30000", "/models/m"]
        );
        assert!(command_line(&test_spec(EngineKind::Openai), "x").is_err());
        assert!(command_line(&test_spec(EngineKind::Command), "x").is_err());
    }

    #[test]
    fn ddtree_and_pass_through_algorithms_are_refused_where_the_engine_has_no_such_thing() {
        let ddtree = Speculative {
            method: Some(SpecMethod::Ddtree),
            draft_model: Some("d".into()),
            num_draft_tokens: Some(8),
            ..Default::default()
        };
        assert!(spec_err(EngineKind::Vllm, ddtree.clone()).contains("vllm has no DDTree"));
        assert!(spec_err(EngineKind::Llamacpp, ddtree).contains("llama.cpp has no DDTree"));
        let jet = Speculative {
            algorithm: Some("jetspec".into()),
            draft_model: Some("d".into()),
            num_draft_tokens: Some(5),
            ..Default::default()
        };
        let msg = spec_err(EngineKind::Llamacpp, jet.clone());
        assert!(msg.contains("no speculative algorithm by name"), "{msg}");
        // vLLM takes it as the config's method, the budget as its token count.
        let mut spec = test_spec(EngineKind::Vllm);
        spec.speculative = Some(jet.clone());
        let argv = command_line(&spec, "x").unwrap();
        let config: serde_json::Value =
            serde_json::from_str(value_of(&argv, "--speculative-config").unwrap()).unwrap();
        assert_eq!(
            config,
            serde_json::json!({"method": "jetspec", "model": "d", "num_speculative_tokens": 5})
        );
        let msg = spec_err(
            EngineKind::Vllm,
            Speculative {
                budget_flag: Some("--b".into()),
                ..jet
            },
        );
        assert!(msg.contains("remove budget_flag"), "{msg}");
    }

    #[test]
    fn an_unknown_method_names_the_known_ones_and_the_pass_through_key() {
        let e = toml::from_str::<Speculative>("method = \"JETSPEC\"").unwrap_err();
        let msg = e.message();
        assert!(
            msg.contains("unknown speculative method `JETSPEC`"),
            "{msg}"
        );
        assert!(msg.contains("ddtree"), "{msg}");
        assert!(msg.contains("algorithm = \"JETSPEC\""), "{msg}");
        let ok: Speculative = toml::from_str("method = \"ddtree\"").unwrap();
        assert_eq!(ok.method, Some(SpecMethod::Ddtree));
    }

    #[test]
    fn repeated_flags_are_found_under_short_and_joined_spellings() {
        let mut s = test_spec(EngineKind::Llamacpp);
        s.context_length = Some(4096);
        s.extra_args = ["-t", "1", "-c", "1024", "--parallel=2", "--jinja"]
            .map(String::from)
            .to_vec();
        let found = repeated_flags(&s);
        assert_eq!(
            found
                .iter()
                .map(|r| (r.index, r.written.as_str(), r.generated.as_str(), r.setting))
                .collect::<Vec<_>>(),
            [(2, "-c", "--ctx-size 4096", "context_length")],
            "--parallel is not generated: max_running_requests is unset"
        );
        s.max_running_requests = Some(4);
        assert_eq!(repeated_flags(&s).len(), 2);
        // Nothing is generated for an external endpoint, nothing repeats.
        let mut o = test_spec(EngineKind::Openai);
        o.extra_args = vec!["--port".into()];
        assert!(repeated_flags(&o).is_empty());
    }

    #[test]
    fn tool_call_parser_and_grammar_backend_become_each_engines_flags() {
        let with = |engine| {
            let mut s = test_spec(engine);
            s.tool_call_parser = Some("hermes".into());
            s.grammar_backend = Some("xgrammar".into());
            s
        };
        let v = command_line(&with(EngineKind::Vllm), "x")
            .unwrap()
            .join(" ");
        assert!(
            v.contains("--enable-auto-tool-choice --tool-call-parser hermes --structured-outputs-config {\"backend\":\"xgrammar\"}"),
            "{v}"
        );
        let s = command_line(&with(EngineKind::Sglang), "x")
            .unwrap()
            .join(" ");
        assert!(
            s.contains("--tool-call-parser hermes --grammar-backend xgrammar"),
            "{s}"
        );
        let e = err_of(&with(EngineKind::Llamacpp));
        assert!(
            e.contains("--jinja") && e.contains("tool_call_parser"),
            "{e}"
        );
        // The same flag in args is refused, naming the setting.
        let mut r = with(EngineKind::Sglang);
        r.extra_args = vec!["--grammar-backend".into(), "outlines".into()];
        let found = repeated_flags(&r);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].setting, "grammar_backend");
    }

    #[test]
    fn flags_the_engines_parser_lacks_draw_a_warning() {
        let mut s = test_spec(EngineKind::Sglang);
        s.extra_args = [
            "--trust-remote-code",
            "--chunked-prefill-size=4096",
            "--speculative-ddtree-budgt",
            "8",
            "-1",
        ]
        .map(String::from)
        .to_vec();
        let w = unknown_flags(&s);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("`--speculative-ddtree-budgt` is not a flag of sglang 0.5.23"),
            "{w:?}"
        );
        // Every flag the adapters write is in their engine's list, except
        // DDTree's, which is newer than the release the list comes from.
        for (engine, own) in [
            (EngineKind::Sglang, sglang::KNOWN_FLAGS),
            (EngineKind::Vllm, vllm::KNOWN_FLAGS),
        ] {
            let mut s = test_spec(engine);
            s.extra_args = own
                .iter()
                .filter(|f| **f != "--speculative-ddtree-budget")
                .map(|f| f.to_string())
                .collect();
            assert_eq!(unknown_flags(&s), Vec::<String>::new(), "{engine}");
        }
        let mut v = test_spec(EngineKind::Vllm);
        v.extra_args = [
            "--max_model_len",
            "9",
            "--compilation-config.mode",
            "3",
            "-tp",
            "2",
            "--enforce-eagr",
        ]
        .map(String::from)
        .to_vec();
        let w = unknown_flags(&v);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("--enforce-eagr"), "{w:?}");
        // Engines without a list warn about nothing.
        let mut l = test_spec(EngineKind::Llamacpp);
        l.extra_args = vec!["--whatever".into()];
        assert!(unknown_flags(&l).is_empty());
    }

    #[test]
    fn launch_placeholders_in_flags_and_environment_take_the_chosen_address() {
        let mut s = test_spec(EngineKind::Sglang);
        s.extra_args = vec![
            "--dist-init-addr".into(),
            "{host}:{port}".into(),
            r#"{"a": 1}"#.into(),
        ];
        s.env.insert("URL".into(), "http://{host}:{port}/v1".into());
        let argv = command_line(&s, "x").unwrap();
        assert_eq!(
            argv[argv.len() - 3..],
            ["--dist-init-addr", "127.0.0.1:30000", r#"{"a": 1}"#]
        );
        assert_eq!(environment(&s)["URL"], "http://127.0.0.1:30000/v1");
    }
}
