//! An autonomous agent's permission requests (docs/AGENTS.md, "Permission requests"): its
//! `PermissionRequest` hook asks ([`ask`]) and waits ([`wait`]) for the decision a person
//! records ([`decide`]: `node allow|deny`). Each side is one event, decided in the log: the
//! request `node.permission_asked`, the answer `node.permission_decided` — one per request,
//! so of two racing decisions (two people, or a person and the timeout) the reducer keeps the
//! first and refuses the second, and only the winner is returned to the agent. The tool's
//! input is the agent's, untrusted: recorded and shown, never run here.
//!
//! An interactive agent's (a `code` run's) request is also on screen in its window, where
//! Claude Code shows its dialog while the hook waits: a [`watch`] per open request records the
//! window's answer as the decision (`by: "window"`, actor daemon) when the agent's hooks say it
//! came first — the hook ended by SIGTERM (No, or cancelled) or the tool's `PostToolUse`
//! (Yes) — so a `node allow|deny` after it is refused naming it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use octl_proto::event::{NodePermissionAsked, NodePermissionDecided};
use octl_proto::ids::validate_node_id;
use octl_proto::reducer::rule_allows;
use octl_proto::rpc::{
    PermissionAnswer, PermissionAskParams, PermissionBehavior, PermissionDecideParams,
    PermissionDecided, PermissionWaitParams,
};
use octl_proto::state::{Permission, PermissionDecision};
use octl_proto::{Actor, AppError, ErrorKind, RunKind};

use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};

/// The longest one `node.permission_wait` call waits (well inside the server's request
/// timeout); the hook asks again until its request is decided.
const WAIT_CALL: Duration = Duration::from_secs(20);
/// The most of a tool's input recorded, as JSON.
const MAX_INPUT: usize = 64 * 1024;
const MAX_TEXT: usize = 4096;

/// How long an interactive agent's request waits: as its dialog always has, as long as Claude
/// Code lets the hook run (a day; the hook's timeout is a day and a minute).
const WINDOW_WAIT_MS: u64 = 86_400_000;

/// Whether `view`'s agents are interactive (a `code` run's: their dialogs are on screen).
fn interactive(view: &octl_proto::projection::RunDetail) -> bool {
    view.manifest.kind == Some(RunKind::Code)
}

/// `[permissions] wait`, or [`WINDOW_WAIT_MS`] in a run whose agents are interactive.
fn wait_ms(daemon: &Daemon, view: &octl_proto::projection::RunDetail) -> u64 {
    if interactive(view) {
        return WINDOW_WAIT_MS;
    }
    daemon
        .config
        .get()
        .ok()
        .and_then(|c| c.permissions.wait_ms().ok())
        .unwrap_or(crate::config::DEFAULT_PERMISSION_WAIT_MS)
}

fn now_ms() -> u64 {
    crate::store::writer::now_ms()
}

fn text(field: &str, v: &Option<String>) -> Result<(), AppError> {
    match v {
        Some(t) if t.len() > MAX_TEXT || t.trim().is_empty() => Err(AppError::invalid(format!(
            "invalid {field}: give 1 to {MAX_TEXT} bytes of text"
        ))),
        _ => Ok(()),
    }
}

/// A request's id, checked for its form before anything is looked up.
fn request_id(given: &str) -> Result<(), AppError> {
    if octl_proto::ids::is_node_id(given) {
        Ok(())
    } else {
        Err(AppError::invalid(format!(
            "invalid request {given:?}: give the request's id as its notice names it (p1): 1-63 of a-z, 0-9 and '-'"
        )))
    }
}

fn request_of(handle: &RunHandle, node: &str, request: &str) -> Option<Permission> {
    handle
        .view()
        .permissions
        .iter()
        .find(|r| r.request == request && r.node == node)
        .cloned()
}

