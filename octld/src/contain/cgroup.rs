//! The cgroup trees an agent's processes are kept in: a directory per agent under
//! `<the daemon's own cgroup>/octl-<KEY>/` in each writable hierarchy — the v1 memory
//! hierarchy (its limit and usage), the v1 pids hierarchy (a sandboxed agent's process limit),
//! the v2 unified tree (`cgroup.kill`; its memory and pids controllers too where they are
//! delegated), or all of them on a hybrid machine.
//!
//! Where the daemon's own cgroup is named `daemon` (the systemd unit's `DelegateSubgroup=`,
//! docs/ARCHITECTURE.md "Agents' processes") its agents' directory goes beside it, in the
//! delegated cgroup above: a v2 cgroup that holds processes cannot hand its memory controller
//! down. A daemon started from inside an agent's cgroup (an agent ran `orchestratectl`
//! with no daemon up) first moves itself out, so it never ends with that agent.

use std::path::{Path, PathBuf};

/// Which cgroup interface a hierarchy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// A v1 hierarchy holding the memory controller.
    V1Memory,
    /// A v1 hierarchy holding the pids controller (and not the memory one).
    V1Pids,
    /// The v2 unified tree.
    V2,
}

/// A hierarchy in which this daemon made its agents' directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    /// `…/octl-<KEY>`: one directory per agent in it.
    pub base: PathBuf,
    /// The memory controller is there: agents get a limit, and their usage is read from it.
    pub memory: bool,
    /// The pids controller is there: a sandboxed agent's processes and threads are counted
    /// and limited (`pids.max`).
    pub pids: bool,
}

/// What an agent's cgroup holds it to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Memory in bytes, swap included.
    pub memory: Option<u64>,
    /// Processes and threads at once.
    pub pids: Option<u64>,
}

/// Every hierarchy agents are kept in (none: cgroups are off or none is writable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    pub hierarchies: Vec<Hierarchy>,
}

/// The directory name of this daemon's agents in a hierarchy.
pub fn base_name(key: &str) -> String {
    format!("octl-{key}")
}

/// Whether a path component is some daemon's agents' directory (`octl-` and 16 hex digits).
fn is_base(component: &str) -> bool {
    component
        .strip_prefix("octl-")
        .is_some_and(|k| k.len() == 16 && k.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A mounted hierarchy: where it is mounted, and what cgroup path its root is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub version: Version,
    pub point: PathBuf,
    pub root: String,
}

/// The v1 memory, v1 pids and v2 mounts in `/proc/self/mountinfo`.
pub fn mounts(mountinfo: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = before.split(' ').collect();
        let mut rest = after.split(' ');
        let (Some(fstype), _, Some(options)) = (rest.next(), rest.next(), rest.next()) else {
            continue;
        };
        let (Some(root), Some(point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        let version = match fstype {
            "cgroup2" => Version::V2,
            "cgroup" if options.split(',').any(|o| o == "memory") => Version::V1Memory,
            "cgroup" if options.split(',').any(|o| o == "pids") => Version::V1Pids,
            _ => continue,
        };
        if out.iter().any(|m: &Mount| m.version == version) {
            continue;
        }
        out.push(Mount {
            version,
            point: PathBuf::from(unescape(point)),
            root: unescape(root),
        });
    }
    out
}

/// mountinfo escapes space, tab, newline and backslash as `\NNN` (octal).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|d| (b'0'..=b'7').contains(d))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup path of a hierarchy in `/proc/PID/cgroup` text.
pub fn path_in(cgroup: &str, version: Version) -> Option<String> {
    cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let wanted = match version {
            Version::V2 => id == "0" && controllers.is_empty(),
            Version::V1Memory => controllers.split(',').any(|c| c == "memory"),
            Version::V1Pids => controllers.split(',').any(|c| c == "pids"),
        };
        wanted.then(|| path.to_string())
    })
}

