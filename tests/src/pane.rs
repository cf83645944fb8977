//! A real terminal for a test: a pane of a tmux server on a private socket (its own config:
//! `-f /dev/null`), running a program in the test's isolated environment. Keys go in with
//! `send-keys`, the screen comes out with `capture-pane`; waits poll the screen for text.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::env::TestEnv;
use crate::wait::wait_until;

pub struct Pane {
    socket: PathBuf,
}

impl Pane {
    /// Starts `program args` in a detached `width`×`height` session, with `env`'s isolation
    /// (and the extra variables).
    pub fn start(
        env: &TestEnv,
        width: u16,
        height: u16,
        extra: &[(&str, &str)],
        program: &std::path::Path,
        args: &[&str],
    ) -> Pane {
        // A socket of its own per pane: a killed server's socket may linger a moment.
        static PANES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = PANES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = env.root.path().join(format!("term-{n}.sock"));
        let mut cmd = Command::new("tmux");
        cmd.arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-s", "t"])
            .args(["-x", &width.to_string(), "-y", &height.to_string()]);
        env.isolate(&mut cmd);
        cmd.env("TERM", "xterm-256color");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd.arg("--").arg(program).args(args);
        let out = cmd.output().expect("start tmux");
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pane = Pane { socket };
        pane.tmux(&["set-option", "-t", "t", "remain-on-exit", "on"]);
        pane
    }

    /// `orchestratectl tui` on `env`'s home in a `width`×`height` pane, started only when
    /// `Enter` is sent (it waits in a shell's `read`), so a timing from that key leaves tmux's
    /// own start out.
    pub fn tui_on_enter(env: &TestEnv, width: u16, height: u16) -> Pane {
        let home = env.home.display().to_string();
        Pane::start(
            env,
            width,
            height,
            &[],
            std::path::Path::new("/bin/sh"),
            &[
                "-c",
                "read _; exec \"$0\" --home \"$1\" tui",
                &crate::env::bin("orchestratectl").display().to_string(),
                &home,
            ],
        )
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends tmux key names (`Enter`, `Escape`, `j`, `C-c`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Types text literally.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "t", "-l", text]);
    }

    /// The screen as text, one line per row.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits until the screen shows `text`; returns the screen.
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_screen(&format!("the screen to show {text:?}"), |s| {
            s.contains(text)
        })
    }

    /// Waits until `check` holds for the screen; the panic shows the last screen.
    pub fn wait_screen(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_until(what, Duration::from_secs(30), || {
                last = self.screen();
                check(&last).then(|| last.clone())
            })
        }));
        match found {
            Ok(s) => s,
            Err(_) => panic!("timed out waiting for {what}; the screen:\n{last}"),
        }
    }

    /// The pid of the pane's program.
    pub fn pid(&self) -> u32 {
        self.tmux(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("a pane pid")
    }

    /// Is the program still running in the pane?
    pub fn alive(&self) -> bool {
        self.tmux(&["display-message", "-p", "-t", "t", "#{pane_dead}"])
            .trim()
            == "0"
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}
