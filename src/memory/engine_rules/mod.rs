//! Per-engine memory rules: what each engine reserves outside its budget,
//! how it turns the memory fraction into a budget, and how it carves that
//! budget into KV, sliding-window and recurrent-state pools. One file per
//! engine implements [`Rules`]; this module holds the trait and picks the
//! engine's implementation.
//!
//! The size arithmetic these rules apply lives in `sizes`; [`super::estimate`]
//! runs the rules of the engine it is given.

mod sglang;
mod vllm;

pub use sglang::sglang_default_mem_fraction;
pub use vllm::VLLM_DEFAULT_GPU_MEMORY_UTILIZATION;

use super::sizes::Sizes;
use super::{EngineRule, Level, MemoryInputs, ModelInfo};

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
        EngineRule::Sglang => &sglang::Sglang,
        EngineRule::Vllm => &vllm::Vllm,
    }
}
