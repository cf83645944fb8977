//! `run attach RUN [--node NODE]`: which node's agent, the command that reaches it — its
//! runner's, from the daemon (`node.attach`: `tmux attach-session` on the daemon's private
//! server for the local runner, `srun --pty` into the job on Slurm) — and replacing this
//! process with that command.
//!
//! With the daemon down (the TUI) or older than `node.attach`, a local node's window is still
//! reached with the same tmux command, built here: agents keep running without the daemon.

use octl_proto::method;
use octl_proto::rpc::{NodeAttachParams, RunParams};
use std::io::IsTerminal;
use std::os::unix::process::CommandExt;
use std::path::Path;

use clap::Args;
use octl_proto::ids::validate_node_id;
use octl_proto::rpc::{NodeShown, RunShown};
use octl_proto::state::Node;
use octl_proto::{AppError, ErrorKind, NodeState};

use super::run_param;
use crate::client::{find_on_path, CallError, Client};
use crate::commands::Ctx;
use crate::output::shell_word;

#[derive(Debug, Args)]
pub struct RunAttachArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node whose window to show; default: the only node, else the first one whose agent
    /// is alive (starting, running or waiting)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
}

pub(super) async fn attach(ctx: &Ctx, args: RunAttachArgs) -> Result<i32, AppError> {
    let run = run_param(&args.run)?.run;
    if let Some(node) = &args.node {
        validate_node_id("--node", node)?;
    }
    let detail = ctx
        .client
        .call_method::<method::RunShow>(&RunParams { run })
        .await?;
    let node = pick_node(&detail, args.node.as_deref())?;
    let argv = AttachTo::of(&ctx.client.home().tmux_socket(), &detail.manifest.id, node)
        .command(&ctx.client, true)
        .await?;
    let program = argv.first().cloned().unwrap_or_default();
    if !std::io::stdin().is_terminal() {
        return Err(AppError::invalid(format!(
            "run attach needs a terminal: stdin is not one, and {program} can only show the \
             window of node {} on a terminal",
            node.id
        ))
        .with_hint(format!(
            "from a terminal, run: {}",
            argv.iter()
                .map(|a| shell_word(a))
                .collect::<Vec<_>>()
                .join(" ")
        )));
    }
    let found = if program.contains('/') {
        Some(std::path::PathBuf::from(&program))
    } else {
        find_on_path(&program)
    };
    let Some(path) = found else {
        return Err(AppError::new(
            ErrorKind::ToolMissing,
            format!("cannot attach: {program} is not installed (no {program} program on PATH)"),
        )
        .with_hint(if program == "tmux" {
            "install tmux (e.g. `apt install tmux` or `brew install tmux`)".to_string()
        } else {
            format!("install {program} on this machine (the node's runner attaches with it)")
        }));
    };
    // Only returns if the exec failed.
    let err = std::process::Command::new(&path).args(&argv[1..]).exec();
    Err(AppError::new(
        ErrorKind::ToolFailed,
        format!("cannot start {}: {err}", path.display()),
    ))
}

/// Which agent to reach, and how when octld cannot say (see [`AttachTo::command`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachTo {
    pub run: String,
    pub node: String,
    /// The node's runner, if not local.
    pub runner: Option<String>,
    /// A local node's tmux window ([`attach_argv`]).
    pub local: Option<Vec<String>>,
}

impl AttachTo {
    pub fn of(socket: &Path, run: &str, node: &Node) -> AttachTo {
        let runner = node.runner.clone().filter(|r| r != "local");
        AttachTo {
            run: run.to_string(),
            node: node.id.clone(),
            local: runner.is_none().then(|| attach_argv(socket, run, node)),
            runner,
        }
    }

    /// The command that reaches the agent: its runner's, from the daemon (`node.attach`).
    /// Where the daemon is not asked (`live` false: it is down) or does not know
    /// `node.attach`, a local node's tmux window; a remote node is reached only through octld.
    pub async fn command(&self, client: &Client, live: bool) -> Result<Vec<String>, AppError> {
        let why = if live {
            let params = NodeAttachParams {
                run: self.run.clone(),
                node: self.node.clone(),
            };
            match client.try_call_method::<method::NodeAttach>(&params).await {
                Ok(a) => return Ok(a.argv),
                Err(CallError::Failed(e)) if e.kind != ErrorKind::MethodNotFound => return Err(e),
                Err(CallError::Failed(e) | CallError::NotRunning(e) | CallError::Dropped(e)) => e,
            }
        } else {
            AppError::new(ErrorKind::DaemonUnreachable, "octld is not answering")
        };
        match &self.local {
            Some(argv) => Ok(argv.clone()),
            None => Err(AppError::new(
                why.kind,
                format!(
                    "cannot attach to node {} of run {}: it runs on runner {}, which only octld reaches ({})",
                    self.node,
                    self.run,
                    self.runner.as_deref().unwrap_or_default(),
                    why.message
                ),
            )),
        }
    }
}

