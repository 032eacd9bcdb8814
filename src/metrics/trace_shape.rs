//! What a trace holds, without a server: its rate over trace time, its
//! lengths, and the prefix reuse its block ids promise.
//!
//! **Predicted prefix reuse.** A prompt block is reusable when an earlier
//! request's prompt held the same block ids at every position up to and
//! including it: an infinite prefix cache keeps every block it has seen, so
//! that is the most any engine can reuse. The last block of a prompt may be
//! partial; a later prompt reuses a partial block only as far as the
//! longest earlier copy of it reached, and its prefix ends there. Two
//! engine rules are applied to the matched prefix, because every engine
//! follows them: it reuses only whole blocks of its own cache block size
//! (vLLM 16 tokens by default, SGLang and llama.cpp 1), and it always
//! computes at least the prompt's last token (the one that yields the first
//! output token), so a prompt is never reused in full. The predicted hit
//! rate is reused prompt tokens over all prompt tokens: the same ratio the
//! engines' own counters give (vLLM `prefix_cache_hits` over
//! `prefix_cache_queries`, llama.cpp `cache_n` over `prompt_n + cache_n`,
//! usage `cached_tokens` over `prompt_tokens`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::stats::Stats;
use crate::workload::trace::{Replay, ReplayRequest};

/// Reuse of a whole replay, under an infinite prefix cache.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrefixReuse {
    /// The cache's block size the reuse was cut to, tokens.
    pub cache_block: u64,
    /// Prompt tokens of every request.
    pub prompt_tokens: u64,
    /// Of those, tokens an infinite cache would serve.
    pub reused_tokens: u64,
    /// Requests that reuse at least one token.
    pub requests_reusing: u64,
}

impl PrefixReuse {
    /// Reused over all prompt tokens (0 when there are none).
    pub fn hit_rate(&self) -> f64 {
        if self.prompt_tokens == 0 {
            0.0
        } else {
            self.reused_tokens as f64 / self.prompt_tokens as f64
        }
    }
}

/// Prompt tokens each request reuses from those before it, under an
/// infinite cache with blocks of `cache_block` tokens; `None` when the
/// trace has no block ids (its reuse is unknown, not zero).
pub fn reused_tokens(requests: &[ReplayRequest], block: u64, cache_block: u64) -> Option<Vec<u64>> {
    if requests.iter().all(|r| r.hash_ids.is_empty()) {
        return None;
    }
    let cache_block = cache_block.max(1);
    // Prefix key → the longest run of that block any earlier prompt held.
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let mut out = Vec::with_capacity(requests.len());
    for r in requests {
        let n = r.hash_ids.len() as u64;
        let block_len = |j: u64| {
            if j + 1 < n {
                block
            } else {
                r.input_len.saturating_sub(j * block).min(block)
            }
        };
        let mut matched = 0u64;
        let mut key = 0u64;
        let mut open = true;
        for (j, &id) in r.hash_ids.iter().enumerate() {
            key = prefix_key(key, id);
            let len = block_len(j as u64);
            if open {
                match seen.get(&key) {
                    Some(&had) => {
                        matched += had.min(len);
                        open = had >= len;
                    }
                    None => open = false,
                }
            }
            let e = seen.entry(key).or_insert(0);
            *e = (*e).max(len);
        }
        let usable = matched.min(r.input_len.saturating_sub(1));
        out.push(usable / cache_block * cache_block);
    }
    Some(out)
}

/// Reuse of `requests` as a whole (see [`reused_tokens`]).
pub fn prefix_reuse(
    requests: &[ReplayRequest],
    block: u64,
    cache_block: u64,
) -> Option<PrefixReuse> {
    let reused = reused_tokens(requests, block, cache_block)?;
    Some(PrefixReuse {
        cache_block: cache_block.max(1),
        prompt_tokens: requests.iter().map(|r| r.input_len).sum(),
        reused_tokens: reused.iter().sum(),
        requests_reusing: reused.iter().filter(|&&t| t > 0).count() as u64,
    })
}

/// A key for the prefix ending in `id` after the prefix keyed `prev`: two
/// prompts share a key only when they share every id up to it.
fn prefix_key(prev: u64, id: u64) -> u64 {
    // A 64-bit mix (splitmix64's finaliser) of the chain; collisions among
    // a million prompts of a hundred blocks are vanishingly rare.
    let mut z = prev
        .rotate_left(29)
        .wrapping_add(id)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

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

/// The shortest step in [`WINDOW_STEPS_S`] that covers `span_s` in at most
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
        let per_request = reused_tokens(reqs, replay.block, 1);
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
            reuse: prefix_reuse(reqs, replay.block, 1),
            reuse_at_cache_block: cache_block.and_then(|b| prefix_reuse(reqs, replay.block, b)),
            window_s,
            windows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(input: u64, ids: &[u64]) -> ReplayRequest {
        ReplayRequest {
            line: 1,
            offset_ms: 0.0,
            trace_ms: 0.0,
            input_len: input,
            output_len: 1,
            hash_ids: ids.to_vec(),
        }
    }

    #[test]
    fn reuse_follows_the_shared_prefix_and_the_engines_cut_rules() {
        let reqs = [
            req(250, &[1, 2, 3]), // 100 + 100 + 50: nothing before it
            req(300, &[1, 2, 4]), // shares 1, 2: 200
            req(250, &[1, 2, 3]), // the first again: all but its last token
            req(300, &[1, 2, 3]), // block 3 was at most 50 long: 250, then stops
            req(180, &[9, 2, 3]), // another first block: no prefix
            req(150, &[1, 5]),    // 100
        ];
        let got = reused_tokens(&reqs, 100, 1).unwrap();
        assert_eq!(got, [0, 200, 249, 250, 0, 100]);
        // Blocks of 16: every reuse rounded down to whole blocks.
        let got16 = reused_tokens(&reqs, 100, 16).unwrap();
        assert_eq!(got16, [0, 192, 240, 240, 0, 96]);
        let all = prefix_reuse(&reqs, 100, 1).unwrap();
        assert_eq!(all.prompt_tokens, 1430);
        assert_eq!(all.reused_tokens, 799);
        assert_eq!(all.requests_reusing, 4);
        // The same id at another position is another block.
        assert_eq!(
            reused_tokens(&[req(200, &[1, 2]), req(200, &[2, 1])], 100, 1).unwrap(),
            [0, 0]
        );
        assert!(reused_tokens(&[req(10, &[])], 100, 1).is_none());
    }

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
