//! Engine-independent size arithmetic: parameter counts and weight bytes,
//! KV bytes per token, recurrent state per request and activation bytes per
//! token, all on one GPU of a layout ([`Split`]).

use super::{
    engine_rules, Attention, Dtype, EngineRule, KvCacheDtype, Layout, MemoryInputs, ModelInfo,
    Quantization, RecurrentLayer, WeightSource, GIB,
};

/// Parameter counts on one rank, split by how each class is stored.
#[derive(Default, Clone, Copy, Debug)]
struct Params {
    /// Embedding and LM head: always 16-bit.
    embed: f64,
    /// Dense projections (attention, MLP, recurrent mixers): quantized with the model.
    linear: f64,
    /// Routed experts: quantized with the model (MXFP4 applies here only).
    experts: f64,
    /// Norms, routers, biases: 16-bit.
    small: f64,
}

impl Params {
    fn add(&mut self, o: Params) {
        self.embed += o.embed;
        self.linear += o.linear;
        self.experts += o.experts;
        self.small += o.small;
    }
}

/// How a layout cuts the model on one GPU: the ranks each class of weights
/// is split over and the pipeline stages its layers are spread across.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Ranks the attention heads and recurrent mixers are split over.
    pub attention: u32,
    /// Ranks the dense MLP, shared experts, embeddings and LM head are split over.
    pub dense: u32,
    /// Ranks the routed experts are split over.
    pub experts: u32,
    /// Pipeline stages; a GPU holds the layers of one.
    pub stages: u32,
}

impl Split {
    /// Tensor parallelism alone: everything over `tp` ranks, one stage.
    pub fn tp(tp: u32) -> Self {
        let tp = tp.max(1);
        Split {
            attention: tp,
            dense: tp,
            experts: tp,
            stages: 1,
        }
    }

    /// The split of `layout` under `engine`. SGLang's attention DP splits
    /// the TP group into attention groups of `tp / dp_attention` ranks and
    /// its EP re-partitions the experts inside the TP group
    /// (`moe_tp = tp / ep`), so each GPU holds `1 / tp` of them either way;
    /// its replicas each hold a whole copy. vLLM flattens TP across DP for
    /// the MoE layers (`FusedMoEParallelConfig.make`), with or without EP,
    /// while attention and dense layers stay TP within each replica.
    pub fn of(engine: EngineRule, layout: Layout) -> Self {
        let tp = layout.tp.max(1);
        let stages = layout.pp.max(1);
        match engine {
            EngineRule::Sglang => Split {
                attention: (tp / layout.dp_attention.max(1)).max(1),
                dense: tp,
                experts: tp,
                stages,
            },
            EngineRule::Vllm => Split {
                attention: tp,
                dense: tp,
                experts: tp.saturating_mul(layout.dp.max(1)),
                stages,
            },
        }
    }

    /// Of `n` layers, the share the fullest stage holds.
    pub fn stage_share(&self, n: u32) -> f64 {
        if n == 0 {
            return 1.0;
        }
        f64::from(n.div_ceil(self.stages.max(1))) / f64::from(n)
    }

    /// Of `n` layers of one kind, those the fullest stage holds.
    fn stage_count(&self, n: u32, all: u32) -> u64 {
        (f64::from(n) * self.stage_share(all)).ceil() as u64
    }
}

/// `x` split evenly over `tp` ranks.
fn div(x: u64, tp: u64) -> f64 {
    x as f64 / tp as f64
}

/// Heads a rank holds when `heads` are split over `tp` ranks; replicated when tp exceeds them.
fn per_rank(heads: u32, tp: u32) -> u64 {
    u64::from((heads / tp.max(1)).max(1))
}

