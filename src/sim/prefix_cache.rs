//! The simulator's prefix cache: blocks of prompt words, keyed by the
//! whole prefix up to them, kept up to a capacity and evicted least
//! recently used first, as an engine's paged prefix cache is.

use std::collections::HashMap;

/// Cached prefix blocks and when each was last used.
pub struct PrefixCache {
    block: usize,
    capacity_blocks: usize,
    last_used: HashMap<u64, u64>,
    clock: u64,
}

impl PrefixCache {
    /// A cache of `capacity_tokens` in blocks of `block` words.
    pub fn new(block: u64, capacity_tokens: u64) -> Self {
        let block = block.max(1) as usize;
        Self {
            block,
            capacity_blocks: (capacity_tokens as usize / block).max(1),
            last_used: HashMap::new(),
            clock: 0,
        }
    }

    /// Forget every cached block, as an engine's cache reset does.
    pub fn clear(&mut self) {
        self.last_used.clear();
    }

    /// Keys of the prompt's whole blocks, each naming its prefix.
    pub fn keys(&self, words: &[&str]) -> Vec<u64> {
        let mut key = 0xcbf2_9ce4_8422_2325u64;
        words
            .chunks_exact(self.block)
            .map(|chunk| {
                for w in chunk {
                    // FNV-1a over the words, a separator between them.
                    for b in w.bytes().chain(std::iter::once(b' ')) {
                        key = (key ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
                    }
                }
                key
            })
            .collect()
    }

    /// Prompt tokens a request with block keys `keys` and `prompt` tokens
    /// finds cached: the leading blocks present, at most all but the last
    /// prompt token. The blocks found are marked used.
    pub fn lookup(&mut self, keys: &[u64], prompt: u64) -> u64 {
        let hit = keys
            .iter()
            .take_while(|k| self.last_used.contains_key(k))
            .count() as u64;
        self.touch(&keys[..hit as usize]);
        let max_blocks = prompt.saturating_sub(1) / self.block as u64;
        hit.min(max_blocks) * self.block as u64
    }

    /// Keep the blocks of a prompt whose prefill finished; when full,
    /// evict the least recently used down to seven eighths of the capacity.
    pub fn insert(&mut self, keys: &[u64]) {
        self.touch(keys);
        if self.last_used.len() > self.capacity_blocks {
            let mut by_age: Vec<(u64, u64)> =
                self.last_used.iter().map(|(k, t)| (*t, *k)).collect();
            by_age.sort_unstable();
            let excess = self.last_used.len() - self.capacity_blocks * 7 / 8;
            for (_, k) in by_age.into_iter().take(excess) {
                self.last_used.remove(&k);
            }
        }
    }

    /// Mark `keys` used now, the deepest as the oldest: a prefix's later
    /// blocks are useless without its earlier ones, so they go first.
    fn touch(&mut self, keys: &[u64]) {
        for k in keys.iter().rev() {
            self.clock += 1;
            self.last_used.insert(*k, self.clock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_prefix_is_found_in_whole_blocks_and_never_the_last_token() {
        let mut c = PrefixCache::new(2, 1000);
        let a: Vec<&str> = "a b c d e f".split(' ').collect();
        let b: Vec<&str> = "a b c d x y".split(' ').collect();
        let ka = c.keys(&a);
        assert_eq!(c.lookup(&ka, 6), 0);
        c.insert(&ka);
        // Blocks "a b", "c d" shared; "x y" is not.
        assert_eq!(c.lookup(&c.keys(&b), 6), 4);
        // The same prompt again: all but the last token, in whole blocks.
        assert_eq!(c.lookup(&ka, 6), 4);
        // Same words at another position are another block.
        let shifted: Vec<&str> = "c d a b".split(' ').collect();
        assert_eq!(c.lookup(&c.keys(&shifted), 4), 0);
    }

    #[test]
    fn a_full_cache_evicts_what_was_used_longest_ago() {
        // Room for five blocks: a sixth evicts down to four.
        let mut c = PrefixCache::new(1, 5);
        let (a, b, n) = (
            c.keys(&["a", "x"]),
            c.keys(&["b", "y"]),
            c.keys(&["n", "z"]),
        );
        c.insert(&a);
        c.insert(&b);
        // `a` used again: `b` is now the least recently used.
        assert_eq!(c.lookup(&a, 3), 2);
        c.insert(&n);
        assert_eq!(c.lookup(&b, 3), 0, "evicted");
        assert_eq!(c.lookup(&a, 3), 2);
        assert_eq!(c.lookup(&n, 3), 2);
    }
}
