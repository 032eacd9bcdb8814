//! Recommendations: the best config per SLO and workload family (goodput
//! per GPU) and per prompt kind at one stream (decode speed), each with an
//! interval, the runner-up and whether the two can be told apart.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::bootstrap::{bootstrap, median, SplitMix, BOOTSTRAP_RESAMPLES};
use super::model::{
    concurrency_of, decode_by, family_of, gpus_of, kind_of, load_text, slo_text, usable, Spread,
};
use crate::metrics::goodput::meets;
use crate::store::CellResult;
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
    /// The runner-up, when there is one.
    pub runner_up: Option<Ranked>,
    /// `confident` or `too close to call`.
    pub confidence: String,
    /// How the interval was obtained.
    pub interval: String,
    /// Candidates ranked.
    pub candidates: usize,
    /// What else the winner's server did wrong in this campaign.
    pub caveat: Option<String>,
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
    /// `confident` or `too close to call`.
    pub confidence: String,
    /// Requests behind the winner's median.
    pub requests: usize,
    /// What else the winner's server did wrong in this campaign.
    pub caveat: Option<String>,
}

fn overlaps(a: &Ranked, b: &Ranked) -> bool {
    a.low <= b.high && b.low <= a.high
}

/// The best config per SLO and workload family.
pub(super) fn slo_picks(cells: &[&CellResult], rng: &mut SplitMix) -> Vec<SloPick> {
    // (slo, family) → (server, load) → per-repetition (rate/GPU, share, cell)
    type Cand<'a> = Vec<(f64, f64, &'a CellResult, Slo)>;
    type ByConfig<'a> = BTreeMap<(usize, String, String), Cand<'a>>;
    let mut groups: BTreeMap<(String, String), ByConfig> = BTreeMap::new();
    let mut rank: HashMap<&str, usize> = HashMap::new();
    for c in cells.iter().filter(|c| usable(c.status)) {
        let n = rank.len();
        let r = *rank.entry(c.server_id.as_str()).or_insert(n);
        let Some(s) = &c.summary else { continue };
        for g in &s.goodput {
            groups
                .entry((slo_text(&g.slo), family_of(c)))
                .or_default()
                .entry((r, c.server_id.clone(), load_text(&c.workload.load)))
                .or_default()
                .push((g.rate_rps / gpus_of(c) as f64, g.share, c, g.slo));
        }
    }
    let mut out = Vec::new();
    for ((slo, family), cands) in groups {
        let mut ranked: Vec<(Ranked, f64, bool)> = cands
            .iter()
            .map(|((_, server, load), reps)| {
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
                    // Resample requests and re-estimate the rate as a ratio
                    // estimator: good requests per second of request time,
                    // scaled to the measured rate. Resampling only the
                    // good/bad flags would give no spread when every
                    // request met the SLO, however close the runner-up.
                    let pairs: Vec<(bool, f64)> = s
                        .requests
                        .iter()
                        .map(|r| (meets(r, &slo), r.e2e_ms.unwrap_or(0.0)))
                        .collect();
                    let busy: f64 = pairs.iter().map(|p| p.1).sum();
                    let scale = if s.duration_s > 0.0 && busy > 0.0 {
                        busy / s.duration_s / gpus_of(cell) as f64
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
                (
                    Ranked {
                        server_id: server.clone(),
                        load: load.clone(),
                        value: sp.mean,
                        low,
                        high,
                    },
                    share,
                    by_reps,
                )
            })
            .collect();
        ranked.sort_by(|a, b| b.0.value.total_cmp(&a.0.value));
        let Some((best, share, by_reps)) = ranked.first().cloned() else {
            continue;
        };
        if best.value <= 0.0 {
            continue;
        }
        let runner_up = ranked.get(1).map(|r| r.0.clone());
        let close = runner_up.as_ref().is_some_and(|r| overlaps(&best, r));
        out.push(SloPick {
            slo,
            family,
            best_share: share,
            runner_up,
            confidence: if close {
                "too close to call"
            } else {
                "confident"
            }
            .into(),
            interval: if by_reps {
                "min–max over repetitions".into()
            } else {
                format!("95% bootstrap over requests ({BOOTSTRAP_RESAMPLES} resamples, seeded)")
            },
            candidates: ranked.len(),
            caveat: caveat(cells, &best.server_id),
            best,
        });
    }
    out
}

/// A warning when the recommended server failed elsewhere in the campaign:
/// a config that crashes on some workloads is not a safe pick on the others.
fn caveat(cells: &[&CellResult], server: &str) -> Option<String> {
    let bad: Vec<String> = cells
        .iter()
        .filter(|c| c.server_id == server && !usable(c.status))
        .map(|c| {
            let class = c
                .failure
                .as_ref()
                .map(|f| format!(" ({})", f.class))
                .unwrap_or_default();
            format!("{} {}{class}", c.cell_name, c.status.as_str())
        })
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
pub(super) fn stream_picks(cells: &[&CellResult], rng: &mut SplitMix) -> Vec<StreamPick> {
    let mut rank: HashMap<&str, usize> = HashMap::new();
    for c in cells {
        let n = rank.len();
        rank.entry(c.server_id.as_str()).or_insert(n);
    }
    let groups = decode_by(cells, |c, r| {
        (concurrency_of(&c.workload.load) == Some(1))
            .then(|| (kind_of(r), rank[c.server_id.as_str()], c.server_id.clone()))
    });
    let mut by_kind: BTreeMap<String, Vec<(Ranked, usize)>> = BTreeMap::new();
    for ((kind, _, server), v) in &groups {
        let (low, high) = bootstrap(v, rng, median);
        by_kind.entry(kind.clone()).or_default().push((
            Ranked {
                server_id: server.clone(),
                load: "c1".into(),
                value: median(v),
                low,
                high,
            },
            v.len(),
        ));
    }
    by_kind
        .into_iter()
        .filter_map(|(kind, mut cands)| {
            cands.sort_by(|a, b| b.0.value.total_cmp(&a.0.value));
            let (best, requests) = cands.first().cloned()?;
            let runner_up = cands.get(1).map(|c| c.0.clone());
            let close = runner_up.as_ref().is_some_and(|r| overlaps(&best, r));
            let caveat = caveat(cells, &best.server_id);
            Some(StreamPick {
                kind,
                best,
                runner_up,
                confidence: if close {
                    "too close to call"
                } else {
                    "confident"
                }
                .into(),
                requests,
                caveat,
            })
        })
        .collect()
}
