//! Series keys as Etsy statsd builds them: the metric name, then DogStatsD tags rendered as
//! Graphite tags (`;k=v`), then `keyNameSanitize`.

use crate::Tags;

/// Appends the series key for `name` with `tags` to `out`, as Etsy statsd 0.10 names it.
///
/// Each tag is appended as `;tag` with its first `;` turned into `_` and its first `:` into
/// `=` (`env:prod` becomes `;env=prod`). With `sanitize` the whole key is then cleaned by
/// [`push_sanitized`]; without it the bytes are kept (invalid UTF-8 becomes U+FFFD).
pub fn push_series_key(out: &mut String, name: &[u8], tags: Tags<'_>, sanitize: bool) {
    let push = if sanitize { push_sanitized } else { push_lossy };
    let start = out.len();
    push(out, name);
    let name_end = out.len();
    for tag in tags.iter() {
        out.push(';');
        push_tag(out, tag, push);
    }
    if out[start..name_end].contains(';') {
        return; // a `;` in the name: the tags cannot be told apart from it, kept as they came
    }
    sort_tags(&mut out[start..]);
}

/// A series key's name and its tags as `(key, value)` pairs (`lat;env=prod;beta` gives `lat`
/// and `(env, prod)`, `(beta, "")`): the parts [`push_series_key`] joined.
pub fn split_series_key(key: &str) -> (&str, impl Iterator<Item = (&str, &str)>) {
    let (name, tags) = key.split_once(';').unwrap_or((key, ""));
    let pairs = tags.split(';').filter(|tag| !tag.is_empty()).map(|tag| tag.split_once('=').unwrap_or((tag, "")));
    (name, pairs)
}

/// Puts the tags of `key` (the `;`-separated parts after the name) in byte order, so a series has one key whatever order its tags arrived in:
/// `lat;route=-login;env=prod` and `lat;env=prod;route=-login` are one series (Graphite orders a
/// tagged name's tags too; Etsy statsd kept arrival order and sent the same Graphite series
/// twice per flush, the second overwriting the first). Keys already in order cost one pass of
/// comparisons; nothing is allocated.
pub fn sort_tags(key: &mut str) {
    let Some(first) = key.find(';') else { return };
    // SAFETY: every part begins with the ASCII byte `;` and the rotations below move whole
    // parts, so the bytes stay the same multiset of complete UTF-8 sequences: valid UTF-8.
    let tags = unsafe { key[first..].as_bytes_mut() };
    let part_end =
        |tags: &[u8], at: usize| tags[at + 1..].iter().position(|&b| b == b';').map_or(tags.len(), |p| at + 1 + p);
    loop {
        let mut moved = false;
        let mut a = 0;
        while a < tags.len() {
            let b = part_end(tags, a);
            if b == tags.len() {
                break;
            }
            let c = part_end(tags, b);
            if tags[a + 1..b] > tags[b + 1..c] {
                tags[a..c].rotate_left(b - a);
                moved = true;
                a += c - b;
            } else {
                a = b;
            }
        }
        if !moved {
            return;
        }
    }
}

fn push_tag(out: &mut String, tag: &[u8], push: fn(&mut String, &[u8])) {
    let semicolon = tag.iter().position(|&b| b == b';');
    let colon = tag.iter().position(|&b| b == b':');
    let mut start = 0;
    for index in 0..tag.len() {
        let replacement: &[u8] = if Some(index) == semicolon {
            b"_"
        } else if Some(index) == colon {
            b"="
        } else {
            continue;
        };
        push(out, &tag[start..index]);
        push(out, replacement);
        start = index + 1;
    }
    push(out, &tag[start..]);
}

/// Returns `name` as a key when it needs no change at all: plain ASCII made only of
/// characters Etsy keeps. The fast path for the common case.
#[inline]
pub fn already_clean(name: &[u8]) -> Option<&str> {
    if name.iter().all(|&b| KEPT[usize::from(b)]) {
        // SAFETY: every byte is one of the ASCII characters in KEPT, so this is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(name) })
    } else {
        None
    }
}

/// True for the ASCII bytes a key keeps as they are (`[A-Za-z0-9_.;=-]`).
#[inline]
pub(crate) fn is_kept_byte(byte: u8) -> bool {
    KEPT[usize::from(byte)]
}

