//! The quickstart campaign's HTML report opened in a real headless browser
//! (Debian's `chromium`, installed by scripts/setup-test-env.sh): the page
//! renders its charts, and nothing on it reaches for the network.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::BIN;

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
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/quickstart.toml"
    ))
    .unwrap()
    .replace("results_dir = \"../results\"", "results_dir = \"results\"");
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
    // and per-GPU charts for each; one speedup chart; the budget sweep (3, 4
    // and 6) per family at its lowest and highest load (chat: c1 and c8;
    // kinds: c4 only), with acceptance length at the lowest.
    for (section, n) in [
        ("throughput", 6),
        ("per_gpu", 3),
        ("speedup", 1),
        ("budget", 8),
    ] {
        assert_eq!(
            sections.iter().filter(|s| **s == section).count(),
            n,
            "{section}: {sections:?}"
        );
    }
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
