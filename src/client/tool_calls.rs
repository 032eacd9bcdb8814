//! Tool calls assembled from a chat stream's `delta.tool_calls`.
//!
//! A server streams each call as deltas keyed by `index`: the first
//! usually carries the call's `id` and `function.name`, the next ones
//! fragments of `function.arguments` to concatenate. Calls may interleave
//! and a name may come after arguments; both assemble. What an agent could
//! not use is kept as a defect, in words, never a failure of the stream:
//! a delta without an index, an id or name that changes, arguments that
//! are not a string, a finished call without an id or a name, or
//! arguments that do not parse as JSON. Memory is bounded: at most
//! [`MAX_CALLS`] calls and [`MAX_ARGUMENT_BYTES`] of arguments per reply.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A function call of a reply, as the client assembled it from the stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, which the tool's answer must cite.
    pub id: Option<String>,
    /// The function called.
    pub name: Option<String>,
    /// The arguments as sent: a JSON text.
    pub arguments: String,
}

/// The calls of one reply, and what made any of them unusable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCalls {
    /// The calls in index order.
    pub calls: Vec<ToolCall>,
    /// Each thing an agent could not use, in words: a call without an id
    /// or a name, arguments that are not JSON, deltas that contradict
    /// each other.
    pub defects: Vec<String>,
}

