//! One server group's run, as named steps: launch, measure a cell, judge it,
//! store it, and on a crash restart once or fail the rest. How the group
//! ended is a [`GroupEnd`], which says whether the campaign goes on.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::events::{Event, Judged};
use super::parallel::Slot;
use super::search::GroupSearches;
use super::server::{endpoint_for, launch, wait_for_exit, Running};
use super::{base_result, measure, telemetry, RunOptions, RunOutcome};
use crate::campaign::Campaign;
use crate::failure::{Failure, FailureClass};
use crate::metrics::level::LevelSummary;
use crate::plan::{self, PlannedCell, ServerGroup};
use crate::store::identity::cell_identity;
use crate::store::judgment::judge;
use crate::store::{CellResult, CellStatus, ServerRun, Store};
use crate::util::units::now_rfc3339;

/// How a server group's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GroupEnd {
    /// Every cell was measured (or not needed), the server stopped.
    AllMeasured,
    /// The server never became ready; its cells were failed with the evidence.
    StartFailed,
    /// The server crashed (again, if it was restarted); its other cells were
    /// stored as not run.
    Crashed,
    /// A cell failed under `--fail-fast`.
    FailedFast,
    /// The run was cancelled; the cell in flight was not stored.
    Cancelled,
}

impl GroupEnd {
    /// Whether the campaign stops after this group.
    pub(super) fn stops_campaign(self, fail_fast: bool) -> bool {
        match self {
            GroupEnd::AllMeasured => false,
            GroupEnd::StartFailed | GroupEnd::Crashed => fail_fast,
            GroupEnd::FailedFast | GroupEnd::Cancelled => true,
        }
    }
}

/// What serving a launched server's cells came to.
enum Served {
    /// No cell is left.
    Done,
    /// The server crashed during the cell at this index.
    Crashed(usize),
    /// A cell failed under `--fail-fast`.
    FailedFast,
    /// The run was cancelled.
    Cancelled,
}

/// Whether a cell is measured in full under `goal = "answer"`.
enum Gated {
    /// Measure it, with its probe's summary when one ran.
    Measure(Option<Box<LevelSummary>>),
    /// Its probe cannot beat the leader: leave it.
    NotMeasured,
    /// The run was cancelled during the probe.
    Cancelled,
}

/// A cell's load and what was read around it.
struct Measurement {
    /// The prefix-cache reset before the load, when the campaign asks for one.
    reset: Option<crate::store::CacheReset>,
    /// The load's summary, or why it could not run.
    summary: Result<LevelSummary, String>,
    /// Engine metrics before and after, GPU samples and the notes on them.
    telemetry: Telemetry,
}

impl Measurement {
    /// A cell whose load did not run, and why (nothing was read around it).
    fn not_run(reset: Option<crate::store::CacheReset>, why: String) -> Self {
        Measurement {
            reset,
            summary: Err(why.clone()),
            telemetry: Telemetry {
                before: Err(why.clone()),
                after: Err(why),
                lag_note: None,
                sampled: telemetry::Sampled::default(),
            },
        }
    }
}

/// What was read around a cell's load.
struct Telemetry {
    before: Result<crate::telemetry::Scrape, String>,
    after: Result<crate::telemetry::Scrape, String>,
    lag_note: Option<String>,
    sampled: telemetry::Sampled,
}

/// One server group being run.
pub(super) struct GroupRun<'a> {
    c: &'a Campaign,
    g: &'a ServerGroup,
    store: &'a Store,
    cancel: &'a CancellationToken,
    opts: &'a RunOptions,
    slot: &'a Slot<'a>,
    /// Planned cells to run, then each search probe as it is chosen.
    cells: Vec<PlannedCell>,
    searches: GroupSearches<'a>,
    /// What this group did, for the run's outcome.
    pub(super) out: RunOutcome,
}

impl<'a> GroupRun<'a> {
    /// The group's run, nothing done yet.
    pub(super) fn new(
        c: &'a Campaign,
        g: &'a ServerGroup,
        store: &'a Store,
        (cancel, opts): (&'a CancellationToken, &'a RunOptions),
        slot: &'a Slot<'a>,
    ) -> Self {
        GroupRun {
            c,
            g,
            store,
            cancel,
            opts,
            slot,
            cells: g
                .cells
                .iter()
                .filter(|c| c.verdict.runs())
                .cloned()
                .collect(),
            searches: GroupSearches::new(c, g, store, slot.events),
            out: RunOutcome::default(),
        }
    }

