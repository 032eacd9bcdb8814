//! `servebench compare` on stored results whose noise is chosen, not
//! measured: one real simulator campaign provides the cell files, then every
//! compared metric of every repetition is rewritten to known values, so the
//! verdicts are exact on any machine, however busy.
//!
//! The rule under test (src/report/compare.rs): a change is a regression when
//! it goes the wrong way by more than `max(threshold, 3 × noise)`, where noise
//! is the larger relative range (max − min) / mean of the repetitions in
//! either set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::run;
use serde_json::Value;

/// The compared metrics: JSON pointer into a cell's summary, and whether
/// higher is better.
const METRICS: [(&str, &str, bool); 5] = [
    ("output_tok_s", "/summary/output_throughput_tok_s", true),
    ("decode_tok_s_p50", "/summary/decode_tok_s/p50", true),
    ("ttft_p50_ms", "/summary/ttft_ms/p50", false),
    ("ttft_p99_ms", "/summary/ttft_ms/p99", false),
    ("tpot_p50_ms", "/summary/tpot_ms/p50", false),
];

fn campaign(results: &Path) -> String {
    format!(
        r#"
[campaign]
name = "ab"
results_dir = "{}"
[model]
path = "sim-model"
[engine]
kind = "sim"
args = ["--decode-step-ms", "1", "--prefill-tok-s", "0"]
[[server]]
id = "baseline"
[[server]]
id = "spec-k3"
speculative = {{ method = "eagle", num_draft_tokens = 3, acceptance = 0.75 }}
[[workload]]
name = "chat"
input_len = 64
output_len = 16
concurrency = [1, 4]
num_requests = 4
[run]
baseline = "baseline"
repetitions = 3
health_timeout = "60s"
"#,
        results.display()
    )
}

