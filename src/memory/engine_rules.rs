//! Per-engine memory rules: what each engine reserves outside its budget,
//! how it turns the memory fraction into a budget, and how it carves that
//! budget into KV, sliding-window and recurrent-state pools.
//!
//! The size arithmetic these rules apply lives in `sizes`; [`super::estimate`]
//! runs the rules of the engine it is given.

use super::mamba;
use super::sizes::{activation_bytes_per_token, Sizes};
use super::{EngineRule, Level, MemoryInputs, ModelInfo, GIB, MIB};

/// SGLang sizes the sliding-window pool at this fraction of the full pool (`--swa-full-tokens-ratio`).
const SGLANG_SWA_FULL_TOKENS_RATIO: f64 = 0.8;
/// Sequences vLLM runs in its profiling pass; their logits are part of the activation peak.
const VLLM_PROFILE_SEQS: u64 = 256;

/// vLLM's default `--gpu-memory-utilization`.
pub const VLLM_DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;

/// The recurrent-state pool an engine carves out of the post-weights budget.
#[derive(Default)]
pub(super) struct StatePool {
    /// State slots (None when the model has no recurrent layers or no memory is left).
    pub slots: Option<u64>,
    /// State slots one running request takes.
    pub slots_per_request: u64,
    /// Bytes the pool takes from the budget (0 when state shares the KV pool).
    pub bytes: f64,
    /// Of `bytes`, the intermediate SSM states speculative verification keeps.
    pub intermediate_ssm_bytes: f64,
    /// Of `bytes`, the intermediate convolution windows speculative verification keeps.
    pub intermediate_conv_bytes: f64,
}

/// How one engine sizes its memory at start-up.
pub(super) trait Rules {
    /// The flag a user raises to give the engine more memory.
    fn fraction_flag(&self) -> &'static str;
    /// The memory fraction in force when none is given, noting it as an assumption.
    fn default_fraction(
        &self,
        gpu_bytes: u64,
        tp: u32,
        speculative: bool,
        a: &mut Vec<String>,
    ) -> f64;
    /// Memory outside weights and pools when none is given, noting how it was sized.
    fn default_reserve(&self, m: &ModelInfo, i: &MemoryInputs, a: &mut Vec<String>) -> f64;
    /// What weights and pools may use together.
    fn budget(&self, fraction: f64, total: f64, reserve: f64) -> f64;
    /// Bytes of one SSM state element when the model's config does not name a dtype.
    fn default_ssm_state_bytes(&self, act_bytes: u64) -> u64;
    /// The state pool out of `rest` bytes; `draft_tokens` is set when
    /// speculative decoding is on.
    fn state_pool(
        &self,
        rest: f64,
        sizes: &Sizes,
        draft_tokens: Option<u64>,
        inputs: &MemoryInputs,
        model: &ModelInfo,
        a: &mut Vec<String>,
    ) -> StatePool;
    /// Bytes one token of KV capacity costs across full and sliding-window layers.
    fn token_cost(&self, kv_tok: u64, swa_tok: u64) -> f64;
    /// Tokens the sliding-window pool holds when the full pool holds `kv_capacity`.
    fn swa_capacity(&self, kv_capacity: u64) -> u64;
    /// Running requests allowed when `--max-running-requests` is not given.
    fn default_max_running(&self, kv_capacity: u64, context: Option<u64>, gpu_bytes: u64) -> u64;
    /// Whether recurrent state is paid from the KV pool, so each request's fit counts it.
    fn state_shares_kv_pool(&self) -> bool;
    /// How serious it is that one request of the full context does not fit the KV cache.
    fn context_overflow_level(&self) -> Level;
}

/// The rules of `engine`.
pub(super) fn rules(engine: EngineRule) -> &'static dyn Rules {
    match engine {
        EngineRule::Sglang => &Sglang,
        EngineRule::Vllm => &Vllm,
    }
}

/// SGLang: `--mem-fraction-static` × (memory free before weights load) holds weights and pools.
struct Sglang;

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

