//! `servebench report` and `servebench compare`, from stored results.

use std::process::ExitCode;

use super::EXIT_SOME_FAILED;
use crate::{cli, report};

/// `servebench report`: render stored results.
pub fn run(a: cli::ReportArgs) -> anyhow::Result<ExitCode> {
    let set = report::load(&a.results_dir)?;
    let opts = report::ReportOptions {
        baseline: a.baseline,
        include_crashed: a.include_crashed,
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
    let out = a.out.unwrap_or(a.results_dir);
    for p in report::write_files(&r, &files, &out)? {
        eprintln!("wrote {}", p.display());
    }
    print!("{}", report::answer::render(&r, &out));
    Ok(ExitCode::SUCCESS)
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
