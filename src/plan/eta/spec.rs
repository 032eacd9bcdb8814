//! Speculative decoding's prior by method: tokens a verify step yields,
//! how much longer the step is, and how many tokens it verifies.

use super::Speed;
use crate::engine::EngineKind;

/// What the plan assumes of a speculative method before any cell of it ran
/// (the per-server calibration then corrects it from measured cells).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecPrior {
    /// Tokens drafted per step.
    pub drafted: f64,
    /// Chance each successive drafted token is accepted, given the ones before it were.
    pub acceptance: f64,
    /// A step's memory-bound cost over an autoregressive one (the drafter's passes).
    pub step_factor: f64,
    /// Tokens each sequence has verified per step.
    pub verified: f64,
}

impl SpecPrior {
    /// Expected tokens a sequence gains per step: 1 + Σ acceptance^i over the drafts.
    pub fn tokens_per_step(&self) -> f64 {
        crate::sim::model::expected_tokens_per_step(self.drafted.round() as u32, self.acceptance)
    }

    /// The prior of one server's drafting on `engine`. Acceptance per drafted
    /// position is a published-order figure per method (EAGLE 0.7, EAGLE-3
    /// and MTP 0.8, a DFlash block 0.85, a DDTree tree 0.88, a separate draft
    /// model 0.6, n-gram lookup 0.4, anything else 0.6); the budget is read
    /// in the engine's meaning (SGLang counts the root in
    /// `num_draft_tokens`, a DFlash block holds the last verified token).
    pub fn of(engine: EngineKind, spec: &crate::engine::Speculative) -> SpecPrior {
        use crate::engine::SpecMethod as M;
        let n = spec.num_draft_tokens.map(f64::from);
        let root = if engine == EngineKind::Sglang {
            1.0
        } else {
            0.0
        };
        let chain = |default: f64| (n.map_or(default, |n| n - root)).max(1.0);
        let (drafted, acceptance, step_factor, verified) = match spec.method {
            Some(M::Eagle) => {
                let k = chain(3.0);
                (k, 0.7, 1.0 + 0.05 * k, k + 1.0)
            }
            Some(M::Eagle3) | Some(M::Mtp) => {
                let k = chain(if spec.method == Some(M::Mtp) {
                    1.0
                } else {
                    3.0
                });
                (k, 0.8, 1.0 + 0.05 * k, k + 1.0)
            }
            Some(M::Dflash) => {
                let k = (n.unwrap_or(16.0) - 1.0).max(1.0);
                (k, 0.85, 1.1, k + 1.0)
            }
            // The tree's nodes are all verified; the accepted path is one branch.
            Some(M::Ddtree) => {
                let b = n.unwrap_or(16.0).max(1.0);
                (b.min(15.0), 0.88, 1.15, b + 1.0)
            }
            Some(M::DraftModel) => {
                let k = chain(4.0);
                (k, 0.6, 1.0 + 0.1 * k, k + 1.0)
            }
            Some(M::Ngram) => {
                let k = chain(4.0);
                (k, 0.4, 1.02, k + 1.0)
            }
            None => {
                let k = n.unwrap_or(4.0).max(1.0);
                (k, 0.6, 1.2, k + 1.0)
            }
        };
        SpecPrior {
            drafted,
            acceptance,
            step_factor,
            verified,
        }
    }

    /// `speed` with this drafting applied, said in its basis.
    pub fn apply(&self, speed: &mut Speed, name: &str) {
        let tps = self.tokens_per_step();
        speed.tokens_per_step = tps;
        speed.verified_per_step = self.verified;
        speed.step_base_s *= self.step_factor;
        speed.step_per_seq_s *= self.step_factor;
        speed.basis.push_str(&format!(
            "; {name} prior: {:.0} drafts at {:.0} % acceptance each, {tps:.2} tokens/step, steps ×{:.2}, {:.0} tokens verified",
            self.drafted,
            self.acceptance * 100.0,
            self.step_factor,
            self.verified
        ));
    }
}
