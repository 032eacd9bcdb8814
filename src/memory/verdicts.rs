//! Feasibility findings: why a configuration cannot start or will serve
//! the workload degraded, each with the fix, in the order a user would fix them.

use super::engine_rules::Rules;
use super::{
    Attention, Estimate, Finding, Level, MemoryInputs, ModelInfo, RecurrentLayer,
    CONTEXT_MARGIN_TOKENS, GIB,
};

/// The findings for `model` under `inputs` given the figures `e`, errors first.
///
/// `budget` is the unclamped budget (a negative one means weights cannot fit)
/// and `state_limit` the running requests the state slots allow.
pub(super) fn findings(
    model: &ModelInfo,
    inputs: &MemoryInputs,
    rules: &dyn Rules,
    e: &Estimate,
    budget: f64,
    state_limit: Option<u64>,
) -> Vec<Finding> {
    let mut verdicts = Vec::new();
    let tp = e.tp;
    let fraction = e.mem_fraction;
    let total = inputs.gpu_memory_bytes as f64;
    let kv_capacity = e.kv_capacity_tokens;
    let context = e.context_length;
    let max_concurrent = e.max_concurrent_requests;
    let all_weights = (e.weights_bytes_per_gpu + e.draft_weights_bytes_per_gpu) as f64;
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
    if all_weights > budget {
        verdicts.push(err(format!(
            "weights alone need {:.1} GiB per GPU but the memory rule allows {:.1} GiB \
             ({} of {:.1} GiB): raise TP, {}, or use a quantized checkpoint",
            all_weights / GIB,
            budget.max(0.0) / GIB,
            fraction,
            total / GIB,
            rules.fraction_flag()
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
            verdicts.push(Finding {
                level: rules.context_overflow_level(),
                reason: msg,
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
    verdicts
}

/// An error finding.
fn err(reason: String) -> Finding {
    Finding {
        level: Level::Error,
        reason,
    }
}

/// A warning finding.
fn warn(reason: String) -> Finding {
    Finding {
        level: Level::Warn,
        reason,
    }
}
