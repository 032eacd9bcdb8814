//! vLLM's memory rules: `--gpu-memory-utilization` × total memory holds
//! everything, activations included; recurrent state shares the KV pool.

use super::{Rules, StatePool};
use crate::memory::sizes::{activation_bytes_per_token, Sizes};
use crate::memory::{Level, MemoryInputs, ModelInfo, GIB};

/// Sequences vLLM runs in its profiling pass; their logits are part of the activation peak.
const VLLM_PROFILE_SEQS: u64 = 256;

/// vLLM's default `--gpu-memory-utilization`.
pub const VLLM_DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;

/// vLLM: `--gpu-memory-utilization` × total memory holds everything, activations included.
pub(super) struct Vllm;

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
        let tp = i.layout.tp.max(1);
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
