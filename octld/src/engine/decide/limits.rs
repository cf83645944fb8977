//! Usage limits and budgets, decided from what the agents said and what the runs record:
//! whether an agent's end was a usage limit (pause, not fail), when a paused node starts
//! again, whether a node of a paused profile may start, and whether a run's budget is spent.

use std::collections::BTreeMap;

use serde_json::Value;

use octl_proto::projection::RunDetail;
use octl_proto::state::Node;
use octl_proto::NodeState;

/// How long a node waits when its agent hit a limit that named no reset time (Claude Code
/// with an API key retries 429s itself and gives up with no reset in its result).
pub const DEFAULT_PAUSE_MS: u64 = 5 * 60 * 1000;

/// An agent's session ended at a usage or rate limit.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// When the limit resets (ms since the epoch).
    pub until_ms: u64,
    /// What the agent said (its result text, or the limit's type).
    pub reason: String,
}

/// Whether a Claude Code session (its stream-json lines, oldest first) ended at a usage
/// limit, and until when. Claude Code 2.1 with a subscription emits a `rate_limit_event`
/// whose `rate_limit_info.status` is `rejected` (with `resetsAt`, seconds) and ends with an
/// error result whose `api_error` is `usage_limit_reached`; with an API key a 429 is retried
/// by the CLI and a result with `api_error_status` 429 is all that is left. A session whose
/// result is not an error was not stopped by a limit, whatever it met on the way.
pub fn rate_limit(lines: &[Value], now_ms: u64) -> Option<RateLimit> {
    let result = lines
        .iter()
        .rev()
        .find(|v| v.get("type").and_then(Value::as_str) == Some("result"));
    let rejected = lines.iter().rev().find_map(|v| {
        let info = match v.get("type").and_then(Value::as_str) {
            Some("rate_limit_event") => v.get("rate_limit_info"),
            _ => v.pointer("/api_error_params/rate_limit_info"),
        }?;
        (info.get("status").and_then(Value::as_str) == Some("rejected")).then_some(info)
    });
    let limited_result = result.is_some_and(|r| {
        r.get("is_error").and_then(Value::as_bool) == Some(true)
            && (r.get("api_error").and_then(Value::as_str) == Some("usage_limit_reached")
                || r.get("api_error_status").and_then(Value::as_u64) == Some(429))
    });
    let ended_ok = result.is_some_and(|r| r.get("is_error").and_then(Value::as_bool) != Some(true));
    if ended_ok || !(limited_result || rejected.is_some()) {
        return None;
    }
    let until_ms = rejected
        .and_then(|i| i.get("resetsAt"))
        .and_then(Value::as_f64)
        .map(|s| (s * 1000.0) as u64)
        .filter(|&t| t > 0)
        .unwrap_or(now_ms + DEFAULT_PAUSE_MS);
    let reason = result
        .and_then(|r| r.get("result"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            rejected
                .and_then(|i| i.get("rateLimitType"))
                .and_then(Value::as_str)
                .map(|t| format!("usage limit reached ({t})"))
        })
        .unwrap_or_else(|| "usage limit reached".to_string());
    Some(RateLimit { until_ms, reason })
}

fn until_ms(node: &Node) -> Option<u64> {
    node.paused_until
        .as_deref()
        .and_then(octl_proto::time::parse_millis)
}

/// A paused node whose limit has reset starts again. One whose reset time cannot be read
/// starts again at once rather than waiting for ever.
pub fn resume_due(node: &Node, now_ms: u64) -> bool {
    node.state == NodeState::Paused && until_ms(node).is_none_or(|t| t <= now_ms)
}

/// Every agent profile with a node paused by a limit that has not reset yet, with the
/// latest reset: a limit is the account's, so it holds for every run using that profile.
pub fn profile_pauses<'a>(
    views: impl IntoIterator<Item = &'a RunDetail>,
    now_ms: u64,
) -> BTreeMap<String, u64> {
    let mut pauses = BTreeMap::new();
    for view in views {
        for node in view.nodes.iter().filter(|n| n.state == NodeState::Paused) {
            let (Some(profile), Some(until)) = (node.agent.as_ref(), until_ms(node)) else {
                continue;
            };
            if until > now_ms {
                let e = pauses.entry(profile.clone()).or_insert(until);
                *e = (*e).max(until);
            }
        }
    }
    pauses
}

/// May a new node of this profile start now? `false` while the profile is paused.
pub fn may_start(node: &Node, pauses: &BTreeMap<String, u64>) -> bool {
    node.agent.as_ref().is_none_or(|p| !pauses.contains_key(p))
}

/// The run's budget and what it has spent, once the spending reached the budget.
pub fn budget_spent(view: &RunDetail) -> Option<(f64, f64)> {
    let budget = view.manifest.settings.max_budget_usd?;
    let spent = view.manifest.cost_usd.unwrap_or(0.0);
    (spent >= budget).then_some((spent, budget))
}

