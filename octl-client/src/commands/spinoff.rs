//! `spinoff propose|list|accept|reject`: separate work an agent noticed, and a human's decision
//! on it. Accepting starts a new spinoff run, linked to the proposing run both ways. Proposal
//! ids are unique across runs: deciding needs only the id.

use crate::commands::result_of;
use clap::{Args, Subcommand};
use octl_proto::ids::parse_run_ref;
use octl_proto::method;
use octl_proto::rpc::{AcceptParams, ListParams, ProposeParams, RejectParams};
pub use octl_proto::rpc::{Accepted, Proposal};
use octl_proto::state::SpinoffStatus;
use octl_proto::AppError;

use super::discussion::{record_id, required_text, run_and_node, Opened};
use super::{call, Ctx};
use crate::follow::one_line;
use crate::output::{cell, table};

/// The examples of `spinoff --help`.
pub const SPINOFF_EXAMPLES: &str = "\
Examples:
  # an agent that noticed separate work (OCTL_RUN and OCTL_NODE are set):
  orchestratectl spinoff propose --task 'fix the flaky retry test' --why 'fails 1 in 5 on CI'
  # a human:
  orchestratectl spinoff list
  orchestratectl spinoff accept flaky-retry --agent claude
  orchestratectl spinoff reject flaky-retry --reason 'already tracked in #123'";

#[derive(Debug, Subcommand)]
pub enum SpinoffCmd {
    /// Propose a separate piece of work for a human to accept or reject
    #[command(after_help = "\
Examples:
  orchestratectl spinoff propose --task 'upgrade serde to 1.0.200'
  orchestratectl spinoff propose --task 'split utils.rs' --why 'it is 3000 lines'
  orchestratectl spinoff propose --task-file /tmp/proposal.md
  orchestratectl --json spinoff propose --run 01JDXJ5R --task 'x'   # {id, run}")]
    Propose(SpinoffProposeArgs),

    /// List spin-off proposals, of one run or of all runs
    #[command(after_help = "\
Examples:
  orchestratectl spinoff list
  orchestratectl --json spinoff list --run 01JDXJ5R")]
    List(SpinoffListArgs),

    /// Accept a proposal: start it as a new spinoff run, linked to the proposing run
    ///
    /// One decision per proposal: the first recorded wins and starts exactly one run; a
    /// decision that lost starts nothing and is refused (exit 4), and accepting again reports
    /// the existing run. A proposal whose run could not be created shows `failed` with the
    /// reason and may be accepted again or rejected.
    #[command(after_help = "\
Examples:
  orchestratectl spinoff accept flaky-retry
  orchestratectl spinoff accept 01jdxk7zq3           # a unique prefix of the id
  orchestratectl spinoff accept flaky-retry --agent shell
  orchestratectl --json spinoff accept flaky-retry   # {proposal, run}")]
    Accept(SpinoffAcceptArgs),

    /// Reject a proposal, saying why (the proposing agent can read the reason)
    #[command(after_help = "\
Examples:
  orchestratectl spinoff reject flaky-retry --reason 'out of scope for this release'")]
    Reject(SpinoffRejectArgs),
}

#[derive(Debug, Args)]
pub struct SpinoffProposeArgs {
    /// The work to do: the new agent's prompt if it is accepted (at most 32 KiB)
    #[arg(
        long,
        value_name = "T",
        required_unless_present = "task_file",
        conflicts_with = "task_file"
    )]
    pub task: Option<String>,

    /// Read the task from this file, or from standard input with `-`, instead of --task: at
    /// most 32 KiB (32768 bytes) of UTF-8
    #[arg(long, value_name = "PATH|-")]
    pub task_file: Option<std::path::PathBuf>,

    /// Why it is separate work, for the human who decides
    #[arg(long, value_name = "W")]
    pub why: Option<String>,

    /// The run: a ULID or a unique prefix of at least 6 characters; default $OCTL_RUN
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,

    /// The node proposing (optional): 1-63 of a-z, 0-9 and '-'; default $OCTL_NODE
    #[arg(long, env = "OCTL_NODE", hide_env_values = true, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct SpinoffListArgs {
    /// Only this run's proposals: a ULID or a unique prefix of at least 6 characters;
    /// default $OCTL_RUN, else every run
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,
}

