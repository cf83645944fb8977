//! Fan-out manifests and orchestrate plans: parsing (TOML or JSON, one schema) and validation
//! that reports every problem at once, in document order, so a caller fixes them all in one go.
//! Also the parallelism cap (`--max-parallel N|auto|cluster`).
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
//!
//! Layout:
//! - `format`: the two syntaxes ([`Format`]) and the list of problems ([`Problems`]).
//! - `tree`: the ordered tree both syntaxes are read into; a syntax error is the one problem.
//! - `fields`: reading one table of the tree: its fields, their types, node ids.
//! - `suggest`: "did you mean" and capped lists of the names that are accepted.
//! - `template`: prompt templates: `{name}` placeholders and rendering.
//! - `manifest`: fan-out manifests ([`Manifest`]) and their validation.
//! - `dag`: orchestrate plans ([`Plan`]): validation, topological order, dependents.
//! - `cycles`: the cycles of a plan, one problem per strongly connected component.
//! - `parallel`: `--max-parallel` ([`MaxParallel`]).
//!
//! The limits stay together below: they bound what a document may hold, and the CLI, the daemon
//! and the tests all read them from here.

mod cycles;
mod dag;
mod fields;
mod format;
mod manifest;
mod parallel;
mod suggest;
mod template;
mod tree;

#[cfg(test)]
mod tests;

pub use dag::{parse_plan, Plan, PlanNode};
pub use format::{Format, Problems};
pub use manifest::{parse_manifest, Manifest, Unit};
pub use parallel::{parse_max_parallel, MaxParallel};

/// Most units in one fan-out manifest.
pub const MAX_UNITS: usize = 1000;
/// Most nodes in one orchestrate plan.
pub const MAX_NODES: usize = 500;
/// Largest prompt template, and largest prompt once rendered for a unit (32 KiB).
pub const MAX_PROMPT_BYTES: usize = 32 * 1024;
/// Largest task of a plan node (32 KiB).
pub const MAX_TASK_BYTES: usize = 32 * 1024;
/// Largest explicit `--max-parallel`: every unit of the largest manifest at once (the daemon's
/// cost per live agent is flat; whether the machine can hold them is admission's business).
pub const MAX_PARALLEL: usize = MAX_UNITS;
/// Most agents an `auto` run has alive at once (each admitted by the daemon while the
/// machine has room).
pub const AUTO_PARALLEL_CAP: usize = 32;
/// How many problems [`Problems::into_error`] lists before it says "… and N more".
pub const MAX_LISTED_PROBLEMS: usize = 100;
