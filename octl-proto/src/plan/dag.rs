//! Orchestrate plans: nodes with tasks and the deps between them. [`parse_plan`] checks every
//! node, then every dep against all the ids, then the cycles; a valid [`Plan`] answers the order
//! to run its nodes in and which nodes to block when one fails.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::cycles::cycle_problems;
use super::fields::{
    fields, node_id_field, opt_agent, opt_gate, opt_rules, opt_runner, opt_sandbox, opt_string,
    pos_of, string_value,
};
use super::fields::{Found, END};
use super::suggest::{did_you_mean, list_names};
use super::tree::{parse_top, Tree};
use super::{Format, Problems, MAX_LISTED_PROBLEMS, MAX_NODES, MAX_TASK_BYTES};

/// A validated orchestrate plan: nodes in document order, deps all known, no cycles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub nodes: Vec<PlanNode>,
}

/// One node of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanNode {
    pub id: String,
    pub task: String,
    #[serde(default)]
    pub deps: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// Where this node's agent runs (a runner's name), unless `--runner` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// Its agent's permission rules (`allow`, `ask`, `deny`), after `--allow` and the rest.
    #[serde(
        default,
        skip_serializing_if = "crate::rules::PermissionRules::is_empty"
    )]
    pub permissions: crate::rules::PermissionRules,
    /// The sandbox its agent runs in, over `--sandbox`, its profile's and config.toml's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxKind>,
}

impl Plan {
    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&PlanNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// A topological order (every node after its deps), stable by document order: of the nodes
    /// whose deps are all placed, the first in the document goes next. Deps on unknown ids are
    /// ignored; nodes on a cycle (which a validated plan has none of) are left out.
    pub fn order(&self) -> Vec<&str> {
        let (succ, _) = self.graph();
        let n = self.nodes.len();
        let mut indegree = vec![0usize; n];
        for targets in &succ {
            for &t in targets {
                indegree[t] += 1;
            }
        }
        let mut ready: BinaryHeap<Reverse<usize>> =
            (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
        let mut out = Vec::with_capacity(n);
        while let Some(Reverse(i)) = ready.pop() {
            out.push(self.nodes[i].id.as_str());
            for &t in &succ[i] {
                indegree[t] -= 1;
                if indegree[t] == 0 {
                    ready.push(Reverse(t));
                }
            }
        }
        out
    }

    /// Every node that depends on `id`, directly or through others, in document order (not `id`
    /// itself). These are the nodes to block when `id` fails. Empty for an unknown id.
    pub fn dependents(&self, id: &str) -> Vec<&str> {
        let (succ, index) = self.graph();
        let Some(&start) = index.get(id) else {
            return Vec::new();
        };
        let mut seen = vec![false; self.nodes.len()];
        let mut queue = VecDeque::from([start]);
        while let Some(i) = queue.pop_front() {
            for &t in &succ[i] {
                if !seen[t] {
                    seen[t] = true;
                    queue.push_back(t);
                }
            }
        }
        seen[start] = false;
        (0..self.nodes.len())
            .filter(|&i| seen[i])
            .map(|i| self.nodes[i].id.as_str())
            .collect()
    }

    /// Edges from each node to the nodes that depend on it (sorted, no duplicates, no
    /// self-loops), and the index of each id (its first occurrence).
    fn graph(&self) -> (Vec<Vec<usize>>, HashMap<&str, usize>) {
        let mut index = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            index.entry(node.id.as_str()).or_insert(i);
        }
        let mut succ = vec![Vec::new(); self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            for d in &node.deps {
                if let Some(&j) = index.get(d.as_str()) {
                    if j != i {
                        succ[j].push(i);
                    }
                }
            }
        }
        for s in &mut succ {
            s.sort_unstable();
            s.dedup();
        }
        (succ, index)
    }
}

const PLAN_FIELDS: &[&str] = &["title", "nodes"];
const NODE_FIELDS: &[&str] = &[
    "id", "task", "deps", "agent", "gate", "runner", "allow", "ask", "deny", "sandbox",
];

