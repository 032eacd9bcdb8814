//! Atomic file writes: a reader never sees a half-written result.
//!
//! The bytes go to a temporary file in the same directory, are fsynced, and
//! the file is renamed over the destination; the directory is fsynced too so
//! the rename survives a power loss.

use std::io::Write;
use std::path::Path;

/// An I/O error in plain words, without the `(os error N)` tail:
/// `No such file or directory`, `Permission denied`.
pub fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

/// Whether `path` may be (re)placed by [`write_atomic`]: it is missing or a
/// regular file. Callers check before expensive work so nothing is lost.
pub fn check_replaceable(path: &Path) -> std::io::Result<()> {
    let named = |e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(m) => {
            let what = if m.file_type().is_symlink() {
                "a symlink"
            } else if m.file_type().is_dir() {
                "a directory"
            } else {
                "a device, FIFO or socket"
            };
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "writing {}: refusing to replace {what}; only regular files are overwritten (choose another path)",
                    path.display()
                ),
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(named(e)),
    }
    Ok(())
}

/// Write `bytes` to `path` atomically (temporary file, fsync, rename).
///
/// Only a regular file or a missing path is replaced: renaming over a device
/// node, FIFO, directory or symlink would silently destroy it, so those are
/// refused. Every error names the path, and a failed write removes its
/// temporary at once so a full disk leaves nothing behind. Registered
/// secrets are scrubbed from `bytes` first: whatever path a key took into a
/// result, a report or a log, it is not written.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let bytes = super::secret::scrub_bytes(bytes);
    let bytes = bytes.as_ref();
    let named = |e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
    };
    check_replaceable(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(named)?;
    let name = path.file_name().ok_or_else(|| {
        named(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "path has no file name",
        ))
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(named(e));
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

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

    #[test]
    fn refuses_non_regular_targets_and_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let sub = dir.path().join("adir");
        std::fs::create_dir(&sub).unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for (p, what) in [(&fifo, "FIFO"), (&sub, "directory"), (&link, "symlink")] {
            let e = write_atomic(p, b"x").unwrap_err().to_string();
            assert!(e.contains(&p.display().to_string()), "{e}");
            assert!(e.contains(what), "{e}");
        }
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        assert!(sub.is_dir());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn a_failed_write_names_the_path_and_leaves_no_temporary() {
        // A file where the parent directory should be fails even as root.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cells"), b"").unwrap();
        let p = dir.path().join("cells/a.json");
        let e = write_atomic(&p, b"x").unwrap_err().to_string();
        assert!(e.contains("cells/a.json"), "{e}");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }
}
