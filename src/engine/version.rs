//! Which build of the engine a campaign runs: found before anything is
//! planned, stored in every cell, and compared with the stored cells' so an
//! upgrade makes their numbers stale instead of silently reused.
//!
//! The engine is asked the way its users would: `vllm --version`,
//! `llama-server --version`, SGLang's `sglang.__version__` through the
//! Python that runs it, this executable for the simulator, or the
//! campaign's own `[engine] version_command`. The answer is its first line
//! that names a version.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::EngineKind;

/// How long a version command may take (vLLM imports torch first).
const VERSION_TIMEOUT: Duration = Duration::from_secs(90);

/// The engine build a cell was measured on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineBuild {
    /// The version as the engine states it, without labels (e.g. `0.32.0`, `6123 (abc123)`).
    pub version: String,
    /// The command that said so.
    pub source: String,
}

/// The command that asks `kind`'s executable `exe` for its version, or
/// `None` where the engine has no such command.
pub fn version_command(kind: EngineKind, exe: &[String], self_exe: &str) -> Option<Vec<String>> {
    let exe: Vec<String> = if exe.is_empty() {
        kind.default_executable()
    } else {
        exe.to_vec()
    };
    match kind {
        EngineKind::Vllm => {
            // `vllm serve` → `vllm --version`.
            let mut v: Vec<String> = exe.into_iter().filter(|a| a != "serve").collect();
            v.push("--version".into());
            Some(v)
        }
        EngineKind::Llamacpp => {
            let mut v = exe;
            v.push("--version".into());
            Some(v)
        }
        EngineKind::Sglang => {
            // `python3 -m sglang.launch_server` → the same Python asks the package.
            let python = exe.first()?.clone();
            Some(vec![
                python,
                "-c".into(),
                "import sglang; print(sglang.__version__)".into(),
            ])
        }
        EngineKind::Sim => {
            // The simulator's own executable, or a build's (`servebench sim
            // --decode-step-ms …`), says the build it stands for.
            let mut v = if exe.is_empty() {
                vec![self_exe.to_string(), "sim".to_string()]
            } else {
                exe
            };
            v.push("--print-version".into());
            Some(v)
        }
        EngineKind::Command | EngineKind::Openai => None,
    }
}

/// Why a version command gave no version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The version command is empty.
    #[error("an empty version command")]
    Empty,
    /// Its program could not be started (missing, not executable).
    #[error("`{command}` cannot run: {reason}")]
    CannotRun {
        /// The command as shown.
        command: String,
        /// The system's reason.
        reason: String,
    },
    /// It ran and failed: its exit status and its most telling line.
    #[error("`{command}` failed ({status}): {line}")]
    Failed {
        /// The command as shown.
        command: String,
        /// How it ended, e.g. `exit code 1`.
        status: String,
        /// The last line it printed (a traceback's last line names its error).
        line: String,
    },
    /// It answered too slowly.
    #[error("`{command}` gave no answer within {secs}s")]
    Timeout {
        /// The command as shown.
        command: String,
        /// The limit, s.
        secs: u64,
    },
    /// It succeeded but named no version.
    #[error("`{command}` printed no version: {output}")]
    NoVersion {
        /// The command as shown.
        command: String,
        /// What it printed, shortened.
        output: String,
    },
}

impl VersionError {
    /// Whether the program itself is unusable: missing, or failing before
    /// it could say its version. Asked of the engine's own executable, this
    /// means its servers cannot start either.
    pub fn engine_unusable(&self) -> bool {
        matches!(self, Self::CannotRun { .. } | Self::Failed { .. })
    }
}

/// Run `cmd` and take the version from its output; `Err` says why not. A
/// command that exits unsuccessfully never yields a version, whatever it
/// printed (a Python traceback holds line numbers).
pub fn detect(cmd: &[String]) -> Result<EngineBuild, VersionError> {
    detect_with_env(cmd, &std::collections::BTreeMap::new())
}

/// [`detect`] with `env` added to the command's environment: a build's
/// own variables (a `PATH` or `PYTHONPATH` into its environment) decide
/// which program answers.
pub fn detect_with_env(
    cmd: &[String],
    env: &std::collections::BTreeMap<String, String>,
) -> Result<EngineBuild, VersionError> {
    let (program, args) = cmd.split_first().ok_or(VersionError::Empty)?;
    let command = cmd.join(" ");
    let out = run_bounded(program, args, env).map_err(|e| match e {
        RunError::Spawn(reason) => VersionError::CannotRun {
            command: command.clone(),
            reason,
        },
        RunError::Timeout => VersionError::Timeout {
            command: command.clone(),
            secs: VERSION_TIMEOUT.as_secs(),
        },
    })?;
    if !out.status.success() {
        let line = last_line(&out.stderr)
            .or_else(|| last_line(&out.stdout))
            .unwrap_or("(it printed nothing)");
        return Err(VersionError::Failed {
            command,
            status: exit_status(&out.status),
            line: crate::failure::truncate(line, 200),
        });
    }
    let text = format!("{}\n{}", out.stdout, out.stderr);
    let version = version_line(&text).ok_or_else(|| VersionError::NoVersion {
        command: command.clone(),
        output: crate::failure::truncate(text.trim(), 200),
    })?;
    Ok(EngineBuild {
        version,
        source: command,
    })
}

