//! GPU memory and feasibility model for one server configuration.
//!
//! Given a [`ModelInfo`] (read from Hugging Face files by [`load_model_info`])
//! and a server configuration ([`MemoryInputs`]), [`estimate`] says what one
//! GPU of the tensor-parallel group will hold: weights, the KV cache pool,
//! the recurrent-state pool of hybrid models and the speculative-decoding
//! draft; how many tokens of KV cache and how many requests that leaves; and
//! which configurations cannot run, with the reason in plain language.
//!
//! The arithmetic follows each engine's own start-up rule:
//! - SGLang: `--mem-fraction-static` × (memory free before weights load) must
//!   hold weights plus all pools; the remaining fraction is left for
//!   activations and CUDA graphs.
//! - vLLM: `--gpu-memory-utilization` × total memory must hold everything,
//!   so weights, the profiled activation peak, non-PyTorch memory and the KV
//!   cache share it.
//!
//! Units: all sizes are bytes, all lengths are tokens. Invariants: every
//! figure is per GPU (one TP rank); the module is pure (no I/O, no clocks),
//! so equal inputs give equal outputs.

pub mod gpus;
mod hf_config;
mod sizes;
#[cfg(test)]
mod tests;

pub use hf_config::{
    load_model_info, parse_model_info, Attention, Dtype, LayerCounts, MemoryError, ModelInfo, Moe,
    Quantization, RecurrentLayer, WeightSource,
};

pub use sizes::{
    kv_bytes_per_token_per_gpu, state_bytes_per_request_per_gpu, weights_bytes_per_gpu,
};

use serde::Serialize;

use sizes::act_bytes;

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// Tokens a request may need beyond input + output (chat template, special tokens).
pub const CONTEXT_MARGIN_TOKENS: u64 = 64;

/// SGLang splits the post-weights budget between state and KV as ratio : 1 (`--mamba-full-memory-ratio`).
const SGLANG_MAMBA_FULL_MEMORY_RATIO: f64 = 0.9;
/// SGLang keeps this many state slots per running request when the radix cache is on.
const SGLANG_MAMBA_SLOTS_PER_REQUEST: u64 = 3;
/// SGLang sizes the sliding-window pool at this fraction of the full pool (`--swa-full-tokens-ratio`).
const SGLANG_SWA_FULL_TOKENS_RATIO: f64 = 0.8;
/// Draft tokens verified per step when speculative decoding is on but the count is not given.
const DEFAULT_DRAFT_TOKENS: u32 = 4;
/// Sequences vLLM runs in its profiling pass; their logits are part of the activation peak.
const VLLM_PROFILE_SEQS: u64 = 256;

/// Which engine's memory rule applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum EngineRule {
    /// SGLang: `--mem-fraction-static` covers weights and pools.
    Sglang,
    /// vLLM: `--gpu-memory-utilization` covers everything.
    Vllm,
}

/// KV cache element type (`--kv-cache-dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KvCacheDtype {
    /// The model's activation dtype (16-bit).
    #[default]
    Auto,
    /// 8-bit float.
    Fp8,
}

/// One server configuration as the memory model sees it.
#[derive(Clone, Debug)]
pub struct MemoryInputs {
    /// Memory rule to apply.
    pub engine: EngineRule,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Total memory of one GPU, as the driver reports it.
    pub gpu_memory_bytes: u64,
    /// `--mem-fraction-static` (SGLang) or `--gpu-memory-utilization` (vLLM); engine default when absent.
    pub mem_fraction: Option<f64>,
    /// `--max-running-requests` / `--max-num-seqs`.
    pub max_running_requests: Option<u32>,
    /// `--context-length` / `--max-model-len`; the model's own limit when absent.
    pub context_length: Option<u64>,
    /// `--kv-cache-dtype`.
    pub kv_cache_dtype: KvCacheDtype,
    /// Draft model for speculative decoding, if any.
    pub draft: Option<ModelInfo>,
    /// Tokens verified per speculative step (`--speculative-num-draft-tokens`).
    pub speculative_num_draft_tokens: Option<u32>,
    /// Memory outside weights and caches charged by the engine rule (see [`estimate`]); overrides the default.
    pub reserve_bytes: Option<u64>,
    /// vLLM `--max-num-batched-tokens` (tokens in the profiling pass); vLLM's default when absent.
    pub max_batched_tokens: Option<u64>,
    /// GPUs the server may use.
    pub gpus_available: Option<u32>,
    /// Tokens per request (input + output) of the workload to check.
    pub request_tokens: Option<u64>,
    /// Concurrent requests of the workload to check.
    pub concurrency: Option<u32>,
}

