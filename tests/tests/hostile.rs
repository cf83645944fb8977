//! Hostile input against the real daemon and CLI (issue 5, "Hostile input"):
//!
//! - the JSON-RPC entry fed thousands of random and mutated bodies: the daemon stays up (same
//!   pid), every answer is valid JSON-RPC (or 204), and a request that is refused writes
//!   nothing to any run's log;
//! - nesting far past serde_json's recursion limit is a clean parse error, and whatever an
//!   append accepts can be read back by a client;
//! - limits: body size, header time, many idle connections;
//! - symlinks and `..` in every path argument (`--repo`, `--manifest`, `--plan`, `--dir`);
//! - task text reaches an agent as one argv element, byte for byte, never through a shell;
//!   node names and branches cannot carry shell metacharacters; a gate is a shell command by
//!   design (it comes from the user, never from an agent).
//!
//! The random requests come from a seeded generator: the seed is printed, and
//! `OCTL_FUZZ_SEED=<n>` replays a run; `OCTL_FUZZ_REQUESTS=<n>` changes how many are sent.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use octl_tests::http::{self, Response};
use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// A small seeded generator (no dependency, reproducible from the printed seed)

struct Rng(u64);

impl Rng {
    fn from_env() -> Rng {
        let seed = std::env::var("OCTL_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("hostile input: OCTL_FUZZ_SEED={seed}");
        Rng(seed)
    }

    /// SplitMix64.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// What goes into the requests

const HOSTILE_STRINGS: &[&str] = &[
    "",
    " ",
    "..",
    ".",
    "../../etc/passwd",
    "/etc/passwd",
    "runs/../../x",
    "a\u{0}b",
    "\u{0}",
    "$(touch /tmp/octl-hostile-marker)",
    "`touch /tmp/octl-hostile-marker`",
    "; rm -rf /",
    "'\"\\",
    "%s%n%x",
    "{prompt}",
    "#{pane_id}#(true)",
    "x;",
    "\n",
    "\r\n",
    "\u{202e}gnp.exe",
    "💥",
    "01JDXJ",
    "0000000000",
    "ZZZZZZZZZZZZZZZZZZZZZZZZZZ",
    "8ZZZZZZZZZZZZZZZZZZZZZZZZZ",
    "x.",
    "x.ok",
    "node.done",
    "run.created",
    "-rf",
    "--",
    "daemon",
    "A",
    "a-",
    "-a",
    "\u{feff}",
];

fn hostile_value(rng: &mut Rng) -> Value {
    match rng.below(16) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(0),
        3 => json!(-1),
        4 => json!(1.5),
        5 => json!(1e308),
        6 => json!(u64::MAX),
        7 => json!(i64::MIN),
        8 => json!(5e-324),
        9 => json!([]),
        10 => json!({}),
        11 => json!([rng.pick(HOSTILE_STRINGS)]),
        12 => json!({ "nested": { "deeper": [1, {"x": null}] } }),
        _ => json!(rng.pick(HOSTILE_STRINGS)),
    }
}

/// Valid requests to mutate: every method family, against a run that exists. Nothing here
/// names a real repository, so no agent is ever started by a random request.
fn templates(ids: &Ids) -> Vec<Value> {
    let run = &ids.run;
    let manifest = "prompt = \"echo {x}\"\n[[units]]\nid = \"u1\"\nvars = { x = \"1\" }\n";
    let plan = "[[nodes]]\nid = \"a\"\ntask = \"echo a\"\n[[nodes]]\nid = \"b\"\ntask = \"echo b\"\ndeps = [\"a\"]\n";
    let params = [
        ("daemon.status", json!({})),
        ("rpc.discover", json!({})),
        ("run.list", json!({"status": "active"})),
        ("run.show", json!({"run": run})),
        ("run.show", json!({"run": &run[..8]})),
        ("run.rebuild", json!({"run": run})),
        ("run.create", json!({"kind": "generic", "title": "fuzzed"})),
        ("run.cancel", json!({"run": ids.victim})),
        ("event.list", json!({"run": run, "since": 2, "limit": 5})),
        (
            "event.append",
            json!({"run": run, "type": "x.note", "data": {"message": "hi"}}),
        ),
        (
            "event.append",
            json!({"run": run, "node": "a", "type": "node.progress", "data": {"message": "m"}, "actor": "agent"}),
        ),
        (
            "event.append",
            json!({"run": run, "type": "x.keyed", "idempotency_key": "k-1"}),
        ),
        (
            "node.progress",
            json!({"run": run, "node": "a", "message": "working"}),
        ),
        (
            "node.done",
            json!({"run": run, "node": "b", "message": "done"}),
        ),
        (
            "node.fail",
            json!({"run": run, "node": "b", "reason": "no"}),
        ),
        ("merge", json!({"run": run, "node": "a"})),
        ("run.retry", json!({"run": run, "node": "a"})),
        (
            "discussion.ask",
            json!({"run": run, "node": "a", "title": "which?", "body": "details"}),
        ),
        ("discussion.list", json!({"run": run, "open": true})),
        (
            "discussion.answer",
            json!({"id": ids.discussion, "text": "this one"}),
        ),
        (
            "spinoff.propose",
            json!({"run": run, "node": "a", "task": "separate work", "why": "noticed"}),
        ),
        ("spinoff.list", json!({"run": run})),
        (
            "spinoff.reject",
            json!({"id": ids.proposal, "reason": "not now"}),
        ),
        (
            "spinoff.accept",
            json!({"id": ids.proposal, "agent": "shell"}),
        ),
        (
            "spawn.spinoff",
            json!({"task": "echo hi", "repo": "/nonexistent/repo", "agent": "shell", "node": "n"}),
        ),
        (
            "spawn.code",
            json!({"task": "echo hi", "repo": "relative/repo", "agent": "shell"}),
        ),
        (
            "fanout.start",
            json!({"manifest": manifest, "format": "toml", "repo": "/nonexistent", "agent": "shell", "max_parallel": 2}),
        ),
        ("fanout.manifest", json!({"run": run})),
        (
            "orchestrate.start",
            json!({"plan": plan, "format": "toml", "repo": "/nonexistent", "agent": "shell", "auto_merge": true}),
        ),
        ("no.such.method", json!({})),
    ];
    params
        .into_iter()
        .enumerate()
        .map(|(i, (method, params))| {
            json!({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        })
        .collect()
}

/// Nesting `depth` levels of arrays (or objects) around a number.
fn nested(depth: usize, objects: bool) -> String {
    if objects {
        format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
    } else {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }
}

/// One to three changes to a valid request.
fn mutate(rng: &mut Rng, req: &mut Value) {
    for _ in 0..1 + rng.below(3) {
        let obj = req.as_object_mut().unwrap();
        match rng.below(12) {
            // A parameter of another type or a hostile string.
            0..=2 => {
                if let Some(Value::Object(p)) = obj.get_mut("params") {
                    let keys: Vec<String> = p.keys().cloned().collect();
                    if !keys.is_empty() {
                        let k = rng.pick(&keys).clone();
                        p.insert(k, hostile_value(rng));
                    }
                }
            }
            3 => {
                if let Some(Value::Object(p)) = obj.get_mut("params") {
                    let keys: Vec<String> = p.keys().cloned().collect();
                    if !keys.is_empty() {
                        let k = rng.pick(&keys).clone();
                        p.remove(&k);
                    }
                }
            }
            4 => {
                if let Some(Value::Object(p)) = obj.get_mut("params") {
                    let k = rng
                        .pick(&["extra", "Run", "data", "type", "repo", ""])
                        .to_string();
                    p.insert(k, hostile_value(rng));
                }
            }
            5 => {
                let v = match rng.below(5) {
                    0 => json!([1, 2]),
                    1 => json!("params"),
                    2 => Value::Null,
                    3 => json!(7),
                    _ => {
                        obj.remove("params");
                        continue;
                    }
                };
                obj.insert("params".into(), v);
            }
            6 => {
                let m = match rng.below(6) {
                    0 => json!(rng.pick(HOSTILE_STRINGS)),
                    1 => json!(12),
                    2 => Value::Null,
                    3 => json!("DAEMON.STATUS"),
                    4 => json!("daemon.status\u{0}"),
                    _ => json!("rpc.discover."),
                };
                obj.insert("method".into(), m);
            }
            7 => match rng.below(4) {
                0 => {
                    obj.insert("jsonrpc".into(), json!("1.0"));
                }
                1 => {
                    obj.insert("jsonrpc".into(), json!(2.0));
                }
                2 => {
                    obj.remove("jsonrpc");
                }
                _ => {
                    obj.insert("jsonrpc".into(), Value::Null);
                }
            },
            8 => {
                let id = match rng.below(8) {
                    0 => json!({"a": 1}),
                    1 => json!([1]),
                    2 => json!(true),
                    3 => json!(1.25),
                    4 => json!(u64::MAX),
                    5 => json!(rng.pick(HOSTILE_STRINGS)),
                    6 => Value::Null,
                    _ => {
                        // A notification: carried out, never answered.
                        obj.remove("id");
                        continue;
                    }
                };
                obj.insert("id".into(), id);
            }
            9 => {
                obj.insert("extra".into(), json!(1));
            }
            // A big string, under the 1 MiB cap.
            10 => {
                if let Some(Value::Object(p)) = obj.get_mut("params") {
                    let keys: Vec<String> = p.keys().cloned().collect();
                    let k = if keys.is_empty() {
                        "data".to_string()
                    } else {
                        rng.pick(&keys).clone()
                    };
                    let n = 1_000 + rng.below(800_000);
                    let fill = rng
                        .pick(&["a", "é", "\"", "\\", "\u{0}", "{"])
                        .repeat(n / 4);
                    p.insert(k, json!(fill));
                }
            }
            // Nesting in the payload, sometimes past the parser's limit.
            _ => {
                if let Some(Value::Object(p)) = obj.get_mut("params") {
                    let depth = 1 + rng.below(200);
                    let v: Value =
                        match serde_json::from_str(&nested(depth.min(120), rng.percent(50))) {
                            Ok(v) => v,
                            Err(_) => json!(null),
                        };
                    p.insert("data".into(), json!({ "deep": v }));
                }
            }
        }
    }
}

/// A body under the 1 MiB cap (the cap itself is tested on its own).
fn body(rng: &mut Rng, templates: &[Value]) -> Vec<u8> {
    loop {
        let b = any_body(rng, templates);
        if b.len() <= octl_proto::rpc::MAX_BODY_BYTES {
            return b;
        }
    }
}

/// A body: a mutated request, a batch of mixed junk, raw byte damage, or plain junk.
fn any_body(rng: &mut Rng, templates: &[Value]) -> Vec<u8> {
    let request = |rng: &mut Rng| {
        let mut req = rng.pick(templates).clone();
        if rng.percent(85) {
            mutate(rng, &mut req);
        }
        req
    };
    let mut bytes = match rng.below(20) {
        0..=12 => serde_json::to_vec(&request(rng)).unwrap(),
        13..=15 => {
            let n = 1 + rng.below(20);
            let items: Vec<Value> = (0..n)
                .map(|_| match rng.below(6) {
                    0 => hostile_value(rng),
                    _ => request(rng),
                })
                .collect();
            serde_json::to_vec(&Value::Array(items)).unwrap()
        }
        16 => {
            let n = rng.below(300);
            (0..n).map(|_| rng.next() as u8).collect()
        }
        17 => {
            let junk: &[&[u8]] = &[
                b"",
                b"null",
                b"[]",
                b"{}",
                b"[[]]",
                b"[null]",
                b"\"jsonrpc\"",
                b"123",
                b"1e999",
                b"-",
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.status\"} {}",
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.status\",\"method\":\"no\"}",
                b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.status\"}",
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon\\u0000status\"}",
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.status\",\"params\":{\"\\ud800\":1}}",
            ];
            rng.pick(junk).to_vec()
        }
        18 => {
            let depth = 129 + rng.below(20_000);
            nested(depth, rng.percent(50)).into_bytes()
        }
        _ => {
            // Repeated numbers or quotes, up to ~900 KB.
            let n = 1 + rng.below(900_000);
            rng.pick(&["1", "\"", "[", "{", " "]).repeat(n).into_bytes()
        }
    };
    // Byte-level damage to a third of them.
    if rng.percent(33) && !bytes.is_empty() {
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(bytes.len() + 1);
            match rng.below(5) {
                0 => bytes.truncate(at),
                1 => bytes.insert(at, *rng.pick(&[0xff, 0xc0, 0xfe, 0x80, 0xed])),
                2 => bytes.insert(at, 0),
                3 => {
                    if at < bytes.len() {
                        bytes[at] ^= 1 << rng.below(8);
                    }
                }
                _ => {
                    let pieces: [&[u8]; 5] = [b"\\u0000", b"\\", b"\"", b",", b"}"];
                    let piece = *rng.pick(&pieces);
                    bytes.splice(at..at, piece.iter().copied());
                }
            }
        }
    }
    bytes
}

// ---------------------------------------------------------------------------------------------
// Checking answers

struct Ids {
    run: String,
    victim: String,
    discussion: String,
    proposal: String,
}

/// events.jsonl length of every run.
fn log_sizes(env: &TestEnv) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(env.home.join("runs")) {
        for e in rd.flatten() {
            let len = std::fs::metadata(e.path().join("events.jsonl"))
                .map(|m| m.len())
                .unwrap_or(0);
            out.insert(e.file_name().to_string_lossy().into_owned(), len);
        }
    }
    out
}

/// One response object of JSON-RPC 2.0: `jsonrpc`, an `id` that can be echoed, and exactly
/// one of `result` or `error` (with an integer code, a message and our `data.kind`).
fn check_response_object(v: &Value, sent: &str) -> Result<bool, String> {
    let o = v
        .as_object()
        .ok_or_else(|| format!("a response that is not an object: {v}"))?;
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(format!("no jsonrpc 2.0: {v}"));
    }
    match o.get("id") {
        Some(Value::String(_) | Value::Number(_) | Value::Null) => {}
        _ => return Err(format!("a bad id: {v}")),
    }
    let extra: Vec<&String> = o
        .keys()
        .filter(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "result" | "error"))
        .collect();
    if !extra.is_empty() {
        return Err(format!("unknown members {extra:?}: {v}"));
    }
    match (o.get("result"), o.get("error")) {
        (Some(_), None) => Ok(true),
        (None, Some(e)) => {
            let code = e["code"]
                .as_i64()
                .ok_or_else(|| format!("an error without an integer code: {v}"))?;
            let standard = [-32700, -32600, -32601, -32602, -32603].contains(&code);
            if !standard && !(-32099..=-32000).contains(&code) {
                return Err(format!("code {code} outside the JSON-RPC ranges: {v}"));
            }
            if !e["message"].is_string() || !e["data"]["kind"].is_string() {
                return Err(format!("an error without message or data.kind: {v}"));
            }
            if code == -32603 {
                return Err(format!("an internal error for {sent:.300}: {v}"));
            }
            Ok(false)
        }
        _ => Err(format!("not exactly one of result and error: {v}")),
    }
}

