//! `bench tmux`: the median time of `list_panes` and of spawns, by process and through the
//! control client, the two taking turns so that the machine's load weighs on both alike. It
//! drives `octld::tmux` directly on private servers in temporary directories (no daemon).
//! (Until this moved here it was the ignored unit test `tmux_timing` in `octld/src/tmux/`.)

use std::path::PathBuf;
use std::time::{Duration, Instant};

use octld::tmux::{Tmux, WindowSpec, DEFAULT_SIZE};

use super::{median, Row};

/// A private server in a temp dir, driven one way, killed at the end.
struct Server {
    tmux: Tmux,
    /// How the handle's commands reach the server.
    by: &'static str,
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Server {
    fn new(control: bool) -> Server {
        let tmp = tempfile::Builder::new()
            .prefix("octl-tmux")
            .tempdir()
            .unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        Server {
            tmux: Tmux::new(dir.join("tmux.sock")).with_control(control),
            by: if control { "control client" } else { "process" },
            dir,
            _tmp: tmp,
        }
    }

    fn log(&self, window: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{window}.log"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.tmux.kill_server();
    }
}

fn ms(times: Vec<Duration>) -> f64 {
    median(
        times
            .into_iter()
            .map(|t| t.as_secs_f64() * 1000.0)
            .collect(),
    )
}

/// Ours is the control client, the baseline a process per command.
pub fn timings(rows: &mut Vec<Row>) {
    let servers = [Server::new(false), Server::new(true)];
    let argv = vec!["sleep".to_string(), "600".to_string()];
    let spawn = |tmux: &Tmux, server: &Server, session: &str, window: &str, first: bool| {
        let log = server.log(window);
        let spec = WindowSpec {
            session,
            window,
            cwd: &server.dir,
            env: &[],
            argv: &argv,
            log: &log,
        };
        let start = Instant::now();
        if first {
            tmux.spawn_first_window(&spec).unwrap();
        } else {
            tmux.spawn_window(&spec).unwrap();
        }
        start.elapsed()
    };
    let list = |server: &Server| {
        let start = Instant::now();
        server.tmux.list_panes().unwrap();
        start.elapsed()
    };
    // Each figure: 50 turns of each server.
    let measure = |f: &dyn Fn(&Server, usize) -> Duration| {
        let mut times = [Vec::new(), Vec::new()];
        for i in 0..50 {
            for (k, server) in servers.iter().enumerate() {
                times[k].push(f(server, i));
            }
        }
        times.map(ms)
    };
    for server in &servers {
        spawn(&server.tmux, server, "warm", "w", false);
        list(server);
    }
    let lists_1 = measure(&|s, _| list(s));
    // A node's window in its run's session, then a new run's first window.
    let windows = measure(&|s, i| spawn(&s.tmux, s, "run", &format!("n{i}"), false));
    // New runs' first windows, taking turns with ones for which the server-wide options
    // are sent again, as they were before the handle remembered its server: those go through
    // a handle that shares the control client but knows no server yet (`with_size` forgets
    // it).
    let mut sessions = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    for i in 0..100 {
        for (k, server) in servers.iter().enumerate() {
            let again = i % 2 == 1;
            let tmux = if again {
                server
                    .tmux
                    .clone()
                    .with_size(DEFAULT_SIZE.0, DEFAULT_SIZE.1)
            } else {
                server.tmux.clone()
            };
            sessions[k][usize::from(again)].push(spawn(
                &tmux,
                server,
                &format!("run{i}"),
                "first",
                true,
            ));
        }
    }
    let [sessions, sessions_again] = [0, 1].map(|again| {
        [
            ms(sessions[0][again].clone()),
            ms(sessions[1][again].clone()),
        ]
    });
    let lists_151 = measure(&|s, _| list(s));
    for server in &servers {
        eprintln!(
            "tmux by {}: {} commands answered by the control client",
            server.by,
            server.tmux.control_answers()
        );
    }
    let figures = [
        ("list_panes, 1 pane", lists_1, 1000.0, "µs"),
        ("spawn_window in the run's session", windows, 1.0, "ms"),
        ("spawn_first_window (new session)", sessions, 1.0, "ms"),
        (
            "spawn_first_window, server-wide options sent again",
            sessions_again,
            1.0,
            "ms",
        ),
        ("list_panes, 151 panes", lists_151, 1000.0, "µs"),
    ];
    for (what, [process, control], scale, unit) in figures {
        rows.push(Row {
            metric: format!("tmux {what} (median of 50): control client vs a process"),
            ours: control * scale,
            baseline: Some(process * scale),
            unit,
            target: "—".into(),
            pass: true,
            skipped: None,
        });
    }
}
