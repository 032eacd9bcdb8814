//! The short answer `run` and `report` print: per workload family and
//! prompt kind, the config to deploy, the load it was measured at, how it
//! compares with the baseline and how sure that is, the runner-up; then
//! what went wrong in a line and where the full report is. Every figure is
//! the report model's, so the terminal and `report.json` agree.

use std::collections::BTreeMap;

use super::model::Report;
use super::recommend::Ranked;

/// The answer as lines, without the heading.
pub fn lines(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for p in &r.search_picks {
        match (&p.server_id, &p.per_gpu, p.boundary) {
            (Some(id), Some(t), Some(b)) => out.push(format!(
                "SLO search {}: deploy `{id}` up to {b}: {:.1} out tok/s per GPU [{:.1}, {:.1}]; {}",
                p.search, t.per_gpu, t.low, t.high, p.confidence
            )),
            _ => out.push(format!("SLO search {}: {}", p.search, p.confidence)),
        }
    }
    for p in &r.slo_picks {
        let mut line = format!(
            "{} under {}: deploy `{}` at {}: {:.3} good req/s per GPU{}; {}",
            p.family,
            p.slo,
            p.best.server_id,
            at(&p.best),
            p.best.value,
            versus(&p.best, p.baseline.as_ref(), |b| format!(
                "{:.3} at {}",
                b.value,
                at(b)
            )),
            p.confidence
        );
        if let Some(u) = &p.runner_up {
            line.push_str(&format!("; runner-up `{}` at {}", u.server_id, at(u)));
        }
        out.push(line);
    }
    for p in &r.stream_picks {
        let mut line = format!(
            "single stream, {}: deploy `{}`: {:.1} tok/s decode p50{}; {}",
            p.kind,
            p.best.server_id,
            p.best.value,
            versus(&p.best, p.baseline.as_ref(), |b| format!("{:.1}", b.value)),
            p.confidence
        );
        if let Some(u) = &p.runner_up {
            line.push_str(&format!("; runner-up `{}`", u.server_id));
        }
        out.push(line);
    }
    if out.is_empty() {
        out.push(
            "nothing to recommend: no declared SLO met and no concurrency-1 measurement".into(),
        );
    }
    let not_ranked: BTreeMap<&str, ()> = r
        .slo_picks
        .iter()
        .flat_map(|p| &p.excluded)
        .chain(r.stream_picks.iter().flat_map(|p| &p.excluded))
        .map(|e| (e.server_id.as_str(), ()))
        .collect();
    if !not_ranked.is_empty() {
        let ids: Vec<String> = not_ranked.keys().map(|s| format!("`{s}`")).collect();
        out.push(format!(
            "not ranked where they crashed or answered wrong: {}",
            ids.join(", ")
        ));
    }
    if !r.problems.is_empty() {
        let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &r.problems {
            *by_status.entry(p.status.as_str()).or_insert(0) += 1;
        }
        let parts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
        out.push(format!(
            "{} of {} cells have no usable measurement: {}",
            r.problems.len(),
            r.cells.len(),
            parts.join(", ")
        ));
    }
    out
}

/// The answer with its heading and where the rest is, for the terminal:
/// `html` is the HTML report when one exists, `results_dir` the stored cells.
pub fn render(r: &Report, results_dir: &std::path::Path, html: Option<&std::path::Path>) -> String {
    let mut s = String::from("Answer\n");
    for l in lines(r) {
        s.push_str(&format!("  {l}\n"));
    }
    let dir = results_dir.display();
    if let Some(html) = html {
        s.push_str(&format!("full report: {}; ", html.display()));
    }
    s.push_str(&format!("every cell: servebench report {dir} --table\n"));
    s
}

/// The load a ranked entry was measured at, with the concurrency it reached.
fn at(r: &Ranked) -> String {
    match r.in_flight {
        Some(f) => format!("{} ({f:.1} in flight)", r.load),
        None => r.load.clone(),
    }
}

/// How `best` compares with the baseline's entry in the same ranking.
fn versus(best: &Ranked, base: Option<&Ranked>, show: impl Fn(&Ranked) -> String) -> String {
    let Some(b) = base else {
        return String::new();
    };
    if b.server_id == best.server_id {
        return ", the baseline itself".into();
    }
    if b.value <= 0.0 {
        return format!(", the baseline `{}` has none", b.server_id);
    }
    let noise = if best.low <= b.high && b.low <= best.high {
        ", within the noise of it"
    } else {
        ""
    };
    format!(
        ", {:.2}× the baseline `{}` ({}){noise}",
        best.value / b.value,
        b.server_id,
        show(b)
    )
}
