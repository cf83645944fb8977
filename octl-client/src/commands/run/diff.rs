//! `run diff RUN --node NODE [--against OTHER]`: what a node's agent changed (`node.diff`: its
//! worktree against the merge base), or the difference between two nodes' work — a best-of-N
//! run's attempts side by side — from their branches, or their snapshot refs once cleaned up.

use clap::Args;
use octl_proto::ids::validate_node_id;
use octl_proto::method;
use octl_proto::rpc::{NodeDiffParams, RunParams, RunShown};
use octl_proto::{AppError, ErrorKind};

use super::run_param;
use crate::commands::{call, result_of, Ctx};

pub const DIFF_EXAMPLES: &str = "\
Examples:
  orchestratectl run diff 01JDXJ5R --node api              # its work against the merge base
  orchestratectl run diff 01JDXJ5R --node fix-2 --against fix-1   # two attempts' work
  orchestratectl --json run diff 01JDXJ5R --node api       # {run, node, base, from, diff, truncated}";

#[derive(Debug, Args)]
pub struct RunDiffArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node whose work is shown
    #[arg(long, value_name = "NODE")]
    pub node: String,

    /// Another node of the run: the diff from its work to NODE's
    #[arg(long, value_name = "OTHER")]
    pub against: Option<String>,
}

pub(super) async fn diff(ctx: &Ctx, args: RunDiffArgs) -> Result<(), AppError> {
    validate_node_id("--node", &args.node)?;
    let run = run_param(&args.run)?.run;
    let Some(other) = &args.against else {
        let value = call::<method::NodeDiff>(
            ctx,
            &NodeDiffParams {
                run,
                node: args.node.clone(),
                since: None,
            },
        )
        .await?;
        let d = result_of::<method::NodeDiff>(&value)?;
        ctx.out.result(&value, || {
            octl_proto::text::text_lines(d.diff.as_bytes()).join("\n")
        });
        return Ok(());
    };
    validate_node_id("--against", other)?;
    let shown = call::<method::RunShow>(ctx, &RunParams { run: run.clone() }).await?;
    let shown: RunShown = result_of::<method::RunShow>(&shown)?;
    let repo =
        shown.manifest.repo.clone().ok_or_else(|| {
            AppError::invalid(format!("run {run} has no repository to compare in"))
        })?;
    let run_id = shown.manifest.id.clone();
    // A node's work: its branch while it is there, else its snapshot.
    let tip = |node: &str| -> Result<String, AppError> {
        let n = shown
            .nodes
            .iter()
            .find(|n| n.id == node)
            .ok_or_else(|| AppError::not_found(format!("run {run_id} has no node {node:?}")))?;
        let snapshot = format!("refs/octl/snapshots/{run_id}/{node}");
        let candidates = n
            .branch
            .iter()
            .map(|b| format!("refs/heads/{b}"))
            .chain([snapshot]);
        for r in candidates {
            let ok = std::process::Command::new("git")
                .args([
                    "-C",
                    &repo,
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("{r}^{{commit}}"),
                ])
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return Ok(r);
            }
        }
        Err(AppError::new(
            ErrorKind::NotFound,
            format!("node {node} of run {run_id} has neither a branch nor a snapshot to compare"),
        ))
    };
    let (from, to) = (tip(other)?, tip(&args.node)?);
    let out = std::process::Command::new("git")
        .args([
            "-C",
            &repo,
            "diff",
            "--no-color",
            "--no-ext-diff",
            &from,
            &to,
        ])
        .output()
        .map_err(|e| AppError::new(ErrorKind::ToolFailed, format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            format!(
                "git diff {from} {to}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = serde_json::json!({"run": run_id, "node": args.node, "against": other, "from": from, "to": to, "diff": text});
    ctx.out.result(&value, || {
        octl_proto::text::text_lines(text.as_bytes()).join("\n")
    });
    Ok(())
}
