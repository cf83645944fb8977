//! Agents' processes on this machine: every process an agent starts is found, measured and
//! ended with it, whatever became of its tmux window (docs/AGENTS.md, "Agents' processes").
//!
//! Two ways of knowing them, both kept for every local agent:
//!
//! - **cgroups** ([`cgroup`]), where a hierarchy is writable: the agent's first process (its
//!   pane's shell) writes its pid into the agent's `cgroup.procs` files before it runs
//!   anything, so everything it starts is in them, `setsid` and double forks included. With
//!   the memory controller the agent has a limit (its profile's `memory_max`): the kernel
//!   kills it there, not elsewhere on the machine, and says so (`oom_kill`).
//! - **a marker** in the environment every agent process inherits, `OCTL_AGENT=<KEY>/<RUN>/
//!   <NODE>` (KEY: this home's), found in `/proc/PID/environ` ([`procfs`]): where no cgroup
//!   can be made, and for processes started before a daemon turned cgroups on. A program that
//!   empties its environment (`env -i`) and leaves no cgroup escapes it.
//!
//! Ending an agent ([`Containment::end`]): every process still found gets SIGTERM, what is
//! left a second later SIGKILL (`cgroup.kill` where the v2 tree has it), each signalled
//! through a pidfd only while it still is ours; then its cgroups are removed.
//!
//! The daemon itself is never one of them: it leaves an agent's cgroup when started from one
//! ([`cgroup::detect`]), and `main` drops the marker from its environment before anything
//! inherits it (`/proc/self/environ` keeps the bytes it was started with, so this process is
//! left out by pid too).

pub mod cgroup;
pub mod procfs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The environment variable that marks an agent's processes.
pub const MARKER: &str = "OCTL_AGENT";

/// How long a process has to end after SIGTERM before it gets SIGKILL.
const GRACE: Duration = Duration::from_secs(1);

/// This home's agents: the cgroups they are kept in, and their marker.
#[derive(Debug, Clone)]
pub struct Containment {
    /// Names this home in markers and cgroup directories.
    key: String,
    tree: cgroup::Tree,
    /// This process: never one of the agents'.
    me: u32,
}

/// One agent's processes, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub run: String,
    pub node: String,
    pub pids: Vec<u32>,
    /// Its cgroup directory (the first hierarchy's), if it has one.
    pub cgroup: Option<PathBuf>,
}

/// One agent's memory now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    pub run: String,
    pub node: String,
    /// Anonymous and shared memory resident, of every process of the agent.
    pub resident: u64,
    /// Its cgroup's limit, if it has one.
    pub limit: Option<u64>,
}

/// What the kernel did to an agent over its memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryKill {
    pub kills: u64,
    pub limit: Option<u64>,
}

