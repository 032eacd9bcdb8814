//! `servebench compare`: line up two result sets and flag regressions that
//! are larger than the noise, so a CI pipeline can gate on exit code 3.
//!
//! Cells are aligned by identity; a cell whose identity changed (a setting or
//! the engine version differs) is aligned by server id and cell name instead,
//! and the row says so. Repetitions of one workload point are averaged; the
//! noise of a point is the larger relative range (max − min) / mean seen
//! across its repetitions in either set. A change is flagged when it goes the
//! wrong way by more than `max(threshold, 3 × noise)`: with one repetition
//! that is the threshold; with several, noisy metrics need a larger change.
//!
//! Answers are compared too, pair by pair: the answer to unit *i* (turn
//! *t*) of a cell in BASE and in NEW. Per server, each checked prompt kind
//! (did the answer pass its check?) and its agreement with its own set's
//! baseline (was it the baseline's answer?) is a pass or a fail in each set;
//! a drop is flagged by the rule the report uses for a config against its
//! baseline (`super::checks::clearly_worse`): at least 10 points lower and
//! sign-test p < 0.05 over the pairs.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::checks::{checks_by_kind, Paired, Units};
use super::data::{status_text, Spread};
use super::ResultSet;
use crate::store::CellResult;
use crate::util::table;

/// How many noise widths a change must exceed to be flagged.
pub const NOISE_FACTOR: f64 = 3.0;

/// A compared metric and which direction is better.
#[derive(Debug, Clone, Copy)]
struct Metric {
    name: &'static str,
    higher_is_better: bool,
    get: fn(&CellResult) -> Option<f64>,
}

const METRICS: [Metric; 5] = [
    Metric {
        name: "output_tok_s",
        higher_is_better: true,
        get: |c| c.summary.as_ref().map(|s| s.output_throughput_tok_s),
    },
    Metric {
        name: "decode_tok_s_p50",
        higher_is_better: true,
        get: |c| c.summary.as_ref()?.latency.decode_tok_s.map(|s| s.p50),
    },
    Metric {
        name: "ttft_p50_ms",
        higher_is_better: false,
        get: |c| c.summary.as_ref()?.latency.ttft_ms.map(|s| s.p50),
    },
    Metric {
        name: "ttft_p99_ms",
        higher_is_better: false,
        get: |c| c.summary.as_ref()?.latency.ttft_ms.map(|s| s.p99),
    },
    Metric {
        name: "tpot_p50_ms",
        higher_is_better: false,
        get: |c| c.summary.as_ref()?.latency.tpot_ms.map(|s| s.p50),
    },
];

/// The names of the metrics `compare` judges, in its order.
pub fn metric_names() -> Vec<&'static str> {
    METRICS.iter().map(|m| m.name).collect()
}

/// How one metric moved from one group of repetitions to another, by
/// `compare`'s rule (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct MetricChange {
    /// Mean over the first group.
    pub base: Option<f64>,
    /// Mean over the second group.
    pub new: Option<f64>,
    /// (new − base) / base.
    pub change: Option<f64>,
    /// The relative change that counts: `max(threshold, 3 × noise)`.
    pub limit: f64,
    /// Relative range across repetitions, when either group had several.
    pub noise: Option<f64>,
    /// Whether it moved the wrong way by more than the limit.
    pub regression: bool,
    /// Whether it moved either way by more than the limit.
    pub changed: bool,
    /// Whether a higher value is better.
    pub higher_is_better: bool,
}

/// [`MetricChange`] of the metric `name` from `base`'s usable cells to
/// `new`'s, or `None` for a metric `compare` does not know.
pub fn metric_change(
    name: &str,
    base: &[&CellResult],
    new: &[&CellResult],
    threshold: f64,
) -> Option<MetricChange> {
    let m = METRICS.iter().find(|m| m.name == name)?;
    let ok_b: Vec<&&CellResult> = base.iter().filter(|c| c.status.is_usable()).collect();
    let ok_n: Vec<&&CellResult> = new.iter().filter(|c| c.status.is_usable()).collect();
    Some(change_of(*m, &ok_b, &ok_n, threshold))
}

