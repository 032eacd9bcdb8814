//! The aggregate view every exporter renders: cells as rows, workload points
//! aggregated over repetitions, speedups over the baseline, the per-GPU
//! Pareto frontier, recommendations and the chart data.
//!
//! Computed once from stored results so that every format says the same
//! thing. Invariants: a failed, skipped, not-run or suspicious cell never
//! contributes a number to speedups, charts or recommendations (its metrics
//! are `None`, never 0) and always appears in `problems` with its reason;
//! the only randomness (bootstrap intervals) comes from a seeded generator,
//! so the same results always give the same bytes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::charts::{charts, Chart};
pub use super::data::*;
use super::recommend::{slo_picks, stream_picks, SloMiss, SloPick, StreamPick};
use super::ResultSet;
use crate::client::record::RequestRecord;
use crate::failure::FailureClass;
use crate::load::schedule::LoadShape;
use crate::metrics::bootstrap::median;
use crate::store::{CellResult, CellStatus};

/// Version of the `report.json` layout.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// Knobs of the aggregation.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Baseline server id; overrides the one in `campaign.json`.
    pub baseline: Option<String>,
    /// Seed of the bootstrap generator.
    pub seed: u64,
    /// Rank configs for a workload family they crashed in (left out by default).
    pub include_crashed: bool,
    /// Cells to draw timelines for besides the ones the answer rests on:
    /// `SERVER/CELL`, or `all`.
    pub timelines: Vec<String>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            baseline: None,
            seed: 0x0005_e27e_be7c,
            include_crashed: false,
            timelines: Vec::new(),
        }
    }
}

/// Each cell's row, against the baseline's cell at the same point (and
/// repetition, where it has one), with its answers' agreement.
fn cell_rows(
    cells: &[&CellResult],
    baseline: Option<&str>,
    agreements: &super::agreement::Agreements,
    gpu_hour_cost: Option<f64>,
) -> Vec<CellRow> {
    let is_base = |c: &CellResult| Some(c.server_id.as_str()) == baseline && c.status.is_usable();
    let base_cells: HashMap<(String, u32), &CellResult> = cells
        .iter()
        .filter(|c| is_base(c))
        .map(|c| ((point_name(c), c.workload.repetition), *c))
        .collect();
    let base_any: HashMap<String, &CellResult> = cells
        .iter()
        .filter(|c| is_base(c))
        .map(|c| (point_name(c), *c))
        .collect();
    cells
        .iter()
        .map(|c| {
            let energy = usable_summary(c).and_then(|s| {
                crate::metrics::energy::energy(s, c.telemetry.as_ref()?.timeline.as_ref()?)
            });
            CellRow {
                output_identical: agreements
                    .get(&(c.server_id.clone(), c.identity.clone()))
                    .and_then(|a| a.0.identical_share()),
                joules_per_token: energy.as_ref().map(|e| e.joules_per_token),
                tokens_per_joule: energy.as_ref().map(|e| e.tokens_per_joule),
                usd_per_mtok: usable_summary(c).zip(gpu_hour_cost).and_then(|(s, cost)| {
                    crate::metrics::energy::usd_per_million_tokens(s, c.server.gpus(), cost)
                }),
                ..cell_row(c, &base_cells, &base_any, baseline)
            }
        })
        .collect()
}

/// A cell's measurement, when its numbers may be used.
fn usable_summary(c: &CellResult) -> Option<&crate::metrics::level::LevelSummary> {
    c.summary.as_ref().filter(|_| c.status.is_usable())
}

