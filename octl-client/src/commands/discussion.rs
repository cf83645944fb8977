//! `discussion ask|list|answer`: questions agents put to humans. `ask --wait` follows the run's
//! event stream ([`crate::follow::Events`]) from just before the question until the
//! `discussion.resolved` event that answers it, and prints the answer alone on stdout so an
//! agent can capture it. Discussion ids are unique across runs: answering needs only the id.

use crate::commands::result_of;
use octl_proto::method;
use octl_proto::RunStatus;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use octl_proto::ids::{is_node_id, parse_run_ref, validate_node_id};
use octl_proto::rpc::{AnswerParams, AskParams, ListParams};
pub use octl_proto::rpc::{DiscussionItem, Opened};
use octl_proto::{AppError, ErrorKind};
use serde_json::{json, Value};

use super::run::wait::timeout_duration;
use super::{call, Ctx};
use crate::follow::{eprint_line, one_line, show, Events};
use crate::output::{cell, print_text, table};

/// The examples of `discussion --help`.
pub const DISCUSSION_EXAMPLES: &str = "\
Examples:
  # an agent, inside its window (OCTL_RUN and OCTL_NODE are set):
  answer=$(orchestratectl discussion ask --title 'keep the v1 endpoint?' --body 'clients: …' --wait)
  # a human:
  orchestratectl discussion list --open
  orchestratectl discussion answer q-schema --text 'yes, keep it until June'";

#[derive(Debug, Subcommand)]
pub enum DiscussionCmd {
    /// Ask a human a question; with --wait, block until it is answered and print the answer
    ///
    /// The node shows `waiting` while the question is open. With --wait the answer alone is
    /// printed on stdout (with --json: {id, run, answer}), so an agent can capture it.
    #[command(after_help = "\
Examples:
  orchestratectl discussion ask --title 'which database for tests?'
  orchestratectl discussion ask --title 'drop Python 3.8?' --body 'CI still runs it' --wait
  orchestratectl discussion ask --title 'ok to rename Foo?' --wait --timeout 1800
  orchestratectl discussion ask --title 'which approach?' --body-file options.md --wait
  orchestratectl --json discussion ask --run 01JDXJ5R --title 'release today?'   # {id, run}")]
    Ask(DiscussionAskArgs),

    /// List discussions, of one run or of all runs
    #[command(after_help = "\
Examples:
  orchestratectl discussion list
  orchestratectl discussion list --open
  orchestratectl --json discussion list --run 01JDXJ5R")]
    List(DiscussionListArgs),

    /// Answer an open discussion (the agent waiting on it goes on)
    ///
    /// One answer per discussion: the first recorded wins; another answer is refused (exit 4)
    /// and the same answer again reports it. A merge-conflict question (`merge-…`, opened by
    /// the daemon) is settled by merging, not by text: answering it is refused, with the
    /// commands that resolve it, while its node can still merge.
    #[command(after_help = "\
Examples:
  orchestratectl discussion answer q-db --text 'use sqlite in tests'
  orchestratectl discussion answer 01jdxk7zq3 --text 'yes'     # a unique prefix of the id
  orchestratectl --json discussion answer q-db --text 'yes'   # the discussion")]
    Answer(DiscussionAnswerArgs),
}

#[derive(Debug, Args)]
pub struct DiscussionAskArgs {
    /// The question, in one line
    #[arg(long, value_name = "T")]
    pub title: String,

    /// Details: context, options, what the agent would do by default (at most 16 KiB)
    #[arg(long, value_name = "B", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Read the details from this file, or from standard input with `-`, instead of --body:
    /// at most 16 KiB (16384 bytes) of UTF-8
    #[arg(long, value_name = "PATH|-")]
    pub body_file: Option<std::path::PathBuf>,

    /// Block until a human answers, then print the answer alone on stdout
    #[arg(long)]
    pub wait: bool,

