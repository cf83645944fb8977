//! The unit tests of the tmux module, against a real tmux server on a private socket in a
//! temporary directory: the harness here, the tests by subject in the files below.

use super::*;
use std::fs;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod control_client;
mod recovery;
mod server_options;
mod windows;
mod without_server;

/// How a test's commands reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Through the control client, once the server runs.
    Control,
    /// Every command a process.
    Process,
    /// Every command a process, while another handle's control client is attached: its
    /// session is then the default target of command-line clients too.
    ProcessBesideClient,
}

const MODES: [Mode; 3] = [Mode::Control, Mode::Process, Mode::ProcessBesideClient];

/// A private server in a temp dir, killed when the test ends, passing or not.
struct Server {
    tmux: Tmux,
    /// In [`Mode::ProcessBesideClient`], the handle whose client stays attached.
    beside: Option<Tmux>,
    mode: Mode,
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Server {
    fn new() -> Server {
        Server::with_mode(Mode::Control)
    }

    fn with_mode(mode: Mode) -> Server {
        let tmp = tempfile::Builder::new()
            .prefix("octl-tmux")
            .tempdir()
            .unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let socket = dir.join("tmux.sock");
        Server {
            tmux: Tmux::new(&socket).with_control(mode == Mode::Control),
            beside: (mode == Mode::ProcessBesideClient)
                .then(|| Tmux::new(&socket).with_control(true)),
            mode,
            dir,
            _tmp: tmp,
        }
    }

    /// The same server through a handle that only starts processes, with nothing shared
    /// with [`Server::tmux`] (as another program's).
    fn process_only(&self) -> Tmux {
        Tmux {
            processes: Arc::default(),
            configured: Arc::default(),
            ..self.tmux.clone().with_control(false)
        }
    }

    /// Checks that the commands went the way the mode says.
    fn check_mode(&self) {
        let answers = self.tmux.control_answers();
        match self.mode {
            Mode::Control => assert!(answers > 0, "no command went through the client"),
            Mode::Process => assert_eq!(answers, 0),
            Mode::ProcessBesideClient => {
                assert_eq!(answers, 0);
                assert!(self.beside.as_ref().unwrap().control_answers() > 0);
            }
        }
    }

    fn spawn(&self, session: &str, window: &str, argv: &[&str]) -> Spawned {
        self.spawn_env(session, window, argv, &[])
    }

    fn spawn_env(
        &self,
        session: &str,
        window: &str,
        argv: &[&str],
        env: &[(String, String)],
    ) -> Spawned {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let spawned = self
            .tmux
            .spawn_window(&WindowSpec {
                session,
                window,
                cwd: &self.dir,
                env,
                argv: &argv,
                log: &self.log(window),
            })
            .unwrap();
        self.attach_beside();
        spawned
    }

    /// In [`Mode::ProcessBesideClient`], attaches the other handle's client (once the
    /// server runs).
    fn attach_beside(&self) {
        if let Some(beside) = &self.beside {
            beside.list_panes().unwrap();
        }
    }

    fn log(&self, window: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{window}.log"))
    }

    /// Polls the pane list until the pane is dead with a known status; panics after a
    /// deadline.
    fn wait_dead(&self, pane_id: &str) -> PaneInfo {
        self.attach_beside();
        wait_for(|| {
            self.tmux.list_panes().unwrap().into_iter().find(|p| {
                p.pane_id == pane_id
                    && p.dead
                    && (p.dead_status.is_some() || p.dead_signal.is_some())
            })
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.tmux.kill_server();
    }
}

fn wait_for<T>(mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "condition not met within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_file(path: &Path, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    wait_for(|| fs::read(path).ok().filter(|c| done(c)))
}

/// Runs `test` on a fresh server in each [`Mode`].
fn in_every_mode(test: impl Fn(&Server)) {
    for mode in MODES {
        eprintln!("mode: {mode:?}");
        let server = Server::with_mode(mode);
        test(&server);
        server.check_mode();
    }
}

const TRICKY: &[&str] = &[
    "$(rm -rf x)",
    "`rm -rf x`",
    "it's \"quoted\"",
    "line one\nline two\n",
    "back\\slash \\n \\\\",
    "ends with;",
    "\\;",
    ";",
    "#{pane_id} ## #",
    "",
    " ",
    "-n",
    "--",
    "* ? [a] ~ ~/x",
    "tab\there",
    "$HOME ${HOME} $1 $@ !x",
    "a=b",
    "ünïcødé ✓",
    "x; touch pwned; y",
];

/// What `/proc` says of a process's state (`T` stopped, `Z` a zombie), `None` once it is
/// gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The pid of `server`'s tmux server.
fn server_pid(server: &Server) -> u32 {
    server.process_only().read_panes().unwrap().1.unwrap()
}

fn processes(tmux: &Tmux) -> u64 {
    tmux.processes.load(Ordering::Relaxed)
}
