//! An in-memory runner for tests: agents are entries in a table, made to exit by the test.

use std::collections::BTreeMap;
use std::sync::Mutex;

use octl_proto::AppError;

use super::{AgentHandle, AgentSpec, AgentStatus, Observation, Result, Runner, Started};

/// A [`Runner`] whose agents run until [`FakeRunner::exit`] or [`FakeRunner::kill`] ends them.
#[derive(Debug, Default)]
pub struct FakeRunner {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next: u32,
    /// By handle; stopped agents are removed, ended ones stay (like a window that remains).
    agents: BTreeMap<AgentHandle, AgentStatus>,
}

impl FakeRunner {
    pub fn new() -> FakeRunner {
        FakeRunner::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes a running agent exit with `status`. `false` if there is no such running agent.
    pub fn exit(&self, handle: &AgentHandle, status: i32) -> bool {
        self.end(handle, Some(status), None)
    }

    /// Makes a running agent die of `signal`.
    pub fn kill(&self, handle: &AgentHandle, signal: i32) -> bool {
        self.end(handle, None, Some(signal))
    }

    /// Makes an agent vanish without a trace, as a window closed under the daemon or a host
    /// that lost it: it is no longer observed at all.
    pub fn vanish(&self, handle: &AgentHandle) -> bool {
        self.state().agents.remove(handle).is_some()
    }

    /// The live agent of `node` of `run`, if one runs.
    pub fn live(&self, run: &str, node: &str) -> Option<AgentHandle> {
        self.state()
            .agents
            .values()
            .find(|a| a.run == run && a.node == node && a.alive)
            .map(|a| a.handle.clone())
    }

    /// How many agents were ever started.
    pub fn started(&self) -> u32 {
        self.state().next
    }

    fn end(&self, handle: &AgentHandle, status: Option<i32>, signal: Option<i32>) -> bool {
        match self.state().agents.get_mut(handle) {
            Some(a) if a.alive => {
                a.alive = false;
                a.exit_status = status;
                a.exit_signal = signal;
                true
            }
            _ => false,
        }
    }
}

impl Runner for FakeRunner {
    fn check(&self) -> Result<()> {
        Ok(())
    }

    fn start(&self, spec: &AgentSpec<'_>) -> Result<Started> {
        if spec.argv.is_empty() {
            return Err(AppError::internal("argv: give at least the program to run"));
        }
        let mut state = self.state();
        state.next += 1;
        let handle = AgentHandle::new(format!("fake-{}", state.next));
        let pid = 10_000 + state.next;
        state.agents.insert(
            handle.clone(),
            AgentStatus {
                run: spec.run.to_string(),
                node: spec.node.to_string(),
                handle: handle.clone(),
                pid: Some(pid),
                alive: true,
                exit_status: None,
                exit_signal: None,
                requeue: None,
                queued: None,
            },
        );
        Ok(Started { handle, pid })
    }

    fn observe(&self) -> Result<Observation> {
        Ok(Observation {
            agents: self.state().agents.values().cloned().collect(),
            ..Observation::default()
        })
    }

    fn owned(&self) -> Result<Vec<AgentStatus>> {
        Ok(self.observe()?.agents)
    }

    fn stop(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<bool> {
        let mut state = self.state();
        let mine = state
            .agents
            .get(handle)
            .is_some_and(|a| a.run == run && a.node == node);
        Ok(mine && state.agents.remove(handle).is_some())
    }

    fn stop_run(&self, run: &str) -> Result<bool> {
        let mut state = self.state();
        let before = state.agents.len();
        state.agents.retain(|_, a| a.run != run);
        Ok(state.agents.len() != before)
    }

    /// `screen of RUN/NODE`: which agent's screen was read.
    fn capture(&self, handle: &AgentHandle) -> Result<String> {
        match self.state().agents.get(handle) {
            Some(a) => Ok(format!("screen of {}/{}\n", a.run, a.node)),
            None => Err(AppError::internal(format!("no agent {handle}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn start(r: &FakeRunner, run: &str, node: &str) -> Started {
        let argv = vec!["true".to_string()];
        r.start(&AgentSpec {
            run,
            node,
            cwd: Path::new("/"),
            env: &[],
            argv: &argv,
            log: Path::new("/dev/null"),
            first: false,
            attempt: 0,
            memory_max: None,
            pids_max: None,
            place: None,
        })
        .unwrap()
    }

    fn seen(r: &FakeRunner, h: &AgentHandle) -> Option<AgentStatus> {
        r.observe()
            .unwrap()
            .agents
            .into_iter()
            .find(|a| &a.handle == h)
    }

    #[test]
    fn started_agents_are_observed_running_in_one_call() {
        let r = FakeRunner::new();
        let a = start(&r, "r1", "a");
        let b = start(&r, "r1", "b");
        assert_ne!(a.handle, b.handle);
        let all = r.observe().unwrap().agents;
        assert_eq!(all.len(), 2);
        assert!(all.iter().all(|s| s.alive && s.exit_status.is_none()));
        let sa = seen(&r, &a.handle).unwrap();
        assert_eq!(
            (sa.run.as_str(), sa.node.as_str(), sa.pid),
            ("r1", "a", Some(a.pid))
        );
    }

    #[test]
    fn an_exited_agent_stays_observed_with_its_status_or_signal() {
        let r = FakeRunner::new();
        let a = start(&r, "r1", "a");
        let b = start(&r, "r1", "b");
        assert!(r.exit(&a.handle, 3));
        assert!(!r.exit(&a.handle, 4), "an ended agent does not exit twice");
        assert!(r.kill(&b.handle, 9));
        let sa = seen(&r, &a.handle).unwrap();
        assert!(!sa.alive);
        assert_eq!((sa.exit_status, sa.exit_signal), (Some(3), None));
        let sb = seen(&r, &b.handle).unwrap();
        assert_eq!(
            (sb.alive, sb.exit_status, sb.exit_signal),
            (false, None, Some(9))
        );
    }

    #[test]
    fn stop_needs_the_handle_to_still_be_that_nodes() {
        let r = FakeRunner::new();
        let a = start(&r, "r1", "a");
        assert!(
            !r.stop("r1", "b", &a.handle).unwrap(),
            "wrong node: not stopped"
        );
        assert!(
            !r.stop("r2", "a", &a.handle).unwrap(),
            "wrong run: not stopped"
        );
        assert!(seen(&r, &a.handle).is_some());
        assert!(r.stop("r1", "a", &a.handle).unwrap());
        assert!(seen(&r, &a.handle).is_none());
        assert!(!r.stop("r1", "a", &a.handle).unwrap(), "already gone");
    }

    #[test]
    fn stop_run_stops_only_that_runs_agents() {
        let r = FakeRunner::new();
        start(&r, "r1", "a");
        start(&r, "r1", "b");
        let other = start(&r, "r2", "a");
        assert!(r.stop_run("r1").unwrap());
        assert!(!r.stop_run("r1").unwrap());
        let left: Vec<_> = r.observe().unwrap().agents;
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].handle, other.handle);
    }
}
