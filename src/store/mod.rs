//! The results directory: one JSON file per cell, written atomically, and
//! the index that tells `plan` and `run` what is already measured.
//!
//! Layout under `<results_dir>/<campaign>/`:
//! - `cells/<server-id>/<cell-name>.json` — one [`CellResult`] per cell;
//! - `logs/<server-id>.log` — the server's output, one section per launch.
//!
//! A cell's identity is a hash of everything that can change its numbers;
//! files are found by identity, so renaming a server id reuses its results,
//! while changing a setting makes them stale (kept on disk, never reused).

pub mod identity;
pub mod judgment;
pub mod meta;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::campaign::resolve::{EngineSpec, ModelSpec};
use crate::campaign::{ServerConfig, WorkloadPoint};
use crate::failure::Failure;
use crate::metrics::level::LevelSummary;
use crate::search::{self, LevelFacts, SearchSpec};
use crate::util::fsx;

/// Version of the cell result layout.
pub const CELL_SCHEMA_VERSION: u32 = 1;

/// What became of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Every request completed.
    Ok,
    /// Some requests failed; numbers come from the completed ones.
    Partial,
    /// No usable measurement; see `failure`.
    Failed,
    /// Ran, but the numbers are not believable; see `warnings`.
    Suspicious,
    /// Never ran because its server failed earlier; will run next time.
    NotRun,
    /// Refused by the plan; see `failure.detail` for the reason.
    Skipped,
}

impl CellStatus {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CellStatus::Ok => "ok",
            CellStatus::Partial => "partial",
            CellStatus::Failed => "failed",
            CellStatus::Suspicious => "suspicious",
            CellStatus::NotRun => "not_run",
            CellStatus::Skipped => "skipped",
        }
    }

    /// Whether a stored result with this status counts as measured.
    pub fn is_measured(self) -> bool {
        !matches!(self, CellStatus::NotRun | CellStatus::Skipped)
    }

    /// Whether the cell's numbers may be used: charts, speedups,
    /// recommendations, repetitions that agree.
    pub fn is_usable(self) -> bool {
        matches!(self, CellStatus::Ok | CellStatus::Partial)
    }

    /// Whether the cell's duration says how fast the server is (ETAs learn
    /// from it): its load ran, even if its numbers are not believed.
    pub fn is_timed(self) -> bool {
        matches!(
            self,
            CellStatus::Ok | CellStatus::Partial | CellStatus::Suspicious
        )
    }

    /// Whether this status is a failure for exit codes and `--rerun-failed`.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            CellStatus::Failed | CellStatus::Partial | CellStatus::Suspicious | CellStatus::NotRun
        )
    }
}

/// How the cell's server was run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerRun {
    /// The argv that started it (empty for external endpoints).
    pub command: Vec<String>,
    /// Base URL requests went to.
    pub url: String,
    /// GPUs assigned (`CUDA_VISIBLE_DEVICES`).
    pub gpus: Vec<u32>,
    /// Log file, relative to the campaign's results directory.
    pub log: String,
    /// Launch start → healthy, s.
    pub startup_s: Option<f64>,
    /// Healthy → warm-up requests answered, s (None: no warm-up sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_s: Option<f64>,
    /// Why a warm-up request failed (the cells still run and classify their own failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_error: Option<String>,
    /// Which launch of this server in the run (1 = first; 2 after a crash retry).
    pub launch: u32,
    /// Other servers' cells that ran at the same time (parallel runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub concurrent_with: Vec<String>,
}

/// The engine's prefix cache emptied before a cell (`[run] reset_prefix_cache`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheReset {
    /// Whether the engine said its cache was emptied.
    pub emptied: bool,
    /// Requests made (the engine refuses while requests hold blocks).
    pub attempts: u32,
    /// The endpoint and the engine's last answer.
    pub detail: String,
}

