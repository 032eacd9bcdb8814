//! Raw campaign → resolved campaign ("high args"): defaults applied, matrices
//! expanded, every value validated and typed. Errors point at the value.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{CampaignError, OneOrMany, RawCampaign, RawServer, Repetitions, Source, SpecEntry};
use crate::client::openai::Api;
use crate::engine::{EngineKind, Speculative};
use crate::load::schedule::{Arrival, LoadShape};
use crate::search::{Axis, SearchSpec};
use crate::util::units::{parse_duration, parse_slo, Slo};
use crate::workload::PromptSelection;

/// The model under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Path or hub id handed to the engine.
    pub path: String,
    /// Name the server answers to.
    pub served_name: String,
    /// Hugging Face directory or config.json for the memory model.
    pub config: Option<PathBuf>,
    /// tokenizer.json for exact prompt lengths.
    pub tokenizer: Option<PathBuf>,
}

/// The engine every server of the campaign runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSpec {
    /// Which engine.
    pub kind: EngineKind,
    /// Program and leading arguments (empty = engine default).
    pub executable: Vec<String>,
    /// Version, when the user states it.
    pub version: Option<String>,
    /// Base URL for `openai`.
    pub url: Option<String>,
}

/// GPUs servebench may use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    /// Usable GPU indices (exclusions removed).
    pub gpus: Vec<u32>,
    /// GPUs never used.
    pub exclude_gpus: Vec<u32>,
    /// Memory of one GPU.
    pub gpu_memory_bytes: Option<u64>,
    /// The GPU model's canonical name (see `memory::gpus::GPUS`).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Use GPUs that other processes already hold memory on.
    #[serde(default)]
    pub use_busy_gpus: bool,
}

/// One server configuration: everything that needs its own server process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// Id naming its results folder and log.
    pub id: String,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Memory fraction.
    pub mem_fraction: Option<f64>,
    /// Max running requests.
    pub max_running_requests: Option<u32>,
    /// Context length.
    pub context_length: Option<u64>,
    /// Speculative decoding.
    pub speculative: Option<Speculative>,
    /// Flags after the generated ones (engine-wide, defaults, then server's own).
    pub args: Vec<String>,
    /// Environment (engine-wide, defaults, then server's own).
    pub env: BTreeMap<String, String>,
    /// Failures of this config are expected and do not fail the run's exit code.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expected_failure: bool,
    /// Environment variables declared secret (`[engine] secret_env`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<String>,
}

impl ServerConfig {
    /// A parameter's value as text for `--only key=value` filters and id templates.
    pub fn param(&self, key: &str) -> Option<String> {
        Some(match key {
            "server" | "id" => self.id.clone(),
            "tp" => self.tp.to_string(),
            "mem_fraction" => self.mem_fraction?.to_string(),
            "max_running_requests" => self.max_running_requests?.to_string(),
            "context_length" => self.context_length?.to_string(),
            "method" => self.method_name(),
            "budget" => self.speculative.as_ref()?.num_draft_tokens?.to_string(),
            _ => return None,
        })
    }

    /// This config with every secret (credential-like environment values,
    /// values of flags such as `--api-key`) replaced by a placeholder: the
    /// form that is hashed into identities and stored.
    pub fn redacted(&self) -> ServerConfig {
        use crate::util::secret;
        ServerConfig {
            args: secret::redact_argv(&self.args),
            env: secret::redact_env(&self.env, &self.secret_env),
            ..self.clone()
        }
    }

    /// The secret values this config carries (see [`ServerConfig::redacted`]).
    pub fn secret_values(&self) -> Vec<String> {
        use crate::util::secret;
        let mut out = secret::env_secrets(&self.env, &self.secret_env);
        out.extend(secret::argv_secrets(&self.args));
        out
    }

    /// The speculative method's name, or `ar` for autoregressive decoding.
    pub fn method_name(&self) -> String {
        self.speculative
            .as_ref()
            .and_then(|s| s.method)
            .map(|m| m.as_str().to_string())
            .unwrap_or_else(|| "ar".into())
    }
}

