//! Reading a Hugging Face model directory into a [`ModelInfo`].
//!
//! Only `config.json` (or the `text_config` nested in a multimodal config) and,
//! when present, the `metadata.total_size` of `model.safetensors.index.json`
//! are read. Everything the memory model needs is derived from those: layer
//! kinds (full, sliding-window, linear/state-space), attention geometry (GQA or
//! MLA), experts, dtype and quantization.
//!
//! Units: sizes are element counts, except [`ModelInfo::checkpoint_bytes`]
//! which is in bytes. Invariant: `layers.full + layers.sliding + layers.recurrent`
//! equals `num_hidden_layers`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

/// Errors raised while reading model files; each names the file and the key.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// File that failed.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is not valid JSON.
    #[error("{path} is not valid JSON: {source}")]
    Json {
        /// File that failed.
        path: PathBuf,
        /// Underlying error.
        source: serde_json::Error,
    },
    /// A key the memory model needs is absent.
    #[error("{path}: missing key `{key}` ({hint})")]
    MissingKey {
        /// File that lacks the key.
        path: PathBuf,
        /// Name of the key.
        key: String,
        /// What the key is needed for.
        hint: String,
    },
    /// A key is present but unusable.
    #[error("{path}: key `{key}` is invalid: {reason}")]
    InvalidKey {
        /// File holding the key.
        path: PathBuf,
        /// Name of the key.
        key: String,
        /// Why it was rejected.
        reason: String,
    },
}

/// Element type of weights, activations or caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// bfloat16.
    Bf16,
    /// 8-bit float (e4m3/e5m2).
    Fp8,
}

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::Fp8 => 1,
        }
    }

    /// The dtype a config or a flag names (`float32`, `bf16`, `torch.float16`).
    pub fn parse(s: &str) -> Option<Dtype> {
        match s.trim_start_matches("torch.") {
            "float32" | "fp32" | "float" => Some(Dtype::F32),
            "float16" | "fp16" | "half" => Some(Dtype::F16),
            "bfloat16" | "bf16" => Some(Dtype::Bf16),
            "float8_e4m3fn" | "float8_e5m2" | "fp8" => Some(Dtype::Fp8),
            _ => None,
        }
    }
}

/// Weight quantization declared in `quantization_config`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "method", rename_all = "lowercase")]
pub enum Quantization {
    /// FP8 linear weights with per-block or per-channel scales.
    Fp8,
    /// 4-bit (or `bits`-bit) weight-only AWQ/GPTQ with one scale per group.
    IntGroup {
        /// Declared method name (`awq`, `gptq`, ...).
        name: String,
        /// Bits per weight.
        bits: u32,
        /// Weights sharing one scale.
        group_size: u32,
    },
    /// MXFP4 experts (gpt-oss): 4-bit values plus one 8-bit scale per 32.
    Mxfp4,
    /// A method this model does not size; weights are taken at dtype size.
    Other {
        /// Declared method name.
        name: String,
    },
}

/// How the attention layers store their cache.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Attention {
    /// Grouped-query (or multi-head/multi-query) attention: K and V per KV head.
    Gqa {
        /// Key/value heads (before tensor parallelism).
        num_kv_heads: u32,
        /// Key head size.
        head_dim: u32,
        /// Value head size (equal to `head_dim` for almost every model).
        v_head_dim: u32,
        /// Whether the query projection also produces an output gate (Qwen3-Next).
        output_gate: bool,
    },
    /// Multi-head latent attention (DeepSeek V2/V3): one latent per token per layer.
    Mla {
        /// Compressed KV latent size.
        kv_lora_rank: u32,
        /// Decoupled rotary key size stored next to the latent.
        qk_rope_head_dim: u32,
        /// Per-head non-rotary query/key size.
        qk_nope_head_dim: u32,
        /// Per-head value size.
        v_head_dim: u32,
        /// Query compression rank, if queries are compressed.
        q_lora_rank: Option<u32>,
    },
}

