//! Many runs at once, for the tests of a home that has a year of them: a real finished run
//! copied under new ids, as files, with the daemon stopped — its log and projections with
//! every mention of its id replaced, so each copy replays and projects on its own.

use std::path::Path;

use crate::env::TestEnv;

/// Copies the finished run `template` (its `events.jsonl` and projection files) `n` times
/// under new run ids; returns the new ids, oldest first. The daemon must be stopped, and
/// the copies are in no run index: a start after this builds one only if the index is gone.
pub fn copy_finished(env: &TestEnv, template: &str, n: usize) -> Vec<String> {
    let from = env.run_dir(template);
    let mut files: Vec<(String, String)> = Vec::new();
    collect(&from, &from, &mut files);
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let id = octl_proto::ids::new_ulid();
        let dir = env.run_dir(&id);
        for (rel, text) in &files {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text.replace(template, &id)).unwrap();
        }
        ids.push(id);
    }
    ids.sort();
    ids
}

/// The run's log and projection files (not its agents' output), relative to `root`.
fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "logs" {
                collect(root, &path, out);
            }
        } else if name.ends_with(".json") || name == "events.jsonl" {
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            out.push((rel, std::fs::read_to_string(&path).unwrap()));
        }
    }
}