/// Where a workload's prompts come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PromptSource {
    /// Filler text of exactly `input_len` tokens, unique per request.
    Synthetic,
    /// Built-in prompt kinds, sampled with the seed.
    PromptKinds {
        /// Kind names.
        kinds: Vec<String>,
    },
    /// A ShareGPT or JSONL dataset.
    Dataset {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: crate::workload::DatasetFormat,
    },
    /// Multi-turn sessions; `num_requests` counts sessions.
    Scenario {
        /// Built-in name or file path.
        name: String,
    },
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
        let load = match self.load {
            LoadShape::Concurrency { value } => format!("c{value}"),
            LoadShape::Rate { value, .. } => format!("rate{value}"),
        };
        let input = match self.source {
            PromptSource::Synthetic => format!("in{}", self.input_len),
            PromptSource::PromptKinds { .. } => "kinds".to_string(),
            PromptSource::Dataset { .. } => "dataset".to_string(),
            PromptSource::Scenario { .. } => "sessions".to_string(),
        };
        let mut name = format!("{}-{input}-out{}-{load}", self.workload, self.output_len);
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
        };
        w
    }

    /// The grid index of a point's load, when it is one of this search's probes.
    pub fn index_of(&self, w: &WorkloadPoint) -> Option<u64> {
        let load = match w.load {
            LoadShape::Concurrency { value } => f64::from(value),
            LoadShape::Rate { value, .. } => value,
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

/// When a point has been repeated enough (`repetitions = "auto"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Adaptive {
    /// Narrow enough: the 95% interval's width over its centre.
    pub target: f64,
    /// Repetitions before the interval is looked at.
    pub min: u32,
}

/// Repetitions measured before an automatic stop is considered.
pub const MIN_AUTO_REPETITIONS: u32 = 2;
/// Cap on automatic repetitions unless `max_repetitions` says otherwise.
pub const DEFAULT_MAX_REPETITIONS: u32 = 5;
/// Most repetitions a point may have.
pub const MAX_REPETITIONS: u32 = 1000;

/// `5%` or `0.05` as a share, within (0, 1].
fn parse_share(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{text}` is not a share; write e.g. \"5%\""))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("`{text}` must be above 0% and at most 100%"))
    }
}

/// Most warm-up requests a server may be sent before its first cell.
pub const MAX_SERVER_WARMUP: u32 = 1000;

/// How the campaign runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// Baseline server id for speedups.
    pub baseline: Option<String>,
    /// Health wait limit.
    pub health_timeout: Duration,
    /// Per-request limit.
    pub request_timeout: Duration,
    /// SIGTERM → SIGKILL grace.
    pub grace_period: Duration,
    /// Measurements per cell (the cap, under `repetitions = "auto"`).
    pub repetitions: u32,
    /// Under `repetitions = "auto"`: when a point has been repeated enough.
    pub adaptive: Option<Adaptive>,
    /// Start-up guess for the ETA.
    pub startup_estimate: Duration,
    /// Per-request decode speed guess, tokens/s.
    pub decode_tok_s_estimate: f64,
    /// Prefill speed guess, tokens/s.
    pub prefill_tok_s_estimate: f64,
    /// Whether the campaign set a speed guess itself (it then wins over the priors).
    #[serde(default)]
    pub speed_given: bool,
    /// Whether the campaign set `startup_estimate` itself.
    #[serde(default)]
    pub startup_given: bool,
    /// Warm-up requests per launched server before its first cell.
    #[serde(default)]
    pub server_warmup: u32,
    /// Restart once after a crash and retry the remaining cells.
    pub retry_after_crash: bool,
    /// Stop searching a config once it cannot beat the best one found so far.
    pub stop_losers: bool,
    /// Write the report files at the end of `run`.
    pub report: bool,
}

/// A validated campaign.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Campaign {
    /// Campaign name.
    pub name: String,
    /// The campaign file.
    pub file: PathBuf,
    /// `<results_dir>/<name>`.
    pub results_dir: PathBuf,
    /// Free text.
    pub description: Option<String>,
    /// The model.
    pub model: ModelSpec,
    /// The engine.
    pub engine: EngineSpec,
    /// GPUs.
    pub hardware: Hardware,
    /// Server configs in declaration order (servers, then matrices).
    pub servers: Vec<ServerConfig>,
    /// Workload points in declaration order.
    pub workloads: Vec<WorkloadPoint>,
    /// SLO searches, one per searched workload point.
    pub searches: Vec<Search>,
    /// Run options.
    pub run: RunSettings,
    /// Where servers are started (not part of any cell's identity).
    #[serde(default)]
    pub launcher: super::launcher::Launcher,
    /// Environment variable holding the API key sent with every request
    /// (not part of any cell's identity: rotating a key changes no number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

impl Campaign {
    /// The API key to send, read from `api_key_env`.
    pub fn api_key(&self) -> Result<Option<String>, String> {
        crate::util::secret::api_key(None, self.api_key_env.as_deref())
    }

    /// Remember every secret the campaign carries so no written file holds it.
    pub fn register_secrets(&self) {
        for s in &self.servers {
            for v in s.secret_values() {
                crate::util::secret::register(&v);
            }
        }
        if let Ok(Some(k)) = self.api_key() {
            crate::util::secret::register(&k);
        }
    }
}

fn duration(
    src: &Source,
    v: &Option<Spanned<String>>,
    default: Duration,
) -> Result<Duration, CampaignError> {
    match v {
        None => Ok(default),
        Some(s) => parse_duration(s.get_ref()).map_err(|e| src.error(s, e)),
    }
}

fn relative(base: &Path, p: &str) -> PathBuf {
    let p = PathBuf::from(p);
    let joined = if p.is_absolute() { p } else { base.join(p) };
    normalize(&joined)
}

/// Remove `.` and `name/..` pairs without touching the file system.
fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

fn base_dir(src: &Source) -> PathBuf {
    match src.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Expand `${VAR}` and `${VAR:-default}` from the environment.
fn expand_env(src: &Source, at: usize, s: &str) -> Result<String, CampaignError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .ok_or_else(|| src.error_at(at, format!("unclosed `${{` in `{s}`")))?
            + start;
        let inner = &rest[start + 2..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (std::env::var(name), default) {
            (Ok(v), _) if !v.is_empty() => out.push_str(&v),
            (_, Some(d)) => out.push_str(d),
            _ => {
                return Err(src.error_at(
                    at,
                    format!("environment variable `{name}` used in `{s}` is not set"),
                ))
            }
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Resolve a parsed campaign.
pub fn resolve(raw: RawCampaign, src: &Source) -> Result<Campaign, CampaignError> {
    let base = src.path.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        base
    };
    let name = raw.campaign.name.get_ref().trim().to_string();
    if let Err(rule) = check_path_id(&name) {
        return Err(src.error(&raw.campaign.name, format!("campaign name `{name}` {rule}")));
    }
    // `${VAR}` here, as the README documents; an unset one is reported at the value.
    let results_dir = match &raw.campaign.results_dir {
        Some(d) => expand_env(src, d.span().start, d.get_ref())?,
        None => "results".to_string(),
    };
    let results_dir = relative(&base, &results_dir).join(&name);

    let model_path = expand_env(src, raw.model.path.span().start, raw.model.path.get_ref())?;
    let model = ModelSpec {
        served_name: raw.model.name.clone().unwrap_or_else(|| model_path.clone()),
        path: model_path,
        config: match &raw.model.config {
            Some(p) => Some(relative(
                &base,
                &expand_env(src, p.span().start, p.get_ref())?,
            )),
            None => None,
        },
        tokenizer: match &raw.model.tokenizer {
            Some(p) => Some(relative(
                &base,
                &expand_env(src, p.span().start, p.get_ref())?,
            )),
            None => None,
        },
    };
    let engine = EngineSpec {
        kind: raw.engine.kind,
        executable: match &raw.engine.executable {
            Some(exe) => exe
                .get_ref()
                .iter()
                .map(|a| expand_env(src, exe.span().start, a).map(|a| resolve_script(&base, a)))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        },
        version: raw.engine.version.clone(),
        url: raw.engine.url.as_ref().map(|u| u.get_ref().clone()),
    };
    if engine.kind == EngineKind::Openai {
        match &raw.engine.url {
            None => {
                return Err(src.error_at(
                    0,
                    "[engine] kind = \"openai\" needs `url` (e.g. http://127.0.0.1:8000)",
                ))
            }
            Some(u) if !u.get_ref().starts_with("http://") => {
                return Err(src.error(u, "url must start with http://"))
            }
            Some(u) if u.get_ref().contains(['?', '#']) => {
                return Err(src.error(
                    u,
                    "url must be a base URL without `?query` or `#fragment` (e.g. http://127.0.0.1:8000/v1)",
                ))
            }
            _ => {}
        }
    }

    if engine.kind == EngineKind::Command && engine.executable.is_empty() {
        // The kind is not spanned; the `[engine]` header is where the key belongs.
        return Err(src.error_at(
            src.text.find("[engine]").unwrap_or(0),
            "[engine] kind = \"command\" needs `executable` (e.g. executable = [\"./serve.sh\"])",
        ));
    }

    let gpu = match &raw.hardware.gpu {
        None => None,
        Some(g) => Some(
            crate::memory::gpus::gpu_by_name(g.get_ref()).ok_or_else(|| {
                src.error(
                    g,
                    format!(
                        "unknown GPU `{}`; known: {}",
                        g.get_ref(),
                        crate::memory::gpus::gpu_names()
                    ),
                )
            })?,
        ),
    };
    let gpu_memory_bytes = match &raw.hardware.gpu_memory {
        // A named GPU brings its memory size.
        None => gpu.map(|g| (g.memory_gib * (1u64 << 30) as f64) as u64),
        Some(s) => Some(crate::memory::parse_bytes(s.get_ref()).map_err(|e| src.error(s, e))?),
    };
    let excluded: BTreeSet<u32> = raw.hardware.exclude_gpus.iter().copied().collect();
    let hardware = Hardware {
        gpus: raw
            .hardware
            .gpus
            .iter()
            .copied()
            .filter(|g| !excluded.contains(g))
            .collect(),
        exclude_gpus: raw.hardware.exclude_gpus.clone(),
        gpu_memory_bytes,
        gpu: gpu.map(|g| g.names[0].to_string()),
        use_busy_gpus: raw.hardware.use_busy_gpus,
    };

    let servers = expand_servers(&raw, src)?;

    let run = RunSettings {
        baseline: raw.run.baseline.as_ref().map(|b| b.get_ref().clone()),
        health_timeout: duration(src, &raw.run.health_timeout, Duration::from_secs(600))?,
        request_timeout: duration(src, &raw.run.request_timeout, Duration::from_secs(600))?,
        grace_period: duration(src, &raw.run.grace_period, Duration::from_secs(15))?,
        repetitions: match &raw.run.repetitions {
            None => 1,
            Some(r) if *r.get_ref() == Repetitions::Count(0) => {
                return Err(src.error(
                    r,
                    "repetitions must be at least 1 (omit it to measure each cell once)",
                ))
            }
            Some(r) => match *r.get_ref() {
                Repetitions::Count(n) => n,
                Repetitions::Auto => match &raw.run.max_repetitions {
                    None => DEFAULT_MAX_REPETITIONS,
                    Some(m) if (MIN_AUTO_REPETITIONS..=MAX_REPETITIONS).contains(m.get_ref()) => {
                        *m.get_ref()
                    }
                    Some(m) => {
                        return Err(src.error(
                            m,
                            format!("max_repetitions must be between {MIN_AUTO_REPETITIONS} and {MAX_REPETITIONS}"),
                        ))
                    }
                },
            },
        },
        adaptive: match (&raw.run.repetitions, &raw.run.repetitions_target) {
            (Some(r), target) if *r.get_ref() == Repetitions::Auto => Some(Adaptive {
                target: match target {
                    None => 0.05,
                    Some(t) => parse_share(t.get_ref()).map_err(|e| src.error(t, e))?,
                },
                min: MIN_AUTO_REPETITIONS,
            }),
            (_, Some(t)) => {
                return Err(src.error(t, "repetitions_target applies to `repetitions = \"auto\"`"))
            }
            _ => None,
        },
        startup_estimate: duration(
            src,
            &raw.run.startup_estimate,
            if engine.kind == EngineKind::Sim {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(90)
            },
        )?,
        decode_tok_s_estimate: raw.run.decode_tok_s_estimate.unwrap_or(50.0).max(1e-3),
        prefill_tok_s_estimate: raw.run.prefill_tok_s_estimate.unwrap_or(5000.0).max(1e-3),
        speed_given: raw.run.decode_tok_s_estimate.is_some()
            || raw.run.prefill_tok_s_estimate.is_some(),
        startup_given: raw.run.startup_estimate.is_some(),
        server_warmup: match &raw.run.server_warmup {
            None => 1,
            Some(n) if *n.get_ref() > MAX_SERVER_WARMUP => {
                return Err(src.error(
                    n,
                    format!("server_warmup is a number of requests, at most {MAX_SERVER_WARMUP}"),
                ))
            }
            Some(n) => *n.get_ref(),
        },
        retry_after_crash: raw.run.retry_after_crash.unwrap_or(false),
        stop_losers: raw.run.stop_losers.unwrap_or(false),
        report: raw.run.report.unwrap_or(true),
    };
    if let Some(b) = &raw.run.baseline {
        if !servers.iter().any(|s| &s.id == b.get_ref()) {
            let ids: Vec<&str> = servers.iter().map(|s| s.id.as_str()).collect();
            return Err(src.error(
                b,
                format!(
                    "baseline `{}` is not a server id; ids: {}",
                    b.get_ref(),
                    ids.join(", ")
                ),
            ));
        }
    }

    let (workloads, searches) = expand_workloads(&raw, src, run.repetitions)?;
    let launcher = match &raw.launcher {
        Some(l) => super::launcher::resolve(l.get_ref(), src, l.span().start)?,
        None => Default::default(),
    };
    let api_key_env = match &raw.engine.api_key_env {
        Some(v) => {
            let name = v.get_ref();
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(src.error(
                    v,
                    format!(
                        "`api_key_env` names an environment variable holding the key (e.g. \"OPENAI_API_KEY\"), not `{name}`; the key itself never goes in the campaign file"
                    ),
                ));
            }
            Some(name.clone())
        }
        None => None,
    };
    Ok(Campaign {
        name,
        file: src.path.clone(),
        results_dir,
        description: raw.campaign.description.clone(),
        model,
        engine,
        hardware,
        servers,
        workloads,
        searches,
        run,
        launcher,
        api_key_env,
    })
}

