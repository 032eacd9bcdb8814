//! The local launcher: a child process in its own process group, output
//! appended to `logs/<server-id>.log`, stopped with SIGTERM to the group, a
//! grace period, then SIGKILL.
//!
//! When the `servebench` binary runs, the server is started under
//! `servebench __supervise` (see [`super::supervise`]), which kills the
//! server's whole tree when servebench dies, SIGKILL included; grandchildren
//! that left the group or the session are found through `/proc`. Without it
//! (library use), the child asks the kernel to kill it if servebench dies.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::failure::{Failure, FailureClass};

/// What to start.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Log file (appended to).
    pub log: PathBuf,
    /// A header written before this launch's output.
    pub header: String,
}

/// A running local server; dropping it kills its process group.
pub struct LocalServer {
    child: tokio::process::Child,
    pgid: i32,
    /// `VAR=value` of the supervisor's marker, which every process of the
    /// tree carries; `None` without a supervisor.
    marker: Option<String>,
    log: PathBuf,
    log_start: u64,
    exit: Option<std::process::ExitStatus>,
    /// The write end of the supervisor's pipe (closing it stops the tree);
    /// `None` when the server runs without a supervisor.
    lifeline: Option<std::os::fd::OwnedFd>,
}

impl LocalServer {
    /// Start the process; a failure to exec is a `start_failed` failure.
    pub fn spawn(spec: &LaunchSpec) -> Result<Self, Failure> {
        Self::spawn_with(spec, false).map(|(s, _)| s)
    }

    /// Start the process with its stdin a pipe held by the caller (closing
    /// it tells the process to stop; the SSH launcher relies on this).
    pub fn spawn_piped(
        spec: &LaunchSpec,
    ) -> Result<(Self, Option<tokio::process::ChildStdin>), Failure> {
        Self::spawn_with(spec, true)
    }

