//! `servebench bench` against the built-in simulator: measured numbers match
//! the simulator's configured ground truth, and failures are classified.

use crate::common::{bench, bench_closed, fast_sim, start_sim};
use servebench::failure::FailureClass;

fn p50(s: &Option<servebench::metrics::stats::Stats>) -> f64 {
    s.expect("statistic present").p50
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_ttft_and_itl_are_measured_within_tolerance() {
    let mut cfg = fast_sim();
    cfg.ttft_overhead_ms = 50.0;
    cfg.decode_step_ms = 10.0;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, ok) = bench_closed(&url, 4, 16, 20, &["--input-len", "32", "--ignore-eos"]).await;
    assert!(ok);
    let l = &r.levels[0];
    assert_eq!((l.completed, l.failed), (16, 0));
    // The server never answers early, so its delays are hard floors: the
    // first token after 50 ms, the last after 50 + 19 × 10 ms. How close the
    // client gets to them is a benchmark's figure (scripts/bench-client
    // prints the fidelity against a raw socket reader), not a test bound a
    // busy machine could break.
    let ttft = l.latency.ttft_ms.expect("ttft");
    assert!(ttft.min >= 50.0, "ttft min {}", ttft.min);
    let e2e = l.latency.e2e_ms.expect("e2e");
    assert!(e2e.min >= 240.0, "e2e min {}", e2e.min);
    assert_eq!(l.latency.itl_ms.expect("itl").count, 16 * 19);
    for req in &l.requests {
        assert_eq!(req.output_tokens, Some(20));
        assert_eq!(req.input_tokens, Some(32));
        assert_eq!(req.chunks.len(), 20);
    }
    assert_eq!(l.latency.tpot_ms.unwrap().count, 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tokens_per_chunk_makes_per_token_itl_a_third() {
    let mut cfg = fast_sim();
    cfg.decode_step_ms = 6.0;
    cfg.spec_step_factor = 1.0;
    cfg.spec_draft_tokens = 2;
    cfg.spec_acceptance = 1.0;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, _) = bench_closed(&url, 2, 6, 31, &["--ignore-eos"]).await;
    let l = &r.levels[0];
    assert_eq!(l.completed, 6);
    // 1 token first, then 10 chunks of 3.
    for req in &l.requests {
        assert_eq!(
            req.chunks.iter().skip(1).map(|c| c.1).collect::<Vec<_>>(),
            vec![3; 10]
        );
        assert_eq!(req.output_tokens, Some(31));
    }
    let ratio = p50(&l.latency.itl_ms) / p50(&l.latency.itl_per_token_ms);
    assert!((ratio - 3.0).abs() < 0.05, "chunk/token ITL ratio {ratio}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_prompt_is_context_overflow_with_the_server_message() {
    let mut cfg = fast_sim();
    cfg.context_length = 100;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, ok) = bench_closed(&url, 2, 4, 8, &["--input-len", "200"]).await;
    assert!(!ok);
    let l = &r.levels[0];
    assert_eq!((l.completed, l.failed), (0, 4));
    assert_eq!(
        l.failures_by_class.get(&FailureClass::ContextOverflow),
        Some(&4)
    );
    let f = l.requests[0].failure.as_ref().unwrap();
    assert_eq!(f.status, Some(400));
    assert!(
        f.detail.contains("maximum context length is 100 tokens"),
        "{}",
        f.detail
    );
    // A failed level has no latency numbers at all, never zeros.
    assert!(l.latency.ttft_ms.is_none() && l.latency.tpot_ms.is_none());
    assert_eq!(l.output_throughput_tok_s, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_run_gives_classified_failures_not_zeros() {
    let mut cfg = fast_sim();
    cfg.decode_step_ms = 5.0;
    cfg.crash_after = Some(3);
    let mut sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, ok) = bench_closed(&url, 2, 8, 40, &["--ignore-eos", "--request-timeout", "5s"]).await;
    assert!(!ok);
    let l = &r.levels[0];
    assert!(l.failed >= 5, "failed {}", l.failed);
    for req in l.requests.iter().filter(|r| !r.is_ok()) {
        let class = req.failure.as_ref().unwrap().class.as_str();
        assert!(["protocol", "connection"].contains(&class), "{class}");
    }
    let ok_count = l.requests.iter().filter(|r| r.is_ok()).count();
    assert_eq!(l.latency.ttft_ms.map(|s| s.count).unwrap_or(0), ok_count);
    assert!(matches!(
        sim.join().await,
        Err(servebench::sim::SimError::Crashed(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_truncation_and_hangs_are_classified() {
    let mut cfg = fast_sim();
    cfg.error_rate = 1.0;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, _) = bench_closed(&url, 1, 2, 4, &[]).await;
    assert_eq!(
        r.levels[0].failures_by_class.get(&FailureClass::HttpError),
        Some(&2)
    );
    assert_eq!(
        r.levels[0].requests[0].failure.as_ref().unwrap().status,
        Some(500)
    );

    let mut cfg = fast_sim();
    cfg.truncate_rate = 1.0;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, _) = bench_closed(&url, 1, 2, 10, &[]).await;
    assert_eq!(
        r.levels[0].failures_by_class.get(&FailureClass::Protocol),
        Some(&2)
    );

    let mut cfg = fast_sim();
    cfg.hang_after = Some(0);
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, _) = bench_closed(&url, 2, 2, 4, &["--request-timeout", "300ms"]).await;
    assert_eq!(
        r.levels[0].failures_by_class.get(&FailureClass::Timeout),
        Some(&2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eos_ends_answers_early_unless_ignore_eos_is_set() {
    let mut cfg = fast_sim();
    cfg.eos_after = Some(5);
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, _) = bench_closed(&url, 1, 2, 12, &[]).await;
    assert!(r.levels[0]
        .requests
        .iter()
        .all(|q| q.output_tokens == Some(5)));
    let (r, _) = bench_closed(&url, 1, 2, 12, &["--ignore-eos"]).await;
    assert!(r.levels[0]
        .requests
        .iter()
        .all(|q| q.output_tokens == Some(12)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_levels_run_in_order_with_chat_and_goodput() {
    let mut cfg = fast_sim();
    cfg.decode_step_ms = 2.0;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, ok) = bench(&[
        "--url",
        &url,
        "--api",
        "chat",
        "--request-rate",
        "50,100",
        "--arrival",
        "constant",
        "--num-requests",
        "20",
        "--output-len",
        "5",
        "--slo",
        "ttft=1s,tpot=1s",
        "--slo",
        "ttft=1us",
    ])
    .await;
    assert!(ok);
    assert_eq!(r.levels.len(), 2);
    let l = &r.levels[0];
    assert_eq!(l.completed, 20);
    assert_eq!(l.goodput[0].good_requests, 20);
    assert_eq!(l.goodput[1].good_requests, 0);
    // Constant arrivals at 50/s are scheduled 20 ms apart.
    let gap = l.requests[1].scheduled_ms - l.requests[0].scheduled_ms;
    assert!((gap - 20.0).abs() < 0.01, "{gap}");
    assert_eq!(r.target.model, "sim-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_start_answers_503_until_ready() {
    let mut cfg = fast_sim();
    cfg.startup_delay_ms = 300;
    let sim = start_sim(cfg).await;
    let ep =
        servebench::client::Endpoint::new(&sim.url(), servebench::client::openai::Api::Completions)
            .unwrap();
    let (status, _) = ep
        .get("/health", std::time::Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(status, 503);
    let start = std::time::Instant::now();
    let mut polls = 0;
    loop {
        let (status, _) = ep
            .get("/health", std::time::Duration::from_secs(5))
            .await
            .unwrap();
        if status == 200 {
            break;
        }
        assert_eq!(status, 503);
        polls += 1;
        assert!(polls < 3000, "never became ready");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A lower bound only: load can delay readiness, never advance it.
    assert!(start.elapsed() >= std::time::Duration::from_millis(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_judges_answers_as_run_does_a_repeated_word_is_degenerate() {
    let mut cfg = fast_sim();
    cfg.degenerate_after = Some(0);
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let (r, ok) = bench_closed(&url, 2, 4, 32, &["--input-len", "32"]).await;
    assert!(!ok, "a degenerate level is not a believable one");
    let l = &r.levels[0];
    assert_eq!((l.completed, l.failed), (4, 0));
    assert!(
        l.suspicious
            .iter()
            .any(|s| s.starts_with("4 of 4 answers are degenerate; first: `lambda` repeats")),
        "{:?}",
        l.suspicious
    );
    // Every answer has its digest; identical answers, identical digests.
    let digests: Vec<&str> = l
        .requests
        .iter()
        .map(|q| q.output.as_ref().unwrap().digest.as_str())
        .collect();
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
}

/// `servebench bench ARGS` as a process, off the runtime the simulators use.
async fn bench_cli(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let mut argv = vec!["bench".to_string()];
        argv.extend(args);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        crate::common::run(&argv)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_compares_answers_with_an_earlier_run_and_exits_3_when_they_got_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("before.json");
    let good = start_sim(fast_sim()).await;
    let mut cfg = fast_sim();
    cfg.wrong_answers = true;
    let upgraded = start_sim(cfg).await;
    let args = |url: String, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "--url",
            &url,
            "--api",
            "chat",
            "--prompt-kind",
            "arithmetic,json-extraction",
            "--concurrency",
            "2",
            "--num-requests",
            "12",
            "--output-len",
            "64",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let o = old.to_str().unwrap();
    let (code, out, err) = bench_cli(args(good.url(), &["--output", o])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    // The same server again: every answer is the earlier one.
    let (code, out, err) = bench_cli(args(good.url(), &["--expect", o])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    for l in [
        format!("answers at concurrency 2: 12 of 12 identical to {o}'s\n"),
        format!("  arithmetic check: 6 of 6 pass in {o}, 6 in this run on the same prompts (0 lost, 0 gained)\n"),
    ] {
        assert!(out.contains(&l), "lacks {l}:\n{out}");
    }
    // An upgrade that gets the sums wrong at the same speed.
    let (code, out, err) = bench_cli(args(upgraded.url(), &["--expect", o])).await;
    assert_eq!(code, 3, "{out}\n{err}");
    for l in [
        format!("answers at concurrency 2: 0 of 12 identical to {o}'s; 12 differ within their first 16 words"),
        format!("  ANSWERS CHANGED: 12 of 12 answers differ from baseline `{o}`'s"),
        format!("  arithmetic check: 6 of 6 pass in {o}, 0 in this run on the same prompts (6 lost, 0 gained, sign test p = 0.016) DROP\n"),
        format!("  json-extraction check: 6 of 6 pass in {o}, 0 in this run on the same prompts (6 lost, 0 gained, sign test p = 0.016) DROP\n"),
    ] {
        assert!(out.contains(&l), "lacks {l}:\n{out}");
    }
    // Other prompts are refused before any request is sent.
    let (code, out, err) = bench_cli(args(good.url(), &["--expect", o, "--seed", "7"])).await;
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("that run asked other things, so its answers are not comparable: --seed 0 there, 7 here"),
        "{err}"
    );
    assert!(!out.contains("answers at"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_open_loop_levels_report_latency_from_the_schedule() {
    let sim = start_sim(fast_sim()).await;
    let url = sim.url();
    let (closed, _) = bench(&["--url", &url, "--concurrency", "2", "--num-requests", "4"]).await;
    assert!(closed.levels[0].latency.e2e_from_schedule_ms.is_none());
    let (open, _) = bench(&["--url", &url, "--request-rate", "50", "--num-requests", "4"]).await;
    let l = &open.levels[0].latency;
    assert_eq!(l.e2e_from_schedule_ms.unwrap().count, 4);
    assert!(l.ttft_from_schedule_ms.unwrap().min >= l.ttft_ms.unwrap().min);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_with_few_requests_reports_its_steady_window_at_the_servers_rate() {
    // 32 users and 40 requests: one full wave, then 8 requests drain alone.
    let mut cfg = fast_sim();
    // A step mostly fixed: 8 requests decode barely faster than 32.
    cfg.decode_step_ms = 8.0;
    cfg.decode_step_per_seq_ms = 0.0625;
    let sim = start_sim(cfg).await;
    let (r, ok) = bench_closed(
        &sim.url(),
        32,
        40,
        64,
        &["--input-len", "8", "--ignore-eos"],
    )
    .await;
    assert!(ok);
    let l = &r.levels[0];
    let w = l.steady.as_ref().expect("a steady window");
    // The server's rate with all 32 decoding, as this run measured it: the
    // first wave's per-request decode speed times 32 (the configured step,
    // 8 + 0.0625 × 32 ms, is a floor a busy machine only lengthens).
    let mut first_wave: Vec<f64> = l
        .requests
        .iter()
        .take(32)
        .filter_map(servebench::metrics::stats::decode_tok_s)
        .collect();
    first_wave.sort_by(f64::total_cmp);
    let server_rate = 32.0 * first_wave[first_wave.len() / 2];
    println!(
        "server rate {server_rate:.0} tok/s (configured 3200), steady window {:.0} tok/s over {:.2}–{:.2} s, whole cell {:.0} tok/s",
        w.output_throughput_tok_s, w.start_s, w.end_s, l.output_throughput_tok_s
    );
    let off = (w.output_throughput_tok_s - server_rate).abs() / server_rate;
    assert!(
        off < 0.05,
        "window {} vs server {server_rate}",
        w.output_throughput_tok_s
    );
    assert!(
        l.output_throughput_tok_s < 0.8 * w.output_throughput_tok_s,
        "whole cell {} vs window {}",
        l.output_throughput_tok_s,
        w.output_throughput_tok_s
    );
    assert!(w.over_saturated.is_empty(), "{:?}", w.over_saturated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_rate_above_the_servers_capacity_is_over_saturated() {
    // Two requests at a time, 20 tokens at 5 ms: at most 20 requests/s served.
    let mut cfg = fast_sim();
    cfg.decode_step_ms = 5.0;
    cfg.max_running_requests = 2;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let args = |rate: &'static str| {
        [
            "--url",
            &url,
            "--request-rate",
            rate,
            "--arrival",
            "constant",
            "--num-requests",
            "45",
            "--output-len",
            "20",
            "--input-len",
            "8",
            "--ignore-eos",
        ]
        .map(str::to_string)
    };
    let over = args("60");
    let (r, ok) = bench(&over.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(ok);
    let w = r.levels[0].steady.clone().expect("a steady window");
    assert!(
        w.over_saturated
            .iter()
            .any(|e| e.contains("time to first token rose")),
        "{:?}",
        w.over_saturated
    );
    // Well under capacity, nothing rises.
    let under = args("5");
    let (r, ok) = bench(&under.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(ok);
    let w = r.levels[0].steady.clone().expect("a steady window");
    assert!(w.over_saturated.is_empty(), "{:?}", w.over_saturated);
}