/// Largest prompt or output length accepted, so a typo cannot allocate terabytes of prompt.
pub const MAX_TOKENS: u64 = 10_000_000;

/// Longest id accepted as a path component; far below any file system's name limit.
pub const MAX_ID_LEN: usize = 100;

/// Checks an id that becomes a file or directory name, returning the broken rule.
///
/// Ids name result folders, so `.`, `..`, hidden names and separators would
/// place results outside `cells/` or hide them from `plan` and `report`.
pub fn check_path_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("must not be empty".into());
    }
    if id.len() > MAX_ID_LEN {
        return Err(format!(
            "is {} characters long; the limit is {MAX_ID_LEN} (shorten it)",
            id.len()
        ));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err("may only use letters, digits, `-`, `_` and `.`".into());
    }
    if id.starts_with('.') {
        return Err("must not start with `.` (`.`, `..` and hidden names are refused)".into());
    }
    Ok(())
}

/// Paths to scripts shipped beside the campaign (`../scripts/x`) are made absolute.
fn resolve_script(base: &Path, arg: String) -> String {
    if arg.starts_with("./") || arg.starts_with("../") {
        let p = base.join(&arg);
        if p.exists() {
            return p.canonicalize().unwrap_or(p).display().to_string();
        }
    }
    arg
}

