//! `doctor`: is everything orchestratectl needs in place? Each check has an id, a status
//! (`ok`, `skip`, `warn`, `fail`) and, unless ok, a hint saying how to fix it. Exit 1 when any
//! check fails. It never starts the daemon: with the daemon down, the checks only it can make
//! (`daemon`, `runners`, `sandbox`, `runs`, `orphans`, `notify`) fail with a hint — or, when
//! it was never started or was stopped on purpose (no socket, or `octld.stopped`), are
//! skipped, since a fresh home has nothing wrong with it — and the rest still run.
//!
//! The checks, in order:
//! - `git` ≥ 2.38 and `tmux` ≥ 3.0 on this PATH;
//! - `home-mode`: the home is a directory of ours with mode 0700;
//! - `disk`: the home's filesystem has room: a warning under 5 % or 100 MiB free, a failure
//!   when full (appends are then refused with `storage_full`);
//! - `daemon`: it answers `daemon.status` with this CLI's version and protocol;
//! - `socket-mode`: the socket is a socket of ours with mode 0600;
//! - `agents`: each profile's program (built-ins `claude`, `shell`, `codex`, `gemini`,
//!   `opencode`, `aider` — with the version the agent CLIs print — and `[agents.*]` of
//!   config.toml), as the daemon finds it on its own PATH (`doctor.agents`); with the daemon
//!   down, the built-ins on this PATH. A missing program is a warning (e.g. no Claude Code on
//!   a machine that only runs shell agents; none for the other agent CLIs unless chosen), and
//!   a failure only when an unfinished run has a node on that profile; an unreadable
//!   config.toml fails;
//! - `runners`: `local` and each `[runners.*]` of config.toml answers (`doctor.runners`): the
//!   tmux server, every SSH host (`ssh -o BatchMode=yes HOST true`), Slurm's `sinfo` with the
//!   partition; one that does not is a warning, a failure when an unfinished run needs it;
//! - `sandbox`: bubblewrap on the daemon's PATH runs a minimal sandbox (`bwrap
//!   --unshare-all`, the system read-only, `-- true`, within 10 s; `doctor.sandbox`); missing
//!   or refusing (a kernel without unprivileged user namespaces: bwrap's own words), it is a
//!   failure when config.toml's `[sandbox] kind`, a profile's `sandbox` or an unfinished run
//!   asks for bwrap, else skipped (missing: agents run as the user) or a warning (refusing);
//! - `runs`: every run's log replays and its projections are what the log derives
//!   (`doctor.runs`); a corrupt run fails;
//! - `orphans`: worktrees, branches, windows and agents' processes under the daemon's names
//!   that no run owns (`doctor.orphans`), a warning listing them;
//! - `notify`: the notifiers of `[notify]` and their last failure since the daemon started
//!   (`daemon.status`'s `notify`), a warning while the notifier that failed has not delivered
//!   since;
//! - `skills`: the bundled skills are installed and current in Claude Code's skills directory;
//! - `service`: a systemd user unit (or launchd agent) is installed; without one the CLI's
//!   autostart starts the daemon, so it is a warning.
//!
//! This file has the command, the check type and the report; the checks are in `system`
//! (git, tmux, the home's and the socket's modes, disk), `daemon` (what the daemon answers:
//! its status, agents, runs, orphans) and `install` (skills, service units).

mod daemon;
mod install;
mod system;
#[cfg(test)]
mod tests;

use clap::Args;
use octl_proto::rpc::Orphan;
use octl_proto::AppError;
use serde::Serialize;
use serde_json::Value;

use super::Ctx;
use crate::client::result_of;
use octl_proto::method::{
    DaemonStatus, DoctorAgents, DoctorOrphans, DoctorRunners, DoctorRuns, DoctorSandbox, NoParams,
};

use daemon::{
    agents_check, agents_check_here, check_daemon, notify_check, orphans_check, runners_check,
    runs_check, sandbox_check,
};
use install::{check_service, check_skills};
use system::{check_disk, check_git, check_home, check_pool, check_socket, check_tmux};

pub use system::parse_version;

// `doctor` has no flags of its own (`--json` is global); its help is on `Group::Doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {}

