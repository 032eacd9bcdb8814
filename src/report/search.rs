//! SLO search results: per search and server config, the boundary the
//! stored probes prove (the last passing and first failing load), the
//! output throughput per GPU at it with its interval, and the config that
//! serves the most per GPU within the bounds.
//!
//! Everything is replayed from the stored cells, so the report, `run` and
//! `plan` agree on what a search found; a config that `run` stopped early
//! is recognised by the same rule `run` applied.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::charts::{Chart, ChartKind, ChartSection, Series, SeriesStyle};

use crate::campaign::resolve::Search;
use crate::metrics::level::LevelSummary;
use crate::search::{self, cannot_win, LevelFacts, Outcome, Step, Throughput, INTERVAL_SEED};
use crate::store::{probe_verdict, CellResult};

/// One search on one server config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchRow {
    /// The search's name.
    pub search: String,
    /// Server id.
    pub server_id: String,
    /// The load axis searched.
    pub axis: crate::search::Axis,
    /// The bounds, as written.
    pub bounds: Vec<String>,
    /// Where the search stands.
    pub state: SearchState,
    /// Highest load shown to meet every bound.
    pub boundary: Option<f64>,
    /// Lowest load shown to miss a bound (one grid step above the boundary when done).
    pub first_fail: Option<f64>,
    /// What the first failing probe missed.
    pub missed: Vec<String>,
    /// Probes on the search's path that are stored.
    pub probes: usize,
    /// Output throughput per GPU at the boundary, with its 95% interval.
    pub per_gpu: Option<Throughput>,
    /// Why the search is not over, or how it ended early.
    pub note: Option<String>,
    /// Every probe on the search's path, by load.
    pub probe_points: Vec<ProbePoint>,
}

/// Where one config's search stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchState {
    /// Bracketed between a passing and a failing grid point.
    Boundary,
    /// Every bound holds up to the searched maximum.
    AboveMax,
    /// The lowest load already misses a bound.
    BelowMin,
    /// Stopped because it cannot beat the best config found.
    StoppedEarly,
    /// Probes are still to run.
    Incomplete,
}

/// One probe of a search: its load, whether it passed, and the value of
/// each bound's statistic (in the order of `bounds`; none when unmeasured).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbePoint {
    /// The probe's load.
    pub load: f64,
    /// Whether every bound held.
    pub passed: bool,
    /// Each bound's measured value, ms.
    pub values: Vec<Option<f64>>,
}

/// The config to deploy for one search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchPick {
    /// The search's name.
    pub search: String,
    /// Best server, when any config met the bounds at some load.
    pub server_id: Option<String>,
    /// Its boundary load.
    pub boundary: Option<f64>,
    /// Its output throughput per GPU at the boundary, with interval.
    pub per_gpu: Option<Throughput>,
    /// How sure: whether the runner-up's interval overlaps.
    pub confidence: String,
}

/// Search rows and picks from the stored cells.
pub fn build(
    searches: &[Search],
    servers: &[String],
    cells: &[&CellResult],
) -> (Vec<SearchRow>, Vec<SearchPick>) {
    let mut rows = Vec::new();
    let mut picks = Vec::new();
    for search in searches {
        let mut mine: Vec<SearchRow> = servers
            .iter()
            .filter_map(|server| row(search, server, cells))
            .collect();
        // The leader: the highest throughput per GPU at a finished boundary.
        let leader = mine
            .iter()
            .filter(|r| r.per_gpu.is_some())
            .max_by(|a, b| {
                let (x, y) = (a.per_gpu.map(|t| t.per_gpu), b.per_gpu.map(|t| t.per_gpu));
                x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal)
            })
            .cloned();
        // A search none of whose probes is stored did not run: nothing to say.
        if mine.is_empty() {
            continue;
        }
        if let Some(best) = &leader {
            stop_early(search, best, &mut mine, cells);
        }
        picks.push(pick(search.name(), leader.as_ref(), &mine));
        rows.extend(mine);
    }
    (rows, picks)
}

