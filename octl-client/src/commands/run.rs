//! `run create|list|show|rebuild|wait|watch|retry|cancel|attach|quarantine` (`run logs` is in
//! [`super::logs`]). JSON output is the daemon's
//! result as it came; the human output reads it through the `octl-proto` projection types, plus
//! the read-time node facts of `run.show` (`elapsed_s`, `waiting_for`). `wait` and `watch`
//! follow the run through [`crate::follow`]; `attach` replaces this process with tmux.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use clap::{Args, Subcommand};
use octl_proto::ids::{parse_run_ref, validate_node_id};
use octl_proto::projection::{RunDetail, RunSummary};
use octl_proto::rpc::{
    CancelParams, RebuildResult, RetryParams, RunCreateParams, RunListParams, RunParams,
};
use octl_proto::state::Node;
use octl_proto::{AppError, ErrorKind, NodeState};
use serde_json::{json, Value};

use super::{call, decode, Ctx};
use crate::client::find_on_path;
use crate::follow::{
    is_terminal_status, report_wait, wait_exit_code, wait_run, watch_run, Mode, Progress, WatchMode,
};
use crate::output::{cell, clock, fields, node_counts, shell_word, short_time, table};

/// The examples of `run --help`.
pub const RUN_EXAMPLES: &str = "\
Examples:
  orchestratectl run list --status active
  orchestratectl run show 01JDXJ5R
  orchestratectl run watch 01JDXJ5R
  orchestratectl run logs 01JDXJ5R --node api --follow
  orchestratectl run wait 01JDXJ5R --timeout 600
  orchestratectl run retry 01JDXJ5R --node api
  orchestratectl run attach 01JDXJ5R
  orchestratectl run cancel 01JDXJ5R
  orchestratectl run create --kind generic --title 'nightly build'";

#[derive(Debug, Subcommand)]
pub enum RunCmd {
    /// Create a run and print its id
    #[command(after_help = "\
Examples:
  orchestratectl run create --kind generic
  orchestratectl run create --kind generic --title 'track the release'
  orchestratectl --json run create --kind generic   # prints the run summary")]
    Create(RunCreateArgs),

    /// List runs, oldest first
    #[command(after_help = "\
Examples:
  orchestratectl run list
  orchestratectl run list --status waiting
  orchestratectl --json run list")]
    List(RunListArgs),

    /// Show one run: its summary, nodes, discussions and spin-offs
    ///
    /// Nodes are listed in the order they were added (a plan's or manifest's order). Under
    /// the table, every failed or exited node's reason, exit status and message, and the path
    /// of its log. A corrupt run shows what its log still says: its kind, when it was created,
    /// the events before the bad line, and which line is bad.
    #[command(after_help = "\
Examples:
  orchestratectl run show 01JDXJ5R8Q4M0ZK7P2W9TB3C6E
  orchestratectl run show 01jdxj5r          # a unique prefix of 6+ characters is enough
  orchestratectl --json run show 01JDXJ5R")]
    Show(RunArg),

    /// Print what a node's agent printed (its log under runs/RUN/logs/); --follow keeps printing
    ///
    /// For Claude Code the readable rendering (NODE.pane.log) is shown, and the raw
    /// stream-json (NODE.log) with --raw; for other agents both are the one log. With --follow
    /// it goes on printing as the log grows (waiting for it to appear if the agent has not
    /// started) and ends once the node's agent is gone (the node is done, failed, exited,
    /// cancelled, merged, …). With --json: one object per line of the log,
    /// {"node":"api","line":"…"} (a line that is not UTF-8 is shown with U+FFFD). Exits 3 when
    /// the node is unknown or has no log yet (without --follow).
    #[command(after_help = "\
Examples:
  orchestratectl run logs 01JDXJ5R                    # the run's only node
  orchestratectl run logs 01JDXJ5R --node api --follow
  orchestratectl run logs 01JDXJ5R --node api --raw   # Claude Code's raw stream-json
  orchestratectl --json run logs 01JDXJ5R --node api  # {\"node\",\"line\"} per line")]
    Logs(crate::commands::logs::RunLogsArgs),

    /// Rewrite a run's projection files (manifest.json, nodes/…) from its event log
    #[command(after_help = "\
Examples:
  orchestratectl run rebuild 01JDXJ5R")]
    Rebuild(RunArg),

    /// Wait until a run completes, fails, is cancelled or waits for a human, showing progress
    ///
    /// Exits 0 when the run completed, 4 when it failed, was cancelled or is waiting (a
    /// conflict, a blocked merge, an open discussion, a code run awaiting `merge`). The final
    /// run summary is printed in both cases (with --json: one JSON document). Progress goes to
    /// stderr: a redrawn status line on a terminal, else one line per event.
    #[command(after_help = "\
Examples:
  orchestratectl run wait 01JDXJ5R
  orchestratectl run wait 01JDXJ5R --timeout 300      # exit 1, kind timeout, after 300 s
  orchestratectl --json run wait 01JDXJ5R             # the run summary, once")]
    Wait(RunWaitArgs),

    /// A live view of a run: its nodes, their states, elapsed times and what they wait for,
    /// and the last events; until the run ends
    ///
    /// On a terminal the screen is redrawn on every event (and every second); otherwise one
    /// plain line per event is printed (`SEQ TS TYPE NODE MESSAGE`; with --json, the events as
    /// JSON lines). Ends when the run completes (exit 0), fails or is cancelled (exit 4), or
    /// on Ctrl-C; a run that waits for a human is watched on.
    #[command(after_help = "\
Examples:
  orchestratectl run watch 01JDXJ5R
  orchestratectl run watch 01JDXJ5R | tee run.log      # plain lines
  orchestratectl --json run watch 01JDXJ5R             # events as JSON lines")]
    Watch(RunArg),

