//! Admission by resources: a new agent on this machine starts only while there is room for it
//! ([`decide::room`](super::decide::room), from `[limits]`), judged under the same lock that
//! writes its `node.starting`, so two starts never take the same room. One turned away waits,
//! `pending`, as for a port ([`super::Wait::Room`]); each tick looks again and wakes its run
//! once there is room.
//!
//! What an agent is expected to need comes from watching them: every second (less often with
//! many agents) the runner measures each local agent's whole process tree
//! ([`crate::contain`]); each profile keeps the peaks of its agents that were watched for at
//! least [`MATURE`] — a quick failure teaches nothing about what a working agent takes — and
//! a live agent watched that long is expected to need its own peak (plus headroom), not its
//! profile's.
//! Observations live with the daemon: after a restart a profile starts again from its
//! `memory_estimate` and its live agents.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use octl_proto::state::Node;
use octl_proto::NodeState;

use super::decide::room::{self, Live, Machine, Shortfall};
use crate::config::limits::DEFAULT_ESTIMATE;
use crate::config::{Config, LOCAL_RUNNER};
use crate::contain::procfs;
use crate::daemon::Daemon;

/// How often agents are measured (at most).
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// More agents are measured less often: this long per agent, when that is longer.
const PER_AGENT: Duration = Duration::from_millis(10);
/// An agent watched this long teaches its profile what it takes.
pub const MATURE: Duration = Duration::from_secs(30);
/// Peaks kept per profile.
const KEPT: usize = 32;

/// What the daemon has seen its agents hold.
#[derive(Default)]
pub struct Observed {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    last: Option<Instant>,
    sampling: bool,
    live: HashMap<(String, String), Seen>,
    /// The peaks of agents that ended after [`MATURE`], newest last, by profile.
    ended: HashMap<String, VecDeque<u64>>,
}

/// One live agent, as measured.
#[derive(Debug, Clone)]
pub struct Seen {
    pub profile: String,
    pub resident: u64,
    pub peak: u64,
    pub limit: Option<u64>,
    since: Instant,
}

impl Observed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `node` of `run` held when last measured.
    pub fn seen(&self, run: &str, node: &str) -> Option<Seen> {
        self.lock()
            .live
            .get(&(run.to_string(), node.to_string()))
            .cloned()
    }

    /// What the live agent `node` of `run` (of `profile`) is expected to need: once watched
    /// for [`MATURE`], its own peak plus `headroom` — a long-lived agent is best told by what
    /// it has done; before, what a new agent of its profile is expected to need.
    pub fn expected(&self, run: &str, node: &str, profile: &str, prior: u64, headroom: f64) -> u64 {
        let own = self
            .seen(run, node)
            .filter(|s| s.since.elapsed() >= MATURE)
            .map(|s| room::estimate(prior, Some(s.peak), 0, headroom));
        own.unwrap_or_else(|| self.estimate(profile, prior, headroom))
    }

    /// What a new agent of `profile` is expected to need ([`room::estimate`]).
    pub fn estimate(&self, profile: &str, prior: u64, headroom: f64) -> u64 {
        let inner = self.lock();
        let ended = inner
            .ended
            .get(profile)
            .and_then(|peaks| peaks.iter().max().copied());
        let live = inner
            .live
            .values()
            .filter(|s| s.profile == profile)
            .map(|s| s.peak)
            .max()
            .unwrap_or(0);
        room::estimate(prior, ended, live, headroom)
    }

    /// Takes one measurement of the live agents (`live`: every live local node with its
    /// profile; `usage`: what the runner measured). Agents no longer live end their watch.
    fn record(&self, live: &[(String, String, String)], usage: &[crate::runner::Usage]) {
        let now = Instant::now();
        let mut inner = self.lock();
        let measured: HashMap<(&str, &str), &crate::runner::Usage> = usage
            .iter()
            .map(|u| ((u.run.as_str(), u.node.as_str()), u))
            .collect();
        let mut next = HashMap::new();
        for (run, node, profile) in live {
            let key = (run.clone(), node.clone());
            let before = inner.live.remove(&key);
            let u = measured.get(&(run.as_str(), node.as_str()));
            let resident = u.map_or(0, |u| u.resident);
            let seen = Seen {
                profile: profile.clone(),
                resident,
                peak: before.as_ref().map_or(0, |b| b.peak).max(resident),
                limit: u.and_then(|u| u.limit),
                since: before.map_or(now, |b| b.since),
            };
            next.insert(key, seen);
        }
        let gone: Vec<Seen> = inner.live.drain().map(|(_, s)| s).collect();
        for s in gone {
            if s.peak > 0 && now.duration_since(s.since) >= MATURE {
                let peaks = inner.ended.entry(s.profile).or_default();
                peaks.push_back(s.peak);
                if peaks.len() > KEPT {
                    peaks.pop_front();
                }
            }
        }
        inner.live = next;
    }
}

/// Whether `node` runs its agent on this machine.
fn local(node: &Node) -> bool {
    node.runner.as_deref().is_none_or(|r| r == LOCAL_RUNNER)
}

/// The profile a node's agent is of.
fn profile_of(node: &Node) -> String {
    node.agent
        .clone()
        .unwrap_or_else(|| crate::agents::DEFAULT_PROFILE.to_string())
}

/// Every live node of every run whose agent runs here: (run, node, profile).
fn live_local(daemon: &Daemon) -> Vec<(String, String, String)> {
    use NodeState::{Running, Starting, Waiting};
    let mut out = Vec::new();
    for h in daemon.store.handles() {
        for n in &h.view().nodes {
            if matches!(n.state, Starting | Running | Waiting) && local(n) {
                out.push((h.id.clone(), n.id.clone(), profile_of(n)));
            }
        }
    }
    out
}