/// Parameters of one decoder layer on one rank.
fn layer_params(m: &ModelInfo, split: &Split, recurrent: bool, moe_layer: bool) -> Params {
    let tp = split.attention.max(1);
    let t = u64::from(tp);
    let dense = u64::from(split.dense.max(1));
    let h = m.hidden_size;
    let heads = u64::from(m.num_attention_heads);
    let mut p = Params {
        small: 2.0 * h as f64,
        ..Params::default()
    };
    match (&m.recurrent, recurrent) {
        (
            Some(RecurrentLayer::GatedDeltaNet {
                num_k_heads,
                num_v_heads,
                k_head_dim,
                v_head_dim,
                conv_kernel,
            }),
            true,
        ) => {
            let (nk, nv) = (u64::from(*num_k_heads), u64::from(*num_v_heads));
            let (dk, dv) = (u64::from(*k_head_dim), u64::from(*v_head_dim));
            let conv_dim = 2 * nk * dk + nv * dv;
            p.linear += div(h * (conv_dim + nv * dv + 2 * nv) + nv * dv * h, t);
            p.small += div(conv_dim * u64::from(*conv_kernel) + 2 * nv + dv, t);
        }
        (
            Some(RecurrentLayer::Mamba2 {
                num_heads,
                head_dim,
                d_state,
                n_groups,
                conv_kernel,
            }),
            true,
        ) => {
            let nh = u64::from(*num_heads);
            let d_inner = nh * u64::from(*head_dim);
            let bc = 2 * u64::from(*n_groups) * u64::from(*d_state);
            p.linear += div(h * (2 * d_inner + bc + nh) + d_inner * h, t);
            p.small += div(
                (d_inner + bc) * u64::from(*conv_kernel) + 3 * nh + d_inner,
                t,
            );
        }
        _ => match &m.attention {
            Attention::Gqa {
                num_kv_heads,
                head_dim,
                v_head_dim,
                output_gate,
            } => {
                let (hd, vd) = (u64::from(*head_dim), u64::from(*v_head_dim));
                let q_out = heads * hd * if *output_gate { 2 } else { 1 };
                let kv = per_rank(*num_kv_heads, tp);
                p.linear +=
                    div(h * q_out, t) + (h * kv * (hd + vd)) as f64 + div(heads * vd * h, t);
            }
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                qk_nope_head_dim,
                v_head_dim,
                q_lora_rank,
            } => {
                let (r, rope) = (u64::from(*kv_lora_rank), u64::from(*qk_rope_head_dim));
                let qk = u64::from(*qk_nope_head_dim) + rope;
                let vd = u64::from(*v_head_dim);
                // The down-projections are replicated on every rank by both engines.
                match q_lora_rank {
                    Some(q) => {
                        let q = u64::from(*q);
                        p.linear += (h * q) as f64 + div(q * heads * qk, t);
                        p.small += q as f64;
                    }
                    None => p.linear += div(h * heads * qk, t),
                }
                p.linear += (h * (r + rope)) as f64;
                p.linear += div(r * heads * (u64::from(*qk_nope_head_dim) + vd), t);
                p.linear += div(heads * vd * h, t);
                p.small += r as f64;
            }
        },
    }
    match (&m.moe, moe_layer) {
        (Some(moe), true) => {
            let e = u64::from(moe.num_experts);
            let experts = u64::from(split.experts.max(1));
            p.experts += div(e * 3 * h * moe.expert_intermediate, experts);
            p.linear += div(3 * h * moe.shared_intermediate, dense);
            p.small += (h * e) as f64;
        }
        _ => p.linear += div(3 * h * m.intermediate_size, dense),
    }
    p
}

/// Parameters of the whole model on one rank of the fullest pipeline stage;
/// `mtp` adds the multi-token-prediction layers.
fn model_params(m: &ModelInfo, split: &Split, mtp: bool) -> Params {
    let t = u64::from(split.dense.max(1));
    let mut p = Params::default();
    let vh = m.vocab_size * m.hidden_size;
    match m.target_hidden_inputs {
        // A DFlash drafter uses the target's embedding and LM head; its own
        // projection fuses the target layers' hidden states.
        Some(n) => p.linear += div(u64::from(n) * m.hidden_size * m.hidden_size, t),
        None => {
            // Both engines shard the embedding and LM head along the
            // vocabulary; with stages, the first holds the one and the last
            // the other.
            p.embed += div(vh, t);
            if !m.tie_word_embeddings && split.stages <= 1 {
                p.embed += div(vh, t);
            }
        }
    }
    p.small += m.hidden_size as f64;
    let first_dense = m.moe.as_ref().map_or(0, |x| x.first_dense_layers);
    let n = m.layers.full + m.layers.sliding + m.layers.recurrent;
    let kinds = layer_pattern(m);
    let mut layers = Params::default();
    for i in 0..n {
        let recurrent = kinds.get(i as usize).copied().unwrap_or(false);
        layers.add(layer_params(
            m,
            split,
            recurrent,
            m.moe.is_some() && i >= first_dense,
        ));
    }
    // The fullest stage holds its share of every kind of layer.
    let share = split.stage_share(n);
    p.add(Params {
        embed: layers.embed * share,
        linear: layers.linear * share,
        experts: layers.experts * share,
        small: layers.small * share,
    });
    if mtp {
        for _ in 0..m.mtp_layers {
            let mut l = layer_params(m, split, false, m.moe.is_some());
            // Each MTP block also projects [embedding; hidden] back to hidden.
            l.linear += div(2 * m.hidden_size * m.hidden_size, t);
            p.add(l);
        }
    }
    p
}