impl MemoryInputs {
    /// Inputs with every option at the engine default.
    pub fn new(engine: EngineRule, tp: u32, gpu_memory_bytes: u64) -> Self {
        MemoryInputs {
            engine,
            tp,
            gpu_memory_bytes,
            mem_fraction: None,
            max_running_requests: None,
            context_length: None,
            kv_cache_dtype: KvCacheDtype::Auto,
            draft: None,
            speculative_num_draft_tokens: None,
            reserve_bytes: None,
            max_batched_tokens: None,
            gpus_available: None,
            request_tokens: None,
            concurrency: None,
        }
    }
}

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The server cannot start or the workload cannot be served.
    Error,
    /// It runs, but degraded (queueing, capped concurrency).
    Warn,
}

/// One feasibility finding with a reason the user can act on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Severity.
    pub level: Level,
    /// Plain-language reason and fix.
    pub reason: String,
}

/// What one GPU of the server will hold and what that allows; the JSON field names are a contract.
#[derive(Clone, Debug, Serialize)]
pub struct Estimate {
    /// Memory rule applied.
    pub engine: EngineRule,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Total memory of one GPU.
    pub gpu_memory_bytes: u64,
    /// Memory fraction in force (given or engine default).
    pub mem_fraction: f64,
    /// Bytes the engine rule lets weights and caches use.
    pub budget_bytes_per_gpu: u64,
    /// Memory outside weights and caches charged against the budget.
    pub reserve_bytes_per_gpu: u64,
    /// Target model weights on one GPU.
    pub weights_bytes_per_gpu: u64,
    /// Draft model weights on one GPU.
    pub draft_weights_bytes_per_gpu: u64,
    /// KV bytes one token adds on one GPU (full-attention layers of target and draft).
    pub kv_bytes_per_token_per_gpu: u64,
    /// KV bytes one token adds in sliding-window layers, paid only up to the window.
    pub sliding_kv_bytes_per_token_per_gpu: u64,
    /// Recurrent state (SSM + convolution) one request holds on one GPU.
    pub state_bytes_per_request_per_gpu: u64,
    /// Bytes of the KV pool.
    pub kv_pool_bytes_per_gpu: u64,
    /// Bytes of the recurrent-state pool (including speculative intermediate state).
    pub state_pool_bytes_per_gpu: u64,
    /// Of the state pool, bytes kept for speculative verification.
    pub spec_state_bytes_per_gpu: u64,
    /// Tokens the KV pool holds.
    pub kv_capacity_tokens: u64,
    /// Recurrent-state slots (None for models without recurrent layers).
    pub state_slots: Option<u64>,
    /// Running requests the server will allow.
    pub max_running_requests: u64,
    /// Requests of `request_tokens` that fit at once (None when no length was given).
    pub max_concurrent_requests: Option<u64>,
    /// Context length in force.
    pub context_length: Option<u64>,
    /// Findings, errors first.
    pub verdicts: Vec<Finding>,
    /// Assumptions behind the figures.
    pub assumptions: Vec<String>,
}

impl Estimate {
    /// True when no finding is an error.
    pub fn runnable(&self) -> bool {
        self.verdicts.iter().all(|v| v.level != Level::Error)
    }
}

/// Parses a size such as `96GiB`, `80GB`, `23.58GiB`, `81559MiB` or plain bytes.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|c| *c != '_').collect();
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size: expected a number such as 80GB or 96GiB"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        "kib" => 1024.0,
        "mib" => MIB,
        "gib" => GIB,
        "tib" => GIB * 1024.0,
        other => {
            return Err(format!(
                "`{s}`: unknown unit `{other}` (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    let bytes = value * mult;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{s}` is too large"));
    }
    Ok(bytes.round() as u64)
}

