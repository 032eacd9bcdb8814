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

use super::ResultSet;
use crate::campaign::PromptSource;
use crate::client::record::RequestRecord;
use crate::load::schedule::LoadShape;
use crate::metrics::goodput::meets;
use crate::metrics::stats::{decode_tok_s, percentile};
use crate::store::{CellResult, CellStatus};
use crate::util::units::Slo;

/// Version of the `report.json` layout.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// Bootstrap resamples behind every confidence interval.
pub const BOOTSTRAP_RESAMPLES: usize = 200;

/// Families (workload, input, output) that get their own per-concurrency
/// charts; more would make the page unreadable, the CSV has them all.
pub const MAX_FAMILY_CHARTS: usize = 6;

/// Knobs of the aggregation.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Baseline server id; overrides the one in `campaign.json`.
    pub baseline: Option<String>,
    /// Seed of the bootstrap generator.
    pub seed: u64,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            baseline: None,
            seed: 0x0005_e27e_be7c,
        }
    }
}

/// Minimum, mean and maximum of one metric over a point's repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Repetitions that measured it.
    pub n: usize,
    /// Mean over repetitions.
    pub mean: f64,
    /// Smallest repetition.
    pub min: f64,
    /// Largest repetition.
    pub max: f64,
}

impl Spread {
    /// The spread of the finite values, `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        Some(Spread {
            n: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// (max − min) / mean: the relative noise seen across repetitions.
    pub fn relative_range(&self) -> f64 {
        if self.mean.abs() > 0.0 {
            (self.max - self.min) / self.mean.abs()
        } else {
            0.0
        }
    }
}

/// One stored cell, flattened for tables and CSV.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRow {
    /// Server config id.
    pub server_id: String,
    /// Cell name (unique within a server).
    pub cell_name: String,
    /// Workload point name without the repetition suffix.
    pub point: String,
    /// Workload name.
    pub workload: String,
    /// Repetition index (0-based).
    pub repetition: u32,
    /// Cell status.
    pub status: CellStatus,
    /// Failure class, when the cell or its dominant request failed.
    pub failure_class: Option<String>,
    /// Why the cell failed, was skipped or is suspicious.
    pub reason: Option<String>,
    /// Tensor-parallel size.
    pub tp: u32,
    /// GPUs the throughput is divided by (`tp`; CPU engines have tp 1).
    pub gpus: u32,
    /// Speculative method or `ar`.
    pub method: String,
    /// Speculative budget (`num_draft_tokens`).
    pub budget: Option<u32>,
    /// Prompt source: `synthetic` or the prompt kinds joined by `+`.
    pub prompt: String,
    /// Prompt tokens asked for.
    pub input_len: u64,
    /// Output tokens asked for.
    pub output_len: u64,
    /// Load level as text (`c8`, `rate2`).
    pub load: String,
    /// Closed-loop concurrency.
    pub concurrency: Option<u32>,
    /// Open-loop request rate, requests/s.
    pub rate: Option<f64>,
    /// Completed requests.
    pub requests_ok: Option<usize>,
    /// Failed requests.
    pub requests_failed: Option<usize>,
    /// Output throughput, tokens/s.
    pub output_tok_s: Option<f64>,
    /// Output throughput per GPU, tokens/s.
    pub output_tok_s_per_gpu: Option<f64>,
    /// Per-request decode speed p50, tokens/s.
    pub decode_tok_s_p50: Option<f64>,
    /// TTFT p50, ms.
    pub ttft_p50_ms: Option<f64>,
    /// TTFT p99, ms.
    pub ttft_p99_ms: Option<f64>,
    /// TPOT p50, ms.
    pub tpot_p50_ms: Option<f64>,
    /// Per-token ITL p50, ms.
    pub itl_per_token_p50_ms: Option<f64>,
    /// Speculative acceptance length (tokens per verification step).
    pub acceptance_length: Option<f64>,
    /// Where `acceptance_length` came from.
    pub acceptance_source: Option<String>,
    /// Share of drafted tokens the target model accepted (0..1), from the
    /// engine's counters or per-response draft counts; unknown without them.
    pub acceptance_rate: Option<f64>,
    /// Decode-speed ratio over the baseline at the same point and repetition.
    pub speedup_decode: Option<f64>,
    /// Output-throughput ratio over the baseline at the same point and repetition.
    pub speedup_output: Option<f64>,
    /// Whether the numbers enter charts, speedups and recommendations.
    pub usable: bool,
    /// Identity hash.
    pub identity: String,
}

/// One (server, workload point), aggregated over its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointRow {
    /// Server config id.
    pub server_id: String,
    /// Workload point name.
    pub point: String,
    /// `workload-input-output`: points that differ only by load.
    pub family: String,
    /// Load as text.
    pub load: String,
    /// Closed-loop concurrency.
    pub concurrency: Option<u32>,
    /// Prompt tokens asked for.
    pub input_len: u64,
    /// Output tokens asked for.
    pub output_len: u64,
    /// GPUs used.
    pub gpus: u32,
    /// Speculative method or `ar`.
    pub method: String,
    /// Speculative budget.
    pub budget: Option<u32>,
    /// Status over repetitions, e.g. `ok` or `ok×2 failed×1`.
    pub status: String,
    /// Cells stored for the point.
    pub cells: usize,
    /// Completed requests over all repetitions.
    pub requests_ok: usize,
    /// Failed requests over all repetitions.
    pub requests_failed: usize,
    /// Output throughput, tokens/s.
    pub output_tok_s: Option<Spread>,
    /// Output throughput per GPU, tokens/s.
    pub output_tok_s_per_gpu: Option<Spread>,
    /// Per-request decode speed p50, tokens/s.
    pub decode_tok_s_p50: Option<Spread>,
    /// TTFT p50, ms.
    pub ttft_p50_ms: Option<Spread>,
    /// TTFT p99, ms.
    pub ttft_p99_ms: Option<Spread>,
    /// TPOT p50, ms.
    pub tpot_p50_ms: Option<Spread>,
    /// Per-token ITL p50, ms.
    pub itl_per_token_p50_ms: Option<Spread>,
    /// Acceptance length.
    pub acceptance_length: Option<Spread>,
    /// Decode-speed ratio over the baseline.
    pub speedup_decode: Option<Spread>,
    /// Output-throughput ratio over the baseline.
    pub speedup_output: Option<Spread>,
}

