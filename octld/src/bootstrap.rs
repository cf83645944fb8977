//! Worktree bootstrap: what makes a new worktree ready to work in before its agent starts.
//!
//! Configured in `[worktree]` of `$OCTL_HOME/config.toml` and of `.orchestratectl.toml` at the
//! repository's top level (the repository's value wins, field by field):
//!
//! ```toml
//! [worktree]
//! symlink = ["node_modules"]   # linked to the repository's own directory, not copied
//! setup = "npm ci"             # run by `sh -c` in the new worktree before the agent
//! setup_timeout = "5m"         # default 10m; then it is killed and the node fails
//! ports = "3100-3199"          # OCTL_PORT: one per live node, never two at once
//! ```
//!
//! `.worktreeinclude` at the repository's top level is read as Claude Code reads it: the
//! files git ignores that match one of its patterns are copied into each new worktree. Only
//! the repository's own files are read, and nothing in it is changed.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use octl_proto::{AppError, ErrorKind};

use crate::config::Config;
use crate::git::Git;

/// The repository's own bootstrap file, at its top level.
pub const REPO_FILE: &str = ".orchestratectl.toml";
/// Claude Code's list of ignored files to copy into a new worktree.
pub const INCLUDE_FILE: &str = ".worktreeinclude";
/// How long a setup command may run when `setup_timeout` is not given.
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(600);

/// `[worktree]`, as written in either file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorktreeConfig {
    pub symlink: Option<Vec<String>>,
    pub setup: Option<String>,
    pub setup_timeout: Option<String>,
    pub ports: Option<String>,
}

/// `.orchestratectl.toml`: only `[worktree]` for now; unknown keys are refused.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepoFile {
    #[serde(default)]
    worktree: WorktreeConfig,
}

/// A range of TCP ports, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn parse(field: &str, s: &str) -> Result<PortRange, AppError> {
        let bad = || {
            AppError::invalid(format!(
                "invalid {field} {s:?}: give a range of ports FIRST-LAST between 1 and 65535, e.g. \"3100-3199\""
            ))
        };
        let (a, b) = s.split_once('-').ok_or_else(bad)?;
        let first: u16 = a.trim().parse().map_err(|_| bad())?;
        let last: u16 = b.trim().parse().map_err(|_| bad())?;
        if first == 0 || last < first {
            return Err(bad());
        }
        Ok(PortRange { first, last })
    }

    /// The lowest port of the range not in `taken`.
    pub fn free(&self, taken: &BTreeSet<u16>) -> Option<u16> {
        (self.first..=self.last).find(|p| !taken.contains(p))
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// The bootstrap of one repository: both files read, merged and checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bootstrap {
    /// Relative directories linked to the repository's own.
    pub symlink: Vec<PathBuf>,
    pub setup: Option<String>,
    pub setup_timeout: Duration,
    pub ports: Option<PortRange>,
}

