//! What the TUI loads on demand for one node, off the UI thread: the agent's screen, its log,
//! its diff against the merge base (and the added/removed counts of the tree), its events.

use std::path::{Path, PathBuf};

use octl_proto::event::Event;
use octl_proto::method;
use octl_proto::rpc::EventListParams;
use tokio::process::Command;

use crate::client::{find_on_path, CallError, Client};
use crate::log_file::LogFile;
use octl_proto::rpc::NodeScreenParams;
use octl_proto::ErrorKind;

/// At most this much of the end of a log is shown.
const LOG_TAIL_BYTES: u64 = 64 * 1024;
/// At most this many lines of a diff are kept.
const DIFF_MAX_LINES: usize = 5000;
/// The last this many lines of an agent's screen are asked for.
const SCREEN_LINES: u32 = 200;
/// The last this many events of a node are shown.
const EVENTS_MAX: usize = 500;

/// One thing to load, with what it needs to find it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Load {
    /// The agent's window as it is now (`target`: the tmux target `run attach` uses).
    Screen {
        run: String,
        node: String,
        target: String,
    },
    Log {
        run: String,
        node: String,
    },
    /// Against the merge base with `base`, or (`since`: a review round's tip) what the agent
    /// did since that review.
    Diff {
        run: String,
        node: String,
        worktree: String,
        base: String,
        since: Option<String>,
    },
    Numstat {
        run: String,
        node: String,
        worktree: String,
        base: String,
    },
    Events {
        run: String,
        node: String,
    },
}

impl Load {
    pub fn node(&self) -> (&str, &str) {
        match self {
            Load::Screen { run, node, .. }
            | Load::Log { run, node }
            | Load::Diff { run, node, .. }
            | Load::Numstat { run, node, .. }
            | Load::Events { run, node } => (run, node),
        }
    }
}

/// What a load gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    Lines(Vec<String>),
    Numstat {
        added: u64,
        removed: u64,
    },
    /// Why it could not be loaded (shown as such, never as an empty result).
    Unavailable(String),
}

pub async fn load(client: &Client, live: bool, what: &Load) -> Loaded {
    match what {
        Load::Screen { run, node, target } => {
            screen(
                client,
                live,
                run,
                node,
                &client.home().tmux_socket(),
                target,
            )
            .await
        }
        Load::Log { run, node } => log_tail(&client.home().runs().join(run).join("logs"), node),
        Load::Diff {
            worktree,
            base,
            since,
            ..
        } => diff(worktree, base, since.as_deref()).await,
        Load::Numstat { worktree, base, .. } => numstat(worktree, base).await,
        Load::Events { run, node } => events(client, live, run, node).await,
    }
}

/// The agent's window as text: `node.screen` from the daemon (through its runner); with the
/// daemon down (or older than `node.screen`), `tmux capture-pane` on its private server, the
/// window `run attach` reaches: agents keep running without the daemon.
async fn screen(
    client: &Client,
    live: bool,
    run: &str,
    node: &str,
    socket: &Path,
    target: &str,
) -> Loaded {
    if live {
        let params = NodeScreenParams {
            run: run.to_string(),
            node: node.to_string(),
            lines: Some(SCREEN_LINES),
        };
        match client.try_call_method::<method::NodeScreen>(&params).await {
            Ok(s) => return Loaded::Lines(text_lines(s.screen.as_bytes())),
            Err(CallError::Failed(e)) if e.kind != ErrorKind::MethodNotFound => {
                return Loaded::Unavailable(e.message)
            }
            Err(_) => {}
        }
    }
    capture(socket, target).await
}

