//! `daemon start|stop|restart|status|install-service`. Only `start` may start the daemon; `status` and
//! `stop` report what they find (stop of a stopped daemon succeeds, so retries are safe).
//! `install-service` renders the bundled systemd units or launchd plist (embedded at build
//! time from `systemd/` and `launchd/`) for this octld and home, and never talks to the daemon.

use crate::commands::result_of;
use octl_proto::method::{self, NoParams};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use octl_proto::rpc::DaemonStatus;
use octl_proto::{AppError, ErrorKind};
use serde_json::{json, Value};

use super::Ctx;
use crate::client::{find_octld, find_on_path, CallError, STOP_DEADLINE};
use crate::output::{duration, fields};

/// The examples of `daemon --help`.
pub const DAEMON_EXAMPLES: &str = "\
Examples:
  orchestratectl daemon status
  orchestratectl daemon start
  orchestratectl daemon stop
  orchestratectl daemon restart                # e.g. after upgrading octld
  orchestratectl daemon install-service        # start it on demand through systemd or launchd";

#[derive(Debug, Subcommand)]
pub enum DaemonCmd {
    /// Start octld for this home if it is not running (detached, in its own session)
    #[command(after_help = "\
Examples:
  orchestratectl daemon start
  orchestratectl --home /tmp/octl-test daemon start
  OCTLD_BIN=./target/debug/octld orchestratectl daemon start   # choose the daemon program")]
    Start,

    /// Stop octld and wait (up to 5 s) until it is gone; succeeds if it was not running
    #[command(after_help = "\
Examples:
  orchestratectl daemon stop
  orchestratectl --json daemon stop")]
    Stop,

    /// Stop octld gracefully, wait until it is gone (up to 5 s), then start it again
    ///
    /// In-flight appends finish first; agents keep running (they live on the daemon's tmux
    /// server) and the new daemon finds their windows. Starts it if it was not running.
    /// Prints what happened (with --json: {was_running, stopped_pid, pid, version}). Exits 1
    /// (kind `timeout`) if the old daemon does not go, 5 if the new one does not answer.
    #[command(after_help = "\
Examples:
  orchestratectl daemon restart
  OCTLD_BIN=./target/debug/octld orchestratectl daemon restart   # after rebuilding octld
  orchestratectl --json daemon restart")]
    Restart,

    /// Show whether octld is running: pid, version, protocol, home, uptime, notifiers and their last failure (exit 5 if not)
    #[command(after_help = "\
Examples:
  orchestratectl daemon status
  orchestratectl --json daemon status")]
    Status,

    /// Install octld as a service started on demand: systemd user units on Linux, a LaunchAgent
    /// on macOS (or print them with --print)
    ///
    /// Renders the bundled units with the absolute path of octld (found as autostart finds it:
    /// $OCTLD_BIN, else next to orchestratectl, else on PATH) and this home. On Linux it writes
    /// octld.socket and octld.service to ${XDG_CONFIG_HOME:-~/.config}/systemd/user/; on macOS
    /// dev.orchestratectl.octld.plist to ~/Library/LaunchAgents/. The service manager then owns
    /// the home's socket (octld.sock) and starts octld on the first connection; autostart stays
    /// the fallback. A file that exists with other content is not overwritten without --force
    /// (exit 4, nothing written). Prints the commands to run next; runs none of them.
    #[command(
        name = "install-service",
        after_help = "\
Examples:
  orchestratectl daemon install-service --print          # see the units, write nothing
  orchestratectl daemon install-service                  # then run the commands it prints:
  systemctl --user daemon-reload && systemctl --user enable --now octld.socket
  orchestratectl --home /tmp/octl-test daemon install-service --force
  orchestratectl --json daemon install-service --print   # {\"files\":[{\"path\",\"text\"}]}"
    )]
    InstallService(InstallServiceArgs),
}

