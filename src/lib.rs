//! # servebench
//!
//! Benchmark campaigns against LLM serving engines. Layout map, in layers;
//! a module uses only modules of lower layers (`tests/module_graph.rs`
//! checks that the graph has no cycle):
//!
//! 0. [`util`] (units, shell quoting, atomic writes, secrets), [`memory`]
//!    (GPU memory, KV capacity, GPU datasheets; pure), [`telemetry`]
//!    (Prometheus, engine logs, GPU samples; pure parsers), [`workload`]
//!    (tokenizers, exact-length prompts, prompt kinds, datasets, scenarios).
//! 1. [`failure`] (failure classes with evidence), [`engine`] (server specs
//!    to engine command lines), [`client`] (streaming OpenAI-compatible HTTP
//!    client, SSE, raw records), [`sim`] (the built-in simulated server).
//! 2. [`load`] (arrival schedules, request sources, the one load driver and
//!    its live view), [`ui`] (progress bar, terminal tables), [`metrics`]
//!    (statistics, goodput, level summaries, judgment from raw records),
//!    [`search`] (SLO search: probe order and boundaries; pure).
//! 3. [`campaign`] (the TOML schema, matrix expansion, validation),
//!    [`store`] (per-cell results, identities, the results directory).
//! 4. [`report`] (tables, CSV, JSON, HTML, compare), [`cli`] (arguments as
//!    typed, no logic).
//! 5. [`plan`] (what will run, feasibility, ETAs), [`launcher`] (local, ssh,
//!    systemd and Slurm process and job builders).
//! 6. [`runner`] (measuring a campaign: groups, parallel slots, Slurm
//!    submission, live ETA, the run summary).
//! 7. [`cmd`] (one module per subcommand: arguments in, exit code out).
//!
//! `campaign`, `plan`, `memory`, `metrics`, `search` and `report` are pure: no async
//! runtime, processes or sockets, and file access only at their named
//! loading and writing entry points.

pub mod campaign;
pub mod cli;
pub mod client;
pub mod cmd;
pub mod engine;
pub mod failure;
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
