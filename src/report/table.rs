//! The terminal table: one line per (server, workload point) so the end of a
//! campaign answers "which config wins, by how much, where it breaks"
//! without opening a file.

use super::model::{KindRow, PointRow, Report, Spread};
use super::recommend::Excluded;
use super::Exporter;
use crate::util::table;

/// Renders the point table, the recommendation and the problem list as text.
pub struct TableExporter;

/// A spread as `mean` or `mean (min–max)` when repetitions differ.
pub fn spread(s: Option<Spread>, digits: usize) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n > 1 => format!(
            "{:.digits$} ({:.digits$}–{:.digits$})",
            s.mean, s.min, s.max
        ),
        Some(s) => format!("{:.digits$}", s.mean),
    }
}

/// A speedup spread as `1.52x` or `1.52x (1.48–1.55)`.
pub fn speedup(s: Option<Spread>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n > 1 => format!("{:.2}x ({:.2}–{:.2})", s.mean, s.min, s.max),
        Some(s) => format!("{:.2}x", s.mean),
    }
}

/// Column headers of the point table (shared with Markdown).
pub const POINT_HEADER: [&str; 18] = [
    "server",
    "point",
    "status",
    "req ok/failed",
    "out tok/s",
    "steady tok/s",
    "out tok/s/GPU",
    "decode tok/s p50",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TPOT p50 ms",
    "ITL/tok p50 ms",
    "accept len",
    "J/tok",
    "$/Mtok",
    "speedup decode",
    "speedup thru",
    "GPUs",
];

/// One point as table cells (shared with Markdown).
pub fn point_cells(p: &PointRow) -> Vec<String> {
    vec![
        p.server_id.clone(),
        p.point.clone(),
        match (&p.under_loaded, p.in_flight) {
            (Some(_), Some(f)) => format!("{} (under-loaded: {:.1} in flight)", p.status, f.mean),
            (Some(_), None) => format!("{} (under-loaded)", p.status),
            _ if p.over_saturated.is_some() => format!("{} (over-saturated)", p.status),
            _ => p.status.to_string(),
        },
        if p.requests_ok + p.requests_failed == 0 {
            // Nothing was sent: not run, skipped, or failed before any request.
            "-".to_string()
        } else {
            format!("{}/{}", p.requests_ok, p.requests_failed)
        },
        spread(p.output_tok_s, 1),
        spread(p.steady_output_tok_s, 1),
        spread(p.output_tok_s_per_gpu, 1),
        spread(p.decode_tok_s_p50, 1),
        spread(p.ttft_p50_ms, 1),
        spread(p.ttft_p99_ms, 1),
        spread(p.tpot_p50_ms, 2),
        spread(p.itl_per_token_p50_ms, 2),
        spread(p.acceptance_length, 2),
        spread(p.joules_per_token, 3),
        spread(p.usd_per_mtok, 3),
        speedup(p.speedup_decode),
        speedup(p.speedup_output),
        p.gpus.to_string(),
    ]
}

/// Column headers of the per-prompt-kind table (Markdown and HTML).
pub const KIND_HEADER: [&str; 9] = [
    "server",
    "workload",
    "kind",
    "output len",
    "load",
    "requests",
    "decode tok/s p50",
    "speedup decode",
    "vs unconstrained",
];

/// One prompt kind as table cells (Markdown and HTML).
pub fn kind_cells(k: &KindRow) -> Vec<String> {
    vec![
        k.server_id.clone(),
        k.workload.clone(),
        k.kind.clone(),
        k.output_len.to_string(),
        k.load.clone(),
        k.requests.to_string(),
        format!("{:.1}", k.decode_tok_s_p50),
        k.speedup_decode
            .map(|s| format!("{s:.2}x"))
            .unwrap_or_else(|| "-".into()),
        match (k.constrained_change(), k.unconstrained_tok_s_p50) {
            (Some(c), Some(u)) => format!("{:+.1} % (unconstrained {u:.1})", 100.0 * c),
            _ => "-".into(),
        },
    ]
}

/// A group's cells: its count, and the names when few.
pub(super) fn cells_text(g: &super::data::ProblemGroup) -> String {
    const SHOWN: usize = 4;
    if g.count <= SHOWN {
        g.cells.join(", ")
    } else {
        format!(
            "{}: {}, … and {} more",
            g.count,
            g.cells[..SHOWN].join(", "),
            g.count - SHOWN
        )
    }
}

/// The concurrency a ranked load reached, when measured: a pick names what happened.
fn reached(r: &super::recommend::Ranked) -> String {
    r.in_flight
        .map(|f| format!(" ({f:.1} in flight)"))
        .unwrap_or_default()
}

