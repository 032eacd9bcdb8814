//! The committed JSON Schemas (bench result, stored cell, report.json) match
//! real output, and each constrains what a reader relies on: a document
//! that drifts from the layout fails validation.

use std::path::Path;

use crate::common::{bench_json, cells, example, fast_sim, run, start_sim};
use serde_json::{json, Value};

/// Every schema by its `$id`, so references between them resolve.
const SCHEMAS: [(&str, &str); 3] = [
    (
        "servebench/bench-result.schema.json",
        include_str!("../schema/bench-result.schema.json"),
    ),
    (
        "servebench/cell-result.schema.json",
        include_str!("../schema/cell-result.schema.json"),
    ),
    (
        "servebench/report.schema.json",
        include_str!("../schema/report.schema.json"),
    ),
];

pub(crate) fn validator(id: &str) -> jsonschema::Validator {
    let parse = |text: &str| -> Value { serde_json::from_str(text).unwrap() };
    let resources = SCHEMAS.iter().map(|(uri, text)| {
        let schema = parse(text);
        assert_eq!(schema["$id"], *uri, "a schema's $id is the name others use");
        (*uri, jsonschema::Resource::from_contents(schema).unwrap())
    });
    let (_, text) = SCHEMAS.iter().find(|(uri, _)| *uri == id).unwrap();
    jsonschema::options()
        .with_resources(resources)
        .build(&parse(text))
        .expect("schema compiles")
}

pub(crate) fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

/// Assert that `edit` turns a valid document into an invalid one.
fn rejects(v: &jsonschema::Validator, doc: &Value, what: &str, edit: impl FnOnce(&mut Value)) {
    assert_eq!(errors(v, doc), Vec::<String>::new(), "valid before: {what}");
    let mut broken = doc.clone();
    edit(&mut broken);
    assert!(
        !errors(v, &broken).is_empty(),
        "{what} must fail validation"
    );
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
    let v = validator("servebench/bench-result.schema.json");
    assert_eq!(errors(&v, &doc), Vec::<String>::new());
    // Both successes and failures were exercised by this document.
    let reqs = doc["levels"][1]["requests"].as_array().unwrap();
    assert!(reqs.iter().any(|r| r["status"] == "ok"));
    assert!(reqs.iter().any(|r| r["status"] == "failed"));
    assert!(!doc["levels"][1]["failures_by_class"]
        .as_object()
        .unwrap()
        .is_empty());

    rejects(&v, &doc, "a renamed field", |d| {
        let level = d["levels"][0].as_object_mut().unwrap();
        let ttft = level.remove("ttft_ms").unwrap();
        level.insert("ttftMs".into(), ttft);
    });
    let ok_index = reqs.iter().position(|r| r["status"] == "ok").unwrap();
    rejects(&v, &doc, "a failed request without evidence", |d| {
        d["levels"][1]["requests"][ok_index]["status"] = "failed".into();
    });
    rejects(&v, &doc, "a failure class outside the set", |d| {
        d["levels"][1]["failures_by_class"]["gremlins"] = 1.into();
    });
}

/// The quickstart campaign (four simulated servers, one of which crashes)
/// run in `dir`; returns its results directory.
fn run_quickstart(dir: &Path) -> std::path::PathBuf {
    let text = example("quickstart.toml");
    let campaign = dir.join("campaign.toml");
    std::fs::write(&campaign, text).unwrap();
    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    dir.join("results/quickstart")
}

#[test]
fn real_campaign_cells_and_report_validate_and_drift_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let root = run_quickstart(dir.path());

    let cell_v = validator("servebench/cell-result.schema.json");
    let cells = cells(&root);
    assert_eq!(cells.len(), 20);
    for (name, c) in &cells {
        assert_eq!(errors(&cell_v, c), Vec::<String>::new(), "{name}");
    }
    // The cells cover a measurement with engine telemetry, a crash with its
    // classified cause, and cells the crash left unrun.
    let status_of = |s: &str| cells.values().find(|c| c["status"] == s).unwrap();
    let (ok, failed, not_run) = (status_of("ok"), status_of("failed"), status_of("not_run"));
    assert!(cells.values().any(|c| c["telemetry"]["spec"].is_object()));
    assert_eq!(failed["failure"]["cause"], "cuda_error");
    assert!(not_run["summary"].is_null());

    rejects(&cell_v, ok, "a status outside the set", |c| {
        c["status"] = "done".into();
    });
    rejects(&cell_v, ok, "a missing identity", |c| {
        c.as_object_mut().unwrap().remove("identity");
    });
    rejects(&cell_v, ok, "an unknown field", |c| {
        c["score"] = 1.into();
    });
    rejects(&cell_v, failed, "a failed cell without its failure", |c| {
        c["failure"] = Value::Null;
    });
    rejects(&cell_v, failed, "a crash cause outside the set", |c| {
        c["failure"]["cause"] = "bad_luck".into();
    });
    rejects(&cell_v, ok, "a measured cell without its summary", |c| {
        c["summary"] = Value::Null;
    });
    rejects(&cell_v, not_run, "a failure class outside the set", |c| {
        c["failure"]["class"] = "unknown".into();
    });

    let report_v = validator("servebench/report.schema.json");
    let report: Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    assert_eq!(errors(&report_v, &report), Vec::<String>::new());
    assert!(!report["problems"].as_array().unwrap().is_empty());
    assert!(!report["charts"].as_array().unwrap().is_empty());
    report_rejects_drift(&report_v, &report);
}