#[derive(Debug, Args)]
pub struct SpinoffAcceptArgs {
    /// The proposal's id, as `spinoff list` shows it, or a unique prefix of at least 6 of its
    /// characters
    #[arg(value_name = "ID")]
    pub id: String,

    /// The agent profile of the new run: `claude`, `shell`, or a profile [agents.NAME] from
    /// $OCTL_HOME/config.toml; default: the proposing node's agent, else the proposing run's,
    /// else the configured default
    #[arg(long, value_name = "PROFILE")]
    pub agent: Option<String>,
}

#[derive(Debug, Args)]
pub struct SpinoffRejectArgs {
    /// The proposal's id, as `spinoff list` shows it, or a unique prefix of at least 6 of its
    /// characters
    #[arg(value_name = "ID")]
    pub id: String,

    /// Why it is rejected
    #[arg(long, value_name = "R")]
    pub reason: String,
}

const LIST_HINT: &str = "orchestratectl spinoff list";

pub async fn execute(ctx: &Ctx, cmd: SpinoffCmd) -> Result<(), AppError> {
    match cmd {
        SpinoffCmd::Propose(args) => propose(ctx, args).await,
        SpinoffCmd::List(args) => list(ctx, args).await,
        SpinoffCmd::Accept(args) => accept(ctx, args).await,
        SpinoffCmd::Reject(args) => reject(ctx, args).await,
    }
}

/// `spinoff.propose` params from the flags.
pub fn propose_params(args: &SpinoffProposeArgs) -> Result<ProposeParams, AppError> {
    let (run, node) = run_and_node(
        args.run.as_deref(),
        args.node.as_deref(),
        "orchestratectl spinoff propose --run 01JDXJ5R --task '…'",
    )?;
    let task = crate::text_file::text_or_file(
        "--task-file",
        args.task.clone(),
        args.task_file.as_deref(),
        octl_proto::plan::MAX_TASK_BYTES,
    )?
    .unwrap_or_default();
    required_text("--task", &task, "the work to do, as a prompt for its agent")?;
    if let Some(why) = &args.why {
        required_text("--why", why, "a reason, or leave --why out")?;
    }
    Ok(ProposeParams {
        run,
        node,
        task,
        why: args.why.clone(),
    })
}

async fn propose(ctx: &Ctx, args: SpinoffProposeArgs) -> Result<(), AppError> {
    let params = propose_params(&args)?;
    let value = call::<method::SpinoffPropose>(ctx, &params).await?;
    let o = result_of::<method::SpinoffPropose>(&value)?;
    ctx.out.result(&value, || proposed_text(&o));
    Ok(())
}

/// ```text
/// Proposed spin-off 01j… in run 01J…
///   a human decides: orchestratectl spinoff accept 01j…   or: orchestratectl spinoff reject 01j… --reason '…'
/// ```
pub fn proposed_text(o: &Opened) -> String {
    format!(
        "Proposed spin-off {id} in run {run}\n  a human decides: orchestratectl spinoff accept {id}   or: orchestratectl spinoff reject {id} --reason '…'",
        id = o.id,
        run = o.run
    )
}

async fn list(ctx: &Ctx, args: SpinoffListArgs) -> Result<(), AppError> {
    let run = match args.run.as_deref().filter(|r| !r.is_empty()) {
        Some(r) => Some(parse_run_ref("--run", r)?.as_str().to_string()),
        None => None,
    };
    let params = ListParams {
        run: run.clone(),
        open: None,
    };
    let value = call::<method::SpinoffList>(ctx, &params).await?;
    let items = result_of::<method::SpinoffList>(&value)?;
    ctx.out.result(&value, || list_text(&items, run.as_deref()));
    Ok(())
}

