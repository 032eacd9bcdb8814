//! Request sources built from workload settings, shared by `bench` and
//! campaign runs: exact-length synthetic prompts, built-in prompt kinds,
//! datasets, and multi-turn scenarios.
//!
//! Prompt lengths are counted with the best tokenizer available — the
//! model's `tokenizer.json`, else the server's own tokenize endpoint, else a
//! declared approximation — and the tokens the server adds around a prompt
//! (BOS, chat template) are measured once with a one-token request and
//! subtracted, so `input_len` is what the server reports as `prompt_tokens`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::driver::{PreparedRequest, RequestSource, SessionWork, Work};
use super::source::{Prompt, PromptFn, PromptFnSource, SyntheticSource};
use crate::client::openai::{
    build_body, build_structured_body, Api, ChatMessage, PromptBody, ToolChoice,
};
use crate::client::Endpoint;
use crate::workload::answer_check::{kind_check, AnswerCheck, Expect};
use crate::workload::dataset::{self, DatasetFormat, LengthFilter};
use crate::workload::exact_len::BlockCache;
use crate::workload::server_tokenizer::ServerTokenizer;
use crate::workload::structured::{builtin_tools, Structured};
use crate::workload::trace::{self, ReplaySettings, TraceFormat};
use crate::workload::{
    ApproxCounter, ExactPromptBuilder, ExactPromptSpec, HfTokenizer, PromptKind, PromptSampler,
    PromptSelection, Scenario, TokenCounter,
};

/// Shortest synthetic prompt the exact builder makes; shorter ones use random words.
pub const MIN_EXACT_TOKENS: u64 = 64;

/// Where prompts come from.
#[derive(Debug, Clone)]
pub enum Prompts {
    /// Filler text of exactly `input_len` tokens, unique per request after `shared_prefix` tokens.
    Synthetic {
        /// Prompt tokens as the server will count them.
        input_len: u64,
        /// Leading tokens shared by every request.
        shared_prefix: u64,
    },
    /// Built-in prompt kinds.
    Kinds(PromptSelection),
    /// A ShareGPT or JSONL dataset.
    Dataset {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: DatasetFormat,
        /// Length filters.
        filter: LengthFilter,
    },
    /// The campaign's own checkable prompts (a checks file, read when the
    /// campaign loaded), in a seeded order.
    Checks {
        /// The file, for messages.
        path: PathBuf,
        /// Its checks.
        checks: Arc<Vec<crate::workload::answer_check::UserCheck>>,
    },
    /// Multi-turn sessions of a scenario (chat API).
    Scenario(Arc<Scenario>),
    /// A production trace replayed on its own schedule, with its own
    /// lengths and prefix blocks (the load shape is `Replay`).
    Trace(Arc<TraceSpec>),
}

impl Prompts {
    /// Whether its requests carry tools or a response format: their answers
    /// end where their grammar or call does, so their length is never forced.
    pub fn is_structured(&self) -> bool {
        match self {
            Prompts::Kinds(sel) => sel.kinds().iter().any(|k| k.is_structured()),
            Prompts::Scenario(sc) => sc.tools.is_some(),
            Prompts::Checks { checks, .. } => checks.iter().any(|c| c.structured.is_some()),
            _ => false,
        }
    }

    /// Whether some of its requests offer tools (what `tool_choice` applies to).
    pub fn offers_tools(&self) -> bool {
        match self {
            Prompts::Kinds(sel) => sel.kinds().contains(&PromptKind::ToolCall),
            Prompts::Scenario(sc) => sc.tools.is_some(),
            Prompts::Checks { checks, .. } => checks
                .iter()
                .any(|c| c.structured.as_ref().is_some_and(|s| s.tools.is_some())),
            _ => false,
        }
    }
}

/// A trace and how to replay it.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSpec {
    /// The trace file.
    pub path: PathBuf,
    /// Its format, when declared.
    pub format: Option<TraceFormat>,
    /// Window, scaling and clamp.
    pub settings: ReplaySettings,
}

