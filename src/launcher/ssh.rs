//! The SSH launcher: the server runs on a remote host, started through the
//! system `ssh` client (so ~/.ssh/config, keys, agents and host-key checks
//! apply as the user set them up; campaign files never hold passwords).
//!
//! One `ssh` session per launch runs a small POSIX `sh` supervisor on the
//! remote host. It starts the server with `setsid` (its own session and
//! process group), prints that group id, and waits. The server's output is
//! the session's output, appended by the local `ssh` to `logs/<server>.log`.
//! The supervisor also reads the session's stdin: when that closes — because
//! servebench stops the server, or because the connection dropped or
//! servebench died — it sends SIGTERM to the remote group, waits the grace
//! period, then SIGKILL. So a remote server never outlives its session.
//!
//! The server is reached at the host's address, or through `ssh -L` when
//! `forward_port = true` (the server then listens on the remote loopback).

use std::io::Write;
use std::time::Duration;

use crate::campaign::launcher::SshTarget;
use crate::failure::{Failure, FailureClass};
use crate::launcher::local::{describe_exit, read_tail, LaunchSpec, LocalServer};
use crate::launcher::StartRequest;
use crate::util::shell::shell_words;

/// Marker lines the remote supervisor prints.
const PGID_MARK: &str = "servebench-remote: process group ";
const KILL_MARK: &str = "servebench-remote: sent SIGKILL";

/// A server on a remote host.
pub struct SshServer {
    session: LocalServer,
    stdin: Option<tokio::process::ChildStdin>,
    forward: Option<tokio::process::Child>,
    target: SshTarget,
    remote_pgid: Option<i32>,
}

/// The remote supervisor script for `argv` with `env`, stopping with
/// `grace` between SIGTERM and SIGKILL.
pub fn supervisor_script(
    argv: &[String],
    env: &std::collections::BTreeMap<String, String>,
    grace: Duration,
) -> String {
    let mut cmd = vec!["exec".to_string(), "env".to_string()];
    cmd.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    cmd.extend(argv.iter().cloned());
    let server = shell_words(&cmd);
    let ticks = (grace.as_secs_f64() * 10.0).ceil().max(1.0) as u64;
    format!(
        r#"exec 3<&0
setsid sh -c {server} </dev/null 3<&- 2>&1 &
pid=$!
echo "{PGID_MARK}$pid"
( i=0
  while ! kill -s 0 -- -$pid 2>/dev/null && kill -s 0 $pid 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  cat >/dev/null 2>&1 <&3
  if kill -s TERM -- -$pid 2>/dev/null; then
    i=0
    while kill -s 0 -- -$pid 2>/dev/null && [ $i -lt {ticks} ]; do sleep 0.1; i=$((i+1)); done
    kill -s KILL -- -$pid 2>/dev/null && echo "{KILL_MARK}"
  fi ) &
watcher=$!
wait $pid; status=$?
kill $watcher 2>/dev/null
echo "servebench-remote: server exited with status $status"
exit $status"#,
        server = shell_words(&[server])
    )
}

/// The full local argv of the session: `ssh [opts] dest sh -c 'SCRIPT'`.
pub fn session_argv(target: &SshTarget, script: &str) -> Vec<String> {
    let mut v = target.argv();
    // ssh joins its remaining arguments with spaces for the remote shell.
    v.push(format!("sh -c {}", shell_words(&[script.to_string()])));
    v
}

/// The argv of the port forward: local `lport` → remote 127.0.0.1:`rport`.
pub fn forward_argv(target: &SshTarget, lport: u16, rport: u16) -> Vec<String> {
    let mut v = target.argv();
    let dest = v.pop().unwrap_or_default();
    v.extend([
        "-N".into(),
        "-o".into(),
        "ExitOnForwardFailure=yes".into(),
        "-L".into(),
        format!("127.0.0.1:{lport}:127.0.0.1:{rport}"),
        dest,
    ]);
    v
}

