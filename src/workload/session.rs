//! Agentic multi-turn scenarios.
//!
//! A scenario is an optional system prompt and a list of user turns. Each turn
//! is sent with the whole conversation so far, including the server's real
//! earlier answers, so per-turn latency shows how well the engine reuses the
//! growing shared prefix. Scenarios come from TOML files:
//!
//! ```toml
//! system = "You are a careful reviewer."   # optional
//! tools = "builtin"       # optional: the built-in tools, or [[tools]] definitions
//! [[turns]]
//! user = "First request"
//! output_len = 256        # optional: exact output tokens for this turn
//! think_time_ms = 1500    # optional: pause before sending this turn
//! tool = { name = "calculator", arguments = { operation = "add", a = 1, b = 2 }, result = "3" }
//! [[turns]]               # no `user`: the model goes on after the tool's result
//! ```
//!
//! or from the built-ins `calculator` and `etl-debug` (plain chat) and
//! `calculator-agent` and `etl-agent` (driven as an agent drives them:
//! data files embedded in the binary).
//!
//! A turn with a `tool` expects the reply to call that function with those
//! arguments (judged by value, as answer checks judge JSON); the
//! conversation then goes on with the reply's call and the tool's `result`
//! as a `tool` message, as an agent's loop does. A reply that calls
//! another function, with wrong arguments, with a call an agent cannot
//! use, or no call at all derails the session: the turn's check fails with
//! why, and the session stops there. So does a reply that calls a function
//! where the turn expects words.
//!
//! Invariants: a loaded scenario has at least one turn, every user text is
//! non-blank except a turn that follows a tool's result, every `output_len`
//! is at least 1, every `tool` names one of the scenario's tools; errors
//! name the file and the line:column. [`Conversation`] is a pure function
//! of the turns and replies it is given.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toml::Spanned;

use super::answer_check::{AnswerCheck, Expect};
use super::structured::{ToolCall, ToolCalls};
use super::WorkloadError;

/// Names of the built-in scenarios.
pub const BUILTIN_SCENARIOS: &[&str] =
    &["calculator", "etl-debug", "calculator-agent", "etl-agent"];

const CALCULATOR_TOML: &str = include_str!("data/calculator.toml");
const ETL_DEBUG_TOML: &str = include_str!("data/etl_debug.toml");
const CALCULATOR_AGENT_TOML: &str = include_str!("data/calculator_agent.toml");
const ETL_AGENT_TOML: &str = include_str!("data/etl_agent.toml");
/// The buggy ETL script the `etl-debug` scenario asks the assistant to fix.
pub const ETL_DEBUG_SCRIPT: &str = include_str!("data/etl_debug.py");
/// Where the ETL script is inserted into the `etl-debug` turns.
const ETL_PLACEHOLDER: &str = "{{etl_script}}";

/// A multi-turn conversation to replay against a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// The built-in name or the file stem.
    pub name: String,
    /// System prompt sent first, if any.
    pub system: Option<String>,
    /// User turns in order; never empty.
    pub turns: Vec<Turn>,
    /// Function definitions offered with every turn, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Arc<Value>>,
}

/// One user turn of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The user message; empty for a turn that goes on after a tool's result.
    pub user: String,
    /// Exact output tokens to request for this turn (`None`: the campaign default).
    pub output_len: Option<usize>,
    /// Pause before sending this turn, in milliseconds (`None`: no pause).
    pub think_time_ms: Option<u64>,
    /// The call the reply must make, and the tool's answer to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolStep>,
}

/// A function call a turn expects, and what the tool answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolStep {
    /// The function.
    pub name: String,
    /// Its arguments, a JSON object judged by value.
    pub arguments: Value,
    /// The tool's answer, sent back as a `tool` message.
    pub result: String,
}

impl Scenario {
    /// The first 16 hex digits of the SHA-256 of its parsed content (system
    /// prompt, turns, lengths, pauses): what a session sends, so a comment
    /// or spacing edit in its file keeps the digest and a turn's edit does not.
    pub fn digest(&self) -> String {
        let bytes = serde_json::to_vec(self).expect("scenario serializes");
        crate::util::hash::sha256_hex(&bytes, 16)
    }
}

impl Turn {
    /// The pause before this turn.
    pub fn think_time(&self) -> Duration {
        Duration::from_millis(self.think_time_ms.unwrap_or(0))
    }

