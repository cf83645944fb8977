//! Garbage and recovery: `recover RUN --node NODE [--branch NAME] [--worktree PATH]` or
//! `recover --ref REF --repo PATH …` (a snapshot ref back into a branch, and the kept ignored
//! files back into a worktree) and `run gc [--dry-run] [--older-than AGE]` (what finished runs
//! left behind, and orphans, removed after a snapshot). JSON output is the daemon's result as
//! it came.

use crate::commands::result_of;
use clap::Args;
use octl_proto::ids::validate_node_id;
use octl_proto::method;
use octl_proto::rpc::{GcItem, GcParams, GcResult, RecoverParams, RecoverResult};
use octl_proto::AppError;

use super::run::run_param;
use super::{call, Ctx};
use crate::output::shell_word;

// The flags of `recover`; its help is on `Group::Recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN", required_unless_present = "refname")]
    pub run: Option<String>,

    /// The node whose snapshot to recover
    #[arg(long, value_name = "NODE", requires = "run")]
    pub node: Option<String>,

    /// A snapshot ref instead of RUN and --node, e.g. one `run gc` made of an orphan that no
    /// run owns: refs/octl/snapshots/<RUN>/<NODE>
    #[arg(
        long = "ref",
        value_name = "REF",
        conflicts_with = "run",
        requires = "repo"
    )]
    pub refname: Option<String>,

    /// The repository that holds --ref
    #[arg(long, value_name = "PATH", requires = "refname")]
    pub repo: Option<std::path::PathBuf>,

    /// Also check the new branch out in a new worktree at PATH (must not exist or be empty)
    /// and move the node's kept ignored files (.env, build output, …) back into it
    #[arg(long, value_name = "PATH")]
    pub worktree: Option<std::path::PathBuf>,

    /// The branch to create; must not exist (checked with `git check-ref-format --branch`,
    /// and outside the daemon's own octl/ namespace)
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
}

/// The examples of `recover --help`.
pub const RECOVER_EXAMPLES: &str = "\
Examples:
  orchestratectl recover 01JDXJ5R --node api                  # branch recovered/01JDXJ5R8Q/api
  orchestratectl recover 01JDXJ5R --node api --branch api-draft
  orchestratectl recover 01JDXJ5R --node api --worktree ~/src/api-again   # + its ignored files
  orchestratectl recover --ref refs/octl/snapshots/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/api --repo ~/src/app
  orchestratectl --json recover 01JDXJ5R --node api           # {run,node,repo,branch,commit,snapshot_ref,…}";

// The flags of `run gc`; its help is on `RunCmd::Gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// List what would be removed and kept, and change nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Also delete the kept ignored files of runs that ended longer ago than AGE: a whole
    /// number and d, h, m or s (7d, 12h, 30m). Without it they are kept
    #[arg(long, value_name = "AGE")]
    pub older_than: Option<String>,
}

/// The examples of `run gc --help`.
pub const GC_EXAMPLES: &str = "\
Examples:
  orchestratectl run gc --dry-run          # what would go, and why
  orchestratectl run gc
  orchestratectl run gc --older-than 7d    # also the kept ignored files of runs ended 7 days ago
  orchestratectl --json run gc --dry-run   # {\"dry_run\":true,\"removed\":[…],\"kept\":[…]}
  orchestratectl recover 01JDXJ5R --node api   # a removed worktree's content, back as a branch";

