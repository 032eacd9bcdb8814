//! Per-cell feasibility: what can be known before starting anything.
//!
//! Checks, each with a reason a user can act on: the engine can express the
//! config; TP fits the GPU pool; prompt + output + margin fit the context;
//! and, when the model's config.json and the GPU memory are known, the memory
//! model's verdicts (weights fit, heads divide by TP, KV capacity and state
//! slots against the workload).

use serde::Serialize;

use crate::campaign::{Campaign, PromptSource, ServerConfig, WorkloadPoint};
use crate::engine::{EngineKind, SpecMethod, Speculative};
use crate::load::schedule::LoadShape;
use crate::memory::{self, EngineRule, Level, MemoryInputs, ModelInfo};

/// Tokens kept free beyond prompt + output (template and special tokens).
pub const CONTEXT_MARGIN: u64 = memory::CONTEXT_MARGIN_TOKENS;

/// Shortest synthetic prompt: its marker and closing question need room.
pub const MIN_SYNTHETIC_TOKENS: u64 = 64;

/// The memory model's figures for one server config.
#[derive(Debug, Clone, Serialize)]
pub struct MemorySummary {
    /// KV cache capacity of one data rank, tokens.
    pub kv_capacity_tokens: u64,
    /// Ranks with a KV pool and batch of their own (DP replicas, SGLang's
    /// attention-DP groups); 1 without data parallelism.
    #[serde(default = "crate::engine::layout::one")]
    pub data_ranks: u32,
    /// Recurrent-state slots of hybrid models.
    pub state_slots: Option<u64>,
    /// Weights per GPU, GiB.
    pub weights_gib: f64,
    /// The drafter's weights per GPU, GiB (0 without one, or when uncounted).
    #[serde(default)]
    pub draft_weights_gib: f64,
    /// Weights per GPU, bytes (what a decode step reads).
    #[serde(skip)]
    pub weights_bytes_per_gpu: u64,
    /// KV bytes one token of context adds on one GPU.
    #[serde(skip)]
    pub kv_bytes_per_token_per_gpu: u64,
    /// Effective max running requests of one data rank.
    pub max_running_requests: u64,
    /// Blocking problems (the server cannot start).
    pub errors: Vec<String>,
    /// Non-blocking concerns.
    pub warnings: Vec<String>,
}

impl MemorySummary {
    /// Whether the memory model ran (it needs the model's config).
    pub fn estimated(&self) -> bool {
        self.weights_bytes_per_gpu > 0
    }

    /// One line for the plan table.
    pub fn line(&self) -> String {
        if !self.estimated() {
            let why = self.warnings.join("; ");
            return format!("memory not estimated: {why}");
        }
        let mut s = format!("weights {:.1} GiB/GPU", self.weights_gib);
        if self.draft_weights_gib > 0.0 {
            s.push_str(&format!(" + drafter {:.1} GiB", self.draft_weights_gib));
        }
        s.push_str(&format!(", KV capacity {} tokens", self.kv_capacity_tokens));
        if let Some(slots) = self.state_slots {
            s.push_str(&format!(", {slots} state slots"));
        }
        s.push_str(&format!(", max running {}", self.max_running_requests));
        if self.data_ranks > 1 {
            s.push_str(&format!(
                " per data rank × {} ranks ({} tokens, {} running in all)",
                self.data_ranks,
                self.kv_capacity_tokens
                    .saturating_mul(u64::from(self.data_ranks)),
                self.max_running_requests
                    .saturating_mul(u64::from(self.data_ranks))
            ));
        }
        for e in &self.errors {
            s.push_str(&format!("; ERROR: {e}"));
        }
        for w in &self.warnings {
            s.push_str(&format!("; warning: {w}"));
        }
        s
    }
}

/// Load the campaign's model description, when it names one.
pub fn load_model(c: &Campaign) -> Option<Result<ModelInfo, String>> {
    let p = c.model.config.as_ref()?;
    Some(memory::load_model_info(p).map_err(|e| e.to_string()))
}

