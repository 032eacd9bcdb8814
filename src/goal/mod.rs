//! Answer first (`[run] goal = "answer"`): measure only the cells that can
//! change the campaign's answer.
//!
//! The answer is made of per-point choices: at each workload point, the
//! config with the most output throughput per GPU (among those meeting the
//! point's SLO, where it has one), from which the SLO picks and the final
//! "deploy X" follow. A config that cannot win a point cannot change any of
//! them, so it need not be measured there in full.
//!
//! Servers run leader first ([`leader_first`]): the config expected to cost
//! the fewest GPU-seconds for the grid (the most throughput per GPU) is
//! measured in full and sets a leader at every point. Every later server is
//! still launched once, but at each point where a leader exists it first
//! runs a short probe; [`Board::gate`] compares that probe with the
//! leader's probe of the same point (a probe is shorter than its cell, so it
//! is compared with its own kind; every config measured in full was probed
//! too) the way the SLO search drops a loser ([`crate::search::cannot_win`]:
//! both intervals widened by the whole-probe spread), and the point is
//! measured in full only where the probe could still win. A full
//! measurement that beats the leader becomes the leader. The grid's own
//! winner at a point is therefore always measured in full, and so is every
//! config whose probe is within the noise of it, which is what the report's
//! runner-up and its "too close to call" need.
//!
//! Pure arithmetic: no clock, no I/O; the runner and `benches/answer.rs`
//! drive it alike.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::search::{cannot_win, Throughput};

/// What a probe says about a point's SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloOutlook {
    /// The point has no SLO: throughput alone ranks it.
    NoSlo,
    /// The full measurement may meet the SLO.
    Unsure,
    /// A bound is missed by more than the probe's noise: the full
    /// measurement will not meet the SLO either.
    Fails,
}

/// A short probe of a point on one server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// Its throughput per GPU with the interval over its requests.
    pub throughput: Throughput,
    /// Whether it can still meet the point's SLO.
    pub slo: SloOutlook,
}

/// A point measured in full on one server.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    server: String,
    throughput: Throughput,
    /// Its probe of the point, when it has one: what later probes are
    /// compared with.
    probe: Option<Throughput>,
    /// `None` where the point has no SLO.
    meets_slo: Option<bool>,
}

