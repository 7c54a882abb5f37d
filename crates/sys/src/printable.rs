//! Text from other programs (node, client and thread names, comms) made safe to print on a
//! terminal: the one escaping function every text output uses. Pure; called on whichever
//! thread formats the text (never an audio thread).
//!
//! A name is chosen by whoever started the program that carries it, so it can hold an escape
//! sequence that moves the cursor, rewrites earlier lines, retitles the window or (on some
//! terminals) answers back. JSON outputs keep the raw string: serde escapes what JSON needs.

use std::borrow::Cow;

/// Whether `c` is a control character a terminal may act on: C0 (U+0000..U+001F, which holds
/// ESC), DEL (U+007F), or C1 (U+0080..U+009F, which holds the 8-bit CSI).
pub fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` with every control character ([`is_control`]) written as a visible escape: `\x1b`
/// for C0 and DEL, `\u{9b}` for C1. Borrowed, unchanged, when there is none (the usual case).
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_control(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_borrowed_unchanged() {
        for name in ["system:playback_1", "Firefox — Tab", "ñandú 🎵", ""] {
            assert!(matches!(printable(name), Cow::Borrowed(n) if n == name));
        }
    }

    #[test]
    fn c0_del_and_c1_controls_are_escaped_visibly() {
        assert_eq!(printable("evil\x1b[2Jname"), "evil\\x1b[2Jname");
        assert_eq!(printable("a\nb\tc\rd\0"), "a\\x0ab\\x09c\\x0dd\\x00");
        assert_eq!(printable("del\x7f"), "del\\x7f");
        assert_eq!(printable("csi\u{9b}31m"), "csi\\u{9b}31m");
        assert_eq!(printable("nel\u{85}"), "nel\\u{85}");
        // The first printable characters past each range stay.
        assert_eq!(printable(" ~\u{a0}"), " ~\u{a0}");
        // Nothing escaped is left for a terminal to act on.
        let all: String = (0u32..0x100).filter_map(char::from_u32).collect();
        assert!(!printable(&all).chars().any(is_control));
    }
}
