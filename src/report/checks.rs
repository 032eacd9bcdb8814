//! Pass rates of checkable answers (see `workload::answer_check`), per
//! server and prompt kind, against the baseline's answers to the same
//! prompts.
//!
//! Answers are paired as in [`super::agreement`]: unit *i* (turn *t*) of a
//! cell asked what unit *i* of the baseline's cell at the same point and
//! repetition asked. Over every pair of one kind where both answers were
//! checked, a **loss** is a pair the baseline passes and the server fails,
//! a **win** the reverse. A server's answers to a kind are **clearly worse**
//! when both hold:
//!
//! - the pass rate drops by at least [`MIN_DROP`] of the pairs
//!   ((losses − wins) / pairs), so a large campaign does not flag a
//!   negligible drop;
//! - a one-sided exact sign test over the pairs that differ gives
//!   p < [`MAX_P`]: a fair coin would rarely lose that often, so a few
//!   unlucky answers in a small cell do not flag a config.
//!
//! Each of that server's cells with checked answers of that kind is then
//! `suspicious` with class `wrong_answers` in the report, and ranks nowhere.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::client::record::RequestRecord;
use crate::failure::{Failure, FailureClass};
use crate::store::CellResult;

/// Smallest pass-rate drop, as a share of the pairs, that can flag a kind.
pub const MIN_DROP: f64 = 0.10;

/// Largest sign-test p-value that can flag a kind.
pub const MAX_P: f64 = 0.05;

/// One server's checked answers of one prompt kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindCheck {
    /// Prompt kind.
    pub kind: String,
    /// Answers checked (for another server than the baseline: those paired
    /// with a checked baseline answer).
    pub checked: usize,
    /// Of those, answers that passed.
    pub passed: usize,
    /// The baseline's answers to the same prompts that passed; absent for
    /// the baseline itself.
    pub baseline_passed: Option<usize>,
    /// Pairs the baseline passes and this server fails.
    pub losses: usize,
    /// Pairs this server passes and the baseline fails.
    pub wins: usize,
    /// One-sided sign-test p-value of the losses against the wins.
    pub p_value: Option<f64>,
    /// Whether the answers are clearly worse than the baseline's.
    pub flagged: bool,
    /// The first failed answers' reasons (at most [`FAILURES_SHOWN`]), each
    /// with its cell and unit: "cell #unit: expected … found …".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

/// Failed answers of a kind whose reasons a report shows.
pub const FAILURES_SHOWN: usize = 3;

impl KindCheck {
    /// The kind's figures in words.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}: {} of {} answers pass their check",
            self.kind, self.passed, self.checked
        );
        if let Some(b) = self.baseline_passed {
            s.push_str(&format!(
                " (baseline {b} of {} on the same prompts",
                self.checked
            ));
            if let Some(p) = self.p_value.filter(|_| self.losses > self.wins) {
                s.push_str(&format!(", sign test p = {p:.3}"));
            }
            s.push(')');
        }
        if self.flagged {
            s.push_str(", clearly worse: wrong_answers, not ranked");
        }
        if !self.failures.is_empty() {
            s.push_str(&format!(" (first failures: {})", self.failures.join("; ")));
        }
        s
    }
}

/// Whether `losses` against `wins` over `pairs` paired answers is a clear
/// drop: at least [`MIN_DROP`] of the pairs, and sign-test p < [`MAX_P`].
pub fn clearly_worse(pairs: usize, losses: usize, wins: usize) -> bool {
    pairs > 0
        && losses > wins
        && (losses - wins) as f64 >= MIN_DROP * pairs as f64
        && sign_test(losses, losses + wins) < MAX_P
}

/// P(X ≥ k) for X ~ Binomial(n, ½): the chance a fair coin loses at least
/// `k` of `n` differing pairs.
pub fn sign_test(k: usize, n: usize) -> f64 {
    if k == 0 {
        return 1.0;
    }
    // In logs: ½ⁿ underflows past n ≈ 1074.
    let mut log_pmf = -(n as f64) * std::f64::consts::LN_2;
    let mut tail = 0.0;
    for i in 1..=n {
        log_pmf += ((n - i + 1) as f64 / i as f64).ln();
        if i >= k {
            tail += log_pmf.exp();
        }
    }
    tail.min(1.0)
}

/// The checked answers of a campaign, judged.
#[derive(Debug, Clone, Default)]
pub struct Checks {
    /// Per server, its checked answers by kind (no entry without a checked
    /// answer).
    pub by_server: BTreeMap<String, Vec<KindCheck>>,
    /// The failure of each cell that counts against a clearly worse kind,
    /// by (server, identity).
    pub failures: HashMap<(String, String), Failure>,
}

