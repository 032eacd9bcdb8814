//! `servebench bench` against a server that misbehaves on purpose: every
//! fault ends in the right failure class, flag and exit code, never a panic,
//! an unbounded buffer or an `ok` that hides wrong numbers.

use crate::common::{bench_bin, example, start_torture, Fault};
use serde_json::Value;

fn level(r: &Option<Value>) -> &Value {
    &r.as_ref().expect("result file written")["levels"][0]
}

fn requests(r: &Option<Value>) -> &Vec<Value> {
    level(r)["requests"].as_array().unwrap()
}

fn class(req: &Value) -> &str {
    req["failure"]["class"].as_str().unwrap_or("none")
}

#[test]
fn a_data_line_without_end_fails_as_protocol_with_its_size() {
    let t = start_torture(Fault::HugeLine);
    let (code, err, r) = bench_bin(&t.url(), &["--concurrency", "2", "--num-requests", "2"]);
    assert_eq!(code, 3, "{err}");
    for req in requests(&r) {
        assert_eq!(class(req), "protocol", "{req}");
        let detail = req["failure"]["detail"].as_str().unwrap();
        assert!(
            detail.contains("byte limit") && detail.contains("4194304"),
            "{detail}"
        );
    }
}

#[test]
fn a_reset_before_the_headers_is_a_connection_failure_after_one_retry() {
    let t = start_torture(Fault::ResetBeforeHeaders);
    let (code, err, r) = bench_bin(&t.url(), &["--concurrency", "1", "--num-requests", "2"]);
    assert_eq!(code, 3, "{err}");
    for req in requests(&r) {
        assert_eq!(class(req), "connection", "{req}");
        assert_eq!(req["retries"], 1, "{req}");
    }
    // Every POST the server saw is accounted for in a record.
    let sent: u64 = requests(&r)
        .iter()
        .map(|q| 1 + q["retries"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        sent as usize,
        t.posts.load(std::sync::atomic::Ordering::SeqCst)
    );
}

#[test]
fn a_reset_mid_stream_is_a_connection_failure() {
    let t = start_torture(Fault::ResetMidStream);
    let (code, err, r) = bench_bin(&t.url(), &["--concurrency", "1", "--num-requests", "3"]);
    assert_eq!(code, 3, "{err}");
    for req in requests(&r) {
        assert_eq!(class(req), "connection", "{req}");
    }
}

#[test]
fn short_answers_despite_ignore_eos_are_suspicious_with_the_counts() {
    let t = start_torture(Fault::ShortOutput);
    let (code, err, r) = bench_bin(
        &t.url(),
        &["--concurrency", "2", "--num-requests", "4", "--ignore-eos"],
    );
    assert_eq!(code, 3, "{err}");
    let l = level(&r);
    assert_eq!(l["completed"], 4);
    let why = l["suspicious"][0].as_str().expect("flagged");
    assert!(why.contains("4 of 4") && why.contains("4 of 16"), "{why}");
    assert!(err.contains("suspicious"), "{err}");
    // Without ignore_eos a short answer is the model's choice.
    let (code, err, r) = bench_bin(&t.url(), &["--concurrency", "2", "--num-requests", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(level(&r).get("suspicious").is_none());
}

#[test]
fn usage_claiming_more_than_max_tokens_is_flagged_and_does_not_inflate_throughput() {
    let t = start_torture(Fault::LyingUsage);
    let (code, err, r) = bench_bin(&t.url(), &["--concurrency", "2", "--num-requests", "4"]);
    assert_eq!(code, 3, "{err}");
    let l = level(&r);
    let why = l["suspicious"].to_string();
    assert!(
        why.contains("usage 80 for max_tokens 16, 16 streamed"),
        "{why}"
    );
    let tokens = l["output_throughput_tok_s"].as_f64().unwrap() * l["duration_s"].as_f64().unwrap();
    assert!(
        (tokens - 4.0 * 16.0).abs() < 1e-6,
        "throughput counts {tokens} tokens"
    );
    // The raw record keeps what the server claimed, as evidence.
    assert_eq!(requests(&r)[0]["output_tokens"], 80);
}

#[test]
fn several_tokens_per_chunk_with_usage_only_at_the_end_leave_per_token_itl_out() {
    let t = start_torture(Fault::MultiTokenChunks);
    let (code, err, r) = bench_bin(
        &t.url(),
        &["--concurrency", "2", "--num-requests", "4", "--ignore-eos"],
    );
    assert_eq!(code, 0, "{err}");
    let l = level(&r);
    assert!(l["itl_per_token_ms"].is_null(), "{}", l["itl_per_token_ms"]);
    assert_eq!(l["itl_ms"]["count"], 4 * 3);
    let warnings = l["client"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("per-token ITL leaves out 4 of 4")),
        "{warnings:?}"
    );
    let def = r.as_ref().unwrap()["definitions"]["itl_per_token_ms"]
        .as_str()
        .unwrap();
    assert!(def.contains("left out"), "{def}");
    assert!(l.get("suspicious").is_none());
}

#[test]
fn a_resend_after_a_closed_keep_alive_connection_is_recorded_even_when_it_fails() {
    let t = start_torture(Fault::KeepAliveThenReset);
    let (code, err, r) = bench_bin(&t.url(), &["--concurrency", "1", "--num-requests", "2"]);
    assert_eq!(code, 3, "{err}");
    let reqs = requests(&r);
    let ok: Vec<&Value> = reqs.iter().filter(|q| q["status"] == "ok").collect();
    let failed: Vec<&Value> = reqs.iter().filter(|q| q["status"] == "failed").collect();
    assert_eq!((ok.len(), failed.len()), (1, 1), "{reqs:?}");
    assert!(ok[0].get("retries").is_none());
    assert_eq!(failed[0]["retries"], 1, "{}", failed[0]);
    assert_eq!(class(failed[0]), "connection");
    assert_eq!(t.posts.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[test]
fn a_server_that_never_answers_is_bounded_by_the_request_timeout() {
    let t = start_torture(Fault::NeverAnswer);
    let (code, err, r) = bench_bin(
        &t.url(),
        &[
            "--concurrency",
            "2",
            "--num-requests",
            "2",
            "--request-timeout",
            "1s",
        ],
    );
    assert_eq!(code, 3, "{err}");
    for req in requests(&r) {
        assert_eq!(class(req), "timeout", "{req}");
    }
}

#[test]
fn sigterm_and_sigint_exit_130_and_write_the_finished_part() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let t = start_torture(Fault::NeverAnswer);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.json");
        let mut child = std::process::Command::new(crate::common::BIN)
            .args([
                "bench",
                "--url",
                &t.url(),
                "--input-len",
                "8",
                "--output-len",
                "4",
            ])
            .args(["--concurrency", "1", "--num-requests", "1", "--output"])
            .arg(&out)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Signal only once the request is in flight, so the handler is installed.
        crate::common::wait_until(std::time::Duration::from_secs(120), "the request", || {
            t.posts.load(std::sync::atomic::Ordering::SeqCst) >= 1
        });
        // SAFETY: signalling the child this test started.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "signal {sig}");
        let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(v["levels"][0]["cancelled"], true);
    }
}

#[test]
fn absurd_rates_and_concurrency_are_refused_before_any_traffic() {
    let t = start_torture(Fault::NeverAnswer);
    for rate in ["1e-300", "5e-20", "1e-19"] {
        let (code, err, r) = bench_bin(
            &t.url(),
            &[
                "--request-rate",
                rate,
                "--num-requests",
                "2",
                "--duration",
                "2s",
            ],
        );
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("--request-rate") && err.contains("at least"),
            "{err}"
        );
        assert!(!err.contains("panicked") && r.is_none());
    }
    let (code, err, _) = bench_bin(
        &t.url(),
        &["--concurrency", "1000000000", "--num-requests", "2"],
    );
    if servebench::load::open_file_limit().is_some_and(|l| l < 1_000_000_064) {
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("--concurrency") && err.contains("ulimit -n"),
            "{err}"
        );
    }
    assert_eq!(t.posts.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn campaign_plan_refuses_the_same_rates_and_concurrency_with_their_location() {
    let base = example("quickstart.toml");
    let dir = tempfile::tempdir().unwrap();
    let mut cases = vec![("rate = [1e-300]", "rate 1e-300/s")];
    if servebench::load::open_file_limit().is_some_and(|l| l < 1_000_000_064) {
        cases.push(("concurrency = 1000000000", "ulimit -n"));
    }
    for (load, expect) in cases {
        let path = dir.path().join("c.toml");
        std::fs::write(&path, base.replacen("concurrency = [1, 8]", load, 1)).unwrap();
        let (code, _, err) = crate::common::run(&["plan", path.to_str().unwrap()]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("c.toml:") && err.contains(expect), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
