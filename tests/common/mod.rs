//! Shared helpers: campaign files built from common parts, an in-process
//! simulator on 127.0.0.1:0, `bench` runs through the library, the real
//! llama.cpp server started from the test environment that
//! `scripts/setup-test-env.sh` installs, and the turns real engines take on
//! the machine's cores.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use servebench::cli::{Cli, Command as Sub};
use servebench::cmd::bench::BenchResult;
use servebench::sim::{self, SimConfig};
use tokio_util::sync::CancellationToken;

/// Tests that serve from a real engine share the machine's two cores; one
/// that measures the engine's speed to place its own bounds serves alone.
/// Every test that serves from a real engine holds a turn on this lock:
/// shared, or alone for such a measurement.
static REAL_ENGINES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A turn beside other real engines (from a test outside an async runtime).
pub fn real_engine_turn() -> tokio::sync::RwLockReadGuard<'static, ()> {
    REAL_ENGINES.blocking_read()
}

/// A turn beside other real engines (from an async test).
pub async fn real_engine_turn_async() -> tokio::sync::RwLockReadGuard<'static, ()> {
    REAL_ENGINES.read().await
}

/// A turn with no other real engine serving, for a test that times one.
pub fn real_engine_alone() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    REAL_ENGINES.blocking_write()
}

/// A test campaign's opening tables: `[campaign]` with its results under
/// `results`, `[model]` at `model`, and `[engine]` of `kind` with `args`
/// (no `args` line when there are none). The text opens with a blank line,
/// as the raw literals the tests append do, so the line numbers an error
/// names are those of the whole file.
pub fn campaign_head(name: &str, model: &str, kind: &str, args: &[&str]) -> String {
    let mut head = format!(
        "\n[campaign]\nname = \"{name}\"\nresults_dir = \"results\"\n\
         [model]\npath = \"{model}\"\n[engine]\nkind = \"{kind}\"\n"
    );
    if !args.is_empty() {
        let quoted: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
        head += &format!("args = [{}]\n", quoted.join(", "));
    }
    head
}

/// [`campaign_head`] for the simulator serving model `sim-model`.
pub fn sim_campaign(name: &str, args: &[&str]) -> String {
    campaign_head(name, "sim-model", "sim", args)
}

/// [`sim_campaign`] whose servers take `decode_step_ms` a step whatever
/// they run, with instant prefill: a cell's time is its steps alone.
pub fn steady_sim_campaign(name: &str, decode_step_ms: &str) -> String {
    let args = [
        "--decode-step-ms",
        decode_step_ms,
        "--decode-step-per-seq-ms",
        "0",
        "--prefill-tok-s",
        "0",
    ];
    sim_campaign(name, &args)
}

/// [`campaign_head`] for the real llama.cpp server (`scripts/llama-server`
/// serving the test model, both from the test environment) with `args`.
pub fn llamacpp_campaign(name: &str, args: &[&str]) -> String {
    let python = env_path("SERVEBENCH_PYTHON");
    let gguf = env_path("SERVEBENCH_TEST_GGUF");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/llama-server");
    campaign_head(name, &gguf.display().to_string(), "llamacpp", args)
        + &format!("executable = [\"{}\", \"{script}\"]\n", python.display())
}

