//! `doctor`: is everything orchestratectl needs in place? Each check has an id, a status
//! (`ok`, `warn`, `fail`) and, unless ok, a hint saying how to fix it. Exit 1 when any check
//! fails. It never starts the daemon: with the daemon down, the checks only it can make
//! (`daemon`, `runs`, `orphans`) fail with a hint, and the rest still run.
//!
//! The checks, in order:
//! - `git` ≥ 2.38 and `tmux` ≥ 3.0 on this PATH;
//! - `home-mode`: the home is a directory of ours with mode 0700;
//! - `daemon`: it answers `daemon.status` with this CLI's version and protocol;
//! - `socket-mode`: the socket is a socket of ours with mode 0600;
//! - `agents`: each profile's program (built-ins `claude` and `shell`, and `[agents.*]` of
//!   config.toml), as the daemon finds it on its own PATH (`doctor.agents`); with the daemon
//!   down, the built-ins on this PATH. A missing program is a warning (e.g. no Claude Code on
//!   a machine that only runs shell agents), and a failure only when an unfinished run has a
//!   node on that profile; an unreadable config.toml fails;
//! - `runs`: every run's log replays and its projections are what the log derives
//!   (`doctor.runs`); a corrupt run fails;
//! - `orphans`: worktrees, branches and windows under the daemon's names that no run owns
//!   (`doctor.orphans`), a warning listing them;
//! - `skills`: the bundled skills are installed and current in Claude Code's skills directory;
//! - `service`: a systemd user unit (or launchd agent) is installed; without one the CLI's
//!   autostart starts the daemon, so it is a warning.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::Args;
use octl_proto::rpc::{DaemonStatus, DoctorAgentsResult, DoctorRunsResult, Orphan};
use octl_proto::{AppError, PROTOCOL_VERSION};
use serde::Serialize;
use serde_json::{json, Value};

use super::daemon::{ServiceManager, LAUNCHD_LABEL};
use super::{decode, Ctx};
use crate::client::{find_on_path, CallError};
use crate::skills::{self, Status as SkillStatus, SKILLS};

// `doctor` has no flags of its own (`--json` is global); its help is on `Group::Doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {}

/// The examples of `doctor --help`.
pub const DOCTOR_EXAMPLES: &str = "\
Examples:
  orchestratectl doctor
  orchestratectl --json doctor        # {\"checks\":[{id,status,message,hint}],\"ok\":N,\"warn\":N,\"fail\":N}
  orchestratectl --home /tmp/octl-test doctor";

/// The oldest git with `merge-tree --write-tree`.
const GIT_MIN: (u32, u32) = (2, 38);
const TMUX_MIN: (u32, u32) = (3, 0);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub status: Status,
    pub message: String,
    /// How to fix it (warnings and failures; `null` for a check that is ok).
    pub hint: Option<String>,
    /// The things a check is about, for programs (orphans, unsound runs, agent profiles).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Value>,
}

impl Check {
    fn ok(id: &'static str, message: impl Into<String>) -> Check {
        Check {
            id,
            status: Status::Ok,
            message: message.into(),
            hint: None,
            details: Vec::new(),
        }
    }
    fn warn(id: &'static str, message: impl Into<String>, hint: impl Into<String>) -> Check {
        Check {
            status: Status::Warn,
            hint: Some(hint.into()),
            ..Check::ok(id, message)
        }
    }
    fn fail(id: &'static str, message: impl Into<String>, hint: impl Into<String>) -> Check {
        Check {
            status: Status::Fail,
            hint: Some(hint.into()),
            ..Check::ok(id, message)
        }
    }
    fn with_details(mut self, details: Vec<Value>) -> Check {
        self.details = details;
        self
    }
}

/// The whole report, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
    pub ok: usize,
    pub warn: usize,
    pub fail: usize,
}

impl Report {
    pub fn new(checks: Vec<Check>) -> Report {
        let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
        Report {
            ok: count(Status::Ok),
            warn: count(Status::Warn),
            fail: count(Status::Fail),
            checks,
        }
    }
}

