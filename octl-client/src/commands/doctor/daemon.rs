//! The checks of what the daemon answers: `daemon.status` (is it this CLI's version and
//! protocol; its notifiers' last failure), `doctor.agents` (or, with the daemon down, the built-in agents on this PATH),
//! `doctor.runners`, `doctor.sandbox`, `doctor.runs` and `doctor.orphans`.

use std::path::Path;

use octl_proto::rpc::{
    DaemonStatusResult, DoctorAgentsResult, DoctorRunnersResult, DoctorRunsResult,
    DoctorSandboxResult, NotifyStatus, Orphan,
};
use octl_proto::PROTOCOL_VERSION;
use serde_json::Value;

use super::{orphan_line, Check, Status};
use crate::client::{find_on_path, CallError};
use crate::commands::decode;

// -------------------------------------------------------------------------------------------
// the daemon

pub(super) fn check_daemon(status: Result<Value, CallError>, socket: &Path) -> Check {
    let id = "daemon";
    let value = match status {
        Ok(v) => v,
        Err(CallError::NotRunning(_)) => {
            return Check::fail(
                id,
                format!("octld is not running (nothing answers on {})", socket.display()),
                "start it with `orchestratectl daemon start` (any command that needs it also starts it; doctor never does)",
            )
        }
        Err(CallError::Failed(e) | CallError::Dropped(e)) => {
            return Check::fail(
                id,
                format!("octld does not answer properly: {}", e.message),
                e.hint.unwrap_or_else(|| {
                    "restart it: `orchestratectl daemon restart`"
                        .to_string()
                }),
            )
        }
    };
    let s: DaemonStatusResult = match decode("daemon.status", &value) {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                id,
                e.message,
                "restart it with this version: `orchestratectl daemon restart`",
            )
        }
    };
    let mine = env!("CARGO_PKG_VERSION");
    if s.version != mine || s.protocol != PROTOCOL_VERSION {
        return Check::fail(
            id,
            format!(
                "octld {} (protocol {}, pid {}) is running, but this orchestratectl is {mine} (protocol {PROTOCOL_VERSION})",
                s.version, s.protocol, s.pid
            ),
            "restart it with the matching version: `orchestratectl daemon restart`",
        );
    }
    Check::ok(
        id,
        format!(
            "octld {} (protocol {}) is running, pid {}, up {}",
            s.version,
            s.protocol,
            s.pid,
            crate::output::duration(s.uptime_s)
        ),
    )
}

/// The notifiers of `[notify]` (as `daemon.status` reports them) and their last failure since
/// the daemon started: a warning while the notifier that failed has not delivered since.
pub(super) fn notify_check(n: &NotifyStatus) -> Check {
    let id = "notify";
    let mut configured = Vec::new();
    if let Some(program) = &n.command {
        configured.push(format!("command {program}"));
    }
    if let Some(url) = &n.webhook {
        configured.push(format!("webhook {url}"));
    }
    let details = n
        .last_failure
        .iter()
        .map(|f| serde_json::to_value(f).unwrap_or(Value::Null))
        .collect();
    if configured.is_empty() && n.last_failure.is_none() {
        return Check::ok(
            id,
            "no notifier configured (nobody is told when a node needs a person; see [notify] in docs/CONFIGURATION.md)",
        );
    }
    let what = if configured.is_empty() {
        "no notifier configured now".to_string()
    } else {
        configured.join(", ")
    };
    let Some(f) = &n.last_failure else {
        return Check::ok(id, format!("{what}: no failure since the daemon started"));
    };
    let failure = format!(
        "the {} failed at {} telling {} of run {}: {}",
        f.notifier,
        f.at,
        f.kind,
        f.run,
        f.message.trim()
    );
    match &f.delivered_since {
        Some(at) => Check::ok(
            id,
            format!("{what}; last failure: {failure}; it has delivered since, at {at}"),
        ),
        None => Check::warn(
            id,
            format!("{what}; {failure}"),
            "fix [notify] in $OCTL_HOME/config.toml (it is read again at each notice) and run the notifier by hand with a notice on stdin; every failure is in octld.log",
        ),
    }
    .with_details(details)
}