/// Run the memory model for a server config (SGLang and vLLM with known GPU memory).
pub fn memory(
    c: &Campaign,
    s: &ServerConfig,
    model: Option<&Result<ModelInfo, String>>,
) -> Option<MemorySummary> {
    let rule = match c.engine.kind {
        EngineKind::Sglang => EngineRule::Sglang,
        EngineKind::Vllm => EngineRule::Vllm,
        _ => return None,
    };
    let gpu = c.hardware.gpu_memory_bytes?;
    let model = match model? {
        Ok(m) => m,
        Err(e) => {
            return Some(MemorySummary {
                kv_capacity_tokens: 0,
                data_ranks: 1,
                state_slots: None,
                weights_gib: 0.0,
                draft_weights_gib: 0.0,
                weights_bytes_per_gpu: 0,
                kv_bytes_per_token_per_gpu: 0,
                max_running_requests: 0,
                errors: Vec::new(),
                warnings: vec![format!("the model config cannot be read: {e}")],
            })
        }
    };
    let mut inputs = MemoryInputs::new(rule, s.tp, gpu);
    inputs.layout = s.layout();
    inputs.mem_fraction = s.mem_fraction;
    inputs.max_running_requests = s.max_running_requests;
    inputs.context_length = s.context_length;
    if !c.hardware.gpus.is_empty() {
        inputs.gpus_available = Some(c.hardware.gpus.len() as u32);
    }
    inputs.engine_version = c.engine.version.clone();
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    if let Some(sp) = &s.speculative {
        inputs.speculative_num_draft_tokens = sp.verified_tokens_per_step();
        drafter(sp, &mut inputs, &mut warnings);
    }
    // The engine's own flags in `args` count as the generated ones do: the
    // whole command line is read, the last of a flag winning as in argparse.
    if let Ok(argv) = crate::engine::command_line(&super::server_spec(c, s), "servebench") {
        if let Err(e) = inputs.apply_engine_args(&argv) {
            warnings.push(format!("memory model: {e}"));
        }
    }
    let est = memory::estimate(model, &inputs);
    for v in &est.verdicts {
        match v.level {
            Level::Error => errors.push(v.reason.clone()),
            _ => warnings.push(v.reason.clone()),
        }
    }
    Some(MemorySummary {
        kv_capacity_tokens: est.kv_capacity_tokens,
        data_ranks: est.data_ranks,
        state_slots: est.state_slots,
        weights_gib: est.weights_bytes_per_gpu as f64 / (1u64 << 30) as f64,
        draft_weights_gib: est.draft_weights_bytes_per_gpu as f64 / (1u64 << 30) as f64,
        weights_bytes_per_gpu: est.weights_bytes_per_gpu + est.draft_weights_bytes_per_gpu,
        kv_bytes_per_token_per_gpu: est.kv_bytes_per_token_per_gpu,
        max_running_requests: est.max_running_requests,
        errors,
        warnings,
    })
}

/// Count the drafter of `sp` in `inputs`: its config (`draft_config`, or
/// `draft_model` when that is a local directory), its size (`draft_size`),
/// or the target's own MTP layers; say so when a drafter goes uncounted.
fn drafter(sp: &Speculative, inputs: &mut MemoryInputs, warnings: &mut Vec<String>) {
    inputs.mtp = sp.method == Some(SpecMethod::Mtp);
    let config = sp.draft_config.as_deref().or(sp
        .draft_model
        .as_deref()
        .filter(|d| std::path::Path::new(d).exists()));
    if let Some(size) = &sp.draft_size {
        // Checked when the campaign was read.
        inputs.draft_weights_bytes = memory::parse_bytes(size).ok();
    } else if let Some(p) = config {
        match memory::load_model_info(std::path::Path::new(p)) {
            Ok(m) => inputs.draft = Some(m),
            Err(e) => warnings.push(format!(
                "the drafter's config {p} cannot be read ({e}): its weights and KV are not counted"
            )),
        }
    } else if sp.draft_model.is_some() {
        warnings.push(
            "the drafter's weights and KV are not counted: give its config.json as \
             speculative draft_config, or its size as draft_size"
                .to_string(),
        );
    }
}

/// The estimates `plan` cannot make for `s`, each with what it does instead:
/// a pass-through speculative algorithm has no rules servebench knows.
pub fn unknowns(s: &ServerConfig) -> Vec<String> {
    let Some(name) = s
        .speculative
        .as_ref()
        .and_then(|sp| sp.algorithm.as_deref())
    else {
        return Vec::new();
    };
    vec![
        format!(
            "memory: algorithm {name} is passed through as written, so the tokens it verifies \
             per step (their KV and recurrent state) are unknown; the check counts its draft \
             model's weights, if any, and assumes the default draft tokens per step"
        ),
        format!(
            "ETA: algorithm {name}'s tokens per step are unknown; the server is estimated as \
             autoregressive until its first cell is measured"
        ),
    ]
}

/// A session workload's turns that ask for more output than the
/// workload's `output_len`, which caps them: said before the run, so a
/// scenario's long turns are not cut short unseen.
fn capped_turns(c: &Campaign, w: &WorkloadPoint) -> Option<String> {
    let PromptSource::Scenario { name, .. } = &w.source else {
        return None;
    };
    let long: Vec<String> = c
        .scenarios
        .get(name)?
        .turns
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let asked = t.output_len? as u64;
            (asked > w.output_len).then(|| format!("turn {} asks {asked}", i + 1))
        })
        .collect();
    (!long.is_empty()).then(|| {
        format!(
            "scenario `{name}`: {} output tokens; the workload's output_len {} caps every turn (raise it to send them whole)",
            long.join(", "),
            w.output_len
        )
    })
}