/// Checks one answer against what was sent. Returns whether the request may have written
/// (a success, or a notification that is carried out without an answer).
fn check_answer(sent: &[u8], resp: &Response) -> Result<bool, String> {
    let shown = String::from_utf8_lossy(sent);
    let parsed: Option<Value> = serde_json::from_slice(sent).ok();
    // What members of the request expect an answer: non-objects and objects with an id
    // always get one; objects without an id (notifications) may get none.
    let (items, batch) = match &parsed {
        Some(Value::Array(items)) if !items.is_empty() => (items.clone(), true),
        Some(v) => (vec![v.clone()], false),
        None => (vec![], false),
    };
    let must_answer = items
        .iter()
        .filter(|i| !i.is_object() || i.get("id").is_some())
        .count();
    let notifications = items.len() - must_answer;
    match resp.status {
        204 => {
            if !resp.body.is_empty() || parsed.is_none() || must_answer > 0 {
                return Err(format!("204 for {shown:.300}"));
            }
            Ok(notifications > 0)
        }
        200 => {
            let v: Value = serde_json::from_slice(&resp.body).map_err(|e| {
                format!(
                    "an answer that is not JSON ({e}): {:.300}",
                    String::from_utf8_lossy(&resp.body)
                )
            })?;
            let answers = match (&v, batch) {
                (Value::Array(a), true) => a.clone(),
                (Value::Object(_), _) => vec![v.clone()],
                _ => return Err(format!("a batch answered with {v:.300} for {shown:.300}")),
            };
            if batch && (answers.len() < must_answer || answers.len() > items.len()) {
                return Err(format!(
                    "{} answers to a batch of {} ({must_answer} needing one)",
                    answers.len(),
                    items.len()
                ));
            }
            let mut any_ok = false;
            for a in &answers {
                any_ok |= check_response_object(a, &shown)?;
            }
            // A single request with an id that can be echoed gets it back.
            if let (false, Some(Value::Object(req))) = (batch, &parsed) {
                if let Some(id @ (Value::String(_) | Value::Number(_))) = req.get("id") {
                    if answers[0]["id"] != *id {
                        return Err(format!("id {id} answered as {}", answers[0]["id"]));
                    }
                }
            }
            if parsed.is_none() && answers[0]["error"]["code"] != json!(-32700) {
                return Err(format!("unparsable body not answered -32700: {v:.300}"));
            }
            Ok(any_ok || notifications > 0)
        }
        other => Err(format!(
            "HTTP {other} for a body of {} bytes: {:.300}",
            sent.len(),
            String::from_utf8_lossy(&resp.body)
        )),
    }
}