pub(super) fn agents_check(r: &DoctorAgentsResult) -> Check {
    let id = "agents";
    let details: Vec<Value> = r
        .agents
        .iter()
        .map(|a| serde_json::to_value(a).unwrap_or(Value::Null))
        .collect();
    if let Some(e) = &r.config_error {
        return Check::fail(
            id,
            format!("config.toml cannot be used: {e}"),
            "fix $OCTL_HOME/config.toml (see the [agents.NAME] example in docs/CONFIGURATION.md); until then no agent can start",
        )
        .with_details(details);
    }
    let mut parts = Vec::new();
    let mut status = Status::Ok;
    let mut hints = Vec::new();
    for a in &r.agents {
        let default = if a.default { " (default)" } else { "" };
        if let Some(problem) = &a.problem {
            let s = if a.optional {
                Status::Ok
            } else if a.used_by.is_empty() {
                Status::Warn
            } else {
                Status::Fail
            };
            status = status.max(s);
            parts.push(format!("{}{default}: {problem}", a.profile));
            hints.push(format!(
                "fix [agents.{}] in $OCTL_HOME/config.toml",
                a.profile
            ));
            continue;
        }
        let version = a
            .version
            .as_deref()
            .map(|v| format!(" ({v})"))
            .unwrap_or_default();
        match &a.found {
            Some(path) => parts.push(format!("{}{default}: {path}{version}", a.profile)),
            // An agent CLI nobody chose: its absence is information, not a warning.
            None if a.optional => parts.push(format!("{}: {} not installed", a.profile, a.program)),
            None => {
                let s = if a.used_by.is_empty() {
                    Status::Warn
                } else {
                    Status::Fail
                };
                status = status.max(s);
                let users = if a.used_by.is_empty() {
                    String::new()
                } else {
                    format!(", needed by unfinished run {}", a.used_by.join(", "))
                };
                parts.push(format!(
                    "{}{default}: {} not found on the daemon's PATH{users}",
                    a.profile, a.program
                ));
                hints.push(install_hint(&a.profile, &a.program));
            }
        }
    }
    let message = parts.join("; ");
    let hint = hints.join("; ");
    Check::of(status, id, message, hint).with_details(details)
}

/// Each runner and whether it answered. One that does not is a warning, and a failure when an
/// unfinished run has a node on it.
pub(super) fn runners_check(r: &DoctorRunnersResult) -> Check {
    let id = "runners";
    let details: Vec<Value> = r
        .runners
        .iter()
        .map(|a| serde_json::to_value(a).unwrap_or(Value::Null))
        .collect();
    if let Some(e) = &r.config_error {
        return Check::fail(
            id,
            format!("config.toml cannot be used: {e}"),
            "fix $OCTL_HOME/config.toml (see [runners.NAME] in docs/RUNNERS.md)",
        )
        .with_details(details);
    }
    let mut parts = Vec::new();
    let mut status = Status::Ok;
    let mut hints = Vec::new();
    for a in &r.runners {
        let default = if a.default { ", default" } else { "" };
        parts.push(format!("{} ({}{default}): {}", a.name, a.kind, a.message));
        if a.ok {
            continue;
        }
        status = status.max(if a.used_by.is_empty() {
            Status::Warn
        } else {
            Status::Fail
        });
        if !a.used_by.is_empty() {
            hints.push(format!(
                "runner {} is needed by unfinished run {}",
                a.name,
                a.used_by.join(", ")
            ));
        }
        hints.push(match a.kind.as_str() {
            "ssh" => format!("check that `ssh -o BatchMode=yes HOST true` works from the daemon's machine for each host of [runners.{}]", a.name),
            "slurm" => format!("check that `sinfo` answers on the daemon's machine and [runners.{}] names a partition it has", a.name),
            _ => "install tmux ≥ 3.0 on the daemon's PATH".to_string(),
        });
    }
    let message = parts.join("; ");
    let hint = hints.join("; ");
    Check::of(status, id, message, hint).with_details(details)
}

/// Whether bubblewrap runs a sandbox on the daemon's machine. Missing or refusing, it is a
/// failure when something asks for it (config.toml, a profile, an unfinished run); otherwise
/// a missing bwrap is skipped (agents run as the user) and a refusing one is a warning.
pub(super) fn sandbox_check(r: &DoctorSandboxResult) -> Check {
    let id = "sandbox";
    let details = vec![serde_json::to_value(r).unwrap_or(Value::Null)];
    let wanted = if r.wanted_by.is_empty() {
        String::new()
    } else {
        format!("; wanted by {}", r.wanted_by.join(", "))
    };
    let Some(bwrap) = &r.bwrap else {
        if r.wanted_by.is_empty() {
            return Check::skip(
                id,
                format!("no sandbox: {}; agents run as the user (--sandbox none)", r.message),
                "to run agents in a sandbox, install bubblewrap (Debian: apt-get install bubblewrap) and set [sandbox] kind = \"bwrap\" in $OCTL_HOME/config.toml (docs/SECURITY.md)",
            )
            .with_details(details);
        }
        return Check::fail(
            id,
            format!("{}{wanted}: those agents cannot start", r.message),
            "install bubblewrap on the daemon's PATH (Debian: apt-get install bubblewrap), or set [sandbox] kind = \"none\" in $OCTL_HOME/config.toml",
        )
        .with_details(details);
    };
    let version = r
        .version
        .as_deref()
        .map(|v| format!(" ({v})"))
        .unwrap_or_default();
    if r.ok {
        let used = if r.wanted_by.is_empty() {
            "; no agent asks for it ([sandbox] kind = \"bwrap\" or --sandbox bwrap does)"
                .to_string()
        } else {
            wanted
        };
        return Check::ok(id, format!("{bwrap}{version} {}{used}", r.message))
            .with_details(details);
    }
    let status = if r.wanted_by.is_empty() {
        Status::Warn
    } else {
        Status::Fail
    };
    Check::of(
        status,
        id,
        format!("{bwrap}{version} cannot make a sandbox: {}{wanted}", r.message),
        "bubblewrap needs unprivileged user namespaces: see that `sysctl kernel.unprivileged_userns_clone` (Debian) is 1, `user.max_user_namespaces` is not 0 and `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu) is 0 or bwrap has an AppArmor profile; or give --sandbox none (docs/SECURITY.md)",
    )
    .with_details(details)
}

