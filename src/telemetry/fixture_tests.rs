//! Tests against recorded engine output in `tests/fixtures/telemetry/`.
//!
//! Each fixture's first line names the issue thread or document it was copied
//! from; line numbers asserted here count that header line.

use super::engine_metrics::common_from_delta;
use super::logscan::{classify_failure, scan_log, FailureKind};
use super::prometheus::{delta, parse, MetricType, Scrape};
use super::TelemetryEngine;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../tests/fixtures/telemetry/", $name))
    };
}

fn approx(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn every_fixture_names_its_source() {
    let all = [
        fixture!("sglang_startup.log"),
        fixture!("sglang_server_summary.log"),
        fixture!("sglang_hybrid_startup.log"),
        fixture!("sglang_decode_period.log"),
        fixture!("sglang_decode_comma.log"),
        fixture!("sglang_decode_hybrid_spec.log"),
        fixture!("vllm_startup.log"),
        fixture!("vllm_startup_args.log"),
        fixture!("vllm_cpu_startup_0.32.log"),
        fixture!("vllm_crash_cuda.log"),
        fixture!("vllm_crash_traceback.log"),
        fixture!("llamacpp_startup_2024.log"),
        fixture!("llamacpp_startup_mtp.log"),
        fixture!("llamacpp_context_2025.log"),
        fixture!("llamacpp_ready_2026.log"),
        fixture!("vllm_metrics_v1.prom"),
        fixture!("vllm_metrics_v0.prom"),
        fixture!("sglang_metrics.prom"),
        fixture!("sglang_metrics_counters.prom"),
        fixture!("llamacpp_metrics.prom"),
        fixture!("llamacpp_metrics_ik.prom"),
        fixture!("sim_crash.log"),
        fixture!("nvidia_smi_samples.csv"),
    ];
    for text in all {
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.starts_with("# source: https://")
                || first.starts_with("# Constructed")
                || first.starts_with("# Recorded from a real launch"),
            "{first}"
        );
    }
}

#[test]
fn sglang_startup() {
    let f = scan_log(TelemetryEngine::Sglang, fixture!("sglang_startup.log"));
    assert_eq!(f.kv_cache_tokens, Some(834_615));
    assert!(approx(f.k_cache_gib, 54.12));
    assert!(approx(f.v_cache_gib, 54.12));
    assert!(approx(f.kv_cache_gib, 108.24));
    assert!(approx(f.weights_gib, 8.13));
    assert!(f.errors.is_empty());
    assert!(f.hybrid_state.is_none());

    let s = scan_log(
        TelemetryEngine::Sglang,
        fixture!("sglang_server_summary.log"),
    );
    assert_eq!(s.max_total_num_tokens, Some(2_086_558));
    assert_eq!(s.max_running_requests, Some(33));
    assert_eq!(s.context_length, Some(256_000));
}

#[test]
fn sglang_hybrid_startup() {
    let f = scan_log(
        TelemetryEngine::Sglang,
        fixture!("sglang_hybrid_startup.log"),
    );
    let h = f.hybrid_state.expect("mamba cache lines");
    assert_eq!(h.max_mamba_cache_size, Some(82));
    assert!(approx(h.conv_state_gib, 0.13));
    assert!(approx(h.ssm_state_gib, 7.29));
    assert_eq!(f.kv_cache_tokens, Some(580_364));
    assert!(approx(f.kv_cache_gib, 8.30));
    assert_eq!(f.max_total_num_tokens, Some(580_364));
    assert_eq!(f.max_running_requests, Some(1));
    assert_eq!(f.context_length, Some(8192));
    assert!(approx(f.weights_gib, 3.76));
    assert_eq!(f.lines_scanned, 14);
}

