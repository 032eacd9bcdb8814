//! Campaign execution: for each server config with cells to measure, launch
//! once, wait for health, run its cells through the load driver, store each
//! result atomically as soon as it exists, and stop the server.
//!
//! Failures never stop the campaign (unless `--fail-fast`): a server that
//! cannot start fails its cells with `start_failed`/`health_timeout` and the
//! log evidence; a server that dies mid-cell marks that cell `crashed` and
//! its remaining cells `not_run` (or restarts once, if asked). A killed run
//! loses at most the cell in flight; the next run resumes from the store.

pub mod answer;
pub mod eta;
pub mod events;
mod group;
pub mod lock;
pub mod measure;
pub mod parallel;
pub mod search;
mod server;
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
use crate::failure::{Failure, FailureClass};
use crate::load::driver::{HttpExecutor, LevelPlan, StopCondition};
use crate::load::workloads::{Prompts, SourceSpec};
use crate::metrics::level::LevelSummary;
use crate::plan::{self, PlanOptions, PlannedCell, ServerGroup, Verdict};
use crate::store::identity::METHOD_VERSION;
use crate::store::{CellResult, CellStatus, Store, CELL_SCHEMA_VERSION};
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
    /// What to measure: every cell, or only what can change the answer.
    pub goal: crate::campaign::Goal,
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
    /// The campaign's current cells as stored at the end, in plan order.
    pub cells: Vec<CellResult>,
    /// The whole results tree as read once at the end (what the report
    /// shows); `None` for a dry run.
    pub results: Option<crate::report::ResultSet>,
}

/// How a run ended, for its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Every cell is stored without a failure (servers expected to fail aside).
    AllOk,
    /// Some cell failed, was suspicious, partial or not run, or its answers
    /// mismatch the baseline's.
    SomeFailed,
    /// A signal stopped the run; finished cells are stored.
    Interrupted,
}

impl RunOutcome {
    /// How the run ended. A failure of a server the campaign marks
    /// `expected_failure` does not count: the campaign as written now
    /// decides that, not the stored copy.
    pub fn end(&self, c: &Campaign) -> RunEnd {
        if self.interrupted {
            return RunEnd::Interrupted;
        }
        let expected: std::collections::BTreeSet<&str> = c
            .servers
            .iter()
            .filter(|s| s.expected_failure)
            .map(|s| s.id.as_str())
            .collect();
        let stored_failure = self
            .cells
            .iter()
            .any(|r| r.status.is_failure() && !expected.contains(r.server_id.as_str()));
        // Answers that are not the baseline's fail the run as the report
        // judges them, though each stored cell keeps its own status.
        let cells: Vec<&CellResult> = self.cells.iter().collect();
        let mismatch = crate::report::agreement::judge_cells(&cells, c.run.baseline.as_deref())
            .iter()
            .any(|((server, _), (_, f))| f.is_some() && !expected.contains(server.as_str()));
        if stored_failure || mismatch {
            RunEnd::SomeFailed
        } else {
            RunEnd::AllOk
        }
    }
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
        eta_s: plan.totals.eta_s,
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
                    let f = Failure::new(FailureClass::Infeasible, reason.clone());
                    store_skipped(&store, events, base_result(c, g, cell), f)?;
                }
                Verdict::CrashedBefore(why) => {
                    let f = Failure::new(FailureClass::Crashed, why.clone());
                    store_skipped(&store, events, base_result(c, g, cell), f)?;
                }
                _ => {}
            }
        }
    }
    let slurm = matches!(c.launcher, Launcher::Slurm(_)) && !opts.local;
    let answer_first = opts.goal == crate::campaign::Goal::Answer;
    if slurm && answer_first {
        // Each Slurm job runs its servers on its own; the probes of one
        // could not be gated against what another measured.
        anyhow::bail!(
            "goal = \"answer\" runs servers one after another here, each gated by what the ones before it measured; a Slurm campaign runs every server in its own job: run it with --goal grid, or with --local inside one allocation"
        );
    }
    if slurm {
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
        let mut groups: Vec<&ServerGroup> =
            plan.groups.iter().filter(|g| g.needs_launch()).collect();
        let answer = answer_first.then(|| answer::AnswerFirst::new(c, &plan.groups, &store));
        if answer.is_some() {
            answer::order(&mut groups, &plan.estimator);
            let ids: Vec<String> = groups
                .iter()
                .map(|g| format!("`{}`", g.server.id))
                .collect();
            events.emit(Event::Note {
                message: format!(
                    "answer first: servers in the order they are expected to lead: {}",
                    ids.join(", ")
                ),
            });
        }
        let live = eta::LiveEta::new(
            plan.estimator.clone(),
            &groups,
            opts.parallel,
            c.hardware.gpus.len() as u32,
        );
        let leaders = search::Leaders::from_stored(c, &plan.groups, &store);
        parallel::run_groups(
            c,
            &groups,
            &store,
            &cancel,
            opts,
            &mut out,
            (&live, &leaders, events, answer.as_ref()),
        )
        .await?;
    }
    if cancel.is_cancelled() {
        out.interrupted = true;
    }
    let results = summary::load_results(c, &store);
    out.cells = summary::current_cells(c, &results.cells);
    out.results = Some(results);
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
        engine_build: g.engine_build.clone(),
        prefix_cache_reset: None,
        definitions: crate::metrics::definitions()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// Refuses a workload file whose content is no longer what the campaign
