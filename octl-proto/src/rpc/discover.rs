//! `rpc.discover`: the daemon's OpenRPC document, built from every declaration
//! ([`crate::method::ALL`]); the daemon's `Handle` is in `octld/src/rpc/discover.rs`.

use serde_json::Value;

use crate::method::NoParams;

crate::methods! {
    $;
    each: each_discover_method;
    RpcDiscover(NoParams) -> Value {
        name: "rpc.discover",
        summary: "This OpenRPC document.",
    },
}
