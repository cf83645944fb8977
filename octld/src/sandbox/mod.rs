//! Agents in a sandbox (docs/SECURITY.md): a sandboxed agent reaches its worktree, its tools
//! and its own node, nothing else of the machine.
//!
//! - [`bwrap`]: the bubblewrap command line of a [`bwrap::View`] (pure).
//! - [`proxy`]: `network = "allow"`: the daemon's proxy serving a node the `host:port`
//!   patterns of `[sandbox] allow` (the decision is written there), and [`relay`]: `octld
//!   sandbox-relay`, which starts the agent inside and carries its connections to the proxy.
//! - here: `[sandbox]` of config.toml, [`prepare`] (the node's private home, `/tmp`, its
//!   branch's ref as a private copy, its CLI's configuration copied) and [`harvest`] (the
//!   branch the agent moved in its copy, brought back to the repository by compare-and-swap,
//!   before the daemon reads or commits the node's work).
//!
//! The node's own socket, the only way to the daemon inside, is `server::agent`.

pub mod bwrap;
pub mod proxy;
pub mod relay;

use std::path::{Path, PathBuf};

use octl_proto::home::Layout;
use octl_proto::sandbox::{SandboxKind, SandboxNetwork};
use octl_proto::AppError;
use serde::Deserialize;

use crate::git::{CasOutcome, Git};

/// `[sandbox]` of config.toml, as written.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SandboxToml {
    pub kind: Option<String>,
    pub network: Option<String>,
    pub allow: Option<Vec<String>>,
    pub pids_max: Option<u64>,
    pub read_only: Option<Vec<String>>,
    pub read_write: Option<Vec<String>>,
}

/// `[sandbox]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    /// For nodes whose run and profile do not say.
    pub kind: SandboxKind,
    pub network: SandboxNetwork,
    /// `network = "allow"`: the `host:port` patterns reachable through the daemon's proxy.
    pub allow: Vec<proxy::Pattern>,
    /// Processes and threads a sandboxed agent may have at once (its cgroup's `pids.max`).
    pub pids_max: u64,
    /// More paths shown read-only / read-write (`~/` is the user's home).
    pub read_only: Vec<String>,
    pub read_write: Vec<String>,
}

/// Enough for a build with parallel jobs and an agent CLI's own processes; a fork bomb stops
/// there.
pub const DEFAULT_PIDS_MAX: u64 = 1024;

impl Default for SandboxConfig {
    fn default() -> SandboxConfig {
        SandboxConfig {
            kind: SandboxKind::None,
            network: SandboxNetwork::Host,
            allow: Vec::new(),
            pids_max: DEFAULT_PIDS_MAX,
            read_only: Vec::new(),
            read_write: Vec::new(),
        }
    }
}

impl SandboxToml {
    pub fn validate(&self) -> Result<SandboxConfig, AppError> {
        let d = SandboxConfig::default();
        let kind = match &self.kind {
            Some(k) => SandboxKind::parse("[sandbox] kind", k)?,
            None => d.kind,
        };
        let network = match self.network.as_deref() {
            None => d.network,
            Some("host") => SandboxNetwork::Host,
            Some("none") => SandboxNetwork::None,
            Some("allow") => SandboxNetwork::Allow,
            Some(other) => {
                return Err(AppError::invalid(format!(
                    "[sandbox] network: {other:?} is not a network; accepted: host, none, allow"
                )))
            }
        };
        let allow = self
            .allow
            .iter()
            .flatten()
            .map(|p| proxy::Pattern::parse(p))
            .collect::<Result<Vec<_>, _>>()?;
        // A list that would restrict nothing is a mistake to say, not to ignore.
        if self.allow.is_some() && network != SandboxNetwork::Allow {
            return Err(AppError::invalid(format!(
                "[sandbox] allow: applies to network = \"allow\", and network is {:?}; set network = \"allow\" or remove allow",
                network.as_str()
            )));
        }
        let pids_max = match self.pids_max {
            Some(0) => {
                return Err(AppError::invalid(
                    "[sandbox] pids_max: 0 would let the agent start nothing; give a count such as 1024",
                ))
            }
            Some(n) => n,
            None => d.pids_max,
        };
        for (field, paths) in [
            ("read_only", &self.read_only),
            ("read_write", &self.read_write),
        ] {
            for p in paths.iter().flatten() {
                if !(p.starts_with('/') || p.starts_with("~/")) {
                    return Err(AppError::invalid(format!(
                        "[sandbox] {field}: {p:?} is not an absolute path; accepted: /abs/path or ~/path"
                    )));
                }
            }
        }
        Ok(SandboxConfig {
            kind,
            network,
            allow,
            pids_max,
            read_only: self.read_only.clone().unwrap_or_default(),
            read_write: self.read_write.clone().unwrap_or_default(),
        })
    }
}

