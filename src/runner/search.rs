//! SLO searches while a server runs: after the server's fixed cells, each
//! search asks for its next probe (a cell made on the spot), learns from the
//! probe's stored result, and ends at its boundary — or, with
//! `[run] stop_losers`, as soon as it can no longer beat the best config
//! found so far for the same search.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::campaign::{Campaign, WorkloadPoint};
use crate::plan::{PlannedCell, PlannedSearch, ServerGroup, Verdict};
use crate::search::{self, cannot_win, LevelFacts, Step, Throughput, INTERVAL_SEED};
use crate::store::identity::cell_identity;
use crate::store::{probe_verdict, CellResult, Store};

use super::events::{Event, Events};

/// The best boundary found so far per search, across server groups.
#[derive(Debug, Default)]
pub struct Leaders(Mutex<BTreeMap<String, (String, Throughput)>>);

impl Leaders {
    /// Leaders from searches the stored probes already settle, so a config
    /// searched in an earlier run still counts as the one to beat.
    pub fn from_stored(c: &Campaign, groups: &[ServerGroup], store: &Store) -> Leaders {
        let leaders = Leaders::default();
        for g in groups {
            for ps in &g.searches {
                let Some(pass) = ps.outcome.and_then(|o| o.passing_load()) else {
                    continue;
                };
                let search = &c.searches[ps.index];
                let Some(k) = ps.spec.index_of(pass) else {
                    continue;
                };
                let cell = store.read(&g.server.id, &search.probe(k).cell_name());
                if let Some(summary) = cell.as_ref().and_then(|c| c.summary.as_ref()) {
                    let t = Throughput::of(summary, g.server.gpus(), INTERVAL_SEED);
                    leaders.offer(&ps.name, &g.server.id, t);
                }
            }
        }
        leaders
    }

    fn offer(&self, search: &str, server: &str, t: Throughput) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let better = m
            .get(search)
            .is_none_or(|(_, best)| t.per_gpu > best.per_gpu);
        if better {
            m.insert(search.to_string(), (server.to_string(), t));
        }
    }

    fn leader(&self, search: &str) -> Option<(String, Throughput)> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(search)
            .cloned()
    }
}

/// One search on this server.
struct Running {
    planned: PlannedSearch,
    /// Grid index → passed, for probes on the search's path.
    probed: BTreeMap<u64, bool>,
    /// Throughput of the probes seen, by grid index.
    throughput: BTreeMap<u64, Throughput>,
    /// Over: done, stopped early, or the server is gone.
    over: bool,
}

/// The searches of one server group.
pub(crate) struct GroupSearches<'a> {
    c: &'a Campaign,
    g: &'a ServerGroup,
    store: &'a Store,
    runs: Vec<Running>,
    /// Identity of a probe in flight → (search, grid index).
    pending: HashMap<String, (usize, u64)>,
    events: &'a Events,
}

impl<'a> GroupSearches<'a> {
    /// The group's searches that still have probes to measure.
    pub(crate) fn new(
        c: &'a Campaign,
        g: &'a ServerGroup,
        store: &'a Store,
        events: &'a Events,
    ) -> Self {
        let runs = g
            .searches
            .iter()
            .filter(|s| s.runs())
            .map(|p| Running {
                probed: p
                    .stored
                    .iter()
                    .filter_map(|(load, passed)| Some((p.spec.index_of(*load)?, *passed)))
                    .collect(),
                planned: p.clone(),
                throughput: BTreeMap::new(),
                over: false,
            })
            .collect();
        Self {
            c,
            g,
            store,
            runs,
            pending: HashMap::new(),
            events,
        }
    }

    /// Throughput of a stored probe, read from its cell.
    fn stored_throughput(&self, r: usize, k: u64) -> Option<Throughput> {
        let search = &self.c.searches[self.runs[r].planned.index];
        let cell = self
            .store
            .read(&self.g.server.id, &search.probe(k).cell_name())?;
        let summary = cell.summary.as_ref()?;
        Some(Throughput::of(summary, self.gpus(), INTERVAL_SEED))
    }

    fn gpus(&self) -> u32 {
        self.g.server.gpus()
    }

    fn throughput(&mut self, r: usize, k: u64) -> Option<Throughput> {
        if let Some(t) = self.runs[r].throughput.get(&k) {
            return Some(*t);
        }
        let t = self.stored_throughput(r, k)?;
        self.runs[r].throughput.insert(k, t);
        Some(t)
    }

