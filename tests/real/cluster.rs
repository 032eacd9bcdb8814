//! Launchers beyond the local one, with real components: `--parallel` on the
//! simulator, the `ssh` launcher against a real sshd on 127.0.0.1, the
//! `slurm` launcher against a real single-node Slurm (slurmctld + slurmd +
//! munge, started here by `scripts/test-slurm.sh`), and the `systemd`
//! launcher's command lines (live only where systemd is PID 1).
//!
//! sshd and Slurm come from `scripts/setup-test-env.sh`; run through
//! `scripts/test.sh`.

use crate::common::{campaign_head, cells, pids_with, run, wait_until};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, BIN};
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn spawn(args: &[&str], stderr: &Path) -> Child {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(stderr).unwrap()))
        .spawn()
        .unwrap()
}

fn need(program: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).exists()))
        .unwrap_or(false)
        || Path::new("/usr/sbin").join(program).exists();
    assert!(
        found,
        "`{program}` is not installed: run the tests through scripts/test.sh (scripts/setup-test-env.sh installs it)"
    );
}

fn rfc3339(s: &serde_json::Value) -> std::time::SystemTime {
    humantime::parse_rfc3339(s.as_str().unwrap()).unwrap()
}

/// A campaign on the simulator: two servers, each busy for a few seconds.
fn sim_campaign(
    name: &str,
    model: &str,
    decode_ms: u32,
    decode_b_ms: u32,
    launcher: &str,
) -> String {
    let args = ["--decode-step-per-seq-ms", "0", "--prefill-tok-s", "0"];
    campaign_head(name, model, "sim", &args)
        + &format!(
            r#"[[server]]
id = "a"
args = ["--decode-step-ms", "{decode_ms}"]
[[server]]
id = "b"
max_running_requests = 8
args = ["--decode-step-ms", "{decode_b_ms}"]
[[workload]]
name = "w"
input_len = 64
output_len = 20
concurrency = [1, 2]
num_requests = 3
[run]
grace_period = "2s"
health_timeout = "30s"
{launcher}
"#
        )
}

#[test]
fn parallel_2_runs_two_servers_at_once_and_stores_the_same_cells_as_a_serial_run() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let model = format!("parallel-model-{}", std::process::id());
    let serial_dir = dir.path().join("serial");
    let par_dir = dir.path().join("parallel");
    std::fs::create_dir_all(&serial_dir).unwrap();
    std::fs::create_dir_all(&par_dir).unwrap();
    let text = sim_campaign("par", &model, 40, 40, "");
    let serial = write(&serial_dir, "c.toml", &text);
    let par = write(&par_dir, "c.toml", &text);

    let (code, _, stderr) = run(&["run", serial.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let serial_cells = cells(&serial_dir.join("results/par"));

    // While the parallel run goes, both servers are alive at the same moment.
    let log = par_dir.join("stderr.log");
    let mut child = spawn(&["run", "--parallel", "2", par.to_str().unwrap()], &log);
    let mut both_alive = false;
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(120) {
        let servers = pids_with(&model)
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains("\0sim\0"))
                    .unwrap_or(false)
            })
            .count();
        both_alive |= servers >= 2;
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        both_alive,
        "never saw both servers running at once\n{stderr}"
    );
    assert!(stderr.contains("running up to 2 server groups at once"));

    let par_cells = cells(&par_dir.join("results/par"));
    assert_eq!(
        par_cells.keys().collect::<Vec<_>>(),
        serial_cells.keys().collect::<Vec<_>>(),
        "the same cell set as the serial run"
    );
    for (k, c) in &par_cells {
        assert_eq!(c["status"], "ok", "{k}");
        assert_eq!(c["identity"], serial_cells[k]["identity"], "{k}");
    }
    for (k, c) in &serial_cells {
        assert!(
            c["server_run"].get("concurrent_with").is_none(),
            "serial cell {k} ran alone"
        );
    }
    // Distinct ports, overlapping time windows, and the overlap recorded.
    let port = |server: &str| {
        let c = par_cells
            .iter()
            .find(|(k, _)| k.starts_with(&format!("{server}/")))
            .unwrap()
            .1;
        c["server_run"]["url"]
            .as_str()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
            .to_string()
    };
    assert_ne!(port("a"), port("b"));
    let window = |server: &str| {
        let mine: Vec<&serde_json::Value> = par_cells
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{server}/")))
            .map(|(_, v)| v)
            .collect();
        let start = mine
            .iter()
            .map(|c| rfc3339(&c["started_at"]))
            .min()
            .unwrap();
        let end = mine
            .iter()
            .map(|c| rfc3339(&c["finished_at"]))
            .max()
            .unwrap();
        (start, end)
    };
    let (a0, a1) = window("a");
    let (b0, b1) = window("b");
    assert!(
        a0 <= b1 && b0 <= a1,
        "windows {a0:?}..{a1:?} and {b0:?}..{b1:?} do not overlap"
    );
    let overlapping = par_cells
        .iter()
        .filter(|(k, c)| {
            let other = if k.starts_with("a/") { "b/" } else { "a/" };
            c["server_run"]["concurrent_with"]
                .as_array()
                .is_some_and(|v| v.iter().any(|n| n.as_str().unwrap().starts_with(other)))
        })
        .count();
    assert!(
        overlapping >= 2,
        "cells record their neighbours: {overlapping}"
    );
    assert!(pids_with(&model).is_empty(), "no server left behind");
    eprintln!("parallel test took {:?}", started.elapsed());
}

