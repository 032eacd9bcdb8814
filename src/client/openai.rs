//! OpenAI-compatible wire formats: request bodies, stream chunks, usage.
//!
//! The same request DTO is parsed by the simulator and produced by the
//! client, so both sides agree on field names. Stream chunks are parsed with
//! borrowed, mostly-ignored fields: only what the measurements need
//! (content presence, usage, llama.cpp `timings`, embedded errors) is read.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::record::{Outcome, RequestRecord};
use crate::failure::{mentions_context_overflow, truncate, Failure, FailureClass};

/// Which OpenAI endpoint requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /v1/completions` with a `prompt`.
    Completions,
    /// `POST /v1/chat/completions` with `messages`.
    Chat,
}

impl Api {
    /// The request path of this API.
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The message text (a tool's result for `tool`).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    /// The calls an assistant message made:
    /// `[{"id", "type": "function", "function": {"name", "arguments"}}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<serde_json::Value>>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// A `null` content (an assistant message that only calls tools) read as empty.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A completions `prompt`: text, several texts, or token ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PromptInput {
    /// One prompt text.
    Text(String),
    /// Several prompt texts (a batch).
    Texts(Vec<String>),
    /// Pre-tokenized prompt.
    Tokens(Vec<u32>),
}

/// `stream_options` of a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a final chunk carrying `usage`.
    #[serde(default)]
    pub include_usage: bool,
    /// Carry cumulative `usage` on every chunk (vLLM, SGLang, simulator).
    #[serde(default)]
    pub continuous_usage_stats: bool,
}

/// A completions or chat-completions request body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerateRequest {
    /// Served model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Completions prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptInput>,
    /// Chat messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<ChatMessage>>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Newer name of the chat output limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Minimum output tokens before EOS is allowed (vLLM, SGLang).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u64>,
    /// Keep generating past EOS (vLLM, SGLang, llama.cpp).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_eos: bool,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Stream the answer as SSE.
    #[serde(default)]
    pub stream: bool,
    /// Streaming options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Functions the model may call (chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<std::sync::Arc<serde_json::Value>>,
    /// The format the answer must follow (`json_schema`, `json_object`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<std::sync::Arc<serde_json::Value>>,
    /// Whether the model may, must or must not call one of `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

/// OpenAI's `tool_choice` for requests that offer tools. Left out, the
/// server's default (`auto`) applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// The model decides whether to call a tool.
    Auto,
    /// The model must call a tool (engines constrain the answer to a call).
    Required,
    /// The model must answer in words.
    None,
}

impl GenerateRequest {
    /// The output limit, whichever field carried it.
    pub fn output_limit(&self) -> Option<u64> {
        self.max_tokens.or(self.max_completion_tokens)
    }
}

/// The tools and response format of one request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Structured {
    /// OpenAI function definitions (`[{"type": "function", "function": {…}}]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<std::sync::Arc<serde_json::Value>>,
    /// `{"type": "json_schema", "json_schema": {…}}` or `{"type": "json_object"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<std::sync::Arc<serde_json::Value>>,
    /// `tool_choice`, sent only with `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

impl Structured {
    /// Requests that offer `tools`.
    pub fn tools(tools: std::sync::Arc<serde_json::Value>) -> Self {
        Self {
            tools: Some(tools),
            response_format: None,
            tool_choice: None,
        }
    }

    /// These requests with `choice` as their `tool_choice` when they offer
    /// tools (a request without tools has no choice to make).
    pub fn with_tool_choice(mut self, choice: Option<ToolChoice>) -> Self {
        self.tool_choice = choice.filter(|_| self.tools.is_some());
        self
    }

    /// Requests whose answer must follow `schema`, named `name`.
    pub fn schema(name: &str, schema: &serde_json::Value) -> Self {
        Self {
            tools: None,
            response_format: Some(std::sync::Arc::new(response_format(name, schema))),
            tool_choice: None,
        }
    }

    /// Requests in JSON mode: the answer must be a JSON object, of any shape.
    pub fn json_object() -> Self {
        Self {
            tools: None,
            response_format: Some(std::sync::Arc::new(
                serde_json::json!({"type": "json_object"}),
            )),
            tool_choice: None,
        }
    }
}

