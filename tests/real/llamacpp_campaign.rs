//! `servebench run` campaigns on the real llama.cpp server (SmolLM2-135M
//! through `scripts/llama-server`, one thread): prefix-cache counts, answers
//! checked for correctness, and speculative decoding counted per cell.

use crate::common::{
    answer_lines, assert_timeline, cells, llamacpp_campaign, real_engine_turn, run, write_campaign,
};

/// `[campaign]` to `[defaults]` of a campaign on the real llama.cpp server
/// (SmolLM2 through `scripts/llama-server`, one thread, one request at a
/// time), `extra_args` appended to the engine's; servers, workloads and
/// `[run]` follow.
fn real_llamacpp_head(name: &str, extra_args: &[&str], context_length: u32) -> String {
    let args = [&["--threads", "1"][..], extra_args].concat();
    llamacpp_campaign(name, &args)
        + &format!("[defaults]\ncontext_length = {context_length}\nmax_running_requests = 1\n")
}

#[test]
fn real_llamacpp_reports_cached_prompt_tokens_and_a_shared_prefix_hits_the_cache() {
    let _turn = real_engine_turn();
    let dir = tempfile::tempdir().unwrap();
    // One slot: consecutive requests find the previous prompt in it, so a
    // shared prefix is taken from the cache and unique prompts are not.
    let head = real_llamacpp_head("cache", &[], 1024);
    let text = format!(
        r#"{head}
[[server]]
id = "one-slot"
[[workload]]
name = "prefix"
input_len = 256
shared_prefix = 224
output_len = 4
concurrency = 1
num_requests = 4
[[workload]]
name = "unique"
input_len = 256
output_len = 4
concurrency = 1
num_requests = 4
[run]
health_timeout = "120s"
request_timeout = "120s"
"#
    );
    let p = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let stored = cells(&dir.path().join("results/cache"));
    let rate = |cell: &str| {
        let c = &stored[&format!("one-slot/{cell}")];
        let reqs = c["summary"]["requests"].as_array().unwrap();
        assert!(
            reqs.iter().all(|r| r["cached_tokens"].is_u64()),
            "{cell}: every request says what it reused"
        );
        c["summary"]["prompt_cache"]["hit_rate"]
            .as_f64()
            .unwrap_or_else(|| panic!("{cell}: {}", c["summary"]))
    };
    // The build llama-server reports is stored with every cell, as it
    // names it: no "version:" label, no launcher's own words.
    for (name, c) in &stored {
        let v = c["engine_build"]["version"].as_str().unwrap_or_default();
        assert!(
            v.starts_with(|c: char| c.is_ascii_digit()) && !v.contains("xllamacpp"),
            "{name}: {v}"
        );
    }
    let (shared, unique) = (rate("prefix-in256-out4-c1"), rate("unique-in256-out4-c1"));
    assert!(shared > 0.5, "shared prefix hit rate {shared}");
    assert!(shared > unique + 0.3, "shared {shared} vs unique {unique}");
    // A wrapper that reports another build makes every stored cell stale.
    let faked = text.replace(
        "[engine]\n",
        "[engine]\nversion_command = [\"echo\", \"version: 1 (another build)\"]\n",
    );
    assert_ne!(faked, text);
    write_campaign(dir.path(), &faked);
    let (_, plan, _) = run(&["plan", p.to_str().unwrap()]);
    let stale = plan
        .lines()
        .filter(|l| {
            l.contains("stale: engine version ")
                && l.contains(" → 1 (another build)")
                && !l.contains("version: ")
        })
        .count();
    assert_eq!(stale, 2, "{plan}");
    let csv = std::fs::read_to_string(dir.path().join("results/cache/report.csv")).unwrap();
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .split(',')
        .any(|column| column == "prompt_cache_hit_rate"));
}

