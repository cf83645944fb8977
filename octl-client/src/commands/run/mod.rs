//! `run create|list|show|rebuild|wait|watch|retry|budget|cancel|attach|quarantine`: the group's clap
//! types and dispatch, and the small commands (`create`, `rebuild`, `quarantine`); the others
//! each have a file here (`wait` holds `watch` too). `run logs` is in [`super::logs`], `run gc`
//! in [`super::recover`]. JSON output is the daemon's result as it came; the human output
//! reads it through the `octl-proto` projection types, plus the read-time node facts of
//! `run.show` (`elapsed_s`, `waiting_for`). `wait` and `watch` follow the run through
//! [`crate::follow`]; `attach` replaces this process with the command the node's runner gives.

use crate::commands::result_of;
use clap::{Args, Subcommand};
use octl_proto::ids::parse_run_ref;
use octl_proto::method;
use octl_proto::rpc::{RunCreateParams, RunParams};
use octl_proto::AppError;

use super::{call, Ctx};

pub mod attach;
pub mod budget;
pub mod cancel;
pub mod diff;
pub mod list;
pub mod retry;
pub mod show;
pub mod wait;

/// The examples of `run --help`.
pub const RUN_EXAMPLES: &str = "\
Examples:
  orchestratectl run list --status active
  orchestratectl run show 01JDXJ5R
  orchestratectl run watch 01JDXJ5R
  orchestratectl run logs 01JDXJ5R --node api --follow
  orchestratectl run wait 01JDXJ5R --timeout 600
  orchestratectl run retry 01JDXJ5R --node api
  orchestratectl run budget 01JDXJ5R --add 5
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

    /// List runs, oldest first (all of them, or those that pass every filter given)
    #[command(after_help = "\
Examples:
  orchestratectl run list
  orchestratectl run list --status waiting
  orchestratectl run list --status waiting,failed --repo . --limit 20
  orchestratectl --json run list")]
    List(list::RunListArgs),

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

    /// Show what a node's agent changed (its worktree against the merge base), or the
    /// difference between two nodes' work (`--against`: a best-of-N run's attempts)
    ///
    /// Agents' text: escape sequences and control characters are removed.
    #[command(after_help = diff::DIFF_EXAMPLES)]
    Diff(diff::RunDiffArgs),

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
    Wait(wait::RunWaitArgs),

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
  orchestratectl run retry 01JDXJ5R --node api --resume   # its agent died: go on where it was
  orchestratectl --json run retry 01JDXJ5R --node api   # the run summary")]
    Retry(retry::RunRetryArgs),

    /// Give a run more to spend: --add USD to its budget, or --set USD as its budget
    ///
    /// A run whose agents have cost its budget (--max-budget-usd) starts no new node
    /// (`run show`: "budget spent"); this is the way out. The new budget must be above what
    /// the run has spent; it is recorded in the run's log (`run.budget_changed`), and the
    /// run's pending nodes then start again, each Claude Code session getting what is left.
    /// A bad amount exits 2 (invalid_params, naming the flag) and changes nothing; a run that
    /// ended exits 4.
    #[command(after_help = "\
Examples:
  orchestratectl run budget 01JDXJ5R --add 5        # $5 more than its budget
  orchestratectl run budget 01JDXJ5R --set 20       # a budget of $20 in all
  orchestratectl --json run budget 01JDXJ5R --add 5 # the run summary")]
    Budget(budget::RunBudgetArgs),

    /// Stop a run: its agents are stopped; its branches and worktrees are kept unless --discard
    ///
    /// A run that already ended is refused (exit 4, invalid_transition); with --discard, what
    /// it left behind is removed (after a snapshot). Refused too while a node is merging: the
    /// merge has begun moving the branch; cancel again once it has ended.
    #[command(after_help = "\
Examples:
  orchestratectl run cancel 01JDXJ5R
  orchestratectl run cancel 01JDXJ5R --discard   # work saved under refs/octl/snapshots/, then removed")]
    Cancel(cancel::RunCancelArgs),

    /// Attach this terminal to a node's agent window (tmux; detach with Ctrl-b d)
    ///
    /// Replaces this process with the command the node's runner gives (`node.attach`): for
    /// the local runner `tmux -S $OCTL_HOME/tmux.sock attach-session -t RUN:NODE` on the
    /// daemon's private tmux server; on Slurm `srun --overlap --pty --jobid JOB …` into the
    /// agent's tmux inside the job. Needs a terminal.
    #[command(after_help = "\