/// The node `run attach` shows: the one asked for; else the only one; else the first whose
/// agent is alive. Refused when that node has no window.
pub fn pick_node<'a>(d: &'a RunShown, asked: Option<&str>) -> Result<&'a NodeShown, AppError> {
    let id = &d.manifest.id;
    let listing = || {
        d.nodes
            .iter()
            .map(|n| format!("{} ({})", n.id, n.state.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let node = match asked {
        Some(asked) => d.nodes.iter().find(|n| n.id == asked).ok_or_else(|| {
            AppError::not_found(format!(
                "run {id} has no node {asked:?}; its nodes: {}",
                if d.nodes.is_empty() {
                    "none".to_string()
                } else {
                    listing()
                }
            ))
        })?,
        None => match d.nodes.as_slice() {
            [] => {
                return Err(AppError::not_found(format!(
                    "run {id} has no nodes, so there is no agent window to attach to"
                )))
            }
            [only] => only,
            nodes => nodes.iter().find(|n| n.state.is_alive()).ok_or_else(|| {
                AppError::invalid(format!(
                    "run {id} has {} nodes and none has a live agent: {}; choose one with --node",
                    nodes.len(),
                    listing()
                ))
            })?,
        },
    };
    let gone = node.cleaned || matches!(node.state, NodeState::Merged | NodeState::Cancelled);
    if gone || matches!(node.state, NodeState::Pending | NodeState::Ready) {
        let why = if gone {
            "its window is gone"
        } else {
            "it has no window yet: its agent has not started"
        };
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {} of run {id} is {}: {why}",
                node.id,
                node.state.as_str()
            ),
        )
        .with_hint(format!("see it with `orchestratectl run show {id}`")));
    }
    Ok(node)
}

/// `tmux -S <HOME>/tmux.sock attach-session -t <RUN>:<NODE>`: the local runner's attach, as
/// octld's `node.attach` gives it too (`octld/src/runner/tmux.rs`). A node id of digits only would be
/// read by tmux as a window index, so such a node is targeted by its pane (`%N`) when known.
pub fn attach_argv(socket: &Path, run: &str, node: &Node) -> Vec<String> {
    let target = match &node.pane {
        Some(pane) if node.id.bytes().all(|b| b.is_ascii_digit()) => pane.clone(),
        _ => format!("{run}:{}", node.id),
    };
    vec![
        "tmux".to_string(),
        "-S".to_string(),
        socket.display().to_string(),
        "attach-session".to_string(),
        "-t".to_string(),
        target,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::run::tests::*;
    use serde_json::json;

    #[test]
    fn attach_picks_the_node() {
        let d = detail_with(json!([node("api", "exited")]));
        assert_eq!(pick_node(&d, None).unwrap().id, "api");
        let d = detail_with(json!([node("api", "merged")]));
        let err = pick_node(&d, None).unwrap_err();
        assert_eq!(err.kind.exit_code(), 4);
        assert!(
            err.message.ends_with("is merged: its window is gone"),
            "{}",
            err.message
        );
        let d = detail_with(json!([
            node("a", "merged"),
            node("b", "running"),
            node("c", "waiting")
        ]));
        assert_eq!(pick_node(&d, None).unwrap().id, "b");
        assert_eq!(pick_node(&d, Some("c")).unwrap().id, "c");
        let err = pick_node(&d, Some("zz")).unwrap_err();
        assert_eq!(err.kind.exit_code(), 3);
        assert!(
            err.message.contains("a (merged), b (running), c (waiting)"),
            "{}",
            err.message
        );
        let d = detail_with(json!([node("a", "merged"), node("b", "failed")]));
        let err = pick_node(&d, None).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(
            err.message.contains("a (merged), b (failed)"),
            "{}",
            err.message
        );
        assert!(err.message.contains("--node"), "{}", err.message);
        let d = detail_with(json!([]));
        assert_eq!(pick_node(&d, None).unwrap_err().kind.exit_code(), 3);
        let mut cleaned = node("a", "merged");
        cleaned["cleaned"] = json!(true);
        let d = detail_with(json!([cleaned]));
        let err = pick_node(&d, None).unwrap_err();
        assert_eq!(err.kind.exit_code(), 4);
        assert!(err.message.contains("window is gone"), "{}", err.message);
        let d = detail_with(json!([node("a", "pending")]));
        assert_eq!(pick_node(&d, None).unwrap_err().kind.exit_code(), 4);
    }

    #[test]
    fn the_attach_command() {
        let n: Node = serde_json::from_value(node("api", "running")).unwrap();
        let argv = attach_argv(Path::new("/h/tmux.sock"), "01JDXJ5R8Q4M0ZK7P2W9TB3C6E", &n);
        assert_eq!(
            argv,
            [
                "tmux",
                "-S",
                "/h/tmux.sock",
                "attach-session",
                "-t",
                "01JDXJ5R8Q4M0ZK7P2W9TB3C6E:api"
            ]
        );
        let mut digits = node("42", "running");
        digits["pane"] = json!("%7");
        let n: Node = serde_json::from_value(digits).unwrap();
        assert_eq!(attach_argv(Path::new("/h/s"), "R", &n)[5], "%7");
    }
}
