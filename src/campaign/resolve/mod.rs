//! Raw campaign → resolved campaign ("high args"): defaults applied, matrices
//! expanded, every value validated and typed. Errors point at the value.
//!
//! This file holds the campaign-wide parts (model, engine, hardware, run
//! settings) and the path and environment helpers; server configurations
//! live in `servers` and workload points and searches in `workloads`.

mod builds;
mod servers;
mod workloads;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{CampaignError, RawCampaign, Repetitions, Source};
use crate::engine::EngineKind;
use crate::util::units::parse_duration;

pub use builds::{Build, ServerBuild};
pub use servers::ServerConfig;
pub use workloads::{ChecksFiles, PromptSource, Scenarios, Search, WorkloadPoint, MAX_TOKENS};

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
    /// The first 16 hex digits of `config`'s config.json SHA-256, read once
    /// when the campaign is loaded (part of every cell's identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_digest: Option<String>,
    /// The first 16 hex digits of the `tokenizer` file's SHA-256, read once
    /// when the campaign is loaded: it decides the text of exact-length
    /// prompts, so it is part of every cell's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_digest: Option<String>,
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
    /// The GPU model's canonical name (see `memory::gpus::GPUS`), or the
    /// name given for one the table lacks.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Declared memory bandwidth of one GPU, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_bandwidth: Option<f64>,
    /// Declared dense BF16 throughput of one GPU, FLOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_bf16_flops: Option<f64>,
    /// Use GPUs that other processes already hold memory on.
    #[serde(default)]
    pub use_busy_gpus: bool,
    /// Dollars one GPU costs an hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour_cost: Option<f64>,
}

impl Hardware {
    /// The GPU's figures for the plan: named, declared, or both.
    pub fn gpu_figures(&self) -> Option<crate::memory::gpus::GpuFigures> {
        crate::memory::gpus::figures(self.gpu.as_deref(), self.gpu_bandwidth, self.gpu_bf16_flops)
            .ok()
            .flatten()
    }
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
    /// Empty the engine's prefix cache before each cell.
    #[serde(default)]
    pub reset_prefix_cache: bool,
    /// Interval of each cell's timeline samples, ms; 0 = no timeline.
    #[serde(default = "default_sample_interval_ms")]
    pub sample_interval_ms: u64,
    /// Write the report files at the end of `run`.
    pub report: bool,
    /// What `run` measures.
    #[serde(default)]
    pub goal: super::Goal,
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
    /// `[[build]]` entries in declaration order (the order `bisect` walks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub builds: Vec<Build>,
    /// Server configs in declaration order (servers, then matrices).
    pub servers: Vec<ServerConfig>,
    /// Workload points in declaration order.
    pub workloads: Vec<WorkloadPoint>,
    /// SLO searches, one per searched workload point.
    pub searches: Vec<Search>,
    /// The scenarios the session workloads replay, by the name their points
    /// carry; read once at load, so the plan and the run see the same turns
    /// (not serialized: the points carry the name).
    #[serde(skip)]
    pub scenarios: Scenarios,
    /// The checks files' checks by path, read once at load like scenarios
    /// (not serialized: the points carry the path and its digest).
    #[serde(skip)]
    pub checks: ChecksFiles,
    /// Servers repeating an earlier server's settings exactly, with their
    /// place among the repeats (`servers::twin_ordinals`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub twins: BTreeMap<String, u32>,
    /// Run options.
    pub run: RunSettings,
    /// Where servers are started (not part of any cell's identity).
    #[serde(default)]
    pub launcher: super::launcher::Launcher,
    /// Environment variable holding the API key sent with every request
    /// (not part of any cell's identity: rotating a key changes no number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// `[engine] version_command`: how to ask the engine for its build,
    /// instead of its usual `--version` (not part of any cell's identity:
    /// the build it reports is compared instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version_command: Option<Vec<String>>,
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

/// A duration value, or `default` when absent.
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

/// `p` taken relative to `base` unless absolute, without `.` and `..`.
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

/// The campaign file's directory, `.` when it has none.
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

    let model = model_spec(&raw, src, &base)?;
    let engine = engine_spec(&raw, src, &base)?;

    let hardware = hardware(&raw, src)?;