/// Each agent CLI's configuration, by its program's name: what is copied into a sandboxed
/// agent's private home (the top-level files of each: settings and credentials, not another
/// session's transcripts), relative to the home, and the variables naming directories of it
/// wherever they are. Only the node's own CLI's is copied (a shell agent gets no Claude or
/// Codex credentials); `.gitconfig` always. A program of another name (a user profile's
/// wrapper) gets every CLI's, as it may run any of them.
pub const CONFIG: &[(&str, &[&str], &[&str])] = &[
    (
        "claude",
        &[".claude", ".claude.json"],
        &["CLAUDE_CONFIG_DIR"],
    ),
    ("codex", &[".codex"], &["CODEX_HOME"]),
    ("gemini", &[".gemini"], &[]),
    (
        "opencode",
        &[".config/opencode", ".local/share/opencode"],
        &[],
    ),
    ("aider", &[".aider.conf.yml"], &[]),
];

/// The configuration copied for `program` (its path or name): in the home, in variables.
pub fn config_of(program: &str) -> (Vec<&'static str>, Vec<&'static str>) {
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    let shells = ["sh", "bash", "dash", "zsh"];
    let mut home = vec![".gitconfig"];
    let mut vars = Vec::new();
    for (cli, files, vs) in CONFIG {
        if *cli == name || (!shells.contains(&name) && CONFIG.iter().all(|(c, _, _)| *c != name)) {
            home.extend_from_slice(files);
            vars.extend_from_slice(vs);
        }
    }
    (home, vars)
}

/// What [`prepare`] needs to know of the node.
pub struct Node<'a> {
    pub run: &'a str,
    pub node: &'a str,
    pub worktree: &'a Path,
    /// `octl/<RUN>/<NODE>`: the branch the worktree has checked out.
    pub branch: &'a str,
    /// The agent's environment (its `PATH`, the CLI's configuration variables, `HOME`).
    pub env: &'a [(String, String)],
    /// The agent's argv: its programs (and an `agent-wrap`'s) are shown read-only.
    pub argv: &'a [String],
}

fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> AppError {
    move |e| AppError::new(octl_proto::ErrorKind::IoError, format!("{what}: {e}"))
}

/// The key naming a node's control directory.
pub fn ctl_key(run: &str, node: &str) -> String {
    crate::contain::key_of(Path::new(&format!("{run}/{node}")))
}