#[test]
fn real_llamacpp_answers_forced_into_one_word_are_caught_and_an_exact_twin_agrees() {
    let _turn = real_engine_turn();
    let dir = tempfile::tempdir().unwrap();
    // The real engine under a default grammar that allows only "lambda ":
    // what a broken build streams, produced by llama.cpp's own sampler.
    let head = real_llamacpp_head("forced", &[], 1024);
    let text = format!(
        r#"{head}
[[server]]
id = "ar"
[[server]]
id = "twin"
[[server]]
id = "forced"
args = ["--grammar", 'root ::= ("lambda ")+']
[[workload]]
name = "code"
api = "chat"
prompt_kinds = "quicksort"
output_len = 128
concurrency = 1
num_requests = 3
[run]
baseline = "ar"
health_timeout = "60s"
grace_period = "3s"
"#
    );
    let campaign = write_campaign(dir.path(), &text);
    let (code, stdout, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    let root = dir.path().join("results/forced");
    let cells = cells(&root);
    let forced = &cells["forced/code-kinds-out128-c1"];
    assert_eq!(forced["status"], "suspicious", "{forced}");
    assert_eq!(forced["failure"]["class"], "degenerate_output");
    let detail = forced["failure"]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("3 of 3 answers are degenerate; first: `lambda` repeats")
            && detail.contains("\"lambda lambda"),
        "{detail}"
    );
    for id in ["ar", "twin"] {
        assert_eq!(
            cells[&format!("{id}/code-kinds-out128-c1")]["status"],
            "ok",
            "{id}"
        );
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    let twin = report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["server_id"] == "twin")
        .unwrap();
    assert_eq!(twin["output_identical"], 1.0, "{twin}");
}

