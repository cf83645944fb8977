//! `event append|list|tail|feed`. `append` validates everything locally first (the daemon
//! checks again); `tail` streams from the daemon, or reads `events.jsonl` itself when the
//! daemon is down; `feed` prints the change feed (every run's events) from a cursor.

use crate::commands::result_of;
use clap::{Args, Subcommand};
use octl_proto::event::{validate_data, validate_type};
use octl_proto::ids::{parse_run_ref, validate_idempotency_key, validate_node_id};
use octl_proto::method::{self, Method};
use octl_proto::rpc::RunParams;
use octl_proto::rpc::{EventAppendParams, EventListParams};
use octl_proto::{Actor, AppError};
use serde_json::Value;

use super::{decode, Ctx};
use crate::client::CallError;
use crate::follow::Feed;
use crate::log_file::{resolve_run_dir, seq_of, LogFile, Start};
use crate::output::{event_line, print_text, truncate};
use octl_proto::feed::FeedItem;

/// The examples of `event --help`.
pub const EVENT_EXAMPLES: &str = "\
Examples:
  orchestratectl event append --run 01JDXJ5R --type x.note --data '{\"text\":\"hello\"}'
  orchestratectl event list --run 01JDXJ5R --since 10
  orchestratectl event tail --run 01JDXJ5R --follow
  orchestratectl event feed --since now --follow";

#[derive(Debug, Subcommand)]
pub enum EventCmd {
    /// Append one event to a run's log (acknowledged once it is on disk)
    #[command(after_help = "\
Examples:
  orchestratectl event append --run 01JDXJ5R --type x.build --data '{\"ok\":true}'
  orchestratectl event append --run 01JDXJ5R --type node.added --node api
  orchestratectl event append --run 01JDXJ5R --node api --type node.done \\
      --data '{\"message\":\"added endpoint\"}' --idempotency-key api-done-1
  # inside an agent window OCTL_RUN and OCTL_NODE are set:
  orchestratectl event append --type node.progress --data '{\"message\":\"tests pass\"}'")]
    Append(EventAppendArgs),

    /// List a run's events, oldest first
    #[command(after_help = "\
Examples:
  orchestratectl event list --run 01JDXJ5R
  orchestratectl event list --run 01JDXJ5R --since 100 --limit 20
  orchestratectl --json event list --run 01JDXJ5R")]
    List(EventListArgs),

    /// Print a run's last events; with --follow keep printing new ones until interrupted
    ///
    /// Streams from the daemon when it is running. When it is not, reads
    /// HOME/runs/<RUN>/events.jsonl directly (never starting the daemon) and follows the file;
    /// if the daemon stops while following, it carries on from the file.
    #[command(after_help = "\
Examples:
  orchestratectl event tail --run 01JDXJ5R
  orchestratectl event tail --run 01JDXJ5R --lines 50
  orchestratectl --json event tail --run 01JDXJ5R --follow   # JSON lines")]
    Tail(EventTailArgs),

    /// Print every run's events in commit order (the change feed); with --follow keep
    /// printing new ones, across daemon restarts, until interrupted
    ///
    /// Each line has a cursor (shown with --json; without it, the last one is printed on
    /// stderr at the end): `--since CURSOR` carries on right after that event, also after a
    /// daemon restart, with nothing missed or repeated.
    #[command(after_help = "\
Examples:
  orchestratectl event feed                       # every event so far
  orchestratectl event feed --since now --follow  # only new ones, as they land
  orchestratectl --json event feed --follow       # {\"cursor\":…,\"event\":{…}} lines
  orchestratectl event feed --since 01JF0Q3V0Z9M6T1K8E2X4C7B5N:1200")]
    Feed(EventFeedArgs),
}

#[derive(Debug, Args)]
pub struct EventFeedArgs {
    /// Start after this cursor (a line's `cursor`), or `now` for only new events
    /// (default: from the beginning)
    #[arg(long, value_name = "CURSOR")]
    pub since: Option<String>,

    /// Keep printing new events as they land, until interrupted
    #[arg(long, short = 'f')]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct EventAppendArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: String,