#[derive(Debug, Args)]
pub struct InstallServiceArgs {
    /// Print the files (each after a `# PATH` line; with --json as {"files":[{"path","text"}]})
    /// instead of writing them
    #[arg(long)]
    pub print: bool,

    /// Overwrite unit files that exist with other content (e.g. edited by hand)
    #[arg(long, conflicts_with = "print")]
    pub force: bool,
}

pub async fn execute(ctx: &Ctx, cmd: DaemonCmd) -> Result<(), AppError> {
    match cmd {
        DaemonCmd::Start => start(ctx).await,
        DaemonCmd::Stop => stop(ctx).await,
        DaemonCmd::Restart => restart(ctx).await,
        DaemonCmd::Status => status(ctx).await,
        DaemonCmd::InstallService(args) => install_service(ctx, args),
    }
}

async fn start(ctx: &Ctx) -> Result<(), AppError> {
    let (value, started) = match ctx.client.probe_status().await {
        Ok(v) => (v, false),
        Err(CallError::NotRunning(_)) => {
            ctx.client.start().await?;
            (
                ctx.client
                    .call_value::<method::DaemonStatus>(&NoParams {})
                    .await?,
                true,
            )
        }
        Err(CallError::Failed(e)) => return Err(e),
    };
    let status = result_of::<method::DaemonStatus>(&value)?;
    let socket = ctx.client.home().socket();
    ctx.out.result(&value, || {
        if started {
            format!(
                "Started octld (pid {}, version {}) on {}",
                status.pid,
                status.version,
                socket.display()
            )
        } else {
            format!(
                "octld is already running (pid {}) on {}",
                status.pid,
                socket.display()
            )
        }
    });
    Ok(())
}

/// What stopping found: whether a daemon was running, and its pid when it said.
struct Stopped {
    was_running: bool,
    pid: Option<u64>,
}

async fn stop(ctx: &Ctx) -> Result<(), AppError> {
    let socket = ctx.client.home().socket();
    let Stopped { was_running, pid } = stop_daemon(ctx).await?;
    if !was_running {
        ctx.out.result(
            &json!({"stopped": true, "pid": null, "was_running": false}),
            || {
                format!(
                    "octld is not running (socket {}); nothing to stop",
                    socket.display()
                )
            },
        );
        return Ok(());
    }
    ctx.out.result(
        &json!({"stopped": true, "pid": pid, "was_running": true}),
        || {
            let mut text = match pid {
                Some(pid) => format!("Stopped octld (pid {pid})"),
                None => "Stopped octld".to_string(),
            };
            if socket.exists() {
                text.push_str(&format!(
                    "\n{} stays: a service manager holds it and starts octld again on the next connection ({})",
                    socket.display(),
                    stop_service_hint()
                ));
            }
            text
        },
    );
    Ok(())
}

