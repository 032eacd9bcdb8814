//! Prefix-cache reuse of trace replays: what the trace's block ids predict
//! for an infinite cache, beside what the engine served from its own.
//!
//! The prediction is cut to whole blocks of the engine's cache block
//! (vLLM `--block-size`, by default 16 on GPUs and 128 in its CPU build,
//! `+cpu` in its version; SGLang `--page-size`, 1 by default; llama.cpp 1;
//! the simulator `--prefix-cache-block`). The measurement is, in order of
//! preference, the cached tokens the server reported for the same requests
//! (usage `cached_tokens`, llama.cpp `cache_n`): the same requests and the
//! same denominator; else the engine's counters over the cell (vLLM
//! `prefix_cache_hits` over `prefix_cache_queries`, SGLang cached over
//! prompt tokens).

use serde::{Deserialize, Serialize};

use crate::engine::EngineKind;
use crate::metrics::level::PredictedReuse;
use crate::store::CellResult;

/// Points of hit rate by which measured and predicted may differ and still
/// agree: a replay builds each block's text so that it tokenizes to its
/// own tokens, but an engine's tokenizer can still join two tokens across a
/// block's edge now and then, and its first request finds the cache warm
/// only with what the warm-up left.
pub const AGREEMENT_POINTS: f64 = 5.0;

/// One replay cell's reuse, predicted and measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheRow {
    /// Server config id.
    pub server_id: String,
    /// Cell name.
    pub cell_name: String,
    /// Completed requests the prediction covers.
    pub requests: usize,
    /// The engine's cache block the prediction is cut to, tokens.
    pub cache_block: u64,
    /// Predicted hit rate under an infinite cache.
    pub predicted: f64,
    /// Hit rate the server reported for the same requests.
    pub reported: Option<f64>,
    /// Hit rate from the engine's counters over the cell.
    pub engine_counters: Option<f64>,
    /// What the gap says, when there is one beyond [`AGREEMENT_POINTS`].
    pub note: Option<String>,
}

impl CacheRow {
    /// The measured hit rate the row is judged by.
    pub fn measured(&self) -> Option<f64> {
        self.reported.or(self.engine_counters)
    }

    /// One line: predicted, measured, and the gap's meaning.
    pub fn text(&self) -> String {
        let pct = |v: f64| format!("{:.1} %", v * 100.0);
        let mut line = format!(
            "{} {}: {} of prompt tokens predicted from the trace's block ids (infinite cache, blocks of {} tokens, {} requests)",
            self.server_id,
            self.cell_name,
            pct(self.predicted),
            self.cache_block,
            self.requests
        );
        match (self.reported, self.engine_counters) {
            (Some(r), Some(e)) => {
                line += &format!(
                    "; served {} as the server reported per request, {} by its counters",
                    pct(r),
                    pct(e)
                )
            }
            (Some(r), None) => {
                line += &format!("; served {} as the server reported per request", pct(r))
            }
            (None, Some(e)) => line += &format!("; served {} by the engine's counters", pct(e)),
            (None, None) => line += "; the engine reported no cache hits to compare",
        }
        match &self.note {
            Some(n) => line + "; " + n,
            None if self.measured().is_some() => {
                line + &format!("; they agree within {AGREEMENT_POINTS} points")
            }
            None => line,
        }
    }
}

/// The cache block of the engine that served `c`, tokens.
pub fn engine_cache_block(c: &CellResult) -> u64 {
    let flag = |name: &str| {
        crate::util::argv::value_of(&c.server.args, &[name]).and_then(|v| v.parse::<u64>().ok())
    };
    match c.engine.kind {
        EngineKind::Vllm => flag("--block-size").unwrap_or_else(|| {
            let cpu = c
                .engine_build
                .as_ref()
                .is_some_and(|b| b.version.contains("+cpu"));
            if cpu {
                128
            } else {
                16
            }
        }),
        EngineKind::Sglang => flag("--page-size").unwrap_or(1),
        EngineKind::Sim => flag("--prefix-cache-block").unwrap_or(1),
        _ => 1,
    }
}

