//! `report.html`: one self-contained page to read and share — inline CSS,
//! inline SVG charts, no script and no external URL, so it opens offline,
//! from a mail attachment or a CI artifact alike.

use std::fmt::Write;

use super::charts::{Chart, ChartSection};
use super::model::Report;
use super::svg::{self, esc};
use super::table::{kind_cells, point_cells, recommendation_lines, KIND_HEADER, POINT_HEADER};
use super::Exporter;
use crate::failure::FailureClass;
use crate::store::CellStatus;

/// Renders the report as a standalone HTML page.
pub struct HtmlExporter;

const CSS: &str = "
body{font-family:'DejaVu Sans',Arial,Helvetica,sans-serif;margin:24px auto;max-width:1240px;color:#222;padding:0 16px}
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;margin-top:34px;border-bottom:1px solid #ddd;padding-bottom:4px}
p.meta{color:#555;margin-top:0}
table{border-collapse:collapse;font-size:12px;margin:8px 0;width:100%}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}tr.bad td{background:#fff1f0}li.bad{color:#a8071a}tr.warn td{background:#fffbe6}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
pre{white-space:pre-wrap;font-size:11px;margin:4px 0 0;color:#444}
.charts{display:flex;flex-wrap:wrap;gap:14px}
figure.chart{margin:0;border:1px solid #e5e5e5;border-radius:4px;padding:4px;background:#fff}
svg.chart{display:block;max-width:100%;height:auto}
svg text{font-family:'DejaVu Sans',Arial,Helvetica,sans-serif;fill:#222}
svg .title{font-size:14px;font-weight:bold}svg .axis{font-size:12px}svg .tick,svg .pt{font-size:10px}
svg .legend{font-size:10px}svg .empty{font-size:13px;fill:#888}
ul.rec li{margin-bottom:6px}.note{color:#666;font-style:italic}
";

const SECTIONS: [(ChartSection, &str, &str); 8] = [
    (ChartSection::Throughput, "Throughput and latency vs. concurrency", "Output throughput and TTFT p50 (solid) / p99 (dashed) per server config; means over repetitions."),
    (ChartSection::PerGpu, "Throughput per GPU vs. speed per user", "One point per (server config, concurrency); throughput divided by the GPUs the server holds (TP × DP × PP). Circled points form the Pareto frontier: no other point is both faster per user and more productive per GPU."),
    (ChartSection::Speedup, "Speedup over the baseline", "Ratio of median per-request decode speed to the baseline's at the same workload point, per prompt kind and output length."),
    (ChartSection::Budget, "Speculative budget sweep", "Output throughput and acceptance length against the draft budget (num_draft_tokens; DDTree: the tree size), one line per method and TP, per workload family at its lowest and highest load."),
    (ChartSection::Context, "Context length", "TTFT and decode speed against the prompt length."),
    (ChartSection::Agentic, "Agentic sessions", "Per-turn latency of multi-turn sessions: each turn resends the whole conversation."),
    (ChartSection::Trace, "Trace replays over trace time", "Per window of the trace (a request's scheduled send time times the traffic multiple), TTFT p99 of the requests sent in it and the share of them within every SLO, one line per server config."),
    (ChartSection::Timeline, "Inside the cells the answer rests on", "Each cell's timeline, sampled on one clock from the first measured request: the client's requests in flight, the engine's running and waiting requests (its /metrics), its KV-cache use and the GPUs' power. `report --timeline SERVER/CELL` (or `all`) draws others."),
];

fn is_number(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_digit())
}

fn table(header: &[&str], rows: &[(Vec<String>, &str)]) -> String {
    let mut s = String::from("<table><thead><tr>");
    for h in header {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for (r, class) in rows {
        if class.is_empty() {
            s.push_str("<tr>");
        } else {
            let _ = write!(s, r#"<tr class="{class}">"#);
        }
        for c in r {
            if is_number(c) {
                let _ = write!(s, r#"<td class="num">{}</td>"#, esc(c));
            } else {
                let _ = write!(s, "<td>{}</td>", esc(c));
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// The word that marks a section's notes (see `model::charts`).
fn note_key(section: ChartSection) -> &'static str {
    match section {
        ChartSection::Throughput | ChartSection::PerGpu => "closed-loop",
        ChartSection::Speedup => "speedup",
        ChartSection::Budget => "budget",
        ChartSection::Context => "context-length",
        ChartSection::Agentic => "agentic",
        ChartSection::Trace => "trace time",
        ChartSection::Timeline => "timeline",
    }
}

fn figure(c: &Chart) -> String {
    format!(r#"<figure class="chart">{}</figure>"#, svg::render(c))
}

impl Exporter for HtmlExporter {
    fn file_name(&self) -> &'static str {
        "report.html"
    }

    fn render(&self, r: &Report) -> Vec<u8> {
        let mut s = String::new();
        head(&mut s, r);
        recommendation(&mut s, r);
        chart_sections(&mut s, r);
        answers_and_cache(&mut s, r);
        problems(&mut s, r);
        results(&mut s, r);
        notes_and_definitions(&mut s, r);
        s.into_bytes()
    }
}

/// The page head, the title and the campaign's facts.
fn head(s: &mut String, r: &Report) {
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>servebench report: {}</title><style>{CSS}</style></head><body>",
        esc(&r.campaign)
    );
    let _ = write!(s, "<h1>Campaign <code>{}</code></h1>", esc(&r.campaign));
    let mut meta = Vec::new();
    if let Some(d) = &r.description {
        meta.push(esc(d));
    }
    meta.push(match &r.baseline {
        Some(b) => format!(
            "baseline <code>{}</code> (from {})",
            esc(b),
            esc(&r.baseline_source)
        ),
        None => format!("baseline: {}", esc(&r.baseline_source)),
    });
    let usable = r.cells.iter().filter(|c| c.usable).count();
    meta.push(format!(
        "{} cells, {} usable, {} failed/skipped/suspicious/partial",
        r.cells.len(),
        usable,
        r.problems.len()
    ));
    if let Some(t) = &r.measured_until {
        meta.push(format!("last cell finished {}", esc(t)));
    }
    for (v, n) in &r.engine_builds {
        meta.push(format!("engine build <code>{}</code> ({n} cells)", esc(v)));
    }
    let _ = write!(s, r#"<p class="meta">{}</p>"#, meta.join(" · "));
}

/// The recommendation, one line per question.
fn recommendation(s: &mut String, r: &Report) {
    s.push_str(r#"<h2 id="recommendation">Recommendation</h2><ul class="rec">"#);
    for l in recommendation_lines(r) {
        let _ = write!(s, "<li>{}</li>", esc(&l));
    }
    s.push_str("</ul><p class=\"note\">Goodput per GPU: requests per second meeting every bound of the SLO, divided by the server's GPUs. \"too close to call\" means the winner's interval overlaps the runner-up's.</p>");
}

/// The chart sections, or why each has no chart.
fn chart_sections(s: &mut String, r: &Report) {
    for (key, title, blurb) in SECTIONS {
        // Most campaigns replay no trace: no empty section for them.
        let optional = matches!(key, ChartSection::Trace | ChartSection::Timeline);
        if optional && !r.charts.iter().any(|c| c.section == key) {
            continue;
        }
        let _ = write!(
            s,
            r#"<h2 id="{}">{}</h2><p>{}</p>"#,
            key.as_str(),
            esc(title),
            esc(blurb)
        );
        let charts: Vec<&Chart> = r.charts.iter().filter(|c| c.section == key).collect();
        if charts.is_empty() {
            let why: Vec<&String> = r
                .notes
                .iter()
                .filter(|n| n.contains(note_key(key)))
                .collect();
            if why.is_empty() {
                s.push_str(r#"<p class="note">No chart: nothing measured for it.</p>"#);
            }
            for n in why {
                let _ = write!(s, r#"<p class="note">No chart: {}.</p>"#, esc(n));
            }
            continue;
        }
        s.push_str(r#"<div class="charts">"#);
        for c in charts {
            s.push_str(&figure(c));
        }
        s.push_str("</div>");
    }
}

/// Answers against the baseline's and the prefix cache, when there are any.
fn answers_and_cache(s: &mut String, r: &Report) {
    if !r.answers.is_empty() {
        let _ = write!(
            s,
            r#"<h2 id="answers">Answers</h2><p>{}</p><ul>"#,
            esc(&super::table::answers_rule())
        );
        for a in &r.answers {
            let class = if a.mismatched_cells + a.degenerate_cells + a.wrong_answer_cells > 0 {
                r#" class="bad""#
            } else {
                ""
            };
            let _ = write!(s, "<li{class}>{}</li>", esc(&a.text()));
        }
        s.push_str("</ul>");
    }
    if !r.build_steps.is_empty() {
        let _ = write!(
            s,
            r#"<h2 id="builds">Builds</h2><p>{}</p><ul>"#,
            esc(&super::builds::rule())
        );
        for step in &r.build_steps {
            let class = if step.regression {
                r#" class="bad""#
            } else {
                ""
            };
            let _ = write!(s, "<li{class}>{}</li>", esc(&step.text()));
        }
        s.push_str("</ul>");
    }
    if !r.prefix_cache.is_empty() {
        let _ = write!(
            s,
            r#"<h2 id="prefix-cache">Prefix cache</h2><p>{}</p><ul>"#,
            esc(&super::table::prefix_cache_rule())
        );
        for row in &r.prefix_cache {
            let class = if row.note.is_some() {
                r#" class="bad""#
            } else {
                ""
            };
            let _ = write!(s, "<li{class}>{}</li>", esc(&row.text()));
        }
        s.push_str("</ul>");
    }
}

/// Failed, skipped and suspicious cells, one row per server, status and class.
fn problems(s: &mut String, r: &Report) {
    s.push_str(r#"<h2 id="problems">Failed, skipped and suspicious cells</h2>"#);
    if r.problem_groups.is_empty() {
        s.push_str("<p>None: every cell completed.</p>");
    } else {
        s.push_str(
            "<p>These cells are never drawn in the charts above and never count as zero; one row per server, status and class, with its first cell as the example (report.json lists every cell).</p>",
        );
        let _ = write!(s, "<table><thead><tr><th>server</th><th>status</th><th>class</th><th>cells</th><th>example</th></tr></thead><tbody>");
        for g in &r.problem_groups {
            let class = match g.status {
                CellStatus::Failed | CellStatus::NotRun => "bad",
                _ => "warn",
            };
            let log = g
                .log_excerpt
                .as_ref()
                .map(|l| format!("<pre>{}</pre>", esc(l.trim())))
                .unwrap_or_default();
            let _ = write!(
                s,
                r#"<tr class="{class}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b>: {}{log}</td></tr>"#,
                esc(&g.server_id),
                g.status.as_str(),
                esc(g.class.map_or("-", FailureClass::as_str)),
                esc(&super::table::cells_text(g)),
                esc(&g.cells[0]),
                esc(&g.example)
            );
        }
        s.push_str("</tbody></table>");
    }
}

/// Every point, then decode speed per prompt kind.
fn results(s: &mut String, r: &Report) {
    s.push_str(r#"<h2 id="results">All results</h2><p>Means over repetitions, with (min–max) when there are several. Speedups are ratios to the baseline at the same workload point.</p>"#);
    let rows: Vec<(Vec<String>, &str)> = r
        .points
        .iter()
        .map(|p| {
            let class = if p.output_tok_s.is_none() {
                "bad"
            } else if !p.status.all_ok() {
                "warn"
            } else {
                ""
            };
            (point_cells(p), class)
        })
        .collect();
    s.push_str(&table(&POINT_HEADER, &rows));
    if !r.kinds.is_empty() {
        s.push_str(r#"<h2 id="kinds">Decode speed per prompt kind</h2>"#);
        let rows: Vec<(Vec<String>, &str)> = r.kinds.iter().map(|k| (kind_cells(k), "")).collect();
        s.push_str(&table(&KIND_HEADER, &rows));
    }
}

/// Notes, unreadable results and the metric definitions.
fn notes_and_definitions(s: &mut String, r: &Report) {
    if !r.notes.is_empty() || !r.unreadable.is_empty() {
        s.push_str(r#"<h2 id="notes">Notes</h2><ul>"#);
        for n in &r.notes {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        for (f, e) in &r.unreadable {
            let _ = write!(
                s,
                "<li>unreadable result <code>{}</code>: {}</li>",
                esc(f),
                esc(e)
            );
        }
        s.push_str("</ul>");
    }
    s.push_str(r#"<h2 id="definitions">Definitions</h2><ul>"#);
    for (k, v) in crate::metrics::definitions() {
        let _ = write!(s, "<li><code>{k}</code>: {}</li>", esc(v));
    }
    let _ = write!(
        s,
        "<li><code>acceptance_length</code>: {}; taken from engine telemetry when present, else from the draft counters, else from tokens per streamed chunk.</li>",
        esc(crate::telemetry::engine_metrics::ACCEPTANCE_LENGTH_DEFINITION)
    );
    s.push_str("</ul></body></html>\n");
}
