//! `run show RUN`: a run's summary, nodes (with the read-time `elapsed_s` and `waiting_for` of
//! `run.show`), discussions, spin-offs, failures, and what a corrupt log still says. The node
//! cells are shared with `run list` and `run watch` ([`crate::follow`]).

use crate::commands::result_of;
use octl_proto::method;
use std::path::Path;

use octl_proto::rpc::{CorruptLog, NodeShown, RunShown};
use octl_proto::state::Node;
use octl_proto::{AppError, NodeState};

use super::{run_param, RunArg};
use crate::commands::Ctx;
use crate::output::{cell, clock, fields, node_counts, short_time, table};

pub(super) async fn show(ctx: &Ctx, arg: RunArg) -> Result<(), AppError> {
    let params = run_param(&arg.run)?;
    let value = ctx.client.call_value::<method::RunShow>(&params).await?;
    let detail = result_of::<method::RunShow>(&value)?;
    let logs = ctx
        .client
        .home()
        .runs()
        .join(&detail.manifest.id)
        .join("logs");
    ctx.out.result(&value, || {
        let mut text = detail_text(&detail);
        let repo = detail.manifest.repo.as_deref();
        text.push_str(&reviews_text(&detail, |n, i| review_since(repo, n, i)));
        text.push_str(&failures_text(&detail, &logs));
        text.push_str(&denied_text(&detail));
        text.push_str(&requeued_text(&detail));
        text.push_str(&attempts_text(&detail));
        text.push_str(&lost_text(&detail));
        if let Some(c) = &detail.corrupt {
            text.push_str(&corrupt_text(&detail.manifest.id, c));
        }
        text
    });
    Ok(())
}

/// Each review round: what it asked, how it reached the agent, the tip it was made on, and
/// `since(node, round)`: what changed from that tip to the next round's (or to the work now).
pub fn reviews_text(d: &RunShown, since: impl Fn(&Node, usize) -> Option<String>) -> String {
    let reviews: Vec<Vec<String>> = d
        .nodes
        .iter()
        .flat_map(|n| {
            let since = &since;
            n.reviews.iter().enumerate().map(move |(i, r)| {
                let what = match r.way {
                    None => "approved".to_string(),
                    Some(way) => format!("changes ({})", way.as_str()),
                };
                let said = match (r.comments.as_slice(), &r.text) {
                    ([], Some(_)) => "(a text: see the run's reviews/)".to_string(),
                    ([], None) => "-".to_string(),
                    ([one], _) => one.lines().next().unwrap_or_default().to_string(),
                    (many, _) => format!(
                        "{} (+{} more)",
                        many[0].lines().next().unwrap_or_default(),
                        many.len() - 1
                    ),
                };
                vec![
                    n.id.clone(),
                    format!("review {}", r.round),
                    short_time(&r.at),
                    what,
                    r.head
                        .as_deref()
                        .map_or("-".to_string(), |h| h.chars().take(12).collect()),
                    since(&n.node, i).unwrap_or_else(|| "-".to_string()),
                    said,
                ]
            })
        })
        .collect();
    if reviews.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nReviews (SINCE: what changed from a round's HEAD to the next round's, or to the work now; `git diff HEAD BRANCH` shows it):\n",
    );
    out.push_str(&table(
        &["NODE", "ROUND", "AT", "WHAT", "HEAD", "SINCE", "SAID"],
        &reviews,
    ));
    out
}

/// What changed since review round `i` of node `n`, as `git diff --shortstat` counts it: to
/// the next round's tip, else to the node's worktree as it is (its work not yet committed
/// included), else to its branch in `repo`. `None` where git cannot tell (a tip or branch gone).
pub fn review_since(repo: Option<&str>, n: &Node, i: usize) -> Option<String> {
    let from = n.reviews.get(i)?.head.as_deref()?;
    let worktree = n
        .worktree
        .as_deref()
        .filter(|w| !n.cleaned && Path::new(w).is_dir());
    let (dir, to) = match (
        n.reviews.get(i + 1).and_then(|r| r.head.as_deref()),
        worktree,
    ) {
        (Some(next), _) => (repo.or(worktree)?, Some(next)),
        (None, Some(w)) => (w, None),
        (None, None) => (repo?, Some(n.branch.as_deref()?)),
    };
    let mut git = std::process::Command::new("git");
    git.arg("-C")
        .arg(dir)
        .args(["diff", "--shortstat", "--no-ext-diff", from]);
    git.args(to);
    let out = git.stderr(std::process::Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| shortstat_cell(&String::from_utf8_lossy(&out.stdout)))
}