/// `m`'s change from the usable cells `ok_b` to `ok_n`.
fn change_of(
    m: Metric,
    ok_b: &[&&CellResult],
    ok_n: &[&&CellResult],
    threshold: f64,
) -> MetricChange {
    let sb = Spread::of(ok_b.iter().filter_map(|c| (m.get)(c)));
    let sn = Spread::of(ok_n.iter().filter_map(|c| (m.get)(c)));
    let noise = [sb, sn]
        .iter()
        .flatten()
        .filter(|s| s.n >= 2)
        .map(|s| s.relative_range())
        .reduce(f64::max);
    let limit = threshold.max(NOISE_FACTOR * noise.unwrap_or(0.0));
    let change = match (sb, sn) {
        (Some(b), Some(n)) if b.mean.abs() > 0.0 => Some((n.mean - b.mean) / b.mean),
        _ => None,
    };
    let worse = change.map(|c| if m.higher_is_better { -c } else { c });
    MetricChange {
        base: sb.map(|s| s.mean),
        new: sn.map(|s| s.mean),
        change,
        limit,
        noise,
        regression: worse.is_some_and(|w| w > limit),
        changed: change.is_some_and(|c| c.abs() > limit),
        higher_is_better: m.higher_is_better,
    }
}

/// One metric of one (server, workload point) in both sets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    /// Server config id.
    pub server_id: String,
    /// Workload point.
    pub point: String,
    /// How BASE's cells were found for NEW's.
    pub matched_by: MatchedBy,
    /// Metric name.
    pub metric: String,
    /// Mean over BASE's usable repetitions.
    pub base: Option<f64>,
    /// Mean over NEW's usable repetitions.
    pub new: Option<f64>,
    /// (new − base) / base.
    pub change: Option<f64>,
    /// The change a regression must exceed (relative).
    pub limit: f64,
    /// Relative range across repetitions, when there were several.
    pub noise: Option<f64>,
    /// Whether the change is a regression.
    pub regression: bool,
}

/// One server's answers on one measure (a kind's check, or agreement with
/// the set's baseline) in both sets, over the same prompts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerDrop {
    /// Server config id.
    pub server_id: String,
    /// `<kind> check` or `agreement with <baseline>`.
    pub measure: String,
    /// The paired outcomes.
    pub paired: Paired,
    /// Whether the drop is clear (a regression).
    pub regression: bool,
}

/// The outcome of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Every compared metric.
    pub rows: Vec<CompareRow>,
    /// Every compared answer measure.
    pub answers: Vec<AnswerDrop>,
    /// Alignment remarks (identity changes, cells only on one side, lost cells).
    pub notes: Vec<String>,
    /// Number of flagged regressions (rows plus cells that stopped working).
    pub regressions: usize,
    /// The engine builds BASE's cells were measured on, each with its cell count.
    pub base_builds: Vec<(String, usize)>,
    /// The engine builds NEW's cells were measured on, each with its cell count.
    pub new_builds: Vec<(String, usize)>,
}

/// The engine builds of `set`'s cells, in the order first seen, with
/// their cell counts (`unknown` for cells stored without one).
fn builds(set: &ResultSet) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for c in &set.cells {
        let v = c
            .engine_build
            .as_ref()
            .map_or_else(|| "unknown".to_string(), |b| b.version.clone());
        match out.iter_mut().find(|(b, _)| *b == v) {
            Some((_, n)) => *n += 1,
            None => out.push((v, 1)),
        }
    }
    out
}

/// `0.32.0 (12 cells)`, or several such joined.
fn builds_text(builds: &[(String, usize)]) -> String {
    if builds.is_empty() {
        return "no cells".into();
    }
    builds
        .iter()
        .map(|(v, n)| format!("{v} ({n} cells)"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a NEW cell's BASE counterpart was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MatchedBy {
    /// The same identity: every setting the same.
    #[serde(rename = "identity")]
    Identity,
    /// The same server id and cell name, with another identity.
    #[serde(rename = "server+cell")]
    ServerAndCell,
}

impl MatchedBy {
    /// The name in reports (`identity`, `server+cell`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::ServerAndCell => "server+cell",
        }
    }
}

/// Matched cells of one (server, point): how they were matched, BASE's and
/// NEW's, in matching pairs.
type Group<'a> = (MatchedBy, Vec<&'a CellResult>, Vec<&'a CellResult>);

