//! Answers that can be checked: the built-in prompts whose right answer is
//! known, and the check each answer must pass. A check judges what was
//! asked, not the answer's shape:
//!
//! - **numbers** (arithmetic): the *final answer* holds the asked figures.
//!   When the reply has a final-answer phrase ("final answer", "answer is",
//!   "answer:", "result is"; the last one counts), its first number (a
//!   single figure) or the numbers of its statement up to the end of that
//!   sentence (several figures, all of them) are judged; otherwise the last
//!   number of the reply, or every asked figure in its last sentence with a
//!   number. A right figure named earlier and then discarded does not pass.
//!   Each figure has a tolerance, stated beside it.
//! - **clock time**: as numbers, for a time of day (`13:34`, `1:34 pm`).
//! - **JSON values** (json-extraction): the answer's JSON (the last
//!   complete JSON value in the reply; a value cut off at the end fails)
//!   holds the reference's values: numbers equal within 0.005 (or a
//!   millionth of their size), strings equal once trimmed, case-folded and
//!   with runs of blanks made one, booleans and nulls equal, lists item for
//!   item in any order with none missing and none extra, objects with every
//!   reference key (extra keys allowed). A number written as a string, or
//!   the reverse, is compared by value.
//!
//! - **tool call** (tool-call): the reply calls the expected function
//!   (any of its calls with that name) and its arguments, parsed as JSON,
//!   hold the reference's values as JSON values above. A call the client
//!   could not use (no id, no name, arguments that are not JSON, deltas
//!   out of order) fails with what was wrong; so does a reply with no call.
//! - **schema** (json-schema): the whole reply is one JSON value, valid
//!   against the schema sent as its `response_format`, holding the
//!   reference's values as JSON values above. A number written as a
//!   string passes the values and fails the schema.
//!
//! Code and poems have no check: a program would have to be run and a poem
//! has no right answer. An answer passes or fails as a whole, with a
//! one-line reason when it fails (expected against found); a truncated
//! answer that never reached its result fails, which is why pass rates are
//! only compared between servers asked the same prompts with the same
//! output budget.
//!
//! Each check comes with a reference answer that passes it, so the
//! simulator can answer checkable prompts right (and, as faults, wrong:
//! spoiled, or plausible with wrong values).

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::prompts::PromptKind;
use super::structured::{schema_of, ToolCalls};

/// Why an answer fails its check, in one line (expected against found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss(pub String);

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Miss {}

impl std::ops::Deref for Miss {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Miss {
    fn from(s: &str) -> Self {
        Miss(s.to_string())
    }
}

impl From<Miss> for String {
    fn from(m: Miss) -> Self {
        m.0
    }
}

/// A [`Miss`] from `format!` arguments.
macro_rules! miss {
    ($($t:tt)*) => {
        Miss(format!($($t)*))
    };
}

/// What a right answer contains.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// The final answer holds these (value, tolerance) figures.
    Numbers(Cow<'static, [(f64, f64)]>),
    /// The final answer is this time of day (hours 0–23, minutes).
    Clock(u32, u32),
    /// The answer's JSON holds the values of the reference answer, which is JSON.
    JsonValues,
    /// The answer, trimmed, is the reference answer exactly.
    ExactText,
    /// The answer matches this regular expression (the reference answer is its source).
    Pattern(Pattern),
    /// The reply calls this function with arguments holding the values of
    /// the reference answer, which is JSON.
    ToolCall(Cow<'static, str>),
    /// The reply is JSON valid against this schema, holding the values of
    /// the reference answer, which is JSON.
    Schema(SchemaCheck),
}

/// A compiled JSON schema, equal to another with the same schema.
#[derive(Clone)]
pub struct SchemaCheck {
    /// The schema as sent in the request's `response_format`.
    pub schema: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl SchemaCheck {
    /// Compile `schema`, or say why it is not one.
    pub fn new(schema: Value) -> Result<Self, super::structured::DefinitionError> {
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| super::structured::DefinitionError::BadSchema(e.to_string()))?;
        Ok(Self {
            schema: Arc::new(schema),
            validator: Arc::new(validator),
        })
    }

    /// `Ok` when `v` is valid, else its first error and where.
    fn validate(&self, v: &Value) -> Result<(), Miss> {
        match self.validator.iter_errors(v).next() {
            None => Ok(()),
            Some(e) => {
                let at = e.instance_path.to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                Err(miss!("breaks its schema at {at}: {e}"))
            }
        }
    }
}

impl std::fmt::Debug for SchemaCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SchemaCheck({})", self.schema)
    }
}

impl PartialEq for SchemaCheck {
    fn eq(&self, other: &Self) -> bool {
        self.schema == other.schema
    }
}

/// A compiled regular expression, equal to another with the same source.
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

/// The check of one prompt, with an answer that passes it.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerCheck {
    /// What a right answer contains.
    pub expect: Expect,
    /// A right answer, in words (for a pattern, its source).
    pub reference: Cow<'static, str>,
}

impl AnswerCheck {
    /// Whether `answer` passes.
    pub fn passes(&self, answer: &str) -> bool {
        self.judge(answer).is_ok()
    }

    /// `Ok` when `answer` passes, else why not in one line (expected against found).
    pub fn judge(&self, answer: &str) -> Result<(), Miss> {
        self.judge_reply(answer, &ToolCalls::default())
    }

    /// [`Self::judge`] for a reply that may have called tools.
    pub fn judge_reply(&self, answer: &str, calls: &ToolCalls) -> Result<(), Miss> {
        match &self.expect {
            Expect::ToolCall(name) => judge_tool_call(name, &self.reference, answer, calls),
            Expect::Schema(schema) => {
                let got: Value = serde_json::from_str(answer.trim()).map_err(|e| {
                    miss!(
                        "the answer is not one JSON value ({e}): {:?}",
                        brief_text(answer.trim())
                    )
                })?;
                schema.validate(&got)?;
                compare_json(&reference_json(&self.reference)?, &got, "$")
            }
            Expect::Numbers(want) => judge_numbers(answer, want),
            Expect::Clock(h, m) => judge_clock(answer, (*h, *m)),
            Expect::JsonValues => {
                let want = reference_json(&self.reference)?;
                let got = answer_json(answer)?;
                compare_json(&want, &got, "$")
            }
            Expect::ExactText if answer.trim() == self.reference.trim() => Ok(()),
            Expect::ExactText => Err(miss!(
                "expected exactly {:?}, found {:?}",
                brief_text(&self.reference),
                brief_text(answer.trim())
            )),
            Expect::Pattern(p) if p.0.is_match(answer) => Ok(()),
            Expect::Pattern(p) => Err(miss!(
                "expected a match of /{}/, found {:?}",
                p.0.as_str(),
                brief_text(answer.trim())
            )),
        }
    }