/// A campaign file `campaign.toml` in `dir` holding `text`.
pub fn write_campaign(dir: &std::path::Path, text: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join("campaign.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// A shipped trace slice under `tests/fixtures/traces`.
pub fn trace_fixture(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/traces")
        .join(name)
}

/// The servebench binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_servebench");

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

/// An example campaign from `examples/`, its results going to `results`
/// beside the campaign file a test writes it to.
pub fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace("results_dir = \"../results\"", "results_dir = \"results\"")
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
    let all_ok = servebench::cmd::bench::run(*a, CancellationToken::new())
        .await
        .unwrap()
        == servebench::cmd::bench::BenchEnd::AllOk;
    let bytes = std::fs::read(&out).unwrap();
    (serde_json::from_slice(&bytes).unwrap(), all_ok)
}

/// `servebench bench` at a fixed concurrency against `url`: `requests`
/// requests of `output_len` tokens each, then the `extra` flags.
pub async fn bench_closed(
    url: &str,
    concurrency: u32,
    requests: u32,
    output_len: u32,
    extra: &[&str],
) -> (BenchResult, bool) {
    let (c, n, o) = (
        concurrency.to_string(),
        requests.to_string(),
        output_len.to_string(),
    );
    let mut args = vec![
        "--url",
        url,
        "--concurrency",
        &c,
        "--num-requests",
        &n,
        "--output-len",
        &o,
    ];
    args.extend_from_slice(extra);
    bench(&args).await
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
///
/// The port is free when picked but released before the server binds it, so
/// another test's server may take it first: a health answer counts only when
/// this server holds the listening socket, and a server that exits before
/// then is started again on another port (up to three times).
pub fn start_llama(extra: &[&str]) -> LlamaServer {
    let python = env_path("SERVEBENCH_PYTHON");
    let gguf = env_path("SERVEBENCH_TEST_GGUF");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("llama.log");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/llama-server");
    for attempt in 1..=3 {
        let port = free_port();
        let mut child = Command::new(&python)
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
                assert!(
                    attempt < 3,
                    "llama-server exited with {status}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
                break;
            }
            if health_ok(port) && listens_on(child.id(), port) {
                return LlamaServer {
                    port,
                    child,
                    _dir: dir,
                };
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "llama-server not healthy after 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    unreachable!("the last attempt returns or panics")
}

/// Whether process `pid` holds the socket listening on 127.0.0.1:`port`
/// (`/proc/net/tcp` names the socket's inode, `/proc/PID/fd` its holders).
fn listens_on(pid: u32, port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let port = format!(":{port:04X}");
    let sockets: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Fields: sl, local address, remote address, state (0A: listen), …, inode.
            (f.get(1).is_some_and(|a| a.ends_with(&port)) && f.get(3) == Some(&"0A"))
                .then(|| format!("socket:[{}]", f.get(9).unwrap_or(&"")))
        })
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| sockets.iter().any(|s| target.as_os_str() == s.as_str()))
    })
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
    let out = std::process::Command::new(BIN)
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
/// A stored cell's timeline holds a sample for every 250 ms of its
/// measured part, with the engine's running requests as its `/metrics`
/// reported them.
pub fn assert_timeline(name: &str, cell: &serde_json::Value) {
    let tl = &cell["telemetry"]["timeline"];
    let times: Vec<f64> = tl["t_s"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no timeline in {}", cell["telemetry"]))
        .iter()
        .filter_map(|t| t.as_f64())
        .collect();
    let duration = cell["summary"]["duration_s"].as_f64().unwrap();
    let inside = times
        .iter()
        .filter(|t| (0.0..=duration).contains(*t))
        .count();
    assert!(
        inside as f64 >= (duration / 0.25).floor(),
        "{name}: {inside} samples over {duration} s: {times:?}"
    );
    let running = tl["running"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no engine running column: {tl}"));
    assert_eq!(running.len(), times.len(), "{name}");
    assert!(
        running.iter().any(|v| v.as_f64().is_some()),
        "{name}: the engine's gauge never answered: {tl}"
    );
}

pub fn cells(root: &std::path::Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(servers) = std::fs::read_dir(root.join("cells")) else {
        return out;
    };
    for s in servers.flatten() {
        for c in std::fs::read_dir(s.path()).unwrap().flatten() {
            let name = c.file_name().to_string_lossy().into_owned();
            // Results only: not a temporary file, not a replay's journal.
            if name.starts_with('.') || !name.ends_with(".json") {
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

/// A `servebench sim` process on a free port; killed when dropped.
pub struct SimProcess {
    /// The child process.
    pub child: std::process::Child,
    /// Its base URL.
    pub url: String,
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `servebench sim` with `args`, its stderr going to `log`, and wait until it listens.
pub fn spawn_sim_process(args: &[&str], log: &std::path::Path) -> SimProcess {
    let dir = log.parent().unwrap();
    let port_file = dir.join(format!(
        "sim-port-{}",
        log.file_name().unwrap().to_string_lossy()
    ));
    let child = std::process::Command::new(BIN)
        .args(["sim", "--port", "0", "--port-file"])
        .arg(&port_file)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
        .spawn()
        .unwrap();
    let mut sim = SimProcess {
        child,
        url: String::new(),
    };
    wait_until(Duration::from_secs(60), "the simulator to listen", || {
        std::fs::read_to_string(&port_file).is_ok_and(|p| !p.is_empty())
    });
    sim.url = format!(
        "http://127.0.0.1:{}",
        std::fs::read_to_string(&port_file).unwrap()
    );
    sim
}

/// Every file under `root` (recursively) whose bytes contain `needle`.
pub fn files_containing(root: &std::path::Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p)
                .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                out.push(p);
            }
        }
    }
    out
}

/// Every file under `root`, recursively.
pub fn all_files(root: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Ways the torture server misbehaves on `POST` requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A `data:` line of 6 MiB that never ends.
    HugeLine,
    /// Read the request, then reset the connection before any header.
    ResetBeforeHeaders,
    /// Headers and three chunks, then a reset.
    ResetMidStream,
    /// Four tokens whatever was asked, usage 4.
    ShortOutput,
    /// One token per chunk as asked, but usage claims 80.
    LyingUsage,
    /// Four tokens per chunk, the count only in a final usage chunk.
    MultiTokenChunks,
    /// First answer complete on a kept-alive connection; the next request is
    /// read and its connection closed unanswered; every later one is reset.
    KeepAliveThenReset,
    /// Read the request and never answer.
    NeverAnswer,
}

/// An SSE server on 127.0.0.1:0 that misbehaves as told; runs on its own
/// thread so blocking tests can drive the servebench binary against it.
pub struct Torture {
    pub addr: SocketAddr,
    /// POST requests received so far.
    pub posts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Torture {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Start a torture server with one fault.
pub fn start_torture(fault: Fault) -> Torture {
    let posts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let counter = posts.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(torture_conn(sock, fault, counter.clone()));
            }
        });
    });
    Torture { addr, posts }
}

