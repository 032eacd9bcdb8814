//! `servebench bisect`: the first engine build, in a given order, where a
//! watched property of one cell changed, found by halving the range between
//! a known-good and a known-bad build, as `git bisect` does.
//!
//! Pure: which build to measure next and what a measurement says. Running
//! the servers and storing their cells is `cmd::bisect`'s.
//!
//! What is watched:
//! - a metric `compare` judges (`output_tok_s`, `ttft_p50_ms`, …): a build
//!   is *bad* when the metric moved from the good build's value by more than
//!   `compare`'s limit (`max(threshold, 3 × noise)`), the way the bad build's
//!   moved; otherwise it is *good*;
//! - `answers`: a build is *bad* when its answers are wrong: degenerate, or
//!   failing their checks, or differing from the good build's answers early
//!   and often (the rule the report uses against a baseline).
//!
//! A build whose cell has no measurement to judge (it failed to start, its
//! engine cannot run here, it crashed) is *untestable*: it is skipped, as
//! `git bisect skip` does, and the build nearest the middle of what is left
//! is measured instead. When only untestable builds lie between the last
//! good and the first bad one, the answer is that range.

use std::collections::{BTreeMap, BTreeSet};

use crate::failure::FailureClass;
use crate::store::CellResult;

/// What a bisection watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watch {
    /// A metric `compare` judges, by its name.
    Metric(String),
    /// Whether the answers are right.
    Answers,
}

impl std::str::FromStr for Watch {
    type Err = BisectError;

    fn from_str(s: &str) -> Result<Self, BisectError> {
        if s == "answers" {
            return Ok(Watch::Answers);
        }
        let names = crate::report::compare::metric_names();
        if names.contains(&s) {
            Ok(Watch::Metric(s.to_string()))
        } else {
            Err(BisectError::UnknownWatch {
                given: s.to_string(),
                known: format!("answers, {}", names.join(", ")),
            })
        }
    }
}

impl std::fmt::Display for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Watch::Metric(m) => f.write_str(m),
            Watch::Answers => f.write_str("answers"),
        }
    }
}

/// Why a bisection cannot start or go on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BisectError {
    /// `--watch` names nothing servebench can watch.
    #[error("cannot watch `{given}`; watch one of: {known}")]
    UnknownWatch {
        /// As given.
        given: String,
        /// What can be watched.
        known: String,
    },
    /// Fewer than two builds to bisect.
    #[error("bisect needs at least two builds in order; {0}")]
    TooFewBuilds(String),
    /// A build named is not among those being bisected.
    #[error("build `{name}` is not among the builds bisected ({known})")]
    UnknownBuild {
        /// As given.
        name: String,
        /// The builds in order.
        known: String,
    },
    /// The good build does not come before the bad one.
    #[error(
        "the good build `{good}` must come before the bad build `{bad}` in the order bisected"
    )]
    Order {
        /// The good build.
        good: String,
        /// The bad build.
        bad: String,
    },
    /// An end of the range cannot be judged or does not differ.
    #[error("{0}")]
    Ends(String),
}

/// What one build's measurement says.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// Like the good build, with what was seen.
    Good(String),
    /// Like the bad build, with the evidence.
    Bad(String),
    /// Nothing to judge, and why.
    Untestable(String),
}

/// Where a bisection stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Measure the build at this position.
    Measure(usize),
    /// The change is at `first_bad`: the build before it is good.
    Found {
        /// The last good build's position.
        last_good: usize,
        /// The first bad build's position.
        first_bad: usize,
    },
    /// Only untestable builds lie between the last good and the first bad one.
    Between {
        /// The last good build's position.
        last_good: usize,
        /// The first bad build's position.
        first_bad: usize,
        /// The untestable builds between them.
        untestable: Vec<usize>,
    },
}

/// A bisection over builds in order: what has been seen, and what is next.
#[derive(Debug, Clone)]
pub struct Bisection {
    /// Build names in order.
    pub names: Vec<String>,
    /// The latest build known to be good.
    lo: usize,
    /// The earliest build known to be bad.
    hi: usize,
    /// Builds found untestable.
    skipped: BTreeSet<usize>,
    /// Every observation, by position, in the order made.
    pub seen: BTreeMap<usize, Observation>,
}

