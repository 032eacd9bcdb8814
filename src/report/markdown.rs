//! `report.md`: the page to paste into a pull request or a wiki, with the
//! same tables as the terminal plus the speedups per prompt kind.

use super::model::Report;
use super::table::{
    answer_lines, answers_rule, kind_cells, point_cells, prefix_cache_rule, recommendation_lines,
    KIND_HEADER, POINT_HEADER,
};
use super::Exporter;

/// Renders the report as GitHub-flavoured Markdown.
pub struct MarkdownExporter;

/// Escape a table cell: pipes would split it.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
    for r in rows {
        out.push_str(&format!(
            "| {} |\n",
            r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
        ));
    }
    out
}

impl Exporter for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, r: &Report) -> Vec<u8> {
        let mut out = format!("# Campaign `{}`\n\n", r.campaign);
        if let Some(d) = &r.description {
            out.push_str(&format!("{d}\n\n"));
        }
        match &r.baseline {
            Some(b) => out.push_str(&format!(
                "Speedups are over baseline `{b}` (from {}) at the same workload point: ratio of per-request decode speed p50 and of output throughput.\n\n",
                r.baseline_source
            )),
            None => out.push_str(&format!("Baseline: {}.\n\n", r.baseline_source)),
        }
        if let Some(t) = &r.measured_until {
            out.push_str(&format!("Last cell finished at {t}. Throughput per GPU divides by the GPUs each server holds (TP × DP × PP).\n\n"));
        }
        if !r.engine_builds.is_empty() {
            let b: Vec<String> = r
                .engine_builds
                .iter()
                .map(|(v, n)| format!("`{v}` ({n} cells)"))
                .collect();
            out.push_str(&format!("Engine build: {}.\n\n", b.join(", ")));
        }
        out.push_str("## Recommendation\n\n");
        for l in recommendation_lines(r) {
            out.push_str(&format!("- {l}\n"));
        }
        if !r.answers.is_empty() {
            out.push_str(&format!("\n## Answers\n\n{}\n\n", answers_rule()));
            for l in answer_lines(r) {
                out.push_str(&format!("- {l}\n"));
            }
        }
        if !r.trace_windows.is_empty() {
            out.push_str("\n## Over trace time\n\nPer replay cell, its worst window of trace time (fewest requests within the SLOs, then the highest TTFT p99); every window is in `report.json` (`trace_windows`) and drawn in the HTML report.\n\n");
            for l in super::trace_time::worst_lines(&r.trace_windows) {
                out.push_str(&format!("- {l}\n"));
            }
        }
        if !r.build_steps.is_empty() {
            out.push_str(&format!("\n## Builds\n\n{}\n\n", super::builds::rule()));
            for s in &r.build_steps {
                out.push_str(&format!("- {}\n", s.text()));
            }
        }
        if !r.prefix_cache.is_empty() {
            out.push_str(&format!("\n## Prefix cache\n\n{}\n\n", prefix_cache_rule()));
            for row in &r.prefix_cache {
                out.push_str(&format!("- {}\n", row.text()));
            }
        }
        out.push_str("\n## Results per server and workload point\n\n");
        out.push_str(
            "Values are means over repetitions, with (min–max) when there are several.\n\n",
        );
        let rows: Vec<Vec<String>> = r.points.iter().map(point_cells).collect();
        out.push_str(&md_table(&POINT_HEADER, &rows));
        let kinds: Vec<Vec<String>> = r.kinds.iter().map(kind_cells).collect();
        if !kinds.is_empty() {
            out.push_str("\n## Decode speed per prompt kind\n\n");
            out.push_str(&md_table(&KIND_HEADER, &kinds));
        }
        out.push_str("\n## Failed, skipped and suspicious cells\n\n");
        if r.problem_groups.is_empty() {
            out.push_str("None.\n");
        } else {
            let rows: Vec<Vec<String>> = r
                .problem_groups
                .iter()
                .map(|g| {
                    let mut ev = format!("{}: {}", g.cells[0], g.example);
                    if let Some(l) = &g.log_excerpt {
                        ev.push_str(&format!(" — log: {}", l.trim()));
                    }
                    vec![
                        g.server_id.clone(),
                        g.status.as_str().to_string(),
                        g.class.map_or("-", |c| c.as_str()).to_string(),
                        super::table::cells_text(g),
                        ev,
                    ]
                })
                .collect();
            out.push_str(&md_table(
                &["server", "status", "class", "cells", "example"],
                &rows,
            ));
        }
        if !r.notes.is_empty() || !r.unreadable.is_empty() {
            out.push_str("\n## Notes\n\n");
            for n in &r.notes {
                out.push_str(&format!("- {n}\n"));
            }
            for (f, e) in &r.unreadable {
                out.push_str(&format!("- unreadable result `{f}`: {e}\n"));
            }
        }
        out.into_bytes()
    }
}
