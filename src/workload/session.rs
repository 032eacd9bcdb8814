//! Agentic multi-turn scenarios.
//!
//! A scenario is an optional system prompt and a list of user turns. Each turn
//! is sent with the whole conversation so far, including the server's real
//! earlier answers, so per-turn latency shows how well the engine reuses the
//! growing shared prefix. Scenarios come from TOML files:
//!
//! ```toml
//! system = "You are a careful reviewer."   # optional
//! [[turns]]
//! user = "First request"
//! output_len = 256        # optional: exact output tokens for this turn
//! think_time_ms = 1500    # optional: pause before sending this turn
//! ```
//!
//! or from the built-ins `calculator` and `etl-debug` (data files embedded in
//! the binary). Invariants: a loaded scenario has at least one turn, every
//! user text is non-blank and every `output_len` is at least 1; errors name
//! the file and the line:column. [`messages_for_turn`] is a pure function of
//! its arguments.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::WorkloadError;

/// Names of the built-in scenarios.
pub const BUILTIN_SCENARIOS: &[&str] = &["calculator", "etl-debug"];

const CALCULATOR_TOML: &str = include_str!("data/calculator.toml");
const ETL_DEBUG_TOML: &str = include_str!("data/etl_debug.toml");
/// The buggy ETL script the `etl-debug` scenario asks the assistant to fix.
pub const ETL_DEBUG_SCRIPT: &str = include_str!("data/etl_debug.py");
/// Where the ETL script is inserted into the `etl-debug` turns.
const ETL_PLACEHOLDER: &str = "{{etl_script}}";

/// A multi-turn conversation to replay against a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    /// The built-in name or the file stem.
    pub name: String,
    /// System prompt sent first, if any.
    pub system: Option<String>,
    /// User turns in order; never empty.
    pub turns: Vec<Turn>,
}

/// One user turn of a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The user message.
    pub user: String,
    /// Exact output tokens to request for this turn (`None`: the campaign default).
    pub output_len: Option<usize>,
    /// Pause before sending this turn, in milliseconds (`None`: no pause).
    pub think_time_ms: Option<u64>,
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
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
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
}

impl ChatMessage {
    fn new(role: Role, content: &str) -> Self {
        Self {
            role,
            content: content.to_string(),
        }
    }
}

/// The messages to send for turn `turn_index` (0-based): system prompt, then
/// each earlier user turn followed by the server's real answer to it, then
/// this turn's user message.
///
/// `previous_answers` must hold exactly the answers to turns `0..turn_index`.
pub fn messages_for_turn(
    scenario: &Scenario,
    turn_index: usize,
    previous_answers: &[String],
) -> Result<Vec<ChatMessage>, WorkloadError> {
    if turn_index >= scenario.turns.len() {
        return Err(WorkloadError::InvalidArgument(format!(
            "scenario `{}` has {} turns; there is no turn {turn_index}",
            scenario.name,
            scenario.turns.len()
        )));
    }
    if previous_answers.len() != turn_index {
        return Err(WorkloadError::InvalidArgument(format!(
            "turn {turn_index} of scenario `{}` needs the {turn_index} earlier answers, got {}",
            scenario.name,
            previous_answers.len()
        )));
    }
    let mut out = Vec::with_capacity(2 * turn_index + 2);
    if let Some(system) = &scenario.system {
        out.push(ChatMessage::new(Role::System, system));
    }
    for (turn, answer) in scenario.turns.iter().zip(previous_answers) {
        out.push(ChatMessage::new(Role::User, &turn.user));
        out.push(ChatMessage::new(Role::Assistant, answer));
    }
    out.push(ChatMessage::new(
        Role::User,
        &scenario.turns[turn_index].user,
    ));
    Ok(out)
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
    turns: Spanned<Vec<Spanned<RawTurn>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    user: Spanned<String>,
    output_len: Option<Spanned<u64>>,
    think_time_ms: Option<u64>,
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
    let mut turns = Vec::with_capacity(raw.turns.get_ref().len());
    for (i, turn) in raw.turns.into_inner().into_iter().enumerate() {
        let turn = turn.into_inner();
        if turn.user.get_ref().trim().is_empty() {
            return Err(error(
                Some(turn.user.span()),
                format!("turn {} has an empty `user` text", i + 1),
            ));
        }
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
        turns.push(Turn {
            user: turn.user.into_inner(),
            output_len,
            think_time_ms: turn.think_time_ms,
        });
    }
    Ok(Scenario {
        name: name.to_string(),
        system: raw.system,
        turns,
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

    fn answers(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("answer {i}")).collect()
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
        assert!(
            err.contains("calculator") && err.contains("etl-debug"),
            "{err}"
        );
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
        let first = messages_for_turn(&s, 0, &[]).unwrap();
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].role, Role::System);
        assert_eq!(first[1].content, s.turns[0].user);

        let third = messages_for_turn(&s, 2, &answers(2)).unwrap();
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
    fn messages_reject_bad_turn_or_answer_count() {
        let s = builtin("calculator").unwrap();
        assert!(messages_for_turn(&s, 5, &answers(5)).is_err());
        assert!(messages_for_turn(&s, 2, &answers(1)).is_err());
        assert!(messages_for_turn(&s, 2, &answers(3)).is_err());
    }

    #[test]
    fn parses_minimal_file_without_system() {
        let s = parse_scenario("[[turns]]\nuser = \"hi\"\n", "x.toml", "x").unwrap();
        assert_eq!(s.system, None);
        assert_eq!(s.turns[0].think_time(), Duration::ZERO);
        let m = messages_for_turn(&s, 0, &[]).unwrap();
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