    /// An answer that looks right and is wrong: the right figures named as
    /// a discarded first guess before a wrong final answer, or JSON with
    /// every reference key and wrong values.
    pub fn plausible_wrong(&self) -> String {
        match &self.expect {
            Expect::Numbers(want) => {
                let list = |f: &dyn Fn(f64) -> f64| {
                    want.iter()
                        .map(|(v, _)| format_number(f(*v)))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!(
                    "At first I got {}, but that is wrong. The final answer is {}.",
                    list(&|v| v),
                    list(&|v| v + 1.0 + v.abs() * 0.1)
                )
            }
            Expect::Clock(h, m) => format!(
                "At first I got {h:02}:{m:02}, but that is wrong. The final answer is {:02}:{m:02}.",
                (h + 1) % 24
            ),
            Expect::JsonValues | Expect::ToolCall(_) | Expect::Schema(_) => match serde_json::from_str::<Value>(&self.reference) {
                Ok(v) => wrong_values(&v).to_string(),
                Err(_) => format!("{{}} {}", self.reference),
            },
            Expect::ExactText | Expect::Pattern(_) => {
                format!("{} (unverified)", self.reference).replace(char::is_alphanumeric, "x")
            }
        }
    }
}

/// The reference answer of a JSON check, parsed.
fn reference_json(reference: &str) -> Result<Value, Miss> {
    serde_json::from_str(reference).map_err(|e| miss!("the reference is not JSON: {e}"))
}

/// A tool-call check (see the module doc).
fn judge_tool_call(
    name: &str,
    reference: &str,
    answer: &str,
    calls: &ToolCalls,
) -> Result<(), Miss> {
    if !calls.defects.is_empty() {
        return Err(miss!("malformed tool call: {}", calls.defects.join("; ")));
    }
    if calls.calls.is_empty() {
        return Err(miss!(
            "expected a call of `{name}`, found no tool call (answer {:?})",
            brief_text(answer.trim())
        ));
    }
    let Some(call) = calls.calls.iter().find(|c| c.name.as_deref() == Some(name)) else {
        let called: Vec<&str> = calls
            .calls
            .iter()
            .filter_map(|c| c.name.as_deref())
            .collect();
        return Err(miss!(
            "expected a call of `{name}`, found a call of `{}`",
            called.join("`, `")
        ));
    };
    let got: Value = serde_json::from_str(&call.arguments).map_err(|e| {
        miss!(
            "`{name}` arguments are not JSON ({e}): {:?}",
            brief_text(&call.arguments)
        )
    })?;
    compare_json(&reference_json(reference)?, &got, "arguments").map_err(|e| miss!("`{name}` {e}"))
}

/// Phrases that introduce a final answer, lower case.
const FINAL_PHRASES: &[&str] = &["final answer", "answer is", "answer:", "result is"];

/// The text after the reply's last final-answer phrase, if it has one.
fn after_final_phrase(answer: &str) -> Option<&str> {
    let lower = answer.to_lowercase();
    // Lower-casing can move byte offsets outside ASCII; search the ASCII
    // lower case instead, which keeps them.
    let lower = if lower.len() == answer.len() {
        lower
    } else {
        answer.to_ascii_lowercase()
    };
    FINAL_PHRASES
        .iter()
        .filter_map(|p| lower.rfind(p).map(|i| i + p.len()))
        .max()
        .map(|i| &answer[i..])
}

/// The sentence `text` opens with: up to a full stop followed by a blank,
/// or a line end.
fn first_sentence(text: &str) -> &str {
    let b = text.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        let stop = c == b'\n'
            || (matches!(c, b'.' | b'!' | b'?' | b';')
                && b.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()));
        if stop && i > 0 && text[..i].bytes().any(|c| c.is_ascii_digit()) {
            return &text[..i];
        }
    }
    text
}

/// The reply's last sentence that holds a number.
fn last_sentence_with_number(text: &str) -> &str {
    let mut best = text;
    let mut start = 0;
    let b = text.as_bytes();
    for i in 0..=b.len() {
        let end = i == b.len()
            || b[i] == b'\n'
            || (matches!(b[i], b'.' | b'!' | b'?')
                && b.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()));
        if end {
            let s = &text[start..i];
            if s.bytes().any(|c| c.is_ascii_digit()) {
                best = s;
            }
            start = (i + 1).min(b.len());
        }
    }
    best
}

fn judge_numbers(answer: &str, want: &[(f64, f64)]) -> Result<(), Miss> {
    let expected = || {
        want.iter()
            .map(|(v, t)| match t {
                t if *t > 0.0 => format!("{} (±{})", format_number(*v), format_number(*t)),
                _ => format_number(*v),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (found, place): (Vec<f64>, &str) = match after_final_phrase(answer) {
        Some(rest) if want.len() == 1 => {
            (numbers(rest).into_iter().take(1).collect(), "final answer")
        }
        Some(rest) => (numbers(first_sentence(rest)), "final answer"),
        None if want.len() == 1 => (
            numbers(answer).into_iter().last().into_iter().collect(),
            "last number",
        ),
        None => (
            numbers(last_sentence_with_number(answer)),
            "last sentence with a number",
        ),
    };
    let missing: Vec<String> = want
        .iter()
        .filter(|(v, tol)| !found.iter().any(|x| (x - v).abs() <= *tol))
        .map(|(v, _)| format_number(*v))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let shown = if found.is_empty() {
        "no number".to_string()
    } else {
        found
            .iter()
            .map(|v| format_number(*v))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(miss!(
        "expected {} as the {place}, found {shown}",
        expected()
    ))
}

fn judge_clock(answer: &str, want: (u32, u32)) -> Result<(), Miss> {
    let (times, place) = match after_final_phrase(answer) {
        Some(rest) => (
            clock_times(rest).into_iter().take(1).collect::<Vec<_>>(),
            "final answer",
        ),
        None => (
            clock_times(answer).into_iter().last().into_iter().collect(),
            "last time",
        ),
    };
    match times.first() {
        Some(&t) if t == want => Ok(()),
        Some(&(h, m)) => Err(miss!(
            "expected {:02}:{:02} as the {place}, found {h:02}:{m:02}",
            want.0,
            want.1
        )),
        None => Err(miss!(
            "expected {:02}:{:02} as the {place}, found no time",
            want.0,
            want.1
        )),
    }
}

/// Times of day in `text`, in order, as (hours 0–23, minutes): `H:MM` or
/// `HH:MM`, then an optional am/pm.
fn clock_times(text: &str) -> Vec<(u32, u32)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let hours = std::str::from_utf8(&b[start..i]).unwrap_or("");
        let clock = (1..=2).contains(&hours.len())
            && (start == 0 || !b[start - 1].is_ascii_digit())
            && b.get(i) == Some(&b':')
            && b.get(i + 1..i + 3)
                .is_some_and(|m| m.iter().all(u8::is_ascii_digit))
            && b.get(i + 3).is_none_or(|c| !c.is_ascii_digit());
        if !clock {
            i = if i == start { i + 1 } else { i };
            continue;
        }
        let (mut h, m): (u32, u32) = (
            hours.parse().unwrap_or(99),
            std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|m| m.parse().ok())
                .unwrap_or(99),
        );
        i += 3;
        let rest = text[i..].trim_start().to_ascii_lowercase();
        if rest.starts_with("pm") || rest.starts_with("p.m") {
            if h < 12 {
                h += 12;
            }
        } else if (rest.starts_with("am") || rest.starts_with("a.m")) && h == 12 {
            h = 0;
        }
        if h < 24 && m < 60 {
            out.push((h, m));
        }
    }
    out
}

/// A number as an answer writes it: whole numbers without a decimal part.
fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The check of `prompt` when it is a built-in prompt with one.
pub fn check_for(prompt: &str) -> Option<&'static AnswerCheck> {
    // Plain kinds first: JSON extraction and its schema twin share their
    // prompts, and a plain request is judged by values.
    PromptKind::named().find_map(|k| kind_check(k, prompt))
}

