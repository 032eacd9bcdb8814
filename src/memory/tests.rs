//! Tests on published model configs and on engine-reported start-up figures.

use super::*;
use std::path::Path;

const GIB_U: u64 = 1 << 30;

fn fixture(name: &str) -> ModelInfo {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/models"
    ))
    .join(name);
    match load_model_info(&dir) {
        Ok(m) => m,
        Err(e) => panic!("fixture {name}: {e}"),
    }
}

fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
    ((actual - expected) / expected).abs() <= tolerance
}

#[test]
fn llama_gqa_kv_and_weights() {
    let m = fixture("Llama-3.1-8B-Instruct");
    assert_eq!(m.weight_source, WeightSource::SafetensorsIndex);
    // 32 layers x 8 KV heads x (128 K + 128 V) x 2 bytes = 131_072 B/token.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 1, KvCacheDtype::Auto),
        (131_072, 0)
    );
    // TP2: 4 KV heads per rank -> 65_536; fp8 halves it -> 32_768.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 2, KvCacheDtype::Auto).0,
        65_536
    );
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 2, KvCacheDtype::Fp8).0,
        32_768
    );
    // TP16 > 8 KV heads: one replicated head per rank -> 32 x 1 x 256 x 2 = 16_384.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 16, KvCacheDtype::Auto).0,
        16_384
    );
    // The index total (8_030_261_248 params x 2 B) is reproduced at TP1.
    assert_eq!(weights_bytes_per_gpu(&m, 1), 16_060_522_496);
    // TP2 halves everything but the norms, which every rank keeps.
    let tp2 = weights_bytes_per_gpu(&m, 2) as f64;
    assert!(within(tp2, 16_060_522_496.0 / 2.0, 0.001), "{tp2}");
}

#[test]
fn qwen3_explicit_head_dim_and_weights_from_architecture() {
    let m = fixture("Qwen3-8B");
    assert_eq!(m.weight_source, WeightSource::Architecture);
    // 36 layers x 8 KV heads x (128 + 128) x 2 B = 147_456 B/token.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 1, KvCacheDtype::Auto).0,
        147_456
    );
    // embed + lm_head 2 x 151_936 x 4096 = 1_244_659_712; per layer q 16_777_216 +
    // k,v 8_388_608 + o 16_777_216 + MLP 3 x 4096 x 12_288 = 150_994_944 + norms 8192
    // = 192_946_176, x36 = 6_946_062_336; + final norm 4096 -> 8_190_726_144 params x 2 B.
    assert_eq!(weights_bytes_per_gpu(&m, 1), 16_381_452_288);
}

#[test]
fn mistral_derived_head_dim_without_window() {
    let m = fixture("Mistral-7B-Instruct-v0.3");
    // head_dim = 4096 / 32 = 128; 32 x 8 x 256 x 2 = 131_072 B/token; sliding_window is null.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 1, KvCacheDtype::Auto),
        (131_072, 0)
    );
    assert_eq!(m.sliding_window, None);
}

#[test]
fn deepseek_mla_is_per_token_per_layer_not_per_head() {
    let m = fixture("DeepSeek-V2-Lite");
    assert!(matches!(m.attention, Attention::Mla { .. }));
    // 27 layers x (512 latent + 64 rope) x 2 B = 31_104 B/token, the same on every rank.
    for tp in [1, 2, 8] {
        assert_eq!(
            kv_bytes_per_token_per_gpu(&m, tp, KvCacheDtype::Auto).0,
            31_104
        );
    }
    let r1 = fixture("DeepSeek-R1");
    // 61 x 576 x 2 = 70_272 B/token; fp8 KV: 35_136.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&r1, 8, KvCacheDtype::Auto).0,
        70_272
    );
    assert_eq!(
        kv_bytes_per_token_per_gpu(&r1, 8, KvCacheDtype::Fp8).0,
        35_136
    );
    assert_eq!(r1.quantization, Some(Quantization::Fp8));
    assert_eq!(r1.mtp_layers, 1);
    // 256 experts all resident: per-GPU weights at TP8 are about 1/8 of the
    // 688.6 GB checkpoint minus the unserved MTP layer (~11.6 GB).
    let w = weights_bytes_per_gpu(&r1, 8) as f64;
    assert!(within(w, (688.6e9 - 11.6e9) / 8.0, 0.03), "{w}");
}

