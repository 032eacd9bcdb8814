//! Energy and cost per output token of a level.
//!
//! - **Energy**: the GPU power of the cell's timeline (`nvidia-smi`, or the
//!   engine's own gauge where it models one, as the simulator does)
//!   integrated over the steady-state window, divided by the output tokens
//!   streamed inside it; over the whole level when the window is missing or
//!   too short to trust.
//! - **Cost**: dollars per million output tokens, from the campaign's
//!   `[hardware] gpu_hour_cost` times the GPUs the server holds, over the
//!   output throughput of the same span.

use serde::{Deserialize, Serialize};

use super::level::LevelSummary;
use crate::telemetry::timeline::Timeline;

/// The span a level's energy and cost are measured over, and its output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// Start, s from the level's first measured dispatch.
    pub from_s: f64,
    /// End, s.
    pub to_s: f64,
    /// Output tokens streamed in it.
    pub output_tokens: f64,
    /// Whether it is the steady-state window (else the whole level).
    pub steady: bool,
}

impl Span {
    /// The steady-state window when it can be trusted, else the whole level.
    pub fn of(s: &LevelSummary) -> Option<Span> {
        if let Some(w) = s.steady.as_ref().filter(|w| w.short.is_none()) {
            return Some(Span {
                from_s: w.start_s,
                to_s: w.end_s,
                output_tokens: w.output_tokens,
                steady: true,
            });
        }
        (s.duration_s > 0.0 && s.output_throughput_tok_s > 0.0).then_some(Span {
            from_s: 0.0,
            to_s: s.duration_s,
            output_tokens: s.output_throughput_tok_s * s.duration_s,
            steady: false,
        })
    }

    /// Output tokens per second over the span.
    pub fn throughput(&self) -> f64 {
        self.output_tokens / (self.to_s - self.from_s)
    }
}

/// Energy per output token over a level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Energy {
    /// Joules the server's GPUs drew over the span.
    pub joules: f64,
    /// Output tokens streamed over it.
    pub output_tokens: f64,
    /// `joules / output_tokens`.
    pub joules_per_token: f64,
    /// `output_tokens / joules`.
    pub tokens_per_joule: f64,
    /// `nvidia-smi` or `engine`.
    pub power_source: String,
    /// Whether the span is the steady-state window (else the whole level).
    pub steady: bool,
}

/// A level's energy per output token, from its timeline's power; `None`
/// without power samples over it or without output.
pub fn energy(s: &LevelSummary, timeline: &Timeline) -> Option<Energy> {
    let span = Span::of(s)?;
    let joules = timeline.energy_j(span.from_s, span.to_s)?;
    (joules > 0.0 && span.output_tokens > 0.0).then(|| Energy {
        joules,
        output_tokens: span.output_tokens,
        joules_per_token: joules / span.output_tokens,
        tokens_per_joule: span.output_tokens / joules,
        power_source: timeline.power_source.clone().unwrap_or_default(),
        steady: span.steady,
    })
}

/// Dollars per million output tokens of a server holding `gpus` GPUs at
/// `gpu_hour_cost` dollars each an hour, over the level's span.
pub fn usd_per_million_tokens(s: &LevelSummary, gpus: u32, gpu_hour_cost: f64) -> Option<f64> {
    let tok_s = Span::of(s)?.throughput();
    (tok_s > 0.0 && tok_s.is_finite())
        .then(|| gpu_hour_cost * f64::from(gpus) / 3600.0 / tok_s * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::gpu::parse_query_output;
    use crate::telemetry::timeline::{Recorder, Sample};

    /// A level of 800 output tokens over 4 s, with a steady window from
    /// 1 s to 3 s holding 600 of them.
    fn level(steady_short: bool) -> LevelSummary {
        let run = crate::load::driver::LevelRun {
            records: Vec::new(),
            duration_s: 4.0,
            warmup_sent: 0,
            warmup_failed: 0,
            cancelled: false,
        };
        let load = crate::load::schedule::LoadShape::Concurrency { value: 4 };
        let mut s = super::super::level::summarize(load, run, &[], 0.0, 0);
        s.output_throughput_tok_s = 200.0;
        s.steady = Some(crate::metrics::steady::SteadyState {
            start_s: 1.0,
            end_s: 3.0,
            share: 0.5,
            output_tokens: 600.0,
            output_throughput_tok_s: 300.0,
            completed: 4,
            request_throughput_rps: 2.0,
            ttft_ms: None,
            tpot_ms: None,
            e2e_ms: None,
            short: steady_short.then(|| "too short".to_string()),
            over_saturated: Vec::new(),
        });
        s
    }

    #[test]
    fn energy_over_the_steady_window_from_recorded_nvidia_smi_power() {
        // The recorded 3090's power at 0, 2, 2 and 4 s.
        let mut r = Recorder::new(2000);
        for (t, block) in crate::telemetry::gpu::tests::recorded_power_blocks() {
            let gpus = parse_query_output(&block).unwrap();
            r.push(Sample {
                t_s: t,
                gpu_power_w: gpus.iter().find(|g| g.index == 0).and_then(|g| g.power_w),
                ..Sample::default()
            });
        }
        let tl = r.finish(0.0);
        assert_eq!(tl.power_source.as_deref(), Some("nvidia-smi"));
        // Whole recording: 2 × (30.65 + 75.92) / 2 + 2 × (75.92 + 145.33) / 2.
        let whole = tl.energy_j(0.0, 4.0).unwrap();
        assert!((whole - 327.82).abs() < 1e-9, "{whole}");
        let mut s = level(true);
        // A short window: the whole level's 800 tokens over 0–4 s.
        let e = energy(&s, &tl).unwrap();
        assert!(!e.steady);
        assert!((e.joules_per_token - 327.82 / 800.0).abs() < 1e-9, "{e:?}");
        assert!((e.tokens_per_joule - 800.0 / 327.82).abs() < 1e-9);
        // The trusted window, 1–3 s, holds the two samples at 2 s: 75.92 W
        // held to each end, over its 600 tokens.
        s = level(false);
        let e = energy(&s, &tl).unwrap();
        assert!(e.steady);
        assert!((e.joules - 151.84).abs() < 1e-9, "{e:?}");
        assert!((e.joules_per_token - 151.84 / 600.0).abs() < 1e-9);
    }

    #[test]
    fn cost_is_the_gpus_hourly_price_over_the_spans_throughput() {
        // 300 tok/s in the window on 2 GPUs at $2.50 an hour each:
        // $5/h ÷ 1.08M tok/h.
        let usd = usd_per_million_tokens(&level(false), 2, 2.5).unwrap();
        assert!((usd - 5.0 / (300.0 * 3600.0) * 1e6).abs() < 1e-9, "{usd}");
        // A window too short: the whole level's 200 tok/s.
        let usd = usd_per_million_tokens(&level(true), 2, 2.5).unwrap();
        assert!((usd - 5.0 / (200.0 * 3600.0) * 1e6).abs() < 1e-9, "{usd}");
    }
}
