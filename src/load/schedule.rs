//! Arrival processes as data, with a seeded RNG so runs repeat exactly.
//!
//! Open-loop arrivals are generated as absolute offsets from the level's
//! start, so a late dispatch never shifts the ones after it (no coordinated
//! omission). The first arrival is at offset zero.

use std::time::Duration;

use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

use crate::util::rng::{seeded, SeededRng};

/// How inter-arrival gaps are drawn in an open loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Exponential gaps with mean 1/rate.
    Poisson,
    /// Equal gaps of 1/rate.
    Constant,
    /// Gamma gaps with shape = burstiness and mean 1/rate (burstiness 1 = Poisson).
    Gamma,
}

/// The shape of load for one level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadShape {
    /// Closed loop: this many users, each sending its next request when the last ends.
    Concurrency {
        /// Number of concurrent users.
        value: u32,
    },
    /// Open loop: requests arrive at a rate regardless of completions.
    Rate {
        /// Mean requests per second.
        value: f64,
        /// Inter-arrival distribution.
        arrival: Arrival,
        /// Gamma shape (only meaningful for `gamma`).
        #[serde(default = "one", skip_serializing_if = "is_one")]
        burstiness: f64,
        /// Cap on requests in flight; arrivals wait for a free slot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_concurrency: Option<u32>,
    },
    /// Open loop on a trace's own schedule (see `workload::trace`).
    Replay {
        /// Traffic multiple: the trace's times are divided by it.
        time_scale: f64,
        /// Cap on requests in flight; arrivals wait for a free slot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_concurrency: Option<u32>,
    },
}

impl LoadShape {
    /// The level's number: users for concurrency, requests per second for
    /// a rate, the traffic multiple for a replay.
    pub fn value(&self) -> f64 {
        match self {
            LoadShape::Concurrency { value } => f64::from(*value),
            LoadShape::Rate { value, .. } => *value,
            LoadShape::Replay { time_scale, .. } => *time_scale,
        }
    }

    /// The level as a short, file-name-safe label with its exact number:
    /// `c8`, `rate2.5`, `x2` (part of cell names, so never rounded).
    pub fn label(&self) -> String {
        self.label_with(|v| v.to_string())
    }

    /// [`Self::label`] for reading: a rate or time scale found by a search
    /// is shown to three decimals (`rate2.218`).
    pub fn label_rounded(&self) -> String {
        self.label_with(|v| {
            let s = format!("{v:.3}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        })
    }

    fn label_with(&self, number: impl Fn(f64) -> String) -> String {
        match self {
            LoadShape::Concurrency { value } => format!("c{value}"),
            LoadShape::Rate { value, .. } => format!("rate{}", number(*value)),
            LoadShape::Replay { time_scale, .. } => format!("x{}", number(*time_scale)),
        }
    }
}

fn one() -> f64 {
    1.0
}
fn is_one(v: &f64) -> bool {
    *v == 1.0
}

impl std::fmt::Display for LoadShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadShape::Concurrency { value } => write!(f, "concurrency {value}"),
            LoadShape::Rate { value, arrival, .. } => {
                write!(
                    f,
                    "rate {value}/s {}",
                    format!("{arrival:?}").to_lowercase()
                )
            }
            LoadShape::Replay { time_scale, .. } => write!(f, "trace replay x{time_scale}"),
        }
    }
}

/// Longest mean gap between arrivals accepted when a level has no duration, s.
pub const MAX_MEAN_GAP_S: f64 = 86_400.0;

/// Highest request rate accepted, per second: far beyond what one load
/// generator dispatches (about 10⁵ requests/s), so a larger one is a typo,
/// and it keeps a rate's cell name short enough for a file name.
pub const MAX_RATE: f64 = 1e6;

/// Refuse a rate whose next arrival after the first lies beyond the level's
/// bound (`duration`, else [`MAX_MEAN_GAP_S`]): such a level would send one
/// request and then wait, possibly for longer than the universe has existed.
/// Rates above [`MAX_RATE`] are refused too.
pub fn check_rate_within(rate: f64, duration: Option<Duration>) -> Result<(), String> {
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(format!("rate `{rate:e}` must be a positive number"));
    }
    if rate > MAX_RATE {
        return Err(format!(
            "rate {rate:e}/s is beyond {MAX_RATE:e}/s, more than one load generator sends; \
             to send every request at once, use a concurrency instead"
        ));
    }
    if duration == Some(Duration::ZERO) {
        return Err("a duration of zero sends nothing; give a longer duration".into());
    }
    let gap = 1.0 / rate;
    let (bound, what) = match duration {
        Some(d) => (d.as_secs_f64(), format!("the duration of {d:?}")),
        None => (
            MAX_MEAN_GAP_S,
            "one day (the bound without a duration)".to_string(),
        ),
    };
    if gap > bound {
        let min_rate = 1.0 / bound;
        return Err(format!(
            "rate {rate:e}/s puts {gap:.3e} s between arrivals, beyond {what}; use a rate of at least {min_rate:.3e}/s or a longer duration"
        ));
    }
    Ok(())
}

/// An endless, seeded sequence of arrival offsets from the level start.
pub struct ArrivalClock {
    rng: SeededRng,
    rate: f64,
    arrival: Arrival,
    gamma: Option<Gamma<f64>>,
    next: f64,
}