/// One stored cell result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Layout version.
    pub schema_version: u32,
    /// servebench version that wrote it.
    pub tool_version: String,
    /// Measurement-method version included in the identity.
    pub method_version: u32,
    /// Campaign name.
    pub campaign: String,
    /// Identity hash of every setting that can change the numbers.
    pub identity: String,
    /// Server id.
    pub server_id: String,
    /// Readable cell name.
    pub cell_name: String,
    /// The server config.
    pub server: ServerConfig,
    /// The workload point.
    pub workload: WorkloadPoint,
    /// The engine.
    pub engine: EngineSpec,
    /// The model.
    pub model: ModelSpec,
    /// Outcome.
    pub status: CellStatus,
    /// Cell-level failure (start-up, crash, or the dominant request failure).
    pub failure: Option<Failure>,
    /// Reasons to doubt the numbers.
    pub warnings: Vec<String>,
    /// RFC 3339 times.
    pub started_at: String,
    /// RFC 3339 times.
    pub finished_at: String,
    /// How the server was run.
    pub server_run: Option<ServerRun>,
    /// The measurement, with every raw request record.
    pub summary: Option<LevelSummary>,
    /// Engine telemetry for the cell (metrics deltas, log facts, GPU samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<crate::telemetry::CellTelemetry>,
    /// The engine build the cell was measured on, when it could be found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_build: Option<crate::engine::version::EngineBuild>,
    /// The prefix-cache reset before the cell, when the campaign asks for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_reset: Option<CacheReset>,
    /// One sentence per metric.
    pub definitions: BTreeMap<String, String>,
}

/// The fields of a stored cell needed for planning (raw records skipped).
#[derive(Debug, Clone, Deserialize)]
pub struct StoredCell {
    /// Identity hash.
    pub identity: String,
    /// Server id when stored.
    pub server_id: String,
    /// Cell name when stored.
    pub cell_name: String,
    /// Outcome.
    pub status: CellStatus,
    /// Start-up time of its server.
    #[serde(default)]
    pub server_run: Option<ServerRunLite>,
    /// The measured level's time, counts, throughput and latencies.
    #[serde(default)]
    pub summary: Option<LevelFacts>,
    /// What the engine reported at start-up.
    #[serde(default)]
    pub telemetry: Option<TelemetryLite>,
    /// Why the cell failed, if it did.
    #[serde(default)]
    pub failure: Option<Failure>,
    /// The engine build it was measured on, when known.
    #[serde(default)]
    pub engine_build: Option<crate::engine::version::EngineBuild>,
    /// The measurement method's version it was measured by.
    #[serde(default)]
    pub method_version: u32,
    /// The settings it was measured with, kept to tell `plan` what changed
    /// when the cell's identity no longer matches (`plan::stale`).
    #[serde(default)]
    pub server: Option<serde_json::Value>,
    /// See `server`.
    #[serde(default)]
    pub workload: Option<serde_json::Value>,
    /// See `server`.
    #[serde(default)]
    pub engine: Option<serde_json::Value>,
    /// See `server`.
    #[serde(default)]
    pub model: Option<serde_json::Value>,
    /// Present when the engine's prefix cache was emptied before it.
    #[serde(default)]
    pub prefix_cache_reset: Option<serde_json::Value>,
}

/// The start-up facts of a stored cell's telemetry.
#[derive(Debug, Clone, Deserialize)]
pub struct TelemetryLite {
    /// Facts from the server log.
    #[serde(default)]
    pub log: Option<LogLite>,
}

/// KV capacity as the engine logged it.
#[derive(Debug, Clone, Deserialize)]
pub struct LogLite {
    /// KV cache capacity in tokens (vLLM, llama.cpp).
    #[serde(default)]
    pub kv_cache_tokens: Option<u64>,
    /// SGLang's `max_total_num_tokens`.
    #[serde(default)]
    pub max_total_num_tokens: Option<u64>,
}

