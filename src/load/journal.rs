//! A running replay cell's completed requests, appended to a file as they
//! finish, so a run killed mid-replay (SIGKILL included) resumes where it
//! stopped and loses only the requests that were in flight.
//!
//! Layout: a first line `{"identity": "<cell identity>"}`, then one request
//! record per line. A journal of another identity, or a torn last line
//! (the kill came mid-write), is read as far as it is whole.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use crate::client::record::RequestRecord;

/// An open journal, appending.
pub struct Journal {
    file: std::fs::File,
    path: PathBuf,
}

impl Journal {
    /// Open `path` to append; a new journal starts with its identity line.
    pub fn open(path: &Path, identity: &str) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let fresh = !path.exists();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        if fresh {
            writeln!(file, "{}", serde_json::json!({ "identity": identity }))?;
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Append finished requests, one line each, written through.
    pub fn append(&mut self, records: &[RequestRecord]) {
        let mut buf = Vec::new();
        for r in records {
            if serde_json::to_writer(&mut buf, r).is_ok() {
                buf.push(b'\n');
            }
        }
        // A failed write costs the resume these records, not the measurement.
        if let Err(e) = self.file.write_all(&buf) {
            eprintln!("journal {}: {e}", self.path.display());
        }
    }
}

/// The requests an interrupted run of the cell `identity` finished, in
/// the order written; none when there is no journal or it is another
/// cell's.
pub fn read(path: &Path, identity: &str) -> Vec<RequestRecord> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut lines = std::io::BufReader::new(file).lines();
    let head: Option<serde_json::Value> = lines
        .next()
        .and_then(|l| l.ok())
        .and_then(|l| serde_json::from_str(&l).ok());
    if head.as_ref().and_then(|h| h["identity"].as_str()) != Some(identity) {
        return Vec::new();
    }
    lines
        .map_while(|l| l.ok())
        .map_while(|l| serde_json::from_str::<RequestRecord>(&l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_reads_back_what_was_whole_and_only_for_its_cell() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.journal.jsonl");
        let mut j = Journal::open(&path, "abc").unwrap();
        let mut r = RequestRecord::new(1.0, 2.0);
        r.index = Some(7);
        j.append(&[r.clone(), r.clone()]);
        drop(j);
        // Reopened: no second identity line.
        Journal::open(&path, "abc").unwrap().append(&[r.clone()]);
        // A torn last line, as a kill mid-write leaves.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"scheduled_ms\": 3").unwrap();
        let back = read(&path, "abc");
        assert_eq!(back.len(), 3);
        assert_eq!(back[0].index, Some(7));
        assert!(read(&path, "other").is_empty());
        assert!(read(&dir.path().join("none"), "abc").is_empty());
    }
}