pub async fn execute(ctx: &Ctx, _args: DoctorArgs) -> Result<i32, AppError> {
    let home = ctx.client.home().clone();
    let mut checks = vec![check_git(), check_tmux(), check_home(home.dir())];
    // The daemon, only if it is already there.
    let status = ctx.client.probe_status().await;
    let up = status.is_ok();
    checks.push(check_daemon(status, &home.socket()));
    checks.push(check_socket(&home.socket(), up));
    let not_running = |id: &'static str, what: &str| {
        Check::fail(
            id,
            format!("not checked: {what} is known only to the daemon, which is not running"),
            "start it with `orchestratectl daemon start` (doctor never starts it), then run doctor again",
        )
    };
    if up {
        checks.push(
            match ctx.client.try_call("doctor.agents", json!({})).await {
                Ok(v) => decode::<DoctorAgentsResult>("doctor.agents", &v)
                    .map(|r| agents_check(&r))
                    .unwrap_or_else(|e| rpc_failed("agents", e)),
                Err(e) => rpc_failed("agents", e.into()),
            },
        );
        checks.push(match ctx.client.try_call("doctor.runs", json!({})).await {
            Ok(v) => decode::<DoctorRunsResult>("doctor.runs", &v)
                .map(|r| runs_check(&r))
                .unwrap_or_else(|e| rpc_failed("runs", e)),
            Err(e) => rpc_failed("runs", e.into()),
        });
        checks.push(
            match ctx.client.try_call("doctor.orphans", json!({})).await {
                Ok(v) => decode::<OrphansResult>("doctor.orphans", &v)
                    .map(|r| orphans_check(&r.orphans))
                    .unwrap_or_else(|e| rpc_failed("orphans", e)),
                Err(e) => rpc_failed("orphans", e.into()),
            },
        );
    } else {
        checks.push(agents_check_here(&home.dir().join("config.toml")));
        checks.push(not_running("runs", "whether each run's log replays"));
        checks.push(not_running(
            "orphans",
            "which worktrees, branches and windows runs own",
        ));
    }
    checks.push(check_skills());
    checks.push(check_service());
    let report = Report::new(checks);
    ctx.out.result(&report, || report_text(&report));
    Ok(if report.fail > 0 { 1 } else { 0 })
}

#[derive(serde::Deserialize)]
struct OrphansResult {
    orphans: Vec<Orphan>,
}

fn rpc_failed(id: &'static str, e: AppError) -> Check {
    let hint = super::explain_missing_method(e.clone(), &format!("doctor.{id}"))
        .hint
        .unwrap_or_else(|| "look at the daemon's log (octld.log in the home)".to_string());
    Check::fail(
        id,
        format!("the daemon could not check: {}", e.message),
        hint,
    )
}

/// The human report: `ok   git          git 2.47.3`, hints indented under the rest, a summary.
pub fn report_text(r: &Report) -> String {
    let width = r.checks.iter().map(|c| c.id.len()).max().unwrap_or(0) + 2;
    let mut out = String::new();
    for c in &r.checks {
        let word = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("{word} {:<width$}{}\n", c.id, c.message));
        if c.status != Status::Ok {
            if c.id == "orphans" {
                for d in &c.details {
                    if let Ok(o) = serde_json::from_value::<Orphan>(d.clone()) {
                        out.push_str(&format!("     {}\n", orphan_line(&o)));
                    }
                }
            }
            if let Some(hint) = &c.hint {
                out.push_str(&format!("     hint: {hint}\n"));
            }
        }
    }
    out.push_str(&format!(
        "{} checks: {} ok, {} warn, {} fail",
        r.checks.len(),
        r.ok,
        r.warn,
        r.fail
    ));
    out
}

/// `worktree /h/worktrees/R/n: why`
pub fn orphan_line(o: &Orphan) -> String {
    let what = o
        .path
        .clone()
        .or_else(|| {
            o.refname.as_ref().map(|r| {
                let short = r.strip_prefix("refs/heads/").unwrap_or(r);
                match &o.repo {
                    Some(repo) => format!("{short} in {repo}"),
                    None => short.to_string(),
                }
            })
        })
        .or_else(|| o.target.clone())
        .unwrap_or_default();
    format!("{} {what}: {}", o.kind, o.why)
}

// -------------------------------------------------------------------------------------------
// tools

/// `git version 2.47.3` → (2, 47); `tmux 3.3a` → (3, 3); `tmux next-3.5` → (3, 5).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let word = text.split_whitespace().find(|w| {
        let w = w.trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == '-');
        w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.')
    })?;
    let word = word.trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == '-');
    let mut parts = word.split('.').map(|p| {
        let end = p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len());
        p[..end].parse::<u32>().ok()
    });
    Some((parts.next()??, parts.next()??))
}

