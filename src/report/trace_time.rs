//! Trace replays over trace time: per window of the trace, the requests
//! sent, their latency, the share that met the workload's SLOs, and the
//! prefix reuse predicted and served, so a person sees at a glance when
//! in the trace a config falls behind.
//!
//! A request's trace time is its scheduled send time times the replay's
//! `time_scale` (idle gaps shortened by `max_idle_gap` shift later requests
//! earlier by what was cut). Windows are the shortest of 1 s … 1 day that
//! make at most 24 over the longest replay of the workload, the same for
//! every server, so their windows line up.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::charts::{Chart, ChartKind, ChartSection, Series, SeriesStyle};
use crate::client::record::RequestRecord;
use crate::load::schedule::LoadShape;
use crate::metrics::goodput::meets;
use crate::metrics::level::PredictedReuse;
use crate::metrics::stats::Stats;
use crate::metrics::trace_shape::default_window_s;
use crate::store::CellResult;

/// One window of one replay cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceWindow {
    /// Server config id.
    pub server_id: String,
    /// Cell name.
    pub cell_name: String,
    /// Trace time at which the window opens, s.
    pub start_s: f64,
    /// Its length in trace time, s.
    pub length_s: f64,
    /// Requests the trace sends in it.
    pub requests: usize,
    /// Of those, failed.
    pub failed: usize,
    /// TTFT of its completed requests, p50 and p99, ms.
    pub ttft_p50_ms: Option<f64>,
    /// See `ttft_p50_ms`.
    pub ttft_p99_ms: Option<f64>,
    /// End-to-end latency from the scheduled send, p99, ms.
    pub e2e_p99_ms: Option<f64>,
    /// Share of its requests (failed ones included) that met every SLO of
    /// the workload; `None` when it declares none.
    pub slo_attainment: Option<f64>,
    /// Predicted prefix-cache hit rate of its completed requests.
    pub predicted_hit_rate: Option<f64>,
    /// Hit rate the server reported for them.
    pub served_hit_rate: Option<f64>,
}

/// The windows of every usable replay cell, in cell then time order.
pub fn windows(cells: &[&CellResult]) -> Vec<TraceWindow> {
    let mut window_of: HashMap<&str, f64> = HashMap::new();
    for c in cells {
        if let (Some(scale), Some(s)) = (time_scale(c), &c.summary) {
            let span = s
                .requests
                .iter()
                .map(|r| r.scheduled_ms / 1000.0 * scale)
                .fold(0.0, f64::max);
            let w = window_of.entry(c.workload.workload.as_str()).or_insert(0.0);
            *w = w.max(span);
        }
    }
    let mut out = Vec::new();
    for c in cells.iter().filter(|c| c.status.is_usable()) {
        let (Some(scale), Some(s)) = (time_scale(c), &c.summary) else {
            continue;
        };
        let window = default_window_s(window_of[c.workload.workload.as_str()]);
        let mut by_window: BTreeMap<u64, Vec<&RequestRecord>> = BTreeMap::new();
        for r in &s.requests {
            let t = r.scheduled_ms / 1000.0 * scale;
            by_window
                .entry((t / window).floor() as u64)
                .or_default()
                .push(r);
        }
        for (k, reqs) in by_window {
            out.push(window_row(c, k as f64 * window, window, &reqs));
        }
    }
    out
}

/// The traffic multiple of a replay cell; `None` for other loads.
fn time_scale(c: &CellResult) -> Option<f64> {
    match c.workload.load {
        LoadShape::Replay { time_scale, .. } => Some(time_scale),
        _ => None,
    }
}