/// Everything a report says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Layout version of this structure.
    pub schema_version: u32,
    /// Campaign name.
    pub campaign: String,
    /// Campaign description.
    pub description: Option<String>,
    /// Baseline server id.
    pub baseline: Option<String>,
    /// Where the baseline came from, or why there is none.
    pub baseline_source: String,
    /// Latest `finished_at` over the cells (the report's date; never the clock).
    pub measured_until: Option<String>,
    /// The engine builds the cells were measured on, each with its cell count.
    #[serde(default)]
    pub engine_builds: Vec<(String, usize)>,
    /// Server ids in campaign order.
    pub servers: Vec<String>,
    /// SLO searches: each config's boundary.
    #[serde(default)]
    pub searches: Vec<super::search::SearchRow>,
    /// SLO searches: the config to deploy for each.
    #[serde(default)]
    pub search_picks: Vec<super::search::SearchPick>,
    /// Every cell.
    pub cells: Vec<CellRow>,
    /// Every (server, point) aggregated over repetitions.
    pub points: Vec<PointRow>,
    /// Decode speed and speedup per prompt kind.
    pub kinds: Vec<KindRow>,
    /// Per-GPU trade-off points with the Pareto frontier.
    pub gpu_points: Vec<GpuPoint>,
    /// Best config per declared SLO.
    pub slo_picks: Vec<SloPick>,
    /// Declared SLOs no point met at their attainment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_misses: Vec<SloMiss>,
    /// Fastest single-stream config per prompt kind.
    pub stream_picks: Vec<StreamPick>,
    /// Cells a probe left unmeasured (`goal = "answer"`), with why they
    /// could not change the answer; those stored since are not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_measured: Vec<crate::goal::Lost>,
    /// Cells without a usable measurement, with their reason.
    pub problems: Vec<Problem>,
    /// The same, grouped by (server, status, class).
    #[serde(default)]
    pub problem_groups: Vec<ProblemGroup>,
    /// Agentic per-turn latency.
    pub turns: Vec<TurnRow>,
    /// Per server, its answers against the baseline's.
    #[serde(default)]
    pub answers: Vec<super::agreement::AnswerRow>,
    /// Trace replays per window of trace time.
    #[serde(default)]
    pub trace_windows: Vec<super::trace_time::TraceWindow>,
    /// Per trace replay cell, its prefix-cache reuse predicted and measured.
    #[serde(default)]
    pub prefix_cache: Vec<super::prefix_cache::CacheRow>,
    /// Each config on several builds: every build against the one before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_steps: Vec<super::builds::BuildStep>,
    /// Result files that could not be read.
    pub unreadable: Vec<(String, String)>,
    /// Charts, in page order.
    pub charts: Vec<Chart>,
    /// What could not be shown, and why.
    pub notes: Vec<String>,
}

fn reason_of(c: &CellResult) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(f) = &c.failure {
        parts.push(f.detail.clone());
    }
    parts.extend(c.warnings.iter().cloned());
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The baseline server and where it came from: `--baseline`, else the
/// campaign's, else none (and so no speedups).
fn baseline_of(set: &ResultSet, opts: &ReportOptions) -> (Option<String>, String) {
    let stored = set.meta.as_ref().and_then(|m| m.baseline.clone());
    match (&opts.baseline, stored) {
        (Some(b), _) => (Some(b.clone()), "--baseline".to_string()),
        (None, Some(b)) => (Some(b), "campaign.json".to_string()),
        (None, None) => (
            None,
            "none: no --baseline and no baseline in campaign.json, so no speedups".to_string(),
        ),
    }
}

/// The points an answer-first run left unmeasured that no stored cell has
/// measured since.
fn still_not_measured(set: &ResultSet) -> Vec<crate::goal::Lost> {
    set.not_measured
        .iter()
        .filter(|l| {
            !set.cells
                .iter()
                .any(|c| c.server_id == l.server && c.cell_name == l.point)
        })
        .cloned()
        .collect()
}

