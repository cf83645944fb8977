//! The two syntaxes a manifest or plan is written in, and [`Problems`], the list of everything
//! wrong with one, which is what validation returns instead of its first error.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::MAX_LISTED_PROBLEMS;
use crate::error::AppError;

/// The syntax of a manifest or plan file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Toml,
    Json,
}

impl Format {
    /// The format of a file by its extension, `.toml` or `.json` (any case).
    pub fn from_path(path: &str) -> Result<Format, AppError> {
        let ext = path
            .rsplit_once('.')
            .filter(|(stem, ext)| !stem.is_empty() && !stem.ends_with('/') && !ext.contains('/'))
            .map(|(_, ext)| ext.to_ascii_lowercase());
        match ext.as_deref() {
            Some("toml") => Ok(Format::Toml),
            Some("json") => Ok(Format::Json),
            _ => Err(AppError::invalid(format!(
                "cannot tell the format of {path:?}: use a file whose name ends in .toml or .json"
            ))),
        }
    }

    /// The format by name, as in RPC parameters: `toml` or `json` (any case).
    pub fn from_name(name: &str) -> Result<Format, AppError> {
        match name.to_ascii_lowercase().as_str() {
            "toml" => Ok(Format::Toml),
            "json" => Ok(Format::Json),
            _ => Err(AppError::invalid(format!(
                "invalid format {name:?}: use toml or json"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Toml => "toml",
            Format::Json => "json",
        }
    }

    pub(super) fn table(self) -> &'static str {
        match self {
            Format::Toml => "table",
            Format::Json => "object",
        }
    }

    pub(super) fn a_table(self) -> &'static str {
        match self {
            Format::Toml => "a table",
            Format::Json => "an object",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every problem found in a manifest or plan, one sentence each, in document order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problems(pub Vec<String>);

impl Problems {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// One `invalid_params` error listing every problem on its own line, e.g.
    /// `invalid manifest plan.toml: 3 problems:\n  - …\n  - …\n  - …`, where `what` is
    /// `manifest plan.toml`. Past [`MAX_LISTED_PROBLEMS`] the rest are counted, not listed.
    pub fn into_error(self, what: &str) -> AppError {
        let n = self.0.len();
        let mut msg = format!(
            "invalid {what}: {n} problem{}:",
            if n == 1 { "" } else { "s" }
        );
        for p in self.0.iter().take(MAX_LISTED_PROBLEMS) {
            msg.push_str("\n  - ");
            msg.push_str(p);
        }
        if n > MAX_LISTED_PROBLEMS {
            msg.push_str(&format!("\n  - … and {} more", n - MAX_LISTED_PROBLEMS));
        }
        AppError::invalid(msg)
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(p)?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}
