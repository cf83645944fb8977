//! The one small tree both syntaxes are read into, with the keys of every table in document
//! order, so the rest of validation walks one shape and reports problems in the order a reader
//! meets them. A syntax error stops there: it is the only problem reported, with line and column.

use std::fmt;

use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{Format, Problems};

/// A parsed document with keys in document order. Only strings keep their value: nothing in
/// either schema takes another scalar.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tree {
    Str(String),
    Num,
    Bool,
    Datetime,
    Null,
    Array(Vec<Tree>),
    Table(Vec<(String, Tree)>),
}

impl Tree {
    pub(super) fn kind(&self, format: Format) -> &'static str {
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
pub(super) fn parse_top(
    text: &str,
    format: Format,
    what: &str,
) -> Result<Vec<(String, Tree)>, Problems> {
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
