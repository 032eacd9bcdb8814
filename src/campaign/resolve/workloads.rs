//! Workload points and SLO searches: each `[[workload]]` expanded over its
//! loads, lengths and repetitions, with its prompt source resolved.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::super::{CampaignError, OneOrMany, RawCampaign, Source};
use super::{base_dir, check_path_id, relative};
use crate::client::openai::{Api, ToolChoice};
use crate::load::schedule::{Arrival, LoadShape};
use crate::search::{Axis, SearchSpec};
use crate::util::units::{parse_duration, parse_slo, Slo};
use crate::workload::answer_check::UserCheck;
use crate::workload::session::Scenario;
use crate::workload::trace::{self, ReplaySettings, TraceFormat};
use crate::workload::PromptSelection;

/// Largest prompt or output length accepted, so a typo cannot allocate terabytes of prompt.
pub const MAX_TOKENS: u64 = 10_000_000;

/// Where a workload's prompts come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PromptSource {
    /// Filler text of exactly `input_len` tokens, unique per request.
    Synthetic,
    /// Built-in prompt kinds, sampled with the seed.
    PromptKinds {
        /// The kinds, validated (stored by name).
        kinds: Vec<crate::workload::PromptKind>,
    },
    /// A ShareGPT or JSONL dataset.
    Dataset {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: crate::workload::DatasetFormat,
        /// The first 16 hex digits of its SHA-256: an edited file is
        /// another cell (empty in cells stored before it was kept).
        #[serde(default)]
        digest: String,
    },
    /// The campaign's own checkable prompts, in a seeded order.
    Checks {
        /// The file.
        path: PathBuf,
        /// The first 16 hex digits of its SHA-256: another file is another cell.
        digest: String,
        /// Checks it holds.
        count: u64,
    },
    /// Multi-turn sessions; `num_requests` counts sessions.
    Scenario {
        /// Built-in name or file path.
        name: String,
        /// A scenario file's turns as read, digested (the first 16 hex
        /// digits of the SHA-256 of the parsed scenario): edited turns are
        /// another cell. None for a built-in (its turns change only with
        /// the method version).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digest: Option<String>,
    },
    /// A production trace replayed on its own schedule (the load is a
    /// `replay` at a time scale).
    Trace {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: TraceFormat,
        /// The first 16 hex digits of its SHA-256: another file is another cell.
        digest: String,
        /// Window, scaling and clamp (the time scale is the load's).
        settings: ReplaySettings,
        /// Requests in the window.
        requests: u64,
        /// Trace time the window spans, s.
        span_s: f64,
        /// Mean prompt tokens per request, after scaling.
        mean_input: f64,
        /// Mean output tokens per request, after scaling.
        mean_output: f64,
    },
}

impl PromptSource {
    /// Whether its requests carry tools or a response format (they never
    /// force their output length).
    pub fn is_structured(&self) -> bool {
        matches!(self, PromptSource::PromptKinds { kinds } if kinds.iter().any(|k| k.is_structured()))
    }
}

/// One workload point: a cell's worth of load against one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadPoint {
    /// Workload name.
    pub workload: String,
    /// API flavour.
    pub api: Api,
    /// Prompt source.
    pub source: PromptSource,
    /// Prompt tokens.
    pub input_len: u64,
    /// Output tokens.
    pub output_len: u64,
    /// Load level.
    pub load: LoadShape,
    /// Measured requests.
    pub num_requests: Option<u64>,
    /// Dispatch window, s.
    pub duration_s: Option<f64>,
    /// Warm-up requests.
    pub warmup: u64,
    /// Exact output lengths forced.
    pub ignore_eos: bool,
    /// `tool_choice` of requests that offer tools; left out when not set,
    /// so workloads without it keep their identities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Shared prompt prefix tokens.
    pub shared_prefix: u64,
    /// SLOs for goodput.
    pub slos: Vec<Slo>,
    /// Seed.
    pub seed: u64,
    /// Repetition index (0-based).
    pub repetition: u32,
}

