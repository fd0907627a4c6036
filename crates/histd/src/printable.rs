//! Characters no output should carry raw: control characters (terminal escape sequences, NUL,
//! a newline or tab that would start a line or a field) and the bidirectional overrides that
//! reorder how a line is shown. With `keyNameSanitize: false` a key may hold them (issue 48,
//! P15); an answer histd's tools echo may too (P3).

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

#[cfg(test)]
mod tests {
    use super::*;

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