/// `path` made absolute against the current directory (the daemon's is not ours).
fn absolute(path: std::path::PathBuf) -> String {
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    std::path::absolute(cwd.join(path))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

pub async fn execute(ctx: &Ctx, args: RecoverArgs) -> Result<(), AppError> {
    if let Some(node) = &args.node {
        validate_node_id("--node", node)?;
    }
    if args.run.is_some() && args.node.is_none() {
        return Err(AppError::invalid(
            "missing --node: give the node whose snapshot to recover",
        ));
    }
    let params = RecoverParams {
        run: match &args.run {
            Some(r) => Some(run_param(r)?.run),
            None => None,
        },
        node: args.node,
        refname: args.refname,
        repo: args.repo.map(absolute),
        branch: args.branch,
        worktree: args.worktree.map(absolute),
    };
    let value = call::<method::Recover>(ctx, &params).await?;
    let r = result_of::<method::Recover>(&value)?;
    ctx.out.result(&value, || recover_text(&r));
    Ok(())
}

/// `Recovered node api of run 01…: branch recovered/01JDXJ5R/api at <commit>`, where from,
/// and where its kept ignored files are.
pub fn recover_text(r: &RecoverResult) -> String {
    let mut out = format!(
        "Recovered node {} of run {}: branch {} at {}\n  from {} in {}",
        r.node, r.run, r.branch, r.commit, r.snapshot_ref, r.repo,
    );
    match &r.worktree {
        Some(w) => {
            out.push_str(&format!("\n  worktree: {w}"));
            if let Some(n) = r.restored_files.filter(|n| *n > 0) {
                out.push_str(&format!(" ({n} ignored files moved back in)"));
            }
        }
        None => out.push_str(&format!(
            "\n  see it: git -C {} log --stat -1 {}",
            shell_word(&r.repo),
            shell_word(&r.branch)
        )),
    }
    if let Some(dir) = &r.kept_dir {
        let n = r.kept_files.unwrap_or(0);
        if r.worktree.is_some() {
            out.push_str(&format!(
                "\n  {n} kept files were not moved (the worktree has those paths): {dir}"
            ));
        } else {
            out.push_str(&format!(
                "\n  its ignored files ({n}) are kept in {dir}; --worktree PATH moves them back"
            ));
        }
    }
    out
}

pub async fn gc(ctx: &Ctx, args: GcArgs) -> Result<(), AppError> {
    if let Some(age) = &args.older_than {
        octl_proto::time::parse_age("--older-than", age)?;
    }
    let params = GcParams {
        dry_run: args.dry_run,
        older_than: args.older_than,
    };
    let value = call::<method::RunGc>(ctx, &params).await?;
    let r = result_of::<method::RunGc>(&value)?;
    ctx.out.result(&value, || gc_text(&r));
    Ok(())
}

/// What an item is: a path, a branch (in its repository), or a window.
fn what(i: &GcItem) -> String {
    if let Some(p) = &i.path {
        return p.clone();
    }
    if let Some(r) = &i.refname {
        let short = r.strip_prefix("refs/heads/").unwrap_or(r);
        return match &i.repo {
            Some(repo) => format!("{short} in {repo}"),
            None => short.to_string(),
        };
    }
    i.target.clone().unwrap_or_default()
}

/// The human form of `run gc`: what went (or would), what stays and why.
pub fn gc_text(r: &GcResult) -> String {
    let mut out = String::new();
    if r.removed.is_empty() && r.kept.is_empty() {
        return "Nothing to collect: no finished run left anything behind, and nothing is orphaned."
            .to_string();
    }
    if !r.removed.is_empty() {
        out.push_str(&format!(
            "{} ({}):\n",
            if r.dry_run { "Would remove" } else { "Removed" },
            r.removed.len()
        ));
        for i in &r.removed {
            out.push_str(&format!("  {:<8}  {}\n    {}\n", i.kind, what(i), i.why));
            if let Some(s) = &i.snapshot_ref {
                let at = i
                    .snapshot_commit
                    .as_deref()
                    .map(|c| format!(" at {}", &c[..c.len().min(12)]))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "    {} {s}{at}\n",
                    if r.dry_run {
                        "saved first in"
                    } else {
                        "saved in"
                    }
                ));
            }
            if let (Some(d), Some(n)) = (&i.kept_dir, i.kept_files) {
                out.push_str(&format!("    ignored files ({n}) kept in {d}\n"));
            }
            if let (false, Some(s), Some(repo)) = (r.dry_run, &i.snapshot_ref, &i.repo) {
                out.push_str(&format!(
                    "    recover: orchestratectl recover --ref {} --repo {}\n",
                    shell_word(s),
                    shell_word(repo)
                ));
            }
        }
    }
    if !r.kept.is_empty() {
        out.push_str(&format!("Kept ({}):\n", r.kept.len()));
        for i in &r.kept {
            out.push_str(&format!(
                "  {:<8}  {}\n    {}: {}\n",
                i.kind,
                what(i),
                i.why,
                i.reason.as_deref().unwrap_or("kept")
            ));
        }
    }
    if r.dry_run {
        out.push_str("Dry run: nothing was changed; `orchestratectl run gc` removes them.");
    } else if r.removed.iter().any(|i| i.snapshot_ref.is_some()) {
        out.push_str(
            "Each `recover` above makes a branch of the snapshot; add `--worktree PATH` to get the kept ignored files back too.",
        );
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(kind: &str) -> GcItem {
        GcItem {
            kind: kind.into(),
            path: None,
            refname: None,
            target: None,
            repo: None,
            run: None,
            node: None,
            why: "run R is failed".into(),
            snapshot_ref: None,
            snapshot_commit: None,
            kept_dir: None,
            kept_files: None,
            reason: None,
        }
    }

    #[test]
    fn gc_text_lists_what_goes_and_what_stays() {
        let r = GcResult {
            dry_run: true,
            removed: vec![GcItem {
                path: Some("/h/worktrees/R/n".into()),
                snapshot_ref: Some("refs/octl/snapshots/R/n".into()),
                ..item("worktree")
            }],
            kept: vec![GcItem {
                refname: Some("refs/heads/octl/R/n".into()),
                repo: Some("/repo".into()),
                reason: Some("it is checked out in /x".into()),
                ..item("branch")
            }],
        };
        assert_eq!(
            gc_text(&r),
            "Would remove (1):\n  worktree  /h/worktrees/R/n\n    run R is failed\n    saved first in refs/octl/snapshots/R/n\n\
             Kept (1):\n  branch    octl/R/n in /repo\n    run R is failed: it is checked out in /x\n\
             Dry run: nothing was changed; `orchestratectl run gc` removes them."
        );
        let done = GcResult {
            dry_run: false,
            removed: vec![GcItem {
                path: Some("/h/worktrees/R/n".into()),
                repo: Some("/repo".into()),
                snapshot_ref: Some("refs/octl/snapshots/R/n".into()),
                kept_dir: Some("/h/kept/R/n/1".into()),
                kept_files: Some(3),
                ..item("worktree")
            }],
            kept: vec![],
        };
        let text = gc_text(&done);
        assert!(
            text.contains("    ignored files (3) kept in /h/kept/R/n/1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "    recover: orchestratectl recover --ref refs/octl/snapshots/R/n --repo /repo\n"
            ),
            "{text}"
        );
        let empty = GcResult {
            dry_run: false,
            removed: vec![],
            kept: vec![],
        };
        assert!(gc_text(&empty).starts_with("Nothing to collect"));
    }

    #[test]
    fn recover_text_names_branch_commit_and_source() {
        let r = RecoverResult {
            run: "01R".into(),
            node: "api".into(),
            repo: "/repo".into(),
            branch: "recovered/01R/api".into(),
            commit: "abc".into(),
            snapshot_ref: "refs/octl/snapshots/01R/api".into(),
            worktree: None,
            restored_files: None,
            kept_dir: None,
            kept_files: None,
        };
        assert_eq!(
            recover_text(&r),
            "Recovered node api of run 01R: branch recovered/01R/api at abc\n  from refs/octl/snapshots/01R/api in /repo\n  see it: git -C /repo log --stat -1 recovered/01R/api"
        );
    }
}
