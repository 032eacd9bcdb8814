//! Prompt datasets: ShareGPT JSON and plain JSONL, sampled with a seed and
//! filtered by token length.
//!
//! - ShareGPT: a JSON array of records `{"conversations": [{"from", "value"}, ...]}`.
//!   The first human turn (`human`/`user`) is the prompt; the first assistant turn
//!   after it (`gpt`/`assistant`/`chatgpt`) gives the reference output length.
//!   Other roles (e.g. `system`) are ignored.
//! - JSONL: one object per line, `{"prompt": "...", "output_len": 128}` with
//!   `output_len` optional, or a ShareGPT record per line; blank lines are
//!   allowed. A ShareGPT array may hold prompt records too.
//!
//! Invariants:
//! - Malformed input is an error naming the file and the line (JSONL) or the
//!   record index (ShareGPT); nothing malformed is skipped.
//! - Well-formed records that are not used are counted in [`DatasetReport`]
//!   by reason (no prompt/answer pair, too short, too long, not needed).
//! - Records are examined in a seeded random order and lengths are only
//!   measured for examined records, so sampling a few requests from a large
//!   file does not tokenize all of it.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::{TokenCounter, WorkloadError};
use crate::util::rng::seeded;

/// Dataset file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetFormat {
    /// A JSON array of ShareGPT conversations.
    Sharegpt,
    /// One JSON object per line with `prompt` and optional `output_len`.
    Jsonl,
}

impl DatasetFormat {
    /// Guesses the format from the file extension (`.jsonl` is JSONL, `.json` is ShareGPT).
    pub fn from_path(path: &Path) -> Result<Self, WorkloadError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => Ok(Self::Jsonl),
            Some("json") => Ok(Self::Sharegpt),
            _ => Err(WorkloadError::InvalidArgument(format!(
                "cannot tell the dataset format of {} from its extension; name it .json (ShareGPT) or .jsonl, or give the format explicitly",
                path.display()
            ))),
        }
    }
}

/// Token-length limits; `None` means no limit. Bounds are inclusive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthFilter {
    /// Fewest prompt tokens kept.
    pub min_input: Option<usize>,
    /// Most prompt tokens kept.
    pub max_input: Option<usize>,
    /// Fewest output tokens kept (records without an output length pass).
    pub min_output: Option<usize>,
    /// Most output tokens kept (records without an output length pass).
    pub max_output: Option<usize>,
}

/// One request taken from a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetRequest {
    /// Where it came from: `line N` (JSONL) or `record N` (ShareGPT), 1-based lines, 0-based records.
    pub source: String,
    /// The prompt text.
    pub prompt: String,
    /// Prompt length under the counter used to load the dataset.
    pub prompt_tokens: usize,
    /// Output length to request: JSONL `output_len`, or the ShareGPT reference answer's length.
    pub output_len: Option<usize>,
}

/// What happened to every record of a dataset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetReport {
    /// The file read.
    pub path: PathBuf,
    /// Well-formed records in the file.
    pub records: usize,
    /// Records returned as requests.
    pub kept: usize,
    /// ShareGPT records without a human turn followed by an assistant turn.
    pub no_prompt_pair: usize,
    /// Records with fewer prompt tokens than `min_input`.
    pub input_too_short: usize,
    /// Records with more prompt tokens than `max_input`.
    pub input_too_long: usize,
    /// Records with an output length below `min_output`.
    pub output_too_short: usize,
    /// Records with an output length above `max_output`.
    pub output_too_long: usize,
    /// Records not examined because enough requests had been collected.
    pub not_needed: usize,
    /// Whether lengths came from an exact tokenizer.
    pub exact_lengths: bool,
}

impl DatasetReport {
    /// Records rejected by the length filter.
    pub fn filtered(&self) -> usize {
        self.input_too_short + self.input_too_long + self.output_too_short + self.output_too_long
    }
}

impl fmt::Display for DatasetReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} records, {} kept; skipped: {} without a prompt/answer pair, {} input too short, {} input too long, {} output too short, {} output too long, {} not needed{}",
            self.path.display(),
            self.records,
            self.kept,
            self.no_prompt_pair,
            self.input_too_short,
            self.input_too_long,
            self.output_too_short,
            self.output_too_long,
            self.not_needed,
            if self.exact_lengths { "" } else { " (lengths approximate)" }
        )
    }
}

/// Requests sampled from a dataset, with the account of what was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetSample {
    /// The requests, in sampled order.
    pub requests: Vec<DatasetRequest>,
    /// Counts per outcome over all records.
    pub report: DatasetReport,
}