/// SGLang's default `--mem-fraction-static` for a GPU of `gpu_bytes` (server_args heuristic since v0.5.4).
pub fn sglang_default_mem_fraction(gpu_bytes: u64, tp: u32, speculative: bool) -> f64 {
    let gpu_mb = gpu_bytes as f64 / MIB;
    let small_tp = tp < 4;
    let (chunked, graph_bs) = if gpu_mb < 20.0 * 1024.0 {
        (2048.0, 8.0)
    } else if gpu_mb < 35.0 * 1024.0 {
        (2048.0, if small_tp { 24.0 } else { 80.0 })
    } else if gpu_mb < 60.0 * 1024.0 {
        (4096.0, if small_tp { 32.0 } else { 160.0 })
    } else if gpu_mb < 160.0 * 1024.0 {
        (8192.0, if small_tp { 256.0 } else { 512.0 })
    } else {
        (16384.0, 512.0)
    };
    let mut reserved = 512.0 + chunked * 1.5 + graph_bs * 2.0 + f64::from(tp) / 8.0 * 1024.0;
    if gpu_mb > 60.0 * 1024.0 {
        reserved = reserved.max(10.0 * 1024.0);
    }
    if speculative {
        reserved += 2.0 * 1024.0;
    }
    (((gpu_mb - reserved) / gpu_mb) * 1000.0).round() / 1000.0
}

/// vLLM's default `--gpu-memory-utilization`.
pub const VLLM_DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;

fn vllm_default_batched_tokens(gpu_bytes: u64) -> u64 {
    // `vllm serve` defaults (V1): larger chunks on GPUs with at least 70 GiB.
    if gpu_bytes as f64 >= 70.0 * GIB {
        8192
    } else {
        2048
    }
}

fn vllm_default_max_seqs(gpu_bytes: u64) -> u64 {
    if gpu_bytes as f64 >= 70.0 * GIB {
        1024
    } else {
        256
    }
}

/// Peak activation bytes of vLLM's profiling pass over `tokens` tokens on one rank.
fn vllm_activation_peak(m: &ModelInfo, tp: u32, tokens: u64) -> f64 {
    let t = f64::from(tp.max(1));
    let moe_inter = m.moe.as_ref().map_or(0, |x| {
        u64::from(x.experts_per_token) * x.expert_intermediate + x.shared_intermediate
    });
    let dense_inter = if m.moe.as_ref().is_none_or(|x| x.first_dense_layers > 0) {
        m.intermediate_size
    } else {
        0
    };
    let inter = dense_inter.max(moe_inter) as f64 / t;
    let act = act_bytes(m) as f64;
    // Gate/up output, the activated product and a few hidden-sized buffers live
    // at once; fitted against vLLM's own profile of Llama-3.1-8B (see tests).
    let per_token = (3.0 * inter + 3.0 * m.hidden_size as f64) * act;
    let logits = (VLLM_PROFILE_SEQS * m.vocab_size * 4) as f64;
    tokens as f64 * per_token + logits
}

fn default_reserve(m: &ModelInfo, i: &MemoryInputs, a: &mut Vec<String>) -> f64 {
    let tp = i.tp.max(1);
    match i.engine {
        EngineRule::Sglang => {
            let ctx = if tp > 1 { 1.5 } else { 0.5 };
            a.push(format!(
                "SGLang: {ctx} GiB per GPU is taken by the CUDA context{} before weights load; \
                 activations and CUDA graphs live in the 1 - mem_fraction part",
                if tp > 1 {
                    " and communication buffers"
                } else {
                    ""
                }
            ));
            ctx * GIB
        }
        EngineRule::Vllm => {
            let tokens = i
                .max_batched_tokens
                .unwrap_or_else(|| vllm_default_batched_tokens(i.gpu_memory_bytes));
            let act = vllm_activation_peak(m, tp, tokens);
            let non_torch = if tp > 1 { 0.85 } else { 0.35 } * GIB;
            a.push(format!(
                "vLLM: activation peak {:.2} GiB for a {tokens}-token profiling pass, \
                 {:.2} GiB non-PyTorch memory, CUDA graphs outside the budget",
                act / GIB,
                non_torch / GIB
            ));
            act + non_torch
        }
    }
}

