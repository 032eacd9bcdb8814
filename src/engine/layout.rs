//! How one server spreads over GPUs: tensor, data, attention-data, expert
//! and pipeline parallelism, the GPUs that layout holds, and the layouts
//! each engine can start.
//!
//! The GPU count follows the engines' own sources. vLLM's world size is
//! PP × TP (× prefill context parallelism) per engine instance and it runs
//! DP instances (`ParallelConfig.world_size`, `world_size_across_dp`); its
//! expert parallelism re-partitions the MoE layers over TP × DP ranks
//! (`FusedMoEParallelConfig.make`: `ep_size = tp_size` after flattening TP
//! across DP). SGLang 0.5.23 launches `dp_size` replicas of TP × PP ranks
//! (`launch_world_size_of`), while attention DP (`--attn-dp-size`) and EP
//! (`--ep-size`) split the TP group (`derive_parallel_widths`:
//! `attn_tp = tp / attn_dp`, `moe_tp = tp / ep`) and add no GPUs.

use serde::{Deserialize, Serialize};

use super::EngineKind;

/// A server's parallel layout; every size is at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layout {
    /// Tensor-parallel size.
    pub tp: u32,
    /// Data-parallel replicas of the model.
    pub dp: u32,
    /// Attention data-parallel groups inside the TP group (SGLang).
    pub dp_attention: u32,
    /// Expert-parallel size.
    pub ep: u32,
    /// Pipeline stages.
    pub pp: u32,
}

impl Default for Layout {
    fn default() -> Self {
        Self::tp(1)
    }
}

/// Serde default and skip rule for the sizes beyond TP: a size of 1 is not
/// written, so configs without layouts keep the identities they had.
pub fn one() -> u32 {
    1
}

/// Whether a size is the default 1 (see [`one`]).
pub fn is_one(v: &u32) -> bool {
    *v == 1
}

impl Layout {
    /// Tensor parallelism only.
    pub fn tp(tp: u32) -> Self {
        Self {
            tp,
            dp: 1,
            dp_attention: 1,
            ep: 1,
            pp: 1,
        }
    }

    /// GPUs the server holds: TP × DP × PP (attention DP and EP split the TP
    /// group). A size of 0, refused elsewhere, counts as 1.
    pub fn gpus(&self) -> u32 {
        self.tp
            .max(1)
            .saturating_mul(self.dp.max(1))
            .saturating_mul(self.pp.max(1))
    }

    /// Whether anything but TP is set.
    pub fn is_tp_only(&self) -> bool {
        self.dp == 1 && self.dp_attention == 1 && self.ep == 1 && self.pp == 1
    }

    /// A short name: `tp4`, `tp4-dp2`, `tp8-adp8-ep8`, `tp4-pp2`.
    pub fn label(&self) -> String {
        let mut out = format!("tp{}", self.tp);
        for (name, v) in [
            ("dp", self.dp),
            ("adp", self.dp_attention),
            ("ep", self.ep),
            ("pp", self.pp),
        ] {
            if v != 1 {
                out.push_str(&format!("-{name}{v}"));
            }
        }
        out
    }

    /// Whether `engine` can start this layout; the error says which sizes would do.
    pub fn check(&self, engine: EngineKind) -> Result<(), LayoutError> {
        for (name, v) in [
            ("tp", self.tp),
            ("dp", self.dp),
            ("dp_attention", self.dp_attention),
            ("ep", self.ep),
            ("pp", self.pp),
        ] {
            if v == 0 {
                return Err(LayoutError::Zero(name));
            }
        }
        match engine {
            EngineKind::Vllm => self.check_vllm(),
            EngineKind::Sglang => self.check_sglang(),
            EngineKind::Sim => self.check_sim(),
            EngineKind::Llamacpp => self.check_llamacpp(),
            EngineKind::Command | EngineKind::Openai => Ok(()),
        }
    }

    fn check_vllm(&self) -> Result<(), LayoutError> {
        let width = self.tp.saturating_mul(self.dp);
        if self.dp_attention != 1 {
            return Err(LayoutError::Unsupported(format!(
                "vLLM has no attention data parallelism inside a TP group (got dp_attention {}): \
                 its data-parallel ranks with expert parallelism are that layout, so set \
                 tp = {}, dp = {}, ep = {} instead",
                self.dp_attention,
                self.tp / self.dp_attention.max(1),
                self.dp_attention,
                self.tp
            )));
        }
        if self.ep != 1 && self.ep != width {
            return Err(LayoutError::Unsupported(format!(
                "vLLM's expert-parallel size is TP × DP (--enable-expert-parallel spreads the \
                 experts over every rank), here {width}; set ep = {width}, or ep = 1 for \
                 tensor-parallel experts (got ep {})",
                self.ep
            )));
        }
        Ok(())
    }