#[test]
fn gpt_oss_sliding_layers_and_mxfp4_experts() {
    let m = fixture("gpt-oss-20b");
    assert_eq!(
        m.layers,
        LayerCounts {
            full: 12,
            sliding: 12,
            recurrent: 0
        }
    );
    assert_eq!(m.sliding_window, Some(128));
    // Per layer 8 KV heads x (64 + 64) x 2 B = 2048; 12 full -> 24_576, 12 sliding -> 24_576.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 1, KvCacheDtype::Auto),
        (24_576, 24_576)
    );
    // Experts 24 x 32 x 3 x 2880 x 2880 = 19.11e9 params at 4.25 bits = 10.15 GB;
    // attention + embeddings ~1.8e9 params in bf16 = 3.6 GB: about 13.8 GB in all,
    // which is the size of the published checkpoint.
    let w = weights_bytes_per_gpu(&m, 1) as f64;
    assert!(within(w, 13.76e9, 0.03), "{w}");
    // Sliding layers cap per-request KV: a 100k-token request costs the window there.
    let mut i = MemoryInputs::new(EngineRule::Vllm, 1, 80 * GIB_U);
    i.request_tokens = Some(100_000);
    let e = estimate(&m, &i);
    assert_eq!(e.sliding_kv_bytes_per_token_per_gpu, 24_576);
    assert!(e.max_concurrent_requests.unwrap_or(0) >= 1);
}

#[test]
fn qwen3_next_hybrid_state_and_kv() {
    let m = fixture("Qwen3-Next-80B-A3B-Instruct");
    // full_attention_interval 4 over 48 layers: 12 full, 36 gated-deltanet.
    assert_eq!(
        m.layers,
        LayerCounts {
            full: 12,
            sliding: 0,
            recurrent: 36
        }
    );
    // 12 x 2 KV heads x (256 + 256) x 2 B = 24_576; TP4 replicates to 1 head per rank -> 12_288.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 1, KvCacheDtype::Auto).0,
        24_576
    );
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 4, KvCacheDtype::Auto).0,
        12_288
    );
    // SGLang (f32 SSM): per layer 32 x 128 x 128 x 4 = 2_097_152 SSM
    // + (2 x 16 x 128 + 32 x 128) x (4 - 1) x 2 = 49_152 conv = 2_146_304; x36 = 77_266_944.
    assert_eq!(
        state_bytes_per_request_per_gpu(&m, 1, EngineRule::Sglang),
        77_266_944
    );
    // TP4: 4 key / 8 value heads per rank: 524_288 + 12_288 = 536_576; x36 = 19_316_736.
    assert_eq!(
        state_bytes_per_request_per_gpu(&m, 4, EngineRule::Sglang),
        19_316_736
    );
    // vLLM keeps SSM state in bf16: 1_048_576 + 49_152 = 1_097_728; x36 = 39_518_208.
    assert_eq!(
        state_bytes_per_request_per_gpu(&m, 1, EngineRule::Vllm),
        39_518_208
    );
    // 512 experts resident: ~79.7e9 params in bf16.
    let w = weights_bytes_per_gpu(&m, 1) as f64;
    assert!(within(w, 2.0 * 79.67e9, 0.02), "{w}");
}

#[test]
fn granite_mamba2_hybrid() {
    let m = fixture("granite-4.0-h-micro");
    assert_eq!(
        m.layers,
        LayerCounts {
            full: 4,
            sliding: 0,
            recurrent: 36
        }
    );
    // 4 attention layers x 8 KV heads x (64 + 64) x 2 B = 8192 B/token.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 1, KvCacheDtype::Auto).0,
        8192
    );
    // vLLM (bf16 state): SSM 64 x 64 x 128 x 2 = 1_048_576 + conv (64 x 64 + 2 x 1 x 128) x 3 x 2
    // = 26_112 -> 1_074_688 per layer; x36 = 38_688_768.
    assert_eq!(
        state_bytes_per_request_per_gpu(&m, 1, EngineRule::Vllm),
        38_688_768
    );
    // TP2: 32 heads per rank, the single B/C group replicated: 524_288 + (2048 + 256) x 6
    // = 538_112; x36 = 19_372_032.
    assert_eq!(
        state_bytes_per_request_per_gpu(&m, 2, EngineRule::Vllm),
        19_372_032
    );
}

#[test]
fn qwen35_multimodal_text_config() {
    let m = fixture("Qwen3.5-9B");
    assert_eq!(m.model_type, "qwen3_5_text");
    assert_eq!(
        m.layers,
        LayerCounts {
            full: 8,
            sliding: 0,
            recurrent: 24
        }
    );
    assert_eq!(m.ssm_state_dtype, Some(Dtype::F32));
    // 8 x 4 KV heads x 512 x 2 B = 32_768 B/token.
    assert_eq!(
        kv_bytes_per_token_per_gpu(&m, 1, KvCacheDtype::Auto).0,
        32_768
    );
    // mamba_ssm_dtype float32 applies to both engines: 2_146_304 x 24 = 51_511_296.
    assert_eq!(
        state_bytes_per_request_per_gpu(&m, 1, EngineRule::Vllm),
        51_511_296
    );
}

