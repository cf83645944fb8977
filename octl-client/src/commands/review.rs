//! `review RUN [--node N] --comment TEXT… [--file PATH] | --approve`: a person's review of a
//! node's work. Comments go back to its agent as its next message (the daemon says how:
//! typed into its live session, its conversation resumed, or a new attempt in the same
//! worktree and branch) and it reports done again; `--approve` accepts the work as it is (a
//! code run's node merges).

use clap::Args;
use octl_proto::ids::validate_node_id;
use octl_proto::method;
use octl_proto::rpc::{ReviewParams, Reviewed, REVIEW_TEXT_MAX};
use octl_proto::state::ReviewWay;
use octl_proto::AppError;

use super::{call, result_of, Ctx};
use crate::commands::run::run_param;

pub const REVIEW_EXAMPLES: &str = "\
Examples:
  orchestratectl review 01JDXJ5R --comment 'src/x.rs:42: use the existing helper'
  orchestratectl review 01JDXJ5R --node api --comment 'a.rs: no unwrap' --comment 'add a test'
  orchestratectl review 01JDXJ5R --file review.md       # a longer review, in Markdown
  orchestratectl review 01JDXJ5R --approve              # a code run: merges the node
  orchestratectl --json review 01JDXJ5R --comment '…'   # {run, node, review, state, file}";

#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node reviewed; default: the run's only node (needed when it has several)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,

    /// One remark (`src/x.rs:42: use the existing helper`); repeat for more, up to 100
    #[arg(long = "comment", value_name = "TEXT")]
    pub comments: Vec<String>,

    /// A longer review (Markdown, at most 64 KiB) from this file, or standard input with `-`
    #[arg(long, value_name = "PATH|-")]
    pub file: Option<std::path::PathBuf>,

    /// Accept the work as it is, without comments (a code run's node is merged)
    #[arg(long, conflicts_with_all = ["comments", "file"])]
    pub approve: bool,
}

pub async fn execute(ctx: &Ctx, args: ReviewArgs) -> Result<(), AppError> {
    // A person reviews; an agent does not approve its own work.
    super::node::refuse_inside_an_agent("review work")?;
    let params = review_params(&args)?;
    let value = call::<method::NodeReview>(ctx, &params).await?;
    let r = result_of::<method::NodeReview>(&value)?;
    ctx.out.result(&value, || reviewed_text(&r));
    Ok(())
}

/// The params, each flag checked.
pub fn review_params(args: &ReviewArgs) -> Result<ReviewParams, AppError> {
    if let Some(node) = &args.node {
        validate_node_id("--node", node)?;
    }
    let text =
        crate::text_file::text_or_file("--file", None, args.file.as_deref(), REVIEW_TEXT_MAX)?;
    if !args.approve && args.comments.is_empty() && text.is_none() {
        return Err(AppError::invalid(
            "missing --comment: give at least one --comment, a --file, or --approve",
        ));
    }
    Ok(ReviewParams {
        run: run_param(&args.run)?.run,
        node: args.node.clone(),
        comments: args.comments.clone(),
        text,
        approve: args.approve,
    })
}

/// `Review 1 of node api (run 01…): typed into its session; it reports done again when it
/// has made the changes.`
pub fn reviewed_text(r: &Reviewed) -> String {
    let what = format!(
        "review {} of node {} (run {})",
        r.review.round, r.node, r.run
    );
    let how = match r.review.way {
        None => format!("approved; the node is {}", r.state.as_str()),
        Some(ReviewWay::Typed) => "typed into its agent's session".to_string(),
        Some(ReviewWay::Resumed) => {
            "its agent's conversation goes on with it, in the same worktree and branch".to_string()
        }
        Some(ReviewWay::Attempt) => {
            "a new attempt of its agent starts with it, in the same worktree and branch".to_string()
        }
    };
    let mut s = format!("Recorded {what}: {how}");
    if r.review.way.is_some() {
        s.push_str("; it is merged as before once it reports done again");
        if let Some(f) = &r.file {
            s.push_str(&format!("\nThe whole review: {f}"));
        }
    }
    s
}