/// Asks the daemon to shut down (it finishes in-flight appends first) and waits until its
/// process is gone. Succeeds when none was running.
async fn stop_daemon(ctx: &Ctx) -> Result<Stopped, AppError> {
    let socket = ctx.client.home().socket();
    let pid = match ctx.client.probe_status().await {
        Ok(v) => v.get("pid").and_then(Value::as_u64),
        Err(CallError::NotRunning(_)) => {
            return Ok(Stopped {
                was_running: false,
                pid: None,
            })
        }
        // A daemon already on its way out is as good as asked to stop.
        Err(CallError::Failed(e)) if e.kind == ErrorKind::ShuttingDown => None,
        Err(CallError::Failed(e)) => return Err(e),
    };
    match ctx
        .client
        .try_call_method::<method::DaemonShutdown>(&NoParams {})
        .await
    {
        Ok(_) | Err(CallError::NotRunning(_)) => {}
        Err(CallError::Failed(e)) if e.kind == ErrorKind::ShuttingDown => {}
        Err(CallError::Failed(e)) => return Err(e),
    }
    let deadline = Instant::now() + STOP_DEADLINE;
    // With its pid known, wait for the process itself (which also frees its lock for the next
    // start), never connecting: a socket held by systemd or launchd stays after octld exits,
    // and a connection to it would start a new octld.
    let gone = match pid {
        Some(pid) => loop {
            if !process_alive(pid) {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        },
        None => ctx.client.wait_until_gone(deadline).await,
    };
    if !gone {
        let who = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        return Err(AppError::new(
            ErrorKind::Timeout,
            format!(
                "octld{who} still runs on {} {} s after it was asked to stop",
                socket.display(),
                STOP_DEADLINE.as_secs()
            ),
        )
        .with_hint(format!(
            "look at {}; `kill <pid>` stops it too",
            ctx.client.home().log().display()
        )));
    }
    Ok(Stopped {
        was_running: true,
        pid,
    })
}

/// `daemon restart`: stop gracefully, wait until the process is gone, start again. Agents
/// keep running meanwhile (they live on the tmux server, not in the daemon).
async fn restart(ctx: &Ctx) -> Result<(), AppError> {
    let stopped = stop_daemon(ctx).await?;
    // Under a service manager the first connection starts it again; else start it here.
    let value = match ctx.client.probe_status().await {
        Ok(v) => v,
        Err(CallError::NotRunning(_)) => {
            ctx.client.start().await?;
            ctx.client
                .call_value::<method::DaemonStatus>(&NoParams {})
                .await?
        }
        Err(CallError::Failed(e)) => return Err(e),
    };
    let status = result_of::<method::DaemonStatus>(&value)?;
    let socket = ctx.client.home().socket();
    let doc = json!({
        "was_running": stopped.was_running,
        "stopped_pid": stopped.pid,
        "pid": status.pid,
        "version": status.version,
    });
    ctx.out.result(&doc, || {
        let before = match (stopped.was_running, stopped.pid) {
            (false, _) => "octld was not running".to_string(),
            (true, Some(pid)) => format!("Stopped octld (pid {pid})"),
            (true, None) => "Stopped octld".to_string(),
        };
        format!(
            "{before}; started octld (pid {}, version {}) on {}",
            status.pid,
            status.version,
            socket.display()
        )
    });
    Ok(())
}

async fn status(ctx: &Ctx) -> Result<(), AppError> {
    let value = match ctx.client.probe_status().await {
        Ok(v) => v,
        Err(CallError::NotRunning(_)) => {
            return Err(ctx
                .client
                .not_running()
                .with_hint("start it with `orchestratectl daemon start`"))
        }
        Err(CallError::Failed(e)) => return Err(e),
    };
    let status = result_of::<method::DaemonStatus>(&value)?;
    ctx.out.result(&value, || status_text(&status));
    Ok(())
}

/// The human form of `daemon status`.
pub fn status_text(s: &DaemonStatus) -> String {
    format!(
        "octld is running\n{}",
        fields(&[
            ("pid", s.pid.to_string()),
            ("version", s.version.clone()),
            ("protocol", s.protocol.to_string()),
            ("home", s.home.clone()),
            ("uptime", duration(s.uptime_s)),
            ("runs", s.runs.to_string()),
            ("notify", notify_text(&s.notify)),
        ])
    )
}

/// `command sh, webhook http://…; last failure at T (command): …`, or `none configured`.
fn notify_text(n: &octl_proto::rpc::NotifyStatus) -> String {
    let configured: Vec<String> = [("command", &n.command), ("webhook", &n.webhook)]
        .into_iter()
        .filter_map(|(what, v)| v.as_ref().map(|v| format!("{what} {v}")))
        .collect();
    let mut out = if configured.is_empty() {
        "none configured".to_string()
    } else {
        configured.join(", ")
    };
    if let Some(f) = &n.last_failure {
        out.push_str(&format!(
            "; last failure at {} ({}): {}",
            f.at,
            f.notifier,
            f.message.trim()
        ));
        if let Some(at) = &f.delivered_since {
            out.push_str(&format!("; delivered since, at {at}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// install-service

/// The bundled units, embedded at build time; `@OCTLD@` and `@OCTL_HOME@` are filled in.
pub const SYSTEMD_SOCKET: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/octld.socket"));
pub const SYSTEMD_SERVICE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/systemd/octld.service"
));
pub const LAUNCHD_PLIST: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/launchd/dev.orchestratectl.octld.plist"
));
/// The launchd job's label (and the plist's file name without `.plist`).
pub const LAUNCHD_LABEL: &str = "dev.orchestratectl.octld";

/// A unit file to write: where, and its text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ServiceFile {
    pub path: PathBuf,
    pub text: String,
}

/// Which service manager this platform has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceManager {
    Systemd,
    Launchd,
}

