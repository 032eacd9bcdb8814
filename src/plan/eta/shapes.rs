//! What a request and a session cost in tokens: prompt and output lengths
//! of a workload point, and multi-turn sessions turn by turn.

use crate::campaign::{PromptSource, Scenarios, WorkloadPoint};

/// Template tokens a chat message adds around its content, as the plan
/// counts them (chat templates add a few per message).
const CHAT_TOKENS_PER_MESSAGE: f64 = 4.0;

/// Mean prompt and output tokens of one request of a workload that is not
/// a session (a session's turns: [`session_turns`]).
pub fn request_shape(w: &WorkloadPoint) -> (f64, f64) {
    match &w.source {
        PromptSource::Synthetic => (w.input_len as f64, w.output_len as f64),
        PromptSource::PromptKinds { kinds } => {
            (kinds_prompt_words(kinds) + 12.0, w.output_len as f64)
        }
        PromptSource::Dataset { .. }
        | PromptSource::Scenario { .. }
        | PromptSource::Checks { .. } => (256.0, w.output_len as f64),
        PromptSource::Trace {
            mean_input,
            mean_output,
            ..
        } => (*mean_input, *mean_output),
    }
}

/// The requests of one unit of `w` in order: a session's turns (its
/// scenario from `scenarios`), or one request of the workload's mean shape.
pub fn unit_turns(w: &WorkloadPoint, scenarios: &Scenarios) -> Vec<TurnShape> {
    session_turns(w, scenarios).unwrap_or_else(|| {
        let (input, output) = request_shape(w);
        vec![TurnShape {
            pause_s: 0.0,
            input,
            output,
        }]
    })
}

/// One turn of a session (or a request) as the plan counts it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnShape {
    /// The pause before this turn is sent (the think time after the last), s.
    pub pause_s: f64,
    /// Prompt tokens: the whole conversation so far and this turn's message.
    pub input: f64,
    /// Output tokens: the turn's own length, capped by the workload's.
    pub output: f64,
}

/// The turns of a session workload in order (`None`: not a session, or its
/// scenario is not among `scenarios`), with prompts counted one token per word.
pub fn session_turns(w: &WorkloadPoint, scenarios: &Scenarios) -> Option<Vec<TurnShape>> {
    let PromptSource::Scenario { name, .. } = &w.source else {
        return None;
    };
    let sc = scenarios.get(name)?;
    let words = |s: &str| s.split_whitespace().count() as f64;
    let mut context = 3.0
        + sc.system
            .as_deref()
            .map_or(0.0, |s| words(s) + CHAT_TOKENS_PER_MESSAGE);
    let mut pause_s = 0.0;
    let mut out = Vec::with_capacity(sc.turns.len());
    for turn in &sc.turns {
        // As the driver sends it: the turn's length, capped by the workload's.
        let output = turn
            .output_len
            .map_or(w.output_len, |n| (n as u64).min(w.output_len)) as f64;
        context += words(&turn.user) + CHAT_TOKENS_PER_MESSAGE;
        out.push(TurnShape {
            pause_s,
            input: context,
            output,
        });
        // The answer joins the conversation the next turn resends.
        context += output + CHAT_TOKENS_PER_MESSAGE;
        pause_s = turn.think_time().as_secs_f64();
    }
    Some(out)
}

/// Mean word count of the built-in prompts of the given kinds.
fn kinds_prompt_words(kinds: &[crate::workload::PromptKind]) -> f64 {
    let texts: Vec<&str> = kinds
        .iter()
        .flat_map(|k| k.variants().iter().copied())
        .collect();
    if texts.is_empty() {
        return 64.0;
    }
    texts
        .iter()
        .map(|t| t.split_whitespace().count() as f64)
        .sum::<f64>()
        / texts.len() as f64
}