/// What a node may still spend: the run's budget left, capped by the profile's own
/// per-node budget; `None` when neither is set.
pub fn node_budget(view: &RunDetail, per_node: Option<f64>) -> Option<f64> {
    let left = view
        .manifest
        .settings
        .max_budget_usd
        .map(|b| (b - view.manifest.cost_usd.unwrap_or(0.0)).max(0.0));
    match (left, per_node) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(text: &str) -> Vec<Value> {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// What Claude Code 2.1.328 printed with a subscription token against a stand-in
    /// answering 429 with `anthropic-ratelimit-unified-status: rejected` (shortened).
    const SUBSCRIPTION: &str = r#"{"type":"system","subtype":"init","session_id":"s1"}
{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1796129445,"rateLimitType":"five_hour","isUsingOverage":false},"session_id":"s1"}
{"type":"assistant","message":{"content":[{"type":"text","text":"You've hit your 5-hour limit"}]},"error":"rate_limit","api_error":"usage_limit_reached","api_error_params":{"rate_limit_info":{"status":"rejected","resetsAt":1796129445}}}
{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"api_error":"usage_limit_reached","result":"You've hit your 5-hour limit · resets 12:50pm (UTC)","total_cost_usd":0,"session_id":"s1"}"#;

    #[test]
    fn a_rejected_limit_pauses_until_its_reset() {
        let l = rate_limit(&lines(SUBSCRIPTION), 5).unwrap();
        assert_eq!(l.until_ms, 1_796_129_445_000);
        assert!(l.reason.contains("5-hour limit"), "{}", l.reason);
    }

    #[test]
    fn a_429_without_a_reset_waits_the_default() {
        let text =
            r#"{"type":"result","is_error":true,"api_error_status":429,"result":"API Error: 429"}"#;
        let l = rate_limit(&lines(text), 1000).unwrap();
        assert_eq!(l.until_ms, 1000 + DEFAULT_PAUSE_MS);
    }

    #[test]
    fn other_ends_are_no_limit() {
        // A limit met on the way but a session that ended well.
        let ok = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":5}}
{"type":"result","is_error":false,"result":"done"}"#;
        assert_eq!(rate_limit(&lines(ok), 0), None);
        let allowed =
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":5}}"#;
        assert_eq!(rate_limit(&lines(allowed), 0), None);
        let failed = r#"{"type":"result","is_error":true,"api_error_status":500,"result":"boom"}"#;
        assert_eq!(rate_limit(&lines(failed), 0), None);
        assert_eq!(rate_limit(&[], 0), None);
    }

    #[test]
    fn a_limit_without_a_result_still_pauses() {
        // The agent was killed after the rejection was printed.
        let text =
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":7}}"#;
        assert_eq!(rate_limit(&lines(text), 0).unwrap().until_ms, 7000);
    }

    fn node(id: &str, agent: &str, state: NodeState, until: Option<&str>) -> Node {
        let mut n: Node = serde_json::from_value(json!({
            "id": id, "state": state, "branch": null, "worktree": null, "agent": agent,
            "deps": [], "created_at": "t", "updated_at": "t"
        }))
        .unwrap();
        n.paused_until = until.map(str::to_string);
        n
    }

    fn view(nodes: Vec<Node>, settings: Value, cost: Option<f64>) -> RunDetail {
        let mut manifest: octl_proto::projection::RunSummary = serde_json::from_value(json!({
            "id": "R", "kind": "fanout", "status": "active", "title": null, "repo": null,
            "base": null, "created_at": "t", "updated_at": "t", "nodes": {}, "last_seq": 1,
            "settings": settings
        }))
        .unwrap();
        manifest.cost_usd = cost;
        RunDetail {
            manifest,
            nodes,
            discussions: vec![],
            spinoffs: vec![],
            permissions: vec![],
            allowed: vec![],
            judged: None,
            judge_failed: None,
        }
    }

    const T0: &str = "2026-12-01T10:00:00.000Z";

    #[test]
    fn resume_after_the_reset_only() {
        let t0 = octl_proto::time::parse_millis(T0).unwrap();
        let paused = node("a", "claude", NodeState::Paused, Some(T0));
        assert!(!resume_due(&paused, t0 - 1));
        assert!(resume_due(&paused, t0));
        assert!(!resume_due(
            &node("a", "claude", NodeState::Running, Some(T0)),
            t0 + 1
        ));
        // An unreadable reset does not hold the node for ever.
        assert!(resume_due(
            &node("a", "claude", NodeState::Paused, Some("soon")),
            0
        ));
    }

    #[test]
    fn a_paused_profile_starts_no_node_in_any_run_until_its_reset() {
        let t0 = octl_proto::time::parse_millis(T0).unwrap();
        let one = view(
            vec![node("a", "claude", NodeState::Paused, Some(T0))],
            json!({}),
            None,
        );
        let two = view(
            vec![node("b", "claude", NodeState::Pending, None)],
            json!({}),
            None,
        );
        let pauses = profile_pauses([&one, &two], t0 - 1);
        assert_eq!(pauses.get("claude"), Some(&t0));
        assert!(!may_start(&two.nodes[0], &pauses));
        assert!(may_start(
            &node("c", "shell", NodeState::Pending, None),
            &pauses
        ));
        assert!(profile_pauses([&one, &two], t0).is_empty());
    }

    #[test]
    fn budgets() {
        let none = view(vec![], json!({}), Some(3.0));
        assert_eq!(budget_spent(&none), None);
        assert_eq!(node_budget(&none, None), None);
        assert_eq!(node_budget(&none, Some(0.5)), Some(0.5));
        let under = view(vec![], json!({"max_budget_usd": 1.0}), Some(0.25));
        assert_eq!(budget_spent(&under), None);
        assert_eq!(node_budget(&under, None), Some(0.75));
        assert_eq!(node_budget(&under, Some(0.5)), Some(0.5));
        let spent = view(vec![], json!({"max_budget_usd": 1.0}), Some(1.0));
        assert_eq!(budget_spent(&spent), Some((1.0, 1.0)));
        assert_eq!(node_budget(&spent, None), Some(0.0));
        assert_eq!(
            budget_spent(&view(vec![], json!({"max_budget_usd": 0.5}), None)),
            None
        );
    }
}
