//! SLO search: the highest load at which a server config still meets every
//! latency bound, found with a few probes instead of a whole grid.
//!
//! The load axis (concurrency or request rate) is a grid `min + k·step` up
//! to `max`. A search first brackets the boundary by doubling the load from
//! `min` until a probe fails (or `max` passes), then bisects between the last
//! passing and the first failing grid point, and finally confirms the few
//! grid points just below that bracket, where noise can hide the first
//! failure an exhaustive sweep would stop at. Which probe comes next is
//! decided only from the probes already measured ([`next_step`] replays
//! them), so an interrupted search resumes where it stopped, and a rerun, or
//! a search whose bounds changed, reuses every stored probe: a probe is an
//! ordinary cell, and its identity does not contain the bounds.
//!
//! Pure arithmetic: no clock, no I/O.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::metrics::level::LevelSummary;
use crate::metrics::stats::Stats;

/// The load axis a search moves along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// Closed-loop concurrency (whole numbers).
    Concurrency,
    /// Open-loop request rate, requests per second.
    Rate,
    /// A trace replay's traffic multiple: 2 sends the trace twice as fast.
    #[serde(rename = "time_scale")]
    TimeScale,
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Axis::Concurrency => "concurrency",
            Axis::Rate => "rate",
            Axis::TimeScale => "time_scale",
        })
    }
}

/// A latency metric a bound applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Time to first token.
    Ttft,
    /// Time per output token after the first.
    Tpot,
    /// Inter-token latency (gaps between streamed chunks).
    Itl,
    /// End-to-end request latency.
    E2e,
}

/// Which statistic of a metric's distribution a bound limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Statistic {
    /// Arithmetic mean.
    Mean,
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 95th percentile.
    P95,
    /// 99th percentile.
    P99,
}

/// One bound, e.g. `ttft_p99=1s`: the statistic of the metric over a probe's
/// completed requests must not exceed `limit_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// The metric.
    pub metric: Metric,
    /// The statistic of it.
    pub statistic: Statistic,
    /// Upper limit, milliseconds.
    pub limit_ms: f64,
}

impl Bound {
    /// The bound's key as written, e.g. `ttft_p99`.
    pub fn key(&self) -> String {
        let m = match self.metric {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2e => "e2e",
        };
        let s = match self.statistic {
            Statistic::Mean => "mean",
            Statistic::P50 => "p50",
            Statistic::P90 => "p90",
            Statistic::P95 => "p95",
            Statistic::P99 => "p99",
        };
        format!("{m}_{s}")
    }

    /// The measured value this bound limits, if the probe has it.
    pub fn value(&self, s: &LevelFacts) -> Option<f64> {
        let stats: &Option<Stats> = match self.metric {
            Metric::Ttft => &s.ttft_ms,
            Metric::Tpot => &s.tpot_ms,
            Metric::Itl => &s.itl_ms,
            Metric::E2e => &s.e2e_ms,
        };
        stats.as_ref().map(|st| match self.statistic {
            Statistic::Mean => st.mean,
            Statistic::P50 => st.p50,
            Statistic::P90 => st.p90,
            Statistic::P95 => st.p95,
            Statistic::P99 => st.p99,
        })
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key(), fmt_ms(self.limit_ms))
    }
}

/// A load as a user would write it: plain for ordinary numbers, in
/// scientific notation for extreme ones (Rust prints 1e-300 with 300 zeros).
fn short(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e7).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// Milliseconds as written in campaign files: `1s`, `1.5s`, `30ms`.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{}s", trim(ms / 1000.0))
    } else {
        format!("{}ms", trim(ms))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What planning and judging need of a measured level: its wall time,
/// request counts, output throughput and latency distributions, read from a
/// full summary or from a stored cell (whose request records it skips).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelFacts {
    /// Level wall time, s.
    #[serde(default)]
    pub duration_s: f64,
    /// Output tokens per second of the level.
    #[serde(default)]
    pub output_throughput_tok_s: f64,
    /// Requests that completed.
    #[serde(default)]
    pub completed: usize,
    /// Requests that failed.
    #[serde(default)]
    pub failed: usize,
    /// Time to first token, ms.
    #[serde(default)]
    pub ttft_ms: Option<Stats>,
    /// Time per output token, ms.
    #[serde(default)]
    pub tpot_ms: Option<Stats>,
    /// Inter-token latency per chunk, ms.
    #[serde(default)]
    pub itl_ms: Option<Stats>,
    /// End-to-end latency, ms.
    #[serde(default)]
    pub e2e_ms: Option<Stats>,
}

