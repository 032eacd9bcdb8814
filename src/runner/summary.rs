//! The end-of-run summary: every cell of the campaign as stored, with its
//! status and headline numbers, and speedups over the baseline server at
//! the same workload point.

use std::collections::{BTreeMap, HashSet};

use crate::campaign::Campaign;
use crate::metrics::stats::Stats;
use crate::store::{CellResult, CellStatus, Store};
use crate::ui::table;

/// Speedup of a cell over its baseline twin: (decode speed ratio, throughput ratio).
pub fn speedup(cell: &CellResult, base: &CellResult) -> Option<(f64, f64)> {
    let (s, b) = (cell.summary.as_ref()?, base.summary.as_ref()?);
    if !cell.status.is_measured()
        || matches!(cell.status, CellStatus::Failed)
        || matches!(base.status, CellStatus::Failed)
    {
        return None;
    }
    let dec = match (s.decode_tok_s, b.decode_tok_s) {
        (Some(x), Some(y)) if y.p50 > 0.0 => x.p50 / y.p50,
        _ => return None,
    };
    let thr = if b.output_throughput_tok_s > 0.0 {
        s.output_throughput_tok_s / b.output_throughput_tok_s
    } else {
        return None;
    };
    Some((dec, thr))
}

/// The stored results of the campaign's current cells, in plan order.
pub fn current_cells(c: &Campaign, store: &Store) -> Vec<CellResult> {
    let digest = crate::store::identity::model_config_digest(&c.model);
    let mut wanted = Vec::new();
    let mut ids = HashSet::new();
    for s in &c.servers {
        for w in &c.workloads {
            let id =
                crate::store::identity::cell_identity(&c.engine, &c.model, digest.as_deref(), s, w);
            ids.insert(id.clone());
            wanted.push(id);
        }
    }
    let (all, _) = store.load_all();
    let mut by_id: BTreeMap<String, CellResult> = BTreeMap::new();
    for r in all {
        if ids.contains(&r.identity) {
            by_id.insert(r.identity.clone(), r);
        }
    }
    wanted
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .collect()
}

/// The cell's speculative acceptance as shown in the table.
fn acceptance(r: &CellResult) -> String {
    let a = r
        .telemetry
        .as_ref()
        .and_then(|t| t.get("spec"))
        .and_then(|s| s.get("acceptance"));
    match a {
        Some(a) => match (
            a["acceptance_length"].as_f64(),
            a["acceptance_rate"].as_f64(),
        ) {
            (Some(len), _) => format!("{len:.2}"),
            (None, Some(rate)) => format!("{:.0}%", rate * 100.0),
            _ => "0".into(),
        },
        None => "-".into(),
    }
}

/// Render the summary table.
pub fn render(c: &Campaign, cells: &[CellResult]) -> String {
    let baseline = c.run.baseline.as_deref();
    let base: BTreeMap<&str, &CellResult> = cells
        .iter()
        .filter(|r| Some(r.server_id.as_str()) == baseline)
        .map(|r| (r.cell_name.as_str(), r))
        .collect();
    let p = |v: Option<Stats>, f: fn(&Stats) -> f64| table::num(v.as_ref().map(f), 1);
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|r| {
            let s = r.summary.as_ref();
            let sp = base
                .get(r.cell_name.as_str())
                .filter(|b| b.server_id != r.server_id)
                .and_then(|b| speedup(r, b))
                .map(|(d, t)| format!("{d:.2}x / {t:.2}x"))
                .unwrap_or_else(|| "-".into());
            let status = match (&r.status, &r.failure) {
                (CellStatus::Ok, _) => "ok".to_string(),
                (st, Some(f)) => format!("{} ({})", st.as_str(), f.class),
                (st, None) => st.as_str().to_string(),
            };
            vec![
                r.server_id.clone(),
                r.cell_name.clone(),
                status,
                s.filter(|_| r.status != CellStatus::Failed)
                    .map(|s| format!("{:.1}", s.output_throughput_tok_s))
                    .unwrap_or_else(|| "-".into()),
                p(s.and_then(|s| s.ttft_ms), |x| x.p50),
                p(s.and_then(|s| s.ttft_ms), |x| x.p99),
                p(s.and_then(|s| s.tpot_ms), |x| x.p50),
                acceptance(r),
                sp,
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
        "accept",
        "speedup decode/thru",
    ];
    let mut out = table::render(&header, &rows);
    out.push_str("accept: speculative acceptance length (tokens per step) or, without step counts, the share of drafted tokens accepted\n");
    if let Some(b) = baseline {
        out.push_str(&format!("speedups are against server `{b}` at the same workload point (per-request decode speed / output throughput)\n"));
    }
    out
}