fn status_pid(env: &TestEnv) -> u64 {
    env.rpc("daemon.status", json!({}))["pid"].as_u64().unwrap()
}

/// Every run's log is still whole: each line an event, seqs 1..n without gaps, and the run
/// rebuilds from it.
fn check_logs_whole(env: &TestEnv) {
    for run in log_sizes(env).keys() {
        let events = env.log_events(run);
        for (i, e) in events.iter().enumerate() {
            assert_eq!(
                e["seq"],
                json!(i + 1),
                "run {run}: seq gap at line {}",
                i + 1
            );
        }
        let rebuilt = env.rpc("run.rebuild", json!({ "run": run }));
        assert_eq!(rebuilt["events"], json!(events.len()), "{rebuilt}");
    }
}

// ---------------------------------------------------------------------------------------------
// The JSON-RPC entry

#[test]
fn the_rpc_entry_survives_thousands_of_hostile_bodies_and_refusals_write_nothing() {
    let env = TestEnv::new();
    let daemon = env.start_daemon();
    let run = env.create_run("target");
    env.rpc(
        "event.append",
        json!({"run": run, "node": "a", "type": "node.added"}),
    );
    env.rpc(
        "event.append",
        json!({"run": run, "node": "b", "type": "node.added"}),
    );
    let victim = env.create_run("victim");
    let discussion = env.rpc(
        "discussion.ask",
        json!({"run": run, "node": "a", "title": "which one?"}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let proposal = env.rpc(
        "spinoff.propose",
        json!({"run": run, "node": "a", "task": "split this out"}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ids = Ids {
        run,
        victim,
        discussion,
        proposal,
    };
    let templates = templates(&ids);
    let pid = status_pid(&env);
    assert_eq!(pid, daemon.pid() as u64);
    let marker = Path::new("/tmp/octl-hostile-marker");
    let _ = std::fs::remove_file(marker);

    let total: usize = std::env::var("OCTL_FUZZ_REQUESTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000);
    let mut rng = Rng::from_env();
    let started = Instant::now();
    let (mut ok, mut refused, mut quiet) = (0, 0, 0);
    for i in 0..total {
        let sent = body(&mut rng, &templates);
        assert!(
            sent.len() <= octl_proto::rpc::MAX_BODY_BYTES,
            "{}",
            sent.len()
        );
        let before = log_sizes(&env);
        let resp = http::request(&env.socket(), "POST", "/rpc", Some(&sent)).unwrap_or_else(|e| {
            panic!(
                "request {i}: no answer ({e}); daemon stderr:\n{}",
                daemon.stderr()
            )
        });
        let may_write = check_answer(&sent, &resp).unwrap_or_else(|e| {
            panic!(
                "request {i}: {e}\nsent: {:.500}",
                String::from_utf8_lossy(&sent)
            )
        });
        let after = log_sizes(&env);
        if !may_write {
            assert_eq!(
                before,
                after,
                "request {i} was refused but wrote: {:.500}",
                String::from_utf8_lossy(&sent)
            );
        }
        match (resp.status, may_write) {
            (204, _) => quiet += 1,
            (_, true) => ok += 1,
            _ => refused += 1,
        }
        if i % 250 == 249 {
            assert_eq!(status_pid(&env), pid, "the daemon was replaced");
        }
    }
    eprintln!(
        "{total} bodies in {:?}: {ok} with a success, {refused} refused, {quiet} unanswered notifications",
        started.elapsed()
    );
    assert!(refused > total / 2, "most hostile bodies are refused");
    assert!(ok > total / 50, "some mutated requests still succeed");
    assert_eq!(status_pid(&env), pid, "the same daemon answers");
    assert!(!marker.exists(), "something ran a shell on request text");
    check_logs_whole(&env);
}

#[test]
fn nesting_past_the_parser_limit_is_a_clean_parse_error() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("deep");
    let pid = status_pid(&env);
    for objects in [false, true] {
        // 10,000 levels: the whole body, and inside the params of a valid request.
        let deep = nested(10_000, objects);
        let v = env.raw_rpc(deep.as_bytes()).json();
        assert_eq!(v["error"]["code"], json!(-32700), "{v}");
        assert_eq!(v["id"], Value::Null);
        let inside = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"event.append","params":{{"run":"{run}","type":"x.deep","data":{{"d":{deep}}}}}}}"#
        );
        let v = env.raw_rpc(inside.as_bytes()).json();
        assert_eq!(v["error"]["code"], json!(-32700), "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("recursion limit"),
            "{v}"
        );
    }
    // A batch nested in a batch is one invalid member, not a crash.
    let v = env
        .raw_rpc(format!("[{}]", nested(100, false)).as_bytes())
        .json();
    assert_eq!(v[0]["error"]["code"], json!(-32600), "{v}");
    assert_eq!(env.log_events(&run).len(), 1, "nothing written");
    assert_eq!(status_pid(&env), pid);
}

#[test]
fn whatever_an_append_accepts_a_client_can_read_back() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("depth");
    // From shallow to the deepest body the parser takes (127 levels in all: the request,
    // params, data, then the arrays), appended as data and as a node's outcome.
    env.rpc(
        "event.append",
        json!({"run": run, "node": "a", "type": "node.added"}),
    );
    let mut accepted = 0;
    for depth in [1usize, 10, 40, 60, 62, 63, 64, 80, 100, 123, 124] {
        for (node, ty, key) in [
            (None, "x.deep", "d"),
            (Some("a"), "node.progress", "outcome"),
        ] {
            let data = if key == "outcome" {
                format!(
                    r#"{{"outcome":{{"o":{}}}}}"#,
                    nested(depth.saturating_sub(1), true)
                )
            } else {
                format!(r#"{{"d":{}}}"#, nested(depth, false))
            };
            let node = node
                .map(|n| format!(r#""node":"{n}","#))
                .unwrap_or_default();
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"event.append","params":{{"run":"{run}",{node}"type":"{ty}","data":{data}}}}}"#
            );
            let before = env.log_events(&run).len();
            let v = env.raw_rpc(body.as_bytes()).json();
            if v.get("result").is_some() {
                accepted += 1;
            } else {
                assert_eq!(v["error"]["data"]["kind"], json!("invalid_params"), "{v}");
                assert_eq!(env.log_events(&run).len(), before, "a refusal wrote");
            }
        }
        // The CLI reads the log and the run back, whatever was accepted.
        for args in [
            vec!["--json", "event", "list", "--run", &run],
            vec!["--json", "run", "show", &run],
        ] {
            let out = env.cli(&args);
            assert_eq!(out.code, 0, "depth {depth}: {args:?} fails: {out:?}");
        }
    }
    assert!(accepted >= 8, "ordinary nesting is accepted");
}

