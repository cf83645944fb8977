//! `run budget RUN --add USD | --set USD`: the way out of a spent budget (`run.budget`). The
//! daemon records the change as `run.budget_changed`; once the budget is above what the run has
//! spent, its pending nodes start again.

use clap::{ArgGroup, Args};
use octl_proto::method;
use octl_proto::projection::RunSummary;
use octl_proto::reducer::usd;
use octl_proto::rpc::{check_budget, BudgetParams};
use octl_proto::AppError;

use super::run_param;
use crate::commands::{call, result_of, Ctx};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("amount").required(true).args(["add", "set"])))]
pub struct RunBudgetArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// Add this much (USD, above 0) to the run's budget
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub add: Option<f64>,

    /// Make this (USD) the run's budget; it must be above what the run has spent
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub set: Option<f64>,
}

pub(super) async fn budget(ctx: &Ctx, args: RunBudgetArgs) -> Result<(), AppError> {
    check_budget("--add", args.add)?;
    check_budget("--set", args.set)?;
    let params = BudgetParams {
        run: run_param(&args.run)?.run,
        add_usd: args.add,
        set_usd: args.set,
    };
    let value = call::<method::RunBudget>(ctx, &params).await?;
    let summary = result_of::<method::RunBudget>(&value)?;
    ctx.out.result(&value, || budget_text(&summary));
    Ok(())
}

/// `Run 01…'s budget is now $3 ($1.2 spent); its pending nodes start again`.
pub fn budget_text(s: &RunSummary) -> String {
    let budget = s.settings.max_budget_usd.map_or_else(|| "-".into(), usd);
    let spent = usd(s.cost_usd.unwrap_or(0.0));
    format!(
        "Run {}'s budget is now {budget} ({spent} spent); its pending nodes start again\n  watch: orchestratectl run watch {}",
        s.id, s.id
    )
}

/// How to give a run whose budget is spent more, as `run show` and `run wait` say it.
pub fn way_out(run: &str) -> String {
    format!("orchestratectl run budget {run} --add USD")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::run::tests::summary;
    use serde_json::json;

    #[test]
    fn the_budget_text() {
        let mut s = summary("01R", None, json!({"pending": 2}));
        s.settings.max_budget_usd = Some(3.0);
        s.cost_usd = Some(1.25);
        assert_eq!(
            budget_text(&s),
            "Run 01R's budget is now $3 ($1.25 spent); its pending nodes start again\n  watch: orchestratectl run watch 01R"
        );
        assert_eq!(way_out("01R"), "orchestratectl run budget 01R --add USD");
    }
}