/// The fixed per-request state of one linear-attention or state-space layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RecurrentLayer {
    /// Gated DeltaNet (Qwen3-Next, Qwen3.5): a k×v matrix per value head.
    GatedDeltaNet {
        /// Key heads.
        num_k_heads: u32,
        /// Value heads.
        num_v_heads: u32,
        /// Key head size.
        k_head_dim: u32,
        /// Value head size.
        v_head_dim: u32,
        /// Causal convolution width.
        conv_kernel: u32,
    },
    /// Mamba2 (Granite 4.0-H, Nemotron-H style): head_dim×d_state per head.
    Mamba2 {
        /// SSM heads.
        num_heads: u32,
        /// SSM head size.
        head_dim: u32,
        /// State size per channel.
        d_state: u32,
        /// B/C groups.
        n_groups: u32,
        /// Causal convolution width.
        conv_kernel: u32,
    },
}

/// Mixture-of-experts geometry; all experts are resident in GPU memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub num_experts: u32,
    /// Experts activated per token.
    pub experts_per_token: u32,
    /// Intermediate size of one routed expert.
    pub expert_intermediate: u64,
    /// Total intermediate size of the always-on shared expert(s), 0 if none.
    pub shared_intermediate: u64,
    /// Leading layers that use a dense MLP instead of experts.
    pub first_dense_layers: u32,
}

/// How many layers of each kind the model has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerCounts {
    /// Attention layers whose cache grows with every token.
    pub full: u32,
    /// Attention layers that keep at most `sliding_window` tokens.
    pub sliding: u32,
    /// Linear-attention / state-space layers with a fixed state per request.
    pub recurrent: u32,
}

/// Where the weight size comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightSource {
    /// `metadata.total_size` of `model.safetensors.index.json`.
    SafetensorsIndex,
    /// Parameter count derived from the architecture times bytes per parameter.
    Architecture,
}

/// Everything the memory model needs to know about one model.
#[derive(Clone, Debug, Serialize)]
pub struct ModelInfo {
    /// The config file this was read from.
    pub source: String,
    /// `model_type` of the (text) config.
    pub model_type: String,
    /// Hidden size.
    pub hidden_size: u64,
    /// Decoder layers used for serving (excludes multi-token-prediction layers).
    pub num_layers: u32,
    /// Query heads.
    pub num_attention_heads: u32,
    /// Vocabulary size.
    pub vocab_size: u64,
    /// Dense MLP intermediate size (0 if every layer is MoE).
    pub intermediate_size: u64,
    /// Whether the LM head shares the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Longest context the model declares (`max_position_embeddings`).
    pub max_context: Option<u64>,
    /// Checkpoint dtype (`torch_dtype` / `dtype`).
    pub dtype: Dtype,
    /// Weight quantization, if any.
    pub quantization: Option<Quantization>,
    /// Attention cache geometry.
    pub attention: Attention,
    /// Layer kinds.
    pub layers: LayerCounts,
    /// Tokens a sliding-window layer keeps.
    pub sliding_window: Option<u64>,
    /// Shape of each recurrent layer's state.
    pub recurrent: Option<RecurrentLayer>,
    /// SSM state dtype declared by the config (`mamba_ssm_dtype`), if any.
    pub ssm_state_dtype: Option<Dtype>,
    /// Mixture-of-experts geometry.
    pub moe: Option<Moe>,
    /// Multi-token-prediction layers present in the checkpoint but not served.
    pub mtp_layers: u32,
    /// Checkpoint weight bytes (all layers including MTP), when known from the index.
    pub checkpoint_bytes: Option<u64>,
    /// Where the weight size comes from.
    pub weight_source: WeightSource,
    /// A drafter fed the target's hidden states (DFlash): it has no
    /// embedding or LM head of its own, and one projection takes this many
    /// target layers' hidden states into its width.
    pub target_hidden_inputs: Option<u32>,
}

/// Reads a model from a directory holding `config.json`, or from the config path itself.
pub fn load_model_info(path: &Path) -> Result<ModelInfo, MemoryError> {
    let (dir, config_path) = if path.is_dir() {
        (path.to_path_buf(), path.join("config.json"))
    } else {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        (dir, path.to_path_buf())
    };
    let config = read_json(&config_path)?;
    let index_path = dir.join("model.safetensors.index.json");
    let total_size = if index_path.is_file() {
        let index = read_json(&index_path)?;
        let size = index
            .get("metadata")
            .and_then(|m| m.get("total_size"))
            .ok_or_else(|| MemoryError::MissingKey {
                path: index_path.clone(),
                key: "metadata.total_size".into(),
                hint: "weight bytes of the checkpoint".into(),
            })?;
        Some(as_u64(size).ok_or_else(|| MemoryError::InvalidKey {
            path: index_path.clone(),
            key: "metadata.total_size".into(),
            reason: format!("expected a byte count, found {size}"),
        })?)
    } else {
        None
    };
    parse_model_info(&config, &config_path, total_size)
}

