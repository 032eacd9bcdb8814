//! Production traces: reading them and turning them into a replay schedule.
//!
//! Formats, as their publishers define them:
//!
//! - **Mooncake / Bailian JSONL**: one request per line, `timestamp` (ms
//!   since the trace's start), `input_length`, `output_length` (tokens) and
//!   `hash_ids`, one 64-bit id per block of `block_size` prompt tokens (512
//!   in the published traces): equal ids at the same positions are the same
//!   prefix blocks; the last block may be partial.
//! - **Azure LLM inference CSV**: `TIMESTAMP,ContextTokens,GeneratedTokens`,
//!   the timestamp a wall-clock time (`2023-11-16 18:15:46.6805900`).
//! - **BurstGPT CSV**: `Timestamp` (s since the trace's start), `Request
//!   tokens`, `Response tokens` (other columns ignored); rows with no
//!   response tokens (requests that failed in production) are skipped and
//!   counted.
//!
//! The file is read as a stream and only the requests of the replay window
//! are kept, at most [`MAX_REQUESTS`], so a large trace costs its reading
//! time, not its size in memory. A malformed row is an error naming the file
//! and line.
//!
//! The schedule: the window's first request is sent at 0; every later one at
//! its trace time since then divided by `time_scale` (the traffic multiple:
//! 2 replays the trace twice as fast), with any gap longer than
//! `max_idle_gap_s` (after scaling) shortened to it. Lengths are scaled by
//! `length_scale`, the block size with them, so a scaled trace shares
//! exactly the blocks the original shares; output lengths by `output_scale`;
//! a request that does not fit `max_context` is clamped (output first, then
//! input, whole blocks kept where possible) and counted. Nothing is changed
//! silently: [`ReplayStats`] records every skip, clamp and capped gap.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::WorkloadError;

/// Most requests one replay keeps: a bound on memory and on the load.
pub const MAX_REQUESTS: u64 = 1_000_000;

/// Prompt tokens per hash id in the published Mooncake traces.
pub const DEFAULT_BLOCK_SIZE: u64 = 512;

/// A trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Mooncake / Bailian JSONL with hash ids.
    Mooncake,
    /// Azure LLM inference trace CSV.
    Azure,
    /// BurstGPT CSV.
    Burstgpt,
}

impl TraceFormat {
    /// The name used in campaigns.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Azure => "azure",
            TraceFormat::Burstgpt => "burstgpt",
        }
    }

    /// The format of `path`: JSONL is Mooncake; a CSV is told by its header.
    pub fn detect(path: &Path) -> Result<Self, WorkloadError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        if ext == "jsonl" || ext == "json" {
            return Ok(TraceFormat::Mooncake);
        }
        let mut header = String::new();
        let file = std::fs::File::open(path).map_err(|e| io(path, e))?;
        BufReader::new(file.take(64 * 1024))
            .read_line(&mut header)
            .map_err(|e| io(path, e))?;
        if header.contains("ContextTokens") {
            Ok(TraceFormat::Azure)
        } else if header.contains("Request tokens") {
            Ok(TraceFormat::Burstgpt)
        } else if header.trim_start().starts_with('{') {
            Ok(TraceFormat::Mooncake)
        } else {
            Err(WorkloadError::Parse {
                path: path.display().to_string(),
                location: "line 1".into(),
                message: "not a known trace format: Mooncake JSONL (timestamp, input_length, output_length, hash_ids), Azure CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or BurstGPT CSV (Timestamp, Request tokens, Response tokens); declare trace_format if it is one of them".into(),
            })
        }
    }
}

impl std::str::FromStr for TraceFormat {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            TraceFormat::Mooncake,
            TraceFormat::Azure,
            TraceFormat::Burstgpt,
        ]
        .into_iter()
        .find(|f| f.name() == s)
        .ok_or_else(|| WorkloadError::UnknownName {
            what: "trace format",
            given: s.to_string(),
            allowed: "mooncake, azure, burstgpt".into(),
        })
    }
}