/// A `json_schema` response format: strict, as vLLM, SGLang and llama.cpp
/// read it.
pub fn response_format(name: &str, schema: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "type": "json_schema",
        "json_schema": {"name": name, "schema": schema, "strict": true},
    })
}

/// What to send, before it becomes a request body.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptBody {
    /// A completions prompt text.
    Text(String),
    /// A chat conversation.
    Messages(Vec<ChatMessage>),
}

/// Build a streaming request body for `api` with exact-length knobs.
pub fn build_body(
    api: Api,
    model: &str,
    prompt: PromptBody,
    max_tokens: u64,
    ignore_eos: bool,
) -> Vec<u8> {
    build_structured_body(api, model, prompt, max_tokens, ignore_eos, None)
}

/// [`build_body`] with tools or a response format. A structured request
/// never forces its length: its answer ends where its grammar (or call)
/// does, and an engine asked for more tokens than the grammar allows
/// would have no token left to give.
pub fn build_structured_body(
    api: Api,
    model: &str,
    prompt: PromptBody,
    max_tokens: u64,
    ignore_eos: bool,
    structured: Option<&Structured>,
) -> Vec<u8> {
    let ignore_eos = ignore_eos && structured.is_none();
    let (prompt, messages) = match (api, prompt) {
        (Api::Completions, PromptBody::Text(t)) => (Some(PromptInput::Text(t)), None),
        (Api::Completions, PromptBody::Messages(m)) => {
            let text = m
                .into_iter()
                .map(|m| m.content)
                .collect::<Vec<_>>()
                .join("\n");
            (Some(PromptInput::Text(text)), None)
        }
        (Api::Chat, PromptBody::Text(t)) => (
            None,
            Some(vec![ChatMessage {
                role: "user".into(),
                content: t,
                ..Default::default()
            }]),
        ),
        (Api::Chat, PromptBody::Messages(m)) => (None, Some(m)),
    };
    let req = GenerateRequest {
        model: Some(model.to_string()),
        prompt,
        messages,
        max_tokens: Some(max_tokens),
        max_completion_tokens: None,
        min_tokens: ignore_eos.then_some(max_tokens),
        ignore_eos,
        temperature: Some(0.0),
        stream: true,
        stream_options: Some(StreamOptions {
            include_usage: true,
            continuous_usage_stats: true,
        }),
        tools: structured.and_then(|s| s.tools.clone()),
        response_format: structured.and_then(|s| s.response_format.clone()),
        tool_choice: structured.and_then(|s| s.tool_choice),
    };
    serde_json::to_vec(&req).expect("request DTO always serializes")
}

/// Server-reported token usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens as the server counted them.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Generated tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Prompt-token details (cached tokens from prefix caching).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Completion-token details (reasoning tokens of reasoning models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// The `completion_tokens_details` object of `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    /// Output tokens spent on reasoning before the answer.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// The `prompt_tokens_details` object of `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens served from the prefix cache.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// llama.cpp's per-response `timings`: draft counters and prompt-cache reuse.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct Timings {
    #[serde(default)]
    draft_n: Option<u64>,
    #[serde(default)]
    draft_n_accepted: Option<u64>,
    /// Prompt tokens taken from the slot's cache.
    #[serde(default)]
    cache_n: Option<u64>,
}

/// A chat stream's delta. Reasoning models stream their thinking apart
/// from the answer: `reasoning` (current vLLM, SGLang's newer parsers) or
/// `reasoning_content` (older vLLM, SGLang, llama.cpp).
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    /// Deltas of function calls, assembled by [`super::tool_calls::Assembler`].
    #[serde(default)]
    tool_calls: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct StreamChunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    timings: Option<Timings>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// What one stream event contributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkInfo {
    /// A content-bearing chunk carrying this many tokens.
    Content {
        /// Tokens in this chunk (from continuous usage, else 1).
        tokens: u32,
        /// Whether it carries answer text (not only reasoning).
        answer: bool,
    },
    /// Role-only, usage-only or otherwise empty.
    Nothing,
}