/// The key of the home at `root`: 16 hex digits of FNV-1a over its path.
pub fn key_of(root: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// `$OCTL_HOME/cgroups`: the directories this home's agents' cgroups are made in, one a line,
/// written at each start, so what a daemon left can be found without it (the tests' cleanup).
pub fn record_file(root: &Path) -> PathBuf {
    root.join("cgroups")
}

fn group_name(run: &str, node: &str) -> String {
    format!("{run}.{node}")
}

impl Containment {
    /// The home at `root`, keeping agents in cgroups where a hierarchy is writable and
    /// `cgroups` allows; the hierarchies found are written to [`record_file`].
    pub fn new(root: &Path, cgroups: bool) -> Containment {
        let key = key_of(root);
        let tree = if cgroups && cfg!(target_os = "linux") {
            let (own, mounts) = procfs::own_cgroup_files();
            cgroup::detect(&key, &own, &mounts)
        } else {
            cgroup::Tree::default()
        };
        let record: String = tree
            .hierarchies
            .iter()
            .map(|h| format!("{}\n", h.base.display()))
            .collect();
        if let Err(e) = std::fs::write(record_file(root), record) {
            tracing::warn!(error = %e, "cannot record where the agents' cgroups are");
        }
        let c = Containment {
            key,
            tree,
            me: std::process::id(),
        };
        tracing::info!(agents = %c.describe(), "how agents' processes are kept");
        c
    }

    /// Removes this home's agents' directories where no agent's is left in them (a daemon
    /// that stops leaves no empty cgroup behind; agents still running keep theirs).
    pub fn release(&self) {
        for h in &self.tree.hierarchies {
            let _ = std::fs::remove_dir(&h.base);
        }
    }

    /// In words, for the log.
    pub fn describe(&self) -> String {
        if self.tree.is_empty() {
            return format!(
                "tracked by the {MARKER} marker in their environment (no writable cgroup tree)"
            );
        }
        let parts: Vec<String> = self
            .tree
            .hierarchies
            .iter()
            .map(|h| {
                let kind = match (h.version, h.memory) {
                    (cgroup::Version::V1Memory, _) => "cgroup v1 memory",
                    (cgroup::Version::V1Pids, _) => "cgroup v1 pids",
                    (cgroup::Version::V2, true) => "cgroup v2 with memory",
                    (cgroup::Version::V2, false) => "cgroup v2 (no memory controller)",
                };
                format!("{kind} at {}", h.base.display())
            })
            .collect();
        format!("in cgroups: {}", parts.join("; "))
    }

    /// Whether agents get a memory limit (a memory controller is writable).
    pub fn limits_memory(&self) -> bool {
        self.tree.hierarchies.iter().any(|h| h.memory)
    }

    /// The environment variable marking `node` of `run`'s processes.
    pub fn marker(&self, run: &str, node: &str) -> (String, String) {
        (MARKER.to_string(), format!("{}/{run}/{node}", self.key))
    }

    /// Readies the cgroups of `node` of `run` (held to `limits`), first ending whatever an
    /// earlier attempt left running there; gives the `cgroup.procs` files its first process
    /// joins (none without cgroups).
    pub fn prepare(
        &self,
        run: &str,
        node: &str,
        limits: cgroup::Limits,
    ) -> Result<Vec<PathBuf>, String> {
        let left = self.end(run, node);
        if left > 0 {
            tracing::warn!(
                run,
                node,
                processes = left,
                "ended what an earlier attempt of the node left running"
            );
        }
        self.tree.create(&group_name(run, node), limits)
    }

    /// Every process carrying one of this home's markers, by (run, node).
    fn marked(&self) -> BTreeMap<(String, String), Vec<u32>> {
        let mut out: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
        let prefix = format!("{}/", self.key);
        for pid in procfs::pids() {
            if pid == self.me || procfs::ended(pid) {
                continue;
            }
            let Some(value) = procfs::environ_var(pid, MARKER) else {
                continue;
            };
            let Some((run, node)) = value.strip_prefix(&prefix).and_then(|r| r.split_once('/'))
            else {
                continue;
            };
            out.entry((run.to_string(), node.to_string()))
                .or_default()
                .push(pid);
        }
        out
    }

    /// Every agent of this home with a process or a cgroup: in its cgroups, or marked.
    pub fn found(&self) -> Vec<Found> {
        let mut all = self.marked();
        for name in self.tree.names() {
            let Some((run, node)) = name.split_once('.') else {
                continue;
            };
            let pids = self.tree.pids(&name);
            let entry = all.entry((run.to_string(), node.to_string())).or_default();
            entry.extend(
                pids.into_iter()
                    .filter(|p| *p != self.me && !procfs::ended(*p)),
            );
        }
        all.into_iter()
            .map(|((run, node), mut pids)| {
                pids.sort_unstable();
                pids.dedup();
                let cgroup = self
                    .tree
                    .hierarchies
                    .first()
                    .map(|h| h.base.join(group_name(&run, &node)))
                    .filter(|d| d.exists());
                Found {
                    run,
                    node,
                    pids,
                    cgroup,
                }
            })
            .collect()
    }

    /// The live processes of `node` of `run`.
    pub fn pids(&self, run: &str, node: &str) -> Vec<u32> {
        let mut pids = self.tree.pids(&group_name(run, node));
        // In a cgroup, what the agent starts stays there: its group says it all. Only without
        // one is every process's environment read for the marker (a scan of all of `/proc`,
        // once per start: at a thousand agents, 100 ms of each start).
        if self.tree.hierarchies.is_empty() {
            pids.extend(
                self.marked()
                    .remove(&(run.to_string(), node.to_string()))
                    .unwrap_or_default(),
            );
        }
        pids.retain(|p| *p != self.me && !procfs::ended(*p));
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// The memory every agent of this home holds now. With cgroups, read from the agents'
    /// own groups alone; without, one look at every process of `/proc` for the marker (it
    /// reads each one's environment: at a thousand agents, most of what the daemon spends).
    pub fn usage(&self) -> Vec<Usage> {
        let found: Vec<Found> = if self.tree.hierarchies.is_empty() {
            self.found()
        } else {
            self.tree
                .names()
                .into_iter()
                .filter_map(|name| {
                    let (run, node) = name.split_once('.')?;
                    let pids: Vec<u32> = self
                        .tree
                        .pids(&name)
                        .into_iter()
                        .filter(|p| *p != self.me)
                        .collect();
                    Some(Found {
                        run: run.to_string(),
                        node: node.to_string(),
                        pids,
                        cgroup: None,
                    })
                })
                .collect()
        };
        found
            .into_iter()
            .filter(|f| !f.pids.is_empty())
            .map(|f| {
                let name = group_name(&f.run, &f.node);
                let resident = self
                    .tree
                    .resident(&name)
                    .unwrap_or_else(|| f.pids.iter().filter_map(|p| procfs::resident(*p)).sum());
                Usage {
                    limit: self.tree.limit(&name),
                    run: f.run,
                    node: f.node,
                    resident,
                }
            })
            .collect()
    }

    /// Whether the kernel killed processes of `node` of `run` at its memory limit.
    pub fn memory_kill(&self, run: &str, node: &str) -> Option<MemoryKill> {
        let name = group_name(run, node);
        let kills = self.tree.oom_kills(&name);
        (kills > 0).then(|| MemoryKill {
            kills,
            limit: self.tree.limit(&name),
        })
    }

    /// Whether `pid` still is one of `node` of `run`'s processes: in its cgroup, or marked.
    fn is_theirs(&self, pid: u32, run: &str, node: &str) -> bool {
        let (_, value) = self.marker(run, node);
        pid != self.me
            && (self.tree.holds(&group_name(run, node), pid)
                || procfs::environ_var(pid, MARKER).as_deref() == Some(value.as_str()))
    }

    /// Ends every process of `node` of `run` (SIGTERM, then SIGKILL after [`GRACE`]) and
    /// removes its cgroups; gives how many processes there were.
    pub fn end(&self, run: &str, node: &str) -> usize {
        let name = group_name(run, node);
        let first = self.pids(run, node);
        for pid in &first {
            procfs::signal_if(*pid, libc::SIGTERM, |p| self.is_theirs(p, run, node));
        }
        let gone = |deadline: Instant| loop {
            if self.pids(run, node).is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if !first.is_empty() && !gone(Instant::now() + GRACE) {
            let all_at_once = self.tree.kill_all(&name);
            for pid in self.pids(run, node) {
                if !all_at_once {
                    procfs::signal_if(pid, libc::SIGKILL, |p| self.is_theirs(p, run, node));
                }
            }
            if !gone(Instant::now() + GRACE) {
                tracing::warn!(run, node, left = ?self.pids(run, node), "processes of an agent did not end");
            }
        }
        self.tree.remove(&name);
        first.len()
    }

    /// Ends every agent of `run` ([`Containment::end`] each).
    pub fn end_run(&self, run: &str) -> usize {
        self.found()
            .into_iter()
            .filter(|f| f.run == run)
            .map(|f| self.end(&f.run, &f.node))
            .sum()
    }
}

/// The home at `root` as its daemon left it, without one: the cgroups its record names, and
/// its marker.
fn of_home(root: &Path) -> (Containment, Vec<PathBuf>) {
    let bases: Vec<PathBuf> = std::fs::read_to_string(record_file(root))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    let tree = cgroup::Tree {
        hierarchies: bases
            .iter()
            .map(|b| cgroup::Hierarchy {
                // A v2 cgroup other than the root has `cgroup.type`; v1 ones do not.
                version: if b.join("cgroup.type").exists() {
                    cgroup::Version::V2
                } else {
                    cgroup::Version::V1Memory
                },
                base: b.clone(),
                memory: false,
                pids: false,
            })
            .collect(),
    };
    let c = Containment {
        key: key_of(root),
        tree,
        me: std::process::id(),
    };
    (c, bases)
}

/// Every agent of the home at `root` with a process or a cgroup, found without its daemon
/// (the tests count them).
pub fn found_in_home(root: &Path) -> Vec<Found> {
    of_home(root).0.found()
}

/// Ends every process of the home at `root` and removes its agents' cgroups, without a
/// daemon: what a test leaves behind (its agents outlive the daemon it killed). Gives how
/// many processes were ended.
pub fn reap_home(root: &Path) -> usize {
    let (c, bases) = of_home(root);
    let ended = c.found().iter().map(|f| c.end(&f.run, &f.node)).sum();
    for b in &bases {
        let _ = std::fs::remove_dir(b);
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_markers() {
        let k = key_of(Path::new("/home/me/.orchestratectl"));
        assert_eq!(k.len(), 16);
        assert_ne!(k, key_of(Path::new("/home/me/.orchestratectl2")));
        let c = Containment {
            key: k.clone(),
            tree: cgroup::Tree::default(),
            me: 1,
        };
        assert_eq!(c.marker("R", "n"), (MARKER.to_string(), format!("{k}/R/n")));
    }

    #[test]
    fn a_marked_process_is_found_measured_and_ended() {
        let home = tempfile::tempdir().unwrap();
        let c = Containment {
            key: key_of(home.path()),
            tree: cgroup::Tree::default(),
            me: std::process::id(),
        };
        let (k, v) = c.marker("R", "n");
        // A shell that ignores SIGTERM: it takes the SIGKILL after the grace.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; while :; do sleep 1; done"])
            .env(k, v)
            .spawn()
            .unwrap();
        let pid = child.id();
        // Found once it has exec'd with the marker (a condition, polled).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !c.pids("R", "n").contains(&pid) {
            assert!(Instant::now() < deadline, "the marked shell was not found");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(c.usage().iter().any(|u| u.run == "R" && u.node == "n"));
        assert!(c.end("R", "n") >= 1);
        let status = child.wait().unwrap();
        assert!(!status.success());
        assert!(c.pids("R", "n").is_empty());
    }
}
