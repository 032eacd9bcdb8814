//! The steady-state window of a level: the part of it where the load held
//! what it was asked to be, without the ramp-up before it and the drain
//! after it, and the throughput and latencies measured over that part.
//!
//! - **Closed loop** (a concurrency): from the moment every request of the
//!   first wave has its first token (the engine runs the whole target; before
//!   that it is still prefilling them) to the moment the requests in flight
//!   last drop below the target (the client ran out of requests: the drain).
//!   A level whose in-flight count never reached its target has no window;
//!   it is under-loaded (see [`super::level::under_load`]).
//! - **Open loop** (a rate, a trace replay): from the first completion (the
//!   engine has served one request from start to end, so it holds what the
//!   arrivals keep in flight) to the last send (after it the arrivals stop
//!   and the load drains).
//!
//! Over the window: output tokens streamed inside it per second of it,
//! completions inside it per second, and the latencies of the requests that
//! finished inside it. A window is flagged as too short to trust when it
//! covers under [`SHORT_SHARE`] of the level or streams under
//! [`SHORT_TOKENS`] tokens.
//!
//! **Over-saturation**: the server fell behind the load when the time to
//! first token of the requests sent during the window rises with their send
//! time (the median of the last third over that of the first third by more
//! than half, and by at least [`RISE_MS`]), or when the engine's own queue
//! grows through the window (added by the runner from the cell's timeline).

use serde::{Deserialize, Serialize};

use super::stats::{tpot_ms, Stats};
use crate::client::record::RequestRecord;
use crate::load::schedule::LoadShape;

/// A window covering less of the level than this is too short to trust.
pub const SHORT_SHARE: f64 = 0.2;
/// A window streaming fewer output tokens than this is too short to trust.
pub const SHORT_TOKENS: f64 = 100.0;
/// The least rise of the median time to first token that counts as rising.
pub const RISE_MS: f64 = 50.0;
/// The fewest requests per third for the time-to-first-token trend.
const TREND_MIN_PER_THIRD: usize = 3;

/// Throughput and latency over a level's steady-state window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    /// Window start, s from the level's first measured dispatch.
    pub start_s: f64,
    /// Window end, s from the level's first measured dispatch.
    pub end_s: f64,
    /// Share of the level's duration the window covers.
    pub share: f64,
    /// Output tokens the completed requests streamed inside the window.
    pub output_tokens: f64,
    /// `output_tokens` per second of the window.
    pub output_throughput_tok_s: f64,
    /// Requests that completed inside the window.
    pub completed: usize,
    /// `completed` per second of the window.
    pub request_throughput_rps: f64,
    /// Time to first token of the requests that completed inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<Stats>,
    /// Time per output token of the same requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<Stats>,
    /// End-to-end latency of the same requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<Stats>,
    /// Why the window is too short to trust, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<String>,
    /// Evidence that the server fell behind the load; empty when it kept up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub over_saturated: Vec<String>,
}

/// Send and end of a record, ms from the level's start.
fn span(r: &RequestRecord) -> (f64, f64) {
    (r.sent_ms, r.sent_ms + r.e2e_ms.unwrap_or(0.0).max(0.0))
}

/// Where a closed loop of `target` users held its target, in ms.
fn closed_window(records: &[RequestRecord], target: u32) -> Option<(f64, f64)> {
    let target = i64::from(target.max(1));
    let mut events: Vec<(f64, i64)> = records
        .iter()
        .map(span)
        .flat_map(|(a, b)| [(a, 1), (b, -1)])
        .collect();
    // Ends before starts at one instant: a successor is not one more at once.
    events.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut now, mut reached, mut last_held) = (0i64, None, None);
    for (t, d) in events {
        let before = now;
        now += d;
        if now >= target && reached.is_none() {
            reached = Some(t);
        }
        if before >= target && now < target {
            last_held = Some(t);
        }
    }
    let reached = reached?;
    // The first wave: the `target` earliest sends (records are send-ordered).
    let mut first: Vec<&RequestRecord> = records.iter().collect();
    first.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
    let running = first
        .iter()
        .take(target as usize)
        .filter_map(|r| Some(r.sent_ms + r.ttft_ms?))
        .fold(reached, f64::max);
    Some((running, last_held?))
}