/// A well-formed record before length measurement.
struct RawRecord {
    source: String,
    prompt: String,
    /// Known output length (JSONL).
    output_len: Option<usize>,
    /// Reference answer whose length is the output length (ShareGPT).
    reference: Option<String>,
}

/// Every record of `path`, read completely, with the count of records
/// that hold no prompt/answer pair.
fn read_records(
    path: &Path,
    format: DatasetFormat,
) -> Result<(Vec<RawRecord>, DatasetReport), WorkloadError> {
    let file = File::open(path).map_err(|source| WorkloadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let reader = BufReader::new(file);
    let mut report = DatasetReport {
        path: path.to_path_buf(),
        ..DatasetReport::default()
    };
    let records = match format {
        DatasetFormat::Jsonl => read_jsonl(path, reader, &mut report)?,
        DatasetFormat::Sharegpt => read_sharegpt(path, reader, &mut report)?,
    };
    report.records = records.len() + report.no_prompt_pair;
    Ok((records, report))
}

/// Reads `path` completely, as a campaign's load does before anything
/// starts: a malformed record is an error at its line or record, and a
/// file without one usable prompt is refused. Returns the usable records.
pub fn check(path: &Path, format: DatasetFormat) -> Result<usize, WorkloadError> {
    let (records, report) = read_records(path, format)?;
    if records.is_empty() {
        return Err(parse_error(
            path,
            format!("all {} records", report.records),
            "no record holds a prompt (a `prompt`, or a ShareGPT human turn followed by an answer)",
        ));
    }
    Ok(records.len())
}

/// Loads up to `limit` requests (all if `None`) from `path`, sampled with `seed` and length-filtered.
pub fn load(
    path: &Path,
    format: DatasetFormat,
    counter: &dyn TokenCounter,
    filter: &LengthFilter,
    limit: Option<usize>,
    seed: u64,
) -> Result<DatasetSample, WorkloadError> {
    let (records, mut report) = read_records(path, format)?;
    report.exact_lengths = counter.exact();
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.shuffle(&mut seeded(seed));
    let limit = limit.unwrap_or(usize::MAX);
    let mut requests = Vec::new();
    let mut records: Vec<Option<RawRecord>> = records.into_iter().map(Some).collect();
    for (examined, &i) in order.iter().enumerate() {
        if requests.len() >= limit {
            report.not_needed = order.len() - examined;
            break;
        }
        let Some(rec) = records[i].take() else {
            continue;
        };
        let prompt_tokens = counter.count(&rec.prompt)?;
        let output_len = match (&rec.reference, rec.output_len) {
            (Some(answer), _) => Some(counter.count(answer)?),
            (None, n) => n,
        };
        if filter.min_input.is_some_and(|m| prompt_tokens < m) {
            report.input_too_short += 1;
        } else if filter.max_input.is_some_and(|m| prompt_tokens > m) {
            report.input_too_long += 1;
        } else if output_len.is_some_and(|n| filter.min_output.is_some_and(|m| n < m)) {
            report.output_too_short += 1;
        } else if output_len.is_some_and(|n| filter.max_output.is_some_and(|m| n > m)) {
            report.output_too_long += 1;
        } else {
            requests.push(DatasetRequest {
                source: rec.source,
                prompt: rec.prompt,
                prompt_tokens,
                output_len,
            });
        }
    }
    report.kept = requests.len();
    Ok(DatasetSample { requests, report })
}

fn parse_error(path: &Path, location: String, message: impl Into<String>) -> WorkloadError {
    WorkloadError::Parse {
        path: path.display().to_string(),
        location,
        message: message.into(),
    }
}

/// A prompt record; unknown keys are allowed so richer files can be reused.
#[derive(Deserialize)]
struct PromptRecord {
    prompt: String,
    #[serde(default)]
    output_len: Option<serde_json::Value>,
}

/// One ShareGPT record; other keys (`id`, `model`, ...) are ignored.
#[derive(Deserialize)]
struct ShareGptRecord {
    conversations: Vec<ShareGptTurn>,
}

#[derive(Deserialize)]
struct ShareGptTurn {
    from: String,
    value: String,
}

/// One record of either shape (a prompt record or a ShareGPT
/// conversation) from its JSON value; `Ok(None)` is a conversation without
/// a prompt/answer pair. `Err` says what is wrong in plain words.
fn record_from_value(
    value: serde_json::Value,
    source: String,
) -> Result<Option<RawRecord>, String> {
    let Some(object) = value.as_object() else {
        return Err(format!(
            "expected an object with `prompt` or ShareGPT `conversations`, found {}",
            json_kind(&value)
        ));
    };
    if object.contains_key("conversations") {
        let rec: ShareGptRecord = serde_json::from_value(value).map_err(|e| e.to_string())?;
        return Ok(sharegpt_pair(&rec).map(|(prompt, answer)| RawRecord {
            source,
            prompt: prompt.to_string(),
            output_len: None,
            reference: Some(answer.to_string()),
        }));
    }
    if !object.contains_key("prompt") {
        return Err(
            "a record needs `prompt` (text) or ShareGPT `conversations`; this one has neither"
                .into(),
        );
    }
    let rec: PromptRecord = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let output_len = match rec.output_len {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(0) => return Err("`output_len` must be at least 1".into()),
            Some(n) => Some(usize::try_from(n).map_err(|_| "`output_len` is too large")?),
            None => {
                return Err(format!(
                    "`output_len` must be a whole number of tokens, found {v}"
                ))
            }
        },
    };
    Ok(Some(RawRecord {
        source,
        prompt: rec.prompt,
        output_len,
        reference: None,
    }))
}