/// The daemon's own cgroup `path` with any agent's directory cut off: the part above the
/// first `octl-<KEY>` component, and whether one was cut.
fn above_agents(path: &str) -> (String, bool) {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    match parts.iter().position(|p| is_base(p)) {
        Some(i) => (format!("/{}", parts[..i].join("/")), true),
        None => (format!("/{}", parts.join("/")), false),
    }
}

fn dir_of(mount: &Mount, path: &str) -> PathBuf {
    let rel = if mount.root != "/" {
        path.strip_prefix(&mount.root).unwrap_or(path)
    } else {
        path
    };
    mount.point.join(rel.trim_start_matches('/'))
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

/// Finds the writable hierarchies and makes this daemon's agents' directory in each (`key`
/// names the daemon's home). Moves the daemon out of an agent's cgroup first.
pub fn detect(key: &str, cgroup: &str, mountinfo: &str) -> Tree {
    let mut tree = Tree::default();
    for mount in mounts(mountinfo) {
        let Some(own) = path_in(cgroup, mount.version) else {
            continue;
        };
        let (own, inside_agent) = above_agents(&own);
        let own_dir = dir_of(&mount, &own);
        if inside_agent {
            let moved = write(
                &own_dir.join("cgroup.procs"),
                &std::process::id().to_string(),
            );
            tracing::info!(dir = %own_dir.display(), moved = moved.is_ok(), "octld was started inside an agent's cgroup; moving out of it");
        }
        let place = match mount.version {
            Version::V2 if own_dir.file_name().is_some_and(|n| n == "daemon") => own_dir
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or(own_dir.clone()),
            _ => own_dir.clone(),
        };
        let base = place.join(base_name(key));
        if let Err(e) = std::fs::create_dir(&base) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                tracing::debug!(dir = %base.display(), error = %e, "cgroup hierarchy not writable");
                continue;
            }
        }
        let (memory, pids) = match mount.version {
            Version::V1Memory => (true, false),
            Version::V1Pids => (false, true),
            Version::V2 => (
                v2_controller(&place, &base, "memory"),
                v2_controller(&place, &base, "pids"),
            ),
        };
        tree.hierarchies.push(Hierarchy {
            version: mount.version,
            base,
            memory,
            pids,
        });
    }
    tree
}

/// Hands the v2 `controller` down to `base` (from `place` above it), if it is there:
/// refused (`EBUSY`) while `place` itself holds processes and is not the root.
fn v2_controller(place: &Path, base: &Path, controller: &str) -> bool {
    let has = |dir: &Path, file: &str| {
        std::fs::read_to_string(dir.join(file))
            .is_ok_and(|t| t.split_whitespace().any(|c| c == controller))
    };
    if !has(place, "cgroup.controllers") {
        return false;
    }
    let enable = |dir: &Path| {
        has(dir, "cgroup.subtree_control")
            || write(
                &dir.join("cgroup.subtree_control"),
                &format!("+{controller}"),
            )
            .is_ok()
    };
    enable(place) && enable(base)
}

impl Tree {
    pub fn is_empty(&self) -> bool {
        self.hierarchies.is_empty()
    }

