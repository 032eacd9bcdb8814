//! `servebench plan`: the campaign's cells, verdicts, estimates and, with
//! `--show-commands`, the exact launch lines and job scripts.

use std::process::ExitCode;

use crate::{campaign, cli, launcher, plan, store, util};

/// Whether the servers of `c` run on this machine: the local and systemd
/// launchers start them here, and `run --local` is a Slurm or ssh job
/// already on its node. Elsewhere this machine's speed says nothing of theirs.
pub fn servers_run_here(c: &campaign::Campaign, local: bool) -> bool {
    use campaign::launcher::Launcher;
    local || matches!(c.launcher, Launcher::Local | Launcher::Systemd { .. })
}

/// The plan options the selection flags ask for, with this machine's CPU
/// speed when the servers of `c` run here and are estimated from the CPU
/// priors.
pub fn plan_options(
    s: &cli::SelectArgs,
    c: &campaign::Campaign,
    local: bool,
) -> anyhow::Result<plan::PlanOptions> {
    Ok(plan::PlanOptions {
        only: plan::filter::parse_filters(&s.only).map_err(|e| anyhow::anyhow!("--only: {e}"))?,
        force: s.force,
        rerun_failed: s.rerun_failed,
        retry_crashed: s.retry_crashed,
        engine: Default::default(),
        builds: Default::default(),
        reuse_across_versions: s.reuse_across_versions,
        prior_results: s.prior_results.clone(),
        // About a tenth of a second, so only where the CPU priors are used.
        cpu: (servers_run_here(c, local) && plan::eta::uses_cpu_priors(c))
            .then(|| plan::eta::CpuSpeed::from_probe(cpuprobe::int8_dot_bytes_per_s())),
        parallel: 1,
        not_measured: crate::store::Store::new(&c.results_dir).not_measured(),
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
    if s.retry_crashed {
        v.push("--retry-crashed".into());
    }
    if s.reuse_across_versions {
        v.push("--reuse-across-versions".into());
    }
    v
}

/// Ask the engine of `c` for its build, and each `[[build]]` its servers
/// run, where its servers run on this machine (a Slurm or ssh job asks on
/// its own node, under `run --local`).
pub fn detect_engine(c: &campaign::Campaign, opts: &mut plan::PlanOptions, local: bool) {
    if !servers_run_here(c, local) {
        return;
    }
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "servebench".into());
    if c.servers.iter().any(|s| s.build.is_none()) {
        let own =
            crate::engine::version::version_command(c.engine.kind, &c.engine.executable, &exe);
        opts.engine = ask(
            (c.engine_version_command.clone(), own),
            &Default::default(),
            "the engine",
        );
    }
    for b in &c.builds {
        if !c
            .servers
            .iter()
            .any(|s| s.build_name() == Some(b.name.as_str()))
        {
            continue;
        }
        let executable = if b.executable.is_empty() {
            &c.engine.executable
        } else {
            &b.executable
        };
        let own = crate::engine::version::version_command(c.engine.kind, executable, &exe);
        let check = ask(
            (b.version_command.clone(), own),
            &b.env,
            &format!("build `{}`", b.name),
        );
        opts.builds.insert(b.name.clone(), check);
    }
}

/// What one build says of its version: the campaign's own command for it
/// when given, else the engine's. Only the engine's own command failing
/// says the build cannot start (the campaign's says nothing of that).
fn ask(
    (given, own): (Option<Vec<String>>, Option<Vec<String>>),
    env: &std::collections::BTreeMap<String, String>,
    label: &str,
) -> plan::BuildCheck {
    let asks_engine = given.is_none();
    let Some(cmd) = given.or(own) else {
        return plan::BuildCheck::default();
    };
    match crate::engine::version::detect_with_env(&cmd, env) {
        Ok(b) => plan::BuildCheck {
            build: Some(b),
            ..Default::default()
        },
        Err(e) => plan::BuildCheck {
            unusable: (asks_engine && e.engine_unusable())
                .then(|| format!("{label} cannot start here: {e}")),
            error: Some(e.to_string()),
            build: None,
        },
    }
}

/// `servebench plan`: what would run, with estimates and launch commands.
pub fn run(a: cli::PlanArgs) -> anyhow::Result<ExitCode> {
    let c = campaign::load_campaign(&a.campaign)?;
    let mut opts = plan_options(&a.select, &c, false)?;
    opts.parallel = a.parallel as usize;
    detect_engine(&c, &mut opts, false);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(launcher: &str) -> campaign::Campaign {
        let text = format!(
            "[campaign]\nname = \"t\"\n[model]\npath = \"m\"\n[engine]\nkind = \"llamacpp\"\n\
             [[workload]]\nname = \"w\"\nconcurrency = 1\nnum_requests = 2\n{launcher}"
        );
        let (raw, src) = campaign::parse(std::path::Path::new("c.toml"), &text).unwrap();
        campaign::resolve::resolve(raw, &src).unwrap()
    }

    #[test]
    fn only_servers_started_on_this_machine_take_its_cpu_speed() -> anyhow::Result<()> {
        let select = cli::SelectArgs::default();
        let local = campaign("");
        assert!(servers_run_here(&local, false));
        assert!(plan_options(&select, &local, false)?.cpu.is_some());
        // A Slurm campaign plans on a login node; its job runs `run --local`
        // on the node that starts the servers.
        let slurm = campaign("[launcher]\nkind = \"slurm\"");
        assert!(!servers_run_here(&slurm, false));
        assert!(plan_options(&select, &slurm, false)?.cpu.is_none());
        assert!(plan_options(&select, &slurm, true)?.cpu.is_some());
        Ok(())
    }
}