// ---------------------------------------------------------------------------------------------
// Limits

#[test]
fn body_size_and_header_time_are_limited() {
    let env = TestEnv::new();
    let daemon = env.start_daemon();
    let run = env.create_run("limits");
    let cap = octl_proto::rpc::MAX_BODY_BYTES;

    // One byte over the cap, declared: refused before the body is read.
    let over = vec![b' '; cap + 1];
    let r = env.raw_rpc(&over);
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"]["data"]["kind"], json!("too_large"));
    // A Content-Length of a terabyte with no body behind it: refused at once.
    let mut s = UnixStream::connect(env.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"POST /rpc HTTP/1.1\r\nHost: octld\r\nContent-Length: 1000000000000\r\n\r\n")
        .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    // Chunked, with no length declared: cut off at the cap all the same (the daemon answers
    // 413 and stops reading, so the writes may fail before the answer is read).
    let mut s = UnixStream::connect(env.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"POST /rpc HTTP/1.1\r\nHost: octld\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0;
    let mut cut = None;
    while sent <= cap + chunk.len() {
        let mut piece = format!("{:x}\r\n", chunk.len()).into_bytes();
        piece.extend_from_slice(&chunk);
        piece.extend_from_slice(b"\r\n");
        if let Err(e) = s.write_all(&piece) {
            cut = Some(e.kind());
            break;
        }
        sent += chunk.len();
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let closed = matches!(
        cut,
        Some(std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset)
    );
    assert!(
        answer.starts_with(b"HTTP/1.1 413") || closed,
        "after {sent} bytes ({cut:?}): {:.200}",
        String::from_utf8_lossy(&answer)
    );
    // Exactly at the cap: parsed (a parse error here), not refused.
    let mut at = vec![b' '; cap];
    at[0] = b'{';
    let r = env.raw_rpc(&at);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["error"]["code"], json!(-32700));

    // Headers that never end: the connection is closed after the header timeout (10 s).
    let mut slow = UnixStream::connect(env.socket()).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    slow.write_all(b"POST /rpc HTTP/1.1\r\nHost: oct").unwrap();
    let t = Instant::now();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(25),
        "closed after {waited:?}"
    );
    assert_eq!(env.log_events(&run).len(), 1, "nothing written");
    assert_eq!(status_pid(&env), daemon.pid() as u64);
}

