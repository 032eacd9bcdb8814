//! Launchers start and stop server processes. `local` runs a child in its
//! own process group; `ssh` runs it in its own session on a remote host;
//! `systemd` makes it a transient unit; `slurm` submits one job per server
//! config, each running `servebench run --local` on its node. Every launched
//! server sits in a guard ([`ServerHandle`]) that stops it on every exit
//! path, panics included.

pub mod gpu;
pub mod listener;
pub mod local;
pub mod slurm;
pub mod ssh;
pub mod supervise;
pub mod systemd;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::campaign::launcher::Launcher;

use tokio_util::sync::CancellationToken;

use crate::client::Endpoint;
use crate::failure::{Failure, FailureClass};
use crate::util::shell::shell_words;

/// What the launcher is asked to start for group `g` on `port` with `gpus`:
/// the one builder behind both `run` and `plan --show-commands`.
pub fn start_request(
    c: &crate::campaign::Campaign,
    g: &crate::plan::ServerGroup,
    launcher: &Launcher,
    port: u16,
    gpus: &[u32],
    log: std::path::PathBuf,
    self_exe: &str,
) -> Result<StartRequest, crate::engine::EngineError> {
    let mut spec = g.spec.clone();
    spec.port = port;
    spec.host = bind_host(launcher).to_string();
    let argv = crate::engine::command_line(&spec, self_exe)?;
    let mut env = crate::engine::environment(&spec);
    if !gpus.is_empty() {
        env.insert(
            "CUDA_VISIBLE_DEVICES".into(),
            gpus.iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    let header = format!(
        "{} launch of {}: {}",
        crate::util::units::now_rfc3339(),
        g.server.id,
        shell_words(&argv)
    );
    Ok(StartRequest {
        argv,
        env,
        log,
        header,
        port,
        unit: systemd::unit_name(&[&c.name, &g.server.id]),
        grace: c.run.grace_period,
    })
}

/// Why a started server did not become healthy.
#[derive(Debug)]
pub enum NotHealthy {
    /// It exited, timed out or was interrupted; the failure says which.
    Failed(Failure),
    /// Another process holds its port and answered the health check: the
    /// launch never got the port, and a launch on another port may.
    PortTaken(Failure),
}

impl NotHealthy {
    /// The same, with the server's log tail as evidence.
    pub fn with_log(self, tail: &str) -> Self {
        match self {
            NotHealthy::Failed(f) => NotHealthy::Failed(f.with_log(tail)),
            NotHealthy::PortTaken(f) => NotHealthy::PortTaken(f.with_log(tail)),
        }
    }
}

/// Poll `path` on `endpoint` until it answers 200 from `server`'s own
/// listener on `port`, the process dies, the timeout passes, or `cancel`
/// fires. A 200 from a socket held by another process is the port taken,
/// not the server healthy (see [`listener`]).
pub async fn wait_healthy(
    endpoint: &Endpoint,
    path: &str,
    (timeout, cancel): (Duration, &CancellationToken),
    server: &mut ServerHandle,
    port: u16,
) -> Result<Duration, NotHealthy> {
    let start = tokio::time::Instant::now();
    loop {
        // Asked before the health check, so an answer after the server's
        // exit is not taken for its own.
        let exited = server.exited();
        let last = match endpoint.get(path, Duration::from_secs(5)).await {
            Ok((200, _)) => match server.holder(port).await {
                listener::Holder::Foreign(who) => {
                    return Err(NotHealthy::PortTaken(Failure::new(
                        FailureClass::StartFailed,
                        format!(
                            "port {port} was taken before the server bound it: {path} was answered by another process listening there ({who}), not by this launch{}",
                            exited.map(|s| format!("; the server exited ({s})")).unwrap_or_default()
                        ),
                    )))
                }
                _ if exited.is_none() => return Ok(start.elapsed()),
                _ => "HTTP 200".to_string(),
            },
            Ok((status, body)) => {
                format!("HTTP {status}: {}", String::from_utf8_lossy(&body).trim())
            }
            Err(f) => f.detail,
        };
        if let Some(status) = exited {
            return Err(NotHealthy::Failed(Failure::new(
                FailureClass::StartFailed,
                format!("server exited before becoming healthy ({status})"),
            )));
        }
        if start.elapsed() >= timeout {
            return Err(NotHealthy::Failed(Failure::new(
                FailureClass::HealthTimeout,
                format!(
                    "not healthy after {:.0} s; last answer: {last}",
                    timeout.as_secs_f64()
                ),
            )));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = cancel.cancelled() => {
                return Err(NotHealthy::Failed(Failure::new(FailureClass::StartFailed, "interrupted while waiting for health")));
            }
        }
    }
}

/// What to start, wherever it runs.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Extra environment (`CUDA_VISIBLE_DEVICES` included).
    pub env: BTreeMap<String, String>,
    /// Local log file the server's output is appended to.
    pub log: PathBuf,
    /// A header written before this launch's output.
    pub header: String,
    /// The port the server listens on (on its host).
    pub port: u16,
    /// Name for a systemd unit.
    pub unit: String,
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
}

/// The address a server must bind so that servebench can reach it.
pub fn bind_host(l: &Launcher) -> &'static str {
    match l {
        Launcher::Ssh {
            forward_port: false,
            ..
        }
        | Launcher::Systemd { ssh: Some(_), .. } => "0.0.0.0",
        _ => "127.0.0.1",
    }
}

