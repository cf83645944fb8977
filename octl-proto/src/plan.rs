//! Fan-out manifests and orchestrate plans: parsing (TOML or JSON, one schema) and validation
//! that reports every problem at once, in document order, so a caller fixes them all in one go.
//! Also the parallelism cap (`--max-parallel N|auto`) and the formula behind `auto`.
//!
//! Both formats are read into one small ordered tree (keys in document order) and walked by
//! hand, which is what lets validation collect every problem instead of stopping at the first.
//!
//! Decisions:
//! - `vars` take strings only: a number or a boolean is a problem (quote it), so what a unit
//!   renders is exactly what its file says.
//! - A var the prompt never uses is fine; a placeholder a unit does not fill is a problem.
//! - Placeholders are `{name}` with a name of 1-64 letters, digits, `_` or `-`; `{{` and `}}` are
//!   literal braces; any other `{` or `}` is a problem.
//! - In JSON, `null` for an optional field means the field is absent.
//! - Problems come in document order of what they are about; those about a missing field come
//!   after those about the fields present in the same table. Cycles come last.
//! - Cycles are reported once per strongly connected component, as real cycles written in the
//!   direction of the work (`a → b` means b depends on a), covering every node of the component.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::AppError;
use crate::ids::is_node_id;

/// Most units in one fan-out manifest.
pub const MAX_UNITS: usize = 1000;
/// Most nodes in one orchestrate plan.
pub const MAX_NODES: usize = 500;
/// Largest prompt template, and largest prompt once rendered for a unit (32 KiB).
pub const MAX_PROMPT_BYTES: usize = 32 * 1024;
/// Largest task of a plan node (32 KiB).
pub const MAX_TASK_BYTES: usize = 32 * 1024;
/// Largest explicit `--max-parallel`.
pub const MAX_PARALLEL: usize = 256;
/// Largest value `auto` ever picks.
pub const AUTO_PARALLEL_CAP: usize = 32;
/// How many problems [`Problems::into_error`] lists before it says "… and N more".
pub const MAX_LISTED_PROBLEMS: usize = 100;
/// How many unfilled placeholders are named per unit before the rest are counted.
const MAX_MISSING_LISTED: usize = 10;

const GIB: u64 = 1024 * 1024 * 1024;
const NAME_FORM: &str = "use 1-63 of a-z, 0-9 and '-', starting with a letter or digit";
const PLACEHOLDER_FORM: &str =
    "a placeholder is {name}, a name of 1-64 letters, digits, '_' or '-'; write {{ or }} for a literal brace";

// ---------------------------------------------------------------------------------------------
// Formats and problems

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

    fn table(self) -> &'static str {
        match self {
            Format::Toml => "table",
            Format::Json => "object",
        }
    }

    fn a_table(self) -> &'static str {
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

// ---------------------------------------------------------------------------------------------
// Fan-out manifests

/// A validated fan-out manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The template every unit renders, with `{var}` placeholders.
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    pub units: Vec<Unit>,
}

/// One unit of a fan-out: its node id and the values of the prompt's placeholders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    pub id: String,
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

impl Manifest {
    /// The prompt for `unit`: each `{var}` replaced by the unit's value, `{{`/`}}` turned into
    /// literal braces. (A placeholder the unit does not fill stays as written; validation has
    /// refused such manifests already.)
    pub fn render(&self, unit: &Unit) -> String {
        render_template(&self.prompt, &unit.vars)
    }

    /// The placeholder names the prompt uses, in order of first use, each once.
    pub fn placeholders(&self) -> Vec<String> {
        placeholder_names(&parse_template(&self.prompt).0)
    }

    /// The unit with this id.
    pub fn unit(&self, id: &str) -> Option<&Unit> {
        self.units.iter().find(|u| u.id == id)
    }
}

const MANIFEST_FIELDS: &[&str] = &["title", "prompt", "agent", "gate", "units"];
const UNIT_FIELDS: &[&str] = &["id", "vars"];

/// Parses and validates a fan-out manifest; every problem is reported, none stops the others.
pub fn parse_manifest(text: &str, format: Format) -> Result<Manifest, Problems> {
    let top = parse_top(text, format, "manifest")?;
    let mut p = Found::default();
    let f = fields("top level", &top, MANIFEST_FIELDS, &mut p);

    let title = opt_string("title", f.get("title"), format, &mut p);
    let agent = opt_agent("agent", f.get("agent"), format, &mut p);
    let gate = opt_gate("gate", f.get("gate"), format, &mut p);

    let prompt_pos = pos_of(&f, "prompt");
    let prompt = match f.get("prompt") {
        None => {
            p.add(
                END,
                "missing field \"prompt\": the template every unit renders, with {var} placeholders",
            );
            None
        }
        Some(&(pos, v)) => string_value("prompt", v, format, pos, &mut p),
    };
    let mut placeholders = Vec::new();
    let mut prompt_ok = false;
    if let Some(prompt) = &prompt {
        if prompt.trim().is_empty() {
            p.add(
                prompt_pos,
                "prompt: empty; write the template every unit renders",
            );
        } else if prompt.len() > MAX_PROMPT_BYTES {
            p.add(
                prompt_pos,
                format!(
                    "prompt: {} bytes; at most {MAX_PROMPT_BYTES} (32 KiB)",
                    prompt.len()
                ),
            );
        } else {
            prompt_ok = true;
        }
        // A prompt over the limit is not read for placeholders: that bounds the work of
        // checking every unit against them (the size is the problem to fix first).
        if prompt.len() <= MAX_PROMPT_BYTES {
            let (segments, errors) = parse_template(prompt);
            prompt_ok &= errors.is_empty();
            for e in errors {
                p.add(prompt_pos, format!("prompt: {e}"));
            }
            placeholders = placeholder_names(&segments);
        }
    }

    let mut units = Vec::new();
    match f.get("units") {
        None => p.add(
            END,
            format!(
                "missing field \"units\": list at least one unit, each {} with an id and its vars",
                format.a_table()
            ),
        ),
        Some(&(units_pos, Tree::Array(items))) => {
            if items.is_empty() {
                p.add(units_pos, "units: empty; list at least one unit");
            } else if items.len() > MAX_UNITS {
                p.add(
                    units_pos,
                    format!("units: {} units; at most {MAX_UNITS}", items.len()),
                );
            }
            let mut seen: HashMap<String, usize> = HashMap::new();
            // Over the limit, units are not checked one by one: that bounds the work (units
            // × placeholders) a document of any size can cause.
            let checked = if items.len() > MAX_UNITS {
                0
            } else {
                items.len()
            };
            for (i, item) in items.iter().enumerate().take(checked) {
                let at = format!("units[{i}]");
                let Tree::Table(entries) = item else {
                    p.add(
                        units_pos,
                        format!(
                            "{at}: must be {}, got {}",
                            format.a_table(),
                            item.kind(format)
                        ),
                    );
                    continue;
                };
                let mut q = Found::default();
                let uf = fields(&at, entries, UNIT_FIELDS, &mut q);
                let id = node_id_field(&at, uf.get("id"), &mut seen, i, format, &mut q);
                let label = match &id {
                    Some(id) => format!("{at} ({id})"),
                    None => at.clone(),
                };
                // Names present in vars, whatever their type, and the string values.
                let vars_pos = pos_of(&uf, "vars");
                let mut present = BTreeSet::new();
                let mut vars = BTreeMap::new();
                let mut vars_ok = true;
                match uf.get("vars") {
                    None => {}
                    Some((_, Tree::Table(ventries))) => {
                        for (k, v) in ventries {
                            if !present.insert(k.as_str()) {
                                q.add(vars_pos, format!("{at}.vars: duplicate key {k:?}"));
                                continue;
                            }
                            match v {
                                Tree::Str(s) => {
                                    vars.insert(k.clone(), s.clone());
                                }
                                other => q.add(
                                    vars_pos,
                                    format!(
                                        "{at}.vars.{k}: must be a string, got {}; vars take strings only, so quote it",
                                        other.kind(format)
                                    ),
                                ),
                            }
                        }
                    }
                    Some((_, other)) => {
                        vars_ok = false;
                        q.add(
                            vars_pos,
                            format!(
                                "{at}.vars: must be {} of strings, got {}",
                                format.a_table(),
                                other.kind(format)
                            ),
                        );
                    }
                }
                if vars_ok {
                    let mut missing = placeholders
                        .iter()
                        .filter(|name| !present.contains(name.as_str()));
                    for name in missing.by_ref().take(MAX_MISSING_LISTED) {
                        q.add(
                            vars_pos,
                            format!("{label}: the prompt uses {{{name}}} but vars has no {name:?}"),
                        );
                    }
                    let more = missing.count();
                    if more > 0 {
                        q.add(
                            vars_pos,
                            format!("{label}: and {more} more placeholders of the prompt are not in vars"),
                        );
                    }
                }
                match id {
                    Some(id) if q.is_empty() => {
                        let unit = Unit { id, vars };
                        if prompt_ok {
                            let len =
                                render_template(prompt.as_deref().unwrap_or(""), &unit.vars).len();
                            if len > MAX_PROMPT_BYTES {
                                q.add(
                                    END,
                                    format!(
                                        "{label}: the rendered prompt is {len} bytes; at most {MAX_PROMPT_BYTES} (32 KiB)"
                                    ),
                                );
                            }
                        }
                        units.push(unit);
                    }
                    _ => {}
                }
                p.extend_at(units_pos, q);
            }
        }
        Some(&(pos, other)) => p.add(
            pos,
            format!(
                "units: must be an array of {}s, got {}",
                format.table(),
                other.kind(format)
            ),
        ),
    }

    if !p.is_empty() {
        return Err(p.into_problems());
    }
    Ok(Manifest {
        title,
        prompt: prompt.unwrap_or_default(),
        agent,
        gate,
        units,
    })
}

