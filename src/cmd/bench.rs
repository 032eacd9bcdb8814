//! `servebench bench`: one-shot load against a running endpoint.
//!
//! Resolves the raw arguments, checks that the endpoint answers, runs each
//! load level in turn through the driver, prints a summary table and writes
//! the versioned result file (see `schema/bench-result.schema.json`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::cli::BenchArgs;
use crate::client::openai::Api;
use crate::client::Endpoint;
use crate::load::driver::{HttpExecutor, LevelPlan, StopCondition};
use crate::load::schedule::LoadShape;
use crate::load::workloads::{Prompts, SourceSpec};
use crate::metrics::level::LevelSummary;
use crate::runner::measure::{measure_level, LevelJob};
use crate::util::fsx;
use crate::util::table;
use crate::util::units::{parse_duration, parse_list, parse_slo, Slo};

mod expect;
pub mod vllm_dialect;

/// Version of the bench result file layout.
pub const BENCH_SCHEMA_VERSION: u32 = 1;

/// What was loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Base URL.
    pub url: String,
    /// API flavour.
    pub api: Api,
    /// Served model name.
    pub model: String,
}

/// The workload settings a bench run used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchSettings {
    /// Prompt words of synthetic text.
    pub input_len: u64,
    /// Output tokens per request.
    pub output_len: u64,
    /// Whether exact output length was forced.
    pub ignore_eos: bool,
    /// Measured requests per level.
    pub num_requests: Option<u64>,
    /// Dispatch window per level, s.
    pub duration_s: Option<f64>,
    /// Warm-up requests per level.
    pub warmup: u64,
    /// Seed.
    pub seed: u64,
    /// Per-request limit, s.
    pub request_timeout_s: f64,
    /// What the prompts were, in words; empty in files written before it
    /// was recorded.
    #[serde(default)]
    pub prompts: String,
}

/// The `--output` file of `servebench bench`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// Layout version of this file.
    pub schema_version: u32,
    /// servebench version that wrote it.
    pub tool_version: String,
    /// The endpoint.
    pub target: Target,
    /// RFC 3339 start time.
    pub started_at: String,
    /// One sentence per metric.
    pub definitions: BTreeMap<String, String>,
    /// Workload settings.
    pub settings: BenchSettings,
    /// One entry per load level, in the order run.
    pub levels: Vec<LevelSummary>,
}

/// Resolved, validated bench settings ("high args").
struct Resolved {
    prompts: Prompts,
    shapes: Vec<LoadShape>,
    stop: StopCondition,
    /// No count or duration given for a scenario: one session per concurrent user.
    sessions_once: bool,
    slos: Vec<Slo>,
    request_timeout: Duration,
}

