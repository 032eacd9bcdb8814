//! Running a campaign on Slurm: submit one job per server group (scripts
//! from `launcher::slurm`), poll `squeue`, show progress from the cells
//! landing in the results directory, and on Ctrl-C/SIGTERM cancel the jobs
//! with `scancel`. When a job ends in any state but COMPLETED (cancelled,
//! pre-empted, timed out, node failure), the cells it did not finish are
//! stored as `not_run` with a `scheduler` failure naming the job, its final
//! state and Slurm's reason; finished cells stay, so the next `run` submits
//! only what is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::campaign::launcher::Launcher;
use crate::campaign::Campaign;
use crate::failure::{Failure, FailureClass};
use crate::launcher::slurm::{job_paths, job_script, sbatch_argv, JobSpec};
use crate::plan::{Plan, ServerGroup};
use crate::store::{CellStatus, Store};
use crate::util::proc::output_of_async;
use crate::util::shell::shell_words;

use super::events::{Event, Events};
use super::{base_result, RunOutcome};

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
    if let Ok(text) = output_of_async(&strings(&["scontrol", "show", "job", "-o", id])).await {
        let field = |k: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .unwrap_or("")
                .to_string()
        };
        return (field("JobState"), field("Reason"), field("ExitCode"));
    }
    if let Ok(text) = output_of_async(&strings(&[
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
    let text = output_of_async(&strings(&[
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
    (cancel, events): (&CancellationToken, &Events),
    out: &mut RunOutcome,
) -> anyhow::Result<()> {
    let groups: Vec<&ServerGroup> = plan.groups.iter().filter(|g| g.needs_launch()).collect();
    let cells = Cells {
        wanted: groups
            .iter()
            .flat_map(|g| g.cells.iter().filter(|c| c.verdict.runs()))
            .map(|c| c.identity.clone())
            .collect(),
        before: measured_identities(store),
    };
    let mut jobs = submit_jobs(c, &groups, store, (self_exe, forward), (cancel, events)).await?;
    out.launches += jobs.len() as u32;
    if !follow(&mut jobs, store, &cells, (cancel, events)).await {
        cancel_jobs(&jobs, events).await;
        out.interrupted = true;
        return Ok(());
    }
    settle(c, &jobs, store, &cells, events, out).await
}

/// The cells the jobs are to store, and those already measured before.
struct Cells {
    wanted: BTreeSet<String>,
    before: BTreeSet<String>,
}

impl Cells {
    /// How many wanted cells were stored since the jobs were submitted.
    fn landed(&self, now: &BTreeSet<String>) -> usize {
        now.intersection(&self.wanted)
            .filter(|i| !self.before.contains(*i))
            .count()
    }
}

/// Write each group's job script and `sbatch` it; if one submission
/// fails, cancel those already submitted.
async fn submit_jobs<'a>(
    c: &Campaign,
    groups: &[&'a ServerGroup],
    store: &Store,
    (self_exe, forward): (&str, &[String]),
    (cancel, events): (&CancellationToken, &Events),
) -> anyhow::Result<Vec<Job<'a>>> {
    let Launcher::Slurm(o) = &c.launcher else {
        anyhow::bail!("not a slurm campaign");
    };
    let campaign = std::fs::canonicalize(&c.file)
        .with_context(|| format!("cannot resolve {}", c.file.display()))?;
    let dir = store.root().join("slurm");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    events.emit(Event::Note {
        message: format!("submitting {} Slurm jobs", groups.len()),
    });
    let mut jobs: Vec<Job> = Vec::new();
    for g in groups {
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
        let text = match output_of_async(&argv).await {
            Ok(t) => t,
            Err(e) => {
                cancel_jobs(&jobs, events).await;
                anyhow::bail!("cannot submit the job of server {}: {e}", g.server.id);
            }
        };
        let id = text.trim().split(';').next().unwrap_or("").to_string();
        anyhow::ensure!(
            !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()),
            "sbatch answered `{}` instead of a job id",
            text.trim()
        );
        events.emit(Event::Note {
            message: format!(
                "   server {}: job {id} ({})",
                g.server.id,
                shell_words(&argv)
            ),
        });
        jobs.push(Job {
            output: dir.join(format!("{}-{id}.out", g.server.id)),
            id,
            group: g,
            state: "SUBMITTED".into(),
            done: false,
        });
    }
    Ok(jobs)
}

/// Poll the queue every second until every job has left it, telling state
/// changes and stored cells as they come; `false` when cancelled first.
async fn follow(
    jobs: &mut [Job<'_>],
    store: &Store,
    cells: &Cells,
    (cancel, events): (&CancellationToken, &Events),
) -> bool {
    let mut shown = usize::MAX;
    let mut last_poll_error = Instant::now();
    loop {
        if cancel.is_cancelled() {
            return false;
        }
        let open: Vec<String> = jobs
            .iter()
            .filter(|j| !j.done)
            .map(|j| j.id.clone())
            .collect();
        if open.is_empty() {
            return true;
        }
        match queue(&open).await {
            Ok(states) => {
                for j in jobs.iter_mut().filter(|j| !j.done) {
                    match states.get(&j.id) {
                        Some(s) if !is_final(s) => {
                            if *s != j.state {
                                events.emit(Event::Note {
                                    message: format!(
                                        "   job {} ({}): {s}",
                                        j.id, j.group.server.id
                                    ),
                                });
                                j.state = s.clone();
                            }
                        }
                        _ => j.done = true,
                    }
                }
            }
            Err(e) if last_poll_error.elapsed() > Duration::from_secs(30) => {
                events.emit(Event::Warning {
                    message: e.to_string(),
                });
                last_poll_error = Instant::now();
            }
            Err(_) => {}
        }
        let landed = cells.landed(&measured_identities(store));
        if landed != shown {
            events.emit(Event::Note {
                message: format!(
                    "   progress: {landed} of {} cells stored",
                    cells.wanted.len()
                ),
            });
            shown = landed;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = cancel.cancelled() => {}
        }
    }
}

/// After every job ended: say how each ended, store the cells a job that
/// did not complete left unmeasured as not run with its output as evidence,
/// and count what the jobs measured and failed.
async fn settle(
    c: &Campaign,
    jobs: &[Job<'_>],
    store: &Store,
    cells: &Cells,
    events: &Events,
    out: &mut RunOutcome,
) -> anyhow::Result<()> {
    let now = measured_identities(store);
    out.measured += cells.landed(&now);
    for j in jobs {
        let (state, reason, exit) = final_state(&j.id).await;
        events.emit(Event::Note {
            message: format!(
                "   job {} ({}) ended {state} (reason: {reason}; exit code {exit})",
                j.id, j.group.server.id
            ),
        });
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
            events.stored(&r);
            out.failed += 1;
        }
    }
    // Cells a job stored as failures count as failed here too.
    let index = store.index();
    out.failed += cells
        .wanted
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
async fn cancel_jobs(jobs: &[Job<'_>], events: &Events) {
    let ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
    if ids.is_empty() {
        return;
    }
    events.emit(Event::Note {
        message: format!("cancelling Slurm jobs {}", ids.join(", ")),
    });
    let mut argv = strings(&["scancel"]);
    argv.extend(ids.iter().cloned());
    if let Err(e) = output_of_async(&argv).await {
        events.emit(Event::Warning {
            message: e.to_string(),
        });
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        match queue(&ids).await {
            Ok(q) if q.values().all(|s| is_final(s)) => return,
            Err(_) => return,
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    events.emit(Event::Warning {
        message: format!("Slurm still lists jobs {} after scancel", ids.join(", ")),
    });
}