impl From<&LevelSummary> for LevelFacts {
    fn from(s: &LevelSummary) -> Self {
        LevelFacts {
            duration_s: s.duration_s,
            output_throughput_tok_s: s.output_throughput_tok_s,
            completed: s.completed,
            failed: s.failed,
            ttft_ms: s.latency.ttft_ms,
            tpot_ms: s.latency.tpot_ms,
            itl_ms: s.latency.itl_ms,
            e2e_ms: s.latency.e2e_ms,
        }
    }
}

/// Parse `ttft_p99=1s,tpot_p50=30ms` into bounds.
pub fn parse_bounds(text: &str) -> Result<Vec<Bound>, String> {
    let mut bounds: Vec<Bound> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').ok_or_else(|| {
            format!("bound `{part}` is not METRIC_STAT=DURATION, e.g. `ttft_p99=1s`")
        })?;
        let key = key.trim();
        let (metric, statistic) = key.split_once('_').ok_or_else(|| {
            format!(
                "bound `{key}` names no statistic; write e.g. `{key}_p99` (statistics: mean, p50, p90, p95, p99)"
            )
        })?;
        let metric = match metric {
            "ttft" => Metric::Ttft,
            "tpot" => Metric::Tpot,
            "itl" => Metric::Itl,
            "e2e" => Metric::E2e,
            other => {
                return Err(format!(
                    "unknown metric `{other}` in `{key}`; allowed: ttft, tpot, itl, e2e"
                ))
            }
        };
        let statistic = match statistic {
            "mean" => Statistic::Mean,
            "p50" => Statistic::P50,
            "p90" => Statistic::P90,
            "p95" => Statistic::P95,
            "p99" => Statistic::P99,
            other => {
                return Err(format!(
                    "unknown statistic `{other}` in `{key}`; allowed: mean, p50, p90, p95, p99"
                ))
            }
        };
        let limit_ms = crate::util::units::parse_duration(value.trim())
            .map_err(|e| format!("bound `{key}`: {e}"))?
            .as_secs_f64()
            * 1000.0;
        if !(limit_ms > 0.0 && limit_ms.is_finite()) {
            return Err(format!("bound `{key}` must be a positive duration"));
        }
        if bounds
            .iter()
            .any(|b| b.metric == metric && b.statistic == statistic)
        {
            return Err(format!("bound `{key}` is given twice"));
        }
        bounds.push(Bound {
            metric,
            statistic,
            limit_ms,
        });
    }
    if bounds.is_empty() {
        return Err("no bound; write e.g. `ttft_p99=1s,tpot_p50=30ms`".into());
    }
    Ok(bounds)
}

/// Grid points a search may have; more is a typo, not a campaign.
pub const MAX_GRID_POINTS: u64 = 100_000;

/// A search as declared: bounds, axis and grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSpec {
    /// Every bound a passing probe meets.
    pub bounds: Vec<Bound>,
    /// The load axis.
    pub axis: Axis,
    /// Lowest load, the first probe.
    pub min: f64,
    /// Highest load probed.
    pub max: f64,
    /// Grid spacing.
    pub step: f64,
}