/// The agent asks: allowed at once by a rule of the run, else recorded (`p1`, `p2`, … in the
/// order asked) and left for [`wait`].
pub async fn ask(
    daemon: &Arc<Daemon>,
    p: PermissionAskParams,
) -> Result<PermissionAnswer, AppError> {
    validate_node_id("node", &p.node)?;
    if p.tool.trim().is_empty() || p.tool.len() > 200 {
        return Err(AppError::invalid(
            "invalid tool: give the tool's name, 1 to 200 bytes (Bash, WebFetch)",
        ));
    }
    text("detail", &p.detail)?;
    let size = serde_json::to_string(&p.input).map_or(0, |s| s.len());
    if size > MAX_INPUT {
        return Err(AppError::invalid(format!(
            "invalid input: {size} bytes as JSON; give the tool's input as an object of at most {MAX_INPUT} bytes"
        )));
    }
    let handle = daemon.store.resolve("run", &p.run)?;
    handle.ensure_writable()?;
    let wait_ms = wait_ms(daemon, &handle.view());
    let answer = |request: Option<String>, decision| PermissionAnswer {
        run: handle.id.clone(),
        node: p.node.clone(),
        request,
        decision,
        wait_ms,
    };
    let view = handle.view();
    if let Some(rule) = view
        .allowed
        .iter()
        .find(|r| rule_allows(r, &p.tool, &p.input))
    {
        return Ok(answer(
            None,
            Some(PermissionDecision {
                behavior: "allow".into(),
                by: "rule".into(),
                always: true,
                reason: Some(format!("allowed for the rest of the run by {rule}")),
                decided_at: octl_proto::time::format_millis(now_ms()),
            }),
        ));
    }
    // Two agents of the run asking at once may pick the same id: the second is refused as
    // existing and picks the next.
    let mut last = None;
    for _ in 0..8 {
        let request = format!("p{}", handle.view().permissions.len() + 1);
        let draft = Draft::said(
            Some(p.node.clone()),
            Actor::Agent,
            NodePermissionAsked {
                request: request.clone(),
                tool: p.tool.clone(),
                input: p.input.clone(),
                detail: p.detail.clone(),
            },
        );
        match daemon.store.append(&handle, draft, false).await {
            Ok(_) => {
                tracing::info!(run = %handle.id, node = %p.node, %request, tool = %p.tool, "an agent asks for a tool");
                if interactive(&handle.view()) {
                    watch(daemon, &handle, &p.node, &request);
                }
                return Ok(answer(Some(request), None));
            }
            Err(e)
                if e.kind == ErrorKind::InvalidTransition
                    && e.message.contains("already exists") =>
            {
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("tried"))
}

/// Waits at most [`WAIT_CALL`] for the request's decision (or until the daemon stops). Past `[permissions] wait` from
/// its asking, it records the denial by `timeout` itself — unless a person's decision won
/// the race, which is then the answer.
pub async fn wait(
    daemon: &Arc<Daemon>,
    p: PermissionWaitParams,
) -> Result<PermissionAnswer, AppError> {
    validate_node_id("node", &p.node)?;
    request_id(&p.request)?;
    let handle = daemon.store.resolve("run", &p.run)?;
    let wait_ms = wait_ms(daemon, &handle.view());
    let mut events = handle.subscribe();
    let missing = || {
        AppError::not_found(format!(
            "node {} of run {} has no permission request {:?}",
            p.node, handle.id, p.request
        ))
    };
    let asked = request_of(&handle, &p.node, &p.request).ok_or_else(missing)?;
    // A daemon started while the request was open watches its window again.
    if asked.decision.is_none() && interactive(&handle.view()) {
        watch(daemon, &handle, &p.node, &p.request);
    }
    let deadline = octl_proto::time::parse_millis(&asked.asked_at).unwrap_or(0) + wait_ms;
    let call_end = Instant::now() + WAIT_CALL;
    let stop = daemon.shutdown_requested();
    tokio::pin!(stop);
    let answer = |decision| PermissionAnswer {
        run: handle.id.clone(),
        node: p.node.clone(),
        request: Some(p.request.clone()),
        decision,
        wait_ms,
    };
    loop {
        let r = request_of(&handle, &p.node, &p.request).ok_or_else(missing)?;
        if let Some(d) = r.decision {
            return Ok(answer(Some(d)));
        }
        let now = now_ms();
        if now >= deadline {
            let reason = if interactive(&handle.view()) {
                format!(
                    "no one answered within {}, in the agent's window or from outside, so the request was denied",
                    age(wait_ms)
                )
            } else {
                format!(
                    "no one answered within {} ([permissions] wait of orchestratectl's config.toml), so the request was denied",
                    age(wait_ms)
                )
            };
            let draft = Draft::daemon(
                Some(&p.node),
                NodePermissionDecided {
                    request: p.request.clone(),
                    behavior: "deny".into(),
                    by: "timeout".into(),
                    always: false,
                    reason: Some(reason),
                },
            );
            match daemon.store.append(&handle, draft, false).await {
                Ok(_) => continue,
                // A person's decision came first: it is the answer.
                Err(e)
                    if e.kind == ErrorKind::InvalidTransition
                        && request_of(&handle, &p.node, &p.request)
                            .is_some_and(|r| r.decision.is_some()) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            }
        }
        let left = call_end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(answer(None));
        }
        let until = left.min(Duration::from_millis(deadline - now));
        tokio::select! {
            got = tokio::time::timeout(until, events.recv()) => {
                if let Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) = got {
                    return Ok(answer(None));
                }
            }
            // Not decided yet, and the daemon stops: answered now, so the stop does not wait
            // for the call; the hook asks the next daemon.
            () = &mut stop => return Ok(answer(None)),
        }
    }
}