#[test]
fn quantization_kinds_and_errors_name_file_and_key() {
    let path = Path::new("/models/x/config.json");
    let base = serde_json::json!({
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 32000, "intermediate_size": 14336,
        "torch_dtype": "float16",
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}
    });
    let m = parse_model_info(&base, path, None).expect("awq config parses");
    assert_eq!(
        m.quantization,
        Some(Quantization::IntGroup {
            name: "awq".into(),
            bits: 4,
            group_size: 128
        })
    );
    // 4-bit linear weights: well under a third of the fp16 size.
    let mut fp16 = m.clone();
    fp16.quantization = None;
    assert!(weights_bytes_per_gpu(&m, 1) * 3 < weights_bytes_per_gpu(&fp16, 1));

    let mut missing = base.clone();
    missing.as_object_mut().map(|o| o.remove("hidden_size"));
    let e = parse_model_info(&missing, path, None).expect_err("hidden_size is required");
    let msg = e.to_string();
    assert!(
        msg.contains("/models/x/config.json") && msg.contains("`hidden_size`"),
        "{msg}"
    );

    let nested = serde_json::json!({"text_config": {"hidden_size": 8}});
    let msg = parse_model_info(&nested, path, None)
        .expect_err("layers required")
        .to_string();
    assert!(msg.contains("text_config.num_hidden_layers"), "{msg}");

    let mut bad = base.clone();
    bad["layer_types"] = serde_json::json!(["full_attention"]);
    let msg = parse_model_info(&bad, path, None)
        .expect_err("length mismatch")
        .to_string();
    assert!(msg.contains("layer_types") && msg.contains("32"), "{msg}");

    let mut bad = base;
    bad["torch_dtype"] = serde_json::json!("int3");
    let msg = parse_model_info(&bad, path, None)
        .expect_err("dtype")
        .to_string();
    assert!(msg.contains("torch_dtype") && msg.contains("int3"), "{msg}");

    let missing_dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/none"));
    let msg = load_model_info(missing_dir)
        .expect_err("no such dir")
        .to_string();
    assert!(msg.contains("fixtures/none"), "{msg}");
}

#[test]
fn parse_bytes_units() {
    assert_eq!(parse_bytes("96GiB"), Ok(96 * GIB_U));
    assert_eq!(parse_bytes("80GB"), Ok(80_000_000_000));
    assert_eq!(
        parse_bytes("23.58GiB"),
        Ok((23.58 * GIB_U as f64).round() as u64)
    );
    assert_eq!(parse_bytes("81559MiB"), Ok(81_559 << 20));
    assert_eq!(parse_bytes(" 1024 "), Ok(1024));
    assert_eq!(parse_bytes("2 gib"), Ok(2 * GIB_U));
    assert!(parse_bytes("lots").is_err());
    assert!(parse_bytes("3 furlongs").is_err());
    assert!(parse_bytes("").is_err());
}

#[test]
fn verdicts_for_impossible_configs() {
    let m = fixture("Llama-3.1-8B-Instruct");
    let mut i = MemoryInputs::new(EngineRule::Sglang, 8, 24 * GIB_U);
    i.gpus_available = Some(4);
    let e = estimate(&m, &i);
    assert!(!e.runnable());
    assert!(
        e.verdicts[0].reason.contains("only 4 are available"),
        "{:?}",
        e.verdicts
    );

    // 32 heads cannot be split over 3 ranks.
    let e = estimate(&m, &MemoryInputs::new(EngineRule::Vllm, 3, 80 * GIB_U));
    assert!(e
        .verdicts
        .iter()
        .any(|v| v.level == Level::Error && v.reason.contains("32 attention heads")));

    // 15 GiB of weights on a 16 GiB card at 0.9.
    let e = estimate(&m, &MemoryInputs::new(EngineRule::Vllm, 1, 16 * GIB_U));
    assert!(e
        .verdicts
        .iter()
        .any(|v| v.level == Level::Error && v.reason.contains("weights alone")));

    // Context shorter than the request; KV too small for the concurrency.
    let mut i = MemoryInputs::new(EngineRule::Sglang, 1, 80 * GIB_U);
    i.context_length = Some(32_768);
    i.request_tokens = Some(40_000);
    let e = estimate(&m, &i);
    assert!(e
        .verdicts
        .iter()
        .any(|v| v.level == Level::Error && v.reason.contains("context length 32768")));
    i.context_length = None;
    i.request_tokens = Some(30_000);
    i.concurrency = Some(64);
    let e = estimate(&m, &i);
    assert!(e.runnable(), "{:?}", e.verdicts);
    assert!(e
        .verdicts
        .iter()
        .any(|v| v.level == Level::Warn && v.reason.contains("will queue")));

    // TP16 over 8 KV heads replicates and warns.
    let e = estimate(&m, &MemoryInputs::new(EngineRule::Sglang, 16, 80 * GIB_U));
    assert!(e
        .verdicts
        .iter()
        .any(|v| v.level == Level::Warn && v.reason.contains("replicated 2x")));
}