/// A throw-away sshd on 127.0.0.1, stopped when dropped.
struct Sshd {
    dir: tempfile::TempDir,
    port: u16,
}

impl Sshd {
    fn start() -> Self {
        need("sshd");
        need("ssh");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        // Owned by this test process: stopped even if it is killed.
        let st = Command::new(format!("{ROOT}/scripts/test-sshd.sh"))
            .args([
                "start",
                dir.path().to_str().unwrap(),
                &port.to_string(),
                &std::process::id().to_string(),
            ])
            .status()
            .unwrap();
        assert!(st.success(), "sshd did not start");
        Sshd { dir, port }
    }

    fn launcher(&self, forward: bool) -> String {
        let d = self.dir.path().display();
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        format!(
            r#"[launcher]
kind = "ssh"
host = "127.0.0.1"
user = "{user}"
port = {port}
forward_port = {forward}
options = ["-i", "{d}/client_key", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile={d}/known_hosts", "-o", "LogLevel=ERROR"]
"#,
            port = self.port
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = Command::new(format!("{ROOT}/scripts/test-sshd.sh"))
            .args(["stop", self.dir.path().to_str().unwrap()])
            .status();
    }
}

#[test]
fn ssh_launcher_runs_servers_on_the_remote_host_and_never_leaves_one_behind() {
    let started = Instant::now();
    let sshd = Sshd::start();
    let dir = tempfile::tempdir().unwrap();
    for forward in [false, true] {
        let name = format!("ssh-fwd-{forward}");
        let model = format!("ssh-model-{forward}-{}", std::process::id());
        let campaign = write(
            dir.path(),
            &format!("{name}.toml"),
            &sim_campaign(&name, &model, 2, 2, &sshd.launcher(forward)),
        );
        let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
        assert_eq!(code, 0, "forward_port = {forward}\n{stderr}");
        let root = dir.path().join("results").join(&name);
        let cells = cells(&root);
        assert_eq!(cells.len(), 4);
        for (k, c) in &cells {
            assert_eq!(c["status"], "ok", "{k}");
            let run = &c["server_run"];
            let argv: Vec<&str> = run["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            let remote_port = argv[argv.iter().position(|a| *a == "--port").unwrap() + 1];
            let host = argv[argv.iter().position(|a| *a == "--host").unwrap() + 1];
            let url = run["url"].as_str().unwrap();
            if forward {
                // Reached through `ssh -L`: a different local port; the server
                // listens on the remote loopback only.
                assert_eq!(host, "127.0.0.1");
                assert!(!url.ends_with(&format!(":{remote_port}")), "{url}");
            } else {
                assert_eq!(host, "0.0.0.0");
                assert_eq!(url, format!("http://127.0.0.1:{remote_port}"));
            }
        }
        // The remote output was streamed into the local log.
        let log = std::fs::read_to_string(root.join("logs/a.log")).unwrap();
        assert!(log.contains("(over ssh to "), "{log}");
        assert!(log.contains("servebench-remote: process group "), "{log}");
        assert!(log.contains("sim: ready on"), "{log}");
        assert!(log.contains("servebench-remote: server exited"), "{log}");
        assert!(pids_with(&model).is_empty(), "remote server left behind");
    }

    // The connection drops (servebench killed): the remote group is stopped.
    // SIGTERM: stopped within the grace period, exit 130.
    for (sig, what) in [(libc::SIGKILL, "kill"), (libc::SIGTERM, "term")] {
        let name = format!("ssh-{what}");
        let model = format!("ssh-{what}-{}", std::process::id());
        let campaign = write(
            dir.path(),
            &format!("{name}.toml"),
            &sim_campaign(&name, &model, 500, 500, &sshd.launcher(false)),
        );
        let log = dir.path().join("results").join(&name).join("logs/a.log");
        let mut child = spawn(
            &["run", campaign.to_str().unwrap()],
            &dir.path().join(format!("{name}.err")),
        );
        wait_until(Duration::from_secs(30), "the remote server", || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains("sim: ready on"))
        });
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        if sig == libc::SIGTERM {
            assert_eq!(status.code(), Some(130));
        }
        wait_until(
            Duration::from_secs(10),
            "the remote server to be stopped",
            || pids_with(&model).is_empty(),
        );
    }
    eprintln!("ssh test took {:?}", started.elapsed());
}

/// One test cluster at a time: each names the one node after this host.
fn slurm_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// A single-node Slurm cluster, stopped (jobs cancelled, daemons killed by
/// pid) when dropped.
struct Slurm {
    dir: tempfile::TempDir,
    conf: String,
}

impl Slurm {
    /// A cluster stopped when dropped or when this test process is gone.
    fn start() -> Self {
        Self::start_owned_by(std::process::id())
    }