    /// The check of this turn's reply: the call it expects.
    pub fn tool_check(&self) -> Option<AnswerCheck> {
        self.tool.as_ref().map(|t| AnswerCheck {
            expect: Expect::ToolCall(t.name.clone().into()),
            reference: t.arguments.to_string().into(),
        })
    }
}

/// The check of a built-in scenario's turn whose user text is `user`, if it
/// expects a call: what the simulator answers such a turn with.
pub fn builtin_tool_check(user: &str) -> Option<&'static AnswerCheck> {
    static CHECKS: OnceLock<Vec<(String, AnswerCheck)>> = OnceLock::new();
    CHECKS
        .get_or_init(|| {
            BUILTIN_SCENARIOS
                .iter()
                .filter_map(|n| builtin(n).ok())
                .flat_map(|s| s.turns)
                .filter_map(|t| Some((t.user.clone(), t.tool_check()?)))
                .collect()
        })
        .iter()
        .find(|(u, _)| !u.is_empty() && u == user)
        .map(|(_, c)| c)
}

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt.
    System,
    /// The simulated user.
    User,
    /// The server's answers.
    Assistant,
    /// A tool's answer to a call.
    Tool,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        })
    }
}

/// One message of an OpenAI-style chat request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
    /// The calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    fn new(role: Role, content: &str) -> Self {
        Self {
            role,
            content: content.to_string(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A session's conversation so far: the system prompt, then each turn's
/// user text (if any), the server's real reply, and a tool's answer where
/// the reply called one.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    messages: Vec<ChatMessage>,
}

impl Conversation {
    /// The conversation before the first turn.
    pub fn new(scenario: &Scenario) -> Self {
        Self {
            messages: scenario
                .system
                .iter()
                .map(|s| ChatMessage::new(Role::System, s))
                .collect(),
        }
    }

    /// The messages to send for `turn`: the conversation with its user
    /// text (a turn after a tool's answer may have none).
    pub fn ask(&mut self, turn: &Turn) -> &[ChatMessage] {
        if !turn.user.is_empty() {
            self.messages.push(ChatMessage::new(Role::User, &turn.user));
        }
        &self.messages
    }

    /// The reply was words.
    pub fn answered(&mut self, text: &str) {
        self.messages.push(ChatMessage::new(Role::Assistant, text));
    }

    /// The reply called tools; `step`'s result answers the call named as
    /// it expects (the others get an empty answer, so every call has one).
    pub fn called(&mut self, text: &str, calls: &ToolCalls, step: &ToolStep) {
        let mut reply = ChatMessage::new(Role::Assistant, text);
        reply.tool_calls = calls.calls.clone();
        self.messages.push(reply);
        let mut answered = false;
        for c in &calls.calls {
            let right = !answered && c.name.as_deref() == Some(step.name.as_str());
            answered |= right;
            let mut m = ChatMessage::new(Role::Tool, if right { &step.result } else { "" });
            m.tool_call_id = c.id.clone();
            self.messages.push(m);
        }
    }

    /// The messages so far.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }
}

/// A built-in scenario by name (see [`BUILTIN_SCENARIOS`]).
pub fn builtin(name: &str) -> Result<Scenario, WorkloadError> {
    match name {
        "calculator" => parse_scenario(CALCULATOR_TOML, "built-in scenario calculator", name),
        "etl-debug" => {
            let mut s = parse_scenario(ETL_DEBUG_TOML, "built-in scenario etl-debug", name)?;
            for turn in &mut s.turns {
                turn.user = turn.user.replace(ETL_PLACEHOLDER, ETL_DEBUG_SCRIPT);
            }
            Ok(s)
        }
        "calculator-agent" => parse_scenario(
            CALCULATOR_AGENT_TOML,
            "built-in scenario calculator-agent",
            name,
        ),
        "etl-agent" => {
            let mut s = parse_scenario(ETL_AGENT_TOML, "built-in scenario etl-agent", name)?;
            for turn in &mut s.turns {
                if let Some(t) = &mut turn.tool {
                    t.result = t.result.replace(ETL_PLACEHOLDER, ETL_DEBUG_SCRIPT);
                }
            }
            Ok(s)
        }
        _ => Err(WorkloadError::UnknownName {
            what: "scenario",
            given: name.to_string(),
            allowed: BUILTIN_SCENARIOS.join(", "),
        }),
    }
}

/// Loads a scenario from a TOML file; its name is the file stem.
pub fn load_scenario(path: &Path) -> Result<Scenario, WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".to_string());
    parse_scenario(&text, &path.display().to_string(), &name)
}

