//! SLO searches end to end on the real simulator: probes are stored cells
//! on the search's own path, a rerun reuses them, the report's boundary is
//! a measured pass with a measured failure one grid step up, and a config
//! that cannot win is stopped early. Assertions read the stored numbers,
//! never the clock, so a slow machine moves the boundary but not the truth
//! of these checks.

use std::path::Path;

use crate::common::{cells, run, sim_campaign};

/// Simulator configs whose TPOT grows 1 ms per running sequence: the
/// `tpot_p50=25ms` bound falls near concurrency 23 for `fast` on an idle
/// machine and near 5 for `slow`, whose every step costs 20 ms more.
fn campaign(dir: &Path, stop_losers: bool) -> std::path::PathBuf {
    let text = sim_campaign(
        "s",
        &[
            "--decode-step-per-seq-ms",
            "1",
            "--prefill-tok-s",
            "1000000",
        ],
    ) + &format!(
        r#"[[server]]
id = "fast"
args = ["--decode-step-ms", "2"]
[[server]]
id = "slow"
args = ["--decode-step-ms", "20"]
[[workload]]
name = "w"
input_len = 64
output_len = 24
num_requests = 32
search = {{ slo = "tpot_p50=25ms", over = "concurrency", min = 1, max = 32 }}
[run]
stop_losers = {stop_losers}
health_timeout = "30s"
request_timeout = "60s"
"#
    );
    let p = dir.join("campaign.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn concurrency(cell: &serde_json::Value) -> u64 {
    cell["workload"]["load"]["value"].as_u64().unwrap()
}

fn tpot_p50(cell: &serde_json::Value) -> f64 {
    cell["summary"]["tpot_ms"]["p50"].as_f64().unwrap()
}

fn report(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("results/s/report.json")).unwrap()).unwrap()
}