Examples:
  orchestratectl run attach 01JDXJ5R
  orchestratectl run attach 01JDXJ5R --node api")]
    Attach(attach::RunAttachArgs),

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
pub struct RunArg {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,
}

pub async fn execute(ctx: &Ctx, cmd: RunCmd) -> Result<i32, AppError> {
    match cmd {
        RunCmd::Create(args) => create(ctx, args).await.map(|()| 0),
        RunCmd::List(args) => list::list(ctx, args).await.map(|()| 0),
        RunCmd::Show(arg) => show::show(ctx, arg).await.map(|()| 0),
        RunCmd::Diff(args) => diff::diff(ctx, args).await.map(|()| 0),
        RunCmd::Rebuild(arg) => rebuild(ctx, arg).await.map(|()| 0),
        RunCmd::Wait(args) => wait::wait(ctx, args).await,
        RunCmd::Watch(arg) => wait::watch(ctx, arg).await,
        RunCmd::Retry(args) => retry::retry(ctx, args).await.map(|()| 0),
        RunCmd::Budget(args) => budget::budget(ctx, args).await.map(|()| 0),
        RunCmd::Cancel(args) => cancel::cancel(ctx, args).await.map(|()| 0),
        RunCmd::Attach(args) => attach::attach(ctx, args).await,
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

async fn create(ctx: &Ctx, args: RunCreateArgs) -> Result<(), AppError> {
    let params = RunCreateParams {
        kind: args.kind,
        title: args.title,
    };
    let value = ctx.client.call_value::<method::RunCreate>(&params).await?;
    let run = result_of::<method::RunCreate>(&value)?;
    ctx.out.result(&value, || {
        format!("Created run {} ({})", run.id, run.kind_name())
    });
    Ok(())
}

async fn quarantine(ctx: &Ctx, arg: RunArg) -> Result<(), AppError> {
    let params = run_param(&arg.run)?;
    let value = call::<method::RunQuarantine>(ctx, &params).await?;
    let q = result_of::<method::RunQuarantine>(&value)?;
    ctx.out.result(&value, || {
        format!(
            "Set run {} aside: moved to {}\n  the daemon no longer lists it; nothing was deleted",
            q.run, q.moved_to
        )
    });
    Ok(())
}

async fn rebuild(ctx: &Ctx, arg: RunArg) -> Result<(), AppError> {
    let params = run_param(&arg.run)?;
    let value = ctx.client.call_value::<method::RunRebuild>(&params).await?;
    let r = result_of::<method::RunRebuild>(&value)?;
    ctx.out.result(&value, || {
        format!(
            "Rebuilt {} projection files of run {} from {} events",
            r.files, r.run, r.events
        )
    });
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use octl_proto::projection::RunSummary;
    use octl_proto::rpc::RunShown;
    use serde_json::{json, Value};

    pub(crate) fn summary(id: &str, title: Option<&str>, nodes: Value) -> RunSummary {
        serde_json::from_value(json!({
            "id": id, "kind": "generic", "status": "active", "title": title,
            "repo": null, "base": null,
            "created_at": "2026-11-30T10:00:00.000Z", "updated_at": "2026-11-30T10:05:00.123Z",
            "nodes": nodes, "last_seq": 4
        }))
        .unwrap()
    }

    /// A `run.show` answer of an orchestrate run with the read-time node facts.
    pub(super) fn dag_show() -> Value {
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

    pub(super) fn detail_with(nodes: Value) -> RunShown {
        serde_json::from_value(json!({
            "manifest": serde_json::to_value(summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({}))).unwrap(),
            "nodes": nodes, "discussions": [], "spinoffs": []
        }))
        .unwrap()
    }

    pub(super) fn node(id: &str, state: &str) -> Value {
        json!({"id": id, "state": state, "branch": null, "worktree": null, "agent": null,
               "deps": [], "created_at": "t", "updated_at": "t"})
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
