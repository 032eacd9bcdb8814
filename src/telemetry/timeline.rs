//! A cell's state over time: the client's requests in flight and sent, the
//! engine's running and waiting requests, KV-cache use and preemptions from
//! its `/metrics` gauges, and GPU power, sampled on one clock.
//!
//! Stored column by column, so a sample costs a few numbers in the cell's
//! JSON. Memory is bounded: past [`MAX_SAMPLES`] samples every other one is
//! dropped and the stride doubles, so a cell of hours keeps a coarser
//! timeline of the same size rather than a growing one.

use serde::{Deserialize, Serialize};

use super::engine_metrics::metric_names;
use super::prometheus::Scrape;
use super::TelemetryEngine;

/// The most samples a timeline keeps.
pub const MAX_SAMPLES: usize = 2048;

/// What the engine's `/metrics` said at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineGauges {
    /// Requests running (summed over data-parallel ranks).
    pub running: Option<f64>,
    /// Requests waiting (summed over ranks).
    pub waiting: Option<f64>,
    /// KV-cache use in 0..=1 (the largest over ranks).
    pub kv_usage: Option<f64>,
    /// The preemption counter's value (summed over ranks).
    pub preemptions: Option<f64>,
    /// Power the engine reports for its GPUs, W (the simulator's model).
    pub power_w: Option<f64>,
}

fn first_sum(scrape: &Scrape, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| scrape.sum(n))
}

fn first_max(scrape: &Scrape, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| {
        scrape
            .samples_named(n)
            .map(|s| s.value)
            .filter(|v| v.is_finite())
            .reduce(f64::max)
    })
}

impl EngineGauges {
    /// The gauges of one scrape, through the engine's metric names.
    pub fn of(engine: TelemetryEngine, scrape: &Scrape) -> Self {
        let names = metric_names(engine);
        Self {
            running: first_sum(scrape, names.requests_running),
            waiting: first_sum(scrape, names.requests_waiting),
            kv_usage: first_max(scrape, names.kv_cache_usage),
            preemptions: first_sum(scrape, names.preemptions),
            power_w: first_sum(scrape, names.power_watts),
        }
    }
}

/// One moment of a cell.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Seconds from the level's first measured dispatch (negative during
    /// warm-up).
    pub t_s: f64,
    /// Requests the client had in flight.
    pub in_flight: u64,
    /// Requests the client had sent since the level started.
    pub sent: u64,
    /// The engine's gauges, where a scrape answered.
    pub engine: EngineGauges,
    /// Power of the server's GPUs from `nvidia-smi`, W (summed).
    pub gpu_power_w: Option<f64>,
    /// Memory used on the server's GPUs, MiB (summed).
    pub gpu_memory_mib: Option<f64>,
    /// Utilisation of the server's GPUs, % (their mean).
    pub gpu_util_pct: Option<f64>,
}

/// A cell's samples, column by column.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The interval asked between samples, ms.
    pub interval_ms: u64,
    /// The interval between the samples kept, ms: the asked one, doubled
    /// each time a long cell was thinned.
    pub stride_ms: u64,
    /// Where the power column comes from: `nvidia-smi` or `engine`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_source: Option<String>,
    /// Sample times, s from the level's first measured dispatch.
    pub t_s: Vec<f64>,
    /// Client requests in flight.
    pub in_flight: Vec<u64>,
    /// Client requests sent so far.
    pub sent: Vec<u64>,
    /// Engine requests running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running: Vec<Option<f64>>,
    /// Engine requests waiting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Option<f64>>,
    /// Engine KV-cache use, 0..=1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kv_usage: Vec<Option<f64>>,
    /// Engine preemptions since the cell's first sample.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemptions: Vec<Option<f64>>,
    /// Power of the server's GPUs, W.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_w: Vec<Option<f64>>,
    /// Memory used on the server's GPUs, MiB.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_memory_mib: Vec<Option<f64>>,
    /// Utilisation of the server's GPUs, % (their mean).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_util_pct: Vec<Option<f64>>,
}

/// Raw samples while a cell runs, thinned as they grow.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    interval_ms: u64,
    stride: u64,
    seen: u64,
    samples: Vec<Sample>,
}

impl Recorder {
    /// An empty recorder for samples every `interval_ms`.
    pub fn new(interval_ms: u64) -> Self {
        Self {
            interval_ms,
            stride: 1,
            seen: 0,
            samples: Vec::new(),
        }
    }

    /// Keep a sample, one in every stride; past [`MAX_SAMPLES`] drop
    /// every other one kept and double the stride.
    pub fn push(&mut self, s: Sample) {
        self.seen += 1;
        if (self.seen - 1) % self.stride != 0 {
            return;
        }
        self.samples.push(s);
        if self.samples.len() > MAX_SAMPLES {
            self.samples.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
            let mut i = 0;
            self.samples.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride *= 2;
        }
    }