/// Makes what the node's sandbox shows and returns its view: its private home and `/tmp`
/// (kept across the node's attempts, so a resumed session finds its transcript), its branch's
/// ref and reflog as private copies (seeded from the repository after bringing back what an
/// earlier attempt did), its CLI's configuration copied on its first start, its control
/// directory.
pub fn prepare(
    layout: &Layout,
    config: &SandboxConfig,
    network: SandboxNetwork,
    n: &Node,
) -> Result<bwrap::View, AppError> {
    let env = |k: &str| {
        n.env
            .iter()
            .rev()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(k).ok())
            .filter(|v| !v.is_empty())
    };
    let home = PathBuf::from(env("HOME").ok_or_else(|| {
        AppError::invalid("a sandboxed agent needs HOME set: it is shown a private one there")
    })?);
    let dir = layout.sandbox_of(n.run, n.node);
    let (private_home, tmp) = (dir.join("home"), dir.join("tmp"));
    let first = !private_home.exists();
    for d in [&private_home, &tmp, &dir.join("refs"), &dir.join("logs")] {
        std::fs::create_dir_all(d).map_err(io(format!("cannot make {}", d.display())))?;
    }
    let (git_worktree, git_common) = git_dirs(n.worktree)?;
    let (parent, leaf) = n.branch.rsplit_once('/').ok_or_else(|| {
        AppError::internal(format!("branch {} has no directory to sandbox", n.branch))
    })?;
    let refs_dir = git_common.join("refs/heads").join(parent);
    let logs_dir = git_common.join("logs/refs/heads").join(parent);
    for d in [&refs_dir, &logs_dir] {
        // The mount points: git makes them with the first loose ref; a packed one has none.
        std::fs::create_dir_all(d).map_err(io(format!("cannot make {}", d.display())))?;
    }
    harvest(layout, n.run, n.node, n.worktree, n.branch)?;
    seed(&dir, &git_common, n.branch, leaf)?;
    // Its CLI's configuration, once: later attempts keep what the agent made of it.
    let mut copies = Vec::new();
    let (in_home, vars) = config_of(n.argv.first().map_or("", String::as_str));
    let mut wanted: Vec<PathBuf> = in_home.iter().map(|r| home.join(r)).collect();
    wanted.extend(vars.iter().filter_map(|v| env(v)).map(PathBuf::from));
    for (i, path) in wanted.iter().enumerate() {
        if !path.exists() {
            continue;
        }
        let to = match path.strip_prefix(&home) {
            Ok(rel) => private_home.join(rel),
            Err(_) => {
                let to = dir.join("copies").join(i.to_string());
                copies.push((path.clone(), to.clone()));
                to
            }
        };
        if first || !to.exists() {
            copy_top(path, &to)?;
        }
    }
    let ctl = layout.agent_ctl(&ctl_key(n.run, n.node));
    std::fs::create_dir_all(&ctl).map_err(io(format!("cannot make {}", ctl.display())))?;
    let expand = |p: &String| match p.strip_prefix("~/") {
        Some(rel) => home.join(rel),
        None => PathBuf::from(p),
    };
    let mut read_only: Vec<PathBuf> = env("PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    read_only.extend(programs(n.argv, env("PATH").as_deref()));
    if let Some(exe) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        read_only.push(exe);
    }
    // A directory holding the user's home or the daemon's (a PATH entry of `$HOME` itself,
    // say) would show them whole over their private copies.
    read_only.retain(|p| !home.starts_with(p) && !layout.root().starts_with(p));
    // What the system's own directories show already (`/usr/bin`, `/bin` → `usr/bin`) is not
    // mounted again: each mount is a part of a sandbox's start.
    let system = bwrap::system_dirs();
    read_only.retain(|p| !system.iter().any(|(d, _)| p.starts_with(d)));
    read_only.extend(config.read_only.iter().map(expand));
    // The files the daemon hands the agent in its home: the review it was sent back with,
    // its fan-out's manifest.
    read_only.extend(
        ["OCTL_REVIEW_FILE", "OCTL_MANIFEST"]
            .iter()
            .filter_map(|v| env(v))
            .map(PathBuf::from),
    );
    let relay = (network == SandboxNetwork::Allow).then(|| {
        let forwards: Vec<(String, String)> = config
            .allow
            .iter()
            .filter_map(proxy::Pattern::loopback_forward)
            .collect();
        bwrap::Relay {
            program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("octld")),
            dir: proxy::dir_of(layout, n.run, n.node),
            http_port: bwrap::http_port(&forwards),
            forwards,
        }
    });
    read_only.sort();
    read_only.dedup();
    let read_write = config.read_write.iter().map(expand).collect();
    Ok(bwrap::View {
        worktree: n.worktree.to_path_buf(),
        git_common,
        git_worktree,
        refs_dir: (refs_dir, dir.join("refs")),
        logs_dir: (logs_dir, dir.join("logs")),
        home: (home, private_home),
        tmp,
        octl_home: (layout.root().to_path_buf(), ctl),
        read_only,
        read_write,
        copies,
        network,
        relay,
    })
}

/// The worktree's own git directory and the repository's common one, from its `.git` file.
fn git_dirs(worktree: &Path) -> Result<(PathBuf, PathBuf), AppError> {
    let dotgit = worktree.join(".git");
    let text = std::fs::read_to_string(&dotgit)
        .map_err(io(format!("cannot read {}", dotgit.display())))?;
    let own = text
        .trim()
        .strip_prefix("gitdir: ")
        .map(|p| worktree.join(p))
        .ok_or_else(|| {
            AppError::internal(format!(
                "{} is not a worktree's .git file",
                dotgit.display()
            ))
        })?;
    let common = std::fs::read_to_string(own.join("commondir"))
        .map(|c| own.join(c.trim()))
        .map_err(io(format!("cannot read {}/commondir", own.display())))?;
    let canon = |p: PathBuf| {
        std::fs::canonicalize(&p).map_err(io(format!("cannot resolve {}", p.display())))
    };
    Ok((canon(own)?, canon(common)?))
}