/// Everything needed to build a source.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// API flavour.
    pub api: Api,
    /// Served model name.
    pub model: String,
    /// The first unit of work to build (a resumed replay skips the units
    /// an interrupted run finished).
    pub first_unit: u64,
    /// Output tokens per request (per turn for scenarios, unless the turn sets its own).
    pub output_len: u64,
    /// Force exact output lengths.
    pub ignore_eos: bool,
    /// `tool_choice` of the requests that offer tools.
    pub tool_choice: Option<ToolChoice>,
    /// Seed for prompt choice and order.
    pub seed: u64,
    /// The prompts.
    pub prompts: Prompts,
    /// A tokenizer.json for exact counts.
    pub tokenizer: Option<PathBuf>,
    /// Requests that will be drawn, when known (built ahead of time).
    pub count: Option<u64>,
    /// Limit for the one-token request that measures the server's prompt overhead.
    pub probe_timeout: Duration,
}

/// How the prompts were counted and corrected.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SourceInfo {
    /// Which tokenizer counted prompt lengths.
    pub counter: String,
    /// Whether lengths are exact for the model.
    pub exact: bool,
    /// Tokens the server adds around a prompt (BOS, chat template), measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_overhead: Option<i64>,
    /// What the dataset loader kept and dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// Set when a request built while the level ran (a replay's) could not
    /// be built: the level stopped short of what was asked.
    #[serde(skip)]
    pub build_error: Option<Arc<std::sync::OnceLock<String>>>,
}

/// Pick the token counter: tokenizer.json, else the server's tokenize endpoint, else an approximation.
pub async fn counter_for(
    tokenizer: Option<&std::path::Path>,
    endpoint: &Endpoint,
) -> Result<(Arc<dyn TokenCounter>, String), String> {
    if let Some(p) = tokenizer {
        let t = HfTokenizer::from_file(p).map_err(|e| e.to_string())?;
        return Ok((Arc::new(t), format!("tokenizer {}", p.display())));
    }
    let base = endpoint.base_url().to_string();
    let auth = endpoint
        .authorization()
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let probe = tokio::task::spawn_blocking(move || {
        let t = ServerTokenizer::new(&base)?.with_authorization(auth);
        t.count("hello world").map(|_| t)
    })
    .await
    .map_err(|e| e.to_string())?;
    match probe {
        Ok(t) => Ok((
            Arc::new(t),
            format!("server {}/tokenize", endpoint.base_url()),
        )),
        Err(_) => Ok((
            Arc::new(ApproxCounter),
            "approximate (about 4 bytes per token)".into(),
        )),
    }
}

/// Builders already made, by counter: making one counts every filler line
/// with the counter, which through a server's tokenize endpoint takes a
/// while, so each server pays it once rather than once per cell.
static BUILDERS: std::sync::OnceLock<
    std::sync::Mutex<std::collections::HashMap<String, Arc<ExactPromptBuilder>>>,
> = std::sync::OnceLock::new();

async fn cached_builder(
    key: &str,
    counter: Arc<dyn TokenCounter>,
) -> Result<Arc<ExactPromptBuilder>, String> {
    let cache = BUILDERS.get_or_init(Default::default);
    if let Some(b) = cache.lock().ok().and_then(|m| m.get(key).cloned()) {
        return Ok(b);
    }
    let built = tokio::task::spawn_blocking(move || ExactPromptBuilder::new(counter))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let built = Arc::new(built);
    if let Ok(mut m) = cache.lock() {
        m.insert(key.to_string(), built.clone());
    }
    Ok(built)
}

/// Measure the tokens a server adds around a prompt: send `probe` (of
/// `probe_tokens` counted tokens) asking for one output token and compare
/// with the reported `prompt_tokens`.
pub async fn template_overhead(
    endpoint: &Endpoint,
    model: &str,
    probe: String,
    probe_tokens: u64,
    timeout: Duration,
) -> Option<i64> {
    let body = build_body(endpoint.api(), model, PromptBody::Text(probe), 1, false);
    let now = std::time::Instant::now();
    let rec = endpoint
        .stream(Bytes::from(body), now, now, timeout, false)
        .await;
    rec.input_tokens.map(|p| p as i64 - probe_tokens as i64)
}

