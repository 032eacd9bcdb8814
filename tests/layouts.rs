//! Parallel layouts (`dp`, `dp_attention`, `ep`, `pp`): the GPUs each
//! server holds as its engine counts them, the plan's packing of them, and
//! data-parallel replicas served end to end by the simulator.

use crate::common::*;

/// Four simulator servers, TP 1 and 2 each with one and two replicas, one
/// running request per replica; two streams at once.
fn dp_campaign() -> String {
    steady_sim_campaign("layouts", "5")
        + r#"
[defaults]
max_running_requests = 1
[[matrix]]
id = "{layout}"
tp = [1, 2]
dp = [1, 2]
[[workload]]
name = "w"
input_len = 64
output_len = 32
concurrency = 2
num_requests = 8
[run]
health_timeout = "30s"
"#
}

#[test]
fn a_simulator_campaign_over_dp_layouts_runs_and_divides_throughput_by_the_gpus_each_holds() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = write_campaign(dir.path(), dp_campaign());
    let (code, out, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let results = dir.path().join("results/layouts");
    let stored = cells(&results);
    assert_eq!(stored.len(), 4, "{:?}", stored.keys());
    // The replicas are the server's own: its launch asked the simulator for them.
    let log = std::fs::read_to_string(results.join("logs/tp2-dp2.log")).unwrap();
    assert!(log.contains("2 replica(s)"), "{log}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("report.json")).unwrap()).unwrap();
    let rows = report["cells"].as_array().unwrap();
    let gpus: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            let thru = r["output_tok_s"].as_f64().unwrap();
            let per_gpu = r["output_tok_s_per_gpu"].as_f64().unwrap();
            let gpus = r["gpus"].as_u64().unwrap();
            assert!(
                (per_gpu - thru / gpus as f64).abs() < 1e-9,
                "{}: {per_gpu} per GPU of {thru} over {gpus}",
                r["server_id"]
            );
            (r["server_id"].as_str().unwrap().to_string(), gpus)
        })
        .collect();
    let want =
        [("tp1", 1), ("tp1-dp2", 2), ("tp2", 2), ("tp2-dp2", 4)].map(|(s, g)| (s.to_string(), g));
    assert_eq!(gpus, want);
    assert_eq!(rows[1]["layout"], "tp1-dp2");
    // A replica admits one request, so a second stream waits a whole
    // answer without replicas and not at all with two: the layout did
    // happen, and the report does not call the two-replica cells
    // under-loaded against one replica's limit.
    let ttft = |i: usize| rows[i]["ttft_p50_ms"].as_f64().unwrap();
    assert!(ttft(0) > 4.0 * ttft(1), "{} vs {}", ttft(0), ttft(1));
    assert!(rows[0]["under_loaded"].is_string(), "{}", rows[0]);
    assert!(rows[1]["under_loaded"].is_null(), "{}", rows[1]);
    // Per GPU, each layout is a series of its own, its points named by server.
    let chart = report["charts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["section"] == "per_gpu")
        .expect("a per-GPU chart");
    let series: Vec<(&str, &serde_json::Value)> = chart["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), &s["labels"]))
        .collect();
    assert_eq!(series[0].0, "tp1-dp2");
    assert_eq!(series[0].1[0], "tp1-dp2 c2");
    assert_eq!(series[1].0, "tp2-dp2");
}

/// A vLLM campaign of the layouts an 8-GPU box weighs. Its `vllm` is a
/// script in `dir` that states a release, all the plan asks of the engine.
fn vllm_layouts(dir: &std::path::Path, extra: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let vllm = dir.join("vllm");
    std::fs::write(&vllm, "#!/bin/sh\necho 0.32.0\n").unwrap();
    std::fs::set_permissions(&vllm, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vllm = vllm.display();
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/models/Qwen3-8B"
    );
    format!(
        r#"
[campaign]
name = "layouts"
results_dir = "results"
[model]
path = "{model}"
config = "{model}"
[engine]
kind = "vllm"
executable = ["{vllm}"]
[hardware]
gpus = [0, 1, 2, 3, 4, 5, 6, 7]
gpu = "h100"
[[server]]
id = "tp8"
tp = 8
[[server]]
id = "tp4-dp2"
tp = 4
dp = 2
[[server]]
id = "tp2-dp4"
tp = 2
dp = 4
[[server]]
id = "tp1-dp8"
dp = 8
[[server]]
id = "tp4-pp2"
tp = 4
pp = 2
[[server]]
id = "tp2"
tp = 2
[[server]]
id = "tp4"
tp = 4
{extra}
[[workload]]
name = "w"
input_len = 512
output_len = 128
concurrency = 8
num_requests = 16
"#
    )
}

#[test]
fn plan_counts_each_layouts_gpus_and_packs_them_within_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_campaign(dir.path(), vllm_layouts(dir.path(), ""));
    let plan = |parallel: &str| -> serde_json::Value {
        let (code, json, err) = run(&[
            "plan",
            "--json",
            "--parallel",
            parallel,
            file.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&json).unwrap()
    };
    let one = plan("1");
    let groups = one["groups"].as_array().unwrap();
    let gpus: Vec<(&str, u64)> = groups
        .iter()
        .map(|g| {
            (
                g["server"]["id"].as_str().unwrap(),
                g["gpus"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        gpus,
        [
            ("tp8", 8),
            ("tp4-dp2", 8),
            ("tp2-dp4", 8),
            ("tp1-dp8", 8),
            ("tp4-pp2", 8),
            ("tp2", 2),
            ("tp4", 4)
        ]
    );
    // Side by side, the 8-GPU layouts each hold the whole box: only TP 2
    // and TP 4 (6 GPUs of 8) share it, so four slots save just the time of
    // the shorter of those two.
    let eta = |p: &serde_json::Value| p["totals"]["eta_s"].as_f64().unwrap();
    let four = plan("4");
    let secs = |id: &str| {
        groups
            .iter()
            .find(|g| g["server"]["id"] == id)
            .map(|g| {
                g["startup_eta_s"].as_f64().unwrap()
                    + g["cells"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c["eta_s"].as_f64().unwrap())
                        .sum::<f64>()
            })
            .unwrap()
    };
    let saved = eta(&one) - eta(&four);
    assert!(saved > 0.0, "{saved}");
    assert!(saved <= secs("tp2").min(secs("tp4")) + 1e-6, "{saved}");
    // The launch commands say the same layout in vLLM's words.
    let (code, text, err) = run(&["plan", "--show-commands", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("server tp2-dp4 (tp2-dp4, 8 GPUs, ar)"),
        "{text}"
    );
    assert!(
        text.contains("--tensor-parallel-size 2 --data-parallel-size 4"),
        "{text}"
    );
    assert!(text.contains("--pipeline-parallel-size 2"), "{text}");
}

#[test]
fn a_layout_beyond_the_pool_is_skipped_with_the_sizes_that_fit() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_campaign(
        dir.path(),
        vllm_layouts(dir.path(), "[[server]]\nid = \"tp2-dp8\"\ntp = 2\ndp = 8\n"),
    );
    let (code, text, err) = run(&["plan", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("layout tp2-dp8 (TP × DP × PP) needs 16 GPUs but the pool has 8")
            && text.contains("dp = 4 fits"),
        "{text}"
    );
}

#[test]
fn plan_refuses_layouts_that_cannot_split_the_model_with_the_sizes_that_do() {
    let dir = tempfile::tempdir().unwrap();
    let text = vllm_layouts(dir.path(), "")
        .replace("Qwen3-8B", "DeepSeek-V2-Lite")
        .replace(
            "[[workload]]",
            "[[server]]\nid = \"ep6\"\ntp = 2\ndp = 3\nep = 6\n\
             [[server]]\nid = \"pp32\"\ntp = 1\npp = 32\n[[workload]]",
        );
    let file = write_campaign(dir.path(), text);
    let (code, text, err) = run(&["plan", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let block = |id: &str| -> String {
        let start = text.find(&format!("server {id} (")).unwrap();
        text[start..].split("\n\n").next().unwrap().to_string()
    };
    let ep6 = block("ep6");
    assert!(
        ep6.contains("64 routed experts, which EP6 cannot split evenly")
            && ep6.contains("vLLM's EP size is TP × DP, so with tp = 2 use dp in 1, 2, 4"),
        "{ep6}"
    );
    assert!(ep6.contains("skip"), "{ep6}");
    let pp = block("pp32");
    assert!(pp.contains("pp 32 exceeds the model's 27 layers"), "{pp}");
    // A layout that splits it is planned to run, with its ranks' pools.
    let dp8 = block("tp1-dp8");
    assert!(dp8.contains("per data rank × 8 ranks"), "{dp8}");
    assert!(!dp8.contains("ERROR"), "{dp8}");
}

#[test]
fn the_moe_layouts_example_plans_each_layout_on_its_gpus_and_refuses_what_cannot_load() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // A Python that states SGLang's release: all the plan asks of the engine.
    let python = dir.path().join("python3");
    std::fs::write(&python, "#!/bin/sh\necho 0.5.23\n").unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models");
    let text = example("moe-layouts-8gpu.toml")
        .replace("\"models/", &format!("\"{models}/"))
        .replace(
            "args = [\"--trust-remote-code\"]",
            &format!("args = [\"--trust-remote-code\"]\nexecutable = [\"{}\", \"-m\", \"sglang.launch_server\"]", python.display()),
        );
    let file = write_campaign(dir.path(), text);
    let (code, json, err) = run(&["plan", "--json", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    let group = |id: &str| {
        plan["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["server"]["id"] == id)
            .unwrap_or_else(|| panic!("no {id}"))
            .clone()
    };
    for id in ["tp8", "tp8-adp8-ep8", "tp4-pp2", "tp4-dp2"] {
        assert_eq!(group(id)["gpus"], 8, "{id}");
    }
    let kv = |id: &str| {
        let m = &group(id)["memory"];
        m["kv_capacity_tokens"].as_u64().unwrap() * m["data_ranks"].as_u64().unwrap()
    };
    // Attention DP gives each GPU its own MLA cache: several times the
    // tokens of TP 8, whose eight ranks all hold the same latent.
    assert!(
        kv("tp8-adp8-ep8") > 5 * kv("tp8"),
        "{} vs {}",
        kv("tp8-adp8-ep8"),
        kv("tp8")
    );
    // Two stages halve each GPU's layers and its KV per token.
    assert!(kv("tp4-pp2") > kv("tp8"));
    let dp2 = group("tp4-dp2");
    let errors = dp2["memory"]["errors"].as_array().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("weights alone need")),
        "{errors:?}"
    );
    let cells = dp2["cells"].as_array().unwrap();
    assert!(
        cells.iter().all(|c| c["verdict"] == "skip"
            && c["reason"]
                .as_str()
                .unwrap()
                .starts_with("weights alone need")),
        "tp4-dp2 is not skipped for its weights"
    );
    let argv = group("tp8-adp8-ep8")["command"]["Ok"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        argv.contains("--tp-size 8 ") && argv.contains("--attn-dp-size 8 --ep-size 8"),
        "{argv}"
    );
}

#[test]
fn the_memory_command_takes_a_layout_and_refuses_one_the_engine_cannot_start() {
    let r1 = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/models/DeepSeek-R1"
    );
    let base = [
        "memory",
        "--model",
        r1,
        "--gpu-memory",
        "141GB",
        "--tp",
        "8",
    ];
    let (code, out, err) = run(&[&base[..], &["--dp-attention", "8", "--ep", "8"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("sglang / tp8-adp8-ep8"), "{out}");
    assert!(out.contains("× 8 data ranks"), "{out}");
    let (code, _, err) = run(&[&base[..], &["--ep", "3"]].concat());
    assert_ne!(code, 0);
    assert!(err.contains("ep in 1, 2, 4, 8"), "{err}");
}