    fn check_sglang(&self) -> Result<(), LayoutError> {
        if self.dp_attention != 1 && self.dp != 1 {
            return Err(LayoutError::Unsupported(format!(
                "SGLang does not combine data-parallel replicas with attention data parallelism \
                 (got dp {} and dp_attention {}); keep one of them at 1",
                self.dp, self.dp_attention
            )));
        }
        if self.tp % self.dp_attention != 0 {
            return Err(LayoutError::Unsupported(format!(
                "dp_attention must divide tp (SGLang splits the TP group into attention groups): \
                 with tp = {} use dp_attention in {}",
                self.tp,
                divisors(self.tp)
            )));
        }
        if self.tp % self.ep != 0 {
            return Err(LayoutError::Unsupported(format!(
                "ep must divide tp (SGLang's MoE layers run ep groups of tp / ep ranks inside \
                 the TP group): with tp = {} use ep in {}",
                self.tp,
                divisors(self.tp)
            )));
        }
        Ok(())
    }

    fn check_sim(&self) -> Result<(), LayoutError> {
        if self.dp_attention == 1 && self.ep == 1 && self.pp == 1 {
            return Ok(());
        }
        Err(LayoutError::Unsupported(format!(
            "the simulator serves data-parallel replicas (dp) but has no model of attention \
             data parallelism, expert or pipeline parallelism (got {}); set dp_attention, ep \
             and pp to 1, or plan the layout with engine sglang or vllm",
            self.label()
        )))
    }

    fn check_llamacpp(&self) -> Result<(), LayoutError> {
        if self.is_tp_only() {
            return Ok(());
        }
        Err(LayoutError::Unsupported(format!(
            "llama.cpp serves one copy of the model from one process and has no data, \
             attention-data, expert or pipeline parallelism settings (got {}); set dp, \
             dp_attention, ep and pp to 1 and run replicas as separate servers",
            self.label()
        )))
    }
}

/// Why an engine cannot start a layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// A size of 0.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// A combination the engine has no way to run, with the sizes that would.
    #[error("{0}")]
    Unsupported(String),
}

/// The divisors of `n`, as `1, 2, 4, 8`.
fn divisors(n: u32) -> String {
    (1..=n)
        .filter(|d| n % d == 0)
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A layout of `tp` with the sizes beyond it, for tests here and in the memory model's.
#[cfg(test)]
pub(crate) fn layout(tp: u32, dp: u32, dp_attention: u32, ep: u32, pp: u32) -> Layout {
    Layout {
        tp,
        dp,
        dp_attention,
        ep,
        pp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_multiply_tp_dp_and_pp_while_attention_dp_and_ep_split_tp() {
        assert_eq!(layout(8, 1, 1, 1, 1).gpus(), 8);
        assert_eq!(layout(4, 2, 1, 1, 1).gpus(), 8);
        assert_eq!(layout(2, 4, 1, 1, 1).gpus(), 8);
        assert_eq!(layout(1, 8, 1, 1, 1).gpus(), 8);
        assert_eq!(layout(8, 1, 8, 8, 1).gpus(), 8);
        assert_eq!(layout(4, 1, 1, 1, 2).gpus(), 8);
        assert_eq!(layout(u32::MAX, u32::MAX, 1, 1, 1).gpus(), u32::MAX);
        assert_eq!(layout(8, 1, 8, 8, 1).label(), "tp8-adp8-ep8");
        assert_eq!(Layout::tp(4).label(), "tp4");
    }

    #[test]
    fn each_engine_refuses_the_layouts_it_cannot_start_naming_the_sizes_that_would() {
        let vllm = |l: Layout| l.check(EngineKind::Vllm);
        assert!(vllm(layout(2, 4, 1, 8, 1)).is_ok());
        assert!(vllm(layout(2, 4, 1, 4, 1))
            .unwrap_err()
            .to_string()
            .contains("set ep = 8"));
        assert!(vllm(layout(8, 1, 8, 8, 1))
            .unwrap_err()
            .to_string()
            .contains("tp = 1, dp = 8, ep = 8"));
        let sglang = |l: Layout| l.check(EngineKind::Sglang);
        assert!(sglang(layout(8, 1, 8, 8, 1)).is_ok());
        assert!(sglang(layout(8, 1, 3, 1, 1))
            .unwrap_err()
            .to_string()
            .contains("dp_attention in 1, 2, 4, 8"));
        assert!(sglang(layout(4, 1, 1, 3, 1))
            .unwrap_err()
            .to_string()
            .contains("ep in 1, 2, 4"));
        assert!(sglang(layout(4, 2, 2, 1, 1))
            .unwrap_err()
            .to_string()
            .contains("keep one of them at 1"));
        assert!(layout(1, 2, 1, 1, 1)
            .check(EngineKind::Llamacpp)
            .unwrap_err()
            .to_string()
            .contains("tp1-dp2"));
        assert!(layout(1, 0, 1, 1, 1)
            .check(EngineKind::Command)
            .unwrap_err()
            .to_string()
            .contains("dp must be at least 1"));
    }
}