impl ServiceManager {
    pub fn this_platform() -> Result<ServiceManager, AppError> {
        if cfg!(target_os = "macos") {
            Ok(ServiceManager::Launchd)
        } else if cfg!(target_os = "linux") {
            Ok(ServiceManager::Systemd)
        } else {
            Err(AppError::new(
                ErrorKind::ToolMissing,
                format!(
                    "no supported service manager on {} (systemd on Linux, launchd on macOS)",
                    std::env::consts::OS
                ),
            )
            .with_hint("octld still starts by itself on the first command that needs it"))
        }
    }

    /// Where the user's units live: `${XDG_CONFIG_HOME:-~/.config}/systemd/user`, or
    /// `~/Library/LaunchAgents`. A relative `XDG_CONFIG_HOME` is ignored, as the spec says.
    pub fn unit_dir(
        self,
        user_home: Option<&Path>,
        xdg_config_home: Option<&Path>,
    ) -> Result<PathBuf, AppError> {
        let home = || {
            user_home
                .filter(|h| h.is_absolute())
                .map(Path::to_path_buf)
                .ok_or_else(|| {
                    AppError::invalid(
                        "cannot find where to install the service: HOME is not set to an absolute path",
                    )
                })
        };
        Ok(match self {
            ServiceManager::Systemd => xdg_config_home
                .filter(|d| d.is_absolute())
                .map(Path::to_path_buf)
                .map_or_else(|| home().map(|h| h.join(".config")), Ok)?
                .join("systemd/user"),
            ServiceManager::Launchd => home()?.join("Library/LaunchAgents"),
        })
    }

    /// The unit files for `octld` serving `home`, to be written into `dir`.
    pub fn render(
        self,
        octld: &Path,
        home: &Path,
        dir: &Path,
    ) -> Result<Vec<ServiceFile>, AppError> {
        let octld = unit_path("the octld program", octld)?;
        let home = unit_path("the home", home)?;
        Ok(match self {
            ServiceManager::Systemd => vec![
                ServiceFile {
                    path: dir.join("octld.socket"),
                    text: SYSTEMD_SOCKET.replace("@OCTL_HOME@", &systemd_value(home)),
                },
                ServiceFile {
                    path: dir.join("octld.service"),
                    text: SYSTEMD_SERVICE
                        .replace("@OCTLD@", &systemd_arg(octld))
                        .replace("@OCTL_HOME@", &systemd_arg(home)),
                },
            ],
            ServiceManager::Launchd => vec![ServiceFile {
                path: dir.join(format!("{LAUNCHD_LABEL}.plist")),
                text: LAUNCHD_PLIST
                    .replace("@OCTLD@", &xml_text(octld))
                    .replace("@OCTL_HOME@", &xml_text(home)),
            }],
        })
    }

