//! The files derived from a run's state. They are a pure function of [`RunState`], which is a
//! pure function of the log, so `run rebuild` writes them byte for byte as the daemon did.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::state::{Discussion, Node, RunState, Spinoff};

/// The run summary: `manifest.json`, `run list` items, `run create` and `spawn` results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub id: String,
    pub kind: String,
    /// `active`, `waiting`, `completed`, `failed`, `cancelled`, or `corrupt` for a run whose
    /// log could not be read.
    pub status: String,
    pub title: Option<String>,
    pub repo: Option<String>,
    pub base: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Node counts by state (only the states that occur).
    pub nodes: BTreeMap<String, usize>,
    pub last_seq: u64,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub settings: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `run show`: the summary and every record of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDetail {
    pub manifest: RunSummary,
    pub nodes: Vec<Node>,
    pub discussions: Vec<Discussion>,
    pub spinoffs: Vec<Spinoff>,
}

pub fn summary(state: &RunState) -> RunSummary {
    RunSummary {
        id: state.id.clone(),
        kind: state.kind.as_str().to_string(),
        status: state.status().as_str().to_string(),
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
        last_seq: state.last_seq,
        settings: state.settings.clone(),
        merge: state.merge.clone(),
        merge_commit: state.merge_commit.clone(),
        error: None,
    }
}

pub fn detail(state: &RunState) -> RunDetail {
    RunDetail {
        manifest: summary(state),
        // In the order they were added (a plan's order), not sorted as strings.
        nodes: state.nodes_in_order().cloned().collect(),
        discussions: state.discussions.values().cloned().collect(),
        spinoffs: state.spinoffs.values().cloned().collect(),
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

pub fn node_file(node: &Node) -> ProjectionFile {
    (format!("nodes/{}.json", node.id), encode(node))
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
