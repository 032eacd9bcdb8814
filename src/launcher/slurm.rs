//! Slurm job building: each server-config group with cells to measure
//! becomes one batch job, whose script runs `servebench run CAMPAIGN --only
//! server=<id> --local` on its node; that run launches the server there and
//! writes each cell into the shared results directory as usual.
//!
//! This file only builds (the `#SBATCH` script, the `sbatch` line, the
//! plan's summary); submitting and following the jobs is a campaign strategy
//! and lives in `runner::slurm`.

use std::path::{Path, PathBuf};

use crate::campaign::launcher::{GpusFlag, Launcher, SlurmOptions};
use crate::campaign::Campaign;
use crate::engine::EngineKind;
use crate::plan::{Plan, ServerGroup};
use crate::util::shell::shell_words;

/// Whether jobs of this campaign ask Slurm for GPUs: GPU engines always,
/// others when the campaign declares GPUs.
pub fn wants_gpus(c: &Campaign) -> bool {
    matches!(c.engine.kind, EngineKind::Sglang | EngineKind::Vllm) || !c.hardware.gpus.is_empty()
}

/// `--time` for a group: its ETA plus the margin, in whole minutes (≥ 1).
pub fn time_limit_min(eta_s: f64, o: &SlurmOptions) -> u64 {
    ((eta_s.max(0.0) + o.time_margin.as_secs_f64()) / 60.0)
        .ceil()
        .max(1.0) as u64
}

/// The `sbatch` options for one group, written into its job script as
/// `#SBATCH` lines (so the script alone is what a user pastes or submits).
pub fn sbatch_options(
    c: &Campaign,
    g: &ServerGroup,
    o: &SlurmOptions,
    output: &Path,
) -> Vec<String> {
    let mut v = vec![
        format!("--job-name=servebench-{}-{}", c.name, g.server.id),
        format!("--output={}", output.display()),
        format!("--time={}", time_limit_min(g.eta_s(), o)),
    ];
    if let Some(p) = &o.partition {
        v.push(format!("--partition={p}"));
    }
    if let Some(a) = &o.account {
        v.push(format!("--account={a}"));
    }
    if let Some(n) = o.nodes {
        v.push(format!("--nodes={n}"));
    }
    if wants_gpus(c) {
        v.push(match o.gpus_flag {
            GpusFlag::Gpus => format!("--gpus={}", g.server.gpus()),
            GpusFlag::Gres => format!("--gres=gpu:{}", g.server.gpus()),
        });
    }
    // The job sees the submitting shell's environment (Slurm's default, stated).
    v.push("--export=ALL".into());
    v.extend(o.extra_sbatch.iter().cloned());
    v
}

/// The `sbatch` argv that submits a job script.
pub fn sbatch_argv(script: &Path) -> Vec<String> {
    vec![
        "sbatch".to_string(),
        "--parsable".into(),
        script.display().to_string(),
    ]
}

/// Everything one group's job needs to be written and submitted.
pub struct JobSpec<'a> {
    /// This servebench executable (on the node: a shared path).
    pub self_exe: &'a str,
    /// The campaign file, absolute.
    pub campaign: &'a Path,
    /// `--output` of the job.
    pub output: &'a Path,
    /// Selection flags the job repeats.
    pub forward: &'a [String],
}

/// The job script of one group: its `#SBATCH` options, the environment its
/// server gets, and the `servebench run --only server=<id> --local` it runs.
pub fn job_script(c: &Campaign, g: &ServerGroup, o: &SlurmOptions, j: &JobSpec) -> String {
    let mut argv = vec![
        j.self_exe.to_string(),
        "run".into(),
        j.campaign.display().to_string(),
        "--only".into(),
        format!("server={}", g.server.id),
        "--local".into(),
    ];
    argv.extend(j.forward.iter().cloned());
    let mut text = String::from("#!/bin/sh\n");
    for opt in sbatch_options(c, g, o, j.output) {
        text.push_str(&format!("#SBATCH {opt}\n"));
    }
    text.push_str(&format!(
        "# servebench: the cells of server `{}`, started on this job's node.\n",
        g.server.id
    ));
    if !g.spec.env.is_empty() {
        let env: Vec<String> = g.spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        text.push_str(&format!(
            "# servebench sets for the server: {}\n",
            shell_words(&env)
        ));
    }
    text.push_str(&format!("exec {}\n", shell_words(&argv)));
    text
}

/// Where a group's job script and output go under the results directory.
pub fn job_paths(store_root: &Path, server: &str) -> (PathBuf, PathBuf) {
    // Absolute: the job starts in whatever directory sbatch ran from.
    let root = std::path::absolute(store_root).unwrap_or_else(|_| store_root.to_path_buf());
    let dir = root.join("slurm");
    (
        dir.join(format!("{server}.sh")),
        dir.join(format!("{server}-%j.out")),
    )
}

