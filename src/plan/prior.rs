//! Stored results of earlier campaigns as ETA evidence (`--prior-results DIR`):
//! every cell file under DIR whose engine and model match the campaign's
//! tells how fast that server config ran at that load level.

use std::path::Path;

use serde::Deserialize;

use crate::campaign::resolve::{EngineSpec, ModelSpec};
use crate::campaign::{Campaign, ServerConfig, WorkloadPoint};
use crate::store::CellStatus;

/// One measured cell of an earlier campaign.
#[derive(Debug, Clone)]
pub struct PriorCell {
    /// Its server config.
    pub server: ServerConfig,
    /// Its workload point.
    pub workload: WorkloadPoint,
    /// Measured load time, s.
    pub duration_s: f64,
    /// Its server's start-up time, s.
    pub startup_s: Option<f64>,
}

#[derive(Deserialize)]
struct Lite {
    engine: EngineSpec,
    model: ModelSpec,
    server: ServerConfig,
    workload: WorkloadPoint,
    status: CellStatus,
    summary: Option<SummaryLite>,
    server_run: Option<crate::store::ServerRunLite>,
}

#[derive(Deserialize)]
struct SummaryLite {
    duration_s: f64,
}

/// Whether a stored cell ran the campaign's model on its engine.
fn same_model(c: &Campaign, engine: &EngineSpec, model: &ModelSpec) -> bool {
    engine.kind == c.engine.kind
        && (model.path == c.model.path || model.served_name == c.model.served_name)
}

/// The matching measured cells under `dir` (a results directory or a
/// campaign's folder in it); unreadable files are skipped.
pub fn load(dir: &Path, c: &Campaign) -> Vec<PriorCell> {
    let mut out = Vec::new();
    walk(dir, 0, &mut |p| {
        let Ok(text) = std::fs::read_to_string(p) else {
            return;
        };
        let Ok(cell) = serde_json::from_str::<Lite>(&text) else {
            return;
        };
        let timed = cell.status.is_timed();
        if let (true, true, Some(sum)) = (
            timed,
            same_model(c, &cell.engine, &cell.model),
            cell.summary,
        ) {
            out.push(PriorCell {
                server: cell.server,
                workload: cell.workload,
                duration_s: sum.duration_s,
                startup_s: cell.server_run.and_then(|r| r.ready_s()),
            });
        }
    });
    out
}

fn walk(dir: &Path, depth: usize, f: &mut dyn FnMut(&Path)) {
    if depth > 6 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            walk(&p, depth + 1, f);
        } else if p.extension().is_some_and(|e| e == "json")
            && p.components().any(|c| c.as_os_str() == "cells")
        {
            f(&p);
        }
    }
}
