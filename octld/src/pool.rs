//! The warm pool: worktrees of a repository checked out ahead of time, so that a spawn in a
//! big repository does not wait for `git worktree add` to write every file.
//!
//! ```toml
//! [pool]
//! size = 1              # ready worktrees kept per pooled repository; 0: no pool
//! min_files = 10000     # a repository is pooled once a spawn in it checked out this many files
//! max_disk_mib = 2048   # every entry together, estimated from the sizes of their files
//! ```
//!
//! A repository is pooled only once a spawn in it checked out at least `min_files` files (the
//! count its new index holds: a property of the repository, not of how busy the machine is),
//! so small repositories (and users who never spawn) never get an entry. Under
//! `$OCTL_HOME/pool/<KEY>/` (KEY: the repository's name and a hash of its path):
//! - `repo`: the repository's top level;
//! - `<ID>/`: a ready entry, a detached clean worktree of the repository, registered in it;
//! - `<ID>.making`: written before its entry's `git worktree add` and removed once the
//!   checkout is complete: an entry that has one (a crash or a shutdown cut it short) is never
//!   handed out, only discarded (at the daemon's next start, or by `run gc`);
//! - `bytes`: the estimated size of one entry at the last tip checked out.
//!
//! Taking an entry ([`take`]) is one `rename` of its directory to the node's worktree path: of
//! two spawns racing for it one rename succeeds, the other finds nothing there and takes the
//! next entry or makes its worktree as without a pool. Then `git worktree repair` points the
//! repository's record at the new path, and the node's branch is made ([`finish`]): at the
//! entry's HEAD when that is the start point's tip at that moment (no file is touched), else
//! by `git checkout -b` from it to the tip (only the files that differ). All of it happens
//! after `node.starting` named the worktree, like every side effect of a start, and the
//! bootstrap runs on it afterwards as on any new worktree. Entries hold no one's work, so
//! removing one never loses anything.

use std::collections::HashSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use serde::Deserialize;

use octl_proto::AppError;

use crate::config::{Config, Live};
use crate::daemon::Daemon;
use crate::git::Git;
use crate::home::Home;

/// Ready entries per pooled repository when `size` is not given.
pub const DEFAULT_SIZE: u32 = 1;
/// The largest `size` accepted.
pub const MAX_SIZE: u32 = 16;
/// How many files a spawn must have checked out before its repository is pooled.
pub const DEFAULT_MIN_FILES: u64 = 10_000;
/// The disk every entry together may take, in MiB, when `max_disk_mib` is not given.
pub const DEFAULT_MAX_DISK_MIB: u64 = 2048;

const REPO_FILE: &str = "repo";
const BYTES_FILE: &str = "bytes";
const MAKING: &str = ".making";

/// `[pool]` in `config.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    pub size: Option<u32>,
    pub min_files: Option<u64>,
    pub max_disk_mib: Option<u64>,
}

/// `[pool]`, checked, with its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub size: u32,
    pub min_files: u64,
    /// Bytes.
    pub max_disk: u64,
}

impl Settings {
    pub fn of(config: &Config) -> Result<Settings, AppError> {
        let p = &config.pool;
        let size = p.size.unwrap_or(DEFAULT_SIZE);
        if size > MAX_SIZE {
            return Err(AppError::invalid(format!(
                "invalid pool.size {size}: give a number of worktrees from 0 (no pool) to {MAX_SIZE}, e.g. 1"
            )));
        }
        let min_files = p.min_files.unwrap_or(DEFAULT_MIN_FILES);
        let max_disk = p
            .max_disk_mib
            .unwrap_or(DEFAULT_MAX_DISK_MIB)
            .saturating_mul(1 << 20);
        Ok(Settings {
            size,
            min_files,
            max_disk,
        })
    }

    fn load(config: &Live) -> Result<Settings, AppError> {
        Settings::of(&*config.get()?)
    }
}

/// Entries this daemon is making now (their `.making` is no leftover), and the repositories
/// whose pool is being filled (one filler per repository).
static MAKING_NOW: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(Default::default);
static FILLING: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(Default::default);

fn set(s: &Mutex<HashSet<PathBuf>>) -> std::sync::MutexGuard<'_, HashSet<PathBuf>> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The directory name of a repository's pool: its name, then a hash of its path.
pub fn key(repo: &Path) -> String {
    let name: String = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    // FNV-1a: stable across builds, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in repo.as_os_str().as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{name}-{h:016x}")
}

fn dir_of(home: &Home, repo: &Path) -> PathBuf {
    home.pool().join(key(repo))
}

