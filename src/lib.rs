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
//! - [`report`] — tables, CSV, JSON and HTML from stored results; `compare`.
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
pub mod launcher;
pub mod load;
pub mod memory;
pub mod metrics;
pub mod plan;
pub mod report;
pub mod runner;
pub mod sim;
pub mod store;
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
        cli::Command::Init(args) => run_init(args),
        cli::Command::Plan(args) => run_plan(args),
        cli::Command::Run(args) => run_run(args, cancel).await,
        cli::Command::Bench(args) => Ok(match bench::run(args, cancel).await? {
            bench::BenchEnd::AllOk => ExitCode::SUCCESS,
            bench::BenchEnd::SomeFailed => ExitCode::from(EXIT_SOME_FAILED),
            bench::BenchEnd::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        }),
        cli::Command::Sim(args) => run_sim(args, cancel).await,
        cli::Command::Memory(args) => run_memory(args),
        cli::Command::Logs(args) => run_logs(args),
        cli::Command::Report(args) => run_report(args),
        cli::Command::Compare(args) => run_compare(args),
    }
}

/// Example campaigns shipped with the tool, by engine.
pub fn example_campaign(engine: cli::InitEngine) -> &'static str {
    match engine {
        cli::InitEngine::Sim => include_str!("../examples/quickstart.toml"),
        cli::InitEngine::Llamacpp => include_str!("../examples/llamacpp.toml"),
        cli::InitEngine::Sglang => include_str!("../examples/sglang-hybrid-8gpu.toml"),
        cli::InitEngine::Vllm => include_str!("../examples/vllm.toml"),
    }
}