/// Descriptors the daemon has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn idle_connections(env: &TestEnv, n: usize) -> Vec<UnixStream> {
    (0..n)
        .map(|_| UnixStream::connect(env.socket()).expect("connect"))
        .collect()
}

#[test]
fn idle_connections_do_not_lock_out_a_new_client() {
    let env = TestEnv::new();
    let daemon = env.start_daemon();
    let pid = daemon.pid();
    // 300 connections that never say anything: a new client is still answered at once.
    let idle = idle_connections(&env, 300);
    let t = Instant::now();
    assert_eq!(status_pid(&env), pid as u64);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "answered after {:?}",
        t.elapsed()
    );
    // They are dropped by the daemon after the header timeout.
    wait_until(
        "idle connections to be closed",
        Duration::from_secs(30),
        || (open_fds(pid) < 100).then_some(()),
    );
    drop(idle);
}

/// The daemon serves a bounded number of connections: past it, a new client waits in the
/// backlog until an idle connection times out, and the daemon's descriptors stay bounded.
/// Needs the connection limit in `octld/src/server/mod.rs`; without it the daemon holds one
/// descriptor per connection until it runs out, and then cannot accept anyone.
#[test]
fn connections_past_the_limit_wait_and_descriptors_stay_bounded() {
    let env = TestEnv::new();
    let daemon = env.start_daemon();
    let pid = daemon.pid();
    let base = open_fds(pid);
    let idle = idle_connections(&env, 1_000);
    // The daemon takes connections up to its limit (512)…
    octl_tests::wait_until(
        "the daemon to reach its connection limit",
        Duration::from_secs(20),
        || (open_fds(pid).saturating_sub(base) >= 500).then_some(()),
    );
    // …and no further, however many wait.
    let held = open_fds(pid).saturating_sub(base);
    assert!(held <= 600, "the daemon holds {held} connections at once");
    let t = Instant::now();
    assert_eq!(status_pid(&env), pid as u64);
    assert!(
        t.elapsed() < Duration::from_secs(25),
        "a new client waited {:?}",
        t.elapsed()
    );
    drop(idle);
}