/// Estimates what one GPU will hold for `model` under `inputs`, with verdicts.
///
/// `reserve_bytes` means: for vLLM, the activation peak plus non-PyTorch
/// memory plus CUDA graphs; for SGLang, the memory in use before weights load
/// (CUDA context, communication buffers), since SGLang applies its fraction
/// to what is free at that point.
pub fn estimate(model: &ModelInfo, inputs: &MemoryInputs) -> Estimate {
    let mut assumptions = Vec::new();
    let mut verdicts = Vec::new();
    let tp = inputs.tp.max(1);
    let total = inputs.gpu_memory_bytes as f64;
    let speculative = inputs.draft.is_some() || inputs.speculative_num_draft_tokens.is_some();

    let fraction = inputs.mem_fraction.unwrap_or_else(|| match inputs.engine {
        EngineRule::Sglang => {
            let f = sglang_default_mem_fraction(inputs.gpu_memory_bytes, tp, speculative);
            assumptions.push(format!("SGLang default --mem-fraction-static {f}"));
            f
        }
        EngineRule::Vllm => {
            assumptions.push(format!(
                "vLLM default --gpu-memory-utilization {VLLM_DEFAULT_GPU_MEMORY_UTILIZATION}"
            ));
            VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
        }
    });
    let reserve = match inputs.reserve_bytes {
        Some(r) => {
            assumptions.push(format!("reserve given: {:.2} GiB", r as f64 / GIB));
            r as f64
        }
        None => default_reserve(model, inputs, &mut assumptions),
    };

    let weights = weights_bytes_per_gpu(model, tp);
    let draft_weights = inputs
        .draft
        .as_ref()
        .map_or(0, |d| weights_bytes_per_gpu(d, tp));
    assumptions.push(format!(
        "weights from {}; embeddings and LM head split over TP ranks, norms, routers and MLA \
         down-projections replicated, KV projections replicated when TP exceeds the KV heads",
        match model.weight_source {
            WeightSource::SafetensorsIndex => "the safetensors index",
            WeightSource::Architecture => "the parameter count of the architecture",
        }
    ));
    if model.mtp_layers > 0 {
        assumptions.push(format!(
            "{} multi-token-prediction layer(s) in the checkpoint are not loaded without speculative decoding",
            model.mtp_layers
        ));
    }
    if let Some(Quantization::Other { name }) = &model.quantization {
        assumptions.push(format!(
            "quantization `{name}` is not modelled: linear weights sized at the activation dtype"
        ));
    }

    let (mut kv_tok, mut swa_tok) = kv_bytes_per_token_per_gpu(model, tp, inputs.kv_cache_dtype);
    if let Some(d) = &inputs.draft {
        let (f, s) = kv_bytes_per_token_per_gpu(d, tp, inputs.kv_cache_dtype);
        kv_tok += f;
        swa_tok += s;
    }
    let state = state_bytes_per_request_per_gpu(model, tp, inputs.engine);

    // What weights and pools may use together.
    let budget = match inputs.engine {
        EngineRule::Sglang => fraction * (total - reserve),
        EngineRule::Vllm => fraction * total - reserve,
    };
    let mut rest = budget - (weights + draft_weights) as f64;

    let draft_tokens = u64::from(
        inputs
            .speculative_num_draft_tokens
            .unwrap_or(DEFAULT_DRAFT_TOKENS),
    );
    if speculative && inputs.speculative_num_draft_tokens.is_none() {
        assumptions.push(format!(
            "{DEFAULT_DRAFT_TOKENS} draft tokens per speculative step"
        ));
    }

    // Recurrent-state pool: SGLang carves a separate pool; vLLM shares the KV pool.
    let mut state_slots = None;
    let mut state_pool = 0.0;
    let mut spec_state = 0.0;
    if state > 0 && rest > 0.0 {
        let per_req = state as f64;
        match inputs.engine {
            EngineRule::Sglang => {
                let ratio = SGLANG_MAMBA_SLOTS_PER_REQUEST as f64;
                let budget =
                    rest * SGLANG_MAMBA_FULL_MEMORY_RATIO / (1.0 + SGLANG_MAMBA_FULL_MEMORY_RATIO);
                let slots = if speculative {
                    (budget / (per_req * (1.0 + draft_tokens as f64 / ratio))).floor()
                } else {
                    (budget / per_req).floor()
                };
                if speculative {
                    // Verification keeps one state per draft token of every running request.
                    let running = (slots / ratio)
                        .floor()
                        .min(inputs.max_running_requests.map_or(f64::INFINITY, f64::from));
                    spec_state = per_req * running * draft_tokens as f64;
                }
                state_pool = slots * per_req + spec_state;
                state_slots = Some(slots as u64);
                assumptions.push(format!(
                    "SGLang hybrid pools: state gets {SGLANG_MAMBA_FULL_MEMORY_RATIO}/(1+{SGLANG_MAMBA_FULL_MEMORY_RATIO}) \
                     of the post-weights budget, {SGLANG_MAMBA_SLOTS_PER_REQUEST} state slots per running request \
                     (radix cache on), SSM state in {}",
                    if model.ssm_state_dtype.is_some() { "the config's mamba_ssm_dtype" } else { "float32" }
                ));
            }
            EngineRule::Vllm => {
                state_slots = Some((rest / per_req).floor() as u64);
                assumptions.push(
                    "vLLM hybrid: recurrent state shares the KV pool, one state per running request"
                        .into(),
                );
            }
        }
        rest -= state_pool;
    }
    let kv_pool = rest.max(0.0);

    // Sliding-window layers: SGLang sizes their pool at a fixed fraction of the
    // full pool; vLLM gives every layer group the same number of blocks.
    let per_token_cost = match inputs.engine {
        EngineRule::Sglang => kv_tok as f64 + SGLANG_SWA_FULL_TOKENS_RATIO * swa_tok as f64,
        EngineRule::Vllm => kv_tok.max(swa_tok) as f64,
    };
    let kv_capacity = if per_token_cost > 0.0 {
        (kv_pool / per_token_cost).floor() as u64
    } else {
        0
    };
    let swa_capacity = match inputs.engine {
        EngineRule::Sglang => (kv_capacity as f64 * SGLANG_SWA_FULL_TOKENS_RATIO) as u64,
        EngineRule::Vllm => kv_capacity,
    };
    if swa_tok > 0 {
        assumptions.push(format!(
            "sliding-window layers hold at most {} tokens per request",
            model.sliding_window.unwrap_or(0)
        ));
    }

    let context = inputs.context_length.or(model.max_context);
    let state_limit = state_slots.map(|s| match inputs.engine {
        EngineRule::Sglang => s / SGLANG_MAMBA_SLOTS_PER_REQUEST,
        EngineRule::Vllm => s,
    });
    let default_running = match inputs.engine {
        EngineRule::Sglang => {
            let ctx = context.unwrap_or(4096).max(1);
            (kv_capacity.saturating_mul(512) / ctx).clamp(2048, 4096)
        }
        EngineRule::Vllm => vllm_default_max_seqs(inputs.gpu_memory_bytes),
    };
    let requested_running = inputs
        .max_running_requests
        .map_or(default_running, u64::from);
    let mut max_running = requested_running.min((kv_capacity / 2).max(1));
    if let Some(s) = state_limit {
        max_running = max_running.min(s);
    }

    let max_concurrent = inputs.request_tokens.map(|len| {
        let len = len.max(1);
        match (inputs.engine, state_slots) {
            (EngineRule::Vllm, Some(_)) => {
                (kv_pool / (len as f64 * per_token_cost + state as f64)).floor() as u64
            }
            _ => {
                let mut n = kv_capacity / len;
                if swa_tok > 0 {
                    let w = model.sliding_window.unwrap_or(len).min(len).max(1);
                    n = n.min(swa_capacity / w);
                }
                n
            }
        }
        .min(max_running)
    });

    // Verdicts, in the order a user would fix them.
    if let Some(g) = inputs.gpus_available {
        if tp > g {
            verdicts.push(err(format!(
                "TP{tp} needs {tp} GPUs but only {g} are available: lower --tp to {g} or free GPUs"
            )));
        }
    }
    if model.num_attention_heads % tp != 0 {
        verdicts.push(err(format!(
            "the model has {} attention heads, which TP{tp} cannot split evenly: use a TP size that divides {}",
            model.num_attention_heads, model.num_attention_heads
        )));
    }
    if let Attention::Gqa { num_kv_heads, .. } = &model.attention {
        let kv = *num_kv_heads;
        if (kv >= tp && kv % tp != 0) || (kv < tp && tp % kv != 0) {
            verdicts.push(err(format!(
                "the model has {kv} KV heads, which TP{tp} can neither split nor replicate evenly: \
                 use a TP size that divides or is a multiple of {kv}"
            )));
        } else if kv < tp {
            verdicts.push(warn(format!(
                "TP{tp} exceeds the model's {kv} KV heads: each KV head is replicated {}x, \
                 so the KV cache per GPU does not shrink beyond TP{kv}",
                tp / kv
            )));
        }
    }
    if let Some(RecurrentLayer::GatedDeltaNet {
        num_k_heads,
        num_v_heads,
        ..
    }) = &model.recurrent
    {
        if num_k_heads % tp != 0 || num_v_heads % tp != 0 {
            verdicts.push(err(format!(
                "the linear-attention layers have {num_k_heads} key and {num_v_heads} value heads, \
                 which TP{tp} cannot split evenly: use a TP size that divides both"
            )));
        }
    }
    if let Some(RecurrentLayer::Mamba2 { num_heads, .. }) = &model.recurrent {
        if num_heads % tp != 0 {
            verdicts.push(err(format!(
                "the Mamba layers have {num_heads} heads, which TP{tp} cannot split evenly: \
                 use a TP size that divides {num_heads}"
            )));
        }
    }
    let all_weights = (weights + draft_weights) as f64;
    if all_weights > budget {
        verdicts.push(err(format!(
            "weights alone need {:.1} GiB per GPU but the memory rule allows {:.1} GiB \
             ({} of {:.1} GiB): raise TP, {}, or use a quantized checkpoint",
            all_weights / GIB,
            budget.max(0.0) / GIB,
            fraction,
            total / GIB,
            match inputs.engine {
                EngineRule::Sglang => "raise --mem-fraction-static",
                EngineRule::Vllm => "raise --gpu-memory-utilization",
            }
        )));
    } else if kv_capacity == 0 {
        verdicts.push(err(format!(
            "no memory is left for the KV cache after {:.1} GiB of weights per GPU: raise TP or the memory fraction",
            all_weights / GIB
        )));
    } else if state_limit == Some(0) {
        verdicts.push(err(
            "no recurrent-state slot fits: lower --max-running-requests, raise the memory fraction or TP"
                .into(),
        ));
    }
    if let (Some(len), Some(ctx)) = (inputs.request_tokens, context) {
        if len + CONTEXT_MARGIN_TOKENS > ctx {
            verdicts.push(err(format!(
                "requests of {len} tokens (input + output) plus a {CONTEXT_MARGIN_TOKENS}-token margin \
                 exceed the context length {ctx}: raise --context-length or shorten the requests"
            )));
        }
    }
    if let (Some(set), Some(model_max)) = (inputs.context_length, model.max_context) {
        if set > model_max {
            verdicts.push(warn(format!(
                "context length {set} exceeds the model's max_position_embeddings {model_max}; \
                 engines refuse this unless the override is enabled"
            )));
        }
    }
    if let Some(ctx) = context {
        if kv_capacity > 0 && ctx > kv_capacity {
            let msg = format!(
                "one request of the full context ({ctx} tokens) does not fit in the KV cache \
                 ({kv_capacity} tokens): lower --context-length or raise memory/TP"
            );
            verdicts.push(match inputs.engine {
                // vLLM refuses to start; SGLang starts and rejects such requests.
                EngineRule::Vllm => err(msg),
                EngineRule::Sglang => warn(msg),
            });
        }
    }
    if let (Some(len), Some(c)) = (inputs.request_tokens, inputs.concurrency) {
        let fit = max_concurrent.unwrap_or(0);
        if u64::from(c) > fit && kv_capacity > 0 {
            verdicts.push(warn(format!(
                "{c} concurrent requests of {len} tokens need {} KV tokens but only {fit} such requests \
                 fit at once ({kv_capacity} tokens): the rest will queue",
                u64::from(c) * len
            )));
        }
    }
    if let (Some(limit), Some(asked)) = (state_limit, inputs.max_running_requests) {
        if limit > 0 && limit < u64::from(asked) {
            verdicts.push(warn(format!(
                "state slots allow only {limit} running requests, below --max-running-requests {asked}: \
                 the server will cap it at {limit}"
            )));
        }
    }
    verdicts.sort_by_key(|v| v.level != Level::Error);

    Estimate {
        engine: inputs.engine,
        tp,
        gpu_memory_bytes: inputs.gpu_memory_bytes,
        mem_fraction: fraction,
        budget_bytes_per_gpu: budget.max(0.0) as u64,
        reserve_bytes_per_gpu: reserve.max(0.0) as u64,
        weights_bytes_per_gpu: weights,
        draft_weights_bytes_per_gpu: draft_weights,
        kv_bytes_per_token_per_gpu: kv_tok,
        sliding_kv_bytes_per_token_per_gpu: swa_tok,
        state_bytes_per_request_per_gpu: state,
        kv_pool_bytes_per_gpu: kv_pool as u64,
        state_pool_bytes_per_gpu: state_pool as u64,
        spec_state_bytes_per_gpu: spec_state as u64,
        kv_capacity_tokens: kv_capacity,
        state_slots,
        max_running_requests: max_running,
        max_concurrent_requests: max_concurrent,
        context_length: context,
        verdicts,
        assumptions,
    }
}

