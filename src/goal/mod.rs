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

use crate::campaign::{PromptSource, WorkloadPoint};
use crate::load::schedule::LoadShape;
use crate::search::{cannot_win, Throughput};

/// Output tokens a probe request asks for (its point's own when fewer):
/// enough decode steps for a steady speed, a small part of a long cell.
pub const PROBE_OUTPUT: u64 = 128;
/// Fewest requests a probe sends, so its interval over requests means
/// something at one stream.
pub const PROBE_MIN_REQUESTS: u64 = 4;

/// The probe of a point: one wave of its concurrency (at least
/// [`PROBE_MIN_REQUESTS`]), no warm-up, outputs cut to [`PROBE_OUTPUT`]
/// tokens, the same prompts. `None` where a probe would not measure the
/// point's kind of load: rates and replays (their arrivals are the load),
/// sessions and traces (their own lengths), checks (their answers), points
/// bounded by time, and repetitions after the first (gated with it).
pub fn probe_point(w: &WorkloadPoint) -> Option<WorkloadPoint> {
    let LoadShape::Concurrency { value } = w.load else {
        return None;
    };
    let gated = matches!(
        w.source,
        PromptSource::Synthetic | PromptSource::PromptKinds { .. } | PromptSource::Dataset { .. }
    );
    let n = w.num_requests?;
    if !gated || w.repetition > 0 || w.duration_s.is_some() {
        return None;
    }
    Some(WorkloadPoint {
        num_requests: Some(u64::from(value).min(n).max(PROBE_MIN_REQUESTS.min(n))),
        warmup: 0,
        output_len: w.output_len.min(PROBE_OUTPUT),
        ..w.clone()
    })
}

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
    /// The value the point ranks by (throughput per GPU, or decode speed
    /// at one stream) with its interval over the probe's requests.
    pub throughput: Throughput,
    /// Whether it can still meet the point's SLO.
    pub slo: SloOutlook,
    /// What the value is, for the reason a point was left.
    pub unit: &'static str,
}

/// A point measured in full on one server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Full {
    /// The value the point ranks by, with its interval.
    pub value: Throughput,
    /// Its probe's value, when it was probed: what later probes are
    /// compared with.
    pub probe: Option<Throughput>,
    /// How it did against the point's SLO; `None` where there is none.
    pub slo: Option<SloFull>,
}

/// A full measurement against its point's SLO.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SloFull {
    /// Whether enough of its requests met every bound.
    pub meets: bool,
    /// Its goodput: requests within every bound per second per GPU, what
    /// the SLO pick of its family ranks by.
    pub goodput: f64,
}

/// A workload point as the answer uses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point<'a> {
    /// Its name, shared by every server (the cell name of its first repetition).
    pub name: &'a str,
    /// How many configs the answer names at it: 1, the best, or 2, the
    /// best and its runner-up (single-stream points).
    pub places: usize,
    /// The workload family whose SLO pick it takes part in, where it has an SLO.
    pub family: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    server: String,
    full: Full,
}

impl Entry {
    /// What a probe at the point is compared with: the probe, or the full
    /// value where none ran.
    fn against(&self) -> Throughput {
        self.full.probe.unwrap_or(self.full.value)
    }

    fn meets(&self) -> bool {
        self.full.slo.is_none_or(|s| s.meets)
    }
}

/// Why a server's point was not measured in full.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lost {
    /// The server config not measured there.
    pub server: String,
    /// The workload point (cell name).
    pub point: String,
    /// The point's leader.
    pub leader: String,
    /// The config whose place it cannot take: the leader where the answer
    /// names only the best, the runner-up where it names both.
    pub beaten_by: String,
    /// The probe's value.
    pub probe: f64,
    /// The probe of `beaten_by` at the point (its full measurement where
    /// it has no probe).
    pub against: f64,
    /// What the values are: `tok/s/GPU`, or `tok/s decode` at one stream.
    pub unit: String,
    /// At a point with an SLO: why it cannot be its family's SLO pick or
    /// runner-up either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_pick: Option<String>,
}