/// One request as the trace gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    /// 1-based line in the file.
    pub line: u64,
    /// Arrival time in the trace, ms (from the trace's own origin).
    pub at_ms: f64,
    /// Prompt tokens.
    pub input_len: u64,
    /// Output tokens.
    pub output_len: u64,
    /// Prompt block ids (Mooncake); empty when the trace has none.
    pub hash_ids: Vec<u64>,
}

/// How a trace is replayed. Every field is part of a replay cell's identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplaySettings {
    /// Traffic multiple: trace times are divided by it.
    pub time_scale: f64,
    /// Longest gap between two sends after scaling, s.
    pub max_idle_gap_s: Option<f64>,
    /// Trace time at which the window opens, s from the trace's first request.
    pub start_s: f64,
    /// Trace time at which it closes (exclusive), s.
    pub end_s: Option<f64>,
    /// Most requests replayed from the window.
    pub max_requests: Option<u64>,
    /// Prompt tokens per hash id before scaling.
    pub block_size: u64,
    /// Factor on prompt lengths and the block size.
    pub length_scale: f64,
    /// Factor on output lengths.
    pub output_scale: f64,
    /// Largest prompt + output a request may need (the server's context
    /// less a margin); longer requests are clamped.
    pub max_context: Option<u64>,
}

impl Default for ReplaySettings {
    fn default() -> Self {
        Self {
            time_scale: 1.0,
            max_idle_gap_s: None,
            start_s: 0.0,
            end_s: None,
            max_requests: None,
            block_size: DEFAULT_BLOCK_SIZE,
            length_scale: 1.0,
            output_scale: 1.0,
            max_context: None,
        }
    }
}

impl ReplaySettings {
    /// Refuse settings that cannot make a schedule.
    pub fn validate(&self) -> Result<(), String> {
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{name} must be a positive number, got {v}"))
            }
        };
        positive("time_scale", self.time_scale)?;
        positive("length_scale", self.length_scale)?;
        positive("output_scale", self.output_scale)?;
        if let Some(g) = self.max_idle_gap_s {
            if !(g.is_finite() && g >= 0.0) {
                return Err(format!("max_idle_gap must be zero or more, got {g}"));
            }
        }
        if !(self.start_s.is_finite() && self.start_s >= 0.0) {
            return Err(format!(
                "the window start must be zero or more, got {}",
                self.start_s
            ));
        }
        if let Some(e) = self.end_s {
            if !(e.is_finite() && e > self.start_s) {
                return Err(format!(
                    "the window end ({e} s) must come after its start ({} s)",
                    self.start_s
                ));
            }
        }
        if self.block_size == 0 {
            return Err("block_size must be at least 1".into());
        }
        if self.max_requests == Some(0) {
            return Err("max_requests must be at least 1".into());
        }
        Ok(())
    }

    /// Prompt tokens per block after length scaling (at least 1).
    pub fn scaled_block(&self) -> u64 {
        ((self.block_size as f64 * self.length_scale).round() as u64).max(1)
    }
}

/// One request of the replay, scaled and scheduled.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRequest {
    /// Line in the trace file.
    pub line: u64,
    /// When to send it, ms after the replay starts.
    pub offset_ms: f64,
    /// Its time in the trace, ms after the window's first request.
    pub trace_ms: f64,
    /// Prompt tokens to send.
    pub input_len: u64,
    /// Output tokens to ask for (exactly: ignore_eos).
    pub output_len: u64,
    /// Block ids of the prompt, each [`ReplaySettings::scaled_block`]
    /// tokens, the last partial; empty when the trace has none.
    pub hash_ids: Vec<u64>,
}

