//! `run create|list|show|rebuild`. JSON output is the daemon's result as it came; the human
//! output reads it through the `octl-proto` projection types.

use octl_proto::ids::parse_run_ref;
use octl_proto::projection::{RunDetail, RunSummary};
use octl_proto::rpc::{RebuildResult, RunCreateParams, RunListParams, RunParams};
use octl_proto::AppError;
use serde_json::Value;

use super::{decode, Ctx};
use crate::cli::{RunArg, RunCmd, RunCreateArgs, RunListArgs};
use crate::output::{cell, fields, node_counts, short_time, table};

pub async fn execute(ctx: &Ctx, cmd: RunCmd) -> Result<(), AppError> {
    match cmd {
        RunCmd::Create(args) => create(ctx, args).await,
        RunCmd::List(args) => list(ctx, args).await,
        RunCmd::Show(arg) => show(ctx, arg).await,
        RunCmd::Rebuild(arg) => rebuild(ctx, arg).await,
    }
}

/// The `run` param for a positional RUN, validated and normalised.
pub fn run_param(given: &str) -> Result<RunParams, AppError> {
    Ok(RunParams {
        run: parse_run_ref("run", given)?.as_str().to_string(),
    })
}

fn to_params<T: serde::Serialize>(params: &T) -> Value {
    serde_json::to_value(params).expect("RPC params always serialize")
}

async fn create(ctx: &Ctx, args: RunCreateArgs) -> Result<(), AppError> {
    let params = RunCreateParams {
        kind: args.kind,
        title: args.title,
    };
    let value = ctx.client.call("run.create", to_params(&params)).await?;
    let run: RunSummary = decode("run.create", &value)?;
    ctx.out
        .result(&value, || format!("Created run {} ({})", run.id, run.kind));
    Ok(())
}

async fn list(ctx: &Ctx, args: RunListArgs) -> Result<(), AppError> {
    let params = RunListParams {
        status: args.status.clone(),
    };
    let value = ctx.client.call("run.list", to_params(&params)).await?;
    let runs: Vec<RunSummary> = decode("run.list", &value)?;
    ctx.out
        .result(&value, || match (&args.status, runs.is_empty()) {
            (None, true) => {
                "No runs yet. Create one with `orchestratectl run create --kind generic`."
                    .to_string()
            }
            (Some(status), true) => format!("No runs with status {status}."),
            _ => runs_table(&runs),
        });
    Ok(())
}

/// The `run list` table: ID, KIND, STATUS, NODES, UPDATED, TITLE.
pub fn runs_table(runs: &[RunSummary]) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.kind.clone(),
                r.status.clone(),
                node_counts(&r.nodes),
                short_time(&r.updated_at),
                cell(r.title.as_deref()),
            ]
        })
        .collect();
    table(
        &["ID", "KIND", "STATUS", "NODES", "UPDATED", "TITLE"],
        &rows,
    )
}

async fn show(ctx: &Ctx, arg: RunArg) -> Result<(), AppError> {
    let params = run_param(&arg.run)?;
    let value = ctx.client.call("run.show", to_params(&params)).await?;
    let detail: RunDetail = decode("run.show", &value)?;
    ctx.out.result(&value, || detail_text(&detail));
    Ok(())
}