#[test]
fn hybrid_state_slots_and_speculative_intermediate_state() {
    let m = fixture("Qwen3-Next-80B-A3B-Instruct");
    let mut i = MemoryInputs::new(EngineRule::Sglang, 4, parse_bytes("81559MiB").unwrap_or(0));
    i.mem_fraction = Some(0.85);
    let plain = estimate(&m, &i);
    let slots = plain.state_slots.unwrap_or(0);
    assert!(slots > 0 && plain.kv_capacity_tokens > 0, "{plain:?}");
    // The state pool takes 0.9/1.9 of what weights leave.
    let rest = (plain.state_pool_bytes_per_gpu + plain.kv_pool_bytes_per_gpu) as f64;
    assert!(within(
        plain.state_pool_bytes_per_gpu as f64,
        rest * 0.9 / 1.9,
        0.01
    ));

    // Speculation: each running request also keeps one state per draft token,
    // so fewer slots fit and a higher --max-running-requests costs memory.
    i.speculative_num_draft_tokens = Some(4);
    i.max_running_requests = Some(8);
    let spec8 = estimate(&m, &i);
    assert!(spec8.state_slots.unwrap_or(0) < slots);
    // SGLang 0.5.23: (8 requests + 1 padding) x 4 draft tokens x 19_316_736 B.
    assert_eq!(spec8.spec_state_bytes_per_gpu, 9 * 4 * 19_316_736);
    i.max_running_requests = Some(32);
    let spec32 = estimate(&m, &i);
    assert!(spec32.spec_state_bytes_per_gpu > spec8.spec_state_bytes_per_gpu);
    assert!(spec32.kv_capacity_tokens < spec8.kv_capacity_tokens);

    // Asking for more running requests than slots allow warns.
    i.max_running_requests = Some(100_000);
    let e = estimate(&m, &i);
    assert!(
        e.verdicts
            .iter()
            .any(|v| v.reason.contains("state slots allow only")),
        "{:?}",
        e.verdicts
    );
}

#[test]
fn draft_model_adds_weights_and_kv() {
    let m = fixture("Llama-3.1-8B-Instruct");
    let d = fixture("Qwen3-8B");
    let mut i = MemoryInputs::new(EngineRule::Vllm, 1, 80 * GIB_U);
    let base = estimate(&m, &i);
    i.draft = Some(d);
    let with = estimate(&m, &i);
    assert_eq!(with.kv_bytes_per_token_per_gpu, 131_072 + 147_456);
    assert_eq!(with.draft_weights_bytes_per_gpu, 16_381_452_288);
    assert!(with.kv_capacity_tokens < base.kv_capacity_tokens);
}

