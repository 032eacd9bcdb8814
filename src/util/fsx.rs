//! Atomic file writes: a reader never sees a half-written result.
//!
//! The bytes go to a temporary file in the same directory, are fsynced, and
//! the file is renamed over the destination; the directory is fsynced too so
//! the rename survives a power loss.

use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` atomically (temporary file, fsync, rename).
///
/// Registered secrets are scrubbed from `bytes` first: whatever path a key
/// took into a result, a report or a log, it is not written.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let bytes = super::secret::scrub_bytes(bytes);
    let bytes = bytes.as_ref();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no file name")
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/out.json");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("out.json")]);
    }
}
