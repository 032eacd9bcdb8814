//! The short answer `run` and `report` print: per workload family and
//! prompt kind, the config to deploy, the load it was measured at, how it
//! compares with the baseline and how sure that is, the runner-up; then
//! what went wrong in a line and where the full report is. Every figure is
//! the report model's, so the terminal and `report.json` agree.

use std::collections::BTreeMap;

use super::model::Report;
use super::recommend::{overlaps, Ranked};

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
        out.push(format!(
            "{} under {}: deploy `{}` at {}: {:.3} good req/s per GPU, {} of its requests within the SLO (at least {} asked){}{}",
            p.family,
            p.slo,
            p.best.server_id,
            at(&p.best),
            p.best.value,
            percent(p.best_share),
            percent(p.attainment),
            versus(&p.best, p.baseline.as_ref(), 3, |b| format!(
                "{:.3} at {}",
                b.value,
                at(b)
            )),
            against_runner_up(&p.best, p.runner_up.as_ref(), 3, |u| format!(
                "`{}` at {}",
                u.server_id,
                at(u)
            )),
        ));
    }
    for m in &r.slo_misses {
        out.push(format!(
            "{} under {}: no config kept {} of its requests within the SLO; closest `{}` at {} with {}",
            m.family,
            m.slo,
            percent(m.attainment),
            m.closest.server_id,
            at(&m.closest),
            percent(m.closest_share)
        ));
    }
    for p in &r.stream_picks {
        out.push(format!(
            "single stream, {}: deploy `{}`: {:.1} tok/s decode p50{}{}",
            p.kind,
            p.best.server_id,
            p.best.value,
            versus(&p.best, p.baseline.as_ref(), 1, |b| format!(
                "{:.1}",
                b.value
            )),
            against_runner_up(&p.best, p.runner_up.as_ref(), 1, |u| format!(
                "`{}`",
                u.server_id
            )),
        ));
    }
    if out.is_empty() {
        out.push(
            "nothing to recommend: no declared SLO met and no concurrency-1 measurement".into(),
        );
    }
    out.extend(super::builds::answer_lines(
        &r.build_steps,
        &picked_servers(r),
    ));
    out.extend(super::table::not_measured_lines(r));
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

/// Each server the picks above name, with its build where builds are compared.
fn picked_servers(r: &Report) -> Vec<(String, Option<String>)> {
    let build_of = |id: &str| {
        r.build_steps.iter().find_map(|s| {
            [&s.from, &s.to]
                .into_iter()
                .find(|(_, server)| server == id)
                .map(|(b, _)| b.clone())
        })
    };
    r.search_picks
        .iter()
        .filter_map(|p| p.server_id.clone())
        .chain(r.slo_picks.iter().map(|p| p.best.server_id.clone()))
        .chain(r.stream_picks.iter().map(|p| p.best.server_id.clone()))
        .map(|id| {
            let b = build_of(&id);
            (id, b)
        })
        .collect()
}

/// The answer with its heading and where the rest is, for the terminal:
/// `html` is the HTML report when one exists, `results_dir` the stored cells.
/// `rests_on`, when given, says first that the answer rests on part of the
/// campaign and what is missing.
pub fn render(
    r: &Report,
    results_dir: &std::path::Path,
    html: Option<&std::path::Path>,
    rests_on: Option<&str>,
) -> String {
    let mut s = String::from("Answer\n");
    if let Some(part) = rests_on {
        s.push_str(&format!("  {part}\n"));
    }
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

/// A share as a percentage: `94 %`, `90 %`, `99.5 %`.
fn percent(share: f64) -> String {
    let p = share * 100.0;
    if (p - p.round()).abs() < 0.05 {
        format!("{p:.0} %")
    } else {
        format!("{p:.1} %")
    }
}

/// An entry's interval, `[low, high]` at `digits` decimals.
fn interval(r: &Ranked, digits: usize) -> String {
    format!("[{:.digits$}, {:.digits$}]", r.low, r.high)
}

/// How sure the pick is over the runner-up, with the intervals that say
/// why when it is too close to call.
fn against_runner_up(
    best: &Ranked,
    runner_up: Option<&Ranked>,
    digits: usize,
    show: impl Fn(&Ranked) -> String,
) -> String {
    let Some(u) = runner_up else {
        return "; no other config to compare".into();
    };
    if overlaps(best, u) {
        format!(
            "; too close to call with runner-up {}: its interval {} overlaps {}",
            show(u),
            interval(u, digits),
            interval(best, digits)
        )
    } else {
        format!(
            "; confident over runner-up {} ({} clear of {})",
            show(u),
            interval(best, digits),
            interval(u, digits)
        )
    }
}

/// How `best` compares with the baseline's entry in the same ranking; a
/// ratio whose intervals overlap says so with both intervals.
fn versus(
    best: &Ranked,
    base: Option<&Ranked>,
    digits: usize,
    show: impl Fn(&Ranked) -> String,
) -> String {
    let Some(b) = base else {
        return String::new();
    };
    if b.server_id == best.server_id {
        return ", the baseline itself".into();
    }
    if b.value <= 0.0 {
        return format!(", the baseline `{}` has none", b.server_id);
    }
    let noise = if overlaps(best, b) {
        format!(
            ", but within the noise: its interval {} overlaps the baseline's {}",
            interval(best, digits),
            interval(b, digits)
        )
    } else {
        String::new()
    };
    format!(
        ", {:.2}× the baseline `{}` ({}){noise}",
        best.value / b.value,
        b.server_id,
        show(b)
    )
}
