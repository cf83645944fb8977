//! `recover`: a node's snapshot back into a new branch, and with `--worktree` into a new
//! worktree with the node's kept ignored files moved back in.

use std::path::PathBuf;
use std::sync::Arc;

use octl_proto::event::KeptRestored;

use octl_proto::rpc::{RecoverParams, RecoverResult};
use octl_proto::{AppError, ErrorKind};

use super::branches::tip_of_ref;
use super::GC;
use crate::daemon::Daemon;
use crate::engine::{append, blocking};
use crate::git::{snapshot_ref, Git};
use crate::store::RunHandle;

/// The branch a recovered snapshot gets by default: `recovered/<RUN-short>/<NODE>`, the run
/// named by the shortest prefix of its id that no other run of the home has (`shown`, at
/// least 10 characters): runs started within 256 ms share their first 8.
pub fn default_branch(shown: &str, node: &str) -> String {
    format!("recovered/{shown}/{node}")
}

/// What `recover` works on: a snapshot ref in a repository, and the kept ignored files that
/// go with it.
struct Source {
    run: String,
    node: String,
    repo: String,
    snap: String,
    /// The run that records the node, if one does.
    handle: Option<Arc<RunHandle>>,
    /// Whether the log says the node exists (for the not-found message).
    known_node: bool,
}

/// Finds what `recover` was asked for: `run` + `node`, or a snapshot `ref` + `repo` (an
/// orphan's; a ref of a node some run records is treated as that node's).
fn source(daemon: &Arc<Daemon>, p: &RecoverParams) -> Result<Source, AppError> {
    match (&p.run, &p.refname) {
        (Some(_), Some(_)) => Err(AppError::invalid(
            "give either RUN with --node, or --ref with --repo, not both",
        )),
        (None, None) => Err(AppError::invalid(
            "give RUN with --node NODE, or --ref refs/octl/snapshots/<RUN>/<NODE> with --repo PATH",
        )),
        (Some(run), None) => {
            let node = p.node.clone().ok_or_else(|| {
                AppError::invalid("missing --node: give the node whose snapshot to recover")
            })?;
            octl_proto::ids::validate_node_id("node", &node)?;
            let handle = daemon.store.resolve("run", run)?;
            let view = handle.view();
            let repo = view.manifest.repo.clone().ok_or_else(|| {
                AppError::invalid(format!(
                    "run {} has no repository, so it has no snapshots",
                    handle.id
                ))
            })?;
            Ok(Source {
                snap: snapshot_ref(&handle.id, &node),
                run: handle.id.clone(),
                known_node: view.nodes.iter().any(|n| n.id == node),
                node,
                repo,
                handle: Some(handle),
            })
        }
        (None, Some(refname)) => {
            if p.node.is_some() {
                return Err(AppError::invalid(
                    "--node goes with RUN; a --ref names its node itself",
                ));
            }
            let bad = || {
                AppError::invalid(format!(
                    "invalid ref {refname:?}: give a snapshot ref refs/octl/snapshots/<RUN>/<NODE>"
                ))
                .with_hint("`orchestratectl run gc` names each snapshot it made")
            };
            let rest = refname
                .strip_prefix(crate::git::SNAPSHOT_REF_PREFIX)
                .ok_or_else(bad)?;
            let (run, node) = rest.split_once('/').ok_or_else(bad)?;
            octl_proto::ids::validate_node_id("ref", node).map_err(|_| bad())?;
            if !octl_proto::ids::is_full_run_id(run) {
                return Err(bad());
            }
            let repo = p.repo.clone().ok_or_else(|| {
                AppError::invalid("missing --repo: give the repository that holds --ref")
            })?;
            if !std::path::Path::new(&repo).is_absolute() {
                return Err(AppError::invalid(format!(
                    "invalid repo {repo:?}: an absolute path is accepted"
                )));
            }
            let handle = daemon
                .store
                .resolve("run", run)
                .ok()
                .filter(|h| h.id == run && h.corrupt().is_none());
            let known_node = handle
                .as_ref()
                .is_some_and(|h| h.view().nodes.iter().any(|n| n.id == node));
            Ok(Source {
                run: run.to_string(),
                node: node.to_string(),
                repo,
                snap: refname.clone(),
                handle: handle.filter(|_| known_node),
                known_node,
            })
        }
    }
}