/// Decode speed of one prompt kind on one server, and its speedup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindRow {
    /// Server config id.
    pub server_id: String,
    /// Workload name.
    pub workload: String,
    /// Prompt kind (`label` of the requests, or `synthetic`).
    pub kind: String,
    /// Output tokens asked for.
    pub output_len: u64,
    /// Load as text.
    pub load: String,
    /// Completed requests pooled over repetitions.
    pub requests: usize,
    /// Median per-request decode speed, tokens/s.
    pub decode_tok_s_p50: f64,
    /// Ratio of `decode_tok_s_p50` over the baseline's for the same kind.
    pub speedup_decode: Option<f64>,
}

/// One (server, concurrency) point of the per-GPU trade-off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuPoint {
    /// Workload family.
    pub family: String,
    /// Server config id.
    pub server_id: String,
    /// Load as text.
    pub load: String,
    /// Tokens/s per user (per-request decode speed p50).
    pub tok_s_per_user: f64,
    /// Output tokens/s per GPU.
    pub tok_s_per_gpu: f64,
    /// Whether no other point is at least as good on both axes and better on one.
    pub pareto: bool,
}

/// A candidate in a ranking, with its interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// Server config id.
    pub server_id: String,
    /// Load as text.
    pub load: String,
    /// The ranked value.
    pub value: f64,
    /// Lower end of its interval.
    pub low: f64,
    /// Upper end of its interval.
    pub high: f64,
}

/// The best config for one SLO in one workload family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloPick {
    /// The SLO as written (`ttft<=200ms, tpot<=20ms`).
    pub slo: String,
    /// Workload family.
    pub family: String,
    /// The winner: goodput per GPU, requests/s.
    pub best: Ranked,
    /// Share of the winner's requests meeting the SLO.
    pub best_share: f64,
    /// The runner-up, when there is one.
    pub runner_up: Option<Ranked>,
    /// `confident` or `too close to call`.
    pub confidence: String,
    /// How the interval was obtained.
    pub interval: String,
    /// Candidates ranked.
    pub candidates: usize,
    /// What else the winner's server did wrong in this campaign.
    pub caveat: Option<String>,
}

/// The fastest single-stream config for one prompt kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamPick {
    /// Prompt kind.
    pub kind: String,
    /// The winner: median per-request decode speed at concurrency 1, tokens/s.
    pub best: Ranked,
    /// The runner-up.
    pub runner_up: Option<Ranked>,
    /// `confident` or `too close to call`.
    pub confidence: String,
    /// Requests behind the winner's median.
    pub requests: usize,
    /// What else the winner's server did wrong in this campaign.
    pub caveat: Option<String>,
}

/// A cell that did not give a usable measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// Server config id.
    pub server_id: String,
    /// Cell name.
    pub cell_name: String,
    /// Cell status.
    pub status: CellStatus,
    /// Failure class.
    pub class: Option<String>,
    /// Evidence: failure detail or warnings.
    pub evidence: String,
    /// Server-log lines behind the failure.
    pub log_excerpt: Option<String>,
}

/// Latency of one turn of the agentic sessions on one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRow {
    /// Server config id.
    pub server_id: String,
    /// Workload name.
    pub workload: String,
    /// Turn index.
    pub turn: u32,
    /// Requests.
    pub requests: usize,
    /// TTFT p50, ms.
    pub ttft_p50_ms: f64,
    /// E2E p50, ms.
    pub e2e_p50_ms: f64,
    /// Mean prompt tokens (the conversation so far).
    pub context_tokens: Option<f64>,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesStyle {
    /// Solid line with markers.
    Line,
    /// Dashed line with markers.
    Dashed,
    /// Markers only.
    Markers,
    /// The Pareto frontier: a thick step line over the other series.
    Frontier,
}

/// One named series of a chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Colour slot (same server, same colour across charts).
    pub color: usize,
    /// How it is drawn.
    pub style: SeriesStyle,
    /// (x, y) points; for bar charts x is the group index.
    pub points: Vec<(f64, f64)>,
    /// Per-point annotations (e.g. concurrency), empty for none.
    pub labels: Vec<String>,
}

/// What kind of chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChartKind {
    /// Lines over a numeric x axis.
    Line {
        /// Logarithmic (base 2) x axis.
        log_x: bool,
    },
    /// Grouped bars over named groups.
    Bars {
        /// Group names, in x order.
        groups: Vec<String>,
        /// A horizontal reference line (speedup 1.0).
        reference: Option<f64>,
    },
}