impl Rules for Sglang {
    fn fraction_flag(&self) -> &'static str {
        "raise --mem-fraction-static"
    }

    fn default_fraction(
        &self,
        gpu_bytes: u64,
        tp: u32,
        speculative: bool,
        a: &mut Vec<String>,
    ) -> f64 {
        let f = sglang_default_mem_fraction(gpu_bytes, tp, speculative);
        a.push(format!("SGLang default --mem-fraction-static {f}"));
        f
    }

    fn default_reserve(&self, _m: &ModelInfo, i: &MemoryInputs, a: &mut Vec<String>) -> f64 {
        let tp = i.tp.max(1);
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

    fn budget(&self, fraction: f64, total: f64, reserve: f64) -> f64 {
        // The fraction applies to what is free once the context is up.
        fraction * (total - reserve)
    }

    fn default_ssm_state_bytes(&self, _act_bytes: u64) -> u64 {
        // SGLang keeps SSM state in float32 unless told otherwise.
        4
    }

    fn state_pool(
        &self,
        rest: f64,
        sizes: &Sizes,
        draft_tokens: Option<u64>,
        inputs: &MemoryInputs,
        model: &ModelInfo,
        a: &mut Vec<String>,
    ) -> StatePool {
        let (solve, release) = mamba::Solve::of(inputs.engine_version.as_deref());
        let args = &inputs.mamba;
        let p = mamba::pool(
            solve,
            &mamba::Inputs {
                rest,
                ssm_per_req: sizes.state_ssm as f64,
                conv_per_req: (sizes.state - sizes.state_ssm) as f64,
                draft_tokens,
                max_running_requests: inputs.max_running_requests,
                args,
            },
        );
        let ratio = args
            .full_memory_ratio
            .unwrap_or(mamba::DEFAULT_FULL_MEMORY_RATIO);
        a.push(format!(
            "{release} hybrid pools, as {}: state gets {ratio}/(1+{ratio}) of what weights leave{}, \
             {} state slots per running request{}, SSM state in {}",
            solve.releases(),
            if args.max_cache_size.is_some() {
                " (slots fixed by --max-mamba-cache-size)"
            } else {
                ""
            },
            p.slots_per_request,
            if args.disable_radix_cache {
                " (radix cache off)"
            } else {
                ""
            },
            match (args.ssm_dtype, model.ssm_state_dtype) {
                (Some(_), _) => "--mamba-ssm-dtype",
                (None, Some(_)) => "the config's mamba_ssm_dtype",
                (None, None) => "float32",
            }
        ));
        if draft_tokens.is_some() && inputs.max_running_requests.is_none() {
            a.push(format!(
                "SGLang runs at most {} requests under speculative decoding when --max-running-requests is not given",
                mamba::SPECULATIVE_DEFAULT_RUNNING
            ));
        }
        StatePool {
            slots: Some(p.slots.max(0) as u64),
            slots_per_request: p.slots_per_request,
            bytes: p.bytes(),
            intermediate_ssm_bytes: p.intermediate_ssm_bytes,
            intermediate_conv_bytes: p.intermediate_conv_bytes,
        }
    }

    fn token_cost(&self, kv_tok: u64, swa_tok: u64) -> f64 {
        // The sliding-window pool is a fixed fraction of the full pool.
        kv_tok as f64 + SGLANG_SWA_FULL_TOKENS_RATIO * swa_tok as f64
    }

    fn swa_capacity(&self, kv_capacity: u64) -> u64 {
        (kv_capacity as f64 * SGLANG_SWA_FULL_TOKENS_RATIO) as u64
    }

    fn default_max_running(&self, kv_capacity: u64, context: Option<u64>, _gpu: u64) -> u64 {
        let ctx = context.unwrap_or(4096).max(1);
        (kv_capacity.saturating_mul(512) / ctx).clamp(2048, 4096)
    }

    fn state_shares_kv_pool(&self) -> bool {
        false
    }

    fn context_overflow_level(&self) -> Level {
        // SGLang starts and rejects such requests.
        Level::Warn
    }
}

/// vLLM: `--gpu-memory-utilization` × total memory holds everything, activations included.
struct Vllm;

/// vLLM's default `--max-num-batched-tokens` (V1): larger chunks on GPUs with at least 70 GiB.
fn vllm_default_batched_tokens(gpu_bytes: u64) -> u64 {
    if gpu_bytes as f64 >= 70.0 * GIB {
        8192
    } else {
        2048
    }
}

/// vLLM's default `--max-num-seqs`, by GPU size like the batched tokens.
fn vllm_default_max_seqs(gpu_bytes: u64) -> u64 {
    if gpu_bytes as f64 >= 70.0 * GIB {
        1024
    } else {
        256
    }
}

/// Peak activation bytes of vLLM's profiling pass over `tokens` tokens on one rank.
fn vllm_activation_peak(m: &ModelInfo, tp: u32, tokens: u64) -> f64 {
    let per_token = activation_bytes_per_token(m, tp);
    let logits = (VLLM_PROFILE_SEQS * m.vocab_size * 4) as f64;
    tokens as f64 * per_token + logits
}

impl Rules for Vllm {
    fn fraction_flag(&self) -> &'static str {
        "raise --gpu-memory-utilization"
    }

    fn default_fraction(&self, _gpu: u64, _tp: u32, _spec: bool, a: &mut Vec<String>) -> f64 {
        a.push(format!(
            "vLLM default --gpu-memory-utilization {VLLM_DEFAULT_GPU_MEMORY_UTILIZATION}"
        ));
        VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    }

    fn default_reserve(&self, m: &ModelInfo, i: &MemoryInputs, a: &mut Vec<String>) -> f64 {
        let tp = i.tp.max(1);
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

    fn budget(&self, fraction: f64, total: f64, reserve: f64) -> f64 {
        // The fraction covers everything, so the reserve comes out of it.
        fraction * total - reserve
    }

    fn default_ssm_state_bytes(&self, act_bytes: u64) -> u64 {
        // vLLM keeps SSM state in the model dtype.
        act_bytes
    }

    fn state_pool(
        &self,
        rest: f64,
        sizes: &Sizes,
        _draft_tokens: Option<u64>,
        _inputs: &MemoryInputs,
        _model: &ModelInfo,
        a: &mut Vec<String>,
    ) -> StatePool {
        a.push(
            "vLLM hybrid: recurrent state shares the KV pool, one state per running request".into(),
        );
        StatePool {
            slots: Some((rest / sizes.state as f64).floor() as u64),
            slots_per_request: 1,
            ..StatePool::default()
        }
    }

    fn token_cost(&self, kv_tok: u64, swa_tok: u64) -> f64 {
        // Every layer group gets the same number of blocks.
        kv_tok.max(swa_tok) as f64
    }

    fn swa_capacity(&self, kv_capacity: u64) -> u64 {
        kv_capacity
    }

    fn default_max_running(&self, _kv: u64, _context: Option<u64>, gpu_bytes: u64) -> u64 {
        vllm_default_max_seqs(gpu_bytes)
    }

    fn state_shares_kv_pool(&self) -> bool {
        true
    }

    fn context_overflow_level(&self) -> Level {
        // vLLM refuses to start.
        Level::Error
    }
}
