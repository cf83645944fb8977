//! `run logs RUN [--node N] [--follow] [--raw]`: what a node's agent printed, read straight
//! from `runs/<RUN>/logs/` (anyone may read under `runs/`). The daemon names the run and its
//! nodes (`run.show`); `--follow` waits on the run's event stream (for the node's end) and on
//! file notifications (for new output), never polling in a loop.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use notify::{RecursiveMode, Watcher};
use octl_proto::ids::validate_node_id;
use octl_proto::rpc::{NodeShown, RunShown};
use octl_proto::state::Node;
use octl_proto::RunKind;
use octl_proto::{AppError, NodeState};
use serde_json::{json, Value};

use super::run::run_param;
use super::Ctx;
use crate::follow::{show, show_again, Events};

// The flags of `run logs`; its help is on `RunCmd::Logs`.
#[derive(Debug, Args)]
pub struct RunLogsArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node whose log to print; default: the run's only node (needed when it has several)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,

    /// Keep printing as the log grows, until the node's agent is gone
    #[arg(long, short = 'f')]
    pub follow: bool,

    /// Claude Code's raw stream-json (NODE.log) instead of its readable rendering
    #[arg(long)]
    pub raw: bool,
}

/// Even without a notification the log is read again this often (a safety net: some
/// filesystems do not notify).
const RESCAN: Duration = Duration::from_secs(1);

pub async fn logs(ctx: &Ctx, args: RunLogsArgs) -> Result<i32, AppError> {
    let run = run_param(&args.run)?.run;
    if let Some(n) = &args.node {
        validate_node_id("--node", n)?;
    }
    let detail = show(ctx, &run).await?;
    let node = pick(&detail, args.node.as_deref())?.clone();
    let run = detail.manifest.id.clone();
    let dir = ctx.client.home().runs().join(&run).join("logs");
    let mut out = Printer {
        json: ctx.out.json,
        node: node.id.clone(),
        partial: Vec::new(),
    };
    let mut reader = LogReader::new(&dir, &node.id, args.raw, stream_json(&detail, &node));
    if !args.follow {
        if reader.path().is_none() {
            return Err(no_log_yet(&run, &node, &dir));
        }
        reader.read_new(&mut out)?;
        out.finish();
        return Ok(0);
    }
    follow(ctx, &run, &node.id, &dir, &mut reader, &mut out).await?;
    out.finish();
    Ok(0)
}

