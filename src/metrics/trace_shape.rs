//! What a trace holds, without a server: its rate over trace time, its
//! lengths, and the prefix reuse its block ids promise.
//!
//! The predicted reuse is [`crate::workload::prefix_reuse`]'s.

use serde::{Deserialize, Serialize};

use super::stats::Stats;
use crate::workload::prefix_reuse::{prefix_reuse, reused_tokens, PrefixReuse};
use crate::workload::trace::{Replay, ReplayRequest};

/// One window of trace time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeWindow {
    /// Trace time at which it opens, s after the first request.
    pub start_s: f64,
    /// Requests arriving in it.
    pub requests: u64,
    /// Requests per second over it (the last window, cut short by the
    /// trace's end, is counted as long as the others).
    pub rate: f64,
    /// Prompt tokens arriving in it.
    pub prompt_tokens: u64,
    /// Output tokens asked for in it.
    pub output_tokens: u64,
    /// Predicted hit rate of its prompts (cache warmed by everything
    /// before); `None` without block ids.
    pub reuse: Option<f64>,
}

/// A trace's shape: what `servebench trace` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceShape {
    /// Rows read from the file.
    pub rows_read: u64,
    /// Requests kept (rows with a prompt and an output, in the window).
    pub requests: u64,
    /// Trace time from the first request to the last, s.
    pub span_s: f64,
    /// Requests per second over the span; `None` when it has no length.
    pub mean_rate: Option<f64>,
    /// Prompt lengths, tokens.
    pub input: Option<Stats>,
    /// Output lengths, tokens.
    pub output: Option<Stats>,
    /// Prompt tokens per block id.
    pub block: u64,
    /// Predicted reuse with a token-granular cache; `None` without block ids.
    pub reuse: Option<PrefixReuse>,
    /// The same with the engine's cache block, when one was given.
    pub reuse_at_cache_block: Option<PrefixReuse>,
    /// Window length, s.
    pub window_s: f64,
    /// Rate, tokens and reuse per window.
    pub windows: Vec<ShapeWindow>,
}

/// Window lengths tried, shortest first, for at most [`MAX_WINDOWS`].
const WINDOW_STEPS_S: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
    21600.0, 86400.0,
];

/// Most windows a default window length makes.
pub const MAX_WINDOWS: usize = 24;

/// The shortest of 1 s, 2 s, 5 s … 1 day that covers `span_s` in at most
/// [`MAX_WINDOWS`] windows.
pub fn default_window_s(span_s: f64) -> f64 {
    WINDOW_STEPS_S
        .iter()
        .copied()
        .find(|w| span_s / w < MAX_WINDOWS as f64)
        .unwrap_or_else(|| (span_s / MAX_WINDOWS as f64).ceil().max(1.0))
}

impl TraceShape {
    /// The shape of `replay` in windows of `window_s` (the default when
    /// `None`), its reuse also cut to `cache_block` when given.
    pub fn of(replay: &Replay, window_s: Option<f64>, cache_block: Option<u64>) -> TraceShape {
        let reqs = &replay.requests;
        let span_s = replay.stats.trace_span_s;
        let window_s = window_s
            .filter(|w| w.is_finite() && *w > 0.0)
            .unwrap_or_else(|| default_window_s(span_s));
        let per_request = reused_tokens(reqs, replay.block, 0, 1);
        let count = ((span_s / window_s).floor() as usize + 1).min(1 << 20);
        let mut windows: Vec<ShapeWindow> = (0..count)
            .map(|i| ShapeWindow {
                start_s: i as f64 * window_s,
                requests: 0,
                rate: 0.0,
                prompt_tokens: 0,
                output_tokens: 0,
                reuse: None,
            })
            .collect();
        let mut reused_in = vec![0u64; count];
        for (i, r) in reqs.iter().enumerate() {
            let w = ((r.trace_ms / 1000.0 / window_s).floor() as usize).min(count - 1);
            windows[w].requests += 1;
            windows[w].prompt_tokens += r.input_len;
            windows[w].output_tokens += r.output_len;
            if let Some(p) = &per_request {
                reused_in[w] += p[i];
            }
        }
        for (w, reused) in windows.iter_mut().zip(reused_in) {
            w.rate = w.requests as f64 / window_s;
            if per_request.is_some() && w.prompt_tokens > 0 {
                w.reuse = Some(reused as f64 / w.prompt_tokens as f64);
            }
        }
        let lengths = |f: fn(&ReplayRequest) -> u64| {
            Stats::from_values(reqs.iter().map(|r| f(r) as f64).collect())
        };
        TraceShape {
            rows_read: replay.stats.rows_read,
            requests: reqs.len() as u64,
            span_s,
            mean_rate: (span_s > 0.0).then(|| reqs.len() as f64 / span_s),
            input: lengths(|r| r.input_len),
            output: lengths(|r| r.output_len),
            block: replay.block,
            reuse: prefix_reuse(reqs, replay.block, 0, 1),
            reuse_at_cache_block: cache_block.and_then(|b| prefix_reuse(reqs, replay.block, 0, b)),
            window_s,
            windows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_windows_cover_the_span_in_at_most_the_limit() {
        assert_eq!(default_window_s(0.0), 1.0);
        assert_eq!(default_window_s(141.0), 10.0);
        assert_eq!(default_window_s(3600.0), 300.0);
        for span in [1.0, 59.0, 1e4, 1e7] {
            assert!(span / default_window_s(span) < MAX_WINDOWS as f64 + 1.0);
        }
    }
}
