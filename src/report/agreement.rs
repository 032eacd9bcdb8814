//! Whether a server answers what the baseline answers.
//!
//! Requests are greedy (temperature 0) and every server gets the same
//! prompts at the same workload point and repetition: the request that was
//! unit *i* of a cell's work (and turn *t* of a session) asked what unit *i*
//! (turn *t*) of the baseline's cell at that point asked, whatever order
//! concurrent requests were sent in. Speculative decoding under greedy sampling is meant
//! to be lossless: its answers should be the baseline's.
//!
//! Per pair of completed answers: identical when their digests are equal;
//! otherwise, where their texts were kept, the first word at which they
//! differ. Batching and kernel choice may change a late token (numeric
//! drift), so one divergence, or many late ones, is no alarm. A cell
//! **mismatches** the baseline when at least [`MISMATCH_MIN_SHARE`] of its
//! compared answers, and at least [`MISMATCH_MIN_EARLY`], diverge within
//! their first [`EARLY_WORDS`] words: a broken kernel departs early and in
//! most answers, drift late and in few.
//! Answers compared only by digest (text past the kept sample) count as
//! compared and, when different, as diverged at an unknown place, never as
//! early.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::client::record::{OutputText, RequestRecord};
use crate::failure::{Failure, FailureClass};
use crate::store::CellResult;

/// Answers that differ before this word diverged early.
pub const EARLY_WORDS: usize = 16;

/// Smallest share of early divergences that makes a cell mismatch.
pub const MISMATCH_MIN_SHARE: f64 = 0.5;

/// Fewest early divergences that make a cell mismatch: in a cell of two
/// answers, one close call that flips an early token (batching drift on a
/// near tie, seen on real vLLM at c2) is no broken kernel.
pub const MISMATCH_MIN_EARLY: usize = 3;

/// A cell's answers against the baseline's at the same point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Answer pairs compared (both completed, both with a digest).
    pub compared: usize,
    /// Pairs with identical answers.
    pub identical: usize,
    /// Pairs that differ within the first [`EARLY_WORDS`] words.
    pub early: usize,
    /// First differing word of each pair whose texts were both kept and differ.
    pub divergence_words: Vec<usize>,
    /// Where the first early divergence shows: (this server's, the
    /// baseline's) text from a little before the differing word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<(String, String)>,
}

impl Agreement {
    /// Share of compared answers identical to the baseline's.
    pub fn identical_share(&self) -> Option<f64> {
        (self.compared > 0).then(|| self.identical as f64 / self.compared as f64)
    }

    /// The mismatch, with its evidence, when the rule says the answers are
    /// not the baseline's.
    pub fn mismatch(&self, baseline: &str) -> Option<Failure> {
        if self.compared == 0
            || self.early < MISMATCH_MIN_EARLY
            || (self.early as f64) < MISMATCH_MIN_SHARE * self.compared as f64
        {
            return None;
        }
        let (mine, theirs) = self.excerpt.clone().unwrap_or_default();
        Some(Failure::new(
            FailureClass::OutputMismatch,
            format!(
                "{} of {} answers differ from baseline `{baseline}`'s within their first {EARLY_WORDS} words ({} identical); first: \"{mine}\" where the baseline has \"{theirs}\"",
                self.early, self.compared, self.identical
            ),
        ))
    }
}

/// Each cell's agreement with the baseline and its mismatch, by (server, identity).
pub type Agreements = HashMap<(String, String), (Agreement, Option<Failure>)>;

/// Each usable cell's agreement with the baseline's usable cell at the same
/// point and repetition, with its mismatch when there is one, by (server,
/// identity): an exact twin of the baseline stored before twins were told
/// apart shares its identities.
pub fn judge_cells(cells: &[&CellResult], baseline: Option<&str>) -> Agreements {
    let mut out = HashMap::new();
    let Some(b) = baseline else {
        return out;
    };
    let point = |c: &CellResult| (super::data::point_name(c), c.workload.repetition);
    let base: HashMap<_, &CellResult> = cells
        .iter()
        .filter(|c| c.server_id == b && c.status.is_usable())
        .map(|c| (point(c), *c))
        .collect();
    for c in cells
        .iter()
        .filter(|c| c.server_id != b && c.status.is_usable())
    {
        let Some(a) = base.get(&point(c)).and_then(|bc| compare(c, bc)) else {
            continue;
        };
        let f = a.mismatch(b);
        out.insert((c.server_id.clone(), c.identity.clone()), (a, f));
    }
    out
}

