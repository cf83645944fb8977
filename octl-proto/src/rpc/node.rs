//! The `node.*` family: what an agent reports about its own node (`node.done`, `node.fail`,
//! `node.progress`), a human's line of input to a live interactive agent and its screen
//! (`node.send`, `node.screen`), and the command that reaches the agent from a terminal
//! (`node.attach`) — each method's params and result types beside its
//! declaration. A new method of the family is declared here; the compiler then asks for its
//! daemon `Handle` (`octld/src/rpc/node.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::method::{ParamSpec, APPEND_RESULT, MESSAGE_PARAM, NODE_PARAM, RUN_PARAM};
use crate::rpc::AppendResult;

/// `node.done`, `node.fail`, `node.progress`: an agent's report on its node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeReportParams {
    pub run: String,
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `node.send`: a line of input to a live node's interactive agent (Enter is pressed after).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSendParams {
    pub run: String,
    pub node: String,
    /// One line: 1 to 4096 bytes, no newline or other control character but tab.
    pub text: String,
}

/// `node.send` result: what was typed where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSent {
    pub run: String,
    pub node: String,
    /// Bytes of text typed (Enter not counted).
    pub bytes: usize,
}

/// `node.screen`: the agent's terminal as it is now.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeScreenParams {
    pub run: String,
    pub node: String,
    /// At most this many of the last lines (1 to 10000; default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u32>,
}

/// `node.screen` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Screen {
    pub run: String,
    pub node: String,
    /// The last lines of the agent's terminal (scrollback included), trailing blank lines
    /// left out, each ending with a newline.
    pub screen: String,
}

/// `node.attach`: how a terminal reaches the node's agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAttachParams {
    pub run: String,
    pub node: String,
}

/// `node.attach` result: the program and arguments a terminal runs to show the agent and
/// take keys for it (`tmux … attach-session` for the local runner, `srun --pty …` on Slurm),
/// run by the client on the daemon's machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attach {
    pub run: String,
    pub node: String,
    pub argv: Vec<String>,
}

crate::methods! {
    $;
    each: each_node_method;
    NodeDone(NodeReportParams) -> AppendResult {
        name: "node.done",
        summary: "An agent reports its node done (commit first).",
        params: &[RUN_PARAM, NODE_PARAM, MESSAGE_PARAM],
        result: APPEND_RESULT,
    },
    NodeFail(NodeReportParams) -> AppendResult {
        name: "node.fail",
        summary: "An agent reports that it cannot finish.",
        params: &[
            RUN_PARAM,
            NODE_PARAM,
            ParamSpec {
                name: "reason",
                required: true,
                schema: r#"{"type":"string","maxLength":4096}"#,
                doc: "why",
            },
        ],
        result: APPEND_RESULT,
    },
    NodeProgress(NodeReportParams) -> AppendResult {
        name: "node.progress",
        summary: "An agent says what it is doing.",
        params: &[RUN_PARAM, NODE_PARAM, MESSAGE_PARAM],
        result: APPEND_RESULT,
    },
    NodeSend(NodeSendParams) -> NodeSent {
        name: "node.send",
        summary: "Type a line of input (then Enter) into a live node's interactive agent.",
        params: &[
            RUN_PARAM,
            NODE_PARAM,
            ParamSpec {
                name: "text",
                required: true,
                schema: r#"{"type":"string","minLength":1,"maxLength":4096}"#,
                doc: "one line, without newline or control characters (tab allowed)",
            },
        ],
        result: r#"{"type":"object","required":["run","node","bytes"]}"#,
    },
    NodeScreen(NodeScreenParams) -> Screen {
        name: "node.screen",
        summary: "A live node's agent screen now: the last lines of its terminal.",
        params: &[
            RUN_PARAM,
            NODE_PARAM,
            ParamSpec {
                name: "lines",
                required: false,
                schema: r#"{"type":"integer","minimum":1,"maximum":10000}"#,
                doc: "at most this many of the last lines (default 200)",
            },
        ],
        result: r#"{"type":"object","required":["run","node","screen"]}"#,
    },
    NodeAttach(NodeAttachParams) -> Attach {
        name: "node.attach",
        summary: "The command (argv) a terminal runs to reach a node's agent, from its runner.",
        params: &[RUN_PARAM, NODE_PARAM],
        result: r#"{"type":"object","required":["run","node","argv"]}"#,
    },
}