    /// Run the group: launch, serve its cells, restart once after a crash
    /// when the campaign asks for it.
    pub(super) async fn run(&mut self) -> anyhow::Result<GroupEnd> {
        let mut launch_no = 1;
        let mut retried = false;
        let mut next = 0;
        while self.has_cell(next) {
            let mut running = match launch(
                self.c,
                self.g,
                self.store,
                launch_no,
                self.cancel,
                self.slot,
            )
            .await
            {
                Ok(r) => r,
                Err((failure, run)) => return self.start_failed(next, failure, run),
            };
            self.launched(&running);
            match self.serve(&mut running, &mut next).await? {
                Served::Done => {
                    self.stop(running).await;
                    return Ok(GroupEnd::AllMeasured);
                }
                Served::FailedFast => {
                    self.stop(running).await;
                    return Ok(GroupEnd::FailedFast);
                }
                // The cell in flight is lost by design; nothing partial is stored.
                Served::Cancelled => return Ok(GroupEnd::Cancelled),
                Served::Crashed(at) => {
                    if self.c.run.retry_after_crash && !retried && self.has_cell(next) {
                        retried = true;
                        launch_no += 1;
                        self.slot.events.emit(Event::ServerRestarting {
                            server: self.g.server.id.clone(),
                        });
                        continue;
                    }
                    self.not_run_after_crash(at, next, &running.run)?;
                    return Ok(GroupEnd::Crashed);
                }
            }
        }
        Ok(if self.cancel.is_cancelled() {
            GroupEnd::Cancelled
        } else {
            GroupEnd::AllMeasured
        })
    }

    /// Whether there is a cell at `i`: a planned one, or the next probe a
    /// search chooses.
    fn has_cell(&mut self, i: usize) -> bool {
        if i < self.cells.len() {
            return true;
        }
        let (eta, id) = (self.slot.eta, &self.g.server.id);
        match self
            .searches
            .next_cell(self.slot.leaders, |w| eta.cell_s(id, w))
        {
            Some((cell, expected)) => {
                eta.add_probe(id, &cell, expected);
                self.cells.push(cell);
                true
            }
            None => false,
        }
    }

    /// Count a launch and tell the ETA the server is ready.
    fn launched(&mut self, running: &Running) {
        if self.c.engine.kind.launches() {
            self.out.launches += 1;
        }
        self.slot.eta.started(
            &self.g.server.id,
            running.run.ready_s(),
            if running.run.warmup_s.is_some() {
                u64::from(self.c.run.server_warmup)
            } else {
                0
            },
        );
    }

    /// The server never became ready: its cells from `next` on fail with
    /// the evidence.
    fn start_failed(
        &mut self,
        next: usize,
        failure: Failure,
        run: ServerRun,
    ) -> anyhow::Result<GroupEnd> {
        if self.cancel.is_cancelled() {
            return Ok(GroupEnd::Cancelled);
        }
        if self.c.engine.kind.launches() {
            self.out.launches += 1;
        }
        self.slot.events.emit(Event::ServerStartFailed {
            server: self.g.server.id.clone(),
            class: failure.class,
            detail: failure.detail.clone(),
            log_line: failure.unclassified_log_line(),
        });
        self.slot.eta.group_done(&self.g.server.id);
        for cell in &self.cells[next..] {
            let mut r = base_result(self.c, self.g, cell);
            r.status = CellStatus::Failed;
            r.failure = Some(failure.clone());
            r.server_run = Some(run.clone());
            self.store.write(&r)?;
            self.slot.events.stored(&r);
            self.out.failed += 1;
        }
        Ok(GroupEnd::StartFailed)
    }