fn to_wire(messages: &[crate::workload::ChatMessage]) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| ChatMessage {
            role: m.role.to_string(),
            content: m.content.clone(),
            tool_calls: (!m.tool_calls.is_empty()).then(|| {
                m.tool_calls
                    .iter()
                    .map(|c| {
                        serde_json::json!({
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        })
                    })
                    .collect()
            }),
            tool_call_id: m.tool_call_id.clone(),
        })
        .collect()
}

struct SessionSource {
    scenario: Arc<Scenario>,
    output_tokens: u64,
    body: super::driver::SessionBodyFn,
}

impl RequestSource for SessionSource {
    fn next_work(&mut self, index: u64) -> Option<Work> {
        Some(Work::Session(SessionWork {
            session: index,
            scenario: self.scenario.clone(),
            output_tokens: self.output_tokens,
            body: self.body.clone(),
        }))
    }
}

struct DatasetSource {
    requests: Vec<PreparedRequest>,
}

impl RequestSource for DatasetSource {
    fn next_work(&mut self, index: u64) -> Option<Work> {
        if self.requests.is_empty() {
            return None;
        }
        // Cycle through the sample when a level asks for more requests than it holds.
        let r = &self.requests[(index as usize) % self.requests.len()];
        Some(Work::Request(r.clone()))
    }
}

/// What a prompt of `kind` sends beside its text: the built-in tools, or
/// its check's schema as the response format, or JSON mode.
fn structured_of(
    kind: PromptKind,
    check: Option<&AnswerCheck>,
    tool_choice: Option<ToolChoice>,
) -> Option<Arc<Structured>> {
    match (kind, check.map(|c| &c.expect)) {
        (PromptKind::ToolCall, _) => Some(Arc::new(
            Structured::tools(builtin_tools()).with_tool_choice(tool_choice),
        )),
        (PromptKind::JsonSchema, Some(Expect::Schema(s))) => {
            Some(Arc::new(Structured::schema("extraction", &s.schema)))
        }
        (PromptKind::JsonObject, _) => Some(Arc::new(Structured::json_object())),
        _ => None,
    }
}

/// Build the request source for `spec` against `endpoint`.
pub async fn build_source(
    spec: &SourceSpec,
    endpoint: &Endpoint,
) -> Result<(Box<dyn RequestSource>, SourceInfo), String> {
    let mut info = SourceInfo::default();
    match &spec.prompts {
        Prompts::Scenario(scenario) => session_source(spec, scenario, info),
        Prompts::Kinds(selection) => kinds_source(spec, selection, info).await,
        Prompts::Checks { checks, path } => checks_source(spec, checks, path, info).await,
        Prompts::Trace(t) => {
            let src = replay_source(t, spec, endpoint, &mut info).await?;
            Ok((Box::new(src), info))
        }
        Prompts::Dataset {
            path,
            format,
            filter,
        } => dataset_source(spec, endpoint, (path, *format, *filter), info).await,
        Prompts::Synthetic {
            input_len,
            shared_prefix,
        } => {
            if *input_len < MIN_EXACT_TOKENS {
                info.counter = "random words (too short for an exact prompt)".into();
                return Ok((
                    Box::new(SyntheticSource {
                        api: spec.api,
                        model: spec.model.clone(),
                        input_words: *input_len,
                        output_tokens: spec.output_len,
                        ignore_eos: spec.ignore_eos,
                        seed: spec.seed,
                    }),
                    info,
                ));
            }
            let (counter, name) = counter_for(spec.tokenizer.as_deref(), endpoint).await?;
            info.exact = counter.exact();
            info.counter = name;
            let builder = cached_builder(&info.counter, counter.clone()).await?;
            let correction = measure_overhead(&builder, spec, endpoint, &mut info).await?;
            let content = input_len.saturating_sub(correction).max(MIN_EXACT_TOKENS);
            let exact_spec = ExactPromptSpec {
                tokens: content as usize,
                shared_prefix_tokens: (*shared_prefix).min(content.saturating_sub(MIN_EXACT_TOKENS))
                    as usize,
                seed: spec.seed,
            };
            let planned = content + correction;
            let label = if info.exact {
                "synthetic"
            } else {
                "synthetic-approx"
            };
            let b = builder.clone();
            let prompt: PromptFn = Box::new(move |i| {
                let p = b.build(&exact_spec, i).map_err(|e| e.to_string())?;
                Ok(Prompt {
                    text: p.text,
                    planned: Some(planned),
                    label: Some(label.to_string()),
                    check: None,
                    structured: None,
                })
            });
            Ok((Box::new(prompt_source(spec, prompt).await?), info))
        }
    }
}