/// Per-request stream accounting.
#[derive(Debug, Default)]
pub struct StreamState {
    /// `[DONE]` was received.
    pub done: bool,
    usage: Option<Usage>,
    continuous: bool,
    last_completion: u64,
    draft_n: Option<u64>,
    draft_accepted: Option<u64>,
    cache_n: Option<u64>,
    /// Tokens of chunks that carried reasoning and no answer.
    reasoning_chunk_tokens: u64,
    answered: bool,
    /// The answer text, accumulated only when asked for.
    pub text: Option<String>,
    /// The reply's function calls.
    tools: super::tool_calls::Assembler,
}

impl StreamState {
    /// Accounting for a new stream; `capture_text` keeps the answer's text.
    pub fn new(capture_text: bool) -> Self {
        Self {
            text: capture_text.then(String::new),
            ..Default::default()
        }
    }

    /// Account for one SSE `data` payload.
    pub fn on_event(&mut self, data: &[u8]) -> Result<ChunkInfo, Failure> {
        if data == b"[DONE]" {
            self.done = true;
            return Ok(ChunkInfo::Nothing);
        }
        let chunk: StreamChunk = serde_json::from_slice(data).map_err(|e| {
            Failure::new(
                FailureClass::Protocol,
                format!(
                    "malformed stream chunk ({e}): {}",
                    truncate(&String::from_utf8_lossy(data), 512)
                ),
            )
        })?;
        if let Some(err) = chunk.error {
            let text = err.to_string();
            let class = if mentions_context_overflow(&text) {
                FailureClass::ContextOverflow
            } else {
                FailureClass::HttpError
            };
            return Err(Failure::new(
                class,
                format!("error inside stream: {}", truncate(&text, 4096)),
            ));
        }
        if let Some(t) = chunk.timings {
            if t.draft_n.is_some() {
                self.draft_n = t.draft_n;
                self.draft_accepted = t.draft_n_accepted;
            }
            if t.cache_n.is_some() {
                self.cache_n = t.cache_n;
            }
        }
        let non_empty = |s: &Option<Cow<str>>| s.as_deref().is_some_and(|s| !s.is_empty());
        let mut calls = false;
        for d in chunk.choices.iter().filter_map(|c| c.delta.as_ref()) {
            if let Some(t) = d.tool_calls.as_ref().filter(|t| !t.is_null()) {
                calls |= self.tools.on_deltas(t);
            }
        }
        // A function call is the answer of a reply that makes one.
        let answer = calls
            || chunk.choices.iter().any(|c| {
                non_empty(&c.text) || c.delta.as_ref().is_some_and(|d| non_empty(&d.content))
            });
        let has_content = answer
            || chunk.choices.iter().any(|c| {
                c.delta
                    .as_ref()
                    .is_some_and(|d| non_empty(&d.reasoning_content) || non_empty(&d.reasoning))
            });
        if let (Some(text), true) = (self.text.as_mut(), has_content) {
            for c in &chunk.choices {
                if let Some(t) = c.text.as_deref() {
                    text.push_str(t);
                }
                if let Some(t) = c.delta.as_ref().and_then(|d| d.content.as_deref()) {
                    text.push_str(t);
                }
            }
        }
        let mut tokens = 1;
        if let Some(u) = chunk.usage {
            if has_content {
                self.continuous = true;
                let delta = u.completion_tokens.saturating_sub(self.last_completion);
                tokens = delta.max(1) as u32;
            }
            self.last_completion = self.last_completion.max(u.completion_tokens);
            self.usage = Some(u);
        }
        if has_content && !answer {
            self.reasoning_chunk_tokens += u64::from(tokens);
        }
        self.answered |= answer;
        Ok(if has_content {
            ChunkInfo::Content { tokens, answer }
        } else {
            ChunkInfo::Nothing
        })
    }

