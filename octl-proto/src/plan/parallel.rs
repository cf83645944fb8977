//! The parallelism cap: `--max-parallel N|auto|cluster`.

use std::fmt;

use serde::de;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::MAX_PARALLEL;
use crate::error::AppError;

/// The `--max-parallel` setting: `auto` (at most [`AUTO_PARALLEL_CAP`](super::AUTO_PARALLEL_CAP)
/// alive, each start admitted by the daemon while the machine has room for it: `[limits]`,
/// README "Admission by resources"), `cluster` (what the Slurm cluster of the run's runner can
/// run now, read by the daemon), or a number from 1 to [`MAX_PARALLEL`]. Serialized as
/// `"auto"`, `"cluster"` or a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MaxParallel {
    #[default]
    Auto,
    Cluster,
    N(usize),
}

impl MaxParallel {
    /// From an RPC parameter: a number, or a string as [`parse_max_parallel`] takes it.
    pub fn from_json(v: &serde_json::Value) -> Result<MaxParallel, AppError> {
        match v {
            serde_json::Value::String(s) => parse_named("max_parallel", s),
            serde_json::Value::Number(n) => match n.as_u64() {
                Some(k) if (1..=MAX_PARALLEL as u64).contains(&k) => Ok(MaxParallel::N(k as usize)),
                _ => Err(max_parallel_error("max_parallel", &n.to_string())),
            },
            other => Err(max_parallel_error("max_parallel", &other.to_string())),
        }
    }
}

impl fmt::Display for MaxParallel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaxParallel::Auto => f.write_str("auto"),
            MaxParallel::Cluster => f.write_str("cluster"),
            MaxParallel::N(n) => write!(f, "{n}"),
        }
    }
}

impl Serialize for MaxParallel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MaxParallel::Auto => s.serialize_str("auto"),
            MaxParallel::Cluster => s.serialize_str("cluster"),
            MaxParallel::N(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for MaxParallel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        MaxParallel::from_json(&v).map_err(|e| de::Error::custom(e.message))
    }
}

fn max_parallel_error(field: &str, given: &str) -> AppError {
    AppError::invalid(format!(
        "invalid {field} {given:?}: use a number from 1 to {MAX_PARALLEL}, auto, or cluster (a Slurm runner's)"
    ))
}

/// Parses `--max-parallel`: `auto` or `cluster` (any case) or a number from 1 to
/// [`MAX_PARALLEL`].
pub fn parse_max_parallel(s: &str) -> Result<MaxParallel, AppError> {
    parse_named("--max-parallel", s)
}

fn parse_named(field: &str, s: &str) -> Result<MaxParallel, AppError> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("auto") {
        return Ok(MaxParallel::Auto);
    }
    if t.eq_ignore_ascii_case("cluster") {
        return Ok(MaxParallel::Cluster);
    }
    match t.parse::<usize>() {
        Ok(n) if (1..=MAX_PARALLEL).contains(&n) && t.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(MaxParallel::N(n))
        }
        _ => Err(max_parallel_error(field, s)),
    }
}