/// Why a server's point was not measured in full.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lost {
    /// The server config not measured there.
    pub server: String,
    /// The workload point (cell name).
    pub point: String,
    /// The config it lost to.
    pub leader: String,
    /// The probe's throughput per GPU.
    pub probe: f64,
    /// The leader's probe of the point (its full measurement where it
    /// has no probe).
    pub leading: f64,
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` at {}: lost to `{}`, {:.1} vs {:.1} tok/s/GPU",
            self.server, self.point, self.leader, self.probe, self.leading
        )
    }
}

/// What to do with a server's point.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// Measure it in full: it may win, or nothing to compare with yet.
    Measure,
    /// Leave it: its probe cannot beat the leader.
    Lost(Lost),
}

/// The configs measured in full at each point, for gating the rest.
#[derive(Debug, Clone, Default)]
pub struct Board {
    points: BTreeMap<String, Vec<Entry>>,
}

impl Board {
    /// An empty board.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record a full measurement of `point` on `server`, with its probe of
    /// the point when one ran; `meets_slo` is `None` where the point has no
    /// SLO.
    pub fn offer(
        &mut self,
        (point, server): (&str, &str),
        full: Throughput,
        probe: Option<Throughput>,
        meets_slo: Option<bool>,
    ) {
        self.points
            .entry(point.to_string())
            .or_default()
            .push(Entry {
                server: server.to_string(),
                throughput: full,
                probe,
                meets_slo,
            });
    }

    /// Whether anything was measured in full at `point`: a probe there has
    /// something to be compared with.
    pub fn has_leader(&self, point: &str) -> bool {
        self.points.get(point).is_some_and(|v| !v.is_empty())
    }

    /// The config leading `point`: the most throughput per GPU among those
    /// meeting its SLO, or among all where it has none.
    pub fn leader(&self, point: &str) -> Option<(&str, Throughput)> {
        self.best(point, |e| e.meets_slo != Some(false))
            .map(|e| (e.server.as_str(), e.throughput))
    }

    /// The config with the most throughput per GPU at `point`, whatever
    /// its SLO says.
    pub fn fastest(&self, point: &str) -> Option<(&str, Throughput)> {
        self.best(point, |_| true)
            .map(|e| (e.server.as_str(), e.throughput))
    }

    fn best(&self, point: &str, keep: impl Fn(&Entry) -> bool) -> Option<&Entry> {
        self.points
            .get(point)?
            .iter()
            .filter(|e| keep(e))
            .max_by(|a, b| {
                a.throughput
                    .per_gpu
                    .total_cmp(&b.throughput.per_gpu)
                    .then_with(|| b.server.cmp(&a.server))
            })
    }

    /// Whether `server`, probed at `point`, is to be measured there in full.
    ///
    /// It is lost when its probe cannot beat the leader the point ranks by:
    /// the leader among configs meeting the SLO, or, when the probe shows
    /// the config will not meet the SLO itself, the leader by throughput
    /// alone (it can then win the point's throughput and nothing else). At
    /// an SLO point no config has met yet, a probe that may still meet the
    /// SLO is measured: it could be the point's only pick.
    pub fn gate(&self, server: &str, point: &str, probe: &Probe) -> Gate {
        let against = match probe.slo {
            SloOutlook::Fails => self.best(point, |_| true),
            SloOutlook::NoSlo | SloOutlook::Unsure => {
                self.best(point, |e| e.meets_slo != Some(false))
            }
        };
        let Some(lead) = against else {
            return Gate::Measure;
        };
        let leading = lead.probe.unwrap_or(lead.throughput);
        if cannot_win(&probe.throughput, &leading) {
            Gate::Lost(Lost {
                server: server.to_string(),
                point: point.to_string(),
                leader: lead.server.clone(),
                probe: probe.throughput.per_gpu,
                leading: leading.per_gpu,
            })
        } else {
            Gate::Measure
        }
    }
}

/// Sort servers so the likely leader runs first: by the GPU-seconds their
/// cells are expected to cost, fewest first (a cell's GPU-seconds are its
/// tokens over its throughput per GPU, so the fastest per GPU costs least),
/// ties in the given order; a server expected to cost nothing (it cannot
/// fit, or has nothing to run) goes last.
pub fn leader_first<T>(items: &mut [T], expected_gpu_s: impl Fn(&T) -> Option<f64>) {
    items.sort_by(|a, b| {
        let key = |x: &T| expected_gpu_s(x).filter(|s| *s > 0.0);
        match (key(a), key(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: f64, half: f64) -> Throughput {
        Throughput {
            per_gpu: v,
            low: v - half,
            high: v + half,
        }
    }

    fn probe(v: f64, slo: SloOutlook) -> Probe {
        Probe {
            throughput: t(v, v * 0.05),
            slo,
        }
    }

    #[test]
    fn a_probe_far_below_the_leader_is_lost_and_one_within_the_noise_is_measured() {
        let mut b = Board::new();
        assert!(!b.has_leader("c8"));
        b.offer(("c8", "ddtree"), t(700.0, 10.0), Some(t(655.0, 10.0)), None);
        assert!(b.has_leader("c8"));
        match b.gate("ar", "c8", &probe(412.0, SloOutlook::NoSlo)) {
            Gate::Lost(l) => assert_eq!(
                l.to_string(),
                "`ar` at c8: lost to `ddtree`, 412.0 vs 655.0 tok/s/GPU"
            ),
            g => panic!("{g:?}"),
        }
        // Probes are compared with the leader's probe, not its full cell:
        // 600 is 8 % below 655, within the widened intervals, so it may win.
        assert_eq!(
            b.gate("dflash", "c8", &probe(600.0, SloOutlook::NoSlo)),
            Gate::Measure
        );
        // Another point has no leader yet.
        assert_eq!(
            b.gate("ar", "c1", &probe(1.0, SloOutlook::NoSlo)),
            Gate::Measure
        );
    }

    #[test]
    fn an_slo_point_gates_against_the_best_config_meeting_it() {
        let mut b = Board::new();
        b.offer(("c64", "fast"), t(900.0, 10.0), None, Some(false));
        // Nothing meets the SLO yet: a probe that may meet it is measured,
        // however slow, since it could be the point's only pick.
        assert_eq!(
            b.gate("slow", "c64", &probe(300.0, SloOutlook::Unsure)),
            Gate::Measure
        );
        // One that will miss it too competes on throughput alone.
        assert!(matches!(
            b.gate("slow", "c64", &probe(300.0, SloOutlook::Fails)),
            Gate::Lost(_)
        ));
        b.offer(("c64", "ok"), t(500.0, 10.0), None, Some(true));
        assert_eq!(b.leader("c64").unwrap().0, "ok");
        match b.gate("slow", "c64", &probe(300.0, SloOutlook::Unsure)) {
            Gate::Lost(l) => assert_eq!(l.leader, "ok"),
            g => panic!("{g:?}"),
        }
        // Below `fast` but maybe above `ok` and meeting the SLO: measured.
        assert_eq!(
            b.gate("mid", "c64", &probe(520.0, SloOutlook::Unsure)),
            Gate::Measure
        );
    }

    #[test]
    fn the_cheapest_server_per_gpu_runs_first_and_one_that_cannot_fit_last() {
        let mut v = vec![("tp8", None), ("tp4", Some(400.0)), ("tp1", Some(100.0))];
        leader_first(&mut v, |x| x.1);
        let ids: Vec<&str> = v.iter().map(|x| x.0).collect();
        assert_eq!(ids, ["tp1", "tp4", "tp8"]);
    }
}