/// The kept set `recover` gives back: the node's latest one in its log; for a node no run
/// records, the highest-numbered directory under `kept/<RUN>/<NODE>/`.
enum KeptSource {
    None,
    Logged(octl_proto::state::Kept),
    Unlogged(PathBuf),
}

/// `recover`: a new branch at the node's snapshot, and with `worktree` a new worktree of it
/// with the node's kept ignored files moved back in. Never moves an existing branch. Runs
/// under the collection's lock, so a `run gc` and another `recover` wait: the first to look
/// wins, and whoever comes second finds the files restored (or deleted) and gets
/// `invalid_transition` without changing anything.
pub async fn recover(daemon: &Arc<Daemon>, p: RecoverParams) -> Result<RecoverResult, AppError> {
    let src = source(daemon, &p)?;
    let worktree = match &p.worktree {
        Some(w) => Some(new_worktree_path(daemon, w)?),
        None => None,
    };
    let _one_at_a_time = GC.lock().await;
    let kept_src = match &src.handle {
        Some(h) => {
            let view = h.view();
            let latest = view
                .nodes
                .iter()
                .find(|n| n.id == src.node)
                .and_then(|n| n.kept.last().cloned());
            match latest {
                Some(k) if k.status != octl_proto::state::KeptStatus::Kept => {
                    if worktree.is_some() {
                        let whither = k
                            .restored_to
                            .as_deref()
                            .map(|w| format!(" to {w}"))
                            .unwrap_or_default();
                        return Err(AppError::new(
                            ErrorKind::InvalidTransition,
                            format!(
                                "the kept ignored files of node {} of run {} ({}) are {}{whither}; nothing was changed",
                                src.node,
                                src.run,
                                k.dir,
                                k.status.as_str()
                            ),
                        )
                        .with_hint("recover without --worktree still makes a branch of the snapshot"));
                    }
                    KeptSource::None
                }
                Some(k) => KeptSource::Logged(k),
                None => KeptSource::None,
            }
        }
        None => match crate::kept::latest_numbered(&daemon.home.kept_of(&src.run, &src.node)) {
            Some(d) => KeptSource::Unlogged(d),
            None => KeptSource::None,
        },
    };
    let branch = match p.branch.clone() {
        Some(b) => b,
        None => default_branch(&daemon.store.shown_id(&src.run)?, &src.node),
    };
    let (run, node, snap, repo) = (
        src.run.clone(),
        src.node.clone(),
        src.snap.clone(),
        src.repo.clone(),
    );
    let known_node = src.known_node;
    let wt = worktree.clone();
    let made = blocking(move || {
        let git = Git::new(&repo);
        check_branch_name(&git, &branch)?;
        let Some(commit) = tip_of_ref(&git, &snap)? else {
            let what = if known_node {
                format!("node {node} of run {run} has no snapshot ({snap} does not exist in {repo})")
            } else {
                format!("run {run} has no node {node:?} and no snapshot {snap} in {repo}")
            };
            return Err(AppError::not_found(what).with_hint(
                "a snapshot is taken when a node's worktree is removed (merge, run cancel --discard, run retry, run gc); `orchestratectl run show RUN` lists a node's snapshot refs, `run gc` names those of orphans",
            ));
        };
        let refname = format!("refs/heads/{branch}");
        let exists = |at: Option<String>| {
            AppError::new(
                ErrorKind::Forbidden,
                format!(
                    "branch {branch} already exists{} in {repo}; recover never overwrites a branch",
                    at.map(|c| format!(" (at {c})")).unwrap_or_default()
                ),
            )
            .with_hint(format!(
                "name another with --branch, e.g. --branch {branch}-2"
            ))
        };
        if let Some(at) = tip_of_ref(&git, &refname)? {
            return Err(exists(Some(at)));
        }
        match git.cas_update_ref(&refname, &commit, None, &format!("octl recover {run}/{node}"))? {
            crate::git::CasOutcome::Updated => {}
            crate::git::CasOutcome::Stale { current } => return Err(exists(current)),
        }
        if let Some(w) = &wt {
            git.worktree_add_existing(w, &branch)?;
        }
        Ok(RecoverResult {
            run,
            node,
            repo,
            branch,
            commit,
            snapshot_ref: snap,
            worktree: wt.map(|w| w.display().to_string()),
            restored_files: None,
            kept_dir: None,
            kept_files: None,
        })
    })
    .await?;
    let mut result = made;
    let dir = match &kept_src {
        KeptSource::None => return Ok(result),
        KeptSource::Logged(k) => PathBuf::from(&k.dir),
        KeptSource::Unlogged(d) => d.clone(),
    };
    let Some(w) = worktree else {
        result.kept_dir = Some(dir.display().to_string());
        result.kept_files = crate::kept::tally(&dir).ok().map(|t| t.files);
        return Ok(result);
    };
    if let (KeptSource::Logged(k), Some(h)) = (&kept_src, &src.handle) {
        append(
            daemon,
            h,
            Some(&src.node),
            KeptRestored {
                dir: k.dir.clone(),
                worktree: w.display().to_string(),
            },
        )
        .await?;
    }
    let (d, to) = (dir.clone(), w.clone());
    let (moved, left) = blocking(move || {
        crate::kept::restore(&d, &to).map_err(|e| {
            AppError::internal(format!(
                "moving the kept files in {} back into {}: {e}",
                d.display(),
                to.display()
            ))
        })
    })
    .await?;
    result.restored_files = Some(moved.files);
    if left.files > 0 {
        result.kept_dir = Some(dir.display().to_string());
        result.kept_files = Some(left.files);
    }
    Ok(result)
}