#[test]
fn sglang_decode_batches_in_both_punctuations() {
    let period = scan_log(
        TelemetryEngine::Sglang,
        fixture!("sglang_decode_period.log"),
    );
    assert_eq!(period.decode.count, 10);
    assert_eq!(period.decode.max_running_requests, Some(2));
    let last = period.decode.last.as_ref().unwrap();
    assert_eq!(last.line_number, 11);
    assert_eq!(last.num_tokens, Some(4142));
    assert!(approx(last.gen_throughput, 239.00));
    let mean =
        (447.31 + 405.38 + 446.97 + 333.97 + 238.27 + 238.71 + 212.82 + 238.82 + 237.51 + 239.00)
            / 10.0;
    assert!(approx(period.decode.mean_gen_throughput, mean));

    let comma = scan_log(TelemetryEngine::Sglang, fixture!("sglang_decode_comma.log"));
    assert_eq!(
        comma.decode.count, 1,
        "prefill lines are not decode batches"
    );
    let b = comma.decode.last.as_ref().unwrap();
    assert_eq!(b.running_requests, Some(32));
    assert!(approx(b.token_usage, 0.08));
    assert_eq!(b.cuda_graph, Some(true));
    assert!(approx(b.gen_throughput, 1635.11));
    assert_eq!(b.queue_requests, Some(0));

    let hybrid = scan_log(
        TelemetryEngine::Sglang,
        fixture!("sglang_decode_hybrid_spec.log"),
    );
    assert_eq!(hybrid.decode.count, 1);
    let b = hybrid.decode.last.as_ref().unwrap();
    assert_eq!(b.running_requests, Some(40));
    assert_eq!(b.num_tokens, Some(350_592));
    assert_eq!(b.token_usage, None);
    assert!(approx(b.full_token_usage, 0.74));
    assert!(approx(b.mamba_usage, 0.80));
    assert!(approx(b.accept_length, 3.13));
    assert!(approx(b.accept_rate, 0.71));
    assert!(approx(hybrid.decode.mean_accept_length, 3.13));
    assert!(approx(hybrid.decode.max_token_usage, 0.74));
}

#[test]
fn sglang_ready_line() {
    let log = "[2026-12-02 10:00:00] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)\n\
               [2026-12-02 10:00:09] The server is fired up and ready to roll!\n";
    let f = scan_log(TelemetryEngine::Sglang, log);
    let ready = f.ready.unwrap();
    assert_eq!(ready.line_number, 2);
    assert_eq!(ready.text, "The server is fired up and ready to roll!");
}

#[test]
fn vllm_v1_startup() {
    let f = scan_log(TelemetryEngine::Vllm, fixture!("vllm_startup.log"));
    assert_eq!(f.kv_cache_tokens, Some(75_840));
    assert!(approx(f.kv_cache_gib, 2.30));
    let mc = f.max_concurrency.unwrap();
    assert_eq!(mc.tokens_per_request, 120_000);
    assert!((mc.factor - 2.48).abs() < 1e-9);
    assert_eq!(f.context_length, Some(120_000));
    assert!(f.errors.is_empty(), "{:?}", f.errors);

    let args = scan_log(TelemetryEngine::Vllm, fixture!("vllm_startup_args.log"));
    assert_eq!(args.context_length, Some(32_768));
    assert!(approx(args.weights_gib, 12.66));
    assert_eq!(args.ready, None);
}

#[test]
fn vllm_cpu_build_startup_from_a_real_launch() {
    let f = scan_log(TelemetryEngine::Vllm, fixture!("vllm_cpu_startup_0.32.log"));
    assert_eq!(f.kv_cache_tokens, Some(46_592));
    let mc = f.max_concurrency.unwrap();
    assert_eq!(mc.tokens_per_request, 2048);
    assert!((mc.factor - 22.75).abs() < 1e-9);
    assert_eq!(f.context_length, Some(2048));
    assert!(approx(f.kv_cache_gib, 1.0));
    assert!(approx(f.weights_gib, 0.25));
    assert_eq!(f.ready.unwrap().line_number, 36);
    // Its many WARNING lines (no Triton, no tcmalloc) are not errors.
    assert!(f.errors.is_empty(), "{:?}", f.errors);
}

#[test]
fn vllm_stats_and_ready_lines() {
    let log = "\
(APIServer pid=1) INFO 08-17 19:55:36 [loggers.py:310] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 58.7 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%
(APIServer pid=1) INFO 08-17 19:55:36 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.83, Accepted throughput: 37.5 tokens/s, Drafted throughput: 60.0 tokens/s, Accepted: 375 tokens, Drafted: 600 tokens, Per-position acceptance rate: 0.780, 0.600, 0.450, Avg Draft acceptance rate: 62.5%
(APIServer pid=1) INFO:     Application startup complete.
";
    let f = scan_log(TelemetryEngine::Vllm, log);
    let b = f.decode.last.as_ref().unwrap();
    assert_eq!(b.running_requests, Some(1));
    assert_eq!(b.queue_requests, Some(0));
    assert!(approx(b.gen_throughput, 58.7));
    assert!(approx(b.token_usage, 0.004));
    assert!(approx(f.decode.mean_accept_length, 2.83));
    assert_eq!(f.ready.unwrap().line_number, 3);
}

