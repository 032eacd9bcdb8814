//! Command-line arguments as typed by the user ("low args"); no logic here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::client::openai::Api;
use crate::load::schedule::Arrival;
use crate::memory::{EngineRule, KvCacheDtype};
use crate::sim::SimConfig;

/// servebench: benchmark campaigns against LLM serving engines.
#[derive(Debug, Parser)]
#[command(name = "servebench", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented example campaign.
    Init(InitArgs),
    /// Expand a campaign, check feasibility and show every cell with its verdict and ETA.
    Plan(PlanArgs),
    /// Run a campaign: launch each server once, measure its cells, resume from stored results.
    Run(RunArgs),
    /// One-shot load against an already running OpenAI-compatible endpoint.
    Bench(Box<BenchArgs>),
    /// Run the built-in simulated OpenAI-compatible server.
    // A flag given twice takes its last value: a server's own args override
    // the engine's args they follow.
    #[command(args_override_self = true)]
    Sim(SimArgs),
    /// Estimate GPU memory, KV capacity and feasibility of one server config.
    Memory(MemoryArgs),
    /// Read an engine's server log and print the facts that explain results.
    Logs(LogsArgs),
    /// Tables and charts from a campaign's stored results (never re-measures).
    Report(ReportArgs),
    /// Compare two result sets and flag regressions beyond noise (exit code 3).
    Compare(CompareArgs),
    /// Find the first engine build, in order, where a cell's metric or its
    /// answers changed, measuring about log2(N) of N builds.
    Bisect(BisectArgs),
    /// A production trace's shape, without a server: rows, duration, rate
    /// over time, lengths and the prefix reuse its block ids predict.
    Trace(TraceArgs),
}

/// Arguments of `servebench trace`.
#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    /// The trace file (Mooncake JSONL, Azure or BurstGPT CSV).
    pub file: PathBuf,
    /// The trace's format (mooncake, azure, burstgpt); detected when not given.
    #[arg(long)]
    pub format: Option<String>,
    /// Prompt tokens per hash id in the trace.
    #[arg(long, default_value_t = crate::workload::trace::DEFAULT_BLOCK_SIZE)]
    pub block_size: u64,
    /// The engine's cache block in tokens (vLLM 16 by default): the
    /// predicted reuse also cut to whole blocks of it.
    #[arg(long)]
    pub cache_block: Option<u64>,
    /// Trace time at which to start, e.g. 10m.
    #[arg(long)]
    pub trace_start: Option<String>,
    /// Trace time at which to stop (exclusive).
    #[arg(long)]
    pub trace_end: Option<String>,
    /// Most requests to read.
    #[arg(long)]
    pub num_requests: Option<u64>,
    /// Factor on the prompt lengths and the block size.
    #[arg(long, default_value_t = 1.0)]
    pub length_scale: f64,
    /// Window of the rate over time, e.g. 30s (chosen from the span when not given).
    #[arg(long)]
    pub window: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `servebench logs`.
#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    /// The server log file.
    pub file: PathBuf,
    /// Which engine wrote it.
    #[arg(long, value_enum)]
    pub engine: LogEngineArg,
    /// Print JSON instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// Engines whose logs can be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogEngineArg {
    /// SGLang.
    Sglang,
    /// vLLM.
    Vllm,
    /// llama.cpp.
    Llamacpp,
    /// The built-in simulator.
    Sim,
}

/// Arguments of `servebench report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A campaign's results directory (the one holding `cells/`), e.g. results/quickstart.
    pub results_dir: PathBuf,
    /// Formats to produce; `table` prints every point to the terminal, the others are files.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "md,csv,json,html"
    )]
    pub format: Vec<crate::report::Format>,
    /// Print every point as a table before the answer (as `--format table` does).
    #[arg(long)]
    pub table: bool,
    /// Where to write the files (default: RESULTS_DIR).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Server id speedups are computed against (default: the one in RESULTS_DIR/campaign.json).
    #[arg(long)]
    pub baseline: Option<String>,
    /// Rank a config for a workload family it crashed in (by default it is left out of that family's recommendations).
    #[arg(long)]
    pub include_crashed: bool,
    /// Draw the timeline of this cell too (`SERVER/CELL`, repeatable), or of every cell (`all`); the cells the answer rests on are always drawn.
    #[arg(long = "timeline", value_name = "SERVER/CELL")]
    pub timelines: Vec<String>,
}