/// Build the report from stored results.
pub fn build(set: &ResultSet, opts: &ReportOptions) -> Report {
    let meta = set.meta.as_ref();
    let (baseline, baseline_source) = baseline_of(set, opts);
    let mut notes = Vec::new();
    let servers = server_order(set, baseline.as_deref(), &mut notes);
    let mut cells: Vec<&CellResult> = set.cells.iter().collect();
    sort_cells(&mut cells, &servers, meta);

    // Answers that are not the baseline's make a cell suspicious here, as
    // degenerate ones do when judged: its numbers are not a config's speed.
    // So do answers that fail their checks clearly more often than the
    // baseline's.
    let agreements = super::agreement::judge_cells(&cells, baseline.as_deref());
    let checks = super::checks::judge(&servers, &cells, baseline.as_deref());
    let answers =
        super::agreement::answer_rows(&servers, baseline.as_deref(), &cells, &agreements, &checks);
    let mismatched = suspicious_answers(&servers, &cells, &agreements, &checks, &mut notes);
    let cells: Vec<&CellResult> = cells
        .iter()
        .map(|c| {
            mismatched
                .iter()
                .find(|m| m.identity == c.identity && m.server_id == c.server_id)
                .unwrap_or(c)
        })
        .collect();
    let color: HashMap<&str, usize> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let rows = cell_rows(
        &cells,
        baseline.as_deref(),
        &agreements,
        meta.and_then(|m| m.gpu_hour_cost),
    );
    let points = point_rows(&cells, &rows);
    let kinds = kind_rows(&cells, baseline.as_deref());
    // A level that did not run at its concurrency is shown in the tables,
    // but never drawn or ranked as that level.
    let rankable: Vec<&CellResult> = cells
        .iter()
        .copied()
        .filter(|c| {
            !c.status.is_usable() || (under_loaded(c).is_none() && over_saturated(c).is_none())
        })
        .collect();
    note_under_loaded(&servers, &rows, &mut notes);
    note_over_saturated(&servers, &rows, &mut notes);
    let drawn: Vec<PointRow> = points
        .iter()
        .filter(|p| p.under_loaded.is_none())
        .cloned()
        .collect();
    let layouts: HashMap<&str, String> = cells
        .iter()
        .map(|c| (c.server_id.as_str(), c.server.layout().label()))
        .collect();
    let gpu_points = gpu_points(&drawn, &layouts);
    let (slo_picks, slo_misses) = slo_picks(
        &rankable,
        opts.seed,
        opts.include_crashed,
        baseline.as_deref(),
    );
    let (searches, search_picks) = super::search::build(
        meta.map(|m| m.searches.as_slice()).unwrap_or_default(),
        &servers,
        // The judged cells: a probe whose answers are not the baseline's
        // fails, as a degenerate one does.
        &cells,
    );
    let stream_picks = stream_picks(&cells, opts.seed, opts.include_crashed, baseline.as_deref());
    let problems = problems(&cells);
    let turns = turn_rows(&cells);
    let mut charts = charts(
        &servers,
        &color,
        &drawn,
        &kinds,
        &gpu_points,
        &turns,
        baseline.as_deref(),
        &mut notes,
    );
    charts.extend(super::search::charts(
        meta.map(|m| m.searches.as_slice()).unwrap_or_default(),
        &searches,
        &color,
    ));
    let trace_windows = super::trace_time::windows(&cells);
    charts.extend(super::trace_time::charts(&trace_windows, &color));
    let inside = super::timelines::chosen(&cells, &slo_picks, &opts.timelines, family_of);
    charts.extend(super::timelines::charts(&inside, &mut notes));
    let charts = super::charts::facet(charts);
    Report {
        schema_version: REPORT_SCHEMA_VERSION,
        campaign: meta.map(|m| m.name.clone()).unwrap_or_else(|| {
            set.cells
                .first()
                .map(|c| c.campaign.clone())
                .unwrap_or_else(|| set.dir_name.clone())
        }),
        description: meta.and_then(|m| m.description.clone()),
        baseline,
        baseline_source,
        measured_until: set.cells.iter().map(|c| c.finished_at.clone()).max(),
        engine_builds: engine_builds(set),
        servers,
        cells: rows,
        points,
        kinds,
        gpu_points,
        slo_picks,
        slo_misses,
        stream_picks,
        searches,
        search_picks,
        not_measured: still_not_measured(set),
        problem_groups: group_problems(&problems),
        problems,
        turns,
        answers,
        prefix_cache: super::prefix_cache::rows(&cells),
        build_steps: super::builds::steps(
            &cells,
            meta.map(|m| m.builds.as_slice()).unwrap_or_default(),
        ),
        trace_windows,
        unreadable: set.unreadable.clone(),
        charts,
        notes,
    }
}