impl WorkloadPoint {
    /// A readable, file-name-safe name unique within a server.
    pub fn cell_name(&self) -> String {
        let load = self.load.label();
        let input = match self.source {
            PromptSource::Synthetic => format!("in{}", self.input_len),
            PromptSource::PromptKinds { .. } => "kinds".to_string(),
            PromptSource::Dataset { .. } => "dataset".to_string(),
            PromptSource::Checks { .. } => "checks".to_string(),
            PromptSource::Scenario { .. } => "sessions".to_string(),
            PromptSource::Trace { .. } => "trace".to_string(),
        };
        // A trace's requests have their own output lengths.
        let mut name = match self.source {
            PromptSource::Trace { .. } => format!("{}-{input}-{load}", self.workload),
            _ => format!("{}-{input}-out{}-{load}", self.workload, self.output_len),
        };
        if self.repetition > 0 {
            name.push_str(&format!("-rep{}", self.repetition));
        }
        name.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// The same point at another repetition (its own seed).
    pub fn with_repetition(&self, repetition: u32) -> WorkloadPoint {
        let base = self
            .seed
            .wrapping_sub(u64::from(self.repetition).wrapping_mul(REPETITION_SEED_STRIDE));
        WorkloadPoint {
            seed: repetition_seed(base, repetition),
            repetition,
            ..self.clone()
        }
    }

    /// Total tokens one request occupies (prompt + output).
    pub fn request_tokens(&self) -> u64 {
        self.input_len + self.output_len
    }
}

/// An SLO search of one workload point: its probes are the point at the
/// grid's loads, each an ordinary cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Search {
    /// The probe point at `min`; the other probes differ only in load.
    pub base: WorkloadPoint,
    /// Bounds, axis and grid.
    pub spec: SearchSpec,
}

impl Search {
    /// The search's name, unique within a campaign: the cell name without its load.
    pub fn name(&self) -> String {
        let cell = self.base.cell_name();
        match cell.rfind('-') {
            Some(i) => cell[..i].to_string(),
            None => cell,
        }
    }

    /// The probe at grid index `k`.
    pub fn probe(&self, k: u64) -> WorkloadPoint {
        let value = self.spec.level(k);
        let mut w = self.base.clone();
        w.load = match w.load {
            LoadShape::Concurrency { .. } => LoadShape::Concurrency {
                value: value as u32,
            },
            LoadShape::Rate {
                arrival,
                burstiness,
                max_concurrency,
                ..
            } => LoadShape::Rate {
                value,
                arrival,
                burstiness,
                max_concurrency,
            },
            LoadShape::Replay {
                max_concurrency, ..
            } => LoadShape::Replay {
                time_scale: value,
                max_concurrency,
            },
        };
        w
    }

    /// The grid index of a point's load, when it is one of this search's probes.
    pub fn index_of(&self, w: &WorkloadPoint) -> Option<u64> {
        let load = match w.load {
            LoadShape::Concurrency { value } => f64::from(value),
            LoadShape::Rate { value, .. } => value,
            LoadShape::Replay { time_scale, .. } => time_scale,
        };
        let k = self.spec.index_of(load)?;
        (self.probe(k) == *w).then_some(k)
    }
}

/// Seed offset between repetitions, so each draws other prompts and arrivals.
const REPETITION_SEED_STRIDE: u64 = 7919;

/// The seed of repetition `repetition` of a point seeded `base`.
fn repetition_seed(base: u64, repetition: u32) -> u64 {
    base.wrapping_add(u64::from(repetition).wrapping_mul(REPETITION_SEED_STRIDE))
}

/// Fixed workload points and searches.
type Expanded = (Vec<WorkloadPoint>, Vec<Search>);

/// The scenarios of a campaign's session workloads by name, each read once
/// when the campaign loads.
pub type Scenarios = BTreeMap<String, Arc<Scenario>>;

/// The checks of a campaign's checks files by path, each read once when the
/// campaign loads.
pub type ChecksFiles = BTreeMap<PathBuf, Arc<Vec<UserCheck>>>;

/// A campaign's workloads expanded, with the files they read held from load.
pub(super) struct Expansion {
    /// Fixed points, each repeated `repetitions` times.
    pub points: Vec<WorkloadPoint>,
    /// SLO searches.
    pub searches: Vec<Search>,
    /// The scenarios its session workloads replay.
    pub scenarios: Scenarios,
    /// The checks its checks workloads send.
    pub checks: ChecksFiles,
}