fn marker(entry: &Path) -> PathBuf {
    let mut name = entry.as_os_str().to_owned();
    name.push(MAKING);
    PathBuf::from(name)
}

/// What an entry directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum State {
    Ready,
    /// Its `.making` marker is there: being made, or left half-made.
    Making,
    /// `<ID>.discard/`: being removed, or left half-removed.
    Discarding,
}

const DISCARD: &str = ".discard";

/// The entry directories of one repository's pool, oldest first, and what each is.
fn entries(dir: &Path) -> Vec<(PathBuf, State)> {
    let mut out: Vec<(PathBuf, State)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .map(|p| {
            let state = if p.as_os_str().as_bytes().ends_with(DISCARD.as_bytes()) {
                State::Discarding
            } else if marker(&p).exists() {
                // The marker is written before the directory exists and removed only once
                // it is complete, so looking for it after finding the directory is enough.
                State::Making
            } else {
                State::Ready
            };
            (p, state)
        })
        .collect();
    out.sort();
    out
}

fn ready(dir: &Path) -> Vec<PathBuf> {
    entries(dir)
        .into_iter()
        .filter_map(|(p, state)| (state == State::Ready).then_some(p))
        .collect()
}

/// Every `pool/<KEY>/` and the repository its `repo` file names.
fn key_dirs(home: &Home) -> Vec<(PathBuf, Option<PathBuf>)> {
    let mut out: Vec<(PathBuf, Option<PathBuf>)> = fs::read_dir(home.pool())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let repo = fs::read_to_string(e.path().join(REPO_FILE))
                .ok()
                .map(|s| PathBuf::from(s.trim_end_matches('\n')));
            (e.path(), repo)
        })
        .collect();
    out.sort();
    out
}

/// After the worktree `wt` of `repo` was made without the pool: pools the repository when it
/// checked out at least `min_files` files (and the pool is on).
pub fn note_checkout(home: &Home, config: &Live, repo: &Path, wt: &Path) {
    let Ok(s) = Settings::load(config) else {
        return;
    };
    if s.size == 0 {
        return;
    }
    let files = checked_out_files(wt).unwrap_or(0);
    if files < s.min_files {
        return;
    }
    let dir = dir_of(home, repo);
    if dir.join(REPO_FILE).exists() {
        return;
    }
    let made = fs::create_dir_all(&dir)
        .and_then(|()| fs::write(dir.join(REPO_FILE), repo.as_os_str().as_bytes()));
    match made {
        Ok(()) => {
            tracing::info!(repo = %repo.display(), files, "pooling the repository: a worktree of it has many files")
        }
        Err(e) => {
            tracing::warn!(repo = %repo.display(), error = %e, "cannot start the repository's pool")
        }
    }
}

/// How many files the worktree `wt` checked out: the entry count in its index's header
/// (`DIRC`, version, count), read without running git.
fn checked_out_files(wt: &Path) -> Option<u64> {
    use std::io::Read;
    let gitfile = fs::read_to_string(wt.join(".git")).ok()?;
    let admin = wt.join(gitfile.trim().strip_prefix("gitdir: ")?);
    let mut head = [0u8; 12];
    fs::File::open(admin.join("index"))
        .ok()?
        .read_exact(&mut head)
        .ok()?;
    (&head[..4] == b"DIRC")
        .then(|| u64::from(u32::from_be_bytes([head[8], head[9], head[10], head[11]])))
}

/// Makes a ready entry of `repo` the worktree `dest` on the new `branch` at the tip of
/// `start_point`. False when there was none to take (or taking it failed, the entry then
/// discarded): the caller makes the worktree itself.
pub fn take(
    home: &Home,
    config: &Live,
    repo: &Path,
    dest: &Path,
    branch: &str,
    start_point: &str,
) -> bool {
    let candidates = ready(&dir_of(home, repo));
    // `size = 0` turns the pool off: what it holds is neither taken nor added to.
    if candidates.is_empty() || Settings::load(config).is_ok_and(|s| s.size == 0) {
        return false;
    }
    let git = Git::new(repo);
    let tip = match git.resolve_commit(start_point) {
        Ok(t) => t,
        Err(_) => return false,
    };
    if let Some(parent) = dest.parent() {
        if fs::create_dir_all(parent).is_err() {
            return false;
        }
    }
    for entry in candidates {
        // The claim: of two spawns renaming the same entry, one finds it gone.
        match fs::rename(&entry, dest) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                tracing::warn!(entry = %entry.display(), dest = %dest.display(), error = %e, "cannot take a pool entry");
                return false;
            }
        }
        crate::failpoint::crash("pool:after-claim");
        return match finish(repo, dest, branch, &tip) {
            Ok(()) => {
                tracing::info!(repo = %repo.display(), entry = %entry.display(), worktree = %dest.display(), "took a worktree from the pool");
                true
            }
            Err(e) => {
                tracing::warn!(worktree = %dest.display(), error = %e.message, "a pool entry could not be used; discarding it");
                discard(repo, dest);
                false
            }
        };
    }
    false
}