/// The human form of `run show`: the summary, then the nodes, discussions and spin-offs.
pub fn detail_text(d: &RunDetail) -> String {
    let m = &d.manifest;
    let mut pairs = vec![
        ("Run", m.id.clone()),
        ("Kind", m.kind.clone()),
        ("Status", m.status.clone()),
        ("Title", cell(m.title.as_deref())),
    ];
    if let Some(repo) = &m.repo {
        pairs.push(("Repo", repo.clone()));
    }
    if let Some(base) = &m.base {
        pairs.push(("Base", base.clone()));
    }
    if let Some(merge) = &m.merge {
        pairs.push(("Merge", merge.clone()));
    }
    pairs.push(("Created", short_time(&m.created_at)));
    pairs.push(("Updated", short_time(&m.updated_at)));
    pairs.push(("Events", m.last_seq.to_string()));
    pairs.push(("Nodes", node_counts(&m.nodes)));
    if let Some(error) = &m.error {
        pairs.push(("Error", error.clone()));
    }
    let mut out = fields(&pairs);

    out.push('\n');
    if d.nodes.is_empty() {
        out.push_str("No nodes.\n");
    } else {
        let rows: Vec<Vec<String>> = d
            .nodes
            .iter()
            .map(|n| {
                vec![
                    n.id.clone(),
                    n.state.as_str().to_string(),
                    cell(n.branch.as_deref()),
                    cell(n.worktree.as_deref()),
                    cell(n.agent.as_deref()),
                ]
            })
            .collect();
        out.push_str(&table(
            &["ID", "STATE", "BRANCH", "WORKTREE", "AGENT"],
            &rows,
        ));
    }

    if !d.discussions.is_empty() {
        let rows: Vec<Vec<String>> = d
            .discussions
            .iter()
            .map(|x| {
                vec![
                    x.id.clone(),
                    cell(x.node.as_deref()),
                    if x.open { "open" } else { "resolved" }.to_string(),
                    x.title.clone(),
                ]
            })
            .collect();
        out.push_str("\nDiscussions:\n");
        out.push_str(&table(&["ID", "NODE", "STATUS", "TITLE"], &rows));
    }

    if !d.spinoffs.is_empty() {
        let rows: Vec<Vec<String>> = d
            .spinoffs
            .iter()
            .map(|s| {
                vec![
                    s.id.clone(),
                    cell(s.node.as_deref()),
                    s.status.clone(),
                    cell(s.child_run.as_deref()),
                    s.task.clone(),
                ]
            })
            .collect();
        out.push_str("\nSpin-offs:\n");
        out.push_str(&table(
            &["ID", "NODE", "STATUS", "CHILD RUN", "TASK"],
            &rows,
        ));
    }
    out
}

async fn rebuild(ctx: &Ctx, arg: RunArg) -> Result<(), AppError> {
    let params = run_param(&arg.run)?;
    let value = ctx.client.call("run.rebuild", to_params(&params)).await?;
    let r: RebuildResult = decode("run.rebuild", &value)?;
    ctx.out.result(&value, || {
        format!(
            "Rebuilt {} projection files of run {} from {} events",
            r.files, r.run, r.events
        )
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary(id: &str, title: Option<&str>, nodes: Value) -> RunSummary {
        serde_json::from_value(json!({
            "id": id, "kind": "generic", "status": "active", "title": title,
            "repo": null, "base": null,
            "created_at": "2026-11-30T10:00:00.000Z", "updated_at": "2026-11-30T10:05:00.123Z",
            "nodes": nodes, "last_seq": 4
        }))
        .unwrap()
    }

    #[test]
    fn the_run_table() {
        let runs = vec![
            summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", Some("nightly"), json!({})),
            summary(
                "01JDXJ5R8Q4M0ZK7P2W9TB3C6F",
                None,
                json!({"done": 1, "running": 2}),
            ),
        ];
        let t = runs_table(&runs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "ID                          KIND     STATUS  NODES              UPDATED              TITLE"
        );
        assert_eq!(
            lines[1],
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6E  generic  active  -                  2026-11-30 10:05:00  nightly"
        );
        assert_eq!(
            lines[2],
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6F  generic  active  2 running, 1 done  2026-11-30 10:05:00  -"
        );
    }

    #[test]
    fn the_detail_text() {
        let d: RunDetail = serde_json::from_value(json!({
            "manifest": serde_json::to_value(summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"running":1}))).unwrap(),
            "nodes": [{"id":"api","state":"running","branch":null,"worktree":null,"agent":null,"deps":[],
                       "created_at":"t","updated_at":"t"}],
            "discussions": [], "spinoffs": []
        }))
        .unwrap();
        let text = detail_text(&d);
        assert!(
            text.starts_with("Run      01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n"),
            "{text}"
        );
        assert!(text.contains("Nodes    1 running\n"), "{text}");
        assert!(
            text.contains(
                "ID   STATE    BRANCH  WORKTREE  AGENT\napi  running  -       -         -\n"
            ),
            "{text}"
        );
        assert!(!text.contains("Discussions"));
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