#[test]
fn vllm_crash_with_cuda_error() {
    let text = fixture!("vllm_crash_cuda.log");
    let f = scan_log(TelemetryEngine::Vllm, text);
    assert!(f.errors.iter().any(|e| e.kind == FailureKind::CudaError
        && e.text == "what():  CUDA error: an illegal memory access was encountered"));
    let cause = classify_failure(text).unwrap();
    assert_eq!(cause.kind, FailureKind::CudaError);
    assert_eq!(cause.line_number, 11);
    assert_eq!(
        cause.evidence,
        "what():  CUDA error: an illegal memory access was encountered"
    );

    let tb = fixture!("vllm_crash_traceback.log");
    let cause = classify_failure(tb).unwrap();
    assert_eq!(cause.kind, FailureKind::CudaError);
    assert_eq!(
        cause.evidence,
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    );
    assert_eq!(cause.line_number, 2);
    let f = scan_log(TelemetryEngine::Vllm, tb);
    assert!(f
        .errors
        .iter()
        .any(|e| e.kind == FailureKind::PythonException && e.line_number == 10));
}

#[test]
fn llamacpp_startups() {
    let old = scan_log(
        TelemetryEngine::Llamacpp,
        fixture!("llamacpp_startup_2024.log"),
    );
    assert_eq!(old.kv_cache_tokens, Some(512));
    assert!(approx(old.kv_cache_gib, 160.0 / 1024.0));
    assert!(approx(old.k_cache_gib, 80.0 / 1024.0));
    assert!(approx(old.v_cache_gib, 80.0 / 1024.0));
    assert_eq!(old.context_length, Some(512));
    assert_eq!(old.max_running_requests, Some(1));
    assert_eq!(old.ready.as_ref().unwrap().line_number, 14);

    let mtp = scan_log(
        TelemetryEngine::Llamacpp,
        fixture!("llamacpp_startup_mtp.log"),
    );
    assert_eq!(mtp.max_running_requests, Some(2));
    assert_eq!(mtp.context_length, Some(262_144));
    assert!(mtp.errors.is_empty(), "{:?}", mtp.errors);

    let ctx = scan_log(
        TelemetryEngine::Llamacpp,
        fixture!("llamacpp_context_2025.log"),
    );
    assert_eq!(ctx.kv_cache_tokens, Some(16_384));
    assert_eq!(ctx.context_length, Some(16_384));
    assert!(approx(ctx.kv_cache_gib, 2.0));
    assert!(approx(ctx.k_cache_gib, 1.0));
    assert!(approx(ctx.v_cache_gib, 1.0));

    let ready = scan_log(
        TelemetryEngine::Llamacpp,
        fixture!("llamacpp_ready_2026.log"),
    );
    let line = ready.ready.unwrap();
    assert_eq!(line.line_number, 8);
    assert!(line.text.ends_with("listening on http://127.0.0.1:8080"));
}

#[test]
fn llamacpp_eval_timing_and_draft_rate() {
    let log = "\
[42027] 2.29.118.072 I slot print_timing: id  0 | task 970 | 
[42027] prompt eval time =     751.87 ms /    25 tokens (   30.07 ms per token,    33.25 tokens per second)
[42027]        eval time =   16131.90 ms /   192 tokens (   84.02 ms per token,    11.90 tokens per second)
[42027]       total time =   16883.78 ms /   217 tokens
draft acceptance rate = 0.57143 (   12 accepted /    21 generated)
";
    let f = scan_log(TelemetryEngine::Llamacpp, log);
    assert_eq!(f.decode.count, 1);
    let b = f.decode.last.unwrap();
    assert!(approx(b.gen_throughput, 11.90));
    assert!(approx(b.accept_rate, 0.57143));
}

#[test]
fn sim_log() {
    let text = fixture!("sim_crash.log");
    let f = scan_log(TelemetryEngine::Sim, text);
    assert_eq!(f.kv_cache_tokens, Some(65_536));
    assert_eq!(f.max_running_requests, Some(64));
    assert_eq!(f.context_length, Some(32_768));
    let ready = f.ready.as_ref().unwrap();
    assert_eq!(ready.line_number, 4);
    assert_eq!(ready.text, "sim: ready on 127.0.0.1:39217");
    assert_eq!(f.decode.count, 2);
    assert_eq!(f.decode.max_running_requests, Some(16));
    assert_eq!(f.decode.max_queue_requests, Some(3));
    assert!(approx(f.decode.mean_accept_length, 2.3));
    assert!(f
        .errors
        .iter()
        .any(|e| e.kind == FailureKind::CudaError && e.line_number == 8));
    let cause = classify_failure(text).unwrap();
    assert_eq!(cause.kind, FailureKind::CudaError);
    assert_eq!(
        cause.evidence,
        "RuntimeError: CUDA error: an illegal instruction was encountered"
    );
}

