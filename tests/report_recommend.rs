//! The recommendation on a simulator campaign whose configs differ in TP
//! size and speculative settings agrees with a calculation made directly
//! from the stored cell files.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use crate::common::{sim_campaign, BIN};

#[test]
fn recommendation_picks_what_a_hand_calculation_from_the_cells_picks() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tp.toml");
    std::fs::write(
        &file,
        sim_campaign("tp", &[])
            + r#"[[server]]
id = "tp1"
args = ["--decode-step-ms", "2", "--decode-step-per-seq-ms", "0.2"]
[[server]]
id = "tp2"
tp = 2
args = ["--decode-step-ms", "1.2", "--decode-step-per-seq-ms", "0.1"]
[[server]]
id = "tp1-k3"
speculative = { method = "eagle", num_draft_tokens = 3, acceptance = 0.8 }
args = ["--decode-step-ms", "2", "--decode-step-per-seq-ms", "0.2"]
[[server]]
id = "tp2-k4"
tp = 2
speculative = { method = "eagle", num_draft_tokens = 4, acceptance = 0.7 }
args = ["--decode-step-ms", "1.2", "--decode-step-per-seq-ms", "0.1"]
[[workload]]
name = "chat"
input_len = 256
output_len = 48
concurrency = [1, 4, 12]
num_requests = 24
slo = ["ttft=40ms,tpot=2ms", "e2e=2s"]
[run]
baseline = "tp1"
health_timeout = "30s"
"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = dir.path().join("results/tp");

    // Independently: goodput per GPU (goodput rate / tp) of every usable cell,
    // best per SLO; fastest decode p50 at concurrency 1.
    let mut best: BTreeMap<String, (f64, String, String)> = BTreeMap::new();
    let mut fastest: Option<(f64, String)> = None;
    for server in std::fs::read_dir(results.join("cells")).unwrap().flatten() {
        for f in std::fs::read_dir(server.path()).unwrap().flatten() {
            let c: serde_json::Value =
                serde_json::from_slice(&std::fs::read(f.path()).unwrap()).unwrap();
            if !matches!(c["status"].as_str(), Some("ok" | "partial")) {
                continue;
            }
            let tp = c["server"]["tp"].as_f64().unwrap().max(1.0);
            let id = c["server_id"].as_str().unwrap().to_string();
            let conc = c["workload"]["load"]["value"].as_u64().unwrap();
            for g in c["summary"]["goodput"].as_array().unwrap() {
                let key = g["slo"].to_string();
                let v = g["rate_rps"].as_f64().unwrap() / tp;
                if best.get(&key).is_none_or(|b| v > b.0) {
                    best.insert(key, (v, id.clone(), format!("c{conc}")));
                }
            }
            if conc == 1 {
                let d = c["summary"]["decode_tok_s"]["p50"].as_f64().unwrap();
                if fastest.as_ref().is_none_or(|b| d > b.0) {
                    fastest = Some((d, id.clone()));
                }
            }
        }
    }
    assert_eq!(best.len(), 2, "two SLOs declared");

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("report.json")).unwrap()).unwrap();
    let picks = report["slo_picks"].as_array().unwrap();
    assert_eq!(picks.len(), 2, "{picks:?}");
    let mut got: Vec<(String, String, f64)> = picks
        .iter()
        .map(|p| {
            (
                p["best"]["server_id"].as_str().unwrap().to_string(),
                p["best"]["load"].as_str().unwrap().to_string(),
                p["best"]["value"].as_f64().unwrap(),
            )
        })
        .collect();
    let mut want: Vec<(String, String, f64)> = best
        .values()
        .map(|(v, s, l)| (s.clone(), l.clone(), *v))
        .collect();
    got.sort_by(|a, b| a.2.total_cmp(&b.2));
    want.sort_by(|a, b| a.2.total_cmp(&b.2));
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, &g.1), (&w.0, &w.1));
        assert!((g.2 - w.2).abs() < 1e-9);
    }
    for p in picks {
        let c = p["confidence"].as_str().unwrap();
        assert!(c == "confident" || c == "too close to call");
    }
    let stream = &report["stream_picks"][0];
    assert_eq!(stream["kind"], "synthetic");
    assert_eq!(
        stream["best"]["server_id"].as_str().unwrap(),
        fastest.unwrap().1
    );
    // The Markdown page states it with the numbers behind it.
    let md = std::fs::read_to_string(results.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("SLO {}", picks[0]["slo"].as_str().unwrap())),
        "{md}"
    );
}
