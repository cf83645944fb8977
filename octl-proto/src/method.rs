//! One declaration per JSON-RPC method: its name, parameter and result types, summary and
//! the JSON Schemas of `rpc.discover`. The daemon's dispatch is generated from these
//! declarations ([`for_each_method!`]: a declared method without a handler does not compile)
//! and parses each method's params as its declared type; its OpenRPC document is built from
//! [`ALL`]; the CLI calls through the [`Method`] types. So the three cannot disagree on a name
//! or a params type; and `rpc.discover`'s schemas are derived from those types.
//!
//! Every method is declared in its family's file under [`crate::rpc`], beside its params and
//! result types, one [`methods!`] table per file: `daemon.*` (`rpc/daemon.rs`), `run.*`
//! (`rpc/run.rs`), `event.*`, `spawn.*`, `merge`, `fanout.*` and `orchestrate.start`
//! (`rpc/fanout.rs`), `discussion.*`, `spinoff.*`, `run.gc` and `recover` (`rpc/gc.rs`),
//! `doctor.*`, `rpc.discover`, `node.*`. To add a method: declare it in its family's table; the
//! compiler then asks for the daemon's `Handle` impl next to its handler (`octld/src/rpc/`, the
//! same file name), and the CLI calls it as `method::Name`; nothing else in this crate changes.
//! A new family is one file with one table plus its `pub mod`/`pub use` in `rpc/mod.rs`, its
//! `pub use` below and its line in `TABLES` and [`for_each_method!`] (their order is
//! `rpc.discover`'s).

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A method's name and types; one zero-sized type per method, declared by [`methods!`].
pub trait Method {
    const ID: MethodId;
    const NAME: &'static str = Self::ID.name();
    type Params: Serialize + DeserializeOwned + JsonSchema;
    type Result: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
}

/// One method, as `rpc.discover` describes it: its schemas are derived from its params and
/// result types (`schemars`), so the document says what the server parses and answers.
#[derive(Debug)]
pub struct MethodInfo {
    pub id: MethodId,
    pub name: &'static str,
    pub summary: &'static str,
    /// The params object's schema, inline (its properties are the method's params).
    pub params: fn(&mut SchemaGenerator) -> Schema,
    /// The result's schema (a reference into the generator's definitions where it has one).
    pub result: fn(&mut SchemaGenerator) -> Schema,
}

/// The params of a method that takes none: still an object, and unknown fields are refused.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A method, by its declared name (`M::ID` for method type `M`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MethodId(&'static str);

impl MethodId {
    /// This method's declaration.
    pub fn info(self) -> &'static MethodInfo {
        ALL.iter()
            .copied()
            .find(|m| m.id == self)
            .expect("every MethodId comes from a declaration")
    }

    pub const fn name(self) -> &'static str {
        self.0
    }

    /// The method of a request's `method` string, if there is one.
    pub fn from_name(name: &str) -> Option<MethodId> {
        ALL.iter().find(|m| m.name == name).map(|m| m.id)
    }
}

/// Declares one family's table of methods, beside their params and result types
/// (`crate::rpc::node`): for each, a zero-sized type implementing [`Method`]; `METHODS`, the
/// table (crate-visible only: the families' would collide in `rpc`'s globs; `TABLES` reads
/// it); and the exported macro named after `each:`, which calls `$m! { TypeA, TypeB, … }`
/// with the table's type names.
#[macro_export]
macro_rules! methods {
    ($d:tt; each: $each:ident; $(
        $ty:ident($params:ty) -> $result:ty {
            name: $name:literal,
            summary: $summary:expr $(,)?
        }
    ),* $(,)?) => {
        /// The family's method types, reached as `method::Name` (only there).
        pub(crate) mod methods {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[doc = concat!("`", $name, "`")]
                #[derive(Debug, Clone, Copy)]
                pub struct $ty;
                impl $crate::method::Method for $ty {
                    const ID: $crate::method::MethodId = $crate::method::MethodId::declared($name);
                    type Params = $params;
                    type Result = $result;
                }
            )*
        }

        #[doc(hidden)]
        #[macro_export]
        macro_rules! $each {
            ($d m:ident) => { $d m! { $($ty),* } };
        }

        /// This table's declarations, in the order `rpc.discover` lists them.
        pub(crate) const METHODS: &[$crate::method::MethodInfo] = &[$(
            $crate::method::MethodInfo {
                id: $crate::method::MethodId::declared($name),
                name: $name,
                summary: $summary,
                params: <$params as schemars::JsonSchema>::json_schema,
                result: schemars::SchemaGenerator::subschema_for::<$result>,
            }
        ),*];
    };
}

