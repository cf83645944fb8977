//! Text an agent wrote, made safe to show: terminal escape sequences and other control
//! characters removed, so it cannot move a terminal's cursor or change its colours.

/// Lines of text for a terminal: escape sequences and other control characters removed (an
/// agent's output must not move our cursor or change our colours).
pub fn text_lines(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    for line in text.lines() {
        let mut clean = String::with_capacity(line.len());
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\x1b' => {
                    // CSI: ESC [ params final(0x40..=0x7e); OSC: ESC ] … BEL or ESC \.
                    match chars.peek() {
                        Some('[') => {
                            chars.next();
                            for c in chars.by_ref() {
                                if ('\x40'..='\x7e').contains(&c) {
                                    break;
                                }
                            }
                        }
                        Some(']') => {
                            for c in chars.by_ref() {
                                if c == '\x07' || c == '\\' {
                                    break;
                                }
                            }
                        }
                        _ => {
                            chars.next();
                        }
                    }
                }
                '\t' => clean.push_str("    "),
                c if c.is_control() => {}
                c => clean.push(c),
            }
        }
        out.push(clean);
    }
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out
}
