//! The one load driver: arrival schedule × request source × stop condition.
//!
//! Closed and open loops share this file and differ only in how they decide
//! when the next request leaves; every request goes through the same
//! [`Executor`] and produces one raw record. Warm-up requests run first, at
//! the level's concurrency, and are excluded from the returned records.
//! All timing uses `tokio::time`, so tests can run it on a paused clock.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::schedule::{ArrivalClock, LoadShape};
use crate::client::record::{OutputText, RequestRecord};
use crate::client::tool_calls::ToolCalls;
use crate::client::Endpoint;
use crate::load::live::LiveView;
use crate::workload::answer_check::AnswerCheck;
use crate::workload::session::Conversation;
use crate::workload::{ChatMessage, Scenario};

/// One request ready to be sent.
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    /// The serialized request body.
    pub body: Bytes,
    /// Prompt tokens the source intended, when it knows.
    pub planned_input_tokens: Option<u64>,
    /// Output tokens asked for.
    pub output_tokens: u64,
    /// Prompt tokens a trace's block ids predict an infinite cache serves.
    pub predicted_cached_tokens: Option<u64>,
    /// Prompt kind or source label.
    pub label: Option<String>,
    /// Keep the answer's text (a later turn of a session needs it).
    pub capture_text: bool,
    /// The check the answer must pass, when the prompt has one.
    pub check: Option<Arc<AnswerCheck>>,
}

/// Builds a chat request body from the conversation so far and an output length.
/// A session turn's body from the conversation so far, its output limit and
/// whether the turn expects a tool call.
pub type SessionBodyFn = Arc<dyn Fn(&[ChatMessage], u64, bool) -> Bytes + Send + Sync>;

/// A multi-turn session: each turn is sent with the whole conversation so
/// far, including the server's real previous answers. It holds one
/// concurrency slot from its first turn to its last.
#[derive(Clone)]
pub struct SessionWork {
    /// Session index within the level.
    pub session: u64,
    /// The turns.
    pub scenario: Arc<Scenario>,
    /// Output tokens per turn: the default, and the cap on turns that set their own.
    pub output_tokens: u64,
    /// Request body builder.
    pub body: SessionBodyFn,
}

/// One unit of work a simulated user performs.
pub enum Work {
    /// A single request.
    Request(PreparedRequest),
    /// A whole multi-turn session.
    Session(SessionWork),
}

/// Yields the work of a level, one unit per index.
pub trait RequestSource: Send {
    /// The work with this index, or `None` when the source is exhausted.
    fn next_work(&mut self, index: u64) -> Option<Work>;

    /// When each unit is due, from the source's own schedule (a trace);
    /// `None` for sources that take the level's load shape.
    fn schedule(&self) -> Option<Arc<[Duration]>> {
        None
    }
}

/// Carry out unit `index` of the level's work and return its records in the
/// order sent, each marked with that index.
async fn perform<E: Executor>(
    executor: &E,
    (index, work): (u64, Work),
    epoch: std::time::Instant,
    scheduled: std::time::Instant,
) -> Vec<RequestRecord> {
    let mut records = perform_work(executor, work, epoch, scheduled).await;
    for r in &mut records {
        r.index = Some(index);
    }
    records
}

async fn perform_work<E: Executor>(
    executor: &E,
    work: Work,
    epoch: std::time::Instant,
    scheduled: std::time::Instant,
) -> Vec<RequestRecord> {
    match work {
        Work::Request(req) => vec![executor.execute(req, epoch, scheduled).await],
        Work::Session(s) => run_session(executor, s, epoch, scheduled).await,
    }
}

