//! `node done|fail|progress`: what an agent reports about its own node. The run and node come
//! from `--run`/`--node`, else from `OCTL_RUN`/`OCTL_NODE` (set in every agent window).
//! `node send|screen`: a human types a line into a live interactive agent, or looks at its
//! screen, without attaching. `node allow|deny`: a human answers an agent's permission request.

use clap::{Args, Subcommand};
use octl_proto::ids::{parse_run_ref, validate_node_id};
use octl_proto::method::{self, Method, MethodId};
use octl_proto::rpc::{
    AppendResult, NodeFailParams, NodeProgressParams, NodeReportParams, NodeScreenParams,
    NodeSendParams, PermissionBehavior, PermissionDecideParams,
};
use octl_proto::AppError;

use super::{decode, result_of, Ctx};

/// The examples of `node --help`.
pub const NODE_EXAMPLES: &str = "\
Examples:
  # inside an agent window, where OCTL_RUN and OCTL_NODE are set:
  orchestratectl node progress --message 'tests pass, writing docs'
  orchestratectl node done --message 'added the endpoint and its tests'
  orchestratectl node fail --reason 'the API key in .env is missing'
  # from anywhere else, name the run and the node:
  orchestratectl node done --run 01JDXJ5R --node api
  # a human, to a code run's agent:
  orchestratectl node send 01JDXJ5R --node api 'yes, use the v2 client'
  orchestratectl node screen 01JDXJ5R --node api
  # a human, to an agent that asks for a tool (the notice names the request):
  orchestratectl node allow 01JDXJ5R --node api
  orchestratectl node deny 01JDXJ5R --node api --request p2 --reason 'use the Makefile'";

#[derive(Debug, Subcommand)]
pub enum NodeCmd {
    /// Report that the node's work is finished and committed (a spinoff is then merged; a code
    /// run waits for `orchestratectl merge`)
    #[command(after_help = "\
Examples:
  orchestratectl node done
  orchestratectl node done --message 'added /users pagination with tests'
  orchestratectl --json node done --run 01JDXJ5R --node api   # {seq, id}")]
    Done(NodeDoneArgs),

    /// Report that the node cannot finish; its branch and worktree are kept
    #[command(after_help = "\
Examples:
  orchestratectl node fail --reason 'cannot reproduce the bug on main'
  orchestratectl --json node fail --run 01JDXJ5R --node api --reason 'tests need a database'")]
    Fail(NodeFailArgs),

    /// Report what the node is doing, for `run wait` and the event log
    #[command(after_help = "\
Examples:
  orchestratectl node progress --message 'reproduced the bug in a test'
  orchestratectl --json node progress --run 01JDXJ5R --node api --message 'half done'")]
    Progress(NodeProgressArgs),

    /// Type one line of input (then Enter) into a live node's interactive agent (a code run's)
    ///
    /// Refused, naming the node's state, unless the node is running or waiting and its agent
    /// is interactive. The line is not recorded in the run's event log (it may hold a secret),
    /// but the node's own log (`run logs`) is its terminal's output: it holds the line when
    /// the agent echoes what is typed, as interactive CLIs do.
    #[command(after_help = "\
Examples:
  orchestratectl node send 01JDXJ5R --node api 'go ahead with the migration'
  orchestratectl --json node send 01JDXJ5R --node api 'y'   # {run, node, bytes}")]
    Send(NodeSendArgs),

    /// Print a live node's agent screen now (the last lines of its terminal)
    #[command(after_help = "\
Examples:
  orchestratectl node screen 01JDXJ5R --node api
  orchestratectl node screen 01JDXJ5R --node api --lines 40
  orchestratectl --json node screen 01JDXJ5R --node api   # {run, node, screen}")]
    Screen(NodeScreenArgs),

    /// Allow the tool a node's agent asks for (a permission request under `ask`)
    ///
    /// The agent waits for this (at most `[permissions] wait`, then it is denied). One
    /// decision per request: a request already decided otherwise is refused naming that
    /// decision (exit 4); the same decision again answers the one recorded.
    #[command(after_help = "\
Examples:
  orchestratectl node allow 01JDXJ5R --node api               # its only open request
  orchestratectl node allow 01JDXJ5R --node api --request p2 --always
  orchestratectl --json node allow 01JDXJ5R --node api   # {run, node, request, decision}")]
    Allow(NodeDecideArgs),

