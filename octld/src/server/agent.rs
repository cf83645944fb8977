//! A sandboxed node's own socket (docs/SECURITY.md, "An agent's own socket"): the only way to
//! the daemon inside its sandbox, shown there as `$OCTL_HOME/octld.sock`. It serves what an
//! agent does about its own node — report done or failed, progress, ask a question, propose a
//! spin-off, record its activity, ask for a permission and wait for the answer — and reads of
//! its own run; everything else (a merge, a decision, an answer, another run, the change
//! feed) is refused `unauthorized`, so a request an agent makes can never be answered by it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use octl_proto::{AppError, ErrorKind};

use crate::daemon::Daemon;

/// The node a socket serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    pub run: String,
    pub node: String,
}

/// Methods about the agent's own node: `run` and `node` must be its own.
const OWN_NODE: &[&str] = &[
    "node.done",
    "node.fail",
    "node.progress",
    "node.permission_ask",
    "node.permission_wait",
    "discussion.ask",
    "spinoff.propose",
    "event.append",
];
/// Reads of its own run: `run` must be its own.
const OWN_RUN: &[&str] = &["run.show", "event.list", "discussion.list", "node.show"];
/// Nothing of any run.
const ANY: &[&str] = &["rpc.discover", "daemon.status"];

impl Scope {
    fn refuse(&self, why: String) -> AppError {
        AppError::new(
            ErrorKind::Unauthorized,
            format!(
                "{why}: this is the socket of node {} of run {} inside its sandbox, which serves that node's own methods only",
                self.node, self.run
            ),
        )
    }

    /// Whether the agent may call `method` with `params`.
    pub fn permits(&self, method: &str, params: &Map<String, Value>) -> Result<(), AppError> {
        let field = |k: &str| params.get(k).and_then(Value::as_str);
        if ANY.contains(&method) {
            return Ok(());
        }
        let own_node = OWN_NODE.contains(&method);
        if !own_node && !OWN_RUN.contains(&method) {
            return Err(self.refuse(format!("{method} is not an agent's method")));
        }
        if field("run") != Some(self.run.as_str()) {
            return Err(self.refuse(format!(
                "{method} names run {:?} (give the whole id of its own run)",
                field("run").unwrap_or("")
            )));
        }
        if own_node && field("node") != Some(self.node.as_str()) {
            return Err(self.refuse(format!(
                "{method} names node {:?}",
                field("node").unwrap_or("")
            )));
        }
        if method == "event.append" {
            // Its own activity, said as itself: never a decision or a person's word.
            if field("type") != Some("node.activity") || field("actor") != Some("agent") {
                return Err(self.refuse(format!(
                    "event.append of {:?} as {:?} (an agent appends node.activity as agent)",
                    field("type").unwrap_or(""),
                    field("actor").unwrap_or("human")
                )));
            }
        }
        Ok(())
    }

    /// What of an answer the agent may see: of `daemon.status`, not the notifiers (a
    /// webhook's URL may hold its token; their last failure names another run) nor
    /// config.toml's error.
    pub fn redact(&self, method: &str, result: &mut Box<serde_json::value::RawValue>) {
        if method != "daemon.status" {
            return;
        }
        let Ok(Value::Object(mut status)) = serde_json::from_str::<Value>(result.get()) else {
            return;
        };
        status.insert("notify".into(), Value::Object(Map::new()));
        status.remove("config_error");
        if let Ok(raw) = serde_json::value::to_raw_value(&status) {
            *result = raw;
        }
    }

    /// Whether the agent may read run `run`'s event stream.
    pub fn permits_stream(&self, run: &str) -> Result<(), AppError> {
        if run == self.run {
            Ok(())
        } else {
            Err(self.refuse(format!("the events of run {run:?}")))
        }
    }
}

/// The sockets being served, by node; dropping one's handle stops it.
#[derive(Default)]
pub struct Sockets {
    open: Mutex<HashMap<Scope, tokio::task::AbortHandle>>,
}

/// The socket's path in a node's control directory.
pub fn socket_in(ctl: &Path) -> PathBuf {
    ctl.join("octld.sock")
}