    /// With --wait: give up after S seconds (decimals allowed) with exit 1, kind `timeout`;
    /// the discussion stays open
    #[arg(long, value_name = "S", requires = "wait")]
    pub timeout: Option<f64>,

    /// The run: a ULID or a unique prefix of at least 6 characters; default $OCTL_RUN
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,

    /// The node asking (optional): 1-63 of a-z, 0-9 and '-'; default $OCTL_NODE
    #[arg(long, env = "OCTL_NODE", hide_env_values = true, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct DiscussionListArgs {
    /// Only this run's discussions: a ULID or a unique prefix of at least 6 characters;
    /// default $OCTL_RUN, else every run
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,

    /// Only the discussions still waiting for an answer
    #[arg(long)]
    pub open: bool,
}

#[derive(Debug, Args)]
pub struct DiscussionAnswerArgs {
    /// The discussion's id, as `discussion list` shows it, or a unique prefix of at least 6
    /// of its characters
    #[arg(value_name = "ID")]
    pub id: String,

    /// The answer, sent as written
    #[arg(long, value_name = "T")]
    pub text: String,
}

pub async fn execute(ctx: &Ctx, cmd: DiscussionCmd) -> Result<i32, AppError> {
    match cmd {
        DiscussionCmd::Ask(args) => ask(ctx, args).await.map(|()| 0),
        DiscussionCmd::List(args) => list(ctx, args).await.map(|()| 0),
        DiscussionCmd::Answer(args) => answer(ctx, args).await.map(|()| 0),
    }
}

/// A discussion or proposal id as given: lower-cased, then `[a-z0-9][a-z0-9-]{0,62}`.
pub fn record_id(what: &str, list: &str, given: &str) -> Result<String, AppError> {
    let id = given.trim().to_ascii_lowercase();
    if is_node_id(&id) {
        return Ok(id);
    }
    Err(AppError::invalid(format!(
        "invalid {what} id {given:?}: use the id that `{list}` shows (1-63 of a-z, 0-9 and '-')"
    )))
}

/// A required text flag: refused when empty or blank.
pub fn required_text(flag: &str, given: &str, what: &str) -> Result<(), AppError> {
    if given.trim().is_empty() {
        return Err(AppError::invalid(format!(
            "invalid {flag} \"\": give {what}"
        )));
    }
    Ok(())
}

/// The run (required: `--run` or `$OCTL_RUN`) and the node (optional: `--node` or
/// `$OCTL_NODE`), validated; clap has already filled them from the environment.
pub fn run_and_node(
    run: Option<&str>,
    node: Option<&str>,
    example: &str,
) -> Result<(String, Option<String>), AppError> {
    let run = match run.filter(|r| !r.is_empty()) {
        Some(r) => parse_run_ref("--run", r)?.as_str().to_string(),
        None => {
            return Err(AppError::invalid(
                "missing --run: give --run or set OCTL_RUN (it is set inside an agent window)",
            )
            .with_hint(format!(
                "inside an agent started by orchestratectl it comes from the environment; elsewhere name it, e.g. `{example}`"
            )))
        }
    };
    let node = match node.filter(|n| !n.is_empty()) {
        Some(n) => {
            validate_node_id("--node", n)?;
            Some(n.to_string())
        }
        None => None,
    };
    Ok((run, node))
}

/// The most bytes of a question's details (the daemon's limit too).
pub const MAX_BODY: usize = 16 * 1024;

/// `discussion.ask` params from the flags.
pub fn ask_params(args: &DiscussionAskArgs) -> Result<AskParams, AppError> {
    let (run, node) = run_and_node(
        args.run.as_deref(),
        args.node.as_deref(),
        "orchestratectl discussion ask --run 01JDXJ5R --title '…'",
    )?;
    required_text("--title", &args.title, "the question in one line")?;
    let body = crate::text_file::text_or_file(
        "--body-file",
        args.body.clone(),
        args.body_file.as_deref(),
        MAX_BODY,
    )?;
    if let Some(body) = &body {
        required_text("--body", body, "some details, or leave --body out")?;
    }
    Ok(AskParams {
        run,
        node,
        title: args.title.clone(),
        body,
    })
}