/// A row per replay cell whose trace has block ids.
pub fn rows(cells: &[&CellResult]) -> Vec<CacheRow> {
    let mut out = Vec::new();
    for c in cells.iter().filter(|c| c.status.is_usable()) {
        let Some(s) = &c.summary else { continue };
        let block = engine_cache_block(c);
        let Some(p) = PredictedReuse::of(&s.requests, block) else {
            continue;
        };
        let reported = p
            .reported_cached_tokens
            .map(|t| t as f64 / p.prompt_tokens as f64);
        let engine_counters = c
            .telemetry
            .as_ref()
            .and_then(|t| t.metrics.as_ref())
            .and_then(|m| match (m.prefix_cache_hits, m.prefix_cache_queries) {
                (Some(h), Some(q)) if q > 0.0 => Some(h / q),
                _ => None,
            });
        let mut row = CacheRow {
            server_id: c.server_id.clone(),
            cell_name: c.cell_name.clone(),
            requests: p.requests,
            cache_block: p.cache_block,
            predicted: p.hit_rate,
            reported,
            engine_counters,
            note: None,
        };
        let held = c
            .telemetry
            .as_ref()
            .and_then(|t| t.log.as_ref())
            .and_then(|l| l.kv_cache_tokens);
        let size = CacheSize {
            distinct: p.prompt_tokens - p.reused_tokens,
            held,
        };
        let salted = c.method_version >= SALTED_SINCE;
        row.note = row
            .measured()
            .and_then(|m| gap_note(p.hit_rate, m, c.engine.kind, size, salted));
        out.push(row);
    }
    out
}

/// What an infinite cache would hold against what the engine's holds.
#[derive(Debug, Clone, Copy)]
struct CacheSize {
    /// Distinct prompt tokens of the replay: what an infinite cache holds
    /// by its end.
    distinct: u64,
    /// Tokens the engine's KV cache holds, from its log.
    held: Option<u64>,
}

/// The measurement method since which a replay's block texts are drawn per
/// cell ([`crate::store::identity::METHOD_VERSION`] 4): a cell stored
/// before it may have resent an earlier cell's blocks on the same launch.
const SALTED_SINCE: u32 = 4;

/// What a gap of more than [`AGREEMENT_POINTS`] between the predicted and
/// the measured hit rate means; `salted`: the cell's block texts were its
/// own (no earlier cell on its launch sent them).
fn gap_note(
    predicted: f64,
    measured: f64,
    engine: EngineKind,
    size: CacheSize,
    salted: bool,
) -> Option<String> {
    let gap = (measured - predicted) * 100.0;
    if gap.abs() <= AGREEMENT_POINTS {
        return None;
    }
    Some(if gap < 0.0 {
        let why = match (engine, size.held) {
            (EngineKind::Llamacpp, _) => "llama.cpp keeps the prompt each slot last held (and what its host-memory cache saved), not every block it has seen".to_string(),
            (_, Some(held)) if held < size.distinct => format!(
                "an infinite cache would hold the replay's {} distinct prompt tokens by its end; the engine's KV cache holds {held}, so blocks were evicted before they were asked for again",
                size.distinct
            ),
            _ => "blocks were evicted before they were asked for again, or requests that arrived together each computed a block neither had cached yet".to_string(),
        };
        format!("{:.1} points below the prediction: the engine's cache held less than the trace reuses ({why})", -gap)
    } else if !salted {
        format!("{gap:.1} points above the prediction: measured before a replay's block texts were drawn per cell, so an earlier cell on the same launch (another time scale, repetition or probe) may have sent these very prompts; run it again to measure it on its own")
    } else {
        format!("{gap:.1} points above the prediction: prompts shared more than their block ids say (a common template, or text that tokenizes across block edges)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_beyond_the_tolerance_is_explained_by_its_direction() {
        let size = CacheSize {
            distinct: 300_000,
            held: Some(8192),
        };
        assert_eq!(gap_note(0.40, 0.43, EngineKind::Vllm, size, true), None);
        let low = gap_note(0.40, 0.10, EngineKind::Llamacpp, size, true).unwrap();
        assert!(low.starts_with("30.0 points below"), "{low}");
        assert!(low.contains("slot"), "{low}");
        let evicted = gap_note(0.40, 0.20, EngineKind::Vllm, size, true).unwrap();
        assert!(
            evicted.contains(
                "300000 distinct prompt tokens by its end; the engine's KV cache holds 8192"
            ),
            "{evicted}"
        );
        let unknown = gap_note(
            0.40,
            0.20,
            EngineKind::Vllm,
            CacheSize { held: None, ..size },
            true,
        );
        assert!(unknown.unwrap().contains("evicted"));
        let high = gap_note(0.10, 0.30, EngineKind::Sglang, size, true).unwrap();
        assert!(high.starts_with("20.0 points above"), "{high}");
        assert!(high.contains("a common template"), "{high}");
        // A cell stored before replays drew their blocks per cell: the
        // likely cause is an earlier cell's prompts, and the note says so.
        let old = gap_note(0.10, 0.95, EngineKind::Vllm, size, false).unwrap();
        assert!(old.starts_with("85.0 points above"), "{old}");
        assert!(old.contains("an earlier cell on the same launch"), "{old}");
    }
}