// ---------------------------------------------------------------------------------------------
// Prompt templates

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Text(String),
    Var(String),
}

fn is_var_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Splits a template into text and placeholders. Problems come back as sentences (without the
/// `prompt: ` prefix); a malformed piece is kept as literal text.
fn parse_template(t: &str) -> (Vec<Segment>, Vec<String>) {
    let chars: Vec<(usize, char)> = t.char_indices().collect();
    let mut segments = Vec::new();
    let mut errors = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        let next = chars.get(i + 1).map(|x| x.1);
        match c {
            '{' if next == Some('{') => {
                text.push('{');
                i += 2;
            }
            '{' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j].1 != '}' && chars[j].1 != '{' {
                    j += 1;
                }
                if j < chars.len() && chars[j].1 == '}' {
                    let name = &t[pos + 1..chars[j].0];
                    if is_var_name(name) {
                        if !text.is_empty() {
                            segments.push(Segment::Text(std::mem::take(&mut text)));
                        }
                        segments.push(Segment::Var(name.to_string()));
                    } else {
                        let shown: String = if name.chars().count() > 40 {
                            name.chars().take(40).chain("…".chars()).collect()
                        } else {
                            name.to_string()
                        };
                        errors.push(format!(
                            "malformed placeholder \"{{{shown}}}\" at character {}; {PLACEHOLDER_FORM}",
                            i + 1
                        ));
                        text.push_str(&t[pos..chars[j].0 + 1]);
                    }
                    i = j + 1;
                } else {
                    errors.push(format!(
                        "\"{{\" at character {} is never closed; {PLACEHOLDER_FORM}",
                        i + 1
                    ));
                    text.push('{');
                    i += 1;
                }
            }
            '}' if next == Some('}') => {
                text.push('}');
                i += 2;
            }
            '}' => {
                errors.push(format!(
                    "lone \"}}\" at character {}; write }}}} for a literal brace",
                    i + 1
                ));
                text.push('}');
                i += 1;
            }
            _ => {
                text.push(c);
                i += 1;
            }
        }
    }
    if !text.is_empty() {
        segments.push(Segment::Text(text));
    }
    (segments, errors)
}

fn placeholder_names(segments: &[Segment]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<String> = Vec::new();
    for s in segments {
        if let Segment::Var(name) = s {
            if seen.insert(name.as_str()) {
                out.push(name.clone());
            }
        }
    }
    out
}