impl SshServer {
    /// Start the remote server; returns it and the URL to reach it at.
    pub async fn start(
        target: &SshTarget,
        forward_port: bool,
        req: &StartRequest,
    ) -> Result<(Self, String), Failure> {
        let script = supervisor_script(&req.argv, &req.env, req.grace);
        let argv = session_argv(target, &script);
        let (session, stdin) = LocalServer::spawn_piped(&LaunchSpec {
            argv,
            env: Default::default(),
            log: req.log.clone(),
            header: format!("{} (over ssh to {})", req.header, target.destination()),
        })?;
        let mut me = Self {
            session,
            stdin,
            forward: None,
            target: target.clone(),
            remote_pgid: None,
        };
        // The supervisor prints the group id first; ssh failing to connect
        // exits (255) instead.
        let start = std::time::Instant::now();
        while me.remote_pgid.is_none() && start.elapsed() < Duration::from_secs(60) {
            me.remote_pgid = me.find_pgid();
            if me.remote_pgid.is_some() {
                break;
            }
            if let Some(status) = me.exited() {
                let tail = me.log_tail(20);
                return Err(Failure::new(
                    FailureClass::StartFailed,
                    format!(
                        "ssh to {} ended before the server started ({status})",
                        target.destination()
                    ),
                )
                .with_log(&tail));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let url = if forward_port {
            let lport = crate::launcher::local_free_port().map_err(|e| {
                Failure::new(
                    FailureClass::StartFailed,
                    format!("no free local port: {e}"),
                )
            })?;
            me.forward = Some(spawn_forward(target, lport, req)?);
            format!("http://127.0.0.1:{lport}")
        } else {
            format!("http://{}:{}", url_host(&target.host), req.port)
        };
        Ok((me, url))
    }

    fn find_pgid(&self) -> Option<i32> {
        let (log, from) = self.session.log_position();
        read_tail(log, from, 200)
            .lines()
            .find_map(|l| l.strip_prefix(PGID_MARK))
            .and_then(|p| p.trim().parse().ok())
    }

    /// The command that tells who holds the listening socket on `port` on
    /// the remote host, once the server's process group is known.
    pub fn holder_argv(&self, port: u16) -> Option<Vec<String>> {
        let group = crate::launcher::listener::Launch::Group(self.remote_pgid?);
        Some(session_argv(
            &self.target,
            &crate::launcher::listener::script(&group, port),
        ))
    }

    /// How the server ended, if it has (the session ends with it).
    pub fn exited(&mut self) -> Option<String> {
        if let Some(f) = self.forward.as_mut() {
            if let Ok(Some(s)) = f.try_wait() {
                self.forward = None;
                return Some(format!("the ssh port forward ended ({s})"));
            }
        }
        self.session.exited().map(|s| match s.code() {
            Some(255) => format!(
                "ssh connection to {} failed or dropped (exit code 255)",
                self.target.destination()
            ),
            _ => format!("remote {}", describe_exit(s)),
        })
    }

    /// This launch's log output.
    pub fn log_tail(&self, max_lines: usize) -> String {
        self.session.log_tail(max_lines)
    }

    /// The local log file the remote output goes to.
    pub fn log_path(&self) -> &std::path::Path {
        self.session.log_path()
    }

    /// Where it runs.
    pub fn describe(&self) -> String {
        match self.remote_pgid {
            Some(p) => format!("process group {p} on {}", self.target.host),
            None => format!("on {}", self.target.host),
        }
    }

    /// Close the session's stdin: the remote supervisor sends SIGTERM to the
    /// group, waits `grace`, then SIGKILL. If the session does not end in
    /// time, kill the remote group over a fresh connection.
    pub async fn stop(&mut self, grace: Duration) -> bool {
        drop(self.stdin.take());
        if let Some(mut f) = self.forward.take() {
            let _ = f.start_kill();
            let _ = f.wait().await;
        }
        let ended = self
            .session
            .wait_exit(grace + Duration::from_secs(10))
            .await
            .is_some();
        let (log, from) = self.session.log_position();
        let mut killed = read_tail(log, from, 50).contains(KILL_MARK);
        if !ended {
            if let Some(pgid) = self.remote_pgid {
                let mut argv = self.target.argv();
                argv.push(format!("kill -s KILL -- -{pgid}"));
                let _ = tokio::time::timeout(
                    Duration::from_secs(20),
                    tokio::process::Command::new(&argv[0])
                        .args(&argv[1..])
                        .stdin(std::process::Stdio::null())
                        .output(),
                )
                .await;
            }
            self.session.stop(Duration::from_secs(1)).await;
            killed = true;
        }
        killed
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        // Dropping the session kills the local ssh; the remote supervisor sees
        // its stdin close and stops the group.
        if let Some(f) = self.forward.as_mut() {
            let _ = f.start_kill();
        }
    }
}

fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn spawn_forward(
    target: &SshTarget,
    lport: u16,
    req: &StartRequest,
) -> Result<tokio::process::Child, Failure> {
    let argv = forward_argv(target, lport, req.port);
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&req.log)
        .map_err(|e| Failure::new(FailureClass::StartFailed, e.to_string()))?;
    let _ = writeln!(log, "servebench: port forward {}", shell_words(&argv));
    let err = log
        .try_clone()
        .map_err(|e| Failure::new(FailureClass::StartFailed, e.to_string()))?;
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(log))
        .stderr(std::process::Stdio::from(err))
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| {
        Failure::new(
            FailureClass::StartFailed,
            format!("cannot start the ssh port forward: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisor_runs_the_server_in_its_own_group_and_stops_it_when_stdin_closes() {
        let argv: Vec<String> = ["sh", "-c", "echo \"it's up $X\"; exec sleep 30"]
            .map(String::from)
            .to_vec();
        let env = [("X".to_string(), "a b".to_string())].into();
        let script = supervisor_script(&argv, &env, Duration::from_millis(500));
        // The session's stdin closes after a second, as when servebench stops it.
        let out = std::process::Command::new("sh")
            .args(["-c", "sleep 1 | sh -c \"$1\"", "sh", &script])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(PGID_MARK), "{text}");
        assert!(text.contains("it's up a b"), "{text}");
        assert!(text.contains("status 143"), "{text}");
        assert_eq!(out.status.code(), Some(143));
    }

    #[test]
    fn argv_quotes_the_script_once_for_the_remote_shell() {
        let t = SshTarget {
            host: "gpu1".into(),
            user: Some("me".into()),
            port: Some(2222),
            options: vec!["-i".into(), "/k".into()],
        };
        let a = session_argv(&t, "echo 'x'");
        assert_eq!(a.last().unwrap(), "sh -c 'echo '\\''x'\\'''");
        assert!(a.windows(2).any(|w| w == ["-p", "2222"]));
        let f = forward_argv(&t, 1, 2);
        assert_eq!(f[f.len() - 2..], ["127.0.0.1:1:127.0.0.1:2", "me@gpu1"]);
    }
}