    /// The timeline of what was kept, times shifted by `-origin_s`.
    pub fn finish(mut self, origin_s: f64) -> Timeline {
        self.samples.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        let s = &self.samples;
        let column = |f: fn(&Sample) -> Option<f64>| -> Vec<Option<f64>> {
            let v: Vec<Option<f64>> = s.iter().map(|x| f(x).map(round4)).collect();
            // A column nothing reported is left out, never zero-filled.
            if v.iter().all(Option::is_none) {
                Vec::new()
            } else {
                v
            }
        };
        let base = s.iter().find_map(|x| x.engine.preemptions);
        let gpu = column(|x| x.gpu_power_w);
        let (power_w, power_source) = if !gpu.is_empty() {
            (gpu, Some("nvidia-smi".to_string()))
        } else {
            let engine = column(|x| x.engine.power_w);
            let source = (!engine.is_empty()).then(|| "engine".to_string());
            (engine, source)
        };
        Timeline {
            interval_ms: self.interval_ms,
            stride_ms: self.interval_ms.saturating_mul(self.stride),
            power_source,
            t_s: s.iter().map(|x| round4(x.t_s - origin_s)).collect(),
            in_flight: s.iter().map(|x| x.in_flight).collect(),
            sent: s.iter().map(|x| x.sent).collect(),
            running: column(|x| x.engine.running),
            waiting: column(|x| x.engine.waiting),
            kv_usage: column(|x| x.engine.kv_usage),
            preemptions: match base {
                Some(b) => s
                    .iter()
                    .map(|x| x.engine.preemptions.map(|p| round4(p - b)))
                    .collect(),
                None => Vec::new(),
            },
            power_w,
            gpu_memory_mib: column(|x| x.gpu_memory_mib),
            gpu_util_pct: column(|x| x.gpu_util_pct),
        }
    }
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

impl Timeline {
    /// `(t_s, value)` of a column's reported values.
    pub fn series(&self, column: &[Option<f64>]) -> Vec<(f64, f64)> {
        self.t_s
            .iter()
            .zip(column)
            .filter_map(|(t, v)| Some((*t, (*v)?)))
            .collect()
    }

    /// Energy the server's GPUs drew from `from_s` to `to_s`, J: power
    /// integrated over the samples inside (trapezoids, each end held at
    /// its nearest sample); `None` with fewer than two power samples there.
    pub fn energy_j(&self, from_s: f64, to_s: f64) -> Option<f64> {
        let p: Vec<(f64, f64)> = self
            .series(&self.power_w)
            .into_iter()
            .filter(|(t, _)| (from_s..=to_s).contains(t))
            .collect();
        if p.len() < 2 || to_s <= from_s {
            return None;
        }
        let inner: f64 = p
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
            .sum();
        let (first, last) = (p[0], p[p.len() - 1]);
        Some(inner + (first.0 - from_s) * first.1 + (to_s - last.0) * last.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, power: Option<f64>) -> Sample {
        Sample {
            t_s: t,
            in_flight: 2,
            sent: (t * 10.0) as u64,
            engine: EngineGauges {
                running: Some(2.0),
                preemptions: Some(5.0 + t),
                ..EngineGauges::default()
            },
            gpu_power_w: power,
            gpu_memory_mib: power.map(|_| 1024.0),
            gpu_util_pct: None,
        }
    }

    #[test]
    fn columns_nobody_reported_are_left_out_and_preemptions_count_from_the_first_sample() {
        let mut r = Recorder::new(250);
        for i in 0..4 {
            r.push(sample(f64::from(i) * 0.25 + 1.0, None));
        }
        let t = r.finish(1.0);
        assert_eq!(t.t_s, vec![0.0, 0.25, 0.5, 0.75]);
        assert_eq!(t.running, vec![Some(2.0); 4]);
        assert!(t.waiting.is_empty() && t.kv_usage.is_empty() && t.power_w.is_empty());
        assert!(t.gpu_memory_mib.is_empty() && t.gpu_util_pct.is_empty());
        assert_eq!(t.power_source, None);
        assert_eq!(
            t.preemptions,
            vec![Some(0.0), Some(0.25), Some(0.5), Some(0.75)]
        );
        let json = serde_json::to_string(&t).unwrap();
        assert!(!json.contains("waiting"), "{json}");
    }

    #[test]
    fn a_long_cell_is_thinned_to_a_bounded_size_with_a_wider_stride() {
        let mut r = Recorder::new(250);
        for i in 0..(MAX_SAMPLES * 5) {
            r.push(sample(i as f64 * 0.25, Some(300.0)));
        }
        let t = r.finish(0.0);
        assert!(t.t_s.len() <= MAX_SAMPLES, "{}", t.t_s.len());
        assert!(t.t_s.len() > MAX_SAMPLES / 2, "{}", t.t_s.len());
        assert_eq!(t.stride_ms, 250 * 8);
        // Still spans the whole cell.
        assert_eq!(t.t_s[0], 0.0);
        assert!(*t.t_s.last().unwrap() > (MAX_SAMPLES * 5) as f64 * 0.25 * 0.9);
        assert_eq!(t.power_source.as_deref(), Some("nvidia-smi"));
        assert_eq!(t.gpu_memory_mib.len(), t.t_s.len());
        assert!(t.gpu_util_pct.is_empty());
    }

    #[test]
    fn energy_integrates_power_over_the_window_only() {
        let mut r = Recorder::new(500);
        // 100 W until 1 s, then 300 W.
        for i in 0..=8 {
            let t = f64::from(i) * 0.5;
            r.push(sample(t, Some(if t < 1.0 { 100.0 } else { 300.0 })));
        }
        let t = r.finish(0.0);
        // From 1 s to 4 s at 300 W.
        assert_eq!(t.energy_j(1.0, 4.0), Some(900.0));
        // A window with one sample inside says nothing.
        assert_eq!(t.energy_j(1.1, 1.4), None);
    }
}