/// The hand-built report fixture covers what the quickstart does not:
/// skipped, suspicious and partial cells, multi-turn sessions, every chart
/// section.
#[test]
fn report_fixture_validates() {
    let v = validator("servebench/report.schema.json");
    let report: Value = serde_json::from_str(include_str!("fixtures/report/report.json")).unwrap();
    assert_eq!(errors(&v, &report), Vec::<String>::new());
    assert!(!report["turns"].as_array().unwrap().is_empty());
    assert!(report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["status"] == "skipped"));
}

fn report_rejects_drift(v: &jsonschema::Validator, report: &Value) {
    rejects(v, report, "a missing cells list", |r| {
        r.as_object_mut().unwrap().remove("cells");
    });
    rejects(v, report, "a chart section outside the set", |r| {
        r["charts"][0]["section"] = "misc".into();
    });
    let failed = report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c["status"] == "failed")
        .unwrap();
    rejects(v, report, "a failed cell counted as usable", |r| {
        r["cells"][failed]["usable"] = true.into();
    });
    rejects(v, report, "a metric given as text", |r| {
        r["cells"][0]["output_tok_s"] = json!("fast");
    });
    rejects(v, report, "an ok cell listed as a problem", |r| {
        r["problems"][0]["status"] = "ok".into();
    });
}

/// An SLO search's probes are ordinary cells, and its rows and pick are
/// part of report.json: both validate, and a made-up search state does not.
#[test]
fn search_campaign_cells_and_report_validate() {
    let dir = tempfile::tempdir().unwrap();
    let text = example("search.toml")
        .replace("max = 64", "max = 8")
        .replace("num_requests = 64", "num_requests = 16");
    let campaign = dir.path().join("campaign.toml");
    std::fs::write(&campaign, text).unwrap();
    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let root = dir.path().join("results/search");
    let cell_v = validator("servebench/cell-result.schema.json");
    for (name, c) in &cells(&root) {
        assert_eq!(errors(&cell_v, c), Vec::<String>::new(), "{name}");
    }
    let report_v = validator("servebench/report.schema.json");
    let report: Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    assert_eq!(errors(&report_v, &report), Vec::<String>::new());
    let rows = report["searches"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "one row per server: {rows:?}");
    rejects(&report_v, &report, "a search state outside the set", |r| {
        r["searches"][0]["state"] = "maybe".into();
    });
    rejects(&report_v, &report, "a bound without its statistic", |r| {
        r["searches"][0]["bounds"][0] = "tpot=5ms".into();
    });
}

/// A trace replay's cells (trace source with its digest, replay load) and
/// its report validate.
#[test]
fn trace_replay_cells_and_report_validate() {
    let dir = tempfile::tempdir().unwrap();
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/traces/azure-conv-500.csv"
    );
    let text = example("trace-replay.toml")
        .replace("../tests/fixtures/traces/azure-conv-500.csv", trace)
        .replace("num_requests = 300", "num_requests = 40");
    let campaign = dir.path().join("campaign.toml");
    std::fs::write(&campaign, text).unwrap();
    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let root = dir.path().join("results/trace-replay");
    let cell_v = validator("servebench/cell-result.schema.json");
    let cells = cells(&root);
    assert_eq!(cells.len(), 4);
    for (name, c) in &cells {
        assert_eq!(errors(&cell_v, c), Vec::<String>::new(), "{name}");
        // The example empties the cache before each cell and says so.
        assert_eq!(c["prefix_cache_reset"]["emptied"], true, "{name}");
    }
    let (_, c) = cells.iter().next().unwrap();
    rejects(&cell_v, c, "a cache reset of no attempt", |c| {
        c["prefix_cache_reset"]["attempts"] = 0.into();
    });
    rejects(&cell_v, c, "a trace without its digest", |c| {
        c["workload"]["source"]
            .as_object_mut()
            .unwrap()
            .remove("digest");
    });
    rejects(&cell_v, c, "a replay without its time scale", |c| {
        c["workload"]["load"]
            .as_object_mut()
            .unwrap()
            .remove("time_scale");
    });
    let report_v = validator("servebench/report.schema.json");
    let report: Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    assert_eq!(errors(&report_v, &report), Vec::<String>::new());
}

/// A run with `goal = "answer"` writes the cells its probes left into
/// report.json, and the schema holds each one to its fields.
#[test]
fn a_report_of_an_answer_first_run_lists_what_was_not_measured_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = crate::common::write_campaign(dir.path(), crate::answer_first::three_speeds());
    let (code, out, err) = run(&["run", campaign.to_str().unwrap(), "--goal", "answer"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let root = dir.path().join("results/answer-first");
    let report_v = validator("servebench/report.schema.json");
    let report: Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    assert_eq!(errors(&report_v, &report), Vec::<String>::new());
    let left = report["not_measured"].as_array().unwrap();
    assert!(left.iter().any(|l| l["server"] == "slow"), "{left:?}");
    rejects(
        &report_v,
        &report,
        "a left cell without its reason's numbers",
        |r| {
            r["not_measured"][0]
                .as_object_mut()
                .unwrap()
                .remove("against");
        },
    );
    rejects(&report_v, &report, "an unknown field in a left cell", |r| {
        r["not_measured"][0]["guess"] = 1.into();
    });
    // The page says the same.
    let md = std::fs::read_to_string(root.join("report.md")).unwrap();
    assert!(
        md.contains("not measured in full (goal = \"answer\")"),
        "{md}"
    );
    assert!(
        md.contains("`slow` at w-in64-out128-c4: cannot win"),
        "{md}"
    );
}