/// Every workload's fixed points (each repeated `repetitions` times), its
/// searches, and the scenarios and checks files its workloads read.
pub(super) fn expand_workloads(
    raw: &RawCampaign,
    src: &Source,
    repetitions: u32,
) -> Result<Expansion, CampaignError> {
    if raw.workloads.is_empty() {
        return Err(src.error_at(src.text.len(), "the campaign declares no [[workload]]"));
    }
    let mut names = BTreeSet::new();
    let mut out = Vec::new();
    let mut searches = Vec::new();
    let mut scenarios = Scenarios::new();
    let mut checks = ChecksFiles::new();
    for w in &raw.workloads {
        let name = w.name.get_ref().clone();
        if !names.insert(name.clone()) {
            return Err(src.error(&w.name, format!("workload `{name}` is declared twice")));
        }
        if let Err(rule) = check_path_id(&name) {
            return Err(src.error(&w.name, format!("workload name `{name}` {rule}")));
        }
        if w.trace.is_some() {
            let (points, search) = trace_points(w, src, &name, repetitions)?;
            out.extend(points);
            searches.extend(search);
            continue;
        }
        let search = search_spec(w, src, &name)?;
        let loads = loads_of(w, src, &name, search.as_ref())?;
        let duration_s = match &w.duration {
            None => None,
            Some(d) => Some(
                parse_duration(d.get_ref())
                    .map_err(|e| src.error(d, e))?
                    .as_secs_f64(),
            ),
        };
        for load in &loads {
            let checked = match load {
                LoadShape::Concurrency { value } => {
                    crate::load::check_concurrency(u64::from(*value))
                }
                LoadShape::Rate { value, .. } => crate::load::schedule::check_rate_within(
                    *value,
                    duration_s.map(std::time::Duration::from_secs_f64),
                ),
                LoadShape::Replay { time_scale, .. } => crate::workload::trace::ReplaySettings {
                    time_scale: *time_scale,
                    ..Default::default()
                }
                .validate(),
            };
            checked.map_err(|e| src.error(&w.name, format!("workload `{name}`: {e}")))?;
        }
        if w.num_requests.is_none() && duration_s.is_none() {
            return Err(src.error(
                &w.name,
                format!(
                    "workload `{name}`: give `num_requests` and/or `duration` so every cell ends"
                ),
            ));
        }
        if w.num_requests == Some(0) {
            return Err(src.error(
                &w.name,
                format!("workload `{name}`: num_requests must be at least 1"),
            ));
        }
        let slos = slos_of(w, src)?;
        let (source, read) = prompt_source(w, src, &name)?;
        // Tools or a response format: answers end where their grammar or
        // call does, so their length is never forced.
        let structured = source.is_structured()
            || match &read {
                Some(Read::Scenario(sc)) => sc.tools.is_some(),
                Some(Read::Checks(c)) => c.iter().any(|u| u.structured.is_some()),
                None => false,
            };
        if structured && w.ignore_eos == Some(true) {
            return Err(src.error(&w.name, format!("workload `{name}`: its requests offer tools or a response format, and a tool call or a constrained answer ends where its grammar does; remove `ignore_eos = true`")));
        }
        let tool_choice = tool_choice_of(w, src, &name, &source, read.as_ref())?;
        match (&source, read) {
            (PromptSource::Scenario { name, .. }, Some(Read::Scenario(sc))) => {
                scenarios.insert(name.clone(), Arc::new(sc));
            }
            (PromptSource::Checks { path, .. }, Some(Read::Checks(c))) => {
                checks.insert(path.clone(), Arc::new(c));
            }
            _ => {}
        }
        let (inputs, outputs) = lengths(w, src, &name, &source)?;
        for &input_len in &inputs {
            for &output_len in &outputs {
                let point = |load: LoadShape, repetition: u32| WorkloadPoint {
                    workload: name.clone(),
                    api: w.api.unwrap_or(Api::Completions),
                    source: source.clone(),
                    input_len,
                    output_len,
                    load,
                    num_requests: w.num_requests,
                    duration_s,
                    warmup: w.warmup.unwrap_or(0),
                    ignore_eos: w.ignore_eos.unwrap_or(!structured),
                    tool_choice,
                    shared_prefix: w.shared_prefix.unwrap_or(0),
                    slos: slos.clone(),
                    seed: repetition_seed(w.seed.unwrap_or(0), repetition),
                    repetition,
                };
                if let Some(spec) = &search {
                    // The extremes were only checked above; probes start at `min`.
                    searches.push(Search {
                        base: point(loads[0], 0),
                        spec: spec.clone(),
                    });
                    continue;
                }
                for load in &loads {
                    for repetition in 0..repetitions {
                        out.push(point(*load, repetition));
                    }
                }
            }
        }
    }
    Ok(Expansion {
        points: out,
        searches,
        scenarios,
        checks,
    })
}

/// A workload's search, checked against its other settings.
fn search_spec(
    w: &super::super::RawWorkload,
    src: &Source,
    name: &str,
) -> Result<Option<SearchSpec>, CampaignError> {
    Ok(match &w.search {
        None => None,
        Some(sp) => {
            if w.concurrency.is_some() || w.rate.is_some() {
                return Err(src.error(
                    sp,
                    format!("workload `{name}`: a search chooses the loads itself; remove `concurrency` and `rate`, or the search"),
                ));
            }
            let r = sp.get_ref();
            let bounds =
                crate::search::parse_bounds(r.slo.get_ref()).map_err(|e| src.error(&r.slo, e))?;
            if r.over == Axis::TimeScale {
                return Err(src.error(
                    sp,
                    format!("workload `{name}`: a search over time_scale scales a trace's own schedule; give the workload a `trace`"),
                ));
            }
            let spec = SearchSpec::new(bounds, r.over, r.min, r.max, r.step)
                .map_err(|e| src.error(sp, format!("workload `{name}`: {e}")))?;
            Some(spec)
        }
    })
}

