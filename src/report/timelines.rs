//! Timeline charts: what happened inside a cell over time, read from the
//! timeline stored with it (`telemetry::timeline`).
//!
//! Drawn for the cells the answer rests on (the cells of every SLO pick's
//! winner and runner-up) and for the cells a reader asks for
//! (`report --timeline SERVER/CELL`, or `--timeline all`); each cell gets a
//! chart of requests (the client's in flight, the engine's running and
//! waiting) and, where sampled, one of KV-cache use and GPU power.

use std::collections::BTreeSet;

use super::charts::{Chart, ChartKind, ChartSection, Series, SeriesStyle};
use super::recommend::SloPick;
use crate::store::CellResult;
use crate::telemetry::timeline::Timeline;

/// The most cells a report draws timelines for; more are left to
/// `--timeline` and the cells' own files.
pub const MAX_CELLS: usize = 24;

/// `SERVER/CELL` of a cell, as `--timeline` names it.
fn key(c: &CellResult) -> String {
    format!("{}/{}", c.server_id, c.cell_name)
}

/// The cells whose timelines a report draws, in report order: those of the
/// picks' winners and runners-up, then those asked for. Cells without a
/// timeline are left out.
pub fn chosen<'a>(
    cells: &[&'a CellResult],
    picks: &[SloPick],
    asked: &[String],
    family_of: impl Fn(&CellResult) -> String,
) -> Vec<&'a CellResult> {
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    let all = asked.iter().any(|a| a == "all");
    for c in cells {
        let by_pick = picks.iter().any(|p| {
            let load = c.workload.load.label_rounded();
            family_of(c) == p.family
                && std::iter::once(&p.best)
                    .chain(p.runner_up.as_ref())
                    .any(|r| r.server_id == c.server_id && r.load == load)
        });
        if by_pick || all || asked.contains(&key(c)) {
            wanted.insert(key(c));
        }
    }
    cells
        .iter()
        .copied()
        .filter(|c| wanted.contains(&key(c)))
        .filter(|c| timeline(c).is_some())
        .collect()
}

fn timeline(c: &CellResult) -> Option<&Timeline> {
    c.telemetry.as_ref()?.timeline.as_ref()
}

fn series(name: &str, color: usize, style: SeriesStyle, points: Vec<(f64, f64)>) -> Option<Series> {
    (!points.is_empty()).then(|| Series {
        name: name.to_string(),
        color,
        style,
        points,
        labels: Vec::new(),
    })
}

/// A cell's timeline charts: requests over time, and KV-cache use and
/// power where they were sampled.
pub fn cell_charts(c: &CellResult) -> Vec<Chart> {
    let Some(t) = timeline(c) else {
        return Vec::new();
    };
    let client = |v: &[u64]| -> Vec<(f64, f64)> {
        t.t_s.iter().zip(v).map(|(t, n)| (*t, *n as f64)).collect()
    };
    let requests: Vec<Series> = [
        series(
            "in flight (client)",
            0,
            SeriesStyle::Line,
            client(&t.in_flight),
        ),
        series(
            "running (engine)",
            1,
            SeriesStyle::Line,
            t.series(&t.running),
        ),
        series(
            "waiting (engine)",
            2,
            SeriesStyle::Dashed,
            t.series(&t.waiting),
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let x_label = "time from the first measured request (s)".to_string();
    let mut out = vec![Chart {
        section: ChartSection::Timeline,
        title: format!("Inside {}: requests over time", key(c)),
        x_label: x_label.clone(),
        y_label: "requests".into(),
        kind: ChartKind::Line { log_x: false },
        series: requests,
    }];
    let kv: Vec<(f64, f64)> = t
        .series(&t.kv_usage)
        .into_iter()
        .map(|(x, y)| (x, y * 100.0))
        .collect();
    let resources: Vec<Series> = [
        series("KV-cache use (%)", 3, SeriesStyle::Line, kv),
        series("GPU power (W)", 4, SeriesStyle::Line, t.series(&t.power_w)),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !resources.is_empty() {
        out.push(Chart {
            section: ChartSection::Timeline,
            title: format!("Inside {}: KV-cache use and GPU power", key(c)),
            x_label,
            y_label: "KV-cache use (%) · GPU power (W)".into(),
            kind: ChartKind::Line { log_x: false },
            series: resources,
        });
    }
    out
}

/// The timeline charts of the chosen cells, at most [`MAX_CELLS`] of
/// them, with a note when some were left out.
pub fn charts(chosen: &[&CellResult], notes: &mut Vec<String>) -> Vec<Chart> {
    if chosen.len() > MAX_CELLS {
        notes.push(format!(
            "{} cells have timelines to draw; the report draws the first {MAX_CELLS} (each cell's file holds its own, under telemetry.timeline)",
            chosen.len()
        ));
    }
    chosen
        .iter()
        .take(MAX_CELLS)
        .flat_map(|c| cell_charts(c))
        .collect()
}
