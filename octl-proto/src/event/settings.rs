//! A run's settings: the keys of its `run.created` data besides kind, title, repository and
//! base. Typed fields for what this version knows; every other key (from a newer version, or a
//! value of a shape this one does not read) is kept in `other` and written back as it was, so
//! `manifest.json` and `run show` keep their bytes.

use serde::{de::DeserializeOwned, Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::AppError;

/// What `--max-parallel auto` was derived from.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AutoParallel {
    pub cores: u64,
    /// `null` where the machine does not say.
    pub mem_available_mib: Option<u64>,
    pub formula: String,
}

/// A best-of-N run: its attempts (nodes `NODE-1` … `NODE-N`), who judges them, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BestOf {
    pub attempts: u32,
    /// `builtin` (the criteria in `rank`'s order), `command` (`judge_command` answers a
    /// ranking as JSON) or `human` (`orchestratectl pick`).
    pub judge: Judge,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_command: Option<String>,
    /// The first attempt that passes its gate wins; the others are stopped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub first_passing: bool,
    /// The built-in criteria in the order they decide (absent: [`DEFAULT_RANK`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank: Vec<Criterion>,
}

/// Who judges a best-of-N run's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Judge {
    Builtin,
    Command,
    Human,
}

impl Judge {
    pub fn as_str(self) -> &'static str {
        match self {
            Judge::Builtin => "builtin",
            Judge::Command => "command",
            Judge::Human => "human",
        }
    }
}

/// A built-in criterion: smaller wins for each (the gate has passed for every attempt
/// ranked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// Lines added and removed against the merge base.
    Diff,
    /// Files touched.
    Files,
    /// What its agent cost (USD; unknown last).
    Cost,
    /// From its start to its end.
    Time,
}

/// The built-in judge's order when `rank` does not say.
pub const DEFAULT_RANK: [Criterion; 4] = [
    Criterion::Diff,
    Criterion::Files,
    Criterion::Cost,
    Criterion::Time,
];

impl Criterion {
    pub const NAMES: &'static str = "diff, files, cost, time";

    pub fn parse(field: &str, s: &str) -> Result<Criterion, AppError> {
        match s {
            "diff" => Ok(Criterion::Diff),
            "files" => Ok(Criterion::Files),
            "cost" => Ok(Criterion::Cost),
            "time" => Ok(Criterion::Time),
            _ => Err(AppError::invalid(format!(
                "{field}: {s:?} is not a criterion; accepted: {}",
                Criterion::NAMES
            ))),
        }
    }
}

/// Its schema is derived from the fields as they are written (each typed key optional, any
/// other key kept).
#[derive(Debug, Clone, PartialEq, Default, schemars::JsonSchema)]
pub struct RunSettings {
    /// The agent profile the run's nodes use unless a node says otherwise.
    pub agent: Option<String>,
    /// The gate command a done node must pass before it merges.
    pub gate: Option<String>,
    /// A spin-off's parent run and the proposal it was accepted from.
    pub parent_run: Option<String>,
    pub proposal: Option<String>,
    /// The parallelism cap of a fan-out or orchestrate run, and how `auto` chose it.
    pub max_parallel: Option<u64>,
    pub max_parallel_auto: Option<AutoParallel>,
    /// A fan-out's manifest (relative to the run directory) and where it was read from.
    pub manifest_file: Option<String>,
    pub manifest_path: Option<String>,
    /// An orchestrate run's plan (relative to the run directory) and where it was read from.
    pub plan_file: Option<String>,
    pub plan_path: Option<String>,
    /// The order nodes start in: the manifest's or plan's.
    pub order: Option<Vec<String>>,
    /// An orchestrate run's integration branch.
    pub integration: Option<String>,
    /// An orchestrate run merges its integration branch by itself once every node merged.
    pub auto_merge: Option<bool>,
    /// The run's budget (USD): no new node starts once its agents have cost this much.
    pub max_budget_usd: Option<f64>,
    /// A done node waits for a person's review (`review --approve`) before it is gated and
    /// merged (`--review`).
    pub review: Option<bool>,
    /// The sandbox the run's agents run in (`--sandbox`), over their profile's and
    /// config.toml's.
    pub sandbox: Option<crate::sandbox::SandboxKind>,
    /// Several attempts at the one task, judged, the best merged (`--attempts`).
    pub best_of: Option<BestOf>,
    /// Every other key, as it was written.
    #[schemars(flatten)]
    pub other: Map<String, Value>,
}

/// Takes `key` out of `m` if its value reads as `T` and writes back identically; otherwise
/// it stays in `m` (kept as it was, and read as absent, as a key-by-key reader would).
fn take<T: Serialize + DeserializeOwned>(m: &mut Map<String, Value>, key: &str) -> Option<T> {
    let v = m.get(key)?;
    let t: T = serde_json::from_value(v.clone()).ok()?;
    if serde_json::to_value(&t).ok().as_ref() != Some(v) {
        return None;
    }
    m.remove(key);
    Some(t)
}

