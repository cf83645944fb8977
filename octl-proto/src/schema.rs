//! The JSON Schemas of the contract's string forms that the types alone do not say, one
//! declaration each, for `#[schemars(schema_with = "…")]` on the params and results that
//! carry them: run ids and their prefixes, node ids, record ids, ages, the parallelism cap,
//! `run.list`'s statuses. Every method's params and result schema is derived from its Rust
//! types ([`crate::method`]); these are the forms the server checks beyond them, so a value
//! the schema accepts is one the server accepts.

use schemars::{json_schema, Schema, SchemaGenerator};

/// A run: its id (a ULID, any case) or a unique prefix of at least 6 of its characters.
pub const RUN_REF_PATTERN: &str =
    "^([0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{6,25}|[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25})$";
/// A node id: lower-case letters, digits and `-`, at most 63, not starting with `-`.
pub const NODE_ID_PATTERN: &str = "^[a-z0-9][a-z0-9-]{0,62}$";

pub fn run_ref(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": RUN_REF_PATTERN,
        "description": "a run id (ULID) or a unique prefix of at least 6 characters",
    })
}

pub fn node_id(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": NODE_ID_PATTERN,
        "description": "a node of the run",
    })
}

/// A discussion's or proposal's id (a lower-case ULID), or a unique prefix of at least 6.
pub fn record_ref(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 6,
        "description": "its id or a unique prefix of at least 6 characters",
    })
}

/// Text a person reads: not empty, not only spaces.
pub fn short_text(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "minLength": 1, "maxLength": 4096, "pattern": "\\S" })
}

/// `--max-parallel`: a number from 1 to 256, `auto` or `cluster` (a Slurm runner's).
pub fn max_parallel(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "oneOf": [
            { "type": "integer", "minimum": 1, "maximum": crate::plan::MAX_PARALLEL },
            { "type": "string", "enum": ["auto", "cluster"] },
        ],
    })
}

/// A manifest's or plan's format.
pub fn format(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "enum": ["toml", "json"] })
}

/// `run.list`'s `status`: one listed status, or a list of at least one.
pub fn statuses(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = crate::projection::ListedStatus::ALL
        .map(crate::projection::ListedStatus::as_str)
        .to_vec();
    json_schema!({
        "oneOf": [
            { "type": "string", "enum": names },
            { "type": "array", "minItems": 1, "items": { "type": "string", "enum": names } },
        ],
    })
}

/// Who appends an event: a client speaks as agent, human or tool, never as the daemon.
pub fn client_actor(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "enum": ["agent", "human", "tool"] })
}