/// Turns a taken entry at `dest` into the node's worktree: registered at its new path, on
/// `branch` at `tip`. Safe to repeat (healing a take a crash cut short): a branch made before
/// is checked out as it is.
pub fn finish(repo: &Path, dest: &Path, branch: &str, tip: &str) -> Result<(), AppError> {
    let git = Git::new(repo);
    git.worktree_repair(dest)?;
    let wt = git.at(dest);
    let head_ref = format!("refs/heads/{branch}");
    let attach = || wt.plumbing(&["symbolic-ref", "HEAD", &head_ref]);
    match git.resolve_commit(&head_ref).ok() {
        Some(_) if on_branch(&wt, &head_ref) => {}
        // Made before a crash, HEAD not moved to it yet.
        Some(at) if wt.head().ok().as_ref() == Some(&at) => {
            attach()?;
        }
        Some(_) => {
            wt.plumbing(&["checkout", "-q", branch])?;
        }
        // The same commit: naming the branch is all there is to do; no file is read.
        None if wt.head()? == tip => {
            git.create_branch(branch, tip)?;
            attach()?;
        }
        // Base moved since the entry was made: only the files that differ are written.
        None => {
            wt.plumbing(&["checkout", "-q", "-b", branch, tip])?;
        }
    }
    Ok(())
}

fn on_branch(wt: &Git, head_ref: &str) -> bool {
    let on = wt.plumbing(&["symbolic-ref", "-q", "HEAD"]).ok();
    on.as_deref().map(str::trim) == Some(head_ref)
}

/// Is the worktree at `path` an entry taken from the pool whose [`finish`] a crash cut short?
/// A directory with git's `.git` file that the repository does not list there, or without
/// `branch` yet, or detached at `branch`'s own commit. A worktree whose agent moved HEAD
/// elsewhere is none of these, and is left as it is.
pub fn unfinished_take(git: &Git, path: &Path, branch: &str, registered: bool) -> bool {
    if !path.join(".git").is_file() {
        return false;
    }
    if !registered {
        return true;
    }
    let head_ref = format!("refs/heads/{branch}");
    let wt = git.at(path);
    match git.resolve_commit(&head_ref).ok() {
        None => true,
        Some(at) => !on_branch(&wt, &head_ref) && wt.head().ok() == Some(at),
    }
}

/// Removes an entry (it holds no work): git's record and its directory.
fn discard(repo: &Path, entry: &Path) {
    if fs::symlink_metadata(entry).is_err() {
        return;
    }
    if let Err(e) = Git::new(repo).worktree_remove_pristine(entry) {
        tracing::debug!(entry = %entry.display(), error = %e, "git could not remove a pool entry; removing its directory");
        let _ = fs::remove_dir_all(entry);
    }
}

/// Starts filling `repo`'s pool in the background when it is pooled and not being filled:
/// entries at the tip of `base` until there are `size` ready, within `max_disk_mib`.
pub fn refill(daemon: &Arc<Daemon>, repo: &Path, base: &str) {
    if !dir_of(&daemon.home, repo).join(REPO_FILE).exists()
        || !set(&FILLING).insert(repo.to_path_buf())
    {
        return;
    }
    let (d, repo, base) = (daemon.clone(), repo.to_path_buf(), base.to_string());
    tokio::task::spawn_blocking(move || {
        if let Err(e) = fill(&d, &repo, &base) {
            tracing::warn!(repo = %repo.display(), error = %e.message, "could not fill the worktree pool");
        }
        set(&FILLING).remove(&repo);
    });
}

fn fill(daemon: &Daemon, repo: &Path, base: &str) -> Result<(), AppError> {
    let dir = dir_of(&daemon.home, repo);
    let git = Git::new(repo);
    loop {
        let s = Settings::load(&daemon.config)?;
        if daemon.stopping() || ready(&dir).len() >= s.size as usize {
            return Ok(());
        }
        let tip = git.resolve_commit(base)?;
        let bytes = estimate(&git, &tip)?;
        let _ = fs::write(dir.join(BYTES_FILE), bytes.to_string());
        let used = disk_used(&daemon.home);
        if used + bytes > s.max_disk {
            tracing::info!(repo = %repo.display(), used, bytes, max = s.max_disk, "the worktree pool is at pool.max_disk_mib: no entry made");
            return Ok(());
        }
        let t0 = std::time::Instant::now();
        make_entry(daemon, &git, &dir, &tip)?;
        tracing::info!(repo = %repo.display(), tip = %tip, took_ms = t0.elapsed().as_millis() as u64, "made a pool entry");
    }
}