/// The node asked for, else the run's only node.
pub fn pick<'a>(d: &'a RunShown, asked: Option<&str>) -> Result<&'a NodeShown, AppError> {
    let id = &d.manifest.id;
    let listing = || {
        d.nodes
            .iter()
            .map(|n| n.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (asked, d.nodes.as_slice()) {
        (Some(asked), nodes) => nodes.iter().find(|n| n.id == asked).ok_or_else(|| {
            AppError::not_found(format!(
                "run {id} has no node {asked:?}; its nodes: {}",
                if nodes.is_empty() {
                    "none".to_string()
                } else {
                    listing()
                }
            ))
        }),
        (None, []) => Err(AppError::not_found(format!(
            "run {id} has no nodes, so there is no log to show"
        ))),
        (None, [only]) => Ok(only),
        (None, nodes) => Err(AppError::invalid(format!(
            "run {id} has {} nodes: {}; choose one with --node",
            nodes.len(),
            listing()
        ))
        .with_hint(format!("orchestratectl run logs {id} --node NODE"))),
    }
}

/// Does this node's agent write stream-json (Claude Code run autonomously), so that its
/// readable rendering is a separate file?
fn stream_json(d: &RunShown, node: &Node) -> bool {
    node.agent.as_deref() == Some("claude") && d.manifest.kind != Some(RunKind::Code)
}

/// The agent has ended: nothing will be added to its log.
pub fn agent_gone(state: NodeState) -> bool {
    !matches!(
        state,
        NodeState::Pending
            | NodeState::Ready
            | NodeState::Starting
            | NodeState::Running
            | NodeState::Waiting
    )
}

fn no_log_yet(run: &str, node: &Node, dir: &Path) -> AppError {
    let why = if matches!(node.state, NodeState::Pending | NodeState::Ready) {
        "its agent has not started".to_string()
    } else {
        format!("nothing was kept in {}", dir.display())
    };
    AppError::not_found(format!(
        "node {} of run {run} has no log yet ({}: {why})",
        node.id,
        node.state.as_str()
    ))
    .with_hint(format!(
        "wait for it with `orchestratectl run logs {run} --node {} --follow`",
        node.id
    ))
}

/// Prints log bytes: as they are, or with `--json` one `{"node","line"}` object per line.
struct Printer {
    json: bool,
    node: String,
    /// With --json, the start of a line whose end has not been read yet.
    partial: Vec<u8>,
}

impl Printer {
    fn bytes(&mut self, bytes: &[u8]) {
        let mut stdout = std::io::stdout().lock();
        if !self.json {
            let _ = stdout.write_all(bytes);
            let _ = stdout.flush();
            return;
        }
        self.partial.extend_from_slice(bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        let rest = self.partial.split_off(end + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        for line in complete[..complete.len() - 1].split(|b| *b == b'\n') {
            let _ = writeln!(stdout, "{}", line_json(&self.node, line));
        }
        let _ = stdout.flush();
    }

    /// A last line without its newline is still a line.
    fn finish(&mut self) {
        if self.json && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", line_json(&self.node, &line));
            let _ = stdout.flush();
        }
    }
}

/// `{"node":"api","line":"…"}`, for one line without its `\n` (and a `\r` before it).
pub fn line_json(node: &str, line: &[u8]) -> Value {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    json!({"node": node, "line": String::from_utf8_lossy(line)})
}

/// One node's log, read from where the last read ended.
struct LogReader {
    raw: PathBuf,
    pane: PathBuf,
    /// Read the pane rendering, not the raw log.
    readable: bool,
    offset: u64,
    chosen: Option<PathBuf>,
}

impl LogReader {
    fn new(dir: &Path, node: &str, raw: bool, stream_json: bool) -> LogReader {
        let pane = dir.join(format!("{node}.pane.log"));
        // A pane rendering that exists is Claude Code's, whatever the profile is called.
        let readable = !raw && (stream_json || pane.exists());
        LogReader {
            raw: dir.join(format!("{node}.log")),
            pane,
            readable,
            offset: 0,
            chosen: None,
        }
    }

    /// The file to read, once it exists.
    fn path(&mut self) -> Option<PathBuf> {
        if self.chosen.is_none() {
            let want = if self.readable { &self.pane } else { &self.raw };
            if want.exists() {
                self.chosen = Some(want.clone());
            }
        }
        self.chosen.clone()
    }

    /// Hands what was added since the last read to `out`.
    fn read_new(&mut self, out: &mut Printer) -> Result<(), AppError> {
        let Some(path) = self.path() else {
            return Ok(());
        };
        let read_err =
            |e: std::io::Error| AppError::internal(format!("cannot read {}: {e}", path.display()));
        let mut file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(read_err(e)),
        };
        file.seek(SeekFrom::Start(self.offset)).map_err(read_err)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = file.read(&mut buf).map_err(read_err)?;
            if n == 0 {
                return Ok(());
            }
            self.offset += n as u64;
            out.bytes(&buf[..n]);
        }
    }
}