    fn spawn_with(
        spec: &LaunchSpec,
        piped: bool,
    ) -> Result<(Self, Option<tokio::process::ChildStdin>), Failure> {
        let (program, args) = spec
            .argv
            .split_first()
            .ok_or_else(|| Failure::new(FailureClass::StartFailed, "empty command"))?;
        if let Some(dir) = spec.log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| start_failed(format!("cannot create {}: {e}", dir.display())))?;
        }
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .map_err(|e| start_failed(format!("cannot open log {}: {e}", spec.log.display())))?;
        writeln!(log, "\n===== {} =====", spec.header).map_err(|e| start_failed(e.to_string()))?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let err = log.try_clone().map_err(|e| start_failed(e.to_string()))?;
        let supervisor = super::supervise::exe();
        let mut lifeline = None;
        let mut marker = None;
        let mut cmd = match supervisor {
            Some(exe) => {
                super::supervise::reap_recorded(&super::supervise::record_dir(&spec.log));
                let (read, write) = pipe()?;
                let read_fd = read.as_raw_fd();
                let mut cmd = tokio::process::Command::new(exe);
                let value = super::supervise::new_marker();
                cmd.arg(super::supervise::SUBCOMMAND)
                    .arg(read_fd.to_string())
                    .arg(super::supervise::record_path(&spec.log))
                    .arg("--")
                    .arg(program)
                    .args(args)
                    .env(super::supervise::MARKER_VAR, &value);
                marker = Some(format!("{}={value}", super::supervise::MARKER_VAR));
                // SAFETY: fcntl is async-signal-safe; it only lets the pipe's
                // read end survive exec in the supervisor.
                unsafe {
                    cmd.pre_exec(move || {
                        libc::fcntl(read_fd, libc::F_SETFD, 0);
                        Ok(())
                    });
                }
                lifeline = Some((read, write));
                cmd
            }
            None => {
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args);
                // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
                unsafe {
                    cmd.pre_exec(|| {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        Ok(())
                    });
                }
                cmd
            }
        };
        cmd.envs(&spec.env)
            .stdin(if piped { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .process_group(0)
            .kill_on_drop(false);
        let mut child = cmd
            .spawn()
            .map_err(|e| start_failed(format!("cannot start `{program}`: {e}")))?;
        // Only the supervisor keeps the read end.
        let lifeline = lifeline.map(|(read, write)| {
            drop(read);
            write
        });
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        let stdin = child.stdin.take();
        Ok((
            Self {
                child,
                pgid,
                marker,
                log: spec.log.clone(),
                log_start,
                exit: None,
                lifeline,
            },
            stdin,
        ))
    }

    /// The log file its output goes to.
    pub fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    /// The process (and group) id.
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// The processes that make up this launch: those carrying its
    /// supervisor's marker, or without a supervisor its process group.
    pub fn launch(&self) -> super::listener::Launch {
        match &self.marker {
            Some(m) => super::listener::Launch::Marker(m.clone()),
            None => super::listener::Launch::Group(self.pgid),
        }
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        if self.exit.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.exit = Some(s);
            }
        }
        self.exit
    }

    /// The log file and where this launch's output starts in it.
    pub fn log_position(&self) -> (&Path, u64) {
        (&self.log, self.log_start)
    }

    /// Wait up to `limit` for the process to exit on its own.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        if self.exit.is_none() {
            if let Ok(Ok(s)) = tokio::time::timeout(limit, self.child.wait()).await {
                self.exit = Some(s);
            }
        }
        self.exit
    }

    /// This launch's log output, at most the last `max_lines` lines.
    pub fn log_tail(&self, max_lines: usize) -> String {
        read_tail(&self.log, self.log_start, max_lines)
    }

    /// Stop the whole group: SIGTERM, wait up to `grace`, then SIGKILL.
    /// Returns whether SIGKILL was needed.
    pub async fn stop(&mut self, grace: Duration) -> bool {
        if self.exited().is_some() {
            self.kill_group(libc::SIGKILL);
            return false;
        }
        self.kill_group(libc::SIGTERM);
        if let Ok(Ok(s)) = tokio::time::timeout(grace, self.child.wait()).await {
            self.exit = Some(s);
            // Children that ignored SIGTERM must not outlive their leader.
            self.kill_group(libc::SIGKILL);
            return false;
        }
        self.kill_group(libc::SIGKILL);
        // A supervisor needs a moment to kill the tree; a hung one is killed.
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(Ok(s)) => self.exit = Some(s),
            _ => {
                let _ = self.child.start_kill();
                if let Ok(s) = self.child.wait().await {
                    self.exit = Some(s);
                }
            }
        }
        true
    }

    fn kill_group(&self, sig: i32) {
        if self.lifeline.is_some() {
            // The supervisor owns the tree; once it has exited (and been
            // reaped) its pid may belong to someone else.
            if self.exit.is_none() && self.pgid > 0 {
                let sig = if sig == libc::SIGKILL {
                    libc::SIGUSR1
                } else {
                    sig
                };
                // SAFETY: signalling our own, not yet reaped, child.
                unsafe {
                    libc::kill(self.pgid, sig);
                }
            }
            return;
        }
        if self.pgid > 0 {
            // SAFETY: signalling a process group we created; errors (already gone) are fine.
            unsafe {
                libc::kill(-self.pgid, sig);
            }
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.kill_group(libc::SIGKILL);
        if self.lifeline.take().is_some() {
            // Closing the pipe also stops the supervisor, which must live
            // long enough to kill the tree: no SIGKILL to it here. Wait
            // (bounded) for it, so that a servebench exiting right after
            // this drop leaves nothing behind.
            let until = std::time::Instant::now() + Duration::from_secs(5);
            while self.exit.is_none() && std::time::Instant::now() < until {
                match self.child.try_wait() {
                    Ok(Some(s)) => self.exit = Some(s),
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                    Err(_) => break,
                }
            }
            return;
        }
        let _ = self.child.start_kill();
        let _ = self.child.try_wait();
    }
}

/// A pipe whose both ends close on exec.
fn pipe() -> Result<(OwnedFd, OwnedFd), Failure> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds that we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(start_failed(format!(
            "cannot create a pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

fn start_failed(detail: String) -> Failure {
    Failure::new(FailureClass::StartFailed, detail)
}

/// The last `max_lines` lines of a file from byte `from` on.
pub fn read_tail(path: &Path, from: u64, max_lines: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    // Read at most 256 KiB: enough for any tail worth showing.
    let start = from.max(len.saturating_sub(256 * 1024));
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(max_lines)..].join("\n")
}

/// Describe an exit status: code or signal.
pub fn describe_exit(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown exit".into(),
    }
}
