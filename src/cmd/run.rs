//! `servebench run`: measure every planned cell, print the summary, write
//! the report, and turn the outcome into the exit code.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use super::{EXIT_INTERRUPTED, EXIT_SOME_FAILED};
use crate::{campaign, cli, report, runner, store};

/// `servebench run`: measure the campaign, then summarise and report.
pub async fn run(a: cli::RunArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    let c = campaign::load_campaign(&a.campaign)?;
    let mut plan = super::plan::plan_options(&a.select, &c, a.local)?;
    plan.parallel = a.parallel as usize;
    super::plan::detect_engine(&c, &mut plan, a.local);
    let opts = runner::RunOptions {
        plan,
        fail_fast: a.fail_fast,
        dry_run: a.dry_run,
        parallel: a.parallel as usize,
        local: a.local,
        job_args: super::plan::job_args(&a.select),
        goal: a.goal.unwrap_or(c.run.goal),
    };
    // Slurm and ssh jobs run `run --local` side by side on one results tree,
    // so only a run that measures on this machine by itself takes the lock.
    let _lock =
        if !a.dry_run && !a.local && matches!(c.launcher, campaign::launcher::Launcher::Local) {
            Some(runner::lock::acquire(&c.results_dir)?)
        } else {
            None
        };
    let mut events = runner::events::Events::terminal();
    if let Some(path) = &a.log_json {
        events = events.with(runner::events::JsonLines::create(path)?);
    }
    let outcome = runner::run_campaign(&c, &opts, &events, cancel).await?;
    if a.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    // The campaign's description lets `report` find the baseline and order
    // later. Both are written before the summary, which names only the
    // report this run wrote. The report is best effort: a failure to write
    // it must not hide the run's own outcome.
    if c.results_dir.join("cells").is_dir() {
        if let Err(e) = store::meta::CampaignMeta::from_campaign(&c).write(&c.results_dir) {
            eprintln!("campaign.json not written: {e}");
        }
    }
    let mut html = None;
    if let Some(results) = &outcome.results {
        match report::write_for_campaign(&c, results) {
            Ok(Some(p)) => {
                eprintln!("report: {}", p.display());
                html = Some(p);
            }
            Ok(None) => {}
            Err(e) => eprintln!("report not written: {e:#}"),
        }
    }
    let why = if outcome.interrupted {
        "the run was interrupted; run again to measure them"
    } else if !a.select.only.is_empty() {
        "left out by --only"
    } else {
        "not run"
    };
    print!(
        "{}",
        runner::summary::render(&c, &outcome.cells, html.as_deref(), why)
    );
    let exit_code = match outcome.end(&c) {
        runner::RunEnd::AllOk => 0,
        runner::RunEnd::SomeFailed => EXIT_SOME_FAILED,
        runner::RunEnd::Interrupted => EXIT_INTERRUPTED,
    };
    events.emit(runner::events::Event::Finished {
        launches: outcome.launches,
        measured: outcome.measured,
        cached: outcome.cached,
        failed: outcome.failed,
        interrupted: outcome.interrupted,
        exit_code,
        results: c.results_dir.display().to_string(),
    });
    if outcome.interrupted {
        eprintln!("interrupted: finished cells are stored; run again to resume");
    }
    Ok(ExitCode::from(exit_code))
}