fn merge_server(
    raw: &RawCampaign,
    s: &RawServer,
    extra_args: &[String],
    extra_env: &BTreeMap<String, String>,
) -> ServerConfig {
    let d = &raw.defaults;
    let mut args = raw.engine.args.clone();
    args.extend(d.args.iter().cloned());
    args.extend(extra_args.iter().cloned());
    args.extend(s.args.iter().cloned());
    let mut env = raw.engine.env.clone();
    env.extend(d.env.clone());
    env.extend(extra_env.clone());
    env.extend(s.env.clone());
    ServerConfig {
        id: s
            .id
            .as_ref()
            .map(|i| i.get_ref().clone())
            .unwrap_or_else(|| "default".into()),
        tp: s.tp.or(d.tp).unwrap_or(1),
        mem_fraction: s.mem_fraction.or(d.mem_fraction),
        max_running_requests: s.max_running_requests.or(d.max_running_requests),
        context_length: s.context_length.or(d.context_length),
        speculative: s.speculative.clone().or_else(|| d.speculative.clone()),
        args,
        env,
        expected_failure: s.expected_failure.or(d.expected_failure).unwrap_or(false),
        secret_env: raw.engine.secret_env.clone(),
    }
}

fn check_server(src: &Source, at: usize, s: &mut ServerConfig) -> Result<(), CampaignError> {
    expand_server_env(src, at, s)?;
    if let Err(rule) = check_path_id(&s.id) {
        return Err(src.error_at(at, format!("server id `{}` {rule}", s.id)));
    }
    if s.tp == 0 {
        return Err(src.error_at(at, format!("server `{}`: tp must be at least 1", s.id)));
    }
    if let Some(f) = s.mem_fraction {
        if !(f > 0.0 && f <= 1.0) {
            return Err(src.error_at(
                at,
                format!("server `{}`: mem_fraction must be in (0, 1], got {f}", s.id),
            ));
        }
    }
    if let Some(sp) = &s.speculative {
        if sp.method.is_none() {
            return Err(src.error_at(at, format!(
                "server `{}`: speculative needs `method` (eagle, eagle3, mtp, dflash, draft-model, ngram)",
                s.id
            )));
        }
        if let Some(p) = sp.acceptance {
            if !(0.0..=1.0).contains(&p) {
                return Err(src.error_at(
                    at,
                    format!("server `{}`: acceptance must be within [0, 1]", s.id),
                ));
            }
        }
    }
    Ok(())
}