/// One line for `servebench plan`: how many jobs and GPU-hours the campaign asks for.
pub fn plan_summary(c: &Campaign, plan: &Plan) -> Option<String> {
    let Launcher::Slurm(o) = &c.launcher else {
        return None;
    };
    let groups: Vec<&ServerGroup> = plan.groups.iter().filter(|g| g.needs_launch()).collect();
    let limit_h: f64 = groups
        .iter()
        .map(|g| time_limit_min(g.eta_s(), o) as f64 / 60.0)
        .sum::<f64>()
        .max(0.0);
    let eta_h: f64 = groups
        .iter()
        .map(|g| g.eta_s() / 3600.0)
        .sum::<f64>()
        .max(0.0);
    let gpu = |f: &dyn Fn(&ServerGroup) -> f64| -> f64 {
        groups
            .iter()
            .map(|g| f64::from(g.server.gpus()) * f(g))
            .sum::<f64>()
            .max(0.0)
    };
    let resources = if wants_gpus(c) {
        format!(
            "{:.1} GPU-hours estimated, {:.1} GPU-hours requested (--time incl. margin)",
            gpu(&|g| g.eta_s() / 3600.0),
            gpu(&|g| time_limit_min(g.eta_s(), o) as f64 / 60.0)
        )
    } else {
        format!("no GPUs requested; {eta_h:.2} job-hours estimated, {limit_h:.2} requested")
    };
    Some(format!(
        "slurm: {} jobs (one per server config), {resources}{}\n",
        groups.len(),
        o.partition
            .as_ref()
            .map(|p| format!(", partition {p}"))
            .unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(extra: &str) -> Campaign {
        let text = format!(
            "[campaign]\nname = \"big\"\n[model]\npath = \"m\"\n[engine]\nkind = \"vllm\"\n\
             [[server]]\nid = \"tp2\"\ntp = 2\n[[server]]\nid = \"tp1\"\n\
             [[workload]]\nname = \"w\"\nconcurrency = 1\nnum_requests = 10\n[run]\nstartup_estimate = \"5m\"\n\
             [launcher]\nkind = \"slurm\"\n{extra}"
        );
        let (raw, src) = crate::campaign::parse(Path::new("/x/c.toml"), &text).unwrap();
        crate::campaign::resolve(raw, &src).unwrap()
    }

    #[test]
    fn the_job_script_asks_for_tp_gpus_and_eta_plus_margin_and_runs_only_its_server() {
        let c = campaign("partition = \"h100\"\naccount = \"lab\"\ngpus_flag = \"gres\"\nnodes = 1\nextra_sbatch = [\"--qos=low\"]\ntime_margin = \"10m\"\n");
        let plan = crate::plan::build(&c, &Default::default(), &Default::default(), "servebench");
        let Launcher::Slurm(o) = &c.launcher else {
            panic!()
        };
        let g = &plan.groups[0];
        let want_min = time_limit_min(g.eta_s(), o);
        assert!(g.eta_s() >= 300.0);
        assert_eq!(want_min, ((g.eta_s() + 600.0) / 60.0).ceil() as u64);
        let script = job_script(
            &c,
            g,
            o,
            &JobSpec {
                self_exe: "/opt/servebench",
                campaign: Path::new("/c/camp.toml"),
                output: Path::new("/r/tp2-%j.out"),
                forward: &["--rerun-failed".into()],
            },
        );
        assert_eq!(
            script,
            format!(
                "#!/bin/sh\n#SBATCH --job-name=servebench-big-tp2\n#SBATCH --output=/r/tp2-%j.out\n\
                 #SBATCH --time={want_min}\n#SBATCH --partition=h100\n#SBATCH --account=lab\n\
                 #SBATCH --nodes=1\n#SBATCH --gres=gpu:2\n#SBATCH --export=ALL\n#SBATCH --qos=low\n\
                 # servebench: the cells of server `tp2`, started on this job's node.\n\
                 exec /opt/servebench run /c/camp.toml --only server=tp2 --local --rerun-failed\n"
            )
        );
        assert_eq!(
            shell_words(&sbatch_argv(Path::new("/r/tp2.sh"))),
            "sbatch --parsable /r/tp2.sh"
        );
        let s = plan_summary(&c, &plan).unwrap();
        assert!(s.starts_with("slurm: 2 jobs"), "{s}");
        assert!(
            s.contains("GPU-hours requested") && s.contains("partition h100"),
            "{s}"
        );
    }
}