// ---------------------------------------------------------------------------------------------
// Paths

fn canonical(p: &Path) -> String {
    p.canonicalize().unwrap().display().to_string()
}

#[test]
fn repo_through_a_symlink_or_dotdot_is_the_real_repository() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "real-repo");
    std::fs::create_dir_all(repo.path.join("sub/dir")).unwrap();
    let root = env.root.path();
    symlink(&repo.path, root.join("link-to-repo")).unwrap();
    std::fs::create_dir_all(root.join("elsewhere")).unwrap();
    let top = canonical(&repo.path);

    for given in [
        "link-to-repo",
        "link-to-repo/sub/dir",
        "elsewhere/../real-repo/sub/../sub",
        "link-to-repo/sub/../../real-repo",
    ] {
        let out = env.cli_with(
            [
                "--json", "spawn", "spinoff", "true", "--agent", "shell", "--repo", given,
            ],
            |c| {
                c.current_dir(root);
            },
        );
        assert_eq!(out.code, 0, "{given}: {out:?}");
        let v = out.json();
        assert_eq!(
            v["repo"],
            json!(top),
            "{given}: recorded as the real top level"
        );
        env.wait_status(v["id"].as_str().unwrap(), &["completed", "failed"]);
    }
    // Refused with a clear error: a dangling link, a file, a directory outside any repo.
    symlink(root.join("nowhere"), root.join("dangling")).unwrap();
    std::fs::write(root.join("file"), "x").unwrap();
    for (given, words) in [
        ("dangling", "no such directory"),
        ("file", "not a directory"),
        ("elsewhere", "not inside a git repository"),
    ] {
        let out = env.cli_with(
            [
                "--json", "spawn", "spinoff", "true", "--agent", "shell", "--repo", given,
            ],
            |c| {
                c.current_dir(root);
            },
        );
        assert_ne!(out.code, 0, "{given}: {out:?}");
        let msg = out.error()["message"].as_str().unwrap().to_string();
        assert!(msg.contains(words), "{given}: {msg}");
    }
    // The daemon resolves on its own: a path through /proc's symlinks and `..` is the
    // repository's real top level...
    let twisted = format!("/proc/self/root{}/sub/../sub/dir", repo.path.display());
    let v = env
        .try_rpc(
            "spawn.spinoff",
            json!({"task": "true", "repo": twisted, "agent": "shell"}),
        )
        .unwrap();
    assert_eq!(v["repo"], json!(top));
    env.wait_status(v["id"].as_str().unwrap(), &["completed", "failed"]);
    // ...and refuses a relative path, or `..` that leads out of any repository. (Never
    // /proc/self/cwd here: that is the test daemon's cwd, inside this project's own repo.)
    for (repo_param, words) in [
        ("real-repo", "absolute path"),
        (
            &*format!("{}/../elsewhere", repo.path.display()),
            "not inside a git repository",
        ),
    ] {
        let err = env
            .try_rpc(
                "spawn.spinoff",
                json!({"task": "true", "repo": repo_param, "agent": "shell"}),
            )
            .unwrap_err();
        let msg = err["message"].as_str().unwrap();
        assert!(msg.contains(words), "{repo_param}: {err}");
    }
    // No worktree was made anywhere but under the home.
    for wt in repo.extra_worktrees() {
        assert!(wt.starts_with(&canonical(&env.home)), "{wt}");
    }
}