/// A workload's load levels: its concurrencies or rates, or a search's extremes.
fn loads_of(
    w: &super::super::RawWorkload,
    src: &Source,
    name: &str,
    search: Option<&SearchSpec>,
) -> Result<Vec<LoadShape>, CampaignError> {
    Ok(match (&w.concurrency, &w.rate) {
        (None, None) if search.is_some() => {
            let spec = search.as_ref().expect("checked");
            let burstiness = w.burstiness.unwrap_or(1.0);
            if burstiness <= 0.0 || burstiness.is_nan() {
                return Err(src.error(
                    &w.name,
                    format!("workload `{name}`: burstiness must be positive"),
                ));
            }
            match spec.axis {
                Axis::Concurrency => vec![
                    LoadShape::Concurrency {
                        value: spec.min as u32,
                    },
                    LoadShape::Concurrency {
                        value: spec.max as u32,
                    },
                ],
                Axis::Rate | Axis::TimeScale => vec![spec.min, spec.max]
                    .into_iter()
                    .map(|value| LoadShape::Rate {
                        value,
                        arrival: w.arrival.unwrap_or(Arrival::Poisson),
                        burstiness: w.burstiness.unwrap_or(1.0),
                        max_concurrency: w.max_concurrency,
                    })
                    .collect(),
            }
        }
        (Some(c), None) => {
            let v = c.get_ref().to_vec();
            if v.is_empty() {
                return Err(src.error(
                    c,
                    format!("workload `{name}`: concurrency = [] measures nothing; list at least one value, e.g. concurrency = [1]"),
                ));
            }
            if v.contains(&0) {
                return Err(src.error(
                    c,
                    format!("workload `{name}`: concurrency must be at least 1"),
                ));
            }
            v.into_iter()
                .map(|value| LoadShape::Concurrency { value })
                .collect()
        }
        (None, Some(r)) => {
            let burstiness = w.burstiness.unwrap_or(1.0);
            if burstiness <= 0.0 || burstiness.is_nan() {
                return Err(src.error(
                    &w.name,
                    format!("workload `{name}`: burstiness must be positive"),
                ));
            }
            let mut v = Vec::new();
            if r.get_ref().to_vec().is_empty() {
                return Err(src.error(
                    r,
                    format!("workload `{name}`: rate = [] measures nothing; list at least one value, e.g. rate = [1.0]"),
                ));
            }
            for value in r.get_ref().to_vec() {
                if !(value > 0.0 && value.is_finite()) {
                    return Err(src.error(
                        r,
                        format!("workload `{name}`: rates must be positive, got {value}"),
                    ));
                }
                v.push(LoadShape::Rate {
                    value,
                    arrival: w.arrival.unwrap_or(Arrival::Poisson),
                    burstiness,
                    max_concurrency: w.max_concurrency,
                });
            }
            v
        }
        (Some(_), Some(_)) => {
            return Err(src.error(
                &w.name,
                format!("workload `{name}`: give `concurrency` or `rate`, not both"),
            ))
        }
        (None, None) => {
            return Err(src.error(
                &w.name,
                format!(
                    "workload `{name}`: give `concurrency` (closed loop) or `rate` (open loop)"
                ),
            ))
        }
    })
}

/// A workload's `tool_choice`, refused where none of its requests offers
/// tools (the setting would change nothing but the cell's identity).
fn tool_choice_of(
    w: &super::super::RawWorkload,
    src: &Source,
    name: &str,
    source: &PromptSource,
    read: Option<&Read>,
) -> Result<Option<ToolChoice>, CampaignError> {
    let Some(choice) = &w.tool_choice else {
        return Ok(None);
    };
    let offers_tools = match (source, read) {
        (PromptSource::PromptKinds { kinds }, _) => {
            kinds.contains(&crate::workload::PromptKind::ToolCall)
        }
        (_, Some(Read::Scenario(sc))) => sc.tools.is_some(),
        (_, Some(Read::Checks(c))) => c
            .iter()
            .any(|u| u.structured.as_ref().is_some_and(|s| s.tools.is_some())),
        _ => false,
    };
    if !offers_tools {
        return Err(src.error(
            choice,
            format!("workload `{name}`: `tool_choice` applies to requests that offer tools, and none of this workload's do (the `tool-call` kind, a scenario with `tools`, `tool` checks)"),
        ));
    }
    Ok(Some(*choice.get_ref()))
}

/// A workload file read once, when the campaign loads, and sent from memory.
enum Read {
    /// A scenario's turns.
    Scenario(Scenario),
    /// A checks file's checks.
    Checks(Vec<UserCheck>),
}