/// One entry at `tip`: the marker first, then the worktree, registered without files, then
/// its checkout (stopped when the daemon stops) and post-checkout hook, then the marker
/// removed.
fn make_entry(daemon: &Daemon, git: &Git, dir: &Path, tip: &str) -> Result<(), AppError> {
    let entry = dir.join(octl_proto::ids::new_ulid().to_ascii_lowercase());
    let mark = marker(&entry);
    set(&MAKING_NOW).insert(entry.clone());
    let made = (|| {
        fs::write(&mark, tip)
            .map_err(|e| AppError::internal(format!("cannot write {}: {e}", mark.display())))?;
        git.worktree_add_unchecked(&entry, tip)?;
        let wt = git.at(&entry);
        wt.checkout_all_until(&|| daemon.stopping())?;
        // As `git worktree add` does after its checkout: the repository's post-checkout hook,
        // if it has one (git-lfs installs one); a failing hook fails the entry as it would the
        // spawn.
        wt.post_checkout_hook_until(tip, &|| daemon.stopping())?;
        crate::failpoint::crash("pool:before-ready");
        fs::remove_file(&mark)
            .map_err(|e| AppError::internal(format!("cannot remove {}: {e}", mark.display())))
    })();
    if made.is_err() && !daemon.stopping() {
        // A failed checkout is discarded now; one cut short by shutdown at the next start.
        discard(git.dir(), &entry);
        let _ = fs::remove_file(&mark);
    }
    set(&MAKING_NOW).remove(&entry);
    made
}

/// The disk one entry at `tip` takes, estimated: every file rounded up to 4 KiB blocks.
fn estimate(git: &Git, tip: &str) -> Result<u64, AppError> {
    let listing = git.plumbing(&["ls-tree", "-r", "-l", "--full-tree", tip])?;
    let blocks: u64 = listing
        .lines()
        .filter_map(|l| {
            l.split('\t')
                .next()?
                .split_whitespace()
                .nth(3)?
                .parse::<u64>()
                .ok()
        })
        .map(|size| size.div_ceil(4096).max(1))
        .sum();
    Ok(blocks * 4096)
}

/// What every entry (ready or being made) takes, by each repository's last estimate.
fn disk_used(home: &Home) -> u64 {
    key_dirs(home)
        .into_iter()
        .map(|(dir, _)| {
            let each: u64 = fs::read_to_string(dir.join(BYTES_FILE))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            each * entries(&dir).len() as u64
        })
        .sum()
}

/// Why each entry that should go goes: half-made ones (not being made now), those of a
/// repository that is gone, those beyond `size` (newest first), and directories the
/// repository does not list as its worktrees.
fn unwanted(home: &Home, config: &Live) -> Vec<(Option<PathBuf>, PathBuf, String)> {
    let size = Settings::load(config).map_or(DEFAULT_SIZE, |s| s.size) as usize;
    let making = set(&MAKING_NOW).clone();
    let mut out = Vec::new();
    for (dir, repo) in key_dirs(home) {
        let repo = repo.filter(|r| r.join(".git").exists());
        let Some(repo) = repo else {
            out.push((None, dir, "whose repository is gone".to_string()));
            continue;
        };
        // Listed after the entries: a ready entry was registered before it became ready.
        let all = entries(&dir);
        // A repository git cannot read now is left for another time.
        let Ok(listed) = Git::new(&repo).worktree_list() else {
            continue;
        };
        let listed: Vec<PathBuf> = listed
            .into_iter()
            .filter(|w| !w.prunable)
            .map(|w| w.path)
            .collect();
        let mut kept = 0;
        for (entry, state) in all {
            let why = match state {
                State::Making if making.contains(&entry) => None,
                State::Making => Some(
                    "left half-made (a crash or a shutdown cut its checkout short)".to_string(),
                ),
                State::Discarding => Some("left half-removed".to_string()),
                State::Ready
                    if !listed
                        .iter()
                        .any(|l| crate::engine::orphans::same_dir(l, &entry)) =>
                {
                    Some("that the repository does not list as a worktree".to_string())
                }
                State::Ready if kept >= size => Some(format!("beyond pool.size = {size}")),
                State::Ready => {
                    kept += 1;
                    None
                }
            };
            if let Some(why) = why {
                out.push((Some(repo.clone()), entry, why));
            }
        }
    }
    out
}

