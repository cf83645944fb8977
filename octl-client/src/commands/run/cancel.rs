//! `run cancel RUN [--discard]`: stop a run, and say exactly what was kept (branches,
//! worktrees, snapshot refs, an orchestrate run's integration branch).

use crate::commands::result_of;
use clap::Args;
use octl_proto::method;
use octl_proto::projection::ListedStatus;
use octl_proto::rpc::CancelParams;
use octl_proto::rpc::RunParams;
use octl_proto::rpc::RunShown;
use octl_proto::AppError;
use octl_proto::RunKind;

use super::run_param;
use crate::commands::Ctx;

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

pub(super) async fn cancel(ctx: &Ctx, args: RunCancelArgs) -> Result<(), AppError> {
    let params = CancelParams {
        run: run_param(&args.run)?.run,
        discard: args.discard,
    };
    let value = ctx.client.call_value::<method::RunCancel>(&params).await?;
    let summary = result_of::<method::RunCancel>(&value)?;
    if ctx.out.json {
        ctx.out.result(&value, String::new);
        return Ok(());
    }
    // What was kept is read from the run as it is now: its snapshot refs, its branches.
    let detail: Option<RunShown> = ctx
        .client
        .call_method::<method::RunShow>(&RunParams {
            run: summary.id.clone(),
        })
        .await
        .ok();
    ctx.out.result(&value, || match &detail {
        Some(d) => cancelled_text(d, args.discard),
        None => format!("Cancelled run {}", summary.id),
    });
    Ok(())
}

/// `Cancelled run 01…` and exactly what was kept: each node's snapshot refs (and, without
/// discard, its branch and worktree), and an orchestrate run's integration branch, which a
/// cancel never deletes.
pub fn cancelled_text(d: &RunShown, discard: bool) -> String {
    let run = &d.manifest.id;
    let mut out = if d.manifest.status == ListedStatus::Cancelled {
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
    if d.manifest.kind == Some(RunKind::Orchestrate) {
        if let Some(i) = &d.manifest.settings.integration {
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

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use std::time::Duration;

    use super::*;
    use crate::commands::run::tests::*;
    use crate::commands::run::wait::timeout_duration;
    use serde_json::json;

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
        let detail = |kind: &str, nodes: Vec<Value>| -> RunShown {
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
}
