//! Recommendations: the best config per SLO and workload family (goodput
//! per GPU) and per prompt kind at one stream (decode speed), each with an
//! interval, the runner-up and whether the two can be told apart.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::data::{concurrency_of, decode_by, family_of, kind_of, slo_text, status_text, Spread};
use crate::failure::FailureClass;
use crate::metrics::bootstrap::{bootstrap, median, SplitMix, BOOTSTRAP_RESAMPLES};
use crate::metrics::goodput::meets;
use crate::store::{CellResult, CellStatus};
use crate::util::units::Slo;

/// A candidate in a ranking, with its interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// Server config id.
    pub server_id: String,
    /// Load as text.
    pub load: String,
    /// The ranked value.
    pub value: f64,
    /// Lower end of its interval.
    pub low: f64,
    /// Upper end of its interval.
    pub high: f64,
    /// Mean requests in flight the ranked cells reached, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<f64>,
}

/// The best config for one SLO in one workload family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloPick {
    /// The SLO as written (`ttft<=200ms, tpot<=20ms`).
    pub slo: String,
    /// Workload family.
    pub family: String,
    /// The winner: goodput per GPU, requests/s.
    pub best: Ranked,
    /// Share of the winner's requests meeting the SLO.
    pub best_share: f64,
    /// The share of a point's requests that had to meet every bound for
    /// the point to be ranked (the SLO's attainment).
    #[serde(default = "default_attainment")]
    pub attainment: f64,
    /// The runner-up, when there is one.
    pub runner_up: Option<Ranked>,
    /// Whether the winner's interval clears the runner-up's.
    pub confidence: Confidence,
    /// How the interval was obtained.
    pub interval: String,
    /// Candidates ranked.
    pub candidates: usize,
    /// What else the winner's server did wrong in this campaign.
    pub caveat: Option<String>,
    /// Configs left out because they crashed in this workload family.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<Excluded>,
    /// The baseline's best entry in the same ranking, for the speedup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Ranked>,
}

fn default_attainment() -> f64 {
    crate::util::units::DEFAULT_ATTAINMENT
}

/// An SLO that no point met at its attainment, in one workload family:
/// nothing is deployed on it, and the closest point says by how much.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloMiss {
    /// The SLO as written.
    pub slo: String,
    /// Workload family.
    pub family: String,
    /// The share of requests each point had to keep within every bound.
    pub attainment: f64,
    /// The point with the largest share, its goodput per GPU as value.
    pub closest: Ranked,
    /// That point's share of requests within every bound.
    pub closest_share: f64,
}

/// A config not ranked for a pick: its server crashed under the same
/// workload family (its other numbers there are from before the crash), or
/// its answers there were degenerate or not the baseline's (a speed of
/// wrong answers is no speed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    /// Server config id.
    pub server_id: String,
    /// The cells of the family it crashed in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crashed_in: Vec<String>,
    /// The cells of the family whose answers were degenerate or mismatched
    /// the baseline's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong_answers_in: Vec<String>,
}

/// The fastest single-stream config for one prompt kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamPick {
    /// Prompt kind.
    pub kind: String,
    /// The winner: median per-request decode speed at concurrency 1, tokens/s.
    pub best: Ranked,
    /// The runner-up.
    pub runner_up: Option<Ranked>,
    /// Whether the winner's interval clears the runner-up's.
    pub confidence: Confidence,
    /// Requests behind the winner's median.
    pub requests: usize,
    /// What else the winner's server did wrong in this campaign.
    pub caveat: Option<String>,
    /// Configs left out because they crashed in a family these requests came from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<Excluded>,
    /// The baseline's entry in the same ranking, for the speedup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Ranked>,
}

/// The generator of one candidate's interval: the report's seed mixed with
/// what the candidate is, so its interval is the same whatever else the
/// results hold (a run that measured part of a campaign and the whole
/// campaign give the same answer over the same cells).
fn rng_for(seed: u64, key: &[&str]) -> SplitMix {
    // FNV-1a over the key's parts, each ended by a separator.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in key {
        for b in part.bytes().chain([0xff]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    SplitMix::new(crate::util::rng::derive_seed(seed, h))
}

/// Whether two entries' intervals overlap: their order is within the noise.
pub(super) fn overlaps(a: &Ranked, b: &Ranked) -> bool {
    a.low <= b.high && b.low <= a.high
}

/// Whether a pick's winner stands apart from its runner-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Confidence {
    /// The winner's interval clears the runner-up's (or there is none).
    #[serde(rename = "confident")]
    Confident,
    /// The two intervals overlap.
    #[serde(rename = "too close to call")]
    TooCloseToCall,
}

