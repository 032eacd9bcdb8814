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

mod engine_rules;
pub mod gpus;
mod hf_config;
pub mod mamba;
mod sizes;
#[cfg(test)]
mod tests;
mod verdicts;

pub use hf_config::{
    load_model_info, parse_model_info, Attention, Dtype, LayerCounts, MemoryError, ModelInfo, Moe,
    Quantization, RecurrentLayer, WeightSource,
};

pub use engine_rules::{sglang_default_mem_fraction, VLLM_DEFAULT_GPU_MEMORY_UTILIZATION};
pub use sizes::{
    kv_bytes_per_token_per_gpu, state_bytes_per_request_per_gpu, weights_bytes_per_gpu,
};

use serde::Serialize;

use crate::engine::layout::Layout;

use engine_rules::StatePool;
use sizes::Sizes;

/// One GiB in bytes.
const GIB: f64 = (1u64 << 30) as f64;
/// One MiB in bytes.
const MIB: f64 = (1u64 << 20) as f64;

/// Tokens a request may need beyond input + output (chat template, special tokens).
pub const CONTEXT_MARGIN_TOKENS: u64 = 64;

/// Draft tokens verified per step when speculative decoding is on but the count is not given.
const DEFAULT_DRAFT_TOKENS: u32 = 4;

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

/// SGLang's options that size the recurrent-state pool of hybrid models,
/// read from a server's command line (see [`mamba`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MambaArgs {
    /// `--mamba-full-memory-ratio`: state : KV split of what weights leave.
    pub full_memory_ratio: Option<f64>,
    /// `--max-mamba-cache-size`: state slots, instead of solving for them.
    pub max_cache_size: Option<u64>,
    /// `--mamba-ssm-dtype`: the SSM state element type, over the config's.
    pub ssm_dtype: Option<Dtype>,
    /// `--disable-radix-cache`: one state slot per running request.
    pub disable_radix_cache: bool,
    /// `--mamba-radix-cache-strategy` (`auto` when absent).
    pub radix_cache_strategy: Option<String>,
    /// `--disable-overlap-schedule`.
    pub disable_overlap_schedule: bool,
    /// `--page-size`.
    pub page_size: Option<u32>,
}

/// One server configuration as the memory model sees it.
#[derive(Clone, Debug)]
pub struct MemoryInputs {
    /// Memory rule to apply.
    pub engine: EngineRule,
    /// Parallel layout: TP, and the data, attention-data, expert and
    /// pipeline sizes beyond it.
    pub layout: Layout,
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
    /// The drafter's weights in all, when given as a size instead of a config.
    pub draft_weights_bytes: Option<u64>,
    /// MTP drafting: the target's multi-token-prediction layers are loaded.
    pub mtp: bool,
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
    /// The engine's release (`[engine] version`), where its rules changed between releases.
    pub engine_version: Option<String>,
    /// SGLang's hybrid-model options.
    pub mamba: MambaArgs,
}

impl MemoryInputs {
    /// Inputs with every option at the engine default.
    pub fn new(engine: EngineRule, tp: u32, gpu_memory_bytes: u64) -> Self {
        MemoryInputs {
            engine,
            layout: Layout::tp(tp),
            gpu_memory_bytes,
            mem_fraction: None,
            max_running_requests: None,
            context_length: None,
            kv_cache_dtype: KvCacheDtype::Auto,
            draft: None,
            draft_weights_bytes: None,
            mtp: false,
            speculative_num_draft_tokens: None,
            reserve_bytes: None,
            max_batched_tokens: None,
            gpus_available: None,
            request_tokens: None,
            concurrency: None,
            engine_version: None,
            mamba: MambaArgs::default(),
        }
    }