/// A started server, stopped when dropped.
pub enum ServerHandle {
    /// A local child process group.
    Local(local::LocalServer),
    /// A process group on a remote host.
    Ssh(ssh::SshServer),
    /// A transient systemd unit.
    Systemd(systemd::SystemdServer),
}

impl ServerHandle {
    /// How the server ended, if it has.
    pub fn exited(&mut self) -> Option<String> {
        match self {
            ServerHandle::Local(s) => s.exited().map(local::describe_exit),
            ServerHandle::Ssh(s) => s.exited(),
            ServerHandle::Systemd(s) => s.exited(),
        }
    }

    /// Who holds the listening socket on `port` on the server's host.
    pub async fn holder(&self, port: u16) -> listener::Holder {
        let argv = match self {
            ServerHandle::Local(s) => listener::local_argv(&s.launch(), port),
            ServerHandle::Ssh(s) => match s.holder_argv(port) {
                Some(argv) => argv,
                None => return listener::Holder::Unseen,
            },
            ServerHandle::Systemd(s) => s.holder_argv(),
        };
        listener::holder(&argv).await
    }

    /// This launch's log output, at most the last `max_lines` lines.
    pub fn log_tail(&self, max_lines: usize) -> String {
        match self {
            ServerHandle::Local(s) => s.log_tail(max_lines),
            ServerHandle::Ssh(s) => s.log_tail(max_lines),
            ServerHandle::Systemd(s) => s.log_tail(max_lines),
        }
    }

    /// Stop it: SIGTERM, grace, SIGKILL. Returns whether SIGKILL was needed.
    ///
    /// Once it has stopped, secrets the engine echoed into its log (vLLM
    /// prints its arguments, API key included) are scrubbed from the file.
    pub async fn stop(&mut self, grace: Duration) -> bool {
        let killed = match self {
            ServerHandle::Local(s) => s.stop(grace).await,
            ServerHandle::Ssh(s) => s.stop(grace).await,
            ServerHandle::Systemd(s) => s.stop(grace).await,
        };
        let log = match self {
            ServerHandle::Local(s) => s.log_path(),
            ServerHandle::Ssh(s) => s.log_path(),
            ServerHandle::Systemd(s) => s.log_path(),
        };
        if let Err(e) = crate::util::secret::scrub_file(log) {
            eprintln!(
                "warning: could not scrub secrets from {}: {e}",
                log.display()
            );
        }
        killed
    }

    /// Where it runs, for messages.
    pub fn describe(&self) -> String {
        match self {
            ServerHandle::Local(s) => format!("pid {}", s.pid()),
            ServerHandle::Ssh(s) => s.describe(),
            ServerHandle::Systemd(s) => s.describe(),
        }
    }
}