impl Bisection {
    /// A bisection of `names` between `good` and `bad` (names among them).
    pub fn new(names: Vec<String>, good: &str, bad: &str) -> Result<Self, BisectError> {
        if names.len() < 2 {
            return Err(BisectError::TooFewBuilds(format!("{} given", names.len())));
        }
        let at = |n: &str| {
            names
                .iter()
                .position(|x| x == n)
                .ok_or_else(|| BisectError::UnknownBuild {
                    name: n.to_string(),
                    known: names.join(", "),
                })
        };
        let (lo, hi) = (at(good)?, at(bad)?);
        if lo >= hi {
            return Err(BisectError::Order {
                good: good.into(),
                bad: bad.into(),
            });
        }
        Ok(Bisection {
            names,
            lo,
            hi,
            skipped: BTreeSet::new(),
            seen: BTreeMap::new(),
        })
    }

    /// The ends' positions: good, bad.
    pub fn ends(&self) -> (usize, usize) {
        (self.lo, self.hi)
    }

    /// The build to measure next, or the answer.
    pub fn next(&self) -> Next {
        let open: Vec<usize> = (self.lo + 1..self.hi)
            .filter(|i| !self.skipped.contains(i))
            .collect();
        if open.is_empty() {
            let untestable: Vec<usize> = (self.lo + 1..self.hi).collect();
            return if untestable.is_empty() {
                Next::Found {
                    last_good: self.lo,
                    first_bad: self.hi,
                }
            } else {
                Next::Between {
                    last_good: self.lo,
                    first_bad: self.hi,
                    untestable,
                }
            };
        }
        // Twice the middle, to compare without rounding: the nearest open
        // build, the earlier one on a tie.
        let mid2 = self.lo + self.hi;
        let pick = open
            .iter()
            .copied()
            .min_by_key(|&i| (2 * i).abs_diff(mid2))
            .expect("open is not empty");
        Next::Measure(pick)
    }

    /// Take what the build at `i` showed.
    pub fn record(&mut self, i: usize, o: Observation) {
        match &o {
            Observation::Good(_) if i > self.lo && i < self.hi => self.lo = i,
            Observation::Bad(_) if i > self.lo && i < self.hi => self.hi = i,
            Observation::Untestable(_) => {
                self.skipped.insert(i);
            }
            _ => {}
        }
        self.seen.insert(i, o);
    }

    /// How many builds have been measured, the ends included.
    pub fn measured(&self) -> usize {
        self.seen.len()
    }
}

/// The failure classes that say a cell's answers are wrong.
const WRONG_ANSWERS: &[FailureClass] = &[
    FailureClass::DegenerateOutput,
    FailureClass::OutputMismatch,
    FailureClass::WrongAnswers,
];

/// The cells of one build at the watched point: its server id and its
/// repetitions.
#[derive(Debug, Clone, Copy)]
pub struct Cells<'a> {
    /// The server that ran the build.
    pub server: &'a str,
    /// Its cells at the point.
    pub cells: &'a [&'a CellResult],
}

/// Why `cells` hold nothing to judge, or `None` when one is usable.
fn untestable(cells: &Cells) -> Option<String> {
    if cells.cells.iter().any(|c| c.status.is_usable()) {
        return None;
    }
    let why: Vec<String> = cells
        .cells
        .iter()
        .map(|c| match &c.failure {
            Some(f) => format!(
                "{} ({}: {})",
                c.status.as_str(),
                f.class,
                crate::failure::truncate(&f.detail, 160)
            ),
            None => c.status.as_str().to_string(),
        })
        .collect();
    Some(if why.is_empty() {
        "no cell measured".to_string()
    } else {
        why.join("; ")
    })
}

/// The first answer failure among `cells`, when their answers are wrong on
/// their own (degenerate, failing checks).
fn wrong_on_their_own(cells: &Cells) -> Option<String> {
    cells.cells.iter().find_map(|c| {
        let f = c.failure.as_ref()?;
        WRONG_ANSWERS
            .contains(&f.class)
            .then(|| format!("{}: {}", f.class, crate::failure::truncate(&f.detail, 200)))
    })
}

