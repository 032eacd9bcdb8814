//! The report's data: its row types and the per-cell facts every section
//! reads (a cell's point, family, status, acceptance). Depends on nothing
//! else in `report/`, so each section can read it without a circle.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::campaign::PromptSource;
use crate::client::record::RequestRecord;
use crate::failure::FailureClass;
use crate::load::schedule::LoadShape;
use crate::metrics::stats::decode_tok_s;
use crate::store::{CellResult, CellStatus};
use crate::util::units::Slo;

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
    pub failure_class: Option<FailureClass>,
    /// Why the cell failed, was skipped or is suspicious.
    pub reason: Option<String>,
    /// Tensor-parallel size.
    pub tp: u32,
    /// GPUs the throughput is divided by (`tp`; CPU engines have tp 1).
    pub gpus: u32,
    /// Its parallel layout in short (`tp4-dp2`), the series it is drawn in.
    pub layout: String,
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
    /// Share of its answers identical to the baseline's at the same point
    /// and repetition; unknown for the baseline and where none compare.
    #[serde(default)]
    pub output_identical: Option<f64>,
    /// Time-weighted mean of the requests in flight over the measured part.
    #[serde(default)]
    pub in_flight: Option<f64>,
    /// Why the cell's load did not happen as named (see
    /// `metrics::level::under_load`): shown, never drawn or recommended.
    #[serde(default)]
    pub under_loaded: Option<String>,
    /// Output throughput over the steady-state window, tokens/s (see
    /// `metrics::steady`).
    #[serde(default)]
    pub steady_output_tok_s: Option<f64>,
    /// Why the steady-state window is too short to trust, when it is.
    #[serde(default)]
    pub steady_short: Option<String>,
    /// Evidence that the server fell behind the load: shown and drawn,
    /// never recommended.
    #[serde(default)]
    pub over_saturated: Option<String>,
    /// GPU energy per output token, J (see `metrics::energy`).
    #[serde(default)]
    pub joules_per_token: Option<f64>,
    /// Output tokens per joule of GPU energy.
    #[serde(default)]
    pub tokens_per_joule: Option<f64>,
    /// Dollars per million output tokens, from `[hardware] gpu_hour_cost`.
    #[serde(default)]
    pub usd_per_mtok: Option<f64>,
    /// Time to first answer token p50, ms, where requests reasoned first.
    #[serde(default)]
    pub ttfa_p50_ms: Option<f64>,
    /// Output tokens spent on reasoning.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
    /// Share of prompt tokens served from the prefix cache.
    #[serde(default)]
    pub prompt_cache_hit_rate: Option<f64>,
}

/// How many of a point's cells ended in each status; written `ok` for one
/// cell, `ok×2 failed×1` for several.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusTally(BTreeMap<CellStatus, usize>);

impl StatusTally {
    /// Counts the statuses of a point's cells.
    pub fn of(statuses: impl IntoIterator<Item = CellStatus>) -> Self {
        let mut counts = BTreeMap::new();
        for s in statuses {
            *counts.entry(s).or_insert(0) += 1;
        }
        StatusTally(counts)
    }

    /// Whether every cell of the point is ok.
    pub fn all_ok(&self) -> bool {
        self.0.keys().all(|s| *s == CellStatus::Ok)
    }
}

impl std::fmt::Display for StatusTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let [(s, 1)] = self.0.iter().collect::<Vec<_>>()[..] {
            return f.write_str(s.as_str());
        }
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(s, n)| format!("{}×{n}", s.as_str()))
            .collect();
        f.write_str(&parts.join(" "))
    }
}

impl Serialize for StatusTally {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StatusTally {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, IntoDeserializer};
        let text = String::deserialize(d)?;
        let mut counts = BTreeMap::new();
        for part in text.split_whitespace() {
            let (name, n) = match part.split_once('×') {
                Some((name, n)) => (name, n.parse().map_err(D::Error::custom)?),
                None => (part, 1),
            };
            let status = CellStatus::deserialize(name.into_deserializer())
                .map_err(|e: serde::de::value::Error| D::Error::custom(e))?;
            counts.insert(status, n);
        }
        Ok(StatusTally(counts))
    }
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
    /// Workload name.
    #[serde(default)]
    pub workload: String,
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
    pub status: StatusTally,
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
    /// Mean requests in flight over the measured part.
    #[serde(default)]
    pub in_flight: Option<Spread>,
    /// Why the point's load did not happen as named, from its first
    /// under-loaded repetition.
    #[serde(default)]
    pub under_loaded: Option<String>,
    /// Output throughput over the steady-state window, tokens/s.
    #[serde(default)]
    pub steady_output_tok_s: Option<Spread>,
    /// Evidence of over-saturation, from its first over-saturated repetition.
    #[serde(default)]
    pub over_saturated: Option<String>,
    /// GPU energy per output token, J.
    #[serde(default)]
    pub joules_per_token: Option<Spread>,
    /// Output tokens per joule of GPU energy.
    #[serde(default)]
    pub tokens_per_joule: Option<Spread>,
    /// Dollars per million output tokens.
    #[serde(default)]
    pub usd_per_mtok: Option<Spread>,
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
    /// For a kind sent with tools or a response format: `decode_tok_s_p50`
    /// of its unconstrained twin (the same prompts without them) on the
    /// same server at the same workload point, so the two sit side by side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconstrained_tok_s_p50: Option<f64>,
}

impl KindRow {
    /// What the constraint costs in decode speed, as a change against the
    /// unconstrained twin (−0.12: 12 % slower).
    pub fn constrained_change(&self) -> Option<f64> {
        self.unconstrained_tok_s_p50
            .filter(|u| *u > 0.0)
            .map(|u| self.decode_tok_s_p50 / u - 1.0)
    }
}

