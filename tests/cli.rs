//! The real binary: exit codes, one-line errors, and the simulator process.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{run, BIN};

#[test]
fn refused_endpoint_is_one_clear_line_and_exit_1() {
    let port = crate::common::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (code, _, err) = run(&[
        "bench",
        "--url",
        &url,
        "--concurrency",
        "1",
        "--num-requests",
        "1",
    ]);
    assert_eq!(code, 1);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot reach") && err.to_lowercase().contains("refused"),
        "{err}"
    );
}

#[test]
fn bad_values_name_the_flag() {
    let (code, _, err) = run(&[
        "bench",
        "--url",
        "http://127.0.0.1:9",
        "--concurrency",
        "0",
        "--num-requests",
        "1",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--concurrency") && err.contains("at least 1"),
        "{err}"
    );
    let (code, _, err) = run(&["bench", "--url", "http://127.0.0.1:9", "--concurrency", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("--num-requests"), "{err}");
    let (code, _, err) = run(&[
        "bench",
        "--url",
        "http://127.0.0.1:9",
        "--api",
        "grpc",
        "--concurrency",
        "1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("completions") && err.contains("chat"), "{err}");
    let (code, _, err) = run(&[
        "bench",
        "--url",
        "http://127.0.0.1:9",
        "--concurrency",
        "1",
        "--num-requests",
        "1",
        "--slo",
        "ttft=5",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--slo") && err.contains("no unit"), "{err}");
}

#[test]
fn sim_process_crashes_with_the_logged_cuda_error_and_bench_reports_failures() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let log = dir.path().join("sim.log");
    let mut sim = Command::new(BIN)
        .args([
            "sim",
            "--port",
            "0",
            "--port-file",
            port_file.to_str().unwrap(),
        ])
        .args([
            "--crash-after",
            "2",
            "--decode-step-ms",
            "5",
            "--prefill-tok-s",
            "0",
        ])
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let start = Instant::now();
    let port = loop {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "sim did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let url = format!("http://127.0.0.1:{port}");
    let (code, stdout, err) = run(&[
        "bench",
        "--url",
        &url,
        "--concurrency",
        "1",
        "--num-requests",
        "4",
        "--output-len",
        "8",
        "--input-len",
        "32",
        "--ignore-eos",
        "--request-timeout",
        "5s",
    ]);
    assert_eq!(code, 3, "some requests failed: {err}");
    assert!(err.contains("2 ok, 2 failed"), "{err}");
    // Not a terminal: no progress bar escape codes.
    assert!(!stdout.contains('\u{1b}') && !err.contains('\u{1b}'));
    let status = sim.wait().unwrap();
    assert_eq!(status.code(), Some(134));
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.contains("CUDA error: an illegal instruction was encountered"),
        "{log}"
    );
    assert!(log.contains("sim: ready on 127.0.0.1:"));
}

#[test]
fn an_api_key_is_sent_as_a_bearer_token_and_never_written() {
    const KEY: &str = "sk-SECRET-123";
    let dir = tempfile::tempdir().unwrap();
    let sim = crate::common::spawn_sim_process(
        &[
            "--api-key",
            KEY,
            "--decode-step-ms",
            "0",
            "--prefill-tok-s",
            "0",
        ],
        &dir.path().join("sim.log"),
    );
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let bench = |extra: &[&str], output: &str, key_env: Option<&str>| {
        let mut cmd = Command::new(BIN);
        cmd.args([
            "bench",
            "--model",
            "sim-model",
            "--concurrency",
            "2",
            "--num-requests",
            "4",
            "--output-len",
            "4",
            "--input-len",
            "16",
            "--output",
        ])
        .arg(out.join(output))
        .args(extra)
        .stdin(Stdio::null());
        if let Some(k) = key_env {
            cmd.env("SB_TEST_KEY", k);
        }
        let o = cmd.output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // The sim answers 401 without the key, so `ok` proves the header was sent.
    let (code, err) = bench(
        &["--url", &sim.url, "--api-key-env", "SB_TEST_KEY"],
        "env.json",
        Some(KEY),
    );
    assert_eq!(code, 0, "{err}");
    let (code, err) = bench(&["--url", &sim.url, "--api-key", KEY], "flag.json", None);
    assert_eq!(code, 0, "{err}");
    // A password in the URL is sent as basic auth and dropped from the stored URL.
    let with_userinfo = sim.url.replace("http://", "http://bob:hunter2-pass@");
    let (code, err) = bench(
        &["--url", &with_userinfo, "--api-key", KEY],
        "userinfo.json",
        None,
    );
    assert_eq!(code, 0, "{err}");
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("userinfo.json")).unwrap()).unwrap();
    assert_eq!(stored["target"]["url"], sim.url.as_str());
    // Without the key every request is refused, and says so.
    let (code, err) = bench(&["--url", &sim.url], "nokey.json", None);
    assert_eq!(code, 3, "{err}");
    let stored = std::fs::read_to_string(out.join("nokey.json")).unwrap();
    assert!(stored.contains("401"), "{stored}");
    // An unset variable is named before any traffic.
    let (code, err) = bench(
        &["--url", &sim.url, "--api-key-env", "SB_TEST_KEY"],
        "unset.json",
        None,
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`SB_TEST_KEY` is unset"), "{err}");
    assert_eq!(crate::common::all_files(&out).len(), 4);
    for needle in [KEY, "hunter2-pass"] {
        assert_eq!(
            crate::common::files_containing(&out, needle),
            Vec::<std::path::PathBuf>::new(),
            "{needle} was written"
        );
    }
}

#[test]
fn bench_refuses_special_output_targets_and_typo_lists_before_any_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let subdir = dir.path().join("adir");
    std::fs::create_dir(&subdir).unwrap();
    // Port 1 refuses connections: an error about --output proves the check
    // came before any traffic.
    let base = [
        "bench",
        "--url",
        "http://127.0.0.1:1",
        "--concurrency",
        "1",
        "--num-requests",
        "1",
        "--output",
    ];
    for (path, what) in [
        (&fifo, "a device, FIFO or socket"),
        (&link, "a symlink"),
        (&subdir, "a directory"),
    ] {
        let mut args = base.to_vec();
        args.push(path.to_str().unwrap());
        let (code, _, err) = run(&args);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("--output"), "{err}");
        assert!(
            err.contains(&format!("refusing to replace {what}")),
            "{err}"
        );
        assert!(err.contains(path.to_str().unwrap()), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let (code, _, err) = run(&[
        "bench",
        "--url",
        "http://127.0.0.1:1",
        "--concurrency",
        "1,,2",
        "--num-requests",
        "1",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--concurrency") && err.contains("item 2 of `1,,2` is empty"),
        "{err}"
    );
}