fn render_template(t: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(t.len());
    for s in parse_template(t).0 {
        match s {
            Segment::Text(s) => out.push_str(&s),
            Segment::Var(name) => match vars.get(&name) {
                Some(v) => out.push_str(v),
                None => {
                    out.push('{');
                    out.push_str(&name);
                    out.push('}');
                }
            },
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Orchestrate plans

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
const NODE_FIELDS: &[&str] = &["id", "task", "deps", "agent", "gate"];

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
                let node = match (&id, task) {
                    (Some(id), Some(task)) => Some(PlanNode {
                        id: id.clone(),
                        task,
                        deps: deps.clone(),
                        agent,
                        gate,
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

/// One problem per strongly connected component with more than one node, naming real cycles
/// (found shortest-first from the component's first node in document order) until every node of
/// the component is on one of them (at most five cycles listed per component).
fn cycle_problems(succ: &[Vec<usize>], ids: &[&str]) -> Vec<String> {
    const MAX_CYCLES: usize = 5;
    let mut comps: Vec<Vec<usize>> = strongly_connected(succ)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    for c in &mut comps {
        c.sort_unstable();
    }
    comps.sort_by_key(|c| c[0]);
    let mut out = Vec::new();
    for comp in comps {
        let in_comp: BTreeSet<usize> = comp.iter().copied().collect();
        let mut covered = BTreeSet::new();
        let mut cycles: Vec<Vec<usize>> = Vec::new();
        let mut more = false;
        for &s in &comp {
            if covered.contains(&s) {
                continue;
            }
            if cycles.len() == MAX_CYCLES {
                more = true;
                break;
            }
            let cycle = shortest_cycle(s, succ, &in_comp);
            covered.extend(cycle.iter().copied());
            cycles.push(cycle);
        }
        let write = |c: &Vec<usize>| {
            let mut names: Vec<&str> = c.iter().map(|&i| ids[i]).collect();
            names.push(ids[c[0]]);
            names.join(" → ")
        };
        let note = "(each node depends on the one before it)";
        if cycles.len() == 1 && covered.len() == comp.len() {
            out.push(format!("cycle: {} {note}", write(&cycles[0])));
        } else {
            let members: Vec<&str> = comp.iter().map(|&i| ids[i]).collect();
            let listed: Vec<String> = cycles.iter().map(write).collect();
            out.push(format!(
                "cycles among {}: {}{} {note}",
                members.join(", "),
                listed.join("; "),
                if more { "; …" } else { "" }
            ));
        }
    }
    out
}

/// The shortest cycle through `s` staying inside `within`, starting at `s` (without repeating
/// it at the end). `s` must lie on a cycle inside `within`.
fn shortest_cycle(s: usize, succ: &[Vec<usize>], within: &BTreeSet<usize>) -> Vec<usize> {
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([s]);
    while let Some(u) = queue.pop_front() {
        for &w in &succ[u] {
            if !within.contains(&w) {
                continue;
            }
            if w == s {
                let mut path = vec![u];
                let mut at = u;
                while at != s {
                    at = parent[&at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(w) {
                e.insert(u);
                queue.push_back(w);
            }
        }
    }
    vec![s]
}

/// Tarjan's algorithm, iterative (no recursion depth to worry about).
fn strongly_connected(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = succ.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&(v, e)) = call.last() {
            if e < succ[v].len() {
                if let Some(top) = call.last_mut() {
                    top.1 += 1;
                }
                let w = succ[v][e];
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(u, _)) = call.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    out.push(comp);
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Parallelism

/// The cap `auto` picks: `max(1, min(2 × cores, floor(mem_available / 1 GiB)))`, at most 32.
///
/// Agents spend most of their time waiting on the model API, not on the CPU, so two agents per
/// core keep the machine busy without starving it; but each agent with its tools (a language
/// server, a build, the test suite) wants about 1 GiB of memory, so available memory bounds it
/// too. At least one agent always runs, and no more than 32 are started by `auto` (beyond that,
/// merges, API rate limits and a human's attention are the bottleneck; ask for more explicitly
/// with `--max-parallel N`).
pub fn auto_parallel(cores: usize, mem_available_bytes: u64) -> usize {
    let by_mem = usize::try_from(mem_available_bytes / GIB).unwrap_or(usize::MAX);
    cores
        .saturating_mul(2)
        .min(by_mem)
        .clamp(1, AUTO_PARALLEL_CAP)
}

/// The `--max-parallel` setting: `auto` (derived from the machine by [`auto_parallel`]) or a
/// number from 1 to [`MAX_PARALLEL`]. Serialized as `"auto"` or a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MaxParallel {
    #[default]
    Auto,
    N(usize),
}

impl MaxParallel {
    /// The cap to use on a machine with `cores` and `mem_available_bytes`.
    pub fn resolve(self, cores: usize, mem_available_bytes: u64) -> usize {
        match self {
            MaxParallel::Auto => auto_parallel(cores, mem_available_bytes),
            MaxParallel::N(n) => n,
        }
    }

    /// From an RPC parameter: a number, or a string as [`parse_max_parallel`] takes it.
    pub fn from_json(v: &serde_json::Value) -> Result<MaxParallel, AppError> {
        match v {
            serde_json::Value::String(s) => parse_max_parallel(s),
            serde_json::Value::Number(n) => match n.as_u64() {
                Some(k) if (1..=MAX_PARALLEL as u64).contains(&k) => Ok(MaxParallel::N(k as usize)),
                _ => Err(max_parallel_error(&n.to_string())),
            },
            other => Err(max_parallel_error(&other.to_string())),
        }
    }
}

impl fmt::Display for MaxParallel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaxParallel::Auto => f.write_str("auto"),
            MaxParallel::N(n) => write!(f, "{n}"),
        }
    }
}

impl Serialize for MaxParallel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MaxParallel::Auto => s.serialize_str("auto"),
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

fn max_parallel_error(given: &str) -> AppError {
    AppError::invalid(format!(
        "invalid --max-parallel {given:?}: use a number from 1 to {MAX_PARALLEL}, or auto"
    ))
}

/// Parses `--max-parallel`: `auto` (any case) or a number from 1 to 256.
pub fn parse_max_parallel(s: &str) -> Result<MaxParallel, AppError> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("auto") {
        return Ok(MaxParallel::Auto);
    }
    match t.parse::<usize>() {
        Ok(n) if (1..=MAX_PARALLEL).contains(&n) && t.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(MaxParallel::N(n))
        }
        _ => Err(max_parallel_error(s)),
    }
}

// ---------------------------------------------------------------------------------------------
// The document tree both formats are read into, and helpers to walk it

/// A parsed document with keys in document order. Only strings keep their value: nothing in
/// either schema takes another scalar.
#[derive(Debug, Clone, PartialEq)]
enum Tree {
    Str(String),
    Num,
    Bool,
    Datetime,
    Null,
    Array(Vec<Tree>),
    Table(Vec<(String, Tree)>),
}

impl Tree {
    fn kind(&self, format: Format) -> &'static str {
        match self {
            Tree::Str(_) => "a string",
            Tree::Num => "a number",
            Tree::Bool => "a boolean",
            Tree::Datetime => "a date-time",
            Tree::Null => "null",
            Tree::Array(_) => "an array",
            Tree::Table(_) => format.a_table(),
        }
    }
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Tree, E> {
        Ok(Tree::Bool)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Tree, E> {
        Ok(Tree::Num)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Tree, E> {
        Ok(Tree::Num)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Tree, E> {
        Ok(Tree::Num)
    }
    fn visit_str<E>(self, v: &str) -> Result<Tree, E> {
        Ok(Tree::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Tree, E> {
        Ok(Tree::Str(v))
    }
    fn visit_unit<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }
    fn visit_none<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Tree, D::Error> {
        Tree::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Tree::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Tree>()? {
            entries.push((k, v));
        }
        Ok(Tree::Table(entries))
    }
}

fn toml_tree(v: &toml::de::DeValue<'_>) -> Tree {
    use toml::de::DeValue;
    match v {
        DeValue::String(s) => Tree::Str(s.to_string()),
        DeValue::Integer(_) | DeValue::Float(_) => Tree::Num,
        DeValue::Boolean(_) => Tree::Bool,
        DeValue::Datetime(_) => Tree::Datetime,
        DeValue::Array(items) => {
            Tree::Array(items.iter().map(|x| toml_tree(x.get_ref())).collect())
        }
        DeValue::Table(t) => toml_table(t),
    }
}

/// A TOML table with its keys put back in document order (by where each key first appears).
fn toml_table(t: &toml::de::DeTable<'_>) -> Tree {
    let mut entries: Vec<_> = t.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    Tree::Table(
        entries
            .into_iter()
            .map(|(k, v)| (k.get_ref().to_string(), toml_tree(v.get_ref())))
            .collect(),
    )
}

/// Line and column (both from 1, the column in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

fn one_line(s: &str) -> String {
    s.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Parses the document; a syntax error is the only problem, with its line and column. The top
/// level must be a table (an object).
fn parse_top(text: &str, format: Format, what: &str) -> Result<Vec<(String, Tree)>, Problems> {
    let tree = match format {
        Format::Toml => match toml::de::DeTable::parse(text) {
            Ok(t) => toml_table(t.get_ref()),
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let (line, col) = line_col(text, span.start);
                let mut msg = format!(
                    "TOML syntax error at line {line}, column {col}: {}",
                    one_line(e.message())
                );
                if let Some(near) = text
                    .get(span)
                    .filter(|s| !s.trim().is_empty() && s.len() <= 40 && !s.contains('\n'))
                {
                    msg.push_str(&format!(" (at {near:?})"));
                }
                return Err(Problems(vec![msg]));
            }
        },
        Format::Json => match serde_json::from_str::<Tree>(text) {
            Ok(t) => t,
            Err(e) => {
                let full = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                let msg = full.strip_suffix(&suffix).unwrap_or(&full);
                return Err(Problems(vec![format!(
                    "JSON syntax error at line {}, column {}: {}",
                    e.line(),
                    e.column(),
                    one_line(msg)
                )]));
            }
        },
    };
    match tree {
        Tree::Table(entries) => Ok(entries),
        other => Err(Problems(vec![format!(
            "the {what} must be {}, got {}",
            format.a_table(),
            other.kind(format)
        )])),
    }
}

/// Position used for problems about something absent: after everything that is present.
const END: usize = usize::MAX;

/// Problems of one table, each tagged with the position (in document order) of the field it is
/// about, so they can be listed in document order whatever order they were found in.
#[derive(Debug, Default)]
struct Found(Vec<(usize, String)>);

impl Found {
    fn add(&mut self, pos: usize, msg: impl Into<String>) {
        self.0.push((pos, msg.into()));
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds the problems of a nested table, in their own order, at `pos`.
    fn extend_at(&mut self, pos: usize, inner: Found) {
        for msg in inner.into_problems().0 {
            self.0.push((pos, msg));
        }
    }

    fn into_problems(mut self) -> Problems {
        self.0.sort_by_key(|(pos, _)| *pos); // stable: same position keeps finding order
        Problems(self.0.into_iter().map(|(_, msg)| msg).collect())
    }
}

type Fields<'t> = BTreeMap<&'t str, (usize, &'t Tree)>;

fn pos_of(f: &Fields<'_>, name: &str) -> usize {
    f.get(name).map_or(END, |(pos, _)| *pos)
}

/// The accepted fields of a table with their positions. Reports unknown fields (with the
/// accepted ones and a close match) and repeated ones; a `null` value counts as absent.
fn fields<'t>(
    at: &str,
    entries: &'t [(String, Tree)],
    accepted: &[&str],
    p: &mut Found,
) -> Fields<'t> {
    let mut out = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (pos, (k, v)) in entries.iter().enumerate() {
        if !accepted.contains(&k.as_str()) {
            let mut msg = format!(
                "{at}: unknown field {k:?}; accepted: {}",
                accepted.join(", ")
            );
            if let Some(close) = did_you_mean(k, accepted) {
                msg.push_str(&format!("; did you mean {close:?}?"));
            }
            p.add(pos, msg);
        } else if !seen.insert(k.as_str()) {
            p.add(pos, format!("{at}: field {k:?} is given twice"));
        } else if *v != Tree::Null {
            out.insert(k.as_str(), (pos, v));
        }
    }
    out
}

fn string_value(at: &str, v: &Tree, format: Format, pos: usize, p: &mut Found) -> Option<String> {
    match v {
        Tree::Str(s) => Some(s.clone()),
        other => {
            p.add(
                pos,
                format!("{at}: must be a string, got {}", other.kind(format)),
            );
            None
        }
    }
}

fn opt_string(
    at: &str,
    v: Option<&(usize, &Tree)>,
    format: Format,
    p: &mut Found,
) -> Option<String> {
    v.and_then(|&(pos, v)| string_value(at, v, format, pos, p))
}

/// An optional agent profile name, in node-id form.
fn opt_agent(
    at: &str,
    v: Option<&(usize, &Tree)>,
    format: Format,
    p: &mut Found,
) -> Option<String> {
    let agent = opt_string(at, v, format, p)?;
    if !is_node_id(&agent) {
        p.add(
            v.map_or(END, |(pos, _)| *pos),
            format!("{at} {agent:?}: {NAME_FORM} (the name of an agent profile)"),
        );
    }
    Some(agent)
}

/// An optional gate: a shell command, not blank.
fn opt_gate(at: &str, v: Option<&(usize, &Tree)>, format: Format, p: &mut Found) -> Option<String> {
    let gate = opt_string(at, v, format, p)?;
    if gate.trim().is_empty() {
        p.add(
            v.map_or(END, |(pos, _)| *pos),
            format!("{at}: empty; give a shell command, or leave the field out for no gate"),
        );
    }
    Some(gate)
}

/// The `id` of a unit or node: present, a string, in node-id form and not used before.
fn node_id_field(
    at: &str,
    v: Option<&(usize, &Tree)>,
    seen: &mut HashMap<String, usize>,
    i: usize,
    format: Format,
    p: &mut Found,
) -> Option<String> {
    let Some(&(pos, v)) = v else {
        p.add(END, format!("{at}: missing field \"id\""));
        return None;
    };
    let id = string_value(&format!("{at}.id"), v, format, pos, p)?;
    if !is_node_id(&id) {
        p.add(pos, format!("{at}.id {id:?}: {NAME_FORM}"));
        return None;
    }
    if let Some(why) = crate::ids::reserved_node_id(&id) {
        p.add(
            pos,
            format!("{at}.id {id:?}: reserved ({why}); choose another id"),
        );
        return None;
    }
    let section = at.split('[').next().unwrap_or(at);
    if let Some(&first) = seen.get(&id) {
        p.add(
            pos,
            format!("{at}.id {id:?}: duplicate; {section}[{first}] has the same id"),
        );
        return None;
    }
    seen.insert(id.clone(), i);
    Some(id)
}

fn list_names(names: &[&str], max: usize) -> String {
    if names.is_empty() {
        return "(none)".into();
    }
    let mut s = names
        .iter()
        .take(max)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        s.push_str(&format!(", … ({} more)", names.len() - max));
    }
    s
}

/// The closest candidate within a small edit distance (adjacent swaps count as one edit).
fn did_you_mean<'a>(given: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let given_len = given.chars().count();
    candidates
        .iter()
        // The distance is at least the difference in length: skip those that cannot be
        // close without computing it (a long given string would cost its length squared).
        .filter(|c| c.chars().count().abs_diff(given_len) <= 2)
        .map(|c| (edit_distance(given, c), *c))
        .filter(|(d, _)| *d <= 2 && *d < given_len)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal string alignment distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    const GOOD_TOML: &str = r#"
title = "translate the docs"
prompt = "Translate {file} into {lang}; keep the formatting. Literal: {{x}}"
agent = "claude"
gate = "make check"

[[units]]
id = "fr"
vars = { file = "README.md", lang = "French", unused = "fine" }

[[units]]
id = "de"
vars = { file = "README.md", lang = "German" }
"#;

    const GOOD_JSON: &str = r#"{
  "title": "translate the docs",
  "prompt": "Translate {file} into {lang}; keep the formatting. Literal: {{x}}",
  "agent": "claude",
  "gate": "make check",
  "units": [
    {"id": "fr", "vars": {"file": "README.md", "lang": "French", "unused": "fine"}},
    {"id": "de", "vars": {"file": "README.md", "lang": "German"}}
  ]
}"#;

    fn manifest_problems(text: &str, format: Format) -> Vec<String> {
        parse_manifest(text, format).unwrap_err().0
    }

    fn plan_problems(text: &str) -> Vec<String> {
        parse_plan(text, Format::Toml).unwrap_err().0
    }

    #[test]
    fn reserved_ids_are_refused_naming_the_field() {
        let problems = plan_problems(
            "[[nodes]]\nid = \"api\"\ntask = \"t\"\n[[nodes]]\nid = \"integration\"\ntask = \"t\"\ndeps = [\"api\"]\n",
        );
        assert_eq!(
            problems,
            ["nodes[1].id \"integration\": reserved (the daemon names an orchestrate run's integration branch octl/<RUN>/integration); choose another id"]
        );
        let problems = manifest_problems(
            "prompt = \"p\"\n[[units]]\nid = \"integration\"\n",
            Format::Toml,
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("units[0].id \"integration\": reserved"),
            "{problems:?}"
        );
        // Only the exact name: ids that contain it are fine.
        assert!(parse_plan(
            "[[nodes]]\nid = \"integration-tests\"\ntask = \"t\"\n",
            Format::Toml
        )
        .is_ok());
    }

    #[test]
    fn good_manifest_in_both_formats_renders() {
        let m = parse_manifest(GOOD_TOML, Format::Toml).unwrap();
        assert_eq!(m, parse_manifest(GOOD_JSON, Format::Json).unwrap());
        assert_eq!(m.title.as_deref(), Some("translate the docs"));
        assert_eq!(m.agent.as_deref(), Some("claude"));
        assert_eq!(m.gate.as_deref(), Some("make check"));
        let ids: Vec<&str> = m.units.iter().map(|u| u.id.as_str()).collect();
        assert_eq!(ids, ["fr", "de"]);
        assert_eq!(
            m.render(&m.units[1]),
            "Translate README.md into German; keep the formatting. Literal: {x}"
        );
        assert_eq!(m.placeholders(), ["file", "lang"]);
        assert_eq!(m.unit("fr").unwrap().vars["lang"], "French");
    }

    #[test]
    fn minimal_manifest_without_placeholders_needs_no_vars() {
        let m = parse_manifest(
            "prompt = \"tidy up }} {{\"\n[[units]]\nid = \"a\"\n",
            Format::Toml,
        )
        .unwrap();
        assert_eq!(m.render(&m.units[0]), "tidy up } {");
        assert_eq!(m.title, None);
        // JSON null counts as absent for optional fields.
        let m = parse_manifest(
            r#"{"prompt":"p {x}","agent":null,"units":[{"id":"a","vars":{"x":"1"}}]}"#,
            Format::Json,
        )
        .unwrap();
        assert_eq!(m.agent, None);
        assert_eq!(m.render(&m.units[0]), "p 1");
    }

    #[test]
    fn render_substitutes_repeated_placeholders_and_keeps_values_verbatim() {
        let m = parse_manifest(
            r#"{"prompt":"{a}-{a}-{b}","units":[{"id":"u","vars":{"a":"{b}","b":"x}}"}}]}"#,
            Format::Json,
        )
        .unwrap();
        assert_eq!(m.render(&m.units[0]), "{b}-{b}-x}}");
    }

    #[test]
    fn formats_by_path_and_name() {
        assert_eq!(Format::from_path("plan.toml").unwrap(), Format::Toml);
        assert_eq!(Format::from_path("dir.d/Plan.JSON").unwrap(), Format::Json);
        for bad in ["plan.yaml", "plan", ".toml", "dir.toml/plan", ""] {
            let err = Format::from_path(bad).unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidParams);
            assert!(err.message.contains(".toml or .json"), "{}", err.message);
        }
        assert_eq!(Format::from_name("JSON").unwrap(), Format::Json);
        assert!(Format::from_name("yaml").is_err());
        assert_eq!(Format::Toml.to_string(), "toml");
    }

    #[test]
    fn unknown_fields_everywhere_with_accepted_and_close_match() {
        let p = manifest_problems(
            r#"
promt = "x"
prompt = "Do {a}"
[[units]]
id = "a"
vars = { a = "1" }
[[units]]
id = "b"
vars = { a = "1" }
[[units]]
id = "c"
vras = { a = "1" }
"#,
            Format::Toml,
        );
        assert_eq!(
            p,
            [
                "top level: unknown field \"promt\"; accepted: title, prompt, agent, gate, units; did you mean \"prompt\"?",
                "units[2]: unknown field \"vras\"; accepted: id, vars; did you mean \"vars\"?",
                "units[2] (c): the prompt uses {a} but vars has no \"a\"",
            ]
        );
        assert!(p[1].starts_with("units[2]: unknown field \"vras\"; accepted: id, vars"));
    }

    #[test]
    fn toml_problems_come_in_document_order_not_key_order() {
        let p = manifest_problems(
            "zeta = 1\nalpha = 2\nprompt = \"p\"\n[[units]]\nid = \"a\"\n",
            Format::Toml,
        );
        assert!(p[0].contains("\"zeta\""), "{p:?}");
        assert!(p[1].contains("\"alpha\""), "{p:?}");
    }

    #[test]
    fn missing_and_empty_required_fields() {
        let p = manifest_problems("title = \"t\"\n", Format::Toml);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].starts_with("missing field \"prompt\""), "{p:?}");
        assert!(p[1].starts_with("missing field \"units\""), "{p:?}");

        let p = manifest_problems(r#"{"prompt":"  ","units":[]}"#, Format::Json);
        assert_eq!(
            p,
            [
                "prompt: empty; write the template every unit renders",
                "units: empty; list at least one unit",
            ]
        );

        let p = manifest_problems(
            r#"{"prompt":3,"units":{"id":"a"},"agent":"Claude","gate":" "}"#,
            Format::Json,
        );
        assert_eq!(
            p,
            [
                "prompt: must be a string, got a number",
                "units: must be an array of objects, got an object",
                "agent \"Claude\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit (the name of an agent profile)",
                "gate: empty; give a shell command, or leave the field out for no gate",
            ]
        );
    }

    #[test]
    fn unit_ids_invalid_missing_and_duplicate() {
        let p = manifest_problems(
            r#"
prompt = "p"
[[units]]
id = "fr"
[[units]]
id = "Bad_Id"
[[units]]
vars = {}
[[units]]
id = 7
[[units]]
id = "fr"
"#,
            Format::Toml,
        );
        assert_eq!(
            p,
            [
                "units[1].id \"Bad_Id\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit",
                "units[2]: missing field \"id\"",
                "units[3].id: must be a string, got a number",
                "units[4].id \"fr\": duplicate; units[0] has the same id",
            ]
        );
    }

    #[test]
    fn unfilled_placeholders_per_unit_and_unused_vars_are_fine() {
        let p = manifest_problems(
            r#"
prompt = "Translate {file} into {lang}, {lang} again"
[[units]]
id = "fr"
vars = { file = "README.md", extra = "unused" }
[[units]]
id = "de"
[[units]]
id = "it"
vars = { file = "a", lang = "Italian", more = "unused" }
"#,
            Format::Toml,
        );
        assert_eq!(
            p,
            [
                "units[0] (fr): the prompt uses {lang} but vars has no \"lang\"",
                "units[1] (de): the prompt uses {file} but vars has no \"file\"",
                "units[1] (de): the prompt uses {lang} but vars has no \"lang\"",
            ]
        );
    }

    #[test]
    fn vars_take_strings_only() {
        let p = manifest_problems(
            r#"
prompt = "n={n} ok={ok}"
[[units]]
id = "a"
vars = { n = 3, ok = true }
[[units]]
id = "b"
vars = ["n"]
"#,
            Format::Toml,
        );
        assert_eq!(
            p,
            [
                "units[0].vars.n: must be a string, got a number; vars take strings only, so quote it",
                "units[0].vars.ok: must be a string, got a boolean; vars take strings only, so quote it",
                "units[1].vars: must be a table of strings, got an array",
            ]
        );
        let p = manifest_problems(
            r#"{"prompt":"{n}","units":[{"id":"a","vars":{"n":null}},"b"]}"#,
            Format::Json,
        );
        assert_eq!(
            p,
            [
                "units[0].vars.n: must be a string, got null; vars take strings only, so quote it",
                "units[1]: must be an object, got a string",
            ]
        );
    }

    #[test]
    fn malformed_placeholders_are_each_reported() {
        let p = manifest_problems(
            "prompt = \"a {bad name} b {} c } d {open e {ok} {{fine}}\"\n[[units]]\nid = \"u\"\nvars = { ok = \"1\" }\n",
            Format::Toml,
        );
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(
            p[0].starts_with("prompt: malformed placeholder \"{bad name}\" at character 3; a placeholder is {name}"),
            "{p:?}"
        );
        assert!(
            p[1].starts_with("prompt: malformed placeholder \"{}\" at character 16"),
            "{p:?}"
        );
        assert_eq!(
            p[2],
            "prompt: lone \"}\" at character 21; write }} for a literal brace"
        );
        assert!(
            p[3].starts_with("prompt: \"{\" at character 25 is never closed"),
            "{p:?}"
        );
        assert!(
            p[3].ends_with("write {{ or }} for a literal brace"),
            "{p:?}"
        );

        let p = manifest_problems("prompt = \"tail {\"\n[[units]]\nid = \"u\"\n", Format::Toml);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("character 6 is never closed"), "{p:?}");

        // A unit still has to fill the well-formed placeholders of a prompt with a bad one.
        let p = manifest_problems(
            "prompt = \"{a} {b c}\"\n[[units]]\nid = \"u\"\n",
            Format::Toml,
        );
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(
            p[1],
            "units[0] (u): the prompt uses {a} but vars has no \"a\""
        );
    }

    #[test]
    fn placeholder_name_rules() {
        let (segs, errs) = parse_template("{a_b-9}{Z}");
        assert!(errs.is_empty());
        assert_eq!(placeholder_names(&segs), ["a_b-9", "Z"]);
        let long = "x".repeat(65);
        assert_eq!(parse_template(&format!("{{{long}}}")).1.len(), 1);
        assert_eq!(parse_template("{é}").1.len(), 1);
    }

    #[test]
    fn manifest_limits() {
        let mut text = String::from("prompt = \"p\"\n");
        for i in 0..=MAX_UNITS {
            text.push_str(&format!("[[units]]\nid = \"u{i}\"\n"));
        }
        assert_eq!(
            manifest_problems(&text, Format::Toml),
            ["units: 1001 units; at most 1000"]
        );
        let mut ok = String::from("prompt = \"p\"\n");
        for i in 0..MAX_UNITS {
            ok.push_str(&format!("[[units]]\nid = \"u{i}\"\n"));
        }
        assert_eq!(parse_manifest(&ok, Format::Toml).unwrap().units.len(), 1000);

        let big = "x".repeat(MAX_PROMPT_BYTES + 1);
        let p = manifest_problems(
            &format!("prompt = \"{big}\"\n[[units]]\nid = \"u\"\n"),
            Format::Toml,
        );
        assert_eq!(p, ["prompt: 32769 bytes; at most 32768 (32 KiB)"]);

        let half = "x".repeat(MAX_PROMPT_BYTES / 2);
        let p = manifest_problems(
            &format!(
                "prompt = \"{half}{{v}}\"\n[[units]]\nid = \"small\"\nvars = {{ v = \"y\" }}\n[[units]]\nid = \"big\"\nvars = {{ v = \"{half}xx\" }}\n"
            ),
            Format::Toml,
        );
        assert_eq!(
            p,
            [format!(
                "units[1] (big): the rendered prompt is {} bytes; at most 32768 (32 KiB)",
                MAX_PROMPT_BYTES + 2
            )]
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("units[1] (big): the rendered prompt is "),
            "{p:?}"
        );
    }

    #[test]
    fn syntax_errors_are_one_problem_with_line_and_column() {
        let p = manifest_problems("prompt = \"p\"\n[[units]]\nid = \n", Format::Toml);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("TOML syntax error at line 3, column "),
            "{p:?}"
        );
        assert!(!p[0].contains('\n'));

        let p = manifest_problems("{\n  \"prompt\": \"p\",\n  \"units\": [,]\n}", Format::Json);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("JSON syntax error at line 3, column 13: "),
            "{p:?}"
        );
        assert!(!p[0].ends_with("column 13"), "{p:?}");

        let p = manifest_problems("", Format::Json);
        assert!(p[0].starts_with("JSON syntax error at line 1"), "{p:?}");
        let p = manifest_problems("[1]", Format::Json);
        assert_eq!(p, ["the manifest must be an object, got an array"]);

        // Keys repeated in TOML are the TOML parser's to refuse; in JSON they are ours.
        let p = manifest_problems("prompt = \"a\"\nprompt = \"b\"\n", Format::Toml);
        assert_eq!(
            p,
            ["TOML syntax error at line 2, column 1: duplicate key (at \"prompt\")"]
        );
        let p = manifest_problems(
            r#"{"prompt":"a","prompt":"b","units":[{"id":"a","vars":{"x":"1","x":"2"}}]}"#,
            Format::Json,
        );
        assert_eq!(
            p,
            [
                "top level: field \"prompt\" is given twice",
                "units[0].vars: duplicate key \"x\"",
            ]
        );
    }

    #[test]
    fn four_different_manifest_problems_reported_together() {
        let text = r#"
prompt = "Translate {file} into {lang}"
[[units]]
id = "fr"
vars = { file = "README.md", lang = "French" }
[[units]]
id = "Bad_Id"
vars = { file = "README.md", lang = "German" }
[[units]]
id = "fr"
vars = { file = "a", lang = "b" }
[[units]]
id = "it"
vras = { file = "a", lang = "b" }
vars = { file = "a" }
"#;
        let problems = parse_manifest(text, Format::Toml).unwrap_err();
        assert_eq!(
            problems.0,
            [
                "units[1].id \"Bad_Id\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit",
                "units[2].id \"fr\": duplicate; units[0] has the same id",
                "units[3]: unknown field \"vras\"; accepted: id, vars; did you mean \"vars\"?",
                "units[3] (it): the prompt uses {lang} but vars has no \"lang\"",
            ]
        );
        let err = problems.into_error("manifest plan.toml");
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert_eq!(
            err.message,
            "invalid manifest plan.toml: 4 problems:\n  - units[1].id \"Bad_Id\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit\n  - units[2].id \"fr\": duplicate; units[0] has the same id\n  - units[3]: unknown field \"vras\"; accepted: id, vars; did you mean \"vars\"?\n  - units[3] (it): the prompt uses {lang} but vars has no \"lang\""
        );
    }

    #[test]
    fn problems_into_error_counts_and_caps() {
        let one = Problems(vec!["x".into()]).into_error("plan p.json");
        assert_eq!(one.message, "invalid plan p.json: 1 problem:\n  - x");
        let many = Problems((0..105).map(|i| format!("p{i}")).collect());
        assert_eq!(many.len(), 105);
        assert_eq!(many.to_string().lines().count(), 105);
        let msg = many.into_error("plan p.json").message;
        assert!(msg.starts_with("invalid plan p.json: 105 problems:\n  - p0\n"));
        assert!(msg.contains("\n  - p99\n  - … and 5 more"), "{msg}");
        assert!(!msg.contains("p100"));
    }

    const DIAMOND: &str = r#"