/// Drive a session as an agent does: each turn goes out with the whole
/// conversation so far; a turn that expects a call is judged, and its
/// tool's result goes back before the next turn. The session stops at a
/// failed request or a derailed turn (see `workload::session`).
async fn run_session<E: Executor>(
    executor: &E,
    s: SessionWork,
    epoch: std::time::Instant,
    scheduled: std::time::Instant,
) -> Vec<RequestRecord> {
    let mut records = Vec::with_capacity(s.scenario.turns.len());
    let mut talk = Conversation::new(&s.scenario);
    for (t, turn) in s.scenario.turns.iter().enumerate() {
        // The workload's output length caps every turn (a turn may ask for less).
        let output = turn
            .output_len
            .map(|n| (n as u64).min(s.output_tokens))
            .unwrap_or(s.output_tokens);
        let req = PreparedRequest {
            body: (s.body)(talk.ask(turn), output, turn.tool.is_some()),
            planned_input_tokens: None,
            output_tokens: output,
            predicted_cached_tokens: None,
            label: Some(s.scenario.name.clone()),
            capture_text: true,
            check: turn.tool_check().map(Arc::new),
        };
        let due = if t == 0 {
            scheduled
        } else {
            Instant::now().into_std()
        };
        let mut rec = executor.execute(req, epoch, due).await;
        rec.session = Some(s.session);
        rec.turn = Some(t as u32);
        let text = rec.text.take().unwrap_or_default();
        let calls = rec.tool_calls.take().unwrap_or_default();
        let go_on = rec.is_ok()
            && match &turn.tool {
                Some(step) if rec.answer_check == Some(true) => {
                    talk.called(&text, &calls, step);
                    true
                }
                // Derailed: the check says how.
                Some(_) => false,
                None if !calls.calls.is_empty() || !calls.defects.is_empty() => {
                    let names: Vec<&str> = calls
                        .calls
                        .iter()
                        .filter_map(|c| c.name.as_deref())
                        .collect();
                    rec.answer_check = Some(false);
                    rec.answer_reason = Some(format!(
                        "called `{}` where the scenario expects an answer in words",
                        names.join("`, `")
                    ));
                    false
                }
                None => {
                    talk.answered(&text);
                    true
                }
            };
        records.push(rec);
        if !go_on {
            // Later turns would be built on a missing or derailed answer.
            break;
        }
        if t + 1 < s.scenario.turns.len() {
            tokio::time::sleep(turn.think_time()).await;
        }
    }
    records
}

/// Sends a prepared request and records what happened.
pub trait Executor: Send + Sync + 'static {
    /// Execute `req`, scheduled at `scheduled`, with times relative to `epoch`.
    fn execute(
        &self,
        req: PreparedRequest,
        epoch: std::time::Instant,
        scheduled: std::time::Instant,
    ) -> impl Future<Output = RequestRecord> + Send;
}

/// The real executor: a streaming HTTP request with a time limit.
pub struct HttpExecutor {
    /// Where requests go.
    pub endpoint: Endpoint,
    /// Limit for one request, first byte to last.
    pub request_timeout: Duration,
}

impl Executor for HttpExecutor {
    async fn execute(
        &self,
        req: PreparedRequest,
        epoch: std::time::Instant,
        scheduled: std::time::Instant,
    ) -> RequestRecord {
        // Every answer's text is read, to judge it; a session's next turn
        // also needs it as written.
        let mut rec = self
            .endpoint
            .stream(req.body, epoch, scheduled, self.request_timeout, true)
            .await;
        let text = if req.capture_text {
            rec.text.clone()
        } else {
            rec.text.take()
        };
        if rec.is_ok() {
            let none = ToolCalls::default();
            let calls = rec.tool_calls.as_ref().unwrap_or(&none);
            if let Some(check) = &req.check {
                let verdict = check.judge_reply(text.as_deref().unwrap_or(""), calls);
                rec.answer_check = Some(verdict.is_ok());
                rec.answer_reason = verdict.err().map(String::from);
            }
            // A call is part of what was answered: two servers calling
            // different functions did not give the same answer.
            let text = match (text, calls.is_empty()) {
                (text, true) => text,
                (Some(t), false) if !t.is_empty() => Some(format!("{t}\n{}", calls.text())),
                (_, false) => Some(calls.text()),
            };
            rec.output = text.map(OutputText::of);
        }
        rec.planned_input_tokens = req.planned_input_tokens;
        rec.predicted_cached_tokens = req.predicted_cached_tokens;
        rec.requested_output_tokens = Some(req.output_tokens);
        rec.label = req.label;
        rec
    }
}

/// When a level stops dispatching new requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopCondition {
    /// Measured requests to send.
    pub max_requests: Option<u64>,
    /// Wall time after which no new request is dispatched.
    pub max_duration: Option<Duration>,
}