/// Multi-turn sessions of `scenario` (chat API), with its tools if any.
fn session_source(
    spec: &SourceSpec,
    scenario: &Arc<Scenario>,
    mut info: SourceInfo,
) -> Result<(Box<dyn RequestSource>, SourceInfo), String> {
    if spec.api != Api::Chat {
        return Err("multi-turn scenarios need the chat API (--api chat / api = \"chat\")".into());
    }
    let (model, ignore_eos) = (spec.model.clone(), spec.ignore_eos);
    // `required` forces a call, so it goes only with the turns that expect
    // one; the turns answered in words leave the choice to the model.
    let offer =
        |choice| (scenario.tools.clone()).map(|t| Structured::tools(t).with_tool_choice(choice));
    let words_choice = match spec.tool_choice {
        Some(ToolChoice::Required) => Some(ToolChoice::Auto),
        other => other,
    };
    let (on_calls, on_words) = (offer(spec.tool_choice), offer(words_choice));
    let body: super::driver::SessionBodyFn = Arc::new(move |messages, output, expects_call| {
        Bytes::from(build_structured_body(
            Api::Chat,
            &model,
            PromptBody::Messages(to_wire(messages)),
            output,
            ignore_eos,
            if expects_call { &on_calls } else { &on_words }.as_ref(),
        ))
    });
    info.counter = "server usage".into();
    info.exact = true;
    Ok((
        Box::new(SessionSource {
            scenario: scenario.clone(),
            output_tokens: spec.output_len,
            body,
        }),
        info,
    ))
}

/// Built-in prompt kinds in the seed's order, each with its check and
/// what a structured kind sends beside it.
async fn kinds_source(
    spec: &SourceSpec,
    selection: &PromptSelection,
    mut info: SourceInfo,
) -> Result<(Box<dyn RequestSource>, SourceInfo), String> {
    if spec.api != Api::Chat && selection.kinds().iter().any(|k| k.is_structured()) {
        return Err(format!(
                "prompt kinds {} send tools or a response format: they need the chat API (api = \"chat\")",
                crate::workload::prompts::structured_names()
            ));
    }
    let mut sampler = PromptSampler::new(selection, spec.seed);
    let tool_choice = spec.tool_choice;
    let prompt: PromptFn = Box::new(move |_| {
        let (kind, text) = sampler.next_prompt();
        let check = kind_check(kind, text);
        Ok(Prompt {
            text: text.to_string(),
            planned: None,
            label: Some(kind.name().to_string()),
            check: check.map(|c| Arc::new(c.clone())),
            structured: structured_of(kind, check, tool_choice),
        })
    });
    info.counter = "none (natural prompt lengths)".into();
    Ok((Box::new(prompt_source(spec, prompt).await?), info))
}

