//! `discussion.ask`, `discussion.list`, `discussion.answer`: questions agents put to humans.
//! Ids are lowercase ULIDs, unique across runs, so an answer needs only the id (or a unique
//! prefix of it).

use std::sync::Arc;

use octl_proto::event::{DiscussionOpened, DiscussionResolved, Payload};
use octl_proto::ids::{validate_node_id, MIN_PREFIX};
use octl_proto::method;
use octl_proto::projection::RunDetail;
use octl_proto::rpc::{AnswerParams, AskParams, ListParams};
use octl_proto::rpc::{DiscussionItem, Opened};
use octl_proto::state::{Discussion, NodeState, Spinoff};
use octl_proto::{ids, Actor, AppError, ErrorKind, RunKind};

use super::Handle;
use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};

const MAX_TITLE: usize = 500;
const MAX_BODY: usize = 16 * 1024;

pub fn text(field: &str, value: &str, max: usize) -> Result<(), AppError> {
    if value.trim().is_empty() || value.len() > max {
        return Err(AppError::invalid(format!(
            "invalid {field}: give 1 to {max} bytes of text"
        )));
    }
    Ok(())
}

pub fn new_id() -> String {
    ids::new_ulid().to_ascii_lowercase()
}

/// A discussion or a spin-off proposal: named by an id unique across runs.
pub trait Record: Clone {
    /// What it is called in messages.
    const WHAT: &'static str;
    /// The command that lists them, for hints.
    const LIST: &'static str;
    fn id(&self) -> &str;
    fn all(view: &RunDetail) -> &[Self];
}

impl Record for Discussion {
    const WHAT: &'static str = "discussion";
    const LIST: &'static str = "orchestratectl discussion list --open";
    fn id(&self) -> &str {
        &self.id
    }
    fn all(view: &RunDetail) -> &[Self] {
        &view.discussions
    }
}

impl Record for Spinoff {
    const WHAT: &'static str = "spin-off proposal";
    const LIST: &'static str = "orchestratectl spinoff list";
    fn id(&self) -> &str {
        &self.id
    }
    fn all(view: &RunDetail) -> &[Self] {
        &view.spinoffs
    }
}

/// Finds a record and its run by full id or, like run ids, by a unique prefix of at least
/// [`MIN_PREFIX`] characters (`field` names the parameter in errors).
pub fn find<R: Record>(
    daemon: &Daemon,
    field: &str,
    given: &str,
) -> Result<(Arc<RunHandle>, R), AppError> {
    let id = given.trim().to_ascii_lowercase();
    if id.len() < MIN_PREFIX {
        return Err(AppError::invalid(format!(
            "invalid {field} {given:?}: give its full id or a unique prefix of at least {MIN_PREFIX} characters"
        )));
    }
    let mut matches: Vec<(Arc<RunHandle>, R)> = Vec::new();
    let mut exact = None;
    // Active runs first (an open record is in one), then the finished runs that have records.
    daemon.store.each_with_records(|h| {
        let view = h.view();
        for r in R::all(&view) {
            if r.id() == id {
                // An exact id wins over prefixes of longer ones.
                exact = Some((h.clone(), r.clone()));
                return false;
            }
            if id.len() >= MIN_PREFIX && r.id().starts_with(&id) && matches.len() < 6 {
                matches.push((h.clone(), r.clone()));
            }
        }
        true
    })?;
    if let Some(found) = exact {
        return Ok(found);
    }
    match matches.len() {
        1 => Ok(matches.pop().expect("one match")),
        0 => Err(
            AppError::not_found(format!("no {} matches {field} {given:?}", R::WHAT)).with_hint(
                format!(
                    "give its full id or a unique prefix of at least {MIN_PREFIX} characters, as `{}` shows",
                    R::LIST
                ),
            ),
        ),
        n => Err(AppError::new(
            ErrorKind::AmbiguousId,
            format!(
                "{field} {given:?} matches more than one {}: {}{}",
                R::WHAT,
                matches
                    .iter()
                    .take(5)
                    .map(|(_, r)| r.id())
                    .collect::<Vec<_>>()
                    .join(", "),
                if n > 5 { ", …" } else { "" }
            ),
        )
        .with_hint("give more characters of the id")),
    }
}

/// The runs to look in for records: one (by id or prefix), or every run that has any (the
/// active ones and the finished ones the index flags), in id order. Open records are only
/// ever in active runs (a finished run has none), so `open_only` reads no finished run.
pub fn runs(
    daemon: &Daemon,
    run: Option<&str>,
    open_only: bool,
) -> Result<Vec<Arc<RunHandle>>, AppError> {
    match run {
        Some(r) => Ok(vec![daemon.store.resolve("run", r)?]),
        None if open_only => Ok(daemon.store.handles()),
        None => {
            let mut all = Vec::new();
            daemon.store.each_with_records(|h| {
                if !h.view().discussions.is_empty() || !h.view().spinoffs.is_empty() {
                    all.push(h);
                }
                true
            })?;
            all.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(all)
        }
    }
}

pub async fn ask(daemon: &Arc<Daemon>, p: AskParams) -> Result<Opened, AppError> {
    text("title", &p.title, MAX_TITLE)?;
    if let Some(b) = &p.body {
        text("body", b, MAX_BODY)?;
    }
    let (title, body) = (p.title, p.body);
    open_record(daemon, &p.run, p.node, |id| DiscussionOpened {
        id,
        title,
        body,
        ..DiscussionOpened::default()
    })
    .await
}

