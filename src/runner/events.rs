//! What a run tells the world: typed events that the runner emits and its
//! consumers show. The terminal lines of `servebench run` are one consumer;
//! `--log-json FILE` writes the same events as JSON lines, so a dashboard or
//! a CI job can follow a run without reading stderr.

use std::io::Write;
use std::sync::Mutex;

use serde::Serialize;

use crate::failure::{Failure, FailureClass};
use crate::store::{CellResult, CellStatus};
use crate::util::units::{fmt_s, now_rfc3339};

/// Something that happened during a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The plan the run follows.
    Planned {
        /// Cells to measure.
        cells: usize,
        /// Its estimated time, s.
        eta_s: f64,
        /// The plan as `servebench plan` shows it.
        rendered: String,
    },
    /// Temporary files an interrupted run left were removed.
    TemporariesRemoved {
        /// How many.
        count: usize,
    },
    /// Something about the run's set-up or progress worth a line.
    Note {
        /// The text.
        message: String,
    },
    /// Something the user should look at; the run goes on.
    Warning {
        /// The text.
        message: String,
    },
    /// A server group starts.
    GroupStarted {
        /// Server config id.
        server: String,
        /// Cells it has to run.
        cells: usize,
        /// The campaign's remaining time, s.
        eta_left_s: f64,
    },
    /// The server answered its health check.
    ServerHealthy {
        /// Server config id.
        server: String,
        /// Launch to healthy, s.
        after_s: f64,
        /// Where it listens.
        url: String,
        /// The process, as the launcher describes it.
        process: String,
    },
    /// The server's warm-up requests ended.
    ServerWarmedUp {
        /// Server config id.
        server: String,
        /// Warm-up requests sent.
        requests: u32,
        /// How long they took, s.
        seconds: f64,
        /// The first warm-up failure, if any.
        error: Option<String>,
    },
    /// The server could not start; its cells fail with this.
    ServerStartFailed {
        /// Server config id.
        server: String,
        /// The failure class.
        class: FailureClass,
        /// The evidence.
        detail: String,
        /// The server log's last line, where no classified cause already
        /// names why (a missing file, a bad flag, a traceback's error).
        #[serde(skip_serializing_if = "Option::is_none")]
        log_line: Option<String>,
    },
    /// The server died during a cell.
    ServerCrashed {
        /// Server config id.
        server: String,
        /// The cell in flight.
        cell: String,
        /// The evidence.
        detail: String,
    },
    /// The server is started again once after a crash.
    ServerRestarting {
        /// Server config id.
        server: String,
    },
    /// The server ignored SIGTERM for its grace period and was killed.
    ServerKilled {
        /// Server config id.
        server: String,
        /// The grace period, s.
        grace_s: f64,
    },
    /// A cell starts measuring.
    CellStarted {
        /// Server config id.
        server: String,
        /// Cell name.
        cell: String,
    },
    /// A cell is not measured: enough repetitions of its point agree.
    CellNotNeeded {
        /// Server config id.
        server: String,
        /// Cell name.
        cell: String,
        /// Why not.
        why: String,
    },
    /// A cell's point was probed (`goal = "answer"`): measured in full
    /// next, or not measured because the probe cannot beat the leader.
    CellProbed {
        /// Server config id.
        server: String,
        /// Cell name.
        cell: String,
        /// The probe's value: output throughput per GPU, or decode speed at
        /// one stream.
        value: f64,
        /// Its unit.
        unit: String,
        /// Why it is not measured in full, when it is not.
        not_measured: Option<String>,
    },
    /// The answer so far, after a server's cells (`goal = "answer"`).
    AnswerSoFar {
        /// The line.
        message: String,
    },
    /// A measured cell was judged.
    CellJudged(Box<Judged>),
    /// A cell's result was written to the store.
    CellStored {
        /// Server config id.
        server: String,
        /// Cell name.
        cell: String,
        /// Its status.
        status: CellStatus,
    },
    /// The run ended.
    Finished {
        /// Servers launched.
        launches: u32,
        /// Cells measured.
        measured: usize,
        /// Cells reused from the store.
        cached: usize,
        /// Cells that failed.
        failed: usize,
        /// Whether it was interrupted.
        interrupted: bool,
        /// The exit code `servebench run` returns.
        exit_code: u8,
        /// The results directory.
        results: String,
    },
    /// A search step: a probe's verdict, the search's end, or its early stop.
    Search {
        /// Server config id.
        server: String,
        /// The search's name.
        search: String,
        /// What happened.
        message: String,
    },
    /// The campaign's remaining time was estimated again.
    EtaUpdated {
        /// Remaining time, s.
        left_s: f64,
    },
}

/// A measured cell's judgment and headline numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    /// Server config id.
    pub server: String,
    /// Cell name.
    pub cell: String,
    /// The status it was given.
    pub status: CellStatus,
    /// Requests completed.
    pub completed: usize,
    /// Requests failed.
    pub failed: usize,
    /// Output throughput, tokens/s.
    pub output_tok_s: Option<f64>,
    /// TTFT p50, ms.
    pub ttft_p50_ms: Option<f64>,
    /// TPOT p50, ms.
    pub tpot_p50_ms: Option<f64>,
    /// Why it is not `ok`, when it is not.
    pub failure: Option<Failure>,
}

