//! `orchestratectl tui`: every run on one screen, those that need a human first; a run's
//! nodes as a tree with the selected node's screen, log, diff and events; the inbox of pending
//! permission requests, open questions, proposals and merges; and the actions that clear them.
//!
//! - [`model`]: the runs as summaries and folds of their logs (the daemon's own reducer), and
//!   what is derived from them once per change (who needs you, cost, order).
//! - [`source`]: the data thread: the daemon (or, when it is down, the logs on disk, read-only),
//!   actions and loads, all off the UI thread.
//! - [`app`]: the state and how keys and updates change it (pure; tested without a terminal).
//! - [`views`]: drawing it (ratatui), only what fits on the screen.
//! - [`keys`]: the key map and the table `?` shows.
//! - [`actions`]: the daemon's methods behind each action; handing the terminal to tmux,
//!   `$EDITOR` or `$SHELL` and taking it back.
//! - [`detail`]: loading a node's screen, log, diff and events.
//!
//! This loop owns the terminal: raw mode and the alternate screen are left on every way out
//! (return, error, panic), and redraws happen only when something changed or on the 1 s tick.

pub mod actions;
pub mod app;
pub mod detail;
pub mod keys;
pub mod model;
pub mod source;
pub mod views;

#[cfg(test)]
mod tests;

use std::io::{self, IsTerminal, Write};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind};
use crossterm::{cursor, execute, terminal};
use octl_proto::AppError;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::client::Client;
use crate::commands::Ctx;
use app::{App, Effect};
use source::Update;

pub const TUI_EXAMPLES: &str = "\
Examples:
  orchestratectl tui                      # every run, those that need you first
  NO_COLOR=1 orchestratectl tui           # without colours
  OCTL_NO_AUTOSTART=1 orchestratectl tui  # never start the daemon; read the logs if it is down

Keys (? shows them): j/k move, enter open, esc back, tab next pane, / filter, i inbox,
a answer, y/n accept/reject (a permission: allow/deny), A allow always, m merge, r retry,
x cancel, t attach, s send input, p screen, l log, d diff, e events, o $EDITOR, ! $SHELL,
q quit.";

#[derive(Debug, Args)]
pub struct TuiArgs {}

/// How often elapsed times move and a live node's screen and log are read again.
const TICK: Duration = Duration::from_secs(1);
/// How often the input thread looks whether it should stop reading (for a handoff).
const INPUT_POLL: Duration = Duration::from_millis(100);

pub async fn execute(ctx: &Ctx, _args: TuiArgs) -> Result<i32, AppError> {
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        return Err(
            AppError::invalid("tui needs a terminal: stdin or stdout is not one")
                .with_hint("for scripts use `orchestratectl --json run list` or `run watch`"),
        );
    }
    let home = ctx.client.home().clone();
    let client = Client::new(home.clone(), ctx.client.autostart());
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    run(client, App::new(color, home.tmux_socket()))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Raw mode and the alternate screen, left again when dropped.
struct Screen {
    term: Terminal<CrosstermBackend<io::Stdout>>,
}

fn enter_terminal() -> io::Result<()> {
    terminal::enable_raw_mode()?;
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
}

fn leave_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    let _ = io::stdout().flush();
}

impl Screen {
    fn enter() -> Result<Screen, AppError> {
        let fail = |e: io::Error| AppError::internal(format!("cannot set up the terminal: {e}"));
        // A panic anywhere leaves the terminal usable before its message is printed.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            leave_terminal();
            previous(info);
        }));
        enter_terminal().map_err(fail)?;
        let term = Terminal::new(CrosstermBackend::new(io::stdout())).map_err(fail)?;
        Ok(Screen { term })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        leave_terminal();
    }
}

/// The input thread's state: reading keys, or stopped while another program has the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    On,
    /// Asked to stop; it answers by setting `Off`.
    Stopping,
    Off,
}

/// Reads keys and resizes on a thread of its own, into the UI's one channel. While another
/// program has the terminal it reads nothing: [`Input::pause`] returns only once it stopped,
/// so not one keystroke meant for tmux or the editor is taken.
struct Input {
    state: Arc<(Mutex<Reading>, Condvar)>,
}