/// `10m`, `90s`: a wait as it is configured.
fn age(ms: u64) -> String {
    match ms {
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms => format!("{}s", ms.div_ceil(1000)),
    }
}

/// A person's decision. Recorded only if it is the first for the request; the same decision
/// again answers the one recorded; a different one is refused naming the one that won.
pub async fn decide(
    daemon: &Arc<Daemon>,
    p: PermissionDecideParams,
) -> Result<PermissionDecided, AppError> {
    validate_node_id("node", &p.node)?;
    if let Some(r) = &p.request {
        request_id(r)?;
    }
    text("reason", &p.reason)?;
    if p.always && p.behavior != PermissionBehavior::Allow {
        return Err(AppError::invalid(
            "invalid always: it allows the tool's pattern for the rest of the run, so it goes with allow only",
        ));
    }
    let handle = daemon.store.resolve("run", &p.run)?;
    handle.ensure_writable()?;
    let view = handle.view();
    if !view.nodes.iter().any(|n| n.id == p.node) {
        return Err(AppError::not_found(format!(
            "node {:?} does not exist in run {}",
            p.node, handle.id
        )));
    }
    let request = match &p.request {
        Some(r) => r.clone(),
        None => {
            let open: Vec<&str> = view
                .permissions
                .iter()
                .filter(|r| r.node == p.node && r.decision.is_none())
                .map(|r| r.request.as_str())
                .collect();
            // None open: its latest, so a decision that lost a race is told which won (or
            // answered, when it is the same).
            let latest = view.permissions.iter().rfind(|r| r.node == p.node);
            match (&open[..], latest) {
                ([one], _) => one.to_string(),
                ([], Some(r)) => r.request.clone(),
                ([], None) => {
                    return Err(AppError::new(
                        ErrorKind::InvalidTransition,
                        format!(
                            "node {} of run {} has no permission request",
                            p.node, handle.id
                        ),
                    ))
                }
                _ => {
                    return Err(AppError::invalid(format!(
                        "missing request: node {} has {} open permission requests ({}); give one with --request",
                        p.node,
                        open.len(),
                        open.join(", ")
                    )))
                }
            }
        }
    };
    let behavior = p.behavior.as_str();
    let draft = Draft::said(
        Some(p.node.clone()),
        Actor::Human,
        NodePermissionDecided {
            request: request.clone(),
            behavior: behavior.into(),
            by: "human".into(),
            always: p.always,
            reason: p.reason.clone(),
        },
    );
    let appended = daemon.store.append(&handle, draft, false).await;
    let decided = |decision| PermissionDecided {
        run: handle.id.clone(),
        node: p.node.clone(),
        request: request.clone(),
        decision,
    };
    let recorded = request_of(&handle, &p.node, &request).and_then(|r| r.decision);
    match (appended, recorded) {
        (Ok(_), Some(d)) => {
            tracing::info!(run = %handle.id, node = %p.node, %request, behavior, "a permission request decided");
            Ok(decided(d))
        }
        // The same decision again: the one recorded is the answer.
        (Err(e), Some(d))
            if e.kind == ErrorKind::InvalidTransition
                && d.by == "human"
                && d.behavior == behavior
                && d.always == p.always
                && d.reason == p.reason =>
        {
            Ok(decided(d))
        }
        (Err(e), _) => Err(e),
        (Ok(_), None) => Err(AppError::internal(
            "the decision was recorded but is not in the run's state",
        )),
    }
}

