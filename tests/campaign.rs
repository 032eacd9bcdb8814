//! `servebench plan` and `servebench run` end to end with the real binary:
//! launches, results, crash evidence, resume after SIGKILL, staleness,
//! signals, on the simulator (campaigns on the real llama.cpp server are
//! `real::llamacpp_campaign`).

use crate::common::{
    assert_timeline, campaign_head, cells, example, http_get, pids_with, run, sim_campaign,
    steady_sim_campaign, wait_until, write_campaign,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::BIN;

fn no_temporaries(root: &Path) {
    for s in std::fs::read_dir(root.join("cells")).unwrap().flatten() {
        for c in std::fs::read_dir(s.path()).unwrap().flatten() {
            let name = c.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with('.'), "temporary file left behind: {name}");
        }
    }
}

fn launches(root: &Path) -> usize {
    let Ok(logs) = std::fs::read_dir(root.join("logs")) else {
        return 0;
    };
    logs.flatten()
        .map(|l| {
            std::fs::read_to_string(l.path())
                .unwrap()
                .matches("\n===== ")
                .count()
        })
        .sum()
}

fn spawn_run(campaign: &Path) -> Child {
    Command::new(BIN)
        .args(["run", campaign.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn quickstart_runs_end_to_end_with_one_launch_per_server_and_crash_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let text = example("quickstart.toml");
    assert!(text.contains("expected_failure = true"));
    // First without the expectation: a crashed variant makes the exit code say so.
    let campaign = write_campaign(dir.path(), text.replace("expected_failure = true\n", ""));
    let (code, stdout, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(
        code, 3,
        "a crashed variant makes the exit code say some cells failed\n{stderr}"
    );
    let root = dir.path().join("results/quickstart");
    assert_eq!(launches(&root), 4, "one launch per server config");
    let cells = cells(&root);
    no_temporaries(&root);
    assert_eq!(cells.len(), 4 * 5, "{:?}", cells.keys().collect::<Vec<_>>());
    for (name, c) in &cells {
        if !name.starts_with("spec-crashy/") {
            assert_eq!(c["status"], "ok", "{name}");
            assert!(c["summary"]["output_throughput_tok_s"].as_f64().unwrap() > 0.0);
        }
    }
    let crashy: Vec<&serde_json::Value> = cells
        .iter()
        .filter(|(k, _)| k.starts_with("spec-crashy/"))
        .map(|(_, v)| v)
        .collect();
    let crashed: Vec<_> = crashy.iter().filter(|c| c["status"] == "failed").collect();
    assert_eq!(
        crashed.len(),
        1,
        "exactly one cell was running when the server died"
    );
    let f = &crashed[0]["failure"];
    assert_eq!(f["class"], "crashed");
    assert_eq!(f["cause"], "cuda_error");
    assert!(f["detail"]
        .as_str()
        .unwrap()
        .contains("CUDA error: an illegal instruction was encountered"));
    assert!(f["log_excerpt"]
        .as_str()
        .unwrap()
        .contains("illegal instruction"));
    let not_run = crashy.iter().filter(|c| c["status"] == "not_run").count();
    let ok = crashy.iter().filter(|c| c["status"] == "ok").count();
    assert!(not_run >= 1 && ok >= 1 && ok + not_run + 1 == 5);
    // Acceptance comes from the simulator's metric deltas over each cell:
    // 1 + 0.75 + 0.75² + 0.75³ ≈ 2.73 tokens per step for spec-k3.
    let spec = &cells["spec-k3/chat-in512-out128-c1"]["telemetry"]["spec"];
    assert!(
        spec["source"].as_str().unwrap().contains("metrics delta"),
        "{spec}"
    );
    let len = spec["acceptance"]["acceptance_length"].as_f64().unwrap();
    assert!((len - 2.73).abs() < 0.25, "acceptance length {len}");
    assert!(cells["baseline/chat-in512-out32-c1"]["telemetry"]["spec"].is_null());
    // The summary shows speedups over the baseline, and they are the
    // report's: every row's speedup and acceptance equal report.json's.
    assert!(
        stdout.contains("speedup") && stdout.contains("x /"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    let mut compared = 0;
    for row in report["cells"].as_array().unwrap() {
        let (server, cell) = (
            row["server_id"].as_str().unwrap(),
            row["cell_name"].as_str().unwrap(),
        );
        let line = stdout
            .lines()
            .find(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some(server) && w.next() == Some(cell)
            })
            .unwrap_or_else(|| panic!("{server}/{cell} missing from the summary:\n{stdout}"));
        let want = match (
            row["speedup_decode"].as_f64(),
            row["speedup_output"].as_f64(),
        ) {
            (Some(d), Some(t)) => format!("{d:.2}x / {t:.2}x"),
            _ => "-".to_string(),
        };
        assert!(line.trim_end().ends_with(&want), "{line} vs report {want}");
        if let Some(a) = row["acceptance_length"].as_f64() {
            assert!(
                line.contains(&format!(" {a:.2} ")),
                "{line} vs report acceptance {a}"
            );
        }
        compared += 1;
    }
    assert_eq!(compared, 20);
    // Running again reuses every measured cell (failed ones too, unless
    // --rerun-failed) and launches nothing: the server that crashed would
    // crash again, so its not-run cells are skipped with the crash as the
    // reason (--retry-crashed launches it).
    let baseline_before =
        std::fs::read(root.join("cells/baseline/chat-in512-out32-c1.json")).unwrap();
    // The shipped campaign marks the crash as expected: same identities
    // (the expectation changes no number), and exit code 0.
    write_campaign(dir.path(), &text);
    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(launches(&root), 4, "{stderr}");
    assert!(
        stderr.contains(&format!("{} reused", 20 - not_run)),
        "{stderr}"
    );
    let after = crate::common::cells(&root);
    let skipped: Vec<&String> = after
        .iter()
        .filter(|(k, c)| {
            k.starts_with("spec-crashy/")
                && c["status"] == "skipped"
                && c["failure"]["class"] == "crashed"
                && c["failure"]["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("on the last run") && d.contains("--retry-crashed"))
        })
        .map(|(k, _)| k)
        .collect();
    assert_eq!(skipped.len(), not_run, "{skipped:?}");
    assert_eq!(
        std::fs::read(root.join("cells/baseline/chat-in512-out32-c1.json")).unwrap(),
        baseline_before
    );
}

/// Three simulated servers at a 20 ms decode step, serving `model`.
fn slow_campaign(model: &str) -> String {
    campaign_head(
        "resume",
        model,
        "sim",
        &[
            "--decode-step-ms",
            "20",
            "--decode-step-per-seq-ms",
            "0",
            "--prefill-tok-s",
            "0",
        ],
    ) + r#"[[server]]
id = "a"
[[server]]
id = "b"
max_running_requests = 8
[[server]]
id = "c"
max_running_requests = 4
[[workload]]
name = "w"
input_len = 64
output_len = 10
concurrency = [1, 2, 3, 4]
num_requests = 3
[run]
grace_period = "2s"
health_timeout = "20s"
"#
}

#[test]
fn sigkill_mid_campaign_then_resume_measures_only_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let model = format!("resume-model-{}", std::process::id());
    let campaign = write_campaign(dir.path(), slow_campaign(&model));
    let root = dir.path().join("results/resume");
    let mut child = spawn_run(&campaign);
    wait_until(Duration::from_secs(60), "five stored cells", || {
        cells(&root).len() >= 5
    });
    // A second run on the same results is refused while the first holds them.
    let (code, _, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("pid {}", child.id())), "{err}");
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until(
        Duration::from_secs(30),
        "the orphaned server to die",
        || pids_with(&model).is_empty(),
    );
    let before = cells(&root);
    assert!(before.len() >= 5 && before.len() < 12, "{}", before.len());
    let launches_before = launches(&root);
    let bytes_before: BTreeMap<String, Vec<u8>> = before
        .keys()
        .map(|k| {
            (
                k.clone(),
                std::fs::read(root.join("cells").join(format!("{k}.json"))).unwrap(),
            )
        })
        .collect();

    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let after = cells(&root);
    assert_eq!(after.len(), 12);
    no_temporaries(&root);
    for (k, b) in &bytes_before {
        assert_eq!(
            &std::fs::read(root.join("cells").join(format!("{k}.json"))).unwrap(),
            b,
            "{k} was measured again"
        );
    }
    let servers_missing: std::collections::BTreeSet<&str> = after
        .keys()
        .filter(|k| !before.contains_key(*k))
        .map(|k| k.split('/').next().unwrap())
        .collect();
    assert_eq!(launches(&root) - launches_before, servers_missing.len());
    let measured = 12 - before.len();
    assert!(
        stderr.contains(&format!(
            "{measured} cells measured, {} reused",
            before.len()
        )),
        "{stderr}"
    );
    assert!(pids_with(&model).is_empty(), "no server left behind");
}

#[test]
fn changing_one_server_parameter_makes_only_its_cells_stale() {
    let dir = tempfile::tempdir().unwrap();
    let fast = slow_campaign("stale-model").replace("\"20\"", "\"1\"");
    let campaign = write_campaign(dir.path(), &fast);
    run_tallying(&campaign, "12 cells measured, 0 reused");
    write_campaign(
        dir.path(),
        fast.replace("max_running_requests = 8", "max_running_requests = 16"),
    );
    assert_only(&campaign, "b/", "stale: server max_running_requests 8 → 16");
    // A list names the part of it that changed, before and after.
    write_campaign(
        dir.path(),
        fast.replace(
            "id = \"c\"\n",
            "id = \"c\"\nargs = [\"--decode-step-per-seq-ms\", \"0\"]\n",
        ),
    );
    assert_only(
        &campaign,
        "c/",
        "stale: server args […] → […, --decode-step-per-seq-ms, 0]",
    );
    // Renaming a server and reordering keys changes nothing.
    write_campaign(dir.path(), fast.replace("id = \"c\"", "id = \"c2\""));
    let (_, stdout, _) = run(&["plan", "--json", campaign.to_str().unwrap()]);
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(plan["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["cells"].as_array().unwrap())
        .all(|c| c["verdict"] == "cached"));
}

/// Every planned cell of `campaign` as `server/cell` → `stale: reason`,
/// `cached`, `run`, … (the label `plan` prints).
fn plan_labels(campaign: &Path) -> BTreeMap<String, String> {
    let (code, stdout, stderr) = run(&["plan", "--json", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let mut out = BTreeMap::new();
    for g in plan["groups"].as_array().unwrap() {
        for c in g["cells"].as_array().unwrap() {
            let mut label = c["verdict"].as_str().unwrap().to_string();
            if let Some(r) = c["reason"].as_str() {
                label = format!("{label}: {r}");
            }
            out.insert(
                format!(
                    "{}/{}",
                    g["server"]["id"].as_str().unwrap(),
                    c["name"].as_str().unwrap()
                ),
                label,
            );
        }
    }
    out
}

/// Asserts that `plan` labels every cell whose `server/cell` key contains
/// `matching` with `label`, and every other cell `cached`.
fn assert_only(campaign: &Path, matching: &str, label: &str) {
    for (cell, got) in plan_labels(campaign) {
        let want = if cell.contains(matching) {
            label
        } else {
            "cached"
        };
        assert_eq!(got, want, "{cell}");
    }
}

/// Asserts that `plan` finds every cell of `campaign` stored.
fn assert_all_cached(campaign: &Path) {
    let labels = plan_labels(campaign);
    assert!(labels.values().all(|v| v == "cached"), "{labels:?}");
}

/// Runs `campaign` to exit 0 and asserts its closing tally (`N cells
/// measured, M reused`).
fn run_tallying(campaign: &Path, tally: &str) {
    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(tally), "{stderr}");
}

#[test]
fn editing_a_scenario_or_dataset_file_makes_exactly_its_cells_stale_and_run_measures_them_again() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |turn: &str, out: u32| {
        format!(
            "# two turns\nsystem = \"You are terse.\"\n[[turns]]\nuser = \"Name a prime.\"\noutput_len = 8\n[[turns]]\nuser = \"{turn}\"\noutput_len = {out}\n"
        )
    };
    std::fs::write(dir.path().join("talk.toml"), scenario("And another?", 8)).unwrap();
    let dataset = |n: u32| {
        (0..4)
            .map(|i| {
                format!(
                    "{{\"prompt\": \"Count to {}.\", \"output_len\": 6}}\n",
                    i + n
                )
            })
            .collect::<String>()
    };
    std::fs::write(dir.path().join("prompts.jsonl"), dataset(3)).unwrap();
    let text = steady_sim_campaign("files", "1")
        + r#"[[server]]
id = "a"
[[workload]]
name = "talk"
api = "chat"
scenario = "talk.toml"
output_len = 8
concurrency = 1
num_requests = 2
[[workload]]
name = "data"
dataset = "prompts.jsonl"
output_len = 8
concurrency = [1, 2]
num_requests = 4
[[workload]]
name = "plain"
input_len = 64
output_len = 8
concurrency = 1
num_requests = 2
"#;
    let campaign = write_campaign(dir.path(), &text);
    run_tallying(&campaign, "4 cells measured, 0 reused");
    let all_cached = plan_labels(&campaign);
    assert_all_cached(&campaign);

    // A comment and spacing edit sends nothing new: every cell is kept.
    std::fs::write(
        dir.path().join("talk.toml"),
        format!("# reworded comment\n\n{}", scenario("And another?", 8)),
    )
    .unwrap();
    assert_eq!(plan_labels(&campaign), all_cached);

    // One turn's text and length edited: the session cell alone is stale.
    std::fs::write(
        dir.path().join("talk.toml"),
        scenario("And a smaller one?", 4),
    )
    .unwrap();
    assert_only(&campaign, "/talk-", "stale: scenario file changed");
    run_tallying(&campaign, "1 cells measured, 3 reused");
    let talk = std::fs::read_to_string(
        dir.path()
            .join("results/files/cells/a/talk-sessions-out8-c1.json"),
    )
    .unwrap();
    // The edited turn's length (under the workload's cap) is what was asked for.
    assert!(talk.contains("\"requested_output_tokens\":4"), "{talk}");
    assert_all_cached(&campaign);

    // The dataset's content edited: both of its cells, and no other.
    std::fs::write(dir.path().join("prompts.jsonl"), dataset(5)).unwrap();
    assert_only(&campaign, "/data-", "stale: dataset file changed");
    run_tallying(&campaign, "2 cells measured, 2 reused");
}

#[test]
fn twin_servers_keep_and_reuse_only_their_own_cells() {
    let dir = tempfile::tempdir().unwrap();
    let text = steady_sim_campaign("twins", "1")
        + r#"[[server]]
id = "first"
max_running_requests = 8
[[server]]
id = "second"
max_running_requests = 8
[[server]]
id = "other"
max_running_requests = 4
[[workload]]
name = "w"
input_len = 64
output_len = 8
concurrency = [1, 2]
num_requests = 3
"#;
    let campaign = write_campaign(dir.path(), &text);
    run_tallying(&campaign, "6 cells measured, 0 reused");
    let root = dir.path().join("results/twins");
    let identity = |server: &str| {
        let cell: serde_json::Value = serde_json::from_slice(
            &std::fs::read(root.join(format!("cells/{server}/w-in64-out8-c1.json"))).unwrap(),
        )
        .unwrap();
        cell["identity"].as_str().unwrap().to_string()
    };
    assert_ne!(identity("first"), identity("second"));
    // One twin's cells removed: only that twin has cells to measure.
    std::fs::remove_dir_all(root.join("cells/second")).unwrap();
    assert_only(&campaign, "second/", "run");
    run_tallying(&campaign, "2 cells measured, 4 reused");
    // Renaming a twin keeps its cells: it is still the second of the two.
    write_campaign(
        dir.path(),
        text.replace("id = \"second\"", "id = \"again\""),
    );
    assert_all_cached(&campaign);
}

/// Asks, once, for the port it is launched with to be taken (by writing it
/// to `want-port`) and waits until something else listens there; then runs
/// the engine, which finds the port taken.
const PORT_THIEF: &str = r#"
import os, socket, sys, time
d, engine = sys.argv[1], sys.argv[2:]
marker = os.path.join(d, "asked")
if "--port" in engine and not os.path.exists(marker):
    open(marker, "w").close()
    port = engine[engine.index("--port") + 1]
    with open(os.path.join(d, "want-port.tmp"), "w") as f:
        f.write(port)
    os.rename(os.path.join(d, "want-port.tmp"), os.path.join(d, "want-port"))
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", int(port)), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
os.execv(engine[0], engine)
"#;

/// A process this test started, killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_foreign_server_on_the_picked_port_is_never_measured_and_the_server_starts_on_another() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    std::fs::write(d.join("thief.py"), PORT_THIEF).unwrap();
    // The foreign server: a healthy simulator this test starts on the port
    // the launch was given, outside the launch's processes.
    let want = d.join("want-port");
    let foreign = std::thread::spawn(move || {
        wait_until(
            Duration::from_secs(120),
            "the launch to give its port",
            || want.exists(),
        );
        let port = std::fs::read_to_string(&want).unwrap();
        let child = Command::new(BIN)
            .args(["sim", "--host", "127.0.0.1", "--port", port.trim()])
            .args(["--model-name", "sim-model"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        (port.trim().parse::<u16>().unwrap(), Killed(child))
    });
    let text = steady_sim_campaign("port", "1")
        + &format!(
            "executable = [\"python3\", \"{}\", \"{}\", \"{BIN}\", \"sim\"]\n",
            d.join("thief.py").display(),
            d.display()
        )
        + r#"[[server]]
id = "a"
[[workload]]
name = "w"
input_len = 64
output_len = 8
concurrency = [1, 2]
num_requests = 3
"#;
    let campaign = write_campaign(&d, &text);
    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    let (taken, _foreign) = foreign.join().unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "port {taken} was taken before the server bound it"
        )) && stderr.contains("starting it again on another port"),
        "{stderr}"
    );
    // The foreign server answered health checks and served nothing.
    let metrics = http_get(taken, "/metrics").unwrap();
    let served = metrics
        .lines()
        .find(|l| l.starts_with("sim:request_success_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert_eq!(served, "0", "{metrics}");
    // Both cells were measured on the second launch, on another port.
    let log = std::fs::read_to_string(d.join("results/port/logs/a.log")).unwrap();
    let launches: Vec<&str> = log.lines().filter(|l| l.starts_with("=====")).collect();
    assert_eq!(launches.len(), 2, "{log}");
    assert!(launches[0].contains(&format!("--port {taken} ")), "{log}");
    assert!(!launches[1].contains(&format!("--port {taken} ")), "{log}");
    for c in ["w-in64-out8-c1", "w-in64-out8-c2"] {
        let cell: serde_json::Value = serde_json::from_slice(
            &std::fs::read(d.join(format!("results/port/cells/a/{c}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(cell["status"], "ok", "{c}");
        let url = cell["server_run"]["url"].as_str().unwrap();
        assert!(
            launches[1].contains(&format!("--port {} ", &url[url.rfind(':').unwrap() + 1..])),
            "{c}: {url}"
        );
    }
}

#[test]
fn sigterm_and_sigint_stop_the_servers_process_group_within_the_grace_period() {
    for (sig, name) in [(libc::SIGTERM, "term"), (libc::SIGINT, "int")] {
        let dir = tempfile::tempdir().unwrap();
        let model = format!("signal-{name}-{}", std::process::id());
        let text = slow_campaign(&model).replace("\"20\"", "\"500\"");
        let campaign = write_campaign(dir.path(), &text);
        let mut child = spawn_run(&campaign);
        // The server is up (it logs its capacity once it listens, after its
        // signal handlers are in place).
        let log_path = dir.path().join("results/resume/logs/a.log");
        wait_until(Duration::from_secs(60), "the server to start", || {
            std::fs::read_to_string(&log_path).is_ok_and(|l| l.contains("sim: kv capacity"))
        });
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{name}");
        // The server was asked to stop (SIGTERM to its group), not merely
        // killed by its parent-death signal: the simulator logs the signal
        // it got and that it stopped by itself.
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        assert!(
            log.contains("interrupted: stopping"),
            "{name}: the server never got SIGTERM:\n{log}"
        );
        assert!(pids_with(&model).is_empty(), "{name}: server still alive");
        // Nothing half-measured was stored.
        for (_, c) in cells(&dir.path().join("results/resume")) {
            assert_ne!(c["status"], "not_run");
        }
    }
}

#[test]
fn malformed_campaigns_fail_with_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let base = slow_campaign("m");
    for (text, want) in [
        (
            base.replace(
                "concurrency = [1, 2, 3, 4]",
                "concurrency = [1, 2, 3, 4]\nconcurency = 3",
            ),
            ":23:1: unknown key `concurency`: did you mean `concurrency`?",
        ),
        (
            base.replace("num_requests = 3", "num_requests = \"three\""),
            ":23:16: expected a whole number of 0 or more, found the text \"three\"",
        ),
        (
            base.replace("kind = \"sim\"", "kind = \"tgi\""),
            ":8:8: unknown value `tgi`; allowed: ",
        ),
        (
            base.replace("[model]\npath = \"m\"\n", ""),
            "missing key `model`",
        ),
    ] {
        let p = write_campaign(dir.path(), &text);
        let (code, _, err) = run(&["plan", p.to_str().unwrap()]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(&p.display().to_string()) && err.contains(want),
            "want `{want}` in: {err}"
        );
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn example_commands_use_only_flags_the_engines_have() {
    for (file, engine) in [
        ("examples/sglang-hybrid-8gpu.toml", "sglang"),
        ("examples/vllm.toml", "vllm"),
    ] {
        let c = servebench::campaign::load_campaign(
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/"))
                .join(file)
                .as_path(),
        )
        .unwrap();
        let known: &[&str] = match engine {
            "sglang" => servebench::engine::sglang::KNOWN_FLAGS,
            _ => servebench::engine::vllm::KNOWN_FLAGS,
        };
        let plan =
            servebench::plan::build(&c, &Default::default(), &Default::default(), "servebench");
        let mut checked = 0;
        for g in &plan.groups {
            let argv = g
                .command
                .as_ref()
                .unwrap_or_else(|e| panic!("{file} {}: {e}", g.server.id));
            let generated = &argv[..argv.len() - g.server.args.len()];
            for flag in generated.iter().filter(|a| a.starts_with("--")) {
                assert!(
                    known.contains(&flag.as_str()),
                    "{file}: {} emits unknown flag {flag}",
                    g.server.id
                );
                checked += 1;
            }
        }
        assert!(checked > 30, "{file}: only {checked} flags checked");
        let (code, stdout, _) = run(&[
            "plan",
            "--show-commands",
            concat!(env!("CARGO_MANIFEST_DIR"), "/examples/vllm.toml"),
        ]);
        assert_eq!(code, 0);
        assert!(stdout.contains("--speculative-config '{\"method\":\"eagle3\""));
    }
}

#[test]
fn logs_command_reads_engine_facts_and_the_crash_cause() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    std::fs::write(&log, "sim: kv capacity 65536 tokens, max running requests 64, context length 32768\nsim: ready on 127.0.0.1:9\nCUDA error: an illegal instruction was encountered\n").unwrap();
    let (code, stdout, _) = run(&["logs", log.to_str().unwrap(), "--engine", "sim", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["kv_cache_tokens"], 65536);
    assert_eq!(v["max_running_requests"], 64);
    let (_, stdout, _) = run(&["logs", log.to_str().unwrap(), "--engine", "sim"]);
    assert!(
        stdout.contains("failure cause: CudaError at line 3"),
        "{stdout}"
    );
}

#[test]
fn plan_of_the_sglang_example_skips_what_cannot_fit_and_shows_kv_capacity() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/sglang-hybrid-8gpu.toml"
    ));
    let c = servebench::campaign::load_campaign(path).unwrap();
    let plan = servebench::plan::build(&c, &Default::default(), &Default::default(), "servebench");
    for g in &plan.groups {
        let skips: Vec<&String> = g
            .cells
            .iter()
            .filter_map(|cell| match &cell.verdict {
                servebench::plan::Verdict::Skip(r) => Some(r),
                _ => None,
            })
            .collect();
        if g.server.tp == 8 {
            // GPU 0 is excluded, so the pool holds 7 GPUs.
            assert_eq!(skips.len(), g.cells.len(), "{}", g.server.id);
            assert!(
                skips[0].contains("needs 8 GPUs but the pool has 7"),
                "{}",
                skips[0]
            );
        } else {
            let m = g
                .memory
                .as_ref()
                .unwrap_or_else(|| panic!("{}: no memory estimate", g.server.id));
            assert!(
                m.kv_capacity_tokens > 0 && m.state_slots.is_some(),
                "{}: {m:?}",
                g.server.id
            );
        }
    }
    let (code, stdout, _) = run(&["plan", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("KV capacity") && stdout.contains("state slots"),
        "{stdout}"
    );
    assert!(
        stdout.contains("all 21 cells skipped: tp=8 needs 8 GPUs"),
        "{stdout}"
    );
}

/// The main campaign as shipped, its model files named by absolute path so
/// the copy can live anywhere; `extra` is appended.
fn main_campaign(dir: &Path, extra: &str) -> servebench::campaign::Campaign {
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models");
    let text = include_str!("../examples/sglang-hybrid-8gpu.toml")
        .replace("\"models/", &format!("\"{models}/"))
        + extra;
    servebench::campaign::load_campaign(&write_campaign(dir, &text)).unwrap()
}

#[test]
fn plan_counts_the_drafter_reads_engine_flags_and_gives_one_running_cap_per_server() {
    let dir = tempfile::tempdir().unwrap();
    let c = main_campaign(
        dir.path(),
        "\n[[server]]\nid = \"ar-tp1-slots8\"\ntp = 1\nargs = [\"--max-mamba-cache-size\", \"8\"]\n",
    );
    let plan = servebench::plan::build(&c, &Default::default(), &Default::default(), "servebench");
    let memory = |id: &str| {
        plan.groups
            .iter()
            .find(|g| g.server.id == id)
            .and_then(|g| g.memory.clone())
            .unwrap_or_else(|| panic!("no memory for {id}"))
    };
    // The DFlash drafter's weights are counted, so its KV room is smaller.
    let (ar, dflash) = (memory("ar-tp1"), memory("dflash-tp1-b16"));
    assert!(
        dflash.line().contains("+ drafter 3.2 GiB"),
        "{}",
        dflash.line()
    );
    assert!(dflash.kv_capacity_tokens < ar.kv_capacity_tokens);
    // A flag of SGLang's own in args sizes the state pool.
    let fixed = memory("ar-tp1-slots8");
    assert_eq!(fixed.state_slots, Some(8), "{}", fixed.line());
    assert_ne!(ar.state_slots, Some(8));
    // Every cell above a server's running cap says that same cap, no other.
    let mut capped = 0;
    for g in &plan.groups {
        let Some(m) = &g.memory else { continue };
        if !m.errors.is_empty() {
            continue;
        }
        let cap = m.max_running_requests;
        for cell in &g.cells {
            let concurrency = match cell.workload.load {
                servebench::load::schedule::LoadShape::Concurrency { value } => value as u64,
                _ => continue,
            };
            let says = cell
                .warnings
                .iter()
                .any(|w| w.contains(&format!("exceed the {cap} the server will run at once")));
            assert_eq!(
                says,
                concurrency > cap,
                "{} {}: cap {cap}, {:?}",
                g.server.id,
                cell.name,
                cell.warnings
            );
            assert!(
                !cell
                    .warnings
                    .iter()
                    .any(|w| w.contains("state slots: requests will queue")),
                "{:?}",
                cell.warnings
            );
            capped += usize::from(says);
        }
    }
    assert!(capped > 0);
    // The ETA runs no more at once than that cap: on a server that runs one
    // request at a time, concurrency 8 takes as long as concurrency 1.
    let one_at_a_time = plan
        .groups
        .iter()
        .find(|g| {
            g.memory
                .as_ref()
                .is_some_and(|m| m.max_running_requests == 1)
        })
        .expect("a server whose state slots allow one request");
    let eta = |name: &str| {
        one_at_a_time
            .cells
            .iter()
            .find(|cell| cell.name == name)
            .map(|cell| cell.eta_s)
            .unwrap()
    };
    assert_eq!(
        eta("decode-kinds-out256-c1"),
        eta("decode-kinds-out256-c8"),
        "{}",
        one_at_a_time.server.id
    );
    let (code, stdout, _) = run(&["plan", c.file.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("the server will cap it at") && stdout.contains("--max-running-requests"),
        "{stdout}"
    );
}

#[test]
fn plan_without_a_readable_model_config_says_memory_was_not_estimated() {
    let dir = tempfile::tempdir().unwrap();
    let text = include_str!("../examples/sglang-hybrid-8gpu.toml").replace(
        "config = \"models/Qwen3.6-27B\"",
        "config = \"no-such-model\"",
    );
    let p = write_campaign(dir.path(), &text);
    let (code, stdout, err) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("memory: memory not estimated: the model config cannot be read"),
        "{stdout}"
    );
    assert!(!stdout.contains("weights 0.0 GiB"), "{stdout}");
    assert!(!stdout.contains("max running 0"), "{stdout}");
}

#[test]
fn init_writes_the_model_files_its_campaign_reads_so_plan_estimates_memory() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, file, shows) in [
        ("sglang", "sg.toml", "+ drafter 3.2 GiB"),
        ("vllm", "v.toml", "KV capacity"),
    ] {
        let out = dir.path().join(file);
        let (code, _, err) = run(&[
            "init",
            "--engine",
            engine,
            "--output",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        let (code, stdout, err) = run(&["plan", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(stdout.contains(shows), "{engine}: {stdout}");
        assert!(
            !stdout.contains("memory not estimated"),
            "{engine}: {stdout}"
        );
    }
    // A second init beside the first leaves the user's model files alone.
    let config = dir.path().join("models/Qwen3.6-27B/config.json");
    std::fs::write(&config, "{}").unwrap();
    let again = dir.path().join("sg2.toml");
    let (code, _, err) = run(&[
        "init",
        "--engine",
        "sglang",
        "--output",
        again.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "{}");
}

/// The sglang example with one more matrix: an algorithm servebench has no
/// rules for, passed through by name with its own budget flag.
fn ddtree_campaign_with_a_pass_through(dir: &Path) -> PathBuf {
    let text = include_str!("../examples/sglang-hybrid-8gpu.toml").replace(
        "config = \"models/Qwen3.6-27B\"",
        &format!(
            "config = \"{}/examples/models/Qwen3.6-27B\"",
            env!("CARGO_MANIFEST_DIR")
        ),
    ) + r#"
[[matrix]]
id = "jetspec-tp{tp}-b{budget}"
tp = [1]
speculative = [{ algorithm = "JETSPEC", draft_model = "/models/jet", budget_flag = "--speculative-jetspec-budget" }]
budget = [16, 32]
"#;
    write_campaign(dir, &text)
}

#[test]
fn plan_shows_every_ddtree_server_with_its_budget_and_a_pass_through_with_its_own_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = ddtree_campaign_with_a_pass_through(dir.path());
    let (code, stdout, err) = run(&["plan", path.to_str().unwrap(), "--show-commands"]);
    assert_eq!(code, 0, "{err}");
    let mut commands: BTreeMap<String, String> = BTreeMap::new();
    let mut server = String::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("server ") {
            server = rest.split_whitespace().next().unwrap().to_string();
        } else if let Some(cmd) = line.strip_prefix("  command: ") {
            commands.insert(server.clone(), cmd.to_string());
        }
    }
    let mut ddtree = 0;
    for tp in [1, 4, 8] {
        for b in [8, 12, 15, 16, 32, 64] {
            let id = format!("ddtree-tp{tp}-b{b}");
            let cmd = commands
                .get(&id)
                .unwrap_or_else(|| panic!("no command for {id}: {stdout}"));
            for part in [
                "--speculative-algorithm DDTREE".to_string(),
                format!("--speculative-ddtree-budget {b} "),
                "--page-size 1 ".into(),
                "--disable-overlap-schedule".into(),
                "--speculative-draft-model-path /models/Qwen3.6-27B-DFlash".into(),
                format!("--tp-size {tp} "),
            ] {
                assert!(cmd.contains(&part), "{id}: `{part}` missing from {cmd}");
            }
            ddtree += 1;
        }
    }
    assert_eq!(ddtree, 18);
    assert!(commands["dflash-tp4-b16"].contains("--speculative-dflash-block-size 16"));
    assert!(!commands["ar-tp1"].contains("--speculative"));
    for b in [16, 32] {
        let cmd = &commands[&format!("jetspec-tp1-b{b}")];
        assert!(
            cmd.contains("--speculative-algorithm JETSPEC")
                && cmd.contains(&format!("--speculative-jetspec-budget {b}"))
                && cmd.contains("--speculative-draft-model-path /models/jet"),
            "{cmd}"
        );
    }
    assert_eq!(commands.len(), 3 + 3 + 18 + 2);
    for (id, cmd) in &commands {
        assert!(!cmd.contains('{'), "{id}: a placeholder left in {cmd}");
    }
    // What servebench does not know about the pass-through, it says.
    assert!(
        stdout.contains("cannot estimate memory: algorithm JETSPEC is passed through")
            && stdout.contains("cannot estimate ETA: algorithm JETSPEC"),
        "{stdout}"
    );
    // The budget is an axis of `--only`.
    let (code, stdout, _) = run(&["plan", path.to_str().unwrap(), "--only", "budget=16"]);
    assert_eq!(code, 0);
    let servers: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("server "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        servers,
        [
            "dflash-tp1-b16",
            "dflash-tp4-b16",
            "dflash-tp8-b16",
            "ddtree-tp1-b16",
            "ddtree-tp4-b16",
            "ddtree-tp8-b16",
            "jetspec-tp1-b16"
        ]
    );
}

#[test]
fn a_budget_sweep_on_the_simulator_charts_one_series_per_method_and_tp_over_every_budget() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_campaign(
        dir.path(),
        steady_sim_campaign("sweep", "1")
            + r#"[[matrix]]
id = "ar-tp{tp}"
tp = [1, 4, 8]
[[matrix]]
id = "dflash-tp{tp}-b{budget}"
tp = [1, 4]
speculative = [{ method = "dflash", draft_model = "/d", acceptance = 0.7 }]
budget = [16]
[[matrix]]
id = "ddtree-tp{tp}-b{budget}"
tp = [1, 4, 8]
speculative = [{ method = "ddtree", draft_model = "/d", acceptance = 0.7 }]
budget = [8, 12, 15, 16, 32, 64]
[[matrix]]
id = "jetspec-tp{tp}-b{budget}"
tp = [1]
speculative = [{ algorithm = "JETSPEC", acceptance = 0.6 }]
budget = [16, 32]
[[workload]]
name = "w"
input_len = 64
output_len = 24
concurrency = 1
num_requests = 2
[run]
baseline = "ar-tp1"
"#,
    );
    let (code, _, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let root = dir.path().join("results/sweep");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    let budget: Vec<&serde_json::Value> = report["charts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["section"] == "budget")
        .collect();
    let throughput = budget
        .iter()
        .find(|c| {
            c["title"]
                .as_str()
                .unwrap()
                .starts_with("Output throughput")
        })
        .unwrap_or_else(|| panic!("no budget chart: {}", report["notes"]));
    let series: BTreeMap<&str, Vec<f64>> = throughput["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                s["points"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p[0].as_f64().unwrap())
                    .collect(),
            )
        })
        .collect();
    let all = vec![8.0, 12.0, 15.0, 16.0, 32.0, 64.0];
    assert_eq!(
        series.keys().copied().collect::<Vec<_>>(),
        [
            "ddtree tp1",
            "ddtree tp4",
            "ddtree tp8",
            "dflash tp1",
            "dflash tp4",
            "jetspec tp1"
        ]
    );
    for tp in [1, 4, 8] {
        assert_eq!(series[format!("ddtree tp{tp}").as_str()], all);
    }
    assert_eq!(series["jetspec tp1"], [16.0, 32.0]);
    // The budget is a column of the CSV, per server.
    let csv = std::fs::read_to_string(root.join("report.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "budget").unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with("ddtree-tp8-b64,"))
        .unwrap_or_else(|| panic!("{csv}"));
    assert_eq!(row.split(',').nth(col), Some("64"));
}

#[test]
fn the_event_log_follows_the_quickstart_crash_in_order_and_covers_every_cell() {
    let dir = tempfile::tempdir().unwrap();
    let text = example("quickstart.toml");
    let p = write_campaign(dir.path(), &text);
    let log = dir.path().join("events.jsonl");
    let (code, _, err) = run(&[
        "run",
        p.to_str().unwrap(),
        "--log-json",
        log.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for e in &events {
        assert!(e["at"].as_str().is_some_and(|t| t.ends_with('Z')), "{e}");
    }
    let name = |e: &serde_json::Value| e["event"].as_str().unwrap().to_string();
    assert_eq!(name(&events[0]), "planned");
    assert_eq!(events[0]["cells"], 20);
    // The crashing variant, told event by event: one cell measured, the
    // server dies in the second, that cell fails and the other three are
    // stored as not run.
    let crashy: Vec<String> = events
        .iter()
        .filter(|e| e["server"] == "spec-crashy")
        .map(name)
        .collect();
    assert_eq!(
        crashy,
        [
            "group_started",
            "server_healthy",
            "cell_started",
            "cell_judged",
            "cell_stored",
            "cell_started",
            "server_crashed",
            "cell_stored",
            "cell_stored",
            "cell_stored",
            "cell_stored"
        ]
    );
    let crash = events
        .iter()
        .find(|e| e["event"] == "server_crashed")
        .unwrap();
    assert!(
        crash["detail"]
            .as_str()
            .unwrap()
            .contains("illegal instruction"),
        "{crash}"
    );
    let statuses: Vec<&str> = events
        .iter()
        .filter(|e| e["server"] == "spec-crashy" && e["event"] == "cell_stored")
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "failed", "not_run", "not_run", "not_run"]);
    // Every stored cell has its event, once.
    let mut stored: Vec<String> = events
        .iter()
        .filter(|e| e["event"] == "cell_stored")
        .map(|e| {
            format!(
                "{}/{}",
                e["server"].as_str().unwrap(),
                e["cell"].as_str().unwrap()
            )
        })
        .collect();
    stored.sort();
    let on_disk: Vec<String> = cells(&dir.path().join("results/quickstart"))
        .keys()
        .cloned()
        .collect();
    assert_eq!(stored.len(), 20);
    assert_eq!(stored, on_disk);
    // The last event is the outcome, and it is the exit code the run returned.
    let last = events.last().unwrap();
    assert_eq!(name(last), "finished");
    assert_eq!(
        (
            last["measured"].as_u64(),
            last["failed"].as_u64(),
            last["exit_code"].as_u64()
        ),
        (Some(17), Some(4), Some(0))
    );
}

#[test]
fn a_rate_above_the_servers_capacity_is_over_saturated_and_never_recommended() {
    let dir = tempfile::tempdir().unwrap();
    // Two requests at a time, 20 tokens at 5 ms each: about 20 requests/s
    // served. At 60 requests/s the queue grows while the arrivals last.
    let text = sim_campaign(
        "sat",
        &["--decode-step-per-seq-ms", "0", "--prefill-tok-s", "0"],
    ) + r#"[[server]]
id = "small"
max_running_requests = 2
args = ["--decode-step-ms", "5"]
[[workload]]
name = "w"
input_len = 64
output_len = 20
rate = [5, 60]
arrival = "constant"
num_requests = 45
slo = ["ttft=10s,tpot=1s"]
[run]
sample_interval_ms = 50
"#;
    let p = write_campaign(dir.path(), text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("results/sat/report.json")).unwrap())
            .unwrap();
    let row = |load: &str| {
        report["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["load"] == load)
            .unwrap_or_else(|| panic!("no {load}"))
            .clone()
    };
    let over = row("rate60");
    let why = over["over_saturated"]
        .as_str()
        .unwrap_or_else(|| panic!("{over}"));
    assert!(why.contains("time to first token rose"), "{why}");
    assert!(over["steady_output_tok_s"].as_f64().is_some(), "{over}");
    assert!(
        why.contains("the engine's queue grew through the window"),
        "{why}"
    );
    assert_eq!(row("rate5")["over_saturated"], serde_json::Value::Null);
    // Every request meets the loose SLO at both rates, so goodput alone
    // would pick the higher rate; it is never recommended.
    let picks = report["slo_picks"].as_array().unwrap();
    assert!(!picks.is_empty(), "{report}");
    for pick in picks {
        assert_eq!(pick["best"]["load"], "rate5", "{pick}");
    }
    assert!(out.contains("ok (over-saturated)"), "{out}");
    assert!(
        report["notes"]
            .to_string()
            .contains("cells over-saturated (the server fell behind the load)"),
        "{}",
        report["notes"]
    );
}

#[test]
fn every_cell_keeps_a_timeline_of_the_engine_and_the_client_on_one_clock() {
    let dir = tempfile::tempdir().unwrap();
    // Four users over 48 requests of 64 tokens at 5 ms a step: about 0.8 s.
    let text = steady_sim_campaign("tl", "5")
        + r#"[[server]]
id = "s"
max_running_requests = 4
[[workload]]
name = "w"
input_len = 64
output_len = 64
concurrency = 4
num_requests = 48
warmup = 2
"#;
    let p = write_campaign(dir.path(), text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let cells = cells(&dir.path().join("results/tl"));
    let cell = cells.values().next().expect("a cell");
    let tl = &cell["telemetry"]["timeline"];
    assert_eq!(tl["interval_ms"], 250, "{tl}");
    // At least one sample per 250 ms of the measured part.
    assert_timeline("tl", cell);
    let n = tl["t_s"].as_array().unwrap().len();
    let column = |name: &str| -> Vec<f64> {
        tl[name]
            .as_array()
            .unwrap_or_else(|| panic!("no {name} in {tl}"))
            .iter()
            .filter_map(|v| v.as_f64())
            .collect()
    };
    for name in ["running", "waiting", "kv_usage", "power_w"] {
        assert_eq!(tl[name].as_array().unwrap().len(), n, "{name}");
    }
    // The engine ran the four users and no more; its power lay between
    // its idle 100 W and its peak 700 W, from its own gauge.
    let running = column("running");
    assert!(running.iter().all(|r| *r <= 4.0), "{running:?}");
    assert!(running.contains(&4.0), "{running:?}");
    assert_eq!(tl["power_source"], "engine");
    let power = column("power_w");
    assert!(
        power.iter().all(|w| (100.0..=700.0).contains(w)),
        "{power:?}"
    );
    assert!(power.contains(&700.0), "{power:?}");
    // The client's side on the same clock: four in flight while running.
    let in_flight: Vec<u64> = tl["in_flight"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(in_flight.iter().all(|f| *f <= 4), "{in_flight:?}");
    assert!(in_flight.contains(&4), "{in_flight:?}");
    assert!(
        tl["sent"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .as_u64()
            .unwrap()
            <= 48
    );
    // No SLO, no pick: no timeline is drawn until one is asked for.
    let root = dir.path().join("results/tl");
    let charts_of = |root: &std::path::Path| -> Vec<serde_json::Value> {
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
        r["charts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["section"] == "timeline")
            .cloned()
            .collect()
    };
    assert!(charts_of(&root).is_empty());
    let name = cells.keys().next().unwrap().clone();
    let (code, _, err) = run(&["report", root.to_str().unwrap(), "--timeline", &name]);
    assert_eq!(code, 0, "{err}");
    let drawn = charts_of(&root);
    let titles: Vec<&str> = drawn.iter().map(|c| c["title"].as_str().unwrap()).collect();
    assert_eq!(
        titles,
        [
            format!("Inside {name}: requests over time"),
            format!("Inside {name}: KV-cache use and GPU power")
        ]
    );
    let names: Vec<&str> = drawn[0]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["in flight (client)", "running (engine)", "waiting (engine)"]
    );
    let html = std::fs::read_to_string(root.join("report.html")).unwrap();
    assert!(html.contains("id=\"timeline\""), "no timeline section");
}

#[test]
fn a_renamed_servers_reused_cells_show_under_its_new_id_in_every_report() {
    let dir = tempfile::tempdir().unwrap();
    let text = steady_sim_campaign("ren", "1")
        + r#"[[server]]
id = "before"
[[workload]]
name = "w"
input_len = 64
output_len = 8
concurrency = 1
num_requests = 2
"#;
    let p = write_campaign(dir.path(), &text);
    let (code, _, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    write_campaign(
        dir.path(),
        text.replace("id = \"before\"", "id = \"after\""),
    );
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // The cell is reused, not measured again, and shown under its new id.
    assert!(err.contains("0 cells measured, 1 reused"), "{err}");
    assert!(!out.contains("not measured"), "{out}");
    assert!(out.contains("deploy `after`"), "{out}");
    let root = dir.path().join("results/ren");
    let (code, table, _) = run(&["report", root.to_str().unwrap(), "--table"]);
    assert_eq!(code, 0);
    for text in [
        table,
        std::fs::read_to_string(root.join("report.json")).unwrap(),
        std::fs::read_to_string(root.join("report.md")).unwrap(),
        std::fs::read_to_string(root.join("report.csv")).unwrap(),
    ] {
        assert!(text.contains("after"), "{text}");
        assert!(!text.contains("before"), "{text}");
    }
}

#[test]
fn a_concurrency_that_never_happened_is_marked_under_loaded_and_never_recommended() {
    let dir = tempfile::tempdir().unwrap();
    // Eight requests cannot keep 32 users busy; a server that runs at most
    // 4 at once cannot serve 8 users, however many requests are sent.
    let text = sim_campaign(
        "reach",
        &["--decode-step-per-seq-ms", "0", "--prefill-tok-s", "0"],
    ) + r#"[[server]]
id = "base"
args = ["--decode-step-ms", "3"]
[[server]]
id = "capped"
max_running_requests = 4
args = ["--decode-step-ms", "1"]
[[workload]]
name = "w"
input_len = 64
output_len = 16
concurrency = [1, 8, 32]
num_requests = 8
slo = ["ttft=5s,tpot=1s"]
[run]
baseline = "base"
"#;
    let p = write_campaign(dir.path(), text);
    let (code, plan, err) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let warned: Vec<&str> = plan
        .lines()
        .filter(|l| l.contains("num_requests 8 cannot keep 32 requests in flight"))
        .collect();
    assert_eq!(warned.len(), 2, "one c32 cell per server:\n{plan}");
    assert!(warned.iter().all(|l| l.contains("-c32")), "{plan}");
    assert!(!plan.contains("cannot keep 8 requests"), "{plan}");
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("results/reach/report.json")).unwrap(),
    )
    .unwrap();
    let row = |server: &str, c: u64| {
        report["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["server_id"] == server && r["concurrency"] == c)
            .unwrap_or_else(|| panic!("no {server} c{c}"))
            .clone()
    };
    for server in ["base", "capped"] {
        let r = row(server, 32);
        let why = r["under_loaded"].as_str().unwrap_or_else(|| panic!("{r}"));
        assert!(
            why.starts_with("asked concurrency 32, reached ")
                && why.contains(" and 8 at most: only 8 requests were measured"),
            "{why}"
        );
        assert!(r["in_flight"].as_f64().unwrap() <= 8.0, "{r}");
        assert_eq!(row(server, 1)["under_loaded"], serde_json::Value::Null);
    }
    assert_eq!(row("base", 8)["under_loaded"], serde_json::Value::Null);
    let capped = row("capped", 8);
    assert!(
        capped["under_loaded"]
            .as_str()
            .is_some_and(|w| w.contains("the server runs at most 4 requests at once")),
        "{capped}"
    );
    // Nothing is recommended at a load that did not happen, and every
    // pick names the concurrency it reached.
    let picks = report["slo_picks"].as_array().unwrap();
    assert!(!picks.is_empty());
    for pick in picks {
        for place in ["best", "runner_up"] {
            let r = &pick[place];
            if r.is_null() {
                continue;
            }
            let (server, load) = (
                r["server_id"].as_str().unwrap(),
                r["load"].as_str().unwrap(),
            );
            assert_ne!(load, "c32", "{pick}");
            assert!(!(server == "capped" && load == "c8"), "{pick}");
            assert!(r["in_flight"].as_f64().is_some(), "{pick}");
        }
    }
    let text = std::fs::read_to_string(dir.path().join("results/reach/report.md")).unwrap();
    assert!(text.contains(" in flight)"), "{text}");
    assert!(out.contains("ok (under-loaded: "), "{out}");
    assert!(
        report["notes"]
            .to_string()
            .contains("cells under-loaded, not drawn or ranked"),
        "{}",
        report["notes"]
    );
    // The answer after `run` and after `report` is report.json's pick.
    let root = dir.path().join("results/reach");
    let (code, again, err) = run(&["report", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for printed in [&out, &again] {
        let answer = &printed[printed
            .find("Answer\n")
            .unwrap_or_else(|| panic!("{printed}"))..];
        for pick in picks {
            let best = &pick["best"];
            let line = format!(
                "w-in64-out16 under {}: deploy `{}` at {} ({:.1} in flight): {:.3} good req/s per GPU",
                pick["slo"].as_str().unwrap(),
                best["server_id"].as_str().unwrap(),
                best["load"].as_str().unwrap(),
                best["in_flight"].as_f64().unwrap(),
                best["value"].as_f64().unwrap()
            );
            assert!(answer.contains(&line), "{line}\n{answer}");
        }
        assert!(
            answer.contains(&format!("full report: {}/report.html", root.display())),
            "{answer}"
        );
    }
    // The long table only when asked for.
    assert!(!again.contains("out tok/s/GPU"), "{again}");
    let (_, table, _) = run(&["report", root.to_str().unwrap(), "--table"]);
    assert!(
        table.contains("out tok/s/GPU") && table.contains("Answer\n"),
        "{table}"
    );
}

#[test]
fn a_large_campaign_ends_with_counts_and_the_answer_not_a_row_per_cell() {
    let dir = tempfile::tempdir().unwrap();
    let levels: Vec<String> = (1..=21).map(|c| c.to_string()).collect();
    let text = steady_sim_campaign("big", "1")
        + &format!(
            r#"[[server]]
id = "a"
[[server]]
id = "b"
[[workload]]
name = "w"
input_len = 64
output_len = 4
concurrency = [{}]
num_requests = 21
[run]
baseline = "a"
"#,
            levels.join(", ")
        );
    let p = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("42 cells: 42 ok\n"), "{out}");
    assert!(!out.contains("w-in64-out4-c7 "), "no row per cell: {out}");
    assert!(
        out.contains("Answer\n  single stream, synthetic: deploy `"),
        "{out}"
    );
}

#[test]
fn a_crash_keeps_what_was_sent_skips_are_not_suspicious_and_a_rerun_does_not_relaunch_the_crasher()
{
    let dir = tempfile::tempdir().unwrap();
    let text = steady_sim_campaign("crash", "1")
        + r#"[[server]]
id = "fine"
[[server]]
id = "crashy"
args = ["--crash-after", "5"]
[[workload]]
name = "w"
input_len = 64
output_len = 8
concurrency = [1, 2]
num_requests = 8
[[workload]]
name = "tiny"
input_len = 16
output_len = 8
concurrency = 1
num_requests = 2
[run]
baseline = "fine"
health_timeout = "30s"
request_timeout = "30s"
"#;
    let p = write_campaign(dir.path(), text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 3, "the crash fails the run\n{out}\n{err}");
    let root = dir.path().join("results/crash");
    let stored = cells(&root);
    // A skip is not a measurement judged suspicious: it is infeasible.
    let skipped = &stored["fine/tiny-in16-out8-c1"];
    assert_eq!(skipped["status"], "skipped");
    assert_eq!(skipped["failure"]["class"], "infeasible", "{skipped}");
    // The crashed cell keeps what it sent and what came back.
    let crashed = &stored["crashy/w-in64-out8-c1"];
    assert_eq!(crashed["status"], "failed");
    assert_eq!(crashed["failure"]["class"], "crashed");
    let s = &crashed["summary"];
    let (ok, failed) = (
        s["completed"].as_u64().unwrap(),
        s["failed"].as_u64().unwrap(),
    );
    assert!(ok >= 1 && failed >= 1 && ok + failed <= 8, "{s}");
    let md = std::fs::read_to_string(root.join("report.md")).unwrap();
    assert!(md.contains(&format!("| {ok}/{failed} |")), "{md}");
    assert!(!md.contains("| 0/0 |"), "{md}");
    // The next run does not launch it again: its cells are skipped with
    // the crash as the reason, until asked.
    let (code, plan, _) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 0);
    let line = plan
        .lines()
        .find(|l| {
            l.contains("w-in64-out8-c2")
                && l.contains("the server crashed during cell w-in64-out8-c1 on the last run")
        })
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(line.contains("--retry-crashed"), "{line}");
    let (_, again, err) = run(&["run", p.to_str().unwrap()]);
    assert!(
        !err.contains("== server crashy") && !err.contains("crashy healthy"),
        "{err}"
    );
    let after = cells(&root);
    let skipped = &after["crashy/w-in64-out8-c2"];
    assert_eq!(skipped["status"], "skipped", "{again}");
    assert_eq!(skipped["failure"]["class"], "crashed");
    let (_, retry, _) = run(&["plan", p.to_str().unwrap(), "--retry-crashed"]);
    let crashy = &retry[retry
        .find("server crashy")
        .unwrap_or_else(|| panic!("{retry}"))..];
    let line = crashy
        .lines()
        .find(|l| l.contains("w-in64-out8-c2"))
        .unwrap_or_else(|| panic!("{retry}"));
    assert!(line.trim_end().ends_with("run"), "{line}");
}

#[test]
fn reasoning_is_timed_apart_from_the_answer_in_both_dialects_and_an_answerless_budget_fails() {
    let dir = tempfile::tempdir().unwrap();
    // Eight reasoning tokens 20 ms apart, then the answer: the first token
    // is reasoning, the first answer token is the ninth.
    let text = steady_sim_campaign("think", "20")
        + r#"[[server]]
id = "vllm-now"
args = ["--reasoning-tokens", "8", "--reasoning-field", "reasoning"]
[[server]]
id = "older"
args = ["--reasoning-tokens", "8", "--reasoning-field", "reasoning_content", "--reasoning-in-usage"]
[[server]]
id = "overthinker"
args = ["--reasoning-tokens", "100"]
[[workload]]
name = "w"
api = "chat"
input_len = 64
output_len = 16
concurrency = 1
num_requests = 3
[run]
baseline = "vllm-now"
health_timeout = "30s"
request_timeout = "30s"
"#;
    let p = write_campaign(dir.path(), text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 3, "the answerless cell fails the run\n{out}\n{err}");
    let stored = cells(&dir.path().join("results/think"));
    for (server, from_usage) in [("vllm-now", false), ("older", true)] {
        let cell = &stored[&format!("{server}/w-in64-out16-c1")];
        assert_eq!(cell["status"], "ok", "{server}: {}", cell["failure"]);
        let s = &cell["summary"];
        assert_eq!(s["reasoning_tokens"], 3 * 8, "{server}");
        for r in s["requests"].as_array().unwrap() {
            let chunks = r["chunks"].as_array().unwrap();
            let at = |i: usize| chunks[i][0].as_f64().unwrap();
            // The first chunk of any kind is TTFT; the first answer chunk,
            // after eight reasoning chunks, is the first-answer time.
            assert_eq!(r["ttft_ms"].as_f64().unwrap(), at(0), "{server}");
            assert_eq!(r["first_answer_ms"].as_f64().unwrap(), at(8), "{server}");
            // The server cannot send the answer before its schedule.
            assert!(at(8) - at(0) >= 8.0 * 20.0 * 0.95, "{server}: {r}");
            assert_eq!(r["reasoning_tokens"], 8, "{server}");
            assert_eq!(
                r["reasoning_from_usage"].as_bool().unwrap_or(false),
                from_usage
            );
            // The answer text is the answer only.
            let words = r["output"]["text"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count();
            assert_eq!(words, 8, "{server}: {r}");
        }
        let ttfa = s["ttfa_ms"]["p50"].as_f64().unwrap();
        let ttft = s["ttft_ms"]["p50"].as_f64().unwrap();
        assert!(ttfa >= ttft + 150.0, "{server}: {ttft} → {ttfa}");
    }
    let over = &stored["overthinker/w-in64-out16-c1"];
    assert_eq!(over["status"], "failed", "{over}");
    assert_eq!(over["failure"]["class"], "reasoning_exhausted");
    let detail = over["failure"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("no answer: reasoning used 16 of the 16 output tokens"),
        "{detail}"
    );
}

#[test]
fn an_engine_upgrade_makes_stored_cells_stale_with_the_versions_named() {
    let dir = tempfile::tempdir().unwrap();
    let text = |version: &str| {
        steady_sim_campaign("upgrade", "1")
            + &format!(
                r#"version_command = ["sh", "-c", "echo 'sim-engine {version}'"]
[[server]]
id = "s"
[[workload]]
name = "w"
input_len = 64
output_len = 4
concurrency = [1, 2]
num_requests = 2
"#
            )
    };
    let p = write_campaign(dir.path(), text("0.5.9"));
    let (code, plan, _) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        plan.contains("engine build: 0.5.9 (from `sh -c echo 'sim-engine 0.5.9'`)"),
        "{plan}"
    );
    let (code, _, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let root = dir.path().join("results/upgrade");
    for (name, c) in cells(&root) {
        assert_eq!(c["engine_build"]["version"], "0.5.9", "{name}");
    }
    // The engine was upgraded: every stored cell is stale, saying why.
    write_campaign(dir.path(), text("0.5.11"));
    let (_, plan, _) = run(&["plan", p.to_str().unwrap()]);
    let stale = plan
        .lines()
        .filter(|l| {
            l.contains("stale: engine version 0.5.9 → 0.5.11; --reuse-across-versions keeps it")
        })
        .count();
    assert_eq!(stale, 2, "{plan}");
    let (_, kept, _) = run(&["plan", p.to_str().unwrap(), "--reuse-across-versions"]);
    let cached = kept
        .lines()
        .filter(|l| l.trim_end().ends_with(" cached"))
        .count();
    assert_eq!(cached, 2, "{kept}");
    let (code, _, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("2 cells to run"),
        "re-measured on the new build: {err}"
    );
    for (name, c) in cells(&root) {
        assert_eq!(c["engine_build"]["version"], "0.5.11", "{name}");
    }
    let md = std::fs::read_to_string(root.join("report.md")).unwrap();
    assert!(md.contains("Engine build: `0.5.11` (2 cells)."), "{md}");
    // A declared version that the engine contradicts is said, with both.
    let declared = text("0.5.11").replace("[engine]\n", "[engine]\nversion = \"0.6.0\"\n");
    write_campaign(dir.path(), &declared);
    let (_, plan, _) = run(&["plan", p.to_str().unwrap()]);
    assert!(
        plan.contains("warning: [engine] version says 0.6.0 but the engine reports 0.5.11"),
        "{plan}"
    );
    // Without a version command the simulator is asked for the build it stands for.
    let plain = text("x").replace(
        "version_command = [\"sh\", \"-c\", \"echo 'sim-engine x'\"]\n",
        "",
    );
    write_campaign(dir.path(), &plain);
    let (_, plan, _) = run(&["plan", p.to_str().unwrap()]);
    assert!(
        plan.contains(&format!(
            "engine build: {} (from `",
            env!("CARGO_PKG_VERSION")
        )) && plan.contains(" sim --print-version`)"),
        "{plan}"
    );
}

#[test]
fn fast_servers_that_answer_wrong_are_caught_and_never_recommended() {
    let dir = tempfile::tempdir().unwrap();
    // The degenerate and the diverging servers are the fastest: without
    // reading the answers they would win every pick.
    let text = example("answers.toml");
    let p = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 3, "the degenerate cell fails the run\n{out}\n{err}");
    let root = dir.path().join("results/answers");
    let cells = cells(&root);
    let bad = &cells["lambda/w-in64-out48-c1"];
    assert_eq!(bad["status"], "suspicious");
    assert_eq!(bad["failure"]["class"], "degenerate_output");
    let detail = bad["failure"]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "4 of 4 answers are degenerate; first: `lambda` repeats over 48 of 48 words"
        ) && detail.contains("\"lambda lambda lambda"),
        "{detail}"
    );
    for ok in ["baseline/w-in64-out48-c1", "twin/w-in64-out48-c1"] {
        assert_eq!(cells[ok]["status"], "ok", "{ok}");
        let reqs = cells[ok]["summary"]["requests"].as_array().unwrap();
        assert!(reqs
            .iter()
            .all(|r| r["output"]["digest"].as_str().unwrap().len() == 16
                && r["output"]["text"]
                    .as_str()
                    .unwrap()
                    .split_whitespace()
                    .count()
                    == 48));
    }
    assert!(out.contains("suspicious (degenerate_output)"), "{out}");
    // The twin shares the baseline's settings, hence its cell identities;
    // both keep their own rows.
    for id in ["baseline ", "twin "] {
        assert!(
            out.lines().any(|l| l.starts_with(id)),
            "no row for {id}: {out}"
        );
    }
    // The diverging server streams ordinary text, only not the baseline's:
    // its stored cell is fine, the comparison with the baseline is not.
    assert_eq!(cells["diverge/w-in64-out48-c1"]["status"], "ok");
    assert!(
        out.lines()
            .any(|l| l.starts_with("diverge") && l.contains("suspicious (output_mismatch)")),
        "{out}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    let row = |id: &str| {
        report["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["server_id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(row("twin")["output_identical"], 1.0, "an exact twin agrees");
    assert_eq!(row("twin")["status"], "ok");
    assert_eq!(row("diverge")["output_identical"], 0.0);
    assert_eq!(row("diverge")["usable"], false);
    let problem = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["server_id"] == "diverge")
        .unwrap()
        .clone();
    assert_eq!(problem["class"], "output_mismatch");
    let evidence = problem["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with("4 of 4 answers differ from baseline `baseline`'s within their first 16 words (0 identical); first:"),
        "{evidence}"
    );
    assert!(report["notes"]
        .to_string()
        .contains("server `diverge`: 1 cells not ranked"));
    let picks = format!("{}{}", report["slo_picks"], report["stream_picks"]);
    assert!(
        picks.contains("\"twin\"") || picks.contains("\"baseline\""),
        "{picks}"
    );
    // Without the degenerate server, the mismatch alone fails the run.
    let dir2 = tempfile::tempdir().unwrap();
    let no_lambda = text.replace(
        "[[server]]\nid = \"lambda\"\nargs = [\"--decode-step-ms\", \"1\", \"--degenerate-after\", \"0\"]\n",
        "",
    );
    assert!(!no_lambda.contains("id = \"lambda\""));
    let (code2, _, err2) = run(&[
        "run",
        write_campaign(dir2.path(), &no_lambda).to_str().unwrap(),
    ]);
    assert_eq!(code2, 3, "{err2}");
    // Every pick names its winner and runner-up among the right answers,
    // and says which configs it left out for their answers.
    for pick in report["slo_picks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["stream_picks"].as_array().unwrap())
    {
        for place in ["best", "runner_up"] {
            let id = pick[place]["server_id"].as_str().unwrap_or("");
            assert!(
                !["lambda", "diverge", "eagle-wrong"].contains(&id),
                "{place} `{id}`: {pick}"
            );
        }
        let left_out: Vec<&str> = pick["excluded"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["wrong_answers_in"][0] == "w-in64-out48-c1")
            .map(|e| e["server_id"].as_str().unwrap())
            .collect();
        assert_eq!(left_out, ["diverge", "eagle-wrong", "lambda"], "{pick}");
    }
    let md = std::fs::read_to_string(root.join("report.md")).unwrap();
    assert!(
        md.contains("not ranked: `diverge` (wrong answers in w-in64-out48-c1), `eagle-wrong` (wrong answers in w-in64-out48-c1), `lambda` (wrong answers in w-in64-out48-c1)"),
        "{md}"
    );
    // One line per server on its answers, in the terminal and on each page.
    let lines = [
        "`twin`: 100% of 4 answers identical to the baseline's over 1 cells",
        "`diverge`: 0% of 4 answers identical to the baseline's over 1 cells; 4 differ within their first 16 words; differing answers part at word 4 (median); 1 cells output_mismatch (not ranked)",
        "`lambda`: no answers compared with the baseline's; 1 cells degenerate_output (not ranked)",
        // Speculative decoding that accepts wrong drafts: its first token
        // of each step is verified, the drafts after it are not the
        // baseline's words.
        "`eagle-wrong`: 0% of 4 answers identical to the baseline's over 1 cells; 4 differ within their first 16 words; differing answers part at word 2 (median); 1 cells output_mismatch (not ranked)",
    ];
    let html = std::fs::read_to_string(root.join("report.html")).unwrap();
    for l in lines {
        assert!(
            out.contains(&format!("  {l}\n")),
            "terminal lacks {l}:\n{out}"
        );
        assert!(md.contains(&format!("- {l}\n")), "report.md lacks {l}");
        assert!(html.contains(l), "report.html lacks {l}");
    }
    assert!(md.contains("## Answers\n\nRequests are greedy"), "{md}");
}

#[test]
fn sigkill_mid_cell_leaves_no_process_of_a_wrapper_that_forks_and_detaches_grandchildren() {
    let dir = tempfile::tempdir().unwrap();
    let model = format!("tree-model-{}", std::process::id());
    // A wrapper in the manner of `vllm serve`: the leader forks helpers,
    // one of them in a new session (out of the process group), one orphaned.
    let sleeper = format!("python3 -c 'import time; time.sleep(300)' {model}");
    let wrapper = format!(
        "setsid {sleeper} & ({sleeper} &); {sleeper} & exec {BIN} sim --host {{host}} --port {{port}} --model-name {model} --decode-step-ms 20 --decode-step-per-seq-ms 0 --prefill-tok-s 0"
    );
    let text = slow_campaign(&model)
        .replace(
            "kind = \"sim\"\nargs = [\"--decode-step-ms\", \"20\", \"--decode-step-per-seq-ms\", \"0\", \"--prefill-tok-s\", \"0\"]",
            &format!("kind = \"command\"\nexecutable = [\"/bin/sh\", \"-c\", {wrapper:?}]"),
        );
    assert!(text.contains("kind = \"command\""));
    let campaign = write_campaign(dir.path(), &text);
    let root = dir.path().join("results/resume");
    let mut child = spawn_run(&campaign);
    wait_until(Duration::from_secs(60), "a stored cell", || {
        !cells(&root).is_empty()
    });
    // The server and its three helpers are up, a cell is in flight.
    assert!(pids_with(&model).len() >= 4, "{:?}", pids_with(&model));
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until(
        Duration::from_secs(15),
        "every process of the killed campaign's server to die",
        || pids_with(&model).is_empty(),
    );
}

#[test]
fn campaign_secrets_reach_the_server_but_no_file_and_rotating_a_key_keeps_every_cell() {
    const KEY: &str = "sk-SECRET-123";
    let dir = tempfile::tempdir().unwrap();
    let campaign = write_campaign(
        dir.path(),
        sim_campaign(
            "secrets",
            &[
                "--api-key",
                "${SB_TEST_KEY}",
                "--decode-step-ms",
                "0",
                "--prefill-tok-s",
                "0",
            ],
        ) + r#"api_key_env = "SB_TEST_KEY"
secret_env = ["SITE_PASS"]
env = { HF_TOKEN = "${SB_TEST_KEY}", SITE_PASS = "plain-site-pass", PLAIN_SETTING = "visible-value" }
[[server]]
id = "a"
[[workload]]
name = "w"
input_len = 64
output_len = 4
concurrency = [1, 2]
num_requests = 2
[run]
grace_period = "2s"
health_timeout = "20s"
"#,
    );
    let with_key = |key: Option<&str>, args: &[&str]| {
        let mut cmd = Command::new(BIN);
        cmd.args(args).stdin(Stdio::null());
        match key {
            Some(k) => cmd.env("SB_TEST_KEY", k),
            None => cmd.env_remove("SB_TEST_KEY"),
        };
        let o = cmd.output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let c = campaign.to_str().unwrap();
    let (code, _, err) = with_key(None, &["run", c]);
    assert_eq!(code, 1, "an unset key variable is an error: {err}");
    assert!(err.contains("SB_TEST_KEY"), "{err}");
    // The sim refuses requests without the key: `ok` cells prove it was sent.
    let (code, _, err) = with_key(Some(KEY), &["run", c]);
    assert_eq!(code, 0, "{err}");
    let root = dir.path().join("results/secrets");
    let cells = cells(&root);
    assert_eq!(cells.len(), 2);
    for (name, cell) in &cells {
        assert_eq!(cell["status"], "ok", "{name}");
        assert_eq!(cell["server"]["env"]["PLAIN_SETTING"], "visible-value");
        assert_eq!(cell["server"]["env"]["HF_TOKEN"], "<redacted>");
        assert_eq!(cell["server"]["env"]["SITE_PASS"], "<redacted>");
        // Prompt lengths were counted by the server's /tokenize, which needs the key too.
        let counter = cell["summary"]["source"]["counter"].as_str().unwrap();
        assert!(counter.ends_with("/tokenize"), "{counter}");
    }
    let (code, _, err) = with_key(
        Some(KEY),
        &[
            "report",
            root.to_str().unwrap(),
            "--format",
            "json,html,csv",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, plan_out, _) = with_key(Some(KEY), &["plan", "--json", c]);
    assert_eq!(code, 0);
    let log = std::fs::read_to_string(root.join("logs/a.log")).unwrap();
    assert!(
        log.contains("--api-key '<redacted>'") || log.contains("--api-key <redacted>"),
        "{log}"
    );
    let written = crate::common::all_files(&root);
    assert!(written.len() >= 5, "{written:?}");
    for needle in [KEY, "plain-site-pass"] {
        // The campaign file is the user's; everything else servebench wrote.
        let leaked: Vec<PathBuf> = crate::common::files_containing(dir.path(), needle)
            .into_iter()
            .filter(|p| p != &campaign)
            .collect();
        assert_eq!(leaked, Vec::<PathBuf>::new(), "{needle} was written");
        assert!(!plan_out.contains(needle), "{needle} in plan output");
    }
    // A rotated key changes no measured number: every cell stays cached.
    let (code, stdout, _) = with_key(Some("sk-ROTATED-456"), &["plan", "--json", c]);
    assert_eq!(code, 0);
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let verdicts: Vec<&serde_json::Value> = plan["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["cells"].as_array().unwrap())
        .map(|c| &c["verdict"])
        .collect();
    assert_eq!(verdicts.len(), 2);
    assert!(verdicts.iter().all(|v| *v == "cached"), "{verdicts:?}");
}

#[test]
fn plan_probes_the_cpu_only_for_cpu_servers_and_scales_their_estimates_by_it() {
    let dir = tempfile::tempdir().unwrap();
    // Only the model's size enters the CPU prior: a sparse file of the
    // SmolLM2 GGUF's size stands in for it.
    let model = dir.path().join("model.gguf");
    std::fs::File::create(&model)
        .unwrap()
        .set_len(98_362_432)
        .unwrap();
    let campaign = write_campaign(
        dir.path(),
        format!(
            r#"
[campaign]
name = "cpu-probe"
results_dir = "results"
[model]
path = "{}"
[engine]
kind = "llamacpp"
executable = ["llama-server"]
args = ["--threads", "1"]
[[server]]
id = "ar"
[[workload]]
name = "w"
input_len = 64
output_len = 256
concurrency = 1
num_requests = 4
"#,
            model.display()
        ),
    );
    let (code, text, err) = run(&["plan", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("CPU speed: probe "), "{text}");
    let (code, json, err) = run(&["plan", "--json", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    let probe = plan["cpu"]["probe_bytes_per_s"].as_f64().unwrap();
    let factor = plan["cpu"]["factor"].as_f64().unwrap();
    assert!(probe > 1e6, "{probe}");
    let expected = (probe / servebench::plan::eta::REFERENCE_PROBE_BYTES_PER_S).clamp(0.05, 20.0);
    assert!((factor - expected).abs() < 1e-9, "{factor} vs {expected}");
    let basis = plan["groups"][0]["eta_basis"].as_str().unwrap();
    assert!(basis.contains(&format!("× {factor:.2}")), "{basis}");

    // The factor divides the CPU prior: start-up and the cell's load time.
    let c = servebench::campaign::load_campaign(&campaign).unwrap();
    let at = |factor: f64| {
        let opts = servebench::plan::PlanOptions {
            cpu: Some(servebench::plan::eta::CpuSpeed {
                probe_bytes_per_s: None,
                factor,
            }),
            ..Default::default()
        };
        let p = servebench::plan::build(&c, &Default::default(), &opts, "servebench");
        let g = &p.groups[0];
        let load = g.cells[0].eta_s - servebench::plan::eta::CELL_OVERHEAD_S;
        (g.startup_eta_s, load)
    };
    let (startup1, load1) = at(1.0);
    let (startup2, load2) = at(2.0);
    assert!((load1 / load2 - 2.0).abs() < 1e-9, "{load1} vs {load2}");
    let stop = servebench::plan::eta::stop_prior_s(servebench::engine::EngineKind::Llamacpp);
    assert!(
        ((startup1 - stop) / (startup2 - stop) - 2.0).abs() < 1e-9,
        "{startup1} vs {startup2}"
    );

    // The simulator's estimates come from its own timing model: no probe.
    let quick = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/quickstart.toml");
    let (code, json, err) = run(&["plan", "--json", quick]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(plan["cpu"].is_null(), "{}", plan["cpu"]);
}

/// Run an answer-checks campaign in `dir` whose `bad-math` server answers
/// wrong (the run exits 3): its results directory, the run's terminal
/// output and its report.json.
fn run_wrong_answers(dir: &Path, text: &str) -> (PathBuf, String, serde_json::Value) {
    let p = write_campaign(dir, text);
    let (code, out, err) = run(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 3, "the wrong answers fail the run\n{out}\n{err}");
    let root = dir.join("results/answer-checks");
    let report = serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    (root, out, report)
}

/// The answer figures of `server` in `report`.
fn answers_of(report: &serde_json::Value, server: &str) -> serde_json::Value {
    report["answers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["server_id"] == server)
        .unwrap_or_else(|| panic!("no answers of {server}: {}", report["answers"]))
        .clone()
}

/// Every pick of `report` is the baseline, with `bad-math` excluded.
fn assert_the_baseline_is_picked_over_bad_math(report: &serde_json::Value) {
    for pick in report["slo_picks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["stream_picks"].as_array().unwrap())
    {
        assert_eq!(pick["best"]["server_id"], "baseline", "{pick}");
        assert_eq!(pick["excluded"][0]["server_id"], "bad-math", "{pick}");
    }
}

#[test]
fn a_server_that_answers_arithmetic_wrong_at_the_same_speed_is_flagged_by_its_pass_rate() {
    let dir = tempfile::tempdir().unwrap();
    let text = example("answer-checks.toml");
    let (root, out, report) = run_wrong_answers(dir.path(), &text);
    let cells = cells(&root);
    // Every answer to a checkable prompt is checked when it arrives: the
    // baseline's pass, the spoiled ones do not.
    for (id, pass) in [("baseline", true), ("bad-math", false)] {
        let reqs = cells[&format!("{id}/checked-kinds-out64-c2")]["summary"]["requests"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(reqs.len(), 12);
        assert!(reqs.iter().all(|r| r["answer_check"] == pass), "{id}");
    }
    let both = "(baseline 6 of 6 on the same prompts, sign test p = 0.016), clearly worse: wrong_answers, not ranked";
    for l in [
        "`baseline`: the baseline: its answers are the reference; arithmetic: 6 of 6 answers pass their check; json-extraction: 6 of 6 answers pass their check".to_string(),
        format!("arithmetic: 0 of 6 answers pass their check {both} (first failures: checked-kinds-out64-c2 #"),
        format!("json-extraction: 0 of 6 answers pass their check {both} (first failures: checked-kinds-out64-c2 #"),
        "; 1 cells wrong_answers (not ranked)".to_string(),
    ] {
        assert!(out.contains(&l), "terminal lacks {l}:\n{out}");
        let md = std::fs::read_to_string(root.join("report.md")).unwrap();
        assert!(md.contains(&l), "report.md lacks {l}");
    }
    let bad = answers_of(&report, "bad-math");
    let arith = &bad["checks"][0];
    assert_eq!(arith["kind"], "arithmetic");
    assert_eq!(
        (
            &arith["checked"],
            &arith["passed"],
            &arith["baseline_passed"],
            &arith["losses"]
        ),
        (&6.into(), &0.into(), &6.into(), &6.into())
    );
    assert_eq!(arith["flagged"], true);
    let problem = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["server_id"] == "bad-math")
        .unwrap()
        .clone();
    assert_eq!(problem["class"], "wrong_answers");
    assert!(
        problem["evidence"]
            .as_str()
            .unwrap()
            .starts_with("arithmetic answers fail their check: 0 of 6 pass here, the baseline's 6 of 6 to the same prompts"),
        "{problem}"
    );
    assert_the_baseline_is_picked_over_bad_math(&report);
}

#[test]
fn a_server_with_right_shapes_and_wrong_values_is_flagged_with_its_reasons_and_never_ranked() {
    // The second server answers JSON extraction with every asked key and
    // wrong values, and arithmetic with the right figure as a discarded
    // first guess before a wrong final answer: shapes that pass a check of
    // keys and "the number appears somewhere".
    let dir = tempfile::tempdir().unwrap();
    let text = example("answer-checks.toml").replace(
        "args = [\"--wrong-answers\"]",
        "args = [\"--plausible-wrong-answers\"]",
    );
    assert!(text.contains("--plausible-wrong-answers"));
    let (root, _, report) = run_wrong_answers(dir.path(), &text);
    let cells = cells(&root);
    for (id, pass) in [("baseline", true), ("bad-math", false)] {
        let reqs = cells[&format!("{id}/checked-kinds-out64-c2")]["summary"]["requests"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(reqs.len(), 12);
        for r in &reqs {
            assert_eq!(r["answer_check"], pass, "{id}: {r}");
            // Every failed answer says why; a passed one has nothing to say.
            assert_eq!(r["answer_reason"].is_string(), !pass, "{id}: {r}");
        }
        if !pass {
            let reasons: Vec<&str> = reqs
                .iter()
                .map(|r| r["answer_reason"].as_str().unwrap())
                .collect();
            // Arithmetic: the final figure is judged, the discarded right one named before it is not.
            assert!(
                reasons.contains(&"expected 29 (±0.005) as the final answer, found 32.9"),
                "{reasons:?}"
            );
            // JSON: a wrong value, named by its path.
            assert!(
                reasons
                    .iter()
                    .any(|r| r.starts_with("$.") && r.contains("expected")),
                "{reasons:?}"
            );
        }
    }
    let bad = answers_of(&report, "bad-math");
    for check in bad["checks"].as_array().unwrap() {
        assert_eq!(check["passed"], 0, "{check}");
        assert_eq!(check["flagged"], true, "{check}");
        let shown = check["failures"].as_array().unwrap();
        assert_eq!(shown.len(), 3, "{check}");
        assert!(
            shown[0]
                .as_str()
                .unwrap()
                .starts_with("checked-kinds-out64-c2 #"),
            "{check}"
        );
    }
    let md = std::fs::read_to_string(root.join("report.md")).unwrap();
    assert!(
        md.contains("(first failures: checked-kinds-out64-c2 #"),
        "{md}"
    );
    assert_the_baseline_is_picked_over_bad_math(&report);
}

#[test]
fn a_campaigns_own_checks_file_judges_every_answer_and_flags_the_server_that_gets_them_wrong() {
    use servebench::workload::PromptKind;
    let dir = tempfile::tempdir().unwrap();
    // Two of the simulator's known prompts (it answers them right, or
    // plausibly wrong under the fault) with the user's own checks, and
    // two free prompts it answers with filler words.
    let lines = [
        serde_json::json!({"prompt": PromptKind::Arithmetic.variants()[0], "check": "number", "expected": 29, "tolerance": 0.005, "kind": "shop"}),
        serde_json::json!({"prompt": PromptKind::JsonExtraction.variants()[6], "check": "json", "expected": {"drug": "amoxicillin", "dose_mg": "500", "with_food": true}, "kind": "shop"}),
        serde_json::json!({"prompt": "Say anything at all.", "check": "regex", "expected": "^\\s*\\S", "kind": "free"}),
        serde_json::json!({"prompt": "Say the word banana and nothing else.", "check": "text", "expected": "banana", "kind": "free"}),
    ];
    let file: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("mine.jsonl"), file).unwrap();
    let text = example("answer-checks.toml")
        .replace(
            "args = [\"--wrong-answers\"]",
            "args = [\"--plausible-wrong-answers\"]",
        )
        .replace(
            "prompt_kinds = [\"arithmetic\", \"json-extraction\"]",
            "checks = \"mine.jsonl\"",
        );
    let (root, _, report) = run_wrong_answers(dir.path(), &text);
    let cells = cells(&root);
    let reqs = |id: &str| {
        cells[&format!("{id}/checked-checks-out64-c2")]["summary"]["requests"]
            .as_array()
            .unwrap()
            .clone()
    };
    // Every answer is checked, under its line's kind, with a reason when it fails.
    for id in ["baseline", "bad-math"] {
        let reqs = reqs(id);
        assert_eq!(reqs.len(), 12);
        for r in &reqs {
            assert!(r["answer_check"].is_boolean(), "{id}: {r}");
            assert_eq!(
                r["answer_reason"].is_string(),
                r["answer_check"] == false,
                "{id}: {r}"
            );
        }
        let free: Vec<&serde_json::Value> = reqs.iter().filter(|r| r["label"] == "free").collect();
        assert_eq!(free.len(), 6, "{id}");
        // The regex passes on words; the exact text never comes.
        assert_eq!(
            free.iter().filter(|r| r["answer_check"] == true).count(),
            3,
            "{id}"
        );
        let banana = free.iter().find(|r| r["answer_check"] == false).unwrap();
        assert!(
            banana["answer_reason"]
                .as_str()
                .unwrap()
                .starts_with("expected exactly \"banana\", found \""),
            "{banana}"
        );
    }
    let shop = |id: &str| -> Vec<serde_json::Value> {
        reqs(id)
            .into_iter()
            .filter(|r| r["label"] == "shop")
            .collect()
    };
    assert!(shop("baseline").iter().all(|r| r["answer_check"] == true));
    assert!(shop("bad-math").iter().all(|r| r["answer_check"] == false));
    let bad = answers_of(&report, "bad-math");
    let kinds: Vec<(&str, bool)> = bad["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["kind"].as_str().unwrap(), k["flagged"].as_bool().unwrap()))
        .collect();
    assert_eq!(kinds, [("free", false), ("shop", true)], "{bad}");
    for pick in report["slo_picks"].as_array().unwrap() {
        assert_eq!(pick["best"]["server_id"], "baseline", "{pick}");
    }
    // Editing the checks file makes its cells another measurement.
    let p = dir.path().join("campaign.toml");
    let (_, plan, _) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(plan.matches("  cached\n").count(), 2, "{plan}");
    let edited = std::fs::read_to_string(dir.path().join("mine.jsonl"))
        .unwrap()
        .replace("banana", "cherry");
    std::fs::write(dir.path().join("mine.jsonl"), edited).unwrap();
    let (_, plan, _) = run(&["plan", p.to_str().unwrap()]);
    assert_eq!(
        plan.matches("  stale: checks file changed\n").count(),
        2,
        "{plan}"
    );
    // A bad line is refused where the campaign names the file, with its line.
    std::fs::write(
        dir.path().join("mine.jsonl"),
        "{\"prompt\": \"x\", \"check\": \"regex\", \"expected\": \"(\"}\n",
    )
    .unwrap();
    let (code, _, err) = run(&["plan", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("campaign.toml:")
            && err.contains("mine.jsonl")
            && err.contains("line 1")
            && err.contains("not a regular expression"),
        "{err}"
    );
}

#[test]
fn compare_exits_3_naming_the_pass_rate_and_agreement_drop_of_a_server_that_starts_answering_wrong()
{
    let dir = tempfile::tempdir().unwrap();
    let wrong = example("answer-checks.toml");
    // BASE: the same campaign before the fault, both servers right.
    let good = wrong.replace("args = [\"--wrong-answers\"]\n", "");
    assert_ne!(good, wrong);
    let base_dir = dir.path().join("base");
    let new_dir = dir.path().join("new");
    std::fs::create_dir_all(&base_dir).unwrap();
    std::fs::create_dir_all(&new_dir).unwrap();
    let (code, out, err) = run(&["run", write_campaign(&base_dir, &good).to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, _, _) = run(&["run", write_campaign(&new_dir, &wrong).to_str().unwrap()]);
    assert_eq!(code, 3);
    let (b, n) = (
        base_dir.join("results/answer-checks"),
        new_dir.join("results/answer-checks"),
    );
    // Only the answers changed (a busy machine may add a speed flag too).
    let (code, out, err) = run(&["compare", b.to_str().unwrap(), n.to_str().unwrap()]);
    assert_eq!(code, 3, "{out}\n{err}");
    for l in [
        "answers: bad-math/arithmetic check: 6 of 6 pass in BASE, 0 in NEW on the same prompts (6 lost, 0 gained, sign test p = 0.016) REGRESSION",
        "answers: bad-math/json-extraction check: 6 of 6 pass in BASE, 0 in NEW on the same prompts (6 lost, 0 gained, sign test p = 0.016) REGRESSION",
        "answers: bad-math/agreement with `baseline`: 12 of 12 pass in BASE, 0 in NEW on the same prompts (12 lost, 0 gained, sign test p = 0.000) REGRESSION",
        "answers: baseline/arithmetic check: 6 of 6 pass in BASE, 6 in NEW on the same prompts (0 lost, 0 gained)\n",
    ] {
        assert!(out.contains(l), "lacks {l}:\n{out}");
    }
    // The same set against itself: nothing dropped, and every cell compared
    // with itself, not with the cell of its twin (the two servers share
    // settings, so their cells share an identity): every change is zero.
    let (code, out, _) = run(&["compare", b.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("0 regression(s) flagged"), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains(" identity")).collect();
    assert!(rows.len() >= 10, "{out}");
    for row in rows {
        assert!(row.contains("+0.0%"), "{row}");
    }
}

#[test]
fn a_campaign_replays_a_trace_at_two_time_scales_and_another_trace_file_is_another_cell() {
    let dir = tempfile::tempdir().unwrap();
    let slice = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/traces/azure-conv-500.csv"
    );
    let trace = dir.path().join("traffic.csv");
    std::fs::copy(slice, &trace).unwrap();
    let text = steady_sim_campaign("replay", "1")
        + r#"[[server]]
id = "a"
[[workload]]
name = "azure"
api = "chat"
trace = "traffic.csv"
time_scale = [40, 80]
num_requests = 120
length_scale = 0.25
slo = ["ttft=60s"]
"#;
    let campaign = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let cells = cells(&dir.path().join("results/replay"));
    let names: Vec<&String> = cells.keys().collect();
    assert_eq!(names, ["a/azure-trace-x40", "a/azure-trace-x80"]);
    let rows: Vec<Vec<u64>> = std::fs::read_to_string(slice)
        .unwrap()
        .lines()
        .skip(1)
        .take(120)
        .map(|l| l.split(',').skip(1).map(|x| x.parse().unwrap()).collect())
        .collect();
    for (name, c) in &cells {
        assert_eq!(c["status"], "ok", "{name}");
        let mut reqs = c["summary"]["requests"].as_array().unwrap().clone();
        reqs.sort_by_key(|r| r["index"].as_u64().unwrap());
        assert_eq!(reqs.len(), 120);
        // A prompt cannot be shorter than what the server adds around it
        // (the chat template), plus one token of text; the level says how
        // many were.
        let overhead = c["summary"]["source"]["template_overhead"]
            .as_u64()
            .unwrap();
        let mut short = 0;
        for (r, row) in reqs.iter().zip(&rows) {
            let input = ((row[0] as f64 * 0.25).round() as u64).max(1);
            short += (input <= overhead) as usize;
            assert_eq!(r["input_tokens"], input.max(overhead + 1), "{name}: {r}");
            assert_eq!(r["output_tokens"], row[1], "{name}");
        }
        assert!(short > 0);
        let said = c["summary"]["source"]["dataset"].as_str().unwrap();
        assert!(
            said.contains(&format!(
                "{short} prompts no longer than the {overhead} tokens the server adds"
            )),
            "{said}"
        );
        let source = &c["workload"]["source"];
        assert_eq!(source["kind"], "trace");
        assert_eq!(source["digest"].as_str().unwrap().len(), 16);
        assert_eq!(source["requests"], 120);
    }
    // x80 sends the same requests twice as fast as x40.
    let last = |name: &str| {
        cells[name]["summary"]["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["scheduled_ms"].as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    let (x40, x80) = (last("a/azure-trace-x40"), last("a/azure-trace-x80"));
    // Stored to the microsecond.
    assert!((x40 - 2.0 * x80).abs() < 0.01, "{x40} {x80}");
    // Over trace time: every request in the window of its trace time
    // (scheduled send × multiple), windows of one length for both cells,
    // and a chart of each.
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("results/replay/report.json")).unwrap(),
    )
    .unwrap();
    let windows = report["trace_windows"].as_array().unwrap();
    let length = windows[0]["length_s"].as_f64().unwrap();
    let span = x40 / 1000.0 * 40.0;
    assert_eq!(
        length,
        servebench::metrics::trace_shape::default_window_s(span)
    );
    for (name, scale) in [("a/azure-trace-x40", 40.0), ("a/azure-trace-x80", 80.0)] {
        let cell = name.trim_start_matches("a/");
        let mine: Vec<&serde_json::Value> =
            windows.iter().filter(|w| w["cell_name"] == cell).collect();
        let mut count: BTreeMap<u64, u64> = BTreeMap::new();
        for r in cells[name]["summary"]["requests"].as_array().unwrap() {
            let t = r["scheduled_ms"].as_f64().unwrap() / 1000.0 * scale;
            *count.entry((t / length).floor() as u64).or_default() += 1;
        }
        assert_eq!(mine.len(), count.len(), "{name}");
        for (w, (k, n)) in mine.iter().zip(&count) {
            assert_eq!(w["length_s"].as_f64(), Some(length));
            assert_eq!(w["start_s"].as_f64(), Some(*k as f64 * length), "{name}");
            assert_eq!(w["requests"], *n, "{name}");
            assert_eq!(w["slo_attainment"], 1.0, "{name}: {w}");
        }
        for title in [
            "TTFT p99 over trace time",
            "requests within the SLOs over trace time",
        ] {
            let title = format!("{cell}: {title}");
            let chart = report["charts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["title"] == title.as_str())
                .unwrap_or_else(|| panic!("no chart {title}"));
            assert_eq!(chart["section"], "trace");
            assert_eq!(
                chart["series"][0]["points"].as_array().unwrap().len(),
                count.len()
            );
        }
    }
    let md = std::fs::read_to_string(dir.path().join("results/replay/report.md")).unwrap();
    assert!(md.contains("## Over trace time"), "{md}");
    assert!(md.contains("100 % within the SLOs"), "{md}");
    // The same trace again: nothing to run. Another trace (one row's
    // output changed) is another cell, whatever its name.
    let (code, out, _) = run(&["plan", "--json", campaign.to_str().unwrap()]);
    assert_eq!(code, 0);
    let verdicts = |plan: &str| -> Vec<String> {
        let plan: serde_json::Value = serde_json::from_str(plan).unwrap();
        plan["groups"][0]["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["verdict"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(verdicts(&out), ["cached", "cached"]);
    let edited = std::fs::read_to_string(&trace)
        .unwrap()
        .replacen(",374,44", ",374,45", 1);
    std::fs::write(&trace, edited).unwrap();
    let (_, out, _) = run(&["plan", "--json", campaign.to_str().unwrap()]);
    assert!(verdicts(&out).iter().all(|v| v != "cached"), "{out}");
    // The trace's requests as a dataset under a closed loop: the same
    // lengths, no schedule; and clamped to the server's declared context.
    let closed = text
        .replace("time_scale = [40, 80]", "concurrency = 4")
        .replace("id = \"a\"", "id = \"a\"\ncontext_length = 1100");
    let (code, out, err) = run(&["run", write_campaign(dir.path(), &closed).to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let all = crate::common::cells(&dir.path().join("results/replay"));
    let c4 = &all["a/azure-trace-c4"];
    let said = c4["summary"]["source"]["dataset"].as_str().unwrap();
    assert!(
        said.contains("1 outputs shortened to fit the context"),
        "{said}"
    );
    let mut reqs = c4["summary"]["requests"].as_array().unwrap().clone();
    reqs.sort_by_key(|r| r["index"].as_u64().unwrap());
    assert_eq!(reqs.len(), 120);
    // (The first row's output was edited above.)
    assert_eq!(reqs[0]["output_tokens"], 45);
    for (r, row) in reqs.iter().zip(&rows).skip(1) {
        let input = ((row[0] as f64 * 0.25).round() as u64).max(1);
        let output = if input + row[1] > 1100 {
            1100 - input
        } else {
            row[1]
        };
        assert_eq!(r["output_tokens"], output);
    }
    assert!(c4["summary"]["latency"]["e2e_from_schedule_ms"].is_null());
    // A schedule and a load of its own at once is refused where it is declared.
    let bad = text.replace("time_scale = [40, 80]", "time_scale = 2\nconcurrency = 4");
    let (code, _, err) = run(&["plan", write_campaign(dir.path(), &bad).to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("campaign.toml:15:9: workload `azure`: give `time_scale` (the trace's own schedule) or `concurrency`/`rate`"),
        "{err}"
    );
}

#[test]
fn a_replay_killed_mid_cell_resumes_where_it_stopped_and_loses_only_what_was_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let slice = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/traces/azure-conv-500.csv"
    );
    // 500 requests over 129 s of trace at x8: a 16 s replay, long enough
    // to be killed in the middle of.
    let text = steady_sim_campaign("resume-replay", "2")
        + &format!(
            r#"[[server]]
id = "a"
[[workload]]
name = "azure"
api = "chat"
trace = "{slice}"
time_scale = 8
output_scale = 0.1
"#
        );
    let campaign = write_campaign(dir.path(), &text);
    let root = dir.path().join("results/resume-replay");
    let journal = root.join("cells/a/azure-trace-x8.journal.jsonl");
    let mut child = spawn_run(&campaign);
    let lines = || {
        std::fs::read_to_string(&journal)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    wait_until(Duration::from_secs(120), "100 journaled requests", || {
        lines() > 100
    });
    child.kill().unwrap();
    child.wait().unwrap();
    // What the killed run finished is on disk, whole lines only.
    let before = lines() - 1;
    assert!(cells(&root).is_empty(), "no cell was stored");
    let (code, out, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!journal.exists(), "the stored cell replaces its journal");
    let cell = &cells(&root)["a/azure-trace-x8"];
    assert_eq!(cell["status"], "ok", "{cell}");
    let reqs = cell["summary"]["requests"].as_array().unwrap();
    let mut seen: Vec<u64> = reqs.iter().map(|r| r["index"].as_u64().unwrap()).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), reqs.len(), "no request twice");
    // Every request the killed run finished was kept; only those in flight
    // when it died are missing (the simulator runs them at once: few).
    let lost = 500 - reqs.len();
    assert!(reqs.len() >= before, "{} < {before}", reqs.len());
    assert!(lost < 20, "{lost} lost");
    let warning = cell["summary"]["client"]["warnings"].to_string();
    assert!(
        warning.contains(&format!(
            "resumed after an interruption: {before} requests kept from the interrupted run, {lost} in flight then lost"
        )),
        "{warning}"
    );
}

/// A campaign replaying the Mooncake conversation fixture at 1/16 length
/// (outputs at 1/50, within 2,048 tokens) on simulated engines with a
/// 16-token prefix cache, 1 ms decode steps and instant prefill: `servers`
/// are its `[[server]]` tables, `load` the workload's request count and
/// time scales.
fn prefix_cache_replay(name: &str, servers: &str, load: &str) -> String {
    let args = [
        "--prefix-cache-block",
        "16",
        "--decode-step-ms",
        "1",
        "--decode-step-per-seq-ms",
        "0",
        "--prefill-tok-s",
        "0",
    ];
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/traces/mooncake-conversation-400.jsonl"
    );
    sim_campaign(name, &args)
        + servers
        + &format!(
            "[[workload]]\nname = \"conv\"\ntrace = \"{trace}\"\nlength_scale = 0.0625\noutput_scale = 0.02\nmax_context = 2048\n{load}"
        )
}

#[test]
fn a_replays_prefix_reuse_matches_its_prediction_until_the_engines_cache_is_too_small() {
    // Two simulated engines with a 16-token prefix cache: one with room
    // for the whole replay, one whose cache holds 4,096 tokens of the
    // replay's ~250,000 distinct prompt tokens.
    let dir = tempfile::tempdir().unwrap();
    let text = prefix_cache_replay(
        "pc",
        r#"[[server]]
id = "roomy"
args = ["--kv-capacity-tokens", "4194304"]
[[server]]
id = "small"
args = ["--kv-capacity-tokens", "4096"]
"#,
        "num_requests = 400\ntime_scale = 80\n",
    );
    let campaign = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("results/pc/report.json")).unwrap())
            .unwrap();
    let row = |id: &str| {
        report["prefix_cache"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["server_id"] == id)
            .unwrap_or_else(|| panic!("{}", report["prefix_cache"]))
            .clone()
    };
    let (roomy, small) = (row("roomy"), row("small"));
    eprintln!("{roomy}\n{small}");
    for r in [&roomy, &small] {
        assert_eq!(r["cache_block"], 16, "{r}");
        assert_eq!(r["requests"], 400, "{r}");
    }
    let (predicted, served) = (
        roomy["predicted"].as_f64().unwrap(),
        roomy["reported"].as_f64().unwrap(),
    );
    assert!(predicted > 0.05, "{roomy}");
    assert!((predicted - served).abs() * 100.0 <= 5.0, "{roomy}");
    assert!(roomy["note"].is_null(), "{roomy}");
    // The same prediction; less served, and the note says why.
    assert_eq!(small["predicted"], roomy["predicted"]);
    assert!(small["reported"].as_f64().unwrap() < served, "{small}");
    let note = small["note"].as_str().unwrap_or_else(|| panic!("{small}"));
    assert!(note.contains("points below the prediction"), "{note}");
    assert!(note.contains("the engine's KV cache holds 4096"), "{note}");
}

#[test]
fn a_trace_at_two_time_scales_on_one_launch_is_served_from_cache_only_as_its_own_ids_predict() {
    // One launch of a simulated engine with a 16-token prefix cache and
    // room for everything: the second cell (x160) must not find the
    // first cell's (x80) prompts in the cache, so each cell is served
    // what its own block ids predict. Resending the first cell's prompts
    // served the second one ~100 % from cache.
    let dir = tempfile::tempdir().unwrap();
    let text = prefix_cache_replay(
        "two-scales",
        "[[server]]\nid = \"roomy\"\nargs = [\"--kv-capacity-tokens\", \"4194304\"]\n",
        "num_requests = 200\ntime_scale = [80, 160]\n",
    );
    let campaign = write_campaign(dir.path(), &text);
    let (code, out, err) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("results/two-scales/report.json")).unwrap(),
    )
    .unwrap();
    let rows = report["prefix_cache"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["cell_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["conv-trace-x80", "conv-trace-x160"], "{rows:?}");
    for r in rows {
        let (predicted, served) = (
            r["predicted"].as_f64().unwrap(),
            r["reported"].as_f64().unwrap(),
        );
        assert!(predicted > 0.05, "{r}");
        assert!(
            (predicted - served).abs() * 100.0 <= 5.0,
            "served {served} against {predicted} predicted: {r}"
        );
        assert!(r["note"].is_null(), "{r}");
    }
    // Both cells replay the same requests: the same prediction.
    assert_eq!(rows[0]["predicted"], rows[1]["predicted"]);
}

#[test]
fn reset_prefix_cache_empties_the_cache_before_each_cell_and_each_cell_records_it() {
    // A dataset of one prompt (its text the same in every cell) on a
    // simulated engine with a 4-token prefix cache, one request at a time,
    // two repetitions on one launch. Without the reset, the second
    // repetition finds the first one's prompt cached from its first
    // request on; with it, every cell's first request prefills in full.
    let dir = tempfile::tempdir().unwrap();
    let prompt = "Summarise the following notes about the quarterly review in three sentences: revenue grew, churn fell, hiring slowed, and the new region opened late but ahead of its budget.";
    std::fs::write(
        dir.path().join("one.jsonl"),
        format!("{{\"prompt\": \"{prompt}\"}}\n"),
    )
    .unwrap();
    let text = |reset: bool| {
        sim_campaign(
            "reset",
            &[
                "--prefix-cache-block",
                "4",
                "--decode-step-ms",
                "1",
                "--decode-step-per-seq-ms",
                "0",
                "--prefill-tok-s",
                "0",
            ],
        ) + &format!(
            r#"[[server]]
id = "a"
[[workload]]
name = "same"
dataset = "one.jsonl"
output_len = 4
concurrency = 1
num_requests = 3
[run]
repetitions = 2
server_warmup = 0
reset_prefix_cache = {reset}
"#
        )
    };
    let first_cached = |reset: bool| {
        let campaign = write_campaign(dir.path(), text(reset));
        let (code, out, err) = run(&["run", campaign.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}\n{err}");
        let all = cells(&dir.path().join("results/reset"));
        assert_eq!(all.len(), 2, "{:?}", all.keys().collect::<Vec<_>>());
        let mut firsts = Vec::new();
        for (name, c) in &all {
            let reset_record = &c["prefix_cache_reset"];
            if reset {
                assert_eq!(reset_record["emptied"], true, "{name}: {reset_record}");
                assert_eq!(reset_record["attempts"], 1, "{name}: {reset_record}");
            } else {
                assert!(reset_record.is_null(), "{name}: {reset_record}");
            }
            let reqs = c["summary"]["requests"].as_array().unwrap();
            let first = reqs.iter().find(|r| r["index"] == 0).unwrap();
            firsts.push(first["cached_tokens"].as_u64().unwrap());
            // Later requests of a cell resend its prompt: cached either way.
            assert!(reqs
                .iter()
                .any(|r| r["cached_tokens"].as_u64().unwrap() > 0));
        }
        firsts
    };
    // Without the reset, one of the two cells starts on a warm cache.
    let warm = first_cached(false);
    assert_eq!(warm.iter().filter(|&&t| t > 0).count(), 1, "{warm:?}");
    // The setting is part of every cell's identity: turning it on measures
    // both cells again, each from an empty cache.
    let (_, plan, _) = run(&[
        "plan",
        write_campaign(dir.path(), text(true)).to_str().unwrap(),
    ]);
    assert_eq!(
        plan.matches("  stale: reset_prefix_cache turned on\n")
            .count(),
        2,
        "{plan}"
    );
    let cold = first_cached(true);
    assert_eq!(cold, [0, 0], "{cold:?}");
    // An engine with no reset endpoint is refused where the setting is written.
    let llama = text(true).replace("kind = \"sim\"", "kind = \"llamacpp\"");
    let (code, _, err) = run(&["plan", write_campaign(dir.path(), llama).to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("reset_prefix_cache: llamacpp offers no endpoint"),
        "{err}"
    );
}

#[test]
fn a_gpu_is_known_by_name_or_by_its_declared_bandwidth_and_the_plan_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/models/Qwen3-8B"
    );
    let campaign = |hardware: &str| {
        write_campaign(
            dir.path(),
            format!(
                r#"
[campaign]
name = "gpus"
results_dir = "results"
[model]
path = "{model}"
config = "{model}"
[engine]
kind = "vllm"
[hardware]
gpus = [0, 1, 2, 3]
{hardware}
[[server]]
id = "ar"
[[server]]
id = "tp4"
tp = 4
[[workload]]
name = "w"
input_len = 512
output_len = 256
concurrency = 1
num_requests = 4
"#
            ),
        )
    };
    let bases = |hardware: &str| {
        let (code, json, err) = run(&["plan", "--json", campaign(hardware).to_str().unwrap()]);
        assert_eq!(code, 0, "{hardware}: {err}");
        let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
        [0, 1].map(|i| plan["groups"][i]["eta_basis"].as_str().unwrap().to_string())
    };
    let basis = |hardware: &str| bases(hardware)[0].clone();
    // A workstation part the table knows, by any of its names.
    let pro = basis("gpu = \"RTX PRO 6000 Blackwell\"");
    assert!(pro.contains("rtx-pro-6000 1.79 TB/s"), "{pro}");
    // A GPU it does not know, by its declared bandwidth (and memory).
    let new = basis("gpu = \"x9000\"\ngpu_bandwidth = \"1.5TB/s\"\ngpu_memory = \"64GB\"");
    assert!(new.contains("x9000 1.50 TB/s"), "{new}");
    assert!(new.contains("compute not declared"), "{new}");
    // Declared figures take a known GPU's place.
    let tuned = basis("gpu = \"h100\"\ngpu_bandwidth = \"3TB/s\"\ngpu_bf16_tflops = 800");
    assert!(tuned.contains("h100 3.00 TB/s"), "{tuned}");
    assert!(tuned.contains("800 TFLOPS BF16 declared"), "{tuned}");
    // Nothing declared: the plan says it fell back, and why; four GPUs are
    // faster than one by a stated share.
    let [none, tp4] = bases("");
    assert!(
        none.contains("default guesses") && none.contains("no GPU model or bandwidth is declared"),
        "{none}"
    );
    assert!(
        tp4.contains("×2.89 for TP4 (85 % kept per doubling)"),
        "{tp4}"
    );
    // A name it does not know, without a bandwidth: refused where it is written.
    let (code, _, err) = run(&["plan", campaign("gpu = \"x9000\"").to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("campaign.toml:12:7: unknown GPU `x9000`"),
        "{err}"
    );
    assert!(err.contains("gpu_bandwidth"), "{err}");
    let (code, _, err) = run(&[
        "plan",
        campaign("gpu_bandwidth = \"fast\"").to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("campaign.toml:12:17: `fast` is not a bandwidth"),
        "{err}"
    );
}

#[test]
fn the_plan_totals_what_runs_and_its_eta_at_the_parallel_asked() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = write_campaign(
        dir.path(),
        sim_campaign("par", &[])
            + r#"[[server]]
id = "a"
args = ["--decode-step-ms", "10"]
[[server]]
id = "b"
args = ["--decode-step-ms", "20"]
[[server]]
id = "c"
args = ["--decode-step-ms", "40"]
[[workload]]
name = "w"
output_len = 64
concurrency = [1, 2]
num_requests = 8
"#,
    );
    let path = campaign.to_str().unwrap();
    let totals = |parallel: &str| {
        let (code, json, err) = run(&["plan", "--json", "--parallel", parallel, path]);
        assert_eq!(code, 0, "{err}");
        let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
        let groups: Vec<f64> = plan["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                let cells: f64 = g["cells"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["eta_s"].as_f64().unwrap())
                    .sum();
                cells + g["startup_eta_s"].as_f64().unwrap()
            })
            .collect();
        (plan["totals"].clone(), groups)
    };
    let (one, groups) = totals("1");
    assert_eq!(one["servers_to_launch"], 3);
    assert_eq!(one["cells"]["run"], 6);
    assert_eq!(one["parallel"], 1);
    let sum: f64 = groups.iter().sum();
    assert!(
        (one["sequential_eta_s"].as_f64().unwrap() - sum).abs() < 1e-6,
        "{one}"
    );
    assert_eq!(one["eta_s"], one["sequential_eta_s"]);
    // Three at once on a CPU machine: the slowest group is the wall time.
    let (three, _) = totals("3");
    let slowest = groups.iter().cloned().fold(0.0, f64::max);
    assert!(
        (three["eta_s"].as_f64().unwrap() - slowest).abs() < 1e-6,
        "{three}"
    );
    assert_eq!(three["sequential_eta_s"], one["sequential_eta_s"]);
    // `run --dry-run --parallel 3` says the same.
    let (code, out, err) = run(&["run", "--dry-run", "--parallel", "3", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        format!("{out}{err}").contains("with --parallel 3 ("),
        "{out}{err}"
    );
    // And so does the run itself: its planned ETA and the time left when
    // the first group starts are the wall time at three at once.
    let log = dir.path().join("events.jsonl");
    let (code, _, err) = run(&[
        "run",
        "--parallel",
        "3",
        "--log-json",
        log.to_str().unwrap(),
        path,
    ]);
    assert_eq!(code, 0, "{err}");
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |kind: &str| events.iter().find(|e| e["event"] == kind).unwrap().clone();
    let wall = three["eta_s"].as_f64().unwrap();
    assert!((of("planned")["eta_s"].as_f64().unwrap() - wall).abs() < 1e-6);
    let left = of("group_started")["eta_left_s"].as_f64().unwrap();
    assert!((left / wall - 1.0).abs() < 0.1, "{left} vs {wall}");
    assert!(left < 0.8 * sum, "{left} vs {sum} one after another");
}