impl Judged {
    /// The judgment of a stored result.
    pub fn of(r: &CellResult) -> Self {
        let s = r.summary.as_ref();
        Judged {
            server: r.server_id.clone(),
            cell: r.cell_name.clone(),
            status: r.status,
            completed: s.map_or(0, |s| s.completed),
            failed: s.map_or(0, |s| s.failed),
            output_tok_s: s.map(|s| s.output_throughput_tok_s),
            ttft_p50_ms: s.and_then(|s| s.latency.ttft_ms).map(|t| t.p50),
            tpot_p50_ms: s.and_then(|s| s.latency.tpot_ms).map(|t| t.p50),
            failure: r.failure.clone(),
        }
    }
}

impl Event {
    /// The line `servebench run` prints for this event, if any.
    pub fn terminal_line(&self) -> Option<String> {
        Some(match self {
            Event::Planned { rendered, .. } => rendered.trim_end_matches('\n').to_string(),
            Event::TemporariesRemoved { count } => {
                format!("removed {count} temporary files left by an interrupted run")
            }
            Event::Note { message } => message.clone(),
            Event::Warning { message } => format!("warning: {message}"),
            Event::GroupStarted {
                server,
                cells,
                eta_left_s,
            } => format!(
                "== server {server} ({cells} cells to run; campaign ETA {} left)",
                fmt_s(eta_left_s.max(0.0))
            ),
            Event::ServerHealthy {
                server,
                after_s,
                url,
                process,
            } => format!("   {server} healthy after {after_s:.1}s on {url} ({process})"),
            Event::ServerWarmedUp {
                server,
                requests,
                seconds,
                error,
            } => match error {
                None => format!("   {server} warmed up with {requests} request(s) in {seconds:.1}s"),
                Some(e) => format!("   {server} warm-up failed: {e}"),
            },
            Event::ServerStartFailed {
                server,
                class,
                detail,
                log_line,
            } => match log_line {
                Some(line) => {
                    format!("   {server} failed to start: {class} ({detail}); its log ends: {line}")
                }
                None => format!("   {server} failed to start: {class} ({detail})"),
            },
            Event::ServerCrashed {
                server,
                cell,
                detail,
            } => format!("   [{server}] {cell} crashed: {detail}"),
            Event::ServerRestarting { server } => {
                format!("   restarting {server} once after the crash")
            }
            Event::ServerKilled { server, grace_s } => {
                format!("   {server} ignored SIGTERM for {grace_s:.0}s and was killed")
            }
            Event::CellStarted { server, cell } => format!("   [{server}] {cell} ..."),
            Event::CellNotNeeded { server, cell, why } => {
                format!("   [{server}] {cell}: not needed: {why}")
            }
            Event::CellProbed {
                server,
                cell,
                value,
                unit,
                not_measured,
            } => match not_measured {
                Some(why) => format!("   [{server}] {cell}: not measured: {why}"),
                None => format!(
                    "   [{server}] {cell}: probe {value:.1} {unit}; may place, measuring in full"
                ),
            },
            Event::AnswerSoFar { message } => message.clone(),
            Event::CellJudged(j) => {
                let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1}"));
                format!(
                    "   [{}] {}: {} — {} ok / {} failed, {:.1} out tok/s, TTFT p50 {} ms, TPOT p50 {} ms{}",
                    j.server,
                    j.cell,
                    j.status.as_str(),
                    j.completed,
                    j.failed,
                    j.output_tok_s.unwrap_or(0.0),
                    ms(j.ttft_p50_ms),
                    ms(j.tpot_p50_ms),
                    j.failure
                        .as_ref()
                        .map(|f| format!(
                            " ({}: {})",
                            f.class,
                            crate::failure::truncate(&f.detail, 160)
                        ))
                        .unwrap_or_default()
                )
            }
            Event::CellStored { .. } => return None,
            Event::Finished {
                launches,
                measured,
                cached,
                failed,
                results,
                ..
            } => format!(
                "{launches} servers launched, {measured} cells measured, {cached} reused, {failed} failed; results in {results}"
            ),
            Event::Search {
                server,
                search,
                message,
            } => format!("   [{server}] search {search}: {message}"),
            Event::EtaUpdated { left_s } => {
                format!("   campaign ETA left: {}", fmt_s(*left_s))
            }
        })
    }
}

/// One consumer of a run's events.
pub trait Sink: Send + Sync {
    /// Take one event, emitted at `at` (RFC 3339).
    fn take(&self, at: &str, event: &Event);
}

impl<S: Sink + ?Sized> Sink for std::sync::Arc<S> {
    fn take(&self, at: &str, event: &Event) {
        (**self).take(at, event)
    }
}

/// The terminal consumer: each event's line on stderr.
#[derive(Debug, Default)]
pub struct Terminal;