impl StopCondition {
    /// Reject unbounded levels: every load loop must end on its own.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_requests.is_none() && self.max_duration.is_none() {
            return Err("a level needs a request count or a duration (or both)".into());
        }
        if self.max_requests == Some(0) {
            return Err("the request count must be at least 1".into());
        }
        Ok(())
    }
}

/// What a level produced.
#[derive(Debug, Clone)]
pub struct LevelRun {
    /// Measured requests, ordered by send time.
    pub records: Vec<RequestRecord>,
    /// Wall time from the first measured dispatch to the last completion, s.
    pub duration_s: f64,
    /// Warm-up requests sent (excluded from `records`).
    pub warmup_sent: u64,
    /// Warm-up requests that failed.
    pub warmup_failed: u64,
    /// Whether the level was cut short by cancellation.
    pub cancelled: bool,
}

/// Everything a level needs besides its executor and source.
#[derive(Debug, Clone, Copy)]
pub struct LevelPlan {
    /// Closed or open loop.
    pub shape: LoadShape,
    /// When to stop dispatching.
    pub stop: StopCondition,
    /// Warm-up requests before measuring.
    pub warmup: u64,
    /// Seed for the arrival process.
    pub seed: u64,
    /// The first unit of work to send: above 0 when a replay resumes after
    /// the units an interrupted run finished (no warm-up then).
    pub first_index: u64,
}

/// Where finished requests are written as they finish, if anywhere.
pub type SharedJournal = Option<Arc<Mutex<super::journal::Journal>>>;

type SharedSource = Arc<Mutex<Box<dyn RequestSource>>>;

fn take_work(source: &SharedSource, index: u64) -> Option<Work> {
    source.lock().ok()?.next_work(index)
}

/// Run one level: warm-up, then the measured requests.
pub async fn run_level<E: Executor>(
    plan: LevelPlan,
    executor: Arc<E>,
    source: Box<dyn RequestSource>,
    (live, journal): (Arc<LiveView>, SharedJournal),
    cancel: CancellationToken,
) -> Result<LevelRun, String> {
    plan.stop.validate()?;
    let source: SharedSource = Arc::new(Mutex::new(source));
    let mut next_index = plan.first_index;
    let (mut warmup_sent, mut warmup_failed) = (0, 0);
    if plan.warmup > 0 && plan.first_index == 0 {
        let width = match plan.shape {
            LoadShape::Concurrency { value } => value,
            LoadShape::Rate {
                max_concurrency, ..
            }
            | LoadShape::Replay {
                max_concurrency, ..
            } => max_concurrency.unwrap_or(u32::MAX),
        }
        .max(1)
        .min(u32::try_from(plan.warmup).unwrap_or(u32::MAX));
        let warm = closed_loop(
            width,
            StopCondition {
                max_requests: Some(plan.warmup),
                max_duration: None,
            },
            0,
            executor.clone(),
            source.clone(),
            None,
            cancel.clone(),
        )
        .await;
        warmup_sent = warm.len() as u64;
        warmup_failed = warm.iter().filter(|r| !r.is_ok()).count() as u64;
        next_index = plan.warmup;
    }
    let epoch = Instant::now();
    let mut records = match plan.shape {
        LoadShape::Concurrency { value } => {
            if value == 0 {
                return Err("concurrency must be at least 1".into());
            }
            closed_loop(
                value,
                plan.stop,
                next_index,
                executor,
                source,
                Some(live),
                cancel.clone(),
            )
            .await
        }
        LoadShape::Rate {
            max_concurrency, ..
        }
        | LoadShape::Replay {
            max_concurrency, ..
        } => {
            let offsets = arrivals(plan, next_index, &source)?;
            open_loop(
                offsets,
                max_concurrency,
                plan.stop,
                next_index,
                executor,
                source,
                (live, journal),
                cancel.clone(),
            )
            .await
        }
    };
    let duration_s = epoch.elapsed().as_secs_f64();
    records.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
    Ok(LevelRun {
        records,
        duration_s,
        warmup_sent,
        warmup_failed,
        cancelled: cancel.is_cancelled(),
    })
}