fn read_json(path: &Path) -> Result<Value, MemoryError> {
    let text = std::fs::read_to_string(path).map_err(|source| MemoryError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| MemoryError::Json {
        path: path.to_path_buf(),
        source,
    })
}

fn as_u64(v: &Value) -> Option<u64> {
    // Some exporters write integers as floats ("4096.0").
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    })
}

/// Typed access to one config object, with errors that name the file and key.
struct Cfg<'a> {
    obj: &'a Map<String, Value>,
    /// The top-level object, consulted when a key is absent from `text_config`.
    outer: Option<&'a Map<String, Value>>,
    path: &'a Path,
    prefix: &'static str,
}

impl Cfg<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.obj
            .get(key)
            .or_else(|| self.outer.and_then(|o| o.get(key)))
            .filter(|v| !v.is_null())
    }

    fn name(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, MemoryError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => as_u64(v).map(Some).ok_or_else(|| MemoryError::InvalidKey {
                path: self.path.to_path_buf(),
                key: self.name(key),
                reason: format!("expected a non-negative integer, found {v}"),
            }),
        }
    }

    fn opt_u32(&self, key: &str) -> Result<Option<u32>, MemoryError> {
        match self.opt_u64(key)? {
            None => Ok(None),
            Some(n) => u32::try_from(n)
                .map(Some)
                .map_err(|_| MemoryError::InvalidKey {
                    path: self.path.to_path_buf(),
                    key: self.name(key),
                    reason: format!("{n} is too large"),
                }),
        }
    }

    fn req_u64(&self, key: &str, hint: &str) -> Result<u64, MemoryError> {
        self.opt_u64(key)?.ok_or_else(|| self.missing(key, hint))
    }

    fn req_u32(&self, key: &str, hint: &str) -> Result<u32, MemoryError> {
        self.opt_u32(key)?.ok_or_else(|| self.missing(key, hint))
    }

    fn positive_u32(&self, key: &str, hint: &str) -> Result<u32, MemoryError> {
        let n = self.req_u32(key, hint)?;
        if n == 0 {
            return Err(self.invalid(key, "must be greater than zero"));
        }
        Ok(n)
    }

    fn bool(&self, key: &str) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    fn missing(&self, key: &str, hint: &str) -> MemoryError {
        MemoryError::MissingKey {
            path: self.path.to_path_buf(),
            key: self.name(key),
            hint: hint.into(),
        }
    }

    fn invalid(&self, key: &str, reason: &str) -> MemoryError {
        MemoryError::InvalidKey {
            path: self.path.to_path_buf(),
            key: self.name(key),
            reason: reason.into(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Full,
    Sliding,
    Recurrent,
}

/// Builds a [`ModelInfo`] from a parsed `config.json`; `total_size` is the index byte count.
pub fn parse_model_info(
    config: &Value,
    config_path: &Path,
    total_size: Option<u64>,
) -> Result<ModelInfo, MemoryError> {
    let top = config.as_object().ok_or_else(|| MemoryError::InvalidKey {
        path: config_path.to_path_buf(),
        key: "(root)".into(),
        reason: "expected a JSON object".into(),
    })?;
    // Multimodal configs keep the language model in `text_config`; the vision
    // tower is small next to it and is counted only through the index size.
    let cfg = match top.get("text_config").and_then(Value::as_object) {
        Some(text) => Cfg {
            obj: text,
            outer: Some(top),
            path: config_path,
            prefix: "text_config.",
        },
        None => Cfg {
            obj: top,
            outer: None,
            path: config_path,
            prefix: "",
        },
    };

    let model_type = cfg.str("model_type").unwrap_or("unknown").to_string();
    let hidden_size = cfg.req_u64("hidden_size", "width of every projection")?;
    let num_layers = cfg.positive_u32("num_hidden_layers", "number of decoder layers")?;
    let num_attention_heads = cfg.positive_u32("num_attention_heads", "query heads")?;
    let vocab_size = cfg.req_u64("vocab_size", "embedding and LM head size")?;
    let intermediate_size = cfg.opt_u64("intermediate_size")?.unwrap_or(0);
    let tie_word_embeddings = cfg.bool("tie_word_embeddings");
    let max_context = cfg.opt_u64("max_position_embeddings")?;

    let dtype_key = if cfg.get("torch_dtype").is_some() {
        "torch_dtype"
    } else {
        "dtype"
    };
    let dtype = match cfg.str(dtype_key) {
        None => Dtype::Bf16,
        Some(s) => Dtype::parse(s)
            .ok_or_else(|| cfg.invalid(dtype_key, &format!("unknown dtype `{s}`")))?,
    };
    let quantization = parse_quantization(&cfg)?;

    let attention = parse_attention(&cfg, hidden_size, num_attention_heads)?;
    let kinds = layer_kinds(&cfg, num_layers)?;
    let count = |k: Kind| kinds.iter().filter(|x| **x == k).count() as u32;
    let mut layers = LayerCounts {
        full: count(Kind::Full),
        sliding: count(Kind::Sliding),
        recurrent: count(Kind::Recurrent),
    };
    let sliding_window = if layers.sliding > 0 {
        let w = cfg.req_u64("sliding_window", "tokens kept by sliding-window layers")?;
        Some(w)
    } else {
        None
    };
    // A model whose every layer slides (Mistral 7B v0.1) is served by both
    // engines as plain full attention, so its cache grows with every token.
    if layers.full == 0 && layers.recurrent == 0 {
        layers.full = layers.sliding;
        layers.sliding = 0;
    }
    let sliding_window = sliding_window.filter(|_| layers.sliding > 0);
    let recurrent = if layers.recurrent > 0 {
        Some(parse_recurrent(&cfg, hidden_size)?)
    } else {
        None
    };
    let ssm_state_dtype = cfg.str("mamba_ssm_dtype").and_then(Dtype::parse);
    let moe = parse_moe(&cfg)?;
    let dflash = top
        .get("architectures")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some("DFlashDraftModel")));
    let target_hidden_inputs = if dflash {
        let ids = cfg
            .get("dflash_config")
            .and_then(|d| d.get("target_layer_ids"))
            .or_else(|| cfg.get("target_layer_ids"))
            .and_then(Value::as_array)
            .ok_or_else(|| {
                cfg.missing(
                    "dflash_config.target_layer_ids",
                    "the target layers whose hidden states the DFlash drafter reads",
                )
            })?;
        Some(ids.len() as u32)
    } else {
        None
    };
    let mtp_layers = cfg
        .opt_u32("num_nextn_predict_layers")?
        .or(cfg.opt_u32("mtp_num_hidden_layers")?)
        .unwrap_or(0);

    Ok(ModelInfo {
        source: config_path.display().to_string(),
        model_type,
        hidden_size,
        num_layers,
        num_attention_heads,
        vocab_size,
        intermediate_size,
        tie_word_embeddings,
        max_context,
        dtype,
        quantization,
        attention,
        layers,
        sliding_window,
        recurrent,
        ssm_state_dtype,
        moe,
        mtp_layers,
        checkpoint_bytes: total_size,
        weight_source: if total_size.is_some() {
            WeightSource::SafetensorsIndex
        } else {
            WeightSource::Architecture
        },
        target_hidden_inputs,
    })
}