/// Where a workload's prompts come from: prompt kinds, a dataset, a
/// scenario or checks file (with what it holds, read here once), or
/// synthetic filler.
fn prompt_source(
    w: &super::super::RawWorkload,
    src: &Source,
    name: &str,
) -> Result<(PromptSource, Option<Read>), CampaignError> {
    let chosen = [
        w.prompt_kinds.is_some(),
        w.dataset.is_some(),
        w.scenario.is_some(),
        w.checks.is_some(),
    ];
    if chosen.iter().filter(|c| **c).count() > 1 {
        return Err(src.error(
            &w.name,
            format!(
                "workload `{name}`: give at most one of `prompt_kinds`, `dataset`, `scenario` and `checks`"
            ),
        ));
    }
    let source = match &w.prompt_kinds {
        None if w.checks.is_some() => {
            let f = w.checks.as_ref().expect("checked");
            let path = relative(&base_dir(src), f.get_ref());
            let checks = crate::workload::answer_check::load_user_checks(&path)
                .map_err(|e| src.error(f, e.to_string()))?;
            let digest =
                crate::workload::file_digest(&path).map_err(|e| src.error(f, e.to_string()))?;
            let source = PromptSource::Checks {
                path,
                digest,
                count: checks.len() as u64,
            };
            return Ok((source, Some(Read::Checks(checks))));
        }
        None if w.dataset.is_some() => {
            let d = w.dataset.as_ref().expect("checked");
            let path = relative(&base_dir(src), d.get_ref());
            let format = match w.dataset_format {
                Some(f) => f,
                None => crate::workload::DatasetFormat::from_path(&path)
                    .map_err(|e| src.error(d, e.to_string()))?,
            };
            if !path.exists() {
                return Err(src.error(d, format!("dataset {} does not exist", path.display())));
            }
            // Read completely now, so a bad record stops the campaign before
            // any server starts rather than failing its cells one by one.
            crate::workload::dataset::check(&path, format)
                .map_err(|e| src.error(d, e.to_string()))?;
            let digest =
                crate::workload::file_digest(&path).map_err(|e| src.error(d, e.to_string()))?;
            PromptSource::Dataset {
                path,
                format,
                digest,
            }
        }
        None if w.scenario.is_some() => {
            let sc = w.scenario.as_ref().expect("checked");
            let mut name = sc.get_ref().clone();
            if !crate::workload::session::BUILTIN_SCENARIOS.contains(&name.as_str()) {
                name = relative(&base_dir(src), &name).display().to_string();
            }
            let scenario = crate::workload::session::resolve(&name)
                .map_err(|e| src.error(sc, e.to_string()))?;
            if w.api != Some(Api::Chat) {
                return Err(src.error(sc, format!("workload `{name}`: scenarios need `api = \"chat\"`: each turn carries the conversation so far")));
            }
            // The turns as read here are the turns every cell sends.
            let digest = (!crate::workload::session::BUILTIN_SCENARIOS.contains(&name.as_str()))
                .then(|| scenario.digest());
            return Ok((
                PromptSource::Scenario { name, digest },
                Some(Read::Scenario(scenario)),
            ));
        }
        None => PromptSource::Synthetic,
        Some(k) => {
            let text = k.get_ref().to_vec().join(",");
            let sel: PromptSelection = text
                .parse()
                .map_err(|e: crate::workload::WorkloadError| src.error(k, e.to_string()))?;
            if sel.kinds().iter().any(|k| k.is_structured()) && w.api != Some(Api::Chat) {
                return Err(src.error(k, format!("workload `{name}`: prompt kinds {} send tools or a response format; they need `api = \"chat\"`", crate::workload::prompts::structured_names())));
            }
            PromptSource::PromptKinds {
                kinds: sel.kinds().to_vec(),
            }
        }
    };
    Ok((source, None))
}

/// A workload's SLOs, each with the workload's `attainment` where the SLO
/// names none of its own.
fn slos_of(w: &super::super::RawWorkload, src: &Source) -> Result<Vec<Slo>, CampaignError> {
    let attainment = match &w.attainment {
        Some(a) => Some(
            crate::util::units::parse_attainment(&a.get_ref().to_string())
                .map_err(|e| src.error(a, format!("{e} (a share: 0.9 is 90 %)")))?,
        ),
        None => None,
    };
    if let (Some(a), true) = (&w.attainment, w.slo.is_empty()) {
        return Err(src.error(
            a,
            "`attainment` applies to the workload's `slo`; give one, e.g. slo = [\"ttft=2s\"]",
        ));
    }
    w.slo
        .iter()
        .map(|s| {
            let mut slo = parse_slo(s.get_ref()).map_err(|e| src.error(s, e))?;
            slo.attainment = slo.attainment.or(attainment);
            Ok(slo)
        })
        .collect()
}

