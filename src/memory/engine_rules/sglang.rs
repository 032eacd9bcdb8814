//! SGLang's memory rules: `--mem-fraction-static` × (memory free once the
//! CUDA context is up) holds weights and pools; hybrid models get a
//! separate recurrent-state pool ([`crate::memory::mamba`]).

use super::{Rules, StatePool};
use crate::memory::mamba;
use crate::memory::sizes::Sizes;
use crate::memory::{Level, MemoryInputs, ModelInfo, GIB, MIB};

/// SGLang sizes the sliding-window pool at this fraction of the full pool (`--swa-full-tokens-ratio`).
const SGLANG_SWA_FULL_TOKENS_RATIO: f64 = 0.8;

/// SGLang: `--mem-fraction-static` × (memory free before weights load) holds weights and pools.
pub(super) struct Sglang;

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
        let tp = i.layout.tp.max(1);
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
