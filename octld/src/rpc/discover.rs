//! `rpc.discover`: an OpenRPC 1.2 document built from [`octl_proto::method::ALL`].

use std::sync::Arc;

use serde_json::{json, Value};

use octl_proto::method::{self, ALL};
use octl_proto::AppError;

use super::{Handle, NoParams};
use crate::daemon::Daemon;

pub fn discover(_: NoParams) -> Result<Value, AppError> {
    Ok(document())
}

fn schema(text: &str) -> Value {
    serde_json::from_str(text).expect("method schemas are valid JSON")
}

pub fn document() -> Value {
    let methods: Vec<Value> = ALL
        .iter()
        .map(|m| {
            json!({
                "name": m.name,
                "summary": m.summary,
                "paramStructure": "by-name",
                "params": m.params.iter().map(|p| json!({
                    "name": p.name,
                    "required": p.required,
                    "description": p.doc,
                    "schema": schema(p.schema),
                })).collect::<Vec<_>>(),
                "result": { "name": "result", "schema": schema(m.result) },
            })
        })
        .collect();
    json!({
        "openrpc": "1.2.6",
        "info": {
            "title": "octld",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The orchestratectl daemon. POST /rpc on $OCTL_HOME/octld.sock. Errors carry data.kind, a stable snake_case string.",
        },
        "methods": methods,
        "components": {
            "schemas": {
                "RunSummary": {
                    "type": "object",
                    "required": ["id", "kind", "status", "repo", "base", "created_at", "updated_at", "nodes"],
                },
                "Event": {
                    "type": "object",
                    "required": ["v", "seq", "id", "ts", "run", "type", "actor", "data"],
                },
            },
        },
    })
}

impl Handle for method::RpcDiscover {
    async fn handle(_daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        discover(p)
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
            let params: Vec<&str> = m["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            let declared: Vec<&str> = info.params.iter().map(|p| p.name).collect();
            assert_eq!(params, declared, "{}", info.name);
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
}