/// Cell files of a results tree, by path.
fn cell_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for s in std::fs::read_dir(root.join("cells")).unwrap().flatten() {
        for c in std::fs::read_dir(s.path()).unwrap().flatten() {
            if !c.file_name().to_string_lossy().starts_with('.') {
                out.push(c.path());
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A (server, point) key as compare prints it, from a cell file.
fn point_key(cell: &Value) -> (String, String) {
    let server = cell["server_id"].as_str().unwrap().to_string();
    let name = cell["cell_name"].as_str().unwrap();
    let point = match name.rfind("-rep") {
        Some(i) => name[..i].to_string(),
        None => name.to_string(),
    };
    (server, point)
}

/// Rewrite every compared metric of every cell under `root`:
/// `value(server, point, metric, repetition)` gives the new number.
fn rewrite(root: &Path, value: &dyn Fn(&str, &str, &str, u32) -> f64) {
    for f in cell_files(root) {
        let mut v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let (server, point) = point_key(&v);
        let rep = v["workload"]["repetition"].as_u64().unwrap() as u32;
        for (name, pointer, _) in METRICS {
            let slot = v
                .pointer_mut(pointer)
                .unwrap_or_else(|| panic!("{} has no {pointer}", f.display()));
            *slot = serde_json::json!(value(&server, &point, name, rep));
        }
        std::fs::write(&f, serde_json::to_vec(&v).unwrap()).unwrap();
    }
}

/// A base value per metric, distinct per server and point so that
/// mismatched alignment would show.
fn base_value(server: &str, point: &str, metric: &str) -> f64 {
    let s = if server == "baseline" { 1.0 } else { 1.7 };
    let p = if point.contains("c4") { 3.0 } else { 1.0 };
    let m = match metric {
        "output_tok_s" => 500.0,
        "decode_tok_s_p50" => 80.0,
        "ttft_p50_ms" => 40.0,
        "ttft_p99_ms" => 90.0,
        _ => 12.0,
    };
    m * s * p
}

/// Repetition `rep` of 3 spread symmetrically with relative range `spread`.
fn with_spread(v: f64, spread: f64, rep: u32) -> f64 {
    v * (1.0 + spread * (f64::from(rep) - 1.0) / 2.0)
}

/// `servebench compare --json`-equivalent rows through the binary's table:
/// (server, point, metric) → (change %, limit %, flagged).
fn compare(base: &Path, new: &Path) -> (i32, BTreeMap<(String, String, String), bool>, String) {
    let (code, out, err) = run(&["compare", base.to_str().unwrap(), new.to_str().unwrap()]);
    let mut rows = BTreeMap::new();
    for line in out.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() >= 9 && METRICS.iter().any(|(m, _, _)| *m == cols[2]) {
            rows.insert(
                (
                    cols[0].to_string(),
                    cols[1].to_string(),
                    cols[2].to_string(),
                ),
                line.ends_with("REGRESSION"),
            );
        }
    }
    (code, rows, format!("{out}{err}"))
}

#[test]
fn compare_flags_exactly_the_drops_beyond_noise_on_chosen_spreads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ab.toml");
    std::fs::write(&file, campaign(&dir.path().join("res"))).unwrap();
    let (code, _, err) = run(&["run", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let measured = dir.path().join("res/ab");
    assert_eq!(
        cell_files(&measured).len(),
        12,
        "2 servers × 2 points × 3 reps"
    );

    // The spread of each (server, point): the baseline server is quiet (2 %
    // range: the 10 % threshold rules), spec-k3 is noisy (8 % range: the
    // limit is 3 × 8 % = 24 %).
    let spread = |server: &str| if server == "baseline" { 0.02 } else { 0.08 };

    let base = dir.path().join("base");
    copy_dir(&measured, &base);
    rewrite(&base, &|s, p, m, r| {
        with_spread(base_value(s, p, m), spread(s), r)
    });

    // A rerun within noise: every mean moves by less than its limit, in the
    // bad direction too.
    let rerun = dir.path().join("rerun");
    copy_dir(&measured, &rerun);
    rewrite(&rerun, &|s, p, m, r| {
        let higher = METRICS.iter().find(|x| x.0 == m).unwrap().2;
        let drift = if s == "baseline" { 0.08 } else { 0.20 };
        let worse = if higher { 1.0 - drift } else { 1.0 + drift };
        with_spread(base_value(s, p, m) * worse, spread(s), r)
    });
    let (code, rows, out) = compare(&base, &rerun);
    assert_eq!(code, 0, "a rerun within noise must be quiet:\n{out}");
    assert_eq!(rows.len(), 20, "2 servers × 2 points × 5 metrics:\n{out}");
    assert!(rows.values().all(|f| !f), "{out}");
    assert!(out.contains("0 regression(s) flagged"), "{out}");

    // Injected changes, each chosen on one side of its limit:
    //  - baseline/c1 output_tok_s −15 % (limit 10 %): flagged;
    //  - baseline/c4 ttft_p99 +12 % (limit 10 %): flagged;
    //  - spec-k3/c4 tpot_p50 +30 % (limit 24 %): flagged;
    //  - spec-k3/c1 output_tok_s −20 % (limit 24 %): within noise, quiet;
    //  - baseline/c4 decode +25 %: an improvement, quiet.
    let injected = |s: &str, p: &str, m: &str| -> f64 {
        let c4 = p.contains("c4");
        match (s, c4, m) {
            ("baseline", false, "output_tok_s") => 0.85,
            ("baseline", true, "ttft_p99_ms") => 1.12,
            ("spec-k3", true, "tpot_p50_ms") => 1.30,
            ("spec-k3", false, "output_tok_s") => 0.80,
            ("baseline", true, "decode_tok_s_p50") => 1.25,
            _ => 1.0,
        }
    };
    let new = dir.path().join("new");
    copy_dir(&measured, &new);
    rewrite(&new, &|s, p, m, r| {
        with_spread(base_value(s, p, m) * injected(s, p, m), spread(s), r)
    });
    let (code, rows, out) = compare(&base, &new);
    assert_eq!(code, 3, "{out}");
    let flagged: Vec<(String, bool, String)> = rows
        .iter()
        .filter(|(_, f)| **f)
        .map(|((s, p, m), _)| (s.clone(), p.contains("c4"), m.clone()))
        .collect();
    assert_eq!(
        flagged,
        vec![
            ("baseline".to_string(), false, "output_tok_s".to_string()),
            ("baseline".to_string(), true, "ttft_p99_ms".to_string()),
            ("spec-k3".to_string(), true, "tpot_p50_ms".to_string()),
        ],
        "exactly the drops beyond noise:\n{out}"
    );
    assert!(out.contains("3 regression(s) flagged"), "{out}");
    // The limits shown are the rule's: threshold for the quiet server,
    // 3 × range for the noisy one.
    assert!(
        out.lines()
            .any(|l| l.starts_with("baseline") && l.contains("±10.0%")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("spec-k3") && l.contains("±24.0%")),
        "{out}"
    );

    // A cell that fails in NEW is a regression of its own, never a zero.
    let broken = dir.path().join("broken");
    copy_dir(&base, &broken);
    for f in cell_files(&broken) {
        let mut v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let (s, p) = point_key(&v);
        if s == "spec-k3" && p.contains("c4") {
            v["status"] = serde_json::json!("failed");
            v["failure"] = serde_json::json!({"class": "crashed", "detail": "CUDA error"});
            v["summary"] = Value::Null;
            std::fs::write(&f, serde_json::to_vec(&v).unwrap()).unwrap();
        }
    }
    let (code, _, out) = compare(&base, &broken);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("REGRESSION spec-k3/") && out.contains("no usable measurement in NEW"),
        "{out}"
    );
    assert!(out.contains("1 regression(s) flagged"), "{out}");

    // A result file that NEW cannot read is flagged, not silently dropped.
    let corrupt = dir.path().join("corrupt");
    copy_dir(&base, &corrupt);
    let victim = cell_files(&corrupt).remove(0);
    std::fs::write(&victim, b"{ not json").unwrap();
    let (code, _, out) = compare(&base, &corrupt);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("REGRESSION unreadable result in NEW"), "{out}");
}
