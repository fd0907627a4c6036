//! The last rejected line of each reason: its first bytes, where it came from and when, so
//! that "bad lines: 1,204" can be followed by which line was bad.

use std::net::IpAddr;

use proto::ParseError;

/// Bytes of a rejected line kept.
pub const BAD_LINE_BYTES: usize = 120;

/// A rejected line, cut to [`BAD_LINE_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadLine {
    bytes: [u8; BAD_LINE_BYTES],
    len: u8,
    /// Longer than what is kept.
    pub cut: bool,
    /// The sending peer, when the listener knows it (stream connections).
    pub source: Option<IpAddr>,
    /// Unix seconds it arrived.
    pub unix_s: u64,
}

impl BadLine {
    /// `line` (its first bytes) from `source` at `unix_s`.
    pub fn new(line: &[u8], source: Option<IpAddr>, unix_s: u64) -> BadLine {
        let len = line.len().min(BAD_LINE_BYTES);
        let mut bytes = [0; BAD_LINE_BYTES];
        bytes[..len].copy_from_slice(&line[..len]);
        BadLine { bytes, len: len as u8, cut: line.len() > len, source, unix_s }
    }

    /// The line as text safe to print anywhere: invalid UTF-8 replaced, control characters
    /// (a terminal's escapes among them) written as `\u{..}` escapes, `…` when cut.
    pub fn text(&self) -> String {
        let mut text = String::new();
        for c in String::from_utf8_lossy(&self.bytes[..usize::from(self.len)]).chars() {
            match c.is_control() {
                true => text.extend(c.escape_unicode()),
                false => text.push(c),
            }
        }
        if self.cut {
            text.push('…');
        }
        text
    }
}

/// The last rejected line of each reason, in [`ParseError::ALL`] order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BadLines(pub [Option<BadLine>; ParseError::ALL.len()]);

impl BadLines {
    /// Keeps `line` as the last of `reason`.
    pub fn record(&mut self, reason: ParseError, line: BadLine) {
        self.0[reason.index()] = Some(line);
    }

    /// Takes the later of each reason's examples from `other`.
    pub fn add(&mut self, other: &BadLines) {
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            if let Some(theirs) = theirs {
                if mine.is_none_or(|mine| mine.unix_s <= theirs.unix_s) {
                    *mine = Some(*theirs);
                }
            }
        }
    }

    /// Each reason that has an example, with it.
    pub fn iter(&self) -> impl Iterator<Item = (ParseError, &BadLine)> {
        ParseError::ALL.iter().zip(&self.0).filter_map(|(reason, line)| line.as_ref().map(|line| (*reason, line)))
    }

    /// The most recent example of any reason.
    pub fn latest(&self) -> Option<(ParseError, &BadLine)> {
        self.iter().max_by_key(|(_, line)| line.unix_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_short_and_printable() {
        let cases: [(&[u8], &str); 4] = [
            (b"api.latency:abc|ms", "api.latency:abc|ms"),
            (b"\x1b]0;pwned\x07x:1|c", "\\u{1b}]0;pwned\\u{7}x:1|c"),
            (&[b'y'; 200], &format!("{}…", "y".repeat(BAD_LINE_BYTES)).leak()[..]),
            (b"caf\xc3", "caf\u{fffd}"),
        ];
        for (line, want) in cases {
            assert_eq!(BadLine::new(line, None, 1).text(), want, "{line:?}");
        }
    }

    #[test]
    fn the_latest_of_each_reason_is_kept() {
        let (mut a, mut b) = (BadLines::default(), BadLines::default());
        a.record(ParseError::BadValue, BadLine::new(b"old", None, 10));
        b.record(ParseError::BadValue, BadLine::new(b"new", None, 20));
        b.record(ParseError::NoType, BadLine::new(b"x", None, 5));
        a.add(&b);
        let kept: Vec<(&str, String)> = a.iter().map(|(reason, line)| (reason.as_str(), line.text())).collect();
        assert_eq!(kept, [("no_type", "x".to_string()), ("bad_value", "new".to_string())]);
        assert_eq!(a.latest().map(|(reason, _)| reason), Some(ParseError::BadValue));
    }
}