/// read at load: its digest is in the cell's identity, so measuring the
/// file as it is now would store its numbers under the old content's name.
fn unchanged_since_load(path: &std::path::Path, digest: &str, what: &str) -> Result<(), String> {
    let now = crate::workload::file_digest(path).map_err(|e| e.to_string())?;
    if now == digest {
        Ok(())
    } else {
        Err(format!(
            "the {what} {} changed since the campaign was loaded (digest {digest}, now {now}); run again to measure it as it is",
            path.display()
        ))
    }
}

/// The request-source settings of a workload point.
pub fn source_spec(c: &Campaign, w: &WorkloadPoint) -> Result<SourceSpec, String> {
    if let (Some(path), Some(digest)) = (&c.model.tokenizer, &c.model.tokenizer_digest) {
        unchanged_since_load(path, digest, "tokenizer file")?;
    }
    let prompts = match &w.source {
        PromptSource::Synthetic => Prompts::Synthetic {
            input_len: w.input_len,
            shared_prefix: w.shared_prefix,
        },
        PromptSource::PromptKinds { kinds } => Prompts::Kinds(
            crate::workload::PromptSelection::new(kinds.clone()).map_err(|e| e.to_string())?,
        ),
        PromptSource::Checks { path, .. } => Prompts::Checks {
            path: path.clone(),
            checks: c.checks.get(path).cloned().ok_or_else(|| {
                format!(
                    "checks file {} was not loaded with the campaign",
                    path.display()
                )
            })?,
        },
        PromptSource::Dataset {
            path,
            format,
            digest,
        } => {
            unchanged_since_load(path, digest, "dataset")?;
            Prompts::Dataset {
                path: path.clone(),
                format: *format,
                filter: Default::default(),
            }
        }
        PromptSource::Scenario { name, .. } => Prompts::Scenario(
            c.scenarios
                .get(name)
                .cloned()
                .ok_or_else(|| format!("scenario `{name}` was not loaded with the campaign"))?,
        ),
        PromptSource::Trace {
            path,
            format,
            settings,
            digest,
            ..
        } => {
            unchanged_since_load(path, digest, "trace")?;
            Prompts::Trace(Arc::new(crate::load::workloads::TraceSpec {
                path: path.clone(),
                format: Some(*format),
                settings: crate::workload::trace::ReplaySettings {
                    // The schedule's scale; under a concurrency or a rate the
                    // trace is a dataset and its times are not used.
                    time_scale: match w.load {
                        crate::load::schedule::LoadShape::Replay { time_scale, .. } => time_scale,
                        _ => 1.0,
                    },
                    ..settings.clone()
                },
            }))
        }
    };
    Ok(SourceSpec {
        api: w.api,
        model: c.model.served_name.clone(),
        output_len: w.output_len,
        ignore_eos: w.ignore_eos,
        tool_choice: w.tool_choice,
        seed: draw_seed(w),
        prompts,
        first_unit: 0,
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
        crate::load::schedule::LoadShape::Replay { time_scale, .. } => {
            time_scale.to_bits() ^ (1 << 62)
        }
    };
    crate::util::rng::derive_seed(w.seed, load)
}

/// Run one cell's load against `url`.
pub(super) async fn measure(
    c: &Campaign,
    cell: &PlannedCell,
    endpoint: Endpoint,
    cancel: &CancellationToken,
    (estimate_s, rest_s): (f64, f64),
    (resume, server_context): (Option<measure::Resume>, Option<u64>),
    live: Arc<crate::load::live::LiveView>,
) -> Result<LevelSummary, String> {
    let w = &cell.workload;
    let first_index = resume.as_ref().map_or(0, |r| r.first_index());
    let mut source = SourceSpec {
        first_unit: first_index,
        ..source_spec(c, w)?
    };
    // A trace's requests are clamped to the server's declared context
    // unless the workload sets its own limit; the context is part of the
    // server's config, hence of the cell's identity.
    if let (Prompts::Trace(t), Some(ctx)) = (&mut source.prompts, server_context) {
        if t.settings.max_context.is_none() {
            Arc::make_mut(t).settings.max_context = Some(ctx);
        }
    }
    let job = LevelJob {
        plan: LevelPlan {
            shape: w.load,
            stop: StopCondition {
                max_requests: w.num_requests,
                max_duration: w.duration_s.map(Duration::from_secs_f64),
            },
            warmup: w.warmup,
            seed: source.seed,
            first_index,
        },
        source,
        slos: &w.slos,
        label: format!("   {}", cell.name),
        campaign: Some(crate::ui::CampaignEta { estimate_s, rest_s }),
        resume,
        live,
    };
    let executor = Arc::new(HttpExecutor {
        endpoint,
        request_timeout: c.run.request_timeout,
    });
    measure_level(executor, job, cancel).await
}

/// Store a cell the plan skipped, with the reason as its failure.
fn store_skipped(
    store: &Store,
    events: &Events,
    mut r: CellResult,
    f: Failure,
) -> anyhow::Result<()> {
    r.status = CellStatus::Skipped;
    r.failure = Some(f);
    store.write(&r).context("cannot write a cell result")?;
    events.stored(&r);
    Ok(())
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
    fn a_workload_file_edited_after_the_campaign_was_loaded_is_refused_not_measured() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d.jsonl");
        std::fs::write(&data, "{\"prompt\": \"hi\", \"output_len\": 4}\n").unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "[campaign]\nname = \"t\"\n[model]\npath = \"m\"\n[engine]\nkind = \"sim\"\n\
             [[server]]\nid = \"a\"\n[[workload]]\nname = \"w\"\ndataset = \"d.jsonl\"\n\
             output_len = 4\nconcurrency = 1\nnum_requests = 1\n",
        )
        .unwrap();
        let c = crate::campaign::load_campaign(&file).unwrap();
        assert!(source_spec(&c, &c.workloads[0]).is_ok());
        std::fs::write(&data, "{\"prompt\": \"bye\", \"output_len\": 4}\n").unwrap();
        let e = source_spec(&c, &c.workloads[0]).err().unwrap();
        assert!(e.contains("changed since the campaign was loaded"), "{e}");
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