impl ToolCalls {
    /// Whether the reply called nothing and nothing was malformed.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.defects.is_empty()
    }

    /// The calls in one line each, `name(arguments)`, to keep beside the
    /// answer's text.
    pub fn text(&self) -> String {
        self.calls
            .iter()
            .map(|c| {
                format!(
                    "[tool call {}({})]",
                    c.name.as_deref().unwrap_or("?"),
                    c.arguments
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Most calls one reply may make; deltas for more are dropped as a defect.
pub const MAX_CALLS: usize = 64;

/// Most argument bytes one reply may stream; more are dropped as a defect.
pub const MAX_ARGUMENT_BYTES: usize = 1 << 20;

/// Accumulates one reply's tool-call deltas.
#[derive(Debug, Default)]
pub struct Assembler {
    /// (index, call) in the order first seen.
    calls: Vec<(u64, ToolCall)>,
    defects: Vec<String>,
    argument_bytes: usize,
}

impl Assembler {
    /// Whether any delta was seen.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.defects.is_empty()
    }

    /// Add one chunk's `delta.tool_calls` (a list of deltas); whether it
    /// carried any.
    pub fn on_deltas(&mut self, deltas: &Value) -> bool {
        let Some(list) = deltas.as_array() else {
            self.defect(format!(
                "`tool_calls` is not a list: {}",
                crate::failure::truncate(&deltas.to_string(), 120)
            ));
            return true;
        };
        for d in list {
            self.on_delta(d);
        }
        !list.is_empty()
    }

    fn on_delta(&mut self, d: &Value) {
        let index = match d.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            None => {
                self.defect("a tool-call delta without an `index`".into());
                // The most recent call is the one it most likely continues.
                self.calls.last().map_or(0, |c| c.0)
            }
        };
        let pos = match self.calls.iter().position(|c| c.0 == index) {
            Some(p) => p,
            None if self.calls.len() >= MAX_CALLS => {
                self.defect(format!("more than {MAX_CALLS} tool calls in one reply"));
                return;
            }
            None => {
                self.calls.push((index, ToolCall::default()));
                self.calls.len() - 1
            }
        };
        let mut defects = Vec::new();
        let call = &mut self.calls[pos].1;
        if let Some(id) = d
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            match &call.id {
                Some(old) if old != id => {
                    defects.push(format!("call {index}: id changed from `{old}` to `{id}`"))
                }
                _ => call.id = Some(id.to_string()),
            }
        }
        let function = d.get("function");
        if let Some(name) = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            match &call.name {
                Some(old) if old != name => defects.push(format!(
                    "call {index}: function named `{old}`, then `{name}`"
                )),
                _ => call.name = Some(name.to_string()),
            }
        }
        let fragment = match function.and_then(|f| f.get("arguments")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                defects.push(format!(
                    "call {index}: arguments sent as JSON {}, not as a string",
                    kind_of(other)
                ));
                Some(other.to_string())
            }
        };
        if let Some(f) = fragment {
            if self.argument_bytes + f.len() > MAX_ARGUMENT_BYTES {
                defects.push(format!(
                    "tool-call arguments over {MAX_ARGUMENT_BYTES} bytes"
                ));
            } else {
                self.argument_bytes += f.len();
                call.arguments.push_str(&f);
            }
        }
        for d in defects {
            self.defect(d);
        }
    }

    /// Keep a defect once; at most a few are kept.
    fn defect(&mut self, what: String) {
        if self.defects.len() < 8 && !self.defects.contains(&what) {
            self.defects.push(what);
        }
    }

    /// The calls in index order, with every defect found.
    pub fn finish(mut self) -> ToolCalls {
        self.calls.sort_by_key(|c| c.0);
        for (index, c) in &self.calls {
            let name = c.name.as_deref().unwrap_or("?");
            if c.name.is_none() {
                self.defects
                    .push(format!("call {index} has no function name"));
            }
            if c.id.is_none() {
                self.defects
                    .push(format!("call {index} (`{name}`) has no id"));
            }
            if let Err(e) = serde_json::from_str::<Value>(&c.arguments) {
                self.defects.push(format!(
                    "call {index} (`{name}`): arguments are not JSON ({e}): {:?}",
                    crate::failure::truncate(&c.arguments, 80)
                ));
            }
        }
        ToolCalls {
            calls: self.calls.into_iter().map(|c| c.1).collect(),
            defects: self.defects,
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "list",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Null => "null",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assemble(chunks: &[Value]) -> ToolCalls {
        let mut a = Assembler::default();
        for c in chunks {
            a.on_deltas(c);
        }
        a.finish()
    }

    #[test]
    fn fragments_assemble_per_index_even_interleaved_and_named_late() {
        let calls = assemble(&[
            json!([{"index": 1, "id": "b", "function": {"arguments": "{\"x\":"}}]),
            json!([{"index": 0, "id": "a", "type": "function", "function": {"name": "calculator", "arguments": ""}}]),
            json!([{"index": 0, "function": {"arguments": "{\"a\": 2"}}, {"index": 1, "function": {"arguments": " 1}"}}]),
            json!([{"index": 0, "function": {"arguments": "}"}}]),
            json!([{"index": 1, "function": {"name": "convert_units"}}]),
        ]);
        assert_eq!(calls.defects, Vec::<String>::new());
        assert_eq!(calls.calls.len(), 2);
        assert_eq!(calls.calls[0].name.as_deref(), Some("calculator"));
        assert_eq!(calls.calls[0].arguments, "{\"a\": 2}");
        assert_eq!(calls.calls[1].id.as_deref(), Some("b"));
        assert_eq!(calls.calls[1].arguments, "{\"x\": 1}");
        assert!(calls
            .text()
            .contains("[tool call convert_units({\"x\": 1})]"));
    }

    #[test]
    fn what_an_agent_cannot_use_is_a_defect_with_evidence() {
        let calls = assemble(&[
            json!([{"index": 0, "function": {"name": "calculator", "arguments": "{\"a\": [1,"}}]),
            json!([{"function": {"arguments": " 2"}}]),
            json!([{"index": 2, "id": "c", "function": {"name": "f", "arguments": {"k": 1}}}]),
            json!({"index": 3}),
        ]);
        let all = calls.defects.join(" | ");
        for needle in [
            "without an `index`",
            "call 0 (`calculator`) has no id",
            "call 0 (`calculator`): arguments are not JSON",
            "arguments sent as JSON object",
            "`tool_calls` is not a list",
        ] {
            assert!(all.contains(needle), "{needle} missing from {all}");
        }
        // The object arguments are kept as their JSON text.
        assert_eq!(calls.calls[1].arguments, "{\"k\":1}");
    }

    #[test]
    fn a_flood_of_calls_or_arguments_is_bounded() {
        let mut a = Assembler::default();
        for i in 0..200u64 {
            a.on_deltas(
                &json!([{"index": i, "id": "x", "function": {"name": "f", "arguments": "{}"}}]),
            );
        }
        let big = "x".repeat(MAX_ARGUMENT_BYTES);
        a.on_deltas(&json!([{"index": 0, "function": {"arguments": big}}]));
        let calls = a.finish();
        assert_eq!(calls.calls.len(), MAX_CALLS);
        assert!(calls.calls[0].arguments.len() <= 2);
        assert!(calls.defects.iter().any(|d| d.contains("more than 64")));
        assert!(calls.defects.iter().any(|d| d.contains("bytes")));
    }
}