/// Where an open loop's arrivals kept the engine loaded, in ms.
fn open_window(records: &[RequestRecord]) -> Option<(f64, f64)> {
    let first_done = records
        .iter()
        .filter(|r| r.is_ok())
        .map(|r| span(r).1)
        .fold(f64::INFINITY, f64::min);
    let last_send = records
        .iter()
        .map(|r| r.sent_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    (first_done.is_finite() && last_send.is_finite()).then_some((first_done, last_send))
}

/// Output tokens a completed request streamed between `from` and `to` (ms
/// from the level's start): its chunks' tokens in that span, scaled so the
/// chunks add up to the tokens the request is credited with.
fn tokens_between(r: &RequestRecord, from: f64, to: f64) -> f64 {
    let Some(credited) = r.credible_output_tokens() else {
        return 0.0;
    };
    let streamed: u64 = r.chunks.iter().map(|c| u64::from(c.1)).sum();
    if streamed == 0 {
        return 0.0;
    }
    let inside: u64 = r
        .chunks
        .iter()
        .filter(|c| (from..=to).contains(&(r.sent_ms + c.0)))
        .map(|c| u64::from(c.1))
        .sum();
    inside as f64 * credited as f64 / streamed as f64
}

/// The steady-state window of a level of shape `load` over `records` that
/// lasted `duration_s`; `None` when it has none (nothing completed, or a
/// closed loop that never reached its target).
pub fn steady_state(
    load: &LoadShape,
    records: &[RequestRecord],
    duration_s: f64,
) -> Option<SteadyState> {
    let (from, to) = match load {
        LoadShape::Concurrency { value } => closed_window(records, *value)?,
        LoadShape::Rate { .. } | LoadShape::Replay { .. } => open_window(records)?,
    };
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.is_ok()).collect();
    let length_s = ((to - from) / 1000.0).max(0.0);
    let output_tokens: f64 = ok.iter().map(|r| tokens_between(r, from, to)).sum();
    let done: Vec<&RequestRecord> = ok
        .iter()
        .copied()
        .filter(|r| (from..=to).contains(&span(r).1))
        .collect();
    let per_s = |v: f64| if length_s > 0.0 { v / length_s } else { 0.0 };
    let share = if duration_s > 0.0 {
        (length_s / duration_s).min(1.0)
    } else {
        0.0
    };
    let short = if share < SHORT_SHARE || output_tokens < SHORT_TOKENS {
        Some(format!(
            "the steady window covers {:.0} % of the level ({:.2} of {:.2} s) and streams {output_tokens:.0} output tokens; under {:.0} % or {SHORT_TOKENS:.0} tokens it is too short to trust",
            share * 100.0,
            length_s,
            duration_s,
            SHORT_SHARE * 100.0
        ))
    } else {
        None
    };
    Some(SteadyState {
        start_s: from / 1000.0,
        end_s: to / 1000.0,
        share,
        output_tokens,
        output_throughput_tok_s: per_s(output_tokens),
        completed: done.len(),
        request_throughput_rps: per_s(done.len() as f64),
        ttft_ms: Stats::from_values(done.iter().filter_map(|r| r.ttft_ms).collect()),
        tpot_ms: Stats::from_values(done.iter().filter_map(|r| tpot_ms(r)).collect()),
        e2e_ms: Stats::from_values(done.iter().filter_map(|r| r.e2e_ms).collect()),
        short,
        over_saturated: ttft_rise(&ok, from, to).into_iter().collect(),
    })
}

/// Median of `values` (unsorted); `None` when empty.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    (!values.is_empty()).then(|| super::stats::percentile(&values, 50.0))
}

/// Evidence that time to first token rose with send time over the window:
/// the requests sent inside it, in send order, first third against last.
fn ttft_rise(ok: &[&RequestRecord], from: f64, to: f64) -> Option<String> {
    let mut sent: Vec<(f64, f64)> = ok
        .iter()
        .filter(|r| (from..=to).contains(&r.sent_ms))
        .filter_map(|r| Some((r.sent_ms, r.ttft_ms?)))
        .collect();
    sent.sort_by(|a, b| a.0.total_cmp(&b.0));
    let third = sent.len() / 3;
    if third < TREND_MIN_PER_THIRD {
        return None;
    }
    let early = median(sent[..third].iter().map(|s| s.1).collect())?;
    let late = median(sent[sent.len() - third..].iter().map(|s| s.1).collect())?;
    (late > early * 1.5 && late - early >= RISE_MS).then(|| {
        format!(
            "time to first token rose with send time through the window: median {early:.0} ms for the first third of the requests sent in it, {late:.0} ms for the last third"
        )
    })
}

/// Evidence that the engine's queue grew through the window, from samples
/// of its waiting-requests gauge as `(s from the level's start, waiting)`.
pub fn queue_growth(samples: &[(f64, f64)], window: &SteadyState) -> Option<String> {
    let inside: Vec<f64> = samples
        .iter()
        .filter(|s| (window.start_s..=window.end_s).contains(&s.0))
        .map(|s| s.1)
        .collect();
    let third = inside.len() / 3;
    if third < TREND_MIN_PER_THIRD {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (early, late) = (
        mean(&inside[..third]),
        mean(&inside[inside.len() - third..]),
    );
    (late >= 1.0 && late > early * 1.5 + 0.5).then(|| {
        format!(
            "the engine's queue grew through the window: {early:.1} requests waiting on average over its first third, {late:.1} over its last"
        )
    })
}

#[cfg(test)]
mod tests;