    /// Take the settings the memory model reads from an engine command line
    /// (`--flag value` or `--flag=value`; the last one wins, as argparse
    /// does). A value that does not parse is an error naming the flag.
    pub fn apply_engine_args(&mut self, args: &[String]) -> Result<(), String> {
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            if !a.starts_with("--") {
                continue;
            }
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (a.as_str(), None),
            };
            let mut value = || -> Result<String, String> {
                if let Some(v) = &inline {
                    return Ok(v.clone());
                }
                match args.get(i) {
                    Some(v) if !v.starts_with("--") => {
                        i += 1;
                        Ok(v.clone())
                    }
                    _ => Err(format!("`{flag}` needs a value")),
                }
            };
            fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
                v.parse()
                    .map_err(|_| format!("`{flag} {v}`: not a number the memory model can use"))
            }
            let sglang = self.engine == EngineRule::Sglang;
            match flag {
                "--mem-fraction-static" if sglang => self.mem_fraction = Some(num(flag, value()?)?),
                "--gpu-memory-utilization" if !sglang => {
                    self.mem_fraction = Some(num(flag, value()?)?)
                }
                "--max-running-requests" if sglang => {
                    self.max_running_requests = Some(num(flag, value()?)?)
                }
                "--max-num-seqs" if !sglang => {
                    self.max_running_requests = Some(num(flag, value()?)?)
                }
                "--context-length" if sglang => self.context_length = Some(num(flag, value()?)?),
                "--max-model-len" if !sglang => self.context_length = Some(num(flag, value()?)?),
                "--max-num-batched-tokens" if !sglang => {
                    self.max_batched_tokens = Some(num(flag, value()?)?)
                }
                "--speculative-num-draft-tokens" if sglang => {
                    self.speculative_num_draft_tokens = Some(num(flag, value()?)?)
                }
                "--kv-cache-dtype" => {
                    let v = value()?;
                    self.kv_cache_dtype = if v.starts_with("fp8") {
                        KvCacheDtype::Fp8
                    } else {
                        KvCacheDtype::Auto
                    };
                }
                "--mamba-full-memory-ratio" if sglang => {
                    let r: f64 = num(flag, value()?)?;
                    if !(r.is_finite() && r > 0.0) {
                        return Err(format!("`{flag} {r}`: the ratio must be above 0"));
                    }
                    self.mamba.full_memory_ratio = Some(r);
                }
                "--max-mamba-cache-size" if sglang => {
                    self.mamba.max_cache_size = Some(num(flag, value()?)?)
                }
                "--mamba-ssm-dtype" if sglang => {
                    let v = value()?;
                    self.mamba.ssm_dtype = Some(Dtype::parse(&v).ok_or_else(|| {
                        format!("`{flag} {v}`: expected float32, bfloat16 or float16")
                    })?);
                }
                "--mamba-radix-cache-strategy" if sglang => {
                    self.mamba.radix_cache_strategy = Some(value()?)
                }
                "--page-size" if sglang => self.mamba.page_size = Some(num(flag, value()?)?),
                "--disable-radix-cache" if sglang => self.mamba.disable_radix_cache = true,
                "--disable-overlap-schedule" if sglang => {
                    self.mamba.disable_overlap_schedule = true
                }
                _ => {}
            }
        }
        Ok(())
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
    /// The whole parallel layout.
    pub layout: Layout,
    /// Ranks that each hold a KV pool of their own tokens and a batch of
    /// their own (data-parallel replicas, SGLang's attention-DP groups);
    /// the capacities and running requests below are per rank.
    pub data_ranks: u32,
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
    /// Of those, the intermediate SSM states (one per draft token of each running request).
    pub intermediate_ssm_bytes_per_gpu: u64,
    /// Of those, the intermediate convolution windows.
    pub intermediate_conv_bytes_per_gpu: u64,
    /// State slots one running request takes (None without recurrent layers).
    pub state_slots_per_request: Option<u64>,
    /// Tokens the KV pool of one data rank holds.
    pub kv_capacity_tokens: u64,
    /// Recurrent-state slots (None for models without recurrent layers).
    pub state_slots: Option<u64>,
    /// Running requests one data rank will allow.
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

/// Estimates what one GPU will hold for `model` under `inputs`, with verdicts.
///
/// `reserve_bytes` means: for vLLM, the activation peak plus non-PyTorch
/// memory plus CUDA graphs; for SGLang, the memory in use before weights load
/// (CUDA context, communication buffers), since SGLang applies its fraction
/// to what is free at that point.
pub fn estimate(model: &ModelInfo, inputs: &MemoryInputs) -> Estimate {
    // The SSM dtype flag is applied once; the fix searches reuse the result.
    let model = &with_ssm_dtype(model, inputs);
    let (mut e, budget, state_limit) = figures(model, inputs);
    e.verdicts = verdicts::findings(
        model,
        inputs,
        engine_rules::rules(inputs.engine),
        &e,
        budget,
        state_limit,
    );
    e
}