    /// What to run once the files are written (`updated`: some existed with other content).
    pub fn next_commands(self, stop: &str, files: &[ServiceFile], updated: bool) -> Vec<String> {
        match self {
            ServiceManager::Systemd => {
                let mut next = vec![
                    stop.to_string(),
                    "systemctl --user daemon-reload && systemctl --user enable --now octld.socket"
                        .to_string(),
                ];
                if updated {
                    next.push("systemctl --user restart octld.socket".to_string());
                }
                next
            }
            ServiceManager::Launchd => {
                let plist = files
                    .first()
                    .map(|f| sh_quote(&f.path.display().to_string()))
                    .unwrap_or_default();
                let mut next = vec![stop.to_string()];
                if updated {
                    next.push(format!("launchctl bootout gui/$(id -u)/{LAUNCHD_LABEL}"));
                }
                next.push(format!("launchctl bootstrap gui/$(id -u) {plist}"));
                next
            }
        }
    }
}

/// A path as unit files need it: absolute, UTF-8, without control characters (a newline would
/// end the line in a unit file).
fn unit_path<'a>(what: &str, path: &'a Path) -> Result<&'a str, AppError> {
    let text = path.to_str().ok_or_else(|| {
        AppError::invalid(format!(
            "{what} {} is not valid UTF-8; a unit file cannot name it",
            path.display()
        ))
    })?;
    if !path.is_absolute() || text.chars().any(char::is_control) {
        return Err(AppError::invalid(format!(
            "{what} {text:?} cannot go into a unit file: use an absolute path without control characters"
        )));
    }
    Ok(text)
}

/// A systemd setting's value: `%` starts a specifier, so it is doubled.
fn systemd_value(s: &str) -> String {
    s.replace('%', "%%")
}

/// One argument of `ExecStart=`: specifiers (`%`) and variables (`$`) doubled, and in double
/// quotes (with `\` and `"` escaped) when it holds anything but plain path characters.
fn systemd_arg(s: &str) -> String {
    let plain = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._+-:@,=%$".contains(c));
    let s = s.replace('%', "%%").replace('$', "$$");
    if plain {
        s
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// Text inside an XML element.
fn xml_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A word for a POSIX shell, quoted only when needed.
fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+-:@,=".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn stop_service_hint() -> &'static str {
    if cfg!(target_os = "macos") {
        "`launchctl bootout gui/$(id -u)/dev.orchestratectl.octld` stops that too"
    } else {
        "`systemctl --user stop octld.socket` stops that too"
    }
}

/// The octld to put into the units, found as autostart finds it, made absolute.
fn octld_for_units() -> Result<PathBuf, AppError> {
    let found = find_octld().map_err(|e| AppError {
        kind: ErrorKind::ToolMissing,
        message: e
            .message
            .replacen("cannot start octld", "cannot install the service", 1),
        ..e
    })?;
    if found.is_absolute() {
        return Ok(found);
    }
    // A bare name from OCTLD_BIN: the unit needs where it is now.
    let name = found.to_string_lossy();
    find_on_path(&name).ok_or_else(|| {
        AppError::new(
            ErrorKind::ToolMissing,
            format!("cannot install the service: OCTLD_BIN is {name:?}, which is not on PATH"),
        )
        .with_hint("set OCTLD_BIN to the absolute path of octld")
    })
}

/// Whether a file to write is new, the same, or different from what is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Installed,
    Updated,
    Unchanged,
}