/// Measures the agents if a measurement is due, off the tick (the supervisor calls it).
pub fn sample(daemon: &Arc<Daemon>) {
    let observed = &daemon.engine.observed;
    let due = |inner: &Inner, every: Duration| {
        !inner.sampling && inner.last.is_none_or(|t| t.elapsed() >= every)
    };
    if !due(&observed.lock(), SAMPLE_EVERY) {
        return;
    }
    let live = live_local(daemon);
    {
        let mut inner = observed.lock();
        let every = SAMPLE_EVERY.max(PER_AGENT * live.len() as u32);
        if !due(&inner, every) {
            return;
        }
        if live.is_empty() && inner.live.is_empty() {
            return;
        }
        inner.sampling = true;
        inner.last = Some(Instant::now());
    }
    let d = daemon.clone();
    tokio::task::spawn_blocking(move || {
        let usage = d.runner.usage().unwrap_or_default();
        let observed = &d.engine.observed;
        observed.record(&live, &usage);
        observed.lock().sampling = false;
    });
}

/// What a new agent of `profile` is assumed to need before any was observed.
fn prior(config: &Config, profile: &str) -> u64 {
    config
        .agents
        .get(profile)
        .and_then(|a| a.memory_estimate())
        .unwrap_or(DEFAULT_ESTIMATE)
}

/// The memory limit of an agent of `profile`: its `memory_max`, else the machine's total
/// less `limits.min_available` (alone, no agent can take the machine below the floor).
pub fn memory_max(config: &Config, profile: &str) -> Option<u64> {
    let own = config.agents.get(profile).and_then(|a| a.memory_max());
    own.or_else(|| {
        let total = procfs::meminfo()?.total;
        Some(total.saturating_sub(config.limits.min_available.of(total)))
    })
}

/// Whether a new agent of `profile` for `node` of `run` (on `runner`) may start now. Call it
/// holding the lock `node.starting` is written under.
pub fn check(
    daemon: &Daemon,
    run: &str,
    node: &str,
    profile: &str,
    runner: Option<&str>,
) -> Result<(), Shortfall> {
    if runner.is_some_and(|r| r != LOCAL_RUNNER) {
        return Ok(());
    }
    // A config that does not read fails the start itself, with its message.
    let config = daemon.config.get().unwrap_or_default();
    let limits = &config.limits;
    let observed = &daemon.engine.observed;
    let live: Vec<Live> = live_local(daemon)
        .into_iter()
        .filter(|(r, n, _)| !(r == run && n == node))
        .map(|(r, n, p)| Live {
            resident: observed.seen(&r, &n).map_or(0, |s| s.resident),
            estimate: observed.expected(&r, &n, &p, prior(&config, &p), limits.headroom),
        })
        .collect();
    // Where the machine does not say, only the budget and the count hold agents back.
    let machine = match procfs::meminfo() {
        Some(m) => Machine {
            total: m.total,
            available: m.available,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_1min: procfs::load_1min(),
        },
        None => Machine {
            total: 0,
            available: u64::MAX,
            cores: 1,
            load_1min: None,
        },
    };
    let needed = observed.estimate(profile, prior(&config, profile), limits.headroom);
    room::room(limits, &machine, &live, profile, needed)
}

/// [`check`] for a node of a run as the log has it.
pub fn check_node(daemon: &Daemon, run: &str, node: &Node) -> Result<(), Shortfall> {
    check(
        daemon,
        run,
        &node.id,
        &profile_of(node),
        node.runner.as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    fn usage(node: &str, resident: u64) -> crate::runner::Usage {
        crate::runner::Usage {
            run: "R".into(),
            node: node.into(),
            resident,
            limit: None,
        }
    }

    fn live(nodes: &[&str]) -> Vec<(String, String, String)> {
        nodes
            .iter()
            .map(|n| ("R".to_string(), n.to_string(), "shell".to_string()))
            .collect()
    }

    /// Moves every watch of `o` back by `by`, as if it had started that much earlier.
    fn age(o: &Observed, by: Duration) {
        for s in o.lock().live.values_mut() {
            s.since = Instant::now().checked_sub(by).unwrap();
        }
    }

    #[test]
    fn a_profile_learns_from_agents_watched_long_enough_and_live_ones_from_themselves() {
        let o = Observed::default();
        let prior = 1024 * MIB;
        o.record(
            &live(&["a", "b"]),
            &[usage("a", 100 * MIB), usage("b", 40 * MIB)],
        );
        // Young: the prior, for new and live agents alike.
        assert_eq!(o.estimate("shell", prior, 0.0), prior);
        assert_eq!(o.expected("R", "b", "shell", prior, 0.0), prior);
        // A quick end teaches nothing.
        o.record(&live(&["b"]), &[usage("b", 40 * MIB)]);
        assert_eq!(o.estimate("shell", prior, 0.0), prior);
        // Watched long enough, b is known by its own peak; once it ends, its profile learns.
        age(&o, MATURE);
        assert_eq!(o.expected("R", "b", "shell", prior, 0.5), 60 * MIB);
        o.record(&live(&[]), &[]);
        assert_eq!(o.estimate("shell", prior, 0.25), 50 * MIB);
        assert_eq!(o.estimate("claude", prior, 0.25), prior);
        assert!(o.seen("R", "b").is_none());
    }
}
