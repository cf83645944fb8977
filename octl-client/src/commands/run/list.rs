//! `run list [--status S[,S]] [--repo PATH] [--limit N]`: the runs table, with the nodes of small unfinished runs under
//! their row.

use octl_proto::method;
use octl_proto::rpc::RunParams;
use std::collections::HashMap;

use clap::Args;
use octl_proto::projection::ListedStatus;
use octl_proto::projection::RunSummary;
use octl_proto::rpc::RunShown;
use octl_proto::rpc::{RunListParams, Statuses};
use octl_proto::AppError;
use std::path::{Path, PathBuf};

use super::show::{activity_cell, elapsed_cell};
use crate::commands::Ctx;
use crate::follow::is_terminal_status;
use crate::output::{cell, node_counts, short_time, table};

#[derive(Debug, Args)]
pub struct RunListArgs {
    /// Only runs in one of these statuses (comma-separated): active, waiting, completed,
    /// failed, cancelled, corrupt
    #[arg(long, value_name = "STATUS", value_delimiter = ',')]
    pub status: Vec<String>,

    /// Only runs on the repository at or containing this directory
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,

    /// Only the newest N runs of those (still listed oldest first)
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
}

/// The `run.list` params of the flags, each checked (a bad one named by its flag).
pub fn list_params(args: &RunListArgs, cwd: &Path) -> Result<RunListParams, AppError> {
    let accepted = || ListedStatus::ALL.map(ListedStatus::as_str).join(", ");
    for s in &args.status {
        if ListedStatus::parse(s).is_none() {
            return Err(AppError::invalid(format!(
                "invalid --status {s:?}: use one or more of {}, comma-separated",
                accepted()
            )));
        }
    }
    let status = match args.status.as_slice() {
        [] => None,
        [one] => Some(Statuses::One(one.clone())),
        many => Some(Statuses::Many(many.to_vec())),
    };
    let repo = match &args.repo {
        None => None,
        Some(p) if p.as_os_str().is_empty() => {
            return Err(AppError::invalid(
                "invalid --repo \"\": give the repository's directory or one inside it",
            ))
        }
        Some(p) => {
            let abs = cwd.join(p);
            let path = std::fs::canonicalize(&abs).unwrap_or(abs);
            Some(path.into_os_string().into_string().map_err(|p| {
                AppError::invalid(format!(
                    "invalid --repo {:?}: the path is not valid UTF-8",
                    PathBuf::from(p).display().to_string()
                ))
            })?)
        }
    };
    if args.limit == Some(0) {
        return Err(AppError::invalid(
            "invalid --limit 0: give a whole number of runs, at least 1",
        ));
    }
    Ok(RunListParams {
        status,
        repo,
        limit: args.limit,
    })
}

/// `run list` shows the nodes of an unfinished run with at most this many nodes.
pub const LIST_NODES_MAX: usize = 20;

pub(super) async fn list(ctx: &Ctx, args: RunListArgs) -> Result<(), AppError> {
    let cwd = std::env::current_dir()
        .map_err(|e| AppError::invalid(format!("cannot read the current directory: {e}")))?;
    let params = list_params(&args, &cwd)?;
    let filtered = params.status.is_some() || params.repo.is_some();
    if ctx.out.json {
        // Passed through as the daemon wrote it: scripts poll this, so it skips building values.
        let listed = ctx.client.call_method::<method::RunList>(&params).await?;
        ctx.out.result(&listed, String::new);
        return Ok(());
    }
    let runs = ctx
        .client
        .call_method::<method::RunList>(&params)
        .await?
        .parse()?;
    // The nodes of unfinished runs, for the lines under them (a run that cannot be shown
    // now just keeps its counts).
    let mut nodes = HashMap::new();
    for r in runs.iter().filter(|r| lists_nodes(r)) {
        let show = RunParams { run: r.id.clone() };
        if let Ok(d) = ctx.client.call_method::<method::RunShow>(&show).await {
            nodes.insert(r.id.clone(), node_lines(&d));
        }
    }
    ctx.out.result(&runs, || match (filtered, runs.is_empty()) {
        (false, true) => {
            "No runs yet. Create one with `orchestratectl run create --kind generic`.".to_string()
        }
        (true, true) => "No runs pass these filters.".to_string(),
        _ => runs_text(&runs, &nodes),
    });
    Ok(())
}

/// Does `run list` show this run's nodes? Only an unfinished run with 1 to 20 nodes.
pub fn lists_nodes(r: &RunSummary) -> bool {
    let total: usize = r.nodes.values().sum();
    !is_terminal_status(r.status) && (1..=LIST_NODES_MAX).contains(&total)
}