/// The `spinoff list` table: ID, RUN, NODE, STATUS, CHILD RUN, TASK.
pub fn list_text(items: &[Proposal], run: Option<&str>) -> String {
    if items.is_empty() {
        return match run {
            Some(run) => format!("No spin-off proposals in run {run}."),
            None => "No spin-off proposals.".to_string(),
        };
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|p| {
            vec![
                p.spinoff.id.clone(),
                p.run.clone(),
                cell(p.spinoff.node.as_deref()),
                p.spinoff.status.as_str().to_string(),
                cell(p.spinoff.child_run.as_deref()),
                one_line(&p.spinoff.task, 80),
            ]
        })
        .collect();
    let mut out = table(&["ID", "RUN", "NODE", "STATUS", "CHILD RUN", "TASK"], &rows);
    // Why a run could not be made, and that the proposal is not a dead end.
    for p in items
        .iter()
        .map(|p| &p.spinoff)
        .filter(|p| p.status == SpinoffStatus::Failed)
    {
        out.push_str(&format!(
            "{}: its run could not be created: {}\n  once fixed: orchestratectl spinoff accept {}   or: orchestratectl spinoff reject {} --reason '…'\n",
            p.id,
            one_line(p.reason.as_deref().unwrap_or("no reason recorded"), 200),
            p.id,
            p.id
        ));
    }
    out
}

async fn accept(ctx: &Ctx, args: SpinoffAcceptArgs) -> Result<(), AppError> {
    let id = record_id("spin-off proposal", LIST_HINT, &args.id)?;
    if let Some(agent) = &args.agent {
        octl_proto::ids::validate_node_id("--agent", agent).map_err(|e| {
            e.with_hint("built-in profiles are `claude` and `shell`; others are [agents.NAME] in $OCTL_HOME/config.toml")
        })?;
    }
    let params = AcceptParams {
        id,
        agent: args.agent.clone(),
    };
    let value = call::<method::SpinoffAccept>(ctx, &params).await?;
    let a = result_of::<method::SpinoffAccept>(&value)?;
    ctx.out.result(&value, || accepted_text(&a));
    Ok(())
}

/// ```text
/// Accepted 01j…: started spinoff run 01K… (parent 01J…)
///   follow it: orchestratectl run wait 01K…
/// ```
pub fn accepted_text(a: &Accepted) -> String {
    if a.already {
        return format!(
            "Already accepted {}: its spinoff run is {child} (parent {}); nothing new started\n  follow it: orchestratectl run wait {child}",
            a.proposal.spinoff.id,
            a.proposal.run,
            child = a.run.id
        );
    }
    format!(
        "Accepted {}: started spinoff run {child} (parent {})\n  follow it: orchestratectl run wait {child}",
        a.proposal.spinoff.id,
        a.proposal.run,
        child = a.run.id
    )
}

async fn reject(ctx: &Ctx, args: SpinoffRejectArgs) -> Result<(), AppError> {
    let id = record_id("spin-off proposal", LIST_HINT, &args.id)?;
    required_text("--reason", &args.reason, "why it is rejected")?;
    let params = RejectParams {
        id,
        reason: args.reason.clone(),
    };
    let value = call::<method::SpinoffReject>(ctx, &params).await?;
    let p = result_of::<method::SpinoffReject>(&value)?;
    ctx.out.result(&value, || rejected_text(&p));
    Ok(())
}