fn parse_quantization(cfg: &Cfg) -> Result<Option<Quantization>, MemoryError> {
    let Some(q) = cfg.get("quantization_config") else {
        return Ok(None);
    };
    let key = "quantization_config.quant_method";
    let method = q
        .get("quant_method")
        .and_then(Value::as_str)
        .ok_or_else(|| cfg.missing(key, "how the weights are stored"))?
        .to_ascii_lowercase();
    let q = match method.as_str() {
        "fp8" => Quantization::Fp8,
        "mxfp4" => Quantization::Mxfp4,
        "awq" | "gptq" | "awq_marlin" | "gptq_marlin" => {
            let bits = q
                .get("bits")
                .or_else(|| q.get("w_bit"))
                .and_then(as_u64)
                .unwrap_or(4);
            let group = q
                .get("group_size")
                .or_else(|| q.get("q_group_size"))
                .and_then(Value::as_i64)
                .unwrap_or(128);
            if bits == 0 || bits > 16 {
                return Err(cfg.invalid("quantization_config.bits", "expected 1..=16"));
            }
            Quantization::IntGroup {
                name: method,
                bits: bits as u32,
                // -1 means one scale per output channel: treat as one huge group.
                group_size: if group <= 0 { u32::MAX } else { group as u32 },
            }
        }
        _ => Quantization::Other { name: method },
    };
    Ok(Some(q))
}