fn tool_check(
    id: &'static str,
    program: &str,
    args: &[&str],
    min: (u32, u32),
    install: &str,
) -> Check {
    let Some(path) = find_on_path(program) else {
        return Check::fail(
            id,
            format!("{program} is not installed (no {program} program on PATH)"),
            format!("install {program} {}.{} or newer ({install})", min.0, min.1),
        );
    };
    let out = Command::new(&path)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output();
    let text = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => {
            return Check::fail(
                id,
                format!(
                    "`{} {}` failed: {}",
                    path.display(),
                    args.join(" "),
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                format!("reinstall {program} ({install})"),
            )
        }
        Err(e) => {
            return Check::fail(
                id,
                format!("cannot run {}: {e}", path.display()),
                format!("reinstall {program} ({install})"),
            )
        }
    };
    match parse_version(&text) {
        Some(v) if v >= min => Check::ok(id, text),
        Some(_) => Check::fail(
            id,
            format!("{text} is too old: {}.{} or newer is needed", min.0, min.1),
            format!("upgrade {program} ({install})"),
        ),
        None => Check::warn(
            id,
            format!("cannot read a version in {text:?}"),
            format!(
                "make sure {} is {program} {}.{} or newer",
                path.display(),
                min.0,
                min.1
            ),
        ),
    }
}

fn check_git() -> Check {
    tool_check(
        "git",
        "git",
        &["version"],
        GIT_MIN,
        "merge-tree --write-tree appeared in 2.38; e.g. apt install git, brew install git",
    )
}

fn check_tmux() -> Check {
    tool_check(
        "tmux",
        "tmux",
        &["-V"],
        TMUX_MIN,
        "e.g. apt install tmux, brew install tmux",
    )
}

// -------------------------------------------------------------------------------------------
// permissions

fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn check_home(home: &Path) -> Check {
    let id = "home-mode";
    let meta = match std::fs::metadata(home) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Check::warn(
            id,
            format!("{} does not exist yet", home.display()),
            "the daemon creates it (mode 0700) when it first starts: `orchestratectl daemon start`",
        ),
        Err(e) => {
            return Check::fail(
                id,
                format!("cannot read {}: {e}", home.display()),
                "check the permissions of its parent directories",
            )
        }
    };
    if !meta.is_dir() {
        return Check::fail(
            id,
            format!("{} is not a directory", home.display()),
            "move it away, or choose another home with --home or OCTL_HOME",
        );
    }
    let mode = meta.permissions().mode() & 0o777;
    if meta.uid() != my_uid() {
        return Check::fail(
            id,
            format!(
                "{} belongs to uid {}, not to you (uid {})",
                home.display(),
                meta.uid(),
                my_uid()
            ),
            "use a home of your own (--home or OCTL_HOME)",
        );
    }
    if mode != 0o700 {
        return Check::fail(
            id,
            format!("{} has mode {mode:04o}; want 0700", home.display()),
            format!(
                "chmod 700 {} (the daemon's socket and runs must be private)",
                crate::output::shell_word(&home.display().to_string())
            ),
        );
    }
    Check::ok(id, format!("{} is yours, mode 0700", home.display()))
}

fn check_socket(socket: &Path, up: bool) -> Check {
    let id = "socket-mode";
    let shown = crate::output::shell_word(&socket.display().to_string());
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Check::warn(
                id,
                format!(
                    "no socket at {}: the daemon is not running",
                    socket.display()
                ),
                "start it with `orchestratectl daemon start`, then run doctor again",
            )
        }
        Err(e) => {
            return Check::fail(
                id,
                format!("cannot read {}: {e}", socket.display()),
                "check the permissions of the home",
            )
        }
    };
    if !meta.file_type().is_socket() {
        return Check::fail(
            id,
            format!("{} is not a socket", socket.display()),
            format!(
                "{}remove it (rm {shown}) and start the daemon again",
                if up { "stop the daemon, " } else { "" }
            ),
        );
    }
    if meta.uid() != my_uid() {
        return Check::fail(
            id,
            format!(
                "{} belongs to uid {}, not to you (uid {})",
                socket.display(),
                meta.uid(),
                my_uid()
            ),
            "stop whatever made it and use a home of your own",
        );
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode != 0o600 {
        return Check::fail(
            id,
            format!("{} has mode {mode:04o}; want 0600", socket.display()),
            format!("chmod 600 {shown}, or restart the daemon (it creates its socket 0600)"),
        );
    }
    Check::ok(id, format!("{} is yours, mode 0600", socket.display()))
}

// -------------------------------------------------------------------------------------------
// the daemon

