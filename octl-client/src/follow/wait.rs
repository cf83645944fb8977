//! Following a run until it settles ([`wait_run`]), and reporting how it ended
//! ([`report_wait`]: its summary, exit code, and why it stopped).

use std::io::Write;
use std::time::{Duration, Instant};

use octl_proto::projection::ListedStatus;
use octl_proto::reducer::usd;
use octl_proto::rpc::RunShown;
use octl_proto::state::Node;
use octl_proto::RunKind;
use octl_proto::{AppError, ErrorKind, NodeState};

use super::{one_line, show, show_again, Events, Progress, TICK};
use crate::commands::Ctx;
use crate::output::{duration, node_counts};

/// Is the run's status one that `run wait` stops at?
pub fn is_settled(status: ListedStatus) -> bool {
    status.is_ended() || status == ListedStatus::Waiting
}

/// The exit code of `run wait` for a settled run: 0 completed, or an orchestrate run whose
/// nodes are all merged into its integration branch and that waits only for `merge RUN`
/// (so `orchestrate --wait && orchestratectl merge RUN` merges); 4 otherwise.
pub fn wait_exit_code(d: &RunShown) -> i32 {
    if d.manifest.status == ListedStatus::Completed || awaits_only_its_merge(d) {
        0
    } else {
        4
    }
}

/// An orchestrate run waiting with every node merged into integration and cleaned up, no
/// question open, and its own merge not yet tried (or refused).
fn awaits_only_its_merge(d: &RunShown) -> bool {
    let m = &d.manifest;
    m.kind == Some(RunKind::Orchestrate)
        && m.status == ListedStatus::Waiting
        && m.merge.is_none()
        && !d.nodes.is_empty()
        && d.nodes
            .iter()
            .all(|n| n.state == NodeState::Merged && n.cleaned)
        && !d.discussions.iter().any(|x| x.open)
}

/// Follows `run` (an id or prefix, already validated) until it settles, then returns its last
/// `run.show`. Events after `since` (default: the run's last seq when we start) are fed to
/// `progress`. Stops after `timeout` with kind `timeout`.
pub async fn wait_run(
    ctx: &Ctx,
    run: &str,
    since: Option<u64>,
    timeout: Option<Duration>,
    progress: &mut Progress,
) -> Result<RunShown, AppError> {
    let started = Instant::now();
    let result = match timeout {
        Some(limit) => match tokio::time::timeout(limit, follow(ctx, run, since, progress)).await {
            Ok(r) => r,
            Err(_) => Err(timed_out(run, started.elapsed(), progress.last_status())),
        },
        None => follow(ctx, run, since, progress).await,
    };
    progress.finish();
    result
}

fn timed_out(run: &str, waited: Duration, last: Option<(String, String)>) -> AppError {
    let (id, state) = match last {
        Some((id, state)) => (id, format!(": it is still {state}")),
        None => (run.to_string(), String::new()),
    };
    AppError::new(
        ErrorKind::Timeout,
        format!(
            "gave up waiting for run {id} after {}{state}",
            duration_precise(waited)
        ),
    )
    .with_hint(format!(
        "the run goes on; wait again with `orchestratectl run wait {id}` or look at it with `orchestratectl run show {id}`"
    ))
}