/// A workload's prompt and output lengths, checked.
fn lengths(
    w: &super::super::RawWorkload,
    src: &Source,
    name: &str,
    source: &PromptSource,
) -> Result<(Vec<u64>, Vec<u64>), CampaignError> {
    let inputs = match (&source, &w.input_len) {
        (PromptSource::Synthetic, l) => l.as_ref().map(OneOrMany::to_vec).unwrap_or_else(|| vec![128]),
        (_, Some(_)) => {
            return Err(src.error(&w.name, format!("workload `{name}`: `input_len` applies to synthetic prompts only; prompt kinds, datasets and scenarios have their own lengths")))
        }
        // Their own lengths; 0 keeps the ETA and context checks from inventing one.
        (_, None) => vec![0],
    };
    let outputs = w
        .output_len
        .as_ref()
        .map(OneOrMany::to_vec)
        .unwrap_or_else(|| vec![256]);
    if inputs.is_empty() || outputs.is_empty() {
        return Err(src.error(
            &w.name,
            format!(
                "workload `{name}`: input_len and output_len need at least one value when given"
            ),
        ));
    }
    if let Some(&big) = inputs.iter().chain(&outputs).find(|&&n| n > MAX_TOKENS) {
        return Err(src.error(
            &w.name,
            format!("workload `{name}`: {big} tokens is beyond any model's context; lengths are limited to {MAX_TOKENS}"),
        ));
    }
    if outputs.contains(&0) {
        return Err(src.error(
            &w.name,
            format!("workload `{name}`: output_len must be at least 1"),
        ));
    }
    Ok((inputs, outputs))
}

/// The points of a trace workload: one per time scale and repetition.
///
/// The trace is read here, once: its digest is part of every cell's
/// identity, and its window's size, span and mean lengths size the plan.
fn trace_points(
    w: &super::super::RawWorkload,
    src: &Source,
    name: &str,
    repetitions: u32,
) -> Result<Expanded, CampaignError> {
    let t = w.trace.as_ref().expect("a trace workload");
    let conflicts = [
        (w.prompt_kinds.is_some(), "prompt_kinds"),
        (w.dataset.is_some(), "dataset"),
        (w.scenario.is_some(), "scenario"),
        (w.input_len.is_some(), "input_len"),
        (w.output_len.is_some(), "output_len"),
        (w.shared_prefix.is_some(), "shared_prefix"),
        (w.ignore_eos == Some(false), "ignore_eos = false"),
    ];
    if let Some((_, what)) = conflicts.iter().find(|c| c.0) {
        return Err(src.error(
            t,
            format!("workload `{name}`: a trace brings its own prompts, lengths and schedule; remove `{what}`"),
        ));
    }
    if w.time_scale.is_some() && (w.concurrency.is_some() || w.rate.is_some()) {
        return Err(src.error(
            t,
            format!("workload `{name}`: give `time_scale` (the trace's own schedule) or `concurrency`/`rate` (its requests as a dataset under that load), not both"),
        ));
    }
    let seconds = |v: &Option<Spanned<String>>| -> Result<Option<f64>, CampaignError> {
        v.as_ref()
            .map(|d| {
                parse_duration(d.get_ref())
                    .map(|x| x.as_secs_f64())
                    .map_err(|e| src.error(d, e))
            })
            .transpose()
    };
    let path = relative(&base_dir(src), t.get_ref());
    let format = match &w.trace_format {
        Some(f) => f
            .get_ref()
            .parse::<TraceFormat>()
            .map_err(|e| src.error(f, e.to_string()))?,
        None => TraceFormat::detect(&path).map_err(|e| src.error(t, e.to_string()))?,
    };
    let settings = ReplaySettings {
        time_scale: 1.0,
        max_idle_gap_s: seconds(&w.max_idle_gap)?,
        start_s: seconds(&w.trace_start)?.unwrap_or(0.0),
        end_s: seconds(&w.trace_end)?,
        max_requests: w.num_requests,
        block_size: w.block_size.unwrap_or(trace::DEFAULT_BLOCK_SIZE),
        length_scale: w.length_scale.unwrap_or(1.0),
        output_scale: w.output_scale.unwrap_or(1.0),
        max_context: w.max_context,
    };
    settings
        .validate()
        .map_err(|e| src.error(t, format!("workload `{name}`: {e}")))?;
    let replay =
        trace::load(&path, Some(format), &settings).map_err(|e| src.error(t, e.to_string()))?;
    let n = replay.requests.len() as u64;
    if n == 0 {
        return Err(src.error(
            t,
            format!(
                "workload `{name}`: the trace's window holds no request ({} rows read)",
                replay.stats.rows_read
            ),
        ));
    }
    let digest = crate::workload::file_digest(&path).map_err(|e| src.error(t, e.to_string()))?;
    let mean = |f: fn(&trace::ReplayRequest) -> u64| {
        replay.requests.iter().map(|r| f(r) as f64).sum::<f64>() / n as f64
    };
    let source = PromptSource::Trace {
        path,
        format,
        digest,
        settings,
        requests: n,
        span_s: replay.stats.trace_span_s,
        mean_input: mean(|r| r.input_len),
        mean_output: mean(|r| r.output_len),
    };
    let search = match &w.search {
        None => None,
        Some(sp) => Some(trace_search(w, src, name, sp)?),
    };
    let loads = match &search {
        Some((_, base)) => vec![*base],
        None => trace_loads(w).map_err(|e| src.error(t, format!("workload `{name}`: {e}")))?,
    };
    let slos = slos_of(w, src)?;
    let duration_s = seconds(&w.duration)?;
    // A trace's requests offer no tools: a `tool_choice` here is refused.
    let tool_choice = tool_choice_of(w, src, name, &source, None)?;
    let point = |load: LoadShape, repetition: u32| WorkloadPoint {
        workload: name.to_string(),
        api: w.api.unwrap_or(Api::Completions),
        source: source.clone(),
        input_len: 0,
        output_len: 0,
        load,
        num_requests: Some(n),
        duration_s,
        warmup: w.warmup.unwrap_or(0),
        ignore_eos: true,
        tool_choice,
        shared_prefix: 0,
        slos: slos.clone(),
        seed: repetition_seed(w.seed.unwrap_or(0), repetition),
        repetition,
    };
    if let Some((spec, base)) = search {
        return Ok((
            Vec::new(),
            vec![Search {
                base: point(base, 0),
                spec,
            }],
        ));
    }
    let mut out = Vec::new();
    for load in loads {
        for repetition in 0..repetitions {
            out.push(point(load, repetition));
        }
    }
    Ok((out, Vec::new()))
}