#[test]
fn a_search_stores_a_proved_boundary_and_a_rerun_measures_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign(dir.path(), false);
    let (code, _, stderr) = run(&["run", c.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let stored = cells(&dir.path().join("results/s"));
    let fast: Vec<&serde_json::Value> = stored
        .iter()
        .filter(|(k, _)| k.starts_with("fast/"))
        .map(|(_, v)| v)
        .collect();
    // Doubling, bisection and a confirmation below the bracket: far fewer
    // probes than the 32 grid points.
    assert!(fast.len() >= 3 && fast.len() <= 16, "{} probes", fast.len());
    let loads: Vec<u64> = fast.iter().map(|c| concurrency(c)).collect();
    for l in [1, 2, 4] {
        assert!(loads.contains(&l), "doubling from 1 probes {l}: {loads:?}");
    }

    let r = report(dir.path());
    let row = r["searches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["server_id"] == "fast")
        .unwrap()
        .clone();
    assert_eq!(row["state"], "boundary", "{row}");
    let pass = row["boundary"].as_f64().unwrap() as u64;
    let fail = row["first_fail"].as_f64().unwrap() as u64;
    assert_eq!(fail, pass + 1, "{row}");
    // The bracket is two measured probes: the pass meets the bound, the failure misses it.
    let at = |c: u64| fast.iter().find(|v| concurrency(v) == c).copied().unwrap();
    assert!(
        tpot_p50(at(pass)) <= 25.0,
        "{}",
        at(pass)["summary"]["tpot_ms"]
    );
    assert!(
        tpot_p50(at(fail)) > 25.0,
        "{}",
        at(fail)["summary"]["tpot_ms"]
    );
    assert!(
        row["missed"][0].as_str().unwrap().starts_with("tpot_p50"),
        "{row}"
    );
    // Every probe below the boundary on the path passed; every one above failed.
    for v in &fast {
        let l = concurrency(v);
        if l <= pass {
            assert!(tpot_p50(v) <= 25.0, "probe {l} below the boundary missed");
        }
    }
    // The chart of the bound marks each config's boundary on its own line.
    let chart = r["charts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == "search w-in64-out24: tpot_p50 at each probe")
        .unwrap_or_else(|| panic!("no search chart: {}", r["charts"]));
    let series = |name: &str| {
        chart["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let marker = series("boundary");
    let i = marker["labels"]
        .as_array()
        .unwrap()
        .iter()
        .position(|l| l == "fast")
        .unwrap();
    assert_eq!(
        marker["points"][i][0].as_f64(),
        Some(pass as f64),
        "{marker}"
    );
    assert_eq!(
        marker["points"][i][1].as_f64(),
        Some(tpot_p50(at(pass))),
        "{marker}"
    );
    assert_eq!(series("bound tpot_p50=25ms")["points"][0][1], 25.0);

    // The pick is the config with the higher throughput per GPU at its boundary.
    let pick = &r["search_picks"][0];
    let best = r["searches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["per_gpu"].is_object())
        .max_by(|a, b| {
            a["per_gpu"]["per_gpu"]
                .as_f64()
                .partial_cmp(&b["per_gpu"]["per_gpu"].as_f64())
                .unwrap()
        })
        .unwrap();
    assert_eq!(pick["server_id"], best["server_id"], "{pick}");

    // A rerun replays the stored probes and measures nothing.
    let (code, _, stderr) = run(&["run", c.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("0 servers launched, 0 cells measured"),
        "{stderr}"
    );
    let (_, plan, _) = run(&["plan", c.to_str().unwrap()]);
    assert!(
        plan.contains(&format!("done: boundary concurrency {pass}")),
        "{plan}"
    );
}

#[test]
fn a_config_that_cannot_win_is_stopped_before_its_bisection() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign(dir.path(), true);
    let (code, _, stderr) = run(&["run", c.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let r = report(dir.path());
    let rows = r["searches"].as_array().unwrap();
    let slow = rows.iter().find(|s| s["server_id"] == "slow").unwrap();
    let fast = rows.iter().find(|s| s["server_id"] == "fast").unwrap();
    assert_eq!(fast["state"], "boundary", "{fast}");
    assert_eq!(slow["state"], "stopped_early", "{slow}\n{stderr}");
    assert!(
        slow["note"].as_str().unwrap().contains("cannot win"),
        "{slow}"
    );
    // Stopped at its first failure: no probe between its last pass and that failure.
    let first_fail = slow["first_fail"].as_f64().unwrap() as u64;
    let stored = cells(&dir.path().join("results/s"));
    let slow_loads: Vec<u64> = stored
        .iter()
        .filter(|(k, _)| k.starts_with("slow/"))
        .map(|(_, v)| concurrency(v))
        .collect();
    assert_eq!(slow_loads.iter().max(), Some(&first_fail), "{slow_loads:?}");
    assert!(
        slow_loads.iter().all(|l| l.is_power_of_two()),
        "only doubling probes: {slow_loads:?}"
    );
    assert_eq!(r["search_picks"][0]["server_id"], "fast");
}

#[test]
fn a_fast_config_whose_answers_are_not_the_baselines_wins_no_search() {
    let dir = tempfile::tempdir().unwrap();
    // `fast` becomes a server whose answers depart from the baseline's
    // after four words; `slow` is the baseline. Without reading the
    // answers, `fast` has the higher boundary and would be picked.
    let c = campaign(dir.path(), false);
    let text = std::fs::read_to_string(&c)
        .unwrap()
        .replace(
            "args = [\"--decode-step-ms\", \"2\"]",
            "args = [\"--decode-step-ms\", \"2\", \"--diverge-after\", \"4\"]",
        )
        .replace("[run]\n", "[run]\nbaseline = \"slow\"\n");
    assert!(text.contains("--diverge-after") && text.contains("baseline = \"slow\""));
    std::fs::write(&c, text).unwrap();
    let (code, _, stderr) = run(&["run", c.to_str().unwrap()]);
    assert_eq!(code, 3, "the mismatch fails the run\n{stderr}");
    let r = report(dir.path());
    let rows = r["searches"].as_array().unwrap();
    let fast = rows.iter().find(|s| s["server_id"] == "fast").unwrap();
    assert_eq!(fast["state"], "below_min", "{fast}");
    assert!(
        fast["missed"][0]
            .as_str()
            .unwrap()
            .starts_with("cell suspicious (output_mismatch:"),
        "{fast}"
    );
    assert_eq!(
        r["search_picks"][0]["server_id"], "slow",
        "{}",
        r["search_picks"]
    );
}

#[test]
fn a_search_beside_fixed_levels_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign(dir.path(), false);
    let text = std::fs::read_to_string(&c).unwrap().replace(
        "num_requests = 32\n",
        "num_requests = 32\nconcurrency = 4\n",
    );
    std::fs::write(&c, text).unwrap();
    let (code, _, stderr) = run(&["plan", c.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("campaign.toml:22:"), "{stderr}");
    assert!(
        stderr.contains("remove `concurrency` and `rate`"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&c)
        .unwrap()
        .replace("concurrency = 4\n", "")
        .replace("tpot_p50=25ms", "tpot=25ms");
    std::fs::write(&c, text).unwrap();
    let (code, _, stderr) = run(&["plan", c.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("names no statistic"), "{stderr}");
}

/// `repetitions = "auto"`: a point is repeated until its repetitions'
/// output throughput agrees within the target, never past the cap.
#[test]
fn automatic_repetitions_stop_when_they_agree_and_go_on_when_they_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let write = |target: &str| {
        let text = sim_campaign("r", &[])
            + &format!(
                r#"[[server]]
id = "a"
[[workload]]
name = "w"
input_len = 64
output_len = 16
concurrency = 2
num_requests = 8
[run]
repetitions = "auto"
repetitions_target = "{target}"
max_repetitions = 4
"#
            );
        let p = dir.path().join("r.toml");
        std::fs::write(&p, text).unwrap();
        p
    };
    // Two runs of one simulated point agree within 90% on any machine.
    let c = write("90%");
    let (code, _, stderr) = run(&["run", c.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let root = dir.path().join("results/r");
    let names: Vec<String> = cells(&root).keys().cloned().collect();
    assert_eq!(
        names,
        ["a/w-in64-out16-c2", "a/w-in64-out16-c2-rep1"],
        "{stderr}"
    );
    assert!(stderr.contains("2 repetitions agree"), "{stderr}");
    let (_, plan, _) = run(&["plan", c.to_str().unwrap()]);
    assert!(plan.contains("not needed: 2 repetitions agree"), "{plan}");

    // No two measurements agree within a millionth: every repetition up to the cap runs.
    let c = write("0.0001%");
    let (code, _, stderr) = run(&["run", c.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(cells(&root).len(), 4, "{stderr}");

    let c = write("five percent");
    let (code, _, stderr) = run(&["plan", c.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("r.toml:19:") && stderr.contains("is not a share"),
        "{stderr}"
    );
}

/// A trace of `n` requests, one every `gap_ms`, each `input_len` prompt
/// tokens (a block of its own under the default 512-token block) and 5
/// output tokens.
fn even_trace(path: &Path, n: u64, gap_ms: u64, input_len: u64) {
    let rows: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": {input_len}, \"output_length\": 5, \"hash_ids\": [{i}]}}",
                i * gap_ms
            )
        })
        .collect();
    std::fs::write(path, rows.join("\n") + "\n").unwrap();
}

#[test]
fn a_search_over_time_scale_finds_the_traffic_a_config_of_known_capacity_sustains() {
    // The trace sends 2 requests/s, evenly. The server runs one request at
    // a time and each takes the same fixed time (no prefill cost, 5 ms to
    // the first token, then 4 steps of 49 ms): about 204 ms, so it serves at
    // most 4.9 requests/s, 2.45× the trace's rate, midway between the grid's
    // 2 and 3 so that a busy machine's late wake-ups move neither verdict. Below that every request finds the
    // server idle and takes its own time; above it each waits longer than
    // the one before, and by the 90th percentile of 24 requests the wait
    // alone is far past the bound.
    let dir = tempfile::tempdir().unwrap();
    even_trace(&dir.path().join("even.jsonl"), 24, 500, 64);
    let text = sim_campaign(
        "s",
        &[
            "--max-running-requests",
            "1",
            "--decode-step-ms",
            "49",
            "--decode-step-per-seq-ms",
            "0",
            "--prefill-tok-s",
            "0",
            "--ttft-overhead-ms",
            "5",
        ],
    ) + r#"[[server]]
id = "one-at-a-time"
[[workload]]
name = "replay"
trace = "even.jsonl"
search = { slo = "e2e_p90=400ms", over = "time_scale", min = 1, max = 4, step = 1 }
[run]
health_timeout = "30s"
request_timeout = "60s"
"#;
    let c = dir.path().join("campaign.toml");
    std::fs::write(&c, text).unwrap();
    let (_, plan, err) = run(&["plan", c.to_str().unwrap()]);
    assert!(plan.contains("replay-trace"), "{plan}{err}");
    let (code, _, stderr) = run(&["run", c.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let stored = cells(&dir.path().join("results/s"));
    let scale = |c: &serde_json::Value| c["workload"]["load"]["time_scale"].as_f64().unwrap();
    let e2e_p50 = |c: &serde_json::Value| c["summary"]["e2e_ms"]["p50"].as_f64().unwrap();
    // The lowest probe shows the service time the capacity follows from.
    let lowest = stored.values().find(|c| scale(c) == 1.0).unwrap();
    let service_ms = e2e_p50(lowest);
    assert!(
        service_ms >= 201.0,
        "each request takes at least its steps: {service_ms}"
    );
    let capacity_scale = 1000.0 / service_ms / 2.0;
    let r = report(dir.path());
    let row = &r["searches"][0];
    assert_eq!(row["axis"], "time_scale", "{row}");
    assert_eq!(row["state"], "boundary", "{row}\n{stderr}");
    let pass = row["boundary"].as_f64().unwrap();
    let fail = row["first_fail"].as_f64().unwrap();
    // Within the search's precision, one grid step: the capacity lies
    // between the highest passing multiple and the first failing one.
    assert_eq!(fail - pass, 1.0, "{row}");
    assert!(
        pass <= capacity_scale && capacity_scale < fail,
        "capacity {capacity_scale:.2}× the trace, bracket {pass}–{fail}"
    );
    assert_eq!((pass, fail), (2.0, 3.0), "capacity {capacity_scale:.2}×");
    // Every stored probe is the trace at its multiple: same requests, sent
    // at their times divided by it.
    for c in stored.values() {
        let requests = c["summary"]["requests"].as_array().unwrap();
        assert_eq!(requests.len(), 24);
        for q in requests {
            let due = q["index"].as_f64().unwrap() * 500.0 / scale(c);
            let at = q["scheduled_ms"].as_f64().unwrap();
            assert!((at - due).abs() < 1e-3, "x{}: {at} ms, not {due}", scale(c));
        }
    }
    let (_, table, _) = run(&[
        "report",
        dir.path().join("results/s").to_str().unwrap(),
        "--table",
    ]);
    assert!(table.contains("sustains 2× the trace's traffic"), "{table}");
}

#[test]
fn a_time_scale_search_on_a_prefix_caching_server_is_bounded_by_the_prefill_each_probe_pays() {
    // The trace sends 2 requests/s, evenly, each a 512-token prompt of its
    // own (no reuse inside the trace). The server caches prefixes in
    // 16-token blocks and prefills 2,560 tokens/s one request at a time:
    // 200 ms a prompt, so it prefills at most 5 prompts/s, 2.5× the
    // trace's rate (midway between the grid's 2 and 3). Each probe must
    // pay that prefill: a probe served from an earlier probe's prompts
    // prefills nothing and "sustains" the searched maximum.
    let dir = tempfile::tempdir().unwrap();
    even_trace(&dir.path().join("even.jsonl"), 24, 500, 512);
    let text = sim_campaign(
        "s",
        &[
            "--prefix-cache-block",
            "16",
            "--max-running-requests",
            "1",
            "--prefill-tok-s",
            "2560",
            "--decode-step-ms",
            "1",
            "--decode-step-per-seq-ms",
            "0",
        ],
    ) + r#"[[server]]
id = "prefill-bound"
[[workload]]
name = "replay"
trace = "even.jsonl"
search = { slo = "e2e_p90=600ms", over = "time_scale", min = 1, max = 8, step = 1 }
[run]
health_timeout = "30s"
request_timeout = "60s"
"#;
    let c = dir.path().join("campaign.toml");
    std::fs::write(&c, text).unwrap();
    let (code, _, stderr) = run(&["run", c.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let stored = cells(&dir.path().join("results/s"));
    assert!(stored.len() >= 2, "{stderr}");
    // Every probe prefilled its own prompts: nothing of a 512-token
    // prompt beyond what the server adds came from the cache.
    for (name, cell) in &stored {
        for q in cell["summary"]["requests"].as_array().unwrap() {
            let cached = q["cached_tokens"].as_u64().unwrap_or(0);
            assert!(cached < 16, "{name}: {cached} cached tokens in {q}");
        }
    }
    let r = report(dir.path());
    let row = &r["searches"][0];
    assert_eq!(row["state"], "boundary", "{row}\n{stderr}");
    let (pass, fail) = (
        row["boundary"].as_f64().unwrap(),
        row["first_fail"].as_f64().unwrap(),
    );
    assert_eq!((pass, fail), (2.0, 3.0), "{row}");
}