fn install_service(ctx: &Ctx, args: InstallServiceArgs) -> Result<(), AppError> {
    let manager = ServiceManager::this_platform()?;
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
    let dir = manager.unit_dir(user_home.as_deref(), xdg.as_deref())?;
    let home = ctx.client.home();
    let octld = octld_for_units()?;
    let files = manager.render(&octld, home.dir(), &dir)?;
    if args.print {
        ctx.out.result(&json!({ "files": files }), || {
            files
                .iter()
                .map(|f| format!("# {}\n{}", f.path.display(), f.text))
                .collect::<Vec<_>>()
                .join("\n")
        });
        return Ok(());
    }

    // Decide for every file before writing any: a refusal writes nothing.
    let mut plan = Vec::new();
    let mut kept = Vec::new();
    for f in &files {
        let status = match std::fs::read(&f.path) {
            Ok(old) if old == f.text.as_bytes() => FileStatus::Unchanged,
            Ok(_) if args.force => FileStatus::Updated,
            Ok(_) => {
                kept.push(f.path.display().to_string());
                FileStatus::Updated
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileStatus::Installed,
            Err(e) => {
                return Err(AppError::internal(format!(
                    "cannot read {}: {e}",
                    f.path.display()
                )))
            }
        };
        plan.push((f, status));
    }
    if !kept.is_empty() {
        return Err(AppError::new(
            ErrorKind::Forbidden,
            format!(
                "not overwriting {} (it differs from the unit for this octld and home); nothing written",
                kept.join(", ")
            ),
        )
        .with_hint(
            "compare with `orchestratectl daemon install-service --print`, then use --force to overwrite",
        ));
    }
    // The service manager creates the socket in the home: make it as the daemon would (0700).
    make_private_dir(home.dir())?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| AppError::internal(format!("cannot create {}: {e}", dir.display())))?;
    for (f, status) in &plan {
        if *status != FileStatus::Unchanged {
            write_file(&f.path, &f.text)?;
        }
    }

    let default_home = user_home.as_ref().map(|h| h.join(".orchestratectl"));
    let stop = if default_home.as_deref() == Some(home.dir()) {
        "orchestratectl daemon stop".to_string()
    } else {
        format!(
            "orchestratectl --home {} daemon stop",
            sh_quote(&home.dir().display().to_string())
        )
    };
    let updated = plan.iter().any(|(_, s)| *s == FileStatus::Updated);
    let next = manager.next_commands(&stop, &files, updated);
    let items: Vec<Value> = plan
        .iter()
        .map(|(f, s)| json!({"path": f.path.display().to_string(), "status": s}))
        .collect();
    let doc = json!({
        "files": items,
        "octld": octld.display().to_string(),
        "socket": home.socket().display().to_string(),
        "next": next,
    });
    ctx.out.result(&doc, || {
        let mut text = String::new();
        for (f, s) in &plan {
            let word = match s {
                FileStatus::Installed => "installed",
                FileStatus::Updated => "updated",
                FileStatus::Unchanged => "unchanged",
            };
            text.push_str(&format!("{word:<9}  {}\n", f.path.display()));
        }
        text.push_str(&format!(
            "for {} serving {}\nNext (stop a running octld first: the service takes over its socket):\n",
            octld.display(),
            home.socket().display()
        ));
        for cmd in &next {
            text.push_str(&format!("  {cmd}\n"));
        }
        text
    });
    Ok(())
}

fn make_private_dir(dir: &Path) -> Result<(), AppError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| AppError::internal(format!("cannot create {}: {e}", dir.display())))
}

/// Writes `text` to `path` through a temporary file and a rename: never half a unit.
fn write_file(path: &Path, text: &str) -> Result<(), AppError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fail =
        |e: std::io::Error| AppError::internal(format!("cannot write {}: {e}", path.display()));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .map_err(fail)?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}