fn resolve(a: &BenchArgs) -> anyhow::Result<Resolved> {
    // Refused now, not after the measurement it would have held.
    if let Some(out) = &a.output {
        fsx::check_replaceable(out).map_err(|e| anyhow::anyhow!("--output: {e}"))?;
    }
    let shapes = match (&a.concurrency, &a.request_rate) {
        (None, None) if a.trace.is_some() => parse_list(&a.time_scale, |s| {
            let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("time scale `{s}` must be positive"));
            }
            Ok(LoadShape::Replay {
                time_scale: v,
                max_concurrency: a.max_concurrency,
            })
        })
        .map_err(|e| anyhow::anyhow!("--time-scale: {e}"))?,
        (Some(c), None) => parse_list(c, |s| {
            let v: u32 = s
                .parse()
                .map_err(|_| format!("`{s}` is not a whole number"))?;
            if v == 0 {
                return Err("concurrency must be at least 1".into());
            }
            Ok(LoadShape::Concurrency { value: v })
        })
        .map_err(|e| anyhow::anyhow!("--concurrency: {e}"))?,
        (None, Some(r)) => parse_list(r, |s| {
            let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("rate `{s}` must be positive"));
            }
            Ok(LoadShape::Rate {
                value: v,
                arrival: a.arrival,
                burstiness: a.burstiness,
                max_concurrency: a.max_concurrency,
            })
        })
        .map_err(|e| anyhow::anyhow!("--request-rate: {e}"))?,
        (None, None) => bail!("give --concurrency LIST, --request-rate LIST or --trace FILE"),
        (Some(_), Some(_)) => bail!("give either --concurrency or --request-rate, not both"),
    };
    if a.burstiness <= 0.0 || !a.burstiness.is_finite() {
        bail!("--burstiness must be positive, got {}", a.burstiness);
    }
    let duration = a
        .duration
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    if duration == Some(Duration::ZERO) {
        bail!("--duration must be longer than zero, e.g. 30s");
    }
    for shape in &shapes {
        match shape {
            LoadShape::Concurrency { value } => {
                crate::load::check_concurrency(u64::from(*value))
                    .map_err(|e| anyhow::anyhow!("--concurrency: {e}"))?;
            }
            LoadShape::Rate { value, .. } => {
                crate::load::schedule::check_rate_within(*value, duration)
                    .map_err(|e| anyhow::anyhow!("--request-rate: {e}"))?;
            }
            // The trace's own settings are checked with the trace.
            LoadShape::Replay { .. } => {}
        }
    }
    if let Some(cap) = a.max_concurrency {
        if cap == 0 {
            bail!("--max-concurrency must be at least 1");
        }
        crate::load::check_concurrency(u64::from(cap))
            .map_err(|e| anyhow::anyhow!("--max-concurrency: {e}"))?;
    }
    let stop = StopCondition {
        max_requests: a.num_requests,
        max_duration: duration,
    };
    // A scenario is a finite script: by default each level's users play it once.
    let sessions_once = a.scenario.is_some() && stop.max_requests.is_none() && duration.is_none();
    // A trace is finite (and its replay bounded in rows).
    let stop = StopCondition {
        max_requests: stop.max_requests.or(a
            .trace
            .is_some()
            .then_some(crate::workload::trace::MAX_REQUESTS)),
        ..stop
    };
    let check = StopCondition {
        max_requests: stop.max_requests.or(sessions_once.then_some(1)),
        ..stop
    };
    check
        .validate()
        .map_err(|e| anyhow::anyhow!("{e}: give --num-requests and/or --duration"))?;
    if a.output_len == 0 {
        bail!("--output-len must be at least 1");
    }
    // Prompts are built in memory before the first request: an absurd
    // length would exhaust memory rather than reach the server.
    let max = crate::campaign::resolve::MAX_TOKENS;
    for (flag, n) in [("--input-len", a.input_len), ("--output-len", a.output_len)] {
        if n > max {
            bail!("{flag} {n} is beyond any model's context; lengths are limited to {max} tokens");
        }
    }
    let slos = a
        .slo
        .iter()
        .map(|s| parse_slo(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("--slo: {e}"))?;
    let request_timeout = parse_duration(&a.request_timeout)
        .map_err(|e| anyhow::anyhow!("--request-timeout: {e}"))?;
    let prompts = resolve_prompts(a)?;
    Ok(Resolved {
        prompts,
        shapes,
        stop,
        sessions_once,
        slos,
        request_timeout,
    })
}

/// Check a bench command line the way `run` does, without sending traffic.
pub fn check_args(a: &BenchArgs) -> anyhow::Result<()> {
    resolve(a).map(|_| ())
}

