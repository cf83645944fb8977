//! The files derived from a run's state. They are a pure function of [`RunState`], which is a
//! pure function of the log, so `run rebuild` writes them byte for byte as the daemon did.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::{Discussion, Node, RunKind, RunState, RunStatus, Spinoff};

/// A listed run's status: the folded [`RunStatus`], or `corrupt` for a run whose log could not
/// be read (it has no state to fold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ListedStatus {
    Active,
    Waiting,
    Completed,
    Failed,
    Cancelled,
    Corrupt,
}

impl ListedStatus {
    pub const ALL: [ListedStatus; 6] = [
        ListedStatus::Active,
        ListedStatus::Waiting,
        ListedStatus::Completed,
        ListedStatus::Failed,
        ListedStatus::Cancelled,
        ListedStatus::Corrupt,
    ];

    pub fn parse(s: &str) -> Option<ListedStatus> {
        ListedStatus::ALL.into_iter().find(|l| l.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ListedStatus::Corrupt => "corrupt",
            other => RunStatus::try_from(other).expect("not corrupt").as_str(),
        }
    }

    /// Completed, failed or cancelled: the run's own work is over.
    pub fn is_terminal(self) -> bool {
        RunStatus::try_from(self).is_ok_and(RunStatus::is_terminal)
    }

    /// Terminal or corrupt: nothing will move this run again by itself.
    pub fn is_ended(self) -> bool {
        self == ListedStatus::Corrupt || self.is_terminal()
    }
}

impl std::fmt::Display for ListedStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<RunStatus> for ListedStatus {
    fn from(s: RunStatus) -> Self {
        match s {
            RunStatus::Active => ListedStatus::Active,
            RunStatus::Waiting => ListedStatus::Waiting,
            RunStatus::Completed => ListedStatus::Completed,
            RunStatus::Failed => ListedStatus::Failed,
            RunStatus::Cancelled => ListedStatus::Cancelled,
        }
    }
}

/// The folded status, or `Err(())` for a corrupt run.
impl TryFrom<ListedStatus> for RunStatus {
    type Error = ();
    fn try_from(s: ListedStatus) -> Result<Self, ()> {
        Ok(match s {
            ListedStatus::Active => RunStatus::Active,
            ListedStatus::Waiting => RunStatus::Waiting,
            ListedStatus::Completed => RunStatus::Completed,
            ListedStatus::Failed => RunStatus::Failed,
            ListedStatus::Cancelled => RunStatus::Cancelled,
            ListedStatus::Corrupt => return Err(()),
        })
    }
}

impl PartialEq<RunStatus> for ListedStatus {
    fn eq(&self, other: &RunStatus) -> bool {
        *self == ListedStatus::from(*other)
    }
}

/// A listed run's kind: `None` (serialized `"unknown"`) for a corrupt run whose `run.created`
/// could not be read.
mod kind_or_unknown {
    use super::RunKind;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub const UNKNOWN: &str = "unknown";

    pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "enum": ["generic", "spinoff", "code", "fanout", "orchestrate", UNKNOWN],
        })
    }

    pub fn serialize<S: Serializer>(kind: &Option<RunKind>, s: S) -> Result<S::Ok, S::Error> {
        match kind {
            Some(k) => k.serialize(s),
            None => s.serialize_str(UNKNOWN),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RunKind>, D::Error> {
        let s = String::deserialize(d)?;
        if s == UNKNOWN {
            return Ok(None);
        }
        RunKind::parse(&s).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "kind: unknown kind `{s}` (accepted: generic, spinoff, code, fanout, orchestrate, unknown)"
            ))
        })
    }
}

/// The run summary: `manifest.json`, `run list` items, `run create` and `spawn` results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSummary {
    pub id: String,
    /// The run's kind; `None` (`"unknown"`) for a corrupt run whose kind cannot be read.
    #[serde(with = "kind_or_unknown")]
    #[schemars(schema_with = "kind_or_unknown::schema")]
    pub kind: Option<RunKind>,
    pub status: ListedStatus,
    pub title: Option<String>,
    pub repo: Option<String>,
    pub base: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Node counts by state (only the states that occur).
    pub nodes: BTreeMap<String, usize>,
    /// The live nodes (starting, running, waiting) by what their agents said they do
    /// (`working`, `needs_permission`, …), only the states that occur; a live node whose
    /// agent never said is not counted (it is `unknown`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub activity: BTreeMap<String, usize>,
    pub last_seq: u64,
    #[serde(default, skip_serializing_if = "RunSettings::is_empty")]
    pub settings: RunSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the run's agents cost so far (USD): every node's sessions summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The run's `max_budget_usd` is spent (`run.budget_spent`): no new node starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_spent: bool,
}

pub use crate::event::RunSettings;

impl RunSummary {
    /// The kind as it is serialized: `unknown` for a corrupt run whose kind cannot be read.
    pub fn kind_name(&self) -> &'static str {
        self.kind.map_or(kind_or_unknown::UNKNOWN, RunKind::as_str)
    }
}