/// The node's ref and reflog in its private copies: the branch's tip as the repository has
/// it (`seeded` remembers it: [`harvest`]'s expected old value).
fn seed(dir: &Path, common: &Path, branch: &str, leaf: &str) -> Result<(), AppError> {
    // The loose ref the daemon's own `git worktree add -b` just wrote, read as it is (a git
    // process is a tenth of a sandboxed start); a packed one through git.
    let loose = std::fs::read_to_string(common.join("refs/heads").join(branch))
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| t.len() >= 40 && t.bytes().all(|b| b.is_ascii_hexdigit()));
    let tip = match loose {
        Some(tip) => tip,
        None => Git::new(common)
            .plumbing(&["rev-parse", "--verify", &format!("refs/heads/{branch}")])
            .map_err(AppError::from)?
            .trim()
            .to_string(),
    };
    let refs = dir.join("refs");
    // Whatever else an agent left in its copy goes: the copy holds its own ref alone.
    let _ = std::fs::remove_dir_all(&refs);
    std::fs::create_dir_all(&refs).map_err(io(format!("cannot make {}", refs.display())))?;
    write(&refs.join(leaf), &format!("{tip}\n"))?;
    let real_log = common.join("logs/refs/heads").join(branch);
    let log = dir.join("logs").join(leaf);
    if let Ok(bytes) = std::fs::read(&real_log) {
        std::fs::write(&log, bytes).map_err(io(format!("cannot write {}", log.display())))?;
    }
    write(&dir.join("seeded"), &tip)
}

fn write(path: &Path, text: &str) -> Result<(), AppError> {
    std::fs::write(path, text).map_err(io(format!("cannot write {}", path.display())))
}

/// Where a sandboxed agent's commits are kept when its branch moved outside meanwhile
/// (`<RUN>/<NODE>/<TIP>`): `git branch NAME <ref>` brings them back.
pub const KEPT_REF_PREFIX: &str = "refs/octl/sandboxed/";

/// Brings back the branch a sandboxed agent moved in its private copy: the repository's ref
/// is moved to it if it is still where it was seeded (compare-and-swap; a ref the daemon moved
/// meanwhile, a retry's reset, is left alone, and the agent's tip kept under
/// [`KEPT_REF_PREFIX`]). A copy holding no valid commit changes nothing.
/// Returns whether the branch moved. A node never sandboxed has no copy: nothing to do.
pub fn harvest(
    layout: &Layout,
    run: &str,
    node: &str,
    worktree: &Path,
    branch: &str,
) -> Result<bool, AppError> {
    let dir = layout.sandbox_of(run, node);
    let (Ok(seeded), Some((_, leaf))) = (
        std::fs::read_to_string(dir.join("seeded")),
        branch.rsplit_once('/'),
    ) else {
        return Ok(false);
    };
    let Ok(now) = std::fs::read_to_string(dir.join("refs").join(leaf)) else {
        return Ok(false);
    };
    let (seeded, now) = (seeded.trim(), now.trim());
    let hex = now.len() >= 40 && now.bytes().all(|b| b.is_ascii_hexdigit());
    if now == seeded || !hex {
        return Ok(false);
    }
    let git = Git::new(worktree);
    // Only a commit the repository has (the agent wrote it to the shared objects).
    if git
        .plumbing(&["cat-file", "-e", &format!("{now}^{{commit}}")])
        .is_err()
    {
        tracing::warn!(
            run,
            node,
            tip = now,
            "a sandboxed agent's branch names no commit; left alone"
        );
        return Ok(false);
    }
    match git
        .cas_update_ref(
            &format!("refs/heads/{branch}"),
            now,
            Some(seeded),
            "octld: what the sandboxed agent committed",
        )
        .map_err(AppError::from)?
    {
        CasOutcome::Updated => {
            write(&dir.join("seeded"), now)?;
            Ok(true)
        }
        CasOutcome::Stale { current } => {
            // The copy is seeded anew at the node's next start and removed with the node:
            // what the agent committed is kept under a ref of its own first.
            let kept = format!("{KEPT_REF_PREFIX}{run}/{node}/{now}");
            let saved = git.plumbing(&["update-ref", &kept, now]).is_ok();
            tracing::warn!(
                run,
                node,
                ?current,
                tip = now,
                kept = %kept,
                saved,
                "the branch moved outside the sandbox; the agent's commits are kept aside"
            );
            Ok(false)
        }
    }
}

/// [`harvest`] for a node as its state has it (nothing for one without a worktree or branch,
/// or never sandboxed). A failure is logged: the work stays in the node's copy.
pub fn harvest_node(layout: &Layout, run: &str, node: &octl_proto::state::Node) -> bool {
    let (Some(wt), Some(branch)) = (node.worktree.as_deref(), node.branch.as_deref()) else {
        return false;
    };
    harvest(layout, run, &node.id, Path::new(wt), branch).unwrap_or_else(|e| {
        tracing::warn!(run, node = %node.id, error = %e.message, "bringing back a sandboxed agent's branch");
        false
    })
}