/// Judge every server's checked answers against the baseline's; nothing
/// without a baseline.
pub fn judge(servers: &[String], cells: &[&CellResult], baseline: Option<&str>) -> Checks {
    let mut rows = BTreeMap::new();
    let mut failures = HashMap::new();
    let Some(b) = baseline else {
        return Checks::default();
    };
    let point = |c: &CellResult| (super::data::point_name(c), c.workload.repetition);
    let base: HashMap<_, &CellResult> = cells
        .iter()
        .filter(|c| c.server_id == b && c.status.is_usable())
        .map(|c| (point(c), *c))
        .collect();
    for s in servers {
        let is_base = s == b;
        // Per kind: the server's answers paired with the baseline's, over
        // the campaign and per cell. The baseline's own are paired with
        // themselves: its checked and passed counts.
        let mut total: BTreeMap<String, Paired> = BTreeMap::new();
        let mut per_cell: Vec<(&CellResult, String, Paired)> = Vec::new();
        let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in cells.iter().filter(|c| &c.server_id == s) {
            let Some(summary) = &c.summary else { continue };
            for (kind, why) in failure_reasons(c, &summary.requests) {
                let shown = reasons.entry(kind).or_default();
                if shown.len() < FAILURES_SHOWN {
                    shown.push(why);
                }
            }
            let theirs = base
                .get(&point(c))
                .filter(|_| !is_base)
                .and_then(|bc| bc.summary.as_ref())
                .map(|bs| checks_by_kind(&bs.requests))
                .unwrap_or_default();
            for (kind, now) in checks_by_kind(&summary.requests) {
                let then = if is_base {
                    Some(&now)
                } else {
                    theirs.get(&kind)
                };
                let mut p = Paired::default();
                p.add(then.unwrap_or(&Units::new()), &now);
                if p.pairs == 0 {
                    continue;
                }
                total.entry(kind.clone()).or_default().merge(&p);
                per_cell.push((c, kind, p));
            }
        }
        let kinds: Vec<KindCheck> = total
            .iter()
            .map(|(kind, t)| KindCheck {
                kind: kind.clone(),
                checked: t.pairs,
                passed: t.new_passed,
                baseline_passed: (!is_base).then_some(t.base_passed),
                losses: t.losses,
                wins: t.wins,
                p_value: (!is_base).then(|| t.p_value()),
                flagged: !is_base && t.dropped(),
                failures: reasons.remove(kind).unwrap_or_default(),
            })
            .collect();
        for (c, kind, t) in per_cell {
            let Some(k) = kinds.iter().find(|k| k.kind == kind && k.flagged) else {
                continue;
            };
            let detail = format!(
                "{kind} answers fail their check: {} of {} pass here, the baseline's {} of {} to the same prompts; over the campaign {} of {} against the baseline's {} (sign test p = {:.3})",
                t.new_passed, t.pairs, t.base_passed, t.pairs, k.passed, k.checked,
                k.baseline_passed.unwrap_or(0), k.p_value.unwrap_or(1.0)
            );
            failures
                .entry((s.clone(), c.identity.clone()))
                .or_insert_with(|| Failure::new(FailureClass::WrongAnswers, detail));
        }
        if !kinds.is_empty() {
            rows.insert(s.clone(), kinds);
        }
    }
    Checks {
        by_server: rows,
        failures,
    }
}

/// Outcomes (passed or not) by unit of work (index, turn).
pub type Units = HashMap<(u64, Option<u32>), bool>;

/// One measure's pass or fail outcomes paired across two runs of the same
/// prompts (BASE, then NEW).
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize)]
pub struct Paired {
    /// Units with an outcome in both.
    pub pairs: usize,
    /// Of those, passes in BASE.
    pub base_passed: usize,
    /// Of those, passes in NEW.
    pub new_passed: usize,
    /// Passed in BASE, failed in NEW.
    pub losses: usize,
    /// Failed in BASE, passed in NEW.
    pub wins: usize,
}

impl Paired {
    /// Add every unit with an outcome in both.
    pub fn add(&mut self, base: &Units, new: &Units) {
        for (unit, b) in base {
            let Some(n) = new.get(unit) else { continue };
            self.pairs += 1;
            self.base_passed += *b as usize;
            self.new_passed += *n as usize;
            self.losses += (*b && !n) as usize;
            self.wins += (*n && !b) as usize;
        }
    }