/// Which layers are recurrent, in order; only the count matters for sizing.
fn layer_pattern(m: &ModelInfo) -> Vec<bool> {
    let mut v = vec![false; (m.layers.full + m.layers.sliding) as usize];
    v.extend(std::iter::repeat_n(true, m.layers.recurrent as usize));
    v
}

/// Bytes per parameter of (dense linear, expert) weights as stored on the GPU.
fn quantized_bytes(m: &ModelInfo, act: f64) -> (f64, f64) {
    match &m.quantization {
        None => (act, act),
        // Block-wise FP8 keeps one f32 scale per 128x128 block.
        Some(Quantization::Fp8) => {
            let b = 1.0 + 4.0 / 16384.0;
            (b, b)
        }
        Some(Quantization::IntGroup {
            bits, group_size, ..
        }) => {
            let g = f64::from(*group_size);
            let b = f64::from(*bits) / 8.0 + (2.0 + f64::from(*bits) / 8.0) / g;
            (b, b)
        }
        Some(Quantization::Mxfp4) => (act, 0.5 + 1.0 / 32.0),
        Some(Quantization::Other { .. }) => (act, act),
    }
}

/// Bytes of `p` as stored, with 16-bit classes at `act` bytes each.
fn params_bytes(m: &ModelInfo, p: Params, act: f64) -> f64 {
    let (lin, exp) = quantized_bytes(m, act);
    (p.embed + p.small) * act + p.linear * lin + p.experts * exp
}

/// Serving dtype: both engines run float32 checkpoints in 16-bit by default.
fn act_bytes(m: &ModelInfo) -> u64 {
    match m.dtype {
        Dtype::F32 | Dtype::Fp8 => 2,
        d => d.bytes(),
    }
}

/// Weight bytes of `m` on one GPU of a TP group (MTP layers are not served).
pub fn weights_bytes_per_gpu(m: &ModelInfo, tp: u32) -> u64 {
    weights_bytes_per_split(m, &Split::tp(tp))
}

/// Weight bytes of `m` on one GPU of a layout's split (MTP layers are not served).
pub fn weights_bytes_per_split(m: &ModelInfo, split: &Split) -> u64 {
    let act = act_bytes(m) as f64;
    let per_gpu = params_bytes(m, model_params(m, split, false), act);
    let scale = match m.checkpoint_bytes {
        // The index is authoritative for the total; the architecture only splits it.
        Some(total) => {
            let ckpt_act = if m.quantization.is_none() {
                m.dtype.bytes() as f64
            } else {
                act
            };
            let computed = params_bytes(m, model_params(m, &Split::tp(1), true), ckpt_act);
            let ratio = total as f64 / computed.max(1.0);
            // Checkpoints stored in float32 are served in 16-bit.
            ratio * act / ckpt_act
        }
        None => 1.0,
    };
    (per_gpu * scale).round() as u64
}

/// Weight bytes of `m`'s multi-token-prediction layers on one GPU.
pub fn mtp_weights_bytes_per_gpu(m: &ModelInfo, split: &Split) -> u64 {
    let act = act_bytes(m) as f64;
    let with = params_bytes(m, model_params(m, split, true), act);
    let without = params_bytes(m, model_params(m, split, false), act);
    (with - without).max(0.0).round() as u64
}