/// A path for the new worktree of `recover --worktree`: absolute, not there yet (or an
/// empty directory), and outside the daemon's own worktree folder (where it would be
/// taken for an orphan).
fn new_worktree_path(daemon: &Arc<Daemon>, w: &str) -> Result<PathBuf, AppError> {
    let path = PathBuf::from(w);
    let invalid = |why: &str| AppError::invalid(format!("invalid worktree {w:?}: {why}"));
    if !path.is_absolute() {
        return Err(invalid("an absolute path is accepted"));
    }
    if path.starts_with(daemon.home.root()) {
        return Err(invalid(
            "it is inside the daemon's home; choose a place of your own",
        ));
    }
    match std::fs::read_dir(&path).map(|mut entries| entries.next().is_none()) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(path),
        Ok(true) => Ok(path),
        Ok(false) => Err(AppError::new(
            ErrorKind::Forbidden,
            format!("{w} already exists and is not empty; recover never writes over files"),
        )
        .with_hint("give a new path with --worktree")),
        Err(e) => Err(invalid(&e.to_string())),
    }
}

/// A branch name git accepts as it is (`git check-ref-format --branch`, whose answer must be
/// the name itself: `@{-1}` and the like are refused), outside the daemon's own namespace.
pub(super) fn check_branch_name(git: &Git, branch: &str) -> Result<(), AppError> {
    let invalid = |why: &str| {
        AppError::invalid(format!("invalid branch {branch:?}: {why}"))
            .with_hint("give a name such as recovered/api-fix (see `git help check-ref-format`)")
    };
    if branch.is_empty() || branch.starts_with('-') {
        return Err(invalid("a branch name cannot be empty or start with '-'"));
    }
    if branch.starts_with("octl/") {
        return Err(invalid(
            "octl/ is the daemon's own branch namespace; choose a name outside it",
        ));
    }
    if !git.is_branch_name(branch)? {
        return Err(invalid("git does not accept it as a branch name"));
    }
    Ok(())
}
