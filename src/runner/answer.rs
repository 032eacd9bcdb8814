//! `goal = "answer"` while running: servers leader first, a short probe of
//! each point before its full cell, and the ledger of what was not measured
//! and why. The rule itself is [`crate::goal`]'s.
//!
//! Probes are cells of their own kind, stored apart from the campaign's
//! (`<results>/goal/cells/<server>/<point>.json`), so no report ranks them
//! and a later run reuses them. What a probe kept from being measured is in
//! `<results>/goal/not-measured.json`; a later run without the goal
//! measures exactly those cells, reusing every cell already stored.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::campaign::{Campaign, WorkloadPoint};
use crate::goal::{Board, Full, Gate, Lost, Point, Probe, SloFull, SloOutlook};
use crate::load::schedule::LoadShape;
use crate::metrics::level::LevelSummary;
use crate::plan::{eta::Estimator, PlannedCell, ServerGroup, Verdict};
use crate::search::{Throughput, INTERVAL_SEED};
use crate::store::identity::cell_identity;
use crate::store::{CellResult, Store};
use crate::util::units::DEFAULT_ATTAINMENT;

/// Answer first across the run's server groups.
pub struct AnswerFirst {
    board: Mutex<Board>,
    probes: Store,
    ledger: Mutex<BTreeMap<(String, String), Lost>>,
    path: PathBuf,
}

impl AnswerFirst {
    /// The board as the stored cells set it: every usable full cell of the
    /// campaign, with its stored probe. The ledger keeps what earlier runs
    /// left unmeasured and is still not stored.
    pub fn new(c: &Campaign, groups: &[ServerGroup], store: &Store) -> Self {
        let probes = Store::new(store.goal_dir());
        let mut board = Board::new();
        let mut stored = std::collections::HashSet::new();
        for g in groups {
            for cell in g.cells.iter().filter(|x| x.verdict == Verdict::Cached) {
                stored.insert((g.server.id.clone(), cell.name.clone()));
                let Some(summary) = store
                    .read(&g.server.id, &cell.name)
                    .filter(|r| r.identity == cell.identity && r.status.is_usable())
                    .and_then(|r| r.summary)
                else {
                    continue;
                };
                let probe =
                    probe_cell(c, g, cell).and_then(|p| stored_probe(&probes, &g.server.id, &p));
                let (name, family) = (point_of(cell), family(&cell.workload));
                board.offer(
                    &at(&cell.workload, &name, family.as_deref()),
                    &g.server.id,
                    full(&cell.workload, &summary, probe.as_ref(), g.server.gpus()),
                );
            }
        }
        let path = probes.root().join(crate::store::NOT_MEASURED);
        let ledger = store
            .not_measured()
            .into_iter()
            .filter(|l| !stored.contains(&(l.server.clone(), l.point.clone())))
            .map(|l| ((l.server.clone(), l.point.clone()), l))
            .collect();
        AnswerFirst {
            board: Mutex::new(board),
            probes,
            ledger: Mutex::new(ledger),
            path,
        }
    }

    /// Where probes are stored.
    pub fn probes(&self) -> &Store {
        &self.probes
    }

    /// A probe of `server` at `point` stored by an earlier run.
    pub fn stored(&self, server: &str, probe: &PlannedCell) -> Option<LevelSummary> {
        stored_probe(&self.probes, server, probe)
    }

    /// Whether an earlier repetition's probe already lost this point.
    pub fn lost_before(&self, server: &str, cell: &PlannedCell) -> Option<Lost> {
        if cell.workload.repetition == 0 {
            return None;
        }
        let ledger = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        ledger
            .get(&(server.to_string(), point_of(cell)))
            .filter(|l| l.point != cell.name)
            .cloned()
    }

    /// Gate `cell` of `g` by its probe's summary; a loss goes in the ledger.
    pub fn gate(
        &self,
        g: &ServerGroup,
        cell: &PlannedCell,
        probe: &LevelSummary,
    ) -> std::io::Result<Gate> {
        let (value, unit) = value_of(&cell.workload, probe, g.server.gpus());
        let p = Probe {
            throughput: value,
            slo: outlook(&cell.workload, probe),
            unit,
        };
        let (name, family) = (point_of(cell), family(&cell.workload));
        let gate = self.board.lock().unwrap_or_else(|e| e.into_inner()).gate(
            &at(&cell.workload, &name, family.as_deref()),
            &g.server.id,
            &p,
        );
        if let Gate::Lost(lost) = &gate {
            let mut l = lost.clone();
            l.point = cell.name.clone();
            self.record(l)?;
        }
        Ok(gate)
    }