/// Bytes of one KV cache element.
fn kv_bytes(kv: KvCacheDtype, m: &ModelInfo) -> u64 {
    match kv {
        KvCacheDtype::Auto => act_bytes(m),
        KvCacheDtype::Fp8 => 1,
    }
}

/// KV bytes per token per layer on one rank.
fn kv_per_layer(m: &ModelInfo, tp: u32, kv: KvCacheDtype) -> u64 {
    let b = kv_bytes(kv, m);
    match &m.attention {
        Attention::Gqa {
            num_kv_heads,
            head_dim,
            v_head_dim,
            ..
        } => per_rank(*num_kv_heads, tp) * u64::from(head_dim + v_head_dim) * b,
        // One latent (plus the rotary key) per token, replicated on every rank.
        Attention::Mla {
            kv_lora_rank,
            qk_rope_head_dim,
            ..
        } => u64::from(kv_lora_rank + qk_rope_head_dim) * b,
    }
}

/// (full-attention, sliding-window) KV bytes per token on one rank.
pub fn kv_bytes_per_token_per_gpu(m: &ModelInfo, tp: u32, kv: KvCacheDtype) -> (u64, u64) {
    kv_bytes_per_token_per_split(m, &Split::tp(tp), kv)
}

/// (full-attention, sliding-window) KV bytes per token on one GPU of a
/// layout's split: its attention ranks' heads, its stage's layers.
pub fn kv_bytes_per_token_per_split(m: &ModelInfo, split: &Split, kv: KvCacheDtype) -> (u64, u64) {
    let l = kv_per_layer(m, split.attention, kv);
    let all = m.layers.full + m.layers.sliding + m.layers.recurrent;
    (
        l * split.stage_count(m.layers.full, all),
        l * split.stage_count(m.layers.sliding, all),
    )
}

/// Recurrent state (SSM + convolution) bytes per request on one rank.
pub fn state_bytes_per_request_per_gpu(m: &ModelInfo, tp: u32, engine: EngineRule) -> u64 {
    let (ssm, conv) = state_parts_per_request_per_gpu(m, tp, engine);
    ssm + conv
}

/// (SSM, convolution) state bytes per request on one rank.
pub fn state_parts_per_request_per_gpu(m: &ModelInfo, tp: u32, engine: EngineRule) -> (u64, u64) {
    state_parts_per_request_per_split(m, &Split::tp(tp), engine)
}

/// (SSM, convolution) state bytes per request on one GPU of a layout's split.
pub fn state_parts_per_request_per_split(
    m: &ModelInfo,
    split: &Split,
    engine: EngineRule,
) -> (u64, u64) {
    let Some(r) = &m.recurrent else { return (0, 0) };
    let tp = split.attention.max(1);
    let conv_b = act_bytes(m);
    // The engines disagree on the SSM state dtype when the config leaves it open.
    let ssm_b = m.ssm_state_dtype.map_or(
        engine_rules::rules(engine).default_ssm_state_bytes(conv_b),
        Dtype::bytes,
    );
    let per_layer = match r {
        RecurrentLayer::GatedDeltaNet {
            num_k_heads,
            num_v_heads,
            k_head_dim,
            v_head_dim,
            conv_kernel,
        } => {
            let nk = per_rank(*num_k_heads, tp);
            let nv = per_rank(*num_v_heads, tp);
            let (dk, dv) = (u64::from(*k_head_dim), u64::from(*v_head_dim));
            let ssm = nv * dk * dv * ssm_b;
            let conv = (2 * nk * dk + nv * dv) * u64::from(conv_kernel.saturating_sub(1)) * conv_b;
            (ssm, conv)
        }
        RecurrentLayer::Mamba2 {
            num_heads,
            head_dim,
            d_state,
            n_groups,
            conv_kernel,
        } => {
            let nh = per_rank(*num_heads, tp);
            let ng = per_rank(*n_groups, tp);
            let (hd, ds) = (u64::from(*head_dim), u64::from(*d_state));
            let ssm = nh * hd * ds * ssm_b;
            let conv = (nh * hd + 2 * ng * ds) * u64::from(conv_kernel.saturating_sub(1)) * conv_b;
            (ssm, conv)
        }
    };
    let all = m.layers.full + m.layers.sliding + m.layers.recurrent;
    let layers = split.stage_count(m.layers.recurrent, all);
    (per_layer.0 * layers, per_layer.1 * layers)
}