/// Start-up time of a stored cell's server.
#[derive(Debug, Clone, Deserialize)]
pub struct ServerRunLite {
    /// Launch → healthy, s.
    #[serde(default)]
    pub startup_s: Option<f64>,
    /// Healthy → warm, s.
    #[serde(default)]
    pub warmup_s: Option<f64>,
}

/// Launch → ready for the first cell (healthy and warmed up), s: the one
/// rule for stored runs and the run in progress.
fn ready_s(startup_s: Option<f64>, warmup_s: Option<f64>) -> Option<f64> {
    startup_s.map(|s| s + warmup_s.unwrap_or(0.0))
}

impl ServerRun {
    /// Launch → ready for the first cell (healthy and warmed up), s.
    pub fn ready_s(&self) -> Option<f64> {
        ready_s(self.startup_s, self.warmup_s)
    }
}

impl ServerRunLite {
    /// Launch → ready for the first cell (healthy and warmed up), s.
    pub fn ready_s(&self) -> Option<f64> {
        ready_s(self.startup_s, self.warmup_s)
    }
}

/// A search probe's verdict from its stored status, measurements and failure.
///
/// Only a cell whose numbers can be trusted is judged against the bounds; a
/// failed, crashed or suspicious cell fails the probe with its reason, since
/// the load it was measured at is not shown to be served.
pub fn probe_verdict(
    spec: &SearchSpec,
    status: CellStatus,
    facts: Option<&LevelFacts>,
    failure: Option<&Failure>,
) -> search::Verdict {
    match (status, facts) {
        (CellStatus::Ok | CellStatus::Partial, Some(f)) => spec.judge(f),
        _ => search::Verdict {
            missed: vec![format!(
                "cell {}{}",
                status.as_str(),
                failure
                    .map(|f| format!(
                        " ({}: {})",
                        f.class,
                        crate::failure::truncate(&f.detail, 120)
                    ))
                    .unwrap_or_default()
            )],
        },
    }
}

/// Where a campaign's results live.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// What is stored, by identity and by location.
#[derive(Debug, Default)]
pub struct StoreIndex {
    /// Stored cells by identity.
    pub by_identity: HashMap<String, StoredCell>,
    /// Identity stored at `(server_id, cell_name)`.
    pub by_location: HashMap<(String, String), String>,
    /// Files that could not be read as results (name, reason).
    pub unreadable: Vec<(PathBuf, String)>,
}

/// The file under [`Store::goal_dir`] listing the cells a probe left.
pub const NOT_MEASURED: &str = "not-measured.json";

impl Store {
    /// A store rooted at a campaign's results directory.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The campaign's results directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `goal = "answer"` keeps its probes and what they left.
    pub fn goal_dir(&self) -> PathBuf {
        self.root.join("goal")
    }