title = "payments v2"
[[nodes]]
id = "d"
task = "integrate"
deps = ["b", "c"]
gate = "cargo test"
[[nodes]]
id = "c"
task = "web"
deps = ["a"]
[[nodes]]
id = "b"
task = "api"
deps = ["a"]
agent = "shell"
[[nodes]]
id = "a"
task = "schema"
"#;

    #[test]
    fn diamond_plan_order_and_dependents() {
        let plan = parse_plan(DIAMOND, Format::Toml).unwrap();
        assert_eq!(plan.title.as_deref(), Some("payments v2"));
        let ids: Vec<&str> = plan.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["d", "c", "b", "a"], "document order kept");
        assert_eq!(
            plan.order(),
            ["a", "c", "b", "d"],
            "stable by document order"
        );
        assert_eq!(plan.dependents("a"), ["d", "c", "b"]);
        assert_eq!(plan.dependents("b"), ["d"]);
        assert!(plan.dependents("d").is_empty());
        assert!(plan.dependents("nope").is_empty());
        let d = plan.node("d").unwrap();
        assert_eq!(d.deps, ["b", "c"]);
        assert_eq!(d.gate.as_deref(), Some("cargo test"));
        assert_eq!(plan.node("b").unwrap().agent.as_deref(), Some("shell"));
        assert!(plan.node("a").unwrap().deps.is_empty());

        let plan = parse_plan(
            r#"{"nodes":[{"id":"a","task":"A"},{"id":"b","task":"B","deps":["a"]},
                {"id":"c","task":"C","deps":["a"]},{"id":"d","task":"D","deps":["b","c"]}]}"#,
            Format::Json,
        )
        .unwrap();
        assert_eq!(plan.order(), ["a", "b", "c", "d"]);
        assert_eq!(plan.dependents("b"), ["d"]);
        assert_eq!(plan.dependents("a"), ["b", "c", "d"]);
    }

    #[test]
    fn order_prefers_earlier_nodes_among_the_ready() {
        let plan = parse_plan(
            r#"
[[nodes]]
id = "x"
task = "x"
deps = ["z"]
[[nodes]]
id = "y"
task = "y"
[[nodes]]
id = "z"
task = "z"
"#,
            Format::Toml,
        )
        .unwrap();
        assert_eq!(plan.order(), ["y", "z", "x"]);
    }

    #[test]
    fn cycle_and_unknown_dep_reported_together() {
        let p = plan_problems(
            r#"
[[nodes]]
id = "a"
task = "A"
deps = ["c"]
[[nodes]]
id = "b"
task = "B"
deps = ["a"]
[[nodes]]
id = "c"
task = "C"
deps = ["b"]
[[nodes]]
id = "deploy"
task = "ship"
deps = ["tset", "a"]
"#,
        );
        assert_eq!(
            p,
            [
                "nodes[3] (deploy): unknown dep \"tset\"; known: a, b, c, deploy",
                "cycle: a → b → c → a (each node depends on the one before it)",
            ]
        );
        let err = Problems(p).into_error("plan plan.toml");
        assert!(err
            .message
            .starts_with("invalid plan plan.toml: 2 problems:\n  - "));
    }

    #[test]
    fn unknown_dep_suggests_a_close_id() {
        let p = plan_problems(
            r#"
[[nodes]]
id = "api"
task = "A"
[[nodes]]
id = "web"
task = "W"
[[nodes]]
id = "deploy"
task = "D"
deps = ["tset"]
[[nodes]]
id = "test"
task = "T"
"#,
        );
        assert_eq!(
            p,
            ["nodes[2] (deploy): unknown dep \"tset\"; known: api, web, deploy, test; did you mean \"test\"?"]
        );
    }

    #[test]
    fn every_cycle_is_named_and_self_loops_apart() {
        let p = plan_problems(
            r#"
[[nodes]]
id = "a"
task = "A"
deps = ["b"]
[[nodes]]
id = "b"
task = "B"
deps = ["a"]
[[nodes]]
id = "s"
task = "S"
deps = ["s"]
[[nodes]]
id = "x"
task = "X"
deps = ["y", "a"]
[[nodes]]
id = "y"
task = "Y"
deps = ["x"]
"#,
        );
        assert_eq!(
            p,
            [
                "nodes[2] (s): depends on itself",
                "cycle: a → b → a (each node depends on the one before it)",
                "cycle: x → y → x (each node depends on the one before it)",
            ]
        );
    }

    #[test]
    fn a_component_of_several_cycles_names_them_all() {
        // a ⇄ b and a ⇄ c: one strongly connected component, no single cycle through all three.
        let p = plan_problems(
            r#"
[[nodes]]
id = "a"
task = "A"
deps = ["b", "c"]
[[nodes]]
id = "b"
task = "B"
deps = ["a"]
[[nodes]]
id = "c"
task = "C"
deps = ["a"]
"#,
        );
        assert_eq!(
            p,
            ["cycles among a, b, c: a → b → a; c → a → c (each node depends on the one before it)"]
        );
    }

    #[test]
    fn plan_node_problems() {
        let p = plan_problems(
            r#"
titel = "x"
[[nodes]]
id = "a"
task = ""
deps = "b"
[[nodes]]
id = "a"
task = "again"
[[nodes]]
task = "no id"
agent = "Bad"
gate = ""
[[nodes]]
id = "b"
tsak = "typo"
deps = ["a", "a", 3]
"#,
        );
        assert_eq!(
            p,
            [
                "top level: unknown field \"titel\"; accepted: title, nodes; did you mean \"title\"?",
                "nodes[0].task: empty; say what the node's agent is to do",
                "nodes[0].deps: must be an array of node ids, got a string",
                "nodes[1].id \"a\": duplicate; nodes[0] has the same id",
                "nodes[2].agent \"Bad\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit (the name of an agent profile)",
                "nodes[2].gate: empty; give a shell command, or leave the field out for no gate",
                "nodes[2]: missing field \"id\"",
                "nodes[3]: unknown field \"tsak\"; accepted: id, task, deps, agent, gate; did you mean \"task\"?",
                "nodes[3] (b): dep \"a\" is listed twice",
                "nodes[3].deps[2]: must be a string (a node id), got a number",
                "nodes[3]: missing field \"task\": say what the node's agent is to do",
            ]
        );
    }

    #[test]
    fn plan_missing_empty_and_too_many_nodes() {
        assert_eq!(
            plan_problems("title = \"t\"\n"),
            ["missing field \"nodes\": list at least one node, each a table with an id and a task"]
        );
        assert_eq!(
            parse_plan(r#"{"nodes":[]}"#, Format::Json).unwrap_err().0,
            ["nodes: empty; list at least one node"]
        );
        let mut text = String::new();
        for i in 0..=MAX_NODES {
            let dep = if i > 0 {
                format!("deps = [\"n{}\"]\n", i - 1)
            } else {
                String::new()
            };
            text.push_str(&format!("[[nodes]]\nid = \"n{i}\"\ntask = \"t\"\n{dep}"));
        }
        assert_eq!(plan_problems(&text), ["nodes: 501 nodes; at most 500"]);
        let p = plan_problems(&format!(
            "[[nodes]]\nid = \"a\"\ntask = \"{}\"\n",
            "x".repeat(MAX_TASK_BYTES + 1)
        ));
        assert_eq!(p, ["nodes[0].task: 32769 bytes; at most 32768 (32 KiB)"]);
    }

    #[test]
    fn a_long_chain_has_no_false_cycles_and_orders_fully() {
        let mut text = String::new();
        for i in 0..MAX_NODES {
            let dep = if i > 0 {
                format!("deps = [\"n{}\"]\n", i - 1)
            } else {
                String::new()
            };
            text.push_str(&format!("[[nodes]]\nid = \"n{i}\"\ntask = \"t\"\n{dep}"));
        }
        let plan = parse_plan(&text, Format::Toml).unwrap();
        assert_eq!(plan.order().len(), MAX_NODES);
        assert_eq!(plan.order()[MAX_NODES - 1], "n499");
        assert_eq!(plan.dependents("n0").len(), MAX_NODES - 1);
        // and a cycle through all of them is one problem naming all of them
        text = text.replacen("task = \"t\"\n", "task = \"t\"\ndeps = [\"n499\"]\n", 1);
        let p = plan_problems(&text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("cycle: n0 → n1 → n2 → "), "{p:?}");
        assert!(p[0].contains("n499 → n0 (each"), "{p:?}");
    }

    #[test]
    fn auto_parallel_formula() {
        assert_eq!(auto_parallel(8, 64 * GIB), 16);
        assert_eq!(auto_parallel(8, 6 * GIB + GIB / 2), 6);
        assert_eq!(auto_parallel(0, 0), 1);
        assert_eq!(auto_parallel(4, GIB - 1), 1);
        assert_eq!(auto_parallel(64, 1024 * GIB), 32);
        assert_eq!(auto_parallel(usize::MAX, u64::MAX), 32);
        assert_eq!(MaxParallel::Auto.resolve(2, 64 * GIB), 4);
        assert_eq!(MaxParallel::N(100).resolve(2, 0), 100);
    }

    #[test]
    fn max_parallel_values() {
        assert_eq!(parse_max_parallel("auto").unwrap(), MaxParallel::Auto);
        assert_eq!(parse_max_parallel("AUTO").unwrap(), MaxParallel::Auto);
        assert_eq!(parse_max_parallel("1").unwrap(), MaxParallel::N(1));
        assert_eq!(parse_max_parallel("256").unwrap(), MaxParallel::N(256));
        for bad in ["0", "257", "-1", "+3", "", "two", "3.5"] {
            let err = parse_max_parallel(bad).unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidParams);
            assert_eq!(
                err.message,
                format!("invalid --max-parallel {bad:?}: use a number from 1 to 256, or auto")
            );
        }
        assert_eq!(MaxParallel::default(), MaxParallel::Auto);
        assert_eq!(MaxParallel::N(3).to_string(), "3");
        assert_eq!(
            serde_json::to_string(&MaxParallel::Auto).unwrap(),
            "\"auto\""
        );
        assert_eq!(serde_json::to_string(&MaxParallel::N(8)).unwrap(), "8");
        let v: MaxParallel = serde_json::from_str("8").unwrap();
        assert_eq!(v, MaxParallel::N(8));
        let v: MaxParallel = serde_json::from_str("\"auto\"").unwrap();
        assert_eq!(v, MaxParallel::Auto);
        assert!(serde_json::from_str::<MaxParallel>("0").is_err());
        assert!(MaxParallel::from_json(&serde_json::json!(true)).is_err());
        assert_eq!(
            MaxParallel::from_json(&serde_json::json!("12")).unwrap(),
            MaxParallel::N(12)
        );
    }

    #[test]
    fn parsed_values_round_trip_through_json() {
        let m = parse_manifest(GOOD_TOML, Format::Toml).unwrap();
        let back: Manifest = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let plan = parse_plan(DIAMOND, Format::Toml).unwrap();
        let back: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn close_matches() {
        assert_eq!(edit_distance("tset", "test"), 1);
        assert_eq!(edit_distance("vras", "vars"), 1);
        assert_eq!(did_you_mean("zzz", &["api", "web"]), None);
        assert_eq!(did_you_mean("x", &["y"]), None);
    }
}
