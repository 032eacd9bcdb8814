//! `servebench plan`: the campaign's cells, verdicts, estimates and, with
//! `--show-commands`, the exact launch lines and job scripts.

use std::process::ExitCode;

use crate::{campaign, cli, launcher, plan, store, util};

/// The plan options the selection flags ask for, with this machine's CPU
/// speed when a server of `c` is estimated from the CPU priors.
pub fn plan_options(
    s: &cli::SelectArgs,
    c: &campaign::Campaign,
) -> anyhow::Result<plan::PlanOptions> {
    Ok(plan::PlanOptions {
        only: plan::filter::parse_filters(&s.only).map_err(|e| anyhow::anyhow!("--only: {e}"))?,
        force: s.force,
        rerun_failed: s.rerun_failed,
        prior_results: s.prior_results.clone(),
        // About a tenth of a second, so only where the CPU priors are used.
        cpu: plan::eta::uses_cpu_priors(c)
            .then(|| plan::eta::CpuSpeed::from_probe(cpuprobe::int8_dot_bytes_per_s())),
    })
}

/// The selection flags a Slurm job repeats, so it measures what was planned.
pub fn job_args(s: &cli::SelectArgs) -> Vec<String> {
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

/// `servebench plan`: what would run, with estimates and launch commands.
pub fn run(a: cli::PlanArgs) -> anyhow::Result<ExitCode> {
    let c = campaign::load_campaign(&a.campaign)?;
    let opts = plan_options(&a.select, &c)?;
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
