//! What the simulator answers a checkable prompt with: the reference
//! answer's words, or a function call when the request offers tools and
//! the prompt expects one, each right or, as a fault, wrong.
//!
//! - `--wrong-answers`: spoiled text (digits shifted, JSON brackets
//!   broken); a call's arguments likewise (no longer JSON).
//! - `--plausible-wrong-answers`: every expected key with a wrong value.
//! - `--break-schema`: an answer under a `json_schema` response format
//!   writes its numbers as strings: the values still compare equal, the
//!   schema does not hold.
//! - `--malformed-tool-calls`: each call has, in turn, no id, arguments
//!   cut short (not JSON), or deltas without an `index`.
//!
//! A structured reply (a call, or an answer under a response format) ends
//! where its reference does, as a grammar-constrained answer ends.

use serde_json::{json, Value};

use super::SimConfig;
use crate::client::openai::{GenerateRequest, PromptInput, ToolChoice};
use crate::workload::answer_check::{check_for, kind_check, spoil, AnswerCheck, Expect};
use crate::workload::prompts::PromptKind;

/// The answer a request gets, one token per item.
pub(super) enum Reply {
    /// Leading words (each with its space) before filler words: the
    /// reference answer of a checkable prompt, or none.
    Words(Vec<String>),
    /// A function call, streamed as `delta.tool_calls`.
    Call(Call),
}

/// A function call the simulator streams.
pub(super) struct Call {
    /// `None`: sent without an id (a fault).
    id: Option<String>,
    name: String,
    /// The arguments' text, one fragment per token.
    fragments: Vec<String>,
    /// Send each delta's `index` (false: a fault).
    indexed: bool,
}

impl Reply {
    /// Tokens a structured reply has: it ends there. `None`: unbounded text.
    pub(super) fn length(&self, structured: bool) -> Option<u64> {
        match self {
            Reply::Call(c) => Some(c.fragments.len() as u64),
            Reply::Words(w) if structured && !w.is_empty() => Some(w.len() as u64),
            Reply::Words(_) => None,
        }
    }

    /// The reference words, when the reply is text.
    pub(super) fn words(&self) -> &[String] {
        match self {
            Reply::Words(w) => w,
            Reply::Call(_) => &[],
        }
    }

    /// The call, when the reply is one.
    pub(super) fn call(&self) -> Option<&Call> {
        match self {
            Reply::Call(c) => Some(c),
            Reply::Words(_) => None,
        }
    }
}

impl Call {
    /// The `delta` of tokens `first..first + k`: the first carries the id
    /// and the name.
    pub(super) fn delta(&self, first: u64, k: u64) -> Value {
        let end = (first + k).min(self.fragments.len() as u64) as usize;
        let args: String = self.fragments[(first as usize).min(end)..end].concat();
        let mut call = json!({"function": {"arguments": args}});
        if self.indexed {
            call["index"] = json!(0);
        }
        if first == 0 {
            call["type"] = json!("function");
            call["function"]["name"] = json!(self.name);
            if let Some(id) = &self.id {
                call["id"] = json!(id);
            }
        }
        json!({"tool_calls": [call]})
    }
}

/// The prompt a reply answers: the completion's text, or the last chat
/// message when it is the user's (a tool's result is answered in words).
fn prompt_of(req: &GenerateRequest) -> &str {
    match (&req.prompt, &req.messages) {
        (Some(PromptInput::Text(t)), _) => t.as_str(),
        (_, Some(m)) => m
            .last()
            .filter(|m| m.role == "user")
            .map_or("", |m| m.content.as_str()),
        _ => "",
    }
}

/// The reply to request number `n` (1-based).
pub(super) fn reply_for(req: &GenerateRequest, cfg: &SimConfig, n: u64) -> Reply {
    let prompt = prompt_of(req);
    let session_call = || crate::workload::session::builtin_tool_check(prompt);
    // A prompt offered with tools is answered as its tool-call kind asks;
    // the same prompt without them, in words.
    let may_call = req.tools.is_some() && req.tool_choice != Some(ToolChoice::None);
    let offered = || {
        may_call
            .then(|| kind_check(PromptKind::ToolCall, prompt))
            .flatten()
    };
    let Some(check) = offered()
        .or_else(|| check_for(prompt))
        .or_else(session_call)
    else {
        return Reply::Words(Vec::new());
    };
    match &check.expect {
        Expect::ToolCall(name) if may_call => Reply::Call(call(check, name, cfg, n)),
        _ => {
            let schema = req
                .response_format
                .as_deref()
                .is_some_and(|f| f.get("type").and_then(Value::as_str) == Some("json_schema"));
            let text = if cfg.wrong_answers {
                spoil(&check.reference)
            } else if cfg.plausible_wrong_answers {
                check.plausible_wrong()
            } else if schema && cfg.break_schema {
                serde_json::from_str::<Value>(&check.reference)
                    .map(|v| numbers_as_strings(&v).to_string())
                    .unwrap_or_else(|_| check.reference.to_string())
            } else {
                check.reference.to_string()
            };
            Reply::Words(text.split(' ').map(|w| format!(" {w}")).collect())
        }
    }
}

fn call(check: &AnswerCheck, name: &str, cfg: &SimConfig, n: u64) -> Call {
    let mut arguments = if cfg.wrong_answers {
        spoil(&check.reference)
    } else if cfg.plausible_wrong_answers {
        check.plausible_wrong()
    } else {
        check.reference.to_string()
    };
    let fault = cfg.malformed_tool_calls.then_some(n % 3);
    if fault == Some(1) {
        // Cut off before its closing brace.
        arguments.truncate(arguments.len() / 2);
    }
    let mut fragments: Vec<String> = Vec::new();
    for (i, w) in arguments.split(' ').enumerate() {
        fragments.push(if i == 0 {
            w.to_string()
        } else {
            format!(" {w}")
        });
    }
    Call {
        id: (fault != Some(0)).then(|| format!("call-sim-{n}")),
        name: name.to_string(),
        fragments,
        indexed: fault != Some(2),
    }
}

/// `v` with every number written as a string.
fn numbers_as_strings(v: &Value) -> Value {
    match v {
        Value::Number(n) => Value::String(n.to_string()),
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_strings).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), numbers_as_strings(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}
