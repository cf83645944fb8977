//! Prompt templates: `{name}` placeholders, `{{`/`}}` for literal braces, every malformed piece
//! reported, and rendering a unit's prompt from its vars.

use std::collections::{BTreeMap, BTreeSet};

const PLACEHOLDER_FORM: &str =
    "a placeholder is {name}, a name of 1-64 letters, digits, '_' or '-'; write {{ or }} for a literal brace";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
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
pub(super) fn parse_template(t: &str) -> (Vec<Segment>, Vec<String>) {
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

pub(super) fn placeholder_names(segments: &[Segment]) -> Vec<String> {
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

pub(super) fn render_template(t: &str, vars: &BTreeMap<String, String>) -> String {
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