/// The last line of `text` with anything on it.
fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

/// `exit code N` or `killed by signal N`.
fn exit_status(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "ended abnormally".into(),
    }
}

/// The first line that names a version: one with a digit, without the
/// words and labels that lead it (`servebench 0.1.0` → `0.1.0`,
/// `version: 6123 (abc1234)` → `6123 (abc1234)`), so the value is the build
/// as the engine names it and nothing of how it was asked.
fn version_line(out: &str) -> Option<String> {
    let line = out
        .lines()
        .map(str::trim)
        .find(|l| l.chars().any(|c| c.is_ascii_digit()))?;
    Some(crate::failure::truncate(without_labels(line), 120))
}

/// `line` from its first word with a digit on.
fn without_labels(line: &str) -> &str {
    let mut rest = line.trim();
    while let Some((first, tail)) = rest.split_once(char::is_whitespace) {
        if first.chars().any(|c| c.is_ascii_digit()) {
            break;
        }
        rest = tail.trim_start();
    }
    rest
}

impl EngineBuild {
    /// Whether `other` names the same build, labels aside (cells stored
    /// before labels were dropped read `version: 6123 (abc1234)`).
    pub fn same_build(&self, other: &EngineBuild) -> bool {
        without_labels(&self.version) == without_labels(&other.version)
    }
}

/// Why a bounded run gave no output.
enum RunError {
    /// The program could not be started.
    Spawn(String),
    /// It ran past the limit and was killed.
    Timeout,
}

/// What a finished program printed and how it ended.
struct Ran {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

/// Run `program args`, killed past the timeout.
fn run_bounded(
    program: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Ran, RunError> {
    use std::io::Read;
    let mut child = Command::new(program)
        .args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| RunError::Spawn(e.to_string()))?;
    // Both pipes drain on their own threads so a chatty program never blocks.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(p) = pipe {
                let _ = p.take(1 << 16).read_to_string(&mut text);
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Err(e) => return Err(RunError::Spawn(e.to_string())),
            Ok(None) if start.elapsed() > VERSION_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Timeout);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    Ok(Ran {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_first_line_naming_one_without_the_program_name() {
        assert_eq!(version_line("0.32.0\n").as_deref(), Some("0.32.0"));
        assert_eq!(version_line("servebench 0.1.0\n").as_deref(), Some("0.1.0"));
        assert_eq!(
            version_line("load_backend: x\nversion: 6123 (abc1234)\nbuilt with cc").as_deref(),
            Some("6123 (abc1234)")
        );
        assert_eq!(
            version_line("llama-server version 6123\n").as_deref(),
            Some("6123")
        );
        let build = |v: &str| EngineBuild {
            version: v.into(),
            source: String::new(),
        };
        assert!(build("version: 6123 (abc1234)").same_build(&build("6123 (abc1234)")));
        assert!(!build("6123 (abc1234)").same_build(&build("6124 (abc1234)")));
        assert_eq!(version_line("no digits here"), None);
        let sim = version_command(EngineKind::Sim, &[], "/bin/sb").unwrap();
        assert_eq!(sim, ["/bin/sb", "sim", "--print-version"]);
        let build = [
            "/bin/sb".to_string(),
            "sim".into(),
            "--seed".into(),
            "3".into(),
        ];
        let sim = version_command(EngineKind::Sim, &build, "/bin/other").unwrap();
        assert_eq!(sim, ["/bin/sb", "sim", "--seed", "3", "--print-version"]);
        let v = version_command(
            EngineKind::Vllm,
            &["/v/bin/vllm".into(), "serve".into()],
            "x",
        );
        assert_eq!(v.unwrap(), ["/v/bin/vllm", "--version"]);
        assert!(version_command(EngineKind::Command, &[], "x").is_none());
    }

    #[test]
    fn a_command_that_fails_or_hangs_is_an_error_not_a_version() {
        let err = detect(&["/no/such/program".into()]).unwrap_err();
        assert!(err.to_string().contains("/no/such/program"), "{err}");
        assert!(err.engine_unusable());
        // A traceback holds line numbers; none of them is a version.
        let err = detect(&[
            "sh".into(),
            "-c".into(),
            "echo 'Traceback:' >&2; echo '  File \"<string>\", line 1, in <module>' >&2; \
             echo \"ModuleNotFoundError: No module named 'sglang'\" >&2; exit 1"
                .into(),
        ])
        .unwrap_err();
        assert!(err.engine_unusable());
        assert!(
            err.to_string()
                .ends_with("failed (exit code 1): ModuleNotFoundError: No module named 'sglang'"),
            "{err}"
        );
        let err = detect(&["sh".into(), "-c".into(), "echo no digits".into()]).unwrap_err();
        assert!(!err.engine_unusable(), "{err}");
        let b = detect(&["sh".into(), "-c".into(), "echo 'sglang 0.5.23'".into()]).unwrap();
        assert_eq!(b.version, "0.5.23");
    }
}