    /// Deny the tool a node's agent asks for; the agent is told the reason and goes on
    ///
    /// One decision per request, as for `node allow`.
    #[command(after_help = "\
Examples:
  orchestratectl node deny 01JDXJ5R --node api --reason 'run the tests with make test'
  orchestratectl node deny 01JDXJ5R --node api --request p3")]
    Deny(NodeDecideArgs),
}

#[derive(Debug, Args)]
pub struct NodeDecideArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node: 1-63 of a-z, 0-9 and '-'
    #[arg(long, value_name = "NODE")]
    pub node: String,

    /// The request (p1, p2, …: in the notice, and in `run show --json`'s permissions); default
    /// the node's only open one
    #[arg(long, value_name = "ID")]
    pub request: Option<String>,

    /// Allow the tool's pattern for the rest of the run (Bash(python3 *): the same program;
    /// another tool: any use of it), so it is not asked again
    #[arg(long)]
    pub always: bool,

    /// What the agent is told
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct NodeSendArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node: 1-63 of a-z, 0-9 and '-'
    #[arg(long, value_name = "NODE")]
    pub node: String,

    /// The line to type: no newlines or control characters, at most 4096 bytes
    #[arg(value_name = "TEXT")]
    pub text: String,
}

#[derive(Debug, Args)]
pub struct NodeScreenArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node: 1-63 of a-z, 0-9 and '-'
    #[arg(long, value_name = "NODE")]
    pub node: String,

    /// At most this many of the last lines (1-10000, default 200)
    #[arg(long, value_name = "N")]
    pub lines: Option<u32>,
}

#[derive(Debug, Args)]
pub struct NodeTarget {
    /// The run: a ULID or a unique prefix of at least 6 characters; default $OCTL_RUN (set in
    /// every agent window)
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,

    /// The node: 1-63 of a-z, 0-9 and '-'; default $OCTL_NODE (set in every agent window)
    #[arg(long, env = "OCTL_NODE", hide_env_values = true, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct NodeDoneArgs {
    #[command(flatten)]
    pub target: NodeTarget,

    /// A one-line summary of what was done
    #[arg(long, value_name = "M")]
    pub message: Option<String>,
}

#[derive(Debug, Args)]
pub struct NodeFailArgs {
    #[command(flatten)]
    pub target: NodeTarget,

    /// Why the node cannot finish, for the human who will look at it
    #[arg(long, value_name = "R")]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct NodeProgressArgs {
    #[command(flatten)]
    pub target: NodeTarget,

    /// What the agent is doing now, in a few words
    #[arg(long, value_name = "M")]
    pub message: String,
}

pub async fn execute(ctx: &Ctx, cmd: NodeCmd) -> Result<(), AppError> {
    let (method, what, target, text): (MethodId, _, _, _) = match cmd {
        NodeCmd::Send(a) => return send(ctx, a).await,
        NodeCmd::Screen(a) => return screen(ctx, a).await,
        NodeCmd::Allow(a) => return decide(ctx, PermissionBehavior::Allow, a).await,
        NodeCmd::Deny(a) => return decide(ctx, PermissionBehavior::Deny, a).await,
        NodeCmd::Done(a) => (
            method::NodeDone::ID,
            "done",
            a.target,
            Text::Message(a.message),
        ),
        NodeCmd::Fail(a) => (
            method::NodeFail::ID,
            "failure",
            a.target,
            Text::Reason(a.reason),
        ),
        NodeCmd::Progress(a) => (
            method::NodeProgress::ID,
            "progress",
            a.target,
            Text::Message(Some(a.message)),
        ),
    };
    let (run, node) = resolve_target(&target)?;
    let params = node_params(&run, &node, text)?;
    let value = if method == method::NodeFail::ID {
        let params = NodeFailParams {
            run: params.run,
            node: params.node,
            reason: params.reason.unwrap_or_default(),
            message: params.message,
        };
        ctx.client.call_value::<method::NodeFail>(&params).await?
    } else if method == method::NodeProgress::ID {
        let params = NodeProgressParams {
            run: params.run,
            node: params.node,
            message: params.message.unwrap_or_default(),
            reason: params.reason,
        };
        ctx.client
            .call_value::<method::NodeProgress>(&params)
            .await?
    } else {
        ctx.client.call_value::<method::NodeDone>(&params).await?
    };
    // The three reports share their result type.
    let r: AppendResult = decode(method.name(), &value)?;
    ctx.out.result(&value, || {
        format!(
            "Reported {what} for node {node} of run {run} (seq {})",
            r.seq
        )
    });
    Ok(())
}

