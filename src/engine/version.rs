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
        EngineKind::Sim => Some(vec![self_exe.to_string(), "--version".into()]),
        EngineKind::Command | EngineKind::Openai => None,
    }
}

/// Run `cmd` and take the version from its output; `Err` says why not.
pub fn detect(cmd: &[String]) -> Result<EngineBuild, String> {
    let (program, args) = cmd
        .split_first()
        .ok_or_else(|| "an empty version command".to_string())?;
    let shown = cmd.join(" ");
    let out = run_bounded(program, args).map_err(|e| format!("`{shown}`: {e}"))?;
    let version = version_line(&out).ok_or_else(|| {
        format!(
            "`{shown}` printed no version: {}",
            crate::failure::truncate(out.trim(), 200)
        )
    })?;
    Ok(EngineBuild {
        version,
        source: shown,
    })
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

/// Output of `program args` (stdout, then stderr), killed past the timeout.
fn run_bounded(program: &str, args: &[String]) -> Result<String, String> {
    use std::io::Read;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
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
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(_) => break,
            None if start.elapsed() > VERSION_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {}s", VERSION_TIMEOUT.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    Ok(format!("{out}\n{err}"))
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
        assert_eq!(sim, ["/bin/sb", "--version"]);
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
        assert!(err.contains("/no/such/program"), "{err}");
        let b = detect(&["sh".into(), "-c".into(), "echo 'sglang 0.5.23'".into()]).unwrap();
        assert_eq!(b.version, "0.5.23");
    }
}
