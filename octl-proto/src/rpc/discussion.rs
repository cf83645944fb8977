//! The `discussion.*` family: an agent asks a human, a human answers — each method's params
//! and result types beside its declaration. A new method of the family is declared here; the
//! compiler then asks for its daemon `Handle` (`octld/src/rpc/discussion.rs`), and the client
//! calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::rpc::{ListParams, Opened};

/// `discussion.ask`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// The asking node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: Option<String>,
    /// The question.
    #[schemars(length(max = 500))]
    pub title: String,
    /// Details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// One discussion as `discussion.list` and `discussion.answer` return it: the record and
/// its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerParams {
    /// The discussion: its id or a unique prefix of at least 6 characters.
    #[schemars(schema_with = "crate::schema::record_ref")]
    pub id: String,
    /// The answer.
    pub text: String,
}

crate::methods! {
    $;
    each: each_discussion_method;
    DiscussionAsk(AskParams) -> Opened {
        name: "discussion.ask",
        summary: "Ask a human a question (opens a discussion; the asking node shows waiting).",
    },
    DiscussionList(ListParams) -> Vec<DiscussionItem> {
        name: "discussion.list",
        summary: "Discussions of one run or of all, optionally only open ones.",
    },
    DiscussionAnswer(AnswerParams) -> DiscussionItem {
        name: "discussion.answer",
        summary: "A human answers a discussion (once: the first answer written wins; a merge-conflict question is settled by merging and refused here).",
    },
}
