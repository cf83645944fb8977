//! Best of N: several attempts at one task (nodes `NODE-1` … `NODE-N` of a spinoff or code
//! run), each gated; a judge ranks those that passed (`node.judged`, once per run); the
//! winner goes on as any node (merged by the daemon, or by a person in a code run) and the
//! others are set aside — stopped, their work snapshotted under `refs/octl/snapshots/RUN/NODE`
//! (`recover` brings any back) and cleaned up. The decisions are [`super::decide`]'s; the
//! acts are here.

use std::sync::Arc;
use std::time::Duration;

use octl_proto::event::{
    BestOf, Criterion, Judge, NodeAdded, NodeCancelled, NodeGated, NodeJudged, RunCreated,
    RunJudgeFailed, RunSettings, DEFAULT_RANK,
};
use octl_proto::ids::validate_node_id;
use octl_proto::projection::RunDetail;
use octl_proto::rpc::ATTEMPTS_MAX;
use octl_proto::state::Node;
use octl_proto::{AppError, ErrorKind, NodeState};

use super::spawn::{check_request, SpawnRequest};
use super::{append, blocking, cleanup, finish};
use crate::daemon::Daemon;
use crate::git::Git;
use crate::store::{Draft, NewRun, RunHandle};

/// How long a judge command may take, each time.
const JUDGE_TIMEOUT: Duration = Duration::from_secs(600);

/// What `--attempts` asks for, checked.
pub struct Attempts {
    pub best_of: BestOf,
    /// At most this many alive at once.
    pub max_parallel: u64,
    /// The profile of each attempt, in turn.
    pub agents: Vec<String>,
}

impl Attempts {
    pub fn check(
        attempts: u32,
        agents: Vec<String>,
        judge: Option<Judge>,
        judge_command: Option<String>,
        first_passing: bool,
        rank: Vec<Criterion>,
        max_parallel: Option<u64>,
    ) -> Result<Attempts, AppError> {
        if !(2..=ATTEMPTS_MAX).contains(&attempts) {
            return Err(AppError::invalid(format!(
                "attempts: {attempts} is not a number of attempts; accepted: 2 to {ATTEMPTS_MAX}"
            )));
        }
        let max_parallel = max_parallel.unwrap_or(u64::from(attempts));
        if !(1..=u64::from(attempts)).contains(&max_parallel) {
            return Err(AppError::invalid(format!(
                "max_parallel: {max_parallel}; accepted: 1 to the number of attempts ({attempts})"
            )));
        }
        let judge =
            match (judge, &judge_command) {
                (None, Some(_)) => Judge::Command,
                (Some(Judge::Command), None) => {
                    return Err(AppError::invalid(
                        "judge: command needs judge_command (--judge-command CMD)",
                    ))
                }
                (Some(j), Some(_)) if j != Judge::Command => return Err(AppError::invalid(
                    "judge_command: only with judge command (leave --judge out, or say command)",
                )),
                (j, _) => j.unwrap_or(Judge::Builtin),
            };
        let mut seen = Vec::new();
        for c in &rank {
            if seen.contains(c) {
                return Err(AppError::invalid(format!(
                    "rank: {c:?} is named twice; accepted: each of {} at most once",
                    Criterion::NAMES
                )));
            }
            seen.push(*c);
        }
        Ok(Attempts {
            max_parallel,
            best_of: BestOf {
                attempts,
                judge,
                judge_command,
                first_passing,
                rank,
            },
            agents,
        })
    }
}