fn remove(repo: Option<&Path>, path: &Path) {
    let Some(repo) = repo else {
        // The whole pool of a repository that is gone: its records went with it.
        let _ = fs::remove_dir_all(path);
        return;
    };
    if marker(path).exists() || path.as_os_str().as_bytes().ends_with(DISCARD.as_bytes()) {
        // No spawn takes these.
        discard(repo, path);
        let _ = fs::remove_file(marker(path));
        return;
    }
    // A ready entry is claimed first, as a spawn claims it, so the two never both have it.
    let mut gone = path.as_os_str().to_owned();
    gone.push(DISCARD);
    let gone = PathBuf::from(gone);
    if fs::rename(path, &gone).is_ok() {
        let _ = Git::new(repo).worktree_repair(&gone);
        discard(repo, &gone);
    }
}

/// At the daemon's start: what a crash or a shutdown left half-made is discarded, so the
/// pool holds only ready entries. Never touches an entry being made or taken now.
pub fn heal(home: &Home, config: &Live) {
    for (repo, path, why) in unwanted(home, config) {
        if why.starts_with("beyond") {
            continue;
        }
        tracing::info!(entry = %path.display(), why, "discarding a pool entry");
        remove(repo.as_deref(), &path);
    }
}

/// One entry (or a gone repository's whole pool) `run gc` removes.
#[derive(Debug, Clone)]
pub struct Unwanted {
    pub repo: Option<PathBuf>,
    pub path: PathBuf,
    pub why: String,
}

/// `run gc`: removes (unless `dry_run`) what [`heal`] would, and the entries beyond
/// `pool.size` (so `size = 0` then `run gc` empties the pool). Returns what went.
pub fn collect(home: &Home, config: &Live, dry_run: bool) -> Vec<Unwanted> {
    unwanted(home, config)
        .into_iter()
        .map(|(repo, path, why)| {
            if !dry_run {
                remove(repo.as_deref(), &path);
            }
            Unwanted { repo, path, why }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_have_defaults_and_name_the_field() {
        let s = Settings::of(&Config::default()).unwrap();
        assert_eq!(
            s,
            Settings {
                size: 1,
                min_files: 10_000,
                max_disk: 2048 << 20
            }
        );
        let c = Config::parse("[pool]\nsize = 3\nmin_files = 0\nmax_disk_mib = 10\n").unwrap();
        let s = Settings::of(&c).unwrap();
        assert_eq!((s.size, s.min_files, s.max_disk), (3, 0, 10 << 20));
        let e = Config::parse("[pool]\nsize = 99\n").unwrap_err();
        assert!(e.message.contains("pool.size"), "{}", e.message);
        assert!(Config::parse("[pool]\nmin_files = \"many\"\n").is_err());
        assert!(Config::parse("[pool]\nsizes = 1\n").is_err());
    }

    #[test]
    fn the_files_a_worktree_checked_out_are_read_from_its_index() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("r");
        let git = |dir: &Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
        };
        fs::create_dir_all(repo.join("d")).unwrap();
        for f in ["a", "b", "d/c"] {
            fs::write(repo.join(f), f).unwrap();
        }
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["add", "-A"]);
        git(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "x",
            ],
        );
        let wt = t.path().join("wt");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "n",
                wt.to_str().unwrap(),
                "main",
            ],
        );
        assert_eq!(checked_out_files(&wt), Some(3));
        assert_eq!(checked_out_files(t.path()), None);
    }

    #[test]
    fn keys_are_stable_and_distinct() {
        let a = key(Path::new("/src/my repo"));
        assert!(a.starts_with("my_repo-"), "{a}");
        assert_eq!(a, key(Path::new("/src/my repo")));
        assert_ne!(a, key(Path::new("/other/my repo")));
    }

    #[test]
    fn an_entry_with_its_marker_is_never_ready() {
        let t = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            t.path().join("01a"),
            t.path().join("01b"),
            t.path().join("01c.discard"),
        );
        fs::write(marker(&b), "").unwrap();
        for d in [&a, &b, &c] {
            fs::create_dir(d).unwrap();
        }
        assert_eq!(ready(t.path()), vec![a]);
        let states: Vec<State> = entries(t.path()).into_iter().map(|(_, s)| s).collect();
        assert_eq!(states, vec![State::Ready, State::Making, State::Discarding]);
    }
}
