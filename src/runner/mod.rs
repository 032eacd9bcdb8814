//! Campaign execution: for each server config with cells to measure, launch
//! once, wait for health, run its cells through the load driver, store each
//! result atomically as soon as it exists, and stop the server.
//!
//! Failures never stop the campaign (unless `--fail-fast`): a server that
//! cannot start fails its cells with `start_failed`/`health_timeout` and the
//! log evidence; a server that dies mid-cell marks that cell `crashed` and
//! its remaining cells `not_run` (or restarts once, if asked). A killed run
//! loses at most the cell in flight; the next run resumes from the store.

pub mod eta;
pub mod events;
pub mod lock;
pub mod measure;
pub mod parallel;
pub mod search;
pub mod slurm;
pub mod summary;
pub mod telemetry;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::campaign::launcher::Launcher;
use crate::campaign::{Campaign, PromptSource, WorkloadPoint};
use crate::client::Endpoint;
use crate::engine::EngineKind;
use crate::failure::{Failure, FailureClass};
use crate::launcher::{wait_healthy, ServerHandle};
use crate::load::driver::{HttpExecutor, LevelPlan, StopCondition};
use crate::load::workloads::{Prompts, SourceSpec};
use crate::metrics::level::LevelSummary;
use crate::plan::{self, PlanOptions, PlannedCell, ServerGroup, Verdict};
use crate::store::identity::{cell_identity, model_config_digest, METHOD_VERSION};
use crate::store::judgment::judge;
use crate::store::{CellResult, CellStatus, ServerRun, Store, CELL_SCHEMA_VERSION};
use crate::util::shell::shell_words;
use crate::util::units::now_rfc3339;
use events::{Event, Events};
use measure::{measure_level, LevelJob};

/// Options of `servebench run`.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Verdict options (`--only`, `--force`, `--rerun-failed`).
    pub plan: PlanOptions,
    /// Stop at the first failed cell.
    pub fail_fast: bool,
    /// Print the plan and stop.
    pub dry_run: bool,
    /// Server groups run side by side (0 or 1: one at a time).
    pub parallel: usize,
    /// Start servers on this machine whatever `[launcher]` says (inside Slurm jobs).
    pub local: bool,
    /// Arguments each Slurm job's `servebench run` gets besides its server filter.
    pub job_args: Vec<String>,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct RunOutcome {
    /// Servers launched.
    pub launches: u32,
    /// Cells measured in this run.
    pub measured: usize,
    /// Cells reused from the store.
    pub cached: usize,
    /// Cells that ended in a failure status.
    pub failed: usize,
    /// Whether the run was interrupted.
    pub interrupted: bool,
}

/// Run a campaign, telling `events` what happens.
pub async fn run_campaign(
    c: &Campaign,
    opts: &RunOptions,
    events: &Events,
    cancel: CancellationToken,
) -> anyhow::Result<RunOutcome> {
    let store = Store::new(&c.results_dir);
    let self_exe = std::env::current_exe()
        .context("cannot locate the servebench executable")?
        .display()
        .to_string();
    let cleaned = store.clean_temporaries();
    if cleaned > 0 {
        events.emit(Event::TemporariesRemoved { count: cleaned });
    }
    let index = store.index();
    let plan = plan::build(c, &index, &opts.plan, &self_exe);
    events.emit(Event::Planned {
        cells: plan
            .groups
            .iter()
            .flat_map(|g| &g.cells)
            .filter(|cell| cell.verdict.runs())
            .count(),
        eta_s: plan.groups.iter().map(ServerGroup::eta_s).sum(),
        rendered: plan::render(&plan, false),
    });
    if let Some(line) = crate::launcher::slurm::plan_summary(c, &plan) {
        events.emit(Event::Note {
            message: line.trim_end().to_string(),
        });
    }
    let mut out = RunOutcome::default();
    if opts.dry_run {
        return Ok(out);
    }
    // An unset key would fail every request with 401: say so before launching.
    c.api_key().map_err(|e| anyhow::anyhow!("{e}"))?;
    std::fs::create_dir_all(store.root())
        .with_context(|| format!("cannot create {}", store.root().display()))?;
    for g in &plan.groups {
        for cell in &g.cells {
            match &cell.verdict {
                Verdict::Cached => out.cached += 1,
                Verdict::Skip(reason) => {
                    let f = Failure::new(FailureClass::Suspicious, reason.clone());
                    let mut r = base_result(c, g, cell);
                    r.status = CellStatus::Skipped;
                    r.failure = Some(f);
                    store.write(&r).context("cannot write a cell result")?;
                    events.stored(&r);
                }
                _ => {}
            }
        }
    }
    if matches!(c.launcher, Launcher::Slurm(_)) && !opts.local {
        slurm::submit(
            c,
            &plan,
            &store,
            &self_exe,
            &opts.job_args,
            (&cancel, events),
            &mut out,
        )
        .await?;
    } else {
        let groups: Vec<&ServerGroup> = plan.groups.iter().filter(|g| g.needs_launch()).collect();
        let live = eta::LiveEta::new(plan.estimator.clone(), &groups);
        let leaders = search::Leaders::from_stored(c, &plan.groups, &store);
        parallel::run_groups(
            c,
            &groups,
            &store,
            &cancel,
            opts,
            &mut out,
            (&live, &leaders, events),
        )
        .await?;
    }
    if cancel.is_cancelled() {
        out.interrupted = true;
    }
    Ok(out)
}

