//! `rpc.discover`: an OpenRPC 1.2 document built from [`super::METHODS`].

use serde_json::{json, Value};

use octl_proto::AppError;

use super::{params, NoParams, METHODS};

pub fn discover(p: Value) -> Result<Value, AppError> {
    let NoParams {} = params(p)?;
    Ok(document())
}

fn schema(text: &str) -> Value {
    serde_json::from_str(text).expect("method schemas are valid JSON")
}

pub fn document() -> Value {
    let methods: Vec<Value> = METHODS
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

#[cfg(test)]
mod tests {
    #[test]
    fn every_schema_parses() {
        let doc = super::document();
        assert_eq!(
            doc["methods"].as_array().unwrap().len(),
            super::METHODS.len()
        );
    }
}