fn check_daemon(status: Result<Value, CallError>, socket: &Path) -> Check {
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
        Err(CallError::Failed(e)) => {
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
    let s: DaemonStatus = match decode("daemon.status", &value) {
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

fn agents_check(r: &DoctorAgentsResult) -> Check {
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
            "fix $OCTL_HOME/config.toml (see the [agents.NAME] example in the README); until then no agent can start",
        )
        .with_details(details);
    }
    let mut parts = Vec::new();
    let mut status = Status::Ok;
    let mut hints = Vec::new();
    for a in &r.agents {
        let default = if a.default { " (default)" } else { "" };
        if let Some(problem) = &a.problem {
            let s = if a.used_by.is_empty() {
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
        match &a.found {
            Some(path) => parts.push(format!("{}{default}: {path}", a.profile)),
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
    match status {
        Status::Ok => Check::ok(id, message),
        Status::Warn => Check::warn(id, message, hint),
        Status::Fail => Check::fail(id, message, hint),
    }
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
fn agents_check_here(config: &Path) -> Check {
    let mut parts = Vec::new();
    let mut status = Status::Ok;
    let mut hints = Vec::new();
    for (profile, program, missing) in [
        ("claude", "claude", Status::Warn),
        ("shell", "sh", Status::Fail),
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
    match status {
        Status::Ok => Check::ok("agents", message),
        Status::Warn => Check::warn("agents", message, hint),
        Status::Fail => Check::fail("agents", message, hint),
    }
}

fn runs_check(r: &DoctorRunsResult) -> Check {
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
    if let Some(x) = bad.iter().find(|x| x.mismatched.is_empty()) {
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

fn orphans_check(orphans: &[Orphan]) -> Check {
    let id = "orphans";
    if orphans.is_empty() {
        return Check::ok(
            id,
            "no worktrees, branches or windows under orchestratectl's names without a run",
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

// -------------------------------------------------------------------------------------------
// skills and the service

fn check_skills() -> Check {
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

fn check_service() -> Check {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("git version 2.47.3"), Some((2, 47)));
        assert_eq!(
            parse_version("git version 2.39.3 (Apple Git-146)"),
            Some((2, 39))
        );
        assert_eq!(parse_version("tmux 3.3a"), Some((3, 3)));
        assert_eq!(parse_version("tmux next-3.5"), Some((3, 5)));
        assert_eq!(parse_version("tmux master"), None);
        assert!((2, 37) < GIT_MIN && (2, 38) >= GIT_MIN && (3, 0) >= TMUX_MIN);
    }

    #[test]
    fn report_lines_hints_and_counts() {
        let r = Report::new(vec![
            Check::ok("git", "git version 2.47.3"),
            Check::fail(
                "socket-mode",
                "/h/octld.sock has mode 0666; want 0600",
                "chmod 600 /h/octld.sock",
            ),
            Check::warn("service", "no unit", "install it"),
        ]);
        assert_eq!((r.ok, r.warn, r.fail), (1, 1, 1));
        assert_eq!(
            report_text(&r),
            "ok   git          git version 2.47.3\n\
             FAIL socket-mode  /h/octld.sock has mode 0666; want 0600\n     hint: chmod 600 /h/octld.sock\n\
             warn service      no unit\n     hint: install it\n\
             3 checks: 1 ok, 1 warn, 1 fail"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["checks"][1]["status"], json!("fail"));
        assert_eq!(v["checks"][0]["hint"], Value::Null);
        assert_eq!(v["fail"], json!(1));
    }

    #[test]
    fn agent_rules() {
        use octl_proto::rpc::DoctorAgent;
        let agent = |profile: &str, found: bool, used: bool| DoctorAgent {
            profile: profile.into(),
            program: profile.into(),
            found: found.then(|| format!("/bin/{profile}")),
            builtin: true,
            default: profile == "claude",
            used_by: if used { vec!["01R".into()] } else { vec![] },
            problem: None,
        };
        let r = DoctorAgentsResult {
            agents: vec![agent("claude", false, false), agent("shell", true, false)],
            config_error: None,
        };
        assert_eq!(
            agents_check(&r).status,
            Status::Warn,
            "no claude, no run needs it"
        );
        let r = DoctorAgentsResult {
            agents: vec![agent("claude", false, true), agent("shell", true, false)],
            config_error: None,
        };
        let c = agents_check(&r);
        assert_eq!(c.status, Status::Fail, "an unfinished run needs it");
        assert!(c.message.contains("01R"), "{}", c.message);
        let r = DoctorAgentsResult {
            agents: vec![agent("shell", true, false)],
            config_error: Some("bad".into()),
        };
        assert_eq!(agents_check(&r).status, Status::Fail);
    }
}
