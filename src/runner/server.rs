//! One server's life within a run: start it (or point at an external
//! endpoint), wait until it is healthy, warm it up, and tell how it ended.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::events::Event;
use super::parallel::Slot;
use crate::campaign::Campaign;
use crate::client::Endpoint;
use crate::engine::EngineKind;
use crate::failure::{Failure, FailureClass};
use crate::launcher::{wait_healthy, NotHealthy, ServerHandle};
use crate::plan::ServerGroup;
use crate::store::{CacheReset, ServerRun, Store};
use crate::util::shell::shell_words;
use crate::util::units::now_rfc3339;

/// A client for `url` that sends the campaign's API key, if it has one.
pub(super) fn endpoint_for(
    c: &Campaign,
    url: &str,
    api: crate::client::openai::Api,
) -> anyhow::Result<Endpoint> {
    let key = c.api_key().map_err(|e| anyhow::anyhow!("{e}"))?;
    Endpoint::new(url, api)?.with_api_key(key.as_deref())
}

/// What the warm-up of a freshly started server gave.
struct WarmUp {
    /// Healthy → last warm-up answer, s.
    seconds: f64,
    /// The first failure, if any.
    error: Option<String>,
}

/// Send the campaign's warm-up requests one after another: a short prompt
/// with a few output tokens is enough to trigger one-time costs (kernel JIT,
/// graph capture, allocator growth, speculative proposers' compilation) that
/// would otherwise land in the first cell's TTFT.
async fn warm_up(
    c: &Campaign,
    url: &str,
    api: crate::client::openai::Api,
    cancel: &CancellationToken,
) -> WarmUp {
    let started = std::time::Instant::now();
    let endpoint = match endpoint_for(c, url, api) {
        Ok(e) => e,
        Err(e) => {
            return WarmUp {
                seconds: 0.0,
                error: Some(e.to_string()),
            }
        }
    };
    let body = bytes::Bytes::from(crate::client::openai::build_body(
        api,
        &c.model.served_name,
        crate::client::openai::PromptBody::Text(WARMUP_PROMPT.to_string()),
        WARMUP_OUTPUT_TOKENS,
        // A small model may answer this prompt with an immediate end of
        // sequence: no decode step would run, and no content chunk arrive.
        true,
    ));
    let mut error = None;
    for _ in 0..c.run.server_warmup {
        if cancel.is_cancelled() {
            break;
        }
        let now = std::time::Instant::now();
        let rec = tokio::select! {
            r = endpoint.stream(body.clone(), now, now, c.run.request_timeout, false) => r,
            _ = cancel.cancelled() => break,
        };
        if let (Some(f), None) = (&rec.failure, &error) {
            error = Some(format!("{}: {}", f.class, f.detail));
        }
    }
    WarmUp {
        seconds: started.elapsed().as_secs_f64(),
        error,
    }
}

/// The warm-up prompt: short, so the warm-up costs a second, not a cell.
const WARMUP_PROMPT: &str = "Say hello in one short sentence.";

/// Output tokens per warm-up request: enough decode steps for a speculative
/// proposer to run.
const WARMUP_OUTPUT_TOKENS: u64 = 16;

/// A launched (or external) server for one group.
pub(super) struct Running {
    /// The process servebench started; `None` for an external endpoint or
    /// once it was stopped.
    pub local: Option<ServerHandle>,
    /// Where it listens.
    pub url: String,
    /// How it was run, stored with every cell.
    pub run: ServerRun,
}

/// Start launch `launch_no` of `g`'s server and make it ready: healthy and
/// warmed up. On failure, the evidence and how far it got.
pub(super) async fn launch(
    c: &Campaign,
    g: &ServerGroup,
    store: &Store,
    launch_no: u32,
    cancel: &CancellationToken,
    slot: &Slot<'_>,
) -> Result<Running, (Failure, ServerRun)> {
    let (log_path, log_rel) = store.log_path(&g.server.id);
    let mut run = ServerRun {
        log: log_rel,
        launch: launch_no,
        ..Default::default()
    };
    if c.engine.kind == EngineKind::Openai {
        let url = c.engine.url.clone().unwrap_or_default();
        run.url = url.clone();
        return Ok(Running {
            local: None,
            url,
            run,
        });
    }
    let mut attempt = 1;
    loop {
        let (server, port) = match start(c, g, launch_no, slot, log_path.clone(), &mut run).await {
            Ok(s) => s,
            Err(f) => return Err((f, run)),
        };
        match ready(c, g, (server, port), run, cancel, slot).await {
            Err((NotHealthy::PortTaken(f), again)) if attempt < PORT_ATTEMPTS => {
                slot.events.emit(Event::Warning {
                    message: format!(
                        "{}: {}; starting it again on another port",
                        g.server.id, f.detail
                    ),
                });
                run = again;
                attempt += 1;
            }
            Err((NotHealthy::PortTaken(f) | NotHealthy::Failed(f), run)) => return Err((f, run)),
            Ok(running) => return Ok(running),
        }
    }
}

/// Launches on a freshly picked port before a port taken by another
/// process fails the server: a port picked free is taken again only by
/// a race, so a second pick almost always holds.
const PORT_ATTEMPTS: u32 = 3;