    /// Start a failed or conflicting node of any agent run again: an orchestrate node from
    /// the current tip of the integration branch, any other from the tip of base
    ///
    /// The node may be failed, exited, conflict or merge_blocked; a spinoff or code run that
    /// ended failed becomes active again. Its old branch and worktree are saved under
    /// refs/octl/snapshots/<RUN>/<NODE> and removed before it starts; the nodes it blocked
    /// wait for it again. Of two retries at once one wins; the other exits 4
    /// (invalid_transition) and changes nothing.
    #[command(after_help = "\
Examples:
  orchestratectl run retry 01JDXJ5R --node api
  orchestratectl run retry 01JDXJ5R --node fix-the-typo   # a failed spinoff run
  orchestratectl --json run retry 01JDXJ5R --node api   # the run summary")]
    Retry(RunRetryArgs),

    /// Stop a run: its agents are stopped; its branches and worktrees are kept unless --discard
    ///
    /// A run that already ended is refused (exit 4, invalid_transition); with --discard, what
    /// it left behind is removed (after a snapshot). Refused too while a node is merging: the
    /// merge has begun moving the branch; cancel again once it has ended.
    #[command(after_help = "\
Examples:
  orchestratectl run cancel 01JDXJ5R
  orchestratectl run cancel 01JDXJ5R --discard   # work saved under refs/octl/snapshots/, then removed")]
    Cancel(RunCancelArgs),

    /// Attach this terminal to a node's agent window (tmux; detach with Ctrl-b d)
    ///
    /// Replaces this process with `tmux -S $OCTL_HOME/tmux.sock attach-session -t RUN:NODE`
    /// on the daemon's private tmux server. Needs a terminal.
    #[command(after_help = "\
Examples:
  orchestratectl run attach 01JDXJ5R
  orchestratectl run attach 01JDXJ5R --node api")]
    Attach(RunAttachArgs),

    /// Remove what completed, failed and cancelled runs left behind, and orphans, after
    /// saving their content under refs/octl/snapshots/
    ///
    /// For each finished run: every node's worktree still there is saved under
    /// refs/octl/snapshots/<RUN>/<NODE> (uncommitted and untracked files included; what git
    /// ignores moved to $OCTL_HOME/kept/<RUN>/<NODE>/<N>/) and removed,
    /// its window closed, and its branch deleted once its tip is merged or in the snapshot.
    /// Then whatever no run owns (worktrees under $OCTL_HOME/worktrees/, octl/<RUN>/… branches,
    /// windows on the daemon's tmux server; see `orchestratectl doctor`) goes the same way,
    /// snapshots first. Kept, with the reason: directories that are not git worktrees, branches
    /// checked out elsewhere, an integration branch not merged into base, anything of a corrupt
    /// run. Unfinished runs are never touched. Kept ignored files are deleted only with
    /// --older-than AGE (of runs ended longer ago); snapshot refs are never deleted. With
    /// --dry-run: what would go, nothing changed.
    #[command(after_help = crate::commands::recover::GC_EXAMPLES)]
    Gc(crate::commands::recover::GcArgs),

    /// Set a corrupt run aside: move runs/RUN to $OCTL_HOME/corrupt/RUN, so doctor is green again
    ///
    /// Only a run whose log does not replay (status `corrupt`) can be set aside; anything else
    /// is refused (exit 4). Nothing is deleted: the directory is moved whole (its log, with the
    /// intact lines before the bad one, its projections and agents' logs) and the daemon
    /// forgets the run. Its worktrees and branches stay where they are; `doctor` then lists
    /// them as orphans and `run gc` can remove them, snapshotting first.
    #[command(after_help = "\
Examples:
  orchestratectl run show 01JDXJ5R          # what the corrupt log still says
  orchestratectl run quarantine 01JDXJ5R
  orchestratectl --json run quarantine 01JDXJ5R   # {run, moved_to}")]
    Quarantine(RunArg),
}

#[derive(Debug, Args)]
pub struct RunCreateArgs {
    /// Kind of run: `generic` records events only (other kinds come with their own commands)
    #[arg(long, value_name = "KIND")]
    pub kind: String,

    /// A short title shown in `run list`
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunListArgs {
    /// Only runs in this status: active, waiting, completed, failed or cancelled
    #[arg(long, value_name = "STATUS")]
    pub status: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunWaitArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// Give up after S seconds (decimals allowed) with exit 1, kind `timeout`; the run goes on
    #[arg(long, value_name = "S")]
    pub timeout: Option<f64>,
}

#[derive(Debug, Args)]
pub struct RunCancelArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// Also remove the nodes' worktrees and branches; whatever they hold (uncommitted and
    /// untracked files included) is first saved as a commit under
    /// refs/octl/snapshots/<RUN>/<NODE>
    #[arg(long)]
    pub discard: bool,
}

#[derive(Debug, Args)]
pub struct RunAttachArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node whose window to show; default: the only node, else the first one whose agent
    /// is alive (starting, running or waiting)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunRetryArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node to start again (a failed or conflicting one)
    #[arg(long, value_name = "NODE")]
    pub node: String,
}

#[derive(Debug, Args)]
pub struct RunArg {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,
}

/// `run list` shows the nodes of an unfinished run with at most this many nodes.
pub const LIST_NODES_MAX: usize = 20;