/// The lines under a run in `run list`: `  <node>  <state>  <elapsed>  <activity>`, lined up.
pub fn node_lines(d: &RunShown) -> Vec<String> {
    let rows: Vec<Vec<String>> = d
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.id.clone(),
                n.state.as_str().to_string(),
                elapsed_cell(n),
                // What a live node's agent says it is doing.
                if n.state.is_alive() {
                    activity_cell(n)
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    table(&["", "", "", ""], &rows)
        .lines()
        .skip(1)
        .map(|l| format!("  {}", l.trim_end()))
        .collect()
}

/// What a run's agents cost so far, as `run list` and `run show` print it (`-` when none
/// reported a cost).
pub fn cost_cell(usd: Option<f64>) -> String {
    usd.map_or_else(|| "-".to_string(), |c| format!("${c:.4}"))
}

/// The `run list` table: ID, KIND, STATUS, NODES, UPDATED, COST, TITLE.
pub fn runs_table(runs: &[RunSummary]) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.kind_name().to_string(),
                r.status.to_string(),
                node_counts(&r.nodes),
                short_time(&r.updated_at),
                if r.budget_spent {
                    // `run budget RUN --add USD` is the way out (`run show` says so).
                    format!("{} (budget spent)", cost_cell(r.cost_usd))
                } else {
                    cost_cell(r.cost_usd)
                },
                cell(r.title.as_deref()),
            ]
        })
        .collect();
    table(
        &["ID", "KIND", "STATUS", "NODES", "UPDATED", "COST", "TITLE"],
        &rows,
    )
}

/// The `run list` text: the table, with each run's node lines under its row.
pub fn runs_text(runs: &[RunSummary], nodes: &HashMap<String, Vec<String>>) -> String {
    let t = runs_table(runs);
    let mut out = String::new();
    for (i, line) in t.lines().enumerate() {
        out.push_str(line);
        out.push('\n');
        let Some(r) = i.checked_sub(1).and_then(|i| runs.get(i)) else {
            continue;
        };
        for l in nodes.get(&r.id).into_iter().flatten() {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::run::tests::*;
    use octl_proto::projection::ListedStatus;
    use serde_json::json;

    #[test]
    fn the_run_table() {
        let mut runs = vec![
            summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", Some("nightly"), json!({})),
            summary(
                "01JDXJ5R8Q4M0ZK7P2W9TB3C6F",
                None,
                json!({"done": 1, "running": 2}),
            ),
        ];
        runs[1].cost_usd = Some(0.25);
        let t = runs_table(&runs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "ID                          KIND     STATUS  NODES              UPDATED              COST     TITLE"
        );
        assert_eq!(
            lines[1],
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6E  generic  active  -                  2026-11-30 10:05:00  -        nightly"
        );
        assert_eq!(
            lines[2],
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6F  generic  active  2 running, 1 done  2026-11-30 10:05:00  $0.2500  -"
        );
    }

    #[test]
    fn run_list_shows_the_nodes_of_unfinished_runs() {
        let v = dag_show();
        let d: RunShown = serde_json::from_value(v.clone()).unwrap();
        let lines = node_lines(&d);
        assert_eq!(
            lines,
            [
                "  schema  merged   12s",
                "  api     running  1m05s  unknown",
                "  docs    pending  -"
            ]
        );
        let runs = vec![
            summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"running": 1})),
            summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6F", None, json!({"merged": 1})),
        ];
        let mut nodes = HashMap::new();
        nodes.insert(runs[0].id.clone(), lines);
        let text = runs_text(&runs, &nodes);
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), 6, "{text}");
        assert!(got[1].starts_with("01JDXJ5R8Q4M0ZK7P2W9TB3C6E  generic"));
        assert_eq!(got[2], "  schema  merged   12s");
        assert_eq!(got[4], "  docs    pending  -");
        assert!(got[5].starts_with("01JDXJ5R8Q4M0ZK7P2W9TB3C6F  generic"));

        let mut r = summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"running": 20}));
        assert!(lists_nodes(&r));
        r.nodes.insert("pending".into(), 1);
        assert!(!lists_nodes(&r), "more than 20 nodes: counts only");
        let mut r = summary("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", None, json!({"merged": 2}));
        r.status = ListedStatus::Completed;
        assert!(!lists_nodes(&r), "finished runs: counts only");
        r.status = ListedStatus::Waiting;
        assert!(lists_nodes(&r));
        assert!(!lists_nodes(&summary(
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6E",
            None,
            json!({})
        )));
    }
}