/// One server's answers over the whole campaign: how many agreed with the
/// baseline's and how many cells were judged wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRow {
    /// Server config id.
    pub server_id: String,
    /// Whether this is the baseline (the reference, compared with nothing).
    pub baseline: bool,
    /// Cells whose answers were compared with the baseline's.
    pub cells_compared: usize,
    /// Answer pairs compared over those cells.
    pub answers_compared: usize,
    /// Pairs with identical answers.
    pub identical: usize,
    /// Pairs that differ within the first [`EARLY_WORDS`] words.
    pub early: usize,
    /// Median first differing word over the pairs that differ, where kept.
    pub divergence_word_p50: Option<usize>,
    /// Cells judged `output_mismatch`.
    pub mismatched_cells: usize,
    /// Cells judged `degenerate_output` when they ran.
    pub degenerate_cells: usize,
    /// Its checked answers by prompt kind, against the baseline's.
    pub checks: Vec<super::checks::KindCheck>,
    /// Cells judged `wrong_answers`.
    pub wrong_answer_cells: usize,
}

impl AnswerRow {
    /// The row as one sentence, for the terminal and the pages.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        if self.baseline {
            parts.push("the baseline: its answers are the reference".to_string());
        } else if self.answers_compared > 0 {
            parts.push(format!(
                "{:.0}% of {} answers identical to the baseline's over {} cells",
                100.0 * self.identical as f64 / self.answers_compared as f64,
                self.answers_compared,
                self.cells_compared
            ));
            if self.early > 0 {
                parts.push(format!(
                    "{} differ within their first {EARLY_WORDS} words",
                    self.early
                ));
            }
            if let Some(w) = self.divergence_word_p50 {
                parts.push(format!("differing answers part at word {w} (median)"));
            }
        } else {
            parts.push("no answers compared with the baseline's".to_string());
        }
        if self.mismatched_cells > 0 {
            parts.push(format!(
                "{} cells output_mismatch (not ranked)",
                self.mismatched_cells
            ));
        }
        if self.degenerate_cells > 0 {
            parts.push(format!(
                "{} cells degenerate_output (not ranked)",
                self.degenerate_cells
            ));
        }
        parts.extend(self.checks.iter().map(|k| k.text()));
        if self.wrong_answer_cells > 0 {
            parts.push(format!(
                "{} cells wrong_answers (not ranked)",
                self.wrong_answer_cells
            ));
        }
        format!("`{}`: {}", self.server_id, parts.join("; "))
    }
}

/// Per server, its agreement with the baseline summed over its cells, its
/// checked answers and its cells judged wrong; no rows without a baseline.
pub fn answer_rows(
    servers: &[String],
    baseline: Option<&str>,
    cells: &[&CellResult],
    judged: &HashMap<(String, String), (Agreement, Option<Failure>)>,
    checks: &super::checks::Checks,
) -> Vec<AnswerRow> {
    let Some(b) = baseline else {
        return Vec::new();
    };
    servers
        .iter()
        .map(|s| {
            let mine: Vec<&(Agreement, Option<Failure>)> = judged
                .iter()
                .filter(|(k, _)| &k.0 == s)
                .map(|(_, v)| v)
                .collect();
            let mut words: Vec<usize> = mine
                .iter()
                .flat_map(|(a, _)| a.divergence_words.iter().copied())
                .collect();
            words.sort_unstable();
            AnswerRow {
                server_id: s.clone(),
                baseline: s == b,
                cells_compared: mine.len(),
                answers_compared: mine.iter().map(|(a, _)| a.compared).sum(),
                identical: mine.iter().map(|(a, _)| a.identical).sum(),
                early: mine.iter().map(|(a, _)| a.early).sum(),
                divergence_word_p50: words.get(words.len() / 2).copied(),
                mismatched_cells: mine.iter().filter(|(_, f)| f.is_some()).count(),
                degenerate_cells: cells
                    .iter()
                    .filter(|c| {
                        &c.server_id == s
                            && c.failure.as_ref().map(|f| f.class)
                                == Some(FailureClass::DegenerateOutput)
                    })
                    .count(),
                checks: checks.by_server.get(s).cloned().unwrap_or_default(),
                wrong_answer_cells: checks.failures.keys().filter(|k| &k.0 == s).count(),
            }
        })
        .collect()
}

/// Compare `cell`'s answers with `base`'s, request by request.
pub fn compare(cell: &CellResult, base: &CellResult) -> Option<Agreement> {
    let (s, b) = (cell.summary.as_ref()?, base.summary.as_ref()?);
    compare_requests(&s.requests, &b.requests)
}