fn window_row(c: &CellResult, start_s: f64, length_s: f64, reqs: &[&RequestRecord]) -> TraceWindow {
    let ok: Vec<&&RequestRecord> = reqs.iter().filter(|r| r.is_ok()).collect();
    let stats = |f: &dyn Fn(&RequestRecord) -> Option<f64>| {
        Stats::from_values(ok.iter().filter_map(|r| f(r)).collect())
    };
    let ttft = stats(&|r| r.ttft_ms);
    let e2e = stats(&|r| r.e2e_ms.map(|e| e + r.sent_ms - r.scheduled_ms));
    let slos = &c.workload.slos;
    let slo_attainment = (!slos.is_empty()).then(|| {
        reqs.iter()
            .filter(|r| slos.iter().all(|s| meets(r, s)))
            .count() as f64
            / reqs.len() as f64
    });
    // The level's own tally over the window's requests: predicted, and
    // served where the server reported it for every one.
    let reuse = PredictedReuse::of(reqs.iter().copied(), 1);
    TraceWindow {
        server_id: c.server_id.clone(),
        cell_name: c.cell_name.clone(),
        start_s,
        length_s,
        requests: reqs.len(),
        failed: reqs.len() - ok.len(),
        ttft_p50_ms: ttft.map(|s| s.p50),
        ttft_p99_ms: ttft.map(|s| s.p99),
        e2e_p99_ms: e2e.map(|s| s.p99),
        slo_attainment,
        predicted_hit_rate: reuse.map(|p| p.hit_rate),
        served_hit_rate: reuse.and_then(|p| {
            p.reported_cached_tokens
                .map(|t| t as f64 / p.prompt_tokens as f64)
        }),
    }
}

/// Per replayed workload point, TTFT p99 over trace time with a line per
/// server, and the share of requests within the SLOs where there are any.
pub fn charts(rows: &[TraceWindow], color: &HashMap<&str, usize>) -> Vec<Chart> {
    let mut by_cell: BTreeMap<&str, Vec<&TraceWindow>> = BTreeMap::new();
    for r in rows {
        by_cell.entry(r.cell_name.as_str()).or_default().push(r);
    }
    let mut out = Vec::new();
    for (cell, windows) in by_cell {
        let series = |f: &dyn Fn(&TraceWindow) -> Option<f64>| -> Vec<Series> {
            let mut by_server: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
            for w in &windows {
                if let Some(y) = f(w) {
                    by_server
                        .entry(w.server_id.as_str())
                        .or_default()
                        .push((w.start_s + w.length_s / 2.0, y));
                }
            }
            by_server
                .into_iter()
                .map(|(server, points)| Series {
                    name: server.to_string(),
                    color: color.get(server).copied().unwrap_or(0),
                    style: SeriesStyle::Line,
                    points,
                    labels: Vec::new(),
                })
                .collect()
        };
        let chart = |title: String, y_label: &str, series: Vec<Series>| Chart {
            section: ChartSection::Trace,
            title,
            x_label: "trace time (s), window middle".to_string(),
            y_label: y_label.to_string(),
            kind: ChartKind::Line { log_x: false },
            series,
        };
        out.push(chart(
            format!("{cell}: TTFT p99 over trace time"),
            "TTFT p99 (ms)",
            series(&|w| w.ttft_p99_ms),
        ));
        let attained = series(&|w| w.slo_attainment.map(|a| a * 100.0));
        if !attained.is_empty() {
            out.push(chart(
                format!("{cell}: requests within the SLOs over trace time"),
                "within every SLO (%)",
                attained,
            ));
        }
    }
    out
}

/// The worst window of each replay cell, in words: where it falls behind.
pub fn worst_lines(rows: &[TraceWindow]) -> Vec<String> {
    let mut by_cell: BTreeMap<(&str, &str), Vec<&TraceWindow>> = BTreeMap::new();
    for r in rows {
        by_cell
            .entry((r.server_id.as_str(), r.cell_name.as_str()))
            .or_default()
            .push(r);
    }
    by_cell
        .into_iter()
        .filter_map(|((server, cell), ws)| {
            let key = |w: &&TraceWindow| {
                (
                    w.slo_attainment.map_or(0.0, |a| -a),
                    w.ttft_p99_ms.unwrap_or(f64::INFINITY),
                )
            };
            let worst = ws.iter().copied().max_by(|a, b| {
                key(a)
                    .partial_cmp(&key(b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })?;
            let mut line = format!(
                "{server} {cell}: {} windows of {} s; worst at {}–{} s of trace: {} requests",
                ws.len(),
                worst.length_s,
                worst.start_s,
                worst.start_s + worst.length_s,
                worst.requests
            );
            if let Some(t) = worst.ttft_p99_ms {
                line += &format!(", TTFT p99 {t:.0} ms");
            }
            if let Some(a) = worst.slo_attainment {
                line += &format!(", {:.0} % within the SLOs", a * 100.0);
            }
            if worst.failed > 0 {
                line += &format!(", {} failed", worst.failed);
            }
            Some(line)
        })
        .collect()
}
