//! `run retry RUN --node NODE`: start a failed or conflicting node again.

use crate::commands::result_of;
use clap::Args;
use octl_proto::ids::validate_node_id;
use octl_proto::method;
use octl_proto::projection::RunSummary;
use octl_proto::rpc::RetryParams;
use octl_proto::AppError;
use octl_proto::RunKind;

use super::run_param;
use crate::commands::{call, Ctx};

#[derive(Debug, Args)]
pub struct RunRetryArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node to start again (a failed or conflicting one)
    #[arg(long, value_name = "NODE")]
    pub node: String,

    /// Continue the node's Claude Code conversation (`claude --resume`) in its kept worktree
    /// and branch, commits included, instead of starting over: for an agent that died
    /// (its window or tmux server gone, a signal)
    #[arg(long)]
    pub resume: bool,
}

pub(super) async fn retry(ctx: &Ctx, args: RunRetryArgs) -> Result<(), AppError> {
    validate_node_id("--node", &args.node)?;
    let params = RetryParams {
        run: run_param(&args.run)?.run,
        node: args.node.clone(),
        resume: args.resume,
    };
    let value = call::<method::RunRetry>(ctx, &params).await?;
    let summary = result_of::<method::RunRetry>(&value)?;
    ctx.out.result(&value, || {
        if args.resume {
            resume_text(&summary, &args.node)
        } else {
            retry_text(&summary, &args.node)
        }
    });
    Ok(())
}

/// `Retrying node api of run 01… from the integration tip (old branch saved under …)`; a
/// node of any other run starts again from the tip of base.
pub fn retry_text(s: &RunSummary, node: &str) -> String {
    let run = &s.id;
    let from = if s.kind == Some(RunKind::Orchestrate) {
        "the integration tip".to_string()
    } else {
        format!("the tip of {}", s.base.as_deref().unwrap_or("base"))
    };
    format!(
        "Retrying node {node} of run {run} from {from} (old branch saved under refs/octl/snapshots/{run}/{node})\n  watch: orchestratectl run watch {run}"
    )
}

/// `Resuming node api of run 01… in its worktree (its Claude Code conversation goes on)`.
pub fn resume_text(s: &RunSummary, node: &str) -> String {
    let run = &s.id;
    format!(
        "Resuming node {node} of run {run} in its worktree and branch (its Claude Code conversation goes on)\n  watch: orchestratectl run watch {run}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::run::tests::*;
    use serde_json::json;

    #[test]
    fn the_retry_text() {
        let mut s = summary("01R", None, json!({}));
        s.kind = Some(RunKind::Orchestrate);
        assert_eq!(
            retry_text(&s, "api"),
            "Retrying node api of run 01R from the integration tip (old branch saved under refs/octl/snapshots/01R/api)\n  watch: orchestratectl run watch 01R"
        );
        s.kind = Some(RunKind::Fanout);
        s.base = Some("main".into());
        assert!(
            retry_text(&s, "u1").starts_with("Retrying node u1 of run 01R from the tip of main (")
        );
    }
}