/// `Rejected 01j… of run 01J…: out of scope`
pub fn rejected_text(p: &Proposal) -> String {
    let (id, reason) = (&p.spinoff.id, p.spinoff.reason.as_deref());
    match reason.map(|r| one_line(r, 200)) {
        Some(r) => format!("Rejected {id} of run {}: {r}", p.run),
        None => format!("Rejected {id} of run {}", p.run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn propose_params_need_a_run_and_a_task() {
        let a = SpinoffProposeArgs {
            task: Some("fix the flaky test".into()),
            task_file: None,
            why: Some("fails 1 in 5".into()),
            run: Some("01jdxj5r".into()),
            node: Some("api".into()),
        };
        assert_eq!(
            serde_json::to_value(propose_params(&a).unwrap()).unwrap(),
            json!({"run": "01JDXJ5R", "node": "api", "task": "fix the flaky test", "why": "fails 1 in 5"})
        );
        let err = propose_params(&SpinoffProposeArgs {
            task: Some("x".into()),
            task_file: None,
            why: None,
            run: None,
            node: None,
        })
        .unwrap_err();
        assert!(err.message.starts_with("missing --run"), "{}", err.message);
        let err = propose_params(&SpinoffProposeArgs {
            task: Some("\n".into()),
            task_file: None,
            why: None,
            run: Some("01JDXJ5R".into()),
            node: None,
        })
        .unwrap_err();
        assert!(err.message.starts_with("invalid --task"), "{}", err.message);
    }

    fn proposal(status: &str, child: Option<&str>, reason: Option<&str>) -> Proposal {
        serde_json::from_value(json!({"id": "p1", "run": "01R", "node": "api",
            "task": "fix the\nflaky test", "why": null, "status": status, "child_run": child,
            "reason": reason, "proposed_at": "t", "decided_at": null}))
        .unwrap()
    }

    #[test]
    fn texts() {
        let items = vec![
            proposal("accepted", Some("01C"), None),
            proposal("proposed", None, None),
        ];
        assert_eq!(
            list_text(&items, None),
            "ID  RUN  NODE  STATUS    CHILD RUN  TASK\np1  01R  api   accepted  01C        fix the flaky test\np1  01R  api   proposed  -          fix the flaky test\n"
        );
        assert_eq!(
            list_text(&[proposal("failed", None, Some("invalid repo \"/r\""))], None),
            "ID  RUN  NODE  STATUS  CHILD RUN  TASK\np1  01R  api   failed  -          fix the flaky test\np1: its run could not be created: invalid repo \"/r\"\n  once fixed: orchestratectl spinoff accept p1   or: orchestratectl spinoff reject p1 --reason '…'\n"
        );
        assert_eq!(list_text(&[], None), "No spin-off proposals.");
        assert_eq!(
            list_text(&[], Some("01R")),
            "No spin-off proposals in run 01R."
        );
        let a: Accepted = serde_json::from_value(json!({
            "proposal": serde_json::to_value(proposal("accepted", Some("01CHILD"), None)).unwrap(),
            "run": {"id": "01CHILD", "kind": "spinoff", "status": "active", "title": null,
                    "repo": "/r", "base": "main", "created_at": "t", "updated_at": "t",
                    "nodes": {"starting": 1}, "last_seq": 3}
        }))
        .unwrap();
        assert_eq!(
            accepted_text(&a),
            "Accepted p1: started spinoff run 01CHILD (parent 01R)\n  follow it: orchestratectl run wait 01CHILD"
        );
        let again = Accepted {
            already: true,
            ..a.clone()
        };
        assert_eq!(
            accepted_text(&again),
            "Already accepted p1: its spinoff run is 01CHILD (parent 01R); nothing new started\n  follow it: orchestratectl run wait 01CHILD"
        );
        assert_eq!(
            rejected_text(&proposal("rejected", None, Some("out of\nscope"))),
            "Rejected p1 of run 01R: out of scope"
        );
        assert_eq!(
            proposed_text(&Opened {
                id: "p1".into(),
                run: "01R".into()
            }),
            "Proposed spin-off p1 in run 01R\n  a human decides: orchestratectl spinoff accept p1   or: orchestratectl spinoff reject p1 --reason '…'"
        );
    }
}
