//! The test harness of orchestratectl: real binaries on a temporary home, never the user's.
//!
//! - [`browser`]: a real browser (headless Chromium over WebDriver) for the web UI's tests:
//!   waits for elements, clicks, types, reads text and takes screenshots.
//! - [`cluster`]: a real Slurm cluster and SSH hosts on this machine (root only), shared by a
//!   test process.
//! - [`env`]: [`TestEnv`], an isolated world (home, `HOME`, `CLAUDE_CONFIG_DIR`, git identity),
//!   the real `octld` started and stopped in it, and the real `orchestratectl` run in it.
//! - [`http`]: a minimal HTTP/1.1 client over the Unix socket, for raw JSON-RPC and streams.
//! - [`pane`]: a real terminal (a tmux pane on a private socket) for the TUI's tests.
//! - [`remote`]: what must hold once runs on the remote runners settled, after faults.
//! - [`repo`]: a real git repository with a test identity.
//! - [`runs`]: a finished run copied many times, for homes of a year's runs.
//! - [`tmpfs`]: a small real filesystem mounted by a test, to fill up (disk-full tests).
//! - [`wait`]: waiting on a condition with a deadline (never a bare sleep as synchronisation).

pub mod browser;
pub mod cluster;
pub mod env;
pub mod http;
pub mod model;
pub mod netns;
pub mod pane;
pub mod remote;
pub mod repo;
pub mod runs;
pub mod tmpfs;
pub mod wait;

pub use browser::Browser;
pub use env::{bin, Cli, Daemon, TestEnv};
pub use pane::Pane;
pub use repo::TestRepo;
pub use tmpfs::Tmpfs;
pub use wait::{wait_until, wait_until_describing};