    /// A cluster stopped when dropped or when process `owner` is gone.
    fn start_owned_by(owner: u32) -> Self {
        for p in [
            "slurmctld",
            "slurmd",
            "sbatch",
            "squeue",
            "scancel",
            "munged",
        ] {
            need(p);
        }
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(format!("{ROOT}/scripts/test-slurm.sh"))
            .args([
                "start",
                dir.path().to_str().unwrap(),
                &free_port().to_string(),
                &free_port().to_string(),
                &owner.to_string(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "Slurm did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = dir.path().join("slurm.conf").display().to_string();
        Slurm { dir, conf }
    }

    fn cmd(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(BIN)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn spawn(&self, args: &[&str], stderr: &Path) -> Child {
        Command::new(BIN)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(stderr).unwrap()))
            .spawn()
            .unwrap()
    }

    /// Job ids and states of jobs whose name starts with `prefix`.
    fn queue(&self, prefix: &str) -> Vec<(String, String)> {
        self.cmd("squeue", &["-h", "-o", "%i|%T|%j"])
            .lines()
            .filter_map(|l| {
                let p: Vec<&str> = l.split('|').collect();
                (p.len() == 3 && p[2].starts_with(prefix)).then(|| (p[0].into(), p[1].into()))
            })
            .collect()
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = Command::new(format!("{ROOT}/scripts/test-slurm.sh"))
            .args(["stop", self.dir.path().to_str().unwrap()])
            .status();
    }
}

/// Whether process `pid` still exists.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[test]
fn a_test_run_killed_by_sigterm_leaves_no_slurm_daemon_or_job_behind() {
    // The test run stands in as a child that owns the cluster.
    let _turn = slurm_turn();
    let mut owner = Command::new("sleep").arg("600").spawn().unwrap();
    let slurm = Slurm::start_owned_by(owner.id());
    let d = slurm.dir.path().to_path_buf();
    let pid_of = |file: &str| -> i32 {
        std::fs::read_to_string(d.join(file))
            .unwrap_or_default()
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let daemons = [
        pid_of("slurmctld.pid"),
        pid_of("slurmd.pid"),
        pid_of("munge/munged.pid"),
    ];
    assert!(daemons.iter().all(|&p| p > 0 && alive(p)), "{daemons:?}");
    // A running job, as a `servebench run --local` job would be.
    let job_pid = d.join("job.pid");
    let out = slurm.cmd(
        "sbatch",
        &[
            "--parsable",
            "--job-name=orphan-check",
            &format!("--output={}", d.join("job.out").display()),
            "--wrap",
            &format!("echo $$ > {}; exec sleep 300", job_pid.display()),
        ],
    );
    assert!(!out.trim().is_empty(), "sbatch gave no job id");
    wait_until(Duration::from_secs(60), "the job to run", || {
        std::fs::read_to_string(&job_pid).is_ok_and(|p| !p.trim().is_empty())
    });
    let job = pid_of("job.pid");
    assert!(alive(job));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(owner.id() as i32, libc::SIGTERM) };
    owner.wait().unwrap();
    wait_until(
        Duration::from_secs(60),
        "the daemons and the job to end",
        || daemons.iter().chain([&job]).all(|&p| !alive(p)),
    );
}

/// The job scripts `plan --show-commands` prints, by server id.
fn shown_job_scripts(slurm: &Slurm, campaign: &Path) -> Vec<(String, String)> {
    let (code, stdout, stderr) =
        slurm.run(&["plan", campaign.to_str().unwrap(), "--show-commands"]);
    assert_eq!(code, 0, "{stderr}");
    let mut out = Vec::new();
    let mut lines = stdout.lines();
    while let Some(l) = lines.next() {
        let Some((server, _)) = l
            .strip_prefix("server ")
            .and_then(|r| r.split_once(": job script "))
        else {
            continue;
        };
        let mut text = String::new();
        for l in lines.by_ref() {
            if l.starts_with("submitted with: sbatch --parsable ") {
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        out.push((server.to_string(), text));
    }
    out
}

#[test]
fn slurm_launcher_runs_one_job_per_server_records_what_slurm_killed_and_cancels_on_sigterm() {
    let started = Instant::now();
    let _turn = slurm_turn();
    let slurm = Slurm::start();
    eprintln!("slurm cluster up after {:?}", started.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let launcher = "[launcher]\nkind = \"slurm\"\npartition = \"debug\"\ntime_margin = \"5m\"\n";

    // Two server configs, two jobs; both complete and their cells merge.
    let model = format!("slurm-model-{}", std::process::id());
    let campaign = write(
        dir.path(),
        "jobs.toml",
        &sim_campaign("jobs", &model, 2, 2, launcher),
    );
    let (code, stdout, _) = slurm.run(&["plan", campaign.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("slurm: 2 jobs (one per server config), no GPUs requested"),
        "{stdout}"
    );
    // What `plan --show-commands` prints is a script Slurm accepts as is.
    let scripts = shown_job_scripts(&slurm, &campaign);
    assert_eq!(scripts.len(), 2, "{scripts:?}");
    for (server, text) in &scripts {
        assert!(text.contains("#SBATCH --partition=debug"), "{text}");
        assert!(text.contains("#SBATCH --time="), "{text}");
        assert!(
            text.contains(&format!("--only server={server} --local")),
            "{text}"
        );
        let path = write(dir.path(), &format!("shown-{server}.sh"), text);
        let out = Command::new("sbatch")
            .args(["--test-only", path.to_str().unwrap()])
            .env("SLURM_CONF", &slurm.conf)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sbatch --test-only rejected the shown script of {server}: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The same check rejects a script Slurm would refuse (no such partition).
    let bad = write(
        dir.path(),
        "bad.toml",
        &sim_campaign(
            "bad",
            &model,
            1,
            2,
            "[launcher]\nkind = \"slurm\"\npartition = \"no-such-partition\"\n",
        ),
    );
    let bad_scripts = shown_job_scripts(&slurm, &bad);
    let path = write(dir.path(), "shown-bad.sh", &bad_scripts[0].1);
    let out = Command::new("sbatch")
        .args(["--test-only", path.to_str().unwrap()])
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a bad partition must be refused");

    let (code, stdout, stderr) = slurm.run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("submitting 2 Slurm jobs"), "{stderr}");
    assert_eq!(stderr.matches(") ended COMPLETED").count(), 2, "{stderr}");
    assert!(stderr.contains("progress: 4 of 4 cells stored"), "{stderr}");
    assert!(
        stderr.contains("2 servers launched, 4 cells measured"),
        "{stderr}"
    );
    assert!(stdout.contains("a") && stdout.contains("b"));
    let root = dir.path().join("results/jobs");
    let got = cells(&root);
    assert_eq!(got.len(), 4);
    assert!(got.values().all(|c| c["status"] == "ok"));
    let servers: BTreeSet<&str> = got.keys().map(|k| k.split('/').next().unwrap()).collect();
    assert_eq!(servers, BTreeSet::from(["a", "b"]));
    // Each job ran `servebench run --only server=<id> --local` on the node.
    let script = std::fs::read_to_string(root.join("slurm/a.sh")).unwrap();
    assert!(script.contains("--only server=a --local"), "{script}");
    assert!(slurm.queue("servebench-jobs-").is_empty());
    // The launcher is not part of a cell's identity: locally, all is cached.
    let local = write(
        dir.path(),
        "jobs.toml",
        &sim_campaign("jobs", &model, 2, 2, ""),
    );
    let (_, stdout, _) = slurm.run(&["plan", local.to_str().unwrap()]);
    assert!(stdout.contains("4 cached"), "{stdout}");

    // A job Slurm cancels leaves its finished cells and records why the
    // others are missing.
    let slow = sim_campaign(
        "kill",
        &format!("slurm-kill-{}", std::process::id()),
        2,
        400,
        launcher,
    );
    let campaign = write(dir.path(), "kill.toml", &slow);
    let root = dir.path().join("results/kill");
    let err = dir.path().join("kill.err");
    let mut child = slurm.spawn(&["run", campaign.to_str().unwrap()], &err);
    wait_until(
        Duration::from_secs(60),
        "server b to serve in its job",
        || std::fs::read_to_string(root.join("logs/b.log")).is_ok_and(|l| l.contains("sim: ready")),
    );
    wait_until(Duration::from_secs(60), "server a's cells", || {
        cells(&root).keys().filter(|k| k.starts_with("a/")).count() == 2
    });
    let queued = slurm.queue("servebench-kill-b");
    assert_eq!(queued.len(), 1, "{queued:?}");
    let job_b = queued[0].0.clone();
    slurm.cmd("scancel", &[&job_b]);
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(3), "{stderr}");
    let after = cells(&root);
    let a_bytes: Vec<Vec<u8>> = ["a/w-in64-out20-c1", "a/w-in64-out20-c2"]
        .iter()
        .map(|k| std::fs::read(root.join("cells").join(format!("{k}.json"))).unwrap())
        .collect();
    for (k, c) in after.iter().filter(|(k, _)| k.starts_with("b/")) {
        assert_eq!(c["status"], "not_run", "{k}");
        assert_eq!(c["failure"]["class"], "scheduler", "{k}");
        let detail = c["failure"]["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(&format!("slurm job {job_b} ended CANCELLED (reason: ")),
            "{detail}"
        );
    }
    assert_eq!(after.keys().filter(|k| k.starts_with("b/")).count(), 2);

    // The next run submits only what is missing; SIGTERM cancels its job.
    let mut child = slurm.spawn(&["run", campaign.to_str().unwrap()], &err);
    wait_until(
        Duration::from_secs(60),
        "the resubmitted job to run",
        || {
            slurm
                .queue("servebench-kill-")
                .iter()
                .any(|(_, s)| s == "RUNNING")
        },
    );
    let queued = slurm.queue("servebench-kill-");
    assert_eq!(queued.len(), 1, "only server b is resubmitted: {queued:?}");
    assert_ne!(queued[0].0, job_b);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("submitting 1 Slurm jobs"), "{stderr}");
    assert!(stderr.contains("cancelling Slurm jobs"), "{stderr}");
    assert!(
        slurm.queue("servebench-kill-").is_empty(),
        "a cancelled campaign leaves no job in squeue"
    );
    for (i, k) in ["a/w-in64-out20-c1", "a/w-in64-out20-c2"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            std::fs::read(root.join("cells").join(format!("{k}.json"))).unwrap(),
            a_bytes[i],
            "{k} untouched"
        );
    }
    eprintln!("slurm test took {:?}", started.elapsed());
}

#[test]
fn systemd_launcher_builds_unit_commands_and_runs_live_only_under_systemd() {
    use servebench::launcher::{systemd, StartRequest};
    let dir = tempfile::tempdir().unwrap();
    let text = sim_campaign(
        "units",
        "units-model",
        2,
        2,
        "[launcher]\nkind = \"systemd\"\nproperties = [\"MemoryMax=8G\", \"Nice=5\"]\n",
    );
    let campaign = write(dir.path(), "units.toml", &text);
    let (code, _, stderr) = run(&["plan", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let c = servebench::campaign::load_campaign(&campaign).unwrap();
    let servebench::campaign::launcher::Launcher::Systemd { ssh, properties } = &c.launcher else {
        panic!("{:?}", c.launcher)
    };
    let req = StartRequest {
        argv: vec![BIN.into(), "sim".into(), "--port".into(), "18001".into()],
        env: [("CUDA_VISIBLE_DEVICES".to_string(), "1".to_string())].into(),
        log: dir.path().join("u.log"),
        header: "h".into(),
        port: 18001,
        unit: systemd::unit_name(&["units", "a"]),
        grace: Duration::from_secs(2),
    };
    let cmds = systemd::commands(ssh.as_ref(), properties, &req);
    assert_eq!(cmds.unit, "servebench-units-a.service");
    assert_eq!(cmds.start[0], "systemd-run");
    for want in [
        "--unit=servebench-units-a.service",
        "--property=MemoryMax=8G",
        "--property=Nice=5",
        "--property=KillMode=control-group",
        "--property=TimeoutStopSec=2000ms",
        "--setenv=CUDA_VISIBLE_DEVICES=1",
    ] {
        assert!(
            cmds.start.iter().any(|a| a == want),
            "{want} in {:?}",
            cmds.start
        );
    }
    let dash = cmds.start.iter().position(|a| a == "--").unwrap();
    assert_eq!(cmds.start[dash + 1..], req.argv[..]);
    assert_eq!(
        cmds.logs[..2],
        ["journalctl", "--unit=servebench-units-a.service"]
    );
    assert!(cmds.logs.iter().any(|a| a == "--follow"));
    assert_eq!(
        cmds.stop,
        ["systemctl", "stop", "servebench-units-a.service"]
    );

    if !systemd::systemd_is_pid1() {
        println!(
            "NOTE: systemd is not PID 1 on this machine (no /run/systemd/system): the live \
             systemd launcher test was NOT run; only the generated systemd-run/journalctl/systemctl \
             command lines were checked."
        );
        eprintln!("NOTE: live systemd launch not possible here (systemd is not PID 1); checked command lines only");
        return;
    }
    let (code, _, stderr) = run(&["run", campaign.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let got = cells(&dir.path().join("results/units"));
    assert_eq!(got.len(), 4);
    assert!(got.values().all(|c| c["status"] == "ok"));
    let log = std::fs::read_to_string(dir.path().join("results/units/logs/a.log")).unwrap();
    assert!(
        log.contains("sim: ready"),
        "journal streamed into the log: {log}"
    );
}

#[test]
fn cluster_examples_parse_and_plan() {
    for (file, want) in [
        ("examples/slurm.toml", "slurm: "),
        ("examples/ssh.toml", "total: "),
    ] {
        let path = format!("{ROOT}/{file}");
        let (code, stdout, stderr) = run(&["plan", &path]);
        assert_eq!(code, 0, "{file}: {stderr}");
        assert!(stdout.contains(want), "{file}: {stdout}");
    }
    let (_, stdout, _) = run(&["plan", &format!("{ROOT}/examples/slurm.toml")]);
    assert!(stdout.contains("GPU-hours requested"), "{stdout}");
}