/// A JSON value's kind in words, for errors.
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The first human turn and the first assistant turn after it.
fn sharegpt_pair(rec: &ShareGptRecord) -> Option<(&str, &str)> {
    let turns = &rec.conversations;
    let h = turns
        .iter()
        .position(|t| matches!(t.from.as_str(), "human" | "user"))?;
    let answer = turns[h + 1..]
        .iter()
        .find(|t| matches!(t.from.as_str(), "gpt" | "assistant" | "chatgpt"))?;
    Some((&turns[h].value, &answer.value))
}

/// Every line of a JSONL file: a prompt record or a ShareGPT conversation
/// per line; blank lines are allowed.
fn read_jsonl(
    path: &Path,
    reader: impl BufRead,
    report: &mut DatasetReport,
) -> Result<Vec<RawRecord>, WorkloadError> {
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let lineno = i + 1;
        let line = line.map_err(|e| parse_error(path, format!("line {lineno}"), e.to_string()))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line).map_err(|e| {
            parse_error(
                path,
                format!("line {lineno}, column {}", e.column()),
                e.to_string(),
            )
        })?;
        match record_from_value(value, format!("line {lineno}"))
            .map_err(|e| parse_error(path, format!("line {lineno}"), e))?
        {
            Some(rec) => out.push(rec),
            None => report.no_prompt_pair += 1,
        }
    }
    Ok(out)
}

/// Streams the top-level array so a bad record is reported by its index.
struct RecordsSeed<'a> {
    report: &'a mut DatasetReport,
    out: &'a mut Vec<RawRecord>,
    /// Set when a record fails to convert, so the caller can name it.
    bad: &'a mut Option<(usize, String)>,
}

impl<'de> DeserializeSeed<'de> for RecordsSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RecordsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON array of ShareGPT records")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            // Parse each element as a generic value first: a syntax error then
            // carries the line/column, and a shape error carries the index.
            let value = match seq.next_element::<serde_json::Value>() {
                Ok(Some(v)) => v,
                Ok(None) => return Ok(()),
                Err(e) => {
                    *self.bad = Some((index, e.to_string()));
                    return Err(e);
                }
            };
            match record_from_value(value, format!("record {index}")) {
                Ok(Some(rec)) => self.out.push(rec),
                Ok(None) => self.report.no_prompt_pair += 1,
                Err(msg) => {
                    *self.bad = Some((index, msg.clone()));
                    return Err(serde::de::Error::custom(msg));
                }
            }
            index += 1;
        }
    }
}

