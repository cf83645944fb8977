//! `merge RUN [--node NODE]`: merge a node's branch into its target (a code run's base, or a
//! retry after a conflict or a blocked merge). Refusals come back as `merge_conflict` or
//! `target_dirty` (exit 4) with the daemon's hint, or one made here from `run show`.

use crate::commands::result_of;
use clap::Args;
use octl_proto::ids::validate_node_id;
use octl_proto::method;
use octl_proto::rpc::RunParams;
use octl_proto::rpc::RunShown;
use octl_proto::rpc::{MergeParams, MergeResult};
use octl_proto::{AppError, ErrorKind};
use octl_proto::{NodeState, RunKind};

use super::Ctx;
use crate::commands::run::run_param;

/// The examples of `merge --help`.
pub const MERGE_EXAMPLES: &str = "\
Examples:
  orchestratectl merge 01JDXJ5R
  orchestratectl merge 01JDXJ5R --node api
  orchestratectl merge 01JDXJ5R            # an orchestrate run: its integration branch into base
  orchestratectl --json merge 01JDXJ5R     # {run, node, state, merge_commit, target}
  orchestratectl merge 01JDXJ5R --node api --accept-failed   # a failed node, as committed

After a conflict (exit 4, kind merge_conflict): resolve it in the node's worktree
(git merge <BASE>, fix the files, commit), then run the same merge again.
After target_dirty (exit 4): commit or stash the changes in the checkout of the base
branch, then run the same merge again.";

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node to merge; default: the run's only node (needed when it has several). For an
    /// orchestrate run, leave it out to merge the integration branch into base
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,

    /// Merge a failed or exited node anyway: its branch as it is committed (uncommitted files
    /// are kept in its snapshot). Only on a human's say-so; `run retry` starts it over instead
    #[arg(long)]
    pub accept_failed: bool,
}

pub async fn execute(ctx: &Ctx, args: MergeArgs) -> Result<(), AppError> {
    let params = merge_params(&args)?;
    let value = match ctx.client.call_value::<method::Merge>(&params).await {
        Ok(v) => v,
        Err(e) => return Err(with_merge_hint(ctx, e, &params).await),
    };
    let r = result_of::<method::Merge>(&value)?;
    ctx.out.result(&value, || merged_text(&r));
    Ok(())
}

/// `{run, node?}`, checked.
pub fn merge_params(args: &MergeArgs) -> Result<MergeParams, AppError> {
    if let Some(node) = &args.node {
        validate_node_id("--node", node)?;
    }
    Ok(MergeParams {
        run: run_param(&args.run)?.run,
        node: args.node.clone(),
        accept_failed: args.accept_failed,
    })
}

/// `Merged node api of run 01… into main at 3f2a…`; for an orchestrate run's integration
/// branch (no node): `Merged octl/01…/integration of run 01… into main at 3f2a…`.
pub fn merged_text(r: &MergeResult) -> String {
    let what = match &r.node {
        Some(node) => format!("node {node}"),
        None => integration_of(&r.run),
    };
    if r.state == NodeState::Merged {
        format!(
            "Merged {what} of run {} into {} at {}",
            r.run, r.target, r.merge_commit
        )
    } else {
        let what = match &r.node {
            Some(node) => format!("Node {node}"),
            None => what,
        };
        format!(
            "{what} of run {} is {} (merge into {} at {})",
            r.run,
            r.state.as_str(),
            r.target,
            r.merge_commit
        )
    }
}

/// The integration branch of an orchestrate run, as the daemon names it.
fn integration_of(run: &str) -> String {
    format!("octl/{run}/integration")
}

/// A refused merge keeps the daemon's hint; without one, says what to do, naming the node's
/// worktree when `run show` can tell it.
async fn with_merge_hint(ctx: &Ctx, err: AppError, params: &MergeParams) -> AppError {
    if err.hint.is_some() || !matches!(err.kind, ErrorKind::MergeConflict | ErrorKind::TargetDirty)
    {
        return err;
    }
    let show = RunParams {
        run: params.run.clone(),
    };
    let detail = ctx.client.call_method::<method::RunShow>(&show).await.ok();
    let hint = merge_hint(
        err.kind,
        detail.as_ref(),
        &params.run,
        params.node.as_deref(),
    );
    err.with_hint(hint)
}