/// The check of `prompt` sent as a prompt of `kind`.
pub fn kind_check(kind: PromptKind, prompt: &str) -> Option<&'static AnswerCheck> {
    let i = kind.variants().iter().position(|v| *v == prompt)?;
    checks_of(kind).get(i)
}

/// Whether answers to prompts of `kind` are checked.
pub fn is_checked(kind: PromptKind) -> bool {
    !checks_of(kind).is_empty()
}

/// The checks of a kind's variants, in the same order; empty when the kind
/// has none.
fn checks_of(kind: PromptKind) -> &'static [AnswerCheck] {
    match kind {
        PromptKind::Arithmetic => ARITHMETIC,
        PromptKind::JsonExtraction => JSON_EXTRACTION,
        PromptKind::ToolCall => TOOL_CALL,
        PromptKind::JsonSchema => json_schema_checks(),
        PromptKind::JsonObject => json_object_checks(),
        PromptKind::ToolCallText => TOOL_CALL_TEXT,
        PromptKind::Fibonacci | PromptKind::Quicksort | PromptKind::Haiku => &[],
    }
}

/// The JSON-extraction checks with each reference's derived schema
/// ([`schema_of`]): what the `json-schema` kind sends and judges.
fn json_schema_checks() -> &'static [AnswerCheck] {
    static CHECKS: OnceLock<Vec<AnswerCheck>> = OnceLock::new();
    CHECKS.get_or_init(|| {
        JSON_EXTRACTION
            .iter()
            .map(|c| {
                let reference: Value =
                    serde_json::from_str(&c.reference).expect("built-in references are JSON");
                AnswerCheck {
                    expect: Expect::Schema(
                        SchemaCheck::new(schema_of(&reference)).expect("derived schemas compile"),
                    ),
                    reference: c.reference.clone(),
                }
            })
            .collect()
    })
}

/// The JSON-extraction checks under JSON mode, which promises valid JSON
/// and no shape: the answer must be one JSON value of the reference's type
/// (an object, or the list one prompt asks for) holding the values.
fn json_object_checks() -> &'static [AnswerCheck] {
    static CHECKS: OnceLock<Vec<AnswerCheck>> = OnceLock::new();
    CHECKS.get_or_init(|| {
        JSON_EXTRACTION
            .iter()
            .map(|c| {
                let reference: Value =
                    serde_json::from_str(&c.reference).expect("built-in references are JSON");
                let kind = if reference.is_array() {
                    "array"
                } else {
                    "object"
                };
                AnswerCheck {
                    expect: Expect::Schema(
                        SchemaCheck::new(serde_json::json!({ "type": kind }))
                            .expect("a type schema compiles"),
                    ),
                    reference: c.reference.clone(),
                }
            })
            .collect()
    })
}

/// In the order of [`PromptKind::ToolCall`]'s variants, answered in words
/// (no tools offered): the figure the call would have computed.
const TOOL_CALL_TEXT: &[AnswerCheck] = &[
    AnswerCheck {
        expect: Expect::Numbers(Cow::Borrowed(&[(1517.0, 0.0)])),
        reference: Cow::Borrowed("37 × 41 = 1,517, so there are 1,517 boxes."),
    },
    AnswerCheck {
        expect: Expect::Numbers(Cow::Borrowed(&[(156.25, 0.005)])),
        reference: Cow::Borrowed("1,250 ÷ 8 = 156.25."),
    },
    AnswerCheck {
        // 26.2 × 1.609344 = 42.1648.
        expect: Expect::Numbers(Cow::Borrowed(&[(42.16, 0.05)])),
        reference: Cow::Borrowed("26.2 miles × 1.609344 km per mile is about 42.16 km."),
    },
    AnswerCheck {
        expect: Expect::Numbers(Cow::Borrowed(&[(1_048_576.0, 0.0)])),
        reference: Cow::Borrowed("2 to the power of 20 is 1,048,576."),
    },
    AnswerCheck {
        expect: Expect::Numbers(Cow::Borrowed(&[(6615.0, 0.0)])),
        reference: Cow::Borrowed("9,400 − 2,785 = 6,615, so 6,615 is left."),
    },
    AnswerCheck {
        expect: Expect::Numbers(Cow::Borrowed(&[(356.0, 0.0)])),
        reference: Cow::Borrowed("180 × 9/5 + 32 = 356, so the oven is at 356 degrees Fahrenheit."),
    },
    AnswerCheck {
        expect: Expect::Numbers(Cow::Borrowed(&[(363.25, 0.005)])),
        reference: Cow::Borrowed("318.75 + 44.5 = 363.25."),
    },
];

/// In the order of [`PromptKind::ToolCall`]'s variants: the function and
/// its arguments.
const TOOL_CALL: &[AnswerCheck] = &[
    AnswerCheck {
        expect: Expect::ToolCall(Cow::Borrowed("calculator")),
        reference: Cow::Borrowed(r#"{"operation": "multiply", "a": 37, "b": 41}"#),
    },
    AnswerCheck {
        expect: Expect::ToolCall(Cow::Borrowed("calculator")),
        reference: Cow::Borrowed(r#"{"operation": "divide", "a": 1250, "b": 8}"#),
    },
    AnswerCheck {
        expect: Expect::ToolCall(Cow::Borrowed("convert_units")),
        reference: Cow::Borrowed(
            r#"{"value": 26.2, "from_unit": "miles", "to_unit": "kilometres"}"#,
        ),
    },
    AnswerCheck {
        expect: Expect::ToolCall(Cow::Borrowed("calculator")),
        reference: Cow::Borrowed(r#"{"operation": "power", "a": 2, "b": 20}"#),
    },
    AnswerCheck {
        expect: Expect::ToolCall(Cow::Borrowed("calculator")),
        reference: Cow::Borrowed(r#"{"operation": "subtract", "a": 9400, "b": 2785}"#),
    },
    AnswerCheck {
        expect: Expect::ToolCall(Cow::Borrowed("convert_units")),
        reference: Cow::Borrowed(
            r#"{"value": 180, "from_unit": "celsius", "to_unit": "fahrenheit"}"#,
        ),
    },
    AnswerCheck {
        expect: Expect::ToolCall(Cow::Borrowed("calculator")),
        reference: Cow::Borrowed(r#"{"operation": "add", "a": 318.75, "b": 44.5}"#),
    },
];

/// The numbers written in `text`: digit runs with an optional decimal part,
/// thousands separators (`158,762`) read as one number; a sign is ignored
/// (answers say "change of 29", not "+29").
fn numbers(text: &str) -> Vec<f64> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let mut digits = String::new();
        while i < b.len() {
            if b[i].is_ascii_digit() {
                digits.push(b[i] as char);
                i += 1;
            } else if b[i] == b','
                && b.len() >= i + 4
                && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
                && b.get(i + 4).is_none_or(|c| !c.is_ascii_digit())
            {
                i += 1;
            } else if b[i] == b'.'
                && !digits.contains('.')
                && b.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                digits.push('.');
                i += 1;
            } else {
                break;
            }
        }
        if let Ok(v) = digits.parse() {
            out.push(v);
        }
    }
    out
}

/// Most places in a reply tried as the start of its JSON: a long answer of
/// stray brackets is not parsed forever.
const MAX_JSON_STARTS: usize = 256;

/// The answer's JSON: the last complete top-level JSON value in `text`
/// (prose and code fences around it ignored). A value that starts like
/// JSON and is cut off by the end of the reply is an error: the answer's
/// JSON is the truncated one, not a complete value inside it.
pub fn answer_json(text: &str) -> Result<Value, Miss> {
    let mut last = None;
    let mut from = 0;
    for (tried, (i, open)) in text.match_indices(['{', '[']).enumerate() {
        if i < from {
            continue;
        }
        if tried >= MAX_JSON_STARTS {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                from = i + stream.byte_offset();
                last = Some(v);
            }
            Some(Err(e)) if e.is_eof() && opens_json(&text[i + open.len()..]) => {
                return Err(miss!(
                    "the answer's JSON is cut off at the end of the reply ({} bytes from `{open}`)",
                    text.len() - i
                ));
            }
            _ => {}
        }
    }
    last.ok_or_else(|| "no JSON value in the answer".into())
}

/// Whether what follows an opening bracket looks like JSON (not prose).
fn opens_json(rest: &str) -> bool {
    rest.trim_start().chars().next().is_some_and(|c| {
        matches!(
            c,
            '"' | '{' | '[' | ']' | '}' | '-' | '0'..='9' | 't' | 'f' | 'n'
        )
    })
}

/// Strings compared as the check says: trimmed, case-folded, blanks made one.
fn norm(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// A JSON number or a string that is one, as a number.
fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A text in one line, shortened.
fn brief_text(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(59).collect::<String>())
    } else {
        s.to_string()
    }
}

