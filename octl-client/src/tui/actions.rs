//! What a person can do from the TUI, as the daemon's methods (the same calls the CLI's
//! commands make), and the ones that hand the terminal to another program: attach to an
//! agent's window (the `tmux attach-session` of `run attach`), `$EDITOR` or `$SHELL` in a
//! worktree. Those run with the TUI suspended and come back to it when they end.

use std::path::Path;
use std::process::Command;

use octl_proto::method;
use octl_proto::rpc::{
    AcceptParams, AnswerParams, CancelParams, MergeParams, RejectParams, RetryParams,
};
use octl_proto::rpc::{NodeSendParams, PermissionBehavior, PermissionDecideParams};
use octl_proto::{AppError, ErrorKind};

use super::model::ShortIds;
use crate::client::Client;
use crate::commands::explain_missing_method;

/// A change asked of the daemon. Each is one method call; the daemon's reducer decides
/// whether it still applies (a second person may have acted first: `invalid_transition`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Answer {
        id: String,
        text: String,
    },
    Accept {
        id: String,
    },
    Reject {
        id: String,
        reason: String,
    },
    Merge {
        run: String,
        node: Option<String>,
    },
    Retry {
        run: String,
        node: String,
    },
    Cancel {
        run: String,
        discard: bool,
    },
    Send {
        run: String,
        node: String,
        text: String,
    },
    /// `review RUN --node N --comment C`.
    Review {
        run: String,
        node: String,
        comment: String,
    },
    /// A person's decision on a permission request (`node allow|deny`). `always`: the rule
    /// (`Bash(python3 *)`) allowed for the rest of the run with it.
    Decide {
        run: String,
        node: String,
        request: String,
        behavior: PermissionBehavior,
        always: Option<String>,
        reason: Option<String>,
    },
}

impl Action {
    /// What it does, for the confirmation prompt and the status line, each id as `ids` cuts
    /// it (never a prefix another run shares).
    pub fn describe(&self, ids: &ShortIds) -> String {
        let short = |id: &str| ids.of(id).to_string();
        match self {
            Action::Answer { id, .. } => format!("answer discussion {}", short(id)),
            Action::Accept { id } => format!("accept proposal {}", short(id)),
            Action::Reject { id, .. } => format!("reject proposal {}", short(id)),
            Action::Merge { run, node: Some(n) } => format!("merge node {n} of run {}", short(run)),
            Action::Merge { run, node: None } => format!("merge run {}", short(run)),
            Action::Retry { run, node } => format!("retry node {node} of run {}", short(run)),
            Action::Cancel {
                run,
                discard: false,
            } => format!("cancel run {}", short(run)),
            Action::Cancel { run, discard: true } => format!(
                "cancel run {} and DISCARD its worktrees and branches (snapshots are kept)",
                short(run)
            ),
            Action::Send { node, .. } => format!("send a line to node {node}"),
            Action::Review { run, node, .. } => {
                format!("send node {node} of run {} back with a review", short(run))
            }
            Action::Decide {
                run,
                node,
                request,
                behavior,
                always,
                ..
            } => {
                let verb = match behavior {
                    PermissionBehavior::Allow => "allow",
                    PermissionBehavior::Deny => "deny",
                };
                let mut text = format!(
                    "{verb} permission {request} of node {node} in run {}",
                    short(run)
                );
                if let Some(rule) = always {
                    text.push_str(&format!(", and {rule} for the rest of the run"));
                }
                text
            }
        }
    }
}