async fn send(ctx: &Ctx, a: NodeSendArgs) -> Result<(), AppError> {
    let run = parse_run_ref("RUN", &a.run)?.as_str().to_string();
    validate_node_id("--node", &a.node)?;
    if a.text.is_empty() || a.text.chars().any(|c| c.is_control() && c != '\t') {
        return Err(AppError::invalid(
            "invalid TEXT: give one non-empty line without newlines or control characters (tab allowed)",
        ));
    }
    let params = NodeSendParams {
        run,
        node: a.node,
        text: a.text,
    };
    let value = ctx.client.call_value::<method::NodeSend>(&params).await?;
    let r = result_of::<method::NodeSend>(&value)?;
    ctx.out.result(&value, || {
        format!(
            "Typed {} bytes and Enter into node {} of run {} (not in the run's event log; the node's log shows it if the agent echoes it)",
            r.bytes, r.node, r.run
        )
    });
    Ok(())
}

async fn screen(ctx: &Ctx, a: NodeScreenArgs) -> Result<(), AppError> {
    let params = NodeScreenParams {
        run: parse_run_ref("RUN", &a.run)?.as_str().to_string(),
        node: {
            validate_node_id("--node", &a.node)?;
            a.node
        },
        lines: a.lines,
    };
    let value = ctx.client.call_value::<method::NodeScreen>(&params).await?;
    let r = result_of::<method::NodeScreen>(&value)?;
    ctx.out
        .result(&value, || r.screen.trim_end_matches('\n').to_string());
    Ok(())
}

/// A person decides, not an agent (whose `orchestratectl *` is allowed): refused where the
/// marker every agent process inherits is set. Not a wall — a process that empties its
/// environment gets past it — but no agent decides by following its instructions. The TUI's
/// `y`/`n`/`A` are refused the same way.
pub(crate) fn refuse_inside_an_agent(what: &str) -> Result<(), AppError> {
    if std::env::var_os("OCTL_AGENT").is_some_and(|v| !v.is_empty()) {
        return Err(AppError::new(
            octl_proto::ErrorKind::Forbidden,
            format!("an agent may not {what}: a person does (OCTL_AGENT is set: this runs inside an agent)"),
        ));
    }
    Ok(())
}

async fn decide(
    ctx: &Ctx,
    behavior: PermissionBehavior,
    a: NodeDecideArgs,
) -> Result<(), AppError> {
    refuse_inside_an_agent("decide permission requests")?;
    let run = parse_run_ref("RUN", &a.run)?.as_str().to_string();
    validate_node_id("--node", &a.node)?;
    if a.always && behavior == PermissionBehavior::Deny {
        return Err(AppError::invalid(
            "invalid --always: it allows the tool's pattern for the rest of the run, so it goes with `node allow` only",
        ));
    }
    if let Some(r) = &a.request {
        if !octl_proto::ids::is_node_id(r) {
            return Err(AppError::invalid(format!(
                "invalid --request {r:?}: give the request's id, as the notice names it (p1)"
            )));
        }
    }
    if a.reason.as_deref().is_some_and(|r| r.trim().is_empty()) {
        return Err(AppError::invalid(
            "invalid --reason \"\": give a short text the agent is told",
        ));
    }
    let params = PermissionDecideParams {
        run,
        node: a.node,
        request: a.request,
        behavior,
        always: a.always,
        reason: a.reason,
    };
    let value = ctx
        .client
        .call_value::<method::NodePermissionDecide>(&params)
        .await?;
    let r = result_of::<method::NodePermissionDecide>(&value)?;
    ctx.out.result(&value, || {
        let d = &r.decision;
        let word = if d.behavior == "allow" {
            "Allowed"
        } else {
            "Denied"
        };
        let always = if d.always {
            " (and for the rest of the run)"
        } else {
            ""
        };
        format!(
            "{word} request {} of node {} in run {}{always}, by {} at {}",
            r.request, r.node, r.run, d.by, d.decided_at
        )
    });
    Ok(())
}