/// Prints the log as it grows until the node's agent is gone, then what it wrote last.
async fn follow(
    ctx: &Ctx,
    run: &str,
    node: &str,
    dir: &Path,
    reader: &mut LogReader,
    out: &mut Printer,
) -> Result<(), AppError> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = crate::log_file::watch_changes(tx)
        .map_err(|e| AppError::internal(format!("cannot watch {}: {e}", dir.display())))?;
    // The logs directory appears with the first node's log: watch the run directory until then.
    let mut watching_logs = false;
    let run_dir = dir.parent().unwrap_or(dir).to_path_buf();
    let watch = |w: &mut notify::RecommendedWatcher, p: &Path| {
        w.watch(p, RecursiveMode::NonRecursive)
            .map_err(|e| AppError::internal(format!("cannot watch {}: {e}", p.display())))
    };
    if dir.is_dir() {
        watch(&mut watcher, dir)?;
        watching_logs = true;
    } else {
        watch(&mut watcher, &run_dir)?;
    }
    // The state is read after the stream's cursor is fixed, so no end is missed between.
    let detail = show_again(ctx, run).await?;
    let mut events = Events::new(run, detail.manifest.last_seq);
    let mut gone = detail
        .nodes
        .iter()
        .find(|n| n.id == node)
        .is_none_or(|n| agent_gone(n.state));
    loop {
        if !watching_logs && dir.is_dir() {
            watch(&mut watcher, dir)?;
            watching_logs = true;
        }
        reader.read_new(out)?;
        if gone {
            // Its last words were written before its end was recorded: read once more.
            reader.read_new(out)?;
            if reader.path().is_none() {
                let d = show_again(ctx, run).await?;
                if let Some(n) = d.nodes.iter().find(|n| n.id == node) {
                    return Err(no_log_yet(run, n, dir));
                }
            }
            return Ok(());
        }
        tokio::select! {
            ev = events.next(ctx) => {
                let ev = ev?;
                let about_node = ev.get("node").and_then(Value::as_str) == Some(node);
                let run_ended = ev.get("node").is_none()
                    && ev
                        .get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.starts_with("run."));
                if about_node || run_ended {
                    let d = show_again(ctx, run).await?;
                    gone = d
                        .nodes
                        .iter()
                        .find(|n| n.id == node)
                        .is_none_or(|n| agent_gone(n.state));
                }
            }
            _ = rx.recv() => {
                while rx.try_recv().is_ok() {}
            }
            _ = tokio::time::sleep(RESCAN) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_and_the_end_of_an_agent() {
        assert_eq!(
            line_json("api", b"hello\r"),
            json!({"node": "api", "line": "hello"})
        );
        assert_eq!(
            line_json("api", b"a\xffb"),
            json!({"node": "api", "line": "a\u{fffd}b"})
        );
        assert!(!agent_gone(NodeState::Running));
        assert!(!agent_gone(NodeState::Pending));
        assert!(agent_gone(NodeState::Done));
        assert!(agent_gone(NodeState::Failed));
        assert!(agent_gone(NodeState::Merged));
        assert!(agent_gone(NodeState::Conflict));
    }

    fn detail(nodes: Value) -> RunShown {
        serde_json::from_value(json!({
            "manifest": {"id": "01R", "kind": "fanout", "status": "active", "title": null,
                "repo": null, "base": null, "created_at": "t", "updated_at": "t",
                "nodes": {}, "last_seq": 1},
            "nodes": nodes, "discussions": [], "spinoffs": []
        }))
        .unwrap()
    }

    fn node(id: &str) -> Value {
        json!({"id": id, "state": "running", "branch": null, "worktree": null, "agent": "shell",
               "deps": [], "created_at": "t", "updated_at": "t"})
    }

    #[test]
    fn picking_the_node() {
        let one = detail(json!([node("api")]));
        assert_eq!(pick(&one, None).unwrap().id, "api");
        let err = pick(&one, Some("ui")).unwrap_err();
        assert_eq!(err.kind.exit_code(), 3);
        assert!(err.message.contains("its nodes: api"), "{}", err.message);
        let two = detail(json!([node("u2"), node("u10")]));
        let err = pick(&two, None).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert!(
            err.message.contains("u2, u10; choose one with --node"),
            "{}",
            err.message
        );
        assert_eq!(pick(&two, Some("u10")).unwrap().id, "u10");
        assert_eq!(
            pick(&detail(json!([])), None).unwrap_err().kind.exit_code(),
            3
        );
    }
}
