//! Server-side telemetry: what the engine itself says about a measurement.
//!
//! Four independent, pure parsers (no I/O, no clocks) feed a cell's result:
//!
//! - [`prometheus`]: the `/metrics` text format, and the delta between a scrape
//!   taken before and one taken after a cell;
//! - [`engine_metrics`]: per-engine metric-name tables that turn such a delta
//!   into engine-neutral [`CommonMetrics`], including speculative-decoding
//!   acceptance with its definition recorded next to the number;
//! - [`logscan`]: server-log facts (KV-cache capacity, limits, hybrid-state
//!   cache, decode-batch statistics, readiness, errors) and the classification
//!   of a start-up or crash failure from a log tail;
//! - [`gpu`]: `nvidia-smi` CSV samples, their per-GPU summary and busy-GPU
//!   detection.
//!
//! What differs between engines (metric names, log phrases) lives in one
//! file per engine under `dialect/`.
//!
//! Invariants shared by all of them: no function panics on any input (logs and
//! scrapes are untrusted text), unknown lines are ignored rather than fatal,
//! and a value that was not observed is `None`, never zero, so a missing metric
//! can never read as a measured 0.

pub mod cell;
mod dialect;
pub mod engine_metrics;
pub mod gpu;
pub mod logscan;
pub mod prometheus;
pub mod timeline;

use serde::{Deserialize, Serialize};

pub use cell::{CellSpec, CellTelemetry};
pub use engine_metrics::{
    common_from_delta, is_spec_suspicious, metric_names, spec_acceptance, sum_llamacpp_timings,
    CommonMetrics, DraftTotals, MetricNames, SpecAcceptance, SpecDecodeCounts,
    ACCEPTANCE_LENGTH_DEFINITION, ACCEPTANCE_RATE_DEFINITION,
};
pub use gpu::{busy_gpus, parse_query_output, query_command, summarize, GpuSample, GpuSummary};
pub use logscan::{classify_failure, scan_log, FailureCause, FailureKind, LogFacts};
pub use prometheus::{delta, parse, MetricType, MetricsDelta, ParseError, Scrape};

/// The serving engines whose metrics and logs servebench understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TelemetryEngine {
    /// SGLang (`sglang:*` metrics, `python -m sglang.launch_server` logs).
    Sglang,
    /// vLLM (`vllm:*` metrics, `vllm serve` logs).
    Vllm,
    /// llama.cpp's `llama-server` (`llamacpp:*` metrics).
    Llamacpp,
    /// servebench's built-in simulator (`sim:*` metrics, `sim:` log lines).
    Sim,
}

impl TelemetryEngine {
    /// All engines, in a fixed order.
    pub const ALL: [TelemetryEngine; 4] = [Self::Sglang, Self::Vllm, Self::Llamacpp, Self::Sim];

    /// The lowercase name used in campaign files and results.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sglang => "sglang",
            Self::Vllm => "vllm",
            Self::Llamacpp => "llamacpp",
            Self::Sim => "sim",
        }
    }
}

impl std::fmt::Display for TelemetryEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TelemetryEngine {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "sglang" => Ok(Self::Sglang),
            "vllm" => Ok(Self::Vllm),
            "llamacpp" | "llama.cpp" | "llama-cpp" | "llama_cpp" => Ok(Self::Llamacpp),
            "sim" => Ok(Self::Sim),
            other => Err(format!(
                "unknown engine {other:?} (expected sglang, vllm, llamacpp or sim)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names_round_trip() {
        for e in TelemetryEngine::ALL {
            assert_eq!(e.as_str().parse::<TelemetryEngine>().unwrap(), e);
            assert_eq!(
                serde_json::to_string(&e).unwrap(),
                format!("\"{}\"", e.as_str())
            );
        }
        assert_eq!(
            "llama.cpp".parse::<TelemetryEngine>().unwrap(),
            TelemetryEngine::Llamacpp
        );
        assert!("tgi".parse::<TelemetryEngine>().is_err());
    }
}

#[cfg(test)]
mod fixture_tests;
