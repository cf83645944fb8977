//! `skill list|print|install`: the bundled Claude Code skills ([`crate::skills`]). Never talks
//! to the daemon.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use octl_proto::{AppError, ErrorKind};
use serde_json::{json, Value};

use super::Ctx;
use crate::output::{table, truncate};
use crate::skills::{self, description, skill_path, status_in, InstallReport, SKILLS};

/// The examples of `skill --help`.
pub const SKILL_EXAMPLES: &str = "\
Examples:
  orchestratectl skill list
  orchestratectl skill install
  orchestratectl skill print worktree-spinoff";

#[derive(Debug, Subcommand)]
pub enum SkillCmd {
    /// List the bundled skills and whether each is installed, outdated, modified or missing
    ///
    /// installed: the file is the bundled text; outdated: an older version that
    /// `skill install` wrote and nobody edited (install updates it); modified: edited by
    /// someone (install keeps it unless --force); missing: not installed.
    #[command(after_help = "\
Examples:
  orchestratectl skill list
  orchestratectl skill list --dir ./.claude/skills
  orchestratectl --json skill list     # [{name, description, status, path}]")]
    List(SkillDirArg),

    /// Print one bundled skill's SKILL.md exactly as it is installed
    #[command(after_help = "\
Examples:
  orchestratectl skill print worktree-spinoff
  orchestratectl --json skill print fan-out     # {name, description, text}")]
    Print(SkillNameArg),

    /// Write every bundled skill to DIR/<name>/SKILL.md, never overwriting a file someone
    /// edited unless --force
    ///
    /// Next to each SKILL.md it keeps a small marker file, .orchestratectl-installed, with a
    /// hash of what it wrote; that is how an edit is told apart from an older version. Edited
    /// files are skipped and listed, and the command then exits 4 after installing the rest.
    #[command(after_help = "\
Examples:
  orchestratectl skill install
  orchestratectl skill install --force                 # also overwrite edited files
  orchestratectl skill install --dir ./.claude/skills  # project-level skills
  CLAUDE_CONFIG_DIR=~/.claude-work orchestratectl skill install
  orchestratectl skill install --plugin                # as a Claude Code plugin, then:
  claude plugin marketplace add ~/.local/share/orchestratectl/claude-plugin
  claude plugin install orchestratectl@orchestratectl")]
    Install(SkillInstallArgs),
}

