//! The systemd launcher: each server is a transient unit started with
//! `systemd-run` (here, or on `ssh_host` over SSH), its environment and GPU
//! assignment given as `--setenv`, its stop behaviour as properties
//! (`KillMode=control-group`, `TimeoutStopSec=<grace>`: systemd sends SIGTERM
//! to the whole cgroup, waits, then SIGKILL). Its log is followed with
//! `journalctl -u UNIT -f` into `logs/<server>.log`; it is stopped with
//! `systemctl stop`.
//!
//! The command lines are built by [`commands`], a pure function, so they are
//! tested everywhere; running them needs systemd as PID 1.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::campaign::launcher::SshTarget;
use crate::failure::{Failure, FailureClass};
use crate::launcher::local::read_tail;
use crate::launcher::StartRequest;
use crate::util::proc::output_of;
use crate::util::shell::shell_words;

/// The command lines that manage one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitCommands {
    /// Unit name (`servebench-<campaign>-<server>.service`).
    pub unit: String,
    /// Starts the transient unit.
    pub start: Vec<String>,
    /// Follows its journal.
    pub logs: Vec<String>,
    /// Prints `ActiveState=`, `Result=`, `ExecMainStatus=`.
    pub status: Vec<String>,
    /// Stops it (blocks until stopped).
    pub stop: Vec<String>,
    /// Forgets a failed unit.
    pub reset: Vec<String>,
    /// Tells who holds the listening socket on its port (`listener`).
    pub holder: Vec<String>,
}

/// A unit name from parts, with characters systemd does not allow replaced.
pub fn unit_name(parts: &[&str]) -> String {
    let raw = format!("servebench-{}", parts.join("-"));
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.:".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}.service")
}

/// Build the command lines for `req` (over `ssh` when given).
pub fn commands(
    ssh: Option<&SshTarget>,
    properties: &[String],
    req: &StartRequest,
) -> UnitCommands {
    let unit = req.unit.clone();
    let mut start = vec![
        "systemd-run".to_string(),
        format!("--unit={unit}"),
        "--quiet".into(),
        "--property=Type=exec".into(),
        "--property=KillMode=control-group".into(),
        format!("--property=TimeoutStopSec={}ms", req.grace.as_millis()),
        "--property=SendSIGKILL=yes".into(),
    ];
    start.extend(properties.iter().map(|p| format!("--property={p}")));
    start.extend(req.env.iter().map(|(k, v)| format!("--setenv={k}={v}")));
    start.push("--".into());
    start.extend(req.argv.iter().cloned());
    let logs = vec![
        "journalctl".to_string(),
        format!("--unit={unit}"),
        "--follow".into(),
        "--output=cat".into(),
        "--no-pager".into(),
        "--since=now".into(),
    ];
    let status = vec![
        "systemctl".to_string(),
        "show".into(),
        unit.clone(),
        "--property=ActiveState,Result,ExecMainStatus".into(),
    ];
    let stop = vec!["systemctl".to_string(), "stop".into(), unit.clone()];
    let reset = vec!["systemctl".to_string(), "reset-failed".into(), unit.clone()];
    let wrap = |argv: Vec<String>| match ssh {
        None => argv,
        Some(t) => {
            let mut v = t.argv();
            v.push(shell_words(&argv));
            v
        }
    };
    UnitCommands {
        start: wrap(start),
        logs: wrap(logs),
        status: wrap(status),
        stop: wrap(stop),
        reset: wrap(reset),
        holder: wrap(crate::launcher::listener::local_argv(
            &crate::launcher::listener::Launch::Unit(unit.clone()),
            req.port,
        )),
        unit,
    }
}

/// Whether systemd runs this machine (PID 1), so transient units can start.
pub fn systemd_is_pid1() -> bool {
    std::path::Path::new("/run/systemd/system").is_dir()
}

/// A running transient unit.
pub struct SystemdServer {
    cmds: UnitCommands,
    journal: Option<tokio::process::Child>,
    log: std::path::PathBuf,
    log_start: u64,
    last_check: Option<Instant>,
    ended: Option<String>,
    stopped: bool,
}

impl SystemdServer {
    /// The command that tells who holds the listening socket on its port.
    pub fn holder_argv(&self) -> Vec<String> {
        self.cmds.holder.clone()
    }