/// When an open-loop level's requests are due, from its start: drawn from
/// the rate's arrival process, or a trace's own schedule from the first
/// unit after the warm-up.
fn arrivals(
    plan: LevelPlan,
    first: u64,
    source: &SharedSource,
) -> Result<Box<dyn Iterator<Item = Duration> + Send>, String> {
    match plan.shape {
        LoadShape::Rate {
            value,
            arrival,
            burstiness,
            ..
        } => Ok(Box::new(ArrivalClock::new(
            value, arrival, burstiness, plan.seed,
        )?)),
        LoadShape::Replay { .. } => {
            let schedule = source
                .lock()
                .ok()
                .and_then(|s| s.schedule())
                .ok_or("a trace replay needs a trace's requests")?;
            let start = schedule.get(first as usize).copied().unwrap_or_default();
            let offsets: Vec<Duration> = schedule
                .iter()
                .skip(first as usize)
                .map(|d| d.saturating_sub(start))
                .collect();
            Ok(Box::new(offsets.into_iter()))
        }
        LoadShape::Concurrency { .. } => Err("a closed loop has no arrivals".into()),
    }
}

#[allow(clippy::too_many_arguments)]
async fn closed_loop<E: Executor>(
    users: u32,
    stop: StopCondition,
    first_index: u64,
    executor: Arc<E>,
    source: SharedSource,
    live: Option<Arc<LiveView>>,
    cancel: CancellationToken,
) -> Vec<RequestRecord> {
    let epoch = Instant::now();
    if let Some(l) = &live {
        l.start(epoch.into_std());
    }
    // A duration too long to add to the clock is no bound at all.
    let deadline = stop.max_duration.and_then(|d| epoch.checked_add(d));
    let limit = stop
        .max_requests
        .map(|n| first_index.saturating_add(n))
        .unwrap_or(u64::MAX);
    // A user with nothing left to send would only cost memory (a billion
    // users for two requests is a billion tasks).
    let users = stop
        .max_requests
        .map_or(u64::from(users), |n| n.min(u64::from(users))) as u32;
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(first_index));
    let mut workers = JoinSet::new();
    for _ in 0..users {
        let (executor, source, live, cancel, counter) = (
            executor.clone(),
            source.clone(),
            live.clone(),
            cancel.clone(),
            counter.clone(),
        );
        workers.spawn(async move {
            let mut mine = Vec::new();
            loop {
                if cancel.is_cancelled() || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let idx = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if idx >= limit {
                    break;
                }
                let Some(work) = take_work(&source, idx) else {
                    break;
                };
                let scheduled = Instant::now();
                if let Some(l) = &live {
                    l.sent_one();
                }
                let recs = tokio::select! {
                    r = perform(executor.as_ref(), (idx, work), epoch.into_std(), scheduled.into_std()) => r,
                    _ = cancel.cancelled() => break,
                };
                if let Some(l) = &live {
                    for rec in &recs {
                        l.record(rec.is_ok(), rec.ttft_ms, rec.output_tokens.unwrap_or(0));
                    }
                    l.unit_done();
                }
                mine.extend(recs);
            }
            mine
        });
    }
    let mut all = Vec::new();
    while let Some(res) = workers.join_next().await {
        if let Ok(mut v) = res {
            all.append(&mut v);
        }
    }
    all
}