impl Input {
    fn start(tx: mpsc::Sender<Update>) -> Input {
        let state = Arc::new((Mutex::new(Reading::On), Condvar::new()));
        let shared = state.clone();
        std::thread::Builder::new()
            .name("octl-tui-input".into())
            .spawn(move || loop {
                {
                    let (lock, cv) = &*shared;
                    let mut st = lock.lock().expect("input state");
                    if *st == Reading::Stopping {
                        *st = Reading::Off;
                        cv.notify_all();
                    }
                    while *st != Reading::On {
                        st = cv.wait(st).expect("input state");
                    }
                }
                match event::poll(INPUT_POLL) {
                    Ok(true) => {
                        let on = *shared.0.lock().expect("input state") == Reading::On;
                        if !on {
                            continue;
                        }
                        match event::read() {
                            Ok(ev) => {
                                if tx.send(Update::Input(ev)).is_err() {
                                    return;
                                }
                            }
                            Err(_) => return,
                        }
                    }
                    Ok(false) => {}
                    Err(_) => return,
                }
            })
            .expect("the input thread starts");
        Input { state }
    }

    fn pause(&self) {
        let (lock, cv) = &*self.state;
        let mut st = lock.lock().expect("input state");
        *st = Reading::Stopping;
        while *st != Reading::Off {
            st = cv.wait(st).expect("input state");
        }
    }

    fn resume(&self) {
        let (lock, cv) = &*self.state;
        *lock.lock().expect("input state") = Reading::On;
        cv.notify_all();
    }
}

/// Updates handled before a frame is drawn at most: a flood of them (reading 1,000 logs)
/// never holds the screen back longer than this.
const DRAIN_BUDGET: Duration = Duration::from_millis(30);

fn run(client: Client, mut app: App) -> Result<i32, AppError> {
    let (tx, updates) = mpsc::channel();
    let requests = source::spawn(client, tx.clone());
    let mut screen = Screen::enter()?;
    let input = Input::start(tx);
    let io_err = |e: io::Error| AppError::internal(format!("terminal: {e}"));
    app.now_ms = now_ms();
    let mut next_tick = Instant::now() + TICK;
    loop {
        let mut effects = Vec::new();
        let wait = next_tick.saturating_duration_since(Instant::now());
        let mut pending: Vec<Update> = match updates.recv_timeout(wait) {
            Ok(u) => vec![u],
            Err(mpsc::RecvTimeoutError::Timeout) => Vec::new(),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(0),
        };
        let drain_until = Instant::now() + DRAIN_BUDGET;
        while Instant::now() < drain_until {
            match updates.try_recv() {
                Ok(u) => pending.push(u),
                Err(_) => break,
            }
        }
        // Events of many updates are folded as one batch: the order and the inbox are
        // derived once for all of them.
        let mut events = Vec::new();
        // Whether the batch holds feed events (they may ring the bell).
        let mut live = false;
        let batch = |events: Vec<octl_proto::Event>, live: bool| {
            if live {
                Update::Live(events)
            } else {
                Update::Events(events)
            }
        };
        for u in pending {
            match u {
                Update::Events(mut e) => events.append(&mut e),
                Update::Live(mut e) => {
                    events.append(&mut e);
                    live = true;
                }
                Update::Input(TermEvent::Key(k)) if k.kind != KeyEventKind::Release => {
                    if !events.is_empty() {
                        effects.extend(app.update(batch(std::mem::take(&mut events), live)));
                        live = false;
                    }
                    let ch = match k.code {
                        KeyCode::Char(c) => Some(c),
                        KeyCode::Backspace => Some('\u{8}'),
                        _ => None,
                    };
                    effects.extend(app.key(keys::cmd_of(k), ch));
                }
                Update::Input(TermEvent::Resize(..)) => app.dirty = true,
                Update::Input(_) => {}
                other => {
                    if !events.is_empty() {
                        effects.extend(app.update(batch(std::mem::take(&mut events), live)));
                        live = false;
                    }
                    effects.extend(app.update(other));
                }
            }
        }
        if !events.is_empty() {
            effects.extend(app.update(batch(events, live)));
        }
        if Instant::now() >= next_tick {
            next_tick = Instant::now() + TICK;
            effects.extend(app.tick(now_ms()));
        }
        for effect in effects {
            match effect {
                Effect::Quit => return Ok(0),
                Effect::Bell => {
                    let mut out = io::stdout();
                    let _ = out.write_all(b"\x07").and_then(|()| out.flush());
                }
                Effect::Request(r) => {
                    let _ = requests.send(r);
                }
                Effect::Handoff(h) => {
                    input.pause();
                    leave_terminal();
                    let result = h.run();
                    enter_terminal().map_err(io_err)?;
                    input.resume();
                    screen.term.clear().map_err(io_err)?;
                    if let Err(e) = result {
                        app.update(source::Update::Done(None, Err(e)));
                    }
                    app.dirty = true;
                }
            }
        }
        if app.dirty {
            app.dirty = false;
            screen.term.draw(|f| views::draw(f, &app)).map_err(io_err)?;
        }
    }
}
