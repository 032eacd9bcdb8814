//! Measured cells correcting the prior: per server config and load level,
//! then from sibling configs, then the level's average.

use super::CELL_OVERHEAD_S;
use crate::campaign::{ServerConfig, WorkloadPoint};

/// A measured cell, as the estimates learn from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Which server config ([`server_key`]).
    pub server: String,
    /// Which configs it is a sibling of ([`shape_key`]).
    pub shape: String,
    /// Which load level ([`level_key`]).
    pub level: String,
    /// The prior's load time for this cell, s.
    pub predicted_s: f64,
    /// The measured load time, s.
    pub measured_s: f64,
}

/// A start-up time measured, with what the prior said.
#[derive(Debug, Clone, PartialEq)]
pub struct StartupObservation {
    /// Which server config.
    pub server: String,
    /// The prior, s.
    pub predicted_s: f64,
    /// Measured, s.
    pub measured_s: f64,
}

/// The key grouping cells of the same server config (across campaigns too:
/// the id does not enter it).
pub fn server_key(s: &ServerConfig) -> String {
    format!(
        "tp={} mem={:?} max={:?} ctx={:?} spec={} args={:?}",
        s.tp,
        s.mem_fraction,
        s.max_running_requests,
        s.context_length,
        serde_json::to_string(&s.speculative).unwrap_or_default(),
        s.args
    )
}

/// The key grouping sibling configs: the same tensor-parallel size and
/// drafting method, any budget or other setting. A measured config informs
/// its unmeasured siblings before they run.
pub fn shape_key(s: &ServerConfig) -> String {
    format!("tp={} method={}", s.tp, s.method_name())
}

/// The key of a load level.
pub fn level_key(w: &WorkloadPoint) -> String {
    // The workload's name too: a long-context level and a chat level at the
    // same concurrency stress a server differently.
    format!("{}-{}", w.workload, w.load.label())
}

/// Corrections of the prior learnt from measured cells.
#[derive(Debug, Clone, Default)]
pub struct Calibration {
    cells: Vec<Observation>,
    startups: Vec<StartupObservation>,
    /// servebench's own time around measured cells (wall minus load), s.
    overheads: Vec<f64>,
}

fn ratio<'a>(obs: impl Iterator<Item = &'a Observation>) -> Option<f64> {
    let (m, p) = obs.fold((0.0, 0.0), |(m, p), o| {
        (m + o.measured_s, p + o.predicted_s)
    });
    (m > 0.0 && p > 0.0).then(|| m / p)
}

impl Calibration {
    /// Learn from these observations.
    pub fn new(cells: Vec<Observation>, startups: Vec<StartupObservation>) -> Self {
        Self {
            cells,
            startups,
            overheads: Vec::new(),
        }
    }

    /// Add the time a cell took beyond its load (sources, probes, scrapes), s.
    pub fn observe_overhead(&mut self, s: f64) {
        if s.is_finite() && s >= 0.0 {
            self.overheads.push(s);
        }
    }

    /// Time around each cell: measured mean, else [`CELL_OVERHEAD_S`].
    pub fn overhead_s(&self) -> f64 {
        if self.overheads.is_empty() {
            CELL_OVERHEAD_S
        } else {
            self.overheads.iter().sum::<f64>() / self.overheads.len() as f64
        }
    }

    /// Add a measured cell.
    pub fn observe(&mut self, o: Observation) {
        self.cells.push(o);
    }

    /// Add a measured start-up.
    pub fn observe_startup(&mut self, o: StartupObservation) {
        self.startups.push(o);
    }

    /// Measured cells so far.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The factor to apply to the prior of `server` (of siblings `shape`)
    /// at `level`. The cells it learns from are the server's own, or, while
    /// it has none, its siblings'. From those: the same level if measured;
    /// else their factor times how this level compares with the rest; else
    /// theirs, or this level's across servers; else all cells'; else 1.
    pub fn factor(&self, server: &str, shape: &str, level: &str) -> f64 {
        let own = self.cells.iter().any(|o| o.server == server);
        let mine = |o: &Observation| {
            if own {
                o.server == server
            } else {
                o.shape == shape
            }
        };
        let exact = ratio(self.cells.iter().filter(|o| mine(o) && o.level == level));
        if let Some(r) = exact {
            return r;
        }
        let by_server = ratio(self.cells.iter().filter(|o| mine(o)));
        let by_level = ratio(self.cells.iter().filter(|o| o.level == level));
        let all = ratio(self.cells.iter());
        match (by_server, by_level, all) {
            (Some(s), Some(l), Some(a)) => {
                // The level's shape relative to the servers it was measured on.
                let others = ratio(self.cells.iter().filter(|o| {
                    !mine(o)
                        && self
                            .cells
                            .iter()
                            .any(|p| p.server == o.server && p.level == level)
                }))
                .unwrap_or(a);
                s * l / others
            }
            (Some(s), None, _) => s,
            (None, Some(l), _) => l,
            (None, None, Some(a)) => a,
            _ => 1.0,
        }
    }

    /// Start-up estimate: measured for this server, else the prior scaled by
    /// how the measured start-ups compared with theirs.
    pub fn startup_s(&self, server: &str, prior_s: f64) -> f64 {
        let mine: Vec<f64> = self
            .startups
            .iter()
            .filter(|o| o.server == server)
            .map(|o| o.measured_s)
            .collect();
        if !mine.is_empty() {
            return mine.iter().sum::<f64>() / mine.len() as f64;
        }
        let (m, p) = self.startups.iter().fold((0.0, 0.0), |(m, p), o| {
            (m + o.measured_s, p + o.predicted_s)
        });
        if m > 0.0 && p > 0.0 {
            prior_s * m / p
        } else {
            prior_s
        }
    }
}
