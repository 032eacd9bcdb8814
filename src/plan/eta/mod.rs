//! Duration estimates that hold before anything ran, and sharpen as cells
//! are measured.
//!
//! A prior per engine gives start-up time and per-request speed:
//! - `sim`: its own timing model, read from the flags the server is started
//!   with (it is deterministic, so the estimate can be close), including the
//!   `--crash-after` fault, after which no cell of that server runs;
//! - `vllm`/`sglang` on a known GPU: a decode step reads the weights on one
//!   GPU plus the KV cache of every running sequence, at a share of the GPU's
//!   memory bandwidth ([`crate::memory::gpus::GPUS`]); prefill is compute-bound at a share of its
//!   dense BF16 throughput;
//! - `llamacpp` (and GPU engines with no GPU): CPU speed from the model's
//!   bytes at an effective memory bandwidth measured on the test machines.
//!
//! Measured cells then correct the prior, per server config and per load
//! level ([`Calibration`]), never with one factor for everything.
//!
//! Here: a server's [`Speed`] and the [`Estimator`] that sums cells and
//! start-ups; the engines' priors in `priors`, speculative decoding's in
//! `spec`, requests and sessions in tokens in `shapes`, and the measured
//! corrections in `calibration`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::campaign::{PromptSource, Scenarios, WorkloadPoint};
use crate::load::schedule::LoadShape;

mod build;
mod calibration;
mod priors;
mod shapes;
mod spec;
#[cfg(test)]
mod tests;

pub use build::{PromptBuild, PromptCounter};
pub use calibration::{
    level_key, server_key, shape_key, Calibration, Observation, StartupObservation,
};
pub use priors::{
    model_file_bytes, prior_speed, runs_on_cpu, startup_prior_s, stop_prior_s, uses_cpu_priors,
    CpuSpeed, Facts, REFERENCE_PROBE_BYTES_PER_S,
};
pub use shapes::{request_shape, session_turns, unit_turns, TurnShape};
pub use spec::SpecPrior;

/// Time servebench spends around each cell (source, scrapes, result file), s.
pub const CELL_OVERHEAD_S: f64 = 0.15;

/// Per-request speed of one server config, and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Speed {
    /// Fixed time per request (TTFT overhead, HTTP round trip), s.
    pub request_overhead_s: f64,
    /// Prefill speed, tokens/s.
    pub prefill_tok_s: f64,
    /// Whether prefills of concurrent requests queue one after another.
    pub serial_prefill: bool,
    /// Prompt length at which attention doubles the per-token prefill cost
    /// (CPU engines; `None`: linear).
    pub prefill_quadratic_tokens: Option<f64>,
    /// Decode step time with an empty batch, s.
    pub step_base_s: f64,
    /// Extra step time per running sequence, s.
    pub step_per_seq_s: f64,
    /// Extra step time per context token of each running sequence (KV read), s.
    pub kv_s_per_token: f64,
    /// Tokens a sequence gains per step (> 1 with speculative decoding).
    pub tokens_per_step: f64,
    /// Compute time of one token of one sequence in a decode step, s: a
    /// step is never shorter than its running sequences' verified tokens
    /// take to compute (0: steps are memory-bound only).
    pub compute_s_per_token: f64,
    /// Tokens each running sequence has verified per step (1, or the
    /// speculative drafts plus one).
    pub verified_per_step: f64,
    /// Most sequences the server runs at once, per replica.
    pub max_running: Option<u64>,
    /// Data-parallel replicas sharing the load, each at this speed.
    pub replicas: u32,
    /// Requests after which the server dies (simulator fault), counted from its start.
    pub crash_after: Option<u64>,
    /// Where the figures come from, for `plan`.
    pub basis: String,
}

impl Speed {
    /// Seconds one request of `input` prompt and `output` tokens takes with `running` in flight.
    pub fn request_s(&self, input: f64, output: f64, running: f64) -> f64 {
        let running = running.max(1.0);
        let prefill = self.prefill_s(input);
        // A queue of prefills: on average a request waits for half the others.
        let prefill = if self.serial_prefill {
            prefill * (1.0 + running) / 2.0
        } else {
            prefill
        };
        let steps = (output / self.tokens_per_step.max(1.0)).ceil();
        let context = input + output / 2.0;
        let memory =
            self.step_base_s + running * (self.step_per_seq_s + self.kv_s_per_token * context);
        let compute = running * self.verified_per_step.max(1.0) * self.compute_s_per_token;
        self.request_overhead_s + prefill + steps * memory.max(compute)
    }

    /// Seconds the prefill of one `input`-token prompt takes alone.
    pub fn prefill_s(&self, input: f64) -> f64 {
        input / self.prefill_tok_s.max(1e-9)
            * (1.0 + self.prefill_quadratic_tokens.map_or(0.0, |l| input / l))
    }

    /// Seconds one unit of `turns` ([`unit_turns`]) takes with `running`
    /// in flight: its requests one after another, with the pauses between them.
    pub fn unit_s(&self, turns: &[TurnShape], running: f64) -> f64 {
        turns
            .iter()
            .map(|t| t.pause_s + self.request_s(t.input, t.output, running))
            .sum()
    }