/// The event of a group starting.
fn announce(g: &ServerGroup, eta_left: f64) -> Event {
    Event::GroupStarted {
        server: g.server.id.clone(),
        cells: g.cells.iter().filter(|c| c.verdict.runs()).count(),
        eta_left_s: eta_left,
    }
}

pub(crate) fn base_result(c: &Campaign, g: &ServerGroup, cell: &PlannedCell) -> CellResult {
    CellResult {
        schema_version: CELL_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        method_version: METHOD_VERSION,
        campaign: c.name.clone(),
        identity: cell.identity.clone(),
        server_id: g.server.id.clone(),
        cell_name: cell.name.clone(),
        server: g.server.redacted(),
        workload: cell.workload.clone(),
        engine: c.engine.clone(),
        model: c.model.clone(),
        status: CellStatus::NotRun,
        failure: None,
        warnings: cell.warnings.clone(),
        started_at: now_rfc3339(),
        finished_at: now_rfc3339(),
        server_run: None,
        summary: None,
        telemetry: None,
        definitions: crate::metrics::definitions()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// A client for `url` that sends the campaign's API key, if it has one.
fn endpoint_for(
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
struct Running {
    local: Option<ServerHandle>,
    url: String,
    run: ServerRun,
}

async fn launch(
    c: &Campaign,
    g: &ServerGroup,
    store: &Store,
    launch_no: u32,
    cancel: &CancellationToken,
    slot: &parallel::Slot<'_>,
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
    let port = crate::launcher::local_free_port().map_err(|e| {
        (
            Failure::new(FailureClass::StartFailed, format!("no free port: {e}")),
            run.clone(),
        )
    })?;
    let self_exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut req =
        crate::launcher::start_request(c, g, slot.launcher, port, &slot.gpus, log_path, &self_exe)
            .map_err(|e| {
                (
                    Failure::new(FailureClass::StartFailed, e.to_string()),
                    run.clone(),
                )
            })?;
    req.header = format!(
        "{} launch {} of {}: {}",
        now_rfc3339(),
        launch_no,
        g.server.id,
        crate::util::secret::scrub_str(&shell_words(&crate::util::secret::redact_argv(&req.argv)))
    );
    run.gpus = slot.gpus.clone();
    run.command = crate::util::secret::redact_argv(&req.argv);
    let (mut server, url) = crate::launcher::start(slot.launcher, &req)
        .await
        .map_err(|f| (f, run.clone()))?;
    run.url = url;
    let endpoint =
        endpoint_for(c, &run.url, crate::client::openai::Api::Completions).map_err(|e| {
            (
                Failure::new(FailureClass::StartFailed, e.to_string()),
                run.clone(),
            )
        })?;
    let health = wait_healthy(
        &endpoint,
        c.engine.kind.health_path(),
        c.run.health_timeout,
        cancel,
        || server.exited(),
    )
    .await;
    match health {
        Ok(d) => {
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
        Err(f) => {
            server.stop(c.run.grace_period).await;
            let f = f.with_log(&server.log_tail(40));
            Err((f, run))
        }
    }
}

/// Run one server group; returns whether the whole campaign must stop.
async fn run_group(
    c: &Campaign,
    g: &ServerGroup,
    store: &Store,
    cancel: &CancellationToken,
    opts: &RunOptions,
    out: &mut RunOutcome,
    slot: &parallel::Slot<'_>,
) -> anyhow::Result<bool> {
    let mut cells: Vec<PlannedCell> = g
        .cells
        .iter()
        .filter(|c| c.verdict.runs())
        .cloned()
        .collect();
    let mut searches = search::GroupSearches::new(c, g, store, slot.events);
    let digest = model_config_digest(&c.model);
    // Past the fixed cells, each search adds its next probe as a cell.
    let more = |cells: &mut Vec<PlannedCell>, searches: &mut search::GroupSearches| match searches
        .next_cell(slot.leaders, |w| slot.eta.cell_s(&g.server.id, w))
    {
        Some((cell, expected)) => {
            slot.eta.add_probe(&g.server.id, &cell, expected);
            cells.push(cell);
            true
        }
        None => false,
    };
    let mut launch_no = 1;
    let mut retried = false;
    let mut i = 0;
    'launches: while i < cells.len() || more(&mut cells, &mut searches) {
        let mut running = match launch(c, g, store, launch_no, cancel, slot).await {
            Ok(r) => r,
            Err((failure, run)) => {
                if cancel.is_cancelled() {
                    return Ok(true);
                }
                if c.engine.kind.launches() {
                    out.launches += 1;
                }
                slot.events.emit(Event::ServerStartFailed {
                    server: g.server.id.clone(),
                    class: failure.class,
                    detail: failure.detail.clone(),
                });
                slot.eta.group_done(&g.server.id);
                for cell in &cells[i..] {
                    let mut r = base_result(c, g, cell);
                    r.status = CellStatus::Failed;
                    r.failure = Some(failure.clone());
                    r.server_run = Some(run.clone());
                    store.write(&r)?;
                    slot.events.stored(&r);
                    out.failed += 1;
                }
                return Ok(opts.fail_fast);
            }
        };
        if c.engine.kind.launches() {
            out.launches += 1;
        }
        slot.eta.started(
            &g.server.id,
            running.run.ready_s(),
            if running.run.warmup_s.is_some() {
                u64::from(c.run.server_warmup)
            } else {
                0
            },
        );
        while i < cells.len() || more(&mut cells, &mut searches) {
            let cell = &cells[i];
            if cancel.is_cancelled() {
                break 'launches;
            }
            if let Some(why) = plan::enough_repetitions(c, &cell.workload, |p| {
                let id = cell_identity(&c.engine, &c.model, digest.as_deref(), &g.server, p);
                let r = store
                    .read(&g.server.id, &p.cell_name())
                    .filter(|r| r.identity == id)?;
                r.status
                    .is_usable()
                    .then(|| r.summary.as_ref().map(|s| s.output_throughput_tok_s))
                    .flatten()
            }) {
                slot.events.emit(Event::CellNotNeeded {
                    server: g.server.id.clone(),
                    cell: cell.name.clone(),
                    why,
                });
                slot.eta.finished(&g.server.id, &cell.name, 0.0, None);
                i += 1;
                continue;
            }
            let mut r = base_result(c, g, cell);
            r.server_run = Some(running.run.clone());
            let cell_started = std::time::Instant::now();
            slot.events.emit(Event::CellStarted {
                server: g.server.id.clone(),
                cell: cell.name.clone(),
            });
            let window = slot.tracker.begin(&g.server.id, &cell.name);
            // One client per cell: the scrapes and the load share its connections.
            let endpoint = endpoint_for(c, &running.url, cell.workload.api);
            let (before, measured, gpus, gpu_note, (after, lag_note)) = match endpoint {
                Ok(ep) => {
                    let before = telemetry::scrape(&ep, c.engine.kind).await;
                    let sampler = telemetry::GpuSampler::start(&running.run.gpus);
                    let expect = (
                        slot.eta.cell_s(&g.server.id, &cell.workload),
                        slot.eta.left_s(Some((&g.server.id, &cell.name))),
                    );
                    let measured = measure(c, cell, ep.clone(), cancel, expect).await;
                    let (gpus, gpu_note) = sampler.finish(&running.run.gpus).await;
                    let want = measured
                        .as_ref()
                        .map(telemetry::ClientTotals::of)
                        .unwrap_or_default();
                    let after = telemetry::scrape_settled(
                        &ep,
                        c.engine.kind,
                        &before,
                        want,
                        telemetry::Settle::RUNNER,
                    )
                    .await;
                    (before, measured, gpus, gpu_note, after)
                }
                Err(e) => (
                    Err(e.to_string()),
                    Err(e.to_string()),
                    Vec::new(),
                    None,
                    (Err(e.to_string()), None),
                ),
            };
            let log_text = running
                .local
                .as_ref()
                .map(|s| s.log_tail(20_000))
                .unwrap_or_default();
            r.finished_at = now_rfc3339();
            if let Some(run) = r.server_run.as_mut() {
                run.concurrent_with = slot.tracker.finish(window);
            }
            if cancel.is_cancelled() {
                // The cell in flight is lost by design; nothing partial is stored.
                break 'launches;
            }
            let broken = match &measured {
                Ok(sum) => sum
                    .failures_by_class
                    .keys()
                    .any(|k| matches!(k, FailureClass::Connection | FailureClass::Protocol)),
                Err(_) => true,
            };
            let crashed = match running.local.as_mut() {
                // Connections break a moment before the dying process is reaped.
                Some(server) if broken => wait_for_exit(server, Duration::from_secs(2)).await,
                Some(server) => server.exited(),
                None => None,
            };
            match (measured, crashed) {
                (_, Some(status)) => {
                    let tail = running
                        .local
                        .as_ref()
                        .map(|s| s.log_tail(60))
                        .unwrap_or_default();
                    let f = Failure::new(
                        FailureClass::Crashed,
                        format!("server died during this cell ({status})"),
                    )
                    .with_log(&tail);
                    slot.events.emit(Event::ServerCrashed {
                        server: g.server.id.clone(),
                        cell: cell.name.clone(),
                        detail: f.detail.clone(),
                    });
                    r.status = CellStatus::Failed;
                    r.failure = Some(f.clone());
                    store.write(&r)?;
                    slot.events.stored(&r);
                    searches.record(&r);
                    out.failed += 1;
                    out.measured += 1;
                    i += 1;
                    if let Some(mut s) = running.local.take() {
                        s.stop(c.run.grace_period).await;
                    }
                    if c.run.retry_after_crash && !retried && (i < cells.len() || searches.open()) {
                        retried = true;
                        launch_no += 1;
                        slot.events.emit(Event::ServerRestarting {
                            server: g.server.id.clone(),
                        });
                        continue 'launches;
                    }
                    slot.eta.group_done(&g.server.id);
                    searches.end();
                    for rest in &cells[i..] {
                        let mut nr = base_result(c, g, rest);
                        nr.server_run = Some(running.run.clone());
                        nr.failure = Some(Failure::new(
                            FailureClass::Crashed,
                            format!("not run: the server crashed during cell {}", cell.name),
                        ));
                        store.write(&nr)?;
                        slot.events.stored(&nr);
                        out.failed += 1;
                    }
                    return Ok(opts.fail_fast);
                }
                (Err(e), None) => {
                    r.status = CellStatus::Failed;
                    r.failure = Some(Failure::new(FailureClass::Workload, e));
                }
                (Ok(summary), None) => {
                    let mut tel = telemetry::assemble(
                        c.engine.kind,
                        g.server.speculative.is_some(),
                        before,
                        after,
                        &summary,
                        &log_text,
                    );
                    tel.gpus = gpus;
                    tel.gpu_note = gpu_note;
                    if lag_note.is_some() {
                        tel.metrics_note = lag_note;
                    }
                    let engine_spec = tel
                        .spec
                        .as_ref()
                        .filter(|_| g.server.speculative.is_some())
                        .map(|s| &s.counts);
                    let j = judge(&summary, cell.workload.ignore_eos, engine_spec);
                    r.warnings.extend(j.warnings);
                    r.status = j.status;
                    r.failure = j.failure;
                    r.summary = Some(summary);
                    r.telemetry = Some(tel);
                }
            }
            let failed = r.status.is_failure();
            slot.events
                .emit(Event::CellJudged(Box::new(events::Judged::of(&r))));
            let timed = r
                .summary
                .as_ref()
                .filter(|_| r.status.is_timed())
                .map(|s| s.duration_s);
            slot.eta.finished(
                &g.server.id,
                &cell.name,
                cell_started.elapsed().as_secs_f64(),
                timed,
            );
            slot.events.emit(Event::EtaUpdated {
                left_s: slot.eta.left_s(None),
            });
            store.write(&r)?;
            slot.events.stored(&r);
            searches.record(&r);
            out.measured += 1;
            if failed {
                out.failed += 1;
                if opts.fail_fast {
                    if let Some(mut s) = running.local.take() {
                        s.stop(c.run.grace_period).await;
                    }
                    return Ok(true);
                }
            }
            i += 1;
        }
        if let Some(mut s) = running.local.take() {
            let killed = s.stop(c.run.grace_period).await;
            if killed {
                slot.events.emit(Event::ServerKilled {
                    server: g.server.id.clone(),
                    grace_s: c.run.grace_period.as_secs_f64(),
                });
            }
        }
        return Ok(false);
    }
    Ok(cancel.is_cancelled())
}

/// How the server ended, if it ends within `limit`.
async fn wait_for_exit(server: &mut ServerHandle, limit: Duration) -> Option<String> {
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

/// The request-source settings of a workload point.
pub fn source_spec(c: &Campaign, w: &WorkloadPoint) -> Result<SourceSpec, String> {
    let prompts = match &w.source {
        PromptSource::Synthetic => Prompts::Synthetic {
            input_len: w.input_len,
            shared_prefix: w.shared_prefix,
        },
        PromptSource::PromptKinds { kinds } => {
            let parsed = kinds
                .iter()
                .map(|k| {
                    k.parse::<crate::workload::PromptKind>()
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, _>>()?;
            Prompts::Kinds(
                crate::workload::PromptSelection::new(parsed).map_err(|e| e.to_string())?,
            )
        }
        PromptSource::Dataset { path, format } => Prompts::Dataset {
            path: path.clone(),
            format: *format,
            filter: Default::default(),
        },
        PromptSource::Scenario { name } => Prompts::Scenario(Arc::new(
            crate::workload::session::resolve(name).map_err(|e| e.to_string())?,
        )),
    };
    Ok(SourceSpec {
        api: w.api,
        model: c.model.served_name.clone(),
        output_len: w.output_len,
        ignore_eos: w.ignore_eos,
        seed: draw_seed(w),
        prompts,
        tokenizer: c.model.tokenizer.clone(),
        count: w.num_requests.map(|n| n + w.warmup),
        probe_timeout: c.run.request_timeout.min(Duration::from_secs(60)),
    })
}

/// The seed a cell's prompts and arrivals are drawn from: the point's seed
/// (workload seed and repetition) mixed with its load.
///
/// Cells of one server at other loads must not send the same prompts: a
/// server with a prefix cache (llama.cpp's slots, vLLM's and SGLang's
/// automatic prefix caching) would serve every cell after the first from
/// cache and report a prefill it never did. Servers still get the same
/// prompts as each other at the same point, so they are compared fairly.
pub fn draw_seed(w: &WorkloadPoint) -> u64 {
    let load = match w.load {
        crate::load::schedule::LoadShape::Concurrency { value } => u64::from(value),
        crate::load::schedule::LoadShape::Rate { value, .. } => value.to_bits() ^ (1 << 63),
    };
    crate::util::rng::derive_seed(w.seed, load)
}

/// Run one cell's load against `url`.
async fn measure(
    c: &Campaign,
    cell: &PlannedCell,
    endpoint: Endpoint,
    cancel: &CancellationToken,
    (estimate_s, rest_s): (f64, f64),
) -> Result<LevelSummary, String> {
    let w = &cell.workload;
    let source = source_spec(c, w)?;
    let job = LevelJob {
        plan: LevelPlan {
            shape: w.load,
            stop: StopCondition {
                max_requests: w.num_requests,
                max_duration: w.duration_s.map(Duration::from_secs_f64),
            },
            warmup: w.warmup,
            seed: source.seed,
        },
        source,
        slos: &w.slos,
        label: format!("   {}", cell.name),
        campaign: Some(crate::ui::CampaignEta { estimate_s, rest_s }),
    };
    let executor = Arc::new(HttpExecutor {
        endpoint,
        request_timeout: c.run.request_timeout,
    });
    measure_level(executor, job, cancel).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two servers, one workload at two concurrencies and two repetitions.
    fn campaign() -> Campaign {
        let text = r#"
[campaign]
name = "t"
[model]
path = "m"
[engine]
kind = "sim"
[[server]]
id = "a"
[[server]]
id = "b"
[[workload]]
name = "w"
input_len = 64
output_len = 8
concurrency = [1, 4]
num_requests = 4
[run]
repetitions = 2
"#;
        let (raw, src) = crate::campaign::parse(std::path::Path::new("c.toml"), text).unwrap();
        crate::campaign::resolve::resolve(raw, &src).unwrap()
    }

    #[test]
    fn cells_of_a_server_draw_their_own_prompts_and_servers_share_them() {
        let c = campaign();
        assert_eq!(c.workloads.len(), 4);
        let seeds: Vec<u64> = c.workloads.iter().map(draw_seed).collect();
        let mut distinct = seeds.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "every load and repetition: {seeds:?}");
        // The spec each cell builds its prompts from carries that seed; it
        // depends on the point alone, so both servers get the same prompts.
        for w in &c.workloads {
            assert_eq!(source_spec(&c, w).unwrap().seed, draw_seed(w));
        }
        // A rate draws apart from the concurrency of the same number.
        let mut rate = c.workloads[0].clone();
        rate.load = crate::load::schedule::LoadShape::Rate {
            value: 1.0,
            arrival: crate::load::schedule::Arrival::Poisson,
            burstiness: 1.0,
            max_concurrency: None,
        };
        assert_ne!(draw_seed(&rate), draw_seed(&c.workloads[0]));
    }
}
