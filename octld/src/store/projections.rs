//! Writing projection files: each to a temp file in the same directory, then renamed over the
//! old one, so a reader sees the old bytes or the new, never half. Not synced: they are
//! derived, and every daemon start re-derives them from the synced log.

use std::fs;
use std::io;
use std::path::Path;

use octl_proto::projection::{self, ProjectionFile};
use octl_proto::RunState;

/// Writes each file atomically.
pub fn write(run_dir: &Path, files: &[ProjectionFile]) -> io::Result<()> {
    for (rel, bytes) in files {
        let path = run_dir.join(rel);
        let parent = path.parent().expect("projection paths have a parent");
        fs::create_dir_all(parent)?;
        let name = path.file_name().expect("projection paths name a file");
        let tmp = parent.join(format!(".{}.tmp", name.to_string_lossy()));
        if let Err(e) = fs::write(&tmp, bytes).and_then(|_| fs::rename(&tmp, &path)) {
            // A full disk leaves a partly written temp file: no debris stays behind.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    }
    Ok(())
}

/// Derives every projection of `state` and writes those whose bytes differ from what is on
/// disk. Returns how many files the run has.
pub fn write_all(run_dir: &Path, state: &RunState) -> io::Result<usize> {
    let files = projection::all_files(state);
    let stale: Vec<ProjectionFile> = files
        .iter()
        .filter(|(rel, bytes)| fs::read(run_dir.join(rel)).ok().as_ref() != Some(bytes))
        .cloned()
        .collect();
    write(run_dir, &stale)?;
    Ok(files.len())
}
