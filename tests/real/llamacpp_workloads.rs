//! Workloads on the real llama.cpp server: prompts exactly as long as asked
//! by the server's own count, multi-turn sessions that hit its prefix cache,
//! and a trace slice replayed at its scaled lengths.

use crate::common::{bench, bench_closed, real_engine_turn_async, start_llama, trace_fixture};
use crate::workloads::scaled_mooncake;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_3000_token_prompts_on_real_llamacpp_completions_and_chat() {
    let _turn = real_engine_turn_async().await;
    let server = start_llama(&["-c", "4096", "-np", "1"]);
    let url = server.url();
    // Counted by the server's own /tokenize, corrected for what it adds around a prompt.
    for api in ["completions", "chat"] {
        let (r, ok) = bench_closed(
            &url,
            1,
            1,
            1,
            &[
                "--api",
                api,
                "--input-len",
                "3000",
                "--request-timeout",
                "180s",
            ],
        )
        .await;
        assert!(ok, "{api}: {:?}", r.levels[0].failures_by_class);
        let l = &r.levels[0];
        let src = l.source.as_ref().unwrap();
        assert!(src.exact && src.counter.contains("/tokenize"), "{src:?}");
        let got = l.requests[0].input_tokens.unwrap();
        assert!(
            got.abs_diff(3000) <= 2,
            "{api}: server counted {got} prompt tokens for a 3000-token workload"
        );
        assert!(l.client.warnings.iter().all(|w| !w.contains("deviate")));
        if api == "chat" {
            assert!(
                src.template_overhead.unwrap() > 0,
                "the chat template adds tokens: {src:?}"
            );
        }
    }
    // The same with the model's tokenizer.json generated from the GGUF.
    let tokenizer =
        std::env::var("SERVEBENCH_TOKENIZER_JSON").expect("run through scripts/test.sh");
    let (r, ok) = bench_closed(
        &url,
        1,
        1,
        1,
        &[
            "--input-len",
            "3000",
            "--tokenizer",
            &tokenizer,
            "--request-timeout",
            "180s",
        ],
    )
    .await;
    assert!(ok);
    let l = &r.levels[0];
    assert!(l.source.as_ref().unwrap().counter.contains("tokenizer"));
    assert!(
        l.requests[0].input_tokens.unwrap().abs_diff(3000) <= 2,
        "{:?}",
        l.requests[0].input_tokens
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calculator_sessions_on_real_llamacpp_grow_context_and_hit_the_prefix_cache() {
    let _turn = real_engine_turn_async().await;
    let server = start_llama(&["-c", "4096", "-np", "1"]);
    let url = server.url();
    let (r, ok) = bench_closed(
        &url,
        1,
        1,
        16,
        &[
            "--api",
            "chat",
            "--scenario",
            "calculator",
            "--ignore-eos",
            "--request-timeout",
            "120s",
        ],
    )
    .await;
    assert!(ok, "{:?}", r.levels[0].failures_by_class);
    let reqs = &r.levels[0].requests;
    assert_eq!(reqs.len(), 5, "five turns");
    let mut last_input = 0;
    for (t, q) in reqs.iter().enumerate() {
        assert_eq!((q.session, q.turn), (Some(0), Some(t as u32)));
        assert_eq!(q.output_tokens, Some(16));
        let input = q.input_tokens.unwrap();
        // Each turn carries the previous user turns and the server's real answers.
        assert!(
            input > last_input + 16,
            "turn {t}: context {input} after {last_input}"
        );
        last_input = input;
    }
    let later_cached: u64 = reqs[1..].iter().filter_map(|q| q.cached_tokens).sum();
    assert!(
        later_cached > 0,
        "later turns reuse the cached prefix: {:?}",
        reqs.iter().map(|q| q.cached_tokens).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_llamacpp_replays_a_trace_slice_with_every_prompt_as_long_as_the_scaled_trace_says() {
    let _turn = real_engine_turn_async().await;
    let server = start_llama(&["-c", "2048", "-np", "1"]);
    let path = trace_fixture("mooncake-conversation-400.jsonl");
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .take(16)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Counted with the model's tokenizer.json; the server's usage says
    // whether that was right.
    let tokenizer =
        std::env::var("SERVEBENCH_TOKENIZER_JSON").expect("run through scripts/test.sh");
    let (r, ok) = bench(&[
        "--url",
        &server.url(),
        "--api",
        "chat",
        "--trace",
        path.to_str().unwrap(),
        "--num-requests",
        "16",
        "--length-scale",
        "0.03125",
        "--output-scale",
        "0.02",
        "--max-context",
        "1024",
        "--tokenizer",
        &tokenizer,
        "--request-timeout",
        "120s",
    ])
    .await;
    assert!(ok, "{:?}", r.levels[0].failures_by_class);
    let level = &r.levels[0];
    assert_eq!(level.completed, 16);
    let mut reqs: Vec<_> = level.requests.iter().collect();
    reqs.sort_by_key(|q| q.index.unwrap());
    // Line 12 (5,448 tokens, 2,724 at 1/32) is clamped to the context.
    assert_eq!(
        scaled_mooncake(&rows[11], 32, 1024).0 + scaled_mooncake(&rows[11], 32, 1024).1,
        1024
    );
    for (q, row) in reqs.iter().zip(&rows) {
        let (input, output) = scaled_mooncake(row, 32, 1024);
        // As llama.cpp's own usage counts the prompt, chat template included.
        assert_eq!(q.input_tokens, Some(input), "line {}", q.index.unwrap() + 1);
        assert_eq!(q.output_tokens, Some(output));
        assert!((q.scheduled_ms - row["timestamp"].as_f64().unwrap()).abs() < 1e-6);
    }
    let lag = level.client.dispatch_lag_ms.unwrap();
    eprintln!(
        "replay dispatch lag: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        lag.p50, lag.p99, lag.max
    );
    // Prefix reuse, in llama.cpp's own count (timings.cache_n): every
    // request after the first opens with the conversations' shared block 0
    // (16 tokens at 1/32) after the chat template's head, and the slot
    // serves it from its cache.
    for q in &reqs[1..] {
        assert!(
            q.cached_tokens.unwrap() >= 16,
            "request {}: {:?} cached",
            q.index.unwrap(),
            q.cached_tokens
        );
    }
    let p = level.predicted_reuse.expect("a trace with block ids");
    let measured = p.reported_cached_tokens.unwrap() as f64 / p.prompt_tokens as f64;
    eprintln!(
        "prefix cache: predicted {:.1} %, llama.cpp served {:.1} % ({} requests)",
        p.hit_rate * 100.0,
        measured * 100.0,
        p.requests
    );
    assert_eq!(p.requests, 16);
    assert!(
        ((p.hit_rate - measured) * 100.0).abs()
            <= servebench::report::prefix_cache::AGREEMENT_POINTS,
        "predicted {:.3}, measured {measured:.3}",
        p.hit_rate
    );
}

/// llama.cpp with `--jinja` and a ChatML template that renders tools (the
/// test model's own template has none, so llama.cpp would drop them).
fn start_llama_with_tools() -> crate::common::LlamaServer {
    let template = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/llamacpp/chatml-tools.jinja"
    );
    start_llama(&[
        "-c",
        "4096",
        "-np",
        "1",
        "--jinja",
        "--chat-template-file",
        template,
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_llamacpp_schema_answers_hold_their_schema_and_are_judged_by_value() {
    let _turn = real_engine_turn_async().await;
    let server = start_llama_with_tools();
    // The same prompts with and without the schema, in one level.
    let (r, _) = bench_closed(
        &server.url(),
        1,
        4,
        160,
        &[
            "--api",
            "chat",
            "--prompt-kind",
            "json-extraction,json-schema",
            "--request-timeout",
            "120s",
        ],
    )
    .await;
    let level = &r.levels[0];
    let schema: Vec<_> = level
        .requests
        .iter()
        .filter(|q| q.label.as_deref() == Some("json-schema"))
        .collect();
    assert_eq!(schema.len(), 2);
    for q in &schema {
        assert!(q.is_ok(), "{q:?}");
        // llama.cpp's grammar holds the answer to its schema: a failed
        // answer names a wrong value, unless the output budget cut it off.
        let verdict = q.answer_check.expect("every schema answer is judged");
        let why = q.answer_reason.clone().unwrap_or_default();
        let cut = q.output_tokens == Some(160);
        assert!(
            verdict || why.starts_with('$') || cut,
            "{why} ({:?} tokens)",
            q.output_tokens
        );
        assert!(!why.contains("breaks its schema"), "{why}");
        // Not forced to its length: it ends where the grammar does.
        assert!(q.requested_output_tokens == Some(160));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_llamacpp_agent_session_offers_tools_and_judges_the_reply() {
    let _turn = real_engine_turn_async().await;
    let server = start_llama_with_tools();
    let (r, _) = bench_closed(
        &server.url(),
        1,
        1,
        48,
        &[
            "--api",
            "chat",
            "--scenario",
            "calculator-agent",
            "--request-timeout",
            "120s",
        ],
    )
    .await;
    let level = &r.levels[0];
    let first = &level.requests[0];
    assert!(first.is_ok(), "{first:?}");
    // The tools reach the model through the template (the prompt holds
    // their definitions), and the first turn's reply is judged as a call
    // of `calculator` with its arguments.
    assert!(first.input_tokens.unwrap() > 150, "{first:?}");
    let verdict = first.answer_check.expect("the tool turn is judged");
    let sessions = level.sessions.expect("a session level counts its sessions");
    assert_eq!(sessions.sessions, 1);
    if verdict {
        assert_eq!(sessions.derailed, 0);
        assert!(sessions.turns > 1, "{sessions:?}");
    } else {
        // A model too small to call tools answers in words: the session
        // derails at its first turn, with why, and is counted.
        let why = first.answer_reason.clone().unwrap();
        assert!(why.starts_with("expected a call of `calculator`"), "{why}");
        assert_eq!((sessions.turns, sessions.derailed), (1, 1));
    }
}