/// One (server, concurrency) point of the per-GPU trade-off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuPoint {
    /// Workload family.
    pub family: String,
    /// Server config id.
    pub server_id: String,
    /// The server's parallel layout in short (`tp4-dp2`).
    pub layout: String,
    /// Load as text.
    pub load: String,
    /// Tokens/s per user (per-request decode speed p50).
    pub tok_s_per_user: f64,
    /// Output tokens/s per GPU.
    pub tok_s_per_gpu: f64,
    /// Whether no other point is at least as good on both axes and better on one.
    pub pareto: bool,
    /// Output tokens per joule of GPU energy, where power was sampled.
    #[serde(default)]
    pub tokens_per_joule: Option<f64>,
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
    pub class: Option<FailureClass>,
    /// Evidence: failure detail or warnings.
    pub evidence: String,
    /// Server-log lines behind the failure.
    pub log_excerpt: Option<String>,
}

/// The failed, skipped and suspicious cells of one server with one status
/// and class: how many, which, and one of them as the example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemGroup {
    /// Server config id.
    pub server_id: String,
    /// Cell status.
    pub status: CellStatus,
    /// Failure class.
    pub class: Option<FailureClass>,
    /// Cells in the group.
    pub count: usize,
    /// Their names, in report order.
    pub cells: Vec<String>,
    /// The first one's evidence.
    pub example: String,
    /// The first one's server-log lines, when any.
    pub log_excerpt: Option<String>,
}

/// [`Problem`]s grouped by (server, status, class), in order of first appearance.
pub fn group_problems(problems: &[Problem]) -> Vec<ProblemGroup> {
    let mut out: Vec<ProblemGroup> = Vec::new();
    for p in problems {
        match out
            .iter_mut()
            .find(|g| g.server_id == p.server_id && g.status == p.status && g.class == p.class)
        {
            Some(g) => {
                g.count += 1;
                g.cells.push(p.cell_name.clone());
            }
            None => out.push(ProblemGroup {
                server_id: p.server_id.clone(),
                status: p.status,
                class: p.class,
                count: 1,
                cells: vec![p.cell_name.clone()],
                example: p.evidence.clone(),
                log_excerpt: p.log_excerpt.clone(),
            }),
        }
    }
    out
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

/// The SLO as readable text.
pub fn slo_text(s: &Slo) -> String {
    s.to_string()
}

pub(super) fn prompt_text(c: &CellResult) -> String {
    match &c.workload.source {
        PromptSource::Synthetic => "synthetic".into(),
        PromptSource::PromptKinds { kinds } => {
            kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join("+")
        }
        PromptSource::Dataset { path, .. } => format!(
            "dataset {}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
        PromptSource::Scenario { name, .. } => format!("scenario {name}"),
        PromptSource::Checks { path, .. } => format!(
            "checks {}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
        PromptSource::Trace { path, .. } => format!(
            "trace {}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
    }
}

/// The workload point of a cell, its repetition left out.
pub(super) fn point_name(c: &CellResult) -> String {
    let mut w = c.workload.clone();
    w.repetition = 0;
    w.cell_name()
}

pub(super) fn family_of(c: &CellResult) -> String {
    family_of_point(&c.workload)
}

/// The workload family of a point: its workload, prompts and output
/// length, every load of them; the SLO picks rank within one.
pub fn family_of_point(w: &crate::campaign::WorkloadPoint) -> String {
    let input = match w.source {
        PromptSource::Synthetic => format!("in{}", w.input_len),
        PromptSource::PromptKinds { .. } => "kinds".into(),
        PromptSource::Dataset { .. } => "dataset".into(),
        PromptSource::Checks { .. } => "checks".into(),
        PromptSource::Scenario { .. } => "sessions".into(),
        PromptSource::Trace { .. } => return format!("{}-trace", w.workload),
    };
    format!("{}-{input}-out{}", w.workload, w.output_len)
}

pub(super) fn concurrency_of(l: &LoadShape) -> Option<u32> {
    match l {
        LoadShape::Concurrency { value } => Some(*value),
        LoadShape::Rate { .. } | LoadShape::Replay { .. } => None,
    }
}

pub(super) fn load_order(l: &LoadShape) -> f64 {
    match l {
        LoadShape::Concurrency { value } => *value as f64,
        LoadShape::Rate { value, .. } => 1e9 + value,
        LoadShape::Replay { time_scale, .. } => 2e9 + time_scale,
    }
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

pub(super) fn kind_of(r: &RequestRecord) -> String {
    r.label.clone().unwrap_or_else(|| "synthetic".into())
}

/// A cell's status with its failure class, e.g. `failed (crashed)`.
pub(super) fn status_text(c: &CellResult) -> String {
    match &c.failure {
        Some(f) => format!("{} ({})", c.status.as_str(), f.class),
        None => c.status.as_str().to_string(),
    }
}

/// Per-request decode speeds of the usable cells, grouped by a key.
pub(super) fn decode_by<K: Ord + Clone>(
    cells: &[&CellResult],
    key: impl Fn(&CellResult, &RequestRecord) -> Option<K>,
) -> BTreeMap<K, Vec<f64>> {
    let mut out: BTreeMap<K, Vec<f64>> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.status.is_usable()) {
        let Some(s) = &c.summary else { continue };
        for r in s.requests.iter().filter(|r| r.is_ok()) {
            if let (Some(k), Some(v)) = (key(c, r), decode_tok_s(r)) {
                out.entry(k).or_default().push(v);
            }
        }
    }
    out
}