/// Cells in report order: by server and workload in the campaign's order,
/// then prompt and output length, load, repetition and name.
fn sort_cells(
    cells: &mut [&CellResult],
    servers: &[String],
    meta: Option<&crate::store::meta::CampaignMeta>,
) {
    let server_rank: HashMap<&str, usize> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let workload_rank: HashMap<&str, usize> = meta
        .map(|m| {
            m.workloads
                .iter()
                .enumerate()
                .map(|(i, s)| (s.as_str(), i))
                .collect()
        })
        .unwrap_or_default();

    cells.sort_by(|a, b| {
        let key = |c: &CellResult| {
            (
                server_rank
                    .get(c.server_id.as_str())
                    .copied()
                    .unwrap_or(usize::MAX),
                workload_rank
                    .get(c.workload.workload.as_str())
                    .copied()
                    .unwrap_or(usize::MAX),
                c.workload.workload.clone(),
                c.workload.input_len,
                c.workload.output_len,
            )
        };
        key(a)
            .cmp(&key(b))
            .then(load_order(&a.workload.load).total_cmp(&load_order(&b.workload.load)))
            .then(a.workload.repetition.cmp(&b.workload.repetition))
            .then(a.cell_name.cmp(&b.cell_name))
    });
}

/// Server order: the campaign's, then any others by id; only servers with
/// stored cells.
fn server_order(set: &ResultSet, baseline: Option<&str>, notes: &mut Vec<String>) -> Vec<String> {
    let mut servers: Vec<String> = set
        .meta
        .as_ref()
        .map(|m| m.servers.clone())
        .unwrap_or_default();
    let known: BTreeSet<String> = set.cells.iter().map(|c| c.server_id.clone()).collect();
    for s in &known {
        if !servers.contains(s) {
            servers.push(s.clone());
        }
    }
    servers.retain(|s| known.contains(s));
    if let Some(b) = baseline {
        if !known.contains(b) {
            notes.push(format!(
                "baseline `{b}` has no stored cells, so no speedups"
            ));
        }
    }
    servers
}

/// The cells whose answers are not the baseline's, or fail their checks
/// clearly more often, marked suspicious with the reason, and a note per
/// server saying how many are not ranked.
fn suspicious_answers(
    servers: &[String],
    cells: &[&CellResult],
    agreements: &super::agreement::Agreements,
    checks: &super::checks::Checks,
    notes: &mut Vec<String>,
) -> Vec<CellResult> {
    let mismatched: Vec<CellResult> = cells
        .iter()
        .filter_map(|c| {
            let key = (c.server_id.clone(), c.identity.clone());
            // Wrong answers say more than answers that differ.
            let f = checks
                .failures
                .get(&key)
                .cloned()
                .or_else(|| agreements.get(&key).and_then(|a| a.1.clone()))?;
            let mut m = (*c).clone();
            m.status = CellStatus::Suspicious;
            m.warnings.push(f.detail.clone());
            m.failure = Some(f);
            Some(m)
        })
        .collect();
    for s in servers {
        for (class, why) in [
            (
                FailureClass::OutputMismatch,
                "their answers differ from the baseline's",
            ),
            (
                FailureClass::WrongAnswers,
                "their answers fail their checks clearly more often than the baseline's",
            ),
        ] {
            let n = mismatched
                .iter()
                .filter(|m| &m.server_id == s && m.failure.as_ref().map(|f| f.class) == Some(class))
                .count();
            if n > 0 {
                notes.push(format!(
                    "server `{s}`: {n} cells not ranked: {why} ({class}; see the failed and suspicious cells)"
                ));
            }
        }
    }
    mismatched
}

