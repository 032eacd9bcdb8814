//! The Slurm launcher: each server-config group with cells to measure
//! becomes one batch job. The job runs `servebench run CAMPAIGN --only
//! server=<id> --local` on its node, which launches that server there and
//! writes each cell into the shared results directory as usual (atomically,
//! one file per cell).
//!
//! The submitting `servebench run` polls `squeue`, shows progress from the
//! cells landing in the results directory, and on Ctrl-C/SIGTERM cancels its
//! jobs with `scancel`. When a job ends in any state but COMPLETED
//! (cancelled, pre-empted, timed out, node failure), the cells it did not
//! finish are stored as `not_run` with a `scheduler` failure naming the job,
//! its final state and Slurm's reason; finished cells stay, so the next
//! `run` submits only what is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::campaign::launcher::{GpusFlag, Launcher, SlurmOptions};
use crate::campaign::Campaign;
use crate::engine::EngineKind;
use crate::failure::{Failure, FailureClass};
use crate::plan::{shell_words, Plan, ServerGroup};
use crate::runner::{base_result, RunOutcome};
use crate::store::{CellStatus, Store};

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
            GpusFlag::Gpus => format!("--gpus={}", g.server.tp),
            GpusFlag::Gres => format!("--gres=gpu:{}", g.server.tp),
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
            .map(|g| g.server.tp as f64 * f(g))
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