    /// A later repetition of a point lost at its first is lost alike.
    pub fn record(&self, lost: Lost) -> std::io::Result<()> {
        let mut ledger = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        ledger.insert((lost.server.clone(), lost.point.clone()), lost);
        let all: Vec<&Lost> = ledger.values().collect();
        let bytes = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
        std::fs::create_dir_all(self.probes.root())?;
        crate::util::fsx::write_atomic(&self.path, &bytes)
    }

    /// Why a later repetition of `cell` is not needed: its first settles
    /// the server's place at the point.
    pub fn settled(&self, server: &str, cell: &PlannedCell) -> Option<String> {
        if cell.workload.repetition == 0 {
            return None;
        }
        let board = self.board.lock().unwrap_or_else(|e| e.into_inner());
        board.settled(&point_of(cell), server)
    }

    /// A full cell measured: it leads its point if it beats the leader.
    /// Later repetitions do not change the board: places are gated on the
    /// first.
    pub fn offer(
        &self,
        g: &ServerGroup,
        cell: &PlannedCell,
        r: &CellResult,
        probe: Option<&LevelSummary>,
    ) {
        let Some(summary) = r
            .summary
            .as_ref()
            .filter(|_| r.status.is_usable() && cell.workload.repetition == 0)
        else {
            return;
        };
        let (name, family) = (point_of(cell), family(&cell.workload));
        self.board.lock().unwrap_or_else(|e| e.into_inner()).offer(
            &at(&cell.workload, &name, family.as_deref()),
            &g.server.id,
            full(&cell.workload, summary, probe, g.server.gpus()),
        );
    }

    /// The answer so far, in a line: which configs lead how many points.
    pub fn so_far(&self, after: &str, run: usize, total: usize) -> String {
        let board = self.board.lock().unwrap_or_else(|e| e.into_inner());
        let leads = board.leads();
        let points: usize = leads.values().sum();
        let mut by: Vec<(&String, &usize)> = leads.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let who: Vec<String> = by.iter().map(|(s, n)| format!("`{s}` {n}")).collect();
        let left = total.saturating_sub(run);
        let settled = match left {
            0 => "every server has run: this is the answer".to_string(),
            n => format!(
                "{n} server(s) left, each probed at every point and measured where it could win"
            ),
        };
        format!(
            "answer so far, after `{after}` ({run} of {total} servers): points led: {}; {settled}",
            if who.is_empty() {
                "none yet".to_string()
            } else {
                format!("{} of {points}", who.join(", "))
            }
        )
    }
}

/// A point as the board sees it: the best and its runner-up are named at
/// one stream (the single-stream pick), the best elsewhere; a point with
/// one SLO takes part in its family's SLO pick.
fn at<'a>(w: &WorkloadPoint, name: &'a str, family: Option<&'a str>) -> Point<'a> {
    Point {
        name,
        places: if w.load == (LoadShape::Concurrency { value: 1 }) {
            2
        } else {
            1
        },
        family,
    }
}

/// The SLO pick family of a point with one SLO. With several, each SLO has
/// its own pick and none is gated on its family's.
fn family(w: &WorkloadPoint) -> Option<String> {
    match &w.slos[..] {
        [slo] => Some(format!(
            "{} under {slo}",
            crate::report::model::family_of_point(w)
        )),
        _ => None,
    }
}

/// A full cell on the board: its value, its probe's, its goodput.
fn full(w: &WorkloadPoint, s: &LevelSummary, probe: Option<&LevelSummary>, gpus: u32) -> Full {
    Full {
        value: value_of(w, s, gpus).0,
        probe: probe.map(|p| value_of(w, p, gpus).0),
        slo: meets_slo(w, s).map(|meets| SloFull {
            meets,
            goodput: s.goodput.first().map_or(0.0, |g| g.rate_rps) / f64::from(gpus.max(1)),
        }),
    }
}

