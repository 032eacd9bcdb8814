//! `servebench report` and `servebench compare`, from stored results.

use std::process::ExitCode;

use super::EXIT_SOME_FAILED;
use crate::{cli, report};

/// `servebench report`: render stored results.
pub fn run(a: cli::ReportArgs) -> anyhow::Result<ExitCode> {
    let set = report::load(&a.results_dir)?;
    if let Some(b) = &a.baseline {
        check_baseline(&set, b, &a.results_dir)?;
    }
    let opts = report::ReportOptions {
        baseline: a.baseline,
        include_crashed: a.include_crashed,
        timelines: a.timelines,
        ..Default::default()
    };
    let r = report::build(&set, &opts);
    if a.table || a.format.contains(&report::Format::Table) {
        let bytes = report::Format::Table.exporter().render(&r);
        print!("{}", String::from_utf8_lossy(&bytes));
    }
    let files: Vec<report::Format> = a
        .format
        .iter()
        .copied()
        .filter(|f| *f != report::Format::Table)
        .collect();
    let out = a.out.unwrap_or_else(|| a.results_dir.clone());
    let written = report::write_files(&r, &files, &out)?;
    for p in &written {
        eprintln!("wrote {}", p.display());
    }
    // Only a report this command wrote is named: another --out may hold none.
    let html = written
        .iter()
        .find(|p| p.file_name().is_some_and(|n| n == "report.html"));
    print!(
        "{}",
        report::answer::render(&r, &a.results_dir, html.map(|p| p.as_path()), None)
    );
    Ok(ExitCode::SUCCESS)
}

/// `--baseline` must name a server whose cells are stored: another name
/// would silently drop every speedup from the rewritten reports.
fn check_baseline(
    set: &report::ResultSet,
    baseline: &str,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    let mut servers: Vec<&str> = set.cells.iter().map(|c| c.server_id.as_str()).collect();
    servers.sort_unstable();
    servers.dedup();
    if servers.contains(&baseline) {
        return Ok(());
    }
    let hint = crate::util::suggest::did_you_mean(baseline, servers.iter().copied())
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default();
    anyhow::bail!(
        "--baseline {baseline}: no server of that name in {}{hint}; its servers: {}",
        dir.display(),
        servers.join(", ")
    )
}

/// `servebench compare`: regressions between two result sets.
pub fn compare(a: cli::CompareArgs) -> anyhow::Result<ExitCode> {
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