/// Arguments of `servebench compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Results directory of the reference run.
    pub base_dir: PathBuf,
    /// Results directory of the run under test.
    pub new_dir: PathBuf,
    /// Smallest relative change ever flagged (0.1 = 10%).
    #[arg(long, default_value_t = 0.1)]
    pub threshold: f64,
}

/// Arguments of `servebench bisect`.
#[derive(Debug, Clone, Args)]
pub struct BisectArgs {
    /// The campaign file, whose `[[build]]`s are bisected.
    pub campaign: PathBuf,
    /// The builds in order (default: the `[[build]]` order).
    #[arg(long, value_delimiter = ',', value_name = "A,B,…")]
    pub builds: Vec<String>,
    /// A build known to be good (default: the first).
    #[arg(long)]
    pub good: Option<String>,
    /// A build known to be bad (default: the last).
    #[arg(long)]
    pub bad: Option<String>,
    /// A server of the config bisected, on any build (default: the only
    /// config the campaign runs on several builds).
    #[arg(long)]
    pub server: Option<String>,
    /// The cell watched, e.g. `chat-in64-out32-c4` (default: the campaign's only one).
    #[arg(long)]
    pub cell: Option<String>,
    /// What to watch: `answers`, a metric `compare` judges (output_tok_s,
    /// decode_tok_s_p50, ttft_p50_ms, ttft_p99_ms, tpot_p50_ms), or an engine
    /// counter (engine:prefix_cache_hits, engine:prefix_cache_queries,
    /// engine:prompt_tokens, engine:generation_tokens).
    #[arg(long, default_value = "output_tok_s")]
    pub watch: String,
    /// Smallest relative change of a metric that counts (0.1 = 10%), as in `compare`.
    #[arg(long, default_value_t = 0.1)]
    pub threshold: f64,
}

/// Arguments of `servebench init`.
#[derive(Debug, Clone, Args)]
pub struct InitArgs {
    /// Engine of the example.
    #[arg(long, value_enum, default_value = "sim")]
    pub engine: InitEngine,
    /// Where to write it (refuses to overwrite).
    #[arg(long, default_value = "campaign.toml")]
    pub output: PathBuf,
}

/// Engines with an example campaign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InitEngine {
    /// The built-in simulator (runs anywhere).
    Sim,
    /// llama.cpp with a small GGUF model.
    Llamacpp,
    /// SGLang on an 8-GPU box, hybrid model, speculative budget sweep.
    Sglang,
    /// vLLM with speculative decoding.
    Vllm,
}

/// Cell selection shared by `plan` and `run`.
#[derive(Debug, Clone, Default, Args)]
pub struct SelectArgs {
    /// Only cells matching KEY=PATTERN (tp=1, server=ddtree-*, workload=context, method=eagle, ...); repeatable, all must match.
    #[arg(long)]
    pub only: Vec<String>,
    /// Measure every selected cell again, even if stored.
    #[arg(long)]
    pub force: bool,
    /// Measure stored failed, partial and suspicious cells again.
    #[arg(long)]
    pub rerun_failed: bool,
    /// Launch again a server that crashed on the last run (by default its
    /// remaining cells are skipped with the crash as the reason).
    #[arg(long)]
    pub retry_crashed: bool,
    /// Keep stored cells measured on another engine build (by default an
    /// engine upgrade makes them stale).
    #[arg(long)]
    pub reuse_across_versions: bool,
    /// Results of an earlier campaign with the same model and engine (a results directory or one campaign's folder): ETAs learn from its cells; repeatable.
    #[arg(long, value_name = "DIR")]
    pub prior_results: Vec<PathBuf>,
}