impl Bootstrap {
    /// The bootstrap for `repo` (its top level): the home's `[worktree]` with the
    /// repository's file over it. A bad value names its file and field and changes nothing.
    pub fn resolve(config: &Config, repo: &Path) -> Result<Bootstrap, AppError> {
        let file = repo.join(REPO_FILE);
        let own = match fs::read_to_string(&file) {
            Ok(text) => {
                toml::from_str::<RepoFile>(&text)
                    .map_err(|e| {
                        AppError::invalid(format!(
                            "invalid {}: {}",
                            file.display(),
                            e.to_string().trim()
                        ))
                    })?
                    .worktree
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => WorktreeConfig::default(),
            Err(e) => {
                return Err(AppError::internal(format!(
                    "cannot read {}: {e}",
                    file.display()
                )))
            }
        };
        let home = &config.worktree;
        // Each field from the file that sets it, named in errors.
        let pick = |own: &Option<String>, home: &Option<String>, field: &str| match (own, home) {
            (Some(v), _) => Some((v.clone(), format!("{REPO_FILE} worktree.{field}"))),
            (None, Some(v)) => Some((v.clone(), format!("config.toml worktree.{field}"))),
            (None, None) => None,
        };
        let symlink = match (&own.symlink, &home.symlink) {
            (Some(v), _) => check_symlinks(v, &format!("{REPO_FILE} worktree.symlink"))?,
            (None, Some(v)) => check_symlinks(v, "config.toml worktree.symlink")?,
            (None, None) => Vec::new(),
        };
        let setup = match pick(&own.setup, &home.setup, "setup") {
            Some((s, field)) if s.trim().is_empty() || s.contains('\0') => {
                return Err(AppError::invalid(format!(
                    "invalid {field}: give a shell command, e.g. \"npm ci\""
                )))
            }
            other => other.map(|(s, _)| s),
        };
        let setup_timeout = match pick(&own.setup_timeout, &home.setup_timeout, "setup_timeout") {
            Some((s, field)) => match octl_proto::time::parse_age(&field, &s)? {
                0 => {
                    return Err(AppError::invalid(format!(
                        "invalid {field} {s:?}: give a time limit above zero, e.g. \"5m\""
                    )))
                }
                ms => Duration::from_millis(ms),
            },
            None => DEFAULT_SETUP_TIMEOUT,
        };
        let ports = match pick(&own.ports, &home.ports, "ports") {
            Some((s, field)) => Some(PortRange::parse(&field, &s)?),
            None => None,
        };
        Ok(Bootstrap {
            symlink,
            setup,
            setup_timeout,
            ports,
        })
    }

    /// Copies the included ignored files and makes the links. Returns how many files were
    /// copied. A path the worktree already has is left as it is.
    pub fn prepare(&self, repo: &Path, worktree: &Path) -> Result<u64, AppError> {
        let copied = copy_included(repo, worktree, &self.symlink)?;
        link(repo, worktree, &self.symlink)?;
        Ok(copied)
    }
}

fn check_symlinks(dirs: &[String], field: &str) -> Result<Vec<PathBuf>, AppError> {
    dirs.iter()
        .map(|d| {
            let p = PathBuf::from(d.trim_end_matches('/'));
            let plain = !d.is_empty()
                && p.components().all(|c| matches!(c, Component::Normal(n) if n != ".git"));
            if plain {
                Ok(p)
            } else {
                Err(AppError::invalid(format!(
                    "invalid {field} {d:?}: give directories relative to the repository's top level, e.g. [\"node_modules\"]"
                )))
            }
        })
        .collect()
}

fn io_error(what: &str, path: &Path, e: io::Error) -> AppError {
    AppError::new(
        ErrorKind::ToolFailed,
        format!("{what} {}: {e}", path.display()),
    )
}

/// The ignored files `.worktreeinclude` names, copied from the repository's checkout to the
/// same paths in the worktree (links copied as links), except under a linked directory.
fn copy_included(repo: &Path, worktree: &Path, linked: &[PathBuf]) -> Result<u64, AppError> {
    let include = repo.join(INCLUDE_FILE);
    if !include.is_file() {
        return Ok(0);
    }
    let mut copied = 0;
    for rel in Git::new(repo).included_ignored(&include)? {
        if linked.iter().any(|l| rel.starts_with(l)) {
            continue;
        }
        let (from, to) = (repo.join(&rel), worktree.join(&rel));
        if fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(|e| io_error("cannot create", parent, e))?;
        }
        let meta = fs::symlink_metadata(&from).map_err(|e| io_error("cannot read", &from, e))?;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&from).map_err(|e| io_error("cannot read", &from, e))?;
            std::os::unix::fs::symlink(target, &to)
                .map_err(|e| io_error("cannot create", &to, e))?;
        } else {
            fs::copy(&from, &to).map_err(|e| io_error("cannot copy to", &to, e))?;
        }
        copied += 1;
    }
    Ok(copied)
}

/// Each configured directory the repository's checkout has becomes a link to it in the
/// worktree. A link git would not ignore is refused (and removed): an agent's commit-all
/// would record it.
fn link(repo: &Path, worktree: &Path, dirs: &[PathBuf]) -> Result<(), AppError> {
    let git = Git::new(worktree);
    for rel in dirs {
        let (from, to) = (repo.join(rel), worktree.join(rel));
        if !from.is_dir() || fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(|e| io_error("cannot create", parent, e))?;
        }
        std::os::unix::fs::symlink(&from, &to).map_err(|e| io_error("cannot create", &to, e))?;
        if !git.is_ignored(rel)? {
            let _ = fs::remove_file(&to);
            return Err(AppError::invalid(format!(
                "worktree.symlink {:?}: git does not ignore it as a link, so a commit would record it; add `{}` (without a trailing slash) to .gitignore",
                rel.display(),
                rel.display()
            )));
        }
    }
    Ok(())
}