/// What to do after a refused merge.
pub fn merge_hint(
    kind: ErrorKind,
    detail: Option<&RunShown>,
    run: &str,
    node: Option<&str>,
) -> String {
    let run_id = detail.map(|d| d.manifest.id.as_str()).unwrap_or(run);
    let base = detail
        .and_then(|d| d.manifest.base.as_deref())
        .unwrap_or("BASE");
    let orchestrate = detail.is_some_and(|d| d.manifest.kind == Some(RunKind::Orchestrate));
    if orchestrate && node.is_none() {
        let integration = integration_of(run_id);
        return match kind {
            ErrorKind::MergeConflict => format!(
                "resolve it on {integration}: check it out in a worktree (`git worktree add ../integration {integration}`), `git merge {base}`, fix the files, commit; then run `orchestratectl merge {run_id}` again"
            ),
            _ => format!(
                "commit or stash the uncommitted changes in the checkout of {base} (see `git worktree list`), then run `orchestratectl merge {run_id}` again"
            ),
        };
    }
    let n = detail.and_then(|d| match node {
        Some(id) => d.nodes.iter().find(|n| n.id == id),
        None => d.nodes.first(),
    });
    let again = match n.map(|n| n.id.as_str()).or(node) {
        Some(id) => format!("orchestratectl merge {run_id} --node {id}"),
        None => format!("orchestratectl merge {run_id}"),
    };
    match kind {
        ErrorKind::MergeConflict => {
            let worktree = n
                .and_then(|n| n.worktree.as_deref())
                .unwrap_or("the node's worktree");
            format!(
                "resolve it in {worktree}: `git merge {base}`, fix the files, commit; then run `{again}` again"
            )
        }
        _ => format!(
            "commit or stash the uncommitted changes in the checkout of {base} (see `git worktree list`), then run `{again}` again"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_and_text() {
        let p = merge_params(&MergeArgs {
            run: "01jdxj5r".into(),
            node: None,
            accept_failed: false,
        })
        .unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"run": "01JDXJ5R"})
        );
        let err = merge_params(&MergeArgs {
            run: "01JDXJ5R".into(),
            node: Some("a b".into()),
            accept_failed: false,
        })
        .unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);

        let r: MergeResult = serde_json::from_value(json!({"run": "01R", "node": "api",
            "state": "merged", "merge_commit": "abc123", "target": "main"}))
        .unwrap();
        assert_eq!(
            merged_text(&r),
            "Merged node api of run 01R into main at abc123"
        );
        let r: MergeResult = serde_json::from_value(json!({"run": "01R", "node": null,
            "state": "merged", "merge_commit": "abc123", "target": "main"}))
        .unwrap();
        assert_eq!(
            merged_text(&r),
            "Merged octl/01R/integration of run 01R into main at abc123"
        );
        let r: MergeResult = serde_json::from_value(json!({"run": "01R", "node": "api",
            "state": "merging", "merge_commit": "abc123", "target": "main"}))
        .unwrap();
        assert_eq!(
            merged_text(&r),
            "Node api of run 01R is merging (merge into main at abc123)"
        );
    }

    #[test]
    fn hints_name_the_worktree() {
        let d: RunShown = serde_json::from_value(json!({
            "manifest": {"id": "01JDXJ5R8Q4M0ZK7P2W9TB3C6E", "kind": "code", "status": "waiting",
                "title": null, "repo": "/r", "base": "main", "created_at": "t", "updated_at": "t",
                "nodes": {"conflict": 1}, "last_seq": 9},
            "nodes": [{"id": "api", "state": "conflict", "branch": "b", "worktree": "/w/api",
                "agent": "shell", "deps": [], "created_at": "t", "updated_at": "t"}],
            "discussions": [], "spinoffs": []
        }))
        .unwrap();
        let h = merge_hint(ErrorKind::MergeConflict, Some(&d), "01JDXJ", None);
        assert_eq!(
            h,
            "resolve it in /w/api: `git merge main`, fix the files, commit; then run `orchestratectl merge 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node api` again"
        );
        let h = merge_hint(ErrorKind::TargetDirty, None, "01JDXJ", None);
        assert!(h.contains("orchestratectl merge 01JDXJ`"), "{h}");
        let mut d = d;
        d.manifest.kind = Some(RunKind::Orchestrate);
        let h = merge_hint(ErrorKind::MergeConflict, Some(&d), "01JDXJ", None);
        assert!(
            h.starts_with("resolve it on octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration:"),
            "{h}"
        );
        assert!(
            h.ends_with("`orchestratectl merge 01JDXJ5R8Q4M0ZK7P2W9TB3C6E` again"),
            "{h}"
        );
    }
}