async fn ask(ctx: &Ctx, args: DiscussionAskArgs) -> Result<(), AppError> {
    let params = ask_params(&args)?;
    let timeout = args.timeout.map(timeout_duration).transpose()?;
    // With --wait: where the log stands before the question, so its answer cannot be missed.
    let before = if args.wait {
        let detail = show(ctx, &params.run).await?;
        Some((detail.manifest.id, detail.manifest.last_seq))
    } else {
        None
    };
    let value = call::<method::DiscussionAsk>(ctx, &params).await?;
    let opened = result_of::<method::DiscussionAsk>(&value)?;
    let Some((run, cursor)) = before else {
        ctx.out.result(&value, || asked_text(&opened));
        return Ok(());
    };
    if !ctx.out.json {
        eprint_line(&format!(
            "Waiting for an answer to discussion {} (a human answers with: orchestratectl discussion answer {} --text '…')",
            opened.id, opened.id
        ));
    }
    let started = Instant::now();
    let wait = wait_for_answer(ctx, &run, cursor, &opened.id);
    let answer = match timeout {
        Some(limit) => match tokio::time::timeout(limit, wait).await {
            Ok(r) => r?,
            Err(_) => return Err(answer_timed_out(&opened, started.elapsed())),
        },
        None => wait.await?,
    };
    if ctx.out.json {
        ctx.out.result(
            &json!({"id": opened.id, "run": opened.run, "answer": answer}),
            String::new,
        );
    } else {
        print_text(&answer);
    }
    Ok(())
}

/// Follows run `run` from `cursor` until discussion `id` is resolved; returns the answer.
/// Fails if the run ends first.
async fn wait_for_answer(ctx: &Ctx, run: &str, cursor: u64, id: &str) -> Result<String, AppError> {
    let mut events = Events::new(run, cursor);
    loop {
        let ev = events.next(ctx).await?;
        if let Some(answer) = answer_in(&ev, id) {
            return Ok(answer);
        }
        if let Some(end) = run_end_in(&ev) {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!(
                    "run {run} was {} before discussion {id} was answered",
                    end.as_str()
                ),
            )
            .with_hint(format!("see it with `orchestratectl run show {run}`")));
        }
    }
}

/// The answer if `ev` resolves discussion `id` (an answer-less resolution is `""`).
pub fn answer_in(ev: &Value, id: &str) -> Option<String> {
    if ev.get("type").and_then(Value::as_str) != Some("discussion.resolved") {
        return None;
    }
    let data = ev.get("data")?;
    if data.get("id").and_then(Value::as_str) != Some(id) {
        return None;
    }
    Some(
        data.get("answer")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    )
}

/// `completed`, `failed` or `cancelled` if `ev` ends its run.
pub fn run_end_in(ev: &Value) -> Option<RunStatus> {
    Some(match ev.get("type").and_then(Value::as_str)? {
        "run.completed" => RunStatus::Completed,
        "run.failed" => RunStatus::Failed,
        "run.cancelled" => RunStatus::Cancelled,
        _ => return None,
    })
}

fn answer_timed_out(opened: &Opened, waited: Duration) -> AppError {
    AppError::new(
        ErrorKind::Timeout,
        format!(
            "gave up waiting for an answer to discussion {} after {:.1} s; it stays open",
            opened.id,
            waited.as_secs_f64()
        ),
    )
    .with_hint(format!(
        "see it with `orchestratectl discussion list --run {}`; a human answers with `orchestratectl discussion answer {} --text '…'`",
        opened.run, opened.id
    ))
}

/// ```text
/// Opened discussion 01j…x in run 01J…
///   a human answers: orchestratectl discussion answer 01j…x --text '…'
/// ```
pub fn asked_text(o: &Opened) -> String {
    format!(
        "Opened discussion {id} in run {run}\n  a human answers: orchestratectl discussion answer {id} --text '…'",
        id = o.id,
        run = o.run
    )
}