/// The recommendation as sentences (shared with Markdown and HTML).
pub fn recommendation_lines(r: &Report) -> Vec<String> {
    let mut out = search_lines(r);
    for p in &r.slo_picks {
        let runner = match &p.runner_up {
            Some(u) => format!(
                "; runner-up {} at {}{}: {:.3} [{:.3}, {:.3}]",
                u.server_id,
                u.load,
                reached(u),
                u.value,
                u.low,
                u.high
            ),
            None => String::new(),
        };
        out.push(format!(
            "SLO {} on {}: {} at {}{} — {:.3} good req/s per GPU [{:.3}, {:.3}], {:.0}% of requests within SLO (at least {:.0}% asked){runner}; {} ({}, {} candidates)",
            p.slo,
            p.family,
            p.best.server_id,
            p.best.load,
            reached(&p.best),
            p.best.value,
            p.best.low,
            p.best.high,
            p.best_share * 100.0,
            p.attainment * 100.0,
            p.confidence,
            p.interval,
            p.candidates
        ));
        append_caveats(&mut out, p.caveat.as_deref(), &p.excluded);
    }
    for m in &r.slo_misses {
        out.push(format!(
            "SLO {} on {}: no config kept {:.0}% of its requests within it; closest {} at {}{} with {:.0}%",
            m.slo,
            m.family,
            m.attainment * 100.0,
            m.closest.server_id,
            m.closest.load,
            reached(&m.closest),
            m.closest_share * 100.0
        ));
    }
    for p in &r.stream_picks {
        let runner = match &p.runner_up {
            Some(u) => format!(
                "; runner-up {}: {:.1} [{:.1}, {:.1}]",
                u.server_id, u.value, u.low, u.high
            ),
            None => String::new(),
        };
        out.push(format!(
            "single stream, {}: {} — {:.1} tok/s decode p50 [{:.1}, {:.1}] over {} requests{runner}; {}",
            p.kind, p.best.server_id, p.best.value, p.best.low, p.best.high, p.requests, p.confidence
        ));
        append_caveats(&mut out, p.caveat.as_deref(), &p.excluded);
    }
    if out.is_empty() {
        out.push(
            "no declared SLO with goodput and no concurrency-1 measurement: nothing to recommend"
                .into(),
        );
    }
    out.extend(not_measured_lines(r));
    out
}

/// The rule by which answers are judged, in one sentence.
pub fn answers_rule() -> String {
    format!(
        "Requests are greedy, so every server should give the baseline's answers to the same prompts: a cell mismatches when at least {:.0}% of its answers, and at least {}, differ from the baseline's within their first {} words (late or rare differences are numeric drift, not an alarm); a cell is degenerate when a quarter of its answers loop over a few words or are mostly replacement characters. {}",
        100.0 * super::agreement::MISMATCH_MIN_SHARE,
        super::agreement::MISMATCH_MIN_EARLY,
        super::agreement::EARLY_WORDS,
        super::checks::rule()
    )
}

/// How predicted and measured prefix-cache reuse are compared, in one sentence.
pub fn prefix_cache_rule() -> String {
    format!(
        "Trace replays: the prefix-cache hit rate the trace's block ids predict for an infinite cache (a block is reused when an earlier prompt held the same ids up to it; cut to the engine's cache block, the last prompt token always computed) beside what the engine served, per request where it reports it, else from its counters; they agree within {} points, and a larger gap is explained.",
        super::prefix_cache::AGREEMENT_POINTS
    )
}

/// One line per server on its answers; none without a baseline.
pub fn answer_lines(r: &Report) -> Vec<String> {
    r.answers.iter().map(|a| a.text()).collect()
}

impl Exporter for TableExporter {
    fn file_name(&self) -> &'static str {
        "report.txt"
    }

    fn render(&self, r: &Report) -> Vec<u8> {
        let mut out = format!("campaign {}", r.campaign);
        match &r.baseline {
            Some(b) => out.push_str(&format!("; baseline `{b}` (from {})\n", r.baseline_source)),
            None => out.push_str(&format!("; baseline {}\n", r.baseline_source)),
        }
        let rows: Vec<Vec<String>> = r.points.iter().map(point_cells).collect();
        out.push_str(&table::render(&POINT_HEADER, &rows));
        out.push_str("\nRecommendation\n");
        for l in recommendation_lines(r) {
            out.push_str(&format!("  {l}\n"));
        }
        if !r.answers.is_empty() {
            out.push_str("\nAnswers\n");
            for l in answer_lines(r) {
                out.push_str(&format!("  {l}\n"));
            }
        }
        if !r.trace_windows.is_empty() {
            out.push_str("\nOver trace time\n");
            for l in super::trace_time::worst_lines(&r.trace_windows) {
                out.push_str(&format!("  {l}\n"));
            }
        }
        if !r.build_steps.is_empty() {
            out.push_str("\nBuilds\n");
            for s in &r.build_steps {
                out.push_str(&format!("  {}\n", s.text()));
            }
        }
        if !r.prefix_cache.is_empty() {
            out.push_str("\nPrefix cache\n");
            for row in &r.prefix_cache {
                out.push_str(&format!("  {}\n", row.text()));
            }
        }
        if !r.problem_groups.is_empty() {
            out.push_str("\nFailed, skipped and suspicious cells\n");
            let rows: Vec<Vec<String>> = r
                .problem_groups
                .iter()
                .map(|g| {
                    vec![
                        g.server_id.clone(),
                        g.status.as_str().to_string(),
                        g.class.map_or("-", |c| c.as_str()).to_string(),
                        one_line(&cells_text(g), 60),
                        one_line(&format!("{}: {}", g.cells[0], g.example), 100),
                    ]
                })
                .collect();
            out.push_str(&table::render(
                &["server", "status", "class", "cells", "example"],
                &rows,
            ));
        }
        for (f, e) in &r.unreadable {
            out.push_str(&format!("unreadable result {f}: {e}\n"));
        }
        out.into_bytes()
    }
}

