//! `servebench compare` on real simulator campaigns: quiet on a rerun of the
//! same campaign, exit code 3 on an injected 20% throughput regression.

use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_servebench");

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
args = ["--decode-step-ms", "2", "--decode-step-per-seq-ms", "0.1", "--prefill-tok-s", "50000"]
[[server]]
id = "baseline"
[[server]]
id = "spec-k3"
speculative = {{ method = "eagle", num_draft_tokens = 3, acceptance = 0.75 }}
[[workload]]
name = "chat"
input_len = 2048
output_len = 64
concurrency = [1, 4]
num_requests = 16
warmup = 2
[run]
baseline = "baseline"
repetitions = 2
health_timeout = "30s"
"#,
        results.display()
    )
}

fn servebench(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
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

#[test]
fn compare_is_quiet_on_a_rerun_and_flags_an_injected_throughput_regression() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for name in ["a", "b"] {
        let res = dir.path().join(name);
        let file = dir.path().join(format!("{name}.toml"));
        std::fs::write(&file, campaign(&res)).unwrap();
        let (code, out) = servebench(&["run", file.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{out}");
        runs.push(res.join("ab"));
    }
    let (a, b) = (runs[0].to_str().unwrap(), runs[1].to_str().unwrap());
    let (code, out) = servebench(&["compare", a, b]);
    assert_eq!(
        code,
        Some(0),
        "two runs of one campaign must not differ beyond noise:\n{out}"
    );
    assert!(out.contains("0 regression(s) flagged"), "{out}");
    // 2 servers × 2 points × 5 metrics, all matched by identity.
    assert_eq!(
        out.lines().filter(|l| l.contains(" identity")).count(),
        20,
        "{out}"
    );

    let slow = dir.path().join("slow");
    copy_dir(&runs[0], &slow);
    for server in std::fs::read_dir(slow.join("cells")).unwrap().flatten() {
        for f in std::fs::read_dir(server.path()).unwrap().flatten() {
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(f.path()).unwrap()).unwrap();
            let t = &mut v["summary"]["output_throughput_tok_s"];
            *t = serde_json::json!(t.as_f64().unwrap() * 0.8);
            std::fs::write(f.path(), serde_json::to_vec(&v).unwrap()).unwrap();
        }
    }
    let (code, out) = servebench(&["compare", a, slow.to_str().unwrap()]);
    assert_eq!(code, Some(3), "{out}");
    let flagged: Vec<&str> = out.lines().filter(|l| l.ends_with("REGRESSION")).collect();
    assert_eq!(
        flagged.len(),
        4,
        "every point's throughput and nothing else:\n{out}"
    );
    assert!(
        flagged
            .iter()
            .all(|l| l.contains("output_tok_s") && l.contains("-20.0%")),
        "{out}"
    );
}