fn resolve_prompts(a: &BenchArgs) -> anyhow::Result<Prompts> {
    if let Some(path) = &a.trace {
        let seconds = super::seconds_flag;
        let settings = crate::workload::trace::ReplaySettings {
            // Each level sets its own; the first is checked here.
            time_scale: 1.0,
            max_idle_gap_s: seconds("--max-idle-gap", &a.max_idle_gap)?,
            start_s: seconds("--trace-start", &a.trace_start)?.unwrap_or(0.0),
            end_s: seconds("--trace-end", &a.trace_end)?,
            max_requests: a.num_requests,
            block_size: a.block_size,
            length_scale: a.length_scale,
            output_scale: a.output_scale,
            max_context: a.max_context,
        };
        settings
            .validate()
            .map_err(|e| anyhow::anyhow!("--trace: {e}"))?;
        let format = a
            .trace_format
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: crate::workload::WorkloadError| anyhow::anyhow!("--trace-format: {e}"))?;
        if !path.is_file() {
            bail!("--trace {}: no such file", path.display());
        }
        return Ok(Prompts::Trace(std::sync::Arc::new(
            crate::load::workloads::TraceSpec {
                path: path.clone(),
                format,
                settings,
            },
        )));
    }
    let given = [
        a.prompt_kind.is_some(),
        a.dataset.is_some(),
        a.scenario.is_some(),
    ];
    if given.iter().filter(|g| **g).count() > 1 {
        bail!("give at most one of --prompt-kind, --dataset and --scenario");
    }
    if let Some(k) = &a.prompt_kind {
        let sel = k
            .parse()
            .map_err(|e| anyhow::anyhow!("--prompt-kind: {e}"))?;
        return Ok(Prompts::Kinds(sel));
    }
    if let Some(path) = &a.dataset {
        let format = match a.dataset_format {
            Some(f) => f,
            None => crate::workload::DatasetFormat::from_path(path)
                .map_err(|e| anyhow::anyhow!("--dataset: {e}"))?,
        };
        return Ok(Prompts::Dataset {
            path: path.clone(),
            format,
            filter: Default::default(),
        });
    }
    if let Some(s) = &a.scenario {
        if a.api != Api::Chat {
            bail!("--scenario needs --api chat: each turn carries the conversation so far");
        }
        let sc =
            crate::workload::session::resolve(s).map_err(|e| anyhow::anyhow!("--scenario: {e}"))?;
        return Ok(Prompts::Scenario(std::sync::Arc::new(sc)));
    }
    Ok(Prompts::Synthetic {
        input_len: a.input_len,
        shared_prefix: a.shared_prefix,
    })
}

/// Ask the endpoint which model it serves, failing clearly when it is unreachable.
pub async fn discover_model(endpoint: &Endpoint, wanted: Option<&str>) -> anyhow::Result<String> {
    let url = format!("{}/v1/models", endpoint.base_url());
    let (status, body) = endpoint
        .get("/v1/models", Duration::from_secs(15))
        .await
        .map_err(|f| anyhow::anyhow!("cannot reach {url}: {}", f.detail))?;
    if let Some(m) = wanted {
        return Ok(m.to_string());
    }
    if status != 200 {
        bail!("{url} answered HTTP {status}; pass --model explicitly");
    }
    let v: serde_json::Value =
        serde_json::from_slice(&body).with_context(|| format!("{url} returned invalid JSON"))?;
    v["data"][0]["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("{url} lists no model; pass --model explicitly"))
}

/// The stop condition of one level: as given, or for a scenario with none
/// given, one session per concurrent user (one for a rate level).
fn level_stop(r: &Resolved, shape: &LoadShape) -> StopCondition {
    if !r.sessions_once {
        return r.stop;
    }
    let users = match shape {
        LoadShape::Concurrency { value } => u64::from(*value),
        LoadShape::Rate { .. } | LoadShape::Replay { .. } => 1,
    };
    StopCondition {
        max_requests: Some(users),
        ..r.stop
    }
}

/// How a bench run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchEnd {
    /// Every request completed and every level's numbers are believable.
    AllOk,
    /// Some request failed or some level was judged suspicious.
    SomeFailed,
    /// A signal stopped the run; finished levels were written.
    Interrupted,
}

/// What structured prompts change in the settings: tool calls and
/// constrained answers end where their grammar does, so their length is
/// never forced; a tool choice needs requests that offer tools.
fn structured_settings(args: &mut BenchArgs, prompts: &Prompts) -> anyhow::Result<()> {
    args.ignore_eos &= !prompts.is_structured();
    if args.tool_choice.is_some() && !prompts.offers_tools() {
        bail!("--tool-choice applies to requests that offer tools (--prompt-kind tool-call, a scenario with tools)");
    }
    Ok(())
}