async fn list(ctx: &Ctx, args: DiscussionListArgs) -> Result<(), AppError> {
    let run = match args.run.as_deref().filter(|r| !r.is_empty()) {
        Some(r) => Some(parse_run_ref("--run", r)?.as_str().to_string()),
        None => None,
    };
    let params = ListParams {
        run: run.clone(),
        open: args.open.then_some(true),
    };
    let value = call::<method::DiscussionList>(ctx, &params).await?;
    let items = result_of::<method::DiscussionList>(&value)?;
    ctx.out
        .result(&value, || list_text(&items, run.as_deref(), args.open));
    Ok(())
}

/// The `discussion list` table: ID, RUN, NODE, STATUS (open or answered), TITLE.
pub fn list_text(items: &[DiscussionItem], run: Option<&str>, open_only: bool) -> String {
    if items.is_empty() {
        let what = if open_only {
            "No open discussions"
        } else {
            "No discussions"
        };
        return match run {
            Some(run) => format!("{what} in run {run}."),
            None => format!("{what}."),
        };
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|d| {
            vec![
                d.id.clone(),
                d.run.clone(),
                cell(d.node.as_deref()),
                if d.open { "open" } else { "answered" }.to_string(),
                one_line(&d.title, 100),
            ]
        })
        .collect();
    table(&["ID", "RUN", "NODE", "STATUS", "TITLE"], &rows)
}

async fn answer(ctx: &Ctx, args: DiscussionAnswerArgs) -> Result<(), AppError> {
    let id = record_id("discussion", "orchestratectl discussion list", &args.id)?;
    required_text("--text", &args.text, "the answer")?;
    let params = AnswerParams {
        id,
        text: args.text.clone(),
    };
    let value = call::<method::DiscussionAnswer>(ctx, &params).await?;
    let d = result_of::<method::DiscussionAnswer>(&value)?;
    ctx.out.result(&value, || answered_text(&d));
    Ok(())
}