/// A value in one line, shortened.
fn brief(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(59).collect::<String>())
    } else {
        s
    }
}

/// `Ok` when `got` holds `want`'s values (see the module doc), else the
/// first difference, named by its path.
fn compare_json(want: &Value, got: &Value, path: &str) -> Result<(), Miss> {
    let differ = || {
        Err(miss!(
            "{path}: expected {}, found {}",
            brief(want),
            brief(got)
        ))
    };
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => compare_json(wv, gv, &format!("{path}.{k}"))?,
                    None => return Err(miss!("{path}: no `{k}` (expected {})", brief(wv))),
                }
            }
            Ok(())
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                return Err(miss!(
                    "{path}: expected {} items, found {}",
                    w.len(),
                    g.len()
                ));
            }
            // Any order: each expected item takes the first unused item equal to it.
            let mut used = vec![false; g.len()];
            for (i, wv) in w.iter().enumerate() {
                let hit = g
                    .iter()
                    .enumerate()
                    .find(|(j, gv)| !used[*j] && compare_json(wv, gv, "").is_ok());
                match hit {
                    Some((j, _)) => used[j] = true,
                    None => {
                        // The same place's item says best what differs.
                        return match compare_json(wv, &g[i], &format!("{path}[{i}]")) {
                            Err(e) => Err(e),
                            Ok(()) => Err(miss!("{path}[{i}]: {} is missing", brief(wv))),
                        };
                    }
                }
            }
            Ok(())
        }
        (Value::String(w), Value::String(g)) if norm(w) == norm(g) => Ok(()),
        (Value::Bool(w), Value::Bool(g)) if w == g => Ok(()),
        (Value::Null, Value::Null) => Ok(()),
        (Value::Number(_) | Value::String(_), Value::Number(_) | Value::String(_)) => {
            match (as_number(want), as_number(got)) {
                (Some(w), Some(g)) if (w - g).abs() <= 0.005_f64.max(w.abs() * 1e-6) => Ok(()),
                _ => differ(),
            }
        }
        _ => differ(),
    }
}

/// `v` with every key kept and every value wrong: numbers moved, strings
/// changed, booleans flipped, lists of the same length.
fn wrong_values(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), wrong_values(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(wrong_values).collect()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i + 1),
            None => Value::from(n.as_f64().unwrap_or(0.0) + 1.25),
        },
        Value::String(s) => Value::String(format!("{s} (unverified)")),
        Value::Bool(b) => Value::Bool(!b),
        Value::Null => Value::from("none"),
    }
}

/// A prompt of a campaign's own checks file, with its check.
#[derive(Debug, Clone, PartialEq)]
pub struct UserCheck {
    /// The prompt, sent as written.
    pub prompt: String,
    /// The label its pass rate is reported under (`kind`, default `checks`).
    pub kind: String,
    /// Its check.
    pub check: std::sync::Arc<AnswerCheck>,
    /// The tools or schema sent with it (`tool` and `schema` checks).
    pub structured: Option<Arc<super::structured::Structured>>,
}

/// A line of a checks file as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckLine {
    prompt: String,
    check: String,
    expected: Value,
    #[serde(default)]
    tolerance: Option<f64>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    schema: Option<Value>,
}

/// Most checks one file may hold: a bound on memory and on the work.
pub const MAX_USER_CHECKS: usize = 100_000;

/// Read a checks file: JSONL, one `{"prompt", "check", "expected"}` per
/// line, `check` one of `number` (`expected` a number or a list of them,
/// judged as a final answer within `tolerance`, default 0), `text` (the
/// trimmed answer is `expected` exactly), `json` (the answer's JSON holds
/// `expected`'s values), `regex` (the answer matches `expected`), `tool`
/// (`expected` is `{"name", "arguments"}`, sent with `tools`: a list of
/// function definitions or `"builtin"`) and `schema` (sent with `schema`
/// as the response format; `expected` holds the values and must satisfy
/// it), with an optional `kind` label; blank lines skipped. An error names
/// the file and line.
pub fn load_user_checks(path: &std::path::Path) -> Result<Vec<UserCheck>, super::WorkloadError> {
    use std::io::BufRead;
    let name = path.display().to_string();
    let error = |line: usize, message: String| super::WorkloadError::Parse {
        path: name.clone(),
        location: format!("line {line}"),
        message,
    };
    let file = std::fs::File::open(path).map_err(|source| super::WorkloadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| error(n, e.to_string()))?;
        if line.trim().is_empty() {
            continue;
        }
        if out.len() >= MAX_USER_CHECKS {
            return Err(error(n, format!("more than {MAX_USER_CHECKS} checks")));
        }
        let l: CheckLine = serde_json::from_str(&line).map_err(|e| {
            error(
                n,
                format!("not a check (prompt, check, expected, optional tolerance and kind): {e}"),
            )
        })?;
        let (check, structured) = user_check(&l).map_err(|e| error(n, e))?;
        out.push(UserCheck {
            prompt: l.prompt,
            kind: l.kind.unwrap_or_else(|| "checks".into()),
            check: std::sync::Arc::new(check),
            structured: structured.map(Arc::new),
        });
    }
    if out.is_empty() {
        return Err(error(1, "the file holds no check".into()));
    }
    Ok(out)
}