    /// The node the event is about (omit for a run-level event): 1-63 of a-z, 0-9 and '-'
    #[arg(long, env = "OCTL_NODE", hide_env_values = true, value_name = "NODE")]
    pub node: Option<String>,

    /// Event type: node.added, node.progress, node.waiting, node.done, node.failed, … or a
    /// custom x.<name>
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: String,

    /// The event's payload: a JSON object of at most 64 KiB, e.g. '{"message":"done"}'
    #[arg(long, value_name = "JSON")]
    pub data: Option<String>,

    /// Makes retries safe: a repeated key returns the first append's seq and id and writes
    /// nothing (1-128 printable ASCII characters, no spaces)
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Args)]
pub struct EventListArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: String,

    /// Only events with a greater seq (default 0: from the start)
    #[arg(long, value_name = "SEQ")]
    pub since: Option<u64>,

    /// At most this many events
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
}

#[derive(Debug, Args)]
pub struct EventTailArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: String,

    /// Keep printing new events as they land, until interrupted
    #[arg(long, short = 'f')]
    pub follow: bool,

    /// How many of the last events to print first
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10)]
    pub lines: u64,
}

/// How much of a bad `--data` value an error message quotes.
const QUOTE_MAX: usize = 80;

pub async fn execute(ctx: &Ctx, cmd: EventCmd) -> Result<(), AppError> {
    match cmd {
        EventCmd::Append(args) => append(ctx, args).await,
        EventCmd::List(args) => list(ctx, args).await,
        EventCmd::Tail(args) => tail(ctx, args).await,
        EventCmd::Feed(args) => feed(ctx, args).await,
    }
}

/// Who is appending: `agent` inside an agent window (`OCTL_NODE` set), else `human`.
pub fn actor_from_env(octl_node: Option<&str>) -> Actor {
    match octl_node {
        Some(n) if !n.is_empty() => Actor::Agent,
        _ => Actor::Human,
    }
}

/// Renames the field in an `octl-proto` validation message to the CLI flag the user typed:
/// `invalid data: …` → `invalid --data: …`.
fn as_flag(mut err: AppError, field: &str, flag: &str) -> AppError {
    if let Some(rest) = err.message.strip_prefix(&format!("invalid {field}")) {
        err.message = format!("invalid {flag}{rest}");
    }
    err
}

/// Parses and checks `--data`: JSON, an object, at most 64 KiB.
pub fn parse_data(given: &str) -> Result<Value, AppError> {
    let quoted = truncate(given, QUOTE_MAX);
    let value: Value = serde_json::from_str(given).map_err(|e| {
        AppError::invalid(format!(
            "invalid --data {quoted:?}: not valid JSON ({e}); give a JSON object such as '{{\"message\":\"…\"}}'"
        ))
    })?;
    let map = validate_data(Some(value)).map_err(|e| {
        let e = as_flag(e, "data", "--data");
        match e.message.strip_prefix("invalid --data") {
            Some(rest) => AppError {
                message: format!("invalid --data {quoted:?}{rest}"),
                ..e
            },
            None => e,
        }
    })?;
    Ok(Value::Object(map))
}

/// Builds the `event.append` params from the flags, checking each one.
pub fn append_params(
    args: &EventAppendArgs,
    octl_node_env: Option<&str>,
) -> Result<EventAppendParams, AppError> {
    let run = parse_run_ref("--run", &args.run)?;
    if let Some(node) = &args.node {
        validate_node_id("--node", node)?;
    }
    validate_type(&args.kind).map_err(|e| as_flag(e, "type", "--type"))?;
    let data = args.data.as_deref().map(parse_data).transpose()?;
    if let Some(key) = &args.idempotency_key {
        validate_idempotency_key(key)
            .map_err(|e| as_flag(e, "idempotency_key", "--idempotency-key"))?;
    }
    Ok(EventAppendParams {
        run: run.as_str().to_string(),
        node: args.node.clone(),
        kind: args.kind.clone(),
        data,
        idempotency_key: args.idempotency_key.clone(),
        actor: Some(actor_from_env(octl_node_env)),
    })
}