/// First line of `s`, cut to `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.chars().count() > max {
        format!("{}…", first.chars().take(max).collect::<String>())
    } else {
        first.to_string()
    }
}

/// Cells named one by one before the rest are counted.
const NOT_MEASURED_NAMED: usize = 8;

/// The cells a probe left unmeasured, each with why it could not change
/// the answer (the first few, then how many more).
pub fn not_measured_lines(r: &Report) -> Vec<String> {
    let n = r.not_measured.len();
    if n == 0 {
        return Vec::new();
    }
    let mut out = vec![format!(
        "not measured in full (goal = \"answer\"): {n} cells whose probes could not place; a run with --goal grid measures them"
    )];
    for l in r.not_measured.iter().take(NOT_MEASURED_NAMED) {
        out.push(format!("  {l}"));
    }
    if n > NOT_MEASURED_NAMED {
        out.push(format!(
            "  and {} more (report.json lists every one)",
            n - NOT_MEASURED_NAMED
        ));
    }
    out
}

/// The winner's own problems and the configs left out, after a pick's line.
fn append_caveats(out: &mut [String], caveat: Option<&str>, excluded: &[Excluded]) {
    let Some(line) = out.last_mut() else { return };
    if let Some(c) = caveat {
        line.push_str(&format!(" — {c}"));
    }
    if !excluded.is_empty() {
        let who: Vec<String> = excluded
            .iter()
            .map(|e| {
                let mut why = Vec::new();
                if !e.crashed_in.is_empty() {
                    why.push(format!("crashed in {}", e.crashed_in.join(", ")));
                }
                if !e.wrong_answers_in.is_empty() {
                    why.push(format!(
                        "wrong answers in {}",
                        e.wrong_answers_in.join(", ")
                    ));
                }
                format!("`{}` ({})", e.server_id, why.join("; "))
            })
            .collect();
        line.push_str(&format!(" — not ranked: {}", who.join(", ")));
        if excluded.iter().any(|e| !e.crashed_in.is_empty()) {
            line.push_str("; `servebench report --include-crashed` ranks the crashed ones");
        }
    }
}

/// The SLO searches as sentences: the pick, then each config's boundary.
fn search_lines(r: &Report) -> Vec<String> {
    let interval = |t: &crate::search::Throughput| {
        format!(
            "{:.1} out tok/s per GPU [{:.1}, {:.1}]",
            t.per_gpu, t.low, t.high
        )
    };
    let mut out = Vec::new();
    for p in &r.search_picks {
        let rows: Vec<&super::search::SearchRow> =
            r.searches.iter().filter(|s| s.search == p.search).collect();
        let Some(first) = rows.first() else { continue };
        let head = format!(
            "SLO search {} ({}; over {})",
            p.search,
            first.bounds.join(", "),
            first.axis
        );
        match (&p.server_id, &p.per_gpu) {
            (Some(id), Some(t)) => out.push(format!(
                "{head}: deploy {id} — highest load within the bounds {}, {} (95% bootstrap interval over requests); {}",
                p.boundary.map(|b| b.to_string()).unwrap_or_default(),
                interval(t),
                p.confidence
            )),
            _ => out.push(format!("{head}: {}", p.confidence)),
        }
        for row in rows {
            let mut line = format!(
                "  {}: {} {}, {} probes",
                row.server_id,
                row.axis,
                super::search::boundary_text(row),
                row.probes
            );
            if let Some(t) = &row.per_gpu {
                line.push_str(&format!(", {}", interval(t)));
            }
            if !row.missed.is_empty() {
                line.push_str(&format!(
                    "; at {} missed {}",
                    row.first_fail.unwrap_or_default(),
                    row.missed.join(", ")
                ));
            }
            if let Some(n) = &row.note {
                line.push_str(&format!("; {n}"));
            }
            out.push(line);
        }
    }
    out
}