#[test]
fn real_llamacpp_campaign_runs_autoregressive_and_speculative_and_their_answers_agree() {
    let _turn = real_engine_turn();
    let gguf = std::env::var("SERVEBENCH_TEST_GGUF").expect("run through scripts/test.sh");
    let dir = tempfile::tempdir().unwrap();
    let head = real_llamacpp_head("real", &["--metrics"], 2048)
        .replace("max_running_requests = 1", "max_running_requests = 2");
    // Greedy requests against autoregressive decoding, llama.cpp's n-gram
    // lookup and a draft model (the target itself as its own drafter, the
    // one GGUF at hand; its drafts are nearly all accepted), one request
    // at a time and two.
    let text = format!(
        r#"{head}
[[server]]
id = "ar"
[[server]]
id = "ngram"
speculative = {{ method = "ngram", llamacpp_type = "ngram-simple" }}
[[server]]
id = "draft"
speculative = {{ method = "draft-model", draft_model = "{gguf}", num_draft_tokens = 4 }}
[[workload]]
name = "mixed"
api = "chat"
prompt_kinds = ["quicksort", "arithmetic", "json-extraction", "haiku"]
output_len = 32
concurrency = [1, 2]
num_requests = 8
[run]
baseline = "ar"
health_timeout = "60s"
grace_period = "3s"
"#
    );
    let campaign = write_campaign(dir.path(), &text);
    let (code, stdout, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let cells = cells(&dir.path().join("results/real"));
    assert_eq!(cells.len(), 6, "{:?}", cells.keys().collect::<Vec<_>>());
    for (name, c) in &cells {
        assert_eq!(c["status"], "ok", "{name}");
        let reqs = c["summary"]["requests"].as_array().unwrap();
        assert_eq!(reqs.len(), 8);
        assert!(reqs.iter().all(|r| r["output_tokens"] == 32));
        assert!(c["server_run"]["command"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--parallel"));
        // llama.cpp's own gauges over the cell, on the client's clock.
        assert_timeline(name, c);
    }
    for id in ["ar", "ngram", "draft"] {
        let run = &cells[&format!("{id}/mixed-kinds-out32-c1")]["server_run"];
        assert!(run["warmup_s"].as_f64().is_some_and(|s| s > 0.0), "{run}");
        assert!(run.get("warmup_error").is_none(), "{run}");
        // llama.cpp logs one timing summary per finished request: the
        // sixteen measured ones and the warm-up sent before them.
        let log = std::fs::read_to_string(dir.path().join(format!("results/real/logs/{id}.log")))
            .unwrap();
        let finished = log.lines().filter(|l| l.contains("total time =")).count();
        assert_eq!(finished, 17, "{id}: {log}");
    }
    // Agreement with the autoregressive answers, measured twice on this
    // 2-core machine: at c1 16 of 16 identical for n-gram and draft in both
    // runs; at c2 8 of 8 for the draft model in both, and for n-gram 8 of 8,
    // then 7 of 8 (one JSON answer opened with "```json" instead of "{":
    // two sequences in one batch take other kernel paths than one, and a
    // near tie between the top two tokens can flip even the first token).
    // So: one request at a time is exact on every run (a verification step
    // computes each row as one-token decoding does on llama.cpp's CPU
    // kernels); two at a time never departs early and often, and mostly agrees.
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("results/real/report.json")).unwrap(),
    )
    .unwrap();
    let row = |id: &str, cell: &str| {
        report["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["server_id"] == id && c["cell_name"] == cell)
            .unwrap_or_else(|| panic!("{id}/{cell}"))
            .clone()
    };
    for id in ["ngram", "draft"] {
        let c1 = row(id, "mixed-kinds-out32-c1");
        assert_eq!(c1["output_identical"], 1.0, "{c1}");
        let c2 = row(id, "mixed-kinds-out32-c2");
        assert_eq!(c2["status"], "ok", "{c2}");
        assert!(c2["output_identical"].as_f64().unwrap() >= 0.5, "{c2}");
        let answers = report["answers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["server_id"] == id)
            .unwrap()
            .clone();
        assert_eq!(answers["answers_compared"], 16, "{answers}");
        assert_eq!(answers["mismatched_cells"], 0, "{answers}");
        assert_eq!(answers["wrong_answer_cells"], 0, "{answers}");
    }
    let argv = |id: &str| -> Vec<String> {
        cells[&format!("{id}/mixed-kinds-out32-c1")]["server_run"]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        argv("ngram")
            .windows(2)
            .any(|w| w == ["--spec-type", "ngram-simple"]),
        "{:?}",
        argv("ngram")
    );
    assert!(
        argv("draft")
            .windows(2)
            .any(|w| w == ["--spec-type", "draft-simple"])
            && argv("draft")
                .windows(2)
                .any(|w| w[0] == "--spec-draft-model" && w[1] == gguf),
        "{:?}",
        argv("draft")
    );
    // Drafts were proposed and accepted: the speculation really ran.
    let spec = &cells["draft/mixed-kinds-out32-c1"]["summary"];
    assert!(
        spec["accepted_draft_tokens"].as_u64().unwrap() > 0,
        "{spec}"
    );
    assert!(stdout.contains("ngram"), "{stdout}");
}

#[test]
fn real_llamacpp_speculation_is_counted_per_cell_and_depends_on_the_prompt() {
    let _turn = real_engine_turn();
    let dir = tempfile::tempdir().unwrap();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/workload");
    let text = llamacpp_campaign("spec", &["--threads", "1", "--metrics"])
        + &format!(
            r#"[defaults]
context_length = 2048
max_running_requests = 1
[[server]]
id = "ngram"
speculative = {{ method = "ngram", llamacpp_type = "ngram-simple" }}
[[workload]]
name = "repetitive"
api = "chat"
dataset = "{fixtures}/repetitive.jsonl"
output_len = 64
ignore_eos = true
concurrency = 1
num_requests = 3
[[workload]]
name = "creative"
api = "chat"
dataset = "{fixtures}/creative.jsonl"
output_len = 64
ignore_eos = true
concurrency = 1
num_requests = 3
[run]
health_timeout = "60s"
request_timeout = "60s"
grace_period = "3s"
"#
        );
    let campaign = write_campaign(dir.path(), &text);
    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    let cells = cells(&dir.path().join("results/spec"));
    let rate = |name: &str| -> (f64, f64) {
        let c = &cells[name];
        let spec = &c["telemetry"]["spec"];
        let drafted = spec["counts"]["draft_tokens"]
            .as_f64()
            .unwrap_or_else(|| panic!("{name}: {spec}"));
        let accepted = spec["counts"]["accepted_tokens"].as_f64().unwrap();
        // The counts are the sum over the cell's own requests (or, when no
        // response carried any, the engine's counter deltas over the cell).
        let per_request: f64 = c["summary"]["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["draft_tokens"].as_f64())
            .sum();
        if spec["source"]
            .as_str()
            .unwrap()
            .contains("response timings")
        {
            assert_eq!(per_request, drafted, "{name}");
        } else {
            assert_eq!(per_request, 0.0, "{name}");
        }
        assert!(
            c["telemetry"]["metrics"]["generation_tokens"]
                .as_f64()
                .unwrap()
                >= 3.0 * 64.0,
            "{name}: metrics delta covers this cell: {}",
            c["telemetry"]
        );
        // The runner waits for counters that lag the last response, so a
        // delta that covers the cell carries no note.
        assert!(
            c["telemetry"]["metrics_note"].is_null(),
            "{name}: {}",
            c["telemetry"]["metrics_note"]
        );
        (
            drafted,
            if drafted > 0.0 {
                accepted / drafted
            } else {
                0.0
            },
        )
    };
    let (rep_drafted, rep_rate) = rate("ngram/repetitive-dataset-out64-c1");
    let (_, creative_rate) = rate("ngram/creative-dataset-out64-c1");
    assert!(
        rep_drafted > 0.0,
        "copying code gives the n-gram drafter material"
    );
    assert!(
        rep_rate > creative_rate + 0.05,
        "acceptance: repetitive {rep_rate:.2} vs creative {creative_rate:.2}\n{stderr}"
    );
    assert!(code == 0 || code == 3, "{stderr}");
}

#[test]
fn real_llamacpp_answers_are_judged_by_a_campaigns_own_checks_file() {
    let _turn = real_engine_turn();
    let dir = tempfile::tempdir().unwrap();
    // Questions the 135M model answers right when greedy (as measured:
    // "The capital of France is Paris.", "2 + 3 = 5", a fenced
    // {"ok": true}), and one check that expects a wrong figure.
    let lines = [
        serde_json::json!({"prompt": "What is the capital of France? Answer with one word.", "check": "regex", "expected": "(?i)\\bparis\\b", "kind": "facts"}),
        serde_json::json!({"prompt": "What is 2 + 3? Answer with a number only.", "check": "number", "expected": 5, "kind": "facts"}),
        serde_json::json!({"prompt": "Reply with the JSON object {\"ok\": true} and nothing else.", "check": "json", "expected": {"ok": true}, "kind": "facts"}),
        serde_json::json!({"prompt": "What is 2 + 3? Answer with a number only.", "check": "number", "expected": 6, "kind": "facts"}),
    ];
    let file: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("mine.jsonl"), file).unwrap();
    let head = real_llamacpp_head("own-checks", &[], 1024);
    let text = format!(
        r#"{head}
[[server]]
id = "one"
[[workload]]
name = "mine"
api = "chat"
checks = "mine.jsonl"
output_len = 32
concurrency = 1
num_requests = 4
[run]
baseline = "one"
health_timeout = "120s"
request_timeout = "120s"
"#
    );
    let campaign = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let root = dir.path().join("results/own-checks");
    let cell = &cells(&root)["one/mine-checks-out32-c1"];
    let reqs = cell["summary"]["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 4);
    let failed: Vec<&serde_json::Value> =
        reqs.iter().filter(|r| r["answer_check"] == false).collect();
    assert_eq!(failed.len(), 1, "{reqs:?}");
    assert_eq!(
        failed[0]["answer_reason"], "expected 6 as the last number, found 5",
        "{}",
        failed[0]
    );
    assert!(reqs
        .iter()
        .all(|r| r["label"] == "facts" && r["answer_check"].is_boolean()));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    let facts = &report["answers"][0]["checks"][0];
    assert_eq!(
        (&facts["kind"], &facts["checked"], &facts["passed"]),
        (&"facts".into(), &4.into(), &3.into()),
        "{facts}"
    );
    assert_eq!(
        facts["failures"][0],
        "mine-checks-out32-c1 #".to_string()
            + &failed[0]["index"].to_string()
            + ": expected 6 as the last number, found 5",
        "{facts}"
    );
}

#[test]
fn real_llamacpp_campaign_answer_first_then_the_grid_gives_the_same_answer() {
    let _turn = real_engine_turn();
    let gguf = std::env::var("SERVEBENCH_TEST_GGUF").expect("run through scripts/test.sh");
    let dir = tempfile::tempdir().unwrap();
    let head = real_llamacpp_head("answer", &["--metrics"], 2048)
        .replace("max_running_requests = 1", "max_running_requests = 2");
    // Three configs, two workloads: one stream and two, prompt kinds and
    // synthetic prompts.
    let text = format!(
        r#"{head}
[[server]]
id = "ar"
[[server]]
id = "ngram"
speculative = {{ method = "ngram", llamacpp_type = "ngram-simple" }}
[[server]]
id = "draft"
speculative = {{ method = "draft-model", draft_model = "{gguf}", num_draft_tokens = 4 }}
[[workload]]
name = "kinds"
api = "chat"
prompt_kinds = ["quicksort", "arithmetic", "json-extraction", "haiku"]
output_len = 24
concurrency = [1, 2]
num_requests = 8
[[workload]]
name = "short"
input_len = 64
output_len = 16
concurrency = 2
num_requests = 8
[run]
baseline = "ar"
health_timeout = "60s"
grace_period = "3s"
goal = "answer"
"#
    );
    let campaign = write_campaign(dir.path(), &text);
    let file = campaign.to_str().unwrap();
    let (code, out, err) = run(&["run", file]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("answer first: servers in the order"), "{err}");
    let results = dir.path().join("results/answer");
    let first = cells(&results);
    // Every point of every server was probed, and a probe is stored apart.
    for id in ["ar", "ngram", "draft"] {
        for point in [
            "kinds-kinds-out24-c1",
            "kinds-kinds-out24-c2",
            "short-in64-out16-c2",
        ] {
            assert!(
                results
                    .join(format!("goal/cells/{id}/{point}.json"))
                    .is_file(),
                "{id}/{point} has no probe"
            );
        }
    }
    let ledger: Vec<serde_json::Value> = std::fs::read(results.join("goal/not-measured.json"))
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_default();
    assert_eq!(
        first.len() + ledger.len(),
        9,
        "{:?} {ledger:?}",
        first.keys()
    );
    // The target as its own drafter runs about half as fast as the others
    // at every point: its probes leave it.
    assert!(
        ledger.iter().any(|l| l["server"] == "draft"),
        "{ledger:?}\n{err}"
    );
    for l in &ledger {
        // A point is left only to configs measured in full there.
        let leader = format!(
            "{}/{}",
            l["leader"].as_str().unwrap(),
            l["point"].as_str().unwrap()
        );
        assert!(
            first.contains_key(&leader),
            "{l} left to {leader}, not measured"
        );
        assert!(
            out.contains(&format!(
                "`{}` at {}",
                l["server"].as_str().unwrap(),
                l["point"].as_str().unwrap()
            )),
            "{out}"
        );
    }
    let goal_answer = answer_lines(&out);

    // The grid: only what was left is measured, and the answer is the same.
    let (code, out, err) = run(&["run", file, "--goal", "grid"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let all = cells(&results);
    assert_eq!(all.len(), 9);
    for (k, v) in &first {
        assert_eq!(
            all[k]["finished_at"], v["finished_at"],
            "{k} was measured again"
        );
    }
    assert!(!out.contains("this answer rests on"), "{out}");
    assert_eq!(answer_lines(&out), goal_answer, "{out}");
}

#[test]
fn two_real_llamacpp_builds_run_side_by_side_each_with_its_version_stored() {
    let _turn = real_engine_turn();
    let old = std::env::var("SERVEBENCH_OLD_LLAMACPP_PYTHON").expect("run through scripts/test.sh");
    let new = std::env::var("SERVEBENCH_PYTHON").expect("run through scripts/test.sh");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/llama-server");
    let dir = tempfile::tempdir().unwrap();
    let head = real_llamacpp_head("builds", &[], 1024);
    // Each build is its own Python environment with its own xllamacpp.
    let text = format!(
        r#"{head}
[[build]]
name = "b9538"
executable = ["{old}", "{script}"]
version = "2026.6.9538"
[[build]]
name = "b11549"
executable = ["{new}", "{script}"]
version = "2026.10.11549"
[[matrix]]
id = "ar-{{build}}"
build = ["b9538", "b11549"]
[[workload]]
name = "kinds"
api = "chat"
prompt_kinds = ["arithmetic", "haiku"]
output_len = 16
concurrency = 1
num_requests = 4
[run]
health_timeout = "90s"
grace_period = "3s"
"#
    );
    let campaign = write_campaign(dir.path(), &text);
    let (code, plan, err) = run(&["plan", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // Each build answered `--version` through its own environment.
    assert!(
        plan.contains("build `b9538`: 2026.6.9538 (from `"),
        "{plan}"
    );
    assert!(
        plan.contains("build `b11549`: 2026.10.11549 (from `"),
        "{plan}"
    );
    assert!(!plan.contains("warning:"), "{plan}");
    let (code, stdout, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let root = dir.path().join("results/builds");
    let cells = cells(&root);
    assert_eq!(cells.len(), 2, "{:?}", cells.keys().collect::<Vec<_>>());
    for (name, c) in &cells {
        assert_eq!(c["status"], "ok", "{name}: {}", c["failure"]);
        let want = if name.starts_with("ar-b9538/") {
            "2026.6.9538"
        } else {
            "2026.10.11549"
        };
        assert_eq!(c["engine_build"]["version"], want, "{name}");
        // The server was started by that build's own Python.
        let argv = c["server_run"]["command"].as_array().unwrap();
        let exe = if want == "2026.6.9538" { &old } else { &new };
        assert_eq!(argv[0], exe.as_str(), "{name}");
    }
    // The report compares the two builds at the point both measured.
    let md = std::fs::read_to_string(root.join("report.md")).unwrap();
    assert!(
        md.contains("- `b9538` → `b11549` (ar-b9538 → ar-b11549) at kinds-"),
        "{md}"
    );
}

#[test]
fn bisect_over_eight_real_llamacpp_builds_finds_the_first_that_counts_cached_prompt_tokens() {
    let _turn = real_engine_turn();
    let dir_of = std::env::var("SERVEBENCH_LLAMACPP_BUILDS").expect("run through scripts/test.sh");
    let current = std::env::var("SERVEBENCH_PYTHON").expect("run through scripts/test.sh");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/llama-server");
    // In release order. Measured by hand on each: builds before 2026.8.10566
    // export no `llamacpp:prompt_tokens_cached_total` on /metrics; it and
    // every later build do.
    let builds = [
        "2026.5.9294",
        "2026.6.9538",
        "2026.6.9713",
        "2026.7.9873",
        "2026.7.10068",
        "2026.8.10566",
        "2026.9.11063",
        "2026.10.11549",
    ];
    let first_counting = 5;
    let mut text = real_llamacpp_head("bisect", &["--metrics"], 1024);
    for b in builds {
        let python = if b == "2026.10.11549" {
            current.clone()
        } else {
            format!("{dir_of}/{b}/bin/python")
        };
        text += &format!("[[build]]\nname = \"{b}\"\nexecutable = [\"{python}\", \"{script}\"]\n");
    }
    let all: Vec<String> = builds.iter().map(|b| format!("\"{b}\"")).collect();
    text += &format!(
        "[[matrix]]\nid = \"ar-{{build}}\"\nbuild = [{}]\n\
         [[workload]]\nname = \"prefix\"\ninput_len = 256\nshared_prefix = 224\noutput_len = 4\n\
         concurrency = 1\nnum_requests = 4\n[run]\nhealth_timeout = \"90s\"\ngrace_period = \"3s\"\n",
        all.join(", ")
    );
    let dir = tempfile::tempdir().unwrap();
    let campaign = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&[
        "bisect",
        campaign.to_str().unwrap(),
        "--watch",
        "engine:prefix_cache_hits",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    println!("{out}");
    assert!(
        out.contains("first build where engine:prefix_cache_hits changed: `2026.8.10566`"),
        "{out}"
    );
    assert!(
        out.contains("  last good `2026.7.10068`: engine:prefix_cache_hits not exported"),
        "{out}"
    );
    // Each build measured agrees with what was found by hand, and no more
    // than the ends plus ⌈log2 7⌉ were measured.
    let stored = cells(&dir.path().join("results/bisect"));
    assert!(stored.len() <= 5, "{:?}", stored.keys().collect::<Vec<_>>());
    for (name, c) in &stored {
        let build = c["server"]["build"]["name"].as_str().unwrap();
        let at = builds.iter().position(|b| *b == build).unwrap();
        assert_eq!(c["status"], "ok", "{name}: {}", c["failure"]);
        assert_eq!(c["engine_build"]["version"], build, "{name}");
        let hits = &c["telemetry"]["metrics"]["prefix_cache_hits"];
        assert_eq!(hits.is_number(), at >= first_counting, "{name}: {hits}");
    }
}