pub async fn execute(ctx: &Ctx, cmd: RunCmd) -> Result<i32, AppError> {
    match cmd {
        RunCmd::Create(args) => create(ctx, args).await.map(|()| 0),
        RunCmd::List(args) => list(ctx, args).await.map(|()| 0),
        RunCmd::Show(arg) => show(ctx, arg).await.map(|()| 0),
        RunCmd::Rebuild(arg) => rebuild(ctx, arg).await.map(|()| 0),
        RunCmd::Wait(args) => wait(ctx, args).await,
        RunCmd::Watch(arg) => watch(ctx, arg).await,
        RunCmd::Retry(args) => retry(ctx, args).await.map(|()| 0),
        RunCmd::Cancel(args) => cancel(ctx, args).await.map(|()| 0),
        RunCmd::Attach(args) => attach(ctx, args).await,
        RunCmd::Gc(args) => super::recover::gc(ctx, args).await.map(|()| 0),
        RunCmd::Logs(args) => super::logs::logs(ctx, args).await,
        RunCmd::Quarantine(arg) => quarantine(ctx, arg).await.map(|()| 0),
    }
}

/// The `run` param for a positional RUN, validated and normalised.
pub fn run_param(given: &str) -> Result<RunParams, AppError> {
    Ok(RunParams {
        run: parse_run_ref("run", given)?.as_str().to_string(),
    })
}

fn to_params<T: serde::Serialize>(params: &T) -> Value {
    serde_json::to_value(params).expect("RPC params always serialize")
}

async fn create(ctx: &Ctx, args: RunCreateArgs) -> Result<(), AppError> {
    let params = RunCreateParams {
        kind: args.kind,
        title: args.title,
    };
    let value = ctx.client.call("run.create", to_params(&params)).await?;
    let run: RunSummary = decode("run.create", &value)?;
    ctx.out
        .result(&value, || format!("Created run {} ({})", run.id, run.kind));
    Ok(())
}

async fn list(ctx: &Ctx, args: RunListArgs) -> Result<(), AppError> {
    let params = RunListParams {
        status: args.status.clone(),
    };
    if ctx.out.json {
        // Passed through as the daemon wrote it: scripts poll this, so it skips building values.
        let raw = ctx.client.call_raw("run.list", to_params(&params)).await?;
        ctx.out.result(&raw, String::new);
        return Ok(());
    }
    let value = ctx.client.call("run.list", to_params(&params)).await?;
    let runs: Vec<RunSummary> = decode("run.list", &value)?;
    // The nodes of unfinished runs, for the lines under them (a run that cannot be shown
    // now just keeps its counts).
    let mut nodes = HashMap::new();
    for r in runs.iter().filter(|r| lists_nodes(r)) {
        if let Ok(v) = ctx.client.call("run.show", json!({ "run": r.id })).await {
            if let Ok(d) = decode::<RunDetail>("run.show", &v) {
                nodes.insert(r.id.clone(), node_lines(&d, &node_extras(&v)));
            }
        }
    }
    ctx.out
        .result(&value, || match (&args.status, runs.is_empty()) {
            (None, true) => {
                "No runs yet. Create one with `orchestratectl run create --kind generic`."
                    .to_string()
            }
            (Some(status), true) => format!("No runs with status {status}."),
            _ => runs_text(&runs, &nodes),
        });
    Ok(())
}

/// Does `run list` show this run's nodes? Only an unfinished run with 1 to 20 nodes.
pub fn lists_nodes(r: &RunSummary) -> bool {
    let total: usize = r.nodes.values().sum();
    !is_terminal_status(&r.status) && (1..=LIST_NODES_MAX).contains(&total)
}

/// The lines under a run in `run list`: `  <node>  <state>  <elapsed>`, lined up.
pub fn node_lines(d: &RunDetail, extras: &HashMap<String, NodeExtra>) -> Vec<String> {
    let rows: Vec<Vec<String>> = d
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.id.clone(),
                n.state.as_str().to_string(),
                elapsed_cell(extras.get(&n.id)),
            ]
        })
        .collect();
    table(&["", "", ""], &rows)
        .lines()
        .skip(1)
        .map(|l| format!("  {l}"))
        .collect()
}

/// The `run list` table: ID, KIND, STATUS, NODES, UPDATED, TITLE.
pub fn runs_table(runs: &[RunSummary]) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.kind.clone(),
                r.status.clone(),
                node_counts(&r.nodes),
                short_time(&r.updated_at),
                cell(r.title.as_deref()),
            ]
        })
        .collect();
    table(
        &["ID", "KIND", "STATUS", "NODES", "UPDATED", "TITLE"],
        &rows,
    )
}