/// Run `servebench bench`; says whether every request succeeded believably.
pub async fn run(mut args: BenchArgs, cancel: CancellationToken) -> anyhow::Result<BenchEnd> {
    vllm_dialect::apply(&mut args)?;
    let r = resolve(&args)?;
    structured_settings(&mut args, &r.prompts)?;
    let expected = args.expect.as_deref().map(read_expected).transpose()?;
    if let (Some(path), Some(old)) = (&args.expect, &expected) {
        let asked = expect::Asked {
            prompts: &prompts_text(&r.prompts),
            seed: args.seed,
            output_len: args.output_len,
            ignore_eos: args.ignore_eos,
            api: args.api,
        };
        if let Some(w) = expect::comparable(&path.display().to_string(), old, &asked)? {
            eprintln!("warning: {w}");
        }
    }
    let key = crate::util::secret::api_key(args.api_key.as_deref(), args.api_key_env.as_deref())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let url = args.url.as_deref().unwrap_or_default();
    let endpoint = Endpoint::new(url, args.api)?.with_api_key(key.as_deref())?;
    let model = discover_model(&endpoint, args.model.as_deref()).await?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let executor = Arc::new(HttpExecutor {
        endpoint: endpoint.clone(),
        request_timeout: r.request_timeout,
    });
    let mut levels = Vec::new();
    for (i, shape) in r.shapes.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let stop = level_stop(&r, shape);
        let spec = SourceSpec {
            api: args.api,
            model: model.clone(),
            output_len: args.output_len,
            ignore_eos: args.ignore_eos,
            tool_choice: args.tool_choice,
            seed: args.seed.wrapping_add(i as u64),
            prompts: at_scale(&r.prompts, shape),
            first_unit: 0,
            tokenizer: args.tokenizer.clone(),
            count: stop.max_requests.map(|n| n.saturating_add(args.warmup)),
            probe_timeout: r.request_timeout.min(std::time::Duration::from_secs(60)),
        };
        let job = LevelJob {
            source: spec,
            plan: LevelPlan {
                shape: *shape,
                stop,
                warmup: args.warmup,
                seed: args.seed.wrapping_add(i as u64),
                first_index: 0,
            },
            slos: &r.slos,
            label: format!("[{}/{}] {shape}", i + 1, r.shapes.len()),
            campaign: None,
            resume: None,
            live: Default::default(),
        };
        let label = job.label.clone();
        let mut summary = measure_level(executor.clone(), job, &cancel)
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        // The judgment `run` gives a cell; bench has no engine counters.
        summary.suspicious =
            crate::store::judgment::judge(&summary, args.ignore_eos, None).suspicions;
        eprintln!("{}", level_line(&label, &summary));
        if let Some(p) = &summary.predicted_reuse {
            let served = p.reported_cached_tokens.map_or(
                "the server reported no cached tokens".to_string(),
                |t| {
                    format!(
                        "{:.1} % served from the server's cache",
                        t as f64 / p.prompt_tokens as f64 * 100.0
                    )
                },
            );
            eprintln!(
                "  prefix cache: {served}, {:.1} % predicted by the trace's block ids (infinite cache, {} requests)",
                p.hit_rate * 100.0,
                p.requests
            );
        }
        for w in &summary.client.warnings {
            eprintln!("  warning: {w}");
        }
        for w in &summary.suspicious {
            eprintln!("  suspicious: {w}");
        }
        levels.push(summary);
    }
    let result = BenchResult {
        schema_version: BENCH_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        target: Target {
            url: endpoint.base_url().to_string(),
            api: args.api,
            model,
        },
        started_at,
        definitions: crate::metrics::definitions()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        settings: BenchSettings {
            input_len: args.input_len,
            output_len: args.output_len,
            ignore_eos: args.ignore_eos,
            num_requests: r.stop.max_requests,
            duration_s: r.stop.max_duration.map(|d| d.as_secs_f64()),
            warmup: args.warmup,
            seed: args.seed,
            request_timeout_s: r.request_timeout.as_secs_f64(),
            prompts: prompts_text(&r.prompts),
        },
        levels,
    };
    print!("{}", summary_table(&result.levels));
    print!("{}", goodput_lines(&result.levels));
    print!("{}", vllm_dialect::percentile_lines(&args, &result.levels)?);
    let mut answers_ok = true;
    if let (Some(path), Some(old)) = (&args.expect, &expected) {
        let (lines, ok) = expect::judge(&path.display().to_string(), old, &result);
        for l in lines {
            println!("{l}");
        }
        answers_ok = ok;
    }
    if let Some(path) = &args.output {
        write_result(path, &result)?;
        eprintln!("wrote {}", path.display());
    }
    if cancel.is_cancelled() {
        eprintln!("interrupted; results of finished levels were written");
        return Ok(BenchEnd::Interrupted);
    }
    let all_ok = answers_ok
        && result
            .levels
            .iter()
            .all(|l| l.failed == 0 && l.suspicious.is_empty());
    Ok(if all_ok {
        BenchEnd::AllOk
    } else {
        BenchEnd::SomeFailed
    })
}