/// Performs `action` (never starting the daemon: the TUI only acts on one that answers);
/// says how it ended (`done`, what moved), which the UI puts after the action's description.
pub async fn perform(client: &Client, action: Action) -> Result<String, AppError> {
    async fn call<M: method::Method>(
        client: &Client,
        params: &M::Params,
    ) -> Result<M::Result, AppError> {
        let v = client
            .try_call_method::<M>(params)
            .await
            .map_err(|e| explain_missing_method(e.into(), M::NAME))?;
        Ok(v)
    }
    match action {
        Action::Answer { id, text } => {
            call::<method::DiscussionAnswer>(client, &AnswerParams { id, text }).await?;
        }
        Action::Accept { id } => {
            let a =
                call::<method::SpinoffAccept>(client, &AcceptParams { id, agent: None }).await?;
            return Ok(format!("run {} started", a.run.id));
        }
        Action::Reject { id, reason } => {
            call::<method::SpinoffReject>(client, &RejectParams { id, reason }).await?;
        }
        Action::Merge { run, node } => {
            let m = call::<method::Merge>(
                client,
                &MergeParams {
                    run,
                    node,
                    accept_failed: false,
                },
            )
            .await?;
            return Ok(format!("{} is now at {}", m.target, m.merge_commit));
        }
        Action::Retry { run, node } => {
            call::<method::RunRetry>(
                client,
                &RetryParams {
                    run,
                    node,
                    resume: false,
                },
            )
            .await?;
        }
        Action::Cancel { run, discard } => {
            call::<method::RunCancel>(client, &CancelParams { run, discard }).await?;
        }
        Action::Send { run, node, text } => {
            call::<method::NodeSend>(client, &NodeSendParams { run, node, text }).await?;
        }
        Action::Review { run, node, comment } => {
            crate::commands::node::refuse_inside_an_agent("review work")?;
            let r = call::<method::NodeReview>(
                client,
                &octl_proto::rpc::ReviewParams {
                    run,
                    node: Some(node),
                    comments: vec![comment],
                    text: None,
                    approve: false,
                },
            )
            .await?;
            let way = r.review.way.map_or("approved", |w| w.as_str());
            return Ok(format!("review {} {way}", r.review.round));
        }
        Action::Decide {
            run,
            node,
            request,
            behavior,
            always,
            reason,
        } => {
            crate::commands::node::refuse_inside_an_agent("decide permission requests")?;
            let d = call::<method::NodePermissionDecide>(
                client,
                &PermissionDecideParams {
                    run,
                    node,
                    request: Some(request),
                    behavior,
                    always: always.is_some(),
                    reason,
                },
            )
            .await?;
            let word = if d.decision.behavior == "allow" {
                "allowed"
            } else {
                "denied"
            };
            return Ok(format!("{word} by {}", d.decision.by));
        }
    }
    Ok("done".to_string())
}

/// A program to run with the terminal handed to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    pub argv: Vec<String>,
    pub dir: Option<String>,
}

impl Handoff {
    /// Runs it and waits; the caller has left raw mode and the alternate screen.
    pub fn run(&self) -> Result<(), AppError> {
        let Some((program, args)) = self.argv.split_first() else {
            return Ok(());
        };
        let mut cmd = Command::new(program);
        cmd.args(args);
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        // The agents' tmux server is not the one this terminal may be in: attaching to it from
        // inside another tmux is what was asked, so tmux's guard against nesting is lifted.
        cmd.env_remove("TMUX");
        let status = cmd.status().map_err(|e| {
            AppError::new(
                if e.kind() == std::io::ErrorKind::NotFound {
                    ErrorKind::ToolMissing
                } else {
                    ErrorKind::ToolFailed
                },
                format!("cannot start {program}: {e}"),
            )
        })?;
        if status.success() {
            Ok(())
        } else {
            Err(AppError::new(
                ErrorKind::ToolFailed,
                format!("{program} ended with {status}"),
            ))
        }
    }
}

/// `$EDITOR` (else `vi`) on a worktree, or `$SHELL` (else `sh`) in it.
pub fn open_worktree(worktree: &Path, editor: bool) -> Handoff {
    let var = |name: &str, default: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    let dir = worktree.display().to_string();
    let argv = if editor {
        // $EDITOR may carry flags (`code -w`): split on blanks as shells do for it.
        let mut argv: Vec<String> = var("EDITOR", "vi")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        argv.push(dir.clone());
        argv
    } else {
        vec![var("SHELL", "sh")]
    };
    Handoff {
        argv,
        dir: Some(dir),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_name_what_is_destroyed() {
        let a = Action::Cancel {
            run: "01JDXJ5R8Q4M0ZK7P2W9TB3C6E".into(),
            discard: true,
        };
        let ids = ShortIds::default();
        assert!(a.describe(&ids).contains("DISCARD"), "{}", a.describe(&ids));
        assert!(a.describe(&ids).contains("01JDXJ5R"));
        let m = Action::Merge {
            run: "01JDXJ5R8Q4M0ZK7P2W9TB3C6E".into(),
            node: Some("api".into()),
        };
        // An id the TUI does not know is shown whole.
        assert_eq!(
            m.describe(&ids),
            "merge node api of run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E"
        );
    }

    #[test]
    fn the_worktree_handoffs() {
        let h = open_worktree(Path::new("/w/t"), false);
        assert_eq!(h.dir.as_deref(), Some("/w/t"));
        assert_eq!(h.argv.len(), 1);
        let h = open_worktree(Path::new("/w/t"), true);
        assert_eq!(h.argv.last().map(String::as_str), Some("/w/t"));
    }
}