    /// Seconds the load of `w` takes (warm-up included, servebench's own
    /// overhead not); a session's turns are those of its scenario in `scenarios`.
    pub fn load_s(&self, w: &WorkloadPoint, scenarios: &Scenarios) -> f64 {
        let cap = self.max_running.unwrap_or(u64::MAX).max(1) as f64;
        // Each replica serves its share of the load: the units, the streams
        // and the rate divide among them.
        let replicas = f64::from(self.replicas.max(1));
        let units = w
            .num_requests
            .map(|n| ((n + w.warmup) as f64 / replicas).ceil());
        let turns = unit_turns(w, scenarios);
        let unit_s = |running: f64| self.unit_s(&turns, running);
        let one_alone = unit_s(1.0);
        let by_count = match w.load {
            LoadShape::Concurrency { value } => {
                // No more run at once than the server admits or the units
                // (requests, or sessions of turns in sequence) there are.
                let running = (value as f64 / replicas)
                    .ceil()
                    .min(cap)
                    .min(units.unwrap_or(f64::MAX).max(1.0));
                let one = unit_s(running);
                // Prefills that queue for one compute unit are a floor:
                // sixteen 100k-token prompts take sixteen prefills at any
                // concurrency.
                let prefills = if self.serial_prefill {
                    turns.iter().map(|t| self.prefill_s(t.input)).sum()
                } else {
                    0.0
                };
                units.map(|n| ((n / running).ceil() * one).max(n * prefills))
            }
            LoadShape::Rate {
                value,
                max_concurrency,
                ..
            } => {
                // In flight at this rate (Little's law), capped by the server and the client.
                let value = value / replicas;
                let limit = cap.min(
                    max_concurrency
                        .map(|m| f64::from(m) / replicas)
                        .unwrap_or(f64::MAX),
                );
                let running = (value * one_alone).clamp(1.0, limit.max(1.0));
                let one = unit_s(running);
                let served = running / one;
                units.map(|n| n / value.min(served) + one)
            }
            // The trace's schedule at its scale, and the last request.
            LoadShape::Replay { time_scale, .. } => match &w.source {
                PromptSource::Trace { span_s, .. } => Some(span_s / time_scale + one_alone),
                _ => units.map(|n| n * one_alone),
            },
        };
        match (by_count, w.duration_s) {
            (Some(a), Some(d)) => a.min(d + one_alone),
            (Some(a), None) => a,
            (None, Some(d)) => d + one_alone,
            (None, None) => one_alone,
        }
    }
}

/// Requests a cell sends its server: warm-up, measured, and for synthetic
/// prompts the probe that measures the chat template.
pub fn requests_sent(w: &WorkloadPoint) -> u64 {
    let probe = u64::from(w.source == PromptSource::Synthetic);
    w.num_requests.unwrap_or(0) + w.warmup + probe
}

/// Estimates for every server config of a campaign.
#[derive(Debug, Clone)]
pub struct Estimator {
    /// Prior speed per server id.
    pub speeds: BTreeMap<String, Speed>,
    /// Prior start-up per server id, s.
    pub startup_priors: BTreeMap<String, f64>,
    /// Server key per id.
    pub keys: BTreeMap<String, String>,
    /// Sibling key per id ([`shape_key`]).
    pub shapes: BTreeMap<String, String>,
    /// Time to stop a server of this campaign's engine ([`stop_prior_s`]), s.
    pub stop_s: f64,
    /// What was learnt from measured cells.
    pub calibration: Calibration,
    /// The campaign's scenarios, for its session workloads' turns.
    pub scenarios: Scenarios,
    /// servebench's own time to build prompts.
    pub prompt_build: PromptBuild,
}

impl Estimator {
    /// Estimated wall time of one cell of `server`, s: its load time (prior ×
    /// calibration) plus servebench's own overhead and prompt building.
    pub fn cell_s(&self, server: &str, w: &WorkloadPoint) -> f64 {
        let overhead = self.calibration.overhead_s() + self.prompt_build.cell_s(w);
        let Some(speed) = self.speeds.get(server) else {
            return overhead;
        };
        let key = self.keys.get(server).map(String::as_str).unwrap_or(server);
        let shape = self.shapes.get(server).map(String::as_str).unwrap_or(key);
        speed.load_s(w, &self.scenarios) * self.calibration.factor(key, shape, &level_key(w))
            + overhead
    }

    /// Estimated cells of one server in order, stopping where its simulated
    /// crash fault fires: cells after it are not run.
    pub fn cells_s(&self, server: &str, cells: &[&WorkloadPoint]) -> Vec<f64> {
        self.cells_s_after(server, cells, 0)
    }

    /// [`Self::cells_s`] for a server that has already been sent `sent` requests.
    pub fn cells_s_after(&self, server: &str, cells: &[&WorkloadPoint], sent: u64) -> Vec<f64> {
        let crash = self.speeds.get(server).and_then(|s| s.crash_after);
        let mut sent = sent;
        let mut crashed = false;
        cells
            .iter()
            .map(|w| {
                if crashed {
                    return 0.0;
                }
                let full = self.cell_s(server, w);
                let n = requests_sent(w);
                let overhead = self.calibration.overhead_s();
                match crash {
                    Some(limit) if n > 0 && sent + n > limit => {
                        crashed = true;
                        let part = (limit - sent.min(limit)) as f64 / n as f64;
                        overhead + (full - overhead) * part
                    }
                    _ => {
                        sent += n;
                        full
                    }
                }
            })
            .collect()
    }

    /// Estimated start-up of `server` (plus stopping it), s.
    pub fn startup_s(&self, server: &str) -> f64 {
        let prior = self.startup_priors.get(server).copied().unwrap_or(0.0);
        let key = self.keys.get(server).map(String::as_str).unwrap_or(server);
        self.calibration.startup_s(key, prior) + self.stop_s
    }

    /// The prior load time of a cell (what observations are compared with), s.
    pub fn prior_load_s(&self, server: &str, w: &WorkloadPoint) -> Option<f64> {
        self.speeds
            .get(server)
            .map(|s| s.load_s(w, &self.scenarios))
    }
}