/// The open requests of interactive agents whose window is watched, as (run, request).
static WATCHED: Mutex<Option<HashSet<(String, String)>>> = Mutex::new(None);

/// Starts watching the window of `node`'s open `request` (once per request and daemon) for an
/// answer given there: until the request is decided (there, or by a person elsewhere), its
/// node ends, or the daemon stops.
fn watch(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node: &str, request: &str) {
    let key = (handle.id.clone(), request.to_string());
    {
        let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
        if !watched.get_or_insert_with(HashSet::new).insert(key.clone()) {
            return;
        }
    }
    let (daemon, handle, node, request) = (
        daemon.clone(),
        handle.clone(),
        node.to_string(),
        request.to_string(),
    );
    tokio::spawn(async move {
        watch_window(&daemon, &handle, &node, &request).await;
        let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = watched.as_mut() {
            w.remove(&key);
        }
    });
}

/// What the agent's hook said of `asked`'s dialog, if it says it was answered in the window:
/// the hook ended by SIGTERM (`PermissionAsk` naming the request: No, or cancelled), the
/// tool run (its `PostToolUse`/`PostToolUseFailure`: Yes), or the turn over without it.
fn window_answer(ev: &octl_proto::Event, asked: &Permission) -> Option<(&'static str, String)> {
    if ev.kind != "node.activity"
        || ev.actor != Actor::Agent
        || ev.node.as_deref() != Some(asked.node.as_str())
    {
        return None;
    }
    let hook = ev.data.get("hook").and_then(serde_json::Value::as_str)?;
    let detail = ev.data.get("detail").and_then(serde_json::Value::as_str);
    let same_tool = detail.is_some() && detail == asked.detail.as_deref();
    match hook {
        "PermissionAsk"
            if ev.data.get("request").and_then(serde_json::Value::as_str)
                == Some(asked.request.as_str()) =>
        {
            Some((
                "deny",
                "answered No (or cancelled) in the agent's window".into(),
            ))
        }
        "PostToolUse" | "PostToolUseFailure" if same_tool => {
            Some(("allow", "answered Yes in the agent's window".into()))
        }
        "UserPromptSubmit" | "Stop" | "StopFailure" | "SessionEnd" => Some((
            "deny",
            "the agent's turn went on without the tool: not allowed in its window".into(),
        )),
        _ => None,
    }
}

