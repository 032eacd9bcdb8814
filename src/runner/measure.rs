//! Measuring one load level: build its requests, drive them with live
//! progress, and summarize what came back. `bench` and `run` both measure
//! through [`measure_level`], so a level means the same in both.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::load::driver::{run_level, HttpExecutor, LevelPlan};
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
    let live = Arc::new(LiveView::default());
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
    let run = run_level(job.plan, executor, source, live, cancel.clone()).await;
    let cpu = proc::cpu_seconds() - cpu0;
    progress.finish().await;
    if let Some(e) = info.build_error.as_ref().and_then(|e| e.get()) {
        return Err(format!("cannot build the requests: {e}"));
    }
    let mut summary = summarize(shape, run?, job.slos, cpu, threads);
    summary
        .client
        .warnings
        .extend(length_warnings(&summary.requests, info.exact));
    summary.source = Some(info);
    Ok(summary)
}
