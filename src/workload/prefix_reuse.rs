//! The prefix reuse a trace's block ids predict.
//!
//! A prompt block is reusable when an earlier request's prompt held the
//! same block ids at every position up to and including it: an infinite
//! prefix cache keeps every block it has seen, so that is the most any
//! engine can reuse. The last block of a prompt may be partial; a later
//! prompt reuses a partial block only as far as the longest earlier copy of
//! it reached, and its prefix ends there. The tokens the server adds before
//! every prompt (BOS, a chat template's head: the `lead`) are shared by all
//! prompts after the first; a replay takes them off the last block, so the
//! blocks keep their size. Two engine rules are applied to the matched
//! prefix, because every engine follows them: it reuses only whole blocks of
//! its own cache block size (vLLM 16 tokens by default, SGLang and
//! llama.cpp 1), and it always computes at least the prompt's last token
//! (the one that yields the first output token), so a prompt is never
//! reused in full. The predicted hit rate is reused prompt tokens over all
//! prompt tokens: the ratio the engines' own counters give (vLLM
//! `prefix_cache_hits` over `prefix_cache_queries`, llama.cpp `cache_n` over
//! `prompt_n + cache_n`, usage `cached_tokens` over `prompt_tokens`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::trace::ReplayRequest;

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
/// infinite cache with blocks of `cache_block` tokens, when the server adds
/// `lead` tokens before every prompt; `None` when the trace has no block
/// ids (its reuse is unknown, not zero).
pub fn reused_tokens(
    requests: &[ReplayRequest],
    block: u64,
    lead: u64,
    cache_block: u64,
) -> Option<Vec<u64>> {
    if requests.iter().all(|r| r.hash_ids.is_empty()) {
        return None;
    }
    let cache_block = cache_block.max(1);
    // Prefix key → the longest run of that block any earlier prompt held.
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let mut out = Vec::with_capacity(requests.len());
    for (i, r) in requests.iter().enumerate() {
        let n = r.hash_ids.len() as u64;
        // As a replay builds it: the lead, then the blocks, the last one
        // shortened by the lead.
        let text = r.input_len.saturating_sub(lead).max(1);
        let block_len = |j: u64| {
            if j + 1 < n {
                block
            } else {
                text.saturating_sub(j * block).min(block)
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
        let shared = if i == 0 { 0 } else { lead + matched };
        let usable = shared.min((text + lead).saturating_sub(1));
        out.push(usable / cache_block * cache_block);
    }
    Some(out)
}

/// Reuse of `requests` as a whole (see [`reused_tokens`]).
pub fn prefix_reuse(
    requests: &[ReplayRequest],
    block: u64,
    lead: u64,
    cache_block: u64,
) -> Option<PrefixReuse> {
    let reused = reused_tokens(requests, block, lead, cache_block)?;
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

/// `tokens` cut to whole blocks of `cache_block` (an engine reuses no part
/// of a block).
pub fn whole_blocks(tokens: u64, cache_block: u64) -> u64 {
    let b = cache_block.max(1);
    tokens / b * b
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
        let got = reused_tokens(&reqs, 100, 0, 1).unwrap();
        assert_eq!(got, [0, 200, 249, 250, 0, 100]);
        // Blocks of 16: every reuse rounded down to whole blocks.
        let got16 = reused_tokens(&reqs, 100, 0, 16).unwrap();
        assert_eq!(got16, [0, 192, 240, 240, 0, 96]);
        let all = prefix_reuse(&reqs, 100, 0, 1).unwrap();
        assert_eq!(all.prompt_tokens, 1430);
        assert_eq!(all.reused_tokens, 799);
        assert_eq!(all.requests_reusing, 4);
        // The same id at another position is another block.
        assert_eq!(
            reused_tokens(&[req(200, &[1, 2]), req(200, &[2, 1])], 100, 0, 1).unwrap(),
            [0, 0]
        );
        assert!(reused_tokens(&[req(10, &[])], 100, 0, 1).is_none());
    }

    #[test]
    fn the_servers_lead_is_shared_and_taken_off_the_last_block() {
        // 3 lead tokens: texts of 247 and 297 tokens, blocks 100, 100, 47 / 97.
        let reqs = [req(250, &[1, 2, 3]), req(300, &[1, 2, 3]), req(120, &[7])];
        let got = reused_tokens(&reqs, 100, 3, 1).unwrap();
        // The second: the lead and 247 of its text; the third: the lead only.
        assert_eq!(got, [0, 250, 3]);
        assert_eq!(whole_blocks(250, 16), 240);
        assert_eq!(whole_blocks(3, 16), 0);
        assert_eq!(whole_blocks(3, 0), 3);
    }
}
