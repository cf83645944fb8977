//! The runner over the private tmux server: one session per run, one window per node; an
//! agent's handle is its pane id.

use std::collections::BTreeSet;

use super::{AgentHandle, AgentSpec, AgentStatus, Observation, Result, Runner, Started};
use crate::tmux::{PaneInfo, Tmux, WindowSpec};

/// [`Runner`] over [`Tmux`].
#[derive(Debug, Clone)]
pub struct TmuxRunner {
    tmux: Tmux,
}

impl TmuxRunner {
    pub fn new(tmux: Tmux) -> TmuxRunner {
        TmuxRunner { tmux }
    }
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
        let window = WindowSpec {
            session: spec.run,
            window: spec.node,
            cwd: spec.cwd,
            env: spec.env,
            argv: spec.argv,
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
        Ok(self
            .tmux
            .kill_window_of_pane_in(handle.as_str(), run, node)?)
    }

    fn stop_run(&self, run: &str) -> Result<bool> {
        Ok(self.tmux.kill_session(run)?)
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
        self.tmux.send_keys_literal(pane, text)?;
        self.tmux.send_enter(pane)?;
        Ok(true)
    }
}