    let builds = builds::resolve_builds(&raw, src, &base)?;
    let mut servers = servers::expand_servers(&raw, src, &builds)?;

    let run = run_settings(&raw, src, engine.kind)?;
    if run.reset_prefix_cache {
        if let Some((var, value)) = engine.kind.prefix_cache_reset().and_then(|r| r.enable_env) {
            // The engine serves its reset endpoint only with this set; a
            // value the campaign gives itself is left as it is.
            for s in &mut servers {
                s.env
                    .entry(var.to_string())
                    .or_insert_with(|| value.to_string());
            }
        }
    }
    check_baseline(&raw, src, &servers)?;

    let workloads::Expansion {
        points: workloads,
        searches,
        scenarios,
        checks,
    } = workloads::expand_workloads(&raw, src, run.repetitions)?;
    let launcher = match &raw.launcher {
        Some(l) => super::launcher::resolve(l.get_ref(), src, l.span().start)?,
        None => Default::default(),
    };
    let api_key_env = api_key_env(&raw, src)?;
    let twins = servers::twin_ordinals(&servers);
    Ok(Campaign {
        name,
        file: src.path.clone(),
        results_dir,
        description: raw.campaign.description.clone(),
        model,
        engine,
        hardware,
        builds,
        servers,
        workloads,
        searches,
        scenarios,
        checks,
        twins,
        run,
        launcher,
        api_key_env,
        engine_version_command: raw
            .engine
            .version_command
            .as_ref()
            .map(|v| v.get_ref().clone())
            .filter(|v| !v.is_empty()),
    })
}

/// The model, its paths relative to the campaign file, its config digested once.
fn model_spec(raw: &RawCampaign, src: &Source, base: &Path) -> Result<ModelSpec, CampaignError> {
    let model_path = expand_env(src, raw.model.path.span().start, raw.model.path.get_ref())?;
    let model = ModelSpec {
        served_name: raw.model.name.clone().unwrap_or_else(|| model_path.clone()),
        path: model_path,
        config: match &raw.model.config {
            Some(p) => Some(relative(
                base,
                &expand_env(src, p.span().start, p.get_ref())?,
            )),
            None => None,
        },
        tokenizer: match &raw.model.tokenizer {
            Some(p) => Some(relative(
                base,
                &expand_env(src, p.span().start, p.get_ref())?,
            )),
            None => None,
        },
        // Read by `load_campaign`, the one entry point that reads files.
        config_digest: None,
        tokenizer_digest: None,
    };
    Ok(model)
}