/// `KEPT[b]` is [`is_kept`]`(b)`, as a table.
static KEPT: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = is_kept(byte as u8);
        byte += 1;
    }
    table
};

/// Appends `raw` cleaned by Etsy's `keyNameSanitize` rules, in Etsy's order: every run of
/// whitespace (JavaScript's `\s`, Unicode spaces included) becomes one `_`, every `/` becomes
/// `-`, and every character outside `[A-Za-z0-9_.;=-]` is deleted (`café` becomes `caf`).
pub fn push_sanitized(out: &mut String, raw: &[u8]) {
    let mut in_space_run = false;
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            let space = is_js_space(c);
            if space && !in_space_run {
                out.push('_');
            } else if c == '/' {
                out.push('-');
            } else if c.is_ascii() && is_kept(c as u8) {
                out.push(c);
            }
            in_space_run = space;
        }
        if !chunk.invalid().is_empty() {
            // Decoded as U+FFFD: not a space, and deleted.
            in_space_run = false;
        }
    }
}

fn push_lossy(out: &mut String, raw: &[u8]) {
    out.push_str(&String::from_utf8_lossy(raw));
}

/// The characters Etsy's sanitiser keeps.
pub const fn is_kept(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b';' | b'=' | b'-')
}

/// JavaScript's `\s` class (which is not Rust's `char::is_whitespace`: it has U+FEFF and lacks
/// U+0085).
fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sanitized(raw: &[u8]) -> String {
        let mut out = String::new();
        push_sanitized(&mut out, raw);
        out
    }

    #[test]
    fn sorts_tags_into_one_order() {
        let cases = [
            ("lat", "lat"),
            ("lat;a=1", "lat;a=1"),
            ("lat;b=2;a=1", "lat;a=1;b=2"),
            ("lat;a=1;b=2", "lat;a=1;b=2"),
            ("lat;c;b=2;a=1;a", "lat;a;a=1;b=2;c"),
            ("lat;route=-login;env=prod", "lat;env=prod;route=-login"),
            ("x;é=1;a=é", "x;a=é;é=1"),
            ("x;a=1;a=1", "x;a=1;a=1"),
            ("x;;b;", "x;;;b"),
        ];
        for (key, want) in cases {
            let mut out = key.to_string();
            sort_tags(&mut out);
            assert_eq!(out, want, "{key}");
        }
    }

    #[test]
    fn sanitises_like_etsy() {
        let cases: &[(&[u8], &str)] = &[
            (b"a b/c!d", "a_b-cd"),
            (b"t  multi\t space", "t_multi_space"),
            (b"k=v;z", "k=v;z"),
            ("café".as_bytes(), "caf"),
            (b"", ""),
            (b"a \x01 b", "a__b"),
            ("a\u{a0}\u{2003}b".as_bytes(), "a_b"),
            ("a\u{85}b".as_bytes(), "ab"),
            (b"\xff\xfe", ""),
            (b"x\xff y", "x_y"),
            (b"path/to/x", "path-to-x"),
            (b"UPPER.lower-09_", "UPPER.lower-09_"),
        ];
        for (raw, want) in cases {
            assert_eq!(sanitized(raw), *want, "input {:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn renders_tags_like_etsy() {
        let cases: &[(&[u8], &[u8], bool, &str)] = &[
            (b"tg", b"env:prod,role;x", true, "tg;env=prod;role_x"),
            (b"tg2", b"a:b", true, "tg2;a=b"),
            (b"k", b"", true, "k"),
            (b"k", b"a:b:c", true, "k;a=bc"),
            (b"k", b"a:b:c", false, "k;a=b:c"),
            (b"k", b"x:1;2", true, "k;x=1_2"),
            (b"k", b"bare,,other", true, "k;bare;other"),
            (b"a b", b"t:x y", true, "a_b;t=x_y"),
            (b"a b", b"t:x y", false, "a b;t=x y"),
        ];
        for (name, tags, sanitize, want) in cases {
            let mut out = String::new();
            push_series_key(&mut out, name, Tags::new(tags), *sanitize);
            assert_eq!(out, *want);
        }
    }

    #[test]
    fn clean_names_take_the_fast_path() {
        assert_eq!(already_clean(b"a.b-c_d;e=f"), Some("a.b-c_d;e=f"));
        assert_eq!(already_clean(b"a b"), None);
        assert_eq!(already_clean("é".as_bytes()), None);
    }
}