/// A chart as data; `svg` draws it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// Section the chart belongs in.
    pub section: String,
    /// Title.
    pub title: String,
    /// X axis label with unit.
    pub x_label: String,
    /// Y axis label with unit.
    pub y_label: String,
    /// Line or bars.
    pub kind: ChartKind,
    /// The data.
    pub series: Vec<Series>,
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
    /// Server ids in campaign order.
    pub servers: Vec<String>,
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
    /// Fastest single-stream config per prompt kind.
    pub stream_picks: Vec<StreamPick>,
    /// Cells without a usable measurement, with their reason.
    pub problems: Vec<Problem>,
    /// Agentic per-turn latency.
    pub turns: Vec<TurnRow>,
    /// Result files that could not be read.
    pub unreadable: Vec<(String, String)>,
    /// Charts, in page order.
    pub charts: Vec<Chart>,
    /// What could not be shown, and why.
    pub notes: Vec<String>,
}

/// The SLO as readable text.
pub fn slo_text(s: &Slo) -> String {
    let mut parts = Vec::new();
    for (k, v) in [("ttft", s.ttft_ms), ("tpot", s.tpot_ms), ("e2e", s.e2e_ms)] {
        if let Some(ms) = v {
            parts.push(format!("{k}<={}ms", fmt_g(ms)));
        }
    }
    parts.join(", ")
}