fn duration_precise(d: Duration) -> String {
    if d.as_secs() >= 60 {
        duration(d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

async fn follow(
    ctx: &Ctx,
    run: &str,
    since: Option<u64>,
    progress: &mut Progress,
) -> Result<RunShown, AppError> {
    let mut detail = show(ctx, run).await?;
    progress.state(&detail);
    if is_settled(detail.manifest.status) {
        return Ok(detail);
    }
    let id = detail.manifest.id.clone();
    let cursor = since
        .unwrap_or(detail.manifest.last_seq)
        .min(detail.manifest.last_seq);
    let mut events = Events::new(&id, cursor);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            ev = events.next(ctx) => progress.event(&ev?),
            _ = tick.tick() => progress.tick(),
        }
        detail = show_again(ctx, &id).await?;
        progress.state(&detail);
        if is_settled(detail.manifest.status) {
            return Ok(detail);
        }
    }
}

/// Prints the outcome of a wait and returns its exit code: the summary on stdout (`json` as
/// given with `--json`, else one line), and for exit 4, in human mode, why on stderr.
pub fn report_wait(ctx: &Ctx, json: &impl serde::Serialize, detail: &RunShown) -> i32 {
    ctx.out.result(json, || wait_summary_text(detail));
    let code = wait_exit_code(detail);
    if code == 0 && awaits_only_its_merge(detail) && !ctx.out.json {
        let (why, hint) = why_text(detail);
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{why}");
        if let Some(hint) = hint {
            let _ = writeln!(err, "next: {hint}");
        }
    }
    if code != 0 && !ctx.out.json {
        let (why, hint) = why_text(detail);
        let mut text = format!("{why}\n");
        if let Some(hint) = hint {
            text.push_str(&format!("hint: {hint}\n"));
        }
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }
    code
}

/// `Run 01… completed: nodes 1 merged`
pub fn wait_summary_text(d: &RunShown) -> String {
    let m = &d.manifest;
    format!("Run {} {}: nodes {}", m.id, m.status, node_counts(&m.nodes))
}

/// Why a run that is not `completed` stopped, and what to do about it:
/// `run 01… is waiting: node api is conflict (greeting.txt)`.
pub fn why_text(d: &RunShown) -> (String, Option<String>) {
    let m = &d.manifest;
    let id = &m.id;
    let show = format!("orchestratectl run show {id}");
    match m.status {
        ListedStatus::Waiting => {
            let mut parts = Vec::new();
            let mut hint = None;
            // A spent budget: its pending nodes start once it is given more.
            if m.budget_spent {
                let pending = d
                    .nodes
                    .iter()
                    .filter(|n| matches!(n.state, NodeState::Pending | NodeState::Ready))
                    .count();
                let of = m
                    .settings
                    .max_budget_usd
                    .map(|b| format!(" of {}", usd(b)))
                    .unwrap_or_default();
                parts.push(format!(
                    "budget spent ({}{of}), so {pending} pending node(s) do not start",
                    usd(m.cost_usd.unwrap_or(0.0))
                ));
                hint = Some(format!(
                    "give it more with `{}` (or --set USD), and they start",
                    crate::commands::run::budget::way_out(id)
                ));
            }
            for n in &d.nodes {
                let detail = match n.state {
                    NodeState::Conflict => {
                        if hint.is_none() {
                            hint = Some(format!(
                                "resolve the conflict in {} (git merge {}, fix, commit), then run `orchestratectl merge {id} --node {}`",
                                n.worktree.as_deref().unwrap_or("the node's worktree"),
                                m.base.as_deref().unwrap_or("BASE"),
                                n.id
                            ));
                        }
                        if n.conflict_files.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", n.conflict_files.join(", "))
                        }
                    }
                    NodeState::MergeBlocked => {
                        if hint.is_none() {
                            hint = Some(format!(
                                "commit or stash the changes in the checkout of {}, then run `orchestratectl merge {id} --node {}`",
                                m.base.as_deref().unwrap_or("the base branch"),
                                n.id
                            ));
                        }
                        String::new()
                    }
                    NodeState::Done if m.kind == Some(RunKind::Code) => {
                        if hint.is_none() {
                            hint = Some(format!(
                                "review it, then run `orchestratectl merge {id} --node {}`",
                                n.id
                            ));
                        }
                        " (awaiting merge)".to_string()
                    }
                    NodeState::Waiting | NodeState::Blocked => n
                        .message
                        .as_deref()
                        .or(n.reason.as_deref())
                        .map(|t| format!(" ({})", one_line(t, 80)))
                        .unwrap_or_default(),
                    // In a DAG a failed node can be started again.
                    NodeState::Failed | NodeState::Exited
                        if m.kind == Some(RunKind::Orchestrate) =>
                    {
                        if hint.is_none() {
                            hint = Some(format!(
                                "see why in `{show}`, then start it again with `orchestratectl run retry {id} --node {}`",
                                n.id
                            ));
                        }
                        n.reason
                            .as_deref()
                            .or(n.message.as_deref())
                            .map(|t| format!(" ({})", one_line(t, 80)))
                            .unwrap_or_default()
                    }
                    _ => continue,
                };
                parts.push(format!("node {} is {}{detail}", n.id, n.state.as_str()));
            }
            for x in d.discussions.iter().filter(|x| x.open) {
                parts.push(format!(
                    "discussion {} is open ({})",
                    x.id,
                    one_line(&x.title, 80)
                ));
                if hint.is_none() {
                    hint = Some(format!(
                        "answer it with `orchestratectl discussion answer {} --text '…'`",
                        x.id
                    ));
                }
            }
            // An orchestrate run whose nodes all merged waits for its integration branch.
            let all_merged =
                !d.nodes.is_empty() && d.nodes.iter().all(|n| n.state == NodeState::Merged);
            if m.kind == Some(RunKind::Orchestrate) && all_merged {
                let integration = m
                    .settings
                    .integration
                    .clone()
                    .unwrap_or_else(|| format!("octl/{id}/integration"));
                let base = m.base.as_deref().unwrap_or("base");
                match m.merge.as_deref() {
                    Some(state @ ("conflict" | "merge_blocked")) => {
                        parts.push(format!("the merge of {integration} into {base} is {state}"))
                    }
                    _ => parts.push(format!(
                        "every node is merged into {integration}, which is not merged into {base} yet"
                    )),
                }
                if hint.is_none() {
                    hint = Some(format!(
                        "merge it into {base} with `orchestratectl merge {id}`"
                    ));
                }
            }
            if parts.is_empty() {
                parts.push("a human has to act".to_string());
            }
            (
                format!("run {id} is waiting: {}", parts.join("; ")),
                hint.or(Some(show)),
            )
        }
        ListedStatus::Failed => {
            let parts: Vec<String> = d
                .nodes
                .iter()
                .filter(|n| matches!(n.state, NodeState::Failed | NodeState::Exited))
                .map(|n| failed_node_text(n))
                .collect();
            let why = if !parts.is_empty() {
                parts.join("; ")
            } else if let Some(e) = &m.error {
                one_line(e, 120)
            } else {
                "see its events".to_string()
            };
            (
                format!("run {id} failed: {why}"),
                Some(format!(
                    "{show}; the branches and worktrees of failed nodes are kept"
                )),
            )
        }
        ListedStatus::Cancelled => (format!("run {id} was cancelled"), Some(show)),
        other => (format!("run {id} is {other}"), Some(show)),
    }
}