#[test]
fn defaults_and_table() {
    // SGLang on an H100 (79.19 GiB): reserved max(512 + 12288 + 512 + 128, 10240) MiB
    // = 13_440 MiB of 81_091 MiB -> 0.834.
    let h100 = (79.19 * GIB_U as f64) as u64;
    assert_eq!(sglang_default_mem_fraction(h100, 1, false), 0.834);
    let m = fixture("Qwen3-Next-80B-A3B-Instruct");
    let mut i = MemoryInputs::new(EngineRule::Sglang, 4, h100);
    i.request_tokens = Some(8192);
    let e = estimate(&m, &i);
    let t = render_table(&e);
    assert!(
        t.contains("state slots") && t.contains("KV capacity"),
        "{t}"
    );
    let json = serde_json::to_value(&e).unwrap_or_default();
    for key in [
        "weights_bytes_per_gpu",
        "kv_bytes_per_token_per_gpu",
        "state_bytes_per_request_per_gpu",
        "kv_capacity_tokens",
        "state_slots",
        "max_concurrent_requests",
        "verdicts",
        "assumptions",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
}

/// vLLM (V0, late 2024), Llama-3.1-8B-Instruct bf16, one RTX 3090 (23.58 GiB),
/// gpu_memory_utilization 0.90, max model len 20000. Reported: weights 14.99 GB,
/// KV cache 3.81 GiB, 1952 blocks x 16 = 31_232 tokens, concurrency 1.56x.
/// Source: vllm-project/vllm#10517 (comment of 2024-12-02).
#[test]
fn accuracy_vllm_v0_llama8b_rtx3090() {
    let m = fixture("Llama-3.1-8B-Instruct");
    let mut i = MemoryInputs::new(EngineRule::Vllm, 1, parse_bytes("23.58GiB").unwrap_or(0));
    i.mem_fraction = Some(0.90);
    i.context_length = Some(20_000);
    // V0 without chunked prefill profiles one batch of max_model_len tokens.
    i.max_batched_tokens = Some(20_000);
    i.request_tokens = Some(20_000);
    let e = estimate(&m, &i);
    assert!(within(
        e.weights_bytes_per_gpu as f64,
        14.9888 * GIB_U as f64,
        0.01
    ));
    assert!(
        within(e.kv_pool_bytes_per_gpu as f64, 3.81 * GIB_U as f64, 0.10),
        "{e:?}"
    );
    assert!(
        within(e.kv_capacity_tokens as f64, 31_232.0, 0.10),
        "{}",
        e.kv_capacity_tokens
    );
    let concurrency = e.kv_capacity_tokens as f64 / 20_000.0;
    assert!(within(concurrency, 1.56, 0.10), "{concurrency}");
    println!(
        "vllm-10517: {} tokens vs 31232, {concurrency:.2}x vs 1.56x",
        e.kv_capacity_tokens
    );
}

/// SGLang (2025-01), Llama-3.1-8B-Instruct bf16, TP1 on an 80 GB H100 (nvidia-smi 81559 MiB),
/// mem_fraction_static 0.88. Reported: "max_total_num_tokens=444500", K and V 27.13 GB each.
/// Source: the server log printed in SGLang's documentation page "Quick Start: Sending
/// Requests" (docs.sglang.ai/start/send_request.html, built 2025-01-23).
#[test]
fn accuracy_sglang_llama8b_h100() {
    let m = fixture("Llama-3.1-8B-Instruct");
    let mut i = MemoryInputs::new(EngineRule::Sglang, 1, parse_bytes("81559MiB").unwrap_or(0));
    i.mem_fraction = Some(0.88);
    let e = estimate(&m, &i);
    assert!(
        within(e.kv_capacity_tokens as f64, 444_500.0, 0.10),
        "{}",
        e.kv_capacity_tokens
    );
    println!("sglang-docs: {} tokens vs 444500", e.kv_capacity_tokens);
}

/// SGLang, DeepSeek-R1 (FP8 weights, BF16 MLA cache), TP8 on H200 (143771 MiB),
/// mem_fraction_static 0.82: observed about 509k KV tokens.
/// Source: ai-dynamo/aisimulate#263 ("fix: correct SGLang static KV pool estimation").
#[test]
fn accuracy_sglang_deepseek_r1_h200_tp8() {
    let m = fixture("DeepSeek-R1");
    let mut i = MemoryInputs::new(EngineRule::Sglang, 8, parse_bytes("143771MiB").unwrap_or(0));
    i.mem_fraction = Some(0.82);
    let e = estimate(&m, &i);
    assert!(
        within(e.kv_capacity_tokens as f64, 509_000.0, 0.10),
        "{}",
        e.kv_capacity_tokens
    );
    println!("aisimulate-263: {} tokens vs ~509000", e.kv_capacity_tokens);
}

/// vLLM (V1), Llama-3.1-8B-Instruct bf16 on an H100 (torch total 79.11 GiB), utilization 0.90,
/// 8192 batched tokens. Reported: weights 14.99 GiB, non-torch 0.35 GiB, activation peak
/// 1.24 GiB, so KV = 71.20 - 14.99 - 0.35 - 1.24 = 54.62 GiB.
/// Source: vLLM's "Memory profiling takes ..." start-up line as quoted in public notes.
#[test]
fn accuracy_vllm_v1_llama8b_h100() {
    let m = fixture("Llama-3.1-8B-Instruct");
    let mut i = MemoryInputs::new(EngineRule::Vllm, 1, parse_bytes("79.11GiB").unwrap_or(0));
    i.mem_fraction = Some(0.90);
    let e = estimate(&m, &i);
    let kv = e.kv_pool_bytes_per_gpu as f64 / GIB_U as f64;
    assert!(within(kv, 54.62, 0.10), "{kv}");
    println!("vllm-v1-h100: KV {kv:.2} GiB vs 54.62 GiB");
}

/// The Qwen3.6-27B-shaped config shipped with the examples (48 GDN layers).
fn qwen36_27b() -> ModelInfo {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/models/Qwen3.6-27B"
    ));
    load_model_info(dir).unwrap_or_else(|e| panic!("{e}"))
}

/// One TP1 server of the main campaign on a 96 GiB GPU: DDTree with budget
/// 16 (17 verified tokens), on one-token pages without overlap scheduling.
fn ddtree_b16(version: &str, fraction: f64, running: u32) -> MemoryInputs {
    let mut i = MemoryInputs::new(EngineRule::Sglang, 1, 96 * GIB_U);
    i.mem_fraction = Some(fraction);
    i.max_running_requests = Some(running);
    i.speculative_num_draft_tokens = Some(17);
    i.engine_version = Some(version.to_string());
    let args: Vec<String> = ["--disable-overlap-schedule", "--page-size", "1"]
        .map(String::from)
        .to_vec();
    i.apply_engine_args(&args).unwrap();
    i
}