/// Is the process alive (a zombie counts as gone)?
fn process_alive(pid: u64) -> bool {
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let exists = unsafe { libc::kill(pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_up() {
        let s = DaemonStatus {
            pid: 42,
            version: "0.1.0".into(),
            protocol: 1,
            home: "/h".into(),
            uptime_s: 65,
            runs: 3,
            notify: Default::default(),
        };
        assert_eq!(
            status_text(&s),
            "octld is running\npid       42\nversion   0.1.0\nprotocol  1\nhome      /h\nuptime    1m 5s\nruns      3\nnotify    none configured\n"
        );
    }

    #[test]
    fn systemd_units_name_the_program_and_the_home_socket() {
        let files = ServiceManager::Systemd
            .render(
                Path::new("/opt/octl/bin/octld"),
                Path::new("/home/u/.orchestratectl"),
                Path::new("/home/u/.config/systemd/user"),
            )
            .unwrap();
        assert_eq!(
            files[0].path,
            Path::new("/home/u/.config/systemd/user/octld.socket")
        );
        assert!(files[0]
            .text
            .contains("\nListenStream=/home/u/.orchestratectl/octld.sock\n"));
        assert!(files[0].text.contains("\nSocketMode=0600\n"));
        assert_eq!(
            files[1].path,
            Path::new("/home/u/.config/systemd/user/octld.service")
        );
        assert!(files[1].text.contains(
            "\nExecStart=/opt/octl/bin/octld --foreground --home /home/u/.orchestratectl\n"
        ));
        assert!(files[1].text.contains("\nType=notify\n"));
        for f in &files {
            assert!(
                !f.text.contains('@'),
                "every placeholder filled: {}",
                f.text
            );
        }
    }

    #[test]
    fn odd_paths_are_escaped_for_systemd_and_xml() {
        assert_eq!(systemd_arg("/a/b-c_d.e"), "/a/b-c_d.e");
        assert_eq!(systemd_arg("/a b/100%"), "\"/a b/100%%\"");
        assert_eq!(systemd_arg("/x/$HOME\\\""), "\"/x/$$HOME\\\\\\\"\"");
        assert_eq!(systemd_value("/h/50%/x"), "/h/50%%/x");
        assert_eq!(xml_text("/a&b/<c>"), "/a&amp;b/&lt;c&gt;");
        assert_eq!(sh_quote("/plain/path"), "/plain/path");
        assert_eq!(sh_quote("/it's here"), "'/it'\\''s here'");
        let err = ServiceManager::Systemd
            .render(
                Path::new("/bin/octld"),
                Path::new("/h/a\nb"),
                Path::new("/d"),
            )
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(ServiceManager::Systemd
            .render(Path::new("octld"), Path::new("/h"), Path::new("/d"))
            .is_err());
    }

    #[test]
    fn the_launch_agent_has_the_socket_and_the_program() {
        let files = ServiceManager::Launchd
            .render(
                Path::new("/usr/local/bin/octld"),
                Path::new("/Users/u/my & home"),
                Path::new("/Users/u/Library/LaunchAgents"),
            )
            .unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(
            files[0].path,
            Path::new("/Users/u/Library/LaunchAgents/dev.orchestratectl.octld.plist")
        );
        let text = &files[0].text;
        assert!(
            text.contains("<string>/usr/local/bin/octld</string>"),
            "{text}"
        );
        assert!(
            text.contains("<string>/Users/u/my &amp; home/octld.sock</string>"),
            "{text}"
        );
        assert!(
            text.contains("<key>SockPathMode</key>\n      <integer>384</integer>"),
            "{text}"
        );
        assert!(!text.contains('@'), "{text}");
    }

    #[test]
    fn unit_directories() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            ServiceManager::Systemd.unit_dir(home, None).unwrap(),
            Path::new("/home/u/.config/systemd/user")
        );
        assert_eq!(
            ServiceManager::Systemd
                .unit_dir(home, Some(Path::new("/xdg")))
                .unwrap(),
            Path::new("/xdg/systemd/user")
        );
        assert_eq!(
            ServiceManager::Systemd
                .unit_dir(home, Some(Path::new("relative")))
                .unwrap(),
            Path::new("/home/u/.config/systemd/user")
        );
        assert_eq!(
            ServiceManager::Launchd.unit_dir(home, None).unwrap(),
            Path::new("/home/u/Library/LaunchAgents")
        );
        assert!(ServiceManager::Launchd.unit_dir(None, None).is_err());
    }

    #[test]
    fn liveness() {
        assert!(process_alive(std::process::id() as u64));
        assert!(!process_alive(u32::MAX as u64));
    }
}