async fn append(ctx: &Ctx, args: EventAppendArgs) -> Result<(), AppError> {
    let env_node = std::env::var("OCTL_NODE").ok();
    let params = append_params(&args, env_node.as_deref())?;
    let value = ctx
        .client
        .call_value::<method::EventAppend>(&params)
        .await?;
    let r = result_of::<method::EventAppend>(&value)?;
    ctx.out
        .result(&value, || format!("Appended seq {} ({})", r.seq, r.id));
    Ok(())
}

async fn list(ctx: &Ctx, args: EventListArgs) -> Result<(), AppError> {
    let params = EventListParams {
        run: parse_run_ref("--run", &args.run)?.as_str().to_string(),
        since: args.since,
        limit: args.limit,
    };
    let value = ctx.client.call_value::<method::EventList>(&params).await?;
    let events: Vec<Value> = decode(method::EventList::NAME, &value)?;
    ctx.out.result(&value, || {
        events.iter().map(event_line).collect::<Vec<_>>().join("\n")
    });
    Ok(())
}

async fn tail(ctx: &Ctx, args: EventTailArgs) -> Result<(), AppError> {
    let run = parse_run_ref("--run", &args.run)?;
    let lines = usize::try_from(args.lines).unwrap_or(usize::MAX);
    let shown = match ctx
        .client
        .try_call_method::<method::RunShow>(&RunParams {
            run: run.as_str().to_string(),
        })
        .await
    {
        Ok(detail) => {
            let id = detail.manifest.id;
            let since = detail.manifest.last_seq.saturating_sub(args.lines);
            match ctx.client.event_stream(&id, since, args.follow).await {
                Ok(mut stream) => {
                    let mut last = since;
                    loop {
                        match stream.next_line().await {
                            Ok(Some(line)) => {
                                last = seq_of(&line).unwrap_or(last);
                                ctx.out.event_line(&line);
                            }
                            Ok(None) => break,
                            Err(e) if !args.follow => return Err(e),
                            Err(_) => break,
                        }
                    }
                    if !args.follow {
                        return Ok(());
                    }
                    // The daemon went away while we followed: carry on from the file.
                    if !ctx.out.json {
                        eprintln!("note: octld stopped; following the log file from seq {last}");
                    }
                    Start::AfterSeq(last)
                }
                Err(CallError::NotRunning(_) | CallError::Dropped(_)) => Start::LastLines(lines),
                Err(CallError::Failed(e)) => return Err(e),
            }
        }
        Err(CallError::NotRunning(_) | CallError::Dropped(_)) => Start::LastLines(lines),
        Err(CallError::Failed(e)) => return Err(e),
    };
    tail_file(ctx, &args, shown).await
}

async fn feed(ctx: &Ctx, args: EventFeedArgs) -> Result<(), AppError> {
    let client = &ctx.client;
    // Starts the daemon when autostart allows (the feed is the daemon's).
    client
        .call_value::<method::DaemonStatus>(&method::NoParams {})
        .await?;
    let print = |item: &FeedItem| {
        if ctx.out.json {
            let line = serde_json::to_string(item).expect("a feed item serializes");
            crate::output::print_line(&line);
        } else {
            let ev = serde_json::to_value(&item.event).expect("an event serializes");
            print_text(&format!("{}  {}", item.event.run, event_line(&ev)));
        }
    };
    if args.follow {
        let mut feed = Feed::new(args.since.as_deref());
        loop {
            print(&feed.next(client).await?);
        }
    }
    let mut stream = client
        .feed(args.since.as_deref(), false)
        .await
        .map_err(AppError::from)?;
    let mut last = stream.start().map(str::to_string);
    while let Some(item) = stream.next().await? {
        print(&item);
        last = Some(item.cursor);
    }
    if let (false, Some(last)) = (ctx.out.json, last) {
        eprintln!("carry on with: orchestratectl event feed --since {last}");
    }
    Ok(())
}