/// The engine, with what its kind requires (`url`, `executable`) checked.
fn engine_spec(raw: &RawCampaign, src: &Source, base: &Path) -> Result<EngineSpec, CampaignError> {
    let engine = EngineSpec {
        kind: raw.engine.kind,
        executable: match &raw.engine.executable {
            Some(exe) => exe
                .get_ref()
                .iter()
                .map(|a| expand_env(src, exe.span().start, a).map(|a| resolve_script(base, a)))
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
            Some(u) if !(u.get_ref().starts_with("http://") || u.get_ref().starts_with("https://")) => {
                return Err(src.error(u, "url must start with http:// or https://"))
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
    Ok(engine)
}

/// A GPU-hour price above this is a typo (a month's price, cents).
const MAX_GPU_HOUR_COST: f64 = 1000.0;

/// The hardware: GPUs in the pool, their memory and speed figures.
fn hardware(raw: &RawCampaign, src: &Source) -> Result<Hardware, CampaignError> {
    let gpu_bandwidth = match &raw.hardware.gpu_bandwidth {
        None => None,
        Some(b) => {
            Some(crate::memory::gpus::parse_bandwidth(b.get_ref()).map_err(|e| src.error(b, e))?)
        }
    };
    let gpu_bf16_flops = match &raw.hardware.gpu_bf16_tflops {
        None => None,
        Some(t) if *t.get_ref() > 0.0 && t.get_ref().is_finite() => Some(t.get_ref() * 1e12),
        Some(t) => {
            return Err(src.error(
                t,
                format!(
                    "gpu_bf16_tflops must be a positive number, got {}",
                    t.get_ref()
                ),
            ))
        }
    };
    let gpu_name = raw.hardware.gpu.as_ref().map(|g| g.get_ref().as_str());
    crate::memory::gpus::figures(gpu_name, gpu_bandwidth, gpu_bf16_flops).map_err(
        |e| match &raw.hardware.gpu {
            Some(g) => src.error(g, e),
            None => src.error_at(0, e),
        },
    )?;
    let gpu = gpu_name.and_then(crate::memory::gpus::gpu_by_name);
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
        gpu: gpu
            .map(|g| g.names[0].to_string())
            .or_else(|| gpu_name.map(str::to_string)),
        gpu_bandwidth,
        gpu_bf16_flops,
        use_busy_gpus: raw.hardware.use_busy_gpus,
        gpu_hour_cost: match &raw.hardware.gpu_hour_cost {
            None => None,
            Some(c) if *c.get_ref() > 0.0 && *c.get_ref() <= MAX_GPU_HOUR_COST => Some(*c.get_ref()),
            Some(c) => {
                return Err(src.error(
                    c,
                    format!(
                        "gpu_hour_cost is dollars per GPU-hour, above 0 and at most {MAX_GPU_HOUR_COST}, got {}",
                        c.get_ref()
                    ),
                ))
            }
        },
    };
    Ok(hardware)
}

/// The `[run]` settings with their defaults, checked.
fn run_settings(
    raw: &RawCampaign,
    src: &Source,
    kind: EngineKind,
) -> Result<RunSettings, CampaignError> {
    Ok(RunSettings {
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
            if kind == EngineKind::Sim {
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
        goal: raw.run.goal.as_ref().map(|g| *g.get_ref()).unwrap_or_default(),
        reset_prefix_cache: match &raw.run.reset_prefix_cache {
            Some(r) if *r.get_ref() && kind.prefix_cache_reset().is_none() => {
                return Err(src.error(
                    r,
                    format!(
                        "reset_prefix_cache: {kind} offers no endpoint that empties its prefix cache (vllm: POST /reset_prefix_cache, sglang: /flush_cache, sim: both)"
                    ),
                ))
            }
            Some(r) => *r.get_ref(),
            None => false,
        },
        sample_interval_ms: match &raw.run.sample_interval_ms {
            None => default_sample_interval_ms(),
            Some(n) if *n.get_ref() != 0 && !(MIN_SAMPLE_MS..=MAX_SAMPLE_MS).contains(n.get_ref()) => {
                return Err(src.error(
                    n,
                    format!(
                        "sample_interval_ms is between {MIN_SAMPLE_MS} and {MAX_SAMPLE_MS} ms, or 0 for no timeline"
                    ),
                ))
            }
            Some(n) => *n.get_ref(),
        },
        report: raw.run.report.unwrap_or(true),
    })
}

/// Timeline samples every 250 ms unless the campaign says otherwise.
fn default_sample_interval_ms() -> u64 {
    250
}

/// The shortest sampling interval: scrapes more often would load the engine.
const MIN_SAMPLE_MS: u64 = 50;
/// The longest: a minute between samples shows nothing of a cell.
const MAX_SAMPLE_MS: u64 = 60_000;

/// The baseline, when named, is one of the servers.
fn check_baseline(
    raw: &RawCampaign,
    src: &Source,
    servers: &[ServerConfig],
) -> Result<(), CampaignError> {
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
    Ok(())
}

/// The environment variable that holds the API key, when named: a name, never a key.
fn api_key_env(raw: &RawCampaign, src: &Source) -> Result<Option<String>, CampaignError> {
    Ok(match &raw.engine.api_key_env {
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
    })
}

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

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    /// Parses and resolves `text` as if read from `dir/c.toml`.
    pub(super) fn campaign(text: &str) -> Result<Campaign, CampaignError> {
        let (raw, src) = parse(Path::new("dir/c.toml"), text)?;
        resolve(raw, &src)
    }

    /// Campaign, model and engine tables every test campaign starts with.
    pub(super) const HEAD: &str = "[campaign]\nname = \"t\"\n[model]\npath = \"m\"\n[engine]\nkind = \"sglang\"\nargs = [\"--trust-remote-code\"]\n";
    /// One closed-loop workload of 2 concurrencies × 2 output lengths.
    pub(super) const WL: &str = "[[workload]]\nname = \"w\"\nconcurrency = [1, 4]\noutput_len = [256, 1024]\nnum_requests = 8\n";

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
}