/// The key of a cell's point on the board: its first repetition's name,
/// which every server shares.
fn point_of(cell: &PlannedCell) -> String {
    cell.workload.with_repetition(0).cell_name()
}

/// A probe stored under `probes` for `probe`'s identity, when usable.
fn stored_probe(probes: &Store, server: &str, probe: &PlannedCell) -> Option<LevelSummary> {
    probes
        .read(server, &probe.name)
        .filter(|r| r.identity == probe.identity && r.status.is_usable())
        .and_then(|r| r.summary)
}

/// The probe of a cell ([`crate::goal::probe_point`]), stored under the
/// cell's own name with the probe's identity.
pub fn probe_cell(c: &Campaign, g: &ServerGroup, cell: &PlannedCell) -> Option<PlannedCell> {
    let probe = crate::goal::probe_point(&cell.workload)?;
    Some(PlannedCell {
        name: cell.name.clone(),
        identity: cell_identity(c, &g.server, &probe),
        workload: probe,
        verdict: Verdict::Run,
        eta_s: 0.0,
        warnings: Vec::new(),
        left: None,
    })
}

/// Order groups leader first: by their cells' expected GPU-seconds.
pub fn order(groups: &mut [&ServerGroup], est: &Estimator) {
    crate::goal::leader_first(groups, |g| {
        let gpus = f64::from(g.server.gpus());
        let s: f64 = g
            .cells
            .iter()
            .filter(|x| x.verdict.runs())
            .map(|x| est.cell_s(&g.server.id, &x.workload))
            .sum();
        Some(s * gpus)
    });
}

/// The value a point ranks by, with its interval and unit: at one stream
/// the median decode speed of a request (the report's single-stream pick),
/// elsewhere output throughput per GPU (its tables and SLO picks).
pub fn value_of(w: &WorkloadPoint, s: &LevelSummary, gpus: u32) -> (Throughput, &'static str) {
    if w.load == (LoadShape::Concurrency { value: 1 }) {
        let speeds: Vec<f64> = s
            .requests
            .iter()
            .filter(|r| r.is_ok())
            .filter_map(crate::metrics::stats::decode_tok_s)
            .collect();
        if !speeds.is_empty() {
            let mut rng = crate::metrics::bootstrap::SplitMix::new(INTERVAL_SEED);
            let m = crate::metrics::bootstrap::median(&speeds);
            let (low, high) = crate::metrics::bootstrap::bootstrap(
                &speeds,
                &mut rng,
                crate::metrics::bootstrap::median,
            );
            let t = Throughput {
                per_gpu: m,
                low: low.min(m),
                high: high.max(m),
            };
            return (t, "tok/s decode");
        }
    }
    (Throughput::of(s, gpus, INTERVAL_SEED), "tok/s/GPU")
}

/// Whether a full cell met every SLO of its point (`None`: it has none).
fn meets_slo(w: &WorkloadPoint, s: &LevelSummary) -> Option<bool> {
    if w.slos.is_empty() {
        return None;
    }
    Some(
        s.goodput
            .iter()
            .all(|g| g.share >= g.slo.attainment.unwrap_or(DEFAULT_ATTAINMENT)),
    )
}

/// What a probe says about its point's SLOs: a share of requests within
/// the bounds below the attainment by more than its sampling error (and a
/// tenth more, for the probe's shorter outputs) will not be met by the
/// full cell either. An end-to-end bound depends on the output length the
/// probe cut, so it leaves the outlook unsure.
fn outlook(w: &WorkloadPoint, s: &LevelSummary) -> SloOutlook {
    if w.slos.is_empty() {
        return SloOutlook::NoSlo;
    }
    let n = (s.completed + s.failed).max(1) as f64;
    let fails = s.goodput.iter().any(|g| {
        let a = g.slo.attainment.unwrap_or(DEFAULT_ATTAINMENT);
        let error = 1.96 * (a * (1.0 - a) / n).sqrt() + 0.1;
        g.slo.e2e_ms.is_none() && g.share < a - error
    });
    if fails {
        SloOutlook::Fails
    } else {
        SloOutlook::Unsure
    }
}