impl SearchSpec {
    /// Check the grid; `None` step means `min`.
    pub fn new(
        bounds: Vec<Bound>,
        axis: Axis,
        min: f64,
        max: f64,
        step: Option<f64>,
    ) -> Result<SearchSpec, String> {
        let step = step.unwrap_or(min);
        for (name, v) in [("min", min), ("max", max), ("step", step)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!(
                    "search `{name}` must be a positive number, not {}",
                    short(v)
                ));
            }
            if axis == Axis::Concurrency && v.fract() != 0.0 {
                return Err(format!(
                    "search `{name}` over concurrency must be a whole number, not {}",
                    short(v)
                ));
            }
        }
        if max < min {
            return Err(format!(
                "search `max` ({}) is below `min` ({})",
                short(max),
                short(min)
            ));
        }
        if axis == Axis::Concurrency && max > f64::from(u32::MAX) {
            return Err(format!(
                "search `max` concurrency {max} is beyond {}",
                u32::MAX
            ));
        }
        let points = ((max - min) / step).floor() + 1.0;
        if points > MAX_GRID_POINTS as f64 {
            return Err(format!(
                "search grid from {} to {} in steps of {} has {points:.3e} points; at most {MAX_GRID_POINTS} (raise `step`)",
                short(min),
                short(max),
                short(step)
            ));
        }
        Ok(SearchSpec {
            bounds,
            axis,
            min,
            max,
            step,
        })
    }

    /// Index of the last grid point.
    pub fn last_index(&self) -> u64 {
        // A rounding guard: (max - min) / step can land a hair below a whole number.
        (((self.max - self.min) / self.step) + 1e-9).floor() as u64
    }

    /// The load at grid index `k`.
    pub fn level(&self, k: u64) -> f64 {
        let v = self.min + k as f64 * self.step;
        if self.axis == Axis::Concurrency {
            v.round()
        } else {
            // Rates like 0.1·k keep a short decimal form (0.30000000000000004 → 0.3).
            (v * 1e9).round() / 1e9
        }
    }

    /// The grid index of `load`, if it is a grid point.
    pub fn index_of(&self, load: f64) -> Option<u64> {
        let k = ((load - self.min) / self.step).round();
        if k < 0.0 || k > self.last_index() as f64 {
            return None;
        }
        let k = k as u64;
        ((self.level(k) - load).abs() <= 1e-9 * load.abs().max(1.0)).then_some(k)
    }

    /// Whether a probe meets every bound; the reasons it does not.
    pub fn judge(&self, s: &LevelFacts) -> Verdict {
        let mut missed = Vec::new();
        if s.completed == 0 {
            missed.push("no request completed".to_string());
        } else if s.failed > 0 {
            missed.push(format!(
                "{} of {} requests failed",
                s.failed,
                s.failed + s.completed
            ));
        }
        for b in &self.bounds {
            match b.value(s) {
                Some(v) if v <= b.limit_ms => {}
                Some(v) => missed.push(format!(
                    "{} {} > {}",
                    b.key(),
                    fmt_ms(v),
                    fmt_ms(b.limit_ms)
                )),
                None if s.completed > 0 => missed.push(format!("{} was not measured", b.key())),
                None => {}
            }
        }
        Verdict { missed }
    }

    /// Probes the search needs at most when its probes are monotone:
    /// bracketing, bisection, and the confirmation below the bracket. Each
    /// out-of-order failure the confirmation finds adds a short bisection
    /// and another confirmation, up to the whole grid.
    pub fn max_probes(&self) -> u64 {
        let n = self.last_index() + 1;
        // Doublings from min to max, then a bisection of the last doubling's span.
        let doublings = ((self.max / self.min).log2().ceil().max(0.0) as u64) + 1;
        let span = (self.max / 2.0 / self.step).max(1.0);
        let confirm = CONFIRM_BELOW.saturating_sub(1);
        (doublings + span.log2().ceil().max(0.0) as u64 + confirm).min(n)
    }
}

/// Whether a probe met every bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Bounds missed, each with its measured value; empty when the probe passed.
    pub missed: Vec<String>,
}

impl Verdict {
    /// Whether every bound held.
    pub fn passed(&self) -> bool {
        self.missed.is_empty()
    }
}

