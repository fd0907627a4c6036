//! Recognising HTTP where another protocol is spoken. A browser lets any web page send an
//! HTTP request to any port (`fetch(url, {mode: 'no-cors'})`), so a line-based listener that
//! runs whatever lines arrive would run the request's body: the management port would take
//! `health down` or `delcounters *` from a page the operator visits. Listeners close such a
//! connection before running or counting anything in it.

/// Methods a browser (or curl) may put on a request line.
const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "TRACE", "PRI"];

/// Whether `line` is an HTTP request line (`POST /x HTTP/1.1`, or a method and a path) or an
/// HTTP header line (`Host: example`). No statsd line or management command looks like
/// either: a statsd name never holds a space before its `:`, and no command's first word ends
/// in `:`.
pub fn looks_like_http(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let (Some(first), second) = (words.next(), words.next()) else { return false };
    let method = METHODS.iter().any(|m| m.as_bytes() == first);
    let request_line = method && second.is_some_and(|target| target.starts_with(b"/") || target.starts_with(b"*"))
        || line.ends_with(b" HTTP/1.1")
        || line.ends_with(b" HTTP/1.0");
    let header = first.len() > 1
        && first.ends_with(b":")
        && second.is_some()
        && first[..first.len() - 1].iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-');
    request_line || header
}

/// The first line of `bytes` (all of it when there is no newline).
pub fn first_line(bytes: &[u8]) -> &[u8] {
    bytes.iter().position(|&b| b == b'\n').map_or(bytes, |end| &bytes[..=end])
}

#[cfg(test)]
mod tests {
    use super::looks_like_http;

    #[test]
    fn tells_http_from_statsd_and_commands() {
        let http = [
            "POST / HTTP/1.1\r\n",
            "GET /health HTTP/1.0",
            "OPTIONS * HTTP/1.1",
            "PUT /x",
            "Host: 127.0.0.1:8126\r\n",
            "Content-Type: text/plain",
            "sec-fetch-mode: no-cors",
            "BREW /pot HTTP/1.1",
        ];
        let not_http = [
            "health down\n",
            "delcounters a.b c.*",
            "stats",
            "api.latency:12|ms",
            "GET:1|c",
            "POST:1|c|#route:/x",
            "a:1|c\nHost: x",
            "",
            "help",
        ];
        for line in http {
            assert!(looks_like_http(line.as_bytes()), "{line:?} is HTTP");
        }
        for line in not_http {
            assert!(!looks_like_http(line.as_bytes()), "{line:?} is not HTTP");
        }
    }
}