/// A note per server naming its under-loaded cells.
fn note_under_loaded(servers: &[String], rows: &[CellRow], notes: &mut Vec<String>) {
    for s in servers {
        let under: Vec<String> = rows
            .iter()
            .filter(|r| &r.server_id == s && r.usable)
            .filter_map(|r| Some(format!("{} ({})", r.cell_name, r.under_loaded.as_deref()?)))
            .collect();
        if !under.is_empty() {
            notes.push(format!(
                "server `{s}`: {} cells under-loaded, not drawn or ranked at their concurrency: {}",
                under.len(),
                under.join("; ")
            ));
        }
    }
}

/// Every cell that is not plainly ok, with its evidence.
fn problems(cells: &[&CellResult]) -> Vec<Problem> {
    cells
        .iter()
        .filter(|c| c.status != CellStatus::Ok)
        .map(|c| Problem {
            server_id: c.server_id.clone(),
            cell_name: c.cell_name.clone(),
            status: c.status,
            class: c.failure.as_ref().map(|f| f.class),
            evidence: reason_of(c).unwrap_or_else(|| {
                let s = c.summary.as_ref();
                format!(
                    "{} of {} requests failed",
                    s.map_or(0, |s| s.failed),
                    s.map_or(0, |s| s.failed + s.completed)
                )
            }),
            log_excerpt: c.failure.as_ref().and_then(|f| f.log_excerpt.clone()),
        })
        .collect()
}

/// Measured cells per engine build version.
fn engine_builds(set: &ResultSet) -> Vec<(String, usize)> {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for c in set.cells.iter().filter(|c| c.summary.is_some()) {
        if let Some(b) = &c.engine_build {
            *by.entry(b.version.clone()).or_insert(0) += 1;
        }
    }
    by.into_iter().collect()
}

fn cell_row(
    c: &CellResult,
    base: &HashMap<(String, u32), &CellResult>,
    base_any: &HashMap<String, &CellResult>,
    baseline: Option<&str>,
) -> CellRow {
    let ok = c.status.is_usable();
    // Suspicious cells keep their numbers in the row (they are evidence),
    // but never enter speedups, charts or rankings.
    let show = ok || c.status == CellStatus::Suspicious;
    let s = c.summary.as_ref().filter(|_| show);
    let gpus = c.server.gpus();
    let point = point_name(c);
    let twin = (ok && Some(c.server_id.as_str()) != baseline)
        .then(|| {
            base.get(&(point.clone(), c.workload.repetition))
                .or_else(|| base_any.get(&point))
        })
        .flatten();
    let sp = twin.and_then(|b| speedup(c, b));
    let acc = s.and(acceptance_length(c));
    CellRow {
        server_id: c.server_id.clone(),
        cell_name: c.cell_name.clone(),
        point,
        workload: c.workload.workload.clone(),
        repetition: c.workload.repetition,
        status: c.status,
        failure_class: c.failure.as_ref().map(|f| f.class),
        reason: if c.status == CellStatus::Ok {
            None
        } else {
            reason_of(c)
        },
        tp: c.server.tp,
        gpus,
        layout: c.server.layout().label(),
        method: c.server.method_name(),
        budget: c
            .server
            .speculative
            .as_ref()
            .and_then(|s| s.num_draft_tokens),
        prompt: prompt_text(c),
        input_len: c.workload.input_len,
        output_len: c.workload.output_len,
        load: c.workload.load.label_rounded(),
        concurrency: concurrency_of(&c.workload.load),
        rate: match c.workload.load {
            LoadShape::Rate { value, .. } => Some(value),
            LoadShape::Concurrency { .. } | LoadShape::Replay { .. } => None,
        },
        requests_ok: c.summary.as_ref().map(|s| s.completed),
        requests_failed: c.summary.as_ref().map(|s| s.failed),
        output_tok_s: s.map(|s| s.output_throughput_tok_s),
        output_tok_s_per_gpu: s.map(|s| s.output_throughput_tok_s / gpus as f64),
        decode_tok_s_p50: s.and_then(|s| s.latency.decode_tok_s).map(|x| x.p50),
        ttft_p50_ms: s.and_then(|s| s.latency.ttft_ms).map(|x| x.p50),
        ttft_p99_ms: s.and_then(|s| s.latency.ttft_ms).map(|x| x.p99),
        tpot_p50_ms: s.and_then(|s| s.latency.tpot_ms).map(|x| x.p50),
        itl_per_token_p50_ms: s.and_then(|s| s.latency.itl_per_token_ms).map(|x| x.p50),
        acceptance_length: acc.map(|a| a.0),
        acceptance_source: acc.map(|a| a.1.to_string()),
        acceptance_rate: s.and(acceptance_rate(c)),
        speedup_decode: sp.map(|x| x.0),
        speedup_output: sp.map(|x| x.1),
        usable: ok,
        identity: c.identity.clone(),
        output_identical: None,
        in_flight: s.and_then(|s| s.in_flight).map(|f| f.mean),
        under_loaded: s.and(under_loaded(c)),
        steady_output_tok_s: s
            .and_then(|s| s.steady.as_ref())
            .map(|w| w.output_throughput_tok_s),
        steady_short: s.and_then(|s| s.steady.as_ref()?.short.clone()),
        over_saturated: s.and(over_saturated(c)),
        joules_per_token: None,
        tokens_per_joule: None,
        usd_per_mtok: None,
        ttfa_p50_ms: s.and_then(|s| s.latency.ttfa_ms).map(|x| x.p50),
        reasoning_tokens: s.and_then(|s| s.reasoning_tokens),
        prompt_cache_hit_rate: s.and_then(|s| s.prompt_cache).map(|p| p.hit_rate),
    }
}