/// What a search does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Measure the grid point with this index.
    Probe(u64),
    /// The search is over.
    Done(Outcome),
}

/// Where a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The highest passing grid load; the next grid point up failed.
    Boundary {
        /// Highest load meeting every bound.
        pass: f64,
        /// The lowest failing load, one grid step up.
        fail: f64,
    },
    /// Even `max` met every bound: the boundary is beyond the searched range.
    AboveMax {
        /// The highest load probed (`max`'s grid point).
        pass: f64,
    },
    /// `min` already missed a bound.
    BelowMin {
        /// The lowest load probed.
        fail: f64,
    },
}

impl Outcome {
    /// The highest load shown to meet every bound, if any.
    pub fn passing_load(&self) -> Option<f64> {
        match self {
            Outcome::Boundary { pass, .. } | Outcome::AboveMax { pass } => Some(*pass),
            Outcome::BelowMin { .. } => None,
        }
    }
}

/// Grid points just below the lowest failure that must all be measured
/// passes before a search ends on a boundary.
///
/// Near its boundary a server passes and fails out of order: a few percent
/// of whole-probe slowdown moves a latency as much as a few grid steps of
/// load do, so bisection can bracket a crossing above a failure it never
/// probed. An exhaustive sweep stops at the first failure; this scan looks
/// for it where it hides, in the points bisection skipped just below the
/// bracket. Four points (the bracketed pass and three below) agreed with
/// the sweep on 97–98 % of configs in `benches/search.rs`, three on about
/// 95 %, at two to three more probes per search.
pub const CONFIRM_BELOW: u64 = 4;

/// The next step of a search, from the pass/fail of the grid points already
/// probed (grid index → passed).
///
/// Bracketing doubles the load from the highest passing probe while no probe
/// has failed; then bisection halves the gap between the highest pass below
/// the lowest failure and that failure. Once they are one grid step apart,
/// the [`CONFIRM_BELOW`] grid points below the failure are probed, highest
/// first, unless already measured; a failure among them becomes the lowest
/// failure and bisection resumes below it. A non-monotone measurement (a
/// pass above the lowest failure, from noise) is kept but cannot raise the
/// boundary above a failure: the answer is always a load with a pass at it,
/// a failure one grid step up, and passes at the points just below it.
pub fn next_step(spec: &SearchSpec, probed: &BTreeMap<u64, bool>) -> Step {
    let last = spec.last_index();
    let Some(&first) = probed.get(&0) else {
        return Step::Probe(0);
    };
    if !first {
        return Step::Done(Outcome::BelowMin {
            fail: spec.level(0),
        });
    }
    let lowest_fail = probed.iter().find(|(_, &p)| !p).map(|(&k, _)| k);
    match lowest_fail {
        None => {
            let hi_pass = probed.keys().next_back().copied().unwrap_or(0);
            if hi_pass >= last {
                return Step::Done(Outcome::AboveMax {
                    pass: spec.level(last),
                });
            }
            let doubled = spec.level(hi_pass) * 2.0;
            let k = (((doubled - spec.min) / spec.step) + 1e-9).floor().max(0.0) as u64;
            Step::Probe(k.clamp(hi_pass + 1, last))
        }
        Some(fail) => {
            let pass = probed
                .range(..fail)
                .filter(|(_, &p)| p)
                .map(|(&k, _)| k)
                .next_back()
                .unwrap_or(0);
            if fail - pass > 1 {
                return Step::Probe(pass + (fail - pass) / 2);
            }
            // Bracketed: confirm the grid points just below, highest first.
            // Every probe below `fail` passed, so a failure found here becomes
            // the lowest failure and the bracket moves down to it.
            let lowest = fail.saturating_sub(CONFIRM_BELOW);
            match (lowest..fail).rev().find(|k| !probed.contains_key(k)) {
                Some(k) => Step::Probe(k),
                None => Step::Done(Outcome::Boundary {
                    pass: spec.level(pass),
                    fail: spec.level(fail),
                }),
            }
        }
    }
}

