//! JSON-RPC 2.0 exactly, the event stream, request limits, `rpc.discover`, and the peer-uid
//! check, against the real daemon over its socket.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use octl_tests::http::{self, Stream};
use octl_tests::TestEnv;
use serde_json::{json, Value};

fn kind(v: &Value) -> &str {
    v["error"]["data"]["kind"].as_str().unwrap_or("")
}

/// The text of the `"id":` member of a reply, as sent.
fn id_text(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.match_indices("\"id\":")
        .map(|(at, m)| {
            let rest = &text[at + m.len()..];
            let end = rest.find([',', '}']).unwrap();
            rest[..end].to_string()
        })
        .collect()
}

#[test]
fn request_ids_come_back_byte_for_byte() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    // Numbers a parsed double would rewrite, a string with escapes, null: answered, refused
    // (unknown method) and in a batch, each with its id exactly as sent.
    for id in [
        "18446744073709551617",
        "1e3",
        "-0.50",
        "1.0",
        r#""a\u0062\"c""#,
        "null",
    ] {
        for method in ["daemon.status", "no.such"] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#);
            let r = env.raw_rpc(body.as_bytes());
            assert_eq!(
                id_text(&r.body),
                [id],
                "{}",
                String::from_utf8_lossy(&r.body)
            );
        }
    }
    let batch = br#"[{"jsonrpc":"2.0","id":1e3,"method":"daemon.status"},{"jsonrpc":"2.0","id":18446744073709551617,"method":"no.such"},{"jsonrpc":"2.0","method":"daemon.status"}]"#;
    let r = env.raw_rpc(batch);
    assert_eq!(id_text(&r.body), ["1e3", "18446744073709551617"]);
    // An id that is not a string, number or null is refused with a null id.
    let r = env.raw_rpc(br#"{"jsonrpc":"2.0","id":[1],"method":"daemon.status"}"#);
    assert_eq!(id_text(&r.body), ["null"]);
    assert_eq!(r.json()["error"]["code"], json!(-32600));
}

#[test]
fn single_requests_and_standard_errors() {
    let env = TestEnv::new();
    let _d = env.start_daemon();

    let r = env.raw_rpc(br#"{"jsonrpc":"2.0","id":"a","method":"daemon.status"}"#);
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["id"], json!("a"));
    assert_eq!(v["jsonrpc"], json!("2.0"));
    assert_eq!(v["result"]["protocol"], json!(1));

    let cases: [(&[u8], i64, &str); 7] = [
        (b"{not json", -32700, "parse_error"),
        (
            br#"{"jsonrpc":"1.0","id":1,"method":"daemon.status"}"#,
            -32600,
            "invalid_request",
        ),
        (br#"{"jsonrpc":"2.0","id":1}"#, -32600, "invalid_request"),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"no.such"}"#,
            -32601,
            "method_not_found",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"run.show","params":["01JDXJ"]}"#,
            -32602,
            "invalid_params",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"run.show","params":{"run":"01JDXJ","extra":1}}"#,
            -32602,
            "invalid_params",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"run.show","params":{}}"#,
            -32602,
            "invalid_params",
        ),
    ];
    for (body, code, k) in cases {
        let v = env.raw_rpc(body).json();
        assert_eq!(
            v["error"]["code"],
            json!(code),
            "{}: {v}",
            String::from_utf8_lossy(body)
        );
        assert_eq!(kind(&v), k);
    }
    // Application errors use -32000..-32099 with data.kind.
    let v = env.raw_rpc(br#"{"jsonrpc":"2.0","id":1,"method":"run.show","params":{"run":"01JDXJ5R8Q4M0ZK7P2W9TB3C6E"}}"#).json();
    let code = v["error"]["code"].as_i64().unwrap();
    assert!((-32099..=-32000).contains(&code), "{v}");
    assert_eq!(kind(&v), "not_found");
}

