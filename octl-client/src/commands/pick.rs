//! `pick RUN --node NODE | --attempt K`: a person picks a best-of-N run's winning attempt
//! (`run.pick`); the others are set aside under their snapshot refs.

use clap::Args;
use octl_proto::ids::validate_node_id;
use octl_proto::method;
use octl_proto::rpc::{PickParams, Picked, RunParams, RunShown};
use octl_proto::AppError;

use super::{call, result_of, Ctx};
use crate::commands::run::run_param;

pub const PICK_EXAMPLES: &str = "\
Examples:
  orchestratectl pick 01JDXJ5R --attempt 2     # node NODE-2 wins
  orchestratectl pick 01JDXJ5R --node fix-3
  orchestratectl --json pick 01JDXJ5R --attempt 1   # {run, judged: {ranking, reasons, by, at}}";

#[derive(Debug, Args)]
pub struct PickArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The winning attempt's node (`NODE-K`)
    #[arg(
        long,
        value_name = "NODE",
        conflicts_with = "attempt",
        required_unless_present = "attempt"
    )]
    pub node: Option<String>,

    /// The winning attempt's number K (node `NODE-K`)
    #[arg(long, value_name = "K")]
    pub attempt: Option<u32>,
}

pub async fn execute(ctx: &Ctx, args: PickArgs) -> Result<(), AppError> {
    let run = run_param(&args.run)?.run;
    let node = match (&args.node, args.attempt) {
        (Some(n), _) => {
            validate_node_id("--node", n)?;
            n.clone()
        }
        (None, Some(k)) => {
            let shown = call::<method::RunShow>(ctx, &RunParams { run: run.clone() }).await?;
            let shown: RunShown = result_of::<method::RunShow>(&shown)?;
            let suffix = format!("-{k}");
            let mut found = shown.nodes.iter().filter(|n| n.id.ends_with(&suffix));
            match (found.next(), found.next()) {
                (Some(n), None) => n.id.clone(),
                _ => {
                    return Err(AppError::invalid(format!(
                        "--attempt {k}: run {run} has no attempt NODE-{k} (see `orchestratectl run show {run}`)"
                    )))
                }
            }
        }
        (None, None) => unreachable!("clap requires one"),
    };
    let value = call::<method::RunPick>(ctx, &PickParams { run, node }).await?;
    let r: Picked = result_of::<method::RunPick>(&value)?;
    ctx.out.result(&value, || {
        format!(
            "Picked {} of run {}; the other attempts are set aside (kept under their snapshot refs)",
            r.judged.ranking.first().map_or("-", String::as_str),
            r.run
        )
    });
    Ok(())
}
