//! Reading one table of the document tree: its accepted fields, values of the right type, node
//! ids. Problems are collected in [`Found`] with the position of what they are about, so they come
//! out in document order whatever order they were found in.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::suggest::did_you_mean;
use super::tree::Tree;
use super::{Format, Problems};
use crate::ids::is_node_id;

const NAME_FORM: &str = "use 1-63 of a-z, 0-9 and '-', starting with a letter or digit";

/// Position used for problems about something absent: after everything that is present.
pub(super) const END: usize = usize::MAX;

/// Problems of one table, each tagged with the position (in document order) of the field it is
/// about, so they can be listed in document order whatever order they were found in.
#[derive(Debug, Default)]
pub(super) struct Found(Vec<(usize, String)>);

impl Found {
    pub(super) fn add(&mut self, pos: usize, msg: impl Into<String>) {
        self.0.push((pos, msg.into()));
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds the problems of a nested table, in their own order, at `pos`.
    pub(super) fn extend_at(&mut self, pos: usize, inner: Found) {
        for msg in inner.into_problems().0 {
            self.0.push((pos, msg));
        }
    }

    pub(super) fn into_problems(mut self) -> Problems {
        self.0.sort_by_key(|(pos, _)| *pos); // stable: same position keeps finding order
        Problems(self.0.into_iter().map(|(_, msg)| msg).collect())
    }
}

pub(super) type Fields<'t> = BTreeMap<&'t str, (usize, &'t Tree)>;

pub(super) fn pos_of(f: &Fields<'_>, name: &str) -> usize {
    f.get(name).map_or(END, |(pos, _)| *pos)
}

/// The accepted fields of a table with their positions. Reports unknown fields (with the
/// accepted ones and a close match) and repeated ones; a `null` value counts as absent.
pub(super) fn fields<'t>(
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

pub(super) fn string_value(
    at: &str,
    v: &Tree,
    format: Format,
    pos: usize,
    p: &mut Found,
) -> Option<String> {
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

pub(super) fn opt_string(
    at: &str,
    v: Option<&(usize, &Tree)>,
    format: Format,
    p: &mut Found,
) -> Option<String> {
    v.and_then(|&(pos, v)| string_value(at, v, format, pos, p))
}

/// An optional agent profile name, in node-id form.
pub(super) fn opt_agent(
    at: &str,
    v: Option<&(usize, &Tree)>,
    format: Format,
    p: &mut Found,
) -> Option<String> {
    opt_name(at, v, format, p, "the name of an agent profile")
}

/// An optional runner name (`[runners.NAME]` of config.toml, or `local`), in node-id form.
pub(super) fn opt_runner(
    at: &str,
    v: Option<&(usize, &Tree)>,
    format: Format,
    p: &mut Found,
) -> Option<String> {
    opt_name(at, v, format, p, "the name of a runner, e.g. local")
}

fn opt_name(
    at: &str,
    v: Option<&(usize, &Tree)>,
    format: Format,
    p: &mut Found,
    what: &str,
) -> Option<String> {
    let name = opt_string(at, v, format, p)?;
    if !is_node_id(&name) {
        p.add(
            v.map_or(END, |(pos, _)| *pos),
            format!("{at} {name:?}: {NAME_FORM} ({what})"),
        );
    }
    Some(name)
}

/// `sandbox`: the node's agent's sandbox, `bwrap` or `none` ([`crate::sandbox`]).
pub(super) fn opt_sandbox(
    at: &str,
    v: Option<&(usize, &Tree)>,
    format: Format,
    p: &mut Found,
) -> Option<crate::sandbox::SandboxKind> {
    let name = opt_string(at, v, format, p)?;
    crate::sandbox::SandboxKind::parse(at, &name)
        .map_err(|e| p.add(v.map_or(END, |(pos, _)| *pos), e.message))
        .ok()
}

/// `allow`, `ask` and `deny`, each an optional array of permission rules in Claude Code's
/// syntax ([`crate::rules`]).
pub(super) fn opt_rules(
    at: &str,
    f: &Fields<'_>,
    format: Format,
    p: &mut Found,
) -> crate::rules::PermissionRules {
    let mut list = |name: &str| {
        let mut out = Vec::new();
        match f.get(name) {
            None => {}
            Some(&(pos, Tree::Array(items))) => {
                for (k, item) in items.iter().enumerate() {
                    let here = format!("{at}{name}[{k}]");
                    if let Some(rule) = string_value(&here, item, format, pos, p) {
                        match crate::rules::check_rule(&rule) {
                            Ok(()) => out.push(rule),
                            Err(why) => p.add(pos, format!("{here} {rule:?}: {why}")),
                        }
                    }
                }
            }
            Some(&(pos, other)) => p.add(
                pos,
                format!(
                    "{at}{name}: must be an array of permission rules such as \"Bash(cargo test:*)\", got {}",
                    other.kind(format)
                ),
            ),
        }
        out
    };
    crate::rules::PermissionRules {
        allow: list("allow"),
        ask: list("ask"),
        deny: list("deny"),
    }
}

/// An optional gate: a shell command, not blank.
pub(super) fn opt_gate(
    at: &str,
    v: Option<&(usize, &Tree)>,
    format: Format,
    p: &mut Found,
) -> Option<String> {
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
pub(super) fn node_id_field(
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