    /// The cells a probe left unmeasured (`goal = "answer"`), as the last
    /// run with the goal wrote them; none when there is no such file or it
    /// cannot be read.
    pub fn not_measured(&self) -> Vec<crate::goal::Lost> {
        std::fs::read(self.goal_dir().join(NOT_MEASURED))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Path of a cell's result file.
    pub fn cell_path(&self, server_id: &str, cell_name: &str) -> PathBuf {
        self.root
            .join("cells")
            .join(server_id)
            .join(format!("{cell_name}.json"))
    }

    /// Path of a replay cell's journal of finished requests (see
    /// `load::journal`); removed when the cell's result is written.
    pub fn journal_path(&self, server_id: &str, cell_name: &str) -> PathBuf {
        self.root
            .join("cells")
            .join(server_id)
            .join(format!("{cell_name}.journal.jsonl"))
    }

    /// Path of a server's log, and the same relative to the root.
    pub fn log_path(&self, server_id: &str) -> (PathBuf, String) {
        let rel = format!("logs/{server_id}.log");
        (self.root.join(&rel), rel)
    }

    /// Read one stored cell result, if it is there and readable.
    pub fn read(&self, server_id: &str, cell_name: &str) -> Option<CellResult> {
        let bytes = std::fs::read(self.cell_path(server_id, cell_name)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Write a cell result atomically, retrying a few times before giving up.
    ///
    /// A measurement can take hours; a transient failure (a full disk being
    /// cleaned, an NFS hiccup) should not discard it, so the caller's copy stays
    /// in memory while each failed attempt is reported and retried.
    pub fn write(&self, cell: &CellResult) -> std::io::Result<PathBuf> {
        const ATTEMPTS: u32 = 3;
        let path = self.cell_path(&cell.server_id, &cell.cell_name);
        let bytes = serde_json::to_vec(cell).map_err(std::io::Error::other)?;
        let mut attempt = 1;
        loop {
            match fsx::write_atomic(&path, &bytes) {
                Ok(()) => {
                    // The result holds what the journal kept.
                    let _ =
                        std::fs::remove_file(self.journal_path(&cell.server_id, &cell.cell_name));
                    return Ok(path);
                }
                Err(e) if attempt < ATTEMPTS && e.kind() != std::io::ErrorKind::InvalidInput => {
                    eprintln!("cell result: {e} (attempt {attempt} of {ATTEMPTS}; retrying)");
                    std::thread::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)));
                    attempt += 1;
                }
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("cell result {}: {e}", cell.cell_name),
                    ))
                }
            }
        }
    }

    /// Remove temporary files left by writes that were interrupted (a killed
    /// run); returns how many were removed. Finished results are never touched.
    pub fn clean_temporaries(&self) -> usize {
        let mut removed = 0;
        let Ok(servers) = std::fs::read_dir(self.root.join("cells")) else {
            return 0;
        };
        for s in servers.flatten() {
            let Ok(cells) = std::fs::read_dir(s.path()) else {
                continue;
            };
            for c in cells.flatten() {
                let name = c.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.')
                    && name.contains(".tmp-")
                    && std::fs::remove_file(c.path()).is_ok()
                {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Every stored cell result file.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let Ok(servers) = std::fs::read_dir(self.root.join("cells")) else {
            return out;
        };
        for s in servers.flatten() {
            let Ok(cells) = std::fs::read_dir(s.path()) else {
                continue;
            };
            for c in cells.flatten() {
                let p = c.path();
                let name = c.file_name();
                let name = name.to_string_lossy();
                // Temporary files of an interrupted atomic write are not results.
                if name.ends_with(".json") && !name.starts_with('.') {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }

    /// Read the planning view of every stored cell.
    pub fn index(&self) -> StoreIndex {
        let mut idx = StoreIndex::default();
        for p in self.files() {
            let parsed = std::fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<StoredCell>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(c) => {
                    idx.by_location.insert(
                        (c.server_id.clone(), c.cell_name.clone()),
                        c.identity.clone(),
                    );
                    idx.by_identity.insert(c.identity.clone(), c);
                }
                Err(e) => idx.unreadable.push((p, e)),
            }
        }
        idx
    }

    /// Read every full cell result (for reports).
    pub fn load_all(&self) -> (Vec<CellResult>, Vec<(PathBuf, String)>) {
        let mut ok = Vec::new();
        let mut bad = Vec::new();
        for p in self.files() {
            match std::fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<CellResult>(&b).map_err(|e| e.to_string()))
            {
                Ok(c) => ok.push(c),
                Err(e) => bad.push((p, e)),
            }
        }
        (ok, bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_is_startup_plus_warmup_for_live_and_stored_runs() {
        let run = ServerRun {
            startup_s: Some(40.0),
            warmup_s: Some(3.5),
            ..Default::default()
        };
        let lite = ServerRunLite {
            startup_s: Some(40.0),
            warmup_s: None,
        };
        assert_eq!(run.ready_s(), Some(43.5));
        assert_eq!(lite.ready_s(), Some(40.0));
        let never_healthy = ServerRun {
            warmup_s: Some(1.0),
            ..Default::default()
        };
        assert_eq!(never_healthy.ready_s(), None);
    }
}