impl MethodId {
    /// For [`methods!`] only: a name it declares.
    #[doc(hidden)]
    pub const fn declared(name: &'static str) -> MethodId {
        MethodId(name)
    }
}

/// Every family's table, in the order `rpc.discover` lists them (a new family adds its line
/// here and in [`for_each_method!`]; a new method in a family touches neither).
const TABLES: &[&[MethodInfo]] = &[
    crate::rpc::daemon::METHODS,
    crate::rpc::run::METHODS,
    crate::rpc::event::METHODS,
    crate::rpc::spawn::METHODS,
    crate::rpc::merge::METHODS,
    crate::rpc::fanout::METHODS,
    crate::rpc::discussion::METHODS,
    crate::rpc::spinoff::METHODS,
    crate::rpc::gc::METHODS,
    crate::rpc::doctor::METHODS,
    crate::rpc::discover::METHODS,
    crate::rpc::node::METHODS,
    crate::rpc::ui::METHODS,
];

/// Every method's declaration, in the order `rpc.discover` lists them.
pub static ALL: std::sync::LazyLock<Vec<&'static MethodInfo>> =
    std::sync::LazyLock::new(|| TABLES.iter().flat_map(|t| t.iter()).collect());

/// Calls `$m! { DaemonStatus, DaemonShutdown, … }` once per family with its method type names
/// (all reachable as `method::Name`): for code that must handle each declared method (the
/// daemon's dispatch). Its families are `TABLES`'s, in the same order.
#[macro_export]
macro_rules! for_each_method {
    ($m:ident) => {{
        $crate::each_daemon_method!($m);
        $crate::each_run_method!($m);
        $crate::each_event_method!($m);
        $crate::each_spawn_method!($m);
        $crate::each_merge_method!($m);
        $crate::each_fanout_method!($m);
        $crate::each_discussion_method!($m);
        $crate::each_spinoff_method!($m);
        $crate::each_gc_method!($m);
        $crate::each_doctor_method!($m);
        $crate::each_discover_method!($m);
        $crate::each_node_method!($m);
        $crate::each_ui_method!($m);
    }};
}

/// The families' method types, so every method is `method::Name` (their params and result
/// types are `rpc::Name`).
pub use crate::rpc::daemon::methods::*;
pub use crate::rpc::discover::methods::*;
pub use crate::rpc::discussion::methods::*;
pub use crate::rpc::doctor::methods::*;
pub use crate::rpc::event::methods::*;
pub use crate::rpc::fanout::methods::*;
pub use crate::rpc::gc::methods::*;
pub use crate::rpc::merge::methods::*;
pub use crate::rpc::node::methods::*;
pub use crate::rpc::run::methods::*;
pub use crate::rpc::spawn::methods::*;
pub use crate::rpc::spinoff::methods::*;
pub use crate::rpc::ui::methods::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_names_and_all_agree_both_ways() {
        for m in ALL.iter() {
            assert_eq!(MethodId::from_name(m.name), Some(m.id), "{}", m.name);
            assert_eq!(m.id.name(), m.name);
        }
        let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "a method is declared twice");
        assert_eq!(MethodId::from_name("run.nope"), None);
        assert_eq!(RunShow::NAME, "run.show");
    }

    #[test]
    fn no_params_is_an_empty_object() {
        assert_eq!(serde_json::to_string(&NoParams {}).unwrap(), "{}");
    }
}
