//! `rpc.discover`: an OpenRPC 1.2 document built from [`octl_proto::method::ALL`].

use std::sync::Arc;

use schemars::generate::SchemaSettings;
use serde_json::{json, Value};

use octl_proto::method::{self, ALL};
use octl_proto::AppError;

use super::{Handle, NoParams};
use crate::daemon::Daemon;

/// The OpenRPC document: every method's params and result derived from its declared types
/// (`schemars`), with the types more than one method uses under `components.schemas`.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft07()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator();
    let methods: Vec<Value> = ALL
        .iter()
        .map(|m| {
            let params = Value::from((m.params)(&mut generator));
            let required: Vec<&str> = params["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let params: Vec<Value> = params["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, schema)| {
                    let mut schema = schema.clone();
                    let description = schema
                        .as_object_mut()
                        .and_then(|o| o.remove("description"))
                        .unwrap_or(Value::Null);
                    let mut p = json!({
                        "name": name,
                        "required": required.contains(&name.as_str()),
                        "schema": schema,
                    });
                    if let Value::String(d) = description {
                        p["description"] = Value::String(d);
                    }
                    p
                })
                .collect();
            json!({
                "name": m.name,
                "summary": m.summary,
                "paramStructure": "by-name",
                "params": params,
                "result": { "name": "result", "schema": Value::from((m.result)(&mut generator)) },
            })
        })
        .collect();
    let schemas: serde_json::Map<String, Value> = generator.take_definitions(true);
    json!({
        "openrpc": "1.2.6",
        "info": {
            "title": "octld",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The orchestratectl daemon. POST /rpc on $OCTL_HOME/octld.sock. Errors carry data.kind, a stable snake_case string.",
        },
        "methods": methods,
        "components": { "schemas": schemas },
    })
}

impl Handle for method::RpcDiscover {
    async fn handle(_daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        let NoParams {} = p;
        Ok(document())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use octl_proto::method::{MethodId, ALL};

    /// The declarations, the dispatch and the OpenRPC document name the same methods, both
    /// ways. Dispatch is generated from the declarations (a declared method without a
    /// `Handle` does not compile); this checks that the names it routes by are the document's.
    #[test]
    fn declarations_dispatch_and_document_agree() {
        let doc = super::document();
        let documented: BTreeSet<&str> = doc["methods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        let declared: BTreeSet<&str> = ALL.iter().map(|m| m.name).collect();
        assert_eq!(documented, declared);
        assert_eq!(documented.len(), ALL.len(), "a method is listed twice");
        for name in &documented {
            let id =
                MethodId::from_name(name).unwrap_or_else(|| panic!("{name} is not dispatched"));
            assert_eq!(id.name(), *name);
        }
        for m in doc["methods"].as_array().unwrap() {
            let info = MethodId::from_name(m["name"].as_str().unwrap())
                .unwrap()
                .info();
            assert_eq!(m["summary"], info.summary);
        }
    }

    /// Dispatch's arms (one per method type `for_each_method!` lists, each with its `Handle`)
    /// are exactly the declarations `ALL` and the document come from, in the same order: a
    /// family in one list and not the other would be dispatched but undocumented, or
    /// documented and answered by `unreachable!`.
    #[test]
    fn dispatched_types_are_the_declarations() {
        use octl_proto::method::{self, Method};
        let mut dispatched: Vec<&str> = Vec::new();
        macro_rules! names {
            ($($ty:ident),*) => { $(dispatched.push(<method::$ty as Method>::NAME);)* };
        }
        octl_proto::for_each_method!(names);
        let declared: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        assert_eq!(dispatched, declared);
    }

    /// The contract as published: `docs/openrpc.json` is the document this build serves, so a
    /// change to any method's params or result is a visible diff in review. After a deliberate
    /// change, `OCTL_BLESS=1 cargo test -p octld --lib the_document_is_the_checked_in_copy` writes it again.
    #[test]
    fn the_document_is_the_checked_in_copy() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openrpc.json");
        let mut now = serde_json::to_string_pretty(&super::document()).unwrap();
        now.push('\n');
        if std::env::var_os("OCTL_BLESS").is_some() {
            std::fs::write(&path, &now).unwrap();
        }
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            kept == now,
            "docs/openrpc.json is not what rpc.discover answers; if the change is meant, run OCTL_BLESS=1 cargo test -p octld --lib the_document_is_the_checked_in_copy and commit the file"
        );
    }
}