#[test]
fn batches_and_notifications() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("batch");

    // A notification is carried out but answered with nothing.
    let note =
        json!({"jsonrpc":"2.0","method":"event.append","params":{"run": run, "type":"x.quiet"}});
    let r = env.raw_rpc(note.to_string().as_bytes());
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());
    assert_eq!(
        env.log_events(&run).len(),
        2,
        "the notification was appended"
    );

    // A mixed batch: answers for requests only, errors per member.
    let batch = json!([
        {"jsonrpc":"2.0","id":1,"method":"event.append","params":{"run": run, "type":"x.one"}},
        {"jsonrpc":"2.0","method":"event.append","params":{"run": run, "type":"x.two"}},
        {"jsonrpc":"2.0","id":2,"method":"no.such"},
        42,
        {"jsonrpc":"2.0","id":3,"method":"daemon.status"}
    ]);
    let v = env.raw_rpc(batch.to_string().as_bytes()).json();
    let replies = v.as_array().expect("a batch answers with an array");
    assert_eq!(replies.len(), 4, "{v}");
    let by_id = |id: Value| replies.iter().find(|r| r["id"] == id).cloned().unwrap();
    assert!(by_id(json!(1))["result"]["seq"].is_u64());
    assert_eq!(kind(&by_id(json!(2))), "method_not_found");
    assert!(by_id(json!(3))["result"]["pid"].is_u64());
    assert_eq!(kind(&by_id(Value::Null)), "invalid_request");
    assert_eq!(env.log_events(&run).len(), 4);

    // A batch of notifications only: no body at all.
    let quiet = json!([
        {"jsonrpc":"2.0","method":"event.append","params":{"run": run, "type":"x.a"}},
        {"jsonrpc":"2.0","method":"event.append","params":{"run": run, "type":"x.b"}}
    ]);
    let r = env.raw_rpc(quiet.to_string().as_bytes());
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());
    assert_eq!(env.log_events(&run).len(), 6);

    // An empty batch is one invalid request.
    let v = env.raw_rpc(b"[]").json();
    assert!(v.is_object());
    assert_eq!(v["error"]["code"], json!(-32600));
}

#[test]
fn the_stream_delivers_past_then_new_events_in_order() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("stream");
    for i in 0..5 {
        env.rpc(
            "event.append",
            json!({"run": run, "type": "x.past", "data": {"i": i}}),
        );
    }
    let mut s = Stream::open(
        &env.socket(),
        &format!("/v1/runs/{}/events?since=2&follow=true", &run[..10]),
    )
    .unwrap();
    assert_eq!(s.status, 200);
    let writer = {
        let socket = env.socket();
        let run = run.clone();
        std::thread::spawn(move || {
            for i in 0..50 {
                let body = json!({"jsonrpc":"2.0","id":1,"method":"event.append","params":{"run": run, "type":"x.new","data":{"i": i}}});
                http::request(&socket, "POST", "/rpc", Some(body.to_string().as_bytes())).unwrap();
            }
        })
    };
    let mut seqs = Vec::new();
    while seqs.len() < 54 {
        let ev = s.next_line().unwrap().expect("the stream stays open");
        seqs.push(ev["seq"].as_u64().unwrap());
    }
    writer.join().unwrap();
    assert_eq!(
        seqs,
        (3..=56).collect::<Vec<_>>(),
        "past events after since, then new ones, in order"
    );

    // Without follow the stream ends after the past events.
    let r = http::request(
        &env.socket(),
        "GET",
        &format!("/v1/runs/{run}/events?since=50"),
        None,
    )
    .unwrap();
    let lines: Vec<Value> = String::from_utf8(r.body)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        (51..=56).collect::<Vec<_>>()
    );

    let r = http::request(&env.socket(), "GET", "/v1/runs/..%2Fetc/events", None).unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["kind"], json!("invalid_params"));
}