/// The check a line declares with what is sent beside its prompt, or why
/// it declares none.
fn user_check(
    l: &CheckLine,
) -> Result<(AnswerCheck, Option<super::structured::Structured>), String> {
    match (l.check.as_str(), &l.tools, &l.schema) {
        ("tool", _, None) => return tool_check(l).map(|(c, s)| (c, Some(s))),
        ("schema", None, Some(schema)) => {
            let check = SchemaCheck::new(schema.clone()).map_err(|e| e.to_string())?;
            check
                .validate(&l.expected)
                .map_err(|e| format!("`expected` does not satisfy `schema`: it {e}"))?;
            let sent = super::structured::Structured::schema("checks", schema);
            let c = AnswerCheck {
                expect: Expect::Schema(check),
                reference: Cow::Owned(l.expected.to_string()),
            };
            return Ok((c, Some(sent)));
        }
        ("schema", _, None) => return Err("a `schema` check needs a `schema`".into()),
        (_, Some(_), _) => return Err("`tools` go with a `tool` check".into()),
        (_, _, Some(_)) => return Err("`schema` goes with a `schema` check".into()),
        _ => {}
    }
    plain_check(l).map(|c| (c, None))
}

/// A `tool` check: `expected` is `{"name", "arguments"}`, `tools` the
/// definitions offered (`"builtin"` for the built-in ones).
fn tool_check(l: &CheckLine) -> Result<(AnswerCheck, super::structured::Structured), String> {
    use super::structured::{builtin_tools, check_tools, tool_names, Structured};
    let tools = match &l.tools {
        Some(Value::String(s)) if s == "builtin" => builtin_tools(),
        Some(t) => {
            check_tools(t).map_err(|e| e.to_string())?;
            Arc::new(t.clone())
        }
        None => {
            return Err(
                "a `tool` check needs `tools` (a list of function definitions, or \"builtin\")"
                    .into(),
            )
        }
    };
    let name = l
        .expected
        .get("name")
        .and_then(Value::as_str)
        .ok_or("a `tool` check expects {\"name\": …, \"arguments\": {…}}")?;
    let arguments = l
        .expected
        .get("arguments")
        .filter(|a| a.is_object())
        .ok_or("a `tool` check expects its `arguments` as an object")?;
    let names = tool_names(&tools);
    if !names.contains(&name) {
        return Err(format!(
            "tool `{name}` is not among the `tools` ({})",
            names.join(", ")
        ));
    }
    let c = AnswerCheck {
        expect: Expect::ToolCall(Cow::Owned(name.to_string())),
        reference: Cow::Owned(arguments.to_string()),
    };
    Ok((c, Structured::tools(tools)))
}

/// A check of the answer's text (number, text, json, regex).
fn plain_check(l: &CheckLine) -> Result<AnswerCheck, String> {
    let tolerance = l.tolerance.unwrap_or(0.0);
    if !(tolerance.is_finite() && tolerance >= 0.0) {
        return Err(format!("tolerance must be zero or more, got {tolerance}"));
    }
    if tolerance > 0.0 && l.check != "number" {
        return Err("tolerance applies to `number` checks only".into());
    }
    let text = |what: &str| {
        l.expected
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("a `{what}` check expects a string"))
    };
    Ok(match l.check.as_str() {
        "number" => {
            let values: Vec<f64> = match &l.expected {
                Value::Array(items) => items.iter().map(Value::as_f64).collect::<Option<_>>(),
                v => v.as_f64().map(|x| vec![x]),
            }
            .filter(|v: &Vec<f64>| !v.is_empty())
            .ok_or("a `number` check expects a number or a list of numbers")?;
            AnswerCheck {
                expect: Expect::Numbers(values.iter().map(|v| (*v, tolerance)).collect()),
                reference: Cow::Owned(
                    values
                        .iter()
                        .map(|v| format_number(*v))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
            }
        }
        "text" => AnswerCheck {
            expect: Expect::ExactText,
            reference: Cow::Owned(text("text")?),
        },
        "json" => AnswerCheck {
            expect: Expect::JsonValues,
            reference: Cow::Owned(l.expected.to_string()),
        },
        "regex" => {
            let source = text("regex")?;
            let re = regex::RegexBuilder::new(&source)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("`expected` is not a regular expression: {e}"))?;
            AnswerCheck {
                expect: Expect::Pattern(Pattern(re)),
                reference: Cow::Owned(source),
            }
        }
        other => {
            return Err(format!(
                "check `{other}` is not one of number, text, json, regex, tool, schema"
            ))
        }
    })
}

/// In the order of [`PromptKind::Arithmetic`]'s variants. Each judges the
/// final answer (see the module doc); the reference answers end with it.
const ARITHMETIC: &[AnswerCheck] = &[
    AnswerCheck {
        // 12 × 0.35 + 7 × 2.40 = 21.00; 50 − 21 = 29. One figure: the first
        // number after a final-answer phrase, else the last number; to the cent.
        expect: Expect::Numbers(Cow::Borrowed(&[(29.0, 0.005)])),
        reference: Cow::Borrowed("12 × $0.35 = $4.20, 7 × $2.40 = $16.80, $4.20 + $16.80 = $21.00, so Maria gets $50 − $21.00 = $29.00 in change."),
    },
    AnswerCheck {
        // One figure, exact: the product (the division back gives 487, so
        // the reply must end on the product or name it as its answer).
        expect: Expect::Numbers(Cow::Borrowed(&[(158_762.0, 0.0)])),
        reference: Cow::Borrowed("487 × 300 = 146,100 and 487 × 26 = 12,662; the check 158,762 ÷ 326 = 487 holds, so the answer is 158,762."),
    },
    AnswerCheck {
        // 318 / 84 h = 3 h 47.1 min after 09:47: a time of day, the first
        // after a final-answer phrase, else the last one written.
        expect: Expect::Clock(13, 34),
        reference: Cow::Borrowed("318 ÷ 84 = 3.786 hours = 3 h 47 min, and 09:47 + 3:47 = 13:34, so it arrives at 13:34."),
    },
    AnswerCheck {
        // 416.5 + 456 − 144. One figure, to the thousandth.
        expect: Expect::Numbers(Cow::Borrowed(&[(728.5, 0.005)])),
        reference: Cow::Borrowed("17% of 2,450 = 416.5, 3/8 of 1,216 = 456, 12² = 144, so the result is 728.5."),
    },
    AnswerCheck {
        // 1200 / (45 − 7) = 31.58 min. One figure, within 0.05 min (3 s).
        expect: Expect::Numbers(Cow::Borrowed(&[(31.58, 0.05)])),
        reference: Cow::Borrowed("It gains 45 − 7 = 38 litres per minute, and 1,200 ÷ 38 = 31.58, so it is full after 31.58 minutes."),
    },
    AnswerCheck {
        // 3·(83·84/2) + 5·(50·51/2) − 15·(16·17/2). One figure, exact.
        expect: Expect::Numbers(Cow::Borrowed(&[(14_793.0, 0.0)])),
        reference: Cow::Borrowed("Multiples of 3 sum to 10,458, of 5 to 6,375, of 15 to 2,040, and 10,458 + 6,375 − 2,040 = 14,793."),
    },
    AnswerCheck {
        // × 14/6: 1050 g, 7 eggs, 560 ml. Three figures, all in the final
        // statement (the sentence after a final-answer phrase, else the
        // last sentence with a number); grams and millilitres within 0.5.
        expect: Expect::Numbers(Cow::Borrowed(&[(1050.0, 0.5), (7.0, 0.0), (560.0, 0.5)])),
        reference: Cow::Borrowed("Everything × 14/6: 450 × 14/6 = 1,050, 3 × 14/6 = 7, 240 × 14/6 = 560. For 14 people: 1,050 g of flour, 7 eggs and 560 ml of milk."),
    },
];