    /// Measure, judge and store cells on the running server from `*next`
    /// on, until none is left or one ends the serving.
    async fn serve(&mut self, running: &mut Running, next: &mut usize) -> anyhow::Result<Served> {
        while self.has_cell(*next) {
            if self.cancel.is_cancelled() {
                return Ok(Served::Cancelled);
            }
            let cell = self.cells[*next].clone();
            if let Some(why) = self.not_needed(&cell) {
                self.slot.events.emit(Event::CellNotNeeded {
                    server: self.g.server.id.clone(),
                    cell: cell.name.clone(),
                    why,
                });
                self.slot
                    .eta
                    .finished(&self.g.server.id, &cell.name, 0.0, None);
                *next += 1;
                continue;
            }
            let probe = match self.gate(running, &cell).await? {
                Gated::Measure(probe) => probe,
                Gated::NotMeasured => {
                    let id = &self.g.server.id;
                    self.slot.eta.finished(id, &cell.name, 0.0, None);
                    *next += 1;
                    continue;
                }
                Gated::Cancelled => return Ok(Served::Cancelled),
            };
            let started = std::time::Instant::now();
            let mut r = base_result(self.c, self.g, &cell);
            r.server_run = Some(running.run.clone());
            self.slot.events.emit(Event::CellStarted {
                server: self.g.server.id.clone(),
                cell: cell.name.clone(),
            });
            let window = self.slot.tracker.begin(&self.g.server.id, &cell.name);
            let m = self.measure(running, &cell).await;
            let log_text = running
                .local
                .as_ref()
                .map(|s| s.log_tail(20_000))
                .unwrap_or_default();
            r.finished_at = now_rfc3339();
            if let Some(run) = r.server_run.as_mut() {
                run.concurrent_with = self.slot.tracker.finish(window);
            }
            if self.cancel.is_cancelled() {
                return Ok(Served::Cancelled);
            }
            *next += 1;
            if let Some(status) = crashed(running, &m.summary).await {
                // What was sent and what came back before the server died.
                r.prefix_cache_reset = m.reset;
                r.summary = m.summary.ok();
                self.on_crash(running, r, &cell, &status).await?;
                return Ok(Served::Crashed(*next - 1));
            }
            self.judge(&mut r, m, &log_text);
            let failed = r.status.is_failure();
            self.slot
                .events
                .emit(Event::CellJudged(Box::new(Judged::of(&r))));
            let timed = r
                .summary
                .as_ref()
                .filter(|_| r.status.is_timed())
                .map(|s| s.duration_s);
            self.slot.eta.finished(
                &self.g.server.id,
                &cell.name,
                started.elapsed().as_secs_f64(),
                timed,
            );
            self.slot.events.emit(Event::EtaUpdated {
                left_s: self.slot.eta.left_s(None),
            });
            self.store_measured(&r)?;
            if let Some(a) = self.slot.answer {
                a.offer(self.g, &cell, &r, probe.as_deref());
            }
            if failed {
                self.out.failed += 1;
                if self.opts.fail_fast {
                    return Ok(Served::FailedFast);
                }
            }
        }
        Ok(Served::Done)
    }

    /// Under `goal = "answer"`, whether `cell` is measured in full: its
    /// probe (stored, or measured now) against the point's leader. A probe
    /// that fails or finds the server gone leaves the full cell to measure,
    /// which records the failure as any cell does.
    async fn gate(&mut self, running: &mut Running, cell: &PlannedCell) -> anyhow::Result<Gated> {
        let Some(a) = self.slot.answer else {
            return Ok(Gated::Measure(None));
        };
        let server = self.g.server.id.clone();
        let probed = |value: f64, unit: &str, not_measured: Option<String>| Event::CellProbed {
            server: server.clone(),
            cell: cell.name.clone(),
            value,
            unit: unit.to_string(),
            not_measured,
        };
        if let Some(lost) = a.lost_before(&server, cell) {
            self.slot
                .events
                .emit(probed(lost.probe, &lost.unit, Some(lost.reason())));
            a.record(crate::goal::Lost {
                point: cell.name.clone(),
                ..lost
            })?;
            return Ok(Gated::NotMeasured);
        }
        if let Some(why) = a.settled(&server, cell) {
            self.slot.events.emit(Event::CellNotNeeded {
                server: server.clone(),
                cell: cell.name.clone(),
                why,
            });
            return Ok(Gated::NotMeasured);
        }
        let Some(probe_cell) = super::answer::probe_cell(self.c, self.g, cell) else {
            return Ok(Gated::Measure(None));
        };
        let summary = match a.stored(&server, &probe_cell) {
            Some(s) => s,
            None => {
                let m = self.measure(running, &probe_cell).await;
                if self.cancel.is_cancelled() {
                    return Ok(Gated::Cancelled);
                }
                let log_text = running
                    .local
                    .as_ref()
                    .map(|s| s.log_tail(20_000))
                    .unwrap_or_default();
                let mut r = base_result(self.c, self.g, &probe_cell);
                r.server_run = Some(running.run.clone());
                r.finished_at = now_rfc3339();
                self.judge(&mut r, m, &log_text);
                a.probes().write(&r)?;
                match r.summary.filter(|_| r.status.is_usable()) {
                    Some(s) => s,
                    None => return Ok(Gated::Measure(None)),
                }
            }
        };
        let gate = a.gate(self.g, cell, &summary)?;
        let (value, unit) = super::answer::value_of(&cell.workload, &summary, self.g.server.gpus());
        Ok(match gate {
            crate::goal::Gate::Lost(lost) => {
                self.slot
                    .events
                    .emit(probed(value.per_gpu, unit, Some(lost.reason())));
                Gated::NotMeasured
            }
            crate::goal::Gate::Measure => {
                self.slot.events.emit(probed(value.per_gpu, unit, None));
                Gated::Measure(Some(Box::new(summary)))
            }
        })
    }