/// A trace's prompts at a replay level's time scale; others as they are.
fn at_scale(p: &Prompts, shape: &LoadShape) -> Prompts {
    match (p, shape) {
        (Prompts::Trace(t), LoadShape::Replay { time_scale, .. }) => {
            let mut t = (**t).clone();
            t.settings.time_scale = *time_scale;
            Prompts::Trace(std::sync::Arc::new(t))
        }
        _ => p.clone(),
    }
}

/// The prompts in words, for the result file and `--expect`.
fn prompts_text(p: &Prompts) -> String {
    match p {
        Prompts::Synthetic {
            input_len,
            shared_prefix,
        } => format!("synthetic, {input_len} tokens, {shared_prefix} shared"),
        Prompts::Kinds(sel) => format!("prompt kinds {sel}"),
        Prompts::Dataset { path, format, .. } => {
            format!("dataset {} ({format:?})", path.display())
        }
        Prompts::Scenario(sc) => format!("scenario {}", sc.name),
        Prompts::Checks { path, .. } => format!("checks {}", path.display()),
        Prompts::Trace(t) => format!(
            "trace {} ({})",
            t.path.display(),
            serde_json::to_string(&t.settings).unwrap_or_default()
        ),
    }
}

/// An earlier bench result, read before any load is sent.
fn read_expected(path: &Path) -> anyhow::Result<BenchResult> {
    let bytes = std::fs::read(path).with_context(|| format!("--expect {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "--expect {}: not a `servebench bench --output` file",
            path.display()
        )
    })
}

/// Write a bench result atomically as pretty JSON.
pub fn write_result(path: &Path, result: &BenchResult) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(result)?;
    fsx::write_atomic(path, &bytes).context("bench result")
}

fn level_line(label: &str, s: &LevelSummary) -> String {
    let p50 = |v: &Option<crate::metrics::stats::Stats>| table::num(v.map(|s| s.p50), 1);
    let mut line = format!(
        "{label}: {} ok, {} failed in {:.1}s; {:.1} out tok/s; TTFT p50 {} ms; TPOT p50 {} ms",
        s.completed,
        s.failed,
        s.duration_s,
        s.output_throughput_tok_s,
        p50(&s.latency.ttft_ms),
        p50(&s.latency.tpot_ms)
    );
    if !s.failures_by_class.is_empty() {
        let f: Vec<String> = s
            .failures_by_class
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        line.push_str(&format!(" (failures: {})", f.join(", ")));
    }
    line
}

