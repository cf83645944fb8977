//! `daemon install-service`: the bundled systemd units and launchd plist (embedded at build
//! time), rendered for this octld and home, and written without overwriting edited files. Its
//! own module because it shares nothing with the other `daemon` commands but the group: it
//! never talks to the daemon.

use std::path::{Path, PathBuf};

use clap::Args;
use octl_proto::{AppError, ErrorKind};
use serde_json::{json, Value};

use crate::client::{find_octld, find_on_path};
use crate::commands::Ctx;

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

pub(super) fn install_service(ctx: &Ctx, args: InstallServiceArgs) -> Result<(), AppError> {
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

#[cfg(test)]
mod tests;
