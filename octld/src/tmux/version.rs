//! The tmux version: `tmux -V`, parsed, and the oldest one supported.

use std::fmt;

use super::{Result, Tmux, TmuxError};

/// `new-window -e` and argv-style commands appeared in 3.0.
pub const MIN_VERSION: Version = Version { major: 3, minor: 0 };

/// A tmux version, `tmux 3.3a` → 3.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Parses `tmux -V`: `tmux 3.3a`, `tmux next-3.5`, `tmux 3.4-rc2`. Builds from a development
/// branch (`tmux master`, `tmux openbsd-7.5`) count as newer than any release.
pub fn parse_version(output: &str) -> Option<Version> {
    let v = output.trim().strip_prefix("tmux ")?.trim();
    if v.starts_with("master") || v.starts_with("openbsd-") {
        return Some(Version {
            major: u32::MAX,
            minor: 0,
        });
    }
    let v = v.strip_prefix("next-").unwrap_or(v);
    let (major, rest) = v.split_once('.')?;
    let major = major.parse().ok()?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let minor = rest[..end].parse().ok()?;
    Some(Version { major, minor })
}

impl Tmux {
    /// `tmux -V`, parsed. Does not need a server.
    pub fn version(&self) -> Result<Version> {
        let argv = vec![self.program_name(), "-V".into()];
        let out = match self.command().arg("-V").output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TmuxError::Missing {
                    program: self.program_name(),
                })
            }
            Err(source) => return Err(TmuxError::Spawn { argv, source }),
        };
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(TmuxError::Failed {
                argv,
                code: out.status.code(),
                signal: crate::ended::of(out.status).1,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        let version = parse_version(&text).ok_or_else(|| TmuxError::Parse {
            argv,
            detail: format!("cannot read a version in {:?}", text.trim()),
        })?;
        self.control.note_version(version);
        Ok(version)
    }

    /// The version, or [`TmuxError::TooOld`] below [`MIN_VERSION`].
    pub fn check_version(&self) -> Result<Version> {
        let found = self.version()?;
        if found < MIN_VERSION {
            return Err(TmuxError::TooOld { found });
        }
        Ok(found)
    }
}
