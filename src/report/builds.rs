//! Engine builds compared within one campaign: each config that runs on
//! several `[[build]]`s, every build against the one before it in order,
//! point by point, by `compare`'s rules (speed beyond the noise limit,
//! answers that are not the earlier build's, cells that stopped working).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::compare::{metric_change, MetricChange};
use super::data::{point_name, status_text};
use crate::store::CellResult;

/// The smallest relative change of speed that counts, as `compare`'s default.
pub const THRESHOLD: f64 = 0.1;

/// The metric a build step judges speed by.
const METRIC: &str = "output_tok_s";

/// One config at one point, one build against the one before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildStep {
    /// The earlier build and its server.
    pub from: (String, String),
    /// The later build and its server.
    pub to: (String, String),
    /// The workload point.
    pub point: String,
    /// Output throughput from one to the other, when both measured it.
    pub output_tok_s: Option<MetricChange>,
    /// How the later build's answers differ from the earlier's, when they do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<String>,
    /// How the later build stopped working where the earlier one worked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Whether it is worse beyond the noise, its answers differ, or it failed.
    pub regression: bool,
}

impl BuildStep {
    /// One line: the builds, the point, what changed.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(f) = &self.failure {
            parts.push(format!("stopped working: {f}"));
        }
        if let Some(ch) = &self.output_tok_s {
            if let (Some(b), Some(n), Some(c)) = (ch.base, ch.new, ch.change) {
                parts.push(format!(
                    "{METRIC} {b:.1} → {n:.1} ({:+.1} %, limit {:.0} %)",
                    100.0 * c,
                    100.0 * ch.limit
                ));
            }
        }
        match &self.answers {
            Some(a) => parts.push(format!("answers differ: {a}")),
            None if self.failure.is_none() => parts.push("answers agree".into()),
            None => {}
        }
        format!(
            "`{}` → `{}` ({} → {}) at {}: {}{}",
            self.from.0,
            self.to.0,
            self.from.1,
            self.to.1,
            self.point,
            parts.join("; "),
            if self.regression { " REGRESSION" } else { "" }
        )
    }
}

/// How builds are compared, in a sentence for the reports.
pub fn rule() -> String {
    format!(
        "Each config that runs on several builds, every build against the one before it in the campaign's [[build]] order, at each point both measured: {METRIC} is flagged when it drops by more than the larger of {:.0} % and 3 × the repetitions' relative range (compare's rule), answers when they differ from the earlier build's early and often, and a cell that stopped working always.",
        100.0 * THRESHOLD
    )
}

/// A server's settings without its build and environment: what it shares
/// with the same config on other builds.
fn config_key(c: &CellResult) -> String {
    let mut v = c.server.settings();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("build");
        obj.remove("env");
    }
    v.to_string()
}

/// Every build step of `cells`, builds in `order` (those it does not name
/// after, in the order first seen).
pub fn steps(cells: &[&CellResult], order: &[String]) -> Vec<BuildStep> {
    // config → build → (server, cells by point)
    type ByPoint<'a> = BTreeMap<String, Vec<&'a CellResult>>;
    let mut configs: BTreeMap<String, Vec<(String, String, ByPoint)>> = BTreeMap::new();
    let mut seen: Vec<String> = order.to_vec();
    for c in cells {
        let Some(b) = c.server.build_name() else {
            continue;
        };
        if !seen.iter().any(|s| s == b) {
            seen.push(b.to_string());
        }
        let builds = configs.entry(config_key(c)).or_default();
        let at = match builds
            .iter()
            .position(|(build, server, _)| build == b && *server == c.server_id)
        {
            Some(i) => i,
            None => {
                builds.push((b.to_string(), c.server_id.clone(), BTreeMap::new()));
                builds.len() - 1
            }
        };
        builds[at].2.entry(point_name(c)).or_default().push(c);
    }
    let rank = |b: &str| seen.iter().position(|s| s == b).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    for builds in configs.values_mut() {
        builds.sort_by_key(|(b, _, _)| rank(b));
        for pair in builds.windows(2) {
            let ((fb, fs, fp), (tb, ts, tp)) = (&pair[0], &pair[1]);
            for (point, from_cells) in fp {
                let Some(to_cells) = tp.get(point) else {
                    continue;
                };
                out.push(step((fb, fs, from_cells), (tb, ts, to_cells), point));
            }
        }
    }
    out
}

/// One build against the one before it at one point.
fn step(
    (fb, fs, from): (&str, &str, &[&CellResult]),
    (tb, ts, to): (&str, &str, &[&CellResult]),
    point: &str,
) -> BuildStep {
    let usable = |v: &[&CellResult]| v.iter().any(|c| c.status.is_usable());
    let failure = (usable(from) && !usable(to)).then(|| {
        to.iter()
            .map(|c| status_text(c))
            .collect::<Vec<_>>()
            .join(", ")
    });
    let output_tok_s = metric_change(METRIC, from, to, THRESHOLD).filter(|c| c.change.is_some());
    let all: Vec<&CellResult> = from.iter().chain(to).copied().collect();
    let answers = super::agreement::judge_cells(&all, Some(fs))
        .into_iter()
        .filter(|((server, _), _)| server == ts)
        .find_map(|(_, (_, mismatch))| mismatch)
        .map(|f| crate::failure::truncate(&f.detail, 200));
    let regression = failure.is_some()
        || answers.is_some()
        || output_tok_s.as_ref().is_some_and(|c| c.regression);
    BuildStep {
        from: (fb.to_string(), fs.to_string()),
        to: (tb.to_string(), ts.to_string()),
        point: point.to_string(),
        output_tok_s,
        answers,
        failure,
        regression,
    }
}

/// The answer's line on builds: which build the picks run on, and the
/// regressions from one build to the next.
pub fn answer_lines(steps: &[BuildStep], picked: &[(String, Option<String>)]) -> Vec<String> {
    if steps.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut count: Vec<(String, usize)> = Vec::new();
    for b in picked.iter().filter_map(|(_, b)| b.clone()) {
        match count.iter_mut().find(|(x, _)| *x == b) {
            Some((_, n)) => *n += 1,
            None => count.push((b, 1)),
        }
    }
    count.sort_by_key(|c| std::cmp::Reverse(c.1));
    if let Some((b, n)) = count.first() {
        out.push(format!(
            "build to deploy: `{b}` ({n} of {} picks above run on it)",
            picked.len()
        ));
    }
    let flagged: Vec<&BuildStep> = steps.iter().filter(|s| s.regression).collect();
    if flagged.is_empty() {
        out.push(format!(
            "builds: no regression from one build to the next ({} comparisons)",
            steps.len()
        ));
    }
    for s in flagged.iter().take(5) {
        out.push(format!("build regression: {}", s.text()));
    }
    if flagged.len() > 5 {
        out.push(format!(
            "build regressions: {} more in the report",
            flagged.len() - 5
        ));
    }
    out
}
