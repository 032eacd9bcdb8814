//! The committed JSON Schema of the bench result file matches real output.

mod common;

use common::{bench_json, fast_sim, start_sim};

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../schema/bench-result.schema.json")).unwrap();
    jsonschema::validator_for(&schema).expect("schema compiles")
}

fn errors(v: &jsonschema::Validator, doc: &serde_json::Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_bench_output_validates_and_drift_is_caught() {
    let mut cfg = fast_sim();
    cfg.decode_step_ms = 1.0;
    cfg.truncate_rate = 0.5;
    cfg.spec_draft_tokens = 2;
    let sim = start_sim(cfg).await;
    let url = sim.url();
    let doc = bench_json(&[
        "--url",
        &url,
        "--concurrency",
        "1,3",
        "--num-requests",
        "8",
        "--warmup",
        "2",
        "--output-len",
        "6",
        "--ignore-eos",
        "--slo",
        "ttft=1s",
    ])
    .await;
    let v = validator();
    assert_eq!(errors(&v, &doc), Vec::<String>::new());
    // Both successes and failures were exercised by this document.
    let reqs = doc["levels"][1]["requests"].as_array().unwrap();
    assert!(reqs.iter().any(|r| r["status"] == "ok"));
    assert!(reqs.iter().any(|r| r["status"] == "failed"));

    let mut renamed = doc.clone();
    let level = renamed["levels"][0].as_object_mut().unwrap();
    let ttft = level.remove("ttft_ms").unwrap();
    level.insert("ttftMs".into(), ttft);
    assert!(
        !errors(&v, &renamed).is_empty(),
        "a renamed field must fail validation"
    );

    let ok_index = reqs.iter().position(|r| r["status"] == "ok").unwrap();
    let mut zero_fail = doc.clone();
    zero_fail["levels"][1]["requests"][ok_index]["status"] = "failed".into();
    assert!(
        !errors(&v, &zero_fail).is_empty(),
        "a failed request needs its failure evidence"
    );
}