/// `model` with the SSM state type `--mamba-ssm-dtype` sets, where it does.
fn with_ssm_dtype(model: &ModelInfo, inputs: &MemoryInputs) -> ModelInfo {
    let mut m = model.clone();
    if let (EngineRule::Sglang, Some(d)) = (inputs.engine, inputs.mamba.ssm_dtype) {
        m.ssm_state_dtype = Some(d);
    }
    m
}

/// The figures of [`estimate`] without verdicts, with the unclamped budget
/// and the running requests the state slots allow; `model` already carries
/// `--mamba-ssm-dtype`.
fn figures(model: &ModelInfo, inputs: &MemoryInputs) -> (Estimate, f64, Option<u64>) {
    let rules = engine_rules::rules(inputs.engine);
    let mut assumptions = Vec::new();
    let tp = inputs.layout.tp.max(1);
    let total = inputs.gpu_memory_bytes as f64;
    let speculative = inputs.draft.is_some()
        || inputs.draft_weights_bytes.is_some()
        || inputs.mtp
        || inputs.speculative_num_draft_tokens.is_some();

    let fraction = inputs.mem_fraction.unwrap_or_else(|| {
        rules.default_fraction(inputs.gpu_memory_bytes, tp, speculative, &mut assumptions)
    });
    let reserve = match inputs.reserve_bytes {
        Some(r) => {
            assumptions.push(format!("reserve given: {:.2} GiB", r as f64 / GIB));
            r as f64
        }
        None => rules.default_reserve(model, inputs, &mut assumptions),
    };
    let sizes = Sizes::of(model, inputs, &mut assumptions);

    let budget = rules.budget(fraction, total, reserve);
    let mut rest = budget - (sizes.weights + sizes.draft_weights) as f64;

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

    let pool = if sizes.state > 0 && rest > 0.0 {
        let pool = rules.state_pool(
            rest,
            &sizes,
            speculative.then_some(draft_tokens),
            inputs,
            model,
            &mut assumptions,
        );
        rest -= pool.bytes;
        pool
    } else {
        StatePool::default()
    };
    let kv_pool = rest.max(0.0);

    let per_token_cost = rules.token_cost(sizes.kv_tok, sizes.swa_tok);
    let kv_capacity = if per_token_cost > 0.0 {
        (kv_pool / per_token_cost).floor() as u64
    } else {
        0
    };
    let swa_capacity = rules.swa_capacity(kv_capacity);
    if sizes.swa_tok > 0 {
        assumptions.push(format!(
            "sliding-window layers hold at most {} tokens per request",
            model.sliding_window.unwrap_or(0)
        ));
    }

    let context = inputs.context_length.or(model.max_context);
    let state_limit = pool.slots.map(|s| s / pool.slots_per_request.max(1));
    let ranks = data_ranks(inputs.engine, inputs.layout);
    // SGLang divides the server's --max-running-requests among its
    // attention-DP groups; a replica (either engine) takes it whole.
    let asked_per_rank = inputs.max_running_requests.map(|m| match inputs.engine {
        EngineRule::Sglang => (m / inputs.layout.dp_attention.max(1)).max(1),
        EngineRule::Vllm => m,
    });
    let requested_running = asked_per_rank.map_or_else(
        || rules.default_max_running(kv_capacity, context, inputs.gpu_memory_bytes),
        u64::from,
    );
    let mut max_running = requested_running.min((kv_capacity / 2).max(1));
    if let Some(s) = state_limit {
        max_running = max_running.min(s);
    }

    let max_concurrent = inputs.request_tokens.map(|len| {
        let len = len.max(1);
        if rules.state_shares_kv_pool() && pool.slots.is_some() {
            (kv_pool / (len as f64 * per_token_cost + sizes.state as f64)).floor() as u64
        } else {
            let mut n = kv_capacity / len;
            if sizes.swa_tok > 0 {
                let w = model.sliding_window.unwrap_or(len).min(len).max(1);
                n = n.min(swa_capacity / w);
            }
            n
        }
        .min(max_running)
    });

    let e = Estimate {
        engine: inputs.engine,
        tp,
        layout: inputs.layout,
        data_ranks: ranks,
        gpu_memory_bytes: inputs.gpu_memory_bytes,
        mem_fraction: fraction,
        budget_bytes_per_gpu: budget.max(0.0) as u64,
        reserve_bytes_per_gpu: reserve.max(0.0) as u64,
        weights_bytes_per_gpu: sizes.weights,
        draft_weights_bytes_per_gpu: sizes.draft_weights,
        kv_bytes_per_token_per_gpu: sizes.kv_tok,
        sliding_kv_bytes_per_token_per_gpu: sizes.swa_tok,
        state_bytes_per_request_per_gpu: sizes.state,
        kv_pool_bytes_per_gpu: kv_pool as u64,
        state_pool_bytes_per_gpu: pool.bytes as u64,
        spec_state_bytes_per_gpu: (pool.intermediate_ssm_bytes + pool.intermediate_conv_bytes)
            as u64,
        intermediate_ssm_bytes_per_gpu: pool.intermediate_ssm_bytes as u64,
        intermediate_conv_bytes_per_gpu: pool.intermediate_conv_bytes as u64,
        state_slots_per_request: pool.slots.map(|_| pool.slots_per_request),
        kv_capacity_tokens: kv_capacity,
        state_slots: pool.slots,
        max_running_requests: max_running,
        max_concurrent_requests: max_concurrent,
        context_length: context,
        verdicts: Vec::new(),
        assumptions,
    };
    (e, budget, state_limit)
}

