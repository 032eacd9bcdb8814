//! An SLO search against the real llama.cpp server (SmolLM2-135M on one CPU
//! thread), in a test binary of its own so no other real server shares the
//! cores while it measures.
//!
//! The TPOT bound is placed from this machine, not guessed: a calibration
//! sweep over concurrency 1–4 measures TPOT first and the bound goes in the
//! middle of the widest gap between neighbouring levels, so the search has a
//! crossing to find. What is asserted does not depend on the next run
//! timing like the last (a busy machine moves TPOT by tens of percent): every
//! verdict the report gives must follow from the stored measurement of that
//! probe, the state must be proved by its probes (a boundary by a pass at it,
//! a failure one step up and passes just below; `below_min` by a failure at
//! 1; `above_max` by a pass at 4), no grid point is measured twice, and a
//! rerun measures nothing and reports the same.

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
fn real_llamacpp_search_verdicts_follow_from_its_own_measurements() {
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

    let search = campaign(
        dir.path(),
        "search",
        &format!(
            "search = {{ slo = \"tpot_p50={bound_ms:.3}ms\", over = \"concurrency\", min = 1, max = 4 }}"
        ),
    );
    let (code, _, stderr) = run(&["run", search.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let root = dir.path().join("results/search");
    let report = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap()
    };
    let row = report()["searches"][0].clone();
    let context = format!("bound {bound_ms:.2} ms; calibration {tpot:?}; search {row}");

    // Each grid point is measured once, and each stored measurement is a probe
    // on the search's path whose verdict is its TPOT p50 against the bound.
    let measured = tpot_by_level(&root);
    let mut loads: Vec<u64> = measured.iter().map(|(c, _)| *c).collect();
    loads.dedup();
    assert_eq!(
        loads.len(),
        measured.len(),
        "a point measured twice: {context}"
    );
    let points = row["probe_points"].as_array().unwrap();
    assert_eq!(points.len(), measured.len(), "{context}");
    let mut verdicts = std::collections::BTreeMap::new();
    for p in points {
        let load = p["load"].as_f64().unwrap() as u64;
        let (_, stored) = measured
            .iter()
            .find(|(c, _)| *c == load)
            .unwrap_or_else(|| panic!("probe c{load} has no stored cell: {context}"));
        let value = p["values"][0].as_f64().unwrap();
        assert!((value - stored).abs() < 1e-6, "c{load}: {context}");
        // The bound is written to 3 decimals; compare against what was written.
        let written: f64 = format!("{bound_ms:.3}").parse().unwrap();
        assert_eq!(p["passed"], *stored <= written, "c{load}: {context}");
        verdicts.insert(load, *stored <= written);
    }

    // The state is proved by the probes.
    let boundary = row["boundary"].as_f64().map(|b| b as u64);
    let first_fail = row["first_fail"].as_f64().map(|f| f as u64);
    match row["state"].as_str().unwrap() {
        "boundary" => {
            let (pass, fail) = (boundary.unwrap(), first_fail.unwrap());
            assert_eq!(fail, pass + 1, "{context}");
            assert_eq!(verdicts.get(&fail), Some(&false), "{context}");
            for c in 1..fail {
                assert_eq!(verdicts.get(&c), Some(&true), "c{c} unconfirmed: {context}");
            }
        }
        "below_min" => {
            assert_eq!(boundary, None, "{context}");
            assert_eq!(verdicts.get(&1), Some(&false), "{context}");
        }
        "above_max" => {
            assert_eq!(boundary, Some(4), "{context}");
            assert!(verdicts.values().all(|&p| p), "{context}");
        }
        other => panic!("the search did not finish ({other}): {context}\n{stderr}"),
    }

    // A rerun replays the stored probes, measures nothing and says the same.
    let (code, _, stderr) = run(&["run", search.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("0 servers launched, 0 cells measured"),
        "{stderr}"
    );
    assert_eq!(report()["searches"][0], row);
}
