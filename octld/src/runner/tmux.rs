//! The runner over the private tmux server: one session per run, one window per node; an
//! agent's handle is its pane id. Each agent's processes are kept by [`Containment`] (its
//! cgroups and marker): the program runs through a small `sh` that joins the agent's cgroups
//! first, and stopping an agent ends every process it left, window or not.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{
    AgentHandle, AgentSpec, AgentStatus, Found, MemoryKill, Observation, Result, Runner, Started,
    Usage,
};
use crate::contain::Containment;
use crate::tmux::{PaneInfo, Tmux, WindowSpec};

/// [`Runner`] over [`Tmux`].
#[derive(Debug, Clone)]
pub struct TmuxRunner {
    tmux: Tmux,
    contain: Containment,
}

impl TmuxRunner {
    pub fn new(tmux: Tmux, contain: Containment) -> TmuxRunner {
        TmuxRunner { tmux, contain }
    }
}

/// Joins the cgroups whose `cgroup.procs` files come before `--`, then becomes the program
/// after it: everything the agent starts is in its cgroups from its first instruction.
const JOIN: &str = "while [ \"$1\" != -- ]; do echo $$ > \"$1\" || { echo \"octld: cannot join the agent's cgroup ($1)\" >&2; exit 126; }; shift; done; shift; exec \"$@\"";

/// `argv` run after joining the cgroups of `procs` (as is without any).
fn joined(procs: &[PathBuf], argv: &[String]) -> Vec<String> {
    if procs.is_empty() {
        return argv.to_vec();
    }
    let mut out = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        JOIN.to_string(),
        "octl-join".to_string(),
    ];
    out.extend(procs.iter().map(|p| p.display().to_string()));
    out.push("--".to_string());
    out.extend(argv.iter().cloned());
    out
}

fn status(p: PaneInfo) -> AgentStatus {
    AgentStatus {
        run: p.session,
        node: p.window,
        handle: AgentHandle::new(p.pane_id),
        pid: p.pane_pid,
        alive: !p.dead,
        exit_status: p.dead_status,
        exit_signal: p.dead_signal,
        requeue: None,
        queued: None,
    }
}

impl Runner for TmuxRunner {
    fn check(&self) -> Result<()> {
        self.tmux.check_version()?;
        Ok(())
    }

    fn start(&self, spec: &AgentSpec<'_>) -> Result<Started> {
        // Its cgroups, made now (what an earlier attempt left there is ended first); an agent
        // whose cgroups cannot be made still runs, known by its marker.
        let procs = self
            .contain
            .prepare(
                spec.run,
                spec.node,
                crate::contain::cgroup::Limits {
                    memory: spec.memory_max,
                    pids: spec.pids_max,
                },
            )
            .unwrap_or_else(|e| {
                tracing::warn!(run = spec.run, node = spec.node, error = %e, "the agent runs without its cgroup");
                Vec::new()
            });
        let mut env = spec.env.to_vec();
        env.push(self.contain.marker(spec.run, spec.node));
        let argv = joined(&procs, spec.argv);
        let window = WindowSpec {
            session: spec.run,
            window: spec.node,
            cwd: spec.cwd,
            env: &env,
            argv: &argv,
            log: spec.log,
        };
        let spawned = if spec.first {
            self.tmux.spawn_first_window(&window)?
        } else {
            self.tmux.spawn_window(&window)?
        };
        Ok(Started {
            handle: AgentHandle::new(spawned.pane_id),
            pid: spawned.pane_pid,
        })
    }

    fn observe(&self) -> Result<Observation> {
        let (panes, host) = self.tmux.list_panes_and_server()?;
        Ok(Observation {
            agents: panes.into_iter().map(status).collect(),
            host,
            ..Observation::default()
        })
    }

    fn owned(&self) -> Result<Vec<AgentStatus>> {
        // One entry per window: a window split by hand is still one node's place.
        let mut windows = BTreeSet::new();
        Ok(self
            .tmux
            .list_panes()?
            .into_iter()
            .filter(|p| windows.insert(p.window_id.clone()))
            .map(status)
            .collect())
    }

    fn host(&self) -> Option<u32> {
        self.tmux.our_server_pid()
    }

    fn stop(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<bool> {
        let closed = self.tmux.kill_window_of_pane_in(handle.as_str(), run, node);
        // Whatever it started that outlived the window (or the tmux server) goes with it.
        let ended = self.contain.end(run, node);
        Ok(closed? || ended > 0)
    }

    fn stop_run(&self, run: &str) -> Result<bool> {
        let closed = self.tmux.kill_session(run);
        let ended = self.contain.end_run(run);
        Ok(closed? || ended > 0)
    }

    fn usage(&self) -> Result<Vec<Usage>> {
        Ok(self.contain.usage())
    }

    fn memory_kill(&self, run: &str, node: &str) -> Option<MemoryKill> {
        self.contain.memory_kill(run, node)
    }

    fn processes(&self) -> Result<Vec<Found>> {
        Ok(self.contain.found())
    }

    fn end_processes(&self, run: &str, node: &str) -> Result<usize> {
        Ok(self.contain.end(run, node))
    }

    fn capture(&self, handle: &AgentHandle) -> Result<String> {
        Ok(self.tmux.capture_pane(handle.as_str())?)
    }

    fn attach(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<Vec<String>> {
        // A node id of digits only would be read by tmux as a window index: such a node is
        // targeted by its pane.
        let target = if node.bytes().all(|b| b.is_ascii_digit()) {
            handle.as_str().to_string()
        } else {
            format!("{run}:{node}")
        };
        Ok(vec![
            self.tmux.program().to_string_lossy().into_owned(),
            "-S".to_string(),
            self.tmux.socket().display().to_string(),
            "attach-session".to_string(),
            "-t".to_string(),
            target,
        ])
    }

    fn send_key(&self, handle: &AgentHandle, key: &str) -> Result<()> {
        Ok(self.tmux.send_key(handle.as_str(), key)?)
    }

    fn send_line(&self, run: &str, node: &str, handle: &AgentHandle, text: &str) -> Result<bool> {
        let pane = handle.as_str();
        let owned = self
            .tmux
            .list_panes()?
            .iter()
            .any(|p| p.pane_id == pane && p.session == run && p.window == node);
        if !owned {
            return Ok(false);
        }
        self.tmux.paste_literal(pane, text)?;
        self.tmux.send_enter(pane)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_joins_its_cgroups_first() {
        let argv = vec!["sh".to_string(), "-c".to_string(), "echo hi".to_string()];
        assert_eq!(joined(&[], &argv), argv);
        let dir = tempfile::tempdir().unwrap();
        let procs = dir.path().join("cgroup.procs");
        let out = std::process::Command::new("/bin/sh")
            .args(
                &joined(
                    std::slice::from_ref(&procs),
                    &["sh".into(), "-c".into(), "echo $$".into()],
                )[1..],
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // The pid written is the one the program runs as: `exec` keeps it.
        let written = std::fs::read_to_string(&procs).unwrap();
        assert_eq!(written.trim(), String::from_utf8_lossy(&out.stdout).trim());
        let refused = std::process::Command::new("/bin/sh")
            .args(&joined(&[dir.path().join("no/such/file")], &argv)[1..])
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(126));
        assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot join"));
    }
}