/// Creates a best-of-N run: its attempts are added pending, each with its profile, and the
/// scheduler starts them as it starts a fan-out's units (all at once, under the run's budget).
pub async fn spawn(
    daemon: &Arc<Daemon>,
    req: SpawnRequest,
    attempts: Attempts,
) -> Result<Arc<RunHandle>, AppError> {
    let checked = check_request(daemon, &req).await?;
    let n = attempts.best_of.attempts;
    let mut profiles = Vec::new();
    for agent in &attempts.agents {
        let one = SpawnRequest {
            agent: Some(agent.clone()),
            ..req.clone()
        };
        profiles.push(check_request(daemon, &one).await?.profile.name);
    }
    if profiles.is_empty() {
        profiles.push(checked.profile.name.clone());
    }
    let ids: Vec<String> = (1..=n).map(|k| format!("{}-{k}", checked.node)).collect();
    for id in &ids {
        validate_node_id("node", id).map_err(|e| {
            AppError::invalid(format!("{} (an attempt is named NODE-K)", e.message))
        })?;
    }
    let id = octl_proto::ids::new_ulid();
    let created = RunCreated {
        kind: req.kind,
        title: Some(super::spawn::title(&req.task)),
        repo: Some(checked.repo.display().to_string()),
        base: Some(checked.base.clone()),
        settings: RunSettings {
            agent: Some(checked.profile.name.clone()),
            gate: req.gate.clone(),
            max_budget_usd: req.max_budget_usd,
            sandbox: req.sandbox,
            // The scheduler starts them under this cap and the run's budget.
            max_parallel: Some(attempts.max_parallel),
            best_of: Some(attempts.best_of),
            ..RunSettings::default()
        },
    };
    let initial = ids
        .iter()
        .enumerate()
        .map(|(i, node)| {
            Draft::daemon(
                Some(node),
                NodeAdded {
                    agent: Some(profiles[i % profiles.len()].clone()),
                    task: Some(req.task.clone()),
                    gate: req.gate.clone(),
                    runner: Some(checked.runner.clone()),
                    permissions: Some(req.permissions.clone()).filter(|r| !r.is_empty()),
                    ..NodeAdded::default()
                },
            )
        })
        .collect();
    let (handle, syncing) = daemon
        .store
        .begin_run(NewRun {
            id,
            created,
            initial,
            files: Vec::new(),
        })
        .await?;
    syncing.wait().await?;
    // The engine starts the pending attempts once it looks.
    daemon.store.notify(&handle.id);
    Ok(handle)
}

/// A done attempt: its agent gone, its gate run; `node.gated` when it passed.
pub async fn gate(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node_id: &str) {
    let Some(node) = node_of(&handle.view(), node_id) else {
        return;
    };
    if node.state != NodeState::Done || node.gated {
        return;
    }
    match finish::settle_and_gate(daemon, handle, &node).await {
        Ok(true) => {
            let _ = append(daemon, handle, Some(node_id), NodeGated {}).await;
        }
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(run = %handle.id, node = node_id, error = %e.message, "attempt not gated")
        }
    }
}

fn node_of(view: &RunDetail, id: &str) -> Option<Node> {
    view.nodes.iter().find(|n| n.id == id).cloned()
}

/// What the built-in judge and a judge command know of one passing attempt.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Facts {
    pub node: String,
    pub agent: Option<String>,
    pub added: u64,
    pub removed: u64,
    pub files: u64,
    pub cost_usd: Option<f64>,
    pub time_s: Option<f64>,
    /// Only for a judge command.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub diff: String,
}

/// Each passing attempt's facts, its diff against the merge base with the run's base.
fn facts(view: &RunDetail, with_diff: bool) -> Vec<Facts> {
    let base = view.manifest.base.clone().unwrap_or_default();
    view.nodes
        .iter()
        .filter(|n| n.state == NodeState::Done && n.gated)
        .map(|n| {
            let (mut added, mut removed, mut files, mut diff) = (0, 0, 0, String::new());
            if let Some(w) = n
                .worktree
                .as_deref()
                .filter(|w| std::path::Path::new(w).is_dir())
            {
                let git = Git::new(w);
                if let Ok(mb) = git.plumbing(&["merge-base", &base, "HEAD"]) {
                    let mb = mb.trim();
                    if let Ok(out) = git.plumbing(&["diff", "--numstat", "--no-ext-diff", mb]) {
                        for line in out.lines() {
                            let mut f = line.split('\t');
                            added += f.next().and_then(|a| a.parse::<u64>().ok()).unwrap_or(0);
                            removed += f.next().and_then(|a| a.parse::<u64>().ok()).unwrap_or(0);
                            files += 1;
                        }
                    }
                    if with_diff {
                        diff = git
                            .plumbing(&["diff", "--no-color", "--no-ext-diff", mb])
                            .unwrap_or_default();
                        let mut cut = diff.len().min(256 * 1024);
                        while !diff.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        diff.truncate(cut);
                    }
                }
            }
            let ms = |t: &Option<String>| t.as_deref().and_then(octl_proto::time::parse_millis);
            let time_s = match (
                ms(&n.started_at),
                ms(&n.finished_at).or(ms(&Some(n.updated_at.clone()))),
            ) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e3),
                _ => None,
            };
            Facts {
                node: n.id.clone(),
                agent: n.agent.clone(),
                added,
                removed,
                files,
                cost_usd: n.cost_usd,
                time_s,
                diff,
            }
        })
        .collect()
}