/// The sandbox's directories of a node that ended for good (its worktree removed).
pub fn remove(layout: &Layout, run: &str, node: &str) {
    let _ = std::fs::remove_dir_all(layout.sandbox_of(run, node));
    let _ = std::fs::remove_dir_all(layout.agent_ctl(&ctl_key(run, node)));
}

/// A file as it is; a directory's top-level files (not its subdirectories: other sessions'
/// transcripts and caches stay outside).
fn copy_top(from: &Path, to: &Path) -> Result<(), AppError> {
    if from.is_file() {
        if let Some(p) = to.parent() {
            std::fs::create_dir_all(p).map_err(io(format!("cannot make {}", p.display())))?;
        }
        std::fs::copy(from, to).map_err(io(format!("cannot copy {}", from.display())))?;
        return Ok(());
    }
    std::fs::create_dir_all(to).map_err(io(format!("cannot make {}", to.display())))?;
    let entries = std::fs::read_dir(from).map_err(io(format!("cannot read {}", from.display())))?;
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::copy(e.path(), to.join(e.file_name()))
                .map_err(io(format!("cannot copy {}", e.path().display())))?;
        }
    }
    Ok(())
}

/// The directories of the agent's programs (the first of its argv and the one after an
/// `agent-wrap`'s `--`), to show read-only: a program in a `node_modules` tree, its whole tree
/// (an npm CLI's `.bin` entry points into its package).
fn programs(argv: &[String], path: Option<&str>) -> Vec<PathBuf> {
    let mut named: Vec<&String> = argv.first().into_iter().collect();
    if let Some(i) = argv.iter().position(|a| a == "--") {
        named.extend(argv.get(i + 1));
    }
    named
        .into_iter()
        .filter_map(|p| {
            let found = crate::agents::find_program(p, path.map(std::ffi::OsStr::new))?;
            let real = std::fs::canonicalize(&found).ok()?;
            let tree = real
                .ancestors()
                .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
                .map(Path::to_path_buf);
            Some(tree.unwrap_or_else(|| real.parent().unwrap_or(&real).to_path_buf()))
        })
        .collect()
}

/// The argv of a node's agent in its sandbox, `bwrap … -- ARGV`, once what it shows is made
/// and the node's own socket is served in its control directory.
pub fn wrap(
    daemon: &std::sync::Arc<crate::daemon::Daemon>,
    config: &SandboxConfig,
    n: &Node,
) -> Result<Vec<String>, AppError> {
    let bwrap = crate::agents::find_program("bwrap", std::env::var_os("PATH").as_deref())
        .ok_or_else(|| {
            AppError::new(
                octl_proto::ErrorKind::ToolMissing,
                "the bwrap sandbox needs bubblewrap, which is not on the daemon's PATH",
            )
            .with_hint("install it (Debian: apt-get install bubblewrap), or give --sandbox none")
        })?;
    let started = std::time::Instant::now();
    let view = prepare(&daemon.home, config, config.network, n)?;
    let prepared = started.elapsed();
    let scope = crate::server::agent::Scope {
        run: n.run.to_string(),
        node: n.node.to_string(),
    };
    if let Some(relay) = &view.relay {
        daemon
            .network_proxies
            .open(daemon, scope.clone(), &relay.dir, &config.allow)?;
    }
    daemon
        .agent_sockets
        .open(daemon, scope, &view.octl_home.1)?;
    let mut argv = bwrap::argv(&bwrap, &view, &bwrap::system_dirs());
    argv.extend(n.argv.iter().cloned());
    tracing::debug!(
        run = n.run,
        node = n.node,
        prepared_us = prepared.as_micros() as u64,
        served_us = (started.elapsed() - prepared).as_micros() as u64,
        "sandbox ready"
    );
    Ok(argv)
}

