//! Stable error kinds: one snake_case string per kind, shared by the daemon's JSON-RPC
//! `data.kind`, the CLI's `{"error":{"kind":…}}` and its exit code.

use serde::{Deserialize, Serialize};

/// Every failure the daemon or the CLI reports has one of these kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Malformed JSON (JSON-RPC −32700).
    ParseError,
    /// Not a valid JSON-RPC request object (−32600).
    InvalidRequest,
    /// No such method (−32601).
    MethodNotFound,
    /// A parameter is missing, of the wrong form, or unknown (−32602).
    InvalidParams,
    /// A run id prefix matches more than one run.
    AmbiguousId,
    /// The run, node or other object does not exist.
    NotFound,
    /// The event is not a legal transition from the current state.
    InvalidTransition,
    /// A client may not append this event type in this kind of run.
    Forbidden,
    /// The target branch is checked out with uncommitted changes on the paths a merge touches.
    TargetDirty,
    /// The merge has conflicts.
    MergeConflict,
    /// The run's log is corrupt; it is set aside and read-only.
    RunCorrupt,
    /// The caller is not the daemon's owner.
    Unauthorized,
    /// The request body is too large.
    TooLarge,
    /// The request took longer than the daemon allows.
    Timeout,
    /// An external program (git, tmux, an agent) is missing.
    ToolMissing,
    /// An external program failed.
    ToolFailed,
    /// The daemon cannot be reached and could not be started.
    DaemonUnreachable,
    /// The daemon is shutting down and takes no new work.
    ShuttingDown,
    /// The filesystem holding the home is full (or over quota): nothing was written.
    StorageFull,
    /// Reading or writing the home failed (an I/O error, a read-only filesystem, a failed
    /// sync): the operation was refused and left nothing behind.
    IoError,
    /// Anything unexpected (−32603).
    Internal,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::ParseError => "parse_error",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::MethodNotFound => "method_not_found",
            ErrorKind::InvalidParams => "invalid_params",
            ErrorKind::AmbiguousId => "ambiguous_id",
            ErrorKind::NotFound => "not_found",
            ErrorKind::InvalidTransition => "invalid_transition",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::TargetDirty => "target_dirty",
            ErrorKind::MergeConflict => "merge_conflict",
            ErrorKind::RunCorrupt => "run_corrupt",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Timeout => "timeout",
            ErrorKind::ToolMissing => "tool_missing",
            ErrorKind::ToolFailed => "tool_failed",
            ErrorKind::DaemonUnreachable => "daemon_unreachable",
            ErrorKind::ShuttingDown => "shutting_down",
            ErrorKind::StorageFull => "storage_full",
            ErrorKind::IoError => "io_error",
            ErrorKind::Internal => "internal",
        }
    }

    /// Parses the stable string back (unknown strings become `Internal`).
    pub fn from_str_lossy(s: &str) -> ErrorKind {
        serde_json::from_value(serde_json::Value::String(s.to_string()))
            .unwrap_or(ErrorKind::Internal)
    }

    /// The JSON-RPC error code: the standard ones for protocol errors, −32000…−32099 for the rest.
    pub fn rpc_code(self) -> i64 {
        match self {
            ErrorKind::ParseError => -32700,
            ErrorKind::InvalidRequest | ErrorKind::TooLarge => -32600,
            ErrorKind::MethodNotFound => -32601,
            ErrorKind::InvalidParams => -32602,
            ErrorKind::Internal => -32603,
            ErrorKind::NotFound => -32001,
            ErrorKind::AmbiguousId => -32002,
            ErrorKind::InvalidTransition => -32003,
            ErrorKind::Forbidden => -32004,
            ErrorKind::TargetDirty => -32005,
            ErrorKind::MergeConflict => -32006,
            ErrorKind::RunCorrupt => -32007,
            ErrorKind::Unauthorized => -32008,
            ErrorKind::Timeout => -32009,
            ErrorKind::ToolMissing => -32010,
            ErrorKind::ToolFailed => -32011,
            ErrorKind::ShuttingDown => -32012,
            ErrorKind::DaemonUnreachable => -32013,
            ErrorKind::StorageFull => -32014,
            ErrorKind::IoError => -32015,
        }
    }

    /// The CLI exit code (the table of exit codes in docs/PROTOCOL.md).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::ParseError
            | ErrorKind::InvalidRequest
            | ErrorKind::MethodNotFound
            | ErrorKind::InvalidParams
            | ErrorKind::AmbiguousId
            | ErrorKind::TooLarge => 2,
            ErrorKind::NotFound => 3,
            ErrorKind::InvalidTransition
            | ErrorKind::Forbidden
            | ErrorKind::TargetDirty
            | ErrorKind::MergeConflict
            | ErrorKind::RunCorrupt
            | ErrorKind::Unauthorized => 4,
            ErrorKind::DaemonUnreachable | ErrorKind::ShuttingDown => 5,
            ErrorKind::ToolMissing | ErrorKind::ToolFailed => 6,
            // Not a bug and not the caller's input: free space (or fix the disk) and retry.
            ErrorKind::StorageFull | ErrorKind::IoError => 7,
            ErrorKind::Timeout | ErrorKind::Internal => 1,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with its stable kind, a message naming the field and the accepted form, and an
/// optional hint saying what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl AppError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        AppError {
            kind,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidParams, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_codes_are_in_range() {
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::InvalidTransition,
            ErrorKind::RunCorrupt,
            ErrorKind::Unauthorized,
            ErrorKind::ToolMissing,
            ErrorKind::StorageFull,
            ErrorKind::IoError,
        ] {
            assert_eq!(ErrorKind::from_str_lossy(kind.as_str()), kind);
            assert!((-32099..=-32000).contains(&kind.rpc_code()), "{kind}");
        }
        assert_eq!(ErrorKind::ToolMissing.exit_code(), 6);
        assert_eq!(ErrorKind::NotFound.exit_code(), 3);
        assert_eq!(ErrorKind::StorageFull.exit_code(), 7);
        assert_eq!(ErrorKind::IoError.exit_code(), 7);
    }
}