impl Lost {
    /// Why, without whose point it was.
    pub fn reason(&self) -> String {
        let place = if self.beaten_by == self.leader {
            format!(
                "cannot win: its probe {:.1} vs {:.1} {} of leader `{}`",
                self.probe, self.against, self.unit, self.leader
            )
        } else {
            format!(
                "cannot be first or second: its probe {:.1} vs {:.1} {} of runner-up `{}` (leader `{}`)",
                self.probe, self.against, self.unit, self.beaten_by, self.leader
            )
        };
        match &self.slo_pick {
            Some(s) => format!("{place}; {s}"),
            None => place,
        }
    }
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` at {}: {}", self.server, self.point, self.reason())
    }
}

/// What to do with a server's point.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// Measure it in full: it may place, or nothing to compare with yet.
    Measure,
    /// Leave it: its probe cannot take any place the answer names.
    Lost(Lost),
}

/// The configs measured in full at each point, for gating the rest.
#[derive(Debug, Clone, Default)]
pub struct Board {
    points: BTreeMap<String, Vec<Entry>>,
    /// Per family, each server's best goodput per GPU among its points
    /// meeting the SLO.
    families: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Board {
    /// An empty board.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record a full measurement of `point` on `server`.
    pub fn offer(&mut self, point: &Point<'_>, server: &str, full: Full) {
        if let (Some(family), Some(slo)) = (point.family, full.slo.filter(|s| s.meets)) {
            let best = self
                .families
                .entry(family.to_string())
                .or_default()
                .entry(server.to_string())
                .or_insert(0.0);
            *best = best.max(slo.goodput);
        }
        self.points
            .entry(point.name.to_string())
            .or_default()
            .push(Entry {
                server: server.to_string(),
                full,
            });
    }

    /// Whether anything was measured in full at `point`.
    pub fn has_leader(&self, point: &str) -> bool {
        self.points.get(point).is_some_and(|v| !v.is_empty())
    }

    /// The config leading `point`: the best value among those meeting its
    /// SLO, or among all where it has none.
    pub fn leader(&self, point: &str) -> Option<(&str, Throughput)> {
        self.best(point, Entry::meets)
    }

    /// The config with the best value at `point`, whatever its SLO says.
    pub fn fastest(&self, point: &str) -> Option<(&str, Throughput)> {
        self.best(point, |_| true)
    }

    /// A family's SLO pick: the server with the most goodput per GPU at a
    /// point meeting the SLO, and that goodput.
    pub fn slo_pick(&self, family: &str) -> Option<(&str, f64)> {
        self.slo_ranking(family).into_iter().next()
    }

    /// Why `server` needs no more repetitions at `point`: its first one is
    /// clear of every other config measured there in full, both ways, so
    /// no place among them can change with more. `None` when some config
    /// is within the noise of it, none was measured before it (later ones
    /// are compared with its repetitions), or it has no full measurement.
    pub fn settled(&self, point: &str, server: &str) -> Option<String> {
        let entries = self.points.get(point)?;
        let mine = entries.iter().find(|e| e.server == server)?;
        let others: Vec<&Entry> = entries.iter().filter(|e| e.server != server).collect();
        if others.is_empty() {
            // Nothing to be clear of yet: the first config's repetitions
            // are what later ones are compared with.
            return None;
        }
        let (a, clear) = (mine.full.value, |b: &Throughput| {
            cannot_win(&mine.full.value, b) || cannot_win(b, &mine.full.value)
        });
        if !others.iter().all(|o| clear(&o.full.value)) {
            return None;
        }
        let nearest = others.iter().min_by(|x, y| {
            (x.full.value.per_gpu - a.per_gpu)
                .abs()
                .total_cmp(&(y.full.value.per_gpu - a.per_gpu).abs())
        });
        let n = nearest?;
        Some(format!(
            "one repetition settles its place here: {:.1} [{:.1}, {:.1}] is clear of every config measured before it, the nearest `{}` at {:.1}",
            a.per_gpu, a.low, a.high, n.server, n.full.value.per_gpu
        ))
    }

    /// How many points each config leads.
    pub fn leads(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for point in self.points.keys() {
            if let Some((server, _)) = self.leader(point).or_else(|| self.fastest(point)) {
                *out.entry(server.to_string()).or_insert(0) += 1;
            }
        }
        out
    }

    fn best(&self, point: &str, keep: impl Fn(&Entry) -> bool) -> Option<(&str, Throughput)> {
        let ranked = self.ranked(point, keep);
        ranked.first().map(|e| (e.server.as_str(), e.full.value))
    }

    /// The entries of `point` that `keep` keeps, best first.
    fn ranked(&self, point: &str, keep: impl Fn(&Entry) -> bool) -> Vec<&Entry> {
        let mut v: Vec<&Entry> = self
            .points
            .get(point)
            .into_iter()
            .flatten()
            .filter(|e| keep(e))
            .collect();
        v.sort_by(|a, b| {
            (b.full.value.per_gpu)
                .total_cmp(&a.full.value.per_gpu)
                .then_with(|| a.server.cmp(&b.server))
        });
        v
    }

    /// A family's servers by their best goodput at a point meeting the
    /// SLO, best first: the SLO pick, its runner-up, the rest.
    pub fn slo_ranking(&self, family: &str) -> Vec<(&str, f64)> {
        let mut v: Vec<(&str, f64)> = self
            .families
            .get(family)
            .into_iter()
            .flatten()
            .map(|(s, g)| (s.as_str(), *g))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        v
    }

    /// Whether `server`, probed at `point`, is to be measured there in full.
    ///
    /// A config is left only when its probe can take none of the places the
    /// answer names. At the point: it cannot beat the config in the last
    /// of `point.places` (hence none above it); until that many are
    /// measured in full, every probe is measured. The ranking is among
    /// configs meeting the point's SLO or, when the probe shows the config
    /// will not meet the SLO itself, among all (it can then place on the
    /// point's value and nothing else). At a point with an SLO, it must
    /// also be unable to become its family's SLO pick or runner-up: its
    /// probe, scaled by the point leader's goodput over that leader's own
    /// probe, stays below the goodput of the family's second config.
    pub fn gate(&self, point: &Point<'_>, server: &str, probe: &Probe) -> Gate {
        let fails = probe.slo == SloOutlook::Fails;
        let ranked = self.ranked(point.name, |e| fails || e.meets());
        let places = point.places.max(1);
        if ranked.len() < places {
            return Gate::Measure;
        }
        let (lead, last) = (ranked[0], ranked[places - 1]);
        if !cannot_win(&probe.throughput, &last.against()) {
            return Gate::Measure;
        }
        let slo_pick = match point.family.filter(|_| !fails) {
            Some(family) => match self.below_slo_pick(family, lead, probe) {
                Some(why) => Some(why),
                None => return Gate::Measure,
            },
            None => None,
        };
        Gate::Lost(Lost {
            server: server.to_string(),
            point: point.name.to_string(),
            leader: lead.server.clone(),
            beaten_by: last.server.clone(),
            probe: probe.throughput.per_gpu,
            against: last.against().per_gpu,
            unit: probe.unit.to_string(),
            slo_pick,
        })
    }

    /// Why a probe cannot become its family's SLO pick or runner-up, or
    /// `None` when it may (or fewer than two configs meet the SLO yet).
    fn below_slo_pick(&self, family: &str, lead: &Entry, probe: &Probe) -> Option<String> {
        let ranked = self.slo_ranking(family);
        let &(second, bar) = ranked.get(1)?;
        let lead_goodput = lead.full.slo.filter(|s| s.meets)?.goodput;
        let base = lead.against();
        if base.per_gpu <= 0.0 {
            return None;
        }
        // The probe's ratio to the leader's probe, in goodput: both
        // intervals carry into the projection.
        let scale = lead_goodput / base.per_gpu;
        let rel = |t: &Throughput| (t.high - t.per_gpu).max(0.0) / t.per_gpu.max(f64::MIN_POSITIVE);
        let half = rel(&probe.throughput).hypot(rel(&base));
        let projected = probe.throughput.per_gpu * scale;
        let t = Throughput {
            per_gpu: projected,
            low: projected * (1.0 - half),
            high: projected * (1.0 + half),
        };
        let bar_t = Throughput {
            per_gpu: bar,
            low: bar,
            high: bar,
        };
        cannot_win(&t, &bar_t).then(|| {
            format!(
                "under the SLO at most about {projected:.3} good req/s/GPU, below {bar:.3} of `{second}`, the family's second"
            )
        })
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
            unit: "tok/s/GPU",
        }
    }

    fn full(v: f64, probe: Option<f64>, slo: Option<(bool, f64)>) -> Full {
        Full {
            value: t(v, 10.0),
            probe: probe.map(|p| t(p, 10.0)),
            slo: slo.map(|(meets, goodput)| SloFull { meets, goodput }),
        }
    }

    const C8: Point = Point {
        name: "c8",
        places: 1,
        family: None,
    };

    #[test]
    fn a_probe_far_below_the_leaders_is_lost_and_one_within_the_noise_is_measured() {
        let mut b = Board::new();
        assert!(!b.has_leader("c8"));
        b.offer(&C8, "ddtree", full(700.0, Some(680.0), None));
        assert!(b.has_leader("c8"));
        match b.gate(&C8, "ar", &probe(412.0, SloOutlook::NoSlo)) {
            Gate::Lost(l) => assert_eq!(
                l.to_string(),
                "`ar` at c8: cannot win: its probe 412.0 vs 680.0 tok/s/GPU of leader `ddtree`"
            ),
            g => panic!("{g:?}"),
        }
        // Probes are compared with the leader's probe, not its full cell:
        // 630 is 7 % below 680, within the widened intervals.
        assert_eq!(
            b.gate(&C8, "eagle", &probe(630.0, SloOutlook::NoSlo)),
            Gate::Measure
        );
        // Another point has nothing measured yet.
        let c1 = Point { name: "c1", ..C8 };
        assert_eq!(
            b.gate(&c1, "ar", &probe(1.0, SloOutlook::NoSlo)),
            Gate::Measure
        );
        assert_eq!(b.leads(), [("ddtree".to_string(), 1)].into());
    }

    #[test]
    fn where_the_answer_names_a_runner_up_a_probe_must_beat_the_second() {
        let c1 = Point {
            name: "c1",
            places: 2,
            family: None,
        };
        let mut b = Board::new();
        b.offer(&c1, "ddtree", full(70.0, Some(68.0), None));
        // One config in full: the next is measured whatever its probe.
        assert_eq!(
            b.gate(&c1, "ar", &probe(10.0, SloOutlook::NoSlo)),
            Gate::Measure
        );
        b.offer(&c1, "dflash", full(66.0, Some(65.5), None));
        match b.gate(&c1, "ar", &probe(41.2, SloOutlook::NoSlo)) {
            Gate::Lost(l) => assert_eq!(
                l.reason(),
                "cannot be first or second: its probe 41.2 vs 65.5 tok/s/GPU of runner-up `dflash` (leader `ddtree`)"
            ),
            g => panic!("{g:?}"),
        }
    }

    #[test]
    fn an_slo_point_ranks_the_configs_meeting_it_and_keeps_its_familys_contenders() {
        let p = Point {
            name: "c64",
            places: 1,
            family: Some("decode"),
        };
        let mut b = Board::new();
        b.offer(&p, "faster", full(950.0, Some(900.0), Some((false, 0.0))));
        // Nothing meets the SLO yet: a probe that may meet it is measured,
        // however slow, since it could be the point's only pick.
        assert_eq!(
            b.gate(&p, "slow", &probe(300.0, SloOutlook::Unsure)),
            Gate::Measure
        );
        // One that will miss it too competes on its value alone.
        assert!(matches!(
            b.gate(&p, "slow", &probe(300.0, SloOutlook::Fails)),
            Gate::Lost(_)
        ));
        b.offer(&p, "ok", full(500.0, Some(500.0), Some((true, 2.0))));
        assert_eq!(b.leader("c64").unwrap().0, "ok");
        assert_eq!(b.fastest("c64").unwrap().0, "faster");
        // Below `ok` here, but only one config meets the SLO in the
        // family: it could still be the SLO pick's runner-up.
        assert_eq!(
            b.gate(&p, "slow", &probe(300.0, SloOutlook::Unsure)),
            Gate::Measure
        );
        // Another point of the family makes `other` the second at 1.5.
        let c32 = Point { name: "c32", ..p };
        b.offer(&c32, "other", full(400.0, Some(400.0), Some((true, 1.5))));
        assert_eq!(b.slo_pick("decode"), Some(("ok", 2.0)));
        // 300/500 of `ok`'s 2.0 projects to 1.2, below 1.5: lost.
        match b.gate(&p, "slow", &probe(300.0, SloOutlook::Unsure)) {
            Gate::Lost(l) => assert!(
                l.reason().ends_with(
                    "under the SLO at most about 1.200 good req/s/GPU, below 1.500 of `other`, the family's second"
                ),
                "{}",
                l.reason()
            ),
            g => panic!("{g:?}"),
        }
        // 420 projects to 1.68: it could pass `other` for second place.
        assert_eq!(
            b.gate(&p, "mid", &probe(420.0, SloOutlook::Unsure)),
            Gate::Measure
        );
    }

    #[test]
    fn more_repetitions_go_only_where_a_config_is_within_the_noise_of_another() {
        let mut b = Board::new();
        b.offer(&C8, "a", full(700.0, None, None));
        b.offer(&C8, "b", full(690.0, None, None));
        b.offer(&C8, "c", full(300.0, None, None));
        assert_eq!(b.settled("c8", "a"), None, "a and b are within the noise");
        assert_eq!(b.settled("c8", "b"), None);
        let why = b.settled("c8", "c").unwrap();
        assert!(why.contains("the nearest `b` at 690.0"), "{why}");
        assert_eq!(b.settled("c8", "d"), None, "never measured in full");
        assert_eq!(b.settled("c1", "a"), None);
        let c1 = Point { name: "c1", ..C8 };
        b.offer(&c1, "first", full(10.0, None, None));
        assert_eq!(b.settled("c1", "first"), None, "nothing to be clear of");
    }

    #[test]
    fn the_cheapest_server_per_gpu_runs_first_and_one_that_cannot_fit_last() {
        let mut v = vec![("tp8", None), ("tp4", Some(400.0)), ("tp1", Some(100.0))];
        leader_first(&mut v, |x| x.1);
        let ids: Vec<&str> = v.iter().map(|x| x.0).collect();
        assert_eq!(ids, ["tp1", "tp4", "tp8"]);
    }
}
