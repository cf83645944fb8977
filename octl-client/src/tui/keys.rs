//! The keys: what each one means, and the table `?` shows (docs/TUI.md's table is this one).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// A key's meaning, before the view decides what it does there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    Up,
    Down,
    Top,
    Bottom,
    Open,
    Back,
    NextPane,
    Filter,
    Answer,
    Accept,
    Reject,
    /// `A`: allow a permission request and its tool's pattern for the rest of the run.
    AllowAlways,
    Merge,
    Retry,
    Cancel,
    Attach,
    Send,
    /// `c`: a review of the node's work that asks its agent for changes.
    Review,
    Diff,
    Log,
    Screen,
    Events,
    Editor,
    Shell,
    Inbox,
    Help,
    Quit,
}

impl Cmd {
    /// Does it ask octld to change something (refused at once while octld does not answer)?
    pub fn changes_something(self) -> bool {
        matches!(
            self,
            Cmd::Answer
                | Cmd::Accept
                | Cmd::Reject
                | Cmd::AllowAlways
                | Cmd::Merge
                | Cmd::Retry
                | Cmd::Cancel
                | Cmd::Send
                | Cmd::Review
        )
    }
}

/// Every key, its command and what it does, in the order `?` lists them.
pub const KEYS: &[(&str, Cmd, &str)] = &[
    ("j / ↓", Cmd::Down, "move down (in the diff: its line)"),
    ("k / ↑", Cmd::Up, "move up"),
    ("g / G", Cmd::Top, "first / last"),
    ("enter", Cmd::Open, "open the run, node or item"),
    ("esc", Cmd::Back, "back, or close this"),
    (
        "tab",
        Cmd::NextPane,
        "next pane (runs ⇄ inbox; nodes ⇄ detail)",
    ),
    ("/", Cmd::Filter, "filter the list"),
    (
        "i",
        Cmd::Inbox,
        "inbox: permissions, questions, proposals, conflicts",
    ),
    ("a", Cmd::Answer, "answer the question"),
    (
        "y / n",
        Cmd::Accept,
        "permission: allow / deny; proposal: accept / reject",
    ),
    (
        "A",
        Cmd::AllowAlways,
        "allow the permission always (for the run; asks)",
    ),
    ("m", Cmd::Merge, "merge (asks first)"),
    ("r", Cmd::Retry, "retry the node (asks first)"),
    (
        "x",
        Cmd::Cancel,
        "cancel the run (asks; discard asks twice)",
    ),
    (
        "t",
        Cmd::Attach,
        "attach to the agent's window (detach: C-b d)",
    ),
    (
        "s / c",
        Cmd::Send,
        "send a line / review (on a diff line: names it)",
    ),
    ("p / l", Cmd::Screen, "the agent's screen / log"),
    (
        "d / e",
        Cmd::Diff,
        "diff (d again: since the last review) / events",
    ),
    ("o / !", Cmd::Editor, "$EDITOR / $SHELL in the worktree"),
    ("?", Cmd::Help, "this help"),
    ("q", Cmd::Quit, "quit"),
];

/// The command of a key press, if it has one.
pub fn cmd_of(key: KeyEvent) -> Option<Cmd> {
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        return match key.code {
            KeyCode::Char('c') => Some(Cmd::Quit),
            _ => None,
        };
    }
    Some(match key.code {
        KeyCode::Char('j') | KeyCode::Down => Cmd::Down,
        KeyCode::Char('k') | KeyCode::Up => Cmd::Up,
        KeyCode::Char('g') | KeyCode::Home => Cmd::Top,
        KeyCode::Char('G') | KeyCode::End => Cmd::Bottom,
        KeyCode::Enter => Cmd::Open,
        KeyCode::Esc => Cmd::Back,
        KeyCode::Tab | KeyCode::BackTab => Cmd::NextPane,
        KeyCode::Char('/') => Cmd::Filter,
        KeyCode::Char('i') => Cmd::Inbox,
        KeyCode::Char('a') => Cmd::Answer,
        KeyCode::Char('y') => Cmd::Accept,
        KeyCode::Char('n') => Cmd::Reject,
        KeyCode::Char('A') => Cmd::AllowAlways,
        KeyCode::Char('m') => Cmd::Merge,
        KeyCode::Char('r') => Cmd::Retry,
        KeyCode::Char('x') => Cmd::Cancel,
        KeyCode::Char('t') => Cmd::Attach,
        KeyCode::Char('s') => Cmd::Send,
        KeyCode::Char('c') => Cmd::Review,
        KeyCode::Char('p') => Cmd::Screen,
        KeyCode::Char('l') => Cmd::Log,
        KeyCode::Char('d') => Cmd::Diff,
        KeyCode::Char('e') => Cmd::Events,
        KeyCode::Char('o') => Cmd::Editor,
        KeyCode::Char('!') => Cmd::Shell,
        KeyCode::Char('?') => Cmd::Help,
        KeyCode::Char('q') => Cmd::Quit,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_command_has_its_key() {
        for (keys, cmd, _) in KEYS {
            let first = keys.split(" / ").next().unwrap();
            let code = match first {
                "enter" => KeyCode::Enter,
                "esc" => KeyCode::Esc,
                "tab" => KeyCode::Tab,
                s => KeyCode::Char(s.chars().next().unwrap()),
            };
            assert_eq!(
                cmd_of(KeyEvent::new(code, KeyModifiers::NONE)),
                Some(*cmd),
                "{keys}"
            );
        }
    }
}