    /// Close the stream's accounting into the record's final outcome.
    pub fn finish(self, rec: &mut RequestRecord) -> Outcome {
        rec.text = self.text;
        if !self.tools.is_empty() {
            let calls = self.tools.finish();
            rec.called = (calls.calls.iter())
                .filter_map(|c| c.name.clone())
                .collect();
            rec.tool_calls = Some(calls);
        }
        rec.draft_tokens = self.draft_n;
        rec.accepted_draft_tokens = self.draft_accepted;
        if let Some(u) = self.usage {
            rec.input_tokens = Some(u.prompt_tokens);
            rec.output_tokens = Some(u.completion_tokens);
            rec.cached_tokens = u.prompt_tokens_details.and_then(|d| d.cached_tokens);
            rec.reasoning_tokens = u.completion_tokens_details.and_then(|d| d.reasoning_tokens);
            rec.reasoning_from_usage = rec.reasoning_tokens.is_some();
        }
        rec.cached_tokens = rec.cached_tokens.or(self.cache_n);
        if rec.reasoning_tokens.is_none() && self.reasoning_chunk_tokens > 0 {
            rec.reasoning_tokens = Some(self.reasoning_chunk_tokens);
        }
        rec.tokens_per_chunk_from_server = self.continuous;
        if !self.done {
            return Outcome::Failed(Failure::new(
                FailureClass::Protocol,
                format!(
                    "stream ended without [DONE] after {} content chunks",
                    rec.chunks.len()
                ),
            ));
        }
        if rec.chunks.is_empty() {
            return Outcome::Failed(Failure::new(
                FailureClass::Suspicious,
                "stream completed with no content chunk",
            ));
        }
        if rec.output_tokens.is_none() {
            rec.output_tokens = Some(rec.chunks.iter().map(|c| c.1 as u64).sum());
        }
        if !self.answered && self.reasoning_chunk_tokens > 0 {
            return Outcome::Failed(Failure::new(
                FailureClass::ReasoningExhausted,
                format!(
                    "no answer: reasoning used {} of the {} output tokens; raise max_tokens or lower the reasoning effort",
                    rec.reasoning_tokens.unwrap_or(self.reasoning_chunk_tokens),
                    rec.output_tokens.unwrap_or(0),
                ),
            ));
        }
        Outcome::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_only_and_usage_only_chunks_are_not_content() {
        let mut s = StreamState::default();
        let role = br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#;
        assert_eq!(s.on_event(role).unwrap(), ChunkInfo::Nothing);
        let c = br#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#;
        assert_eq!(
            s.on_event(c).unwrap(),
            ChunkInfo::Content {
                tokens: 1,
                answer: true
            }
        );
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":3}},"timings":{"draft_n":4,"draft_n_accepted":3}}"#;
        assert_eq!(s.on_event(usage).unwrap(), ChunkInfo::Nothing);
        assert_eq!(s.on_event(b"[DONE]").unwrap(), ChunkInfo::Nothing);
        let mut rec = RequestRecord::new(0.0, 0.0);
        rec.push_chunk(5.0, 1);
        assert_eq!(s.finish(&mut rec), Outcome::Ok);
        assert_eq!(rec.input_tokens, Some(7));
        assert_eq!(rec.cached_tokens, Some(3));
        assert_eq!(
            (rec.draft_tokens, rec.accepted_draft_tokens),
            (Some(4), Some(3))
        );
    }

    #[test]
    fn continuous_usage_gives_tokens_per_chunk() {
        let mut s = StreamState::default();
        let a =
            br#"{"choices":[{"text":"a b c"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#;
        let b =
            br#"{"choices":[{"text":"d e"}],"usage":{"prompt_tokens":5,"completion_tokens":5}}"#;
        let content = |tokens| ChunkInfo::Content {
            tokens,
            answer: true,
        };
        assert_eq!(s.on_event(a).unwrap(), content(3));
        assert_eq!(s.on_event(b).unwrap(), content(2));
    }

    #[test]
    fn reasoning_in_either_field_is_content_but_not_answer_and_llamacpp_cache_counts() {
        let mut s = StreamState::default();
        for field in ["reasoning", "reasoning_content"] {
            let c = format!(r#"{{"choices":[{{"index":0,"delta":{{"{field}":"hmm"}}}}]}}"#);
            assert_eq!(
                s.on_event(c.as_bytes()).unwrap(),
                ChunkInfo::Content {
                    tokens: 1,
                    answer: false
                }
            );
        }
        let end = br#"{"choices":[],"timings":{"cache_n":48,"prompt_n":16}}"#;
        assert_eq!(s.on_event(end).unwrap(), ChunkInfo::Nothing);
        s.on_event(b"[DONE]").unwrap();
        let mut rec = RequestRecord::new(0.0, 0.0);
        rec.push_chunk(1.0, 1);
        rec.push_chunk(2.0, 1);
        // Reasoning and no answer: the budget went to thinking.
        let Outcome::Failed(f) = s.finish(&mut rec) else {
            panic!("an answerless stream is not ok")
        };
        assert_eq!(f.class, FailureClass::ReasoningExhausted);
        assert_eq!(rec.reasoning_tokens, Some(2));
        assert!(!rec.reasoning_from_usage);
        assert_eq!(rec.cached_tokens, Some(48));
    }

    #[test]
    fn tool_call_deltas_are_answer_content_and_assemble_into_the_record() {
        let mut s = StreamState::new(true);
        let first = br#"{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"calculator","arguments":""}}]}}],"usage":{"prompt_tokens":9,"completion_tokens":1}}"#;
        let more = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\": 1}"}}]}}],"usage":{"prompt_tokens":9,"completion_tokens":4}}"#;
        let content = |tokens| ChunkInfo::Content {
            tokens,
            answer: true,
        };
        assert_eq!(s.on_event(first).unwrap(), content(1));
        assert_eq!(s.on_event(more).unwrap(), content(3));
        s.on_event(b"[DONE]").unwrap();
        let mut rec = RequestRecord::new(0.0, 0.0);
        rec.push_chunk(1.0, 1);
        rec.push_chunk(2.0, 3);
        assert_eq!(s.finish(&mut rec), Outcome::Ok);
        let calls = rec.tool_calls.unwrap();
        assert_eq!(calls.defects, Vec::<String>::new());
        assert_eq!(calls.calls[0].arguments, "{\"a\": 1}");
        assert_eq!(rec.text.as_deref(), Some(""));
    }

    #[test]
    fn structured_bodies_carry_tools_or_a_schema_and_never_force_their_length() {
        let tools = Structured::tools(std::sync::Arc::new(serde_json::json!([
            {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
        ])));
        let b = build_structured_body(
            Api::Chat,
            "m",
            PromptBody::Text("hi".into()),
            64,
            true,
            Some(&tools),
        );
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["tools"][0]["function"]["name"], "calculator");
        assert!(v.get("ignore_eos").is_none() && v.get("min_tokens").is_none());
        let schema = Structured::schema("x", &serde_json::json!({"type": "object"}));
        let b = build_structured_body(
            Api::Chat,
            "m",
            PromptBody::Text("hi".into()),
            64,
            false,
            Some(&schema),
        );
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v["response_format"]["json_schema"]["schema"]["type"],
            "object"
        );
        assert!(v.get("tools").is_none());
    }

    #[test]
    fn malformed_chunks_and_embedded_errors_are_classified() {
        let mut s = StreamState::default();
        let e = s.on_event(b"{not json").unwrap_err();
        assert_eq!(e.class, FailureClass::Protocol);
        let e = s
            .on_event(br#"{"error":{"message":"boom","code":500}}"#)
            .unwrap_err();
        assert_eq!(e.class, FailureClass::HttpError);
        assert!(e.detail.contains("boom"));
    }

    #[test]
    fn missing_done_is_a_protocol_failure() {
        let s = StreamState::default();
        let mut rec = RequestRecord::new(0.0, 0.0);
        rec.push_chunk(1.0, 1);
        match s.finish(&mut rec) {
            Outcome::Failed(f) => assert_eq!(f.class, FailureClass::Protocol),
            o => panic!("expected failure, got {o:?}"),
        }
    }

    #[test]
    fn body_carries_exact_length_knobs_and_usage_options() {
        let b = build_body(Api::Chat, "m", PromptBody::Text("hi".into()), 256, true);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["messages"][0]["content"], "hi");
        assert_eq!(v["max_tokens"], 256);
        assert_eq!(v["min_tokens"], 256);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        let b = build_body(
            Api::Completions,
            "m",
            PromptBody::Text("hi".into()),
            8,
            false,
        );
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["prompt"], "hi");
        assert!(v.get("ignore_eos").is_none() && v.get("min_tokens").is_none());
    }
}