    /// Why `cell` need not run: enough stored repetitions of its point agree.
    fn not_needed(&self, cell: &PlannedCell) -> Option<String> {
        let (c, g) = (self.c, self.g);
        plan::enough_repetitions(c, &cell.workload, |p| {
            let id = cell_identity(c, &g.server, p);
            let r = self
                .store
                .read(&g.server.id, &p.cell_name())
                .filter(|r| r.identity == id)?;
            r.status
                .is_usable()
                .then(|| r.summary.as_ref().map(|s| s.output_throughput_tok_s))
                .flatten()
        })
    }

    /// Run the cell's load with engine metrics scraped around it and the
    /// GPUs sampled during it; one client per cell, shared by both.
    async fn measure(&self, running: &Running, cell: &PlannedCell) -> Measurement {
        let (c, id) = (self.c, &self.g.server.id);
        let ep = match endpoint_for(c, &running.url, cell.workload.api) {
            Ok(ep) => ep,
            Err(e) => return Measurement::not_run(None, e.to_string()),
        };
        // Emptied before the counters are read, so the cell's counter
        // deltas cover its own requests on a cold cache.
        let reset = match c.run.reset_prefix_cache {
            true => super::server::reset_prefix_cache(&ep, c.engine.kind).await,
            false => None,
        };
        if let Some(r) = reset.as_ref().filter(|r| !r.emptied) {
            let why = format!(
                "not measured: the engine's prefix cache could not be emptied before the cell (reset_prefix_cache; {} after {} attempts)",
                r.detail, r.attempts
            );
            return Measurement::not_run(reset, why);
        }
        let before = telemetry::scrape(&ep, c.engine.kind).await;
        let live = std::sync::Arc::new(crate::load::live::LiveView::default());
        let sampler = telemetry::CellSampler::start(telemetry::SamplerSetup {
            endpoint: ep.clone(),
            engine: c.engine.kind,
            gpus: running.run.gpus.clone(),
            interval_ms: c.run.sample_interval_ms,
            live: live.clone(),
        });
        let expect = (
            self.slot.eta.cell_s(id, &cell.workload),
            self.slot.eta.left_s(Some((id, &cell.name))),
        );
        // A replay cell keeps a journal of its finished requests, so a run
        // killed mid-replay goes on from where it stopped.
        let resume = matches!(
            cell.workload.load,
            crate::load::schedule::LoadShape::Replay { .. }
        )
        .then(|| {
            super::measure::Resume::at(self.store.journal_path(id, &cell.name), &cell.identity)
        });
        let context = self.g.server.context_length;
        let summary = measure(
            c,
            cell,
            ep.clone(),
            self.cancel,
            expect,
            (resume, context),
            live,
        )
        .await;
        let sampled = sampler.finish().await;
        let want = summary
            .as_ref()
            .map(telemetry::ClientTotals::of)
            .unwrap_or_default();
        let (after, lag_note) =
            telemetry::scrape_settled(&ep, c.engine.kind, &before, want, telemetry::Settle::RUNNER)
                .await;
        Measurement {
            reset,
            summary,
            telemetry: Telemetry {
                before,
                after,
                lag_note,
                sampled,
            },
        }
    }

