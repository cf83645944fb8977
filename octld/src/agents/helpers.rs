//! The helper commands an agent CLI expects on its PATH, made by the daemon under
//! `$OCTL_HOME/helpers/` when the CLI cannot make them itself.
//!
//! Codex 0.169 runs each shell command of its Linux sandbox through bubblewrap: `bwrap …
//! --argv0 codex-linux-sandbox -- <codex> …` with a bwrap that has `--argv0` (its bundled one,
//! 0.9 and later), else `bwrap … -- codex-linux-sandbox …`, found on PATH (a system bwrap
//! before 0.9, such as Debian 12's 0.8.0, which Codex prefers to its bundled one). Codex makes
//! that name itself at start — `$CODEX_HOME/tmp/arg0-linux/codex-arg0XXXX/`, links
//! `codex-linux-sandbox`, `apply_patch` and `applypatch` to its own binary, which dispatches on
//! argv[0] — except when `$CODEX_HOME` is under the temporary directory (`Refusing to create
//! helper binaries under temporary dir`); then every command fails with `bwrap: execvp
//! codex-linux-sandbox: No such file or directory`. So for a local Codex agent the daemon
//! makes the same links, to the same binary, in a directory of its own and puts it on the
//! agent's PATH: after Codex's own (which it puts first), so Codex's win where it made them.

use std::path::{Path, PathBuf};

use octl_proto::projection::RunDetail;

use super::{Builtin, ProfileKind};

/// The names Codex's own binary answers to by argv[0], as Codex links them.
const CODEX_ALIASES: [&str; 3] = ["codex-linux-sandbox", "apply_patch", "applypatch"];

/// `path` (an agent's PATH) with the directory of its CLI's helpers first, for `node` of
/// `view` whose profile needs them (a local Codex, on Linux); unchanged otherwise, and when
/// they cannot be made (logged: the agent is started as it would be without them). Called
/// where the daemon makes an agent's environment (`engine::spawn`'s `agent_env`).
pub fn prepend(path: &mut String, daemon: &crate::daemon::Daemon, view: &RunDetail, node: &str) {
    let Some(node) = view.nodes.iter().find(|n| n.id == node) else {
        return;
    };
    // A remote runner's agent does not see this machine's home.
    if node.runner.as_deref().is_some_and(|r| r != "local") {
        return;
    }
    let config = daemon.config.get_or_default();
    let Ok(profile) = super::resolve(&config, node.agent.as_deref()) else {
        return;
    };
    let ProfileKind::Builtin {
        agent: Builtin::Codex,
        program,
        ..
    } = &profile.kind
    else {
        return;
    };
    let daemon_path = std::env::var_os("PATH");
    match codex_helpers(daemon.home.root(), program, daemon_path.as_deref()) {
        Ok(Some(dir)) => {
            let rest = std::mem::take(path);
            *path = format!("{}:{rest}", dir.display());
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(%program, error = %e, "could not make Codex's helper links; its sandboxed commands may fail under a system bwrap without --argv0")
        }
    }
}

/// The directory of links to Codex's binary under its helper names
/// (`$OCTL_HOME/helpers/codex-<KEY>/`, KEY naming the binary), made or brought up to date;
/// `None` off Linux (no bubblewrap) or when `program` is not found.
pub fn codex_helpers(
    home: &Path,
    program: &str,
    path_var: Option<&std::ffi::OsStr>,
) -> std::io::Result<Option<PathBuf>> {
    if !cfg!(target_os = "linux") {
        return Ok(None);
    }
    let Some(found) = super::find_program(program, path_var) else {
        return Ok(None);
    };
    let Some(binary) = codex_binary(&found) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "{} is neither Codex's binary nor its npm launcher beside one",
                found.display()
            ),
        ));
    };
    let dir = home.join("helpers").join(format!(
        "codex-{:016x}",
        fnv1a(binary.as_os_str().as_encoded_bytes())
    ));
    std::fs::create_dir_all(&dir)?;
    for name in CODEX_ALIASES {
        link(&binary, &dir.join(name))?;
    }
    Ok(Some(dir))
}

