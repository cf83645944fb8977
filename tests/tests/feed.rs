//! The change feed, `GET /v1/events`: every run's committed events in one stream, to any
//! number of followers, each event exactly once, resumable from a cursor across daemon
//! restarts (crashes included), bad cursors refused by name. Against the real daemon.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use octl_tests::http::{self, Stream};
use octl_tests::{wait_until, TestEnv};
use serde_json::{json, Value};

/// `(run, seq)` of an event.
type Key = (String, u64);

fn key(item: &Value) -> Key {
    (
        item["event"]["run"].as_str().unwrap().to_string(),
        item["event"]["seq"].as_u64().unwrap(),
    )
}

/// Every event of every run's log on disk: the truth the feed must match.
fn all_logged(env: &TestEnv) -> BTreeSet<Key> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(env.home.join("runs")).unwrap() {
        let run = entry.unwrap().file_name().into_string().unwrap();
        for ev in env.log_events(&run) {
            out.insert((run.clone(), ev["seq"].as_u64().unwrap()));
        }
    }
    out
}

/// The feed without follow: every item after `since` up to its end when opened.
fn read_feed(env: &TestEnv, since: Option<&str>) -> Vec<Value> {
    let path = match since {
        Some(c) => format!("/v1/events?since={c}"),
        None => "/v1/events".to_string(),
    };
    let r = http::request(&env.socket(), "GET", &path, None).unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    String::from_utf8(r.body)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The feed from the beginning once it holds `n` events: an event reaches the feed once the
/// feed's index has synced it too, a moment after its append was acknowledged.
fn feed_of(env: &TestEnv, n: usize) -> Vec<Value> {
    wait_until(
        &format!("the feed to hold {n} events"),
        Duration::from_secs(10),
        || {
            let items = read_feed(env, None);
            (items.len() >= n).then_some(items)
        },
    )
}

fn append(socket: &Path, run: &str, data: Value) -> bool {
    let body = json!({"jsonrpc":"2.0","id":1,"method":"event.append","params":{"run": run, "type":"x.feed","data": data}});
    http::request(socket, "POST", "/rpc", Some(body.to_string().as_bytes()))
        .map(|r| r.json().get("result").is_some())
        .unwrap_or(false)
}

/// One thread a run, each running `write(socket, run)`: appends racing each other.
fn write_each(
    env: &TestEnv,
    runs: &[String],
    write: impl Fn(&Path, &str) + Clone + Send + 'static,
) -> Vec<JoinHandle<()>> {
    runs.iter()
        .cloned()
        .map(|run| {
            let (socket, write) = (env.socket(), write.clone());
            std::thread::spawn(move || write(&socket, &run))
        })
        .collect()
}

fn join(writers: Vec<JoinHandle<()>>) {
    for w in writers {
        w.join().unwrap();
    }
}

/// Each key once, and each run's events in seq order.
fn assert_once_in_order(items: &[Value]) {
    let mut seen = BTreeSet::new();
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for item in items {
        let (run, seq) = key(item);
        assert!(seen.insert((run.clone(), seq)), "{run} seq {seq} twice");
        let prev = last.insert(run.clone(), seq).unwrap_or(0);
        assert!(seq > prev, "{run}: seq {seq} after {prev}");
    }
}

#[test]
fn two_followers_see_the_same_events_and_many_runs_committing_at_once_are_each_delivered_once() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let old = env.create_run("before the followers");
    let mut a = Stream::open(&env.socket(), "/v1/events?follow=true").unwrap();
    let mut b = Stream::open(&env.socket(), "/v1/events?follow=true").unwrap();
    assert_eq!((a.status, b.status), (200, 200));
    // A third follower reads nothing until every run has committed: it falls behind the
    // feed's buffer (big events fill the socket) and catches up from the index.
    let mut late = Stream::open(&env.socket(), "/v1/events?follow=true").unwrap();

    let runs: Vec<String> = (0..8).map(|i| env.create_run(&format!("r{i}"))).collect();
    let blob = "b".repeat(8 * 1024);
    let all_runs: Vec<String> = runs.iter().chain([&old]).cloned().collect();
    join(write_each(&env, &all_runs, move |socket, run| {
        for i in 0..40 {
            assert!(append(socket, run, json!({"i": i, "blob": blob})));
        }
    }));
    let truth = all_logged(&env);
    assert_eq!(truth.len(), 1 + 8 + 9 * 40);
    let take = |s: &mut Stream| -> Vec<Value> {
        (0..truth.len())
            .map(|_| s.next_line().unwrap().expect("the feed stays open"))
            .collect()
    };
    let (seen_a, seen_b, seen_late) = (take(&mut a), take(&mut b), take(&mut late));
    for seen in [&seen_a, &seen_b, &seen_late] {
        assert_once_in_order(seen);
        assert_eq!(seen.iter().map(key).collect::<BTreeSet<_>>(), truth);
    }
    assert_eq!(
        seen_a, seen_b,
        "two followers see the same events, cursors and order"
    );
    assert_eq!(
        seen_a, seen_late,
        "a follower that lagged reads the same feed"
    );
    // The feed from the beginning, without follow, is that same sequence.
    assert_eq!(read_feed(&env, None), seen_a);
    // since=now: only what commits afterwards.
    let mut now = Stream::open(&env.socket(), "/v1/events?since=now&follow=true").unwrap();
    assert!(append(&env.socket(), &old, json!({"after": true})));
    let item = now.next_line().unwrap().unwrap();
    assert_eq!(item["event"]["data"], json!({"after": true}));
    // Resuming from any item's cursor gives exactly what followed it.
    let mid = seen_a[100]["cursor"].as_str().unwrap();
    let rest = read_feed(&env, Some(mid));
    assert_eq!(rest[..seen_a.len() - 101], seen_a[101..]);
    assert_eq!(rest.len(), seen_a.len() - 101 + 1);
}

