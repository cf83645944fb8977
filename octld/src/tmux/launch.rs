//! The `sh` text a new pane runs: enter the directory, export the environment, run the
//! program, report its status; inline, or from a private script file when too long.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::invalid;
use super::quote::{sh_join, sh_quote};
use super::Result;

/// tmux refuses a command line above about 16 KiB ("command too long"); longer launches go
/// through a script file.
pub(super) const INLINE_LIMIT: usize = 12 * 1024;

/// The `sh` text that enters `cwd`, exports `env`, runs `argv` and exits with its status.
pub(super) fn launch_script(
    cwd: &str,
    env: &[(String, String)],
    argv: &[String],
) -> Result<String> {
    let Some(program) = argv.first() else {
        return Err(invalid("argv", "", "give at least the program to run"));
    };
    if program.is_empty() || program.starts_with('-') {
        return Err(invalid(
            "program",
            program,
            "name a program (not empty, not starting with '-')",
        ));
    }
    if let Some(bad) = argv.iter().find(|a| a.contains('\0')) {
        return Err(invalid("argument", bad, "no NUL bytes"));
    }
    // Without this tmux would silently start the program in $HOME.
    let mut script = format!("cd -- {} || exit 126\n", sh_quote(cwd));
    for (name, value) in env {
        let valid_name = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_name {
            return Err(invalid(
                "environment variable name",
                name,
                "use [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        if value.contains('\0') {
            return Err(invalid("environment value", value, "no NUL bytes"));
        }
        script.push_str(&format!("export {name}={}\n", sh_quote(value)));
    }
    // A no-op trap (not an ignored signal, which the program would inherit) keeps the shell
    // alive through a Ctrl-C meant for the program, so the status still gets reported.
    script.push_str("trap : INT QUIT\n");
    script.push_str(&sh_join(argv));
    script.push_str("\noctl_status=$?\nsleep 0.1\nexit \"$octl_status\"\n");
    Ok(script)
}

/// `logs/<NODE>.log` → `logs/<NODE>.launch.sh`.
pub(super) fn launch_script_path(log: &Path) -> PathBuf {
    let stem = log
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "window".into());
    log.with_file_name(format!("{stem}.launch.sh"))
}

/// Writes a launch script (it may hold a prompt) readable only by us; it deletes itself
/// when the shell starts reading it.
pub(super) fn write_private(path: &Path, script: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let path_str = path.to_string_lossy();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    writeln!(file, "rm -f -- {}", sh_quote(&path_str))?;
    file.write_all(script.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}