/// (decode-speed ratio, output-throughput ratio) of a usable cell over its baseline twin.
pub fn speedup(cell: &CellResult, base: &CellResult) -> Option<(f64, f64)> {
    if !cell.status.is_usable() || !base.status.is_usable() {
        return None;
    }
    let (s, b) = (cell.summary.as_ref()?, base.summary.as_ref()?);
    let dec = match (s.latency.decode_tok_s, b.latency.decode_tok_s) {
        (Some(x), Some(y)) if y.p50 > 0.0 => x.p50 / y.p50,
        _ => return None,
    };
    (b.output_throughput_tok_s > 0.0)
        .then(|| (dec, s.output_throughput_tok_s / b.output_throughput_tok_s))
}

fn point_rows(cells: &[&CellResult], rows: &[CellRow]) -> Vec<PointRow> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        let key = (r.server_id.clone(), r.point.clone());
        groups
            .entry(key.clone())
            .or_insert_with(|| {
                order.push(key.clone());
                Vec::new()
            })
            .push(i);
    }
    order
        .into_iter()
        .map(|key| {
            let idx = &groups[&key];
            let first = &rows[idx[0]];
            let good: Vec<&CellRow> = idx.iter().map(|&i| &rows[i]).filter(|r| r.usable).collect();
            let spread =
                |f: fn(&CellRow) -> Option<f64>| Spread::of(good.iter().filter_map(|r| f(r)));
            let status = StatusTally::of(idx.iter().map(|&i| rows[i].status));
            PointRow {
                server_id: key.0.clone(),
                point: key.1.clone(),
                family: family_of(cells[idx[0]]),
                workload: first.workload.clone(),
                load: first.load.clone(),
                concurrency: first.concurrency,
                input_len: first.input_len,
                output_len: first.output_len,
                gpus: first.gpus,
                method: first.method.clone(),
                budget: first.budget,
                status,
                cells: idx.len(),
                requests_ok: idx.iter().filter_map(|&i| rows[i].requests_ok).sum(),
                requests_failed: idx.iter().filter_map(|&i| rows[i].requests_failed).sum(),
                output_tok_s: spread(|r| r.output_tok_s),
                output_tok_s_per_gpu: spread(|r| r.output_tok_s_per_gpu),
                decode_tok_s_p50: spread(|r| r.decode_tok_s_p50),
                ttft_p50_ms: spread(|r| r.ttft_p50_ms),
                ttft_p99_ms: spread(|r| r.ttft_p99_ms),
                tpot_p50_ms: spread(|r| r.tpot_p50_ms),
                itl_per_token_p50_ms: spread(|r| r.itl_per_token_p50_ms),
                acceptance_length: spread(|r| r.acceptance_length),
                speedup_decode: spread(|r| r.speedup_decode),
                speedup_output: spread(|r| r.speedup_output),
                in_flight: spread(|r| r.in_flight),
                under_loaded: idx.iter().find_map(|&i| rows[i].under_loaded.clone()),
                steady_output_tok_s: spread(|r| r.steady_output_tok_s),
                over_saturated: idx.iter().find_map(|&i| rows[i].over_saturated.clone()),
                joules_per_token: spread(|r| r.joules_per_token),
                tokens_per_joule: spread(|r| r.tokens_per_joule),
                usd_per_mtok: spread(|r| r.usd_per_mtok),
            }
        })
        .collect()
}