/// Verdict for one cell: a skip reason, and warnings.
pub fn check(
    c: &Campaign,
    s: &ServerConfig,
    w: &WorkloadPoint,
    command: &Result<Vec<String>, String>,
    mem: Option<&MemorySummary>,
    model: Option<&Result<ModelInfo, String>>,
) -> (Option<String>, Vec<String>) {
    let mut warnings = Vec::new();
    if c.engine.kind.launches() {
        if let Err(e) = command {
            return (Some(e.clone()), warnings);
        }
    }
    // Fewer measured requests than users can never put the level at its
    // concurrency: the cell would be under-loaded, so say it now.
    if let (LoadShape::Concurrency { value }, Some(n)) = (&w.load, w.num_requests) {
        let asked = u64::from(*value);
        if asked > 1 && n < asked {
            warnings.push(format!(
                "num_requests {n} cannot keep {asked} requests in flight: the level would be under-loaded and not ranked; num_requests = {} or more would reach it (a few times that measures it steadily)",
                asked
            ));
        }
    }
    warnings.extend(capped_turns(c, w));
    if w.source == PromptSource::Synthetic && w.input_len < MIN_SYNTHETIC_TOKENS {
        return (
            Some(format!(
                "input_len {} is below the {MIN_SYNTHETIC_TOKENS}-token minimum of synthetic prompts (unique marker plus closing question)",
                w.input_len
            )),
            warnings,
        );
    }
    let pool = c.hardware.gpus.len() as u32;
    if pool > 0 && s.gpus() > pool {
        let excluded = if c.hardware.exclude_gpus.is_empty() {
            String::new()
        } else {
            format!("; excluded: {:?}", c.hardware.exclude_gpus)
        };
        return (
            Some(format!(
                "{} needs {} GPUs but the pool has {} ({:?}{excluded}){}",
                layout_name(s),
                s.gpus(),
                pool,
                c.hardware.gpus,
                fitting_layouts(s, pool)
            )),
            warnings,
        );
    }
    let model_ctx = model
        .and_then(|m| m.as_ref().ok())
        .and_then(|m| m.max_context);
    let mut context = s.context_length.or(model_ctx);
    // llama.cpp divides its context between the slots (unless --kv-unified).
    if c.engine.kind == EngineKind::Llamacpp
        && !s.args.iter().any(|a| a == "--kv-unified" || a == "-kvu")
    {
        if let (Some(ctx), Some(slots)) = (s.context_length, s.max_running_requests) {
            context = Some(ctx / u64::from(slots.max(1)));
        }
    }
    if let Some(ctx) = context {
        let need = w.input_len + w.output_len + CONTEXT_MARGIN;
        if need > ctx {
            return (
                Some(format!(
                    "input {} + output {} + margin {} = {} tokens exceed the context length {} per request",
                    w.input_len, w.output_len, CONTEXT_MARGIN, need, ctx
                )),
                warnings,
            );
        }
    }
    if let Some(m) = mem {
        if let Some(e) = m.errors.first() {
            return (Some(e.clone()), warnings);
        }
        let concurrency = match w.load {
            LoadShape::Concurrency { value } => value as u64,
            LoadShape::Rate {
                max_concurrency, ..
            }
            | LoadShape::Replay {
                max_concurrency, ..
            } => max_concurrency.map(u64::from).unwrap_or(0),
        };
        let want = concurrency * w.request_tokens();
        if concurrency > 0 && m.kv_capacity_tokens > 0 && want > m.kv_capacity_tokens {
            warnings.push(format!(
                "{concurrency} concurrent × {} tokens = {want} exceed the KV capacity of {} tokens: requests will queue",
                w.request_tokens(),
                m.kv_capacity_tokens
            ));
        }
        // The same cap the server line gives (state slots per running
        // request included), so every cell above it says the same number.
        if m.estimated() && concurrency > m.max_running_requests {
            warnings.push(format!(
                "{concurrency} concurrent requests exceed the {} the server will run at once{}: requests will queue",
                m.max_running_requests,
                m.state_slots
                    .map(|s| format!(" ({s} recurrent-state slots)"))
                    .unwrap_or_default()
            ));
        }
    }
    (None, warnings)
}

/// A server's layout as the plan names it: `tp=8`, or `tp4-dp2` beyond TP.
fn layout_name(s: &ServerConfig) -> String {
    let l = s.layout();
    if l.is_tp_only() {
        format!("tp={}", l.tp)
    } else {
        format!("layout {} (TP × DP × PP)", l.label())
    }
}

/// What would fit a pool of `pool` GPUs: fewer replicas, else fewer
/// pipeline stages, else a smaller TP.
fn fitting_layouts(s: &ServerConfig, pool: u32) -> String {
    let l = s.layout();
    let per_replica = l.tp.max(1) * l.pp.max(1);
    if l.dp > 1 && per_replica <= pool {
        return format!("; dp = {} fits", pool / per_replica);
    }
    if l.pp > 1 && l.tp <= pool {
        return format!("; with dp = 1, pp = {} fits", (pool / l.tp.max(1)).max(1));
    }
    String::new()
}