fn put<T: Serialize>(m: &mut Map<String, Value>, key: &str, v: &Option<T>) {
    if let Some(v) = v {
        m.insert(
            key.to_string(),
            serde_json::to_value(v).expect("settings serialize"),
        );
    }
}

impl RunSettings {
    pub fn from_map(mut m: Map<String, Value>) -> RunSettings {
        RunSettings {
            agent: take(&mut m, "agent"),
            gate: take(&mut m, "gate"),
            parent_run: take(&mut m, "parent_run"),
            proposal: take(&mut m, "proposal"),
            max_parallel: take(&mut m, "max_parallel"),
            max_parallel_auto: take(&mut m, "max_parallel_auto"),
            manifest_file: take(&mut m, "manifest_file"),
            manifest_path: take(&mut m, "manifest_path"),
            plan_file: take(&mut m, "plan_file"),
            plan_path: take(&mut m, "plan_path"),
            order: take(&mut m, "order"),
            integration: take(&mut m, "integration"),
            auto_merge: take(&mut m, "auto_merge"),
            max_budget_usd: take(&mut m, "max_budget_usd"),
            review: take(&mut m, "review"),
            sandbox: take(&mut m, "sandbox"),
            best_of: take(&mut m, "best_of"),
            other: m,
        }
    }

    /// The settings as one object, keys sorted as every `Map` here is.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = self.other.clone();
        put(&mut m, "agent", &self.agent);
        put(&mut m, "gate", &self.gate);
        put(&mut m, "parent_run", &self.parent_run);
        put(&mut m, "proposal", &self.proposal);
        put(&mut m, "max_parallel", &self.max_parallel);
        put(&mut m, "max_parallel_auto", &self.max_parallel_auto);
        put(&mut m, "manifest_file", &self.manifest_file);
        put(&mut m, "manifest_path", &self.manifest_path);
        put(&mut m, "plan_file", &self.plan_file);
        put(&mut m, "plan_path", &self.plan_path);
        put(&mut m, "order", &self.order);
        put(&mut m, "integration", &self.integration);
        put(&mut m, "auto_merge", &self.auto_merge);
        put(&mut m, "max_budget_usd", &self.max_budget_usd);
        put(&mut m, "review", &self.review);
        put(&mut m, "sandbox", &self.sandbox);
        put(&mut m, "best_of", &self.best_of);
        m
    }

    pub fn is_empty(&self) -> bool {
        *self == RunSettings::default()
    }

    /// Whether the run's done nodes wait for a person's approval before they merge.
    pub fn holds_for_review(&self) -> bool {
        self.review == Some(true)
    }

    /// The branch a node's work is compared with (its diff, its review rounds): an
    /// orchestrate run's integration branch, else the run's `base`.
    pub fn diff_base(
        &self,
        kind: Option<crate::state::RunKind>,
        base: Option<&str>,
    ) -> Option<String> {
        match (kind, &self.integration) {
            (Some(crate::state::RunKind::Orchestrate), Some(i)) => Some(i.clone()),
            _ => base.map(str::to_string),
        }
    }

    /// Whether an orchestrate run merges by itself.
    pub fn auto_merges(&self) -> bool {
        self.auto_merge == Some(true)
    }
}

impl Serialize for RunSettings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

impl<'de> Deserialize<'de> for RunSettings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(RunSettings::from_map)
    }
}

impl super::field::Rest for RunSettings {
    fn from_rest(rest: Map<String, Value>) -> Result<Self, AppError> {
        Ok(RunSettings::from_map(rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_keys_are_typed_and_the_rest_is_kept_as_written() {
        let m = json!({
            "agent": "shell", "max_parallel": 4, "order": ["a", "b"], "auto_merge": true,
            "max_parallel_auto": {"cores": 2, "mem_available_mib": null, "formula": "f"},
            "from_a_newer_version": {"x": 1}, "gate": 7, "integration": null
        });
        let s: RunSettings = serde_json::from_value(m.clone()).unwrap();
        assert_eq!(s.agent.as_deref(), Some("shell"));
        assert_eq!(s.max_parallel, Some(4));
        assert!(s.auto_merges());
        assert_eq!(
            s.max_parallel_auto.as_ref().unwrap().mem_available_mib,
            None
        );
        // A shape this version does not read is kept, not lost or refused.
        assert_eq!(s.gate, None);
        assert_eq!(s.other.get("gate"), Some(&json!(7)));
        assert_eq!(s.other.get("integration"), Some(&Value::Null));
        assert_eq!(serde_json::to_string(&s).unwrap(), m.to_string());
        assert!(RunSettings::from_map(Map::new()).is_empty());
    }
}