impl std::fmt::Display for Confidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Confident => "confident",
            Self::TooCloseToCall => "too close to call",
        })
    }
}

/// Whether the winner's interval clears the runner-up's.
fn confidence(best: &Ranked, runner_up: Option<&Ranked>) -> Confidence {
    if runner_up.is_some_and(|r| overlaps(best, r)) {
        Confidence::TooCloseToCall
    } else {
        Confidence::Confident
    }
}

/// Per server, the families of some cells and those cells.
type Crashes = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The cells that pass `keep`, per server and family.
fn by_server_and_family(cells: &[&CellResult], keep: impl Fn(&CellResult) -> bool) -> Crashes {
    let mut out = Crashes::new();
    for c in cells.iter().filter(|c| keep(c)) {
        out.entry(c.server_id.clone())
            .or_default()
            .entry(family_of(c))
            .or_default()
            .push(c.cell_name.clone());
    }
    out
}

fn crashes(cells: &[&CellResult]) -> Crashes {
    // Cells left unrun by the crash carry its class too; only the cell
    // that was running when it died is where it crashed.
    by_server_and_family(cells, |c| {
        c.status == CellStatus::Failed
            && c.failure
                .as_ref()
                .is_some_and(|f| f.class == FailureClass::Crashed)
    })
}

fn wrong_answers(cells: &[&CellResult]) -> Crashes {
    by_server_and_family(cells, |c| {
        c.failure.as_ref().is_some_and(|f| {
            matches!(
                f.class,
                FailureClass::DegenerateOutput
                    | FailureClass::OutputMismatch
                    | FailureClass::WrongAnswers
            )
        })
    })
}

/// The servers left out of a pick over `families`: those that crashed there
/// (unless `include_crashed`) and those whose answers were wrong there.
fn left_out(
    (crashes, wrong): (&Crashes, &Crashes),
    families: &BTreeSet<String>,
    include_crashed: bool,
) -> Vec<Excluded> {
    let cells_in = |by: &Crashes, server: &str| -> Vec<String> {
        by.get(server)
            .into_iter()
            .flatten()
            .filter(|(f, _)| families.contains(*f))
            .flat_map(|(_, c)| c.iter().cloned())
            .collect()
    };
    let servers: BTreeSet<&String> = crashes.keys().chain(wrong.keys()).collect();
    servers
        .into_iter()
        .filter_map(|server| {
            let crashed_in = if include_crashed {
                Vec::new()
            } else {
                cells_in(crashes, server)
            };
            let wrong_answers_in = cells_in(wrong, server);
            (!crashed_in.is_empty() || !wrong_answers_in.is_empty()).then(|| Excluded {
                server_id: server.clone(),
                crashed_in,
                wrong_answers_in,
            })
        })
        .collect()
}