/// In the order of [`PromptKind::JsonExtraction`]'s variants.
const JSON_EXTRACTION: &[AnswerCheck] = &[
    AnswerCheck {
        expect: Expect::JsonValues,
        reference: Cow::Borrowed(
            r#"{"name": "Lena Okafor", "age": 41, "city": "Rotterdam", "occupation": "marine biologist", "start_year": 2018}"#,
        ),
    },
    AnswerCheck {
        expect: Expect::JsonValues,
        reference: Cow::Borrowed(
            r#"{"order_id": "A-55312", "customer": "Jonas Berg", "items": [{"sku": "SKU-1180", "quantity": 2, "unit_price": 14.99}, {"sku": "SKU-2051", "quantity": 1, "unit_price": 89.00}, {"sku": "SKU-0007", "quantity": 3, "unit_price": 2.50}], "total": 126.48}"#,
        ),
    },
    AnswerCheck {
        expect: Expect::JsonValues,
        reference: Cow::Borrowed(
            r#"{"timestamp": "2024-11-03T14:22:09.481Z", "level": "WARN", "service": "checkout-api", "request_id": "7f3c9a", "latency_ms": 1843, "message": "upstream payment gateway slow"}"#,
        ),
    },
    AnswerCheck {
        expect: Expect::JsonValues,
        reference: Cow::Borrowed(
            r#"[{"date": "4 March", "title": "board meeting", "location": "Lyon"}, {"date": "19 March", "title": "product launch", "location": "Berlin"}, {"date": "2 May", "title": "team retreat", "location": "Porto"}]"#,
        ),
    },
    AnswerCheck {
        expect: Expect::JsonValues,
        reference: Cow::Borrowed(
            r#"{"title": "Senior Embedded Engineer", "company": "Acme Robotics", "location": "Austin, TX", "remote": false, "salary_min": 145000, "salary_max": 175000, "skills": ["C", "Rust", "RTOS", "CAN bus"]}"#,
        ),
    },
    AnswerCheck {
        expect: Expect::JsonValues,
        reference: Cow::Borrowed(
            r#"{"street": "Karlsgatan", "number": "17", "postal_code": "411 04", "city": "Göteborg", "country": "Sweden"}"#,
        ),
    },
    AnswerCheck {
        expect: Expect::JsonValues,
        reference: Cow::Borrowed(
            r#"{"drug": "Amoxicillin", "dose_mg": 500, "frequency_per_day": 3, "duration_days": 7, "with_food": true}"#,
        ),
    },
];