fn point_of(c: &CellResult) -> String {
    let mut w = c.workload.clone();
    w.repetition = 0;
    w.cell_name()
}

/// Compare NEW against BASE.
pub fn compare(base: &ResultSet, new: &ResultSet, threshold: f64) -> Comparison {
    let by_id: HashMap<&str, &CellResult> = base
        .cells
        .iter()
        .map(|c| (c.identity.as_str(), c))
        .collect();
    let by_loc: HashMap<(&str, &str), &CellResult> = base
        .cells
        .iter()
        .map(|c| ((c.server_id.as_str(), c.cell_name.as_str()), c))
        .collect();
    let mut notes = Vec::new();
    let mut used: HashSet<(&str, &str)> = HashSet::new();
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    let mut changed_identity = 0usize;
    for n in &new.cells {
        // The same server and cell with the same identity first: exact
        // twins stored before twins were told apart share an identity, and
        // each is compared with itself, not with its twin.
        let here = by_loc
            .get(&(n.server_id.as_str(), n.cell_name.as_str()))
            .copied();
        let (b, how) = match (here, by_id.get(n.identity.as_str())) {
            (Some(b), _) if b.identity == n.identity => (b, MatchedBy::Identity),
            (_, Some(b)) => (*b, MatchedBy::Identity),
            (Some(b), None) => {
                changed_identity += 1;
                (b, MatchedBy::ServerAndCell)
            }
            (None, None) => {
                notes.push(format!("{}/{}: only in NEW", n.server_id, n.cell_name));
                continue;
            }
        };
        used.insert((b.server_id.as_str(), b.cell_name.as_str()));
        let g = groups
            .entry((n.server_id.clone(), point_of(n)))
            .or_insert_with(|| (how, Vec::new(), Vec::new()));
        if how != MatchedBy::Identity {
            g.0 = how;
        }
        g.1.push(b);
        g.2.push(n);
    }
    if changed_identity > 0 {
        notes.insert(
            0,
            format!("{changed_identity} cells matched by server id and cell name because their identity changed (a setting, the model or the engine version differs)"),
        );
    }
    for b in &base.cells {
        if !used.contains(&(b.server_id.as_str(), b.cell_name.as_str())) {
            notes.push(format!("{}/{}: only in BASE", b.server_id, b.cell_name));
        }
    }
    let mut rows = Vec::new();
    let mut regressions = 0;
    // A result file NEW cannot read is a cell that stopped working as far as
    // a CI gate can tell; one in BASE only weakens the comparison.
    for (file, err) in &new.unreadable {
        regressions += 1;
        notes.push(format!(
            "REGRESSION unreadable result in NEW: {file}: {err}"
        ));
    }
    for (file, err) in &base.unreadable {
        notes.push(format!(
            "unreadable result in BASE, not compared: {file}: {err}"
        ));
    }
    for ((server_id, point), (how, bs, ns)) in &groups {
        let ok_b: Vec<&&CellResult> = bs.iter().filter(|c| c.status.is_usable()).collect();
        let ok_n: Vec<&&CellResult> = ns.iter().filter(|c| c.status.is_usable()).collect();
        if !ok_b.is_empty() && ok_n.is_empty() {
            regressions += 1;
            let st: Vec<String> = ns.iter().map(|c| status_text(c)).collect();
            notes.push(format!(
                "REGRESSION {server_id}/{point}: measured in BASE, no usable measurement in NEW: {}",
                st.join(", ")
            ));
            continue;
        }
        if ok_b.is_empty() && !ok_n.is_empty() {
            notes.push(format!(
                "{server_id}/{point}: failed in BASE, measured in NEW"
            ));
            continue;
        }
        for m in METRICS {
            let ch = change_of(m, &ok_b, &ok_n, threshold);
            regressions += ch.regression as usize;
            rows.push(CompareRow {
                server_id: server_id.clone(),
                point: point.clone(),
                matched_by: *how,
                metric: m.name.to_string(),
                base: ch.base,
                new: ch.new,
                change: ch.change,
                limit: ch.limit,
                noise: ch.noise,
                regression: ch.regression,
            });
        }
    }
    let answers = answer_drops(base, new, &groups);
    regressions += answers.iter().filter(|a| a.regression).count();
    Comparison {
        rows,
        answers,
        notes,
        regressions,
        base_builds: builds(base),
        new_builds: builds(new),
    }
}

