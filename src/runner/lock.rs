//! Exclusive lock on a campaign's results directory for `run`.
//!
//! Two runs on one directory would interleave launches and overwrite each
//! other's cells; `plan` and `report` only read and take no lock.

use std::io::{Read, Seek, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Held for the whole run; the kernel drops the flock when the file closes,
/// so a killed run never leaves a stale lock behind.
#[derive(Debug)]
pub struct ResultsLock {
    _file: std::fs::File,
    /// The lock file.
    pub path: PathBuf,
}

/// Take the exclusive lock on `results_dir/.lock`, writing our pid into it.
pub fn acquire(results_dir: &Path) -> anyhow::Result<ResultsLock> {
    std::fs::create_dir_all(results_dir).map_err(|e| {
        anyhow::anyhow!("creating results directory {}: {e}", results_dir.display())
    })?;
    let path = results_dir.join(".lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("opening lock file {}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim();
        let who = if holder.is_empty() {
            "another process".to_string()
        } else {
            format!("pid {holder}")
        };
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            anyhow::bail!(
                "results directory {} is in use by another `servebench run` ({who}, lock {}); wait for it to finish or stop it",
                results_dir.display(),
                path.display()
            );
        }
        anyhow::bail!("locking {}: {err}", path.display());
    }
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = writeln!(file, "{}", std::process::id());
    let _ = file.flush();
    Ok(ResultsLock { _file: file, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_holders_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path()).unwrap();
        // flock locks belong to the open file description, so a second open in
        // this process conflicts just as another process would.
        let e = acquire(dir.path()).unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        assert!(e.contains("in use"), "{e}");
        drop(first);
        assert!(acquire(dir.path()).is_ok());
    }
}