/// `answer` made wrong in the way a broken kernel might: every digit
/// shifted by one and every JSON bracket turned into a parenthesis, the
/// length unchanged.
pub fn spoil(answer: &str) -> String {
    answer
        .chars()
        .map(|c| match c {
            '0'..='9' => char::from(b'0' + (c as u8 - b'0' + 1) % 10),
            '{' | '[' => '(',
            '}' | ']' => ')',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_checks() -> Vec<(PromptKind, &'static AnswerCheck)> {
        PromptKind::all()
            .iter()
            .flat_map(|k| checks_of(*k).iter().map(move |c| (*k, c)))
            .collect()
    }

    #[test]
    fn every_checked_kind_has_a_check_per_variant_and_its_reference_passes() {
        for k in PromptKind::named() {
            let checks = checks_of(k);
            if checks.is_empty() {
                continue;
            }
            assert_eq!(checks.len(), k.variants().len(), "{k}");
            for (v, c) in k.variants().iter().zip(checks) {
                assert_eq!(kind_check(k, v), Some(c));
                // A structured kind shares its prompts with its plain twin,
                // whose check a prompt is looked up by; its reference is
                // judged with the call or format (tests below).
                if k.is_structured() {
                    assert_ne!(check_for(v), Some(c), "{k}");
                    continue;
                }
                assert_eq!(check_for(v), Some(c));
                assert_eq!(c.judge(&c.reference), Ok(()), "{k}: {}", c.reference);
                assert!(
                    !c.passes(&spoil(&c.reference)),
                    "{k}: {}",
                    spoil(&c.reference)
                );
            }
        }
        assert!(is_checked(PromptKind::Arithmetic) && !is_checked(PromptKind::Haiku));
        assert_eq!(check_for(PromptKind::Haiku.variants()[0]), None);
        assert_eq!(check_for("What is 2 + 2?"), None);
    }

    #[test]
    fn tool_calls_are_judged_by_function_and_argument_values() {
        use crate::workload::structured::ToolCall;
        let kind = PromptKind::ToolCall;
        assert_eq!(checks_of(kind).len(), kind.variants().len());
        let calls = |name: &str, arguments: &str| ToolCalls {
            calls: vec![ToolCall {
                id: Some("c1".into()),
                name: Some(name.into()),
                arguments: arguments.into(),
            }],
            defects: Vec::new(),
        };
        for (v, c) in kind.variants().iter().zip(checks_of(kind)) {
            assert_eq!(kind_check(kind, v), Some(c));
            let Expect::ToolCall(name) = &c.expect else {
                panic!("{v}")
            };
            // Reordered keys and a number written as a string still hold the values.
            assert_eq!(c.judge_reply("", &calls(name, &c.reference)), Ok(()));
            let why = c
                .judge_reply("", &calls(name, &c.plausible_wrong()))
                .unwrap_err();
            assert!(why.starts_with(&format!("`{name}` arguments.")), "{why}");
            let why = c
                .judge_reply("", &calls("other", &c.reference))
                .unwrap_err();
            assert!(why.contains("found a call of `other`"), "{why}");
            let why = c.judge("I would call the calculator.").unwrap_err();
            assert!(why.contains("found no tool call"), "{why}");
            let why = c
                .judge_reply("", &calls(name, &spoil(&c.reference)))
                .unwrap_err();
            assert!(why.contains("arguments are not JSON"), "{why}");
        }
        let c = &checks_of(kind)[0];
        let mut defective = calls("calculator", &c.reference);
        defective
            .defects
            .push("call 0 (`calculator`) has no id".into());
        let why = c.judge_reply("", &defective).unwrap_err();
        assert_eq!(
            &*why,
            "malformed tool call: call 0 (`calculator`) has no id"
        );
    }

    #[test]
    fn schema_answers_must_be_one_valid_json_value_holding_the_values() {
        let kind = PromptKind::JsonSchema;
        for (v, c) in kind.variants().iter().zip(checks_of(kind)) {
            assert_eq!(kind_check(kind, v), Some(c));
            assert_eq!(c.judge(&c.reference), Ok(()), "{v}");
            // Prose around the JSON is not what a constrained answer is.
            let why = c
                .judge(&format!("Here it is: {}", c.reference))
                .unwrap_err();
            assert!(why.starts_with("the answer is not one JSON value"), "{why}");
            let why = c.judge(&c.plausible_wrong()).unwrap_err();
            assert!(why.contains("expected"), "{why}");
        }
        // The plain kind's check of the same prompt takes a number as a
        // string; the schema does not.
        let c = &checks_of(kind)[6];
        let stringly = c.reference.replace("500", "\"500\"");
        assert_eq!(
            check_for(kind.variants()[6]).unwrap().judge(&stringly),
            Ok(())
        );
        let why = c.judge(&stringly).unwrap_err();
        assert!(why.starts_with("breaks its schema at /dose_mg"), "{why}");
    }

    #[test]
    fn json_mode_answers_must_be_one_object_holding_the_values() {
        let kind = PromptKind::JsonObject;
        for (v, c) in kind.variants().iter().zip(checks_of(kind)) {
            assert_eq!(c.judge(&c.reference), Ok(()), "{v}");
            let why = c
                .judge(&format!("```json\n{}\n```", c.reference))
                .unwrap_err();
            assert!(why.starts_with("the answer is not one JSON value"), "{why}");
            // Wrapped in a list (or, for the list, in an object): another shape.
            let why = c.judge(&format!("[{}]", c.reference)).unwrap_err();
            let why = if c.reference.starts_with('[') {
                c.judge(&format!("{{\"events\": {}}}", c.reference))
                    .unwrap_err()
            } else {
                why
            };
            assert!(why.starts_with("breaks its schema at /"), "{why}");
            assert!(c.judge(&c.plausible_wrong()).is_err(), "{v}");
        }
        // No schema: a number as a string is still the value.
        let c = &checks_of(kind)[6];
        assert_eq!(c.judge(&c.reference.replace("500", "\"500\"")), Ok(()));
    }

    #[test]
    fn tool_prompts_without_tools_are_judged_by_the_figure_the_call_would_give() {
        let text = PromptKind::ToolCallText;
        assert_eq!(PromptKind::ToolCall.unconstrained_twin(), Some(text));
        assert_eq!(text.variants(), PromptKind::ToolCall.variants());
        let c = kind_check(text, text.variants()[2]).unwrap();
        assert_eq!(c.judge("That is about 42.2 km."), Ok(()));
        let why = c.judge("It is 26.2 miles, which is 26.2 km.").unwrap_err();
        assert!(why.contains("expected 42.16"), "{why}");
    }

    #[test]
    fn a_plausible_wrong_answer_fails_every_check_with_a_reason() {
        for (k, c) in all_checks() {
            let wrong = c.plausible_wrong();
            let why = c.judge(&wrong).expect_err(&format!("{k}: {wrong}"));
            assert!(why.contains("expected"), "{k}: {why}");
        }
        // The discarded guess holds the right figure; the final one is judged.
        let change = check_for(PromptKind::Arithmetic.variants()[0]).unwrap();
        let wrong = change.plausible_wrong();
        assert!(
            wrong.starts_with("At first I got 29, but that is wrong."),
            "{wrong}"
        );
        assert_eq!(
            change.judge(&wrong),
            Err("expected 29 (±0.005) as the final answer, found 32.9".into())
        );
        let recipe = check_for(PromptKind::Arithmetic.variants()[6]).unwrap();
        assert!(recipe
            .judge(&recipe.plausible_wrong())
            .unwrap_err()
            .contains("found 1156, 8.7, 617"));
    }

    #[test]
    fn arithmetic_judges_the_final_answer_not_any_number_in_the_text() {
        let change = check_for(PromptKind::Arithmetic.variants()[0]).unwrap();
        assert!(change.passes("So the change is 29 dollars."));
        assert!(change.passes("**Final answer:** $29.00\n\nCheck: 12 × 0.35 = 4.20."));
        assert!(!change.passes("12 pencils cost $4.20 and the notebooks $16.80"));
        // The right number, then a wrong last one.
        assert!(!change.passes("Change: $29.00. Wait, let me redo it: $31.40."));
        let tank = check_for(PromptKind::Arithmetic.variants()[4]).unwrap();
        assert!(tank.passes("about 31.6 minutes"));
        assert!(!tank.passes("about 32 minutes"));
        let product = check_for(PromptKind::Arithmetic.variants()[1]).unwrap();
        assert!(product.passes("The answer is 158,762. Check: 158,762 ÷ 326 = 487."));
        assert_eq!(
            product.judge("487 × 326 = 158,762. Check: 158,762 ÷ 326 = 487."),
            Err("expected 158762 as the last number, found 487".into())
        );
        let train = check_for(PromptKind::Arithmetic.variants()[2]).unwrap();
        assert!(train.passes("It takes 3 h 47 min, arriving at 1:34 pm."));
        assert!(train.passes("Final answer: 13:34 (departure 09:47)."));
        assert_eq!(
            train.judge("Departs 09:47; arrives 13:34. Correction: it arrives at 13:43."),
            Err("expected 13:34 as the last time, found 13:43".into())
        );
        assert!(train
            .judge("about three hours later")
            .unwrap_err()
            .contains("found no time"));
        // Several figures: all in the final statement, any order, extras allowed.
        let recipe = check_for(PromptKind::Arithmetic.variants()[6]).unwrap();
        assert!(
            recipe.passes("For 14 people you need 560 ml of milk, 7 eggs and 1,050 g of flour.")
        );
        assert_eq!(
            recipe.judge("1,050 g of flour, 7 eggs and 560 ml of milk for 6 people? No: for 14 people, 1,050 g of flour, 6 eggs and 560 ml of milk."),
            Err("expected 1050 (±0.5), 7, 560 (±0.5) as the last sentence with a number, found 14, 1050, 6, 560".into())
        );
    }

    #[test]
    fn numbers_read_separators_decimals_and_stop_at_punctuation() {
        assert_eq!(
            numbers("158,762 and $4.20. Then 1,2 or 12, 7"),
            [158_762.0, 4.2, 1.0, 2.0, 12.0, 7.0]
        );
        assert_eq!(numbers("x1.2.3"), [1.2, 3.0]);
        assert_eq!(numbers("12,3456"), [12.0, 3456.0]);
        assert_eq!(
            clock_times("at 9:05 am, 12:30 am, 12:10 pm, 1:34 p.m. and 10:7"),
            [(9, 5), (0, 30), (12, 10), (13, 34)]
        );
    }

    #[test]
    fn a_checks_file_declares_each_kind_of_check_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let write = |text: &str| std::fs::write(&path, text).unwrap();
        write(concat!(
            r#"{"prompt": "p1", "check": "number", "expected": [3, 4.5], "tolerance": 0.1, "kind": "math"}"#,
            "\n\n",
            r#"{"prompt": "p2", "check": "text", "expected": "Paris"}"#,
            "\n",
            r#"{"prompt": "p3", "check": "json", "expected": {"a": [1, 2]}}"#,
            "\n",
            r#"{"prompt": "p4", "check": "regex", "expected": "^(yes|no)\\b"}"#,
            "\n",
        ));
        let checks = load_user_checks(&path).unwrap();
        let kinds: Vec<&str> = checks.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["math", "checks", "checks", "checks"]);
        let [math, text, json, re] = [0, 1, 2, 3].map(|i| &checks[i].check);
        assert!(math.passes("so the final answer is 3.05 and 4.4."));
        assert_eq!(
            math.judge("the final answer is 3 and 5."),
            Err("expected 3 (±0.1), 4.5 (±0.1) as the final answer, found 3, 5".into())
        );
        assert!(text.passes("  Paris\n") && !text.passes("Paris, France"));
        assert!(json.passes(r#"{"a": [2, 1], "b": 0}"#));
        assert_eq!(
            json.judge(r#"{"a": [1]}"#),
            Err("$.a: expected 2 items, found 1".into())
        );
        assert!(re.passes("yes, it is") && !re.passes("maybe"));
        for (line, why) in [
            (
                r#"{"prompt": "p", "check": "words", "expected": 1}"#,
                "check `words` is not one of number, text, json, regex",
            ),
            (
                r#"{"prompt": "p", "check": "text", "expected": 1}"#,
                "a `text` check expects a string",
            ),
            (
                r#"{"prompt": "p", "check": "text", "expected": "a", "tolerance": 1}"#,
                "tolerance applies to `number` checks only",
            ),
            (
                r#"{"prompt": "p", "check": "number", "expected": []}"#,
                "a `number` check expects a number or a list of numbers",
            ),
            (
                r#"{"prompt": "p", "check": "number", "expected": 1, "oops": 1}"#,
                "unknown field `oops`",
            ),
        ] {
            write(&format!("\n{line}\n"));
            let e = load_user_checks(&path).unwrap_err().to_string();
            assert!(e.contains("line 2") && e.contains(why), "{line}: {e}");
        }
        write("\n");
        assert!(load_user_checks(&path)
            .unwrap_err()
            .to_string()
            .contains("no check"));
    }

    /// Every leaf of `v` with its path, as `compare_json` names it.
    fn leaves(v: &Value, path: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m
                .iter()
                .for_each(|(k, v)| leaves(v, format!("{path}.{k}"), out)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, v)| leaves(v, format!("{path}[{i}]"), out)),
            _ => out.push(path),
        }
    }

    /// `v` with the leaf at `path` made wrong.
    fn spoiled_at(v: &Value, path: &str, here: String) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), spoiled_at(x, path, format!("{here}.{k}"))))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| spoiled_at(x, path, format!("{here}[{i}]")))
                    .collect(),
            ),
            leaf if here == path => wrong_values(leaf),
            leaf => leaf.clone(),
        }
    }

    /// `v` with its strings upper case and padded, and its numbers as strings.
    fn shout(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), shout(v))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(shout).collect()),
            Value::String(s) => Value::String(format!("  {}  ", s.to_uppercase())),
            Value::Number(n) => Value::String(n.to_string()),
            other => other.clone(),
        }
    }

    /// `v` with the last item of the list at `path` left out.
    fn without_last_item(v: &Value, path: &str, here: String) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), without_last_item(x, path, format!("{here}.{k}"))))
                    .collect(),
            ),
            Value::Array(a) if here == path => Value::Array(a[..a.len() - 1].to_vec()),
            Value::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| without_last_item(x, path, format!("{here}[{i}]")))
                    .collect(),
            ),
            leaf => leaf.clone(),
        }
    }

    #[test]
    fn json_extraction_fails_on_any_wrong_value_missing_item_or_truncation_with_a_reason() {
        for (k, c) in all_checks()
            .into_iter()
            .filter(|(_, c)| c.expect == Expect::JsonValues)
        {
            let reference: Value = serde_json::from_str(&c.reference).unwrap();
            // Each value made wrong, keys kept: fails, naming that value.
            let mut paths = Vec::new();
            leaves(&reference, "$".into(), &mut paths);
            for path in &paths {
                let wrong = spoiled_at(&reference, path, "$".into()).to_string();
                let why = c.judge(&wrong).expect_err(&format!("{k} {path}: {wrong}"));
                let place = path.split('[').next().unwrap();
                assert!(why.starts_with(place), "{k} {path}: {why}");
            }
            // Each list with one item fewer: fails, naming the list.
            for path in paths
                .iter()
                .filter_map(|p| p.rsplit_once('[').map(|(list, _)| list.to_string()))
            {
                let shorter = without_last_item(&reference, &path, "$".into()).to_string();
                let why = c
                    .judge(&shorter)
                    .expect_err(&format!("{k} {path}: {shorter}"));
                assert!(
                    why.starts_with(&format!("{path}: expected")) && why.contains("items, found"),
                    "{k} {path}: {why}"
                );
            }
            // Cut anywhere inside the JSON: fails (a complete inner value
            // of a cut-off list is not the answer).
            for cut in (1..c.reference.len()).filter(|i| c.reference.is_char_boundary(*i)) {
                assert!(!c.passes(&c.reference[..cut]), "{k}: cut at {cut} passes");
            }
            // Case, blanks, a number as a string, extra keys, fences and prose: still right.
            let mut loose = shout(&reference);
            if let Value::Object(m) = &mut loose {
                m.insert("note".into(), "extra".into());
            }
            assert_eq!(
                c.judge(&format!("Here it is:\n```json\n{loose}\n```\nDone {{")),
                Ok(()),
                "{k}: {loose}"
            );
        }
        let order = check_for(PromptKind::JsonExtraction.variants()[1]).unwrap();
        let two_items = r#"{"order_id": "A-55312", "customer": "Jonas Berg", "items": [{"sku": "SKU-1180", "quantity": 2, "unit_price": 14.99}, {"sku": "SKU-2051", "quantity": 1, "unit_price": 89.00}], "total": 126.48}"#;
        assert_eq!(
            order.judge(two_items),
            Err("$.items: expected 3 items, found 2".into())
        );
        let events = check_for(PromptKind::JsonExtraction.variants()[3]).unwrap();
        let reordered = r#"[{"date": "19 March", "title": "Product launch", "location": "Berlin"}, {"date": "2 May", "title": "team retreat", "location": "Porto"}, {"date": "4 march", "title": "board meeting", "location": "Lyon"}]"#;
        assert_eq!(events.judge(reordered), Ok(()));
        let cut = r#"[{"date": "4 March", "title": "board meeting", "location": "Lyon"}, {"date": "19 March", "#;
        assert!(events.judge(cut).unwrap_err().contains("cut off"));
        let drug = check_for(PromptKind::JsonExtraction.variants()[6]).unwrap();
        assert_eq!(
            drug.judge(r#"{"drug": "Amoxicillin", "dose_mg": "500", "frequency_per_day": 3, "duration_days": 7, "with_food": false}"#),
            Err("$.with_food: expected true, found false".into())
        );
        assert_eq!(
            drug.judge(r#"{"drug": "Amoxicillin", "dose_mg": 500}"#),
            Err("$: no `duration_days` (expected 7)".into())
        );
        // The last complete JSON is the answer: a corrected one after a draft counts.
        let draft = r#"Draft: {"drug": "x"} Final: {"drug": "Amoxicillin", "dose_mg": 500, "frequency_per_day": 3, "duration_days": 7, "with_food": true}"#;
        assert_eq!(drug.judge(draft), Ok(()));
        assert!(drug.judge("no JSON here").unwrap_err().contains("no JSON"));
    }
}