/// `event tail` without the daemon: read and follow `runs/<RUN>/events.jsonl` directly.
async fn tail_file(ctx: &Ctx, args: &EventTailArgs, start: Start) -> Result<(), AppError> {
    let runs = ctx.client.home().runs();
    let (_id, dir) = resolve_run_dir(&runs, "--run", &args.run)?;
    let mut log = LogFile::new(&dir);
    for line in log.initial(start)? {
        ctx.out.event_line(&line);
    }
    if args.follow {
        let out = ctx.out;
        log.follow(&mut |line: &str| out.event_line(line)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use octl_proto::ErrorKind;
    use serde_json::json;

    fn args(run: &str, node: Option<&str>, kind: &str, data: Option<&str>) -> EventAppendArgs {
        EventAppendArgs {
            run: run.into(),
            node: node.map(Into::into),
            kind: kind.into(),
            data: data.map(Into::into),
            idempotency_key: None,
        }
    }

    const RUN: &str = "01JDXJ5R8Q4M0ZK7P2W9TB3C6E";

    #[test]
    fn good_params() {
        let p = append_params(
            &args(
                "01jdxj5r",
                Some("api"),
                "node.done",
                Some(r#"{"message":"ok"}"#),
            ),
            None,
        )
        .unwrap();
        assert_eq!(p.run, "01JDXJ5R");
        assert_eq!(p.actor, Some(Actor::Human));
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v,
            json!({"run":"01JDXJ5R","node":"api","type":"node.done","data":{"message":"ok"},"actor":"human"})
        );
        let p = append_params(&args(RUN, None, "x.note", None), Some("api")).unwrap();
        assert_eq!(p.actor, Some(Actor::Agent));
        assert!(serde_json::to_value(&p).unwrap().get("data").is_none());
    }

    #[test]
    fn bad_data_names_the_flag_the_value_and_the_form() {
        let err = append_params(&args(RUN, None, "x.a", Some("{oops")), None).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert_eq!(err.kind.exit_code(), 2);
        assert!(
            err.message
                .starts_with("invalid --data \"{oops\": not valid JSON"),
            "{}",
            err.message
        );
        assert!(err.message.contains("JSON object"), "{}", err.message);

        let err = append_params(&args(RUN, None, "x.a", Some("[1,2]")), None).unwrap_err();
        assert!(
            err.message
                .starts_with("invalid --data \"[1,2]\": got a JSON array"),
            "{}",
            err.message
        );

        let long = format!("{{\"a\":\"{}\"}}", "x".repeat(70 * 1024));
        let err = append_params(&args(RUN, None, "x.a", Some(&long)), None).unwrap_err();
        assert!(err.message.contains("64 KiB"), "{}", err.message);
        assert!(
            err.message.len() < 400,
            "the value is quoted in full: {}",
            err.message.len()
        );
        assert!(err.message.contains('…'));
    }

    #[test]
    fn bad_ids_and_types() {
        let err = append_params(&args("../x", None, "x.a", None), None).unwrap_err();
        assert!(
            err.message
                .starts_with("invalid --run \"../x\": it looks like a path"),
            "{}",
            err.message
        );
        let err = append_params(&args(RUN, Some("../x"), "x.a", None), None).unwrap_err();
        assert_eq!(
            err.message,
            "invalid --node \"../x\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit"
        );
        let err = append_params(&args(RUN, None, "node.exploded", None), None).unwrap_err();
        assert!(
            err.message.starts_with("invalid --type \"node.exploded\""),
            "{}",
            err.message
        );
        let mut a = args(RUN, None, "x.a", None);
        a.idempotency_key = Some("has space".into());
        let err = append_params(&a, None).unwrap_err();
        assert!(
            err.message.starts_with("invalid --idempotency-key"),
            "{}",
            err.message
        );
    }

    #[test]
    fn actor() {
        assert_eq!(actor_from_env(Some("api")), Actor::Agent);
        assert_eq!(actor_from_env(Some("")), Actor::Human);
        assert_eq!(actor_from_env(None), Actor::Human);
    }
}