#[test]
fn sglang_0_5_12_gives_fewer_state_slots_to_more_running_requests_under_verification() {
    let m = qwen36_27b();
    // 48 GDN layers x (48 x 128 x 128 float32 SSM + 10240 x 3 bf16 conv).
    assert_eq!(
        state_bytes_per_request_per_gpu(&m, 1, EngineRule::Sglang),
        48 * (48 * 128 * 128 * 4 + 10_240 * 3 * 2)
    );
    let at4 = estimate(&m, &ddtree_b16("0.5.12", 0.685, 4));
    let at8 = estimate(&m, &ddtree_b16("0.5.12", 0.685, 8));
    // Verification state for every running request comes first: four more
    // requests take 4 x 17 states, 0.9/1.9 of which were slots.
    assert_eq!(at4.state_slots, Some(23), "{at4:#?}");
    assert_eq!(at8.state_slots, Some(0), "{at8:#?}");
    assert!(at4.runnable(), "{:?}", at4.verdicts);
    let refusal = at8
        .verdicts
        .iter()
        .find(|v| v.level == Level::Error && v.reason.contains("recurrent-state slots"))
        .unwrap_or_else(|| panic!("{:?}", at8.verdicts));
    assert!(
        refusal.reason.contains("SGLang refuses to start")
            && refusal.reason.contains("--max-running-requests 5 fits")
            && refusal
                .reason
                .contains("8 draft tokens per step fit 8 running requests"),
        "{}",
        refusal.reason
    );
    assert!(render_table(&at4).contains("  intermediate SSM states"));
    // Without speculation the slots do not depend on running requests.
    for version in ["0.5.12", "0.5.23"] {
        let plain = |running| {
            let mut i = ddtree_b16(version, 0.685, running);
            i.speculative_num_draft_tokens = None;
            estimate(&m, &i).state_slots
        };
        assert_eq!(plain(4), plain(8), "{version}");
        assert!(plain(4).unwrap_or(0) > 23, "{version}");
    }
}

#[test]
fn the_current_release_solves_slots_and_verification_state_together() {
    let m = qwen36_27b();
    let at4 = estimate(&m, &ddtree_b16("0.5.23", 0.685, 4));
    let at8 = estimate(&m, &ddtree_b16("0.5.23", 0.685, 8));
    // K = (B - p(1 + D)) / (p (1 + D/3)): independent of running requests;
    // the server then runs at most K / 3.
    assert_eq!(at4.state_slots, at8.state_slots);
    let k = at4.state_slots.unwrap_or(0);
    assert!(k > 0, "{at4:#?}");
    assert_eq!(at4.state_slots_per_request, Some(3));
    assert_eq!(at8.max_running_requests, (k / 3).min(8));
    // Verification keeps (min(running, K/3) + 1) x 17 intermediate states,
    // split into SSM states and convolution windows as the state is.
    let p = 48 * (48 * 128 * 128 * 4 + 10_240 * 3 * 2);
    let n = (4u64.min(k / 3) + 1) * 17;
    assert_eq!(
        at4.intermediate_ssm_bytes_per_gpu + at4.intermediate_conv_bytes_per_gpu,
        n * p
    );
    assert_eq!(
        at4.intermediate_ssm_bytes_per_gpu,
        n * 48 * 48 * 128 * 128 * 4
    );
    // With the overlap scheduler on, `auto` keeps the extra buffer: 5 slots each.
    let mut overlap = ddtree_b16("0.5.23", 0.685, 4);
    overlap.mamba.disable_overlap_schedule = false;
    overlap.mamba.page_size = None;
    assert_eq!(estimate(&m, &overlap).state_slots_per_request, Some(5));
    // No version stated: the current release.
    let mut none = ddtree_b16("0.5.23", 0.685, 4);
    none.engine_version = None;
    assert_eq!(estimate(&m, &none).state_slots, at4.state_slots);
}

#[test]
fn the_engines_own_flags_change_the_estimate_as_generated_ones_do() {
    let m = qwen36_27b();
    let base = ddtree_b16("0.5.23", 0.685, 4);
    let mut fixed = base.clone();
    let args: Vec<String> = ["--max-mamba-cache-size", "8"].map(String::from).to_vec();
    fixed.apply_engine_args(&args).unwrap();
    let e = estimate(&m, &fixed);
    assert_eq!(e.state_slots, Some(8));
    assert_eq!(e.max_running_requests, 2, "8 slots / 3 per request");
    // Eight slots and one padding slot, and verification state for
    // min(4, 8 / 3) + 1 requests, out of the same memory.
    let p = 48 * (48 * 128 * 128 * 4 + 10_240 * 3 * 2);
    assert_eq!(e.state_pool_bytes_per_gpu, (9 + 3 * 17) * p);
    let b = estimate(&m, &base);
    assert_ne!(b.state_slots, Some(8));
    assert!(
        (e.state_pool_bytes_per_gpu + e.kv_pool_bytes_per_gpu)
            .abs_diff(b.state_pool_bytes_per_gpu + b.kv_pool_bytes_per_gpu)
            < 4
    );
    // `--flag=value`, the last one winning, and a bfloat16 SSM state halving it.
    let mut more = base.clone();
    let args: Vec<String> = [
        "--mem-fraction-static=0.5",
        "--mem-fraction-static",
        "0.7",
        "--mamba-ssm-dtype",
        "bfloat16",
        "--mamba-full-memory-ratio",
        "0.5",
    ]
    .map(String::from)
    .to_vec();
    more.apply_engine_args(&args).unwrap();
    assert_eq!(more.mem_fraction, Some(0.7));
    let e = estimate(&m, &more);
    assert_eq!(
        e.state_bytes_per_request_per_gpu,
        48 * (48 * 128 * 128 * 2 + 10_240 * 3 * 2)
    );
    // Values that mean nothing are refused by flag.
    for bad in [
        vec!["--max-mamba-cache-size", "lots"],
        vec!["--mamba-ssm-dtype", "int4"],
        vec!["--mamba-full-memory-ratio", "0"],
        vec!["--max-running-requests"],
    ] {
        let args: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
        let err = base.clone().apply_engine_args(&args).unwrap_err();
        assert!(err.contains(bad[0]), "{err}");
    }
}