/// Per (server, measure), the answers of matched cells paired across the
/// two sets.
fn answer_drops(
    base: &ResultSet,
    new: &ResultSet,
    groups: &BTreeMap<(String, String), Group>,
) -> Vec<AnswerDrop> {
    let mut tally: BTreeMap<(String, String), Paired> = BTreeMap::new();
    let (agree_b, agree_n) = (agreement_of(base), agreement_of(new));
    for ((server, _), (_, bs, ns)) in groups {
        for (b, n) in bs.iter().zip(ns) {
            let kn = checks_by_kind(requests(n));
            for (kind, ob) in checks_by_kind(requests(b)) {
                if let Some(on) = kn.get(&kind) {
                    tally
                        .entry((server.clone(), format!("{kind} check")))
                        .or_default()
                        .add(&ob, on);
                }
            }
            if let (Some((name, ob)), Some((_, on))) = (agree_b(b), agree_n(n)) {
                tally
                    .entry((server.clone(), format!("agreement with `{name}`")))
                    .or_default()
                    .add(&ob, &on);
            }
        }
    }
    tally
        .into_iter()
        .map(|((server_id, measure), paired)| AnswerDrop {
            server_id,
            measure,
            paired,
            regression: paired.dropped(),
        })
        .collect()
}

fn requests(c: &CellResult) -> &[crate::client::record::RequestRecord] {
    c.summary.as_ref().map_or(&[][..], |s| &s.requests[..])
}

/// For a cell of `set`, its set's baseline and whether each answer is
/// that baseline's at the same point and repetition; nothing for the
/// baseline's own cells or without a baseline.
fn agreement_of(set: &ResultSet) -> impl Fn(&CellResult) -> Option<(String, Units)> + '_ {
    let baseline = set.meta.as_ref().and_then(|m| m.baseline.clone());
    let point = |c: &CellResult| (super::data::point_name(c), c.workload.repetition);
    let cells: HashMap<_, &CellResult> = set
        .cells
        .iter()
        .filter(|c| Some(&c.server_id) == baseline.as_ref() && c.status.is_usable())
        .map(|c| (point(c), c))
        .collect();
    move |c| {
        let b = baseline.as_ref().filter(|b| **b != c.server_id)?;
        let bc = cells.get(&point(c))?;
        Some((b.clone(), super::agreement::identical_by_unit(c, bc)))
    }
}

/// The comparison as a terminal table.
pub fn render(c: &Comparison) -> String {
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|r| {
            vec![
                r.server_id.clone(),
                r.point.clone(),
                r.metric.clone(),
                table::num(r.base, 2),
                table::num(r.new, 2),
                r.change
                    .map(|x| format!("{:+.1}%", x * 100.0))
                    .unwrap_or_else(|| "-".into()),
                format!("±{:.1}%", r.limit * 100.0),
                r.noise
                    .map(|x| format!("{:.1}%", x * 100.0))
                    .unwrap_or_else(|| "-".into()),
                r.matched_by.as_str().to_string(),
                if r.regression {
                    "REGRESSION".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    let mut out = table::render(
        &[
            "server",
            "point",
            "metric",
            "base",
            "new",
            "change",
            "limit",
            "noise",
            "matched by",
            "flag",
        ],
        &rows,
    );
    out.push_str(&format!(
        "engine build: BASE {}; NEW {}\n",
        builds_text(&c.base_builds),
        builds_text(&c.new_builds)
    ));
    for n in &c.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    for a in &c.answers {
        out.push_str(&format!(
            "answers: {}/{}: {}{}\n",
            a.server_id,
            a.measure,
            a.paired.text("BASE", "NEW"),
            if a.regression { " REGRESSION" } else { "" }
        ));
    }
    out.push_str(&format!(
        "{} regression(s) flagged (limit: the larger of the threshold and {NOISE_FACTOR} × the relative range across repetitions; answers: {})\n",
        c.regressions,
        super::checks::drop_rule()
    ));
    out
}
