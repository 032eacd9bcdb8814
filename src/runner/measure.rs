//! Measuring one load level: build its requests, drive them with live
//! progress, and summarize what came back. `bench` and `run` both measure
//! through [`measure_level`], so a level means the same in both.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::client::record::RequestRecord;
use crate::load::driver::{run_level, HttpExecutor, LevelPlan, LevelRun};
use crate::load::journal::Journal;
use crate::load::live::LiveView;
use crate::load::workloads::{build_source, length_warnings, SourceSpec};
use crate::metrics::level::{summarize, LevelSummary};
use crate::ui::{CampaignEta, LevelProgress};
use crate::util::proc;
use crate::util::units::Slo;

/// What to measure and how to show it.
pub struct LevelJob<'a> {
    /// The requests to send.
    pub source: SourceSpec,
    /// Load shape, stop condition, warm-up and seed.
    pub plan: LevelPlan,
    /// Goodput bounds.
    pub slos: &'a [Slo],
    /// Progress line prefix.
    pub label: String,
    /// The campaign's remaining time, shown on the progress line in `run`.
    pub campaign: Option<CampaignEta>,
    /// A replay cell's journal: what an interrupted run finished is kept,
    /// and the replay goes on from the next unit.
    pub resume: Option<Resume>,
    /// The level's running counts, shared with whoever samples the cell.
    pub live: Arc<LiveView>,
}

/// A replay cell's journal and what it already holds.
pub struct Resume {
    /// The journal file.
    pub path: std::path::PathBuf,
    /// The cell's identity, written at its head.
    pub identity: String,
    /// Requests an interrupted run finished.
    pub kept: Vec<RequestRecord>,
}

impl Resume {
    /// The journal of cell `identity` at `path`, with what it holds.
    pub fn at(path: std::path::PathBuf, identity: &str) -> Self {
        let kept = crate::load::journal::read(&path, identity);
        if kept.is_empty() {
            // Another cell's (a setting changed) or nothing whole: start afresh.
            let _ = std::fs::remove_file(&path);
        }
        Self {
            path,
            identity: identity.to_string(),
            kept,
        }
    }

    /// The unit to go on from: after the last one an interrupted run sent
    /// and finished (units before it that did not finish were in flight).
    pub fn first_index(&self) -> u64 {
        self.kept
            .iter()
            .filter_map(|r| r.index)
            .max()
            .map_or(0, |i| i + 1)
    }
}

/// Build `job`'s requests, send them to the executor's endpoint, and
/// summarize the level.
///
/// Building is timed: when it is slow (counting tokens over HTTP), a line
/// says so, because that time is not part of the measured window.
pub async fn measure_level(
    executor: Arc<HttpExecutor>,
    job: LevelJob<'_>,
    cancel: &CancellationToken,
) -> Result<LevelSummary, String> {
    let built = std::time::Instant::now();
    let (source, info) = build_source(&job.source, &executor.endpoint)
        .await
        .map_err(|e| format!("cannot build the requests: {e}"))?;
    let took = built.elapsed().as_secs_f64();
    if took > 2.0 {
        eprintln!(
            "built the requests in {took:.1} s, counting with {}; a tokenizer.json builds them faster",
            info.counter
        );
    }
    let live = job.live.clone();
    // A trace's own length bounds its replay.
    let total = match source.schedule() {
        Some(s) => {
            let rows = (s.len() as u64).saturating_sub(job.plan.warmup);
            Some(job.plan.stop.max_requests.map_or(rows, |n| n.min(rows)))
        }
        None => job.plan.stop.max_requests,
    };
    let progress = LevelProgress::start_in_campaign(
        job.label,
        total,
        job.plan.stop.max_duration,
        live.clone(),
        job.campaign,
    );
    let shape = job.plan.shape;
    let threads = tokio::runtime::Handle::current().metrics().num_workers();
    let cpu0 = proc::cpu_seconds();
    let journal = match &job.resume {
        Some(r) => Some(Arc::new(std::sync::Mutex::new(
            Journal::open(&r.path, &r.identity)
                .map_err(|e| format!("journal {}: {e}", r.path.display()))?,
        ))),
        None => None,
    };
    let resumed_at = source
        .schedule()
        .and_then(|s| s.get(job.plan.first_index as usize).copied());
    let run = run_level(job.plan, executor, source, (live, journal), cancel.clone()).await;
    let cpu = proc::cpu_seconds() - cpu0;
    progress.finish().await;
    if let Some(e) = info.build_error.as_ref().and_then(|e| e.get()) {
        return Err(format!("cannot build the requests: {e}"));
    }
    let mut run = run?;
    let mut resumed = None;
    if let Some(r) = job.resume.filter(|r| !r.kept.is_empty()) {
        resumed = Some(merge(&mut run, r, job.plan.first_index, resumed_at));
    }
    let mut summary = summarize(shape, run, job.slos, cpu, threads);
    summary.client.warnings.extend(resumed);
    summary
        .client
        .warnings
        .extend(length_warnings(&summary.requests, info.exact));
    summary.source = Some(info);
    Ok(summary)
}

/// Put what an interrupted run finished before what this run sent, on one
/// time line: this run's times move by the schedule offset it resumed at,
/// and the level's duration is both runs' together. The sentence says so.
fn merge(
    run: &mut LevelRun,
    resume: Resume,
    first: u64,
    resumed_at: Option<std::time::Duration>,
) -> String {
    let before_s = resume
        .kept
        .iter()
        .map(|r| r.sent_ms + r.e2e_ms.unwrap_or(0.0))
        .fold(0.0f64, f64::max)
        / 1000.0;
    let shift_ms = resumed_at.map_or(before_s * 1000.0, |d| d.as_secs_f64() * 1000.0);
    for r in &mut run.records {
        r.scheduled_ms += shift_ms;
        r.sent_ms += shift_ms;
    }
    let kept = resume.kept.len() as u64;
    let lost = first.saturating_sub(kept);
    let mut all = resume.kept;
    all.append(&mut run.records);
    run.records = all;
    run.duration_s += before_s;
    format!(
        "resumed after an interruption: {kept} requests kept from the interrupted run, {lost} in flight then lost, the replay went on from request {first}"
    )
}