/// ` 2 files changed, 5 insertions(+), 1 deletion(-)` → `2 files +5 -1`.
fn shortstat_cell(text: &str) -> String {
    let count = |what: &str| {
        text.split(',')
            .find(|part| part.contains(what))
            .and_then(|part| part.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    match count("changed") {
        0 => "no change".to_string(),
        1 => format!("1 file +{} -{}", count("insertion"), count("deletion")),
        files => format!(
            "{files} files +{} -{}",
            count("insertion"),
            count("deletion")
        ),
    }
}

/// A node's state; a paused one says until when (its usage limit's reset).
pub fn state_cell(n: &Node) -> String {
    match (&n.state, &n.paused_until) {
        (NodeState::Paused, Some(until)) => format!("paused until {}", short_time(until)),
        (state, _) => state.as_str().to_string(),
    }
}

/// Under `run show`'s tables: the tools each agent asked for and was denied (to grant one,
/// add it to `allowed_tools`).
pub fn denied_text(d: &RunShown) -> String {
    let mut out = String::new();
    for n in &d.nodes {
        let denied: Vec<&str> = n
            .outcome
            .iter()
            .flat_map(|o| &o.denied)
            .map(String::as_str)
            .collect();
        if !denied.is_empty() {
            out.push_str(&format!("  {} was denied: {}\n", n.id, denied.join(", ")));
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("\nDenied tools (grant one with [agents.<profile>] allowed_tools in config.toml):\n{out}")
    }
}

/// A judge's text on one line, without what would drive a terminal (it is not ours).
fn plain(s: &str) -> String {
    octl_proto::text::text_lines(s.as_bytes()).join(" ")
}

/// Under `run show`'s tables, for a best-of-N run: each attempt side by side — its agent,
/// state, gate, cost and the judge's place and reason — then who judged, or why nobody did.
pub fn attempts_text(d: &RunShown) -> String {
    let Some(best) = &d.manifest.settings.best_of else {
        return String::new();
    };
    let judged = d.judged.as_ref();
    let rows: Vec<Vec<String>> = d
        .nodes
        .iter()
        .map(|n| {
            let place = judged.and_then(|j| j.ranking.iter().position(|r| *r == n.id));
            let gate = match (n.gated, n.state) {
                (true, _) | (_, NodeState::Merged) => "passed",
                (false, NodeState::Failed)
                    if n.gate.is_some() || d.manifest.settings.gate.is_some() =>
                {
                    "failed or not run"
                }
                _ => "-",
            };
            vec![
                n.id.clone(),
                cell(n.agent.as_deref()),
                n.state.as_str().to_string(),
                gate.to_string(),
                n.cost_usd.map_or("-".into(), |c| format!("${c:.2}")),
                place.map_or("-".into(), |p| format!("#{}", p + 1)),
                place
                    .and_then(|p| judged.and_then(|j| j.reasons.get(p)))
                    .map_or(String::new(), |r| plain(r)),
            ]
        })
        .collect();
    let mut out = format!(
        "\nAttempts ({} of {}, judge {}{}):\n",
        d.nodes.len(),
        best.attempts,
        best.judge.as_str(),
        if best.first_passing {
            ", first passing wins"
        } else {
            ""
        }
    );
    out.push_str(&table(
        &[
            "ATTEMPT", "AGENT", "STATE", "GATE", "COST", "RANK", "REASON",
        ],
        &rows,
    ));
    match (judged, &d.judge_failed) {
        (Some(j), _) => out.push_str(&format!(
            "  judged by {} at {}: {} won; the others are kept (`orchestratectl recover {} --node NODE`)\n",
            plain(&j.by),
            short_time(&j.at),
            j.ranking.first().map_or("-", String::as_str),
            d.manifest.id
        )),
        (None, Some(why)) => out.push_str(&format!(
            "  the judge command gave no ranking ({}): pick one with `orchestratectl pick {} --attempt K`\n",
            plain(why),
            d.manifest.id
        )),
        (None, None) => {}
    }
    out
}

/// Under `run show`'s tables: the nodes whose runner started their attempt again by itself
/// (Slurm requeued the job when its compute node was lost), where and why.
pub fn requeued_text(d: &RunShown) -> String {
    let mut out = String::new();
    for n in &d.nodes {
        if let Some(r) = &n.requeued {
            out.push_str(&format!(
                "  {} requeued at {}: copy {} runs{}; {}\n",
                n.id,
                short_time(&r.at),
                r.copy,
                r.from
                    .as_deref()
                    .map(|h| format!(" (the copy on {h} was lost)"))
                    .unwrap_or_default(),
                r.reason.as_deref().unwrap_or("no reason given")
            ));
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("\nRequeued (resumed from the last checkpoint):\n{out}")
    }
}

/// Under `run show`'s tables: the nodes whose agent's place does not answer (an SSH host,
/// the Slurm controller), since when and why; each is found again when it answers, or
/// started again elsewhere after its runner's `lost_after`.
pub fn lost_text(d: &RunShown) -> String {
    let mut out = String::new();
    for n in &d.nodes {
        if let (NodeState::Lost, Some(l)) = (n.state, &n.lost) {
            let age = activity_age(&l.since)
                .map(|a| format!(" ({})", clock(a)))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {} lost since {}{age}: {}\n",
                n.id,
                short_time(&l.since),
                l.reason
            ));
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("\nLost (not known to be gone; re-adopted when the place answers, started again elsewhere after lost_after):\n{out}")
    }
}

/// Under `run show`'s tables: why each failed or exited node ended, and where its log is.
pub fn failures_text(d: &RunShown, logs: &Path) -> String {
    let ended: Vec<&NodeShown> = d
        .nodes
        .iter()
        .filter(|n| matches!(n.state, NodeState::Failed | NodeState::Exited))
        .collect();
    if ended.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nFailures:\n");
    for n in ended {
        let mut why = Vec::new();
        if let Some(reason) = &n.reason {
            why.push(reason.clone());
        }
        if let Some(status) = n.exit_status {
            why.push(format!("its agent exited with status {status}"));
        }
        if let Some(message) = n.message.as_deref().filter(|m| !m.is_empty()) {
            why.push(format!("message: {message}"));
        }
        if why.is_empty() {
            why.push("no reason given".to_string());
        }
        out.push_str(&format!(
            "  {} {}: {}\n",
            n.id,
            n.state.as_str(),
            why.join("; ")
        ));
        let pane = logs.join(format!("{}.pane.log", n.id));
        let log = if pane.exists() {
            pane
        } else {
            logs.join(format!("{}.log", n.id))
        };
        out.push_str(&format!(
            "    log: {} (orchestratectl run logs {} --node {})\n",
            log.display(),
            d.manifest.id,
            n.id
        ));
    }
    out
}

/// What `run show` adds for a corrupt run: where its log breaks and the events before it.
pub fn corrupt_text(run: &str, c: &CorruptLog) -> String {
    let mut out = String::from("\nCorrupt log:\n");
    if let Some(e) = &c.error {
        out.push_str(&format!("  {e}\n"));
        return out;
    }
    let log = c.log.as_deref().unwrap_or("?");
    let (line, readable) = (c.line, c.readable_events);
    let reason = c.reason.as_deref().unwrap_or("?");
    let shown = c.events.len();
    if line > 0 {
        out.push_str(&format!("  bad line: {line} of {log}: {reason}\n"));
    } else {
        out.push_str(&format!("  {log}: {reason}\n"));
    }
    out.push_str(&format!(
        "  readable: the {readable} events before it{}\n",
        if (shown as u64) < readable {
            format!(" (the last {shown} below)")
        } else {
            String::new()
        }
    ));
    for ev in &c.events {
        let ev = serde_json::to_value(ev).unwrap_or_default();
        out.push_str(&format!("  {}\n", crate::output::event_line(&ev)));
    }
    out.push_str(&format!(
        "  set it aside (nothing is deleted): orchestratectl run quarantine {run}\n"
    ));
    out
}

/// RUNNER: where the node's agent runs (`local` when its `node.added` names none).
pub fn runner_cell(n: &Node) -> String {
    n.runner.clone().unwrap_or_else(|| "local".to_string())
}

/// ELAPSED: `1m05s`, or `-` for a node that never started.
pub fn elapsed_cell(n: &NodeShown) -> String {
    match n.elapsed_s {
        Some(s) => clock(s),
        None => "-".to_string(),
    }
}

/// WAITING FOR: `schema, auth`, or `-`.
/// A branch or worktree that is no longer there: `(removed) NAME`, so nobody goes looking.
pub fn removed_cell(value: Option<&str>, removed: bool) -> String {
    match value {
        Some(v) if removed && !v.is_empty() => format!("(removed) {v}"),
        _ => cell(value),
    }
}

pub fn waiting_cell(n: &NodeShown) -> String {
    if n.waiting_for.is_empty() {
        "-".to_string()
    } else {
        n.waiting_for.join(", ")
    }
}

/// ACTIVITY: what a live node's agent last said and for how long (`working 12s`,
/// `unknown 3m05s` when it never said: its STATE is all that is known); `-` once the node's
/// agent is gone.
pub fn activity_cell(n: &Node) -> String {
    if !n.state.is_alive() {
        return "-".to_string();
    }
    let a = n.activity_or_unknown();
    match activity_age(&a.since) {
        Some(age) => format!("{} {}", a.state.as_str(), clock(age)),
        None => a.state.as_str().to_string(),
    }
}

/// Seconds since `since` (RFC 3339), by this machine's clock.
fn activity_age(since: &str) -> Option<u64> {
    let at = octl_proto::time::parse_millis(since)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis() as u64;
    Some(now.saturating_sub(at) / 1000)
}

/// The human form of `run show`: the summary, then the nodes, discussions and spin-offs.
pub fn detail_text(d: &RunShown) -> String {
    let m = &d.manifest;
    let mut pairs = vec![
        ("Run", m.id.clone()),
        ("Kind", m.kind_name().to_string()),
        ("Status", m.status.to_string()),
        ("Title", cell(m.title.as_deref())),
    ];
    if let Some(repo) = &m.repo {
        pairs.push(("Repo", repo.clone()));
    }
    if let Some(base) = &m.base {
        pairs.push(("Base", base.clone()));
    }
    let settings = &m.settings;
    if let Some(cap) = settings.max_parallel {
        pairs.push(("Parallel", format!("at most {cap} at once")));
    }
    if let Some(integration) = &settings.integration {
        pairs.push(("Integration", integration.clone()));
    }
    if let Some(merge) = &m.merge {
        let at = m
            .merge_commit
            .as_deref()
            .map(|c| format!(" at {c}"))
            .unwrap_or_default();
        pairs.push(("Merge", format!("{merge}{at}")));
    }
    if let Some(parent) = &settings.parent_run {
        let from = settings
            .proposal
            .as_ref()
            .map(|p| format!(" (spin-off proposal {p})"))
            .unwrap_or_default();
        pairs.push(("Parent", format!("{parent}{from}")));
    }
    pairs.push(("Created", short_time(&m.created_at)));
    pairs.push(("Updated", short_time(&m.updated_at)));
    pairs.push(("Events", m.last_seq.to_string()));
    pairs.push(("Nodes", node_counts(&m.nodes)));
    let budget = m.settings.max_budget_usd;
    if m.cost_usd.is_some() || budget.is_some() {
        let mut cost = super::list::cost_cell(m.cost_usd);
        if let Some(b) = budget {
            cost.push_str(&format!(" of a ${b:.2} budget"));
        }
        if m.budget_spent {
            cost.push_str(&format!(
                ": budget spent, no new node starts (give it more: {})",
                super::budget::way_out(&m.id)
            ));
        }
        pairs.push(("Cost", cost));
    }
    if let Some(error) = &m.error {
        pairs.push(("Error", error.clone()));
    }
    let mut out = fields(&pairs);

    out.push('\n');
    if d.nodes.is_empty() {
        out.push_str("No nodes.\n");
    } else {
        let rows: Vec<Vec<String>> = d
            .nodes
            .iter()
            .map(|n| {
                vec![
                    n.id.clone(),
                    state_cell(n),
                    activity_cell(n),
                    elapsed_cell(n),
                    waiting_cell(n),
                    removed_cell(n.branch.as_deref(), n.branch_removed),
                    removed_cell(n.worktree.as_deref(), n.worktree_removed),
                    cell(n.agent.as_deref()),
                    runner_cell(n),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "ID",
                "STATE",
                "ACTIVITY",
                "ELAPSED",
                "WAITING FOR",
                "BRANCH",
                "WORKTREE",
                "AGENT",
                "RUNNER",
            ],
            &rows,
        ));
    }

    // What the live agents said they are doing or waiting for (the tool, the prompt).
    let said: Vec<Vec<String>> = d
        .nodes
        .iter()
        .filter(|n| n.state.is_alive())
        .filter_map(|n| {
            let a = n.activity.as_ref()?;
            Some(vec![
                n.id.clone(),
                a.state.as_str().to_string(),
                a.detail.clone()?,
            ])
        })
        .collect();
    if !said.is_empty() {
        out.push_str("\nActivity (from the agents' hooks):\n");
        out.push_str(&table(&["NODE", "ACTIVITY", "DETAIL"], &said));
    }

    // Where removed worktrees' content went (`orchestratectl recover` makes a branch of one).
    let snapshots: Vec<Vec<String>> = d
        .nodes
        .iter()
        .flat_map(|n| {
            let last = n
                .snapshot_ref
                .iter()
                .filter(|r| !n.snapshot_refs.contains(r));
            let refs = n.snapshot_refs.iter().chain(last);
            refs.map(|r| vec![n.id.clone(), r.clone()])
        })
        .collect();
    if !snapshots.is_empty() {
        out.push_str("\nSnapshots (`orchestratectl recover RUN --node NODE` restores one):\n");
        out.push_str(&table(&["NODE", "REF"], &snapshots));
    }
    // What git ignored in them (`recover … --worktree PATH` moves the latest back).
    let kept: Vec<Vec<String>> = d
        .nodes
        .iter()
        .flat_map(|n| {
            n.kept.iter().map(|k| {
                let status = match &k.restored_to {
                    Some(to) => format!("restored to {to}"),
                    None => k.status.as_str().to_string(),
                };
                vec![n.id.clone(), k.files.to_string(), status, k.dir.clone()]
            })
        })
        .collect();
    if !kept.is_empty() {
        out.push_str(
            "\nKept ignored files (`orchestratectl recover RUN --node NODE --worktree PATH`):\n",
        );
        out.push_str(&table(&["NODE", "FILES", "STATUS", "DIR"], &kept));
    }

    if !d.discussions.is_empty() {
        let rows: Vec<Vec<String>> = d
            .discussions
            .iter()
            .map(|x| {
                vec![
                    x.id.clone(),
                    cell(x.node.as_deref()),
                    if x.open { "open" } else { "answered" }.to_string(),
                    x.title.clone(),
                ]
            })
            .collect();
        out.push_str("\nDiscussions:\n");
        out.push_str(&table(&["ID", "NODE", "STATUS", "TITLE"], &rows));
    }

    if !d.spinoffs.is_empty() {
        let rows: Vec<Vec<String>> = d
            .spinoffs
            .iter()
            .map(|s| {
                vec![
                    s.id.clone(),
                    cell(s.node.as_deref()),
                    s.status.as_str().to_string(),
                    cell(s.child_run.as_deref()),
                    s.task.clone(),
                ]
            })
            .collect();
        out.push_str("\nSpin-offs:\n");
        out.push_str(&table(
            &["ID", "NODE", "STATUS", "CHILD RUN", "TASK"],
            &rows,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::run::tests::*;
    use serde_json::json;

    #[test]
    fn the_detail_text() {
        let d: RunShown = serde_json::from_value(json!({
            "manifest": serde_json::to_value(summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"running":1}))).unwrap(),
            "nodes": [{"id":"api","state":"running","branch":null,"worktree":null,"agent":null,"deps":[],
                       "created_at":"t","updated_at":"t"}],
            "discussions": [], "spinoffs": []
        }))
        .unwrap();
        let text = detail_text(&d);
        assert!(
            text.starts_with("Run      01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n"),
            "{text}"
        );
        assert!(text.contains("Nodes    1 running\n"), "{text}");
        assert!(
            text.contains(
                "ID   STATE    ACTIVITY  ELAPSED  WAITING FOR  BRANCH  WORKTREE  AGENT  RUNNER\napi  running  unknown   -        -            -       -         -      local\n"
            ),
            "{text}"
        );
        assert!(!text.contains("Discussions"));
    }

    #[test]
    fn a_shortstat_is_a_short_cell() {
        assert_eq!(
            shortstat_cell(" 2 files changed, 5 insertions(+), 1 deletion(-)\n"),
            "2 files +5 -1"
        );
        assert_eq!(
            shortstat_cell(" 1 file changed, 3 deletions(-)\n"),
            "1 file +0 -3"
        );
        assert_eq!(shortstat_cell(""), "no change");
    }

    #[test]
    fn elapsed_and_waiting_for_in_run_show() {
        let v = dag_show();
        let d: RunShown = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            (d.nodes[2].elapsed_s, &d.nodes[2].waiting_for[..]),
            (None, &["api".to_string()][..])
        );
        assert_eq!(d.nodes[1].elapsed_s, Some(65));
        let text = detail_text(&d);
        assert!(
            text.contains("Parallel     at most 4 at once\nIntegration  octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration\n"),
            "{text}"
        );
        let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("ID ")).collect();
        assert_eq!(
            table[..4],
            [
                "ID      STATE    ACTIVITY  ELAPSED  WAITING FOR  BRANCH         WORKTREE  AGENT  RUNNER",
                "schema  merged   -         12s      -            octl/R/schema  -         shell  local",
                "api     running  unknown   1m05s    -            octl/R/api     -         shell  local",
                "docs    pending  -         -        api          octl/R/docs    -         shell  local",
            ]
        );
    }

    #[test]
    fn lost_nodes_and_their_runner_in_run_show() {
        let mut lost = node("far", "lost");
        lost["runner"] = json!("hosts");
        lost["lost"] = json!({"reason": "ssh host s1 stopped answering", "since": "2026-12-01T10:00:00.000Z", "was": "running"});
        let d = detail_with(json!([node("ok", "merged"), lost]));
        let text = lost_text(&d);
        assert!(
            text.contains("Lost (not known to be gone;") && text.contains("  far lost since "),
            "{text}"
        );
        assert!(text.contains(": ssh host s1 stopped answering\n"), "{text}");
        assert_eq!(lost_text(&detail_with(json!([node("a", "running")]))), "");
        let table = detail_text(&d);
        assert!(
            table.contains("RUNNER") && table.contains("hosts\n"),
            "{table}"
        );
    }

    #[test]
    fn failures_and_corrupt_logs_in_run_show() {
        let mut failed = node("api", "failed");
        failed["reason"] = json!("gate failed");
        failed["exit_status"] = json!(3);
        failed["message"] = json!("tests red");
        let d = detail_with(json!([node("ok", "merged"), failed, node("ui", "exited")]));
        let text = failures_text(&d, Path::new("/h/runs/R/logs"));
        assert_eq!(
            text,
            "\nFailures:\n  api failed: gate failed; its agent exited with status 3; message: tests red\n    log: /h/runs/R/logs/api.log (orchestratectl run logs 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node api)\n  ui exited: no reason given\n    log: /h/runs/R/logs/ui.log (orchestratectl run logs 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node ui)\n"
        );
        assert_eq!(
            failures_text(&detail_with(json!([node("a", "merged")])), Path::new("/x")),
            ""
        );

        let c = json!({"log": "/h/runs/R/events.jsonl.corrupt", "line": 3, "reason": "not a valid event",
            "readable_events": 2, "events": [{"v": 1, "seq": 1, "id": "01JDXJ5R8Q4M0ZK7P2W9TB3C6F", "ts": "t",
            "run": "R", "type": "run.created", "actor": "daemon", "data": {}}]});
        let text = corrupt_text("R", &serde_json::from_value(c).unwrap());
        assert!(
            text.contains("  bad line: 3 of /h/runs/R/events.jsonl.corrupt: not a valid event\n  readable: the 2 events before it (the last 1 below)\n"),
            "{text}"
        );
        assert!(text.contains("run.created"), "{text}");
        assert!(
            text.ends_with("orchestratectl run quarantine R\n"),
            "{text}"
        );
    }
}