/// Compare the answers of `mine` with those of `theirs` to the same units
/// of work; `None` when no pair of completed answers has digests.
pub fn compare_requests(mine: &[RequestRecord], theirs: &[RequestRecord]) -> Option<Agreement> {
    let mut a = Agreement {
        compared: 0,
        identical: 0,
        early: 0,
        divergence_words: Vec::new(),
        excerpt: None,
    };
    // Pairs by the unit of work each request was (its index and turn): the
    // order in which concurrent requests were sent differs between runs.
    let key = |r: &RequestRecord| r.index.map(|i| (i, r.turn));
    let theirs: HashMap<_, _> = theirs.iter().filter_map(|r| Some((key(r)?, r))).collect();
    let pairs = mine
        .iter()
        .filter_map(|x| Some((x, *theirs.get(&key(x)?)?)));
    for (x, y) in pairs {
        let (Some(ox), Some(oy)) = (x.output.as_ref(), y.output.as_ref()) else {
            continue;
        };
        if !(x.is_ok() && y.is_ok()) {
            continue;
        }
        a.compared += 1;
        if ox.digest == oy.digest {
            a.identical += 1;
            continue;
        }
        let (Some(tx), Some(ty)) = (ox.text.as_deref(), oy.text.as_deref()) else {
            continue;
        };
        let Some(at) = first_divergence(tx, ty) else {
            // Same words, other spacing: not a different answer.
            a.identical += 1;
            continue;
        };
        a.divergence_words.push(at);
        if at < EARLY_WORDS {
            a.early += 1;
            if a.excerpt.is_none() {
                a.excerpt = Some((around(tx, at), around(ty, at)));
            }
        }
    }
    (a.compared > 0).then_some(a)
}

/// Per unit of `cell`'s work (index, turn) whose answer completed in both,
/// whether it is `base`'s answer (equal digests, or the same words).
pub fn identical_by_unit(
    cell: &CellResult,
    base: &CellResult,
) -> HashMap<(u64, Option<u32>), bool> {
    let (Some(s), Some(b)) = (cell.summary.as_ref(), base.summary.as_ref()) else {
        return HashMap::new();
    };
    let theirs: HashMap<_, &OutputText> = b
        .requests
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| Some(((r.index?, r.turn), r.output.as_ref()?)))
        .collect();
    s.requests
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| {
            let key = (r.index?, r.turn);
            let (x, y) = (r.output.as_ref()?, *theirs.get(&key)?);
            let same = x.digest == y.digest
                || matches!((&x.text, &y.text), (Some(a), Some(b)) if first_divergence(a, b).is_none());
            Some((key, same))
        })
        .collect()
}

/// The index of the first word at which `a` and `b` differ; `None` when
/// their words are the same.
fn first_divergence(a: &str, b: &str) -> Option<usize> {
    let (mut x, mut y) = (a.split_whitespace(), b.split_whitespace());
    let mut i = 0;
    loop {
        match (x.next(), y.next()) {
            (None, None) => return None,
            (p, q) if p != q => return Some(i),
            _ => i += 1,
        }
    }
}

/// Up to eight words of `text` from two before word `at`.
fn around(text: &str, at: usize) -> String {
    text.split_whitespace()
        .skip(at.saturating_sub(2))
        .take(8)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_word_is_found_whatever_the_spacing() {
        assert_eq!(first_divergence("a b c d", "a b x d"), Some(2));
        assert_eq!(first_divergence("a  b\nc", "a b c"), None);
        assert_eq!(first_divergence("a b", "a b c"), Some(2));
        assert_eq!(around("one two three four five", 3), "two three four five");
    }

    #[test]
    fn early_frequent_divergence_mismatches_and_late_or_rare_does_not() {
        let a = |compared, identical, early| Agreement {
            compared,
            identical,
            early,
            divergence_words: Vec::new(),
            excerpt: Some(("x y".into(), "x z".into())),
        };
        // A broken kernel: most answers depart in their first words.
        let f = a(8, 0, 8).mismatch("ar").unwrap();
        assert_eq!(f.class, FailureClass::OutputMismatch);
        assert!(
            f.detail.starts_with("8 of 8 answers differ from baseline `ar`'s within their first 16 words (0 identical); first: \"x y\" where the baseline has \"x z\""),
            "{}",
            f.detail
        );
        // Drift: every answer differs, but late; or one early in eight.
        assert_eq!(a(8, 0, 0).mismatch("ar"), None);
        assert_eq!(a(8, 5, 1).mismatch("ar"), None);
        // Two answers, both parting early: too few to call a broken kernel.
        assert_eq!(a(2, 0, 2).mismatch("ar"), None);
        assert!(a(3, 0, 3).mismatch("ar").is_some());
        assert_eq!(a(0, 0, 0).mismatch("ar"), None);
        assert_eq!(a(8, 4, 4).identical_share(), Some(0.5));
    }
}
