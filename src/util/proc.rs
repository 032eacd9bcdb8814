//! Process helpers: running a command for its output, and self-measurement
//! (CPU time and peak memory from `getrusage`).

use std::process::{Output, Stdio};

use super::shell::shell_words;

/// Stdout of `argv` run with stdin closed; a failure names the command, its
/// exit status and its stderr.
pub fn output_of(argv: &[String]) -> Result<String, String> {
    let (program, args) = argv.split_first().ok_or("empty command")?;
    let out = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output();
    captured(argv, out)
}

/// [`output_of`] for async callers: waiting does not block a runtime thread.
pub async fn output_of_async(argv: &[String]) -> Result<String, String> {
    let (program, args) = argv.split_first().ok_or("empty command")?;
    let out = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await;
    captured(argv, out)
}

/// The one wording of a command's result, whichever way it was waited for.
fn captured(argv: &[String], out: std::io::Result<Output>) -> Result<String, String> {
    let out = out.map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
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

/// User plus system CPU seconds this process has used so far.
pub fn cpu_seconds() -> f64 {
    let u = rusage();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Peak resident set size of this process, bytes.
pub fn peak_rss_bytes() -> u64 {
    // Linux reports ru_maxrss in KiB.
    rusage().ru_maxrss as u64 * 1024
}

fn rusage() -> libc::rusage {
    // SAFETY: getrusage writes a plain struct that we own; RUSAGE_SELF is always valid.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    }
}

#[cfg(test)]
mod tests {
    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn both_waits_give_stdout_or_the_command_and_its_stderr() {
        let ok = argv(&["sh", "-c", "echo out; echo noise >&2"]);
        assert_eq!(super::output_of(&ok).unwrap(), "out\n");
        assert_eq!(super::output_of_async(&ok).await.unwrap(), "out\n");
        let bad = argv(&["sh", "-c", "echo out; echo 'no such job' >&2; exit 3"]);
        let sync = super::output_of(&bad).unwrap_err();
        assert_eq!(sync, super::output_of_async(&bad).await.unwrap_err());
        assert!(
            sync.starts_with("`sh -c ")
                && sync.contains("exit status: 3")
                && sync.ends_with("): no such job"),
            "{sync}"
        );
        let missing = argv(&["servebench-no-such-program"]);
        let e = super::output_of(&missing).unwrap_err();
        assert!(
            e.starts_with("cannot run servebench-no-such-program: "),
            "{e}"
        );
        assert_eq!(e, super::output_of_async(&missing).await.unwrap_err());
        assert_eq!(super::output_of(&[]).unwrap_err(), "empty command");
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before = super::cpu_seconds();
        let mut x = 0u64;
        // Work until the counter moves; a loaded machine only makes this
        // take longer, and the wall bound only catches a counter that never moves.
        let start = std::time::Instant::now();
        while super::cpu_seconds() - before <= 0.02 {
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            assert!(start.elapsed().as_secs() < 120, "cpu_seconds never grew");
        }
        std::hint::black_box(x);
        assert!(super::peak_rss_bytes() > 1024 * 1024);
    }
}
