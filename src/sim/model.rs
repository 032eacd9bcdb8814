//! The simulator's performance model: pure arithmetic, no I/O, no clock.
//!
//! - Prompt tokens: one per whitespace-separated word (chat adds a fixed
//!   template overhead per message), so a client that builds N-word prompts
//!   gets exactly N prompt tokens on completions.
//! - TTFT = queueing for a running slot and KV space + serialized prefill
//!   (prompt tokens / prefill rate) + a fixed overhead.
//! - Decode step = base step + per-running-sequence cost × running sequences;
//!   with speculative decoding the step costs `spec_step_factor` times more
//!   and emits 1 + accepted tokens, where draft position i is accepted only
//!   if positions 1..i were, each with probability `spec_acceptance`.

use rand::Rng;

use super::SimConfig;
use crate::client::openai::{GenerateRequest, PromptInput};

/// Template tokens a chat message adds around its content.
pub const CHAT_TOKENS_PER_MESSAGE: u64 = 4;
/// Template tokens a chat conversation adds once (the assistant header).
pub const CHAT_TOKENS_PER_CONVERSATION: u64 = 3;

/// Count the words of a text as tokens.
pub fn count_words(text: &str) -> u64 {
    text.split_ascii_whitespace().count() as u64
}

/// Prompt tokens of a request as this simulator counts them.
pub fn prompt_tokens(req: &GenerateRequest) -> u64 {
    if let Some(msgs) = &req.messages {
        return msgs
            .iter()
            .map(|m| count_words(&m.content) + CHAT_TOKENS_PER_MESSAGE)
            .sum::<u64>()
            + CHAT_TOKENS_PER_CONVERSATION;
    }
    match &req.prompt {
        Some(PromptInput::Text(t)) => count_words(t),
        Some(PromptInput::Texts(ts)) => ts.iter().map(|t| count_words(t)).sum(),
        Some(PromptInput::Tokens(ids)) => ids.len() as u64,
        None => 0,
    }
}

/// The error message for a request over the context window, phrased as vLLM does.
pub fn context_overflow_message(cfg: &SimConfig, prompt: u64, max_tokens: u64) -> Option<String> {
    let total = prompt + max_tokens;
    (total > cfg.context_length).then(|| {
        format!(
            "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the messages, {} in the completion). Please reduce the length of the messages or completion.",
            cfg.context_length, total, prompt, max_tokens
        )
    })
}

/// Time the serialized prefill of `prompt` tokens takes, ms.
pub fn prefill_ms(cfg: &SimConfig, prompt: u64) -> f64 {
    if cfg.prefill_tok_s <= 0.0 {
        0.0
    } else {
        prompt as f64 / cfg.prefill_tok_s * 1000.0
    }
}

/// Duration of one decode step with `running` sequences in the batch, ms.
pub fn step_ms(cfg: &SimConfig, running: u64) -> f64 {
    let base = cfg.decode_step_ms + cfg.decode_step_per_seq_ms * running as f64;
    if cfg.spec_draft_tokens > 0 {
        base * cfg.spec_step_factor
    } else {
        base
    }
}

/// Draft tokens accepted in one verification step.
pub fn draw_accepted(rng: &mut impl Rng, draft_tokens: u32, acceptance: f64) -> u32 {
    let mut n = 0;
    while n < draft_tokens && rng.random::<f64>() < acceptance {
        n += 1;
    }
    n
}

/// Expected tokens per step under speculation: 1 + Σ_{i=1..k} p^i.
pub fn expected_tokens_per_step(draft_tokens: u32, acceptance: f64) -> f64 {
    1.0 + (1..=draft_tokens)
        .map(|i| acceptance.powi(i as i32))
        .sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::openai::ChatMessage;

    fn cfg() -> SimConfig {
        SimConfig::default()
    }

    #[test]
    fn words_are_tokens_and_chat_adds_template_overhead() {
        let mut r = GenerateRequest {
            prompt: Some(PromptInput::Text("one two  three\nfour".into())),
            ..Default::default()
        };
        assert_eq!(prompt_tokens(&r), 4);
        r.prompt = None;
        r.messages = Some(vec![
            ChatMessage {
                role: "system".into(),
                content: "be brief".into(),
                ..Default::default()
            },
            ChatMessage {
                role: "user".into(),
                content: "hi there you".into(),
                ..Default::default()
            },
        ]);
        assert_eq!(
            prompt_tokens(&r),
            2 + 3 + 2 * CHAT_TOKENS_PER_MESSAGE + CHAT_TOKENS_PER_CONVERSATION
        );
    }

    #[test]
    fn context_limit_counts_prompt_plus_output() {
        let mut c = cfg();
        c.context_length = 100;
        assert!(context_overflow_message(&c, 90, 10).is_none());
        let m = context_overflow_message(&c, 90, 11).unwrap();
        assert!(m.contains("maximum context length is 100 tokens") && m.contains("101 tokens"));
    }

    #[test]
    fn acceptance_draws_match_the_geometric_expectation() {
        let mut rng = crate::util::rng::seeded(3);
        let (k, p) = (4, 0.6);
        let n = 50_000;
        let mean = (0..n)
            .map(|_| draw_accepted(&mut rng, k, p) as f64)
            .sum::<f64>()
            / n as f64;
        let expected = expected_tokens_per_step(k, p) - 1.0;
        assert!((mean - expected).abs() < 0.02, "{mean} vs {expected}");
        assert_eq!(draw_accepted(&mut rng, 4, 1.0), 4);
        assert_eq!(draw_accepted(&mut rng, 4, 0.0), 0);
    }

    #[test]
    fn step_time_grows_with_batch_and_speculation() {
        let mut c = cfg();
        c.decode_step_ms = 10.0;
        c.decode_step_per_seq_ms = 0.5;
        assert_eq!(step_ms(&c, 0), 10.0);
        assert_eq!(step_ms(&c, 10), 15.0);
        c.spec_draft_tokens = 3;
        c.spec_step_factor = 2.0;
        assert_eq!(step_ms(&c, 10), 30.0);
        c.prefill_tok_s = 1000.0;
        assert_eq!(prefill_ms(&c, 500), 500.0);
    }
}