/// The best config per SLO and workload family, ranked by goodput per GPU
/// among the points whose share of requests within the SLO reaches its
/// attainment; and the SLOs no point met.
pub(super) fn slo_picks(
    cells: &[&CellResult],
    seed: u64,
    include_crashed: bool,
    baseline: Option<&str>,
) -> (Vec<SloPick>, Vec<SloMiss>) {
    let (crashes, wrong) = (crashes(cells), wrong_answers(cells));
    // (slo, family) → (server, load) → per-repetition (rate/GPU, share, cell)
    type ByConfig<'a> = BTreeMap<(usize, String, String), Cand<'a>>;
    let mut groups: BTreeMap<(String, String), ByConfig> = BTreeMap::new();
    let mut rank: HashMap<&str, usize> = HashMap::new();
    for c in cells.iter().filter(|c| c.status.is_usable()) {
        let n = rank.len();
        let r = *rank.entry(c.server_id.as_str()).or_insert(n);
        let Some(s) = &c.summary else { continue };
        for g in &s.goodput {
            groups
                .entry((slo_text(&g.slo), family_of(c)))
                .or_default()
                .entry((r, c.server_id.clone(), c.workload.load.label_rounded()))
                .or_default()
                .push((g.rate_rps / f64::from(c.server.gpus()), g.share, c, g.slo));
        }
    }
    let (mut out, mut misses) = (Vec::new(), Vec::new());
    for ((slo, family), cands) in groups {
        let attainment = cands
            .values()
            .flatten()
            .next()
            .map_or(default_attainment(), |r| r.3.attainment_needed());
        let mut excluded = left_out(
            (&crashes, &wrong),
            &BTreeSet::from([family.clone()]),
            include_crashed,
        );
        // A crash matters where the server is still a candidate; wrong
        // answers are said even when no usable cell is left to rank.
        excluded.retain(|e| {
            !e.wrong_answers_in.is_empty() || cands.keys().any(|(_, s, _)| *s == e.server_id)
        });
        let mut ranked: Vec<(Ranked, f64, bool)> = cands
            .iter()
            .filter(|((_, server, _), _)| !excluded.iter().any(|e| &e.server_id == server))
            .map(|((_, server, load), reps)| {
                let mut rng = rng_for(seed, &[&slo, &family, server, load]);
                ranked_point(server, load, reps, &mut rng)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.value.total_cmp(&a.0.value));
        // A point meets the SLO only when enough of its requests do.
        let (ranked, short): (Vec<_>, Vec<_>) =
            ranked.into_iter().partition(|r| r.1 + 1e-9 >= attainment);
        let Some((best, share, by_reps)) = ranked.first().cloned().filter(|b| b.0.value > 0.0)
        else {
            if let Some(c) = short.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
                misses.push(SloMiss {
                    slo,
                    family,
                    attainment,
                    closest: c.0.clone(),
                    closest_share: c.1,
                });
            }
            continue;
        };
        // The runner-up is another config, not the winner at another load.
        let runner_up = ranked
            .iter()
            .find(|r| r.0.server_id != best.server_id)
            .map(|r| r.0.clone());
        out.push(SloPick {
            slo,
            family,
            best_share: share,
            attainment,
            confidence: confidence(&best, runner_up.as_ref()),
            runner_up,
            interval: if by_reps {
                "min–max over repetitions".into()
            } else {
                format!("95% bootstrap over requests ({BOOTSTRAP_RESAMPLES} resamples, seeded)")
            },
            candidates: ranked.len(),
            caveat: caveat(cells, &best.server_id),
            baseline: ranked
                .iter()
                .find(|r| Some(r.0.server_id.as_str()) == baseline)
                .map(|r| r.0.clone()),
            best,
            excluded,
        });
    }
    (out, misses)
}

/// One point's repetitions: (goodput per GPU, share within the SLO, the
/// cell, the SLO) each.
type Cand<'a> = Vec<(f64, f64, &'a CellResult, Slo)>;

/// A point of a SLO ranking from its repetitions: its mean goodput per GPU
/// with an interval (min–max over repetitions, else a bootstrap over its
/// requests), its mean share within the SLO, and whether the interval came
/// from repetitions.
fn ranked_point(server: &str, load: &str, reps: &Cand, rng: &mut SplitMix) -> (Ranked, f64, bool) {
    let values: Vec<f64> = reps.iter().map(|r| r.0).collect();
    let sp = Spread::of(values.iter().copied()).unwrap_or(Spread {
        n: 0,
        mean: 0.0,
        min: 0.0,
        max: 0.0,
    });
    let share = reps.iter().map(|r| r.1).sum::<f64>() / reps.len() as f64;
    let (low, high, by_reps) = if reps.len() >= 2 {
        (sp.min, sp.max, true)
    } else {
        let (cell, slo) = (reps[0].2, reps[0].3);
        let s = cell.summary.as_ref().expect("usable cells have a summary");
        // Resample requests and re-estimate the rate as a ratio estimator:
        // good requests per second of request time, scaled to the measured
        // rate. Resampling only the good/bad flags would give no spread
        // when every request met the SLO, however close the runner-up.
        let pairs: Vec<(bool, f64)> = s
            .requests
            .iter()
            .map(|r| (meets(r, &slo), r.e2e_ms.unwrap_or(0.0)))
            .collect();
        let busy: f64 = pairs.iter().map(|p| p.1).sum();
        let scale = if s.duration_s > 0.0 && busy > 0.0 {
            busy / s.duration_s / f64::from(cell.server.gpus())
        } else {
            0.0
        };
        let (l, h) = bootstrap(&pairs, rng, |g| {
            let t: f64 = g.iter().map(|p| p.1).sum();
            let good = g.iter().filter(|p| p.0).count() as f64;
            if t > 0.0 {
                good / t * scale
            } else {
                0.0
            }
        });
        (l, h, false)
    };
    let reached: Vec<f64> = reps
        .iter()
        .filter_map(|r| Some(r.2.summary.as_ref()?.in_flight?.mean))
        .collect();
    (
        Ranked {
            server_id: server.to_string(),
            load: load.to_string(),
            value: sp.mean,
            low,
            high,
            in_flight: (!reached.is_empty())
                .then(|| reached.iter().sum::<f64>() / reached.len() as f64),
        },
        share,
        by_reps,
    )
}