fn install_hint(profile: &str, program: &str) -> String {
    match profile {
        "claude" => format!(
            "install Claude Code so that `{program}` is on the daemon's PATH (npm install -g @anthropic-ai/claude-code), or use --agent shell / another profile"
        ),
        "shell" => "install a POSIX sh".to_string(),
        _ => format!(
            "install {program}, or point [agents.{profile}] in $OCTL_HOME/config.toml at it"
        ),
    }
}

/// With the daemon down: the built-in profiles' programs on this PATH.
pub(super) fn agents_check_here(config: &Path) -> Check {
    let mut parts = Vec::new();
    let mut status = Status::Ok;
    let mut hints = Vec::new();
    for (profile, program, missing) in [
        ("claude", "claude", Status::Warn),
        ("shell", "sh", Status::Fail),
        ("codex", "codex", Status::Ok),
        ("gemini", "gemini", Status::Ok),
        ("opencode", "opencode", Status::Ok),
        ("aider", "aider", Status::Ok),
    ] {
        match find_on_path(program) {
            Some(p) => parts.push(format!("{profile}: {}", p.display())),
            None => {
                status = status.max(missing);
                parts.push(format!("{profile}: {program} not found on PATH"));
                hints.push(install_hint(profile, program));
            }
        }
    }
    if config.exists() {
        parts.push(format!(
            "the profiles of {} are checked when the daemon runs",
            config.display()
        ));
    }
    let message = parts.join("; ");
    let hint = hints.join("; ");
    Check::of(status, "agents", message, hint)
}

pub(super) fn runs_check(r: &DoctorRunsResult) -> Check {
    let id = "runs";
    let bad: Vec<_> = r.runs.iter().filter(|x| !x.ok).collect();
    if bad.is_empty() {
        return Check::ok(
            id,
            format!(
                "{} run{}: every log replays and its projections match",
                r.runs.len(),
                if r.runs.len() == 1 { "" } else { "s" }
            ),
        );
    }
    let message = format!(
        "{} of {} runs are not sound: {}",
        bad.len(),
        r.runs.len(),
        bad.iter()
            .map(|x| format!(
                "run {}: {}",
                x.run,
                x.problem.as_deref().unwrap_or("unsound")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let mut hints = Vec::new();
    let refusing = |x: &&&octl_proto::rpc::DoctorRun| {
        x.problem
            .as_deref()
            .is_some_and(|p| p.starts_with("refuses appends"))
    };
    if bad.iter().any(|x| refusing(&x)) {
        hints.push(
            "a run whose log failed to sync refuses appends until the daemon restarts and replays it: check the disk (dmesg), then `orchestratectl daemon stop` and `orchestratectl daemon start`".to_string(),
        );
    }
    if let Some(x) = bad.iter().find(|x| x.mismatched.is_empty() && !refusing(x)) {
        hints.push(format!(
            "a corrupt run is read-only and every other run keeps working; its log is kept as runs/{0}/events.jsonl.corrupt (the lines before the bad one are intact): see what it still says with `orchestratectl run show {0}`, then set it aside with `orchestratectl run quarantine {0}` (moved to corrupt/{0}, nothing deleted)",
            x.run
        ));
    }
    if let Some(x) = bad.iter().find(|x| !x.mismatched.is_empty()) {
        hints.push(format!(
            "rewrite its projections from its log: orchestratectl run rebuild {}",
            x.run
        ));
    }
    let details = bad
        .iter()
        .map(|x| serde_json::to_value(x).unwrap_or(Value::Null))
        .collect();
    Check::fail(id, message, hints.join("; ")).with_details(details)
}

pub(super) fn orphans_check(orphans: &[Orphan]) -> Check {
    let id = "orphans";
    if orphans.is_empty() {
        return Check::ok(
            id,
            "no worktrees, branches, windows or agents' processes under orchestratectl's names without a run",
        );
    }
    let message = format!(
        "{} orphan{} (under orchestratectl's names, owned by no run): {}",
        orphans.len(),
        if orphans.len() == 1 { "" } else { "s" },
        orphans
            .iter()
            .map(|o| {
                let line = orphan_line(o);
                line.split_once(": ")
                    .map(|(w, _)| w.to_string())
                    .unwrap_or(line)
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let details = orphans
        .iter()
        .map(|o| serde_json::to_value(o).unwrap_or(Value::Null))
        .collect();
    Check::warn(
        id,
        message,
        "see what would go with `orchestratectl run gc --dry-run`; `orchestratectl run gc` removes them after saving their content under refs/octl/snapshots/",
    )
    .with_details(details)
}