fn err(reason: String) -> Finding {
    Finding {
        level: Level::Error,
        reason,
    }
}

fn warn(reason: String) -> Finding {
    Finding {
        level: Level::Warn,
        reason,
    }
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / GIB)
}

/// Renders an estimate as an aligned table for the terminal.
pub fn render_table(e: &Estimate) -> String {
    let engine = match e.engine {
        EngineRule::Sglang => "sglang",
        EngineRule::Vllm => "vllm",
    };
    let mut rows: Vec<(String, String)> = vec![
        ("engine / TP".into(), format!("{engine} / TP{}", e.tp)),
        ("GPU memory".into(), gib(e.gpu_memory_bytes)),
        ("memory fraction".into(), format!("{}", e.mem_fraction)),
        (
            "budget (weights + pools)".into(),
            gib(e.budget_bytes_per_gpu),
        ),
        ("reserve".into(), gib(e.reserve_bytes_per_gpu)),
        ("weights".into(), gib(e.weights_bytes_per_gpu)),
    ];
    if e.draft_weights_bytes_per_gpu > 0 {
        rows.push(("draft weights".into(), gib(e.draft_weights_bytes_per_gpu)));
    }
    rows.push(("KV pool".into(), gib(e.kv_pool_bytes_per_gpu)));
    rows.push((
        "KV per token".into(),
        format!("{} B", e.kv_bytes_per_token_per_gpu),
    ));
    if e.sliding_kv_bytes_per_token_per_gpu > 0 {
        rows.push((
            "sliding KV per token".into(),
            format!("{} B", e.sliding_kv_bytes_per_token_per_gpu),
        ));
    }
    if let Some(slots) = e.state_slots {
        rows.push(("state pool".into(), gib(e.state_pool_bytes_per_gpu)));
        if e.spec_state_bytes_per_gpu > 0 {
            rows.push((
                "  of which speculative".into(),
                gib(e.spec_state_bytes_per_gpu),
            ));
        }
        rows.push((
            "state per request".into(),
            format!("{:.1} MiB", e.state_bytes_per_request_per_gpu as f64 / MIB),
        ));
        rows.push(("state slots".into(), slots.to_string()));
    }
    rows.push((
        "KV capacity".into(),
        format!("{} tokens", e.kv_capacity_tokens),
    ));
    rows.push((
        "max running requests".into(),
        e.max_running_requests.to_string(),
    ));
    if let Some(n) = e.max_concurrent_requests {
        rows.push(("requests that fit at once".into(), n.to_string()));
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in rows {
        out.push_str(&format!("{k:<width$}  {v}\n"));
    }
    for v in &e.verdicts {
        let tag = match v.level {
            Level::Error => "error",
            Level::Warn => "warn ",
        };
        out.push_str(&format!("{tag}  {}\n", v.reason));
    }
    for a in &e.assumptions {
        out.push_str(&format!("note   {a}\n"));
    }
    out
}