/// Why a cell's load did not happen as named: too few requests, a client
/// that fell behind, or a server limit on running requests (from its log,
/// where each data-parallel replica states its own) below the asked
/// concurrency.
pub(super) fn under_loaded(c: &CellResult) -> Option<String> {
    let s = c.summary.as_ref()?;
    let limit = c
        .telemetry
        .as_ref()
        .and_then(|t| t.log.as_ref())
        .and_then(|l| l.max_running_requests)
        .map(|per_replica| per_replica.saturating_mul(u64::from(c.server.dp.max(1))));
    crate::metrics::level::under_load(
        &c.workload.load,
        s.in_flight.as_ref(),
        s.completed + s.failed,
        limit,
    )
}

/// Why a cell's server fell behind its load (see `metrics::steady`): the
/// evidence its steady-state window holds, joined.
pub(super) fn over_saturated(c: &CellResult) -> Option<String> {
    let w = c.summary.as_ref()?.steady.as_ref()?;
    (!w.over_saturated.is_empty()).then(|| w.over_saturated.join("; "))
}

/// A note per server naming its over-saturated cells.
fn note_over_saturated(servers: &[String], rows: &[CellRow], notes: &mut Vec<String>) {
    for s in servers {
        let hit: Vec<String> = rows
            .iter()
            .filter(|r| &r.server_id == s && r.usable && r.over_saturated.is_some())
            .map(|r| r.cell_name.clone())
            .collect();
        if !hit.is_empty() {
            notes.push(format!(
                "server `{s}`: {} cells over-saturated (the server fell behind the load), drawn but never recommended: {}",
                hit.len(),
                hit.join(", ")
            ));
        }
    }
}