/// The built-in ranking: by each criterion in turn (smaller first; an unknown cost or time
/// last), then by the attempt's number. Each reason names the figures.
pub fn rank_builtin(facts: &[Facts], order: &[Criterion]) -> (Vec<String>, Vec<String>) {
    let order = if order.is_empty() {
        &DEFAULT_RANK[..]
    } else {
        order
    };
    let key = |f: &Facts, c: Criterion| -> f64 {
        match c {
            Criterion::Diff => (f.added + f.removed) as f64,
            Criterion::Files => f.files as f64,
            Criterion::Cost => f.cost_usd.unwrap_or(f64::INFINITY),
            Criterion::Time => f.time_s.unwrap_or(f64::INFINITY),
        }
    };
    let mut sorted: Vec<&Facts> = facts.iter().collect();
    sorted.sort_by(|a, b| {
        order
            .iter()
            .map(|c| key(a, *c).total_cmp(&key(b, *c)))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| attempt_no(&a.node).cmp(&attempt_no(&b.node)))
    });
    let reasons = sorted
        .iter()
        .map(|f| {
            format!(
                "gate passed; +{} -{} in {} file(s); cost {}; {}",
                f.added,
                f.removed,
                f.files,
                f.cost_usd.map_or("unknown".into(), |c| format!("${c:.4}")),
                f.time_s
                    .map_or("time unknown".into(), |t| format!("{t:.1} s")),
            )
        })
        .collect();
    (sorted.iter().map(|f| f.node.clone()).collect(), reasons)
}

fn attempt_no(node: &str) -> u32 {
    node.rsplit('-')
        .next()
        .and_then(|k| k.parse().ok())
        .unwrap_or(u32::MAX)
}

/// A judge command's answer: `{"ranking": [NODE, …], "reasons": [TEXT, …]}` naming passing
/// attempts only, each once, with a reason each (`reasons` may be left out).
pub fn parse_ranking(out: &[u8], passing: &[String]) -> Result<(Vec<String>, Vec<String>), String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Answer {
        ranking: Vec<String>,
        #[serde(default)]
        reasons: Option<Vec<String>>,
    }
    let a: Answer = serde_json::from_slice(out).map_err(|e| {
        format!(
            "not {{\"ranking\": [NODE, …], \"reasons\": [TEXT, …]}}: {e} (it answered {:?})",
            String::from_utf8_lossy(&out[..out.len().min(200)])
        )
    })?;
    if a.ranking.is_empty() {
        return Err("ranking: empty; accepted: the passing attempts, best first".into());
    }
    for (i, r) in a.ranking.iter().enumerate() {
        if !passing.contains(r) {
            return Err(format!(
                "ranking: {r:?} is not a passing attempt; accepted: {}",
                passing.join(", ")
            ));
        }
        if a.ranking[..i].contains(r) {
            return Err(format!("ranking: {r:?} is named twice"));
        }
    }
    let reasons = match a.reasons {
        Some(r) if r.len() == a.ranking.len() => r,
        Some(r) => {
            return Err(format!(
                "reasons: {} given for {} ranked; accepted: one per ranked attempt",
                r.len(),
                a.ranking.len()
            ))
        }
        None => vec![String::new(); a.ranking.len()],
    };
    Ok((a.ranking, reasons))
}