#[allow(clippy::too_many_arguments)]
async fn open_loop<E: Executor>(
    clock: impl Iterator<Item = Duration>,
    max_concurrency: Option<u32>,
    stop: StopCondition,
    first_index: u64,
    executor: Arc<E>,
    source: SharedSource,
    (live, journal): (Arc<LiveView>, SharedJournal),
    cancel: CancellationToken,
) -> Vec<RequestRecord> {
    let epoch = Instant::now();
    live.start(epoch.into_std());
    let deadline = stop.max_duration.and_then(|d| epoch.checked_add(d));
    let limit = stop.max_requests.unwrap_or(u64::MAX);
    let slots = max_concurrency.map(|n| Arc::new(tokio::sync::Semaphore::new(n.max(1) as usize)));
    let mut tasks = JoinSet::new();
    let mut all = Vec::new();
    for (n, offset) in clock.enumerate() {
        let n = n as u64;
        if n >= limit {
            break;
        }
        // An arrival past the clock's range never comes: the level ends.
        let Some(scheduled) = epoch.checked_add(offset) else {
            break;
        };
        if deadline.is_some_and(|d| scheduled >= d) {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(scheduled) => {}
            _ = cancel.cancelled() => break,
        }
        // Reap finished requests so memory stays bounded on long levels.
        while let Some(done) = tasks.try_join_next() {
            if let Ok(recs) = done {
                all.extend(recs);
            }
        }
        let permit = match &slots {
            Some(s) => tokio::select! {
                p = s.clone().acquire_owned() => p.ok(),
                _ = cancel.cancelled() => break,
            },
            None => None,
        };
        let index = first_index.saturating_add(n);
        let Some(work) = take_work(&source, index) else {
            break;
        };
        let (executor, live, journal) = (executor.clone(), live.clone(), journal.clone());
        live.sent_one();
        tasks.spawn(async move {
            let recs = perform(
                executor.as_ref(),
                (index, work),
                epoch.into_std(),
                scheduled.into_std(),
            )
            .await;
            drop(permit);
            for rec in &recs {
                live.record(rec.is_ok(), rec.ttft_ms, rec.output_tokens.unwrap_or(0));
            }
            live.unit_done();
            if let Some(j) = &journal {
                if let Ok(mut j) = j.lock() {
                    j.append(&recs);
                }
            }
            recs
        });
    }
    loop {
        tokio::select! {
            r = tasks.join_next() => match r {
                Some(Ok(recs)) => all.extend(recs),
                Some(Err(_)) => {}
                None => break,
            },
            _ = cancel.cancelled() => {
                tasks.abort_all();
                break;
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::record::Outcome;
    use crate::load::schedule::Arrival;

    /// Answers every request after a fixed virtual delay.
    struct FixedDelay(Duration);

    impl Executor for FixedDelay {
        async fn execute(
            &self,
            req: PreparedRequest,
            epoch: std::time::Instant,
            scheduled: std::time::Instant,
        ) -> RequestRecord {
            let sent = Instant::now().into_std();
            let ms = |a: std::time::Instant, b: std::time::Instant| {
                b.saturating_duration_since(a).as_secs_f64() * 1000.0
            };
            let mut r = RequestRecord::new(ms(epoch, scheduled), ms(epoch, sent));
            tokio::time::sleep(self.0).await;
            r.push_chunk(self.0.as_secs_f64() * 1000.0, 1);
            r.output_tokens = Some(req.output_tokens);
            r.finish(Outcome::Ok, self.0.as_secs_f64() * 1000.0);
            r
        }
    }

    struct Counting;
    impl RequestSource for Counting {
        fn next_work(&mut self, index: u64) -> Option<Work> {
            Some(Work::Request(PreparedRequest {
                body: Bytes::new(),
                planned_input_tokens: None,
                output_tokens: index,
                predicted_cached_tokens: None,
                label: None,
                capture_text: false,
                check: None,
            }))
        }
    }

    async fn level(shape: LoadShape, stop: StopCondition, warmup: u64) -> LevelRun {
        run_level(
            LevelPlan {
                shape,
                stop,
                warmup,
                seed: 1,
                first_index: 0,
            },
            Arc::new(FixedDelay(Duration::from_millis(100))),
            Box::new(Counting),
            (Arc::new(LiveView::default()), None),
            CancellationToken::new(),
        )
        .await
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn closed_loop_keeps_exactly_n_requests_in_flight() {
        let stop = StopCondition {
            max_requests: Some(20),
            max_duration: None,
        };
        let run = level(LoadShape::Concurrency { value: 4 }, stop, 3).await;
        assert_eq!(run.records.len(), 20);
        assert_eq!(run.warmup_sent, 3);
        // 20 requests, 4 at a time, 100 ms each = 5 waves = 500 ms.
        assert!((run.duration_s - 0.5).abs() < 0.01, "{}", run.duration_s);
        let firsts = run.records.iter().filter(|r| r.sent_ms < 1.0).count();
        assert_eq!(firsts, 4);
        // Warm-up requests are excluded: measured indices start after them.
        let mut outs: Vec<u64> = run
            .records
            .iter()
            .map(|r| r.requested_or_output())
            .collect();
        outs.sort();
        assert_eq!(outs.first(), Some(&3));
    }

    #[tokio::test(start_paused = true)]
    async fn open_loop_sends_on_schedule_regardless_of_completions() {
        let shape = LoadShape::Rate {
            value: 10.0,
            arrival: Arrival::Constant,
            burstiness: 1.0,
            max_concurrency: None,
        };
        let stop = StopCondition {
            max_requests: Some(10),
            max_duration: None,
        };
        let run = level(shape, stop, 0).await;
        assert_eq!(run.records.len(), 10);
        for (i, r) in run.records.iter().enumerate() {
            assert!((r.scheduled_ms - 100.0 * i as f64).abs() < 1e-6);
            assert!(r.dispatch_lag_ms() < 1e-6);
        }
        // Last arrival at 900 ms plus 100 ms of service.
        assert!((run.duration_s - 1.0).abs() < 0.01);
    }

    #[tokio::test(start_paused = true)]
    async fn capped_open_loop_reports_dispatch_lag() {
        let shape = LoadShape::Rate {
            value: 100.0,
            arrival: Arrival::Constant,
            burstiness: 1.0,
            max_concurrency: Some(1),
        };
        let stop = StopCondition {
            max_requests: Some(5),
            max_duration: None,
        };
        let run = level(shape, stop, 0).await;
        // One slot and 100 ms service: request i leaves at 100*i ms but was due at 10*i ms.
        let lags: Vec<f64> = run.records.iter().map(|r| r.dispatch_lag_ms()).collect();
        for (i, lag) in lags.iter().enumerate() {
            assert!((lag - 90.0 * i as f64).abs() < 1.0, "{lags:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn duration_stops_dispatch_and_unbounded_levels_are_refused() {
        let stop = StopCondition {
            max_requests: None,
            max_duration: Some(Duration::from_millis(350)),
        };
        let run = level(LoadShape::Concurrency { value: 2 }, stop, 0).await;
        // Dispatches at 0, 100, 200, 300 ms per user; none at 400.
        assert_eq!(run.records.len(), 8);
        let err = run_level(
            LevelPlan {
                shape: LoadShape::Concurrency { value: 1 },
                stop: StopCondition {
                    max_requests: None,
                    max_duration: None,
                },
                warmup: 0,
                seed: 0,
                first_index: 0,
            },
            Arc::new(FixedDelay(Duration::from_millis(1))),
            Box::new(Counting),
            (Arc::new(LiveView::default()), None),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(err.contains("request count or a duration"));
    }

    #[tokio::test(start_paused = true)]
    async fn tiny_rates_and_endless_durations_end_without_panicking() {
        for rate in [1e-300, 5e-20, 1e-19] {
            for max_duration in [Some(Duration::from_secs(2)), None, Some(Duration::MAX)] {
                let shape = LoadShape::Rate {
                    value: rate,
                    arrival: Arrival::Constant,
                    burstiness: 1.0,
                    max_concurrency: None,
                };
                let stop = StopCondition {
                    max_requests: Some(2),
                    max_duration,
                };
                let run = level(shape, stop, 0).await;
                // The first arrival is at zero; the second lies past the clock's range.
                assert_eq!(run.records.len(), 1, "rate {rate} {max_duration:?}");
            }
        }
        let stop = StopCondition {
            max_requests: Some(3),
            max_duration: Some(Duration::MAX),
        };
        let run = level(LoadShape::Concurrency { value: 2 }, stop, 0).await;
        assert_eq!(run.records.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn workers_never_outnumber_the_requests() {
        // One task per user would be four billion tasks for two requests.
        let stop = StopCondition {
            max_requests: Some(2),
            max_duration: None,
        };
        let run = level(LoadShape::Concurrency { value: u32::MAX }, stop, 0).await;
        assert_eq!(run.records.len(), 2);
        // Warm-up is capped the same way.
        let run = level(LoadShape::Concurrency { value: u32::MAX }, stop, 3).await;
        assert_eq!((run.records.len(), run.warmup_sent), (2, 3));
    }

    impl RequestRecord {
        fn requested_or_output(&self) -> u64 {
            self.output_tokens.unwrap_or(0)
        }
    }
}
