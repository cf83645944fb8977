//! The event store against the real daemon: concurrency, durability across `kill -9`,
//! torn-tail repair, corrupt-log isolation, idempotency, and projections that match a rebuild.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use octl_tests::{wait_until, TestEnv};
use serde_json::{json, Value};

fn append(env: &TestEnv, run: &str, params: Value) -> Result<Value, Value> {
    let mut p = params;
    p["run"] = json!(run);
    env.try_rpc("event.append", p)
}

#[test]
fn thirty_two_clients_times_one_hundred_appends_give_gapless_seqs() {
    let env = Arc::new(TestEnv::new());
    let _d = env.start_daemon();
    let run = env.create_run("concurrency");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..32)
        .map(|c| {
            let (env, run, acked) = (env.clone(), run.clone(), acked.clone());
            std::thread::spawn(move || {
                for i in 0..100 {
                    let r = append(
                        &env,
                        &run,
                        json!({"type": "x.tick", "data": {"client": c, "i": i}}),
                    )
                    .expect("append");
                    acked.lock().unwrap().push((
                        r["seq"].as_u64().unwrap(),
                        r["id"].as_str().unwrap().to_string(),
                    ));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap();
    assert_eq!(acked.len(), 3200);
    let seqs: HashSet<u64> = acked.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs.len(), 3200, "every append got its own seq");
    // run.created is seq 1; the 3,200 appends are 2..=3201 with no gap.
    assert_eq!(seqs, (2..=3201).collect::<HashSet<u64>>());

    let log = env.log_events(&run);
    assert_eq!(log.len(), 3201);
    for (i, ev) in log.iter().enumerate() {
        assert_eq!(
            ev["seq"],
            json!(i as u64 + 1),
            "log line {} out of order",
            i + 1
        );
    }
    let ids: HashSet<&str> = log.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3201, "no duplicate event ids");
    for (seq, id) in acked.iter() {
        assert_eq!(
            log[*seq as usize - 1]["id"],
            json!(id),
            "acknowledged id at its seq"
        );
    }
    // Per client, order of acknowledgement is order in the log.
    let mut per_client: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for ev in &log[1..] {
        per_client
            .entry(ev["data"]["client"].as_i64().unwrap())
            .or_default()
            .push(ev["data"]["i"].as_i64().unwrap());
    }
    for (c, is) in per_client {
        assert_eq!(
            is,
            (0..100).collect::<Vec<_>>(),
            "client {c}'s appends in order"
        );
    }
}

#[test]
fn projections_are_byte_identical_to_a_rebuild() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("rebuild");
    for n in ["a", "b", "c"] {
        append(
            &env,
            &run,
            json!({"node": n, "type": "node.added", "data": {"agent": "tool"}}),
        )
        .unwrap();
    }
    append(
        &env,
        &run,
        json!({"node": "a", "type": "node.progress", "data": {"message": "half"}}),
    )
    .unwrap();
    append(&env, &run, json!({"node": "a", "type": "node.done"})).unwrap();
    append(
        &env,
        &run,
        json!({"node": "b", "type": "node.failed", "data": {"reason": "no"}}),
    )
    .unwrap();
    append(&env, &run, json!({"node": "c", "type": "discussion.opened", "data": {"id": "q1", "title": "which way?"}})).unwrap();
    append(
        &env,
        &run,
        json!({"node": "c", "type": "spinoff.proposed", "data": {"id": "s1", "task": "tidy"}}),
    )
    .unwrap();
    let before = env.projections(&run);
    assert!(before.contains_key("manifest.json") && before.contains_key("nodes/a.json"));
    assert!(before.contains_key("discussions/q1.json") && before.contains_key("spinoffs/s1.json"));
    // Delete them all: the rebuild must write them again from the log alone.
    for rel in before.keys() {
        std::fs::remove_file(env.run_dir(&run).join(rel)).unwrap();
    }
    let r = env.rpc("run.rebuild", json!({"run": run}));
    assert_eq!(r["events"], json!(9));
    assert_eq!(r["files"], json!(before.len()));
    assert_eq!(
        env.projections(&run),
        before,
        "rebuild writes the same bytes"
    );
    let manifest: Value = serde_json::from_slice(&before["manifest.json"]).unwrap();
    assert_eq!(
        manifest["nodes"],
        json!({"done": 1, "failed": 1, "pending": 1})
    );
    assert_eq!(manifest["status"], json!("active"));
}

#[test]
fn kill_nine_during_appends_loses_no_acknowledged_event() {
    let env = Arc::new(TestEnv::new());
    let d = env.start_daemon();
    let run = env.create_run("crash");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..8)
        .map(|c| {
            let (env, run, acked) = (env.clone(), run.clone(), acked.clone());
            std::thread::spawn(move || {
                for i in 0.. {
                    match append(
                        &env,
                        &run,
                        json!({"type": "x.tick", "data": {"client": c, "i": i}}),
                    ) {
                        Ok(r) => acked.lock().unwrap().push((
                            r["seq"].as_u64().unwrap(),
                            r["id"].as_str().unwrap().to_string(),
                        )),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    wait_until("200 acknowledged appends", Duration::from_secs(30), || {
        (acked.lock().unwrap().len() >= 200).then_some(())
    });
    d.kill9();
    for t in threads {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();

    let _d = env.start_daemon();
    let log = env.log_events(&run);
    let by_seq: BTreeMap<u64, String> = log
        .iter()
        .map(|e| {
            (
                e["seq"].as_u64().unwrap(),
                e["id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (seq, id) in &acked {
        assert_eq!(
            by_seq.get(seq),
            Some(id),
            "acknowledged seq {seq} survived the crash"
        );
    }
    for (i, ev) in log.iter().enumerate() {
        assert_eq!(ev["seq"], json!(i as u64 + 1));
    }
    let after_restart = env.projections(&run);
    env.rpc("run.rebuild", json!({"run": run}));
    assert_eq!(
        env.projections(&run),
        after_restart,
        "projections match a rebuild after the crash"
    );
    // And the run goes on from where the log ends.
    let next = append(&env, &run, json!({"type": "x.after"})).unwrap();
    assert_eq!(next["seq"], json!(log.len() as u64 + 1));
}

#[test]
fn a_torn_last_line_is_cut_and_the_repair_logged() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let run = env.create_run("torn");
    append(&env, &run, json!({"type": "x.one"})).unwrap();
    d.signal_and_wait(libc::SIGTERM);
    let log_path = env.run_dir(&run).join("events.jsonl");
    let good = std::fs::read(&log_path).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&log_path)
        .unwrap();
    f.write_all(br#"{"v":1,"seq":3,"id":"01JDXK00000000000"#)
        .unwrap();
    drop(f);

    let _d = env.start_daemon();
    assert_eq!(
        std::fs::read(&log_path).unwrap(),
        good,
        "the torn line is gone, the rest untouched"
    );
    let r = append(&env, &run, json!({"type": "x.two"})).unwrap();
    assert_eq!(r["seq"], json!(3));
    let daemon_log = std::fs::read_to_string(env.home.join("octld.log")).unwrap();
    assert!(
        daemon_log.contains("torn"),
        "the repair is logged: {daemon_log}"
    );
    assert!(daemon_log.contains(&run));
}

#[test]
fn a_corrupt_middle_line_sets_that_run_aside_and_others_keep_working() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let bad = env.create_run("will break");
    let good = env.create_run("stays fine");
    for i in 0..3 {
        append(&env, &bad, json!({"type": "x.n", "data": {"i": i}})).unwrap();
    }
    d.signal_and_wait(libc::SIGTERM);
    let path = env.run_dir(&bad).join("events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{ this is not an event";
    let damaged = format!("{}\n", lines.join("\n"));
    std::fs::write(&path, &damaged).unwrap();

    let _d = env.start_daemon();
    let aside = env.run_dir(&bad).join("events.jsonl.corrupt");
    assert_eq!(
        std::fs::read_to_string(&aside).unwrap(),
        damaged,
        "set aside, byte for byte"
    );
    assert!(!path.exists());

    let list = env.rpc("run.list", json!({}));
    let item = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == json!(bad))
        .unwrap()
        .clone();
    assert_eq!(item["status"], json!("corrupt"));
    assert!(item["error"].as_str().unwrap().contains("line 3"), "{item}");

    let err = append(&env, &bad, json!({"type": "x.more"})).unwrap_err();
    assert_eq!(err["data"]["kind"], json!("run_corrupt"));
    assert_eq!(
        std::fs::read_to_string(&aside).unwrap(),
        damaged,
        "never overwritten"
    );

    let ok = append(&env, &good, json!({"type": "x.fine"})).unwrap();
    assert_eq!(ok["seq"], json!(2));
    let created = env.create_run("new after corruption");
    append(&env, &created, json!({"type": "x.fine"})).unwrap();
}

#[test]
fn a_repeated_idempotency_key_returns_the_first_append_and_writes_nothing() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let run = env.create_run("idem");
    let first = append(
        &env,
        &run,
        json!({"type": "x.pay", "idempotency_key": "order-7"}),
    )
    .unwrap();
    let again = append(
        &env,
        &run,
        json!({"type": "x.pay", "idempotency_key": "order-7"}),
    )
    .unwrap();
    assert_eq!(first, again);
    assert_eq!(env.log_events(&run).len(), 2);
    // The key is in the log, so a retry after a restart is still recognised.
    d.signal_and_wait(libc::SIGTERM);
    let _d = env.start_daemon();
    let third = append(
        &env,
        &run,
        json!({"type": "x.pay", "idempotency_key": "order-7"}),
    )
    .unwrap();
    assert_eq!(first, third);
    assert_eq!(env.log_events(&run).len(), 2);
}

#[test]
fn illegal_transitions_are_refused_and_write_nothing() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("transitions");
    append(&env, &run, json!({"node": "a", "type": "node.added"})).unwrap();
    append(&env, &run, json!({"node": "a", "type": "node.done"})).unwrap();
    let before = std::fs::read(env.run_dir(&run).join("events.jsonl")).unwrap();
    let before_proj = env.projections(&run);
    for (params, kind) in [
        (
            json!({"node": "a", "type": "node.progress"}),
            "invalid_transition",
        ),
        (
            json!({"node": "a", "type": "node.added"}),
            "invalid_transition",
        ),
        (json!({"node": "zz", "type": "node.done"}), "not_found"),
        (json!({"node": "a", "type": "merge.succeeded"}), "forbidden"),
        (json!({"type": "run.created"}), "forbidden"),
        (
            json!({"type": "run.completed", "node": "a"}),
            "invalid_params",
        ),
    ] {
        let err = append(&env, &run, params.clone()).unwrap_err();
        assert_eq!(err["data"]["kind"], json!(kind), "{params}: {err}");
    }
    assert_eq!(
        std::fs::read(env.run_dir(&run).join("events.jsonl")).unwrap(),
        before
    );
    assert_eq!(env.projections(&run), before_proj);
    // A generic run is closed by its client; nothing is accepted after.
    append(&env, &run, json!({"type": "run.completed"})).unwrap();
    let err = append(&env, &run, json!({"node": "b", "type": "node.added"})).unwrap_err();
    assert_eq!(err["data"]["kind"], json!("invalid_transition"));
    assert_eq!(
        env.rpc("run.show", json!({"run": run}))["manifest"]["status"],
        json!("completed")
    );
}