/// What `build`'s cells show against the good build's, with the bad build's
/// to say which way a metric moved.
pub fn observe(
    watch: &Watch,
    (good, bad): (&Cells, &Cells),
    build: &Cells,
    threshold: f64,
) -> Observation {
    match watch {
        Watch::Answers => {
            if let Some(e) = wrong_on_their_own(build) {
                return Observation::Bad(e);
            }
            if let Some(why) = untestable(build) {
                return Observation::Untestable(why);
            }
            answers_against(good, build)
        }
        Watch::Metric(name) => {
            if let Some(why) = untestable(build) {
                return Observation::Untestable(why);
            }
            let Some(ch) =
                crate::report::compare::metric_change(name, good.cells, build.cells, threshold)
            else {
                return Observation::Untestable(format!("`{name}` is not a metric"));
            };
            let direction =
                crate::report::compare::metric_change(name, good.cells, bad.cells, threshold)
                    .and_then(|b| b.change)
                    .map(f64::signum);
            let text = metric_text(name, &ch);
            match (ch.change, direction) {
                (Some(c), Some(d)) if ch.changed && c.signum() == d => Observation::Bad(text),
                (None, _) => Observation::Untestable(format!("no `{name}` measured")),
                _ => Observation::Good(text),
            }
        }
    }
}

/// What the good build's own cells show: the watched metric's value, or
/// that its answers are judged right on their own.
pub fn good_text(watch: &Watch, good: &Cells, threshold: f64) -> String {
    match watch {
        Watch::Metric(name) => {
            match crate::report::compare::metric_change(name, good.cells, good.cells, threshold)
                .and_then(|c| c.new)
            {
                Some(v) => format!("{name} {v:.1}"),
                None => format!("{name} not measured"),
            }
        }
        Watch::Answers => format!(
            "{} cells with answers neither degenerate nor failing their checks",
            good.cells.iter().filter(|c| c.status.is_usable()).count()
        ),
    }
}

/// `output_tok_s 49.0 (−50.0 % from 98.1; the limit is 10 %)`.
fn metric_text(name: &str, ch: &crate::report::compare::MetricChange) -> String {
    match (ch.base, ch.new, ch.change) {
        (Some(b), Some(n), Some(c)) => format!(
            "{name} {n:.1} ({:+.1} % from {b:.1}; the limit is {:.0} %)",
            100.0 * c,
            100.0 * ch.limit
        ),
        (_, Some(n), _) => format!("{name} {n:.1}"),
        _ => format!("{name} not measured"),
    }
}

/// Whether `build`'s answers are the good build's, by the report's rule.
fn answers_against(good: &Cells, build: &Cells) -> Observation {
    let all: Vec<&CellResult> = good
        .cells
        .iter()
        .chain(build.cells.iter())
        .copied()
        .collect();
    let judged = crate::report::agreement::judge_cells(&all, Some(good.server));
    let mine = judged
        .iter()
        .filter(|((server, _), _)| server == build.server)
        .map(|(_, v)| v);
    let mut agreed = 0;
    for (agreement, mismatch) in mine {
        if let Some(f) = mismatch {
            return Observation::Bad(format!(
                "{}: {}",
                f.class,
                crate::failure::truncate(&f.detail, 200)
            ));
        }
        agreed += agreement.identical;
    }
    Observation::Good(format!(
        "answers agree with the good build's ({agreed} identical)"
    ))
}

/// Checks the ends before any build between them is measured: the good
/// end must be judged good and the bad end bad, each measurement named.
pub fn check_ends(
    watch: &Watch,
    (good, bad): (&Cells, &Cells),
    threshold: f64,
) -> Result<Observation, BisectError> {
    if let Some(why) = untestable(good) {
        return Err(BisectError::Ends(format!(
            "the good build's cell has nothing to judge: {why}"
        )));
    }
    if *watch == Watch::Answers {
        if let Some(e) = wrong_on_their_own(good) {
            return Err(BisectError::Ends(format!(
                "the good build's answers are wrong already: {e}"
            )));
        }
    }
    match observe(watch, (good, bad), bad, threshold) {
        bad @ Observation::Bad(_) => Ok(bad),
        Observation::Untestable(why) => Err(BisectError::Ends(format!(
            "the bad build's cell has nothing to judge: {why}"
        ))),
        Observation::Good(seen) => Err(BisectError::Ends(format!(
            "the ends do not differ in {watch}: the bad build shows {seen}"
        ))),
    }
}

#[cfg(test)]
mod tests;
