//! The published contract is the server's: every method of `rpc.discover` is called on a real
//! daemon with params its schema accepts, and its real answer is checked against its declared
//! result schema; then every declared param is sent in forms its schema refuses (wrong type,
//! breaking its pattern, length or range; a required one missing), and the daemon must refuse
//! each, naming the field, and change nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use octl_tests::wait::wait_until;
use octl_tests::TestEnv;
use serde_json::{json, Value};

/// A validator for `schema`, resolving `#/components/schemas/…` in the document.
fn validator(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let root = json!({ "allOf": [schema], "components": doc["components"] });
    jsonschema::draft7::new(&root).unwrap_or_else(|e| panic!("{schema}: {e}"))
}

fn check(doc: &Value, what: &str, schema: &Value, value: &Value) {
    let v = validator(doc, schema);
    let errors: Vec<String> = v
        .iter_errors(value)
        .take(5)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match its schema: {errors:#?}\n{value:#}"
    );
}

/// The method's declaration in the document.
fn method<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == json!(name))
        .unwrap_or_else(|| panic!("{name} is not in rpc.discover"))
}

/// The params object schema of a method, as OpenRPC's by-name params say it.
fn params_schema(m: &Value) -> Value {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for p in m["params"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        properties.insert(name.clone(), p["schema"].clone());
        if p["required"] == json!(true) {
            required.push(name);
        }
    }
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

struct Calls<'a> {
    env: &'a TestEnv,
    doc: Value,
    /// Each method called so far and the params it succeeded with.
    valid: BTreeMap<String, Value>,
}

impl Calls<'_> {
    /// Calls `name` with `params` (which its schema must accept); checks the answer against
    /// its result schema and returns it.
    fn call(&mut self, name: &str, params: Value) -> Value {
        let m = method(&self.doc, name).clone();
        check(
            &self.doc,
            &format!("{name}'s params"),
            &params_schema(&m),
            &params,
        );
        let result = self
            .env
            .try_rpc(name, params.clone())
            .unwrap_or_else(|e| panic!("{name} {params}: {e}"));
        check(
            &self.doc,
            &format!("{name}'s result"),
            &m["result"]["schema"],
            &result,
        );
        self.valid.entry(name.to_string()).or_insert(params);
        result
    }
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// Forms `schema` refuses, each with what it breaks.
fn invalid_forms(doc: &Value, schema: &Value) -> Vec<Value> {
    let v = validator(doc, schema);
    let mut candidates = vec![
        json!(12345),
        json!("not-valid!"),
        json!(true),
        json!({"a": 1}),
        json!(["x"]),
        json!(-1),
        json!(0),
        json!(""),
        json!("A"),
    ];
    if let Some(max) = schema["maxLength"].as_u64() {
        candidates.push(json!("x".repeat(max as usize + 1)));
    }
    if let Some(max) = schema["maximum"].as_u64() {
        candidates.push(json!(max + 1));
    }
    for alt in schema["oneOf"].as_array().into_iter().flatten() {
        if let Some(max) = alt["maximum"].as_u64() {
            candidates.push(json!(max + 1));
        }
    }
    candidates.retain(|c| !v.is_valid(c));
    candidates
}

