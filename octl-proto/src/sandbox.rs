//! Which sandbox an agent runs in (docs/SECURITY.md): `bwrap` (Linux's bubblewrap: its
//! worktree, its tools and its own node only) or `none` (the user's whole account). Set in
//! config.toml (`[sandbox] kind`), per profile, and per run (`--sandbox`, a plan's
//! `sandbox`); the run's wins, then the profile's, then config.toml's.

use serde::{Deserialize, Serialize};

use crate::AppError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxKind {
    /// The agent runs as the user, with everything the user can reach.
    None,
    /// bubblewrap: mount, pid, network (unless `network = "host"`), IPC and UTS namespaces.
    Bwrap,
}

impl SandboxKind {
    pub const ALL: [SandboxKind; 2] = [SandboxKind::None, SandboxKind::Bwrap];

    pub fn as_str(self) -> &'static str {
        match self {
            SandboxKind::None => "none",
            SandboxKind::Bwrap => "bwrap",
        }
    }

    /// Reads `field`'s value (`bwrap` or `none`), naming the field and the accepted forms.
    pub fn parse(field: &str, s: &str) -> Result<SandboxKind, AppError> {
        SandboxKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                AppError::invalid(format!(
                    "{field}: {s:?} is not a sandbox; accepted: bwrap, none"
                ))
            })
    }
}

impl std::str::FromStr for SandboxKind {
    type Err = AppError;
    fn from_str(s: &str) -> Result<SandboxKind, AppError> {
        SandboxKind::parse("--sandbox", s)
    }
}

/// What a sandboxed agent may reach over the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxNetwork {
    /// The machine's network, as the user has it.
    Host,
    /// No network at all: only a loopback of its own.
    None,
    /// A loopback of its own, and through the daemon's proxy only the `host:port` patterns
    /// of `[sandbox] allow`; everything else is refused and counted in the node's events
    /// (`node.network_refused`).
    Allow,
}

impl SandboxNetwork {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxNetwork::Host => "host",
            SandboxNetwork::None => "none",
            SandboxNetwork::Allow => "allow",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_as_written_and_a_bad_one_names_the_field() {
        for k in SandboxKind::ALL {
            assert_eq!(k.as_str().parse::<SandboxKind>().unwrap(), k);
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::json!(k.as_str())
            );
        }
        let e = SandboxKind::parse("[sandbox] kind", "docker").unwrap_err();
        assert_eq!(
            e.message,
            "[sandbox] kind: \"docker\" is not a sandbox; accepted: bwrap, none"
        );
    }
}
