//! The orchestratectl contract, shared by the daemon, the CLI and the tests. Pure: no I/O.
//!
//! - [`ids`]: run ids (ULIDs and their prefixes), node ids, and their validation messages.
//! - [`text`]: an agent's text without escape sequences and control characters.
//! - [`time`]: RFC 3339 timestamps with milliseconds, without a date crate.
//! - [`event`]: one line of `events.jsonl`, event types, actors, payload limits.
//! - [`feed`]: one line of the change feed (`GET /v1/events`): an event and its cursor.
//! - [`state`]: run kinds, node states, run status, and the folded state of one run.
//! - [`reducer`]: the pure fold from events to state; refuses illegal transitions.
//! - [`projection`]: the JSON files derived from the state (`manifest.json`, `nodes/…`).
//! - [`plan`]: fan-out manifests and orchestrate plans, every problem at once; `--max-parallel`.
//! - [`rpc`]: JSON-RPC 2.0 envelopes, parameter and result types.
//! - [`run_index`]: the formats of the run index (`runs.idx`, `runs.journal`).
//! - [`method`]: one declaration per RPC method (name, types, summary); `rpc.discover`'s
//!   schemas are derived from the types.
//! - [`schema`]: the JSON Schemas of the string forms the types do not say (ids, caps).
//! - [`error`]: stable error kinds, their JSON-RPC codes and CLI exit codes.
//! - [`sandbox`]: which sandbox an agent runs in, and what network it has.
//! - [`home`]: where the state lives (`--home` > `$OCTL_HOME` > `~/.orchestratectl`).

pub mod error;
pub mod event;
pub mod feed;
pub mod home;
pub mod ids;
pub mod method;
pub mod notice;
pub mod plan;
pub mod projection;
pub mod reducer;
pub mod rpc;
pub mod rules;
pub mod run_index;
pub mod sandbox;
pub mod schema;
pub mod state;
pub mod text;
pub mod time;

pub use error::{AppError, ErrorKind};
pub use event::{Actor, Event};
pub use state::{NodeState, RunKind, RunState, RunStatus};

/// Version of the wire protocol (JSON-RPC methods and shapes). Bumped on breaking changes.
pub const PROTOCOL_VERSION: u32 = 1;
/// Version of the event line format (`"v"` in every event).
pub const EVENT_VERSION: u32 = 1;
