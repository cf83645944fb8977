//! `run budget`: the way out of a spent budget. A person gives the run more to spend (so much
//! more, or a new budget); the change is one event, `run.budget_changed`, which the reducer
//! folds into the run's budget and which clears `budget_spent`. Nothing else is done here: the
//! event wakes the scheduler like any other, and it starts the pending nodes (their agents get
//! what is left of the new budget).

use std::sync::Arc;

use octl_proto::event::RunBudgetChanged;
use octl_proto::reducer::budget_after;
use octl_proto::{AppError, ErrorKind, RunKind};

use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};

/// Records the change, checked first against the run as it is now (the reducer checks it
/// again as it folds it, so a change that is no longer above the spending is refused then).
pub async fn change(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    add_usd: Option<f64>,
    set_usd: Option<f64>,
) -> Result<(), AppError> {
    let view = handle.view();
    let m = &view.manifest;
    budget_after(
        m.settings.max_budget_usd,
        m.cost_usd.unwrap_or(0.0),
        add_usd,
        set_usd,
        ["add_usd", "set_usd"],
    )?;
    if m.kind == Some(RunKind::Generic) {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "run {} is a generic run: the daemon starts none of its nodes, so it has no budget",
                handle.id
            ),
        ));
    }
    daemon
        .store
        .append(
            handle,
            Draft::daemon(
                None,
                RunBudgetChanged {
                    add_usd,
                    budget_usd: set_usd,
                },
            ),
            false,
        )
        .await?;
    let after = handle.view();
    tracing::info!(run = %handle.id, budget = ?after.manifest.settings.max_budget_usd, spent = ?after.manifest.cost_usd, "the run's budget changed");
    Ok(())
}