    /// Add another tally of the same measure.
    pub fn merge(&mut self, o: &Paired) {
        self.pairs += o.pairs;
        self.base_passed += o.base_passed;
        self.new_passed += o.new_passed;
        self.losses += o.losses;
        self.wins += o.wins;
    }

    /// One-sided sign-test p-value of the losses against the wins.
    pub fn p_value(&self) -> f64 {
        sign_test(self.losses, self.losses + self.wins)
    }

    /// Whether NEW is clearly worse ([`clearly_worse`]).
    pub fn dropped(&self) -> bool {
        clearly_worse(self.pairs, self.losses, self.wins)
    }

    /// The figures in words: "6 of 6 pass in BASE, 0 in NEW on the same
    /// prompts (6 lost, 0 gained, sign test p = 0.016)".
    pub fn text(&self, base: &str, new: &str) -> String {
        let p = if self.losses > self.wins {
            format!(", sign test p = {:.3}", self.p_value())
        } else {
            String::new()
        };
        format!(
            "{} of {} pass in {base}, {} in {new} on the same prompts ({} lost, {} gained{p})",
            self.base_passed, self.pairs, self.new_passed, self.losses, self.wins
        )
    }
}

/// The checked, completed answers of `requests`, by prompt kind.
pub fn checks_by_kind(requests: &[RequestRecord]) -> BTreeMap<String, Units> {
    let mut out: BTreeMap<String, Units> = BTreeMap::new();
    for r in requests.iter().filter(|r| r.is_ok()) {
        if let (Some(kind), Some(i), Some(pass)) = (&r.label, r.index, r.answer_check) {
            out.entry(kind.clone())
                .or_default()
                .insert((i, r.turn), pass);
        }
    }
    out
}

/// The failed, completed answers of a cell with their reasons, by prompt
/// kind, in unit order: "cell #unit: reason".
fn failure_reasons(c: &CellResult, requests: &[RequestRecord]) -> Vec<(String, String)> {
    let mut failed: Vec<&RequestRecord> = requests
        .iter()
        .filter(|r| r.is_ok() && r.answer_check == Some(false))
        .collect();
    failed.sort_by_key(|r| (r.index, r.turn));
    failed
        .into_iter()
        .filter_map(|r| {
            let kind = r.label.clone()?;
            let why = r.answer_reason.as_deref().unwrap_or("no reason recorded");
            let unit = r.index.map_or(String::new(), |i| format!(" #{i}"));
            Some((kind, format!("{}{unit}: {why}", c.cell_name)))
        })
        .collect()
}

/// The rule for a clear drop, in a phrase.
pub fn drop_rule() -> String {
    format!(
        "a pass rate at least {:.0} points lower and sign-test p < {MAX_P} over the same prompts",
        100.0 * MIN_DROP
    )
}

/// The rule by which a kind is flagged, in one sentence.
pub fn rule() -> String {
    format!(
        "Arithmetic answers must give the asked figures as their final answer (after a final-answer phrase, else the last number or the last sentence with a number) and JSON-extraction answers must end in JSON holding the reference's values; a server's answers of a kind are clearly worse than the baseline's when, over the same prompts, its pass rate is at least {:.0} points lower and a one-sided sign test on the answers where the two differ gives p < {MAX_P}.",
        100.0 * MIN_DROP
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_test_is_the_binomial_tail() {
        assert_eq!(sign_test(0, 5), 1.0);
        assert!((sign_test(5, 5) - 1.0 / 32.0).abs() < 1e-12);
        // P(X ≥ 4 | 5) = 6 / 32.
        assert!((sign_test(4, 5) - 6.0 / 32.0).abs() < 1e-12);
        // Large n does not underflow: P(X ≥ 1000 | 2000) is just over ½.
        let p = sign_test(1000, 2000);
        assert!(p > 0.5 && p < 0.51, "{p}");
    }

    #[test]
    fn a_kind_is_flagged_only_when_the_drop_is_both_large_and_unlikely_by_chance() {
        let t = |pairs, losses, wins| Paired {
            pairs,
            losses,
            wins,
            ..Default::default()
        };
        // Eight of eight lost: p = 1/256.
        assert!(t(8, 8, 0).dropped());
        // Four lost: p = 1/16, not below 0.05.
        assert!(!t(8, 4, 0).dropped());
        // Significant but tiny: 30 lost in 1000 pairs, 5 won.
        assert!(t(1000, 30, 5).p_value() < MAX_P);
        assert!(!t(1000, 30, 5).dropped());
        // As many won as lost.
        assert!(!t(20, 6, 6).dropped());
    }
}
