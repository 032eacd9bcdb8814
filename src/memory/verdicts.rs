//! Feasibility findings: why a configuration cannot start or will serve
//! the workload degraded, each with the fix, in the order a user would fix them.

use super::engine_rules::Rules;
use super::sizes::Split;
use super::{
    Attention, EngineRule, Estimate, Finding, Level, MemoryInputs, ModelInfo, RecurrentLayer,
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
    // Heads split over the attention ranks: TP, or under SGLang's
    // attention DP the TP group's share of each attention group.
    let split = Split::of(inputs.engine, inputs.layout);
    tp_findings(model, inputs, split.attention, &mut verdicts);
    layout_findings(model, inputs, &mut verdicts);
    capacity_findings(model, inputs, rules, e, budget, &mut verdicts);
    state_slot_findings(model, inputs, e, state_limit, &mut verdicts);
    verdicts.sort_by_key(|v| v.level != Level::Error);
    verdicts
}

/// Whether the GPUs at hand and every head count of the model allow TP `tp`.
fn tp_findings(model: &ModelInfo, inputs: &MemoryInputs, tp: u32, verdicts: &mut Vec<Finding>) {
    // The TP sizes that split every head count of the model, up to the GPUs at hand.
    let fitting = |max: u32| -> String {
        let v: Vec<String> = (1..=max.max(1))
            .filter(|&t| splits(model, t))
            .map(|t| t.to_string())
            .collect();
        match v.len() {
            0 => "none".to_string(),
            1 => format!("TP{}", v[0]),
            n => format!("TP {} or {}", v[..n - 1].join(", "), v[n - 1]),
        }
    };
    let heads = head_counts(model);
    if let Some(g) = inputs.gpus_available.filter(|_| inputs.layout.is_tp_only()) {
        if tp > g {
            verdicts.push(err(format!(
                "TP{tp} needs {tp} GPUs but only {g} are available: use {} (the sizes up to {g} that split {heads}) or free GPUs",
                fitting(g)
            )));
        }
    }
    if model.num_attention_heads % tp != 0 {
        verdicts.push(err(format!(
            "the model has {} attention heads, which TP{tp} cannot split evenly: use {} (the sizes that split {heads})",
            model.num_attention_heads,
            fitting(inputs.gpus_available.unwrap_or(tp).max(tp))
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
}

/// Whether the layout beyond TP splits the model: experts by EP, layers
/// by PP, and the GPUs it holds against those at hand.
fn layout_findings(model: &ModelInfo, inputs: &MemoryInputs, verdicts: &mut Vec<Finding>) {
    let l = inputs.layout;
    if let Some(g) = inputs.gpus_available {
        if !l.is_tp_only() && l.gpus() > g {
            verdicts.push(err(format!(
                "layout {} holds {} GPUs (TP × DP × PP) but only {g} are available",
                l.label(),
                l.gpus()
            )));
        }
    }
    // vLLM spreads the experts over every TP × DP rank with EP on.
    let ep = match inputs.engine {
        EngineRule::Sglang => l.ep,
        EngineRule::Vllm if l.ep > 1 => l.tp.saturating_mul(l.dp),
        EngineRule::Vllm => 1,
    };
    match &model.moe {
        None if ep > 1 => verdicts.push(err(format!(
            "ep {ep} applies to mixture-of-experts models, and this model has no routed \
             experts: set ep = 1"
        ))),
        Some(moe) if ep > 1 && moe.num_experts % ep != 0 => {
            let e = moe.num_experts;
            let list = |v: Vec<u32>| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
            let fix = match inputs.engine {
                EngineRule::Sglang => format!(
                    "use an ep that divides both {e} and tp = {}: {}",
                    l.tp,
                    list(
                        (1..=l.tp.max(1))
                            .filter(|d| e % d == 0 && l.tp % d == 0)
                            .collect()
                    )
                ),
                EngineRule::Vllm => {
                    let most = inputs.gpus_available.unwrap_or(8).max(l.tp) / l.tp.max(1);
                    format!(
                        "vLLM's EP size is TP × DP, so with tp = {} use dp in {}",
                        l.tp,
                        list((1..=most.max(1)).filter(|d| e % (l.tp * d) == 0).collect())
                    )
                }
            };
            verdicts.push(err(format!(
                "the model has {e} routed experts, which EP{ep} cannot split evenly: {fix}"
            )));
        }
        _ => {}
    }
    let layers = model.layers.full + model.layers.sliding + model.layers.recurrent;
    if l.pp > 1 && layers > 0 {
        if l.pp > layers {
            verdicts.push(err(format!(
                "pp {} exceeds the model's {layers} layers: use at most {layers} stages",
                l.pp
            )));
        } else if layers % l.pp != 0 {
            verdicts.push(warn(format!(
                "{layers} layers do not split evenly into {} stages: the fullest holds {} \
                 (the memory figures are its); a pp that divides {layers} balances them",
                l.pp,
                layers.div_ceil(l.pp)
            )));
        }
    }
}

/// Whether the weights, the KV cache, the context and the concurrency fit.
fn capacity_findings(
    model: &ModelInfo,
    inputs: &MemoryInputs,
    rules: &dyn Rules,
    e: &Estimate,
    budget: f64,
    verdicts: &mut Vec<Finding>,
) {
    let fraction = e.mem_fraction;
    let total = inputs.gpu_memory_bytes as f64;
    let kv_capacity = e.kv_capacity_tokens;
    let context = e.context_length;
    let max_concurrent = e.max_concurrent_requests;
    let all_weights = (e.weights_bytes_per_gpu + e.draft_weights_bytes_per_gpu) as f64;
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
}

/// Whether the recurrent-state slots hold the running requests asked for,
/// with the settings that would fit.
fn state_slot_findings(
    model: &ModelInfo,
    inputs: &MemoryInputs,
    e: &Estimate,
    state_limit: Option<u64>,
    verdicts: &mut Vec<Finding>,
) {
    let (Some(limit), Some(slots)) = (state_limit, e.state_slots) else {
        return;
    };
    let speculative = inputs.speculative_num_draft_tokens.is_some() || inputs.draft.is_some();
    let asked = inputs
        .max_running_requests
        .or((speculative && inputs.engine == super::EngineRule::Sglang)
            .then_some(super::mamba::SPECULATIVE_DEFAULT_RUNNING));
    let per = e.state_slots_per_request.unwrap_or(1);
    let mut fixes = Vec::new();
    if let Some(asked) = asked.filter(|&a| limit < u64::from(a)) {
        if let Some(m) = super::running_that_fits(model, inputs, asked) {
            fixes.push(format!("--max-running-requests {m} fits"));
        }
        if let Some(d) = super::draft_tokens_that_fit(model, inputs, asked) {
            fixes.push(format!(
                "{d} draft tokens per step fit {asked} running requests"
            ));
        } else if limit == 0 {
            if let Some(d) = super::draft_tokens_that_fit(model, inputs, 1) {
                fixes.push(format!("{d} draft tokens per step fit one running request"));
            }
        }
        let fix = if fixes.is_empty() {
            String::new()
        } else {
            format!("; {}", fixes.join(", or "))
        };
        if limit == 0 {
            verdicts.push(err(format!(
                "{slots} recurrent-state slots ({per} per running request) leave no room for one request: \
                 SGLang refuses to start; lower --max-running-requests or the draft tokens, \
                 or raise --mem-fraction-static{fix}"
            )));
        } else {
            verdicts.push(warn(format!(
                "state slots allow only {limit} running requests ({slots} slots, {per} per request), \
                 below --max-running-requests {asked}: the server will cap it at {limit}{fix}"
            )));
        }
    } else if limit == 0 {
        verdicts.push(err(format!(
            "{slots} recurrent-state slots ({per} per running request) leave no room for one request: \
             SGLang refuses to start; raise --mem-fraction-static or lower the draft tokens"
        )));
    }
}

/// Whether TP `t` splits every head count of `model` evenly (KV heads may
/// also be replicated when `t` is a multiple of them).
fn splits(model: &ModelInfo, t: u32) -> bool {
    let kv_ok = match &model.attention {
        Attention::Gqa { num_kv_heads, .. } => {
            let kv = *num_kv_heads;
            (kv >= t && kv % t == 0) || (kv < t && t % kv == 0)
        }
        Attention::Mla { .. } => true,
    };
    let recurrent_ok = match &model.recurrent {
        Some(RecurrentLayer::GatedDeltaNet {
            num_k_heads,
            num_v_heads,
            ..
        }) => num_k_heads % t == 0 && num_v_heads % t == 0,
        Some(RecurrentLayer::Mamba2 { num_heads, .. }) => num_heads % t == 0,
        None => true,
    };
    model.num_attention_heads % t == 0 && kv_ok && recurrent_ok
}

/// The model's head counts in words, for refusals.
fn head_counts(model: &ModelInfo) -> String {
    let mut parts = vec![format!("{} attention heads", model.num_attention_heads)];
    if let Attention::Gqa { num_kv_heads, .. } = &model.attention {
        parts.push(format!("{num_kv_heads} KV heads"));
    }
    match &model.recurrent {
        Some(RecurrentLayer::GatedDeltaNet {
            num_k_heads,
            num_v_heads,
            ..
        }) => parts.push(format!(
            "{num_k_heads} key and {num_v_heads} value linear-attention heads"
        )),
        Some(RecurrentLayer::Mamba2 { num_heads, .. }) => {
            parts.push(format!("{num_heads} Mamba heads"))
        }
        None => {}
    }
    parts.join(", ")
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
