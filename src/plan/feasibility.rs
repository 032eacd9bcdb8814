//! Per-cell feasibility: what can be known before starting anything.
//!
//! Checks, each with a reason a user can act on: the engine can express the
//! config; TP fits the GPU pool; prompt + output + margin fit the context;
//! and, when the model's config.json and the GPU memory are known, the memory
//! model's verdicts (weights fit, heads divide by TP, KV capacity and state
//! slots against the workload).

use serde::Serialize;

use crate::campaign::{Campaign, PromptSource, ServerConfig, WorkloadPoint};
use crate::engine::EngineKind;
use crate::load::schedule::LoadShape;
use crate::memory::{self, EngineRule, Level, MemoryInputs, ModelInfo};

/// Tokens kept free beyond prompt + output (template and special tokens).
pub const CONTEXT_MARGIN: u64 = memory::CONTEXT_MARGIN_TOKENS;

/// Shortest synthetic prompt: its marker and closing question need room.
pub const MIN_SYNTHETIC_TOKENS: u64 = 64;

/// The memory model's figures for one server config.
#[derive(Debug, Clone, Serialize)]
pub struct MemorySummary {
    /// KV cache capacity, tokens.
    pub kv_capacity_tokens: u64,
    /// Recurrent-state slots of hybrid models.
    pub state_slots: Option<u64>,
    /// Weights per GPU, GiB.
    pub weights_gib: f64,
    /// Weights per GPU, bytes (what a decode step reads).
    #[serde(skip)]
    pub weights_bytes_per_gpu: u64,
    /// KV bytes one token of context adds on one GPU.
    #[serde(skip)]
    pub kv_bytes_per_token_per_gpu: u64,
    /// Effective max running requests.
    pub max_running_requests: u64,
    /// Blocking problems (the server cannot start).
    pub errors: Vec<String>,
    /// Non-blocking concerns.
    pub warnings: Vec<String>,
}

impl MemorySummary {
    /// One line for the plan table.
    pub fn line(&self) -> String {
        let mut s = format!(
            "weights {:.1} GiB/GPU, KV capacity {} tokens",
            self.weights_gib, self.kv_capacity_tokens
        );
        if let Some(slots) = self.state_slots {
            s.push_str(&format!(", {slots} state slots"));
        }
        s.push_str(&format!(", max running {}", self.max_running_requests));
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
                state_slots: None,
                weights_gib: 0.0,
                weights_bytes_per_gpu: 0,
                kv_bytes_per_token_per_gpu: 0,
                max_running_requests: 0,
                errors: Vec::new(),
                warnings: vec![format!("memory model unavailable: {e}")],
            })
        }
    };
    let mut inputs = MemoryInputs::new(rule, s.tp, gpu);
    inputs.mem_fraction = s.mem_fraction;
    inputs.max_running_requests = s.max_running_requests;
    inputs.context_length = s.context_length;
    if !c.hardware.gpus.is_empty() {
        inputs.gpus_available = Some(c.hardware.gpus.len() as u32);
    }
    if let Some(sp) = &s.speculative {
        inputs.speculative_num_draft_tokens = sp.verified_tokens_per_step();
        if let Some(d) = &sp.draft_model {
            inputs.draft = memory::load_model_info(std::path::Path::new(d)).ok();
        }
    }
    let est = memory::estimate(model, &inputs);
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for v in &est.verdicts {
        match v.level {
            Level::Error => errors.push(v.reason.clone()),
            _ => warnings.push(v.reason.clone()),
        }
    }
    Some(MemorySummary {
        kv_capacity_tokens: est.kv_capacity_tokens,
        state_slots: est.state_slots,
        weights_gib: est.weights_bytes_per_gpu as f64 / (1u64 << 30) as f64,
        weights_bytes_per_gpu: est.weights_bytes_per_gpu + est.draft_weights_bytes_per_gpu,
        kv_bytes_per_token_per_gpu: est.kv_bytes_per_token_per_gpu,
        max_running_requests: est.max_running_requests,
        errors,
        warnings,
    })
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
    if pool > 0 && s.tp > pool {
        let excluded = if c.hardware.exclude_gpus.is_empty() {
            String::new()
        } else {
            format!("; excluded: {:?}", c.hardware.exclude_gpus)
        };
        return (
            Some(format!(
                "tp={} needs {} GPUs but the pool has {} ({:?}{excluded})",
                s.tp, s.tp, pool, c.hardware.gpus
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
        if let Some(slots) = m.state_slots {
            if concurrency > slots {
                warnings.push(format!("{concurrency} concurrent requests exceed the {slots} recurrent-state slots: requests will queue"));
            }
        }
    }
    (None, warnings)
}
