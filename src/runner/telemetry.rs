//! Per-cell telemetry: what the engine itself says about a cell.
//!
//! Around each cell the engine's Prometheus `/metrics` is scraped and the
//! counter deltas are mapped to common fields; speculative acceptance is
//! taken, in order of preference, from the engine's per-response draft
//! counts (llama.cpp `timings`) summed over the cell's requests, or from
//! the metrics deltas — never from a cumulative server-wide average. The
//! server log of the current launch is scanned for capacity facts and error
//! lines, and GPUs are sampled with `nvidia-smi` where it exists.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::Endpoint;
use crate::engine::EngineKind;
use crate::metrics::level::LevelSummary;
pub use crate::telemetry::cell::{CellSpec, CellTelemetry};
use crate::telemetry::engine_metrics::{common_from_delta, spec_acceptance, SpecDecodeCounts};
use crate::telemetry::gpu::{parse_query_output, query_command, summarize, GpuSample, GpuSummary};
use crate::telemetry::logscan::scan_log;
use crate::telemetry::prometheus::{self, Scrape};

/// Scrape `/metrics`, or say why not.
pub async fn scrape(endpoint: &Endpoint, engine: EngineKind) -> Result<Scrape, String> {
    let (status, body) = endpoint
        .get(engine.metrics_path(), Duration::from_secs(10))
        .await
        .map_err(|f| f.detail)?;
    if status != 200 {
        return Err(format!("{} answered HTTP {status}", engine.metrics_path()));
    }
    prometheus::parse(&String::from_utf8_lossy(&body)).map_err(|e| e.to_string())
}

/// GPU sampling in the background while a cell runs.
pub struct GpuSampler {
    samples: Arc<Mutex<Vec<GpuSample>>>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<Option<String>>>,
}

impl GpuSampler {
    /// Sample every second until [`finish`](Self::finish), when GPUs are in use.
    pub fn start(gpus: &[u32]) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let task = (!gpus.is_empty()).then(|| {
            let (samples, stop) = (samples.clone(), stop.clone());
            tokio::spawn(async move {
                let argv = query_command();
                loop {
                    let out = tokio::process::Command::new(&argv[0])
                        .args(&argv[1..])
                        .output()
                        .await;
                    match out {
                        Ok(o) if o.status.success() => {
                            if let Ok(mut s) =
                                parse_query_output(&String::from_utf8_lossy(&o.stdout))
                            {
                                if let Ok(mut all) = samples.lock() {
                                    all.append(&mut s);
                                }
                            }
                        }
                        Ok(o) => {
                            return Some(format!(
                                "nvidia-smi failed: {}",
                                String::from_utf8_lossy(&o.stderr).trim()
                            ))
                        }
                        Err(e) => {
                            return Some(format!(
                                "nvidia-smi is not available ({e}); no GPU samples"
                            ))
                        }
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = stop.cancelled() => return None,
                    }
                }
            })
        });
        Self {
            samples,
            stop,
            task,
        }
    }

    /// Stop sampling; summaries of the GPUs in `gpus`, or why there are none.
    pub async fn finish(mut self, gpus: &[u32]) -> (Vec<GpuSummary>, Option<String>) {
        self.stop.cancel();
        let note = match self.task.take() {
            Some(t) => t.await.ok().flatten(),
            None => None,
        };
        let samples = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        let mine: Vec<GpuSample> = samples
            .into_iter()
            .filter(|s| gpus.contains(&s.index))
            .collect();
        (summarize(&mine), note)
    }
}

/// Put a cell's telemetry together.
pub fn assemble(
    engine: EngineKind,
    speculative: bool,
    before: Result<Scrape, String>,
    after: Result<Scrape, String>,
    summary: &LevelSummary,
    log_text: &str,
) -> CellTelemetry {
    let mut t = CellTelemetry::default();
    let kind = engine.telemetry();
    match (kind, before, after) {
        (Some(k), Ok(b), Ok(a)) => {
            t.metrics = Some(common_from_delta(k, &prometheus::delta(&b, &a)))
        }
        (None, _, _) => {
            t.metrics_note = Some(format!(
                "no metric names are known for the `{engine}` engine"
            ))
        }
        (_, Err(e), _) | (_, _, Err(e)) => t.metrics_note = Some(format!("no metrics: {e}")),
    }
    // Per-request counts are exact for this cell; prefer them.
    if let (Some(drafted), Some(accepted)) = (summary.draft_tokens, summary.accepted_draft_tokens) {
        let counts = SpecDecodeCounts {
            drafts: None,
            draft_tokens: Some(drafted as f64),
            accepted_tokens: Some(accepted as f64),
            ..Default::default()
        };
        t.spec = Some(CellSpec {
            source: "response timings (summed over the cell's requests)".into(),
            acceptance: spec_acceptance(&counts),
            counts,
        });
    } else if let Some(counts) = t.metrics.as_ref().and_then(|m| m.spec.clone()) {
        let drafted =
            counts.drafts.unwrap_or(0.0) > 0.0 || counts.draft_tokens.unwrap_or(0.0) > 0.0;
        // A speculative server that drafted nothing is a finding too; a
        // plain server's zero counters are not.
        if drafted || speculative {
            t.spec = Some(CellSpec {
                source: "metrics delta over the cell".into(),
                acceptance: spec_acceptance(&counts),
                counts,
            });
        }
    }
    if let Some(k) = kind {
        if !log_text.is_empty() {
            t.log = Some(scan_log(k, log_text));
        }
    }
    t
}