#[test]
fn manifest_and_plan_paths_resolve_to_the_file_the_kernel_opens() {
    let (env, _d, repo) = TestEnv::world();
    let root = env.root.path().canonicalize().unwrap();
    let manifest = |who: &str| {
        format!(
            "title = \"from {who}\"\nprompt = \"printf '%s' {{v}} > {{v}}.txt\"\n[[units]]\nid = \"u-{who}\"\nvars = {{ v = \"{who}\" }}\n"
        )
    };
    // root/m.toml is a decoy; x is a symlink to root/deep/inner, so ../x/../m.toml is
    // root/deep/m.toml for the kernel (and for `cat`): `..` after a symlink is the target's
    // parent, not the link's.
    std::fs::write(root.join("m.toml"), manifest("decoy")).unwrap();
    std::fs::create_dir_all(root.join("deep/inner")).unwrap();
    std::fs::write(root.join("deep/m.toml"), manifest("deep")).unwrap();
    symlink(root.join("deep/inner"), root.join("x")).unwrap();
    let given = "../x/../m.toml";
    let kernel = std::fs::read_to_string(repo.path.join(given)).unwrap();
    assert!(kernel.contains("from deep"));

    let out = env.cli_with(
        ["--json", "fan-out", "--manifest", given, "--agent", "shell"],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    assert_eq!(out.code, 0, "{out:?}");
    let run = out.json()["id"].as_str().unwrap().to_string();
    let doc = env.rpc("fanout.manifest", json!({ "run": run }));
    assert_eq!(
        doc["text"],
        json!(kernel),
        "the daemon got the file the kernel opens"
    );
    let show = env.rpc("run.show", json!({ "run": run }));
    assert_eq!(
        show["manifest"]["settings"]["manifest_path"],
        json!(root.join("deep/m.toml").display().to_string()),
        "recorded by its resolved path"
    );
    env.wait_status(&run, &["completed"]);
    assert_eq!(repo.show("main", "deep.txt").as_deref(), Some("deep"));

    // A plan reached through a symlinked file and `..`.
    std::fs::create_dir_all(root.join("plans/real")).unwrap();
    std::fs::write(
        root.join("plans/real/p.toml"),
        "title = \"linked plan\"\n[[nodes]]\nid = \"one\"\ntask = \"echo one > one.txt\"\n",
    )
    .unwrap();
    symlink(root.join("plans/real/p.toml"), root.join("plans/link.toml")).unwrap();
    let out = env.cli_with(
        [
            "--json",
            "orchestrate",
            "--plan",
            "../plans/real/../link.toml",
            "--agent",
            "shell",
            "--auto-merge",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    assert_eq!(out.code, 0, "{out:?}");
    let run = out.json()["id"].as_str().unwrap().to_string();
    let show = env.rpc("run.show", json!({ "run": run }));
    assert_eq!(
        show["manifest"]["settings"]["plan_path"],
        json!(root.join("plans/real/p.toml").display().to_string())
    );
    assert_eq!(show["manifest"]["title"], json!("linked plan"));

    // A dangling link, a directory and a path through a missing directory are refused.
    symlink(root.join("gone.toml"), root.join("dangling.toml")).unwrap();
    for (given, words) in [
        ("../dangling.toml", "no such file"),
        ("../plans", "directory"),
        ("../missing/../m.toml", "no such file"),
    ] {
        let out = env.cli_with(
            ["--json", "fan-out", "--manifest", given, "--agent", "shell"],
            |c| {
                c.current_dir(&repo.path);
            },
        );
        assert_ne!(out.code, 0, "{given}: {out:?}");
        let msg = out.error()["message"].as_str().unwrap().to_string();
        assert!(msg.contains(words), "{given}: {msg}");
    }
}

/// Every file under `dir` (not following symlinks), relative.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn skill_install_through_a_symlinked_dir_writes_only_under_the_resolved_dir() {
    let env = TestEnv::new();
    let root = env.root.path().canonicalize().unwrap();
    let real = root.join("dotfiles/claude-skills");
    std::fs::create_dir_all(&real).unwrap();
    symlink(&real, root.join("skills-link")).unwrap();
    let before = files_under(&root);

    let out = env.cli_with(
        ["--json", "skill", "install", "--dir", "skills-link"],
        |c| {
            c.current_dir(&root);
        },
    );
    assert_eq!(out.code, 0, "{out:?}");
    let report = out.json();
    assert!(
        !report["installed"].as_array().unwrap().is_empty(),
        "{report}"
    );
    // The link is still a link; everything new is under its target.
    assert!(std::fs::symlink_metadata(root.join("skills-link"))
        .unwrap()
        .file_type()
        .is_symlink());
    let new: Vec<PathBuf> = files_under(&root)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(!new.is_empty());
    for p in &new {
        assert!(
            p.starts_with("dotfiles/claude-skills/"),
            "written outside the resolved dir: {}",
            p.display()
        );
    }
    assert!(real.join("fan-out/SKILL.md").is_file());

    assert_eq!(
        report["dir"],
        json!(real.display().to_string()),
        "reported resolved"
    );

    // `..` after a symlink is the target's parent (as for the kernel and `cd -P`): this is
    // the same directory again, so nothing is written.
    let out = env.cli_with(
        [
            "--json",
            "skill",
            "install",
            "--dir",
            "skills-link/../claude-skills",
        ],
        |c| {
            c.current_dir(&root);
        },
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["installed"], json!([]), "{out:?}");
    assert_eq!(out.json()["dir"], json!(real.display().to_string()));
    assert_eq!(files_under(&root).len(), before.len() + new.len());

    // A SKILL.md replaced by a symlink to a file elsewhere: the install replaces the link
    // (with --force) and never writes through it.
    let outside = root.join("precious.txt");
    std::fs::write(&outside, "keep me").unwrap();
    let skill = real.join("fan-out/SKILL.md");
    std::fs::remove_file(&skill).unwrap();
    symlink(&outside, &skill).unwrap();
    let out = env.cli_with(
        [
            "--json",
            "skill",
            "install",
            "--force",
            "--dir",
            real.to_str().unwrap(),
        ],
        |c| {
            c.current_dir(&root);
        },
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    assert!(!std::fs::symlink_metadata(&skill)
        .unwrap()
        .file_type()
        .is_symlink());
}

// ---------------------------------------------------------------------------------------------
// Shell injection

/// Text made to break out of any quoting: command substitution, backticks, separators,
/// quotes of both kinds, backslashes, newlines, tmux formats (`#()` runs a command),
/// printf directives, globs. `@M` becomes an absolute marker path.
const NASTY_TASK: &str = "fix it'; touch @M-1; echo '\n\"$(touch @M-2)\" `touch @M-3` ; touch @M-4 && touch @M-5 | cat\n\\'\\\"\\\\ $HOME ${PATH} $((6*7)) !! * ? [a] ~ #{pane_id} #(touch @M-6) %s %n {prompt}\ttab\r\nend;";

#[test]
fn task_text_reaches_the_agent_byte_for_byte_and_nothing_runs_it() {
    let env = TestEnv::new();
    // A user profile whose fixed script takes the task as "$1": the task is an argument,
    // never part of the script.
    env.write_config(
        "[agents.echoer]\nautonomous = [\"/bin/sh\", \"-c\", \"printf '%s' \\\"$1\\\" > task.txt && git add task.txt && git commit -qm task\", \"echoer\", \"{prompt}\"]\non_exit = \"done\"\n",
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let mark = env.root.path().join("MARK");
    let nasty = NASTY_TASK.replace("@M", &mark.display().to_string());
    let marks = || -> Vec<PathBuf> {
        (1..=6)
            .map(|i| PathBuf::from(format!("{}-{i}", mark.display())))
            .filter(|p| p.exists())
            .collect()
    };
    // The task inline, and one long enough (over 12 KiB) to go through a launch script.
    let long = format!(
        "{nasty}\n{}",
        format!("x'$(touch {m}-1)`touch {m}-2`\"\n", m = mark.display()).repeat(300)
    );
    assert!(long.len() > 12 * 1024);
    for (node, task) in [("short", nasty.clone()), ("long", long)] {
        let v = env
            .spawn(
                "spinoff",
                &repo,
                &task,
                json!({"agent": "echoer", "node": node}),
            )
            .unwrap();
        let run = v["id"].as_str().unwrap().to_string();
        let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
        assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
        let got = repo.show("main", "task.txt").unwrap();
        assert_eq!(got, task, "the agent received the task byte for byte");
        assert_eq!(
            marks(),
            Vec::<PathBuf>::new(),
            "nothing in the task was executed"
        );
    }
}

#[test]
fn node_names_and_branches_cannot_carry_shell_metacharacters() {
    let (env, _d, repo) = TestEnv::world();
    let mark = env.root.path().join("MARK");
    let evil = format!("$(touch {})", mark.display());
    for node in [
        evil.as_str(),
        "a;b",
        "a b",
        "`x`",
        "../x",
        "-x",
        "A",
        "a\nb",
        "a/b",
    ] {
        let err = env
            .spawn(
                "spinoff",
                &repo,
                "true",
                json!({"agent": "shell", "node": node}),
            )
            .unwrap_err();
        assert_eq!(
            err["data"]["kind"],
            json!("invalid_params"),
            "{node:?}: {err}"
        );
    }
    for base in [
        evil.as_str(),
        "--upload-pack=touch MARK",
        "main;touch MARK",
        "../main",
        "-D",
    ] {
        let err = env
            .spawn(
                "spinoff",
                &repo,
                "true",
                json!({"agent": "shell", "base": base}),
            )
            .unwrap_err();
        assert!(
            ["not_found", "invalid_params"].contains(&err["data"]["kind"].as_str().unwrap()),
            "{base:?}: {err}"
        );
    }
    // Plans and manifests name nodes with the same rule.
    for (method, doc, key) in [
        (
            "orchestrate.start",
            format!("[[nodes]]\nid = {evil:?}\ntask = \"t\"\n"),
            "plan",
        ),
        (
            "fanout.start",
            format!("prompt = \"p\"\n[[units]]\nid = {evil:?}\n"),
            "manifest",
        ),
    ] {
        let err = env
            .try_rpc(
                method,
                json!({ key: doc, "format": "toml", "repo": repo.path, "agent": "shell" }),
            )
            .unwrap_err();
        assert_eq!(err["data"]["kind"], json!("invalid_params"), "{err}");
        assert!(err["message"].as_str().unwrap().contains(".id"), "{err}");
    }
    // And an agent cannot name a branch: reports carry no branch, so node.starting's
    // branch is the daemon's own `octl/<RUN>/<NODE>`.
    assert!(!mark.exists());
    assert_eq!(
        env.rpc("run.list", json!({})),
        json!([]),
        "nothing was created"
    );
    assert!(repo.refs("refs/heads/octl/").is_empty());
}

/// A gate is a shell command on purpose, like `make check` in a Makefile: it comes from the
/// user (the spawn flags, the manifest or the plan), never from an agent's reports, and it is
/// run with `sh -c` in the node's worktree.
#[test]
fn a_gate_is_a_shell_command_by_design() {
    let (env, _d, repo) = TestEnv::world();
    let v = env
        .spawn(
            "spinoff",
            &repo,
            "echo done > work.txt",
            json!({"agent": "shell", "node": "gated", "gate": "echo \"sum=$((2+3))\" && test -f work.txt"}),
        )
        .unwrap();
    let run = v["id"].as_str().unwrap().to_string();
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/gated.log")).unwrap();
    assert!(log.contains("sum=5"), "the gate ran in sh: {log}");
    // An agent reporting cannot set or change a gate: report params have no such field.
    let err = env
        .try_rpc(
            "node.done",
            json!({"run": run, "node": "gated", "message": "m", "gate": "touch /tmp/x"}),
        )
        .unwrap_err();
    assert_eq!(err["data"]["kind"], json!("invalid_params"), "{err}");
    let err = env
        .try_rpc(
            "event.append",
            json!({"run": run, "node": "gated", "type": "node.added", "data": {"gate": "touch /tmp/x"}}),
        )
        .unwrap_err();
    assert!(
        ["forbidden", "invalid_transition"].contains(&err["data"]["kind"].as_str().unwrap()),
        "{err}"
    );
}

/// What agents write is shown without its control characters: a progress message or a failure's
/// reason carrying escape sequences (retitle the terminal, clear the screen, a carriage return
/// over the line, a C1 CSI) reaches the text of `event tail` and `run show` as plain text, and
/// `--json` keeps it whole, escaped.
#[test]
fn agent_text_is_shown_without_its_control_characters() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let evil = "a\u{1b}]0;pwned\u{7}b\u{1b}[2Jc\rd\u{9b}31me";
    let run = env.create_run("plain");
    for (kind, data) in [
        ("node.added", serde_json::json!({"task": "t"})),
        ("node.progress", serde_json::json!({"message": evil})),
        ("node.failed", serde_json::json!({"reason": evil})),
    ] {
        env.rpc(
            "event.append",
            serde_json::json!({"run": run, "node": "n", "type": kind, "actor": "agent", "data": data}),
        );
    }
    for args in [
        vec!["event", "tail", "--run", run.as_str()],
        vec!["run", "show", run.as_str()],
    ] {
        let out = env.cli(&args);
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        assert!(
            !out.stdout
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{args:?}: {:?}",
            out.stdout
        );
        assert!(out.stdout.contains("31me"), "{args:?}: {}", out.stdout);
    }
    let json = env.cli(["--json", "run", "show", &run]);
    assert_eq!(
        json.json()["nodes"][0]["reason"],
        serde_json::json!(evil),
        "{json:?}"
    );
}