/// The kind a node runs in: its run's, else its profile's, else config.toml's.
pub fn kind_of(
    run: Option<SandboxKind>,
    profile: Option<SandboxKind>,
    config: &SandboxConfig,
) -> SandboxKind {
    run.or(profile).unwrap_or(config.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_commits_on_a_branch_moved_meanwhile_are_kept_aside_not_lost() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .arg("-C")
                .arg(&repo)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        std::fs::create_dir_all(&repo).unwrap();
        git(&["init", "-q", "-b", "main"]);
        git(&["commit", "-q", "--allow-empty", "-m", "a"]);
        let a = git(&["rev-parse", "HEAD"]);
        git(&["branch", "octl/R/n"]);
        let tree = git(&["rev-parse", "HEAD^{tree}"]);
        let b = git(&["commit-tree", &tree, "-p", &a, "-m", "the agent's"]);
        let c = git(&["commit-tree", &tree, "-p", &a, "-m", "the daemon's reset"]);
        let layout = Layout::new(tmp.path().join("home"));
        let dir = layout.sandbox_of("R", "n");
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::write(dir.join("seeded"), &a).unwrap();
        std::fs::write(dir.join("refs/n"), format!("{b}\n")).unwrap();
        // The branch moved outside since the copy was seeded.
        git(&["update-ref", "refs/heads/octl/R/n", &c]);
        assert!(!harvest(&layout, "R", "n", &repo, "octl/R/n").unwrap());
        assert_eq!(git(&["rev-parse", "octl/R/n"]), c, "the moved branch stays");
        assert_eq!(git(&["rev-parse", &format!("{KEPT_REF_PREFIX}R/n/{b}")]), b);
        // Not moved: brought back by compare-and-swap.
        git(&["update-ref", "refs/heads/octl/R/n", &a]);
        assert!(harvest(&layout, "R", "n", &repo, "octl/R/n").unwrap());
        assert_eq!(git(&["rev-parse", "octl/R/n"]), b);
    }

    #[test]
    fn only_the_nodes_own_clis_configuration_is_copied() {
        let (home, vars) = config_of("/x/node_modules/.bin/claude");
        assert_eq!(home, [".gitconfig", ".claude", ".claude.json"]);
        assert_eq!(vars, ["CLAUDE_CONFIG_DIR"]);
        assert_eq!(
            config_of("codex"),
            (vec![".gitconfig", ".codex"], vec!["CODEX_HOME"])
        );
        assert_eq!(config_of("sh"), (vec![".gitconfig"], vec![]));
        // A wrapper of the user's may run any CLI.
        let (home, vars) = config_of("/home/u/bin/my-agent");
        assert!(
            home.contains(&".codex") && home.contains(&".gemini"),
            "{home:?}"
        );
        assert_eq!(vars, ["CLAUDE_CONFIG_DIR", "CODEX_HOME"]);
    }

    #[test]
    fn bad_settings_name_the_field_and_the_accepted_forms() {
        let bad = |t: SandboxToml| t.validate().unwrap_err().message;
        assert!(bad(SandboxToml {
            network: Some("lan".into()),
            ..Default::default()
        })
        .contains("[sandbox] network: \"lan\""));
        assert!(bad(SandboxToml {
            network: Some("allow".into()),
            allow: Some(vec!["example.com".into()]),
            ..Default::default()
        })
        .starts_with(
            "[sandbox] allow: \"example.com\" is not a host:port pattern; accepted: host:port"
        ));
        assert!(bad(SandboxToml {
            allow: Some(vec!["example.com:443".into()]),
            ..Default::default()
        })
        .contains("[sandbox] allow: applies to network = \"allow\", and network is \"host\""));
        let allow = SandboxToml {
            network: Some("allow".into()),
            allow: Some(vec!["127.0.0.1:8080".into(), "*.npmjs.org:443".into()]),
            ..Default::default()
        }
        .validate()
        .unwrap();
        assert_eq!(allow.network, SandboxNetwork::Allow);
        assert_eq!(allow.allow.len(), 2);
        assert!(bad(SandboxToml {
            pids_max: Some(0),
            ..Default::default()
        })
        .contains("pids_max"));
        assert!(bad(SandboxToml {
            read_only: Some(vec!["rel/dir".into()]),
            ..Default::default()
        })
        .contains("[sandbox] read_only: \"rel/dir\" is not an absolute path"));
        let ok = SandboxToml {
            kind: Some("bwrap".into()),
            network: Some("none".into()),
            ..Default::default()
        }
        .validate()
        .unwrap();
        assert_eq!(
            (ok.kind, ok.network),
            (SandboxKind::Bwrap, SandboxNetwork::None)
        );
        assert_eq!(kind_of(None, None, &ok), SandboxKind::Bwrap);
        assert_eq!(
            kind_of(Some(SandboxKind::None), Some(SandboxKind::Bwrap), &ok),
            SandboxKind::None
        );
    }
}