#[test]
fn sglang_releases_map_to_the_state_solve_they_shipped() {
    use mamba::Solve;
    for (v, want) in [
        ("0.5.5", Solve::SlotWithDrafts),
        ("0.4.10", Solve::SlotWithDrafts),
        ("0.5.7", Solve::ReserveFirst),
        ("v0.5.12.post1", Solve::ReserveFirst),
        ("0.5.13", Solve::Joint),
        ("0.5.16", Solve::Joint),
        ("0.5.17", Solve::JointPadded),
        ("0.5.23", Solve::JointPadded),
        ("main", Solve::JointPadded),
    ] {
        assert_eq!(Solve::of(Some(v)).0, want, "{v}");
    }
    assert!(Solve::of(Some("main")).1.contains("not a release number"));
}

#[test]
fn a_dflash_drafter_adds_its_weights_and_kv_and_leaves_less_kv_room() {
    let m = qwen36_27b();
    let d = load_model_info(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/models/Qwen3.6-27B-DFlash"
    )))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.target_hidden_inputs, Some(5));
    let mut i = MemoryInputs::new(EngineRule::Sglang, 1, 96 * GIB_U);
    i.mem_fraction = Some(0.85);
    let ar = estimate(&m, &i);
    i.draft = Some(d.clone());
    i.speculative_num_draft_tokens = Some(16);
    let dflash = estimate(&m, &i);
    // No embedding or LM head of its own: 5 layers and the fusing projection.
    let layer: u64 = 5120 * 4096 + 2 * 5120 * 1024 + 4096 * 5120 + 3 * 5120 * 17408;
    let norms = 5 * 2 * 5120 + 5120;
    let params = 5 * layer + 5 * 5120 * 5120;
    assert!(
        within(
            dflash.draft_weights_bytes_per_gpu as f64,
            (2 * params) as f64,
            0.01
        ),
        "{} vs {} (+{norms} norms)",
        dflash.draft_weights_bytes_per_gpu,
        2 * params
    );
    assert_eq!(dflash.weights_bytes_per_gpu, ar.weights_bytes_per_gpu);
    assert!(dflash.kv_capacity_tokens < ar.kv_capacity_tokens);
    // TP2 splits it.
    i.layout.tp = 2;
    let tp2 = estimate(&m, &i);
    assert!(within(
        tp2.draft_weights_bytes_per_gpu as f64,
        dflash.draft_weights_bytes_per_gpu as f64 / 2.0,
        0.01
    ));
    // A size instead of a config, split the same way.
    i.draft = None;
    i.draft_weights_bytes = Some(4 * GIB_U);
    assert_eq!(estimate(&m, &i).draft_weights_bytes_per_gpu, 2 * GIB_U);
}

#[test]
fn a_tp_refusal_lists_the_sizes_that_split_every_head_count() {
    let m = qwen36_27b();
    let mut i = MemoryInputs::new(EngineRule::Sglang, 8, 96 * GIB_U);
    i.gpus_available = Some(7);
    let e = estimate(&m, &i);
    let r = e
        .verdicts
        .iter()
        .find(|v| v.reason.starts_with("TP8 needs 8 GPUs"))
        .unwrap_or_else(|| panic!("{:?}", e.verdicts));
    assert!(
        r.reason.contains("use TP 1, 2 or 4 (the sizes up to 7 that split 24 attention heads, 4 KV heads, 16 key and 48 value linear-attention heads)"),
        "{}",
        r.reason
    );
    i.layout.tp = 3;
    i.gpus_available = None;
    let e = estimate(&m, &i);
    assert!(
        e.verdicts
            .iter()
            .any(|v| v.level == Level::Error
                && v.reason.contains("TP3 can neither split nor replicate")),
        "{:?}",
        e.verdicts
    );
}

use crate::engine::layout::layout;

#[test]
fn sglang_attention_dp_keeps_whole_attention_per_gpu_and_multiplies_the_kv_pools() {
    let r1 = fixture("DeepSeek-R1");
    let mut i = MemoryInputs::new(EngineRule::Sglang, 8, 141 * GIB_U);
    let tp8 = estimate(&r1, &i);
    i.layout = layout(8, 1, 8, 8, 1);
    let adp = estimate(&r1, &i);
    // Experts and dense MLP stay split eight ways; each attention group of
    // one rank holds the whole attention (its MLA projections unsplit), so
    // weights per GPU grow and the pool per rank shrinks...
    assert!(adp.weights_bytes_per_gpu > tp8.weights_bytes_per_gpu);
    assert!(adp.kv_capacity_tokens < tp8.kv_capacity_tokens);
    // ...while the MLA latent, replicated on every TP rank, now holds eight
    // ranks' own tokens: about eight times the tokens in all.
    assert_eq!((tp8.data_ranks, adp.data_ranks), (1, 8));
    let total = adp.kv_capacity_tokens * 8;
    assert!(
        total > 6 * tp8.kv_capacity_tokens,
        "{total} vs {}",
        tp8.kv_capacity_tokens
    );
    assert_eq!(
        adp.kv_bytes_per_token_per_gpu,
        tp8.kv_bytes_per_token_per_gpu
    );
    // The server's --max-running-requests is divided among the groups.
    i.max_running_requests = Some(64);
    assert_eq!(estimate(&r1, &i).max_running_requests, 8);
}