/// The text a report carries: `--message` (optional for done) or `--reason`.
#[derive(Debug)]
pub enum Text {
    Message(Option<String>),
    Reason(String),
}

/// The run and node, from the flags or the environment (clap fills both from `OCTL_RUN` and
/// `OCTL_NODE`), validated. A missing one is an error that says where it could come from.
pub fn resolve_target(t: &NodeTarget) -> Result<(String, String), AppError> {
    let missing = |flag: &str, var: &str| {
        AppError::invalid(format!(
            "missing {flag}: give {flag} or set {var} (both are set inside an agent window)"
        ))
        .with_hint(
            "inside an agent started by orchestratectl they come from the environment; elsewhere \
             name them, e.g. `orchestratectl node done --run 01JDXJ5R --node api`",
        )
    };
    let run = match t.run.as_deref() {
        Some(r) if !r.is_empty() => parse_run_ref("--run", r)?.as_str().to_string(),
        _ => return Err(missing("--run", "OCTL_RUN")),
    };
    let node = match t.node.as_deref() {
        Some(n) if !n.is_empty() => {
            validate_node_id("--node", n)?;
            n.to_string()
        }
        _ => return Err(missing("--node", "OCTL_NODE")),
    };
    Ok((run, node))
}

/// `{run, node, message?}` or `{run, node, reason}`; an empty text is refused.
pub fn node_params(run: &str, node: &str, text: Text) -> Result<NodeReportParams, AppError> {
    let mut p = NodeReportParams {
        run: run.to_string(),
        node: node.to_string(),
        message: None,
        reason: None,
    };
    let (flag, slot, value) = match text {
        Text::Message(None) => return Ok(p),
        Text::Message(Some(m)) => ("--message", &mut p.message, m),
        Text::Reason(r) => ("--reason", &mut p.reason, r),
    };
    if value.trim().is_empty() {
        return Err(AppError::invalid(format!(
            "invalid {flag} \"\": give a short text for the human who reads the run"
        )));
    }
    *slot = Some(value);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(run: Option<&str>, node: Option<&str>) -> NodeTarget {
        NodeTarget {
            run: run.map(Into::into),
            node: node.map(Into::into),
        }
    }

    #[test]
    fn run_and_node_are_required_and_checked() {
        let (run, node) = resolve_target(&target(Some("01jdxj5r"), Some("api"))).unwrap();
        assert_eq!((run.as_str(), node.as_str()), ("01JDXJ5R", "api"));
        let err = resolve_target(&target(None, Some("api"))).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert_eq!(
            err.message,
            "missing --run: give --run or set OCTL_RUN (both are set inside an agent window)"
        );
        let err = resolve_target(&target(Some("01JDXJ5R"), Some(""))).unwrap_err();
        assert!(err.message.starts_with("missing --node"), "{}", err.message);
        let err = resolve_target(&target(Some("x/y"), Some("api"))).unwrap_err();
        assert!(err.message.starts_with("invalid --run"), "{}", err.message);
        let err = resolve_target(&target(Some("01JDXJ5R"), Some("API"))).unwrap_err();
        assert!(err.message.starts_with("invalid --node"), "{}", err.message);
    }

    fn params_json(text: Text) -> serde_json::Value {
        serde_json::to_value(node_params("01R", "api", text).unwrap()).unwrap()
    }

    #[test]
    fn params() {
        use serde_json::json;
        assert_eq!(
            params_json(Text::Message(None)),
            json!({"run": "01R", "node": "api"})
        );
        assert_eq!(
            params_json(Text::Message(Some("ok".into()))),
            json!({"run": "01R", "node": "api", "message": "ok"})
        );
        assert_eq!(
            params_json(Text::Reason("no db".into())),
            json!({"run": "01R", "node": "api", "reason": "no db"})
        );
        let err = node_params("01R", "api", Text::Reason(" ".into())).unwrap_err();
        assert!(
            err.message.starts_with("invalid --reason"),
            "{}",
            err.message
        );
    }
}
