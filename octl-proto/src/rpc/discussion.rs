//! The `discussion.*` family: an agent asks a human, a human answers — each method's params
//! and result types beside its declaration. A new method of the family is declared here; the
//! compiler then asks for its daemon `Handle` (`octld/src/rpc/discussion.rs`), and the client
//! calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::method::ParamSpec;
use crate::rpc::{ListParams, Opened, RUN_PARAM};

/// `discussion.ask`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskParams {
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// One discussion as `discussion.list` and `discussion.answer` return it: the record and
/// its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscussionItem {
    pub run: String,
    #[serde(flatten)]
    pub discussion: crate::state::Discussion,
}

impl std::ops::Deref for DiscussionItem {
    type Target = crate::state::Discussion;
    fn deref(&self) -> &crate::state::Discussion {
        &self.discussion
    }
}

/// `discussion.answer`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerParams {
    pub id: String,
    pub text: String,
}

crate::methods! {
    $;
    each: each_discussion_method;
    DiscussionAsk(AskParams) -> Opened {
        name: "discussion.ask",
        summary: "Ask a human a question (opens a discussion; the asking node shows waiting).",
        params: &[
            RUN_PARAM,
            ParamSpec { name: "node", required: false, schema: r#"{"type":"string"}"#, doc: "the asking node" },
            ParamSpec { name: "title", required: true, schema: r#"{"type":"string","maxLength":500}"#, doc: "the question" },
            ParamSpec { name: "body", required: false, schema: r#"{"type":"string"}"#, doc: "details" },
        ],
        result: r#"{"type":"object","required":["id","run"]}"#,
    },
    DiscussionList(ListParams) -> Vec<DiscussionItem> {
        name: "discussion.list",
        summary: "Discussions of one run or of all, optionally only open ones.",
        params: &[
            ParamSpec { name: "run", required: false, schema: r#"{"type":"string"}"#, doc: "only this run" },
            ParamSpec { name: "open", required: false, schema: r#"{"type":"boolean"}"#, doc: "only open (true) or answered (false) ones" },
        ],
        result: r#"{"type":"array"}"#,
    },
    DiscussionAnswer(AnswerParams) -> DiscussionItem {
        name: "discussion.answer",
        summary: "A human answers a discussion (once: the first answer written wins; a merge-conflict question is settled by merging and refused here).",
        params: &[
            ParamSpec { name: "id", required: true, schema: r#"{"type":"string"}"#, doc: "the discussion: its id or a unique prefix of at least 6 characters" },
            ParamSpec { name: "text", required: true, schema: r#"{"type":"string"}"#, doc: "the answer" },
        ],
        result: r#"{"type":"object"}"#,
    },
}