/// A checks file's prompts, every one once per pass in the seed's order.
async fn checks_source(
    spec: &SourceSpec,
    checks: &Arc<Vec<crate::workload::answer_check::UserCheck>>,
    path: &std::path::Path,
    mut info: SourceInfo,
) -> Result<(Box<dyn RequestSource>, SourceInfo), String> {
    if spec.api != Api::Chat && checks.iter().any(|c| c.structured.is_some()) {
        return Err(format!(
                "{}: `tool` and `schema` checks send tools or a response format: they need the chat API (api = \"chat\")",
                path.display()
            ));
    }
    let checks = checks.clone();
    // What each check sends beside its prompt, with the workload's tool choice.
    let structured: Vec<Option<Arc<Structured>>> = checks
        .iter()
        .map(|c| match (&c.structured, spec.tool_choice) {
            (Some(s), Some(_)) => Some(Arc::new(
                s.as_ref().clone().with_tool_choice(spec.tool_choice),
            )),
            (s, _) => s.clone(),
        })
        .collect();
    // Every check once per pass, in an order drawn from the seed.
    let mut order: Vec<usize> = (0..checks.len()).collect();
    let mut rng = crate::util::rng::seeded(spec.seed);
    rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut rng);
    let prompt: PromptFn = Box::new(move |i| {
        let at = order[(i % order.len() as u64) as usize];
        let c = &checks[at];
        Ok(Prompt {
            text: c.prompt.clone(),
            planned: None,
            label: Some(c.kind.clone()),
            check: Some(c.check.clone()),
            structured: structured[at].clone(),
        })
    });
    info.counter = "none (natural prompt lengths)".into();
    Ok((Box::new(prompt_source(spec, prompt).await?), info))
}