/// One server's row of one search, replayed from its stored probes (`None`:
/// nothing probed).
fn row(search: &Search, server: &str, cells: &[&CellResult]) -> Option<SearchRow> {
    let spec = &search.spec;
    let probe_cell = |k: u64| -> Option<&CellResult> {
        let w = search.probe(k);
        cells
            .iter()
            .copied()
            .find(|c| c.server_id == server && c.workload == w && c.status.is_measured())
    };
    let verdict = |c: &CellResult| {
        let facts = c.summary.as_ref().map(LevelFacts::from);
        probe_verdict(spec, c.status, facts.as_ref(), c.failure.as_ref())
    };
    let (probed, step) = search::replay(spec, |k| probe_cell(k).map(|c| verdict(c).passed()));
    if probed.is_empty() {
        return None;
    }
    let throughput = |load: f64| -> Option<Throughput> {
        let c = probe_cell(spec.index_of(load)?)?;
        let s: &LevelSummary = c.summary.as_ref()?;
        Some(Throughput::of(s, c.server.gpus(), INTERVAL_SEED))
    };
    let first_fail = probed.iter().find(|(_, &p)| !p).map(|(&k, _)| k);
    let missed = first_fail
        .and_then(probe_cell)
        .map(|c| verdict(c).missed)
        .unwrap_or_default();
    let (state, boundary, note) = match step {
        Step::Done(Outcome::Boundary { pass, .. }) => (SearchState::Boundary, Some(pass), None),
        Step::Done(Outcome::AboveMax { pass }) => (
            SearchState::AboveMax,
            Some(pass),
            Some(format!(
                "every bound holds up to the searched maximum, {pass}; the boundary is higher"
            )),
        ),
        Step::Done(Outcome::BelowMin { .. }) => (
            SearchState::BelowMin,
            None,
            Some("the lowest load already misses a bound".to_string()),
        ),
        Step::Probe(k) => {
            let best_pass = probed
                .iter()
                .filter(|(&j, &p)| p && first_fail.is_none_or(|f| j < f))
                .map(|(&j, _)| spec.level(j))
                .next_back();
            (
                SearchState::Incomplete,
                best_pass,
                Some(format!(
                    "next probe would be {} {}",
                    spec.axis,
                    spec.level(k)
                )),
            )
        }
    };
    Some(SearchRow {
        search: search.name(),
        server_id: server.to_string(),
        axis: spec.axis,
        bounds: spec.bounds.iter().map(|b| b.to_string()).collect(),
        state,
        per_gpu: if state == SearchState::Incomplete {
            None
        } else {
            boundary.and_then(throughput)
        },
        boundary,
        first_fail: first_fail.map(|k| spec.level(k)),
        missed,
        probes: probed.len(),
        note,
        probe_points: probed
            .iter()
            .map(|(&k, &passed)| ProbePoint {
                load: spec.level(k),
                passed,
                values: spec
                    .bounds
                    .iter()
                    .map(|b| {
                        let c = probe_cell(k)?;
                        b.value(&LevelFacts::from(c.summary.as_ref()?))
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// Marks the unfinished searches that cannot beat `best`: at their first
/// failing load they already give less per GPU than its interval's low end.
fn stop_early(search: &Search, best: &SearchRow, rows: &mut [SearchRow], cells: &[&CellResult]) {
    let spec = &search.spec;
    let best_t = best.per_gpu.expect("a leader has a throughput");
    for r in rows
        .iter_mut()
        .filter(|r| r.state == SearchState::Incomplete)
    {
        let fail_t = r.first_fail.and_then(|l| {
            let k = spec.index_of(l)?;
            let w = search.probe(k);
            let c = cells
                .iter()
                .find(|c| c.server_id == r.server_id && c.workload == w)?;
            Some(Throughput::of(
                c.summary.as_ref()?,
                c.server.gpus(),
                INTERVAL_SEED,
            ))
        });
        if let Some(t) = fail_t.filter(|t| cannot_win(t, &best_t)) {
            r.state = SearchState::StoppedEarly;
            r.note = Some(format!(
                "stopped early: cannot win — at {} {}, already past its boundary, at most {:.1} out tok/s per GPU; {} gives at least {:.1}",
                r.axis,
                r.first_fail.unwrap_or_default(),
                t.high,
                best.server_id,
                best_t.low
            ));
        }
    }
}

/// The config to deploy for one search: its leader, and how sure against the runner-up.
fn pick(search: String, leader: Option<&SearchRow>, rows: &[SearchRow]) -> SearchPick {
    let runner_up = leader.and_then(|best| {
        rows.iter()
            .filter(|r| r.server_id != best.server_id)
            .filter_map(|r| r.per_gpu.map(|t| (r.server_id.clone(), t)))
            .max_by(|a, b| {
                a.1.per_gpu
                    .partial_cmp(&b.1.per_gpu)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    });
    let confidence = match (leader, &runner_up) {
        (None, _) if rows.iter().any(|r| r.state == SearchState::Incomplete) => {
            "not finished: no config's boundary is known yet; run again to resume the search"
                .to_string()
        }
        (None, _) => "no config met every bound at any searched load".to_string(),
        (Some(_), None) => "the only config with a boundary".to_string(),
        (Some(b), Some((id, t))) => {
            let bt = b.per_gpu.expect("filtered");
            if t.high < bt.low {
                format!(
                    "clear: the runner-up {id}'s 95% interval ({:.1}–{:.1}) lies below",
                    t.low, t.high
                )
            } else {
                format!(
                    "close: the runner-up {id}'s 95% interval ({:.1}–{:.1}) overlaps",
                    t.low, t.high
                )
            }
        }
    };
    SearchPick {
        search,
        server_id: leader.map(|l| l.server_id.clone()),
        boundary: leader.and_then(|l| l.boundary),
        per_gpu: leader.and_then(|l| l.per_gpu),
        confidence,
    }
}

/// A search row's boundary in words, for tables.
pub fn boundary_text(r: &SearchRow) -> String {
    let text = boundary_words(r);
    // A traffic multiple answers the deployment question directly.
    match (r.axis == crate::search::Axis::TimeScale, r.boundary) {
        (true, Some(p)) if r.state != SearchState::Incomplete => {
            format!("{text}: sustains {p}× the trace's traffic")
        }
        _ => text,
    }
}

fn boundary_words(r: &SearchRow) -> String {
    match (r.state, r.boundary, r.first_fail) {
        (SearchState::Boundary, Some(p), Some(f)) => format!("{p} (bracket {p}–{f})"),
        (SearchState::AboveMax, Some(p), _) => format!("≥ {p}"),
        (SearchState::BelowMin, _, Some(f)) => format!("< {f}"),
        (_, Some(p), Some(f)) => format!("between {p} and {f}"),
        (_, Some(p), None) => format!("≥ {p}"),
        (_, None, Some(f)) => format!("< {f}"),
        _ => "-".to_string(),
    }
}

/// One chart per search and bound: the bound's statistic at every probe of
/// each config, the bound as a dashed line, and each config's boundary as a
/// marker on its own line.
pub fn charts(searches: &[Search], rows: &[SearchRow], color: &HashMap<&str, usize>) -> Vec<Chart> {
    let mut out = Vec::new();
    for search in searches {
        let name = search.name();
        let mine: Vec<&SearchRow> = rows.iter().filter(|r| r.search == name).collect();
        if mine.is_empty() {
            continue;
        }
        let (lo, hi) = mine
            .iter()
            .flat_map(|r| r.probe_points.iter().map(|p| p.load))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), l| {
                (a.min(l), b.max(l))
            });
        for (i, bound) in search.spec.bounds.iter().enumerate() {
            let mut series = Vec::new();
            let mut boundaries = Vec::new();
            for r in &mine {
                let points: Vec<(f64, f64)> = r
                    .probe_points
                    .iter()
                    .filter_map(|p| Some((p.load, p.values.get(i).copied().flatten()?)))
                    .collect();
                if let Some(b) = r.boundary {
                    if let Some(&pt) = points.iter().find(|(l, _)| *l == b) {
                        boundaries.push((pt, r.server_id.clone()));
                    }
                }
                series.push(Series {
                    name: r.server_id.clone(),
                    color: color.get(r.server_id.as_str()).copied().unwrap_or(0),
                    style: SeriesStyle::Line,
                    points,
                    labels: Vec::new(),
                });
            }
            series.push(Series {
                name: format!("bound {bound}"),
                color: BOUND_COLOR,
                style: SeriesStyle::Dashed,
                points: vec![(lo, bound.limit_ms), (hi, bound.limit_ms)],
                labels: Vec::new(),
            });
            series.push(Series {
                name: "boundary".to_string(),
                color: BOUND_COLOR,
                style: SeriesStyle::Markers,
                points: boundaries.iter().map(|(p, _)| *p).collect(),
                labels: boundaries.iter().map(|(_, s)| s.clone()).collect(),
            });
            out.push(Chart {
                section: ChartSection::Throughput,
                title: format!("search {name}: {} at each probe", bound.key()),
                x_label: match search.spec.axis {
                    crate::search::Axis::Concurrency => "concurrency".to_string(),
                    crate::search::Axis::Rate => "request rate (req/s)".to_string(),
                    crate::search::Axis::TimeScale => {
                        "traffic multiple (x the trace's own rate)".to_string()
                    }
                },
                y_label: format!("{} (ms)", bound.key()),
                kind: ChartKind::Line {
                    log_x: hi / lo.max(f64::MIN_POSITIVE) >= 8.0,
                },
                series,
            });
        }
    }
    out
}

/// Colour slot of bound lines and boundary markers: past the servers' slots.
const BOUND_COLOR: usize = 9;