/// Writers append to several runs while a follower reads; the daemon is killed (or stopped)
/// at an arbitrary point and started again; the follower resumes from the last cursor it got.
/// Whatever the moment, what it read before and after is every logged event exactly once.
#[test]
fn resuming_from_a_cursor_after_a_daemon_restart_loses_and_duplicates_nothing() {
    const ITERATIONS: usize = 12;
    for iteration in 0..ITERATIONS {
        let env = TestEnv::new();
        let d = env.start_daemon();
        let runs: Vec<String> = (0..4).map(|i| env.create_run(&format!("r{i}"))).collect();
        let mut s = Stream::open(&env.socket(), "/v1/events?follow=true").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let writers = write_each(&env, &runs, move |socket, run| {
            let mut i = 0;
            while !stopped.load(Ordering::Relaxed) && append(socket, run, json!({"i": i})) {
                i += 1;
            }
        });
        // Read a part of the feed while the writers go on, then take the daemon down under them.
        let mut before = Vec::new();
        while before.len() < 40 + iteration * 7 {
            before.push(s.next_line().unwrap().expect("the feed stays open"));
        }
        if iteration % 3 == 2 {
            env.rpc("daemon.shutdown", json!({}));
            assert!(d.wait_exit().success());
        } else {
            d.kill9();
        }
        stop.store(true, Ordering::Relaxed);
        join(writers);
        // Whatever the stream still had in flight is dropped: the cursor is the last item read.
        drop(s);
        let cursor = before.last().unwrap()["cursor"]
            .as_str()
            .unwrap()
            .to_string();

        let _d = env.start_daemon();
        let after = read_feed(&env, Some(&cursor));
        let all: Vec<Value> = before.iter().chain(&after).cloned().collect();
        assert_once_in_order(&all);
        assert_eq!(
            all.iter().map(key).collect::<BTreeSet<_>>(),
            all_logged(&env),
            "iteration {iteration}: the feed before and after the restart is every logged event once"
        );
        // And the restarted feed from the beginning is the same sequence with the same cursors.
        assert_eq!(read_feed(&env, None), all, "iteration {iteration}");
    }
}

#[test]
fn a_bad_cursor_is_refused_naming_the_field_and_the_form() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    env.create_run("one");
    let cursor = feed_of(&env, 1)[0]["cursor"].as_str().unwrap().to_string();
    let (feed, _) = cursor.split_once(':').unwrap();
    for bad in [
        "12".to_string(),
        "yesterday".to_string(),
        format!("{feed}:x"),
        format!("{feed}:999999"),
        "01JDXJ5R8Q4M0ZK7P2W9TB3C6E:1".to_string(),
    ] {
        let r = http::request(
            &env.socket(),
            "GET",
            &format!("/v1/events?since={bad}"),
            None,
        )
        .unwrap();
        assert_eq!(r.status, 400, "{bad}");
        let v = r.json();
        assert_eq!(v["error"]["kind"], json!("invalid_params"), "{bad}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with("invalid since"), "{msg}");
        assert!(msg.contains("accepted: `now`"), "{msg}");
    }
    let r = http::request(&env.socket(), "GET", "/v1/events?follow=maybe", None).unwrap();
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("accepted: since=now|<CURSOR>&follow=true|false"));

    let cli = env.cli(["event", "feed", "--since", "yesterday"]);
    assert_eq!(cli.code, 2, "{}", cli.stderr);
    assert!(cli.stderr.contains("invalid since"), "{}", cli.stderr);
}

