//! `orchestrate --plan FILE …`: a DAG of nodes through an integration branch. Like `fan-out`,
//! the CLI reads the file and sends its text; the daemon validates the plan (unknown deps,
//! duplicate ids, cycles) and reports every problem at once.

use octl_proto::method::{self, Method};
use std::path::Path;

use clap::Args;
use octl_proto::projection::RunSummary;
use octl_proto::rpc::OrchestrateParams;
use octl_proto::AppError;

use super::fanout::{common_params, current_dir, node_total, read_input_file, started, StartArgs};
use super::{call, Ctx};

/// The examples of `orchestrate --help`.
pub const ORCHESTRATE_EXAMPLES: &str = "\
Examples:
  orchestratectl orchestrate --plan plan.toml
  orchestratectl orchestrate --plan plan.json --auto-merge --max-parallel 4 --wait
  orchestratectl orchestrate --plan plan.toml --agent shell --base develop
  orchestratectl orchestrate --plan plan.toml --runner cluster   # nodes without a runner
  orchestratectl --json orchestrate --plan plan.toml     # the run summary
  orchestratectl run watch 01JDXJ5R                      # then see it go
  orchestratectl merge 01JDXJ5R                          # when every node is merged

A plan (plan.toml): api and ui start once schema is merged into integration; docs last.
  [[nodes]]
  id = \"schema\"
  task = \"add the orders table and its migration\"
  [[nodes]]
  id = \"api\"
  task = \"add the /orders endpoints\"
  deps = [\"schema\"]
  [[nodes]]
  id = \"ui\"
  task = \"add the orders page\"
  deps = [\"schema\"]
  [[nodes]]
  id = \"docs\"
  task = \"document orders\"
  deps = [\"api\", \"ui\"]";

#[derive(Debug, Args)]
pub struct OrchestrateArgs {
    /// The plan: a .toml or .json file of at most 1 MiB (symlinks and '..' are resolved; its
    /// text is sent to the daemon, which keeps a copy in the run's directory)
    #[arg(long, value_name = "FILE")]
    pub plan: std::path::PathBuf,

    /// When every node is merged into the integration branch, merge it into base too
    /// (otherwise the run completes and waits for `orchestratectl merge RUN`)
    #[arg(long)]
    pub auto_merge: bool,

    #[command(flatten)]
    pub common: StartArgs,
}

pub async fn execute(ctx: &Ctx, args: OrchestrateArgs) -> Result<i32, AppError> {
    let params = orchestrate_params(&args, &current_dir()?)?;
    let value = call::<method::OrchestrateStart>(ctx, &params).await?;
    let auto_merge = args.auto_merge;
    started(
        ctx,
        method::OrchestrateStart::NAME,
        value,
        args.common.wait,
        |s| orchestrate_text(s, auto_merge),
    )
    .await
}

/// `{plan, format, plan_path, repo, base?, agent?, max_parallel?, auto_merge}`.
pub fn orchestrate_params(
    args: &OrchestrateArgs,
    cwd: &Path,
) -> Result<OrchestrateParams, AppError> {
    let common = common_params(&args.common, cwd)?;
    let file = read_input_file("--plan", &args.plan, cwd)?;
    Ok(OrchestrateParams {
        plan: file.text,
        format: file.format.as_str().to_string(),
        plan_path: Some(file.path),
        repo: common.repo,
        base: common.base,
        agent: common.agent,
        max_parallel: common.max_parallel,
        auto_merge: args.auto_merge,
        max_budget_usd: common.max_budget_usd,
        runner: common.runner,
        permissions: common.permissions,
        review: common.review,
        sandbox: common.sandbox,
    })
}

/// The integration branch of an orchestrate run: `settings.integration`, else the name the
/// daemon gives it (`octl/<RUN>/integration`).
pub fn integration_branch(s: &RunSummary) -> String {
    s.settings
        .integration
        .clone()
        .unwrap_or_else(|| format!("octl/{}/integration", s.id))
}

/// ```text
/// Started orchestrate run 01…: 4 nodes through octl/01…/integration
///   watch: orchestratectl run watch 01…
///   when every node is merged: orchestratectl merge 01…
/// ```
pub fn orchestrate_text(s: &RunSummary, auto_merge: bool) -> String {
    let n = node_total(s);
    let nodes = if n == 1 { "node" } else { "nodes" };
    let id = &s.id;
    let mut text = format!(
        "Started orchestrate run {id}: {n} {nodes} through {}\n  watch: orchestratectl run watch {id}\n",
        integration_branch(s)
    );
    if auto_merge {
        let base = s.base.as_deref().unwrap_or("base");
        text.push_str(&format!(
            "  when every node is merged, the integration branch is merged into {base}\n"
        ));
    } else {
        text.push_str(&format!(
            "  when every node is merged: orchestratectl merge {id}\n"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::{json, Value};

    fn params(a: &OrchestrateArgs, cwd: &Path) -> Result<Value, AppError> {
        Ok(serde_json::to_value(orchestrate_params(a, cwd)?).unwrap())
    }

    fn args(plan: &str, auto_merge: bool) -> OrchestrateArgs {
        OrchestrateArgs {
            plan: plan.into(),
            auto_merge,
            common: StartArgs {
                max_parallel: None,
                max_budget_usd: None,
                repo: None,
                base: None,
                agent: None,
                runner: None,
                rules: Default::default(),
                review: false,
                sandbox: None,
                wait: false,
            },
        }
    }

    #[test]
    fn params_from_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let text = "{\"nodes\":[{\"id\":\"a\",\"task\":\"x\",\"deps\":[]}]}";
        std::fs::write(root.join("plan.json"), text).unwrap();
        let p = params(&args("plan.json", false), &root).unwrap();
        assert_eq!(
            p,
            json!({"plan": text, "format": "json",
                   "plan_path": root.join("plan.json").to_str().unwrap(),
                   "repo": root.to_str().unwrap(), "auto_merge": false})
        );
        let mut a = args("plan.json", true);
        a.common.max_parallel = Some("4".into());
        a.common.agent = Some("shell".into());
        let p = params(&a, &root).unwrap();
        assert_eq!(p["auto_merge"], true);
        assert_eq!(p["max_parallel"], 4);
        assert_eq!(p["agent"], "shell");

        let err = params(&args("missing.toml", false), &root).unwrap_err();
        assert_eq!(err.kind.exit_code(), 3);
        assert_eq!(err.message, "invalid --plan \"missing.toml\": no such file");
        let err = params(&args(".", false), &root).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
    }

    #[test]
    fn the_started_text() {
        let s: RunSummary = serde_json::from_value(json!({
            "id": "01JDXJ5R8Q4M0ZK7P2W9TB3C6E", "kind": "orchestrate", "status": "active",
            "title": null, "repo": "/r", "base": "main", "created_at": "t", "updated_at": "t",
            "nodes": {"pending": 3, "starting": 1}, "last_seq": 9,
            "settings": {"integration": "octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration"}
        }))
        .unwrap();
        assert_eq!(
            orchestrate_text(&s, false),
            "Started orchestrate run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E: 4 nodes through octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration\n  watch: orchestratectl run watch 01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n  when every node is merged: orchestratectl merge 01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n"
        );
        assert!(orchestrate_text(&s, true).ends_with(
            "  when every node is merged, the integration branch is merged into main\n"
        ));
        let mut s = s;
        s.settings = Default::default();
        assert_eq!(
            integration_branch(&s),
            "octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration"
        );
    }
}