/// Replay a search along its own path: `stored(k)` is the verdict of grid
/// point `k` when a usable result for it exists. Returns the probes on the
/// path (grid index → passed) and the step after them: the probe to measure
/// next, or the outcome. Stored probes off the path are not consulted.
pub fn replay(
    spec: &SearchSpec,
    mut stored: impl FnMut(u64) -> Option<bool>,
) -> (BTreeMap<u64, bool>, Step) {
    let mut probed = BTreeMap::new();
    loop {
        let step = next_step(spec, &probed);
        match step {
            Step::Probe(k) => match stored(k) {
                Some(passed) => {
                    probed.insert(k, passed);
                }
                None => return (probed, step),
            },
            Step::Done(_) => return (probed, step),
        }
    }
}

/// The probes a search still needs if its boundary lies mid-way
/// (geometrically) through the range its probes leave open: the planning
/// guess, before anything says where the boundary is.
pub fn expected_path(spec: &SearchSpec, probed: &BTreeMap<u64, bool>) -> Vec<u64> {
    let lo = probed
        .iter()
        .filter(|(_, &p)| p)
        .map(|(&k, _)| spec.level(k))
        .fold(spec.min, f64::max);
    let hi = probed
        .iter()
        .find(|(_, &p)| !p)
        .map(|(&k, _)| spec.level(k))
        .unwrap_or(spec.max);
    let guess = (lo * hi).sqrt();
    let mut path = probed.clone();
    let mut added = Vec::new();
    while let Step::Probe(k) = next_step(spec, &path) {
        path.insert(k, spec.level(k) <= guess);
        added.push(k);
    }
    added
}

/// Seed of the throughput intervals searches compare: fixed, so `run` and
/// the report decide alike over the same stored cells.
pub const INTERVAL_SEED: u64 = 0x5eed;

/// Output throughput per GPU of one probe with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Output tokens per second of the probe, divided by its GPUs.
    pub per_gpu: f64,
    /// Low end of the 95% bootstrap interval (requests resampled).
    pub low: f64,
    /// High end of it.
    pub high: f64,
}

impl Throughput {
    /// The probe's output throughput per GPU, with the seeded bootstrap
    /// interval the report uses, resampling its completed requests.
    ///
    /// A level's throughput is one number; what varies from request to
    /// request is how long each took for its tokens. By Little's law a
    /// closed loop's throughput is users × tokens per request / latency per
    /// request, so the interval resamples requests' (tokens, end-to-end
    /// time) pairs and scales the ratio of their sums to the measured
    /// throughput, which stays at the interval's centre.
    pub fn of(s: &LevelSummary, gpus: u32, seed: u64) -> Throughput {
        let per_gpu = s.output_throughput_tok_s / f64::from(gpus.max(1));
        let pairs: Vec<(f64, f64)> = s
            .requests
            .iter()
            .filter(|r| r.is_ok())
            .filter_map(|r| Some((r.output_tokens? as f64, r.e2e_ms?)))
            .filter(|(_, e2e)| *e2e > 0.0)
            .collect();
        let ratio = |v: &[(f64, f64)]| {
            let (t, e): (f64, f64) = v.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
            if e > 0.0 {
                t / e
            } else {
                0.0
            }
        };
        let centre = ratio(&pairs);
        if pairs.len() < 2 || centre <= 0.0 {
            return Throughput {
                per_gpu,
                low: per_gpu,
                high: per_gpu,
            };
        }
        let scale = per_gpu / centre;
        let mut rng = crate::metrics::bootstrap::SplitMix::new(seed);
        let (low, high) =
            crate::metrics::bootstrap::bootstrap(&pairs, &mut rng, |v| ratio(v) * scale);
        Throughput {
            per_gpu,
            low: low.min(per_gpu),
            high: high.max(per_gpu),
        }
    }
}