impl Sockets {
    /// Serves `scope`'s socket in `ctl` (made anew: a socket file left by an earlier daemon
    /// answers nobody); one already served is left as it is.
    pub fn open(&self, daemon: &Arc<Daemon>, scope: Scope, ctl: &Path) -> Result<(), AppError> {
        let mut open = self.open.lock().expect("sockets lock");
        if open.get(&scope).is_some_and(|h| !h.is_finished()) {
            return Ok(());
        }
        let path = socket_in(ctl);
        let _ = std::fs::remove_file(&path);
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            AppError::internal("an agent's socket is opened inside the daemon's runtime")
        })?;
        let listener = {
            let _enter = runtime.enter();
            super::bind(&path).map_err(|e| AppError::internal(e.to_string()))?
        };
        let task = runtime.spawn(super::serve_scoped(
            listener,
            daemon.clone(),
            Some(Arc::new(scope.clone())),
        ));
        open.insert(scope, task.abort_handle());
        Ok(())
    }

    /// Stops serving `scope`'s socket (its node ended), if it was.
    pub fn close(&self, scope: &Scope, ctl: &Path) {
        if let Some(h) = self.open.lock().expect("sockets lock").remove(scope) {
            h.abort();
        }
        let _ = std::fs::remove_file(socket_in(ctl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn an_agent_reaches_its_own_node_and_nothing_else() {
        let s = Scope {
            run: "R".into(),
            node: "a".into(),
        };
        let ok = |m: &str, p: Value| s.permits(m, &params(p)).is_ok();
        assert!(ok("node.done", json!({"run": "R", "node": "a"})));
        assert!(ok(
            "node.permission_ask",
            json!({"run": "R", "node": "a", "tool": "Bash"})
        ));
        assert!(ok("run.show", json!({"run": "R"})));
        assert!(ok(
            "event.append",
            json!({"run": "R", "node": "a", "type": "node.activity", "actor": "agent"})
        ));
        // Another node, another run, a prefix of its own run.
        assert!(!ok("node.done", json!({"run": "R", "node": "b"})));
        assert!(!ok("node.done", json!({"run": "S", "node": "a"})));
        assert!(!ok("run.show", json!({"run": "S"})));
        // What only a person does, even about itself.
        for m in [
            "node.permission_decide",
            "discussion.answer",
            "spinoff.accept",
            "merge.node",
            "run.cancel",
            "run.retry",
            "node.review",
            "node.send",
            "spawn.spinoff",
            "run.list",
        ] {
            let e = s
                .permits(m, &params(json!({"run": "R", "node": "a"})))
                .unwrap_err();
            assert_eq!(e.kind, ErrorKind::Unauthorized, "{m}");
        }
        // An event that says a person decided, or said as a person.
        assert!(!ok(
            "event.append",
            json!({"run": "R", "node": "a", "type": "node.permission_decided", "actor": "agent"})
        ));
        assert!(!ok(
            "event.append",
            json!({"run": "R", "node": "a", "type": "node.activity"})
        ));
        assert!(s.permits_stream("R").is_ok() && s.permits_stream("S").is_err());
    }

    #[test]
    fn an_agent_sees_the_daemons_status_without_its_notifiers_or_config_error() {
        let s = Scope {
            run: "R".into(),
            node: "a".into(),
        };
        let status = json!({"pid": 1, "version": "0.1.0", "protocol": 1, "home": "/h",
            "notify": {"webhook": "https://hooks.example/T0K3N", "last_failure": {"run": "S"}},
            "config_error": "[notify] bad"});
        let mut raw = serde_json::value::to_raw_value(&status).unwrap();
        s.redact("daemon.status", &mut raw);
        let seen: Value = serde_json::from_str(raw.get()).unwrap();
        assert_eq!(
            seen,
            json!({"pid": 1, "version": "0.1.0", "protocol": 1, "home": "/h", "notify": {}})
        );
        let mut other = serde_json::value::to_raw_value(&status).unwrap();
        s.redact("run.show", &mut other);
        assert_eq!(
            other.get(),
            serde_json::value::to_raw_value(&status).unwrap().get()
        );
    }
}
