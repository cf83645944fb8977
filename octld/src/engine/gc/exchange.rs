//! A finished run's refs in the exchange repositories of remote runners
//! (`$OCTL_HOME/exchange/*.git`: `refs/octl/base/<RUN>/…`, `refs/octl/remote/<RUN>/…`). A ref of
//! a merged or cleaned-up node goes only when its commit is reachable from a branch, tag or
//! snapshot ref of the run's own repository: the exchange never holds the last copy of work
//! that `run gc` removes. Any other ref (a checkpoint of uncommitted work, a refused or
//! superseded attempt's) is kept and said so.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use octl_proto::rpc::GcResult;
use octl_proto::NodeState;

use super::{item, kept};
use crate::daemon::Daemon;
use crate::engine::blocking;
use crate::git::Git;
use crate::store::RunHandle;

/// One exchange ref of the run: its repository, name, commit and node.
struct Found {
    exchange: PathBuf,
    refname: String,
    sha: String,
    node: String,
}

pub(super) async fn exchange_refs(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    dry_run: bool,
    out: &mut GcResult,
) {
    let view = handle.view();
    let Some(repo) = view.manifest.repo.clone() else {
        return;
    };
    let run = handle.id.clone();
    let done: Vec<String> = view
        .nodes
        .iter()
        .filter(|n| n.cleaned || n.state == NodeState::Merged)
        .map(|n| n.id.clone())
        .collect();
    let root = daemon.home.root().join("exchange");
    let judged = blocking(move || Ok(judge(&root, Path::new(&repo), &run, &done, dry_run))).await;
    let Ok(judged) = judged else {
        return;
    };
    for (f, reachable, removed) in judged {
        let mut i = item(
            "exchange_ref",
            format!("run {} is {}", handle.id, view.manifest.status),
        );
        i.refname = Some(f.refname);
        i.repo = Some(f.exchange.display().to_string());
        i.run = Some(handle.id.clone());
        i.node = Some(f.node);
        match (reachable, removed) {
            (true, Ok(())) => out.removed.push(i),
            (true, Err(e)) => out.kept.push(kept(i, e)),
            (false, _) => out.kept.push(kept(
                i,
                format!(
                    "its commit {} is in no branch, tag or snapshot of the repository: only the exchange has it",
                    &f.sha[..f.sha.len().min(12)]
                ),
            )),
        }
    }
}

/// Each ref of `run` in every exchange repository, whether its commit is reachable in `repo`,
/// and (unless `dry_run`) the deletion of those that are and whose node is in `done`.
fn judge(
    root: &Path,
    repo: &Path,
    run: &str,
    done: &[String],
    dry_run: bool,
) -> Vec<(Found, bool, Result<(), String>)> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(root) else {
        return out;
    };
    let user = Git::new(repo);
    for dir in dirs
        .flatten()
        .map(|d| d.path())
        .filter(|d| d.join("HEAD").exists())
    {
        let ex = Git::new(&dir);
        let listed = ex
            .plumbing(&[
                "for-each-ref",
                "--format=%(objectname) %(refname)",
                &format!("refs/octl/base/{run}/"),
                &format!("refs/octl/remote/{run}/"),
            ])
            .unwrap_or_default();
        for line in listed.lines() {
            let Some((sha, refname)) = line.split_once(' ') else {
                continue;
            };
            // refs/octl/{base,remote}/<run>/<node>/…
            let node = refname.split('/').nth(4).unwrap_or_default().to_string();
            if !done.contains(&node) {
                continue;
            }
            let reachable = user
                .plumbing(&[
                    "for-each-ref",
                    "--count=1",
                    "--format=%(refname)",
                    &format!("--contains={sha}"),
                    "refs/heads/",
                    "refs/tags/",
                    "refs/octl/snapshots/",
                ])
                .is_ok_and(|s| !s.trim().is_empty());
            let removed = if reachable && !dry_run {
                ex.plumbing(&["update-ref", "-d", refname, sha])
                    .map(|_| ())
                    .map_err(|e| format!("cannot delete it: {e}"))
            } else {
                Ok(())
            };
            out.push((
                Found {
                    exchange: dir.clone(),
                    refname: refname.to_string(),
                    sha: sha.to_string(),
                    node,
                },
                reachable,
                removed,
            ));
        }
    }
    out
}