async fn watch_window(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node: &str, request: &str) {
    let mut events = handle.subscribe();
    let stop = daemon.shutdown_requested();
    tokio::pin!(stop);
    loop {
        let Some(asked) = request_of(handle, node, request) else {
            return;
        };
        let alive = handle
            .view()
            .nodes
            .iter()
            .any(|n| n.id == node && n.state.is_alive());
        if asked.decision.is_some() || !alive {
            return;
        }
        let batch = tokio::select! {
            got = tokio::time::timeout(WAIT_CALL, events.recv()) => match got {
                Ok(Ok(batch)) => batch,
                Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return,
                // Lagged, or nothing for a while: look at the request again.
                _ => continue,
            },
            () = &mut stop => return,
        };
        let Some((behavior, reason)) = batch.iter().find_map(|ev| window_answer(ev, &asked)) else {
            continue;
        };
        let draft = Draft::daemon(
            Some(node),
            NodePermissionDecided {
                request: request.to_string(),
                behavior: behavior.into(),
                by: "window".into(),
                always: false,
                reason: Some(reason),
            },
        );
        match daemon.store.append(handle, draft, false).await {
            Ok(_) => {
                tracing::info!(run = %handle.id, %node, %request, behavior, "a permission request answered in the agent's window");
                return;
            }
            // Decided elsewhere first (or the node just ended): that decision stands.
            Err(e) if e.kind == ErrorKind::InvalidTransition => return,
            Err(e) => {
                tracing::warn!(run = %handle.id, %node, %request, error = %e, "recording the window's answer");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asked() -> Permission {
        Permission {
            request: "p2".into(),
            node: "py".into(),
            tool: "Bash".into(),
            input: serde_json::Map::new(),
            detail: Some("Bash: python3 x.py".into()),
            asked_at: "2026-01-01T00:00:00.000Z".into(),
            decision: None,
        }
    }

    fn said(node: &str, actor: Actor, data: serde_json::Value) -> octl_proto::Event {
        serde_json::from_value(json!({
            "v": octl_proto::EVENT_VERSION, "seq": 9, "id": "e", "ts": "2026-01-01T00:00:01.000Z",
            "run": "r", "node": node, "type": "node.activity", "actor": actor, "data": data,
        }))
        .unwrap()
    }

    #[test]
    fn the_windows_answer_is_read_from_the_agents_own_hooks() {
        let a = asked();
        let agent = |data| said("py", Actor::Agent, data);
        let answer = |ev: &octl_proto::Event| window_answer(ev, &a).map(|(b, _)| b);
        // Ended by SIGTERM (No, or cancelled): the hook names its request.
        let ended = json!({"state": "working", "hook": "PermissionAsk", "request": "p2"});
        assert_eq!(answer(&agent(ended)), Some("deny"));
        let other = json!({"state": "working", "hook": "PermissionAsk", "request": "p1"});
        assert_eq!(answer(&agent(other)), None, "another request's hook");
        // Yes: the tool ran (or ran and failed).
        for hook in ["PostToolUse", "PostToolUseFailure"] {
            let ran = json!({"state": "working", "hook": hook, "detail": "Bash: python3 x.py"});
            assert_eq!(answer(&agent(ran)), Some("allow"), "{hook}");
        }
        let another = json!({"state": "working", "hook": "PostToolUse", "detail": "Bash: ls"});
        assert_eq!(answer(&agent(another)), None, "another tool's");
        // The turn went on without it.
        assert_eq!(
            answer(&agent(json!({"state": "idle", "hook": "Stop"}))),
            Some("deny")
        );
        // Not an answer: the dialog's own notice, the request's own activity, another node's,
        // or anyone but the agent.
        for data in [
            json!({"state": "needs_permission", "hook": "Notification"}),
            json!({"state": "needs_permission", "hook": "PermissionRequest", "detail": "Bash: python3 x.py"}),
            json!({"state": "working", "hook": "PreToolUse", "detail": "Bash: python3 x.py"}),
        ] {
            assert_eq!(answer(&agent(data.clone())), None, "{data}");
        }
        let ran =
            json!({"state": "working", "hook": "PostToolUse", "detail": "Bash: python3 x.py"});
        assert_eq!(answer(&said("other", Actor::Agent, ran.clone())), None);
        assert_eq!(answer(&said("py", Actor::Human, ran)), None);
    }
}