fn parse_attention(cfg: &Cfg, hidden: u64, heads: u32) -> Result<Attention, MemoryError> {
    if let Some(kv_lora_rank) = cfg.opt_u32("kv_lora_rank")? {
        let hint = "MLA geometry";
        return Ok(Attention::Mla {
            kv_lora_rank,
            qk_rope_head_dim: cfg.req_u32("qk_rope_head_dim", hint)?,
            qk_nope_head_dim: cfg.req_u32("qk_nope_head_dim", hint)?,
            v_head_dim: cfg.req_u32("v_head_dim", hint)?,
            q_lora_rank: cfg.opt_u32("q_lora_rank")?,
        });
    }
    let num_kv_heads = cfg.opt_u32("num_key_value_heads")?.unwrap_or(heads);
    if num_kv_heads == 0 || heads % num_kv_heads != 0 {
        return Err(cfg.invalid(
            "num_key_value_heads",
            &format!("{num_kv_heads} does not divide num_attention_heads={heads}"),
        ));
    }
    let head_dim = match cfg.opt_u32("head_dim")? {
        Some(d) => d,
        None => {
            if hidden % u64::from(heads) != 0 {
                return Err(cfg.missing(
                    "head_dim",
                    "hidden_size is not a multiple of num_attention_heads",
                ));
            }
            (hidden / u64::from(heads)) as u32
        }
    };
    Ok(Attention::Gqa {
        num_kv_heads,
        head_dim,
        v_head_dim: cfg.opt_u32("v_head_dim")?.unwrap_or(head_dim),
        output_gate: cfg.bool("attn_output_gate") || cfg.str("model_type") == Some("qwen3_next"),
    })
}

fn layer_kinds(cfg: &Cfg, n: u32) -> Result<Vec<Kind>, MemoryError> {
    for key in ["layer_types", "layers_block_type"] {
        if let Some(list) = cfg.get(key) {
            let arr = list
                .as_array()
                .ok_or_else(|| cfg.invalid(key, "expected a list of layer kinds"))?;
            if arr.len() != n as usize {
                return Err(cfg.invalid(
                    key,
                    &format!("has {} entries but num_hidden_layers is {n}", arr.len()),
                ));
            }
            return arr
                .iter()
                .map(|v| match v.as_str() {
                    Some("full_attention" | "attention" | "hybrid") => Ok(Kind::Full),
                    Some("sliding_attention" | "sliding_window") => Ok(Kind::Sliding),
                    Some("linear_attention" | "mamba" | "mamba2") => Ok(Kind::Recurrent),
                    _ => Err(cfg.invalid(key, &format!("unknown layer kind {v}"))),
                })
                .collect();
        }
    }
    if let Some(interval) = cfg.opt_u32("full_attention_interval")? {
        if interval == 0 {
            return Err(cfg.invalid("full_attention_interval", "must be greater than zero"));
        }
        return Ok((1..=n)
            .map(|i| {
                if i % interval == 0 {
                    Kind::Full
                } else {
                    Kind::Recurrent
                }
            })
            .collect());
    }
    // Qwen2-style configs carry a `sliding_window` that is switched off.
    let sliding_enabled = cfg
        .get("use_sliding_window")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if cfg.get("sliding_window").is_some() && sliding_enabled {
        if let Some(pattern) = cfg.opt_u32("sliding_window_pattern")? {
            // Gemma: every `pattern`-th layer is global.
            let p = pattern.max(1);
            return Ok((1..=n)
                .map(|i| {
                    if i % p == 0 {
                        Kind::Full
                    } else {
                        Kind::Sliding
                    }
                })
                .collect());
        }
        return Ok(vec![Kind::Sliding; n as usize]);
    }
    Ok(vec![Kind::Full; n as usize])
}

