//! octld, the orchestratectl daemon. One per `$OCTL_HOME`; it owns every run.
//!
//! - [`daemon`]: the daemon's life: lock, load, serve, shut down; [`run`] is the entry point.
//! - [`activation`]: a socket handed over by systemd or launchd, and readiness (`sd_notify`).
//! - [`home`]: the state layout under `$OCTL_HOME` and its permissions.
//! - [`lock`]: the daemon lock (`octld.lock`): one daemon per home.
//! - [`nofile`]: the open-file limit: raised at start, named in errors that hit it.
//! - [`logging`]: JSON-lines logs to `octld.log` (and stderr in the foreground).
//! - [`store`]: the event store: per-run logs, group commit, projections, repair.
//! - [`server`]: the Unix-socket HTTP server: peer-uid check, limits, JSON-RPC, event streams.
//! - [`ui`]: the web UI served over HTTP(S) when asked: login, sessions, the page, TLS.
//! - [`rpc`]: the JSON-RPC methods, one file per method family, and the OpenRPC document.
//! - [`engine`]: what drives agent runs: spawn, supervise, gate, merge, clean up, cancel.
//! - [`invariants`]: what a run's log says of git, checked against git (`doctor`, tests).
//! - [`failpoint`]: test-only crash and I/O-error points (`OCTL_FAILPOINTS`; debug builds only).
//! - [`agents`]: agent profiles (`shell`, `claude`, `codex`, `gemini`, `opencode`, `aider`,
//!   user argv templates) and their launch.
//! - [`streams`]: how Codex, Gemini CLI and opencode's JSON-lines output says they ended.
//! - [`config`]: `config.toml`: agent profiles, defaults, notifiers, runners, worktree
//!   bootstrap and `[limits]`.
//! - [`contain`]: agents' processes on this machine: cgroups (memory limits), the environment
//!   marker, measuring and ending them whatever became of their window.
//! - [`sandbox`]: agents in bubblewrap: the view of the machine they get, their branch's
//!   private ref brought back.
//! - [`notify`]: telling a person when a node needs one (a command, a webhook).
//! - [`bootstrap`]: a new worktree made ready: included ignored files, links, setup, port.
//! - [`pool`]: the warm pool: worktrees checked out ahead of time, taken by a spawn.
//! - [`wrap`]: `octld agent-wrap`: shows a stream-json agent readably, keeps the raw log.
//! - [`ended`]: how a child process ended, in words (`killed by signal 7 (SIGBUS)`).
//! - [`git`]: git plumbing (worktrees, merge-tree, compare-and-swap refs, snapshots).
//! - [`runner`]: the seam to where agents run (start, observe all, stop); tmux is the one runner.
//! - [`tmux`]: the private tmux server (sessions, windows, pane status, logs); commands go
//!   through one control-mode client (`tmux::control`), a process each only as a fallback.

pub mod activation;
pub(crate) mod agents;
pub(crate) mod bootstrap;
pub(crate) mod config;
pub mod contain;
pub mod daemon;
pub(crate) mod ended;
pub(crate) mod engine;
pub(crate) mod failpoint;
pub(crate) mod git;
pub mod home;
pub mod invariants;
pub(crate) mod kept;
pub mod lock;
pub(crate) mod logging;
pub mod nofile;
pub(crate) mod notify;
pub(crate) mod pool;
pub(crate) mod rpc;
pub mod runner;
pub mod sandbox;
pub(crate) mod server;
pub mod store;
pub(crate) mod streams;
pub mod tmux;
pub(crate) mod ui;
pub mod wrap;

pub use daemon::{run, Daemon, DaemonError, Options};