/// What the replay changed or left out, counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayStats {
    /// Rows read from the file (up to where reading stopped).
    pub rows_read: u64,
    /// Requests in the replay.
    pub requests: u64,
    /// Rows skipped for no output (failed in production) or no prompt.
    pub skipped_empty: u64,
    /// Requests whose output was shortened to fit the context.
    pub clamped_output: u64,
    /// Requests whose prompt was shortened to fit the context.
    pub clamped_input: u64,
    /// Gaps shortened to `max_idle_gap_s`.
    pub capped_gaps: u64,
    /// Rows earlier than the row before them (the replay sorts them).
    pub out_of_order: u64,
    /// Whether reading stopped at `max_requests` (or [`MAX_REQUESTS`]).
    pub truncated: bool,
    /// Trace time the replay covers, s.
    pub trace_span_s: f64,
    /// Replay time from the first send to the last, s.
    pub replay_span_s: f64,
}

impl ReplayStats {
    /// Every change the replay made, in words; empty when it changed nothing.
    pub fn changes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (n, what) in [
            (
                self.skipped_empty,
                "rows skipped for no output or no prompt tokens",
            ),
            (self.clamped_output, "outputs shortened to fit the context"),
            (self.clamped_input, "prompts shortened to fit the context"),
            (self.capped_gaps, "idle gaps shortened to max_idle_gap"),
            (
                self.out_of_order,
                "rows earlier than the row before them, sorted",
            ),
        ] {
            if n > 0 {
                out.push(format!("{n} {what}"));
            }
        }
        if self.truncated {
            out.push(format!("stopped reading after {} requests", self.requests));
        }
        out
    }
}

/// A trace made ready to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The requests, in send order.
    pub requests: Vec<ReplayRequest>,
    /// What was changed or left out.
    pub stats: ReplayStats,
    /// Prompt tokens per block.
    pub block: u64,
}

/// Read `path` (in `format`, or detected) and build its replay.
pub fn load(
    path: &Path,
    format: Option<TraceFormat>,
    settings: &ReplaySettings,
) -> Result<Replay, WorkloadError> {
    settings
        .validate()
        .map_err(WorkloadError::InvalidArgument)?;
    let format = match format {
        Some(f) => f,
        None => TraceFormat::detect(path)?,
    };
    let file = std::fs::File::open(path).map_err(|e| io(path, e))?;
    let reader = BufReader::with_capacity(1 << 16, file);
    let name = path.display().to_string();
    let mut window = Window::new(settings);
    match format {
        TraceFormat::Mooncake => read_jsonl(reader, &name, settings, &mut window)?,
        TraceFormat::Azure | TraceFormat::Burstgpt => read_csv(reader, &name, format, &mut window)?,
    }
    Ok(window.finish(settings))
}