/// Runs the judge command once: the task and the attempts as JSON on stdin, its stdout.
fn run_judge(cmd: &str, dir: &str, input: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the judge command: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let deadline = std::time::Instant::now() + JUDGE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the judge command took over {} s",
                    JUDGE_TIMEOUT.as_secs()
                ));
            }
        }
    }
    let _ = writer.join();
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "the judge command exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// Ranks the passing attempts and records it (`node.judged`); of this and a person's pick at
/// once the second is refused by the log and changes nothing. A judge command that answers
/// no valid ranking twice is recorded (`run.judge_failed`): a person picks.
pub async fn judge(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>) {
    let view = handle.view();
    let Some(best) = view.manifest.settings.best_of.clone() else {
        return;
    };
    if view.judged.is_some() || view.judge_failed.is_some() {
        return;
    }
    let command = best.judge == Judge::Command;
    let v = view.clone();
    let facts = match blocking(move || Ok(facts(&v, command))).await {
        Ok(f) if !f.is_empty() => f,
        _ => return,
    };
    let (ranking, reasons, by) = if best.first_passing {
        // The first to pass wins as soon as it passed; the built-in order breaks a tie of two
        // that passed at once.
        let (r, why) = rank_builtin(&facts, &best.rank);
        (r, why, "first_passing")
    } else if command {
        let cmd = best.judge_command.clone().unwrap_or_default();
        let dir = view.manifest.repo.clone().unwrap_or_else(|| "/".into());
        let passing: Vec<String> = facts.iter().map(|f| f.node.clone()).collect();
        let task = view
            .nodes
            .first()
            .and_then(|n| n.task.clone())
            .unwrap_or_default();
        let input = serde_json::to_vec(&serde_json::json!({"task": task, "attempts": facts}))
            .expect("facts serialize");
        let answer = blocking(move || {
            let mut last = String::new();
            // A malformed answer is asked for once more.
            for _ in 0..2 {
                match run_judge(&cmd, &dir, &input).and_then(|out| parse_ranking(&out, &passing)) {
                    Ok(r) => return Ok(Ok(r)),
                    Err(e) => last = e,
                }
            }
            Ok(Err(last))
        })
        .await;
        match answer {
            Ok(Ok((r, why))) => (r, why, "command"),
            Ok(Err(message)) => {
                let _ = append(daemon, handle, None, RunJudgeFailed { message }).await;
                return;
            }
            Err(_) => return,
        }
    } else {
        let (r, why) = rank_builtin(&facts, &best.rank);
        (r, why, "builtin")
    };
    let winner = ranking[0].clone();
    let judged = append(
        daemon,
        handle,
        Some(&winner),
        NodeJudged {
            ranking,
            reasons,
            by: by.into(),
        },
    )
    .await;
    if judged.is_ok() {
        crate::failpoint::crash("best-of:after-judged");
    }
}

/// `run.pick`: a person picks the winner (the others set aside). Refused once the run is
/// judged, naming the winner.
pub async fn pick(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &str,
) -> Result<(), AppError> {
    let view = handle.view();
    if view.manifest.settings.best_of.is_none() {
        return Err(AppError::invalid(format!(
            "run {} is not a best-of-N run (spawn --attempts): there is nothing to pick",
            handle.id
        )));
    }
    if let Some(j) = &view.judged {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "run {} is judged already: {} won ({})",
                handle.id,
                j.ranking.first().map_or("-", String::as_str),
                j.by
            ),
        ));
    }
    let v = view.clone();
    let facts = blocking(move || Ok(facts(&v, false))).await?;
    let (mut ranking, mut reasons) = rank_builtin(&facts, &[]);
    match ranking.iter().position(|r| r == node) {
        Some(i) => {
            let r = ranking.remove(i);
            let why = reasons.remove(i);
            ranking.insert(0, r);
            reasons.insert(0, format!("picked by a person; {why}"));
        }
        None => {
            let state = node_of(&view, node).map(|n| {
                format!(
                    "{}{}",
                    n.state.as_str(),
                    if n.gated { "" } else { ", not gated" }
                )
            });
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                match state {
                    Some(s) => format!("node {node} of run {} is {s}: only a done attempt that passed its gate is picked", handle.id),
                    None => format!("run {} has no attempt {node:?}", handle.id),
                },
            ));
        }
    }
    daemon
        .store
        .append(
            handle,
            Draft::said(
                Some(node.to_string()),
                octl_proto::Actor::Human,
                NodeJudged {
                    ranking,
                    reasons,
                    by: "human".into(),
                },
            ),
            false,
        )
        .await
        .map(|_| ())
}

/// An attempt that did not win: `node.cancelled` (because of the winner) first, then its
/// agent stopped, its worktree snapshotted and removed, its branch's tip kept in the snapshot.
pub async fn set_aside(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node_id: &str) {
    let view = handle.view();
    let Some(node) = node_of(&view, node_id) else {
        return;
    };
    let winner = view
        .judged
        .as_ref()
        .and_then(|j| j.ranking.first().cloned());
    if node.state != NodeState::Cancelled {
        let cancelled = append(
            daemon,
            handle,
            Some(node_id),
            NodeCancelled { because: winner },
        )
        .await;
        if cancelled.is_err() {
            return;
        }
        crate::failpoint::crash("best-of:after-set-aside");
    }
    let node = node_of(&handle.view(), node_id).unwrap_or(node);
    if let Err(e) = cleanup::cleanup(daemon, handle, &node, None).await {
        tracing::warn!(run = %handle.id, node = node_id, error = %e.message, "attempt set aside, not cleaned up yet");
    }
}