/// A number without trailing zeros (200, 12.5).
fn fmt_g(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// GPUs a server config occupies: its TP size (CPU engines run with tp 1).
pub fn gpus_of(c: &CellResult) -> u32 {
    c.server.tp.max(1)
}

/// The load as text.
pub fn load_text(l: &LoadShape) -> String {
    match l {
        LoadShape::Concurrency { value } => format!("c{value}"),
        LoadShape::Rate { value, .. } => format!("rate{}", fmt_g(*value)),
    }
}

fn prompt_text(c: &CellResult) -> String {
    match &c.workload.source {
        PromptSource::Synthetic => "synthetic".into(),
        PromptSource::PromptKinds { kinds } => kinds.join("+"),
        PromptSource::Dataset { path, .. } => format!(
            "dataset {}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
        PromptSource::Scenario { name } => format!("scenario {name}"),
    }
}

fn point_name(c: &CellResult) -> String {
    let mut w = c.workload.clone();
    w.repetition = 0;
    w.cell_name()
}

fn family_of(c: &CellResult) -> String {
    let input = match c.workload.source {
        PromptSource::Synthetic => format!("in{}", c.workload.input_len),
        PromptSource::PromptKinds { .. } => "kinds".into(),
        PromptSource::Dataset { .. } => "dataset".into(),
        PromptSource::Scenario { .. } => "sessions".into(),
    };
    format!(
        "{}-{input}-out{}",
        c.workload.workload, c.workload.output_len
    )
}

fn concurrency_of(l: &LoadShape) -> Option<u32> {
    match l {
        LoadShape::Concurrency { value } => Some(*value),
        LoadShape::Rate { .. } => None,
    }
}

fn load_order(l: &LoadShape) -> f64 {
    match l {
        LoadShape::Concurrency { value } => *value as f64,
        LoadShape::Rate { value, .. } => 1e9 + value,
    }
}

/// Whether a cell's numbers may be used (charts, speedups, recommendations).
pub fn usable(status: CellStatus) -> bool {
    matches!(status, CellStatus::Ok | CellStatus::Partial)
}

/// Acceptance length and its source: engine telemetry first, then the
/// draft counters (1 + budget × accepted / drafted, i.e. assuming each step
/// drafts `budget` tokens), then the client's tokens per streamed chunk
/// (one chunk per verification step).
pub fn acceptance_length(c: &CellResult) -> Option<(f64, &'static str)> {
    let spec = c.server.speculative.as_ref()?;
    if let Some(v) = c.telemetry.as_ref().and_then(|t| t.acceptance_length()) {
        return Some((v, "telemetry"));
    }
    let s = c.summary.as_ref()?;
    if let (Some(d), Some(a), Some(k)) = (
        s.draft_tokens,
        s.accepted_draft_tokens,
        spec.num_draft_tokens,
    ) {
        if d > 0 {
            return Some((1.0 + k as f64 * a as f64 / d as f64, "draft_counts"));
        }
    }
    let (mut tokens, mut chunks) = (0u64, 0u64);
    for r in s.requests.iter().filter(|r| r.is_ok()) {
        tokens += r.chunks.iter().map(|c| c.1 as u64).sum::<u64>();
        chunks += r.chunks.len() as u64;
    }
    (chunks > 0).then(|| (tokens as f64 / chunks as f64, "tokens_per_chunk"))
}

/// Share of drafted tokens accepted: the engine's own figure from telemetry,
/// else accepted / drafted from the cell's per-response draft counts.
pub fn acceptance_rate(c: &CellResult) -> Option<f64> {
    c.server.speculative.as_ref()?;
    let from_telemetry = c.telemetry.as_ref().and_then(|t| t.acceptance_rate());
    if from_telemetry.is_some() {
        return from_telemetry;
    }
    let s = c.summary.as_ref()?;
    match (s.draft_tokens, s.accepted_draft_tokens) {
        (Some(d), Some(a)) if d > 0 => Some(a as f64 / d as f64),
        _ => None,
    }
}

/// A small deterministic generator (SplitMix64) for bootstrap resampling.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform index below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// 95% bootstrap interval of `stat` over resamples of `values`.
pub fn bootstrap<T: Copy>(
    values: &[T],
    rng: &mut SplitMix,
    stat: impl Fn(&[T]) -> f64,
) -> (f64, f64) {
    if values.len() < 2 {
        let v = stat(values);
        return (v, v);
    }
    let mut buf = Vec::with_capacity(values.len());
    let mut stats: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            buf.clear();
            buf.extend((0..values.len()).map(|_| values[rng.below(values.len())]));
            stat(&buf)
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    (percentile(&stats, 2.5), percentile(&stats, 97.5))
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 50.0)
}

fn kind_of(r: &RequestRecord) -> String {
    r.label.clone().unwrap_or_else(|| "synthetic".into())
}

fn reason_of(c: &CellResult) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(f) = &c.failure {
        parts.push(f.detail.clone());
    }
    parts.extend(c.warnings.iter().cloned());
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Build the report from stored results.
pub fn build(set: &ResultSet, opts: &ReportOptions) -> Report {
    let meta = set.meta.as_ref();
    let (baseline, baseline_source) = match (&opts.baseline, meta.and_then(|m| m.baseline.clone()))
    {
        (Some(b), _) => (Some(b.clone()), "--baseline".to_string()),
        (None, Some(b)) => (Some(b), "campaign.json".to_string()),
        (None, None) => (
            None,
            "none: no --baseline and no baseline in campaign.json, so no speedups".to_string(),
        ),
    };
    let mut notes = Vec::new();
    // Server order: the campaign's, then any others by id.
    let mut servers: Vec<String> = meta.map(|m| m.servers.clone()).unwrap_or_default();
    let known: BTreeSet<String> = set.cells.iter().map(|c| c.server_id.clone()).collect();
    for s in &known {
        if !servers.contains(s) {
            servers.push(s.clone());
        }
    }
    servers.retain(|s| known.contains(s));
    if let Some(b) = &baseline {
        if !known.contains(b) {
            notes.push(format!(
                "baseline `{b}` has no stored cells, so no speedups"
            ));
        }
    }
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

    let mut cells: Vec<&CellResult> = set.cells.iter().collect();
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

    let color: HashMap<&str, usize> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let base_cells: HashMap<(String, u32), &CellResult> = cells
        .iter()
        .filter(|c| Some(&c.server_id) == baseline.as_ref() && usable(c.status))
        .map(|c| ((point_name(c), c.workload.repetition), *c))
        .collect();
    let base_any: HashMap<String, &CellResult> = cells
        .iter()
        .filter(|c| Some(&c.server_id) == baseline.as_ref() && usable(c.status))
        .map(|c| (point_name(c), *c))
        .collect();

    let rows: Vec<CellRow> = cells
        .iter()
        .map(|c| cell_row(c, &base_cells, &base_any, baseline.as_deref()))
        .collect();
    let points = point_rows(&cells, &rows);
    let mut rng = SplitMix::new(opts.seed);
    let kinds = kind_rows(&cells, baseline.as_deref());
    let gpu_points = gpu_points(&points);
    let slo_picks = slo_picks(&cells, &mut rng);
    let stream_picks = stream_picks(&cells, &mut rng);
    let problems = cells
        .iter()
        .filter(|c| c.status != CellStatus::Ok)
        .map(|c| Problem {
            server_id: c.server_id.clone(),
            cell_name: c.cell_name.clone(),
            status: c.status,
            class: c.failure.as_ref().map(|f| f.class.as_str().to_string()),
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
        .collect();
    let turns = turn_rows(&cells);
    let charts = charts(
        &servers,
        &color,
        &points,
        &kinds,
        &gpu_points,
        &turns,
        baseline.as_deref(),
        &mut notes,
    );
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
        servers,
        cells: rows,
        points,
        kinds,
        gpu_points,
        slo_picks,
        stream_picks,
        problems,
        turns,
        unreadable: set.unreadable.clone(),
        charts,
        notes,
    }
}

fn cell_row(
    c: &CellResult,
    base: &HashMap<(String, u32), &CellResult>,
    base_any: &HashMap<String, &CellResult>,
    baseline: Option<&str>,
) -> CellRow {
    let ok = usable(c.status);
    // Suspicious cells keep their numbers in the row (they are evidence),
    // but never enter speedups, charts or rankings.
    let show = ok || c.status == CellStatus::Suspicious;
    let s = c.summary.as_ref().filter(|_| show);
    let gpus = gpus_of(c);
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
        failure_class: c.failure.as_ref().map(|f| f.class.as_str().to_string()),
        reason: if c.status == CellStatus::Ok {
            None
        } else {
            reason_of(c)
        },
        tp: c.server.tp,
        gpus,
        method: c.server.method_name(),
        budget: c
            .server
            .speculative
            .as_ref()
            .and_then(|s| s.num_draft_tokens),
        prompt: prompt_text(c),
        input_len: c.workload.input_len,
        output_len: c.workload.output_len,
        load: load_text(&c.workload.load),
        concurrency: concurrency_of(&c.workload.load),
        rate: match c.workload.load {
            LoadShape::Rate { value, .. } => Some(value),
            LoadShape::Concurrency { .. } => None,
        },
        requests_ok: c.summary.as_ref().map(|s| s.completed),
        requests_failed: c.summary.as_ref().map(|s| s.failed),
        output_tok_s: s.map(|s| s.output_throughput_tok_s),
        output_tok_s_per_gpu: s.map(|s| s.output_throughput_tok_s / gpus as f64),
        decode_tok_s_p50: s.and_then(|s| s.decode_tok_s).map(|x| x.p50),
        ttft_p50_ms: s.and_then(|s| s.ttft_ms).map(|x| x.p50),
        ttft_p99_ms: s.and_then(|s| s.ttft_ms).map(|x| x.p99),
        tpot_p50_ms: s.and_then(|s| s.tpot_ms).map(|x| x.p50),
        itl_per_token_p50_ms: s.and_then(|s| s.itl_per_token_ms).map(|x| x.p50),
        acceptance_length: acc.map(|a| a.0),
        acceptance_source: acc.map(|a| a.1.to_string()),
        acceptance_rate: s.and(acceptance_rate(c)),
        speedup_decode: sp.map(|x| x.0),
        speedup_output: sp.map(|x| x.1),
        usable: ok,
        identity: c.identity.clone(),
    }
}

/// (decode-speed ratio, output-throughput ratio) of a usable cell over its baseline twin.
pub fn speedup(cell: &CellResult, base: &CellResult) -> Option<(f64, f64)> {
    if !usable(cell.status) || !usable(base.status) {
        return None;
    }
    let (s, b) = (cell.summary.as_ref()?, base.summary.as_ref()?);
    let dec = match (s.decode_tok_s, b.decode_tok_s) {
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
            let mut counts: BTreeMap<CellStatus, usize> = BTreeMap::new();
            for &i in idx {
                *counts.entry(rows[i].status).or_insert(0) += 1;
            }
            let status = if counts.len() == 1 && idx.len() == 1 {
                first.status.as_str().to_string()
            } else {
                counts
                    .iter()
                    .map(|(s, n)| format!("{}×{n}", s.as_str()))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            PointRow {
                server_id: key.0.clone(),
                point: key.1.clone(),
                family: family_of(cells[idx[0]]),
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
            }
        })
        .collect()
}

/// Per-request decode speeds of the usable cells, grouped by a key.
fn decode_by<K: Ord + Clone>(
    cells: &[&CellResult],
    key: impl Fn(&CellResult, &RequestRecord) -> Option<K>,
) -> BTreeMap<K, Vec<f64>> {
    let mut out: BTreeMap<K, Vec<f64>> = BTreeMap::new();
    for c in cells.iter().filter(|c| usable(c.status)) {
        let Some(s) = &c.summary else { continue };
        for r in s.requests.iter().filter(|r| r.is_ok()) {
            if let (Some(k), Some(v)) = (key(c, r), decode_tok_s(r)) {
                out.entry(k).or_default().push(v);
            }
        }
    }
    out
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
            load_text(&c.workload.load),
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
            KindRow {
                server_id: k.6.clone(),
                workload: k.0.clone(),
                kind: k.1.clone(),
                output_len: k.2,
                load: k.4.clone(),
                requests: v.len(),
                decode_tok_s_p50: m,
                speedup_decode: speedup,
            }
        })
        .collect()
}