/// A built-in name, or else a path to a TOML file.
pub fn resolve(name_or_path: &str) -> Result<Scenario, WorkloadError> {
    if BUILTIN_SCENARIOS.contains(&name_or_path) {
        builtin(name_or_path)
    } else if Path::new(name_or_path).exists() {
        load_scenario(Path::new(name_or_path))
    } else {
        Err(WorkloadError::UnknownName {
            what: "scenario (neither a built-in nor an existing file)",
            given: name_or_path.to_string(),
            allowed: BUILTIN_SCENARIOS.join(", "),
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    system: Option<String>,
    tools: Option<Spanned<toml::Value>>,
    turns: Spanned<Vec<Spanned<RawTurn>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    user: Option<Spanned<String>>,
    output_len: Option<Spanned<u64>>,
    think_time_ms: Option<u64>,
    tool: Option<Spanned<RawTool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: String,
    arguments: toml::Table,
    result: String,
}

/// A scenario's `tools`: `"builtin"` or a list of function definitions.
fn scenario_tools(raw: &toml::Value) -> Result<Arc<Value>, super::structured::DefinitionError> {
    if raw.as_str() == Some("builtin") {
        return Ok(super::structured::builtin_tools());
    }
    let tools = serde_json::to_value(raw)
        .map_err(|e| super::structured::DefinitionError::NotJson(e.to_string()))?;
    super::structured::check_tools(&tools)?;
    Ok(Arc::new(tools))
}

/// Parses scenario TOML; `origin` names the file in errors.
pub fn parse_scenario(text: &str, origin: &str, name: &str) -> Result<Scenario, WorkloadError> {
    let error = |span: Option<std::ops::Range<usize>>, message: String| WorkloadError::Parse {
        path: origin.to_string(),
        location: span.map_or_else(
            || "line 1, column 1".to_string(),
            |s| line_col(text, s.start),
        ),
        message,
    };
    let raw: RawScenario =
        toml::from_str(text).map_err(|e| error(e.span(), e.message().trim().to_string()))?;
    if raw.turns.get_ref().is_empty() {
        return Err(error(
            Some(raw.turns.span()),
            "a scenario needs at least one [[turns]] entry".to_string(),
        ));
    }
    let tools = match &raw.tools {
        Some(t) => {
            Some(scenario_tools(t.get_ref()).map_err(|e| error(Some(t.span()), e.to_string()))?)
        }
        None => None,
    };
    let names: Vec<String> = tools
        .as_deref()
        .map(|t| {
            super::structured::tool_names(t)
                .into_iter()
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let mut turns: Vec<Turn> = Vec::with_capacity(raw.turns.get_ref().len());
    for (i, turn) in raw.turns.into_inner().into_iter().enumerate() {
        let (span, turn) = (turn.span(), turn.into_inner());
        let after_tool = turns.last().is_some_and(|t| t.tool.is_some());
        let user = match &turn.user {
            Some(u) if u.get_ref().trim().is_empty() => {
                return Err(error(
                    Some(u.span()),
                    format!("turn {} has an empty `user` text", i + 1),
                ))
            }
            Some(u) => u.get_ref().clone(),
            None if after_tool => String::new(),
            None => {
                return Err(error(
                    Some(span),
                    format!("turn {} needs a `user` text (only a turn after a tool's result may go without)", i + 1),
                ))
            }
        };
        let output_len = match turn.output_len {
            Some(n) if *n.get_ref() == 0 => {
                return Err(error(
                    Some(n.span()),
                    format!("turn {}: `output_len` must be at least 1", i + 1),
                ))
            }
            Some(n) => Some(usize::try_from(*n.get_ref()).map_err(|_| {
                error(
                    Some(n.span()),
                    format!("turn {}: `output_len` is too large", i + 1),
                )
            })?),
            None => None,
        };
        let tool = match turn.tool {
            None => None,
            Some(t) => {
                let (span, t) = (t.span(), t.into_inner());
                if !names.contains(&t.name) {
                    let offered = if names.is_empty() {
                        "the scenario offers no `tools`".to_string()
                    } else {
                        format!("the scenario's tools are {}", names.join(", "))
                    };
                    return Err(error(
                        Some(span),
                        format!(
                            "turn {}: tool `{}` is not offered; {offered}",
                            i + 1,
                            t.name
                        ),
                    ));
                }
                Some(ToolStep {
                    name: t.name,
                    arguments: serde_json::to_value(&t.arguments)
                        .map_err(|e| error(Some(span.clone()), e.to_string()))?,
                    result: t.result,
                })
            }
        };
        turns.push(Turn {
            user,
            output_len,
            think_time_ms: turn.think_time_ms,
            tool,
        });
    }
    Ok(Scenario {
        name: name.to_string(),
        system: raw.system,
        turns,
        tools,
    })
}

/// `line L, column C` (1-based, columns in characters) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages of turn `t` when every earlier reply was "answer i".
    fn messages_for(s: &Scenario, t: usize) -> Vec<ChatMessage> {
        let mut talk = Conversation::new(s);
        for (i, turn) in s.turns.iter().enumerate().take(t) {
            talk.ask(turn);
            talk.answered(&format!("answer {i}"));
        }
        talk.ask(&s.turns[t]).to_vec()
    }

    #[test]
    fn builtins_load_and_have_expected_shape() {
        let calc = builtin("calculator").unwrap();
        assert_eq!(calc.turns.len(), 5);
        assert!(calc.system.is_some());
        let etl = builtin("etl-debug").unwrap();
        assert!(etl.turns.len() >= 4);
        assert!(etl.turns[0].user.contains("def aggregate(rows):"));
        assert!(etl.turns.iter().all(|t| !t.user.contains(ETL_PLACEHOLDER)));
        for name in BUILTIN_SCENARIOS {
            let s = builtin(name).unwrap();
            assert_eq!(&s.name, name);
            assert!(s.turns.iter().all(|t| t.output_len.is_some()));
        }
        let err = builtin("nope").unwrap_err().to_string();
        for name in BUILTIN_SCENARIOS {
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn etl_script_is_about_two_hundred_lines_and_lists_its_bugs() {
        let lines = ETL_DEBUG_SCRIPT.lines().count();
        assert!((180..=260).contains(&lines), "{lines} lines");
        assert!(ETL_DEBUG_TOML.contains("Planted bugs"));
        for stage in [
            "def extract",
            "def validate",
            "def transform",
            "def aggregate",
            "def load",
        ] {
            assert!(ETL_DEBUG_SCRIPT.contains(stage), "{stage}");
        }
    }

    #[test]
    fn messages_include_real_previous_answers_in_order() {
        let s = builtin("calculator").unwrap();
        let first = messages_for(&s, 0);
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].role, Role::System);
        assert_eq!(first[1].content, s.turns[0].user);

        let third = messages_for(&s, 2);
        let roles: Vec<Role> = third.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::User,
                Role::Assistant,
                Role::User
            ]
        );
        assert_eq!(third[2].content, "answer 0");
        assert_eq!(third[4].content, "answer 1");
        assert_eq!(third[5].content, s.turns[2].user);
        // Each turn's request extends the previous one: the conversation is a growing prefix.
        assert_eq!(&third[..2], &first[..2]);
        let json = serde_json::to_string(&third[2]).unwrap();
        assert_eq!(json, r#"{"role":"assistant","content":"answer 0"}"#);
    }

    #[test]
    fn an_agent_session_answers_each_call_with_its_tools_result_and_goes_on() {
        let s = builtin("calculator-agent").unwrap();
        assert!(s.tools.is_some());
        let step = s.turns[0].tool.clone().unwrap();
        assert_eq!(step.name, "calculator");
        assert!(s.turns[1].user.is_empty() && s.turns[1].tool.is_none());
        let mut talk = Conversation::new(&s);
        talk.ask(&s.turns[0]);
        let calls = ToolCalls {
            calls: vec![ToolCall {
                id: Some("c7".into()),
                name: Some("calculator".into()),
                arguments: step.arguments.to_string(),
            }],
            defects: Vec::new(),
        };
        talk.called("", &calls, &step);
        let next = talk.ask(&s.turns[1]).to_vec();
        let roles: Vec<Role> = next.iter().map(|m| m.role).collect();
        // No user text after the tool's answer: the model goes on from it.
        assert_eq!(
            roles,
            [Role::System, Role::User, Role::Assistant, Role::Tool]
        );
        assert_eq!(next[2].tool_calls, calls.calls);
        assert_eq!(next[3].tool_call_id.as_deref(), Some("c7"));
        assert_eq!(next[3].content, "1517");
        // The simulator knows what the built-in turns expect.
        let check = builtin_tool_check(&s.turns[0].user).unwrap();
        assert_eq!(check.judge_reply("", &calls), Ok(()));
        let etl = builtin("etl-agent").unwrap();
        let read = etl.turns[0].tool.as_ref().unwrap();
        assert_eq!(read.result, ETL_DEBUG_SCRIPT);
        assert!(builtin_tool_check(&etl.turns[2].user).is_some());
        assert!(builtin_tool_check("").is_none());
    }

    #[test]
    fn tool_turns_are_checked_against_the_scenarios_tools() {
        let ok = "tools = \"builtin\"\n[[turns]]\nuser = \"a\"\ntool = { name = \"calculator\", arguments = { operation = \"add\", a = 1, b = 2 }, result = \"3\" }\n[[turns]]\n";
        let s = parse_scenario(ok, "t.toml", "t").unwrap();
        assert_eq!(s.turns[0].tool.as_ref().unwrap().arguments["b"], 2);
        let cases = [
            (
                "[[turns]]\nuser = \"a\"\ntool = { name = \"calculator\", arguments = {}, result = \"\" }\n",
                "line 3, column 8",
                "offers no `tools`",
            ),
            (
                "tools = \"builtin\"\n[[turns]]\nuser = \"a\"\ntool = { name = \"rm\", arguments = {}, result = \"\" }\n",
                "line 4",
                "calculator, convert_units",
            ),
            ("[[turns]]\noutput_len = 3\n", "line 1", "needs a `user` text"),
            (
                "tools = [{ type = \"function\", function = {} }]\n[[turns]]\nuser = \"a\"\n",
                "line 1, column 9",
                "name",
            ),
        ];
        for (text, location, needle) in cases {
            let msg = parse_scenario(text, "t.toml", "t").unwrap_err().to_string();
            assert!(msg.contains(location), "{text:?}: {msg}");
            assert!(msg.contains(needle), "{text:?}: {msg}");
        }
    }

    #[test]
    fn a_plain_scenario_keeps_its_digest() {
        // A scenario without tools serializes as it did before tools existed.
        let s = parse_scenario("[[turns]]\nuser = \"hi\"\n", "x.toml", "x").unwrap();
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"name":"x","system":null,"turns":[{"user":"hi","output_len":null,"think_time_ms":null}]}"#
        );
    }

    #[test]
    fn parses_minimal_file_without_system() {
        let s = parse_scenario("[[turns]]\nuser = \"hi\"\n", "x.toml", "x").unwrap();
        assert_eq!(s.system, None);
        assert_eq!(s.turns[0].think_time(), Duration::ZERO);
        let m = messages_for(&s, 0);
        assert_eq!(m, [ChatMessage::new(Role::User, "hi")]);
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let cases = [
            (
                "[[turns]]\nuser = \"a\"\noutput_len = 0\n",
                "line 3, column 14",
                "at least 1",
            ),
            ("[[turns]]\nuser = \"a\"\noutput_len = -5\n", "line 3", ""),
            (
                "[[turns]]\nuser = \"a\"\n\n[[turns]]\nuser = \"  \"\n",
                "line 5, column 8",
                "empty",
            ),
            (
                "[[turns]]\nuser = \"a\"\nthinktime = 3\n",
                "line 3, column 1",
                "thinktime",
            ),
            (
                "system = \"s\"\nturns = []\n",
                "line 2, column 9",
                "at least one",
            ),
            ("system = \"s\"\n", "line 1", "turns"),
            ("[[turns]]\nuser = \"unterminated\n", "line 2", ""),
        ];
        for (text, location, needle) in cases {
            let err = parse_scenario(text, "scen.toml", "scen").unwrap_err();
            let msg = err.to_string();
            assert!(msg.starts_with("scen.toml: "), "{msg}");
            assert!(msg.contains(location), "{text:?}: {msg}");
            assert!(msg.contains(needle), "{text:?}: {msg}");
        }
    }

    #[test]
    fn loads_file_fixture_and_resolves_names() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/workload/scenario.toml"
        );
        let s = load_scenario(Path::new(path)).unwrap();
        assert_eq!(s.name, "scenario");
        assert_eq!(s.turns.len(), 3);
        assert_eq!(s.turns[1].output_len, Some(64));
        assert_eq!(s.turns[1].think_time(), Duration::from_millis(500));
        assert_eq!(resolve(path).unwrap(), s);
        assert_eq!(resolve("etl-debug").unwrap().name, "etl-debug");
        assert!(resolve("/nonexistent/scenario.toml").is_err());
        assert!(matches!(
            load_scenario(Path::new("/nonexistent/s.toml")).unwrap_err(),
            WorkloadError::Io { .. }
        ));
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncé d", 7), "line 2, column 4");
        assert_eq!(line_col("x", 0), "line 1, column 1");
    }
}