impl ArrivalClock {
    /// A clock for `rate` requests/s; `burstiness` must be positive for gamma.
    pub fn new(rate: f64, arrival: Arrival, burstiness: f64, seed: u64) -> Result<Self, String> {
        if !(rate > 0.0 && rate.is_finite()) {
            return Err(format!("request rate must be positive, got {rate}"));
        }
        let gamma = match arrival {
            Arrival::Gamma => {
                if !(burstiness > 0.0 && burstiness.is_finite()) {
                    return Err(format!("burstiness must be positive, got {burstiness}"));
                }
                Some(
                    Gamma::new(burstiness, 1.0 / (rate * burstiness))
                        .map_err(|e| format!("invalid gamma parameters: {e}"))?,
                )
            }
            Arrival::Poisson => Some(Gamma::new(1.0, 1.0 / rate).map_err(|e| e.to_string())?),
            Arrival::Constant => None,
        };
        Ok(Self {
            rng: seeded(seed),
            rate,
            arrival,
            gamma,
            next: 0.0,
        })
    }

    /// The arrival process this clock follows.
    pub fn arrival(&self) -> Arrival {
        self.arrival
    }
}

impl Iterator for ArrivalClock {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // An offset past what a Duration holds can never be waited for: the
        // schedule ends there instead of panicking on a tiny rate.
        let at = Duration::try_from_secs_f64(self.next).ok()?;
        let gap = match &self.gamma {
            Some(g) => g.sample(&mut self.rng),
            None => 1.0 / self.rate,
        };
        self.next += gap;
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(clock: ArrivalClock, n: usize) -> Vec<f64> {
        let t: Vec<f64> = clock.take(n + 1).map(|d| d.as_secs_f64()).collect();
        t.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn mean_cv(g: &[f64]) -> (f64, f64) {
        let m = g.iter().sum::<f64>() / g.len() as f64;
        let sd = (g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / g.len() as f64).sqrt();
        (m, sd / m)
    }

    #[test]
    fn constant_arrivals_are_evenly_spaced_from_zero() {
        let c = ArrivalClock::new(4.0, Arrival::Constant, 1.0, 1).unwrap();
        let t: Vec<f64> = c.take(3).map(|d| d.as_secs_f64()).collect();
        assert_eq!(t, vec![0.0, 0.25, 0.5]);
    }

    #[test]
    fn poisson_and_gamma_have_the_right_mean_and_variability() {
        let (m, cv) = mean_cv(&gaps(
            ArrivalClock::new(10.0, Arrival::Poisson, 1.0, 7).unwrap(),
            20_000,
        ));
        assert!((m - 0.1).abs() < 0.005, "poisson mean {m}");
        assert!((cv - 1.0).abs() < 0.05, "poisson cv {cv}");
        // Gamma with shape k has coefficient of variation 1/sqrt(k).
        let (m, cv) = mean_cv(&gaps(
            ArrivalClock::new(10.0, Arrival::Gamma, 0.25, 7).unwrap(),
            20_000,
        ));
        assert!((m - 0.1).abs() < 0.01, "gamma mean {m}");
        assert!((cv - 2.0).abs() < 0.15, "gamma cv {cv}");
    }

    #[test]
    fn same_seed_same_schedule_and_bad_rates_rejected() {
        let a: Vec<_> = ArrivalClock::new(3.0, Arrival::Poisson, 1.0, 42)
            .unwrap()
            .take(50)
            .collect();
        let b: Vec<_> = ArrivalClock::new(3.0, Arrival::Poisson, 1.0, 42)
            .unwrap()
            .take(50)
            .collect();
        assert_eq!(a, b);
        assert!(ArrivalClock::new(0.0, Arrival::Poisson, 1.0, 1).is_err());
        assert!(ArrivalClock::new(1.0, Arrival::Gamma, 0.0, 1).is_err());
    }

    #[test]
    fn tiny_rates_end_the_schedule_instead_of_panicking() {
        for rate in [1e-300, 5e-20, 1e-19, f64::MIN_POSITIVE] {
            for arrival in [Arrival::Poisson, Arrival::Constant, Arrival::Gamma] {
                // Poisson and gamma may refuse a scale that is not finite; either is fine.
                let Ok(c) = ArrivalClock::new(rate, arrival, 1.0, 3) else {
                    continue;
                };
                let t: Vec<Duration> = c.take(3).collect();
                assert_eq!(t.first(), Some(&Duration::ZERO), "{rate} {arrival:?}");
                assert!(t.windows(2).all(|w| w[0] <= w[1]));
            }
        }
    }

    #[test]
    fn rates_beyond_the_bound_are_refused_with_the_fix() {
        let two = Some(Duration::from_secs(2));
        for rate in [1e-300, 5e-20, 1e-19, 0.1] {
            let e = check_rate_within(rate, two).unwrap_err();
            assert!(e.contains("at least 5.000e-1/s"), "{e}");
        }
        assert!(check_rate_within(0.5, two).is_ok());
        assert!(check_rate_within(1e-3, None).is_ok());
        assert!(check_rate_within(1e-6, None)
            .unwrap_err()
            .contains("one day"));
        assert!(check_rate_within(1.0, Some(Duration::ZERO)).is_err());
        let e = check_rate_within(1e300, None).unwrap_err();
        assert!(e.contains("1e300/s is beyond 1e6/s"), "{e}");
        assert!(check_rate_within(MAX_RATE, None).is_ok());
    }
}