/// A trace workload's search and the load of its first probe: over
/// `time_scale` its own schedule at each multiple, over `concurrency` or
/// `rate` its requests as a dataset under each load.
fn trace_search(
    w: &super::super::RawWorkload,
    src: &Source,
    name: &str,
    sp: &Spanned<super::super::RawSearch>,
) -> Result<(SearchSpec, LoadShape), CampaignError> {
    if w.time_scale.is_some() || w.concurrency.is_some() || w.rate.is_some() {
        return Err(src.error(
            sp,
            format!("workload `{name}`: a search chooses the loads itself; remove `time_scale`, `concurrency` and `rate`, or the search"),
        ));
    }
    let r = sp.get_ref();
    let bounds = crate::search::parse_bounds(r.slo.get_ref()).map_err(|e| src.error(&r.slo, e))?;
    let spec = SearchSpec::new(bounds, r.over, r.min, r.max, r.step)
        .map_err(|e| src.error(sp, format!("workload `{name}`: {e}")))?;
    let base = match spec.axis {
        Axis::TimeScale => LoadShape::Replay {
            time_scale: spec.min,
            max_concurrency: w.max_concurrency,
        },
        Axis::Concurrency => LoadShape::Concurrency {
            value: spec.min as u32,
        },
        Axis::Rate => LoadShape::Rate {
            value: spec.min,
            arrival: w.arrival.unwrap_or(Arrival::Poisson),
            burstiness: w.burstiness.unwrap_or(1.0),
            max_concurrency: w.max_concurrency,
        },
    };
    Ok((spec, base))
}

