//! Fan-out manifests: one prompt template rendered for every unit. [`parse_manifest`] checks the
//! template, each unit's id and vars, and the size of every rendered prompt, all in one pass.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::fields::{
    fields, node_id_field, opt_agent, opt_gate, opt_rules, opt_runner, opt_string, pos_of,
    string_value,
};
use super::fields::{Found, END};
use super::template::{parse_template, placeholder_names, render_template};
use super::tree::{parse_top, Tree};
use super::{Format, Problems, MAX_PROMPT_BYTES, MAX_UNITS};

/// How many unfilled placeholders are named per unit before the rest are counted.
const MAX_MISSING_LISTED: usize = 10;

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
    /// Where every unit's agent runs (a runner's name), unless `--runner` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// Every unit's agent's permission rules (`allow`, `ask`, `deny`).
    #[serde(
        default,
        skip_serializing_if = "crate::rules::PermissionRules::is_empty"
    )]
    pub permissions: crate::rules::PermissionRules,
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

const MANIFEST_FIELDS: &[&str] = &[
    "title", "prompt", "agent", "gate", "runner", "allow", "ask", "deny", "units",
];
const UNIT_FIELDS: &[&str] = &["id", "vars"];

/// Parses and validates a fan-out manifest; every problem is reported, none stops the others.
pub fn parse_manifest(text: &str, format: Format) -> Result<Manifest, Problems> {
    let top = parse_top(text, format, "manifest")?;
    let mut p = Found::default();
    let f = fields("top level", &top, MANIFEST_FIELDS, &mut p);

    let title = opt_string("title", f.get("title"), format, &mut p);
    let agent = opt_agent("agent", f.get("agent"), format, &mut p);
    let gate = opt_gate("gate", f.get("gate"), format, &mut p);
    let runner = opt_runner("runner", f.get("runner"), format, &mut p);
    let permissions = opt_rules("", &f, format, &mut p);

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
                            format!("{label}: the prompt uses {{{name}}} but vars has no {name:?}; write {{{{{name}}}}} for a literal {{{name}}}"),
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
        runner,
        permissions,
        units,
    })
}
