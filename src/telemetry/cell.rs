//! The telemetry stored with a cell result: typed, so a reader of stored
//! cells (report, plan) and the runner that writes them share one layout.

use serde::{Deserialize, Serialize};

use super::engine_metrics::{CommonMetrics, SpecAcceptance, SpecDecodeCounts};
use super::gpu::GpuSummary;
use super::logscan::LogFacts;

/// Speculative-decoding counts of one cell and where they came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSpec {
    /// `response timings` (per-request, summed) or `metrics delta`.
    pub source: String,
    /// The counts.
    pub counts: SpecDecodeCounts,
    /// Acceptance length and rate, each with its definition.
    pub acceptance: SpecAcceptance,
}

/// Everything the engine reported about one cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellTelemetry {
    /// Metric deltas over the cell, mapped to common fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<CommonMetrics>,
    /// Why there are no metrics (endpoint missing, parse error), or why
    /// they fall short of the cell (counters that never caught up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_note: Option<String>,
    /// Speculative decoding over the cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<CellSpec>,
    /// Facts from the server log of this launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogFacts>,
    /// GPU memory and utilization during the cell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuSummary>,
    /// Why there are no GPU samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_note: Option<String>,
    /// The cell's state over time (see `telemetry::timeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<super::timeline::Timeline>,
}

impl CellTelemetry {
    /// Acceptance length the engine's counts give: the cell's own counts
    /// first, then the metrics delta.
    pub fn acceptance_length(&self) -> Option<f64> {
        self.spec
            .as_ref()
            .and_then(|s| s.acceptance.acceptance_length)
            .or_else(|| {
                self.metrics
                    .as_ref()?
                    .spec_acceptance
                    .as_ref()?
                    .acceptance_length
            })
    }

    /// Share of drafted tokens accepted, from the cell's own counts.
    pub fn acceptance_rate(&self) -> Option<f64> {
        self.spec.as_ref()?.acceptance.acceptance_rate
    }
}
