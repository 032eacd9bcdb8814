//! An SLO search against the real llama.cpp server (SmolLM2-135M on one CPU
//! thread), in a test binary of its own so no other real server shares the
//! cores while it measures.
//!
//! The TPOT bound is not a guess about this machine: a calibration sweep
//! over concurrency 1–4 measures TPOT first, the bound goes in the middle of
//! the widest gap between neighbouring levels, and the search must find the
//! level below that gap. Fresh measurements at the boundary and one step up
//! (in a results directory of their own, so nothing is reused) must then
//! pass and miss the bound.

mod common;

use std::path::Path;

use common::{cells, run};

/// A llama.cpp campaign named `name` in `dir` whose workload has `load`.
fn campaign(dir: &Path, name: &str, load: &str) -> std::path::PathBuf {
    let python = std::env::var("SERVEBENCH_PYTHON").expect("run through scripts/test.sh");
    let gguf = std::env::var("SERVEBENCH_TEST_GGUF").expect("run through scripts/test.sh");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/llama-server");
    let text = format!(
        r#"
[campaign]
name = "{name}"
results_dir = "results"
[model]
path = "{gguf}"
[engine]
kind = "llamacpp"
executable = ["{python}", "{script}"]
args = ["--threads", "1"]
[defaults]
context_length = 4096
max_running_requests = 4
[[server]]
id = "ar"
[[workload]]
name = "w"
input_len = 64
output_len = 32
num_requests = 8
{load}
[run]
health_timeout = "60s"
request_timeout = "120s"
grace_period = "3s"
"#
    );
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// TPOT p50 per concurrency of a campaign's stored cells.
fn tpot_by_level(root: &Path) -> Vec<(u64, f64)> {
    let mut out: Vec<(u64, f64)> = cells(root)
        .values()
        .map(|c| {
            (
                c["workload"]["load"]["value"].as_u64().unwrap(),
                c["summary"]["tpot_ms"]["p50"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("no TPOT: {}", c["failure"])),
            )
        })
        .collect();
    out.sort_by_key(|(c, _)| *c);
    out
}

#[test]
fn real_llamacpp_search_finds_a_boundary_that_direct_measurements_confirm() {
    let dir = tempfile::tempdir().unwrap();
    let calibrate = campaign(dir.path(), "calibrate", "concurrency = [1, 2, 3, 4]");
    let (code, _, stderr) = run(&["run", calibrate.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let tpot = tpot_by_level(&dir.path().join("results/calibrate"));
    assert_eq!(tpot.len(), 4, "{tpot:?}");
    // The widest rise between neighbouring levels; more sequences share one
    // thread's weight passes, so TPOT rises with concurrency.
    let (below, gap) = tpot
        .windows(2)
        .map(|w| (w[0], w[1].1 - w[0].1))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert!(gap > 0.0, "TPOT does not rise with concurrency: {tpot:?}");
    let bound_ms = below.1 + gap / 2.0;
    let expected = below.0;

    let search = campaign(
        dir.path(),
        "search",
        &format!(
            "search = {{ slo = \"tpot_p50={bound_ms:.3}ms\", over = \"concurrency\", min = 1, max = 4 }}"
        ),
    );
    let (code, _, stderr) = run(&["run", search.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("results/search/report.json")).unwrap(),
    )
    .unwrap();
    let row = &report["searches"][0];
    assert_eq!(
        row["state"], "boundary",
        "{row}\ncalibration {tpot:?}\n{stderr}"
    );
    let boundary = row["boundary"].as_f64().unwrap() as u64;
    assert_eq!(
        boundary,
        expected,
        "bound {bound_ms:.2} ms between c{expected} and c{}; calibration {tpot:?}; search {row}",
        expected + 1
    );
    let probes = cells(&dir.path().join("results/search")).len();
    assert!(
        probes <= 4,
        "1, 2, 4 and one bisection at most: {probes} probes"
    );

    // Fresh direct measurements at the boundary and one step up.
    let confirm = campaign(
        dir.path(),
        "confirm",
        &format!("concurrency = [{boundary}, {}]", boundary + 1),
    );
    let (code, _, stderr) = run(&["run", confirm.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let direct = tpot_by_level(&dir.path().join("results/confirm"));
    assert!(
        direct[0].1 <= bound_ms && direct[1].1 > bound_ms,
        "direct TPOT p50 {direct:?} against the bound {bound_ms:.2} ms (calibration {tpot:?})"
    );
}
