//! The checks of what `skill install` and `daemon install-service` install: the bundled skills
//! in Claude Code's skills directory, and the systemd user units or launchd agent.

use std::path::PathBuf;

use super::Check;
use crate::commands::daemon::{ServiceManager, LAUNCHD_LABEL};
use crate::skills::{self, Status as SkillStatus, SKILLS};

// -------------------------------------------------------------------------------------------
// skills and the service

pub(super) fn check_skills() -> Check {
    let id = "skills";
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let dir = match skills::skills_dir(
        None,
        std::env::var_os("CLAUDE_CONFIG_DIR"),
        std::env::var_os("HOME"),
        &cwd,
    ) {
        Ok(d) => d,
        Err(e) => {
            return Check::warn(
                id,
                e.message,
                "install them with `orchestratectl skill install --dir DIR`",
            )
        }
    };
    let mut counts = std::collections::BTreeMap::new();
    for skill in SKILLS {
        let s = skills::status_in(&dir, skill).unwrap_or(SkillStatus::Missing);
        *counts.entry(s.as_str()).or_insert(0usize) += 1;
    }
    let installed = counts.get("installed").copied().unwrap_or(0);
    if installed == SKILLS.len() {
        return Check::ok(
            id,
            format!(
                "{installed} skills installed and current in {}",
                dir.display()
            ),
        );
    }
    let summary = ["installed", "outdated", "modified", "missing"]
        .iter()
        .filter_map(|k| counts.get(k).map(|n| format!("{n} {k}")))
        .collect::<Vec<_>>()
        .join(", ");
    let hint = if counts.contains_key("modified") {
        "`orchestratectl skill install` writes the missing and outdated ones; edited ones are kept unless --force (see `orchestratectl skill list`)"
    } else {
        "`orchestratectl skill install` writes them (the /worktree-* skills for Claude Code)"
    };
    Check::warn(
        id,
        format!(
            "of {} bundled skills in {}: {summary}",
            SKILLS.len(),
            dir.display()
        ),
        hint,
    )
}

pub(super) fn check_service() -> Check {
    let id = "service";
    let manager = match ServiceManager::this_platform() {
        Ok(m) => m,
        Err(e) => {
            return Check::warn(
                id,
                e.message,
                "octld still starts by itself on the first command that needs it",
            )
        }
    };
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
    let dir = match manager.unit_dir(user_home.as_deref(), xdg.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            return Check::warn(
                id,
                e.message,
                "octld still starts by itself on the first command that needs it",
            )
        }
    };
    let (what, files): (&str, Vec<PathBuf>) = match manager {
        ServiceManager::Systemd => (
            "systemd user units",
            vec![dir.join("octld.service"), dir.join("octld.socket")],
        ),
        ServiceManager::Launchd => (
            "launchd agent",
            vec![dir.join(format!("{LAUNCHD_LABEL}.plist"))],
        ),
    };
    let missing: Vec<String> = files
        .iter()
        .filter(|f| !f.exists())
        .map(|f| f.display().to_string())
        .collect();
    if missing.is_empty() {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        return Check::ok(id, format!("{what} installed: {}", names.join(", ")));
    }
    let message = if missing.len() == files.len() {
        format!(
            "no {what} installed ({}): octld is started by the CLI's autostart",
            missing.join(", ")
        )
    } else {
        format!("{what} incomplete: missing {}", missing.join(", "))
    };
    Check::warn(
        id,
        message,
        "`orchestratectl daemon install-service` installs it, so octld starts on demand and at login",
    )
}
