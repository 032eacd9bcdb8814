//! `bench --expect FILE`: this run's answers against an earlier run's, so
//! one command tells whether an engine upgrade changed what the model says.
//!
//! The two runs must ask the same things: the same prompts, seed, API and
//! output settings (checked before any load is sent). Level *i* is compared
//! with the earlier level *i* when both applied the same load; answers are
//! paired by unit of work as between a config and its baseline, and judged
//! by the same rules: answers that differ within their first words in at
//! least half of the pairs have changed (`report::agreement`), and a
//! checked prompt kind whose pass rate dropped clearly has got worse
//! (`report::checks`). Either makes the run exit 3.

use super::BenchResult;
use crate::client::openai::Api;
use crate::report::agreement::{compare_requests, EARLY_WORDS};
use crate::report::checks::{checks_by_kind, Paired};

/// What a run asks, which must match the earlier run's.
pub struct Asked<'a> {
    /// The prompts in words.
    pub prompts: &'a str,
    /// Seed.
    pub seed: u64,
    /// Output tokens per request.
    pub output_len: u64,
    /// Exact output length forced.
    pub ignore_eos: bool,
    /// API flavour.
    pub api: Api,
}

/// Refuse to compare runs that asked different things; a warning when the
/// earlier file does not record its prompts.
pub fn comparable(name: &str, old: &BenchResult, new: &Asked) -> anyhow::Result<Option<String>> {
    let s = &old.settings;
    let mut differ = Vec::new();
    if !s.prompts.is_empty() && s.prompts != new.prompts {
        differ.push(format!(
            "prompts `{}` there, `{}` here",
            s.prompts, new.prompts
        ));
    }
    for (what, there, here) in [
        ("--seed", s.seed.to_string(), new.seed.to_string()),
        (
            "--output-len",
            s.output_len.to_string(),
            new.output_len.to_string(),
        ),
        (
            "--ignore-eos",
            s.ignore_eos.to_string(),
            new.ignore_eos.to_string(),
        ),
        (
            "--api",
            format!("{:?}", old.target.api),
            format!("{:?}", new.api),
        ),
    ] {
        if there != here {
            differ.push(format!("{what} {there} there, {here} here"));
        }
    }
    if !differ.is_empty() {
        anyhow::bail!(
            "--expect {name}: that run asked other things, so its answers are not comparable: {}",
            differ.join("; ")
        );
    }
    Ok(s.prompts.is_empty().then(|| {
        format!("--expect {name} does not record its prompts; compared on the assumption they were these")
    }))
}

/// One line per compared level and checked kind, and whether the answers
/// held.
pub fn judge(name: &str, old: &BenchResult, new: &BenchResult) -> (Vec<String>, bool) {
    let mut lines = Vec::new();
    let mut ok = true;
    for (i, level) in new.levels.iter().enumerate() {
        let load = level.load;
        let Some(before) = old.levels.get(i).filter(|l| l.load == load) else {
            lines.push(format!(
                "answers at {load}: not compared, {name} has no level {} at this load",
                i + 1
            ));
            continue;
        };
        match compare_requests(&level.requests, &before.requests) {
            None => lines.push(format!(
                "answers at {load}: no pair of completed answers to compare with {name}"
            )),
            Some(a) => {
                let mut l = format!(
                    "answers at {load}: {} of {} identical to {name}'s",
                    a.identical, a.compared
                );
                if a.early > 0 {
                    l.push_str(&format!(
                        "; {} differ within their first {EARLY_WORDS} words",
                        a.early
                    ));
                }
                let mut words = a.divergence_words.clone();
                words.sort_unstable();
                if let Some(w) = words.get(words.len() / 2) {
                    l.push_str(&format!("; differing answers part at word {w} (median)"));
                }
                lines.push(l);
                if let Some(f) = a.mismatch(name) {
                    ok = false;
                    lines.push(format!("  ANSWERS CHANGED: {}", f.detail));
                }
            }
        }
        let now = checks_by_kind(&level.requests);
        for (kind, then) in checks_by_kind(&before.requests) {
            let Some(now) = now.get(&kind) else { continue };
            let mut p = Paired::default();
            p.add(&then, now);
            let dropped = p.dropped();
            ok &= !dropped;
            lines.push(format!(
                "  {kind} check: {}{}",
                p.text(name, "this run"),
                if dropped { " DROP" } else { "" }
            ));
        }
    }
    (lines, ok)
}