fn scrape(text: &str) -> Scrape {
    parse(text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn real_metrics_samples_parse() {
    let v1 = scrape(fixture!("vllm_metrics_v1.prom"));
    assert_eq!(v1.sample_count(), 5);
    assert_eq!(
        v1.type_of("vllm:prefix_cache_queries_total"),
        Some(MetricType::Counter)
    );
    assert_eq!(v1.sum("vllm:prefix_cache_queries_total"), Some(32.0));
    assert_eq!(
        v1.sum("vllm:kv_cache_usage_perc"),
        Some(9.75010481363281e-06)
    );
    let v0 = scrape(fixture!("vllm_metrics_v0.prom"));
    assert_eq!(v0.sum("vllm:gpu_cache_usage_perc"), Some(0.0));
    assert!(!v0
        .families
        .contains_key("vllm:gpu_prefix_cache_queries_total"));
    assert_eq!(v0.sum("process_max_fds"), Some(1_048_576.0));

    let sg = scrape(fixture!("sglang_metrics.prom"));
    let family = &sg.families["sglang:num_running_reqs"];
    assert_eq!(
        family.help.as_deref(),
        Some("The number of running requests.")
    );
    assert_eq!(family.samples[0].labels["tp_rank"], "0");
    let sgc = scrape(fixture!("sglang_metrics_counters.prom"));
    assert_eq!(sgc.sum("sglang:num_requests_total"), Some(217.0));

    let ll = scrape(fixture!("llamacpp_metrics.prom"));
    assert_eq!(ll.sum("llamacpp:tokens_predicted_total"), Some(673.0));
    let ik = scrape(fixture!("llamacpp_metrics_ik.prom"));
    assert_eq!(
        ik.type_of("llamacpp:prompt_tokens_seconds"),
        Some(MetricType::Gauge)
    );
}

#[test]
fn deltas_between_two_real_llamacpp_scrapes() {
    let before = scrape(fixture!("llamacpp_metrics.prom"));
    let after = scrape(fixture!("llamacpp_metrics_ik.prom"));
    let c = common_from_delta(TelemetryEngine::Llamacpp, &delta(&before, &after));
    assert_eq!(c.prompt_tokens, Some(6886.0 - 143.0));
    assert_eq!(c.generation_tokens, Some(3469.0 - 673.0));
    assert!(c.counter_resets.is_empty());
    // Reversed order looks like a server restart: flagged, never negative.
    let back = common_from_delta(TelemetryEngine::Llamacpp, &delta(&after, &before));
    assert_eq!(back.prompt_tokens, Some(143.0));
    assert_eq!(
        back.counter_resets,
        vec![
            "llamacpp:prompt_tokens_total".to_string(),
            "llamacpp:tokens_predicted_total".to_string()
        ]
    );
}

#[test]
fn sglang_and_vllm_common_fields_from_real_scrapes() {
    let empty = Scrape::default();
    let sg = common_from_delta(
        TelemetryEngine::Sglang,
        &delta(&empty, &scrape(fixture!("sglang_metrics_counters.prom"))),
    );
    assert_eq!(sg.requests_finished, Some(217.0));
    assert_eq!(sg.prefix_cache_hits, Some(2688.0));
    assert_eq!(sg.requests_running, Some(0.0));
    assert_eq!(sg.kv_cache_usage, Some(0.0));
    assert!(sg.spec.is_none());

    let v = common_from_delta(
        TelemetryEngine::Vllm,
        &delta(&empty, &scrape(fixture!("vllm_metrics_v1.prom"))),
    );
    assert_eq!(v.prefix_cache_queries, Some(32.0));
    assert_eq!(v.prefix_cache_hits, Some(0.0));
    assert_eq!(v.kv_cache_usage, Some(9.75010481363281e-06));
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["engine"], "vllm");
}

/// A tiny deterministic generator, so the test needs no extra dependency.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

#[test]
fn random_text_never_panics() {
    const PIECES: [&str; 40] = [
        "Decode batch",
        ".",
        ",",
        ":",
        " ",
        "=",
        "#running-req",
        "accept len",
        "KV Cache is allocated",
        "#tokens",
        "K size",
        "GB",
        "MiB",
        "0.5",
        "1,2",
        "-",
        "e",
        "[",
        "]",
        "(",
        ")",
        "pid=",
        "INFO 01-02 03:04:05 ",
        "Traceback (most recent call last):",
        "  File",
        "Error: x",
        "\n",
        "\"",
        "{",
        "}",
        "le=\"",
        "NaN",
        "+Inf",
        "\u{e9}",
        "\u{1F600}",
        "\t",
        "\n",
        "llama_kv_cache",
        " cells",
        "n_ctx",
    ];
    let mut rng = Lcg(0x5eed);
    for _ in 0..3000 {
        let mut text = String::new();
        for _ in 0..(rng.next() % 24) {
            text.push_str(PIECES[rng.next() % PIECES.len()]);
        }
        let _ = parse(&text);
        let _ = super::gpu::parse_query_output(&text);
        let _ = classify_failure(&text);
        for engine in TelemetryEngine::ALL {
            let _ = scan_log(engine, &text);
        }
    }
}