/// Codex's own binary for `program` (found on PATH): itself when it is an executable file
/// (ELF), else — npm's `bin/codex.js`, which runs the binary with argv[0] its path, so a link
/// to it would lose the name — the binary of its platform package, where `codex.js` looks:
/// `@openai/codex-linux-<arch>` resolved as Node does from its directory (each ancestor's
/// `node_modules`), then its own `vendor/`.
pub fn codex_binary(program: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).ok()?;
    if is_elf(&real) {
        return Some(real);
    }
    let (package, triple) = match std::env::consts::ARCH {
        "x86_64" => ("codex-linux-x64", "x86_64-unknown-linux-musl"),
        "aarch64" => ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
        _ => return None,
    };
    let bin_dir = real.parent()?;
    let in_vendor = |root: &Path| root.join("vendor").join(triple).join("bin").join("codex");
    bin_dir
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n != "node_modules"))
        .map(|a| in_vendor(&a.join("node_modules").join("@openai").join(package)))
        .chain(bin_dir.parent().map(in_vendor))
        .find(|candidate| is_elf(candidate))
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// `at` made a symlink to `target`, unless it is one already: a new link is renamed over
/// the old, so an agent starting meanwhile finds one or the other, never none.
fn link(target: &Path, at: &Path) -> std::io::Result<()> {
    if std::fs::read_link(at).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let tmp = at.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, at)
}

/// FNV-1a, 64 bits: a short stable name for a path.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn executable(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn npms_launcher_leads_to_the_platform_packages_binary() {
        let root = tempfile::tempdir().unwrap();
        let modules = root.path().join("lib/node_modules");
        let launcher = modules.join("@openai/codex/bin/codex.js");
        executable(&launcher, b"#!/usr/bin/env node\n");
        let (package, triple) = match std::env::consts::ARCH {
            "x86_64" => ("codex-linux-x64", "x86_64-unknown-linux-musl"),
            _ => ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
        };
        // npm puts the platform package beside it, or (nested) under it.
        let binary = modules.join(format!("@openai/{package}/vendor/{triple}/bin/codex"));
        executable(&binary, b"\x7fELF....");
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(&launcher, bin.join("codex")).unwrap();
        let real = std::fs::canonicalize(&binary).unwrap();
        assert_eq!(codex_binary(&bin.join("codex")), Some(real.clone()));
        // The binary itself is taken as it is.
        assert_eq!(codex_binary(&binary), Some(real.clone()));

        let home = root.path().join("octl");
        let dir = codex_helpers(&home, "codex", Some(bin.as_os_str()))
            .unwrap()
            .unwrap();
        assert!(dir.starts_with(home.join("helpers")), "{}", dir.display());
        for name in CODEX_ALIASES {
            assert_eq!(std::fs::read_link(dir.join(name)).unwrap(), real, "{name}");
        }
        // Made again, unchanged; a stale link is replaced.
        std::fs::remove_file(dir.join("apply_patch")).unwrap();
        std::os::unix::fs::symlink("/nowhere", dir.join("apply_patch")).unwrap();
        let again = codex_helpers(&home, "codex", Some(bin.as_os_str()))
            .unwrap()
            .unwrap();
        assert_eq!(again, dir);
        assert_eq!(std::fs::read_link(dir.join("apply_patch")).unwrap(), real);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            CODEX_ALIASES.len()
        );
    }

    #[test]
    fn a_launcher_without_a_binary_is_an_error_and_a_missing_program_nothing() {
        let root = tempfile::tempdir().unwrap();
        let launcher = root.path().join("pkg/bin/codex.js");
        executable(&launcher, b"#!/usr/bin/env node\n");
        assert_eq!(codex_binary(&launcher), None);
        let home = root.path().join("octl");
        assert!(codex_helpers(&home, launcher.to_str().unwrap(), None).is_err());
        assert_eq!(
            codex_helpers(&home, "no-such-codex", Some(root.path().as_os_str())).unwrap(),
            None
        );
    }
}