fn read_sharegpt(
    path: &Path,
    reader: impl std::io::Read,
    report: &mut DatasetReport,
) -> Result<Vec<RawRecord>, WorkloadError> {
    let mut out = Vec::new();
    let mut bad = None;
    let mut de = serde_json::Deserializer::from_reader(reader);
    let seed = RecordsSeed {
        report,
        out: &mut out,
        bad: &mut bad,
    };
    let result = seed.deserialize(&mut de).and_then(|()| de.end());
    match (result, bad) {
        (Ok(()), _) => Ok(out),
        (Err(e), Some((index, msg))) => Err(parse_error(
            path,
            format!(
                "record {index} (near line {}, column {})",
                e.line(),
                e.column()
            ),
            msg,
        )),
        (Err(e), None) => Err(parse_error(
            path,
            format!("line {}, column {}", e.line(), e.column()),
            e.to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::ApproxCounter;

    /// A file in the temp dir, removed on drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str, content: &str) -> Self {
            let path = std::env::temp_dir()
                .join(format!("servebench-dataset-{}-{name}", std::process::id()));
            std::fs::write(&path, content).unwrap();
            Self(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            std::fs::remove_file(&self.0).ok();
        }
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/workload"
        ))
        .join(name)
    }

    #[test]
    fn format_from_extension() {
        assert_eq!(
            DatasetFormat::from_path(Path::new("a.jsonl")).unwrap(),
            DatasetFormat::Jsonl
        );
        assert_eq!(
            DatasetFormat::from_path(Path::new("a.json")).unwrap(),
            DatasetFormat::Sharegpt
        );
        assert!(DatasetFormat::from_path(Path::new("a.csv")).is_err());
    }

    #[test]
    fn jsonl_loads_all_records_with_lengths() {
        let path = fixture("prompts.jsonl");
        let s = load(
            &path,
            DatasetFormat::Jsonl,
            &ApproxCounter,
            &LengthFilter::default(),
            None,
            1,
        )
        .unwrap();
        assert_eq!(s.report.records, 5);
        assert_eq!(s.report.kept, 5);
        assert!(!s.report.exact_lengths);
        let first = s.requests.iter().find(|r| r.source == "line 1").unwrap();
        assert_eq!(first.output_len, Some(64));
        assert_eq!(
            first.prompt_tokens,
            ApproxCounter.count(&first.prompt).unwrap()
        );
        assert!(s.requests.iter().any(|r| r.output_len.is_none()));
    }

    #[test]
    fn sampling_is_seeded_and_counts_the_rest() {
        let path = fixture("prompts.jsonl");
        let f = LengthFilter::default();
        let a = load(&path, DatasetFormat::Jsonl, &ApproxCounter, &f, Some(2), 3).unwrap();
        let b = load(&path, DatasetFormat::Jsonl, &ApproxCounter, &f, Some(2), 3).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.requests.len(), 2);
        assert_eq!(a.report.not_needed, 3);
        let orders: std::collections::HashSet<Vec<String>> = (0..20)
            .map(|seed| {
                load(&path, DatasetFormat::Jsonl, &ApproxCounter, &f, None, seed)
                    .unwrap()
                    .requests
                    .into_iter()
                    .map(|r| r.source)
                    .collect()
            })
            .collect();
        assert!(orders.len() > 1, "seed does not change the order");
    }

    #[test]
    fn jsonl_errors_name_file_and_line() {
        let cases = [
            (
                "{\"prompt\": \"ok\"}\n\n{\"prompt\": \"broken\"\n",
                "line 3",
            ),
            ("{\"prompt\": \"ok\"}\n{\"output_len\": 5}\n", "line 2"),
            ("{\"prompt\": 42}\n", "line 1"),
            ("{\"prompt\": \"x\", \"output_len\": 0}\n", "line 1"),
            ("{\"prompt\": \"x\", \"output_len\": -3}\n", "line 1"),
            ("not json\n", "line 1"),
        ];
        assert_each_names_file_and_location(DatasetFormat::Jsonl, "jsonl", &cases);
    }

    /// Every `(content, location)` case, loaded as `format` from a file with
    /// extension `ext`, fails with a message naming the file and the location.
    fn assert_each_names_file_and_location(
        format: DatasetFormat,
        ext: &str,
        cases: &[(&str, &str)],
    ) {
        for (i, (content, location)) in cases.iter().enumerate() {
            let file = TempFile::new(&format!("bad{i}.{ext}"), content);
            let err = load(
                &file.0,
                format,
                &ApproxCounter,
                &LengthFilter::default(),
                None,
                0,
            )
            .unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(&file.0.display().to_string()), "{msg}");
            assert!(msg.contains(location), "case {i}: {msg}");
        }
    }

    #[test]
    fn sharegpt_takes_first_human_and_following_answer() {
        let path = fixture("sharegpt.json");
        let s = load(
            &path,
            DatasetFormat::Sharegpt,
            &ApproxCounter,
            &LengthFilter::default(),
            None,
            0,
        )
        .unwrap();
        assert_eq!(s.report.records, 4);
        assert_eq!(s.report.no_prompt_pair, 1);
        assert_eq!(s.report.kept, 3);
        let sys_first = s.requests.iter().find(|r| r.source == "record 2").unwrap();
        assert_eq!(sys_first.prompt, "Name three primary colours.");
        let answer = "Red, yellow and blue are the traditional primary colours.";
        assert_eq!(
            sys_first.output_len,
            Some(ApproxCounter.count(answer).unwrap())
        );
    }

    #[test]
    fn sharegpt_errors_name_the_record() {
        let cases = [
            (r#"[{"conversations": []}, {"conv": []}]"#, "record 1"),
            (
                r#"[{"conversations": [{"from": "human", "value": 3}]}]"#,
                "record 0",
            ),
            (
                r#"[{"conversations": [{"from": "human", "value": "a"}]}, {"conversations": [}]"#,
                "record 1",
            ),
            (r#"{"conversations": []}"#, "line 1"),
            (r#"[{"conversations": []}] trailing"#, "line 1"),
        ];
        assert_each_names_file_and_location(DatasetFormat::Sharegpt, "json", &cases);
    }

    #[test]
    fn length_filter_counts_each_reason() {
        let content = [
            r#"{"prompt": "tiny"}"#,
            r#"{"prompt": "a prompt of a moderate length that passes", "output_len": 50}"#,
            r#"{"prompt": "a prompt of a moderate length, short output", "output_len": 2}"#,
            r#"{"prompt": "a prompt of a moderate length, long output", "output_len": 5000}"#,
            r#"{"prompt": "an extremely long prompt that goes on and on and on and on and on and on and on and on and on"}"#,
        ]
        .join("\n");
        let file = TempFile::new("filter.jsonl", &content);
        let filter = LengthFilter {
            min_input: Some(5),
            max_input: Some(20),
            min_output: Some(10),
            max_output: Some(1000),
        };
        let s = load(
            &file.0,
            DatasetFormat::Jsonl,
            &ApproxCounter,
            &filter,
            None,
            0,
        )
        .unwrap();
        let r = &s.report;
        assert_eq!(
            (
                r.kept,
                r.input_too_short,
                r.input_too_long,
                r.output_too_short,
                r.output_too_long
            ),
            (1, 1, 1, 1, 1),
            "{r}"
        );
        assert_eq!(r.filtered(), 4);
        assert_eq!(
            r.records,
            r.kept + r.filtered() + r.no_prompt_pair + r.not_needed
        );
        assert!(r.to_string().contains("1 input too long"));
    }

    #[test]
    fn jsonl_lines_may_be_sharegpt_conversations_beside_prompt_records() {
        let content = [
            r#"{"conversations": [{"from": "human", "value": "Name a colour."}, {"from": "gpt", "value": "Blue."}]}"#,
            r#"{"prompt": "Count to three.", "output_len": 8}"#,
            r#"{"conversations": [{"from": "system", "value": "Be brief."}]}"#,
        ]
        .join("\n");
        let file = TempFile::new("rows.jsonl", &content);
        assert_eq!(check(&file.0, DatasetFormat::Jsonl).unwrap(), 2);
        let s = load(
            &file.0,
            DatasetFormat::Jsonl,
            &ApproxCounter,
            &LengthFilter::default(),
            None,
            0,
        )
        .unwrap();
        assert_eq!((s.report.records, s.report.no_prompt_pair), (3, 1));
        let row = s.requests.iter().find(|r| r.source == "line 1").unwrap();
        assert_eq!(row.prompt, "Name a colour.");
        assert_eq!(row.output_len, Some(ApproxCounter.count("Blue.").unwrap()));
    }

    #[test]
    fn check_reads_the_whole_file_and_refuses_a_bad_line_or_no_prompt() {
        let mut lines = vec![r#"{"prompt": "fine"}"#.to_string(); 500];
        lines.push(r#"{"promt": "typo"}"#.into());
        let file = TempFile::new("late-bad.jsonl", &lines.join("\n"));
        let msg = check(&file.0, DatasetFormat::Jsonl)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("line 501") && msg.contains("has neither"),
            "{msg}"
        );
        let empty = TempFile::new(
            "no-pairs.json",
            r#"[{"conversations": [{"from": "gpt", "value": "hi"}]}]"#,
        );
        let msg = check(&empty.0, DatasetFormat::Sharegpt)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("no record holds a prompt"), "{msg}");
        let list = TempFile::new("list.jsonl", "[1, 2]\n");
        let msg = check(&list.0, DatasetFormat::Jsonl)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("found a list"), "{msg}");
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let err = load(
            Path::new("/nonexistent/x.jsonl"),
            DatasetFormat::Jsonl,
            &ApproxCounter,
            &LengthFilter::default(),
            None,
            0,
        )
        .unwrap_err();
        assert!(matches!(err, WorkloadError::Io { .. }));
    }
}