/// `event feed --follow --json` carries on across a daemon restart from its last cursor:
/// the client side of resuming ([`octl_client::follow::Feed`]).
#[test]
fn the_cli_follows_the_feed_across_a_daemon_restart() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let run = env.create_run("cli");
    feed_of(&env, 1);
    let listed = env.cli(["--json", "event", "feed"]);
    listed.ok();
    let lines: Vec<Value> = listed
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["event"]["type"], json!("run.created"));

    let since = lines[0]["cursor"].as_str().unwrap();
    let mut child = env.start_cli_with(
        ["--json", "event", "feed", "--since", since, "--follow"],
        |c| {
            // It waits for the daemon the test starts again rather than starting one itself.
            c.env("OCTL_NO_AUTOSTART", "1").stderr(Stdio::null());
        },
    );
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut next = || {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    assert!(append(&env.socket(), &run, json!({"n": 1})));
    assert_eq!(next()["event"]["data"], json!({"n": 1}));
    // Appended while the follower is not connected: it must see it once the daemon is back.
    d.kill9();
    let _d = env.start_daemon();
    assert!(append(&env.socket(), &run, json!({"n": 2})));
    assert!(append(&env.socket(), &run, json!({"n": 3})));
    assert_eq!(next()["event"]["data"], json!({"n": 2}));
    assert_eq!(next()["event"]["data"], json!({"n": 3}));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(read_feed(&env, None).len(), 4);
}

/// The daemon dies after runs' groups are in their logs but before the feed's index has
/// them (failpoint `feed:before-index`, at a different batch each time): the next start
/// indexes them, and the feed from a cursor taken before the crash, and from the
/// beginning, holds every logged event exactly once.
#[test]
fn events_committed_but_not_yet_indexed_at_a_crash_are_indexed_at_the_next_start() {
    for nth in [3, 4, 6, 9, 15] {
        let env = TestEnv::new();
        let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", &format!("feed:before-index@{nth}"))]);
        let runs: Vec<String> = (0..2).map(|i| env.create_run(&format!("r{i}"))).collect();
        let first = feed_of(&env, 1)[0]["cursor"].as_str().unwrap().to_string();
        join(write_each(&env, &runs, |socket, run| {
            let mut i = 0;
            while i < 500 && append(socket, run, json!({"i": i})) {
                i += 1;
            }
        }));
        assert!(
            d.wait_exit().code().is_none(),
            "nth {nth}: the failpoint killed the daemon"
        );
        let _d = env.start_daemon();
        let log = std::fs::read_to_string(env.home.join("octld.log")).unwrap();
        assert!(
            log.contains("feed: indexing events committed while the index was not"),
            "nth {nth}: the crash left events to index"
        );
        let all = read_feed(&env, None);
        assert_once_in_order(&all);
        assert_eq!(
            all.iter().map(key).collect::<BTreeSet<_>>(),
            all_logged(&env),
            "nth {nth}"
        );
        let after = read_feed(&env, Some(&first));
        assert_eq!(
            after[..],
            all[1..],
            "nth {nth}: resumed from before the crash"
        );
    }
}

/// The index is gone (or was set aside) and, at the next start, cannot be written (EIO, as a
/// full disk): the daemon still starts, the indexer writes the records once it can, and a
/// cursor of the old index is refused by name.
#[test]
fn an_index_that_cannot_be_written_at_start_does_not_stop_the_daemon() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let run = env.create_run("before");
    for i in 0..5 {
        assert!(append(&env.socket(), &run, json!({"i": i})));
    }
    let old = feed_of(&env, 6)[5]["cursor"].as_str().unwrap().to_string();
    env.rpc("daemon.shutdown", json!({}));
    assert!(d.wait_exit().success());
    std::fs::remove_file(env.home.join("feed.idx")).unwrap();

    let _d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "feed:write-eio@1")]);
    assert!(append(&env.socket(), &run, json!({"after": true})));
    let all = feed_of(&env, 7);
    assert_eq!(all.len(), 7);
    assert_once_in_order(&all);
    assert_eq!(
        all[6]["event"]["data"],
        json!({"after": true}),
        "the backlog first"
    );
    let r = http::request(
        &env.socket(),
        "GET",
        &format!("/v1/events?since={old}"),
        None,
    )
    .unwrap();
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a cursor of another feed index"),
        "{:?}",
        r.json()
    );
}
