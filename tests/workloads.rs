//! Workloads end to end: exact prompt lengths as the real server counts
//! them, multi-turn sessions, datasets, and long-context planning.

mod common;

use common::{bench, fast_sim, start_llama, start_sim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_3000_token_prompts_on_real_llamacpp_completions_and_chat() {
    let server = start_llama(&["-c", "4096", "-np", "1"]);
    let url = server.url();
    // Counted by the server's own /tokenize, corrected for what it adds around a prompt.
    for api in ["completions", "chat"] {
        let (r, ok) = bench(&[
            "--url",
            &url,
            "--api",
            api,
            "--concurrency",
            "1",
            "--num-requests",
            "1",
            "--input-len",
            "3000",
            "--output-len",
            "1",
            "--request-timeout",
            "180s",
        ])
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
    let (r, ok) = bench(&[
        "--url",
        &url,
        "--concurrency",
        "1",
        "--num-requests",
        "1",
        "--input-len",
        "3000",
        "--output-len",
        "1",
        "--tokenizer",
        &tokenizer,
        "--request-timeout",
        "180s",
    ])
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
    let server = start_llama(&["-c", "4096", "-np", "1"]);
    let url = server.url();
    let (r, ok) = bench(&[
        "--url",
        &url,
        "--api",
        "chat",
        "--scenario",
        "calculator",
        "--concurrency",
        "1",
        "--num-requests",
        "1",
        "--output-len",
        "16",
        "--ignore-eos",
        "--request-timeout",
        "120s",
    ])
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
async fn datasets_drive_requests_and_malformed_lines_are_named() {
    let sim = start_sim(fast_sim()).await;
    let url = sim.url();
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/workload/prompts.jsonl"
    );
    let (r, ok) = bench(&[
        "--url",
        &url,
        "--dataset",
        data,
        "--concurrency",
        "2",
        "--num-requests",
        "4",
    ])
    .await;
    assert!(ok);
    let l = &r.levels[0];
    assert_eq!(l.completed, 4);
    assert!(l
        .requests
        .iter()
        .all(|q| q.label.as_deref().unwrap().starts_with("dataset:line")));
    // Without --ignore-eos each record's own output length is asked for.
    let first_line: serde_json::Value = serde_json::from_str(
        include_str!("fixtures/workload/prompts.jsonl")
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert!(l
        .requests
        .iter()
        .any(|q| q.requested_output_tokens == first_line["output_len"].as_u64()));
    // The simulator counts words; the planned length came from its /tokenize.
    assert!(l
        .requests
        .iter()
        .all(|q| q.planned_input_tokens == q.input_tokens));

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"ok\"}\n{\"prompt\": 3}\n").unwrap();
    let out = std::process::Command::new(common::BIN)
        .args([
            "bench",
            "--url",
            &url,
            "--dataset",
            bad.to_str().unwrap(),
            "--concurrency",
            "1",
            "--num-requests",
            "1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("bad.jsonl") && err.contains("line 2"), "{err}");
}

#[test]
fn long_context_runs_30k_and_refuses_100k_against_a_32k_context() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("c.toml");
    std::fs::write(
        &campaign,
        r#"
[campaign]
name = "ctx"
results_dir = "results"
[model]
path = "sim-model"
[engine]
kind = "sim"
args = ["--prefill-tok-s", "200000", "--decode-step-ms", "0.2"]
[defaults]
context_length = 32768
[[workload]]
name = "context"
input_len = [30000, 100000]
output_len = 256
concurrency = 1
num_requests = 1
"#,
    )
    .unwrap();
    let bin = common::BIN;
    let plan = std::process::Command::new(bin)
        .args(["plan", campaign.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.contains("context-in30000-out256-c1") && text.contains("run"),
        "{text}"
    );
    assert!(
        text.contains("skip: input 100000 + output 256 + margin 64 = 100320 tokens exceed the context length 32768"),
        "{text}"
    );
    let run = std::process::Command::new(bin)
        .args(["run", campaign.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let cell: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("results/ctx/cells/default/context-in30000-out256-c1.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let req = &cell["summary"]["requests"][0];
    assert_eq!(req["input_tokens"], 30000);
    assert_eq!(req["planned_input_tokens"], 30000);
    assert_eq!(req["output_tokens"], 256);
    let skipped: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("results/ctx/cells/default/context-in100000-out256-c1.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(skipped["status"], "skipped");
}
