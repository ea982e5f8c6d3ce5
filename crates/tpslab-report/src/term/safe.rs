//! What makes text from records safe to print on a terminal.

/// `s` with its control characters (ESC of an escape sequence, NUL, BEL, CR, C1) and the
/// Unicode line and paragraph separators shown escaped (`\u{1b}`), never sent raw to a
/// terminal; the characters in `keep` (a line feed, a tab) stay.
pub fn escaped(s: &str, keep: &[char]) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if !keep.contains(&c) && (c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// A terminal report safe to print: the strings in it come from records, which may come
/// from another host (a fleet agent's) or another user, so they are [`escaped`]; line feeds
/// and tabs stay. The renderers themselves use no escape sequences.
pub fn terminal_safe(text: &[u8]) -> Vec<u8> {
    escaped(&String::from_utf8_lossy(text), &['\n', '\t']).into_bytes()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_records_control_characters_reach_the_terminal_escaped() {
        let text = "note: \u{1b}]52;c;aGk=\u{7}\u{1b}[31mred\r\u{9b}x\n\tok │\n";
        assert_eq!(
            String::from_utf8(super::terminal_safe(text.as_bytes())).unwrap(),
            "note: \\u{1b}]52;c;aGk=\\u{7}\\u{1b}[31mred\\u{d}\\u{9b}x\n\tok │\n"
        );
    }
}