/// Expand environment references in a server's flags and draft model path.
fn expand_server_env(src: &Source, at: usize, s: &mut ServerConfig) -> Result<(), CampaignError> {
    for a in &mut s.args {
        *a = expand_env(src, at, a)?;
    }
    for v in s.env.values_mut() {
        *v = expand_env(src, at, v)?;
    }
    if let Some(d) = s
        .speculative
        .as_mut()
        .and_then(|sp| sp.draft_model.as_mut())
    {
        *d = expand_env(src, at, d)?;
    }
    Ok(())
}

fn expand_servers(raw: &RawCampaign, src: &Source) -> Result<Vec<ServerConfig>, CampaignError> {
    let mut out: Vec<(ServerConfig, usize)> = Vec::new();
    for s in &raw.servers {
        let at = s.id.as_ref().map(|i| i.span().start).unwrap_or(0);
        if s.id.is_none() {
            return Err(src.error_at(0, "every [[server]] needs an `id`"));
        }
        let mut cfg = merge_server(raw, s, &[], &BTreeMap::new());
        check_server(src, at, &mut cfg)?;
        out.push((cfg, at));
    }
    for m in &raw.matrix {
        let at = m.id.span().start;
        let empty = |axis: &str, is_empty: bool| -> Result<(), CampaignError> {
            if is_empty {
                return Err(src.error_at(
                    at,
                    format!(
                        "`{axis} = []` in matrix `{}` leaves no server to run: give at least one value, or drop the key for the default",
                        m.id.get_ref()
                    ),
                ));
            }
            Ok(())
        };
        let axis_empty = |v: Option<usize>| v == Some(0);
        empty("tp", axis_empty(m.tp.as_ref().map(|v| v.to_vec().len())))?;
        empty(
            "mem_fraction",
            axis_empty(m.mem_fraction.as_ref().map(|v| v.to_vec().len())),
        )?;
        empty(
            "max_running_requests",
            axis_empty(m.max_running_requests.as_ref().map(|v| v.to_vec().len())),
        )?;
        empty(
            "context_length",
            axis_empty(m.context_length.as_ref().map(|v| v.to_vec().len())),
        )?;
        empty(
            "budget",
            axis_empty(m.budget.as_ref().map(|v| v.to_vec().len())),
        )?;
        empty(
            "speculative",
            axis_empty(m.speculative.as_ref().map(|v| v.get_ref().len())),
        )?;
        let tps =
            m.tp.as_ref()
                .map(OneOrMany::to_vec)
                .unwrap_or_else(|| vec![raw.defaults.tp.unwrap_or(1)]);
        let mems: Vec<Option<f64>> = m
            .mem_fraction
            .as_ref()
            .map(|v| v.to_vec().into_iter().map(Some).collect())
            .unwrap_or_else(|| vec![None]);
        let mrrs: Vec<Option<u32>> = m
            .max_running_requests
            .as_ref()
            .map(|v| v.to_vec().into_iter().map(Some).collect())
            .unwrap_or_else(|| vec![None]);
        let ctxs: Vec<Option<u64>> = m
            .context_length
            .as_ref()
            .map(|v| v.to_vec().into_iter().map(Some).collect())
            .unwrap_or_else(|| vec![None]);
        let mut specs: Vec<Option<Speculative>> = Vec::new();
        match &m.speculative {
            None => specs.push(None),
            Some(list) => {
                for e in list.get_ref() {
                    match e {
                        SpecEntry::Name(n) if n == "none" => specs.push(None),
                        SpecEntry::Name(n) => {
                            return Err(src.error(list, format!("speculative entry `{n}` is not a table; use \"none\" or {{ method = \"eagle\", ... }}")))
                        }
                        SpecEntry::Settings(s) => specs.push(Some(s.clone())),
                    }
                }
            }
        }
        let budgets: Vec<Option<u32>> = m
            .budget
            .as_ref()
            .map(|v| v.to_vec().into_iter().map(Some).collect())
            .unwrap_or_else(|| vec![None]);
        for &tp in &tps {
            for &mem in &mems {
                for &mrr in &mrrs {
                    for &ctx in &ctxs {
                        for spec in &specs {
                            let variants: Vec<(Option<Speculative>, Option<u32>)> = match spec {
                                None => vec![(None, None)],
                                Some(s) => budgets
                                    .iter()
                                    .map(|b| {
                                        let mut s = s.clone();
                                        if let Some(b) = b {
                                            s.num_draft_tokens = Some(*b);
                                        }
                                        (Some(s), *b)
                                    })
                                    .collect(),
                            };
                            for (spec, _) in variants {
                                let raw_server = RawServer {
                                    id: None,
                                    tp: Some(tp),
                                    mem_fraction: mem,
                                    max_running_requests: mrr,
                                    context_length: ctx,
                                    speculative: spec.clone(),
                                    args: Vec::new(),
                                    env: BTreeMap::new(),
                                    expected_failure: None,
                                };
                                let mut cfg = merge_server(raw, &raw_server, &m.args, &m.env);
                                cfg.speculative = spec;
                                cfg.id = render_id(m.id.get_ref(), &cfg)
                                    .map_err(|e| src.error(&m.id, e))?;
                                check_server(src, at, &mut cfg)?;
                                out.push((cfg, at));
                            }
                        }
                    }
                }
            }
        }
    }
    if out.is_empty() {
        let mut cfg = merge_server(
            raw,
            &RawServer {
                id: Some(Spanned::new(0..0, "default".into())),
                ..raw.defaults.clone()
            },
            &[],
            &BTreeMap::new(),
        );
        check_server(src, 0, &mut cfg)?;
        out.push((cfg, 0));
    }
    let mut seen = BTreeSet::new();
    for (cfg, at) in &out {
        if !seen.insert(cfg.id.clone()) {
            return Err(src.error_at(*at, format!("server id `{}` is used twice; ids name result folders and must be unique (add a placeholder such as {{tp}} or {{budget}} to the matrix id)", cfg.id)));
        }
    }
    Ok(out.into_iter().map(|(c, _)| c).collect())
}