fn parse_recurrent(cfg: &Cfg, hidden: u64) -> Result<RecurrentLayer, MemoryError> {
    if cfg.get("linear_num_value_heads").is_some() {
        let hint = "linear-attention state size";
        return Ok(RecurrentLayer::GatedDeltaNet {
            num_k_heads: cfg.positive_u32("linear_num_key_heads", hint)?,
            num_v_heads: cfg.positive_u32("linear_num_value_heads", hint)?,
            k_head_dim: cfg.req_u32("linear_key_head_dim", hint)?,
            v_head_dim: cfg.req_u32("linear_value_head_dim", hint)?,
            conv_kernel: cfg.opt_u32("linear_conv_kernel_dim")?.unwrap_or(4),
        });
    }
    let hint = "Mamba2 state size";
    let d_state = cfg
        .opt_u32("mamba_d_state")?
        .or(cfg.opt_u32("ssm_state_size")?)
        .ok_or_else(|| cfg.missing("mamba_d_state", hint))?;
    let expand = cfg
        .opt_u64("mamba_expand")?
        .or(cfg.opt_u64("expand")?)
        .unwrap_or(2);
    let head_dim = cfg
        .opt_u32("mamba_d_head")?
        .or(cfg.opt_u32("mamba_head_dim")?)
        .ok_or_else(|| cfg.missing("mamba_d_head", hint))?;
    let num_heads = match cfg
        .opt_u32("mamba_n_heads")?
        .or(cfg.opt_u32("mamba_num_heads")?)
    {
        Some(h) => h,
        None if head_dim > 0 => (hidden * expand / u64::from(head_dim)) as u32,
        None => return Err(cfg.missing("mamba_n_heads", hint)),
    };
    Ok(RecurrentLayer::Mamba2 {
        num_heads,
        head_dim,
        d_state,
        n_groups: cfg
            .opt_u32("mamba_n_groups")?
            .or(cfg.opt_u32("n_groups")?)
            .unwrap_or(1)
            .max(1),
        conv_kernel: cfg
            .opt_u32("mamba_d_conv")?
            .or(cfg.opt_u32("conv_kernel")?)
            .unwrap_or(4),
    })
}

fn parse_moe(cfg: &Cfg) -> Result<Option<Moe>, MemoryError> {
    let num_experts = cfg
        .opt_u32("n_routed_experts")?
        .or(cfg.opt_u32("num_experts")?)
        .or(cfg.opt_u32("num_local_experts")?)
        .unwrap_or(0);
    let shared_only = cfg.opt_u64("shared_intermediate_size")?.unwrap_or(0);
    if num_experts == 0 {
        // Granite 4.0-H dense variants keep their MLP in `shared_intermediate_size`.
        if shared_only > 0 {
            return Ok(Some(Moe {
                num_experts: 0,
                experts_per_token: 0,
                expert_intermediate: 0,
                shared_intermediate: shared_only,
                first_dense_layers: 0,
            }));
        }
        return Ok(None);
    }
    let hint = "size of one expert";
    let expert_intermediate = match cfg.opt_u64("moe_intermediate_size")? {
        Some(m) => m,
        // gpt-oss and Granite name the per-expert width `intermediate_size`.
        None => cfg.req_u64("intermediate_size", hint)?,
    };
    let shared_intermediate = if let Some(n) = cfg.opt_u64("n_shared_experts")? {
        n * expert_intermediate
    } else {
        cfg.opt_u64("shared_expert_intermediate_size")?
            .unwrap_or(shared_only)
    };
    Ok(Some(Moe {
        num_experts,
        experts_per_token: cfg
            .opt_u32("num_experts_per_tok")?
            .or(cfg.opt_u32("experts_per_token")?)
            .unwrap_or(0),
        expert_intermediate,
        shared_intermediate,
        first_dense_layers: cfg.opt_u32("first_k_dense_replace")?.unwrap_or(0),
    }))
}