fn gpu_points(points: &[PointRow]) -> Vec<GpuPoint> {
    let mut out: Vec<GpuPoint> = points
        .iter()
        .filter(|p| p.concurrency.is_some())
        .filter_map(|p| {
            Some(GpuPoint {
                family: p.family.clone(),
                server_id: p.server_id.clone(),
                load: p.load.clone(),
                tok_s_per_user: p.decode_tok_s_p50?.mean,
                tok_s_per_gpu: p.output_tok_s_per_gpu?.mean,
                pareto: false,
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

fn overlaps(a: &Ranked, b: &Ranked) -> bool {
    a.low <= b.high && b.low <= a.high
}

fn slo_picks(cells: &[&CellResult], rng: &mut SplitMix) -> Vec<SloPick> {
    // (slo, family) → (server, load) → per-repetition (rate/GPU, share, cell)
    type Cand<'a> = Vec<(f64, f64, &'a CellResult, Slo)>;
    type ByConfig<'a> = BTreeMap<(usize, String, String), Cand<'a>>;
    let mut groups: BTreeMap<(String, String), ByConfig> = BTreeMap::new();
    let mut rank: HashMap<&str, usize> = HashMap::new();
    for c in cells.iter().filter(|c| usable(c.status)) {
        let n = rank.len();
        let r = *rank.entry(c.server_id.as_str()).or_insert(n);
        let Some(s) = &c.summary else { continue };
        for g in &s.goodput {
            groups
                .entry((slo_text(&g.slo), family_of(c)))
                .or_default()
                .entry((r, c.server_id.clone(), load_text(&c.workload.load)))
                .or_default()
                .push((g.rate_rps / gpus_of(c) as f64, g.share, c, g.slo));
        }
    }
    let mut out = Vec::new();
    for ((slo, family), cands) in groups {
        let mut ranked: Vec<(Ranked, f64, bool)> = cands
            .iter()
            .map(|((_, server, load), reps)| {
                let values: Vec<f64> = reps.iter().map(|r| r.0).collect();
                let sp = Spread::of(values.iter().copied()).unwrap_or(Spread {
                    n: 0,
                    mean: 0.0,
                    min: 0.0,
                    max: 0.0,
                });
                let share = reps.iter().map(|r| r.1).sum::<f64>() / reps.len() as f64;
                let (low, high, by_reps) = if reps.len() >= 2 {
                    (sp.min, sp.max, true)
                } else {
                    let (cell, slo) = (reps[0].2, reps[0].3);
                    let s = cell.summary.as_ref().expect("usable cells have a summary");
                    // Resample requests and re-estimate the rate as a ratio
                    // estimator: good requests per second of request time,
                    // scaled to the measured rate. Resampling only the
                    // good/bad flags would give no spread when every
                    // request met the SLO, however close the runner-up.
                    let pairs: Vec<(bool, f64)> = s
                        .requests
                        .iter()
                        .map(|r| (meets(r, &slo), r.e2e_ms.unwrap_or(0.0)))
                        .collect();
                    let busy: f64 = pairs.iter().map(|p| p.1).sum();
                    let scale = if s.duration_s > 0.0 && busy > 0.0 {
                        busy / s.duration_s / gpus_of(cell) as f64
                    } else {
                        0.0
                    };
                    let (l, h) = bootstrap(&pairs, rng, |g| {
                        let t: f64 = g.iter().map(|p| p.1).sum();
                        let good = g.iter().filter(|p| p.0).count() as f64;
                        if t > 0.0 {
                            good / t * scale
                        } else {
                            0.0
                        }
                    });
                    (l, h, false)
                };
                (
                    Ranked {
                        server_id: server.clone(),
                        load: load.clone(),
                        value: sp.mean,
                        low,
                        high,
                    },
                    share,
                    by_reps,
                )
            })
            .collect();
        ranked.sort_by(|a, b| b.0.value.total_cmp(&a.0.value));
        let Some((best, share, by_reps)) = ranked.first().cloned() else {
            continue;
        };
        if best.value <= 0.0 {
            continue;
        }
        let runner_up = ranked.get(1).map(|r| r.0.clone());
        let close = runner_up.as_ref().is_some_and(|r| overlaps(&best, r));
        out.push(SloPick {
            slo,
            family,
            best_share: share,
            runner_up,
            confidence: if close {
                "too close to call"
            } else {
                "confident"
            }
            .into(),
            interval: if by_reps {
                "min–max over repetitions".into()
            } else {
                format!("95% bootstrap over requests ({BOOTSTRAP_RESAMPLES} resamples, seeded)")
            },
            candidates: ranked.len(),
            caveat: caveat(cells, &best.server_id),
            best,
        });
    }
    out
}

/// A warning when the recommended server failed elsewhere in the campaign:
/// a config that crashes on some workloads is not a safe pick on the others.
fn caveat(cells: &[&CellResult], server: &str) -> Option<String> {
    let bad: Vec<String> = cells
        .iter()
        .filter(|c| c.server_id == server && !usable(c.status))
        .map(|c| {
            let class = c
                .failure
                .as_ref()
                .map(|f| format!(" ({})", f.class))
                .unwrap_or_default();
            format!("{} {}{class}", c.cell_name, c.status.as_str())
        })
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "but `{server}` has {} unusable cells: {}",
            bad.len(),
            bad.join(", ")
        )
    })
}

fn stream_picks(cells: &[&CellResult], rng: &mut SplitMix) -> Vec<StreamPick> {
    let mut rank: HashMap<&str, usize> = HashMap::new();
    for c in cells {
        let n = rank.len();
        rank.entry(c.server_id.as_str()).or_insert(n);
    }
    let groups = decode_by(cells, |c, r| {
        (concurrency_of(&c.workload.load) == Some(1))
            .then(|| (kind_of(r), rank[c.server_id.as_str()], c.server_id.clone()))
    });
    let mut by_kind: BTreeMap<String, Vec<(Ranked, usize)>> = BTreeMap::new();
    for ((kind, _, server), v) in &groups {
        let (low, high) = bootstrap(v, rng, median);
        by_kind.entry(kind.clone()).or_default().push((
            Ranked {
                server_id: server.clone(),
                load: "c1".into(),
                value: median(v),
                low,
                high,
            },
            v.len(),
        ));
    }
    by_kind
        .into_iter()
        .filter_map(|(kind, mut cands)| {
            cands.sort_by(|a, b| b.0.value.total_cmp(&a.0.value));
            let (best, requests) = cands.first().cloned()?;
            let runner_up = cands.get(1).map(|c| c.0.clone());
            let close = runner_up.as_ref().is_some_and(|r| overlaps(&best, r));
            let caveat = caveat(cells, &best.server_id);
            Some(StreamPick {
                kind,
                best,
                runner_up,
                confidence: if close {
                    "too close to call"
                } else {
                    "confident"
                }
                .into(),
                requests,
                caveat,
            })
        })
        .collect()
}

fn turn_rows(cells: &[&CellResult]) -> Vec<TurnRow> {
    let mut groups: BTreeMap<(String, String, u32), Vec<&RequestRecord>> = BTreeMap::new();
    for c in cells.iter().filter(|c| usable(c.status)) {
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

#[allow(clippy::too_many_arguments)]
fn charts(
    servers: &[String],
    color: &HashMap<&str, usize>,
    points: &[PointRow],
    kinds: &[KindRow],
    gpu: &[GpuPoint],
    turns: &[TurnRow],
    baseline: Option<&str>,
    notes: &mut Vec<String>,
) -> Vec<Chart> {
    let mut out = Vec::new();
    let col = |s: &str| color.get(s).copied().unwrap_or(0);
    let usable_pts: Vec<&PointRow> = points
        .iter()
        .filter(|p| p.output_tok_s.is_some() && p.concurrency.is_some())
        .collect();
    let mut families: Vec<String> = Vec::new();
    for p in &usable_pts {
        if !families.contains(&p.family) {
            families.push(p.family.clone());
        }
    }
    if families.len() > MAX_FAMILY_CHARTS {
        notes.push(format!(
            "{} workload families measured; charts show the first {MAX_FAMILY_CHARTS}, report.csv has them all",
            families.len()
        ));
        families.truncate(MAX_FAMILY_CHARTS);
    }
    if families.is_empty() {
        notes.push("no usable closed-loop measurements: no throughput or latency charts".into());
    }
    let line = |name: String, color: usize, style: SeriesStyle, mut pts: Vec<(f64, f64)>| {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        Series {
            name,
            color,
            style,
            points: pts,
            labels: Vec::new(),
        }
    };
    for fam in &families {
        let in_fam: Vec<&&PointRow> = usable_pts.iter().filter(|p| &p.family == fam).collect();
        let per_server =
            |f: &dyn Fn(&PointRow) -> Option<f64>, style: SeriesStyle, suffix: &str| {
                servers
                    .iter()
                    .filter_map(|s| {
                        let pts: Vec<(f64, f64)> = in_fam
                            .iter()
                            .filter(|p| &p.server_id == s)
                            .filter_map(|p| Some((p.concurrency? as f64, f(p)?)))
                            .collect();
                        (!pts.is_empty()).then(|| line(format!("{s}{suffix}"), col(s), style, pts))
                    })
                    .collect::<Vec<_>>()
            };
        let conc: BTreeSet<u32> = in_fam.iter().filter_map(|p| p.concurrency).collect();
        let log_x = conc
            .iter()
            .next()
            .zip(conc.iter().last())
            .is_some_and(|(a, b)| *b >= 4 * (*a).max(1));
        out.push(Chart {
            section: "throughput".into(),
            title: format!("Output throughput vs. concurrency — {fam}"),
            x_label: "concurrency (users)".into(),
            y_label: "output throughput (tokens/s)".into(),
            kind: ChartKind::Line { log_x },
            series: per_server(&|p| p.output_tok_s.map(|s| s.mean), SeriesStyle::Line, ""),
        });
        let mut lat = per_server(
            &|p| p.ttft_p50_ms.map(|s| s.mean),
            SeriesStyle::Line,
            " p50",
        );
        lat.extend(per_server(
            &|p| p.ttft_p99_ms.map(|s| s.mean),
            SeriesStyle::Dashed,
            " p99",
        ));
        out.push(Chart {
            section: "throughput".into(),
            title: format!("TTFT p50 / p99 vs. concurrency — {fam}"),
            x_label: "concurrency (users)".into(),
            y_label: "time to first token (ms)".into(),
            kind: ChartKind::Line { log_x },
            series: lat,
        });
    }

    // Speedup per prompt kind and output length.
    match baseline {
        None => notes.push("no baseline: speedup chart skipped".into()),
        Some(b) => {
            let rows: Vec<&KindRow> = kinds
                .iter()
                .filter(|k| k.speedup_decode.is_some())
                .collect();
            let mut groups: Vec<String> = Vec::new();
            for k in &rows {
                let g = format!("{} · out {} · {}", k.kind, k.output_len, k.load);
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
            if rows.is_empty() {
                notes.push(format!("no usable cell shares a workload point with baseline `{b}`: speedup chart skipped"));
            } else {
                let series = servers
                    .iter()
                    .filter(|s| s.as_str() != b)
                    .filter_map(|s| {
                        let pts: Vec<(f64, f64)> = rows
                            .iter()
                            .filter(|k| &k.server_id == s)
                            .filter_map(|k| {
                                let g = format!("{} · out {} · {}", k.kind, k.output_len, k.load);
                                Some((
                                    groups.iter().position(|x| *x == g)? as f64,
                                    k.speedup_decode?,
                                ))
                            })
                            .collect();
                        (!pts.is_empty()).then(|| line(s.clone(), col(s), SeriesStyle::Line, pts))
                    })
                    .collect();
                out.push(Chart {
                    section: "speedup".into(),
                    title: format!("Decode speedup over `{b}` per prompt kind and output length"),
                    x_label: "prompt kind · output length (tokens) · load".into(),
                    y_label: "per-request decode speed ratio (×)".into(),
                    kind: ChartKind::Bars {
                        groups,
                        reference: Some(1.0),
                    },
                    series,
                });
            }
        }
    }

    // Budget sweep.
    let sweep: Vec<&PointRow> = points
        .iter()
        .filter(|p| p.budget.is_some() && p.output_tok_s.is_some())
        .collect();
    let budgets: BTreeSet<u32> = sweep.iter().filter_map(|p| p.budget).collect();
    if budgets.len() < 2 {
        notes.push(format!(
            "speculative budget sweep needs at least two budgets (num_draft_tokens); {} measured: chart skipped",
            budgets.len()
        ));
    } else {
        let mut keys: Vec<(String, String, String)> = Vec::new();
        for p in &sweep {
            let k = (p.method.clone(), p.family.clone(), p.load.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys.truncate(8);
        let methods = keys.iter().map(|k| &k.0).collect::<BTreeSet<_>>().len();
        let mk = |f: &dyn Fn(&PointRow) -> Option<f64>| -> Vec<Series> {
            keys.iter()
                .enumerate()
                .filter_map(|(i, (m, fam, load))| {
                    let pts: Vec<(f64, f64)> = sweep
                        .iter()
                        .filter(|p| &p.method == m && &p.family == fam && &p.load == load)
                        .filter_map(|p| Some((p.budget? as f64, f(p)?)))
                        .collect();
                    // The method only tells series apart when several were swept.
                    let name = if methods > 1 {
                        format!("{m} {fam} {load}")
                    } else {
                        format!("{fam} {load}")
                    };
                    (!pts.is_empty()).then(|| line(name, i, SeriesStyle::Line, pts))
                })
                .collect()
        };
        out.push(Chart {
            section: "budget".into(),
            title: "Output throughput vs. speculative budget".into(),
            x_label: "budget (num_draft_tokens)".into(),
            y_label: "output throughput (tokens/s)".into(),
            kind: ChartKind::Line { log_x: false },
            series: mk(&|p| p.output_tok_s.map(|s| s.mean)),
        });
        let acc = mk(&|p| p.acceptance_length.map(|s| s.mean));
        if acc.is_empty() {
            notes.push("no acceptance length known for the budget sweep: chart skipped".into());
        } else {
            out.push(Chart {
                section: "budget".into(),
                title: "Acceptance length vs. speculative budget".into(),
                x_label: "budget (num_draft_tokens)".into(),
                y_label: "acceptance length (tokens/step)".into(),
                kind: ChartKind::Line { log_x: false },
                series: acc,
            });
        }
    }

    // Context length.
    let ctx: Vec<&PointRow> = points
        .iter()
        .filter(|p| p.ttft_p50_ms.is_some() && !p.family.contains("-kinds-"))
        .collect();
    let lens: BTreeSet<u64> = ctx.iter().map(|p| p.input_len).collect();
    if lens.len() < 2 {
        notes.push(
            "only one prompt length (input_len) measured: context-length charts skipped".into(),
        );
    } else {
        // One concurrency so the lines compare like with like: the lowest measured.
        let c0 = ctx.iter().filter_map(|p| p.concurrency).min();
        let mk = |f: &dyn Fn(&PointRow) -> Option<f64>| -> Vec<Series> {
            servers
                .iter()
                .filter_map(|s| {
                    let mut by_len: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
                    for p in ctx
                        .iter()
                        .filter(|p| &p.server_id == s && p.concurrency == c0)
                    {
                        if let Some(v) = f(p) {
                            by_len.entry(p.input_len).or_default().push(v);
                        }
                    }
                    let pts: Vec<(f64, f64)> = by_len
                        .into_iter()
                        .map(|(l, v)| (l as f64, v.iter().sum::<f64>() / v.len() as f64))
                        .collect();
                    (!pts.is_empty()).then(|| line(s.clone(), col(s), SeriesStyle::Line, pts))
                })
                .collect()
        };
        let at = c0
            .map(|c| format!(" (concurrency {c})"))
            .unwrap_or_default();
        out.push(Chart {
            section: "context".into(),
            title: format!("TTFT p50 vs. context length{at}"),
            x_label: "prompt length (tokens)".into(),
            y_label: "time to first token (ms)".into(),
            kind: ChartKind::Line { log_x: false },
            series: mk(&|p| p.ttft_p50_ms.map(|s| s.mean)),
        });
        out.push(Chart {
            section: "context".into(),
            title: format!("Decode speed p50 vs. context length{at}"),
            x_label: "prompt length (tokens)".into(),
            y_label: "per-request decode speed (tokens/s)".into(),
            kind: ChartKind::Line { log_x: false },
            series: mk(&|p| p.decode_tok_s_p50.map(|s| s.mean)),
        });
    }

    // Per-GPU trade-off with the Pareto frontier.
    let mut gfam: Vec<String> = Vec::new();
    for g in gpu {
        if !gfam.contains(&g.family) {
            gfam.push(g.family.clone());
        }
    }
    gfam.truncate(MAX_FAMILY_CHARTS);
    for fam in &gfam {
        let in_fam: Vec<&GpuPoint> = gpu.iter().filter(|g| &g.family == fam).collect();
        let mut series: Vec<Series> = servers
            .iter()
            .filter_map(|s| {
                let mine: Vec<&&GpuPoint> = in_fam.iter().filter(|g| &g.server_id == s).collect();
                (!mine.is_empty()).then(|| Series {
                    name: s.clone(),
                    color: col(s),
                    style: SeriesStyle::Markers,
                    points: mine
                        .iter()
                        .map(|g| (g.tok_s_per_user, g.tok_s_per_gpu))
                        .collect(),
                    labels: mine.iter().map(|g| g.load.clone()).collect(),
                })
            })
            .collect();
        let mut front: Vec<(f64, f64)> = in_fam
            .iter()
            .filter(|g| g.pareto)
            .map(|g| (g.tok_s_per_user, g.tok_s_per_gpu))
            .collect();
        front.sort_by(|a, b| a.0.total_cmp(&b.0));
        series.push(Series {
            name: "Pareto frontier".into(),
            color: 0,
            style: SeriesStyle::Frontier,
            points: front,
            labels: Vec::new(),
        });
        out.push(Chart {
            section: "per_gpu".into(),
            title: format!("Throughput per GPU vs. speed per user — {fam}"),
            x_label: "tokens/s per user (decode p50)".into(),
            y_label: "output tokens/s per GPU".into(),
            kind: ChartKind::Line { log_x: false },
            series,
        });
    }

    // Agentic per-turn latency.
    if turns.is_empty() {
        notes.push("no agentic sessions (requests with a turn index) in these results: per-turn latency chart skipped".into());
    } else {
        let mut keys: Vec<(String, String)> = Vec::new();
        for t in turns {
            let k = (t.server_id.clone(), t.workload.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let mut series = Vec::new();
        for (s, w) in &keys {
            let rows: Vec<&TurnRow> = turns
                .iter()
                .filter(|t| &t.server_id == s && &t.workload == w)
                .collect();
            series.push(line(
                format!("{s} {w} TTFT"),
                col(s),
                SeriesStyle::Line,
                rows.iter()
                    .map(|t| (t.turn as f64, t.ttft_p50_ms))
                    .collect(),
            ));
            series.push(line(
                format!("{s} {w} E2E"),
                col(s),
                SeriesStyle::Dashed,
                rows.iter().map(|t| (t.turn as f64, t.e2e_p50_ms)).collect(),
            ));
        }
        out.push(Chart {
            section: "agentic".into(),
            title: "Agentic sessions: latency per turn (p50)".into(),
            x_label: "turn".into(),
            y_label: "latency (ms)".into(),
            kind: ChartKind::Line { log_x: false },
            series,
        });
    }
    out
}