/// Start the process on a free port; `run` learns its command, GPUs and URL.
async fn start(
    c: &Campaign,
    g: &ServerGroup,
    launch_no: u32,
    slot: &Slot<'_>,
    log_path: std::path::PathBuf,
    run: &mut ServerRun,
) -> Result<(ServerHandle, u16), Failure> {
    let port = crate::launcher::local_free_port()
        .map_err(|e| Failure::new(FailureClass::StartFailed, format!("no free port: {e}")))?;
    let self_exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut req =
        crate::launcher::start_request(c, g, slot.launcher, port, &slot.gpus, log_path, &self_exe)
            .map_err(|e| Failure::new(FailureClass::StartFailed, e.to_string()))?;
    req.header = format!(
        "{} launch {} of {}: {}",
        now_rfc3339(),
        launch_no,
        g.server.id,
        crate::util::secret::scrub_str(&shell_words(&crate::util::secret::redact_argv(&req.argv)))
    );
    run.gpus = slot.gpus.clone();
    run.command = crate::util::secret::redact_argv(&req.argv);
    let (server, url) = crate::launcher::start(slot.launcher, &req).await?;
    run.url = url;
    Ok((server, port))
}

/// Wait until the started server is healthy on its `port`, then warm it
/// up; a server that never becomes healthy is stopped and its log tail is
/// the evidence.
async fn ready(
    c: &Campaign,
    g: &ServerGroup,
    (mut server, port): (ServerHandle, u16),
    mut run: ServerRun,
    cancel: &CancellationToken,
    slot: &Slot<'_>,
) -> Result<Running, (NotHealthy, ServerRun)> {
    let endpoint = match endpoint_for(c, &run.url, crate::client::openai::Api::Completions) {
        Ok(e) => e,
        Err(e) => {
            let f = Failure::new(FailureClass::StartFailed, e.to_string());
            return Err((NotHealthy::Failed(f), run));
        }
    };
    let health = wait_healthy(
        &endpoint,
        c.engine.kind.health_path(),
        (c.run.health_timeout, cancel),
        &mut server,
        port,
    )
    .await;
    let d = match health {
        Ok(d) => d,
        Err(e) => {
            server.stop(c.run.grace_period).await;
            return Err((e.with_log(&server.log_tail(40)), run));
        }
    };
    run.startup_s = Some(d.as_secs_f64());
    slot.events.emit(Event::ServerHealthy {
        server: g.server.id.clone(),
        after_s: d.as_secs_f64(),
        url: run.url.clone(),
        process: server.describe(),
    });
    if c.engine.kind.has_cold_start() && c.run.server_warmup > 0 {
        let api = g
            .cells
            .iter()
            .find(|cell| cell.verdict.runs())
            .map_or(crate::client::openai::Api::Completions, |cell| {
                cell.workload.api
            });
        let warm = warm_up(c, &run.url, api, cancel).await;
        run.warmup_s = Some(warm.seconds);
        slot.events.emit(Event::ServerWarmedUp {
            server: g.server.id.clone(),
            requests: c.run.server_warmup,
            seconds: warm.seconds,
            error: warm.error.clone(),
        });
        run.warmup_error = warm.error;
    }
    Ok(Running {
        local: Some(server),
        url: run.url.clone(),
        run,
    })
}

/// How the server ended, if it ends within `limit`.
pub(super) async fn wait_for_exit(server: &mut ServerHandle, limit: Duration) -> Option<String> {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(s) = server.exited() {
            return Some(s);
        }
        if start.elapsed() >= limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Most requests to empty a prefix cache before a cell: the engine refuses
/// while requests still hold blocks (the last cell's, finishing).
const RESET_ATTEMPTS: u32 = 20;

/// Empty the prefix cache of `engine` at `ep`, retrying while it refuses
/// (vLLM answers `{"success": false}`, SGLang 400, while requests hold
/// blocks); `None` when the engine has no such endpoint.
pub async fn reset_prefix_cache(ep: &Endpoint, engine: EngineKind) -> Option<CacheReset> {
    let path = engine.prefix_cache_reset()?.path;
    let outcome = |emptied, attempts, answer: &str| CacheReset {
        emptied,
        attempts,
        detail: format!("POST {path}: {answer}"),
    };
    let mut last = String::new();
    for attempt in 1..=RESET_ATTEMPTS {
        match ep.post_empty(path, Duration::from_secs(30)).await {
            Ok((200, body)) if !refused(&body) => return Some(outcome(true, attempt, "HTTP 200")),
            Ok((status, body)) => {
                let text = String::from_utf8_lossy(&body);
                last = format!(
                    "HTTP {status} {}",
                    text.trim().chars().take(200).collect::<String>()
                );
            }
            // Not there at all: no retry will change that.
            Err(f) if f.class == FailureClass::Connection => {
                return Some(outcome(false, attempt, &f.detail))
            }
            Err(f) => last = f.detail,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Some(outcome(false, RESET_ATTEMPTS, &last))
}

/// Whether a 200 answer still says the reset did not happen (vLLM's
/// `{"success": false}`).
fn refused(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("success").and_then(|s| s.as_bool()))
        == Some(false)
}
