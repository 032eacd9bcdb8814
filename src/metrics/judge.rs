//! Whether a level's completed requests can be believed: the one judgment
//! that `bench` and campaign runs share, so a server that passes one passes
//! the other.

use crate::client::record::RequestRecord;

/// Reasons to distrust a level's completed requests, with the counts as
/// evidence; empty when every completed request is believable.
///
/// `exact_output` says the requests forced their output length (ignore_eos),
/// so an answer shorter than asked means the server ignored the request.
pub fn suspicions(requests: &[RequestRecord], exact_output: bool) -> Vec<String> {
    let ok: Vec<&RequestRecord> = requests.iter().filter(|r| r.is_ok()).collect();
    let mut out = Vec::new();
    if exact_output {
        let short: Vec<(u64, u64)> = ok
            .iter()
            .filter_map(|r| Some((r.output_tokens?, r.requested_output_tokens?)))
            .filter(|(o, q)| o < q)
            .collect();
        if let Some((o, q)) = short.first() {
            out.push(format!(
                "{} of {} completed requests returned fewer output tokens than asked despite ignore_eos (e.g. {o} of {q})",
                short.len(),
                ok.len()
            ));
        }
    }
    let over: Vec<(u64, u64, u64)> = ok
        .iter()
        .filter_map(|r| Some((r.output_tokens?, r.requested_output_tokens?, streamed(r))))
        .filter(|(o, q, _)| o > q)
        .collect();
    if let Some((o, q, s)) = over.first() {
        out.push(format!(
            "{} of {} completed requests report more output tokens than max_tokens allows (e.g. usage {o} for max_tokens {q}, {s} streamed): throughput counts at most max_tokens per request",
            over.len(),
            ok.len()
        ));
    }
    // With per-chunk counts from the server, the stream itself says how many
    // tokens arrived; a final usage above that was never streamed. An answer
    // that stopped before its budget may count its stop token, which no
    // chunk carries as text (vLLM does). A reply that called tools is
    // exempt: the engine's tool parser consumes the call's markup
    // (`<tool_call>`, closing braces) without a chunk.
    let unstreamed: Vec<(u64, u64)> = ok
        .iter()
        .filter(|r| r.tokens_per_chunk_from_server && r.called.is_empty())
        .filter_map(|r| {
            let (o, s) = (r.output_tokens?, streamed(r));
            let stopped = r.requested_output_tokens.is_some_and(|q| o < q);
            (o > s + u64::from(stopped)).then_some((o, s))
        })
        .collect();
    if let Some((o, s)) = unstreamed.first() {
        out.push(format!(
            "{} of {} completed requests' usage claims more output tokens than their chunks carried (e.g. usage {o}, {s} streamed)",
            unstreamed.len(),
            ok.len()
        ));
    }
    out
}

/// Tokens the stream's chunks carried, as counted per chunk.
fn streamed(r: &RequestRecord) -> u64 {
    r.chunks.iter().map(|c| u64::from(c.1)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::record::Outcome;

    fn rec(chunks: &[u32], usage: u64, asked: u64, continuous: bool) -> RequestRecord {
        let mut r = RequestRecord::new(0.0, 0.0);
        for (i, t) in chunks.iter().enumerate() {
            r.push_chunk(i as f64, *t);
        }
        r.output_tokens = Some(usage);
        r.requested_output_tokens = Some(asked);
        r.tokens_per_chunk_from_server = continuous;
        r.finish(Outcome::Ok, 10.0);
        r
    }

    #[test]
    fn short_answers_count_only_when_the_length_was_forced() {
        let short = [rec(&[1; 4], 4, 16, false), rec(&[1; 16], 16, 16, false)];
        let s = suspicions(&short, true);
        assert_eq!(s.len(), 1);
        assert!(s[0].contains("1 of 2") && s[0].contains("4 of 16"), "{s:?}");
        assert!(suspicions(&short, false).is_empty());
    }

    #[test]
    fn usage_above_max_tokens_or_above_the_stream_is_flagged_with_counts() {
        let s = suspicions(&[rec(&[1; 16], 80, 16, false)], true);
        assert!(
            s.iter()
                .any(|m| m.contains("usage 80 for max_tokens 16, 16 streamed")),
            "{s:?}"
        );
        let s = suspicions(&[rec(&[2; 4], 12, 16, true)], false);
        assert!(
            s.iter().any(|m| m.contains("usage 12, 8 streamed")),
            "{s:?}"
        );
        // Several tokens per chunk with the count only at the end is honest.
        assert!(suspicions(&[rec(&[1; 4], 16, 16, false)], true).is_empty());
    }

    #[test]
    fn a_tool_calls_markup_consumed_by_the_parser_is_not_unstreamed_usage() {
        // Measured on vLLM's hermes parser: 48 tokens in chunks, usage 60.
        let mut call = rec(&[17, 4, 2, 1, 25], 60, 96, true);
        call.called = vec!["calculator".into()];
        assert!(suspicions(&[call.clone()], false).is_empty());
        call.called.clear();
        assert_eq!(suspicions(&[call], false).len(), 1);
    }

    #[test]
    fn a_stop_token_counted_in_usage_without_a_chunk_is_not_unstreamed() {
        // Measured on vLLM: an answer that ended at 71 of 96 tokens, 70 of
        // them in chunks; the 71st is the stop token.
        assert!(suspicions(&[rec(&[10; 7], 71, 96, true)], false).is_empty());
        // Two tokens short, or one short of an answer that used its whole
        // budget, is not a stop token.
        assert_eq!(suspicions(&[rec(&[10; 7], 72, 96, true)], false).len(), 1);
        assert_eq!(suspicions(&[rec(&[10; 7], 71, 71, true)], false).len(), 1);
    }
}
