//! Which git is installed: [`Git::version`], and [`MIN_VERSION`], the oldest that works.

use std::fmt;

use super::{Call, Git, GitError, Result};

/// `merge-tree --write-tree` appeared in 2.38.
pub const MIN_VERSION: Version = Version {
    major: 2,
    minor: 38,
    patch: 0,
};

/// A git version, `git version 2.47.3` → 2.47.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Parses the output of `git version`, including vendor suffixes such as
/// `git version 2.39.3 (Apple Git-146)` or `2.45.1.windows.1`.
pub fn parse_version(output: &str) -> Option<Version> {
    let number = output.trim().strip_prefix("git version ")?;
    let number = number.split_whitespace().next()?;
    let mut parts = number.split(['.', '-']).map(leading_number);
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some(Version {
        major,
        minor,
        patch,
    })
}

fn leading_number(s: &str) -> Option<u32> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

impl Git {
    /// `git version`, parsed. Does not need a repository.
    pub fn version(&self) -> Result<Version> {
        let mut cmd = self.base_command();
        cmd.arg("version");
        let call = Call {
            cmd,
            argv: vec![
                self.program.to_string_lossy().into_owned(),
                "version".into(),
            ],
            dir: None,
            program: self.program.to_string_lossy().into_owned(),
        };
        let argv = call.argv.clone();
        let line = call.line()?;
        parse_version(&line).ok_or_else(|| GitError::Parse {
            argv,
            detail: format!("cannot read a version in {line:?}"),
        })
    }

    /// The version, or [`GitError::TooOld`] below [`MIN_VERSION`].
    pub fn check_version(&self) -> Result<Version> {
        let found = self.version()?;
        if found < MIN_VERSION {
            return Err(GitError::TooOld { found });
        }
        Ok(found)
    }
}
