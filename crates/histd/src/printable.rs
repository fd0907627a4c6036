//! Characters no output should carry raw: control characters (terminal escape sequences, NUL,
//! a newline or tab that would start a line or a field) and the bidirectional overrides that
//! reorder how a line is shown. With `keyNameSanitize: false` a key may hold them (issue 48,
//! P15); an answer histd's tools echo may too (P3): outputs write them `_`
//! ([`push_replaced`]), what a person reads has them escaped ([`escaped`]).

use std::borrow::Cow;

/// Whether `c` is a control character or a bidirectional control.
pub fn unprintable(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Appends `text` to `out` with every [`unprintable`] character written `_`.
pub fn push_replaced(out: &mut String, text: &str) {
    match text.chars().any(unprintable) {
        false => out.push_str(text),
        true => out.extend(text.chars().map(|c| if unprintable(c) { '_' } else { c })),
    }
}

/// `text` safe to print on a terminal: control characters (escape sequences among them, and
/// the bidirectional overrides that reorder what a line shows) written as `\u{..}`; at most
/// `2,000` characters, the rest said to be cut.
pub fn escaped(text: &str) -> Cow<'_, str> {
    const SHOWN: usize = 2_000;
    let unsafe_char = |c: char| c != '\n' && unprintable(c);
    if !text.chars().any(unsafe_char) && text.len() <= SHOWN {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(SHOWN) + 16);
    for (shown, c) in text.chars().enumerate() {
        if shown == SHOWN {
            out.push_str(&format!("... ({} bytes in all)", text.len()));
            break;
        }
        match unsafe_char(c) {
            true => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_printed_without_their_control_characters() {
        let cases: &[(&str, &str)] = &[
            ("up", "up"),
            ("two\nlines", "two\nlines"),
            ("{\"status\":\"up\u{1b}]0;pwned\u{7}\u{1b}[2J\"}", "{\"status\":\"up\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\"}"),
            ("abc\u{202e}def", "abc\\u{202e}def"),
            ("nul\0", "nul\\u{0}"),
            ("tab\there", "tab\\u{9}here"),
            ("é ü", "é ü"),
        ];
        for (text, want) in cases {
            assert_eq!(escaped(text), *want, "{text:?}");
        }
        let long = "a".repeat(5_000);
        let shown = escaped(&long);
        assert!(shown.starts_with(&"a".repeat(2_000)) && shown.ends_with("... (5000 bytes in all)"), "{shown}");
    }

    #[test]
    fn control_and_bidi_characters_are_replaced() {
        let cases = [
            ("api.hits", "api.hits"),
            ("ctl\u{1b}[31mred\u{7}", "ctl_[31mred_"),
            ("uni\u{202e}\0nul", "uni__nul"),
            ("tab\tnew\nline", "tab_new_line"),
            ("é ü", "é ü"),
        ];
        for (text, want) in cases {
            let mut out = String::new();
            push_replaced(&mut out, text);
            assert_eq!(out, want, "{text:?}");
        }
    }
}