async fn output_of(argv: &[String]) -> Result<String, String> {
    let out = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{}` failed ({}): {}",
            shell_words(argv),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A submitted job.
struct Job<'a> {
    id: String,
    group: &'a ServerGroup,
    output: PathBuf,
    state: String,
    done: bool,
}

/// How a job ended, from `scontrol show job` (or `sacct` once forgotten).
async fn final_state(id: &str) -> (String, String, String) {
    if let Ok(text) = output_of(&strings(&["scontrol", "show", "job", "-o", id])).await {
        let field = |k: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .unwrap_or("")
                .to_string()
        };
        return (field("JobState"), field("Reason"), field("ExitCode"));
    }
    if let Ok(text) = output_of(&strings(&[
        "sacct",
        "-j",
        id,
        "-n",
        "-P",
        "-X",
        "-o",
        "State,Reason,ExitCode",
    ]))
    .await
    {
        if let Some(l) = text.lines().next() {
            let p: Vec<&str> = l.split('|').collect();
            let get = |i: usize| p.get(i).unwrap_or(&"").to_string();
            return (get(0), get(1), get(2));
        }
    }
    (
        "UNKNOWN".into(),
        "job no longer known to Slurm".into(),
        String::new(),
    )
}

/// States of our jobs still in the queue.
async fn queue(ids: &[String]) -> Result<BTreeMap<String, String>, String> {
    let text = output_of(&strings(&[
        "squeue",
        "-h",
        "-o",
        "%i|%T",
        "-j",
        &ids.join(","),
    ]))
    .await;
    // squeue fails on a list of only finished ids with "Invalid job id".
    let text = match text {
        Ok(t) => t,
        Err(e) if e.contains("Invalid job id") => String::new(),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(i, s)| (i.trim().to_string(), s.trim().to_string()))
        .collect())
}

fn measured_identities(store: &Store) -> BTreeSet<String> {
    store
        .index()
        .by_identity
        .into_iter()
        .filter(|(_, c)| c.status.is_measured())
        .map(|(k, _)| k)
        .collect()
}

/// Submit one job per group with cells to run, follow them to the end, and
/// record what Slurm killed.
pub async fn submit(
    c: &Campaign,
    plan: &Plan,
    store: &Store,
    self_exe: &str,
    forward: &[String],
    cancel: &CancellationToken,
    out: &mut RunOutcome,
) -> anyhow::Result<()> {
    let Launcher::Slurm(o) = &c.launcher else {
        anyhow::bail!("not a slurm campaign");
    };
    let campaign = std::fs::canonicalize(&c.file)
        .with_context(|| format!("cannot resolve {}", c.file.display()))?;
    let dir = store.root().join("slurm");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let groups: Vec<&ServerGroup> = plan.groups.iter().filter(|g| g.needs_launch()).collect();
    let wanted: BTreeSet<String> = groups
        .iter()
        .flat_map(|g| g.cells.iter().filter(|c| c.verdict.runs()))
        .map(|c| c.identity.clone())
        .collect();
    eprintln!("submitting {} Slurm jobs", groups.len());
    let mut jobs: Vec<Job> = Vec::new();
    for g in &groups {
        if cancel.is_cancelled() {
            break;
        }
        let (script, output) = job_paths(store.root(), &g.server.id);
        let spec = JobSpec {
            self_exe,
            campaign: &campaign,
            output: &output,
            forward,
        };
        crate::util::fsx::write_atomic(&script, job_script(c, g, o, &spec).as_bytes())?;
        let argv = sbatch_argv(&script);
        let text = match output_of(&argv).await {
            Ok(t) => t,
            Err(e) => {
                cancel_jobs(&jobs).await;
                anyhow::bail!("cannot submit the job of server {}: {e}", g.server.id);
            }
        };
        let id = text.trim().split(';').next().unwrap_or("").to_string();
        anyhow::ensure!(
            !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()),
            "sbatch answered `{}` instead of a job id",
            text.trim()
        );
        eprintln!(
            "   server {}: job {id} ({})",
            g.server.id,
            shell_words(&argv)
        );
        jobs.push(Job {
            output: dir.join(format!("{}-{id}.out", g.server.id)),
            id,
            group: g,
            state: "SUBMITTED".into(),
            done: false,
        });
    }
    out.launches += jobs.len() as u32;
    let before = measured_identities(store);
    let mut shown = usize::MAX;
    let mut last_poll_error = Instant::now();
    loop {
        if cancel.is_cancelled() {
            cancel_jobs(&jobs).await;
            out.interrupted = true;
            return Ok(());
        }
        let open: Vec<String> = jobs
            .iter()
            .filter(|j| !j.done)
            .map(|j| j.id.clone())
            .collect();
        if open.is_empty() {
            break;
        }
        match queue(&open).await {
            Ok(states) => {
                for j in jobs.iter_mut().filter(|j| !j.done) {
                    match states.get(&j.id) {
                        Some(s) if !is_final(s) => {
                            if *s != j.state {
                                eprintln!("   job {} ({}): {s}", j.id, j.group.server.id);
                                j.state = s.clone();
                            }
                        }
                        _ => j.done = true,
                    }
                }
            }
            Err(e) if last_poll_error.elapsed() > Duration::from_secs(30) => {
                eprintln!("warning: {e}");
                last_poll_error = Instant::now();
            }
            Err(_) => {}
        }
        let landed = measured_identities(store)
            .intersection(&wanted)
            .filter(|i| !before.contains(*i))
            .count();
        if landed != shown {
            eprintln!("   progress: {landed} of {} cells stored", wanted.len());
            shown = landed;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = cancel.cancelled() => {}
        }
    }
    let now = measured_identities(store);
    out.measured += now
        .intersection(&wanted)
        .filter(|i| !before.contains(*i))
        .count();
    for j in &jobs {
        let (state, reason, exit) = final_state(&j.id).await;
        eprintln!(
            "   job {} ({}) ended {state} (reason: {reason}; exit code {exit})",
            j.id, j.group.server.id
        );
        if state == "COMPLETED" {
            continue;
        }
        let tail = crate::launcher::local::read_tail(&j.output, 0, 40);
        let failure = Failure::new(
            FailureClass::Scheduler,
            format!(
                "slurm job {} ended {state} (reason: {reason}; exit code {exit}); job output: {}",
                j.id,
                j.output.display()
            ),
        )
        .with_log(&tail);
        for cell in j.group.cells.iter().filter(|c| c.verdict.runs()) {
            if now.contains(&cell.identity) {
                continue;
            }
            let mut r = base_result(c, j.group, cell);
            r.status = CellStatus::NotRun;
            r.failure = Some(failure.clone());
            store.write(&r)?;
            out.failed += 1;
        }
    }
    // Cells a job stored as failures count as failed here too.
    let index = store.index();
    out.failed += wanted
        .iter()
        .filter_map(|i| index.by_identity.get(i))
        .filter(|s| s.status.is_measured() && s.status.is_failure())
        .count();
    Ok(())
}

fn is_final(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "FAILED"
            | "CANCELLED"
            | "TIMEOUT"
            | "PREEMPTED"
            | "NODE_FAIL"
            | "OUT_OF_MEMORY"
            | "BOOT_FAIL"
            | "DEADLINE"
    )
}

/// `scancel` our jobs and wait (up to 60 s) until the queue no longer lists them.
async fn cancel_jobs(jobs: &[Job<'_>]) {
    let ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
    if ids.is_empty() {
        return;
    }
    eprintln!("cancelling Slurm jobs {}", ids.join(", "));
    let mut argv = strings(&["scancel"]);
    argv.extend(ids.iter().cloned());
    if let Err(e) = output_of(&argv).await {
        eprintln!("warning: {e}");
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        match queue(&ids).await {
            Ok(q) if q.values().all(|s| is_final(s)) => return,
            Err(_) => return,
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    eprintln!(
        "warning: Slurm still lists jobs {} after scancel",
        ids.join(", ")
    );
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
