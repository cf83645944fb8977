//! `node.permission_asked` and `node.permission_decided`: an agent's request for a tool its
//! permissions put under `ask`, and the one decision that answers it. The request is the
//! agent's to make while its process may be alive; the decision a person's (or the daemon's,
//! when no one answered in time), once: a second one is refused naming the first, so of two
//! racing decisions the loser changes nothing. Both set the node's activity (waiting for the
//! answer is `needs_permission`); neither moves the node.

use serde_json::{Map, Value};

use crate::error::{AppError, ErrorKind};
use crate::event::{Actor, Event, NodePermissionAsked, NodePermissionDecided, Payload};
use crate::state::{Activity, ActivityState, Permission, PermissionDecision, RunState};

use super::{record_id, transition};

/// The rule an `always` decision adds for a request: for `Bash`, the command's program
/// (`Bash(python3 *)`); for any other tool, the tool (`WebFetch`).
pub fn rule_for(tool: &str, input: &Map<String, Value>) -> String {
    match (tool, input.get("command").and_then(Value::as_str)) {
        ("Bash", Some(cmd)) => match cmd.split_whitespace().next() {
            Some(program) => format!("Bash({program} *)"),
            None => "Bash".to_string(),
        },
        _ => tool.to_string(),
    }
}

/// Whether `rule` (one [`rule_for`] made) allows this tool call. A `Bash` command that joins
/// several (`;`, `&&`, `|`, a substitution, a newline) is never allowed by a program's rule:
/// only its first program would have been decided on.
pub fn rule_allows(rule: &str, tool: &str, input: &Map<String, Value>) -> bool {
    let Some(program) = rule
        .strip_prefix("Bash(")
        .and_then(|r| r.strip_suffix(" *)"))
    else {
        return rule == tool;
    };
    let Some(cmd) = input.get("command").and_then(Value::as_str) else {
        return false;
    };
    let joined = ["&&", "||", ";", "|", "`", "$(", "\n", ">", "<", "&"]
        .iter()
        .any(|op| cmd.contains(op));
    tool == "Bash" && !joined && cmd.split_whitespace().next() == Some(program)
}

impl RunState {
    pub(super) fn fold_permission(&mut self, ev: &Event) -> Result<(), AppError> {
        let id = ev
            .node
            .as_deref()
            .ok_or_else(|| AppError::invalid(format!("{} needs a node: give node", ev.kind)))?;
        let node = self.nodes.get(id).ok_or_else(|| {
            AppError::not_found(format!("node {id:?} does not exist in run {}", self.id))
        })?;
        let alive = node.state.is_alive();
        let state_name = node.state.as_str();
        if ev.kind == NodePermissionAsked::TYPE {
            if ev.actor != Actor::Agent {
                return Err(AppError::new(
                    ErrorKind::Forbidden,
                    "node.permission_asked is said only by the node's own agent (actor agent)",
                ));
            }
            let p: NodePermissionAsked = ev.payload()?;
            let request = record_id(p.request).map_err(|_| {
                AppError::invalid(
                    "invalid data.request: use 1-63 of a-z, 0-9 and '-', starting with a letter or digit",
                )
            })?;
            if !alive {
                return Err(transition(format!(
                    "node {id:?} is {state_name}; its agent can ask for a tool only while it is {}",
                    crate::state::NodeState::alive_names()
                )));
            }
            if self.permissions.contains_key(&request) {
                return Err(transition(format!(
                    "permission request {request:?} already exists"
                )));
            }
            let node = self.nodes.get_mut(id).expect("checked above");
            node.activity = Some(Activity {
                state: ActivityState::NeedsPermission,
                since: ev.ts.clone(),
                detail: p.detail.clone().or_else(|| Some(p.tool.clone())),
            });
            self.permissions.insert(
                request.clone(),
                Permission {
                    request,
                    node: id.to_string(),
                    tool: p.tool,
                    input: p.input,
                    detail: p.detail,
                    asked_at: ev.ts.clone(),
                    decision: None,
                },
            );
            return Ok(());
        }
        if !matches!(ev.actor, Actor::Human | Actor::Daemon) {
            return Err(AppError::new(
                ErrorKind::Forbidden,
                "node.permission_decided is a person's decision (actor human) or the daemon's (actor daemon), never the asking agent's",
            ));
        }
        let p: NodePermissionDecided = ev.payload()?;
        if !matches!(p.behavior.as_str(), "allow" | "deny") {
            return Err(AppError::invalid(format!(
                "invalid data.behavior {:?}: use allow or deny",
                p.behavior
            )));
        }
        if p.by.trim().is_empty() {
            return Err(AppError::invalid(
                "invalid data.by: say who decided (human, timeout)",
            ));
        }
        let asked = self
            .permissions
            .get(&p.request)
            .filter(|r| r.node == id)
            .ok_or_else(|| {
                AppError::not_found(format!(
                    "node {id:?} has no permission request {:?}",
                    p.request
                ))
            })?;
        if let Some(won) = &asked.decision {
            return Err(transition(format!(
                "permission request {:?} is already decided: {} by {} at {}",
                p.request,
                decided_word(&won.behavior),
                won.by,
                won.decided_at
            )));
        }
        if !alive {
            return Err(transition(format!(
                "node {id:?} is {state_name}: its agent no longer waits for request {:?}",
                p.request
            )));
        }
        let rule = rule_for(&asked.tool, &asked.input);
        let detail = asked.detail.clone().unwrap_or_else(|| asked.tool.clone());
        if p.always && p.behavior == "allow" && !self.allowed.contains(&rule) {
            self.allowed.push(rule);
        }
        let decided = decided_word(&p.behavior);
        let r = self.permissions.get_mut(&p.request).expect("checked above");
        r.decision = Some(PermissionDecision {
            behavior: p.behavior,
            by: p.by,
            always: p.always,
            reason: p.reason,
            decided_at: ev.ts.clone(),
        });
        let node = self.nodes.get_mut(id).expect("checked above");
        node.activity = Some(Activity {
            state: ActivityState::Working,
            since: ev.ts.clone(),
            detail: Some(format!("{decided}: {detail}")),
        });
        Ok(())
    }
}

/// `allowed`, `denied`.
pub fn decided_word(behavior: &str) -> &'static str {
    if behavior == "allow" {
        "allowed"
    } else {
        "denied"
    }
}