fn io(path: &Path, source: std::io::Error) -> WorkloadError {
    WorkloadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn parse_error(path: &str, line: u64, message: impl Into<String>) -> WorkloadError {
    WorkloadError::Parse {
        path: path.to_string(),
        location: format!("line {line}"),
        message: message.into(),
    }
}

/// A Mooncake row as written.
#[derive(Deserialize)]
struct MooncakeRow {
    timestamp: f64,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

fn read_jsonl(
    mut reader: impl BufRead,
    name: &str,
    settings: &ReplaySettings,
    window: &mut Window,
) -> Result<(), WorkloadError> {
    let mut text = String::new();
    let mut line = 0u64;
    loop {
        text.clear();
        let n = reader
            .read_line(&mut text)
            .map_err(|e| parse_error(name, line + 1, e.to_string()))?;
        if n == 0 {
            return Ok(());
        }
        line += 1;
        if text.trim().is_empty() {
            continue;
        }
        let r: MooncakeRow = serde_json::from_str(&text).map_err(|e| {
            parse_error(
                name,
                line,
                format!("not a Mooncake row (timestamp ms, input_length, output_length, hash_ids of 64-bit ids): {e}"),
            )
        })?;
        if !(r.timestamp.is_finite() && r.timestamp >= 0.0) {
            return Err(parse_error(
                name,
                line,
                format!("timestamp {} is not a time in ms", r.timestamp),
            ));
        }
        if !r.hash_ids.is_empty() {
            let blocks = r.input_length.div_ceil(settings.block_size);
            if r.hash_ids.len() as u64 != blocks {
                return Err(parse_error(
                    name,
                    line,
                    format!(
                        "{} hash ids for {} prompt tokens, which need {blocks} blocks of {} tokens (block_size)",
                        r.hash_ids.len(),
                        r.input_length,
                        settings.block_size
                    ),
                ));
            }
        }
        let row = TraceRow {
            line,
            at_ms: r.timestamp,
            input_len: r.input_length,
            output_len: r.output_length,
            hash_ids: r.hash_ids,
        };
        if !window.push(row) {
            return Ok(());
        }
    }
}

fn read_csv(
    reader: impl Read,
    name: &str,
    format: TraceFormat,
    window: &mut Window,
) -> Result<(), WorkloadError> {
    let mut csv = csv::ReaderBuilder::new().flexible(true).from_reader(reader);
    let headers = csv
        .headers()
        .map_err(|e| parse_error(name, 1, e.to_string()))?
        .clone();
    let (time_col, input_col, output_col) = match format {
        TraceFormat::Azure => ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
        _ => ("Timestamp", "Request tokens", "Response tokens"),
    };
    let col = |want: &str| {
        headers
            .iter()
            .position(|h| h.trim() == want)
            .ok_or_else(|| {
                parse_error(
                    name,
                    1,
                    format!(
                        "no `{want}` column in the header (a {} trace has {time_col}, {input_col} and {output_col})",
                        format.name()
                    ),
                )
            })
    };
    let (t, i, o) = (col(time_col)?, col(input_col)?, col(output_col)?);
    let mut record = csv::StringRecord::new();
    loop {
        let line = csv.position().line() + 1;
        match csv.read_record(&mut record) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => return Err(parse_error(name, line, e.to_string())),
        }
        let line = record.position().map_or(line, |p| p.line());
        let field = |k: usize, what: &str| {
            record
                .get(k)
                .map(str::trim)
                .ok_or_else(|| parse_error(name, line, format!("no {what} field")))
        };
        let count = |k: usize, what: &str| -> Result<u64, WorkloadError> {
            let v = field(k, what)?;
            v.parse::<u64>()
                .map_err(|_| parse_error(name, line, format!("{what} `{v}` is not a token count")))
        };
        let stamp = field(t, time_col)?;
        let at_ms = match format {
            TraceFormat::Azure => wall_clock_ms(stamp),
            _ => stamp
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(|s| s * 1000.0),
        }
        .ok_or_else(|| parse_error(name, line, format!("{time_col} `{stamp}` is not a time")))?;
        let row = TraceRow {
            line,
            at_ms,
            input_len: count(i, input_col)?,
            output_len: count(o, output_col)?,
            hash_ids: Vec::new(),
        };
        if !window.push(row) {
            return Ok(());
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS[.fraction]` (or with `T`) as ms since 1970, UTC.
fn wall_clock_ms(s: &str) -> Option<f64> {
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.trim_end_matches('Z');
    let mut t = time.splitn(3, ':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
        || h > 23
        || min > 59
        || !(0.0..61.0).contains(&sec)
    {
        return None;
    }
    // Days from civil (proleptic Gregorian), after H. Hinnant's algorithm.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + min * 60) as f64 + sec) * 1000.0)
}

/// The rows of the window, gathered as they are read.
struct Window {
    origin: Option<f64>,
    start_ms: f64,
    end_ms: Option<f64>,
    limit: u64,
    rows: Vec<TraceRow>,
    stats: ReplayStats,
    last_at: f64,
}

impl Window {
    fn new(s: &ReplaySettings) -> Self {
        Self {
            origin: None,
            start_ms: s.start_s * 1000.0,
            end_ms: s.end_s.map(|e| e * 1000.0),
            limit: s.max_requests.unwrap_or(MAX_REQUESTS).min(MAX_REQUESTS),
            rows: Vec::new(),
            stats: ReplayStats::default(),
            last_at: f64::NEG_INFINITY,
        }
    }

    /// Take one row; false once no later row can be wanted.
    fn push(&mut self, row: TraceRow) -> bool {
        self.stats.rows_read += 1;
        if row.at_ms < self.last_at {
            self.stats.out_of_order += 1;
        }
        self.last_at = row.at_ms;
        let origin = *self.origin.get_or_insert(row.at_ms);
        let t = row.at_ms - origin;
        if t < self.start_ms {
            return true;
        }
        if self.end_ms.is_some_and(|e| t >= e) {
            // Rows out of order may still fall inside; an ordered trace is done.
            return self.stats.out_of_order > 0;
        }
        if row.output_len == 0 || row.input_len == 0 {
            self.stats.skipped_empty += 1;
            return true;
        }
        if self.rows.len() as u64 >= self.limit {
            self.stats.truncated = true;
            return false;
        }
        self.rows.push(row);
        true
    }

    fn finish(mut self, s: &ReplaySettings) -> Replay {
        self.rows.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
        let block = s.scaled_block();
        let first = self.rows.first().map_or(0.0, |r| r.at_ms);
        let gap_cap_ms = s.max_idle_gap_s.map(|g| g * 1000.0);
        let mut stats = self.stats;
        let mut requests = Vec::with_capacity(self.rows.len());
        let (mut prev_scaled, mut offset) = (0.0f64, 0.0f64);
        for row in self.rows {
            let trace_ms = row.at_ms - first;
            let scaled = trace_ms / s.time_scale;
            let mut gap = scaled - prev_scaled;
            prev_scaled = scaled;
            if let Some(cap) = gap_cap_ms {
                if gap > cap {
                    gap = cap;
                    stats.capped_gaps += 1;
                }
            }
            offset += gap;
            let (input_len, output_len, hash_ids) = scale(&row, s, block, &mut stats);
            requests.push(ReplayRequest {
                line: row.line,
                offset_ms: offset,
                trace_ms,
                input_len,
                output_len,
                hash_ids,
            });
        }
        stats.requests = requests.len() as u64;
        stats.trace_span_s = requests.last().map_or(0.0, |r| r.trace_ms / 1000.0);
        stats.replay_span_s = requests.last().map_or(0.0, |r| r.offset_ms / 1000.0);
        Replay {
            requests,
            stats,
            block,
        }
    }
}

/// A row's lengths and blocks after scaling and the context clamp.
fn scale(
    row: &TraceRow,
    s: &ReplaySettings,
    block: u64,
    stats: &mut ReplayStats,
) -> (u64, u64, Vec<u64>) {
    let mut hash_ids = row.hash_ids.clone();
    // With blocks, every full block keeps its scaled size and only the last
    // one's share is scaled, so the block structure survives exactly.
    let mut input = if hash_ids.is_empty() {
        ((row.input_len as f64 * s.length_scale).round() as u64).max(1)
    } else {
        let full = hash_ids.len() as u64 - 1;
        let last = row.input_len - full * s.block_size;
        let last = ((last as f64 * s.length_scale).round() as u64).clamp(1, block);
        full * block + last
    };
    let mut output = ((row.output_len as f64 * s.output_scale).round() as u64).max(1);
    if let Some(ctx) = s.max_context {
        if input + output > ctx {
            // Keep the prompt (its sharing is what a trace is about) and at
            // least one output token; cut the prompt only when it alone
            // does not fit.
            let room = ctx.saturating_sub(input).max(1);
            if output > room {
                output = room;
                stats.clamped_output += 1;
            }
            if input + output > ctx {
                input = ctx.saturating_sub(output).max(1);
                stats.clamped_input += 1;
                if !hash_ids.is_empty() {
                    hash_ids.truncate(input.div_ceil(block) as usize);
                }
            }
        }
    }
    (input, output, hash_ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_times_are_read_to_the_microsecond() {
        let a = wall_clock_ms("2023-11-16 18:15:46.6805900").unwrap();
        let b = wall_clock_ms("2023-11-16 18:15:50.9951690").unwrap();
        assert!((b - a - 4314.579).abs() < 1e-3, "{}", b - a);
        // 1970-01-01 is day 0; a leap day and a year boundary count right.
        assert_eq!(wall_clock_ms("1970-01-01 00:00:01"), Some(1000.0));
        let leap = wall_clock_ms("2024-03-01T00:00:00").unwrap()
            - wall_clock_ms("2024-02-28 00:00:00").unwrap();
        assert_eq!(leap, 2.0 * 86_400_000.0);
        assert_eq!(wall_clock_ms("2023-13-01 00:00:00"), None);
        assert_eq!(wall_clock_ms("yesterday"), None);
    }

    fn row(at_ms: f64, input: u64, output: u64, ids: &[u64]) -> TraceRow {
        TraceRow {
            line: 1,
            at_ms,
            input_len: input,
            output_len: output,
            hash_ids: ids.to_vec(),
        }
    }

    #[test]
    fn scaling_keeps_full_blocks_whole_and_the_clamp_is_counted() {
        let s = ReplaySettings {
            length_scale: 0.125,
            ..Default::default()
        };
        let mut st = ReplayStats::default();
        // 2 full blocks of 512 and 100 more tokens: 2 × 64 + round(12.5).
        let (i, o, ids) = scale(
            &row(0.0, 1124, 80, &[1, 2, 3]),
            &s,
            s.scaled_block(),
            &mut st,
        );
        assert_eq!((i, o, ids.len()), (128 + 13, 80, 3));
        let tight = ReplaySettings {
            max_context: Some(150),
            ..s.clone()
        };
        let (i, o, _) = scale(&row(0.0, 1124, 80, &[1, 2, 3]), &tight, 64, &mut st);
        assert_eq!((i, o), (141, 9));
        assert_eq!((st.clamped_output, st.clamped_input), (1, 0));
        let tiny = ReplaySettings {
            max_context: Some(100),
            ..s
        };
        let (i, o, ids) = scale(&row(0.0, 1124, 80, &[1, 2, 3]), &tiny, 64, &mut st);
        assert_eq!((i, o, ids), (99, 1, vec![1, 2]));
        assert_eq!((st.clamped_output, st.clamped_input), (2, 1));
    }

    #[test]
    fn the_schedule_divides_by_the_time_scale_then_caps_idle_gaps() {
        let s = ReplaySettings {
            time_scale: 2.0,
            max_idle_gap_s: Some(1.0),
            ..Default::default()
        };
        let mut w = Window::new(&s);
        for t in [5_000.0, 5_000.0, 6_000.0, 16_000.0, 17_000.0] {
            assert!(w.push(row(t, 10, 5, &[])));
        }
        let r = w.finish(&s);
        let offsets: Vec<f64> = r.requests.iter().map(|q| q.offset_ms).collect();
        // Gaps 0, 1 s, 10 s, 1 s in the trace: halved, the 5 s one capped to 1 s.
        assert_eq!(offsets, [0.0, 0.0, 500.0, 1500.0, 2000.0]);
        assert_eq!(r.stats.capped_gaps, 1);
        assert_eq!(r.requests[3].trace_ms, 11_000.0);
        assert_eq!(r.stats.replay_span_s, 2.0);
    }

    #[test]
    fn the_window_and_the_request_limit_bound_what_is_kept() {
        let s = ReplaySettings {
            start_s: 1.0,
            end_s: Some(3.0),
            max_requests: Some(2),
            ..Default::default()
        };
        let mut w = Window::new(&s);
        assert!(w.push(row(100.0, 10, 5, &[])));
        assert!(w.push(row(900.0, 10, 5, &[]))); // before the window
        assert!(w.push(row(1100.0, 10, 0, &[]))); // failed in production
        assert!(w.push(row(1200.0, 10, 5, &[])));
        assert!(w.push(row(2000.0, 10, 5, &[])));
        assert!(!w.push(row(2500.0, 10, 5, &[]))); // past the limit
        let r = w.finish(&s);
        assert_eq!(r.requests.len(), 2);
        assert!(r.stats.truncated);
        assert_eq!(r.stats.skipped_empty, 1);
        assert_eq!(r.requests[1].trace_ms, 800.0);
    }
}