fn run_init(a: cli::InitArgs) -> anyhow::Result<ExitCode> {
    if a.output.exists() {
        anyhow::bail!(
            "{} already exists; choose another --output",
            a.output.display()
        );
    }
    let text = example_campaign(a.engine)
        .replace("results_dir = \"../results\"", "results_dir = \"results\"");
    util::fsx::write_atomic(&a.output, text.as_bytes())?;
    eprintln!(
        "wrote {}; next: servebench plan {}",
        a.output.display(),
        a.output.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn plan_options(s: &cli::SelectArgs) -> anyhow::Result<plan::PlanOptions> {
    Ok(plan::PlanOptions {
        only: plan::filter::parse_filters(&s.only).map_err(|e| anyhow::anyhow!("--only: {e}"))?,
        force: s.force,
        rerun_failed: s.rerun_failed,
        prior_results: s.prior_results.clone(),
    })
}

/// The selection flags a Slurm job repeats, so it measures what was planned.
fn job_args(s: &cli::SelectArgs) -> Vec<String> {
    let mut v = Vec::new();
    for o in &s.only {
        v.push("--only".to_string());
        v.push(o.clone());
    }
    if s.force {
        v.push("--force".into());
    }
    if s.rerun_failed {
        v.push("--rerun-failed".into());
    }
    v
}

fn run_plan(a: cli::PlanArgs) -> anyhow::Result<ExitCode> {
    let c = campaign::load_campaign(&a.campaign)?;
    let opts = plan_options(&a.select)?;
    let store = store::Store::new(&c.results_dir);
    let exe = std::env::current_exe()?.display().to_string();
    let p = plan::build(&c, &store.index(), &opts, &exe);
    // What is printed is pasted into tickets and chats: no secret in it.
    let scrub = |s: &str| util::secret::scrub_str(s).into_owned();
    if a.json {
        println!("{}", scrub(&serde_json::to_string_pretty(&p)?));
    } else {
        print!("{}", scrub(&plan::render(&p, a.show_commands)));
        if let Some(line) = launcher::slurm::plan_summary(&c, &p) {
            print!("{line}");
        }
        if a.show_commands {
            let shown = launcher::show_commands(&c, &p, &exe, &job_args(&a.select));
            if !shown.is_empty() {
                print!(
                    "\nlaunch ({}):\n{}",
                    c.launcher.kind().as_str(),
                    scrub(&shown)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_run(a: cli::RunArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    let c = campaign::load_campaign(&a.campaign)?;
    let opts = runner::RunOptions {
        plan: plan_options(&a.select)?,
        fail_fast: a.fail_fast,
        dry_run: a.dry_run,
        parallel: a.parallel as usize,
        local: a.local,
        job_args: job_args(&a.select),
    };
    // Slurm and ssh jobs run `run --local` side by side on one results tree,
    // so only a run that measures on this machine by itself takes the lock.
    let _lock =
        if !a.dry_run && !a.local && matches!(c.launcher, campaign::launcher::Launcher::Local) {
            Some(runner::lock::acquire(&c.results_dir)?)
        } else {
            None
        };
    let outcome = runner::run_campaign(&c, &opts, cancel).await?;
    if a.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    let store = store::Store::new(&c.results_dir);
    let cells = runner::summary::current_cells(&c, &store);
    print!("{}", runner::summary::render(&c, &cells));
    eprintln!(
        "{} servers launched, {} cells measured, {} reused, {} failed; results in {}",
        outcome.launches,
        outcome.measured,
        outcome.cached,
        outcome.failed,
        c.results_dir.display()
    );
    // The campaign's description lets `report` find the baseline and order
    // later; the report itself is best effort: a failure to write it must
    // not hide the run's own outcome.
    match report::write_for_campaign(&c) {
        Ok(Some(p)) => eprintln!("report: {}", p.display()),
        Ok(None) => {}
        Err(e) => eprintln!("report not written: {e:#}"),
    }
    if outcome.interrupted {
        eprintln!("interrupted: finished cells are stored; run again to resume");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    // The campaign as written now decides what is expected, not the stored copy.
    let expected: std::collections::BTreeSet<&str> = c
        .servers
        .iter()
        .filter(|s| s.expected_failure)
        .map(|s| s.id.as_str())
        .collect();
    let any_failed = cells
        .iter()
        .any(|r| r.status.is_failure() && !expected.contains(r.server_id.as_str()));
    Ok(if any_failed {
        ExitCode::from(EXIT_SOME_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn run_logs(a: cli::LogsArgs) -> anyhow::Result<ExitCode> {
    use telemetry::EngineKind as E;
    let engine = match a.engine {
        cli::LogEngineArg::Sglang => E::Sglang,
        cli::LogEngineArg::Vllm => E::Vllm,
        cli::LogEngineArg::Llamacpp => E::Llamacpp,
        cli::LogEngineArg::Sim => E::Sim,
    };
    let bytes = std::fs::read(&a.file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", a.file.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let facts = telemetry::logscan::scan_log(engine, &text);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&facts)?);
        return Ok(ExitCode::SUCCESS);
    }
    let v = serde_json::to_value(&facts)?;
    let mut rows = Vec::new();
    if let Some(obj) = v.as_object() {
        for (k, val) in obj {
            if val.is_null() || val.as_array().is_some_and(|a| a.is_empty()) {
                continue;
            }
            let shown = match val {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            rows.push(vec![k.clone(), failure::truncate(&shown, 200)]);
        }
    }
    print!("{}", ui::table::render(&["fact", "value"], &rows));
    if let Some(cause) = telemetry::logscan::classify_failure(&text) {
        println!(
            "failure cause: {:?} at line {}: {}",
            cause.kind, cause.line_number, cause.evidence
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_report(a: cli::ReportArgs) -> anyhow::Result<ExitCode> {
    let set = report::load(&a.results_dir)?;
    let opts = report::ReportOptions {
        baseline: a.baseline,
        ..Default::default()
    };
    let r = report::build(&set, &opts);
    if a.format.contains(&report::Format::Table) {
        let bytes = report::Format::Table.exporter().render(&r);
        print!("{}", String::from_utf8_lossy(&bytes));
    }
    let files: Vec<report::Format> = a
        .format
        .iter()
        .copied()
        .filter(|f| *f != report::Format::Table)
        .collect();
    let out = a.out.unwrap_or(a.results_dir);
    for p in report::write_files(&r, &files, &out)? {
        eprintln!("wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn run_compare(a: cli::CompareArgs) -> anyhow::Result<ExitCode> {
    if !(a.threshold >= 0.0 && a.threshold.is_finite()) {
        anyhow::bail!("--threshold must be a non-negative number, e.g. 0.1 for 10%");
    }
    let base = report::load(&a.base_dir)?;
    let new = report::load(&a.new_dir)?;
    let c = report::compare::compare(&base, &new, a.threshold);
    print!("{}", report::compare::render(&c));
    Ok(if c.regressions > 0 {
        ExitCode::from(EXIT_SOME_FAILED)
    } else {
        ExitCode::SUCCESS
    })
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
///
/// Both handlers are registered before this returns, so a signal that
/// arrives at any later moment (say, while a server is starting) cancels
/// cleanly instead of killing the process with the default action.
fn spawn_signal_handler(cancel: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::spawn(async move {
        for _ in 0..2 {
            tokio::select! {
                _ = int.recv() => {}
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
