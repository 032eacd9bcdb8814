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
//!   and often (the rule the report uses against a baseline);
//! - `engine:<counter>`: one of the engine's own counters over the cell
//!   (`engine:prefix_cache_hits`, …, from its `/metrics`): a build is *bad*
//!   when it exports the counter where the good build does not (or the
//!   other way round, as the bad build does), or when the value moved
//!   beyond the threshold the way the bad build's moved.
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
    /// One of the engine's counters over the cell, by its name in [`COUNTERS`].
    Engine(&'static str),
}

/// Reads one engine counter of a cell's telemetry.
type CounterOf = fn(&crate::telemetry::CommonMetrics) -> Option<f64>;

/// The engine counters a bisection can watch: their names after `engine:`.
pub const COUNTERS: &[(&str, CounterOf)] = &[
    ("prompt_tokens", |m| m.prompt_tokens),
    ("generation_tokens", |m| m.generation_tokens),
    ("prefix_cache_hits", |m| m.prefix_cache_hits),
    ("prefix_cache_queries", |m| m.prefix_cache_queries),
];

impl std::str::FromStr for Watch {
    type Err = BisectError;

    fn from_str(s: &str) -> Result<Self, BisectError> {
        if s == "answers" {
            return Ok(Watch::Answers);
        }
        if let Some(name) = s.strip_prefix("engine:") {
            if let Some((known, _)) = COUNTERS.iter().find(|(n, _)| *n == name) {
                return Ok(Watch::Engine(known));
            }
        }
        let names = crate::report::compare::metric_names();
        if names.contains(&s) {
            Ok(Watch::Metric(s.to_string()))
        } else {
            let counters: Vec<String> = COUNTERS
                .iter()
                .map(|(n, _)| format!("engine:{n}"))
                .collect();
            Err(BisectError::UnknownWatch {
                given: s.to_string(),
                known: format!("answers, {}, {}", names.join(", "), counters.join(", ")),
            })
        }
    }
}

impl std::fmt::Display for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Watch::Metric(m) => f.write_str(m),
            Watch::Answers => f.write_str("answers"),
            Watch::Engine(n) => write!(f, "engine:{n}"),
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
        Watch::Engine(name) => {
            if let Some(why) = untestable(build) {
                return Observation::Untestable(why);
            }
            counter_against(name, (good, bad), build, threshold)
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
        Watch::Engine(name) => counter_text(name, counter(name, good)),
    }
}

/// The engine counter `name` summed over the usable cells, `None` where no
/// cell's engine exported it.
fn counter(name: &str, cells: &Cells) -> Option<f64> {
    let (_, get) = COUNTERS.iter().find(|(n, _)| *n == name)?;
    cells
        .cells
        .iter()
        .filter(|c| c.status.is_usable())
        .filter_map(|c| c.telemetry.as_ref()?.metrics.as_ref().and_then(get))
        .reduce(|a, b| a + b)
}

/// `engine:prefix_cache_hits 384` or `… not exported`.
fn counter_text(name: &str, v: Option<f64>) -> String {
    match v {
        Some(v) => format!("engine:{name} {v:.0}"),
        None => format!("engine:{name} not exported"),
    }
}

/// Whether the counter `name` of `build` is the good build's: exported
/// where the good build's is, and within the threshold of its value.
fn counter_against(
    name: &str,
    (good, bad): (&Cells, &Cells),
    build: &Cells,
    threshold: f64,
) -> Observation {
    let (g, b, v) = (
        counter(name, good),
        counter(name, bad),
        counter(name, build),
    );
    let text = counter_text(name, v);
    if g.is_some() != b.is_some() {
        return if v.is_some() == b.is_some() {
            Observation::Bad(format!(
                "{text}, where the good build has {}",
                counter_text(name, g)
            ))
        } else {
            Observation::Good(text)
        };
    }
    match (g, b, v) {
        (Some(g), Some(b), Some(v)) if g.abs() > 0.0 => {
            let (moved, direction) = ((v - g) / g, (b - g).signum());
            if moved.abs() > threshold && moved.signum() == direction {
                Observation::Bad(format!("{text} ({:+.1} % from {g:.0})", 100.0 * moved))
            } else {
                Observation::Good(text)
            }
        }
        _ => Observation::Good(text),
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