/// A warning when the recommended server failed elsewhere in the campaign:
/// a config that crashes on some workloads is not a safe pick on the others.
fn caveat(cells: &[&CellResult], server: &str) -> Option<String> {
    let bad: Vec<String> = cells
        .iter()
        .filter(|c| c.server_id == server && !c.status.is_usable())
        .map(|c| format!("{} {}", c.cell_name, status_text(c)))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "but `{server}` has {} unusable cells: {}",
            bad.len(),
            bad.join(", ")
        )
    })
}

/// The fastest single-stream config per prompt kind.
pub(super) fn stream_picks(
    cells: &[&CellResult],
    seed: u64,
    include_crashed: bool,
    baseline: Option<&str>,
) -> Vec<StreamPick> {
    let (crashes, wrong) = (crashes(cells), wrong_answers(cells));
    let mut families: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut rank: HashMap<&str, usize> = HashMap::new();
    for c in cells {
        let n = rank.len();
        rank.entry(c.server_id.as_str()).or_insert(n);
    }
    let groups = decode_by(cells, |c, r| {
        (concurrency_of(&c.workload.load) == Some(1))
            .then(|| (kind_of(r), rank[c.server_id.as_str()], c.server_id.clone()))
    });
    // The families each kind's single-stream requests came from.
    for c in cells {
        if concurrency_of(&c.workload.load) == Some(1) {
            for r in c.summary.iter().flat_map(|s| &s.requests) {
                families.entry(kind_of(r)).or_default().insert(family_of(c));
            }
        }
    }
    let mut by_kind: BTreeMap<String, Vec<(Ranked, usize)>> = BTreeMap::new();
    for ((kind, _, server), v) in &groups {
        let (low, high) = bootstrap(v, &mut rng_for(seed, &["c1", kind, server]), median);
        by_kind.entry(kind.clone()).or_default().push((
            Ranked {
                server_id: server.clone(),
                load: "c1".into(),
                value: median(v),
                low,
                high,
                in_flight: None,
            },
            v.len(),
        ));
    }
    by_kind
        .into_iter()
        .filter_map(|(kind, mut cands)| {
            let mut excluded = match families.get(&kind) {
                Some(f) => left_out((&crashes, &wrong), f, include_crashed),
                None => Vec::new(),
            };
            excluded.retain(|e| {
                !e.wrong_answers_in.is_empty() || cands.iter().any(|c| c.0.server_id == e.server_id)
            });
            cands.retain(|c| !excluded.iter().any(|e| e.server_id == c.0.server_id));
            cands.sort_by(|a, b| b.0.value.total_cmp(&a.0.value));
            let (best, requests) = cands.first().cloned()?;
            let runner_up = cands.get(1).map(|c| c.0.clone());
            let caveat = caveat(cells, &best.server_id);
            let baseline = cands
                .iter()
                .find(|c| Some(c.0.server_id.as_str()) == baseline)
                .map(|c| c.0.clone());
            Some(StreamPick {
                kind,
                baseline,
                confidence: confidence(&best, runner_up.as_ref()),
                best,
                runner_up,
                requests,
                caveat,
                excluded,
            })
        })
        .collect()
}