/// The `run list` text: the table, with each run's node lines under its row.
pub fn runs_text(runs: &[RunSummary], nodes: &HashMap<String, Vec<String>>) -> String {
    let t = runs_table(runs);
    let mut out = String::new();
    for (i, line) in t.lines().enumerate() {
        out.push_str(line);
        out.push('\n');
        let Some(r) = i.checked_sub(1).and_then(|i| runs.get(i)) else {
            continue;
        };
        for l in nodes.get(&r.id).into_iter().flatten() {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

async fn show(ctx: &Ctx, arg: RunArg) -> Result<(), AppError> {
    let params = run_param(&arg.run)?;
    let value = ctx.client.call("run.show", to_params(&params)).await?;
    let detail: RunDetail = decode("run.show", &value)?;
    let logs = ctx
        .client
        .home()
        .runs()
        .join(&detail.manifest.id)
        .join("logs");
    ctx.out.result(&value, || {
        let mut text = detail_text(&detail, &node_extras(&value));
        text.push_str(&failures_text(&detail, &logs));
        if let Some(c) = value.get("corrupt") {
            text.push_str(&corrupt_text(&detail.manifest.id, c));
        }
        text
    });
    Ok(())
}

/// Under `run show`'s tables: why each failed or exited node ended, and where its log is.
pub fn failures_text(d: &RunDetail, logs: &Path) -> String {
    let ended: Vec<&Node> = d
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
            why.push(format!("exit status {status}"));
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
pub fn corrupt_text(run: &str, c: &Value) -> String {
    let mut out = String::from("\nCorrupt log:\n");
    if let Some(e) = c.get("error").and_then(Value::as_str) {
        out.push_str(&format!("  {e}\n"));
        return out;
    }
    let log = c.get("log").and_then(Value::as_str).unwrap_or("?");
    let line = c.get("line").and_then(Value::as_u64).unwrap_or(0);
    let reason = c.get("reason").and_then(Value::as_str).unwrap_or("?");
    let readable = c
        .get("readable_events")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let events = c.get("events").and_then(Value::as_array);
    let shown = events.map_or(0, Vec::len);
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
    for ev in events.into_iter().flatten() {
        out.push_str(&format!("  {}\n", crate::output::event_line(ev)));
    }
    out.push_str(&format!(
        "  set it aside (nothing is deleted): orchestratectl run quarantine {run}\n"
    ));
    out
}

async fn quarantine(ctx: &Ctx, arg: RunArg) -> Result<(), AppError> {
    let params = run_param(&arg.run)?;
    let value = call(ctx, "run.quarantine", to_params(&params)).await?;
    let run = value.get("run").and_then(Value::as_str).unwrap_or("?");
    let to = value.get("moved_to").and_then(Value::as_str).unwrap_or("?");
    ctx.out.result(&value, || {
        format!("Set run {run} aside: moved to {to}\n  the daemon no longer lists it; nothing was deleted")
    });
    Ok(())
}

/// What `run.show` says of a node at read time, beside its projection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeExtra {
    /// Seconds since it started, or until it finished; `None` if it never started.
    pub elapsed_s: Option<u64>,
    /// Its dependencies not merged yet.
    pub waiting_for: Vec<String>,
}

/// The `elapsed_s` and `waiting_for` of every node in a `run.show` answer, by node id.
pub fn node_extras(show: &Value) -> HashMap<String, NodeExtra> {
    let Some(nodes) = show.get("nodes").and_then(Value::as_array) else {
        return HashMap::new();
    };
    nodes
        .iter()
        .filter_map(|n| {
            let id = n.get("id")?.as_str()?.to_string();
            let elapsed_s = n.get("elapsed_s").and_then(|e| {
                e.as_u64()
                    .or_else(|| e.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            });
            let waiting_for = n
                .get("waiting_for")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Some((
                id,
                NodeExtra {
                    elapsed_s,
                    waiting_for,
                },
            ))
        })
        .collect()
}

/// ELAPSED: `1m05s`, or `-` for a node that never started.
pub fn elapsed_cell(extra: Option<&NodeExtra>) -> String {
    match extra.and_then(|e| e.elapsed_s) {
        Some(s) => clock(s),
        None => "-".to_string(),
    }
}

/// WAITING FOR: `schema, auth`, or `-`.
pub fn waiting_cell(extra: Option<&NodeExtra>) -> String {
    match extra {
        Some(e) if !e.waiting_for.is_empty() => e.waiting_for.join(", "),
        _ => "-".to_string(),
    }
}

/// The human form of `run show`: the summary, then the nodes, discussions and spin-offs.
pub fn detail_text(d: &RunDetail, extras: &HashMap<String, NodeExtra>) -> String {
    let m = &d.manifest;
    let mut pairs = vec![
        ("Run", m.id.clone()),
        ("Kind", m.kind.clone()),
        ("Status", m.status.clone()),
        ("Title", cell(m.title.as_deref())),
    ];
    if let Some(repo) = &m.repo {
        pairs.push(("Repo", repo.clone()));
    }
    if let Some(base) = &m.base {
        pairs.push(("Base", base.clone()));
    }
    let setting = |key: &str| match m.settings.get(key) {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Null) | None => None,
        Some(other) => Some(other.to_string()),
    };
    if let Some(cap) = setting("max_parallel") {
        pairs.push(("Parallel", format!("at most {cap} at once")));
    }
    if let Some(integration) = setting("integration") {
        pairs.push(("Integration", integration));
    }
    if let Some(merge) = &m.merge {
        let at = m
            .merge_commit
            .as_deref()
            .map(|c| format!(" at {c}"))
            .unwrap_or_default();
        pairs.push(("Merge", format!("{merge}{at}")));
    }
    if let Some(parent) = setting("parent_run") {
        let from = setting("proposal")
            .map(|p| format!(" (spin-off proposal {p})"))
            .unwrap_or_default();
        pairs.push(("Parent", format!("{parent}{from}")));
    }
    pairs.push(("Created", short_time(&m.created_at)));
    pairs.push(("Updated", short_time(&m.updated_at)));
    pairs.push(("Events", m.last_seq.to_string()));
    pairs.push(("Nodes", node_counts(&m.nodes)));
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
                let extra = extras.get(&n.id);
                vec![
                    n.id.clone(),
                    n.state.as_str().to_string(),
                    elapsed_cell(extra),
                    waiting_cell(extra),
                    cell(n.branch.as_deref()),
                    cell(n.worktree.as_deref()),
                    cell(n.agent.as_deref()),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "ID",
                "STATE",
                "ELAPSED",
                "WAITING FOR",
                "BRANCH",
                "WORKTREE",
                "AGENT",
            ],
            &rows,
        ));
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

async fn rebuild(ctx: &Ctx, arg: RunArg) -> Result<(), AppError> {
    let params = run_param(&arg.run)?;
    let value = ctx.client.call("run.rebuild", to_params(&params)).await?;
    let r: RebuildResult = decode("run.rebuild", &value)?;
    ctx.out.result(&value, || {
        format!(
            "Rebuilt {} projection files of run {} from {} events",
            r.files, r.run, r.events
        )
    });
    Ok(())
}

async fn wait(ctx: &Ctx, args: RunWaitArgs) -> Result<i32, AppError> {
    let run = run_param(&args.run)?.run;
    let timeout = args.timeout.map(timeout_duration).transpose()?;
    let mut progress = Progress::new(Mode::detect(ctx.out.json));
    let (value, detail) = wait_run(ctx, &run, None, timeout, &mut progress).await?;
    let summary = value.get("manifest").cloned().unwrap_or(Value::Null);
    Ok(report_wait(ctx, &summary, &detail))
}

async fn watch(ctx: &Ctx, arg: RunArg) -> Result<i32, AppError> {
    let run = run_param(&arg.run)?.run;
    let (_, detail) = watch_run(ctx, &run, WatchMode::detect(ctx.out.json)).await?;
    if ctx.out.json {
        // The stream was the output; the exit code says how the run ended.
        return Ok(wait_exit_code(&detail));
    }
    Ok(report_wait(ctx, &Value::Null, &detail))
}

async fn retry(ctx: &Ctx, args: RunRetryArgs) -> Result<(), AppError> {
    validate_node_id("--node", &args.node)?;
    let params = RetryParams {
        run: run_param(&args.run)?.run,
        node: args.node.clone(),
    };
    let value = call(ctx, "run.retry", to_params(&params)).await?;
    let summary: RunSummary = decode("run.retry", &value)?;
    ctx.out.result(&value, || retry_text(&summary, &args.node));
    Ok(())
}

/// `Retrying node api of run 01… from the integration tip (old branch saved under …)`; a
/// node of any other run starts again from the tip of base.
pub fn retry_text(s: &RunSummary, node: &str) -> String {
    let run = &s.id;
    let from = if s.kind == "orchestrate" {
        "the integration tip".to_string()
    } else {
        format!("the tip of {}", s.base.as_deref().unwrap_or("base"))
    };
    format!(
        "Retrying node {node} of run {run} from {from} (old branch saved under refs/octl/snapshots/{run}/{node})\n  watch: orchestratectl run watch {run}"
    )
}

/// `--timeout S`: a number of seconds, ≥ 0.
pub fn timeout_duration(seconds: f64) -> Result<Duration, AppError> {
    if !seconds.is_finite() || !(0.0..=1e9).contains(&seconds) {
        return Err(AppError::invalid(format!(
            "invalid --timeout {seconds}: give a number of seconds from 0 to 1000000000, e.g. 300 or 2.5"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

async fn cancel(ctx: &Ctx, args: RunCancelArgs) -> Result<(), AppError> {
    let params = CancelParams {
        run: run_param(&args.run)?.run,
        discard: args.discard,
    };
    let value = ctx.client.call("run.cancel", to_params(&params)).await?;
    let summary: RunSummary = decode("run.cancel", &value)?;
    if ctx.out.json {
        ctx.out.result(&value, String::new);
        return Ok(());
    }
    // What was kept is read from the run as it is now: its snapshot refs, its branches.
    let detail: Option<RunDetail> = ctx
        .client
        .call("run.show", json!({ "run": summary.id }))
        .await
        .ok()
        .and_then(|v| serde_json::from_value(v).ok());
    ctx.out.result(&value, || match &detail {
        Some(d) => cancelled_text(d, args.discard),
        None => format!("Cancelled run {}", summary.id),
    });
    Ok(())
}

/// `Cancelled run 01…` and exactly what was kept: each node's snapshot refs (and, without
/// discard, its branch and worktree), and an orchestrate run's integration branch, which a
/// cancel never deletes.
pub fn cancelled_text(d: &RunDetail, discard: bool) -> String {
    let run = &d.manifest.id;
    let mut out = if d.manifest.status == "cancelled" {
        format!("Cancelled run {run}")
    } else {
        // `--discard` of a run that had ended: only its leftovers were removed.
        format!(
            "Run {run} had already ended ({}); removed what it left behind",
            d.manifest.status
        )
    };
    if !discard {
        out.push_str("\n  kept: every branch and worktree");
        for n in &d.nodes {
            if let (Some(b), Some(w)) = (&n.branch, &n.worktree) {
                if !n.cleaned {
                    out.push_str(&format!("\n    {}: {b} in {w}", n.id));
                }
            }
        }
    } else {
        out.push_str("\n  worktrees removed and branches deleted; kept:");
    }
    for n in &d.nodes {
        for r in &n.snapshot_refs {
            out.push_str(&format!("\n    {}: snapshot {r}", n.id));
        }
    }
    if d.manifest.kind == "orchestrate" {
        if let Some(i) = d
            .manifest
            .settings
            .get("integration")
            .and_then(Value::as_str)
        {
            if d.manifest.merge.as_deref() != Some("merged") {
                out.push_str(&format!("\n    integration branch {i} (kept)"));
            }
        }
    }
    if discard && d.nodes.iter().all(|n| n.snapshot_refs.is_empty()) {
        out.push_str("\n    nothing: no node had a worktree");
    }
    out
}

async fn attach(ctx: &Ctx, args: RunAttachArgs) -> Result<i32, AppError> {
    let run = run_param(&args.run)?.run;
    if let Some(node) = &args.node {
        validate_node_id("--node", node)?;
    }
    let value = ctx.client.call("run.show", json!({ "run": run })).await?;
    let detail: RunDetail = decode("run.show", &value)?;
    let node = pick_node(&detail, args.node.as_deref())?;
    let argv = attach_argv(&ctx.client.home().tmux_socket(), &detail.manifest.id, node);
    if !std::io::stdin().is_terminal() {
        return Err(AppError::invalid(format!(
            "run attach needs a terminal: stdin is not one, and tmux can only show the window \
             of node {} on a terminal",
            node.id
        ))
        .with_hint(format!(
            "from a terminal, run: {}",
            argv.iter()
                .map(|a| shell_word(a))
                .collect::<Vec<_>>()
                .join(" ")
        )));
    }
    let Some(tmux) = find_on_path("tmux") else {
        return Err(AppError::new(
            ErrorKind::ToolMissing,
            "cannot attach: tmux is not installed (no tmux program on PATH)",
        )
        .with_hint("install tmux (e.g. `apt install tmux` or `brew install tmux`)"));
    };
    // Only returns if the exec failed.
    let err = std::process::Command::new(&tmux).args(&argv[1..]).exec();
    Err(AppError::new(
        ErrorKind::ToolFailed,
        format!("cannot start {}: {err}", tmux.display()),
    ))
}

/// The node `run attach` shows: the one asked for; else the only one; else the first whose
/// agent is alive. Refused when that node has no window.
pub fn pick_node<'a>(d: &'a RunDetail, asked: Option<&str>) -> Result<&'a Node, AppError> {
    let id = &d.manifest.id;
    let listing = || {
        d.nodes
            .iter()
            .map(|n| format!("{} ({})", n.id, n.state.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let node = match asked {
        Some(asked) => d.nodes.iter().find(|n| n.id == asked).ok_or_else(|| {
            AppError::not_found(format!(
                "run {id} has no node {asked:?}; its nodes: {}",
                if d.nodes.is_empty() {
                    "none".to_string()
                } else {
                    listing()
                }
            ))
        })?,
        None => match d.nodes.as_slice() {
            [] => {
                return Err(AppError::not_found(format!(
                    "run {id} has no nodes, so there is no agent window to attach to"
                )))
            }
            [only] => only,
            nodes => nodes.iter().find(|n| n.state.is_alive()).ok_or_else(|| {
                AppError::invalid(format!(
                    "run {id} has {} nodes and none has a live agent: {}; choose one with --node",
                    nodes.len(),
                    listing()
                ))
            })?,
        },
    };
    let gone = node.cleaned || matches!(node.state, NodeState::Merged | NodeState::Cancelled);
    if gone || matches!(node.state, NodeState::Pending | NodeState::Ready) {
        let why = if gone {
            "its window is gone"
        } else {
            "it has no window yet: its agent has not started"
        };
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {} of run {id} is {}: {why}",
                node.id,
                node.state.as_str()
            ),
        )
        .with_hint(format!("see it with `orchestratectl run show {id}`")));
    }
    Ok(node)
}

/// `tmux -S <HOME>/tmux.sock attach-session -t <RUN>:<NODE>`. A node id of digits only would be
/// read by tmux as a window index, so such a node is targeted by its pane (`%N`) when known.
pub fn attach_argv(socket: &Path, run: &str, node: &Node) -> Vec<String> {
    let target = match &node.pane {
        Some(pane) if node.id.bytes().all(|b| b.is_ascii_digit()) => pane.clone(),
        _ => format!("{run}:{}", node.id),
    };
    vec![
        "tmux".to_string(),
        "-S".to_string(),
        socket.display().to_string(),
        "attach-session".to_string(),
        "-t".to_string(),
        target,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(id: &str, title: Option<&str>, nodes: Value) -> RunSummary {
        serde_json::from_value(json!({
            "id": id, "kind": "generic", "status": "active", "title": title,
            "repo": null, "base": null,
            "created_at": "2026-11-30T10:00:00.000Z", "updated_at": "2026-11-30T10:05:00.123Z",
            "nodes": nodes, "last_seq": 4
        }))
        .unwrap()
    }

    #[test]
    fn the_run_table() {
        let runs = vec![
            summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", Some("nightly"), json!({})),
            summary(
                "01JDXJ5R8Q4M0ZK7P2W9TB3C6F",
                None,
                json!({"done": 1, "running": 2}),
            ),
        ];
        let t = runs_table(&runs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "ID                          KIND     STATUS  NODES              UPDATED              TITLE"
        );
        assert_eq!(
            lines[1],
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6E  generic  active  -                  2026-11-30 10:05:00  nightly"
        );
        assert_eq!(
            lines[2],
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6F  generic  active  2 running, 1 done  2026-11-30 10:05:00  -"
        );
    }

    #[test]
    fn the_detail_text() {
        let d: RunDetail = serde_json::from_value(json!({
            "manifest": serde_json::to_value(summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"running":1}))).unwrap(),
            "nodes": [{"id":"api","state":"running","branch":null,"worktree":null,"agent":null,"deps":[],
                       "created_at":"t","updated_at":"t"}],
            "discussions": [], "spinoffs": []
        }))
        .unwrap();
        let text = detail_text(&d, &HashMap::new());
        assert!(
            text.starts_with("Run      01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n"),
            "{text}"
        );
        assert!(text.contains("Nodes    1 running\n"), "{text}");
        assert!(
            text.contains(
                "ID   STATE    ELAPSED  WAITING FOR  BRANCH  WORKTREE  AGENT\napi  running  -        -            -       -         -\n"
            ),
            "{text}"
        );
        assert!(!text.contains("Discussions"));
    }

    /// A `run.show` answer of an orchestrate run with the read-time node facts.
    fn dag_show() -> Value {
        let mut m = serde_json::to_value(summary(
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6E",
            Some("orders"),
            json!({"merged": 1, "running": 1, "pending": 1}),
        ))
        .unwrap();
        m["kind"] = json!("orchestrate");
        m["settings"] = json!({"integration": "octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration", "max_parallel": 4});
        let node = |id: &str, state: &str, deps: Value, extra: Value| {
            let mut n = json!({"id": id, "state": state, "branch": format!("octl/R/{id}"),
                "worktree": null, "agent": "shell", "deps": deps,
                "created_at": "t", "updated_at": "t"});
            for (k, v) in extra.as_object().unwrap() {
                n[k] = v.clone();
            }
            n
        };
        json!({
            "manifest": m,
            "nodes": [
                node("schema", "merged", json!([]), json!({"elapsed_s": 12, "waiting_for": []})),
                node("api", "running", json!(["schema"]), json!({"elapsed_s": 65, "waiting_for": []})),
                node("docs", "pending", json!(["api", "schema"]), json!({"waiting_for": ["api"]})),
            ],
            "discussions": [], "spinoffs": []
        })
    }

    #[test]
    fn elapsed_and_waiting_for_in_run_show() {
        let v = dag_show();
        let d: RunDetail = serde_json::from_value(v.clone()).unwrap();
        let extras = node_extras(&v);
        assert_eq!(
            extras["docs"],
            NodeExtra {
                elapsed_s: None,
                waiting_for: vec!["api".into()]
            }
        );
        assert_eq!(extras["api"].elapsed_s, Some(65));
        let text = detail_text(&d, &extras);
        assert!(
            text.contains("Parallel     at most 4 at once\nIntegration  octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration\n"),
            "{text}"
        );
        let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("ID ")).collect();
        assert_eq!(
            table[..4],
            [
                "ID      STATE    ELAPSED  WAITING FOR  BRANCH         WORKTREE  AGENT",
                "schema  merged   12s      -            octl/R/schema  -         shell",
                "api     running  1m05s    -            octl/R/api     -         shell",
                "docs    pending  -        api          octl/R/docs    -         shell",
            ]
        );
        // Absent or odd values do not break it.
        assert!(node_extras(&json!({})).is_empty());
        let odd =
            node_extras(&json!({"nodes": [{"id": "a", "elapsed_s": 2.7, "waiting_for": "x"}]}));
        assert_eq!(odd["a"].elapsed_s, Some(2));
        assert!(odd["a"].waiting_for.is_empty());
    }

    #[test]
    fn run_list_shows_the_nodes_of_unfinished_runs() {
        let v = dag_show();
        let d: RunDetail = serde_json::from_value(v.clone()).unwrap();
        let lines = node_lines(&d, &node_extras(&v));
        assert_eq!(
            lines,
            [
                "  schema  merged   12s",
                "  api     running  1m05s",
                "  docs    pending  -"
            ]
        );
        let runs = vec![
            summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"running": 1})),
            summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6F", None, json!({"merged": 1})),
        ];
        let mut nodes = HashMap::new();
        nodes.insert(runs[0].id.clone(), lines);
        let text = runs_text(&runs, &nodes);
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), 6, "{text}");
        assert!(got[1].starts_with("01JDXJ5R8Q4M0ZK7P2W9TB3C6E  generic"));
        assert_eq!(got[2], "  schema  merged   12s");
        assert_eq!(got[4], "  docs    pending  -");
        assert!(got[5].starts_with("01JDXJ5R8Q4M0ZK7P2W9TB3C6F  generic"));

        let mut r = summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"running": 20}));
        assert!(lists_nodes(&r));
        r.nodes.insert("pending".into(), 1);
        assert!(!lists_nodes(&r), "more than 20 nodes: counts only");
        let mut r = summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"merged": 2}));
        r.status = "completed".into();
        assert!(!lists_nodes(&r), "finished runs: counts only");
        r.status = "waiting".into();
        assert!(lists_nodes(&r));
        assert!(!lists_nodes(&summary(
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6E",
            None,
            json!({})
        )));
    }

    #[test]
    fn the_retry_text() {
        let mut s = summary("01R", None, json!({}));
        s.kind = "orchestrate".into();
        assert_eq!(
            retry_text(&s, "api"),
            "Retrying node api of run 01R from the integration tip (old branch saved under refs/octl/snapshots/01R/api)\n  watch: orchestratectl run watch 01R"
        );
        s.kind = "fanout".into();
        s.base = Some("main".into());
        assert!(
            retry_text(&s, "u1").starts_with("Retrying node u1 of run 01R from the tip of main (")
        );
    }

    fn detail_with(nodes: Value) -> RunDetail {
        serde_json::from_value(json!({
            "manifest": serde_json::to_value(summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({}))).unwrap(),
            "nodes": nodes, "discussions": [], "spinoffs": []
        }))
        .unwrap()
    }

    fn node(id: &str, state: &str) -> Value {
        json!({"id": id, "state": state, "branch": null, "worktree": null, "agent": null,
               "deps": [], "created_at": "t", "updated_at": "t"})
    }

    #[test]
    fn attach_picks_the_node() {
        let d = detail_with(json!([node("api", "exited")]));
        assert_eq!(pick_node(&d, None).unwrap().id, "api");
        let d = detail_with(json!([node("api", "merged")]));
        let err = pick_node(&d, None).unwrap_err();
        assert_eq!(err.kind.exit_code(), 4);
        assert!(
            err.message.ends_with("is merged: its window is gone"),
            "{}",
            err.message
        );
        let d = detail_with(json!([
            node("a", "merged"),
            node("b", "running"),
            node("c", "waiting")
        ]));
        assert_eq!(pick_node(&d, None).unwrap().id, "b");
        assert_eq!(pick_node(&d, Some("c")).unwrap().id, "c");
        let err = pick_node(&d, Some("zz")).unwrap_err();
        assert_eq!(err.kind.exit_code(), 3);
        assert!(
            err.message.contains("a (merged), b (running), c (waiting)"),
            "{}",
            err.message
        );
        let d = detail_with(json!([node("a", "merged"), node("b", "failed")]));
        let err = pick_node(&d, None).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(
            err.message.contains("a (merged), b (failed)"),
            "{}",
            err.message
        );
        assert!(err.message.contains("--node"), "{}", err.message);
        let d = detail_with(json!([]));
        assert_eq!(pick_node(&d, None).unwrap_err().kind.exit_code(), 3);
        let mut cleaned = node("a", "merged");
        cleaned["cleaned"] = json!(true);
        let d = detail_with(json!([cleaned]));
        let err = pick_node(&d, None).unwrap_err();
        assert_eq!(err.kind.exit_code(), 4);
        assert!(err.message.contains("window is gone"), "{}", err.message);
        let d = detail_with(json!([node("a", "pending")]));
        assert_eq!(pick_node(&d, None).unwrap_err().kind.exit_code(), 4);
    }

    #[test]
    fn the_attach_command() {
        let n: Node = serde_json::from_value(node("api", "running")).unwrap();
        let argv = attach_argv(Path::new("/h/tmux.sock"), "01JDXJ5R8Q4M0ZK7P2W9TB3C6E", &n);
        assert_eq!(
            argv,
            [
                "tmux",
                "-S",
                "/h/tmux.sock",
                "attach-session",
                "-t",
                "01JDXJ5R8Q4M0ZK7P2W9TB3C6E:api"
            ]
        );
        let mut digits = node("42", "running");
        digits["pane"] = json!("%7");
        let n: Node = serde_json::from_value(digits).unwrap();
        assert_eq!(attach_argv(Path::new("/h/s"), "R", &n)[5], "%7");
    }

    #[test]
    fn wait_timeouts_and_cancel_text() {
        assert_eq!(timeout_duration(2.5).unwrap(), Duration::from_millis(2500));
        assert_eq!(timeout_duration(0.0).unwrap(), Duration::ZERO);
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e12] {
            assert_eq!(
                timeout_duration(bad).unwrap_err().kind.exit_code(),
                2,
                "{bad}"
            );
        }
        let node = |id: &str, extra: Value| -> Value {
            let mut n = json!({"id": id, "state": "cancelled", "branch": null, "worktree": null,
                "agent": null, "deps": [], "created_at": "t", "updated_at": "t"});
            for (k, v) in extra.as_object().unwrap() {
                n[k] = v.clone();
            }
            n
        };
        let detail = |kind: &str, nodes: Vec<Value>| -> RunDetail {
            let mut m = serde_json::to_value(summary("01R", None, json!({}))).unwrap();
            m["kind"] = json!(kind);
            m["status"] = json!("cancelled");
            m["settings"] = json!({"integration": "octl/01R/integration"});
            serde_json::from_value(
                json!({"manifest": m, "nodes": nodes, "discussions": [], "spinoffs": []}),
            )
            .unwrap()
        };
        let kept = detail(
            "code",
            vec![node(
                "ui",
                json!({"branch": "octl/01R/ui", "worktree": "/w/01R/ui"}),
            )],
        );
        assert_eq!(
            cancelled_text(&kept, false),
            "Cancelled run 01R\n  kept: every branch and worktree\n    ui: octl/01R/ui in /w/01R/ui"
        );
        let gone = detail(
            "orchestrate",
            vec![node(
                "api",
                json!({"cleaned": true, "snapshot_refs": ["refs/octl/snapshots/01R/api"]}),
            )],
        );
        assert_eq!(
            cancelled_text(&gone, true),
            "Cancelled run 01R\n  worktrees removed and branches deleted; kept:\n    api: snapshot refs/octl/snapshots/01R/api\n    integration branch octl/01R/integration (kept)"
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
            "\nFailures:\n  api failed: gate failed; exit status 3; message: tests red\n    log: /h/runs/R/logs/api.log (orchestratectl run logs 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node api)\n  ui exited: no reason given\n    log: /h/runs/R/logs/ui.log (orchestratectl run logs 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node ui)\n"
        );
        assert_eq!(
            failures_text(&detail_with(json!([node("a", "merged")])), Path::new("/x")),
            ""
        );

        let c = json!({"log": "/h/runs/R/events.jsonl.corrupt", "line": 3, "reason": "not a valid event",
            "readable_events": 2, "events": [{"seq": 1, "ts": "t", "type": "run.created", "actor": "daemon", "data": {}}]});
        let text = corrupt_text("R", &c);
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

    #[test]
    fn run_refs_are_checked_locally() {
        assert_eq!(run_param("01jdxj5r").unwrap().run, "01JDXJ5R");
        let err = run_param("../etc").unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert!(
            err.message.starts_with("invalid run \"../etc\""),
            "{}",
            err.message
        );
    }
}