fn render_id(template: &str, cfg: &ServerConfig) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("unclosed `{{` in id template `{template}`"))?
            + open;
        let key = &rest[open + 1..close];
        let value = match key {
            "budget" => cfg
                .speculative
                .as_ref()
                .and_then(|s| s.num_draft_tokens)
                .map(|b| b.to_string())
                .unwrap_or_else(|| "none".into()),
            "method" => cfg.method_name(),
            "tp" | "mem_fraction" | "max_running_requests" | "context_length" => {
                cfg.param(key).unwrap_or_else(|| "default".into())
            }
            other => {
                return Err(format!(
                    "unknown placeholder `{{{other}}}` in id template; allowed: {{tp}}, {{method}}, {{budget}}, {{mem_fraction}}, {{max_running_requests}}, {{context_length}}"
                ))
            }
        };
        out.push_str(&value);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Fixed workload points and searches.
type Expanded = (Vec<WorkloadPoint>, Vec<Search>);

fn expand_workloads(
    raw: &RawCampaign,
    src: &Source,
    repetitions: u32,
) -> Result<Expanded, CampaignError> {
    if raw.workloads.is_empty() {
        return Err(src.error_at(src.text.len(), "the campaign declares no [[workload]]"));
    }
    let mut names = BTreeSet::new();
    let mut out = Vec::new();
    let mut searches = Vec::new();
    for w in &raw.workloads {
        let name = w.name.get_ref().clone();
        if !names.insert(name.clone()) {
            return Err(src.error(&w.name, format!("workload `{name}` is declared twice")));
        }
        if let Err(rule) = check_path_id(&name) {
            return Err(src.error(&w.name, format!("workload name `{name}` {rule}")));
        }
        let search = match &w.search {
            None => None,
            Some(sp) => {
                if w.concurrency.is_some() || w.rate.is_some() {
                    return Err(src.error(
                        sp,
                        format!("workload `{name}`: a search chooses the loads itself; remove `concurrency` and `rate`, or the search"),
                    ));
                }
                let r = sp.get_ref();
                let bounds = crate::search::parse_bounds(r.slo.get_ref())
                    .map_err(|e| src.error(&r.slo, e))?;
                let spec = SearchSpec::new(bounds, r.over, r.min, r.max, r.step)
                    .map_err(|e| src.error(sp, format!("workload `{name}`: {e}")))?;
                Some(spec)
            }
        };
        let loads: Vec<LoadShape> = match (&w.concurrency, &w.rate) {
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
                    Axis::Rate => vec![spec.min, spec.max]
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
                let v = c.to_vec();
                if v.is_empty() {
                    return Err(src.error(
                        &w.name,
                        format!("workload `{name}`: concurrency = [] measures nothing; list at least one value, e.g. concurrency = [1]"),
                    ));
                }
                if v.contains(&0) {
                    return Err(src.error(
                        &w.name,
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
                if r.to_vec().is_empty() {
                    return Err(src.error(
                        &w.name,
                        format!("workload `{name}`: rate = [] measures nothing; list at least one value, e.g. rate = [1.0]"),
                    ));
                }
                for value in r.to_vec() {
                    if !(value > 0.0 && value.is_finite()) {
                        return Err(src.error(
                            &w.name,
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
        };
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
        let slos = w
            .slo
            .iter()
            .map(|s| parse_slo(s.get_ref()).map_err(|e| src.error(s, e)))
            .collect::<Result<Vec<_>, _>>()?;
        let chosen = [
            w.prompt_kinds.is_some(),
            w.dataset.is_some(),
            w.scenario.is_some(),
        ];
        if chosen.iter().filter(|c| **c).count() > 1 {
            return Err(src.error(&w.name, format!("workload `{name}`: give at most one of `prompt_kinds`, `dataset` and `scenario`")));
        }
        let source = match &w.prompt_kinds {
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
                PromptSource::Dataset { path, format }
            }
            None if w.scenario.is_some() => {
                let sc = w.scenario.as_ref().expect("checked");
                let mut name = sc.get_ref().clone();
                if !crate::workload::session::BUILTIN_SCENARIOS.contains(&name.as_str()) {
                    name = relative(&base_dir(src), &name).display().to_string();
                }
                crate::workload::session::resolve(&name)
                    .map_err(|e| src.error(sc, e.to_string()))?;
                if w.api != Some(Api::Chat) {
                    return Err(src.error(sc, format!("workload `{name}`: scenarios need `api = \"chat\"`: each turn carries the conversation so far")));
                }
                PromptSource::Scenario { name }
            }
            None => PromptSource::Synthetic,
            Some(k) => {
                let text = k.get_ref().to_vec().join(",");
                let sel: PromptSelection = text
                    .parse()
                    .map_err(|e: crate::workload::WorkloadError| src.error(k, e.to_string()))?;
                PromptSource::PromptKinds {
                    kinds: sel.kinds().iter().map(|k| k.name().to_string()).collect(),
                }
            }
        };
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
                format!("workload `{name}`: input_len and output_len need at least one value when given"),
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
                    ignore_eos: w.ignore_eos.unwrap_or(true),
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
    Ok((out, searches))
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn campaign(text: &str) -> Result<Campaign, CampaignError> {
        let (raw, src) = parse(Path::new("dir/c.toml"), text)?;
        resolve(raw, &src)
    }

    const HEAD: &str = "[campaign]\nname = \"t\"\n[model]\npath = \"m\"\n[engine]\nkind = \"sglang\"\nargs = [\"--trust-remote-code\"]\n";
    const WL: &str = "[[workload]]\nname = \"w\"\nconcurrency = [1, 4]\noutput_len = [256, 1024]\nnum_requests = 8\n";

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
    fn matrix_expands_the_product_and_budgets_skip_autoregressive() {
        let text = format!(
            "{HEAD}[defaults]\nmem_fraction = 0.8\n[[matrix]]\nid = \"{{method}}-tp{{tp}}-b{{budget}}\"\ntp = [1, 4]\nspeculative = [\"none\", {{ method = \"eagle\", topk = 8, num_steps = 4 }}]\nbudget = [8, 16, 64]\n{WL}"
        );
        let c = campaign(&text).unwrap();
        let ids: Vec<&str> = c.servers.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "ar-tp1-bnone",
                "eagle-tp1-b8",
                "eagle-tp1-b16",
                "eagle-tp1-b64",
                "ar-tp4-bnone",
                "eagle-tp4-b8",
                "eagle-tp4-b16",
                "eagle-tp4-b64"
            ]
        );
        let s = &c.servers[3];
        assert_eq!((s.tp, s.mem_fraction), (1, Some(0.8)));
        assert_eq!(s.speculative.as_ref().unwrap().num_draft_tokens, Some(64));
        assert_eq!(s.args, vec!["--trust-remote-code"]);
        // 2 concurrency × 2 output lengths.
        assert_eq!(c.workloads.len(), 4);
        assert_eq!(c.results_dir, PathBuf::from("dir/results/t"));
    }

    #[test]
    fn duplicate_ids_unknown_placeholders_and_bad_baseline_point_at_the_value() {
        let text = format!("{HEAD}[[matrix]]\nid = \"same\"\ntp = [1, 2]\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(e.message.contains("used twice"), "{}", e.message);
        assert_eq!(e.line, 9);
        let text = format!("{HEAD}[[matrix]]\nid = \"x-{{gpu}}\"\n{WL}");
        assert!(campaign(&text)
            .unwrap_err()
            .message
            .contains("unknown placeholder"));
        let text = format!("{HEAD}[[server]]\nid = \"a\"\n[run]\nbaseline = \"b\"\n{WL}");
        let e = campaign(&text).unwrap_err();
        assert!(e.message.contains("ids: a"), "{}", e.message);
        assert_eq!(e.line, 11);
    }

    #[test]
    fn path_ids_and_repetitions_are_refused_at_their_line() {
        for (id, rule) in [
            ("..", "must not start with `.`"),
            (".", "must not start with `.`"),
            (".hidden", "must not start with `.`"),
            ("a/b", "may only use"),
        ] {
            let text = format!("{HEAD}[[server]]\nid = \"{id}\"\n{WL}");
            let e = campaign(&text).unwrap_err();
            assert!(e.message.contains(rule), "{id}: {}", e.message);
            assert!(e.message.contains(&format!("`{id}`")), "{}", e.message);
            assert_eq!(e.line, 9, "{id}");
        }
        let long = "x".repeat(300);
        let e = campaign(&format!("{HEAD}[[server]]\nid = \"{long}\"\n{WL}")).unwrap_err();
        assert!(e.message.contains("300 characters"), "{}", e.message);
        assert!(campaign(&format!(
            "{HEAD}[[server]]\nid = \"{}\"\n{WL}",
            "x".repeat(100)
        ))
        .is_ok());
        let e = campaign(&format!(
            "{HEAD}[[workload]]\nname = \"w\"\nconcurrency = []\nnum_requests = 8\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("concurrency = []"), "{}", e.message);
        let e = campaign(&format!(
            "{HEAD}[[workload]]\nname = \"w\"\nconcurrency = [1]\ninput_len = 1000000000000\nnum_requests = 8\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("1000000000000 tokens"), "{}", e.message);
        let e = campaign(&format!(
            "{HEAD}[[workload]]\nname = \"..\"\nconcurrency = [1]\nnum_requests = 8\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("workload name `..`"), "{}", e.message);
        let text = format!("{HEAD}{WL}").replacen(
            "name = \"t\"\n",
            "name = \"t\"\nresults_dir = \"${SERVEBENCH_UNSET_FOR_TEST}\"\n",
            1,
        );
        let e = campaign(&text).unwrap_err();
        assert!(
            e.message.contains("SERVEBENCH_UNSET_FOR_TEST"),
            "{}",
            e.message
        );
        assert_eq!(e.line, 3);
        let text = text.replace(
            "${SERVEBENCH_UNSET_FOR_TEST}",
            "${SERVEBENCH_UNSET_FOR_TEST:-out}",
        );
        assert_eq!(
            campaign(&text).unwrap().results_dir,
            PathBuf::from("dir/out/t")
        );
        let cmd = format!("{HEAD}{WL}").replace("kind = \"sglang\"", "kind = \"command\"");
        let e = campaign(&cmd).unwrap_err();
        assert!(e.message.contains("needs `executable`"), "{}", e.message);
        let url = format!("{HEAD}{WL}").replace(
            "kind = \"sglang\"",
            "kind = \"openai\"\nurl = \"http://h:1/v1?x=1#f\"",
        );
        let e = campaign(&url).unwrap_err();
        assert!(e.message.contains("without `?query`"), "{}", e.message);
        assert_eq!(e.line, 7);
        let e = campaign(&format!("{HEAD}[run]\nrepetitions = 0\n{WL}")).unwrap_err();
        assert!(e.message.contains("at least 1"), "{}", e.message);
        assert_eq!(e.line, 9);
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
    }

    #[test]
    fn cell_names_are_readable_and_distinct() {
        let c = campaign(&format!("{HEAD}[run]\nrepetitions = 2\n{WL}")).unwrap();
        let names: BTreeSet<String> = c.workloads.iter().map(|w| w.cell_name()).collect();
        assert_eq!(names.len(), 8);
        assert!(names.contains("w-in128-out1024-c4-rep1"));
    }
}