#[test]
fn vllm_spreads_experts_over_every_dp_rank_and_replicates_the_rest() {
    let m = fixture("DeepSeek-V2-Lite");
    let moe = m.moe.clone().unwrap();
    let mut i = MemoryInputs::new(EngineRule::Vllm, 1, 80 * GIB_U);
    let one = estimate(&m, &i);
    i.layout = layout(1, 8, 1, 8, 1);
    let dp8 = estimate(&m, &i);
    // The routed experts hold most of the weights; split eight ways they
    // leave about an eighth of themselves, the rest stays whole.
    let experts = f64::from(moe.num_experts)
        * 3.0
        * m.hidden_size as f64
        * moe.expert_intermediate as f64
        * f64::from(m.num_layers - moe.first_dense_layers)
        * 2.0;
    let saved = one.weights_bytes_per_gpu as f64 - dp8.weights_bytes_per_gpu as f64;
    assert!(
        within(saved, experts * 7.0 / 8.0, 0.03),
        "{saved} vs {experts}"
    );
    assert_eq!(dp8.data_ranks, 8);
    assert!(dp8.kv_capacity_tokens > one.kv_capacity_tokens);
    // vLLM's max-num-seqs is per engine: each replica takes it whole.
    i.max_running_requests = Some(64);
    assert_eq!(estimate(&m, &i).max_running_requests, 64);
}

#[test]
fn pipeline_stages_hold_their_share_of_layers_and_kv() {
    let m = fixture("Llama-3.1-8B-Instruct");
    let mut i = MemoryInputs::new(EngineRule::Vllm, 2, 80 * GIB_U);
    let tp2 = estimate(&m, &i);
    i.layout = layout(2, 1, 1, 1, 2);
    let pp2 = estimate(&m, &i);
    assert_eq!(
        pp2.kv_bytes_per_token_per_gpu * 2,
        tp2.kv_bytes_per_token_per_gpu
    );
    // 32 layers halve; one of the two vocabulary matrices stays per stage.
    let vocab = (m.vocab_size * m.hidden_size) as f64 * 2.0 / 2.0;
    let expected = (tp2.weights_bytes_per_gpu as f64 - 2.0 * vocab) / 2.0 + vocab;
    assert!(
        within(pp2.weights_bytes_per_gpu as f64, expected, 0.02),
        "{}",
        pp2.weights_bytes_per_gpu
    );
    assert!(pp2.kv_capacity_tokens > 2 * tp2.kv_capacity_tokens);
    // 32 layers into 3 stages: the fullest holds 11, and the plan says so.
    i.layout = layout(2, 1, 1, 1, 3);
    let e = estimate(&m, &i);
    assert!(
        e.verdicts.iter().any(|v| v.level == Level::Warn
            && v.reason
                .contains("do not split evenly into 3 stages: the fullest holds 11")),
        "{:?}",
        e.verdicts
    );
    i.layout = layout(1, 1, 1, 1, 40);
    assert!(estimate(&m, &i).verdicts.iter().any(
        |v| v.level == Level::Error && v.reason.contains("pp 40 exceeds the model's 32 layers")
    ));
}

#[test]
fn expert_parallel_sizes_that_do_not_split_the_experts_are_refused_with_the_ones_that_do() {
    let m = fixture("DeepSeek-V2-Lite");
    let mut i = MemoryInputs::new(EngineRule::Vllm, 3, 80 * GIB_U);
    i.layout = layout(3, 1, 1, 3, 1);
    let e = estimate(&m, &i);
    let r = e
        .verdicts
        .iter()
        .find(|v| v.reason.contains("routed experts"))
        .unwrap_or_else(|| panic!("{:?}", e.verdicts));
    assert_eq!(r.level, Level::Error);
    assert!(
        r.reason
            .contains("64 routed experts, which EP3 cannot split"),
        "{}",
        r.reason
    );
    let dense = fixture("Llama-3.1-8B-Instruct");
    let mut i = MemoryInputs::new(EngineRule::Sglang, 8, 80 * GIB_U);
    i.layout = layout(8, 1, 1, 8, 1);
    assert!(estimate(&dense, &i)
        .verdicts
        .iter()
        .any(|v| v.level == Level::Error && v.reason.contains("no routed experts")));
}
