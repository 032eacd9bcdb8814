//! The quickstart campaign's HTML report opened in a real headless browser
//! (Debian's `chromium`, installed by scripts/setup-test-env.sh): the page
//! renders its charts, and nothing on it reaches for the network.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{sim_campaign, BIN};

/// Run a command with a deadline; returns (exit code, stdout).
fn run_with_deadline(cmd: &mut Command, limit: Duration) -> (Option<i32>, String) {
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(out_file.reopen().unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {cmd:?}: {e}; run scripts/setup-test-env.sh (it installs chromium)"
            )
        });
    let start = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (code, std::fs::read_to_string(out_file.path()).unwrap())
}

fn chromium(profile: &Path) -> Command {
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,2400",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn quickstart_report_renders_its_charts_in_a_headless_browser_without_network() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("quickstart.toml");
    let text = crate::common::example("quickstart.toml");
    std::fs::write(&campaign, text).unwrap();
    let out = Command::new(BIN)
        .arg("run")
        .arg(&campaign)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // spec-crashy crashes by design and is marked expected_failure: exit code 0.
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let results = dir.path().join("results/quickstart");
    let html = results.join("report.html");
    assert!(
        stderr.contains(&format!("report: {}", html.display())),
        "run must end with the report path: {stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("report.json")).unwrap()).unwrap();
    let charts = report["charts"].as_array().unwrap();
    let sections: Vec<&str> = charts
        .iter()
        .map(|c| c["section"].as_str().unwrap())
        .collect();
    // Three workload families (chat out32, chat out128, kinds): throughput, TTFT
    // and per-GPU charts for each, and tokens per joule (the simulator models
    // its power); one speedup chart; the budget sweep (3, 4 and 6) per family
    // at its lowest and highest load (chat: c1 and c8; kinds: c4 only), with
    // acceptance length at the lowest.
    for (section, n) in [
        ("throughput", 6),
        ("per_gpu", 6),
        ("speedup", 1),
        ("budget", 8),
    ] {
        assert_eq!(
            sections.iter().filter(|s| **s == section).count(),
            n,
            "{section}: {sections:?}"
        );
    }
    // The cells the SLO picks rest on, from the inside: requests over time,
    // and the simulator's KV-cache use and power.
    let inside: Vec<&str> = charts
        .iter()
        .filter(|c| c["section"] == "timeline")
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert!(inside.len() >= 2 && inside.len() % 2 == 0, "{inside:?}");
    assert!(
        inside.iter().all(|t| t.starts_with("Inside ")),
        "{inside:?}"
    );
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("agentic"),
        "the skipped per-turn chart is explained: {notes}"
    );
    assert!(report["problems"]
        .to_string()
        .contains("illegal instruction"));

    let profile = tempfile::tempdir().unwrap();
    let png = dir.path().join("shot.png");
    let url = format!("file://{}", html.display());
    let (code, _) = run_with_deadline(
        chromium(profile.path())
            .arg(format!("--screenshot={}", png.display()))
            .arg(&url),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "chromium --screenshot failed");
    if let Ok(keep) = std::env::var("SERVEBENCH_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bpp = info.line_size / info.width as usize;
    assert!(bpp >= 3, "unexpected PNG layout");
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(bpp).collect();
    let distinct: std::collections::HashSet<[u8; 3]> =
        pixels.iter().map(|p| [p[0], p[1], p[2]]).collect();
    let non_white = pixels
        .iter()
        .filter(|p| p[0] < 240 || p[1] < 240 || p[2] < 240)
        .count();
    // The first series colour (#4e79a7) must be painted: lines and markers drew.
    let blue = pixels
        .iter()
        .filter(|p| {
            (p[0] as i32 - 0x4e).abs() < 12
                && (p[1] as i32 - 0x79).abs() < 12
                && (p[2] as i32 - 0xa7).abs() < 12
        })
        .count();
    assert!(
        distinct.len() > 200,
        "only {} colours: the page looks blank",
        distinct.len()
    );
    assert!(
        non_white * 50 > pixels.len(),
        "{non_white} of {} pixels are not white",
        pixels.len()
    );
    assert!(blue > 200, "series colour drawn on only {blue} pixels");

    let profile = tempfile::tempdir().unwrap();
    let (code, dom) = run_with_deadline(
        chromium(profile.path()).arg("--dump-dom").arg(&url),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "chromium --dump-dom failed");
    assert_eq!(
        dom.matches("<svg").count(),
        charts.len(),
        "every chart in report.json is an <svg> in the DOM"
    );
    for needle in [
        "=\"http://",
        "=\"https://",
        "url(http",
        "url(\"http",
        "=\"//",
    ] {
        assert!(
            !dom.contains(needle),
            "the page references the network: {needle}"
        );
    }
}

/// The real part of a campaign shaped like our main user's: a baseline and
/// a server that crashes, over throughput, context, prompt-kind and agentic
/// workloads (12 cells each). The test gives the baseline's measured cells
/// to 26 more server configs (two drafting methods over TP and budgets), as
/// a campaign of 28 servers and 336 cells stores them.
fn large_campaign() -> String {
    sim_campaign(
        "large",
        &[
            "--decode-step-ms",
            "1",
            "--decode-step-per-seq-ms",
            "0",
            "--prefill-tok-s",
            "1000000",
        ],
    ) + r#"[[server]]
id = "ar-tp1"
[[server]]
id = "crashy-with-a-long-descriptive-name"
args = ["--crash-after", "6"]
expected_failure = true
[[workload]]
name = "chat"
input_len = 64
output_len = [4, 8]
concurrency = [1, 2, 4, 8]
num_requests = 8
slo = ["ttft=2s,tpot=1s"]
[[workload]]
name = "ctx"
input_len = [128, 256]
output_len = 4
concurrency = 1
num_requests = 2
[[workload]]
name = "kinds"
prompt_kinds = "all"
output_len = 4
concurrency = 1
num_requests = 5
[[workload]]
name = "agent"
api = "chat"
scenario = "calculator"
output_len = 4
concurrency = 1
num_requests = 1
[run]
baseline = "ar-tp1"
health_timeout = "30s"
request_timeout = "60s"
"#
}

/// Store `base`'s cells again as server `id` with TP `tp` and drafting
/// `method` at `budget` (none for autoregressive).
fn clone_server(root: &Path, id: &str, tp: u64, spec: Option<(&str, u64)>) {
    let from = root.join("cells/ar-tp1");
    let to = root.join("cells").join(id);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(&from).unwrap() {
        let path = e.unwrap().path();
        let mut cell: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        cell["server_id"] = id.into();
        cell["identity"] = format!("{}-{id}", cell["identity"].as_str().unwrap()).into();
        cell["server"]["id"] = id.into();
        cell["server"]["tp"] = tp.into();
        if let Some((method, budget)) = spec {
            cell["server"]["speculative"] =
                serde_json::json!({ "method": method, "num_draft_tokens": budget });
        }
        std::fs::write(
            to.join(path.file_name().unwrap()),
            serde_json::to_vec(&cell).unwrap(),
        )
        .unwrap();
    }
}

#[test]
fn a_campaign_of_300_cells_reports_charts_of_at_most_twelve_distinct_series_with_uncut_legends() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("large.toml");
    std::fs::write(&campaign, large_campaign()).unwrap();
    let out = Command::new(BIN)
        .arg("run")
        .arg(&campaign)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = dir.path().join("results/large");
    let mut servers = vec![
        "ar-tp1".to_string(),
        "crashy-with-a-long-descriptive-name".to_string(),
    ];
    clone_server(&results, "ar-tp2", 2, None);
    servers.push("ar-tp2".into());
    for method in ["eagle", "eagle3"] {
        for tp in [1, 2] {
            for budget in [2, 3, 4, 5, 6, 8] {
                let id = format!("{method}-tp{tp}-b{budget}");
                clone_server(&results, &id, tp, Some((method, budget)));
                servers.push(id);
            }
        }
    }
    clone_server(&results, "ar-again", 1, None);
    servers.push("ar-again".into());
    let meta_path = results.join("campaign.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["servers"] = servers.clone().into();
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let out = Command::new(BIN)
        .arg("report")
        .arg(&results)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Answer\n"), "{stdout}");

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("report.json")).unwrap()).unwrap();
    let cells = report["cells"].as_array().unwrap().len();
    assert!(cells >= 300, "{cells} cells");
    let charts = report["charts"].as_array().unwrap();
    let mut split = 0;
    for c in charts {
        let series = c["series"].as_array().unwrap();
        let title = c["title"].as_str().unwrap();
        assert!(series.len() <= 12, "{title}: {} series", series.len());
        split += usize::from(title.contains(" (part "));
        // Distinct colour slot or line style for every series: slots map to
        // (colour, marker shape) pairs that repeat only after 40.
        let mut styles = std::collections::HashSet::new();
        for s in series {
            let slot = s["color"].as_u64().unwrap();
            let key = (slot % 40, s["style"].as_str().unwrap().to_string());
            assert!(styles.insert(key), "{title}: two series drawn alike");
        }
    }
    assert!(split > 0, "the charts of 28 servers are split");
    let agentic = charts.iter().filter(|c| c["section"] == "agentic").count();
    assert!(agentic >= 5, "54 per-turn series in parts of 12: {agentic}");
    // Each context chart holds its own workload's prompt lengths only.
    let mut context = 0;
    for c in charts.iter().filter(|c| c["section"] == "context") {
        context += 1;
        for s in c["series"].as_array().unwrap() {
            for p in s["points"].as_array().unwrap() {
                let x = p[0].as_f64().unwrap();
                assert!(x == 128.0 || x == 256.0, "{}: x = {x}", c["title"]);
            }
        }
    }
    assert!(context >= 2);
    // Failures are grouped: one row per (server, status, class).
    let problems = report["problems"].as_array().unwrap().len();
    let groups = report["problem_groups"].as_array().unwrap();
    assert!(
        problems > groups.len() && !groups.is_empty(),
        "{problems} vs {groups:?}"
    );
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(
        html.contains("… and "),
        "a long group lists a few cells and a count"
    );

    // A real browser measures every legend entry against its chart.
    let probe = html.replace(
        "</body>",
        r#"<script>window.addEventListener('load', () => {
  let n = 0, cut = [];
  for (const svg of document.querySelectorAll('svg.chart')) {
    const w = svg.viewBox.baseVal.width, h = svg.viewBox.baseVal.height;
    for (const t of svg.querySelectorAll('text.legend')) {
      n++;
      const b = t.getBBox();
      if (b.x + b.width > w || b.y + b.height > h) cut.push(t.textContent);
    }
  }
  document.body.setAttribute('data-legends', n + ':' + cut.length + ':' + cut.join('|'));
});</script></body>"#,
    );
    let page = dir.path().join("probe.html");
    std::fs::write(&page, probe).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let (code, dom) = run_with_deadline(
        chromium(profile.path())
            .arg("--virtual-time-budget=10000")
            .arg("--dump-dom")
            .arg(format!("file://{}", page.display())),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "chromium --dump-dom failed");
    let attr = dom
        .split("data-legends=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("the probe did not run"));
    let mut parts = attr.splitn(3, ':');
    let n: usize = parts.next().unwrap().parse().unwrap();
    let cut: usize = parts.next().unwrap().parse().unwrap();
    assert!(n > 100, "{n} legend entries");
    assert_eq!(cut, 0, "legends cut: {}", parts.next().unwrap_or(""));
}