/// A dataset's sampled, length-filtered requests, cycled when a level
/// asks for more.
async fn dataset_source(
    spec: &SourceSpec,
    endpoint: &Endpoint,
    (path, format, filter): (&std::path::Path, DatasetFormat, LengthFilter),
    mut info: SourceInfo,
) -> Result<(Box<dyn RequestSource>, SourceInfo), String> {
    let (counter, name) = counter_for(spec.tokenizer.as_deref(), endpoint).await?;
    info.exact = counter.exact();
    info.counter = name;
    let (path, seed, limit) = (path.to_path_buf(), spec.seed, spec.count);
    let sample = tokio::task::spawn_blocking(move || {
        dataset::load(
            &path,
            format,
            counter.as_ref(),
            &filter,
            limit.map(|n| n as usize),
            seed,
        )
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    info.dataset = Some(sample.report.to_string());
    if sample.requests.is_empty() {
        return Err(format!("the dataset yields no request: {}", sample.report));
    }
    let requests = sample
        .requests
        .into_iter()
        .map(|r| {
            let out = if spec.ignore_eos {
                spec.output_len
            } else {
                r.output_len.map(|n| n as u64).unwrap_or(spec.output_len)
            };
            PreparedRequest {
                body: Bytes::from(build_body(
                    spec.api,
                    &spec.model,
                    PromptBody::Text(r.prompt),
                    out,
                    spec.ignore_eos,
                )),
                planned_input_tokens: Some(r.prompt_tokens as u64),
                output_tokens: out,
                predicted_cached_tokens: None,
                label: Some(format!("dataset:{}", r.source)),
                capture_text: false,
                check: None,
            }
        })
        .collect();
    Ok((Box::new(DatasetSource { requests }), info))
}

/// The tokens the server adds around a prompt (BOS, chat template),
/// measured with a probe of known length and noted in `info`; what to take
/// off a prompt's length so the server counts the length asked.
async fn measure_overhead(
    builder: &Arc<ExactPromptBuilder>,
    spec: &SourceSpec,
    endpoint: &Endpoint,
    info: &mut SourceInfo,
) -> Result<u64, String> {
    let probe_spec = ExactPromptSpec {
        tokens: MIN_EXACT_TOKENS as usize,
        shared_prefix_tokens: 0,
        seed: spec.seed ^ 0xC0FFEE,
    };
    let b = builder.clone();
    let probe = tokio::task::spawn_blocking(move || b.build(&probe_spec, u64::MAX))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let overhead = template_overhead(
        endpoint,
        &spec.model,
        probe.text,
        MIN_EXACT_TOKENS,
        spec.probe_timeout,
    )
    .await;
    info.template_overhead = overhead;
    Ok(overhead.unwrap_or(0).max(0) as u64)
}

/// Requests of a replay built ahead of their send time, at most: prompts
/// of a long-context trace are large, so they are built as the replay
/// goes, by a thread of their own, this many ahead.
pub const REPLAY_AHEAD: usize = 512;

/// A trace's requests on the trace's schedule.
struct ReplaySource {
    schedule: Arc<[Duration]>,
    built: std::sync::mpsc::Receiver<(u64, Result<PreparedRequest, String>)>,
    /// Units built before they were asked for: concurrent users of a closed
    /// loop may ask a little out of order.
    early: std::collections::HashMap<u64, PreparedRequest>,
    error: Arc<std::sync::OnceLock<String>>,
}

impl RequestSource for ReplaySource {
    fn next_work(&mut self, index: u64) -> Option<Work> {
        // Units are built in order; one that failed to build ends the
        // replay (its error is what the level reports).
        loop {
            if let Some(r) = self.early.remove(&index) {
                return Some(Work::Request(r));
            }
            match self.built.recv().ok()? {
                (i, Ok(r)) if i == index => return Some(Work::Request(r)),
                (i, Ok(r)) => {
                    self.early.insert(i, r);
                }
                (_, Err(e)) => {
                    let _ = self.error.set(e);
                    return None;
                }
            }
        }
    }

    fn schedule(&self) -> Option<Arc<[Duration]>> {
        Some(self.schedule.clone())
    }
}

/// The replay of `t` against `endpoint`: prompts of exactly each request's
/// length as the server counts it, made of the trace's blocks, and outputs
/// of exactly its output length.
async fn replay_source(
    t: &TraceSpec,
    spec: &SourceSpec,
    endpoint: &Endpoint,
    info: &mut SourceInfo,
) -> Result<ReplaySource, String> {
    let (path, format, settings) = (t.path.clone(), t.format, t.settings.clone());
    let replay = tokio::task::spawn_blocking(move || trace::load(&path, format, &settings))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if replay.requests.is_empty() {
        return Err(format!(
            "the trace's window holds no request ({} rows read)",
            replay.stats.rows_read
        ));
    }
    let (counter, name) = counter_for(spec.tokenizer.as_deref(), endpoint).await?;
    info.exact = counter.exact();
    info.counter = name;
    let builder = cached_builder(&info.counter, counter.clone()).await?;
    let correction = measure_overhead(&builder, spec, endpoint, info).await?;
    let mut changes = replay.stats.changes();
    changes.insert(
        0,
        format!(
            "{} requests over {:.1} s ({:.1} s of trace time), blocks of {} tokens",
            replay.stats.requests,
            replay.stats.replay_span_s,
            replay.stats.trace_span_s,
            replay.block
        ),
    );
    let short = replay
        .requests
        .iter()
        .filter(|r| r.input_len <= correction)
        .count();
    if short > 0 {
        changes.push(format!(
            "{short} prompts no longer than the {correction} tokens the server adds around a prompt, sent {} tokens long",
            correction + 1
        ));
    }
    info.dataset = Some(changes.join("; "));
    // What an infinite cache would serve each request, as the prompts are
    // built: the server's own additions first, then the blocks.
    let predicted =
        crate::workload::prefix_reuse::reused_tokens(&replay.requests, replay.block, correction, 1);
    let schedule: Arc<[Duration]> = replay
        .requests
        .iter()
        .map(|r| Duration::from_secs_f64(r.offset_ms.max(0.0) / 1000.0))
        .collect();
    let (tx, rx) = std::sync::mpsc::sync_channel(REPLAY_AHEAD);
    let (api, model, block, salt) = (
        spec.api,
        spec.model.clone(),
        replay.block as usize,
        spec.seed,
    );
    let limit = spec.count.unwrap_or(u64::MAX);
    // Ready once the first requests (as many as may wait) are built, so the
    // replay does not start by waiting for them.
    let first = spec.first_unit;
    let head = (replay.requests.len() as u64)
        .min(limit)
        .saturating_sub(first)
        .min(REPLAY_AHEAD as u64)
        + first;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let build = move || {
        // Salted by the cell's seed: no block text of another cell (time
        // scale, repetition, search probe) is sent again on this launch.
        let mut cache = BlockCache::salted(salt);
        let first = first as usize;
        for (i, r) in replay
            .requests
            .iter()
            .enumerate()
            .take(limit as usize)
            .skip(first)
        {
            // The server's own additions come first; the trace's blocks
            // keep their size and the last one gives up the difference.
            let text_tokens = r.input_len.saturating_sub(correction).max(1) as usize;
            let built = builder
                .build_blocks(&r.hash_ids, block, text_tokens, r.line, &mut cache)
                .map(|p| PreparedRequest {
                    body: Bytes::from(build_body(
                        api,
                        &model,
                        PromptBody::Text(p.text),
                        r.output_len,
                        true,
                    )),
                    planned_input_tokens: Some(text_tokens as u64 + correction),
                    output_tokens: r.output_len,
                    predicted_cached_tokens: predicted.as_ref().map(|p| p[i]),
                    label: Some("trace".into()),
                    capture_text: false,
                    check: None,
                })
                .map_err(|e| format!("trace line {}: {e}", r.line));
            let failed = built.is_err();
            if tx.send((i as u64, built)).is_err() || failed {
                return;
            }
            if i as u64 + 1 == head {
                let _ = ready_tx.send(());
            }
        }
    };
    std::thread::Builder::new()
        .name("replay-prompts".into())
        .spawn(build)
        .map_err(|e| e.to_string())?;
    // A failed build drops the sender: ready too, the error comes with its unit.
    let _ = tokio::task::spawn_blocking(move || ready_rx.recv()).await;
    let error = Arc::new(std::sync::OnceLock::new());
    info.build_error = Some(error.clone());
    Ok(ReplaySource {
        schedule,
        built: rx,
        early: std::collections::HashMap::new(),
        error,
    })
}

/// Largest request count built ahead of a level; a larger one is built as it
/// is sent, so memory stays bounded.
const PREBUILD_MAX: u64 = 100_000;

/// A source of `prompt`s under `spec`'s API, model and output settings, with
/// its requests built ahead when their count is known and small enough. The
/// building runs off the async threads: exact prompts tokenize.
async fn prompt_source(spec: &SourceSpec, prompt: PromptFn) -> Result<PromptFnSource, String> {
    let mut src = PromptFnSource::new(
        spec.api,
        spec.model.clone(),
        spec.output_len,
        spec.ignore_eos,
        prompt,
    );
    if let Some(n) = spec.count.filter(|n| *n <= PREBUILD_MAX) {
        src = tokio::task::spawn_blocking(move || src.prebuild(n).map(|_| src))
            .await
            .map_err(|e| e.to_string())??;
    }
    Ok(src)
}

/// Warnings when the server counted prompts differently from the plan.
pub fn length_warnings(
    records: &[crate::client::record::RequestRecord],
    exact: bool,
) -> Vec<String> {
    if !exact {
        return Vec::new();
    }
    let off: Vec<(u64, u64)> = records
        .iter()
        .filter(|r| r.is_ok() && r.session.is_none())
        .filter_map(|r| Some((r.planned_input_tokens?, r.input_tokens?)))
        .filter(|(p, a)| p.abs_diff(*a) > 2)
        .collect();
    match off.first() {
        None => Vec::new(),
        Some((p, a)) => vec![format!(
            "{} requests' prompt lengths deviate by more than 2 tokens from the plan (e.g. planned {p}, server counted {a})",
            off.len()
        )],
    }
}
