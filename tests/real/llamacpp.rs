//! `servebench bench` against the real llama.cpp server with the real
//! SmolLM2-135M model (installed by scripts/setup-test-env.sh).

use crate::common::{bench_closed, real_engine_turn_async, start_llama};
use servebench::failure::FailureClass;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_llamacpp_streams_exact_lengths_and_classifies_overflow() {
    let _turn = real_engine_turn_async().await;
    // Two slots of 512 tokens each.
    let server = start_llama(&["-c", "1024", "-np", "2"]);
    let url = server.url();

    let (r, ok) = bench_closed(&url, 2, 4, 16, &["--input-len", "40", "--ignore-eos"]).await;
    assert!(ok, "{:?}", r.levels[0].failures_by_class);
    let l = &r.levels[0];
    assert_eq!(l.completed, 4);
    for req in &l.requests {
        assert_eq!(
            req.output_tokens,
            Some(16),
            "ignore_eos must force the asked length"
        );
        assert!(req.input_tokens.unwrap() >= 40);
        let ttft = req.ttft_ms.unwrap();
        assert!(ttft > 0.0 && ttft < req.e2e_ms.unwrap());
        assert_eq!(req.chunks.iter().map(|c| c.1 as u64).sum::<u64>(), 16);
    }
    assert!(l.latency.itl_ms.unwrap().p50 > 0.0);
    assert!(l.output_throughput_tok_s > 0.0);

    // Chat: the role-only first chunk must not count as the first token.
    let (r, ok) = bench_closed(&url, 1, 2, 8, &["--api", "chat", "--ignore-eos"]).await;
    assert!(ok);
    for req in &r.levels[0].requests {
        assert_eq!(req.chunks.len(), 8);
        assert_eq!(req.output_tokens, Some(8));
    }

    // 1000 words are well over a 512-token slot.
    let (r, ok) = bench_closed(&url, 1, 2, 8, &["--input-len", "1000"]).await;
    assert!(!ok);
    let l = &r.levels[0];
    assert_eq!(
        l.failures_by_class.get(&FailureClass::ContextOverflow),
        Some(&2)
    );
    let f = l.requests[0].failure.as_ref().unwrap();
    assert_eq!(f.status, Some(400));
    assert!(
        f.detail.contains("exceeds the available context size"),
        "{}",
        f.detail
    );
    assert!(l.latency.ttft_ms.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_llamacpp_mid_run_yields_connection_or_protocol_failures() {
    let _turn = real_engine_turn_async().await;
    let mut server = Some(start_llama(&["-c", "1024", "-np", "1"]));
    let url = server.as_ref().unwrap().url();
    let port = server.as_ref().unwrap().port;
    // Killed as soon as the server is decoding a request, whatever the
    // machine's speed: the trigger is the server's own state, not a clock.
    let killer = tokio::task::spawn_blocking(move || {
        crate::common::wait_until(
            std::time::Duration::from_secs(120),
            "llama.cpp to be decoding a measured request",
            // The prompt-template probe decodes one token; 20 decode steps
            // mean a 200-token request is streaming.
            || {
                crate::common::prometheus_value(port, "llamacpp:n_decode_total").unwrap_or(0.0)
                    >= 20.0
            },
        );
        drop(server.take());
    });
    let (r, ok) = bench_closed(
        &url,
        1,
        6,
        200,
        &["--ignore-eos", "--request-timeout", "20s"],
    )
    .await;
    killer.await.unwrap();
    assert!(!ok);
    let l = &r.levels[0];
    assert!(l.failed >= 1);
    for req in l.requests.iter().filter(|q| !q.is_ok()) {
        let class = req.failure.as_ref().unwrap().class.as_str();
        assert!(["protocol", "connection"].contains(&class), "{class}");
    }
    assert_eq!(l.latency.ttft_ms.map(|s| s.count).unwrap_or(0), l.completed);
}
