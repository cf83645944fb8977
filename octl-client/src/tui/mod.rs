//! `orchestratectl tui`: every run on one screen, those that need a human first; a run's
//! nodes as a tree with the selected node's screen, log, diff and events; the inbox of open
//! questions, proposals and merges; and the actions that clear them.
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

pub const TUI_EXAMPLES: &str = "\
Examples:
  orchestratectl tui                      # every run, those that need you first
  NO_COLOR=1 orchestratectl tui           # without colours
  OCTL_NO_AUTOSTART=1 orchestratectl tui  # never start the daemon; read the logs if it is down

Keys (? shows them): j/k move, enter open, esc back, tab next pane, / filter, i inbox,
a answer, y/n accept/reject, m merge, r retry, x cancel, t attach, s send input,
p screen, l log, d diff, e events, o $EDITOR, ! $SHELL, q quit.";

#[derive(Debug, Args)]
pub struct TuiArgs {}

/// How often elapsed times move and a live node's screen and log are read again.
const TICK: Duration = Duration::from_secs(1);
/// The longest a key or an update waits to be seen.
const POLL: Duration = Duration::from_millis(15);

pub async fn execute(ctx: &Ctx, _args: TuiArgs) -> Result<i32, AppError> {
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        return Err(AppError::invalid(
            "tui needs a terminal: stdin or stdout is not one",
        )
        .with_hint("for scripts use `orchestratectl --json run list` or `run watch`"));
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

fn run(client: Client, mut app: App) -> Result<i32, AppError> {
    let (requests, updates) = source::spawn(client);
    let mut screen = Screen::enter()?;
    let io_err = |e: io::Error| AppError::internal(format!("terminal: {e}"));
    app.now_ms = now_ms();
    let mut next_tick = Instant::now() + TICK;
    loop {
        let mut effects = Vec::new();
        while let Ok(u) = updates.try_recv() {
            effects.extend(app.update(u));
        }
        if Instant::now() >= next_tick {
            next_tick = Instant::now() + TICK;
            effects.extend(app.tick(now_ms()));
        }
        if event::poll(Duration::ZERO).map_err(io_err)? {
            match event::read().map_err(io_err)? {
                TermEvent::Key(k) if k.kind != KeyEventKind::Release => {
                    let ch = match k.code {
                        KeyCode::Char(c) => Some(c),
                        KeyCode::Backspace => Some('\u{8}'),
                        _ => None,
                    };
                    effects.extend(app.key(keys::cmd_of(k), ch));
                }
                TermEvent::Resize(..) => app.dirty = true,
                _ => {}
            }
        }
        for effect in effects {
            match effect {
                Effect::Quit => return Ok(0),
                Effect::Request(r) => {
                    let _ = requests.send(r);
                }
                Effect::Handoff(h) => {
                    leave_terminal();
                    let result = h.run();
                    enter_terminal().map_err(io_err)?;
                    screen.term.clear().map_err(io_err)?;
                    if let Err(e) = result {
                        app.update(source::Update::Done(Err(e)));
                    }
                    app.dirty = true;
                }
            }
        }
        if app.dirty {
            app.dirty = false;
            screen
                .term
                .draw(|f| views::draw(f, &app))
                .map_err(io_err)?;
        }
        // Waits for a key (or the next look at the updates).
        let _ = event::poll(POLL);
    }
}