/// Runs `command` with `sh -c` in `cwd`, its output appended to `log`, killed (with every
/// process it started) after `limit`, or as soon as `abandoned()` says its node no longer
/// waits for it (a cancel won). The error says how it ended and where its output is.
pub fn run_setup(
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
    log: &Path,
    limit: Duration,
    abandoned: &dyn Fn() -> bool,
) -> Result<(), AppError> {
    let failed = |what: String| AppError::new(ErrorKind::ToolFailed, what);
    if let Some(parent) = log.parent() {
        fs::create_dir_all(parent).map_err(|e| io_error("cannot create", parent, e))?;
    }
    let mut out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| io_error("cannot open", log, e))?;
    let _ = writeln!(out, "[octl] setup: {command}");
    let t0 = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(
            out.try_clone()
                .map_err(|e| io_error("cannot open", log, e))?,
        )
        .stderr(
            out.try_clone()
                .map_err(|e| io_error("cannot open", log, e))?,
        )
        // Its own process group, so a timeout kills what it started too.
        .process_group(0)
        .spawn()
        .map_err(|e| failed(format!("cannot run the setup command: {e}")))?;
    fn kill(child: &mut std::process::Child, out: &mut fs::File, why: &str) {
        // SAFETY: kill(2) on the process group the child leads.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        let _ = child.wait();
        let _ = writeln!(out, "[octl] setup killed: {why}");
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if t0.elapsed() >= limit => {
                let why = format!("still running after {} s", limit.as_secs());
                kill(&mut child, &mut out, &why);
                return Err(failed(format!(
                    "setup command {command:?} did not finish within {} s and was killed; its output is in {}",
                    limit.as_secs(),
                    log.display()
                )));
            }
            Ok(None) if abandoned() => {
                kill(&mut child, &mut out, "its node no longer waits for it");
                return Err(failed(format!(
                    "setup command {command:?} was stopped: its node no longer waits for it"
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(failed(format!("cannot wait for the setup command: {e}"))),
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let _ = writeln!(out, "[octl] setup ended ({status}) after {secs:.1} s");
    if status.success() {
        Ok(())
    } else {
        Err(failed(format!(
            "setup command {command:?} failed ({status}) after {secs:.1} s; its output is in {}",
            log.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges_parse_and_name_the_accepted_form() {
        let r = PortRange::parse("ports", "3100-3102").unwrap();
        assert_eq!((r.first, r.last), (3100, 3102));
        assert_eq!(r.free(&BTreeSet::from([3100])), Some(3101));
        assert_eq!(r.free(&BTreeSet::from([3100, 3101, 3102])), None);
        for bad in ["3100", "0-10", "20-10", "a-b", "1-70000"] {
            let e = PortRange::parse("ports", bad).unwrap_err();
            assert!(e.message.contains("FIRST-LAST"), "{}", e.message);
        }
    }

    #[test]
    fn the_repository_file_wins_field_by_field() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(REPO_FILE),
            "[worktree]\nsetup = \"make\"\nsymlink = [\"node_modules/\"]\n",
        )
        .unwrap();
        let home = Config::parse(
            "[worktree]\nsetup = \"true\"\nports = \"4000-4009\"\nsetup_timeout = \"30s\"\n",
        )
        .unwrap();
        let b = Bootstrap::resolve(&home, dir.path()).unwrap();
        assert_eq!(b.setup.as_deref(), Some("make"));
        assert_eq!(b.symlink, vec![PathBuf::from("node_modules")]);
        assert_eq!(
            b.ports,
            Some(PortRange {
                first: 4000,
                last: 4009
            })
        );
        assert_eq!(b.setup_timeout, Duration::from_secs(30));

        fs::write(
            dir.path().join(REPO_FILE),
            "[worktree]\nsymlink = [\"../x\"]\n",
        )
        .unwrap();
        let e = Bootstrap::resolve(&home, dir.path()).unwrap_err();
        assert!(e.message.contains("worktree.symlink"), "{}", e.message);
        fs::write(dir.path().join(REPO_FILE), "[worktree]\nbogus = 1\n").unwrap();
        let e = Bootstrap::resolve(&home, dir.path()).unwrap_err();
        assert!(
            e.message.contains(REPO_FILE) && e.message.contains("bogus"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_setup_that_outlives_its_limit_is_killed_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("logs/n.log");
        run_setup(
            "echo hello",
            dir.path(),
            &[],
            &log,
            Duration::from_secs(10),
            &|| false,
        )
        .unwrap();
        assert!(fs::read_to_string(&log).unwrap().contains("hello"));
        let e = run_setup(
            "exit 3",
            dir.path(),
            &[],
            &log,
            Duration::from_secs(10),
            &|| false,
        )
        .unwrap_err();
        assert!(e.message.contains("exit status: 3"), "{}", e.message);
        let e = run_setup(
            "sleep 30 & wait",
            dir.path(),
            &[],
            &log,
            Duration::from_millis(200),
            &|| false,
        )
        .unwrap_err();
        assert!(e.message.contains("did not finish"), "{}", e.message);
        let e = run_setup(
            "sleep 30",
            dir.path(),
            &[],
            &log,
            Duration::from_secs(60),
            &|| true,
        )
        .unwrap_err();
        assert!(e.message.contains("no longer waits"), "{}", e.message);
    }
}