fn kind_rows(cells: &[&CellResult], baseline: Option<&str>) -> Vec<KindRow> {
    let rank: HashMap<&str, usize> = {
        let mut m = HashMap::new();
        for c in cells {
            let n = m.len();
            m.entry(c.server_id.as_str()).or_insert(n);
        }
        m
    };
    let groups = decode_by(cells, |c, r| {
        Some((
            c.workload.workload.clone(),
            kind_of(r),
            c.workload.output_len,
            load_order(&c.workload.load).to_bits(),
            c.workload.load.label_rounded(),
            rank[c.server_id.as_str()],
            c.server_id.clone(),
        ))
    });
    let medians: HashMap<_, f64> = groups
        .iter()
        .map(|(k, v)| {
            (
                (k.0.clone(), k.1.clone(), k.2, k.4.clone(), k.6.clone()),
                median(v),
            )
        })
        .collect();
    groups
        .iter()
        .map(|(k, v)| {
            let m = median(v);
            let speedup = baseline.filter(|b| *b != k.6).and_then(|b| {
                medians
                    .get(&(k.0.clone(), k.1.clone(), k.2, k.4.clone(), b.to_string()))
                    .filter(|x| **x > 0.0)
                    .map(|x| m / x)
            });
            let twin =
                k.1.parse::<crate::workload::PromptKind>()
                    .ok()
                    .and_then(|kind| kind.unconstrained_twin());
            let unconstrained = twin.and_then(|t| {
                medians
                    .get(&(
                        k.0.clone(),
                        t.name().to_string(),
                        k.2,
                        k.4.clone(),
                        k.6.clone(),
                    ))
                    .copied()
            });
            KindRow {
                server_id: k.6.clone(),
                workload: k.0.clone(),
                kind: k.1.clone(),
                output_len: k.2,
                load: k.4.clone(),
                requests: v.len(),
                decode_tok_s_p50: m,
                speedup_decode: speedup,
                unconstrained_tok_s_p50: unconstrained,
            }
        })
        .collect()
}

fn gpu_points(points: &[PointRow], layouts: &HashMap<&str, String>) -> Vec<GpuPoint> {
    let mut out: Vec<GpuPoint> = points
        .iter()
        .filter(|p| p.concurrency.is_some())
        .filter_map(|p| {
            Some(GpuPoint {
                family: p.family.clone(),
                server_id: p.server_id.clone(),
                layout: layouts.get(p.server_id.as_str())?.clone(),
                load: p.load.clone(),
                tok_s_per_user: p.decode_tok_s_p50?.mean,
                tok_s_per_gpu: p.output_tok_s_per_gpu?.mean,
                pareto: false,
                tokens_per_joule: p.tokens_per_joule.map(|s| s.mean),
            })
        })
        .collect();
    let mut by_family: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, p) in out.iter().enumerate() {
        by_family.entry(p.family.clone()).or_default().push(i);
    }
    for idx in by_family.values() {
        // Sweep by speed per user, fastest first: a point is on the frontier
        // when it beats the best per-GPU throughput of every faster point.
        let mut sorted = idx.clone();
        sorted.sort_by(|&a, &b| {
            out[b]
                .tok_s_per_user
                .total_cmp(&out[a].tok_s_per_user)
                .then(out[b].tok_s_per_gpu.total_cmp(&out[a].tok_s_per_gpu))
        });
        let mut best = f64::NEG_INFINITY;
        for i in sorted {
            if out[i].tok_s_per_gpu > best {
                out[i].pareto = true;
                best = out[i].tok_s_per_gpu;
            }
        }
    }
    out
}

fn turn_rows(cells: &[&CellResult]) -> Vec<TurnRow> {
    let mut groups: BTreeMap<(String, String, u32), Vec<&RequestRecord>> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.status.is_usable()) {
        let Some(s) = &c.summary else { continue };
        for r in s.requests.iter().filter(|r| r.is_ok()) {
            if let Some(t) = r.turn {
                groups
                    .entry((c.server_id.clone(), c.workload.workload.clone(), t))
                    .or_default()
                    .push(r);
            }
        }
    }
    groups
        .into_iter()
        .map(|((server_id, workload, turn), rs)| {
            let ttft: Vec<f64> = rs.iter().filter_map(|r| r.ttft_ms).collect();
            let e2e: Vec<f64> = rs.iter().filter_map(|r| r.e2e_ms).collect();
            let ctx: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.input_tokens.or(r.planned_input_tokens))
                .map(|v| v as f64)
                .collect();
            TurnRow {
                server_id,
                workload,
                turn,
                requests: rs.len(),
                ttft_p50_ms: median(&ttft),
                e2e_p50_ms: median(&e2e),
                context_tokens: Spread::of(ctx).map(|s| s.mean),
            }
        })
        .collect()
}
