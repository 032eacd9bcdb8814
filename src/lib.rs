//! # servebench
//!
//! Benchmark campaigns against LLM serving engines. Layout map:
//!
//! - [`cli`] — command-line arguments as typed (no logic).
//! - [`bench`] — `servebench bench`: one-shot load against a running endpoint.
//! - [`load`] — arrival schedules, request sources and the one load driver.
//! - [`client`] — streaming OpenAI-compatible HTTP client, SSE parser, raw records.
//! - [`metrics`] — statistics, goodput and level summaries derived from raw records.
//! - [`memory`] — model-aware GPU memory, KV capacity and feasibility (pure).
//! - [`failure`] — failure classes with evidence.
//! - [`telemetry`] — Prometheus scrapes and deltas, engine log facts, GPU sampling (pure parsers).
//! - [`sim`] — the built-in simulated OpenAI-compatible server.
//! - [`ui`] — progress display and terminal tables.
//! - [`workload`] — tokenizers, exact-length prompts, prompt kinds, datasets, multi-turn scenarios.
//! - [`util`] — unit parsing, atomic writes, process self-measurement.
//!
//! Dependencies point one way: `cli` → `bench` → `load` → `client` →
//! `metrics`; `sim` depends only on the request DTOs in `client::openai`.

pub mod bench;
pub mod campaign;
pub mod cli;
pub mod client;
pub mod engine;
pub mod failure;
pub mod load;
pub mod memory;
pub mod metrics;
pub mod sim;
pub mod telemetry;
pub mod ui;
pub mod util;
pub mod workload;

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

/// Exit code when the run finished but some requests or cells failed.
pub const EXIT_SOME_FAILED: u8 = 3;
/// Exit code when the run could not be carried out.
pub const EXIT_ERROR: u8 = 1;
/// Exit code after an interrupt (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Run a parsed command line to completion.
pub async fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    let cancel = CancellationToken::new();
    spawn_signal_handler(cancel.clone());
    match cli.command {
        cli::Command::Bench(args) => {
            let all_ok = bench::run(args, cancel).await?;
            Ok(if all_ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_SOME_FAILED)
            })
        }
        cli::Command::Sim(args) => run_sim(args, cancel).await,
        cli::Command::Memory(args) => run_memory(args),
    }
}

fn run_memory(a: cli::MemoryArgs) -> anyhow::Result<ExitCode> {
    let model = memory::load_model_info(&a.model)?;
    let gpu =
        memory::parse_bytes(&a.gpu_memory).map_err(|e| anyhow::anyhow!("--gpu-memory: {e}"))?;
    let mut inputs = memory::MemoryInputs::new(a.engine, a.tp, gpu);
    inputs.mem_fraction = a.mem_fraction;
    inputs.max_running_requests = a.max_running_requests;
    inputs.context_length = a.context_length;
    inputs.kv_cache_dtype = a.kv_cache_dtype;
    inputs.draft = a
        .draft_model
        .as_deref()
        .map(memory::load_model_info)
        .transpose()?;
    inputs.speculative_num_draft_tokens = a.speculative_num_draft_tokens;
    inputs.reserve_bytes = a
        .reserve
        .as_deref()
        .map(memory::parse_bytes)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--reserve: {e}"))?;
    inputs.max_batched_tokens = a.max_batched_tokens;
    inputs.gpus_available = a.gpus;
    inputs.request_tokens = a.request_tokens;
    inputs.concurrency = a.concurrency;
    let est = memory::estimate(&model, &inputs);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&est)?);
    } else {
        print!("{}", memory::render_table(&est));
    }
    let blocked = est.verdicts.iter().any(|v| v.level == memory::Level::Error);
    Ok(if blocked {
        ExitCode::from(EXIT_SOME_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

async fn run_sim(args: cli::SimArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    let mut config = args.config;
    config.validate().map_err(|e| anyhow::anyhow!(e))?;
    config.log = true;
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}:{}: {e}", args.host, args.port))?;
    if let Some(p) = &args.port_file {
        let port = listener.local_addr()?.port();
        util::fsx::write_atomic(p, port.to_string().as_bytes())?;
    }
    match sim::serve(listener, config, cancel).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(sim::SimError::Crashed(_)) => Ok(ExitCode::from(134)),
        Err(e) => Err(e.into()),
    }
}

/// Turn SIGINT/SIGTERM into cancellation; a second signal exits at once.
fn spawn_signal_handler(cancel: CancellationToken) {
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
        for _ in 0..2 {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            if cancel.is_cancelled() {
                std::process::exit(EXIT_INTERRUPTED as i32);
            }
            eprintln!("interrupted: stopping (signal again to exit at once)");
            cancel.cancel();
        }
    });
}