/// Activation bytes one token of a forward pass keeps live at its peak on one rank.
pub(super) fn activation_bytes_per_token(m: &ModelInfo, tp: u32) -> f64 {
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
    (3.0 * inter + 3.0 * m.hidden_size as f64) * act
}

/// The fullest stage's layers out of the model's, as `31/61`.
fn model_layer_share(m: &ModelInfo, split: &Split) -> String {
    let n = m.layers.full + m.layers.sliding + m.layers.recurrent;
    format!("{}/{n}", n.div_ceil(split.stages.max(1)))
}

/// What one GPU holds per model, token and request, independent of the engine's pool rules.
pub(super) struct Sizes {
    /// Target model weights.
    pub weights: u64,
    /// Draft model weights (0 without a draft model).
    pub draft_weights: u64,
    /// KV bytes per token in full-attention layers of target and draft.
    pub kv_tok: u64,
    /// KV bytes per token in sliding-window layers of target and draft.
    pub swa_tok: u64,
    /// Recurrent state per request.
    pub state: u64,
    /// Of `state`, the SSM part (the rest is convolution windows).
    pub state_ssm: u64,
}

impl Sizes {
    /// The sizes of `model` (and its draft) under `inputs`, noting how weights were counted.
    pub fn of(model: &ModelInfo, inputs: &MemoryInputs, assumptions: &mut Vec<String>) -> Sizes {
        let tp = inputs.layout.tp.max(1);
        let split = Split::of(inputs.engine, inputs.layout);
        let weights = weights_bytes_per_split(model, &split);
        // The drafter is sharded over the target's TP ranks, as SGLang's
        // draft worker and vLLM's proposer run it.
        let mut draft_weights = match (&inputs.draft, inputs.draft_weights_bytes) {
            (Some(d), _) => weights_bytes_per_gpu(d, tp),
            (None, Some(total)) => {
                assumptions.push(format!(
                    "drafter weights given as {:.2} GiB, split over {tp} GPU(s)",
                    total as f64 / GIB
                ));
                total / u64::from(tp)
            }
            (None, None) => 0,
        };
        if inputs.mtp && model.mtp_layers > 0 {
            draft_weights += mtp_weights_bytes_per_gpu(model, &split);
            assumptions.push(format!(
                "MTP drafting loads the checkpoint's {} multi-token-prediction layer(s)",
                model.mtp_layers
            ));
        }
        assumptions.push(format!(
            "weights from {}; embeddings and LM head split over TP ranks, norms, routers and MLA \
             down-projections replicated, KV projections replicated when TP exceeds the KV heads",
            match model.weight_source {
                WeightSource::SafetensorsIndex => "the safetensors index",
                WeightSource::Architecture => "the parameter count of the architecture",
            }
        ));
        if model.mtp_layers > 0 && !inputs.mtp {
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

        if split != Split::tp(tp) {
            assumptions.push(format!(
                "layout {}: attention over {} rank(s), dense layers over {}, routed experts \
                 over {}, {} of the layers on the fullest of {} stage(s)",
                inputs.layout.label(),
                split.attention,
                split.dense,
                split.experts,
                model_layer_share(model, &split),
                split.stages
            ));
        }
        let (mut kv_tok, mut swa_tok) =
            kv_bytes_per_token_per_split(model, &split, inputs.kv_cache_dtype);
        if let Some(d) = &inputs.draft {
            let (f, s) = kv_bytes_per_token_per_gpu(d, tp, inputs.kv_cache_dtype);
            kv_tok += f;
            swa_tok += s;
        }
        let (state_ssm, state_conv) =
            state_parts_per_request_per_split(model, &split, inputs.engine);
        Sizes {
            weights,
            draft_weights,
            kv_tok,
            swa_tok,
            state: state_ssm + state_conv,
            state_ssm,
        }
    }
}