/// `run show`: the summary and every record of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunDetail {
    pub manifest: RunSummary,
    pub nodes: Vec<Node>,
    pub discussions: Vec<Discussion>,
    pub spinoffs: Vec<Spinoff>,
    /// The agents' permission requests (`node.permission_asked`) and their decisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<crate::state::Permission>,
    /// Tool patterns allowed for the rest of the run by `always` decisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// A best-of-N run's judgement, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<crate::state::Judged>,
    /// Why a best-of-N run's judge command gave no ranking: a person picks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_failed: Option<String>,
}

pub fn summary(state: &RunState) -> RunSummary {
    RunSummary {
        id: state.id.clone(),
        kind: Some(state.kind),
        status: state.status().into(),
        title: state.title.clone(),
        repo: state.repo.clone(),
        base: state.base.clone(),
        created_at: state.created_at.clone(),
        updated_at: state.updated_at.clone(),
        nodes: state
            .counts()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        activity: activity_counts(state),
        last_seq: state.last_seq,
        settings: state.settings.clone(),
        merge: state.merge.clone(),
        merge_commit: state.merge_commit.clone(),
        error: None,
        cost_usd: state.cost_usd(),
        budget_spent: state.budget_spent,
    }
}

/// Live nodes by activity state.
fn activity_counts(state: &RunState) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    // Only what agents said: a live node that never said is `unknown` (its count is the live
    // nodes less these), and a log without activity projects as it always did.
    for n in state.nodes.values().filter(|n| n.state.is_alive()) {
        if let Some(a) = &n.activity {
            *counts.entry(a.state.as_str().to_string()).or_insert(0) += 1;
        }
    }
    counts
}

pub fn detail(state: &RunState) -> RunDetail {
    RunDetail {
        manifest: summary(state),
        // In the order they were added (a plan's order), not sorted as strings.
        nodes: state.nodes_in_order().map(shown).collect(),
        discussions: state.discussions.values().cloned().collect(),
        spinoffs: state.spinoffs.values().cloned().collect(),
        permissions: {
            // In the order asked (`p2` before `p10`).
            let mut p: Vec<_> = state.permissions.values().cloned().collect();
            p.sort_by(|a, b| {
                (&a.asked_at, a.request.len(), &a.request).cmp(&(
                    &b.asked_at,
                    b.request.len(),
                    &b.request,
                ))
            });
            p
        },
        allowed: state.allowed.clone(),
        judged: state.judged.clone(),
        judge_failed: state.judge_failed.clone(),
    }
}

/// Pretty JSON with a final newline: the one encoding every projection file uses.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("projections always serialize");
    bytes.push(b'\n');
    bytes
}

/// A projection file: its path relative to the run directory and its bytes.
pub type ProjectionFile = (String, Vec<u8>);

pub fn manifest_file(state: &RunState) -> ProjectionFile {
    ("manifest.json".to_string(), encode(&summary(state)))
}

/// The node as folded: `nodes/<NODE>.json` stays byte for byte what older versions wrote
/// for the same log (an activity only once the agent said one); answers show it always.
pub fn node_file(node: &Node) -> ProjectionFile {
    (format!("nodes/{}.json", node.id), encode(node))
}

/// A node as answered (`run.show`): its activity always present (`unknown` when its agent
/// never said).
fn shown(node: &Node) -> Node {
    let mut n = node.clone();
    n.activity = Some(n.activity_or_unknown());
    n
}

pub fn discussion_file(d: &Discussion) -> ProjectionFile {
    (format!("discussions/{}.json", d.id), encode(d))
}

pub fn spinoff_file(s: &Spinoff) -> ProjectionFile {
    (format!("spinoffs/{}.json", s.id), encode(s))
}

/// Every projection file of the run.
pub fn all_files(state: &RunState) -> Vec<ProjectionFile> {
    let mut files = vec![manifest_file(state)];
    files.extend(state.nodes.values().map(node_file));
    files.extend(state.discussions.values().map(discussion_file));
    files.extend(state.spinoffs.values().map(spinoff_file));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_status_and_kind_keep_their_wire_strings() {
        for s in ListedStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(ListedStatus::parse(s.as_str()), Some(s));
            assert_eq!(s.is_ended(), s.is_terminal() || s == ListedStatus::Corrupt);
        }
        assert_eq!(ListedStatus::parse("done"), None);
        let mut v = serde_json::json!({
            "id": "R", "kind": "unknown", "status": "corrupt", "title": null, "repo": null,
            "base": null, "created_at": "", "updated_at": "", "nodes": {}, "last_seq": 0
        });
        let s: RunSummary = serde_json::from_value(v.clone()).unwrap();
        assert_eq!((s.kind, s.status), (None, ListedStatus::Corrupt));
        assert_eq!(s.kind_name(), "unknown");
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        v["kind"] = "fanout".into();
        let s: RunSummary = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.kind, Some(RunKind::Fanout));
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        v["kind"] = "nope".into();
        let e = serde_json::from_value::<RunSummary>(v).unwrap_err();
        assert!(e.to_string().contains("accepted: generic"), "{e}");
    }
}
