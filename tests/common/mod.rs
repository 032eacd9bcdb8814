//! Shared helpers: an in-process simulator on 127.0.0.1:0, `bench` runs
//! through the library, and the real llama.cpp server started from the
//! test environment that `scripts/setup-test-env.sh` installs.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use servebench::bench::BenchResult;
use servebench::cli::{Cli, Command as Sub};
use servebench::sim::{self, SimConfig};
use tokio_util::sync::CancellationToken;

/// A simulator serving in this process until dropped.
pub struct SimHandle {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub task: Option<tokio::task::JoinHandle<Result<(), sim::SimError>>>,
}

impl SimHandle {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Wait for the simulator to stop and return how it ended.
    pub async fn join(&mut self) -> Result<(), sim::SimError> {
        self.task.take().expect("joined once").await.unwrap()
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A simulator config with no delays unless a test sets them.
pub fn fast_sim() -> SimConfig {
    SimConfig {
        prefill_tok_s: 0.0,
        ttft_overhead_ms: 0.0,
        decode_step_ms: 0.0,
        decode_step_per_seq_ms: 0.0,
        ..SimConfig::default()
    }
}

/// Start a simulator on 127.0.0.1:0.
pub async fn start_sim(cfg: SimConfig) -> SimHandle {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(sim::serve(listener, cfg, shutdown.clone()));
    SimHandle {
        addr,
        shutdown,
        task: Some(task),
    }
}

/// Run `servebench bench ARGS --output FILE` in-process; returns the parsed file
/// and whether every request succeeded.
pub async fn bench(args: &[&str]) -> (BenchResult, bool) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("result.json");
    let mut argv = vec!["servebench", "bench"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--output", out.to_str().unwrap()]);
    let Sub::Bench(a) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    let all_ok = servebench::bench::run(a, CancellationToken::new())
        .await
        .unwrap()
        == servebench::bench::BenchEnd::AllOk;
    let bytes = std::fs::read(&out).unwrap();
    (serde_json::from_slice(&bytes).unwrap(), all_ok)
}

/// Read the raw JSON of a bench run (for schema checks).
pub async fn bench_json(args: &[&str]) -> serde_json::Value {
    let (r, _) = bench(args).await;
    serde_json::to_value(r).unwrap()
}

/// A free TCP port on 127.0.0.1 (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn env_path(var: &str) -> PathBuf {
    let v = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the tests through scripts/test.sh, or `eval \"$(scripts/setup-test-env.sh)\"` first")
    });
    PathBuf::from(v)
}

/// The real llama.cpp server, killed (whole process group) when dropped.
pub struct LlamaServer {
    pub port: u16,
    child: Child,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl LlamaServer {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `scripts/llama-server` with the test model and wait until healthy.
pub fn start_llama(extra: &[&str]) -> LlamaServer {
    let python = env_path("SERVEBENCH_PYTHON");
    let gguf = env_path("SERVEBENCH_TEST_GGUF");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("llama.log");
    let port = free_port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/llama-server");
    let mut child = Command::new(python)
        .arg(script)
        .args([
            "-m",
            gguf.to_str().unwrap(),
            "--port",
            &port.to_string(),
            "-t",
            "1",
            "--metrics",
        ])
        .args(extra)
        .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
        .stderr(Stdio::from(
            std::fs::File::options().append(true).open(&log).unwrap(),
        ))
        .spawn()
        .expect("start scripts/llama-server");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "llama-server exited with {status}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        if health_ok(port) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "llama-server not healthy after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    LlamaServer {
        port,
        child,
        log,
        _dir: dir,
    }
}

/// GET `path` from 127.0.0.1:`port` with a blocking socket; the status line
/// and body, or `None` when the server cannot be reached.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    Some(buf)
}

/// The value of an unlabelled Prometheus sample `name` on `/metrics`.
pub fn prometheus_value(port: u16, name: &str) -> Option<f64> {
    let text = http_get(port, "/metrics")?;
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok()).flatten()
    })
}

fn health_ok(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200")
}

/// Run the servebench binary; exit code, stdout and stderr.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_servebench"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Stored cell results by `server/cell`; temporary files of a write in
/// progress are skipped.
pub fn cells(root: &std::path::Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(servers) = std::fs::read_dir(root.join("cells")) else {
        return out;
    };
    for s in servers.flatten() {
        for c in std::fs::read_dir(s.path()).unwrap().flatten() {
            let name = c.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(c.path()).unwrap())
                .unwrap_or_else(|e| panic!("corrupt result {}: {e}", c.path().display()));
            out.insert(
                format!(
                    "{}/{}",
                    s.file_name().to_string_lossy(),
                    name.trim_end_matches(".json")
                ),
                v,
            );
        }
    }
    out
}

/// Pids of live processes whose command line contains `needle`.
pub fn pids_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = state.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'));
        if cmd.contains(needle) && !zombie && pid != std::process::id() as i32 {
            out.push(pid);
        }
    }
    out
}

/// Poll `f` until it holds, failing the test after `limit`.
pub fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