/// A trace workload's loads: its own schedule at each `time_scale`, or its
/// requests as a dataset under each `concurrency` or `rate`.
fn trace_loads(w: &super::super::RawWorkload) -> Result<Vec<LoadShape>, String> {
    let positive = |what: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(format!("{what} must be positive, got {v}"))
        }
    };
    if let Some(c) = &w.concurrency {
        return c
            .get_ref()
            .to_vec()
            .into_iter()
            .map(|value| {
                crate::load::check_concurrency(u64::from(value))?;
                Ok(LoadShape::Concurrency { value })
            })
            .collect();
    }
    if let Some(r) = &w.rate {
        return r
            .get_ref()
            .to_vec()
            .into_iter()
            .map(|value| {
                Ok(LoadShape::Rate {
                    value: positive("a rate", value)?,
                    arrival: w.arrival.unwrap_or(Arrival::Poisson),
                    burstiness: positive("burstiness", w.burstiness.unwrap_or(1.0))?,
                    max_concurrency: w.max_concurrency,
                })
            })
            .collect();
    }
    w.time_scale
        .as_ref()
        .map(OneOrMany::to_vec)
        .unwrap_or_else(|| vec![1.0])
        .into_iter()
        .map(|s| {
            Ok(LoadShape::Replay {
                time_scale: positive("time_scale", s)?,
                max_concurrency: w.max_concurrency,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{campaign, HEAD, WL};
    use super::*;

    #[test]
    fn a_search_is_one_point_per_length_and_its_probes_differ_only_in_load() {
        let text = format!(
            "{HEAD}[[workload]]\nname = \"s\"\noutput_len = [64, 128]\nnum_requests = 8\nsearch = {{ slo = \"tpot_p50=30ms\", over = \"concurrency\", min = 2, max = 64, step = 2 }}\n"
        );
        let c = campaign(&text).unwrap();
        assert!(c.workloads.is_empty());
        let names: Vec<String> = c.searches.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["s-in128-out64", "s-in128-out128"]);
        let s = &c.searches[0];
        let p = s.probe(3);
        assert_eq!(p.load, LoadShape::Concurrency { value: 8 });
        assert_eq!(p.cell_name(), "s-in128-out64-c8");
        assert_eq!(s.index_of(&p), Some(3));
        // A point of another search (other output length) is not a probe of this one.
        assert_eq!(s.index_of(&c.searches[1].probe(3)), None);
    }

    #[test]
    fn another_repetition_of_a_point_is_the_point_that_repetition_expands_to() {
        let c = campaign(&format!("{HEAD}[run]\nrepetitions = 3\n{WL}")).unwrap();
        let reps: Vec<&WorkloadPoint> = c
            .workloads
            .iter()
            .filter(|w| w.load == c.workloads[0].load && w.output_len == c.workloads[0].output_len)
            .collect();
        assert_eq!(reps.len(), 3);
        for a in &reps {
            for b in &reps {
                assert_eq!(a.with_repetition(b.repetition), **b);
            }
        }
        assert_ne!(reps[0].seed, reps[1].seed);
    }

    #[test]
    fn workloads_need_one_load_kind_and_an_end() {
        let both = format!(
            "{HEAD}[[workload]]\nname = \"w\"\nconcurrency = 1\nrate = 2.0\nnum_requests = 1\n"
        );
        assert!(campaign(&both).unwrap_err().message.contains("not both"));
        let endless = format!("{HEAD}[[workload]]\nname = \"w\"\nconcurrency = 1\n");
        assert!(campaign(&endless)
            .unwrap_err()
            .message
            .contains("num_requests"));
        let bad_slo = format!("{HEAD}[[workload]]\nname = \"w\"\nconcurrency = 1\nnum_requests = 1\nslo = [\"ttft=2\"]\n");
        let e = campaign(&bad_slo).unwrap_err();
        assert!(e.message.contains("no unit"));
        assert_eq!(e.line, 12);
        let bad_kind = format!("{HEAD}[[workload]]\nname = \"w\"\nconcurrency = 1\nnum_requests = 1\nprompt_kinds = [\"fibonacci\", \"limerick\"]\n");
        let e = campaign(&bad_kind).unwrap_err();
        assert!(e.message.contains("haiku"), "{}", e.message);
        let untraced = format!("{HEAD}[[workload]]\nname = \"w\"\nnum_requests = 1\nsearch = {{ slo = \"e2e_p90=1s\", over = \"time_scale\", min = 1, max = 4 }}\n");
        let e = campaign(&untraced).unwrap_err();
        assert!(
            e.message.contains("give the workload a `trace`"),
            "{}",
            e.message
        );
        assert_eq!(e.line, 11);
    }

    #[test]
    fn a_workloads_attainment_joins_its_slos_and_a_bad_one_is_refused_where_written() {
        let w = |extra: &str| {
            format!("{HEAD}[[workload]]\nname = \"w\"\nconcurrency = 1\nnum_requests = 1\n{extra}")
        };
        let c = campaign(&w(
            "slo = [\"ttft=2s\", \"e2e=5s,attainment=99%\"]\nattainment = 0.95\n",
        ))
        .unwrap();
        let slos = &c.workloads[0].slos;
        assert_eq!(slos[0].attainment, Some(0.95));
        // An SLO's own attainment wins over the workload's.
        assert_eq!(slos[1].attainment, Some(0.99));
        assert_eq!(slos[0].to_string(), "ttft<=2000ms, attainment>=95%");
        // None given: the SLO is stored as before, so its cells keep their identity.
        let plain = campaign(&w("slo = [\"ttft=2s\"]\n")).unwrap();
        assert_eq!(plain.workloads[0].slos[0].attainment, None);
        let json = serde_json::to_string(&plain.workloads[0].slos[0]).unwrap();
        assert!(!json.contains("attainment"), "{json}");
        let e = campaign(&w("slo = [\"ttft=2s\"]\nattainment = 1.5\n")).unwrap_err();
        assert_eq!((e.line, e.col), (13, 14), "{e}");
        assert!(e.message.contains("at most 100%"), "{e}");
        let e = campaign(&w("attainment = 0.9\n")).unwrap_err();
        assert!(e.message.contains("applies to the workload's `slo`"), "{e}");
    }

    #[test]
    fn cell_names_are_readable_and_distinct() {
        let c = campaign(&format!("{HEAD}[run]\nrepetitions = 2\n{WL}")).unwrap();
        let names: BTreeSet<String> = c.workloads.iter().map(|w| w.cell_name()).collect();
        assert_eq!(names.len(), 8);
        assert!(names.contains("w-in128-out1024-c4-rep1"));
    }
}