fn sse_text(text: &str) -> String {
    format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"{text}\"}}]}}\n\n")
}

fn sse_usage(completion: u64) -> String {
    format!(
        "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{completion}}}}}\n\n"
    )
}

/// An honest stream of `n` one-token chunks and its usage.
fn sse_honest(n: u64) -> String {
    let mut s: String = (0..n).map(|_| sse_text("tok ")).collect();
    s.push_str(&sse_usage(n));
    s.push_str("data: [DONE]\n\n");
    s
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

async fn reset(sock: tokio::net::TcpStream) {
    // Linger zero turns the close into a RST (and so never blocks on drop,
    // which is what the deprecation warns of).
    #[allow(deprecated)]
    let _ = sock.set_linger(Some(Duration::ZERO));
    drop(sock);
}

async fn torture_conn(
    mut sock: tokio::net::TcpStream,
    fault: Fault,
    posts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf: Vec<u8> = Vec::new();
    loop {
        // Read one request: head, then Content-Length bytes of body.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut tmp = [0u8; 8192];
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut tmp = [0u8; 8192];
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
        let body: serde_json::Value =
            serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or_default();
        buf.drain(..head_end + len);
        if head.starts_with("get /v1/models") {
            let b = r#"{"object":"list","data":[{"id":"torture"}]}"#;
            let r = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
                b.len()
            );
            if sock.write_all(r.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        if !head.starts_with("post") {
            let _ = sock
                .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                .await;
            continue;
        }
        let n = posts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let asked = body["max_tokens"].as_u64().unwrap_or(16);
        let stream = match fault {
            Fault::HugeLine => {
                let mut s = String::from("data: {\"choices\":[{\"text\":\"");
                s.push_str(&"x".repeat(6 * 1024 * 1024));
                s
            }
            Fault::ResetBeforeHeaders => return reset(sock).await,
            Fault::ResetMidStream => {
                let s: String = (0..3).map(|_| sse_text("a")).collect();
                let _ = sock.write_all(SSE_HEAD.as_bytes()).await;
                let _ = sock.write_all(s.as_bytes()).await;
                let _ = sock.flush().await;
                return reset(sock).await;
            }
            Fault::ShortOutput => sse_honest(4),
            Fault::LyingUsage => {
                let mut s: String = (0..asked).map(|_| sse_text("tok ")).collect();
                s.push_str(&sse_usage(80));
                s.push_str("data: [DONE]\n\n");
                s
            }
            Fault::MultiTokenChunks => {
                let mut s: String = (0..asked / 4).map(|_| sse_text("a b c d ")).collect();
                s.push_str(&sse_usage(asked));
                s.push_str("data: [DONE]\n\n");
                s
            }
            Fault::KeepAliveThenReset => match n {
                1 => {
                    let s = sse_honest(asked);
                    let r = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{s}",
                        s.len()
                    );
                    if sock.write_all(r.as_bytes()).await.is_err() {
                        return;
                    }
                    continue;
                }
                2 => return,
                _ => return reset(sock).await,
            },
            Fault::NeverAnswer => {
                // Hold the connection until the client gives up.
                let mut tmp = [0u8; 1024];
                while matches!(sock.read(&mut tmp).await, Ok(n) if n > 0) {}
                return;
            }
        };
        let _ = sock.write_all(SSE_HEAD.as_bytes()).await;
        let _ = sock.write_all(stream.as_bytes()).await;
        let _ = sock.shutdown().await;
        // Wait for the client to close, so it reads everything before EOF.
        let mut tmp = [0u8; 1024];
        while matches!(sock.read(&mut tmp).await, Ok(n) if n > 0) {}
        return;
    }
}

/// Run the servebench binary's `bench` against `url` with `extra` flags and
/// a result file; exit code, stderr and the parsed result (when written).
pub fn bench_bin(url: &str, extra: &[&str]) -> (i32, String, Option<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("result.json");
    let mut args = vec![
        "bench",
        "--url",
        url,
        "--input-len",
        "8",
        "--output-len",
        "16",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--output", out.to_str().unwrap()]);
    let (code, _stdout, stderr) = run(&args);
    let result = std::fs::read(&out)
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap());
    (code, stderr, result)
}

/// The answer block of `run`'s output, without what it rests on and the
/// cells it did not measure: what a partial and a whole run must share.
pub fn answer_lines(stdout: &str) -> Vec<String> {
    let start = stdout.find("Answer\n").expect(stdout);
    stdout[start..]
        .lines()
        .filter(|l| !l.contains("this answer rests on"))
        .take_while(|l| !l.starts_with("full report") && !l.contains("not measured in full"))
        .map(str::to_string)
        .collect()
}