/// Parses and validates an orchestrate plan; every problem is reported, none stops the others.
pub fn parse_plan(text: &str, format: Format) -> Result<Plan, Problems> {
    let top = parse_top(text, format, "plan")?;
    let mut p = Found::default();
    let f = fields("top level", &top, PLAN_FIELDS, &mut p);
    let title = opt_string("title", f.get("title"), format, &mut p);

    // Per node: its own problems, then (below) those that need every id known.
    struct Slot {
        label: String,
        problems: Found,
        id: Option<String>,
        deps: Vec<String>,
        deps_pos: usize,
        node: Option<PlanNode>,
    }
    let mut slots: Vec<Slot> = Vec::new();
    let nodes_pos = pos_of(&f, "nodes");
    match f.get("nodes") {
        None => p.add(
            END,
            format!(
                "missing field \"nodes\": list at least one node, each {} with an id and a task",
                format.a_table()
            ),
        ),
        Some((_, Tree::Array(items))) => {
            if items.is_empty() {
                p.add(nodes_pos, "nodes: empty; list at least one node");
            } else if items.len() > MAX_NODES {
                p.add(
                    nodes_pos,
                    format!("nodes: {} nodes; at most {MAX_NODES}", items.len()),
                );
            }
            let mut seen: HashMap<String, usize> = HashMap::new();
            for (i, item) in items.iter().enumerate() {
                let at = format!("nodes[{i}]");
                let mut q = Found::default();
                let Tree::Table(entries) = item else {
                    q.add(
                        0,
                        format!(
                            "{at}: must be {}, got {}",
                            format.a_table(),
                            item.kind(format)
                        ),
                    );
                    slots.push(Slot {
                        label: at,
                        problems: q,
                        id: None,
                        deps: Vec::new(),
                        deps_pos: END,
                        node: None,
                    });
                    continue;
                };
                let nf = fields(&at, entries, NODE_FIELDS, &mut q);
                let id = node_id_field(&at, nf.get("id"), &mut seen, i, format, &mut q);
                let label = match &id {
                    Some(id) => format!("{at} ({id})"),
                    None => at.clone(),
                };
                let task_pos = pos_of(&nf, "task");
                let task = match nf.get("task") {
                    None => {
                        q.add(
                            END,
                            format!(
                                "{at}: missing field \"task\": say what the node's agent is to do"
                            ),
                        );
                        None
                    }
                    Some(&(pos, v)) => string_value(&format!("{at}.task"), v, format, pos, &mut q),
                };
                if let Some(t) = &task {
                    if t.trim().is_empty() {
                        q.add(
                            task_pos,
                            format!("{at}.task: empty; say what the node's agent is to do"),
                        );
                    } else if t.len() > MAX_TASK_BYTES {
                        q.add(
                            task_pos,
                            format!(
                                "{at}.task: {} bytes; at most {MAX_TASK_BYTES} (32 KiB)",
                                t.len()
                            ),
                        );
                    }
                }
                let deps_pos = pos_of(&nf, "deps");
                let mut deps = Vec::new();
                let mut listed = BTreeSet::new();
                match nf.get("deps") {
                    None => {}
                    Some((_, Tree::Array(ds))) => {
                        for (k, d) in ds.iter().enumerate() {
                            match d {
                                Tree::Str(s) => {
                                    if !listed.insert(s.as_str()) {
                                        q.add(
                                            deps_pos,
                                            format!("{label}: dep {s:?} is listed twice"),
                                        );
                                    } else {
                                        deps.push(s.clone());
                                    }
                                }
                                other => q.add(
                                    deps_pos,
                                    format!(
                                        "{at}.deps[{k}]: must be a string (a node id), got {}",
                                        other.kind(format)
                                    ),
                                ),
                            }
                        }
                    }
                    Some((_, other)) => q.add(
                        deps_pos,
                        format!(
                            "{at}.deps: must be an array of node ids, got {}",
                            other.kind(format)
                        ),
                    ),
                }
                let agent = opt_agent(&format!("{at}.agent"), nf.get("agent"), format, &mut q);
                let gate = opt_gate(&format!("{at}.gate"), nf.get("gate"), format, &mut q);
                let runner = opt_runner(&format!("{at}.runner"), nf.get("runner"), format, &mut q);
                let permissions = opt_rules(&format!("{at}."), &nf, format, &mut q);
                let sandbox =
                    opt_sandbox(&format!("{at}.sandbox"), nf.get("sandbox"), format, &mut q);
                let node = match (&id, task) {
                    (Some(id), Some(task)) => Some(PlanNode {
                        id: id.clone(),
                        task,
                        deps: deps.clone(),
                        agent,
                        gate,
                        runner,
                        permissions,
                        sandbox,
                    }),
                    _ => None,
                };
                slots.push(Slot {
                    label,
                    problems: q,
                    id,
                    deps,
                    deps_pos,
                    node,
                });
            }
        }
        Some(&(pos, other)) => p.add(
            pos,
            format!(
                "nodes: must be an array of {}s, got {}",
                format.table(),
                other.kind(format)
            ),
        ),
    }

    // Every valid id (first occurrence wins), then the deps against them.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut known: Vec<String> = Vec::new();
    for (i, s) in slots.iter().enumerate() {
        if let Some(id) = &s.id {
            if !index.contains_key(id) {
                index.insert(id.clone(), i);
                known.push(id.clone());
            }
        }
    }
    let known_refs: Vec<&str> = known.iter().map(String::as_str).collect();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); slots.len()];
    // A close match is looked for (against every id) only for as many unknown deps as an
    // error lists, so that many unknown deps among many nodes cost linear time.
    let mut suggestions = MAX_LISTED_PROBLEMS;
    for (i, s) in slots.iter_mut().enumerate() {
        for d in &s.deps {
            match index.get(d.as_str()) {
                None => {
                    let mut msg = format!(
                        "{}: unknown dep {d:?}; known: {}",
                        s.label,
                        list_names(&known_refs, 30)
                    );
                    let close = if suggestions > 0 {
                        suggestions -= 1;
                        did_you_mean(d, &known_refs)
                    } else {
                        None
                    };
                    if let Some(close) = close {
                        msg.push_str(&format!("; did you mean {close:?}?"));
                    }
                    s.problems.add(s.deps_pos, msg);
                }
                Some(_) if s.id.as_deref() == Some(d.as_str()) => {
                    s.problems
                        .add(s.deps_pos, format!("{}: depends on itself", s.label));
                }
                Some(&j) => {
                    // Only a node with a valid, unique id takes part in the graph.
                    if s.id.is_some() {
                        succ[j].push(i);
                    }
                }
            }
        }
    }
    for s in &mut succ {
        s.sort_unstable();
        s.dedup();
    }
    let ids: Vec<&str> = slots
        .iter()
        .map(|s| s.id.as_deref().unwrap_or(""))
        .collect();
    let cycles = cycle_problems(&succ, &ids);
    for s in &mut slots {
        p.extend_at(nodes_pos, std::mem::take(&mut s.problems));
    }
    let mut problems = p.into_problems();
    problems.0.extend(cycles);

    if !problems.is_empty() {
        return Err(problems);
    }
    let nodes: Vec<PlanNode> = slots
        .into_iter()
        .map(|s| s.node.expect("a node without problems is complete"))
        .collect();
    Ok(Plan { title, nodes })
}