/// `Answered discussion 01j… of run 01J… (node api goes on)`
pub fn answered_text(d: &DiscussionItem) -> String {
    let mut text = format!("Answered discussion {} of run {}", d.id, d.run);
    if let Some(node) = &d.node {
        text.push_str(&format!(" (node {node} goes on)"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask_args(run: Option<&str>, node: Option<&str>, title: &str) -> DiscussionAskArgs {
        DiscussionAskArgs {
            title: title.into(),
            body: None,
            body_file: None,
            wait: false,
            timeout: None,
            run: run.map(Into::into),
            node: node.map(Into::into),
        }
    }

    #[test]
    fn the_body_can_come_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("body.md");
        std::fs::write(&path, "option A\noption B\n").unwrap();
        let mut a = ask_args(Some("01JDXJ5R"), None, "which?");
        a.body_file = Some(path);
        assert_eq!(
            ask_params(&a).unwrap().body.as_deref(),
            Some("option A\noption B\n")
        );
        std::fs::write(a.body_file.as_ref().unwrap(), "x".repeat(MAX_BODY + 1)).unwrap();
        let err = ask_params(&a).unwrap_err();
        assert!(
            err.message.contains("the limit is 16384 bytes"),
            "{}",
            err.message
        );
    }

    #[test]
    fn ask_params_need_a_run_and_a_title() {
        let p = ask_params(&ask_args(Some("01jdxj5r"), None, "which db?")).unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"run": "01JDXJ5R", "title": "which db?"})
        );
        let mut a = ask_args(Some("01JDXJ5R"), Some("api"), "t");
        a.body = Some("details".into());
        assert_eq!(
            serde_json::to_value(ask_params(&a).unwrap()).unwrap(),
            json!({"run": "01JDXJ5R", "node": "api", "title": "t", "body": "details"})
        );
        let err = ask_params(&ask_args(None, None, "t")).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert!(err.message.starts_with("missing --run"), "{}", err.message);
        let err = ask_params(&ask_args(Some("01JDXJ5R"), Some("API"), "t")).unwrap_err();
        assert!(err.message.starts_with("invalid --node"), "{}", err.message);
        let err = ask_params(&ask_args(Some("01JDXJ5R"), None, " ")).unwrap_err();
        assert!(
            err.message.starts_with("invalid --title"),
            "{}",
            err.message
        );
        // An empty OCTL_NODE means no node.
        let p = ask_params(&ask_args(Some("01JDXJ5R"), Some(""), "t")).unwrap();
        assert!(p.node.is_none());
    }

    #[test]
    fn ids_are_lower_cased_and_checked() {
        assert_eq!(
            record_id("discussion", "x", "01JDXK7ZQ3").unwrap(),
            "01jdxk7zq3"
        );
        assert_eq!(
            record_id("discussion", "x", "merge-01jdxk").unwrap(),
            "merge-01jdxk"
        );
        let err = record_id("discussion", "orchestratectl discussion list", "../etc").unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert_eq!(
            err.message,
            "invalid discussion id \"../etc\": use the id that `orchestratectl discussion list` shows (1-63 of a-z, 0-9 and '-')"
        );
    }

    #[test]
    fn finding_the_answer_in_the_stream() {
        let resolved = json!({"seq": 9, "type": "discussion.resolved", "node": "api",
            "data": {"id": "q1", "answer": "use sqlite"}});
        assert_eq!(answer_in(&resolved, "q1").as_deref(), Some("use sqlite"));
        assert_eq!(answer_in(&resolved, "q2"), None);
        let opened = json!({"seq": 8, "type": "discussion.opened", "data": {"id": "q1"}});
        assert_eq!(answer_in(&opened, "q1"), None);
        let bare = json!({"type": "discussion.resolved", "data": {"id": "q1"}});
        assert_eq!(answer_in(&bare, "q1").as_deref(), Some(""));
        assert_eq!(
            run_end_in(&json!({"type": "run.cancelled"})),
            Some(RunStatus::Cancelled)
        );
        assert_eq!(run_end_in(&json!({"type": "node.done"})), None);
    }

    #[test]
    fn texts() {
        let o = Opened {
            id: "01jdxk".into(),
            run: "01JDXJ5R8Q4M0ZK7P2W9TB3C6E".into(),
        };
        assert_eq!(
            asked_text(&o),
            "Opened discussion 01jdxk in run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n  a human answers: orchestratectl discussion answer 01jdxk --text '…'"
        );
        let items: Vec<DiscussionItem> = serde_json::from_value(json!([
            {"id": "q1", "run": "01R", "node": "api", "title": "which\ndb?", "body": null,
             "open": true, "answer": null, "opened_at": "t", "resolved_at": null},
            {"id": "merge-x", "run": "01S", "node": null, "title": "conflict", "body": "b",
             "open": false, "answer": "merged", "opened_at": "t", "resolved_at": "t"}
        ]))
        .unwrap();
        assert_eq!(
            list_text(&items, None, false),
            "ID       RUN  NODE  STATUS    TITLE\nq1       01R  api   open      which db?\nmerge-x  01S  -     answered  conflict\n"
        );
        assert_eq!(list_text(&[], None, true), "No open discussions.");
        assert_eq!(
            list_text(&[], Some("01R"), false),
            "No discussions in run 01R."
        );
        assert_eq!(
            answered_text(&items[0]),
            "Answered discussion q1 of run 01R (node api goes on)"
        );
        assert_eq!(
            answered_text(&items[1]),
            "Answered discussion merge-x of run 01S"
        );
        let e = answer_timed_out(&o, Duration::from_millis(1500));
        assert_eq!(e.kind.exit_code(), 1);
        assert_eq!(
            e.message,
            "gave up waiting for an answer to discussion 01jdxk after 1.5 s; it stays open"
        );
    }
}