/// Start a server with the campaign's launcher; returns it and the base URL
/// servebench reaches it at. (Slurm jobs run servebench itself on the node,
/// which starts its servers locally, so `slurm` starts locally here.)
pub async fn start(l: &Launcher, req: &StartRequest) -> Result<(ServerHandle, String), Failure> {
    match l {
        Launcher::Local | Launcher::Slurm(_) => {
            let s = local::LocalServer::spawn(&local::LaunchSpec {
                argv: req.argv.clone(),
                env: req.env.clone(),
                log: req.log.clone(),
                header: req.header.clone(),
            })?;
            Ok((
                ServerHandle::Local(s),
                format!("http://127.0.0.1:{}", req.port),
            ))
        }
        Launcher::Ssh {
            target,
            forward_port,
        } => {
            let (s, url) = ssh::SshServer::start(target, *forward_port, req).await?;
            Ok((ServerHandle::Ssh(s), url))
        }
        Launcher::Systemd { ssh, properties } => {
            let (s, url) = systemd::SystemdServer::start(ssh.as_ref(), properties, req)?;
            Ok((ServerHandle::Systemd(s), url))
        }
    }
}

/// A free TCP port on 127.0.0.1 (bound and released).
pub fn local_free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Stands for the port picked at launch in commands shown before it.
const SHOWN_PORT: u16 = 65535;

/// What each server group's launch will run, as `plan --show-commands`
/// prints it: the Slurm job script and its `sbatch` line, the `ssh` session
/// and port forward, or the `systemd-run` line. Built by the same functions
/// the launchers submit with, so what is shown is what runs.
pub fn show_commands(
    c: &crate::campaign::Campaign,
    plan: &crate::plan::Plan,
    self_exe: &str,
    forward: &[String],
) -> String {
    let store = crate::store::Store::new(&c.results_dir);
    let mut out = String::new();
    for g in plan.groups.iter().filter(|g| g.needs_launch()) {
        let port_note = |text: String| text.replace(&SHOWN_PORT.to_string(), "<port>");
        match &c.launcher {
            Launcher::Slurm(o) => {
                let campaign = std::fs::canonicalize(&c.file).unwrap_or_else(|_| c.file.clone());
                let (script, output) = slurm::job_paths(store.root(), &g.server.id);
                let text = slurm::job_script(
                    c,
                    g,
                    o,
                    &slurm::JobSpec {
                        self_exe,
                        campaign: &campaign,
                        output: &output,
                        forward,
                    },
                );
                out.push_str(&format!(
                    "server {}: job script {}\n{}submitted with: {}\n\n",
                    g.server.id,
                    script.display(),
                    text,
                    shell_words(&slurm::sbatch_argv(&script))
                ));
            }
            Launcher::Local => {}
            l => {
                let gpus: Vec<u32> = c
                    .hardware
                    .gpus
                    .iter()
                    .copied()
                    .take(g.server.gpus() as usize)
                    .collect();
                let (log, _) = store.log_path(&g.server.id);
                let req = match start_request(c, g, l, SHOWN_PORT, &gpus, log, self_exe) {
                    Ok(r) => r,
                    Err(e) => {
                        out.push_str(&format!("server {}: cannot launch: {e}\n\n", g.server.id));
                        continue;
                    }
                };
                out.push_str(&format!("server {}:\n", g.server.id));
                match l {
                    Launcher::Ssh {
                        target,
                        forward_port,
                    } => {
                        let script = ssh::supervisor_script(&req.argv, &req.env, req.grace);
                        out.push_str(&format!(
                            "  ssh session: {}\n",
                            port_note(shell_words(&ssh::session_argv(target, &script)))
                        ));
                        if *forward_port {
                            out.push_str(&format!(
                                "  port forward: {}\n",
                                shell_words(&ssh::forward_argv(target, 0, SHOWN_PORT))
                                    .replace(":0:", ":<local port>:")
                                    .replace(&SHOWN_PORT.to_string(), "<port>")
                            ));
                        }
                    }
                    Launcher::Systemd { ssh, properties } => {
                        let cmds = systemd::commands(ssh.as_ref(), properties, &req);
                        out.push_str(&format!(
                            "  start: {}\n  logs:  {}\n  stop:  {}\n",
                            port_note(shell_words(&cmds.start)),
                            shell_words(&cmds.logs),
                            shell_words(&cmds.stop)
                        ));
                    }
                    _ => {}
                }
                if !gpus.is_empty() {
                    out.push_str(
                        "  (GPUs shown are the first free ones; the pool assigns them at launch)\n",
                    );
                }
                out.push('\n');
            }
        }
    }
    out
}
