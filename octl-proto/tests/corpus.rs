//! The typed payloads change nothing on disk. `corpus/recorded/` holds runs the end-to-end
//! tests (dag, decisions, races, kept, recovery, store, agents, cli, crash, faults, hostile,
//! newcomer, activation, best_of) left behind with `OCTL_TEST_KEEP_LOGS`, written by the daemon before
//! the payloads were typed — a selection covering every shape of data they wrote — with the
//! projection files that daemon derived; `corpus/every-shape.jsonl` adds by hand the shapes
//! those tests do not reach (`node.exited`, `node.waiting`, run-level merge ends, …).

use std::fs;
use std::path::{Path, PathBuf};

use octl_proto::event::{retyped, KNOWN_TYPES};
use octl_proto::projection::all_files;
use octl_proto::{Actor, Event, RunState};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn events(path: &Path) -> Vec<Event> {
    let text = fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| {
            let ev = Event::from_line(line).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(ev.to_line(), line, "{}", path.display());
            ev
        })
        .collect()
}

/// Each event's data read as its type's payload and written back is the data it was. A
/// client's own event (its data is the client's to shape) must at least read.
fn payloads_write_back_identically(path: &Path, log: &[Event], seen: &mut Vec<String>) {
    for ev in log {
        let Some(back) = retyped(&ev.kind, &ev.data) else {
            assert!(ev.kind.starts_with("x."), "{} has no payload", ev.kind);
            continue;
        };
        let back = back.unwrap_or_else(|e| {
            panic!(
                "{} seq {} ({}): {}",
                path.display(),
                ev.seq,
                ev.kind,
                e.message
            )
        });
        if ev.actor == Actor::Daemon {
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                serde_json::to_string(&ev.data).unwrap(),
                "{} seq {} ({})",
                path.display(),
                ev.seq,
                ev.kind
            );
        }
        if !seen.contains(&ev.kind) {
            seen.push(ev.kind.clone());
        }
    }
}

/// Whether `on_disk` is an older version of `derived`: projections are not synced, so a daemon
/// stopped at the end of a test may leave one a step behind its log.
fn stale(on_disk: &[u8], derived: &[u8]) -> bool {
    let at = |b: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(b)
            .ok()
            .and_then(|v| v.get("updated_at")?.as_str().map(str::to_string))
    };
    matches!((at(on_disk), at(derived)), (Some(a), Some(b)) if a < b)
}

/// Replays one recorded run and compares its projections with the files its daemon wrote
/// (`lenient`: except those a step behind the log).
fn replays_to_the_same_bytes(dir: &Path, seen: &mut Vec<String>, lenient: bool) {
    let log = events(&dir.join("events.jsonl"));
    payloads_write_back_identically(dir, &log, seen);
    let state = RunState::replay(&log)
        .unwrap_or_else(|(seq, e)| panic!("{} seq {seq}: {}", dir.display(), e.message));
    let files = all_files(&state);
    for (rel, bytes) in &files {
        let on_disk =
            fs::read(dir.join(rel)).unwrap_or_else(|e| panic!("{}/{rel}: {e}", dir.display()));
        assert!(
            on_disk == *bytes || (lenient && stale(&on_disk, bytes)),
            "{}/{rel} differs:\n{}",
            dir.display(),
            String::from_utf8_lossy(bytes)
        );
    }
    // And no projection the daemon wrote is missing.
    for sub in ["nodes", "discussions", "spinoffs"] {
        let Ok(entries) = fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries {
            let rel = format!("{sub}/{}", e.unwrap().file_name().to_string_lossy());
            assert!(
                files.iter().any(|(r, _)| *r == rel),
                "{}/{rel} is not derived",
                dir.display()
            );
        }
    }
}

#[test]
fn recorded_logs_replay_to_the_same_bytes() {
    let mut seen = Vec::new();
    let mut runs = 0;
    for dir in fs::read_dir(corpus().join("recorded")).unwrap() {
        replays_to_the_same_bytes(&dir.unwrap().path(), &mut seen, false);
        runs += 1;
    }
    assert!(runs >= 20, "{runs} runs");
    let missing: Vec<_> = KNOWN_TYPES
        .iter()
        .filter(|t| !seen.iter().any(|s| s == *t))
        .collect();
    // Not written by any test's daemon: covered by every-shape.jsonl.
    assert_eq!(
        missing,
        [
            &"run.budget_spent",
            &"run.budget_changed",
            &"node.ready",
            &"node.activity",
            &"node.permission_asked",
            &"node.permission_decided",
            &"node.review",
            &"node.waiting",
            &"node.exited",
            &"node.paused",
            &"node.requeued",
            &"node.network_refused"
        ],
        "event types the recorded logs cover changed"
    );
}

/// `OCTL_CORPUS=DIR`: also every run kept under `DIR/<test>/<run>/` by
/// `OCTL_TEST_KEEP_LOGS=DIR/<test>` (tests/src/env.rs), for a check over a whole recording.
#[test]
fn a_whole_recording_replays_to_the_same_bytes() {
    let Some(root) = std::env::var_os("OCTL_CORPUS") else {
        return;
    };
    let mut seen = Vec::new();
    let mut runs = 0;
    for test in fs::read_dir(root).unwrap() {
        for dir in fs::read_dir(test.unwrap().path()).unwrap() {
            let dir = dir.unwrap().path();
            // A creation cut short leaves a directory without a log; the store ignores it.
            if dir.join("events.jsonl").exists() {
                replays_to_the_same_bytes(&dir, &mut seen, true);
                runs += 1;
            }
        }
    }
    eprintln!("{runs} runs replayed, {} event types", seen.len());
}

#[test]
fn every_shape_the_daemon_writes_reads_back_and_replays() {
    let path = corpus().join("every-shape.jsonl");
    let log = events(&path);
    let mut seen = Vec::new();
    payloads_write_back_identically(&path, &log, &mut seen);
    let state =
        RunState::replay(&log).unwrap_or_else(|(seq, e)| panic!("seq {seq}: {}", e.message));
    let a = &state.nodes["a"];
    assert_eq!(a.state, octl_proto::NodeState::Merged);
    assert_eq!(a.snapshot_refs.len(), 1);
    assert_eq!(a.reviews.len(), 2, "changes asked, then approved");
    assert_eq!(state.merge.as_deref(), Some("merged"));
    // Settings of a newer version are kept as they were.
    assert!(state.settings.other.contains_key("from_a_newer_version"));
    assert_eq!(state.settings.max_parallel, Some(2));
}
