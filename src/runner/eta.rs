//! The campaign's remaining time while it runs: the plan's estimator,
//! corrected after every measured cell and start-up (per server config and
//! load level), summed over what has not run yet.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::campaign::{ServerConfig, WorkloadPoint};
use crate::plan::eta::{Estimator, StartupObservation};
use crate::plan::{observation, PlannedCell, ServerGroup};

/// Name prefix of probes a search is expected to need but has not chosen yet.
const EXPECTED_PROBE: &str = "\u{0}expected probe ";

fn expected_probes(
    points: impl Iterator<Item = WorkloadPoint>,
) -> impl Iterator<Item = (String, WorkloadPoint)> {
    points
        .enumerate()
        .map(|(i, w)| (format!("{EXPECTED_PROBE}{i}"), w))
}

struct Pending {
    /// Its place in the run order.
    order: usize,
    server: ServerConfig,
    cells: Vec<(String, WorkloadPoint)>,
    started: bool,
    /// Requests sent to it so far (the simulator's crash fault counts them).
    sent: u64,
}

struct State {
    est: Estimator,
    groups: BTreeMap<String, Pending>,
    /// Server groups run at once (`--parallel`).
    parallel: usize,
    /// GPUs in the pool the groups share (0: none).
    pool_gpus: u32,
}

/// Remaining-time bookkeeping shared by the groups of a run.
pub struct LiveEta {
    state: Mutex<State>,
}

impl LiveEta {
    /// Start from the plan's estimator and the groups about to run, at
    /// most `parallel` at once on a pool of `pool_gpus` GPUs.
    pub fn new(est: Estimator, groups: &[&ServerGroup], parallel: usize, pool_gpus: u32) -> Self {
        let groups = groups
            .iter()
            .enumerate()
            .map(|(order, g)| {
                let cells = g
                    .cells
                    .iter()
                    .filter(|c| c.verdict.runs())
                    .map(|c| (c.name.clone(), c.workload.clone()))
                    .chain(expected_probes(
                        g.searches
                            .iter()
                            .filter(|s| s.runs())
                            .flat_map(|s| s.expected.iter().cloned()),
                    ))
                    .collect();
                (
                    g.server.id.clone(),
                    Pending {
                        order,
                        server: g.server.clone(),
                        cells,
                        started: false,
                        sent: 0,
                    },
                )
            })
            .collect();
        Self {
            state: Mutex::new(State {
                est,
                groups,
                parallel,
                pool_gpus,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A server became ready after `startup_s` (None: it did not), having
    /// been sent `warmup` requests.
    pub fn started(&self, server: &str, startup_s: Option<f64>, warmup: u64) {
        let mut st = self.lock();
        let State { est, groups, .. } = &mut *st;
        if let Some(g) = groups.get_mut(server) {
            g.started = true;
            g.sent += warmup;
            if let Some(m) = startup_s {
                let prior = est.startup_priors.get(server).copied().unwrap_or(m);
                est.calibration.observe_startup(StartupObservation {
                    server: crate::plan::eta::server_key(&g.server),
                    predicted_s: prior,
                    measured_s: m,
                });
            }
        }
    }

    /// A cell ended after `wall_s`; `measured_s` is its load time when it
    /// says how fast the server is.
    pub fn finished(&self, server: &str, cell: &str, wall_s: f64, measured_s: Option<f64>) {
        let mut st = self.lock();
        let State { est, groups, .. } = &mut *st;
        let Some(g) = groups.get_mut(server) else {
            return;
        };
        if let Some(i) = g.cells.iter().position(|(n, _)| n == cell) {
            let (_, w) = g.cells.remove(i);
            g.sent += crate::plan::eta::requests_sent(&w);
            if let Some(m) = measured_s {
                let o = observation(est, &g.server, &w, m);
                // The measured window leaves out the warm-up, which the wall time includes.
                let with_warmup = est.prior_load_s(server, &w).unwrap_or(o.predicted_s);
                let load = if o.predicted_s > 0.0 {
                    m * with_warmup / o.predicted_s
                } else {
                    m
                };
                est.calibration.observe(o);
                // Building the prompts has its own estimate.
                let build = est.prompt_build.cell_s(&w);
                est.calibration
                    .observe_overhead((wall_s - load - build).max(0.0));
            }
        }
    }

    /// A probe decided while the group runs, with the probes expected
    /// after it: they replace the expected probes counted for `server`.
    pub fn add_probe(&self, server: &str, cell: &PlannedCell, expected: Vec<WorkloadPoint>) {
        let mut st = self.lock();
        if let Some(g) = st.groups.get_mut(server) {
            g.cells.retain(|(n, _)| !n.starts_with(EXPECTED_PROBE));
            g.cells.push((cell.name.clone(), cell.workload.clone()));
            g.cells.extend(expected_probes(expected.into_iter()));
        }
    }

    /// A group is over (all cells done, or the rest will not run).
    pub fn group_done(&self, server: &str) {
        self.lock().groups.remove(server);
    }

    /// Estimated time of one cell of `server` now, s.
    pub fn cell_s(&self, server: &str, w: &WorkloadPoint) -> f64 {
        self.lock().est.cell_s(server, w)
    }

    /// Estimated time left for everything not yet run, s, leaving out
    /// `except` (a cell in flight, shown separately): the groups running
    /// now, then the rest in order, `parallel` at once on their GPUs.
    pub fn left_s(&self, except: Option<(&str, &str)>) -> f64 {
        let st = self.lock();
        let mut left: Vec<(bool, usize, u32, f64)> = st
            .groups
            .iter()
            .map(|(id, g)| {
                let cells: Vec<&WorkloadPoint> = g
                    .cells
                    .iter()
                    .filter(|(n, _)| except != Some((id.as_str(), n.as_str())))
                    .map(|(_, w)| w)
                    .collect();
                let startup = if g.started { 0.0 } else { st.est.startup_s(id) };
                let s = startup + st.est.cells_s_after(id, &cells, g.sent).iter().sum::<f64>();
                (!g.started, g.order, g.server.gpus(), s)
            })
            .collect();
        left.sort_by_key(|l| (l.0, l.1));
        let groups: Vec<(u32, f64)> = left.iter().map(|l| (l.2, l.3)).collect();
        crate::plan::parallel_wall_s(&groups, st.parallel, st.pool_gpus)
    }
}