    /// The next probe to measure, as a planned cell; `None` when every search is over.
    pub(crate) fn next_cell(
        &mut self,
        leaders: &Leaders,
        cell_s: impl Fn(&WorkloadPoint) -> f64,
    ) -> Option<(PlannedCell, Vec<WorkloadPoint>)> {
        for r in 0..self.runs.len() {
            if self.runs[r].over {
                continue;
            }
            let name = self.runs[r].planned.name.clone();
            let spec = self.runs[r].planned.spec.clone();
            match search::next_step(&spec, &self.runs[r].probed) {
                Step::Done(o) => {
                    self.runs[r].over = true;
                    self.events.emit(Event::Search {
                        server: self.g.server.id.clone(),
                        search: name.clone(),
                        message: crate::plan::describe_outcome(&spec, &o),
                    });
                    if let Some(pass) = o.passing_load() {
                        let k = spec.index_of(pass).expect("outcome loads are grid points");
                        if let Some(t) = self.throughput(r, k) {
                            leaders.offer(&name, &self.g.server.id, t);
                        }
                    }
                }
                Step::Probe(k) => {
                    if self.c.run.stop_losers {
                        if let Some(why) = self.cannot_win(r, leaders) {
                            self.runs[r].over = true;
                            self.events.emit(Event::Search {
                                server: self.g.server.id.clone(),
                                search: name.clone(),
                                message: format!("stopped early: cannot win ({why})"),
                            });
                            continue;
                        }
                    }
                    let search = &self.c.searches[self.runs[r].planned.index];
                    let w = search.probe(k);
                    let identity = cell_identity(self.c, &self.g.server, &w);
                    self.pending.insert(identity.clone(), (r, k));
                    // The other searches' expected probes stay counted too.
                    let expected = (0..self.runs.len())
                        .filter(|&o| !self.runs[o].over)
                        .flat_map(|o| {
                            let spec = &self.runs[o].planned.spec;
                            let s = &self.c.searches[self.runs[o].planned.index];
                            search::expected_path(spec, &self.runs[o].probed)
                                .into_iter()
                                .filter(move |&e| !(o == r && e == k))
                                .map(|e| s.probe(e))
                                .collect::<Vec<_>>()
                        })
                        .collect();
                    let cell = PlannedCell {
                        name: w.cell_name(),
                        identity,
                        eta_s: cell_s(&w),
                        workload: w,
                        verdict: Verdict::Run,
                        warnings: Vec::new(),
                        left: None,
                    };
                    return Some((cell, expected));
                }
            }
        }
        None
    }

    /// Why search `r` can no longer beat the leader of its search, if so.
    fn cannot_win(&mut self, r: usize, leaders: &Leaders) -> Option<String> {
        let name = self.runs[r].planned.name.clone();
        let (leader, best) = leaders.leader(&name)?;
        if leader == self.g.server.id {
            return None;
        }
        let fail = self.runs[r]
            .probed
            .iter()
            .find(|(_, &p)| !p)
            .map(|(&k, _)| k)?;
        let t = self.throughput(r, fail)?;
        let load = self.runs[r].planned.spec.level(fail);
        cannot_win(&t, &best).then(|| {
            format!(
                "at {} {load}, already past its boundary, it gives at most {:.1} out tok/s per GPU; {leader} gives at least {:.1} at its boundary",
                self.runs[r].planned.spec.axis, t.high, best.low
            )
        })
    }

    /// Learn from a stored result, if it is a probe of ours.
    pub(crate) fn record(&mut self, cell: &CellResult) {
        let Some((r, k)) = self.pending.remove(&cell.identity) else {
            return;
        };
        let facts = cell.summary.as_ref().map(LevelFacts::from);
        let verdict = probe_verdict(
            &self.runs[r].planned.spec,
            cell.status,
            facts.as_ref(),
            cell.failure.as_ref(),
        );
        if let Some(s) = &cell.summary {
            let t = Throughput::of(s, self.gpus(), INTERVAL_SEED);
            self.runs[r].throughput.insert(k, t);
        }
        let load = self.runs[r].planned.spec.level(k);
        self.events.emit(Event::Search {
            server: self.g.server.id.clone(),
            search: self.runs[r].planned.name.clone(),
            message: format!(
                "{} {load} {}",
                self.runs[r].planned.spec.axis,
                if verdict.passed() {
                    "meets every bound".to_string()
                } else {
                    format!("misses: {}", verdict.missed.join("; "))
                }
            ),
        });
        self.runs[r].probed.insert(k, verdict.passed());
    }

    /// The server is gone: no search goes on.
    pub(crate) fn end(&mut self) {
        for r in &mut self.runs {
            r.over = true;
        }
    }
}