/// Ranks of `layout` that each keep their own KV pool and batch: DP
/// replicas, times SGLang's attention-DP groups.
pub fn data_ranks(engine: EngineRule, layout: Layout) -> u32 {
    let replicas = layout.dp.max(1);
    match engine {
        EngineRule::Sglang => replicas.saturating_mul(layout.dp_attention.max(1)),
        EngineRule::Vllm => replicas,
    }
}

/// The largest `--max-running-requests` up to `asked` whose own state
/// slots allow it, when the slots depend on it; `None` when none does.
fn running_that_fits(model: &ModelInfo, inputs: &MemoryInputs, asked: u32) -> Option<u32> {
    (1..=asked.min(4096)).rev().find(|&m| {
        let mut i = inputs.clone();
        i.max_running_requests = Some(m);
        figures(model, &i).2.is_some_and(|l| l >= u64::from(m))
    })
}

/// The most tokens per speculative step below the current count at which
/// the state slots allow `asked` running requests.
fn draft_tokens_that_fit(model: &ModelInfo, inputs: &MemoryInputs, asked: u32) -> Option<u32> {
    let now = inputs.speculative_num_draft_tokens?;
    (1..now).rev().find(|&d| {
        let mut i = inputs.clone();
        i.speculative_num_draft_tokens = Some(d);
        figures(model, &i).2.is_some_and(|l| l >= u64::from(asked))
    })
}

/// A size in GiB with two decimals, for the table.
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
        (
            "engine / layout".into(),
            format!("{engine} / {}", e.layout.label()),
        ),
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
                "  intermediate SSM states".into(),
                gib(e.intermediate_ssm_bytes_per_gpu),
            ));
            rows.push((
                "  intermediate conv windows".into(),
                gib(e.intermediate_conv_bytes_per_gpu),
            ));
        }
        rows.push((
            "state per request".into(),
            format!("{:.1} MiB", e.state_bytes_per_request_per_gpu as f64 / MIB),
        ));
        rows.push((
            "state slots".into(),
            match e.state_slots_per_request {
                Some(r) if r > 1 => format!("{slots} ({r} per running request)"),
                _ => slots.to_string(),
            },
        ));
    }
    rows.push((
        "KV capacity".into(),
        format!("{} tokens", e.kv_capacity_tokens),
    ));
    rows.push((
        "max running requests".into(),
        e.max_running_requests.to_string(),
    ));
    if e.data_ranks > 1 {
        let all = |v: u64| v.saturating_mul(u64::from(e.data_ranks));
        rows.push((
            format!("× {} data ranks", e.data_ranks),
            format!(
                "{} tokens, {} running in all",
                all(e.kv_capacity_tokens),
                all(e.max_running_requests)
            ),
        ));
    }
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