impl Sink for Terminal {
    fn take(&self, _at: &str, event: &Event) {
        if let Some(line) = event.terminal_line() {
            eprintln!("{line}");
        }
    }
}

/// Writes every event as one JSON object per line, `at` first, flushed
/// line by line so a reader can follow the file while the run goes on.
pub struct JsonLines {
    out: Mutex<Box<dyn Write + Send>>,
    failed: std::sync::atomic::AtomicBool,
}

impl JsonLines {
    /// Lines into `w`.
    pub fn new(w: Box<dyn Write + Send>) -> Self {
        JsonLines {
            out: Mutex::new(w),
            failed: Default::default(),
        }
    }

    /// Lines into a new file at `path` (replacing an old regular file, never
    /// a device, directory or symlink), or standard output for `-`.
    pub fn create(path: &std::path::Path) -> std::io::Result<Self> {
        if path.as_os_str() == "-" {
            return Ok(Self::new(Box::new(std::io::stdout())));
        }
        crate::util::fsx::check_replaceable(path)?;
        let f = std::fs::File::create(path).map_err(|e| {
            std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
        })?;
        Ok(Self::new(Box::new(std::io::LineWriter::new(f))))
    }
}

/// One event as written by [`JsonLines`].
#[derive(Serialize)]
struct Line<'a> {
    at: &'a str,
    #[serde(flatten)]
    event: &'a Event,
}

impl Sink for JsonLines {
    fn take(&self, at: &str, event: &Event) {
        use std::sync::atomic::Ordering;
        let Ok(text) = serde_json::to_string(&Line { at, event }) else {
            return;
        };
        // Like every file servebench writes: no credential leaves in it.
        let mut text = crate::util::secret::scrub_str(&text).into_owned();
        text.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // A full disk must not stop the measurement: say it once and go on.
        if out.write_all(text.as_bytes()).is_err() && !self.failed.swap(true, Ordering::Relaxed) {
            eprintln!("warning: the event log could not be written; the run goes on");
        }
    }
}

/// Keeps every event in memory, for tests and for a caller that wants the
/// sequence after the run.
#[derive(Debug, Default)]
pub struct Recorder {
    events: Mutex<Vec<Event>>,
}

impl Recorder {
    /// The events so far, in order.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Sink for Recorder {
    fn take(&self, _at: &str, event: &Event) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.clone());
    }
}

/// The consumers of one run; the runner emits into this.
#[derive(Default)]
pub struct Events {
    sinks: Vec<Box<dyn Sink>>,
}

impl Events {
    /// Events shown on the terminal only.
    pub fn terminal() -> Self {
        Events::default().with(Terminal)
    }

    /// These consumers and `sink`.
    pub fn with(mut self, sink: impl Sink + 'static) -> Self {
        self.sinks.push(Box::new(sink));
        self
    }

    /// Hand `event` to every consumer.
    pub fn emit(&self, event: Event) {
        let at = now_rfc3339();
        for s in &self.sinks {
            s.take(&at, &event);
        }
    }

    /// Record that `r` was written to the store.
    pub fn stored(&self, r: &CellResult) {
        self.emit(Event::CellStored {
            server: r.server_id.clone(),
            cell: r.cell_name.clone(),
            status: r.status,
        });
    }
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Events({} consumers)", self.sinks.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_carry_the_time_and_the_event_by_name() {
        #[derive(Clone, Default)]
        struct Shared(std::sync::Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Shared::default();
        let events = Events::default().with(JsonLines::new(Box::new(buf.clone())));
        events.emit(Event::CellStarted {
            server: "a".into(),
            cell: "w-c1".into(),
        });
        events.emit(Event::ServerStartFailed {
            server: "a".into(),
            class: FailureClass::HealthTimeout,
            detail: "no answer".into(),
            log_line: None,
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "cell_started");
        assert_eq!(lines[0]["cell"], "w-c1");
        assert!(lines[0]["at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(lines[1]["event"], "server_start_failed");
        assert_eq!(lines[1]["class"], "health_timeout");
    }

    #[test]
    fn the_json_log_never_replaces_a_device_or_a_directory() {
        for path in ["/dev/null", "/tmp"] {
            let e = JsonLines::create(std::path::Path::new(path)).err().unwrap();
            assert!(e.to_string().contains("refusing to replace"), "{path}: {e}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(JsonLines::create(&dir.path().join("events.jsonl")).is_ok());
    }

    #[test]
    fn the_terminal_shows_what_run_always_printed_and_nothing_for_stores() {
        let e = Event::GroupStarted {
            server: "a".into(),
            cells: 3,
            eta_left_s: 61.0,
        };
        assert_eq!(
            e.terminal_line().unwrap(),
            "== server a (3 cells to run; campaign ETA 1m01s left)"
        );
        let stored = Event::CellStored {
            server: "a".into(),
            cell: "c".into(),
            status: CellStatus::Ok,
        };
        assert_eq!(stored.terminal_line(), None);
        let seen = std::sync::Arc::new(Recorder::default());
        let events = Events::default().with(seen.clone());
        events.emit(stored.clone());
        assert_eq!(seen.events(), vec![stored]);
    }
}
