//! The end-of-run summary: every cell of the campaign as stored, with its
//! status and headline numbers, and speedups over the baseline server at
//! the same workload point. The rows are the report model's
//! ([`crate::report::build`]), so the terminal and `report.json` agree by
//! construction.

use std::collections::{BTreeMap, HashSet};

use crate::campaign::Campaign;
use crate::report::model::CellRow;
use crate::report::{self, Report, ReportOptions, ResultSet};
use crate::store::meta::CampaignMeta;
use crate::store::{CellResult, CellStatus, Store};
use crate::util::table;

/// The results of the campaign's current cells among `all` (a results
/// tree as loaded), in plan order; search probes follow, by server and load.
pub fn current_cells(c: &Campaign, all: &[CellResult]) -> Vec<CellResult> {
    // Keyed by server and identity: exact twins stored before twins were
    // told apart share identities but not results.
    let key = |r: &CellResult| (r.server_id.clone(), r.identity.clone());
    let mut wanted = Vec::new();
    let mut ids = HashSet::new();
    for s in &c.servers {
        for w in &c.workloads {
            let id = crate::store::identity::cell_identity(c, s, w);
            ids.insert((s.id.clone(), id.clone()));
            wanted.push((s.id.clone(), id));
        }
    }
    let mut by_id: BTreeMap<(String, String), &CellResult> = BTreeMap::new();
    let mut probes = Vec::new();
    for r in all {
        if ids.contains(&key(r)) {
            by_id.insert(key(r), r);
        } else if is_current_probe(c, r) {
            probes.push(r);
        }
    }
    probes.sort_by(|a, b| {
        let rank = |r: &CellResult| c.servers.iter().position(|s| s.id == r.server_id);
        (rank(a), a.workload.load.value())
            .partial_cmp(&(rank(b), b.workload.load.value()))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    wanted.extend(probes.iter().map(|r| key(r)));
    for r in probes {
        by_id.insert(key(r), r);
    }
    wanted
        .into_iter()
        .filter_map(|id| by_id.remove(&id).cloned())
        .collect()
}

/// The results tree of `c` read once at the end of a run: every stored cell
/// (what the report shows) with the campaign's description as this run
/// writes it.
pub fn load_results(c: &Campaign, store: &Store) -> ResultSet {
    let (mut cells, bad) = store.load_all();
    let meta = CampaignMeta::from_campaign(c);
    meta.relabel(&mut cells);
    ResultSet {
        not_measured: store.not_measured(),
        dir_name: c
            .results_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        meta: Some(meta),
        cells,
        unreadable: bad
            .into_iter()
            .map(|(p, e)| {
                let rel = p
                    .strip_prefix(store.root())
                    .unwrap_or(&p)
                    .display()
                    .to_string();
                (rel, e)
            })
            .collect(),
    }
}

/// Whether a stored cell is a probe of one of the campaign's searches, as
/// the campaign now defines its server and workload.
fn is_current_probe(c: &Campaign, r: &CellResult) -> bool {
    let Some(s) = c.servers.iter().find(|s| s.id == r.server_id) else {
        return false;
    };
    c.searches
        .iter()
        .any(|search| search.index_of(&r.workload).is_some())
        && crate::store::identity::cell_identity(c, s, &r.workload) == r.identity
}

/// How a cell's status reads in the table: a skip or failure names its
/// reason or class, never another status's word.
fn status_label(r: &CellRow) -> String {
    match (r.status, &r.failure_class, &r.reason) {
        (CellStatus::Ok, _, _) if r.under_loaded.is_some() => format!(
            "ok (under-loaded: {:.1} in flight)",
            r.in_flight.unwrap_or(0.0)
        ),
        (CellStatus::Ok, _, _) if r.over_saturated.is_some() => "ok (over-saturated)".into(),
        (CellStatus::Ok, _, _) => "ok".into(),
        (CellStatus::Skipped, _, Some(reason)) => format!("skipped: {}", short(reason, 60)),
        (st, Some(class), _) if class.as_str() != st.as_str() => {
            format!("{} ({class})", st.as_str())
        }
        (st, _, _) => st.as_str().to_string(),
    }
}

fn short(text: &str, max: usize) -> String {
    let first = text.split("; ").next().unwrap_or(text);
    if first.chars().count() <= max {
        first.to_string()
    } else {
        let cut: String = first.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}

/// The report model of the campaign's current cells: the one computation of
/// speedups and acceptance, shared with `report.json` and `report.html`.
pub fn report_of(c: &Campaign, cells: &[CellResult]) -> Report {
    let set = ResultSet {
        dir_name: c.name.clone(),
        meta: Some(CampaignMeta::from_campaign(c)),
        cells: cells.to_vec(),
        unreadable: Vec::new(),
        not_measured: crate::store::Store::new(&c.results_dir).not_measured(),
    };
    report::build(
        &set,
        &ReportOptions {
            baseline: c.run.baseline.clone(),
            ..ReportOptions::default()
        },
    )
}

/// Campaigns up to this many cells get every cell's row after a run;
/// larger ones a count per status (`report --table` has every row).
pub const SUMMARY_ROWS_MAX: usize = 40;

/// Render the end-of-run summary: every cell's row (or a count per status
/// beyond [`SUMMARY_ROWS_MAX`] cells), then the answer, which says what
/// it rests on when cells of the campaign are not measured (`why`: the
/// run was interrupted, `--only` left them out).
pub fn render(
    c: &Campaign,
    cells: &[CellResult],
    html: Option<&std::path::Path>,
    why: &str,
) -> String {
    let report = report_of(c, cells);
    let mut out = if report.cells.len() <= SUMMARY_ROWS_MAX {
        cell_table(&report)
    } else {
        let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &report.cells {
            *by_status.entry(r.status.as_str()).or_insert(0) += 1;
        }
        let parts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
        format!("{} cells: {}\n", report.cells.len(), parts.join(", "))
    };
    if !report.answers.is_empty() {
        out.push_str("answers against the baseline's:\n");
        for l in crate::report::table::answer_lines(&report) {
            out.push_str(&format!("  {l}\n"));
        }
    }
    let rests_on = rests_on(c, cells, why);
    out.push_str(&crate::report::answer::render(
        &report,
        &c.results_dir,
        html,
        rests_on.as_deref(),
    ));
    out
}

/// Cells named per server before the rest are counted.
const UNMEASURED_NAMED: usize = 3;

/// What the answer rests on when some of the campaign's cells have no
/// stored result: how many of all, and which are missing, by server.
fn rests_on(c: &Campaign, cells: &[CellResult], why: &str) -> Option<String> {
    let stored: HashSet<(&str, &str)> = cells
        .iter()
        .map(|r| (r.server_id.as_str(), r.identity.as_str()))
        .collect();
    // Cells a probe kept from being measured (`goal = "answer"`): the
    // answer names each with its reason.
    let lost: HashSet<(String, String)> = crate::store::Store::new(&c.results_dir)
        .not_measured()
        .into_iter()
        .map(|l| (l.server, l.point))
        .collect();
    let mut left = 0;
    let mut missing: Vec<String> = Vec::new();
    let (mut total, mut absent) = (0, 0);
    let points = c.workloads.iter().filter(|w| w.repetition == 0).count();
    for s in &c.servers {
        let mut names = Vec::new();
        // Later repetitions go unmeasured by design once the first ones
        // agree (`repetitions = "auto"`); each point counts once.
        for w in c.workloads.iter().filter(|w| w.repetition == 0) {
            total += 1;
            let id = crate::store::identity::cell_identity(c, s, w);
            if stored.contains(&(s.id.as_str(), id.as_str())) {
                continue;
            }
            if lost.contains(&(s.id.clone(), w.cell_name())) {
                left += 1;
            } else {
                names.push(w.cell_name());
            }
        }
        absent += names.len();
        match names.len() {
            0 => {}
            n if n == points => missing.push(format!("`{}` (all {n})", s.id)),
            n if n <= UNMEASURED_NAMED => {
                missing.push(format!("`{}` ({})", s.id, names.join(", ")))
            }
            n => missing.push(format!(
                "`{}` ({}, and {} more)",
                s.id,
                names[..UNMEASURED_NAMED].join(", "),
                n - UNMEASURED_NAMED
            )),
        }
    }
    absent += left;
    (absent > 0).then(|| {
        let mut parts = Vec::new();
        if left > 0 {
            parts.push(format!(
                "{left} not measured in full, their probes could not place (goal = \"answer\"; a run with --goal grid measures them)"
            ));
        }
        if !missing.is_empty() {
            parts.push(format!("not measured ({why}): {}", missing.join("; ")));
        }
        format!(
            "this answer rests on {} of the campaign's {total} points; {}",
            total - absent,
            parts.join("; ")
        )
    })
}

/// Every cell's row, with speedups over the baseline.
fn cell_table(report: &Report) -> String {
    let f = |v: Option<f64>, digits: usize| table::num(v, digits);
    let rows: Vec<Vec<String>> = report
        .cells
        .iter()
        .map(|r| {
            let speedup = match (r.speedup_decode, r.speedup_output) {
                (Some(d), Some(t)) => format!("{d:.2}x / {t:.2}x"),
                _ => "-".into(),
            };
            vec![
                r.server_id.clone(),
                r.cell_name.clone(),
                status_label(r),
                f(r.output_tok_s, 1),
                f(r.ttft_p50_ms, 1),
                f(r.ttft_p99_ms, 1),
                f(r.tpot_p50_ms, 1),
                f(r.acceptance_length, 2),
                r.acceptance_rate
                    .map(|x| format!("{:.0}%", x * 100.0))
                    .unwrap_or_else(|| "-".into()),
                speedup,
            ]
        })
        .collect();
    let header = [
        "server",
        "cell",
        "status",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "accept len",
        "accept rate",
        "speedup decode/thru",
    ];
    let mut out = table::render(&header, &rows);
    out.push_str("accept len: tokens per verification step (1 + accepted drafts per step); accept rate: share of drafted tokens accepted; '-' where the engine gave no counts\n");
    if let Some(b) = &report.baseline {
        out.push_str(&format!("speedups are against server `{b}` at the same workload point and repetition, usable cells only (per-request decode speed p50 / output throughput)\n"));
    }
    out
}