fn failed_node_text(n: &Node) -> String {
    let mut text = format!("node {} {}", n.id, n.state.as_str());
    if let Some(status) = n.exit_status {
        text.push_str(&format!(" with status {status}"));
    }
    if let Some(reason) = n.reason.as_deref().or(n.message.as_deref()) {
        text.push_str(&format!(" ({})", one_line(reason, 80)));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::follow::tests::*;
    use serde_json::json;

    #[test]
    fn wait_exit_codes() {
        let d = |status: &str| detail("spinoff", status, json!([]), json!([]));
        assert_eq!(wait_exit_code(&d("completed")), 0);
        for s in ["failed", "cancelled", "waiting", "corrupt"] {
            assert_eq!(wait_exit_code(&d(s)), 4, "{s}");
            assert!(is_settled(ListedStatus::parse(s).unwrap()), "{s}");
        }
        // An orchestrate run whose nodes are all in integration waits only for `merge RUN`.
        let merged = json!([node("a", "merged", json!({"cleaned": true}))]);
        let ready = detail("orchestrate", "waiting", merged.clone(), json!([]));
        assert_eq!(wait_exit_code(&ready), 0);
        let mut tried = ready.clone();
        tried.manifest.merge = Some("conflict".into());
        assert_eq!(wait_exit_code(&tried), 4, "its merge conflicted");
        let failed = json!([
            node("a", "merged", json!({"cleaned": true})),
            node("b", "failed", json!({}))
        ]);
        assert_eq!(
            wait_exit_code(&detail("orchestrate", "waiting", failed, json!([]))),
            4
        );
        assert!(is_settled(ListedStatus::Completed));
        assert!(!is_settled(ListedStatus::Active));
    }

    #[test]
    fn why_a_run_waits() {
        let d = detail(
            "spinoff",
            "waiting",
            json!([node(
                "api",
                "conflict",
                json!({"conflict_files": ["a.txt", "b.txt"]})
            )]),
            json!([]),
        );
        let (why, hint) = why_text(&d);
        assert_eq!(
            why,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E is waiting: node api is conflict (a.txt, b.txt)"
        );
        let hint = hint.unwrap();
        assert!(hint.contains("/w/api"), "{hint}");
        assert!(
            hint.contains("orchestratectl merge 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node api"),
            "{hint}"
        );

        let d = detail(
            "code",
            "waiting",
            json!([node("ui", "done", json!({}))]),
            json!([]),
        );
        let (why, hint) = why_text(&d);
        assert!(why.ends_with("node ui is done (awaiting merge)"), "{why}");
        assert!(hint.unwrap().contains("orchestratectl merge"));

        // A spent budget names the way out, not only "a human has to act".
        let mut d = detail(
            "fanout",
            "waiting",
            json!([
                node("u1", "merged", json!({})),
                node("u2", "pending", json!({}))
            ]),
            json!([]),
        );
        d.manifest.budget_spent = true;
        d.manifest.cost_usd = Some(0.75);
        d.manifest.settings.max_budget_usd = Some(0.5);
        let (why, hint) = why_text(&d);
        assert_eq!(
            why,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E is waiting: budget spent ($0.75 of $0.5), so 1 pending node(s) do not start"
        );
        assert_eq!(
            hint.unwrap(),
            "give it more with `orchestratectl run budget 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --add USD` (or --set USD), and they start"
        );
    }

    #[test]
    fn why_an_orchestrate_run_waits() {
        let mut d = detail(
            "orchestrate",
            "waiting",
            json!([
                node("a", "merged", json!({})),
                node("b", "merged", json!({}))
            ]),
            json!([]),
        );
        let (why, hint) = why_text(&d);
        assert_eq!(
            why,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E is waiting: every node is merged into octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration, which is not merged into main yet"
        );
        assert_eq!(
            hint.unwrap(),
            "merge it into main with `orchestratectl merge 01JDXJ5R8Q4M0ZK7P2W9TB3C6E`"
        );
        d.manifest.merge = Some("conflict".into());
        assert!(why_text(&d).0.ends_with(
            "the merge of octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration into main is conflict"
        ));

        let d = detail(
            "orchestrate",
            "waiting",
            json!([
                node("a", "failed", json!({"reason": "tests fail"})),
                node("b", "blocked", json!({"reason": "a failed"}))
            ]),
            json!([{"id": "q1", "node": null, "title": "which db?", "body": null, "open": true,
                    "answer": null, "opened_at": "t", "resolved_at": null}]),
        );
        let (why, hint) = why_text(&d);
        assert!(
            why.ends_with(": node a is failed (tests fail); node b is blocked (a failed); discussion q1 is open (which db?)"),
            "{why}"
        );
        assert!(hint
            .unwrap()
            .ends_with("`orchestratectl run retry 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node a`"));
    }

    #[test]
    fn why_a_run_failed_or_was_cancelled() {
        let d = detail(
            "spinoff",
            "failed",
            json!([node("api", "exited", json!({"exit_status": 3}))]),
            json!([]),
        );
        assert_eq!(
            why_text(&d).0,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E failed: node api exited with status 3"
        );
        let d = detail("spinoff", "cancelled", json!([]), json!([]));
        assert_eq!(
            why_text(&d).0,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E was cancelled"
        );
    }

    #[test]
    fn timeouts_name_the_run_and_how_to_go_on() {
        let e = timed_out(
            "01JDXJ",
            Duration::from_millis(1500),
            Some((
                "01JDXJ5R8Q4M0ZK7P2W9TB3C6E".into(),
                "active (nodes 1 running)".into(),
            )),
        );
        assert_eq!(e.kind, ErrorKind::Timeout);
        assert_eq!(e.kind.exit_code(), 1);
        assert_eq!(
            e.message,
            "gave up waiting for run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E after 1.5 s: it is still active (nodes 1 running)"
        );
    }
}