#[derive(Debug, Args)]
pub struct SkillDirArg {
    /// The skills directory; default ${CLAUDE_CONFIG_DIR:-$HOME/.claude}/skills
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SkillNameArg {
    /// The skill's name, as `skill list` shows it
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct SkillInstallArgs {
    /// Also overwrite SKILL.md files that were edited since they were installed
    #[arg(long)]
    pub force: bool,

    /// The skills directory; default ${CLAUDE_CONFIG_DIR:-$HOME/.claude}/skills (with
    /// --plugin: the plugin's directory, default ${XDG_DATA_HOME:-~/.local/share}/orchestratectl/claude-plugin)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Write the skills as a Claude Code plugin with its own local marketplace manifest
    /// (.claude-plugin/plugin.json and marketplace.json) into DIR, for `claude plugin
    /// marketplace add DIR` and `claude plugin install orchestratectl@orchestratectl`
    #[arg(long)]
    pub plugin: bool,
}

/// How much of a description `skill list` shows.
const DESCRIPTION_WIDTH: usize = 72;

pub fn execute(ctx: &Ctx, cmd: SkillCmd) -> Result<(), AppError> {
    match cmd {
        SkillCmd::List(arg) => list(ctx, &target_dir(arg.dir.as_deref())?),
        SkillCmd::Print(arg) => print(ctx, &arg.name),
        SkillCmd::Install(args) => install(ctx, args),
    }
}

fn target_dir(flag: Option<&Path>) -> Result<PathBuf, AppError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    skills::skills_dir(
        flag,
        std::env::var_os("CLAUDE_CONFIG_DIR"),
        std::env::var_os("HOME"),
        &cwd,
    )
}

fn list(ctx: &Ctx, dir: &Path) -> Result<(), AppError> {
    let mut items = Vec::new();
    let mut rows = Vec::new();
    for skill in SKILLS {
        let status = status_in(dir, skill)?;
        let desc = description(skill);
        rows.push(vec![
            skill.name.to_string(),
            status.as_str().to_string(),
            truncate(&desc, DESCRIPTION_WIDTH),
        ]);
        items.push(json!({
            "name": skill.name,
            "description": desc,
            "status": status,
            "path": skill_path(dir, skill.name).display().to_string(),
        }));
    }
    ctx.out.result(&Value::Array(items), || {
        format!(
            "{}\nSkills directory: {}",
            table(&["NAME", "STATUS", "DESCRIPTION"], &rows),
            dir.display()
        )
    });
    Ok(())
}

fn print(ctx: &Ctx, name: &str) -> Result<(), AppError> {
    let skill = skills::find(name).ok_or_else(|| {
        AppError::not_found(format!(
            "no bundled skill {name:?}; the skills are: {}",
            skills::names()
        ))
        .with_hint("see them with `orchestratectl skill list`")
    })?;
    if ctx.out.json {
        ctx.out.result(
            &json!({"name": skill.name, "description": description(skill), "text": skill.text}),
            String::new,
        );
    } else {
        // Exactly the file's bytes, nothing added.
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(skill.text.as_bytes());
        let _ = out.flush();
    }
    Ok(())
}

fn install(ctx: &Ctx, args: SkillInstallArgs) -> Result<(), AppError> {
    if args.plugin {
        let dir = resolved(&plugin_dir(args.dir.as_deref())?)?;
        let report = skills::install_plugin(&dir, args.force)?;
        let value = json!({"plugin": dir.display().to_string(), "skills": report});
        ctx.out.result(&value, || {
            format!(
                "{}\nplugin {} with its marketplace in {}; install it into Claude Code with:\n  claude plugin marketplace add {}\n  claude plugin install {}@{}",
                install_text(&report),
                skills::PLUGIN_NAME,
                dir.display(),
                dir.display(),
                skills::PLUGIN_NAME,
                skills::PLUGIN_NAME
            )
        });
        return match skipped_error(&report) {
            Some(err) => Err(err),
            None => Ok(()),
        };
    }
    let dir = resolved(&target_dir(args.dir.as_deref())?)?;
    let report = skills::install(&dir, SKILLS, args.force)?;
    ctx.out.result(&report, || install_text(&report));
    match skipped_error(&report) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// `--dir`, else `${XDG_DATA_HOME:-$HOME/.local/share}/orchestratectl/claude-plugin`.
fn plugin_dir(flag: Option<&Path>) -> Result<PathBuf, AppError> {
    let non_empty = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    match (flag, non_empty("XDG_DATA_HOME"), non_empty("HOME")) {
        (Some(p), _, _) if p.as_os_str().is_empty() => Err(AppError::invalid(
            "invalid --dir \"\": give the plugin's directory",
        )),
        (Some(p), _, _) => Ok(std::env::current_dir().unwrap_or_default().join(p)),
        (None, Some(d), _) if d.is_absolute() => Ok(d.join("orchestratectl/claude-plugin")),
        (None, _, Some(h)) => Ok(h.join(".local/share/orchestratectl/claude-plugin")),
        (None, _, None) => Err(AppError::invalid(
            "cannot find a directory for the plugin: neither --dir, XDG_DATA_HOME nor HOME is set",
        )
        .with_hint("pass --dir DIR")),
    }
}

/// The skills directory, created if missing, with symlinks and `..` resolved the way the
/// kernel resolves them (`..` after a symlink is the target's parent): the report names where
/// the files really are.
fn resolved(dir: &Path) -> Result<PathBuf, AppError> {
    std::fs::create_dir_all(dir)
        .and_then(|()| dir.canonicalize())
        .map_err(|e| {
            AppError::invalid(format!(
                "invalid --dir {:?}: {e}",
                dir.display().to_string()
            ))
        })
}

/// The human form of an install: one line per change, and a count of what stayed.
pub fn install_text(r: &InstallReport) -> String {
    let mut out = String::new();
    for (word, names) in [("installed", &r.installed), ("updated", &r.updated)] {
        for name in names {
            out.push_str(&format!(
                "{word:<9}  {}\n",
                skill_path(Path::new(&r.dir), name).display()
            ));
        }
    }
    for name in &r.skipped {
        out.push_str(&format!(
            "{:<9}  {} (edited; kept)\n",
            "skipped",
            skill_path(Path::new(&r.dir), name).display()
        ));
    }
    let changed = r.installed.len() + r.updated.len();
    out.push_str(&format!(
        "{changed} skill{} written, {} already up to date, {} skipped, in {}",
        if changed == 1 { "" } else { "s" },
        r.unchanged.len(),
        r.skipped.len(),
        r.dir
    ));
    out
}

/// Exit 4 when edited files were kept: kind `forbidden`, naming them.
pub fn skipped_error(r: &InstallReport) -> Option<AppError> {
    if r.skipped.is_empty() {
        return None;
    }
    let files: Vec<String> = r
        .skipped
        .iter()
        .map(|n| skill_path(Path::new(&r.dir), n).display().to_string())
        .collect();
    Some(
        AppError::new(
            ErrorKind::Forbidden,
            format!(
                "kept {} edited skill file{} (not written by orchestratectl, or changed since): {}",
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                files.join(", ")
            ),
        )
        .with_hint("use --force to overwrite them"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_report_text_and_exit() {
        let r = InstallReport {
            dir: "/s".into(),
            installed: vec!["a".into()],
            updated: vec![],
            unchanged: vec!["b".into(), "c".into()],
            skipped: vec![],
        };
        assert_eq!(
            install_text(&r),
            "installed  /s/a/SKILL.md\n1 skill written, 2 already up to date, 0 skipped, in /s"
        );
        assert!(skipped_error(&r).is_none());
        let r = InstallReport {
            skipped: vec!["d".into()],
            ..r
        };
        let err = skipped_error(&r).unwrap();
        assert_eq!(err.kind.exit_code(), 4);
        assert_eq!(err.kind, ErrorKind::Forbidden);
        assert!(err.message.contains("/s/d/SKILL.md"), "{}", err.message);
        assert_eq!(err.hint.as_deref(), Some("use --force to overwrite them"));
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"dir": "/s", "installed": ["a"], "updated": [], "unchanged": ["b", "c"], "skipped": ["d"]})
        );
    }
}