    /// Start the unit and follow its journal; returns it and its URL.
    pub fn start(
        ssh: Option<&SshTarget>,
        properties: &[String],
        req: &StartRequest,
    ) -> Result<(Self, String), Failure> {
        let cmds = commands(ssh, properties, req);
        if let Some(dir) = req.log.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&req.log)
            .map_err(|e| Failure::new(FailureClass::StartFailed, e.to_string()))?;
        let _ = writeln!(log, "\n===== {} (unit {}) =====", req.header, cmds.unit);
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        output_of(&cmds.start).map_err(|e| Failure::new(FailureClass::StartFailed, e))?;
        let err = log
            .try_clone()
            .map_err(|e| Failure::new(FailureClass::StartFailed, e.to_string()))?;
        let journal = tokio::process::Command::new(&cmds.logs[0])
            .args(&cmds.logs[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .kill_on_drop(true)
            .spawn()
            .ok();
        let host = ssh.map(|t| t.host.clone()).unwrap_or("127.0.0.1".into());
        Ok((
            Self {
                cmds,
                journal,
                log: req.log.clone(),
                log_start,
                last_check: None,
                ended: None,
                stopped: false,
            },
            format!("http://{host}:{}", req.port),
        ))
    }

    /// How the unit ended, if it has (checked at most every 2 s).
    pub fn exited(&mut self) -> Option<String> {
        if self.ended.is_some() {
            return self.ended.clone();
        }
        if self
            .last_check
            .is_some_and(|t| t.elapsed() < Duration::from_secs(2))
        {
            return None;
        }
        self.last_check = Some(Instant::now());
        let text = output_of(&self.cmds.status).ok()?;
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or("")
                .to_string()
        };
        let state = field("ActiveState");
        if matches!(state.as_str(), "inactive" | "failed") {
            self.ended = Some(format!(
                "unit {} {state} (result {}, exit status {})",
                self.cmds.unit,
                field("Result"),
                field("ExecMainStatus")
            ));
        }
        self.ended.clone()
    }

    /// The log file the unit's output goes to.
    pub fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    /// This launch's journal output.
    pub fn log_tail(&self, max_lines: usize) -> String {
        read_tail(&self.log, self.log_start, max_lines)
    }

    /// The unit name.
    pub fn describe(&self) -> String {
        format!("unit {}", self.cmds.unit)
    }

    /// `systemctl stop` (SIGTERM to the cgroup, `TimeoutStopSec`, SIGKILL).
    pub async fn stop(&mut self, grace: Duration) -> bool {
        self.stopped = true;
        let started = Instant::now();
        let stop = self.cmds.stop.clone();
        let _ = tokio::task::spawn_blocking(move || output_of(&stop)).await;
        let reset = self.cmds.reset.clone();
        let _ = tokio::task::spawn_blocking(move || output_of(&reset)).await;
        if let Some(mut j) = self.journal.take() {
            let _ = j.start_kill();
            let _ = j.wait().await;
        }
        started.elapsed() >= grace
    }
}

impl Drop for SystemdServer {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = output_of(&self.cmds.stop);
            let _ = output_of(&self.cmds.reset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> StartRequest {
        StartRequest {
            argv: vec![
                "vllm".into(),
                "serve".into(),
                "m".into(),
                "--port".into(),
                "8001".into(),
            ],
            env: [("CUDA_VISIBLE_DEVICES".to_string(), "2,3".to_string())].into(),
            log: "/tmp/x.log".into(),
            header: "h".into(),
            port: 8001,
            unit: unit_name(&["my campaign", "tp2"]),
            grace: Duration::from_secs(15),
        }
    }

    #[test]
    fn command_lines_carry_environment_gpus_and_stop_policy() {
        let c = commands(None, &["MemoryMax=64G".into()], &req());
        assert_eq!(c.unit, "servebench-my_campaign-tp2.service");
        let start = shell_words(&c.start);
        assert_eq!(
            start,
            "systemd-run --unit=servebench-my_campaign-tp2.service --quiet --property=Type=exec \
             --property=KillMode=control-group --property=TimeoutStopSec=15000ms \
             --property=SendSIGKILL=yes --property=MemoryMax=64G \
             --setenv=CUDA_VISIBLE_DEVICES=2,3 -- vllm serve m --port 8001"
        );
        assert_eq!(
            shell_words(&c.logs),
            "journalctl --unit=servebench-my_campaign-tp2.service --follow --output=cat --no-pager --since=now"
        );
        assert_eq!(
            shell_words(&c.stop),
            "systemctl stop servebench-my_campaign-tp2.service"
        );
    }

    #[test]
    fn over_ssh_each_command_is_one_remote_line() {
        let t = SshTarget {
            host: "gpu7".into(),
            ..Default::default()
        };
        let c = commands(Some(&t), &[], &req());
        assert_eq!(c.start[0], "ssh");
        assert_eq!(c.start[c.start.len() - 2], "gpu7");
        assert!(c.start.last().unwrap().starts_with("systemd-run --unit="));
        assert_eq!(
            c.stop.last().unwrap(),
            "systemctl stop servebench-my_campaign-tp2.service"
        );
    }
}