/// Arguments of `servebench plan`.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// The campaign file.
    pub campaign: PathBuf,
    /// Cell selection.
    #[command(flatten)]
    pub select: SelectArgs,
    /// Show each server's launch command.
    #[arg(long)]
    pub show_commands: bool,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    /// Plan for `run --parallel N`: up to N server configs side by side.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallel: u32,
}

/// Arguments of `servebench run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The campaign file.
    pub campaign: PathBuf,
    /// Cell selection.
    #[command(flatten)]
    pub select: SelectArgs,
    /// Stop at the first failed cell.
    #[arg(long)]
    pub fail_fast: bool,
    /// Show what would run and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Run up to N server configs side by side, on disjoint GPU sets.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallel: u32,
    /// Start servers on this machine whatever `[launcher]` says (what each Slurm job runs).
    #[arg(long)]
    pub local: bool,
    /// Also write the run's events to FILE as JSON lines (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub log_json: Option<PathBuf>,
    /// What to measure, overriding `[run] goal`: every cell (`grid`), or
    /// only what can change the answer (`answer`).
    #[arg(long, value_enum)]
    pub goal: Option<crate::campaign::Goal>,
}

/// Arguments of `servebench memory`.
#[derive(Debug, Clone, Args)]
pub struct MemoryArgs {
    /// Hugging Face model directory or its config.json.
    #[arg(long)]
    pub model: PathBuf,
    /// Whose memory rule to apply.
    #[arg(long, value_enum, default_value = "sglang")]
    pub engine: EngineRule,
    /// Tensor-parallel size.
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    /// Data-parallel replicas.
    #[arg(long, default_value_t = 1)]
    pub dp: u32,
    /// SGLang attention data-parallel groups inside the TP group.
    #[arg(long, default_value_t = 1)]
    pub dp_attention: u32,
    /// Expert-parallel size (vLLM: 1 or TP × DP).
    #[arg(long, default_value_t = 1)]
    pub ep: u32,
    /// Pipeline stages.
    #[arg(long, default_value_t = 1)]
    pub pp: u32,
    /// Memory of one GPU, e.g. 96GiB or 80GB.
    #[arg(long)]
    pub gpu_memory: String,
    /// SGLang --mem-fraction-static or vLLM --gpu-memory-utilization (engine default if absent).
    #[arg(long)]
    pub mem_fraction: Option<f64>,
    /// --max-running-requests (SGLang) / --max-num-seqs (vLLM).
    #[arg(long)]
    pub max_running_requests: Option<u32>,
    /// --context-length (SGLang) / --max-model-len (vLLM).
    #[arg(long)]
    pub context_length: Option<u64>,
    /// KV cache element type.
    #[arg(long, value_enum, default_value = "auto")]
    pub kv_cache_dtype: KvCacheDtype,
    /// Draft model directory for speculative decoding.
    #[arg(long)]
    pub draft_model: Option<PathBuf>,
    /// Tokens verified per speculative step.
    #[arg(long)]
    pub speculative_num_draft_tokens: Option<u32>,
    /// Memory reserved outside weights and caches, e.g. 2GiB (engine default if absent).
    #[arg(long)]
    pub reserve: Option<String>,
    /// vLLM --max-num-batched-tokens (tokens in its memory-profiling pass).
    #[arg(long)]
    pub max_batched_tokens: Option<u64>,
    /// GPUs available to the server.
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Tokens per request (input + output) to check against capacity.
    #[arg(long)]
    pub request_tokens: Option<u64>,
    /// Concurrent requests to check against capacity.
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// The engine's release, where its memory rules changed (SGLang's hybrid state pool).
    #[arg(long)]
    pub engine_version: Option<String>,
    /// More of the engine's own flags, as on its command line, e.g.
    /// "--max-mamba-cache-size 8 --mamba-ssm-dtype bfloat16"; they override the options above.
    #[arg(long, allow_hyphen_values = true)]
    pub engine_args: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `servebench bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Base URL of the server, e.g. http://127.0.0.1:8000 or https://host (vLLM's --base-url).
    #[arg(long, visible_alias = "base-url", conflicts_with_all = ["host", "port"])]
    pub url: Option<String>,
    /// Host of the server, with --port, instead of --url (vLLM's --host).
    #[arg(long)]
    pub host: Option<String>,
    /// Port of the server, with --host (default 127.0.0.1), instead of --url (vLLM's --port).
    #[arg(long)]
    pub port: Option<u16>,
    /// Which endpoint to load.
    #[arg(long, value_enum, default_value = "completions")]
    pub api: Api,
    /// The endpoint's path instead of --api, as vLLM takes it:
    /// /v1/completions or /v1/chat/completions.
    #[arg(long, conflicts_with = "api")]
    pub endpoint: Option<String>,
    /// Served model name (default: the first one /v1/models lists).
    #[arg(long)]
    pub model: Option<String>,
    /// API key, sent as a bearer token (other users can read it in `ps`: prefer --api-key-env).
    #[arg(long, conflicts_with = "api_key_env")]
    pub api_key: Option<String>,
    /// Name of the environment variable holding the API key sent as a bearer token.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Closed-loop levels: concurrent users, e.g. 1,4,16,64.
    #[arg(long, conflicts_with = "request_rate")]
    pub concurrency: Option<String>,
    /// Open-loop levels: requests per second, e.g. 0.5,1,2; `inf` sends
    /// every request at once (with --max-concurrency, that many at a time:
    /// the closed loop --concurrency measures).
    #[arg(long)]
    pub request_rate: Option<String>,
    /// Inter-arrival distribution for --request-rate.
    #[arg(long, value_enum, default_value = "poisson")]
    pub arrival: Arrival,
    /// Gamma shape for --arrival gamma (1 = Poisson, <1 = burstier).
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Cap on requests in flight for --request-rate.
    #[arg(long)]
    pub max_concurrency: Option<u32>,
    /// Measured requests per level; with --scenario, sessions per level (each plays every turn; default: one per concurrent user). vLLM's --num-prompts.
    #[arg(long, visible_alias = "num-prompts")]
    pub num_requests: Option<u64>,
    /// Stop dispatching after this long per level, e.g. 30s.
    #[arg(long)]
    pub duration: Option<String>,
    /// Warm-up requests per level, excluded from results.
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
    /// Prompt tokens of synthetic text, exact for the model's tokenizer
    /// (--tokenizer, else the server's /tokenize); below 64, random words.
    #[arg(long, default_value_t = 128, visible_alias = "random-input-len")]
    pub input_len: u64,
    /// Leading prompt tokens shared by every request (to measure prefix caching).
    #[arg(long, default_value_t = 0)]
    pub shared_prefix: u64,
    /// Built-in prompt kinds instead of synthetic text: a name, a list, or `all`.
    #[arg(long)]
    pub prompt_kind: Option<String>,
    /// Prompts from a ShareGPT JSON or JSONL file (vLLM's --dataset-path).
    #[arg(long, visible_alias = "dataset-path")]
    pub dataset: Option<PathBuf>,
    /// vLLM's --dataset-name: `random` (synthetic prompts of --input-len)
    /// or `sharegpt` (the file --dataset names).
    #[arg(long)]
    pub dataset_name: Option<String>,
    /// Dataset format (default: from the file extension).
    #[arg(long, value_enum)]
    pub dataset_format: Option<crate::workload::DatasetFormat>,
    /// Multi-turn sessions: a built-in scenario (calculator, etl-debug) or a scenario file; --num-requests counts sessions, not turns (default: each concurrent user plays it once).
    #[arg(long)]
    pub scenario: Option<String>,
    /// The model's tokenizer.json for exact prompt lengths.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Output tokens per request (max_tokens).
    #[arg(long, default_value_t = 128, visible_alias = "random-output-len")]
    pub output_len: u64,
    /// Force exactly --output-len tokens (ignore_eos and min_tokens).
    #[arg(long)]
    pub ignore_eos: bool,
    /// `tool_choice` of requests that offer tools (the tool-call kind, a
    /// scenario with tools): auto, required or none.
    #[arg(long, value_enum)]
    pub tool_choice: Option<crate::client::openai::ToolChoice>,
    /// SLO for goodput, e.g. ttft=200ms,tpot=50ms,e2e=10s (repeatable).
    #[arg(long)]
    pub slo: Vec<String>,
    /// vLLM's --goodput: one SLO of KEY:MILLISECONDS items (ttft:200 tpot:50 e2el:1000).
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    /// Which latencies to print percentiles of: ttft, tpot, itl, e2el (vLLM's --percentile-metrics).
    #[arg(long)]
    pub percentile_metrics: Option<String>,
    /// Which percentiles to print for --percentile-metrics: 50, 90, 95, 99 (default 99).
    #[arg(long)]
    pub metric_percentiles: Option<String>,
    /// Seed for prompts and arrivals.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Limit for one request, e.g. 10m.
    #[arg(long, default_value = "10m")]
    pub request_timeout: String,
    /// Write the full result (every request's raw record) to this JSON file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// vLLM's --save-result: write the result file, named by --result-filename in --result-dir.
    #[arg(long, conflicts_with = "output")]
    pub save_result: bool,
    /// The result file's name with --save-result (default `servebench-bench-<time>.json`).
    #[arg(long, requires = "save_result")]
    pub result_filename: Option<String>,
    /// The folder of the result file with --save-result (default: here).
    #[arg(long, requires = "save_result")]
    pub result_dir: Option<PathBuf>,
    /// Replay a production trace on its own schedule (Mooncake JSONL, Azure
    /// or BurstGPT CSV): its lengths, its prefix blocks, its arrival times.
    /// With --concurrency or --request-rate, its requests (lengths, blocks)
    /// are a dataset under that load instead.
    #[arg(long, conflicts_with_all = ["prompt_kind", "dataset", "scenario"])]
    pub trace: Option<PathBuf>,
    /// The trace's format (mooncake, azure, burstgpt); detected when not given.
    #[arg(long, requires = "trace")]
    pub trace_format: Option<String>,
    /// Traffic multiples to replay at, one level each: 2 sends the trace
    /// twice as fast.
    #[arg(long, default_value = "1", requires = "trace")]
    pub time_scale: String,
    /// Longest gap between two sends after scaling, e.g. 5s.
    #[arg(long, requires = "trace")]
    pub max_idle_gap: Option<String>,
    /// Trace time at which to start, e.g. 10m (from the trace's first request).
    #[arg(long, requires = "trace")]
    pub trace_start: Option<String>,
    /// Trace time at which to stop (exclusive).
    #[arg(long, requires = "trace")]
    pub trace_end: Option<String>,
    /// Prompt tokens per hash id in the trace.
    #[arg(long, default_value_t = crate::workload::trace::DEFAULT_BLOCK_SIZE, requires = "trace")]
    pub block_size: u64,
    /// Factor on the trace's prompt lengths and block size (for a smaller server).
    #[arg(long, default_value_t = 1.0, requires = "trace")]
    pub length_scale: f64,
    /// Factor on the trace's output lengths.
    #[arg(long, default_value_t = 1.0, requires = "trace")]
    pub output_scale: f64,
    /// The server's context: longer requests are clamped (output first) and counted.
    #[arg(long, requires = "trace")]
    pub max_context: Option<u64>,
    /// An earlier `--output` of the same bench: compare this run's answers
    /// with its answers, unit by unit (exit 3 when they differ early and
    /// often, or pass their checks clearly less often).
    #[arg(long)]
    pub expect: Option<PathBuf>,
}

/// Arguments of `servebench sim`.
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 = any free port; see --port-file).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Write the bound port to this file once listening.
    #[arg(long)]
    pub port_file: Option<PathBuf>,
    /// Print the build this simulator reports (`servebench-sim VERSION`)
    /// and exit: how `plan` asks a simulated engine build its version.
    #[arg(long)]
    pub print_version: bool,
    /// The build version to report, standing for an engine build in
    /// campaigns that compare builds (default: this servebench's version).
    #[arg(long, env = "SERVEBENCH_SIM_VERSION")]
    pub build_version: Option<String>,
    /// The performance model and faults.
    #[command(flatten)]
    pub config: SimConfig,
}
