//! Quoting for the two parsers text meets on its way to a pane: `sh` and tmux's own.

use std::borrow::Cow;

/// Quotes one word for POSIX `sh` so that it reaches the program exactly as given: words of
/// only safe characters stay bare, everything else is single-quoted (`'` becomes `'\''`).
pub fn sh_quote(word: &str) -> Cow<'_, str> {
    let safe = |b: u8| b.is_ascii_alphanumeric() || b"_-+:,./@%".contains(&b);
    if !word.is_empty() && word.bytes().all(safe) {
        return Cow::Borrowed(word);
    }
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('\'');
    for c in word.chars() {
        if c == '\'' {
            quoted.push_str("'\\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    Cow::Owned(quoted)
}

/// Quotes and joins an argv for `sh`.
pub fn sh_join<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|a| sh_quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Escapes one argument for tmux's command line, where a trailing `;` ends the command:
/// `a;` is passed as `a\;`, which tmux turns back into `a;`.
pub fn tmux_arg(arg: &str) -> Cow<'_, str> {
    match arg.strip_suffix(';') {
        Some(head) => Cow::Owned(format!("{head}\\;")),
        None => Cow::Borrowed(arg),
    }
}

/// Escapes text that tmux expands as a format (`#{…}`).
pub(super) fn format_literal(text: &str) -> String {
    text.replace('#', "##")
}