    /// Give a measured cell its status, evidence and telemetry.
    fn judge(&self, r: &mut CellResult, m: Measurement, log_text: &str) {
        r.prefix_cache_reset = m.reset;
        let t = m.telemetry;
        let mut summary = match m.summary {
            Ok(s) => s,
            Err(e) => {
                r.status = CellStatus::Failed;
                // A cache that could not be emptied is the engine's refusal.
                let reset_refused = r.prefix_cache_reset.as_ref().is_some_and(|x| !x.emptied);
                let class = match reset_refused {
                    true => FailureClass::HttpError,
                    false => FailureClass::Workload,
                };
                r.failure = Some(Failure::new(class, e));
                return;
            }
        };
        let mut tel = telemetry::assemble(
            self.c.engine.kind,
            self.g.server.speculative.is_some(),
            t.before,
            t.after,
            &summary,
            log_text,
        );
        tel.gpus = t.sampled.gpus;
        tel.gpu_note = t.sampled.gpu_note;
        tel.timeline = t.sampled.timeline;
        // The engine's queue is evidence of saturation the client cannot see.
        if let (Some(tl), Some(w)) = (&tel.timeline, summary.steady.as_mut()) {
            w.over_saturated
                .extend(crate::metrics::steady::queue_growth(
                    &tl.series(&tl.waiting),
                    w,
                ));
        }
        if t.lag_note.is_some() {
            tel.metrics_note = t.lag_note;
        }
        let engine_spec = tel
            .spec
            .as_ref()
            .filter(|_| self.g.server.speculative.is_some())
            .map(|s| &s.counts);
        let j = judge(&summary, r.workload.ignore_eos, engine_spec);
        r.warnings.extend(j.warnings);
        r.status = j.status;
        r.failure = j.failure;
        r.summary = Some(summary);
        r.telemetry = Some(tel);
    }

    /// Store a measured cell and let the searches learn from it.
    fn store_measured(&mut self, r: &CellResult) -> anyhow::Result<()> {
        self.store.write(r)?;
        self.slot.events.stored(r);
        self.searches.record(r);
        self.out.measured += 1;
        Ok(())
    }

    /// The server died during `cell`: store the cell as crashed with the log
    /// tail, and stop what is left of the server.
    async fn on_crash(
        &mut self,
        running: &mut Running,
        mut r: CellResult,
        cell: &PlannedCell,
        status: &str,
    ) -> anyhow::Result<()> {
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
        self.slot.events.emit(Event::ServerCrashed {
            server: self.g.server.id.clone(),
            cell: cell.name.clone(),
            detail: f.detail.clone(),
        });
        r.status = CellStatus::Failed;
        r.failure = Some(f);
        self.store_measured(&r)?;
        self.out.failed += 1;
        if let Some(mut s) = running.local.take() {
            s.stop(self.c.run.grace_period).await;
        }
        Ok(())
    }

    /// After a crash with no restart left: every cell from `next` on is
    /// stored as not run, naming the cell the server died in.
    fn not_run_after_crash(
        &mut self,
        crashed_at: usize,
        next: usize,
        run: &ServerRun,
    ) -> anyhow::Result<()> {
        self.slot.eta.group_done(&self.g.server.id);
        self.searches.end();
        let during = self.cells[crashed_at].name.clone();
        for rest in &self.cells[next..] {
            let mut r = base_result(self.c, self.g, rest);
            r.server_run = Some(run.clone());
            r.failure = Some(Failure::new(
                FailureClass::Crashed,
                format!("not run: the server crashed during cell {during}"),
            ));
            self.store.write(&r)?;
            self.slot.events.stored(&r);
            self.out.failed += 1;
        }
        Ok(())
    }

    /// Stop the server at the end of its cells.
    async fn stop(&self, mut running: Running) {
        if let Some(mut s) = running.local.take() {
            if s.stop(self.c.run.grace_period).await {
                self.slot.events.emit(Event::ServerKilled {
                    server: self.g.server.id.clone(),
                    grace_s: self.c.run.grace_period.as_secs_f64(),
                });
            }
        }
    }
}

/// How the server ended, if the cell's failures say it may have: broken
/// connections come a moment before the dying process is reaped.
async fn crashed(running: &mut Running, summary: &Result<LevelSummary, String>) -> Option<String> {
    let broken = match summary {
        Ok(sum) => sum
            .failures_by_class
            .keys()
            .any(|k| matches!(k, FailureClass::Connection | FailureClass::Protocol)),
        Err(_) => true,
    };
    match running.local.as_mut() {
        Some(server) if broken => wait_for_exit(server, Duration::from_secs(2)).await,
        Some(server) => server.exited(),
        None => None,
    }
}