/// How far a whole probe's throughput can sit from a repeat of it, as a
/// share of the throughput: clocks, thermals, a neighbour on the node slow
/// every request of a probe together, which resampling its requests cannot
/// see. [`cannot_win`] widens both intervals by it.
pub const PROBE_SPREAD: f64 = 0.05;

/// Whether a config still being searched can no longer beat the leader.
///
/// Its boundary lies below its lowest failing probe and throughput rises
/// with load, so the high end of that probe's interval bounds everything
/// the config has left; the leader has shown at least the low end of its
/// boundary's interval. Each interval is a bootstrap over one probe's
/// requests, so each is first widened by [`PROBE_SPREAD`] (added in
/// quadrature): a probe that failed because the whole of it ran slow must
/// not drop the config that would have won.
pub fn cannot_win(lowest_fail: &Throughput, leader_boundary: &Throughput) -> bool {
    let widen = |half: f64, t: &Throughput| half.max(0.0).hypot(PROBE_SPREAD * t.per_gpu);
    let high = lowest_fail.per_gpu + widen(lowest_fail.high - lowest_fail.per_gpu, lowest_fail);
    let low = leader_boundary.per_gpu
        - widen(
            leader_boundary.per_gpu - leader_boundary.low,
            leader_boundary,
        );
    high < low
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(min: f64, max: f64, step: Option<f64>) -> SearchSpec {
        SearchSpec::new(
            parse_bounds("tpot_p50=30ms").unwrap(),
            Axis::Concurrency,
            min,
            max,
            step,
        )
        .unwrap()
    }

    /// Run a search against a monotone truth: loads up to `boundary` pass.
    fn search(s: &SearchSpec, passes: impl Fn(f64) -> bool) -> (Outcome, Vec<f64>) {
        let mut probed = BTreeMap::new();
        let mut order = Vec::new();
        loop {
            match next_step(s, &probed) {
                Step::Probe(k) => {
                    assert!(!probed.contains_key(&k), "probe {k} twice");
                    order.push(s.level(k));
                    probed.insert(k, passes(s.level(k)));
                }
                Step::Done(o) => return (o, order),
            }
        }
    }

    #[test]
    fn doubles_then_bisects_to_the_exact_grid_boundary() {
        let s = spec(1.0, 256.0, None);
        let (o, order) = search(&s, |c| c <= 37.0);
        assert_eq!(
            o,
            Outcome::Boundary {
                pass: 37.0,
                fail: 38.0
            }
        );
        assert_eq!(&order[..7], &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
        assert!(order.len() <= s.max_probes() as usize, "{order:?}");
    }

    #[test]
    fn every_boundary_of_a_grid_is_found_within_the_probe_budget() {
        for (min, max, step) in [
            (1.0, 256.0, None),
            (2.0, 100.0, Some(2.0)),
            (4.0, 64.0, Some(4.0)),
        ] {
            let s = spec(min, max, step);
            for k in 0..=s.last_index() {
                let b = s.level(k);
                let (o, order) = search(&s, |c| c <= b);
                let want = if k == s.last_index() {
                    Outcome::AboveMax { pass: b }
                } else {
                    Outcome::Boundary {
                        pass: b,
                        fail: s.level(k + 1),
                    }
                };
                assert_eq!(o, want, "boundary {b} on {s:?}");
                assert!(order.len() as u64 <= s.max_probes(), "{b}: {order:?}");
            }
            let (o, order) = search(&s, |_| false);
            assert_eq!((o, order.len()), (Outcome::BelowMin { fail: min }, 1));
        }
    }

    #[test]
    fn a_resumed_search_asks_for_the_probe_it_was_about_to_run() {
        let s = spec(1.0, 64.0, None);
        let truth = |c: f64| c <= 20.0;
        let (_, order) = search(&s, truth);
        // Stop after any prefix: replaying the stored prefix asks for the next probe.
        for n in 0..order.len() {
            let probed: BTreeMap<u64, bool> = order[..n]
                .iter()
                .map(|&l| (s.index_of(l).unwrap(), truth(l)))
                .collect();
            assert_eq!(
                next_step(&s, &probed),
                Step::Probe(s.index_of(order[n]).unwrap())
            );
        }
    }

    #[test]
    fn probes_of_a_wider_search_are_reused_by_a_narrower_one() {
        let wide = spec(1.0, 256.0, None);
        let (_, order) = search(&wide, |c| c <= 12.0);
        let narrow = spec(1.0, 64.0, None);
        let probed: BTreeMap<u64, bool> = order
            .iter()
            .filter_map(|&l| narrow.index_of(l).map(|k| (k, l <= 12.0)))
            .collect();
        assert_eq!(
            next_step(&narrow, &probed),
            Step::Done(Outcome::Boundary {
                pass: 12.0,
                fail: 13.0
            })
        );
    }

    #[test]
    fn replay_follows_the_search_path_and_stops_at_the_first_missing_probe() {
        let s = spec(1.0, 64.0, None);
        let truth = |l: f64| l <= 20.0;
        // Everything stored: the replay ends with the outcome, using only path probes.
        let (probed, step) = replay(&s, |k| Some(truth(s.level(k))));
        let (o, order) = search(&s, truth);
        assert_eq!(step, Step::Done(o));
        assert_eq!(probed.len(), order.len());
        // 16 missing: the replay asks for it after 1, 2, 4 and 8, though 32 is stored.
        let (probed, step) = replay(&s, |k| (s.level(k) != 16.0).then(|| truth(s.level(k))));
        assert_eq!(step, Step::Probe(s.index_of(16.0).unwrap()));
        let levels: Vec<f64> = probed.keys().map(|&k| s.level(k)).collect();
        assert_eq!(levels, [1.0, 2.0, 4.0, 8.0]);
    }

    #[test]
    fn judging_reads_each_bound_and_fails_on_failed_requests() {
        let s = SearchSpec::new(
            parse_bounds("ttft_p99=1s,tpot_p50=30ms").unwrap(),
            Axis::Concurrency,
            1.0,
            8.0,
            None,
        )
        .unwrap();
        let stats = |p50: f64, p99: f64| Stats {
            count: 10,
            mean: p50,
            std: 0.0,
            min: p50,
            p50,
            p90: p99,
            p95: p99,
            p99,
            max: p99,
        };
        let mut f = LevelFacts {
            completed: 10,
            failed: 0,
            ttft_ms: Some(stats(200.0, 900.0)),
            tpot_ms: Some(stats(29.0, 60.0)),
            itl_ms: None,
            e2e_ms: None,
            ..LevelFacts::default()
        };
        assert!(s.judge(&f).passed());
        f.ttft_ms = Some(stats(200.0, 1200.0));
        let v = s.judge(&f);
        assert_eq!(v.missed, ["ttft_p99 1.2s > 1s"]);
        f.ttft_ms = Some(stats(200.0, 900.0));
        f.failed = 1;
        assert_eq!(s.judge(&f).missed, ["1 of 11 requests failed"]);
        f.failed = 0;
        f.tpot_ms = None;
        assert_eq!(s.judge(&f).missed, ["tpot_p50 was not measured"]);
    }

    #[test]
    fn noise_above_the_first_failure_cannot_raise_the_boundary() {
        let s = spec(1.0, 32.0, None);
        // 8 fails (noise), 16 passes: the answer stays below 8.
        let (o, _) = search(&s, |c| c <= 5.0 || c == 16.0);
        assert_eq!(
            o,
            Outcome::Boundary {
                pass: 5.0,
                fail: 6.0
            }
        );
    }

    #[test]
    fn a_failure_hidden_below_the_bracket_moves_it_down() {
        let s = spec(1.0, 64.0, None);
        // 35 fails out of order (noise); bisection brackets 37/38 first.
        let truth = |c: f64| c <= 37.0 && c != 35.0;
        let (o, order) = search(&s, truth);
        assert_eq!(
            o,
            Outcome::Boundary {
                pass: 34.0,
                fail: 35.0
            }
        );
        assert!(order.contains(&37.0) && order.contains(&38.0), "{order:?}");
        // The answer is the first failure an exhaustive sweep stops at, and
        // the points just below it were measured as passes.
        for k in 1..CONFIRM_BELOW {
            assert!(order.contains(&(35.0 - k as f64)), "{order:?}");
        }
    }

    #[test]
    fn the_confirmation_looks_only_just_below_the_bracket() {
        let s = spec(1.0, 64.0, None);
        let deep = 37.0 - CONFIRM_BELOW as f64 - 2.0;
        let (o, order) = search(&s, |c| c <= 37.0 && c != deep);
        assert_eq!(
            o,
            Outcome::Boundary {
                pass: 37.0,
                fail: 38.0
            }
        );
        assert!(!order.contains(&deep), "{order:?}");
        assert!(order.len() as u64 <= s.max_probes(), "{order:?}");
    }

    #[test]
    fn a_whole_probe_running_slow_does_not_stop_a_contender() {
        let t = |per_gpu: f64| Throughput {
            per_gpu,
            low: per_gpu * 0.99,
            high: per_gpu * 1.01,
        };
        // 4 % apart: bootstrap intervals alone do not overlap, but one
        // probe-wide slowdown explains the gap.
        assert!(!cannot_win(&t(960.0), &t(1000.0)));
        // Far apart: no slowdown of a probe explains it.
        assert!(cannot_win(&t(800.0), &t(1000.0)));
        assert!(!cannot_win(&t(1000.0), &t(800.0)));
    }

    #[test]
    fn rate_grids_keep_decimal_levels() {
        let s = SearchSpec::new(
            parse_bounds("ttft_p99=1s").unwrap(),
            Axis::Rate,
            0.1,
            3.0,
            None,
        )
        .unwrap();
        assert_eq!(s.level(2), 0.3);
        assert_eq!(s.index_of(0.3), Some(2));
        assert_eq!(s.index_of(0.35), None);
        let (o, _) = search(&s, |r| r <= 1.7);
        assert_eq!(
            o,
            Outcome::Boundary {
                pass: 1.7,
                fail: 1.8
            }
        );
    }

    #[test]
    fn bad_bounds_and_grids_say_what_is_allowed() {
        for (text, needle) in [
            ("ttft=1s", "names no statistic"),
            ("ttfb_p99=1s", "allowed: ttft, tpot, itl, e2e"),
            ("ttft_p42=1s", "allowed: mean, p50"),
            ("ttft_p99=fast", "ttft_p99"),
            ("ttft_p99=1s,ttft_p99=2s", "twice"),
            ("", "no bound"),
        ] {
            let e = parse_bounds(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
        let b = parse_bounds("tpot_p50=30ms").unwrap();
        let e = SearchSpec::new(b.clone(), Axis::Concurrency, 1.5, 8.0, None).unwrap_err();
        assert!(e.contains("whole number"), "{e}");
        let e = SearchSpec::new(b.clone(), Axis::Rate, 1e-300, 1e300, None).unwrap_err();
        assert!(e.contains("at most 100000"), "{e}");
        // Extreme loads are written as a user would, not with 300 digits.
        assert!(e.contains("from 1e-300 to 1e300"), "{e}");
        assert!(e.len() < 200, "{e}");
        let e = SearchSpec::new(b.clone(), Axis::Rate, 4.0, 2.0, None).unwrap_err();
        assert!(e.contains("below"), "{e}");
        let e = SearchSpec::new(b, Axis::Rate, f64::NAN, 2.0, None).unwrap_err();
        assert!(e.contains("positive"), "{e}");
    }

    #[test]
    fn bounds_print_as_written() {
        let b = parse_bounds("ttft_p99=1.5s, tpot_p50=30ms").unwrap();
        let shown: Vec<String> = b.iter().map(|b| b.to_string()).collect();
        assert_eq!(shown, ["ttft_p99=1.5s", "tpot_p50=30ms"]);
    }
}