    fn dirs<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (&'a Hierarchy, PathBuf)> + 'a {
        self.hierarchies.iter().map(move |h| (h, h.base.join(name)))
    }

    /// The memory hierarchy's directory of `name`, if there is one.
    pub fn memory_dir(&self, name: &str) -> Option<(Version, PathBuf)> {
        self.hierarchies
            .iter()
            .find(|h| h.memory)
            .map(|h| (h.version, h.base.join(name)))
    }

    /// Makes the agent `name`'s directory in every hierarchy, with the memory limit (swap
    /// included) where the memory controller is and the pids limit where the pids one is;
    /// gives the `cgroup.procs` files the agent's first process writes its pid to.
    pub fn create(&self, name: &str, limits: Limits) -> Result<Vec<PathBuf>, String> {
        let mut procs = Vec::new();
        for (h, dir) in self.dirs(name) {
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("cannot make the cgroup {}: {e}", dir.display())),
            }
            if let (true, Some(pids)) = (h.pids, limits.pids) {
                write(&dir.join("pids.max"), &pids.to_string())
                    .map_err(|e| format!("cannot set pids.max of {}: {e}", dir.display()))?;
            }
            if let (true, Some(bytes)) = (h.memory, limits.memory) {
                let (memory, swap) = match h.version {
                    Version::V2 => ("memory.max", "memory.swap.max"),
                    _ => ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"),
                };
                write(&dir.join(memory), &bytes.to_string())
                    .map_err(|e| format!("cannot set {} of {}: {e}", memory, dir.display()))?;
                // Swap counts against the limit (v1: memory + swap = the limit; v2: none).
                let swap_value = match h.version {
                    Version::V2 => "0".to_string(),
                    _ => bytes.to_string(),
                };
                if dir.join(swap).exists() {
                    let _ = write(&dir.join(swap), &swap_value);
                }
            }
            procs.push(dir.join("cgroup.procs"));
        }
        Ok(procs)
    }

    /// The processes in `name`'s directories.
    pub fn pids(&self, name: &str) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .dirs(name)
            .flat_map(|(_, d)| read_pids(&d.join("cgroup.procs")))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// `name`'s anonymous and shared-memory usage, from the memory controller.
    pub fn resident(&self, name: &str) -> Option<u64> {
        let (version, dir) = self.memory_dir(name)?;
        let stat = std::fs::read_to_string(dir.join("memory.stat")).ok()?;
        let keys: &[&str] = match version {
            Version::V2 => &["anon", "shmem"],
            _ => &["total_rss", "total_shmem"],
        };
        Some(
            stat.lines()
                .filter_map(|l| l.split_once(' '))
                .filter(|(k, _)| keys.contains(k))
                .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
                .sum(),
        )
    }

    /// The limit set on `name`, if it has one.
    pub fn limit(&self, name: &str) -> Option<u64> {
        let (version, dir) = self.memory_dir(name)?;
        let file = match version {
            Version::V2 => "memory.max",
            _ => "memory.limit_in_bytes",
        };
        // v1 says "no limit" with a huge number, v2 with "max".
        std::fs::read_to_string(dir.join(file))
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|b| *b < 1 << 62)
    }

    /// The pids limit set on `name`, if it has one.
    pub fn pids_limit(&self, name: &str) -> Option<u64> {
        let h = self.hierarchies.iter().find(|h| h.pids)?;
        std::fs::read_to_string(h.base.join(name).join("pids.max"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// How many processes of `name` the kernel killed for going over its memory limit.
    pub fn oom_kills(&self, name: &str) -> u64 {
        let Some((version, dir)) = self.memory_dir(name) else {
            return 0;
        };
        let file = match version {
            Version::V2 => "memory.events",
            _ => "memory.oom_control",
        };
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Kills every process of `name` at once where the v2 tree can (`cgroup.kill`); `false`
    /// where it cannot, and they are to be signalled one by one.
    pub fn kill_all(&self, name: &str) -> bool {
        self.dirs(name)
            .filter(|(h, _)| h.version == Version::V2)
            .any(|(_, d)| write(&d.join("cgroup.kill"), "1").is_ok())
    }

    /// Removes `name`'s directories (those still holding a process stay).
    pub fn remove(&self, name: &str) {
        for (_, dir) in self.dirs(name) {
            if let Err(e) = std::fs::remove_dir(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::debug!(dir = %dir.display(), error = %e, "cgroup not removed");
                }
            }
        }
    }

    /// The agents' directory names in every hierarchy.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .hierarchies
            .iter()
            .flat_map(|h| std::fs::read_dir(&h.base).into_iter().flatten())
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Whether `pid` is in `name`'s directory of some hierarchy now.
    pub fn holds(&self, name: &str, pid: u32) -> bool {
        let theirs = super::procfs::cgroups_of(pid);
        self.hierarchies.iter().any(|h| {
            let Some(rel) = h
                .base
                .file_name()
                .map(|b| format!("/{}/{name}", b.to_string_lossy()))
            else {
                return false;
            };
            theirs.lines().any(|l| l.ends_with(&rel))
        })
    }
}

fn read_pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's shape: the memory controller in v1 only, a unified tree beside it.
    const HYBRID: &str = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 30 0:32 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
";

    #[test]
    fn mounts_and_own_paths_are_read() {
        let m = mounts(HYBRID);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].version, Version::V2);
        assert_eq!(m[0].point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(m[1].version, Version::V1Memory);
        assert_eq!(m[2].version, Version::V1Pids);
        assert_eq!(m[2].point, PathBuf::from("/sys/fs/cgroup/pids"));
        let cg = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/c0f\n0::/user.slice/x.scope\n";
        assert_eq!(
            path_in(cg, Version::V1Memory).as_deref(),
            Some("/process_api/c0f")
        );
        assert_eq!(
            path_in(cg, Version::V2).as_deref(),
            Some("/user.slice/x.scope")
        );
        assert_eq!(path_in(cg, Version::V1Pids).as_deref(), Some("/"));
        assert_eq!(
            dir_of(&m[1], "/process_api/c0f"),
            PathBuf::from("/sys/fs/cgroup/memory/process_api/c0f")
        );
        let ns = Mount {
            version: Version::V2,
            point: "/sys/fs/cgroup".into(),
            root: "/a".into(),
        };
        assert_eq!(dir_of(&ns, "/a/b"), PathBuf::from("/sys/fs/cgroup/b"));
        assert_eq!(unescape("/mnt/with\\040space"), "/mnt/with space");
    }

    #[test]
    fn a_daemon_inside_an_agents_cgroup_climbs_out() {
        assert_eq!(above_agents("/a/b"), ("/a/b".to_string(), false));
        assert_eq!(
            above_agents("/a/octl-0123456789abcdef/R.n/x"),
            ("/a".to_string(), true)
        );
        assert_eq!(
            above_agents("/octl-0123456789abcdef/R.n"),
            ("/".to_string(), true)
        );
        // Not ours: another name that starts alike.
        assert!(!above_agents("/octl-notes/x").1);
    }

    #[test]
    fn groups_in_a_directory_tree() {
        // A writable directory stands in for a cgroup tree: what the daemon makes and reads.
        let dir = tempfile::tempdir().unwrap();
        let tree = Tree {
            hierarchies: vec![Hierarchy {
                version: Version::V2,
                base: dir.path().join("octl-0123456789abcdef"),
                memory: true,
                pids: true,
            }],
        };
        std::fs::create_dir(&tree.hierarchies[0].base).unwrap();
        let limits = Limits {
            memory: Some(1 << 20),
            pids: Some(64),
        };
        let procs = tree.create("R.a", limits).unwrap();
        assert_eq!(
            procs,
            vec![tree.hierarchies[0].base.join("R.a/cgroup.procs")]
        );
        let agent = tree.hierarchies[0].base.join("R.a");
        assert_eq!(
            std::fs::read_to_string(agent.join("memory.max")).unwrap(),
            "1048576"
        );
        assert_eq!(tree.limit("R.a"), Some(1 << 20));
        assert_eq!(tree.pids_limit("R.a"), Some(64));
        std::fs::write(agent.join("cgroup.procs"), "12\n7\n").unwrap();
        assert_eq!(tree.pids("R.a"), vec![7, 12]);
        std::fs::write(agent.join("memory.stat"), "anon 4096\nfile 100\nshmem 10\n").unwrap();
        assert_eq!(tree.resident("R.a"), Some(4106));
        std::fs::write(agent.join("memory.events"), "low 0\noom 2\noom_kill 1\n").unwrap();
        assert_eq!(tree.oom_kills("R.a"), 1);
        assert_eq!(tree.names(), vec!["R.a".to_string()]);
    }
}
