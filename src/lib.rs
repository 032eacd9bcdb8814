//! # servebench
//!
//! Benchmark campaigns against LLM serving engines.
//!
//! Layout map, lowest first: each module uses only modules listed above it
//! (`tests/module_graph.rs` checks this order against the source, and that
//! the graph has no cycle):
//!
//! - [`util`]: units, flag values, shell quoting, atomic writes, secrets, the
//!   seeded generator, plain-text tables, short SHA-256 digests.
//! - [`telemetry`]: Prometheus, engine logs, GPU samples (pure parsers), each
//!   engine's metric names and log phrases in one file.
//! - [`failure`]: failure classes with their evidence.
//! - [`engine`]: server configs to engine command lines, parallel layouts
//!   and the GPUs they hold; each engine's flags and start-up and stop priors
//!   in one file.
//! - [`memory`]: GPU memory, KV capacity, GPU datasheets (pure), each
//!   engine's memory rules in one file, for each server's parallel layout.
//! - [`client`]: the streaming OpenAI-compatible HTTP client, SSE, raw records.
//! - [`workload`]: tokenizers, exact-length prompts, prompt kinds, datasets, scenarios.
//! - [`sim`]: the built-in simulated server.
//! - [`load`]: arrival schedules, request sources, the one load driver and its live view,
//!   the journal a replay cell resumes from.
//! - [`ui`]: the live progress line (on tokio).
//! - [`metrics`]: statistics, goodput, level summaries, judgment from raw records (pure).
//! - [`search`]: SLO search, probe order and boundaries (pure).
//! - [`campaign`]: the TOML schema, matrix and workload expansion, validation (pure).
//! - [`goal`]: answer first: which servers run first, each point's probe,
//!   and which points a probe shows cannot place (pure).
//! - [`store`]: per-cell results, the one judgment of a measured level, identities,
//!   `campaign.json`, the results directory.
//! - [`report`]: the report model and its tables, CSV, JSON, HTML, compare (pure).
//! - [`bisect`]: which engine build to measure next and what a build's cell
//!   shows against the good and bad builds' (pure).
//! - [`cli`]: arguments as typed, no logic.
//! - [`plan`]: what will run, feasibility, ETAs (pure).
//! - [`launcher`]: local, ssh, systemd and Slurm process and job builders.
//! - [`runner`]: measuring a campaign: each group's named steps (launch,
//!   measure, judge, store, crash), the events they emit, parallel slots,
//!   Slurm submission, live ETA, the run summary and outcome.
//! - [`cmd`]: one module per subcommand: arguments in, exit code out.
//!
//! The modules marked pure use no async runtime, processes or sockets, and
//! touch files only at their named loading and writing entry points.

pub mod bisect;
pub mod campaign;
pub mod cli;
pub mod client;
pub mod cmd;
pub mod engine;
pub mod failure;
pub mod goal;
pub mod launcher;
pub mod load;
pub mod memory;
pub mod metrics;
pub mod plan;
pub mod report;
pub mod runner;
pub mod search;
pub mod sim;
pub mod store;
pub mod telemetry;
pub mod ui;
pub mod util;
pub mod workload;

pub use cmd::{run, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_SOME_FAILED};