/// The examples of `doctor --help`.
pub const DOCTOR_EXAMPLES: &str = "\
Examples:
  orchestratectl doctor
  orchestratectl --json doctor        # {\"checks\":[{id,status,message,hint}],\"ok\":N,\"skip\":N,\"warn\":N,\"fail\":N}
  orchestratectl --home /tmp/octl-test doctor";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Cannot be checked yet (the daemon was not started): nothing wrong.
    Skip,
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
    pub(super) fn skip(
        id: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Check {
        Check {
            status: Status::Skip,
            hint: Some(hint.into()),
            ..Check::ok(id, message)
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
    /// A check of `status` (the hint dropped when it is ok).
    fn of(
        status: Status,
        id: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Check {
        let hint = (status != Status::Ok).then(|| hint.into());
        Check {
            status,
            hint,
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
    pub skip: usize,
    pub warn: usize,
    pub fail: usize,
}

impl Report {
    pub fn new(checks: Vec<Check>) -> Report {
        let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
        Report {
            ok: count(Status::Ok),
            skip: count(Status::Skip),
            warn: count(Status::Warn),
            fail: count(Status::Fail),
            checks,
        }
    }
}

pub async fn execute(ctx: &Ctx, _args: DoctorArgs) -> Result<i32, AppError> {
    let home = ctx.client.home().clone();
    let mut checks = vec![
        check_git(),
        check_tmux(),
        check_home(home.dir()),
        check_disk(home.dir()),
        check_pool(home.dir()),
    ];
    // The daemon, only if it is already there.
    let status = ctx.client.probe_status().await;
    let up = status.is_ok();
    let notify = status
        .as_ref()
        .ok()
        .and_then(|v| result_of::<DaemonStatus>(v).ok())
        .map(|s| notify_check(&s.notify));
    // Never started here, or stopped on purpose: what only the daemon knows is not wrong,
    // just not known yet. A socket left without a daemon (a crash) is a failure.
    let not_started = !up && (!home.socket().exists() || home.stopped().exists());
    let why_down = if home.stopped().exists() {
        "stopped with `daemon stop`"
    } else {
        "not started"
    };
    checks.push(if not_started {
        Check::skip(
            "daemon",
            format!("octld is not running ({why_down})"),
            "any command that needs it starts it (`orchestratectl daemon start` does so now); doctor never does",
        )
    } else {
        check_daemon(status, &home.socket())
    });
    checks.push(check_socket(&home.socket(), up));
    let not_running = |id: &'static str, what: &str| {
        if not_started {
            return Check::skip(
                id,
                format!("skipped (daemon {why_down}): {what} is known only to the daemon"),
                "run doctor again once the daemon runs",
            );
        }
        Check::fail(
            id,
            format!("not checked: {what} is known only to the daemon, which is not running"),
            "start it with `orchestratectl daemon start` (doctor never starts it), then run doctor again",
        )
    };
    if up {
        checks.push(
            match ctx
                .client
                .try_call_method::<DoctorAgents>(&NoParams {})
                .await
            {
                Ok(r) => agents_check(&r),
                Err(e) => rpc_failed("agents", e.into()),
            },
        );
        checks.push(
            match ctx
                .client
                .try_call_method::<DoctorRunners>(&NoParams {})
                .await
            {
                Ok(r) => runners_check(&r),
                Err(e) => rpc_failed("runners", e.into()),
            },
        );
        checks.push(
            match ctx
                .client
                .try_call_method::<DoctorSandbox>(&NoParams {})
                .await
            {
                Ok(r) => sandbox_check(&r),
                Err(e) => rpc_failed("sandbox", e.into()),
            },
        );
        checks.push(
            match ctx.client.try_call_method::<DoctorRuns>(&NoParams {}).await {
                Ok(r) => runs_check(&r),
                Err(e) => rpc_failed("runs", e.into()),
            },
        );
        checks.push(
            match ctx
                .client
                .try_call_method::<DoctorOrphans>(&NoParams {})
                .await
            {
                Ok(r) => orphans_check(&r.orphans),
                Err(e) => rpc_failed("orphans", e.into()),
            },
        );
        checks.extend(notify);
    } else {
        checks.push(agents_check_here(&home.dir().join("config.toml")));
        checks.push(not_running(
            "runners",
            "whether each runner answers (it asks them)",
        ));
        checks.push(not_running(
            "sandbox",
            "whether bubblewrap runs on the daemon's PATH",
        ));
        checks.push(not_running("runs", "whether each run's log replays"));
        checks.push(not_running(
            "orphans",
            "which worktrees, branches and windows runs own",
        ));
        checks.push(not_running("notify", "how telling the notifiers went"));
    }
    checks.push(check_skills());
    checks.push(check_service());
    let report = Report::new(checks);
    ctx.out.result(&report, || report_text(&report));
    Ok(if report.fail > 0 { 1 } else { 0 })
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
            Status::Skip => "skip",
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
        "{} checks: {} ok, {}{} warn, {} fail",
        r.checks.len(),
        r.ok,
        if r.skip > 0 {
            format!("{} skipped, ", r.skip)
        } else {
            String::new()
        },
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