/// Goodput and attainment of every level against every `--slo`: the
/// requests that met every bound per second, their share of all requests
/// sent (failures count against it), and whether that share reaches the
/// SLO's attainment (90 % unless it names one).
pub fn goodput_lines(levels: &[LevelSummary]) -> String {
    let mut out = String::new();
    for s in levels {
        for g in &s.goodput {
            let need = g.slo.attainment_needed();
            let verdict = if g.share + 1e-9 >= need {
                "meets the SLO"
            } else {
                "misses the SLO"
            };
            out.push_str(&format!(
                "goodput at {} ({}): {:.2} req/s; attainment {:.1} % ({} of {} requests met every bound): {verdict} at {:.0} %\n",
                s.load,
                g.slo,
                g.rate_rps,
                g.share * 100.0,
                g.good_requests,
                s.completed + s.failed,
                need * 100.0
            ));
        }
    }
    out
}

/// The end-of-run summary table, one row per level.
pub fn summary_table(levels: &[LevelSummary]) -> String {
    let header = [
        "load",
        "ok",
        "failed",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "ITL/tok p50",
        "E2E p50",
    ];
    let rows: Vec<Vec<String>> = levels
        .iter()
        .map(|s| {
            let p = |v: &Option<crate::metrics::stats::Stats>,
                     f: fn(&crate::metrics::stats::Stats) -> f64| {
                table::num(v.as_ref().map(f), 1)
            };
            vec![
                s.load.to_string(),
                s.completed.to_string(),
                s.failed.to_string(),
                format!("{:.2}", s.request_throughput_rps),
                format!("{:.1}", s.output_throughput_tok_s),
                p(&s.latency.ttft_ms, |x| x.p50),
                p(&s.latency.ttft_ms, |x| x.p99),
                p(&s.latency.tpot_ms, |x| x.p50),
                p(&s.latency.itl_per_token_ms, |x| x.p50),
                p(&s.latency.e2e_ms, |x| x.p50),
            ]
        })
        .collect();
    format!("latencies in ms\n{}", table::render(&header, &rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> BenchArgs {
        let mut v = vec!["servebench", "bench", "--url", "http://127.0.0.1:1"];
        v.extend(extra);
        match crate::cli::Cli::try_parse_from(v).unwrap().command {
            crate::cli::Command::Bench(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_scenario_without_a_count_plays_once_per_concurrent_user() {
        let scenario = [
            "--scenario",
            "calculator",
            "--api",
            "chat",
            "--concurrency",
            "1,4",
        ];
        let r = resolve(&args(&scenario)).unwrap();
        let counts: Vec<Option<u64>> = r
            .shapes
            .iter()
            .map(|s| level_stop(&r, s).max_requests)
            .collect();
        assert_eq!(counts, [Some(1), Some(4)]);
        // A count given is the count of sessions at every level.
        let r = resolve(&args(&[&scenario[..], &["--num-requests", "2"]].concat())).unwrap();
        assert!(r
            .shapes
            .iter()
            .all(|s| level_stop(&r, s).max_requests == Some(2)));
        // Synthetic prompts still need a bound.
        let e = resolve(&args(&["--concurrency", "1"]))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--num-requests"), "{e}");
    }

    #[test]
    fn dataset_format_flag_overrides_the_extension_and_rejects_unknown_formats() {
        use crate::workload::DatasetFormat;
        let format = |extra: &[&str]| match resolve_prompts(&args(extra)).unwrap() {
            Prompts::Dataset { format, .. } => format,
            other => panic!("{other:?}"),
        };
        assert_eq!(format(&["--dataset", "d.json"]), DatasetFormat::Sharegpt);
        assert_eq!(
            format(&["--dataset", "d.json", "--dataset-format", "jsonl"]),
            DatasetFormat::Jsonl
        );
        let argv = [
            "servebench",
            "bench",
            "--url",
            "http://127.0.0.1:1",
            "--dataset",
            "d.csv",
            "--dataset-format",
            "csv",
        ];
        let e = crate::cli::Cli::try_parse_from(argv)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--dataset-format") && e.contains("sharegpt, jsonl"),
            "{e}"
        );
    }
}
