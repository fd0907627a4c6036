//! Carbon's pickle protocol (`graphiteProtocol: "pickle"`, port `graphitePicklePort`), as
//! Etsy's graphite backend writes it: a 4-byte big-endian length, then a protocol-0 pickle of
//! a list of `(path, (timestamp, "value"))` tuples (the value as a string, as Etsy sends it).
//!
//! Carbon refuses a message over 1 MiB, so a chunk of lines becomes as many messages as keep
//! each body under [`MAX_BODY_BYTES`].

/// The largest pickle body written in one message.
pub const MAX_BODY_BYTES: usize = 512 * 1024;

/// Protocol-0 opcodes.
const MARK: u8 = b'(';
const LIST: u8 = b'l';
const STRING: u8 = b'S';
const INT: u8 = b'I';
const TUPLE: u8 = b't';
const APPEND: u8 = b'a';
const STOP: u8 = b'.';

/// Plaintext Graphite lines (`name value timestamp\n`) as length-prefixed pickle messages.
pub fn from_lines(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 3 / 2);
    let mut body = Vec::new();
    for (name, value, timestamp) in text.lines().filter_map(split_line) {
        if body.is_empty() {
            body.extend_from_slice(&[MARK, LIST]);
        }
        push_metric(&mut body, name, value, timestamp);
        if body.len() >= MAX_BODY_BYTES {
            finish_message(&mut out, &mut body);
        }
    }
    finish_message(&mut out, &mut body);
    out
}

/// `name value timestamp`, split from the right (a name may hold spaces when sanitising is
/// off).
fn split_line(line: &str) -> Option<(&str, &str, &str)> {
    let (rest, timestamp) = line.rsplit_once(' ')?;
    let (name, value) = rest.rsplit_once(' ')?;
    Some((name, value, timestamp))
}

/// `(S'name'\n(I<ts>\nS'value'\ntta`: the tuple `(name, (ts, value))` appended to the list.
fn push_metric(body: &mut Vec<u8>, name: &str, value: &str, timestamp: &str) {
    body.extend_from_slice(&[MARK, STRING]);
    push_quoted(body, name);
    body.extend_from_slice(&[MARK, INT]);
    body.extend_from_slice(timestamp.as_bytes());
    body.push(b'\n');
    body.push(STRING);
    push_quoted(body, value);
    body.extend_from_slice(&[TUPLE, TUPLE, APPEND]);
}

/// A protocol-0 string argument: quoted, with backslash escapes for the quote, backslash and
/// any byte outside printable ASCII, then a newline.
fn push_quoted(body: &mut Vec<u8>, text: &str) {
    body.push(b'\'');
    for &byte in text.as_bytes() {
        match byte {
            b'\\' | b'\'' => body.extend_from_slice(&[b'\\', byte]),
            0x20..=0x7e => body.push(byte),
            other => body.extend_from_slice(format!("\\x{other:02x}").as_bytes()),
        }
    }
    body.extend_from_slice(b"'\n");
}

/// Closes the list, prefixes the body with its length, and starts over.
fn finish_message(out: &mut Vec<u8>, body: &mut Vec<u8>) {
    if body.is_empty() {
        return;
    }
    body.push(STOP);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.append(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_etsys_bytes() {
        let payload = from_lines("stats.a 1.5 1700000000\nstats.b'q 2 1700000000\n");
        let body = b"(l(S'stats.a'\n(I1700000000\nS'1.5'\ntta(S'stats.b\\'q'\n(I1700000000\nS'2'\ntta.";
        let mut want = (body.len() as u32).to_be_bytes().to_vec();
        want.extend_from_slice(body);
        assert_eq!(payload, want);
        assert!(from_lines("").is_empty());
    }

    #[test]
    fn splits_large_chunks_into_messages_carbon_accepts() {
        let line = format!("stats.{} 1 1700000000\n", "x".repeat(100));
        let payload = from_lines(&line.repeat(20_000));
        let (mut at, mut messages, mut metrics) = (0, 0, 0);
        while at < payload.len() {
            let length = u32::from_be_bytes(payload[at..at + 4].try_into().unwrap()) as usize;
            let body = &payload[at + 4..at + 4 + length];
            assert!(length < MAX_BODY_BYTES + 1024 && body.starts_with(b"(l") && body.ends_with(b"a."));
            metrics += body.windows(3).filter(|w| w == b"tta").count();
            (at, messages) = (at + 4 + length, messages + 1);
        }
        assert!(messages > 1);
        assert_eq!(metrics, 20_000);
    }
}