async fn capture(socket: &Path, target: &str) -> Loaded {
    let Some(tmux) = find_on_path("tmux") else {
        return Loaded::Unavailable("tmux is not installed".into());
    };
    let out = Command::new(tmux)
        .arg("-S")
        .arg(socket)
        .args(["capture-pane", "-p", "-J", "-t", target])
        .output()
        .await;
    match out {
        Ok(o) if o.status.success() => Loaded::Lines(text_lines(&o.stdout)),
        Ok(o) => Loaded::Unavailable(format!(
            "no window to show: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Loaded::Unavailable(format!("cannot run tmux: {e}")),
    }
}

/// The log a node's agent printed: `NODE.pane.log` (Claude Code's readable rendering) if
/// there is one, else `NODE.log`; its last [`LOG_TAIL_BYTES`].
pub fn log_path(logs: &Path, node: &str) -> PathBuf {
    let pane = logs.join(format!("{node}.pane.log"));
    if pane.exists() {
        pane
    } else {
        logs.join(format!("{node}.log"))
    }
}

fn log_tail(logs: &Path, node: &str) -> Loaded {
    use std::io::{Read, Seek, SeekFrom};
    let path = log_path(logs, node);
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => return Loaded::Unavailable(format!("no log at {}: {e}", path.display())),
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(LOG_TAIL_BYTES);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start))
        .and_then(|_| f.read_to_end(&mut buf))
        .is_err()
    {
        return Loaded::Unavailable(format!("cannot read {}", path.display()));
    }
    let mut lines = text_lines(&buf);
    if start > 0 && !lines.is_empty() {
        // The first line is cut.
        lines.remove(0);
    }
    let mut out = vec![format!("── {} ──", path.display())];
    out.extend(lines);
    Loaded::Lines(out)
}

pub use octl_proto::text::text_lines;