#[test]
fn every_method_answers_what_its_schema_says_and_refuses_what_it_refuses() {
    let env = TestEnv::new();
    // A corrupt run, for run.show's corrupt answer and run.quarantine.
    let corrupt = {
        let d = env.start_daemon();
        let run = env.create_run("will break");
        for i in 0..2 {
            env.rpc(
                "event.append",
                json!({"run": run, "type": "x.n", "data": {"i": i}}),
            );
        }
        d.signal_and_wait(libc::SIGTERM);
        let path = env.run_dir(&run).join("events.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[1] = "{ not an event";
        std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
        run
    };
    let _d = env.start_daemon();
    let repo = octl_tests::TestRepo::new(&env, "repo");
    let repo_path = repo.path.display().to_string();
    let doc = env.rpc("rpc.discover", json!({}));
    let mut c = Calls {
        env: &env,
        doc: doc.clone(),
        valid: BTreeMap::new(),
    };
    c.call("rpc.discover", json!({}));
    c.call("daemon.status", json!({}));

    // A generic run and its events, questions and proposals.
    let g = id(&c.call(
        "run.create",
        json!({"kind": "generic", "title": "contract"}),
    ));
    c.call(
        "event.append",
        json!({"run": g, "type": "x.note", "data": {"k": 1}, "actor": "tool", "idempotency_key": "k1"}),
    );
    c.call("event.list", json!({"run": g, "since": 0, "limit": 10}));
    let q = id(&c.call(
        "discussion.ask",
        json!({"run": g, "title": "which?", "body": "a or b"}),
    ));
    c.call("discussion.list", json!({"run": g, "open": true}));
    c.call("discussion.answer", json!({"id": q, "text": "a"}));
    c.call("run.rebuild", json!({"run": g}));
    c.call("run.show", json!({"run": corrupt}));

    // An interactive agent: input, its screen, its reports, then a human's merge.
    let talk =
        "echo ready; git commit -q --allow-empty -m work; read line; echo \"got:$line\"; sleep 600";
    let code = id(&c.call(
        "spawn.code",
        json!({"task": talk, "repo": repo_path, "agent": "shell", "node": "talk"}),
    ));
    env.wait_node(&code, "talk", "running");
    wait_until("the agent's prompt", Duration::from_secs(30), || {
        let s = env.rpc("node.screen", json!({"run": code, "node": "talk"}));
        s["screen"]
            .as_str()
            .unwrap()
            .contains("ready")
            .then_some(())
    });
    c.call(
        "node.screen",
        json!({"run": code, "node": "talk", "lines": 50}),
    );
    c.call(
        "node.send",
        json!({"run": code, "node": "talk", "text": "hello"}),
    );
    c.call("node.attach", json!({"run": code, "node": "talk"}));
    c.call("node.log", json!({"run": code, "node": "talk"}));
    let diff = c.call("node.diff", json!({"run": code, "node": "talk"}));
    assert_eq!(diff["base"], json!("main"));
    let shown = c.call("node.show", json!({"run": code, "node": "talk"}));
    assert_eq!(
        (&shown["id"], &shown["state"]),
        (&json!("talk"), &json!("running"))
    );
    c.call(
        "node.progress",
        json!({"run": code, "node": "talk", "message": "working", "reason": "because"}),
    );
    let p1 = id(&c.call(
        "spinoff.propose",
        json!({"run": code, "node": "talk", "task": "true", "why": "separate"}),
    ));
    let p2 = id(&c.call("spinoff.propose", json!({"run": code, "task": "true"})));
    c.call("spinoff.list", json!({"run": code, "open": true}));
    let child = c.call("spinoff.accept", json!({"id": p1, "agent": "shell"}))["run"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.call("spinoff.reject", json!({"id": p2, "reason": "not now"}));
    c.call(
        "node.done",
        json!({"run": code, "node": "talk", "message": "ready", "reason": "done"}),
    );
    env.wait_node(&code, "talk", "done");
    c.call("merge", json!({"run": code, "node": "talk"}));
    c.call("run.show", json!({"run": code}));

    // An autonomous agent, merged by itself; and one that says it cannot finish, retried,
    // cancelled with its work discarded, and recovered.
    let auto = id(&c.call(
        "spawn.spinoff",
        json!({"task": "true", "repo": repo_path, "agent": "shell", "node": "auto",
               "base": "main", "gate": "true", "max_budget_usd": 1.5, "runner": "local"}),
    ));
    env.wait_status(&auto, &["completed"]);
    let quit = id(&c.call(
        "spawn.code",
        json!({"task": "git commit -q --allow-empty -m wip; sleep 600", "repo": repo_path, "agent": "shell", "node": "quit", "max_budget_usd": 2.0}),
    ));
    env.wait_node(&quit, "quit", "running");
    c.call(
        "node.fail",
        json!({"run": quit, "node": "quit", "reason": "blocked", "message": "stuck"}),
    );
    env.wait_status(&quit, &["failed"]);
    c.call(
        "run.retry",
        json!({"run": quit, "node": "quit", "resume": false}),
    );
    env.wait_node(&quit, "quit", "running");
    c.call("run.budget", json!({"run": quit, "add_usd": 1.0}));
    // Its agent asks for a tool; a person allows it; the wait answers the decision.
    c.call(
        "node.permission_ask",
        json!({"run": quit, "node": "quit", "tool": "Bash", "input": {"command": "python3 x.py"},
               "detail": "Bash: python3 x.py"}),
    );
    c.call(
        "node.permission_decide",
        json!({"run": quit, "node": "quit", "request": "p1", "behavior": "allow", "always": true,
               "reason": "fine"}),
    );
    c.call(
        "node.permission_wait",
        json!({"run": quit, "node": "quit", "request": "p1"}),
    );
    // It fails again; a person sends its work back with a review (the shell agent starts
    // again in the same worktree), then the node is cancelled with the run.
    c.call(
        "node.fail",
        json!({"run": quit, "node": "quit", "reason": "blocked again"}),
    );
    env.wait_status(&quit, &["failed"]);
    c.call(
        "node.review",
        json!({"run": quit, "node": "quit", "comments": ["src/x.rs:1: use the helper"], "text": "# and\nmore"}),
    );
    c.call("run.cancel", json!({"run": quit, "discard": true}));
    let branch = format!("recovered-{}", quit.to_lowercase());
    c.call(
        "recover",
        json!({"run": quit, "node": "quit", "branch": branch}),
    );

    // A fan-out and a plan, and their documents.
    let manifest = "prompt = \"true\"\nagent = \"shell\"\n[[units]]\nid = \"one\"\n";
    let fan = id(&c.call(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo_path, "max_parallel": 2,
               "manifest_path": "units.toml", "gate": "true", "agent": "shell"}),
    ));
    c.call("fanout.manifest", json!({"run": fan}));
    let plan = "[[nodes]]\nid = \"a\"\ntask = \"true\"\nagent = \"shell\"\n";
    let orch = id(&c.call(
        "orchestrate.start",
        json!({"plan": plan, "format": "toml", "repo": repo_path, "max_parallel": "auto",
               "plan_path": "plan.toml", "auto_merge": true}),
    ));
    env.wait_status(&child, &["completed"]);
    env.wait_status(&fan, &["completed"]);
    env.wait_status(&orch, &["completed"]);
    c.call(
        "run.list",
        json!({"status": ["completed", "failed"], "repo": repo_path, "limit": 50}),
    );
    c.call("run.list", json!({"status": "active"}));
    c.call("run.show", json!({"run": orch}));
    c.call("run.gc", json!({"dry_run": true, "older_than": "1d"}));
    c.call("doctor.runs", json!({}));
    c.call("doctor.orphans", json!({}));
    c.call("doctor.agents", json!({}));
    c.call("doctor.runners", json!({}));
    c.call("doctor.sandbox", json!({}));
    // Best of N, picked by a person.
    let best = id(&c.call(
        "spawn.spinoff",
        json!({"task": "echo $OCTL_NODE > best.txt && git add -A && git commit -qm best",
               "repo": repo_path, "agent": "shell", "node": "best", "attempts": 2,
               "judge": "human", "gate": "true", "rank": ["diff", "time"]}),
    ));
    octl_tests::wait_until("both attempts gated", Duration::from_secs(60), || {
        let types = env.event_types(&best);
        (types.iter().filter(|t| *t == "node.gated").count() == 2).then_some(())
    });
    c.call("run.pick", json!({"run": best, "node": "best-2"}));
    env.wait_status(&best, &["completed"]);

    // The web UI, on a port of the system's choosing (tests/tests/ui.rs tests it whole).
    env.write_config("[ui]\nlisten = \"127.0.0.1:0\"\n");
    let opened = c.call("ui.open", json!({}));
    assert!(opened["login_url"]
        .as_str()
        .unwrap()
        .contains("/login?token="));
    assert_eq!(c.call("ui.close", json!({}))["was_serving"], json!(true));
    c.call("run.quarantine", json!({"run": corrupt}));

    // Every declared param in forms its schema refuses: refused, naming it; nothing changes.
    let before = env.rpc("run.list", json!({}));
    let mut sent = 0;
    let mut wrong = Vec::new();
    for (name, valid) in &c.valid {
        let m = method(&doc, name);
        for p in m["params"].as_array().unwrap() {
            let field = p["name"].as_str().unwrap();
            let mut forms: Vec<Option<Value>> = invalid_forms(&doc, &p["schema"])
                .into_iter()
                .map(Some)
                .collect();
            if p["required"] == json!(true) {
                forms.push(None);
            }
            for form in forms {
                let mut params = valid.clone();
                match &form {
                    Some(v) => params[field] = v.clone(),
                    None => {
                        params.as_object_mut().unwrap().remove(field);
                    }
                }
                sent += 1;
                let Err(err) = env.try_rpc(name, params.clone()) else {
                    wrong.push(format!(
                        "{name} took {field} = {form:?}, which its schema refuses"
                    ));
                    continue;
                };
                let message = err["message"].as_str().unwrap_or_default();
                if err["data"]["kind"] != json!("invalid_params") || !message.contains(field) {
                    wrong.push(format!(
                        "{name} {field} = {form:?}: {}: {message}",
                        err["data"]["kind"]
                    ));
                }
            }
        }
        // An unknown param is refused too.
        let mut params = valid.clone();
        params["no_such_param"] = json!(1);
        let err = env.try_rpc(name, params).unwrap_err();
        assert_eq!(err["data"]["kind"], json!("invalid_params"), "{name}");
    }
    assert!(
        wrong.is_empty(),
        "{} of {sent} refusals are wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(sent > 200, "only {sent} invalid forms were sent");
    assert_eq!(
        env.rpc("run.list", json!({})),
        before,
        "a refused call changed a run"
    );

    // Every method was called, daemon.shutdown last (its answer comes before it stops).
    c.call("daemon.shutdown", json!({}));
    let declared: Vec<&str> = octl_proto::method::ALL.iter().map(|m| m.name).collect();
    let called: Vec<&str> = c.valid.keys().map(String::as_str).collect();
    let missed: Vec<&&str> = declared.iter().filter(|m| !called.contains(m)).collect();
    assert!(missed.is_empty(), "not called: {missed:?}");
}