/// Appends a new record (a question, a proposal) under a fresh id, said by the node's agent
/// when a node is named, else by a human; answers `{id, run}`.
pub async fn open_record<P: Payload>(
    daemon: &Arc<Daemon>,
    run: &str,
    node: Option<String>,
    record: impl FnOnce(String) -> P,
) -> Result<Opened, AppError> {
    if let Some(n) = &node {
        validate_node_id("node", n)?;
    }
    let handle = daemon.store.resolve("run", run)?;
    let id = new_id();
    let actor = if node.is_some() {
        Actor::Agent
    } else {
        Actor::Human
    };
    let draft = Draft::said(node, actor, record(id.clone()));
    daemon.store.append(&handle, draft, true).await?;
    Ok(Opened {
        id,
        run: handle.id.clone(),
    })
}

fn with_run(run: &str, discussion: &Discussion) -> Result<DiscussionItem, AppError> {
    Ok(DiscussionItem {
        run: run.to_string(),
        discussion: discussion.clone(),
    })
}

pub fn list(daemon: &Arc<Daemon>, p: ListParams) -> Result<Vec<DiscussionItem>, AppError> {
    let mut out = Vec::new();
    for h in runs(daemon, p.run.as_deref(), p.open == Some(true))? {
        for d in h
            .view()
            .discussions
            .iter()
            .filter(|d| p.open.is_none_or(|o| d.open == o))
        {
            out.push(with_run(&h.id, d)?);
        }
    }
    Ok(out)
}

pub async fn answer(daemon: &Arc<Daemon>, p: AnswerParams) -> Result<DiscussionItem, AppError> {
    text("text", &p.text, MAX_BODY)?;
    let (handle, disc) = find::<Discussion>(daemon, "id", &p.id)?;
    if disc.open {
        refuse_merge_question(&handle.id, &handle.view(), &disc)?;
        let draft = Draft::said(
            disc.node.clone(),
            Actor::Human,
            DiscussionResolved {
                id: disc.id.clone(),
                answer: Some(p.text.clone()),
                ..DiscussionResolved::default()
            },
        );
        // The log decides between answers given at once: the first written wins, and the
        // reducer refuses the others, naming the answer that won.
        return match daemon.store.append(&handle, draft, true).await {
            Ok(_) => with_run(&handle.id, &current(&handle, &disc)),
            Err(e) => {
                let now = current(&handle, &disc);
                if e.kind == ErrorKind::InvalidTransition
                    && now.answer.as_deref() == Some(p.text.as_str())
                {
                    with_run(&handle.id, &now)
                } else {
                    Err(e)
                }
            }
        };
    }
    // Answered already: the same answer again is a retry, reported; another is refused.
    if disc.answer.as_deref() == Some(p.text.as_str()) {
        return with_run(&handle.id, &disc);
    }
    Err(AppError::new(
        ErrorKind::InvalidTransition,
        format!(
            "discussion {:?} is already answered: {:?}",
            disc.id,
            disc.answer.clone().unwrap_or_default()
        ),
    ))
}

/// The discussion as the run's log says now.
fn current(handle: &RunHandle, disc: &Discussion) -> Discussion {
    handle
        .view()
        .discussions
        .iter()
        .find(|d| d.id == disc.id)
        .cloned()
        .unwrap_or_else(|| disc.clone())
}

/// A question the daemon opened about a merge conflict (`merge-…`) is settled by merging:
/// a text answer would close it while the node stays in conflict, so it is refused while the
/// node can still be merged, with what does move it (here and for `event.append`). Once the
/// node has ended (cancelled, failed) an answer only closes the question.
pub fn refuse_merge_question(
    run: &str,
    view: &RunDetail,
    disc: &Discussion,
) -> Result<(), AppError> {
    let Some(node) = disc
        .node
        .as_deref()
        .filter(|_| disc.id.starts_with("merge-"))
        .and_then(|n| view.nodes.iter().find(|x| x.id == n))
    else {
        return Ok(());
    };
    if node.state.is_terminal() {
        return Ok(());
    }
    let worktree = node.worktree.as_deref().unwrap_or("its worktree");
    let retry = if matches!(
        view.manifest.kind,
        Some(RunKind::Fanout | RunKind::Orchestrate)
    ) {
        format!(", or start it over from the current tip with `orchestratectl run retry {run} --node {}`", node.id)
    } else {
        String::new()
    };
    let state = if node.state == NodeState::Conflict {
        String::new()
    } else {
        format!(" (it is {} now)", node.state.as_str())
    };
    Err(AppError::new(
        ErrorKind::InvalidTransition,
        format!(
            "discussion {:?} is node {:?}'s merge conflict{state}: an answer cannot resolve it; it is settled when the node merges",
            disc.id, node.id
        ),
    )
    .with_hint(format!(
        "resolve the conflict in {worktree} (e.g. git merge the target branch, fix the files, commit), then run `orchestratectl merge {run} --node {}`; to give it up, `orchestratectl run cancel {run}`{retry}",
        node.id
    )))
}

impl Handle for method::DiscussionAsk {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        ask(daemon, p).await
    }
}

impl Handle for method::DiscussionList {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        list(daemon, p)
    }
}

impl Handle for method::DiscussionAnswer {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        answer(daemon, p).await
    }
}