async fn git(worktree: &str, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(worktree)
        .args(args)
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The commit the node's branch forked from its base.
async fn merge_base(worktree: &str, base: &str) -> Result<String, String> {
    if !Path::new(worktree).is_dir() {
        return Err(format!("its worktree {worktree} is gone"));
    }
    let out = git(worktree, &["merge-base", base, "HEAD"]).await?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

/// The worktree (committed and not) against the merge base: what merging it would bring; or,
/// `since` a review round's tip, what the agent changed after that review.
async fn diff(worktree: &str, base: &str, since: Option<&str>) -> Loaded {
    let from = match since {
        Some(tip) => tip.to_string(),
        None => match merge_base(worktree, base).await {
            Ok(mb) => mb,
            Err(e) => return Loaded::Unavailable(e),
        },
    };
    match git(worktree, &["diff", "--no-color", "--no-ext-diff", &from]).await {
        Ok(out) => {
            let mut lines = text_lines(&out);
            for (path, text) in untracked(worktree).await {
                lines.push(format!("{NEW_FILE}{path}{NEW_FILE_END}"));
                lines.extend(text.lines().map(|l| format!("+{l}")));
            }
            if lines.is_empty() {
                lines.push(match since {
                    Some(_) => format!("no changes since the review (at {from:.12})"),
                    None => format!("no changes against {base} (merge base {from:.12})"),
                });
            }
            lines.truncate(DIFF_MAX_LINES);
            Loaded::Lines(lines)
        }
        Err(e) => Loaded::Unavailable(e),
    }
}

/// How the diff view heads a file git does not know yet: `+++ PATH (new, …)`.
const NEW_FILE: &str = "+++ ";
const NEW_FILE_END: &str = " (new, not added to git yet)";

/// Where line `at` of a diff (as [`diff`] gives it) is in the agent's files, as a review
/// comment names it: `src/x.rs:42` for an added or unchanged line (its number in the new
/// file), the new file's line where a removed one was, the file alone on a file's or hunk's
/// header and in a deleted file; `None` before the first file.
pub fn diff_anchor(lines: &[String], at: usize) -> Option<String> {
    let mut path: Option<String> = None;
    let mut old_path: Option<String> = None;
    // The new file's number of the next line, inside a hunk.
    let mut next: Option<u64> = None;
    let mut here: Option<u64> = None;
    // A deleted file has no lines to name: the file alone.
    let mut deleted = false;
    for line in lines.iter().take(at + 1) {
        here = None;
        if let Some(rest) = line.strip_prefix("diff --git ") {
            // `a/x b/x`: a fallback for a file whose `+++`/`---` lines do not come (a mode
            // change, a binary file).
            path = rest.rsplit_once(" b/").map(|(_, p)| p.to_string());
            old_path = None;
            deleted = false;
            next = None;
        } else if next.is_none() && line.starts_with("--- ") {
            old_path = line[4..].strip_prefix("a/").map(str::to_string);
        } else if let Some(untracked) = line
            .strip_prefix(NEW_FILE)
            .and_then(|p| p.strip_suffix(NEW_FILE_END))
        {
            // An untracked file's text follows at once, from its line 1.
            path = Some(untracked.to_string());
            deleted = false;
            next = Some(1);
        } else if next.is_none() && line.starts_with(NEW_FILE) {
            let p = &line[NEW_FILE.len()..];
            deleted = p == "/dev/null";
            path = if deleted {
                old_path.clone()
            } else {
                Some(p.strip_prefix("b/").unwrap_or(p).to_string())
            };
        } else if let Some(hunk) = line.strip_prefix("@@ ") {
            // `@@ -a,b +c,d @@`: the new side starts at c.
            next = hunk
                .split(' ')
                .find_map(|w| w.strip_prefix('+'))
                .and_then(|w| w.split(',').next())
                .and_then(|n| n.parse().ok());
        } else if let Some(n) = next {
            match line.chars().next() {
                Some('+') | Some(' ') => {
                    here = Some(n);
                    next = Some(n + 1);
                }
                Some('-') => here = Some(n),
                _ => {}
            }
        }
    }
    let path = path?;
    Some(match here {
        Some(n) if !deleted => format!("{path}:{n}"),
        _ => path,
    })
}

async fn numstat(worktree: &str, base: &str) -> Loaded {
    let mb = match merge_base(worktree, base).await {
        Ok(mb) => mb,
        Err(e) => return Loaded::Unavailable(e),
    };
    match git(worktree, &["diff", "--numstat", "--no-ext-diff", &mb]).await {
        Ok(out) => {
            let (mut added, removed) = parse_numstat(&String::from_utf8_lossy(&out));
            added += untracked(worktree)
                .await
                .iter()
                .map(|(_, t)| t.lines().count() as u64)
                .sum::<u64>();
            Loaded::Numstat { added, removed }
        }
        Err(e) => Loaded::Unavailable(e),
    }
}

/// Files the agent made and has not added (git's diff does not see them; a merge of the
/// snapshot would): their paths and text, at most 50 files of at most 256 KiB each.
async fn untracked(worktree: &str) -> Vec<(String, String)> {
    let Ok(out) = git(
        worktree,
        &["ls-files", "--others", "--exclude-standard", "-z"],
    )
    .await
    else {
        return Vec::new();
    };
    out.split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .take(50)
        .filter_map(|p| {
            let path = String::from_utf8_lossy(p).into_owned();
            let full = Path::new(worktree).join(&path);
            let meta = std::fs::metadata(&full).ok()?;
            if !meta.is_file() || meta.len() > 256 * 1024 {
                return None;
            }
            let bytes = std::fs::read(&full).ok()?;
            // A binary file adds no lines, as in numstat.
            let text = if bytes.contains(&0) {
                String::new()
            } else {
                String::from_utf8_lossy(&bytes).into_owned()
            };
            Some((path, text))
        })
        .collect()
}

/// Sums `git diff --numstat` (binary files, `-\t-`, count as nothing).
pub fn parse_numstat(text: &str) -> (u64, u64) {
    text.lines().fold((0, 0), |(a, r), line| {
        let mut parts = line.split('\t');
        let add = parts
            .next()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        let rem = parts
            .next()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        (a + add, r + rem)
    })
}

/// The node's events, from the daemon or (when it is down) the log on disk.
async fn events(client: &Client, live: bool, run: &str, node: &str) -> Loaded {
    let all: Vec<Event> = if live {
        let params = EventListParams {
            run: run.to_string(),
            since: None,
            limit: None,
        };
        match client.try_call_method::<method::EventList>(&params).await {
            Ok(e) => e,
            Err(e) => return Loaded::Unavailable(crate::AppError::from(e).message),
        }
    } else {
        let mut log = LogFile::new(&client.home().runs().join(run));
        match log.read_new() {
            Ok(lines) => lines
                .iter()
                .filter_map(|l| Event::from_line(l).ok())
                .collect(),
            Err(e) => return Loaded::Unavailable(e.message),
        }
    };
    let mine: Vec<&Event> = all
        .iter()
        .filter(|e| e.node.as_deref() == Some(node) || about(e, node))
        .collect();
    let skip = mine.len().saturating_sub(EVENTS_MAX);
    Loaded::Lines(event_lines(&mine[skip..]))
}

/// A node's events for a pane a third of the screen wide: what tells them apart first — seq,
/// time of day, node (`-` for a run-level event about it), type — each column as wide as its
/// widest value, then the data, which is what a narrow pane cuts.
pub fn event_lines(events: &[&Event]) -> Vec<String> {
    let node_of = |e: &Event| e.node.clone().unwrap_or_else(|| "-".to_string());
    let seq_w = events
        .iter()
        .map(|e| e.seq.to_string().len())
        .max()
        .unwrap_or(1);
    let node_w = events.iter().map(|e| node_of(e).len()).max().unwrap_or(1);
    let type_w = events.iter().map(|e| e.kind.len()).max().unwrap_or(1);
    events
        .iter()
        .map(|e| {
            // `2026-11-30T10:00:03.123Z` → `10:00:03`: the day is the run's.
            let time =
                e.ts.split_once('T')
                    .map_or(e.ts.as_str(), |(_, t)| t.get(..8).unwrap_or(t));
            let data = serde_json::to_string(&e.data).unwrap_or_default();
            format!(
                "{:>seq_w$} {time} {:<node_w$} {:<type_w$} {data}",
                e.seq,
                node_of(e),
                e.kind
            )
        })
        .collect()
}

/// A run-level event about this node (a discussion or proposal it opened names it in data).
fn about(e: &Event, node: &str) -> bool {
    e.node.is_none() && e.str_field("node") == Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_sums_and_skips_binaries() {
        assert_eq!(
            parse_numstat("3\t1\ta.rs\n-\t-\tlogo.png\n10\t0\tb.rs\n"),
            (13, 1)
        );
        assert_eq!(parse_numstat(""), (0, 0));
    }

    #[test]
    fn a_diff_line_is_named_as_a_review_comment_names_it() {
        let diff: Vec<String> = [
            "diff --git a/src/x.rs b/src/x.rs",
            "index 1111111..2222222 100644",
            "--- a/src/x.rs",
            "+++ b/src/x.rs",
            "@@ -10,3 +10,4 @@ fn main() {",
            " keep",
            "-gone",
            "+new one",
            "+new two",
            "diff --git a/old.txt b/old.txt",
            "deleted file mode 100644",
            "--- a/old.txt",
            "+++ /dev/null",
            "@@ -1 +0,0 @@",
            "-bye",
            "+++ notes.txt (new, not added to git yet)",
            "+first",
            "+second",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let at = |i| diff_anchor(&diff, i);
        assert_eq!(at(0).as_deref(), Some("src/x.rs"));
        assert_eq!(at(4).as_deref(), Some("src/x.rs"));
        assert_eq!(at(5).as_deref(), Some("src/x.rs:10"));
        // A removed line is where it was in the new file: before line 11.
        assert_eq!(at(6).as_deref(), Some("src/x.rs:11"));
        assert_eq!(at(7).as_deref(), Some("src/x.rs:11"));
        assert_eq!(at(8).as_deref(), Some("src/x.rs:12"));
        assert_eq!(at(12).as_deref(), Some("old.txt"));
        assert_eq!(at(14).as_deref(), Some("old.txt"));
        assert_eq!(at(15).as_deref(), Some("notes.txt"));
        assert_eq!(at(17).as_deref(), Some("notes.txt:2"));
        assert_eq!(diff_anchor(&["no changes".to_string()], 0), None);
    }

    #[test]
    fn agent_output_cannot_drive_the_terminal() {
        let lines = text_lines(b"\x1b[31mred\x1b[0m ok\n\x1b]0;title\x07bell\tx\r\n\n\n");
        assert_eq!(lines, ["red ok", "bell    x"]);
    }
}