/// A follower that reads nothing while the run commits many groups falls behind the daemon's
/// short per-run buffer of groups (16); once it reads, it still gets every event once, in
/// order: what it missed comes from the log.
#[test]
fn a_stream_reader_far_behind_still_gets_every_event_once_in_order() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("slow reader");
    let mut s = Stream::open(&env.socket(), &format!("/v1/runs/{run}/events?follow=true")).unwrap();
    assert_eq!(s.status, 200);
    // 150 groups of ~60 KB: far more than the stream's own queue (64 chunks) and the socket's
    // buffers hold, so the daemon's side waits on the reader and the groups pass it by.
    let blob = "b".repeat(60 * 1024);
    let mut conn = http::Conn::open(&env.socket()).unwrap();
    for i in 0..150 {
        let body = json!({"jsonrpc":"2.0","id":i,"method":"event.append","params":{"run": run, "type":"x.big","data":{"i": i, "blob": blob}}});
        let r = conn.post_rpc(body.to_string().as_bytes()).unwrap();
        assert!(r.json()["result"]["seq"].is_u64(), "{r:?}");
    }
    let mut seqs = Vec::new();
    while seqs.len() < 151 {
        let ev = s.next_line().unwrap().expect("the stream stays open");
        if ev["type"] == json!("x.big") {
            assert_eq!(ev["data"]["i"], json!(seqs.len() - 1), "{}", ev["seq"]);
            assert_eq!(ev["data"]["blob"].as_str().map(str::len), Some(blob.len()));
        }
        seqs.push(ev["seq"].as_u64().unwrap());
    }
    assert_eq!(seqs, (1..=151).collect::<Vec<_>>());
}

#[test]
fn oversized_bodies_are_refused_before_parsing() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("limits");
    let big = json!({"jsonrpc":"2.0","id":1,"method":"event.append","params":{"run": run, "type":"x.big","data":{"blob": "a".repeat(1024 * 1024)}}});
    let r = env.raw_rpc(big.to_string().as_bytes());
    assert_eq!(r.status, 413);
    assert_eq!(kind(&r.json()), "too_large");
    // Under 1 MiB but data over 64 KiB: refused by validation.
    let mid = json!({"jsonrpc":"2.0","id":1,"method":"event.append","params":{"run": run, "type":"x.big","data":{"blob": "a".repeat(70 * 1024)}}});
    let v = env.raw_rpc(mid.to_string().as_bytes()).json();
    assert_eq!(kind(&v), "invalid_params");
    assert!(v["error"]["message"].as_str().unwrap().contains("64 KiB"));
    assert_eq!(env.log_events(&run).len(), 1, "nothing written");
}

#[test]
#[ignore = "needs root and setpriv to run a client as another uid: run as root with `cargo test -p octl-tests -- --ignored` (see .ci/run)"]
fn another_uid_is_refused_even_with_the_socket_opened_up() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(root, "needs root to run a client as another uid (setpriv)");
    assert!(
        Command::new("setpriv").arg("--version").output().is_ok(),
        "setpriv is not installed (util-linux; .ci/run installs it)"
    );
    let env = TestEnv::new();
    let _d = env.start_daemon();
    // Open every directory on the way and the socket itself, as a careless user might.
    let mut dir = env.socket();
    while dir.pop() {
        if dir == std::path::Path::new("/") || dir == std::env::temp_dir() {
            break;
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(env.socket(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(octl_tests::bin("orchestratectl"))
        .arg("--home")
        .arg(&env.home)
        .args(["--json", "run", "list"])
        .env("HOME", "/tmp")
        .env("OCTL_NO_AUTOSTART", "1")
        .output()
        .unwrap();
    let cli = octl_tests::Cli::from(out);
    assert_eq!(cli.code, 4, "another uid is refused: {cli:?}");
    assert_eq!(cli.error()["kind"], json!("unauthorized"), "{cli:?}");
    assert!(cli.stdout.is_empty());
    // The owner still gets in.
    assert!(env.try_rpc("run.list", json!({})).is_ok());
}
