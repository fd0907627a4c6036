//! Property tests: the parser never panics, and every accepted metric re-encodes to a line that
//! parses back to the same metric.

use proptest::prelude::*;
use proto::encode::encode_metric;
use proto::{lines, parse_line, scan_lines, Line, Metric, Scanned};

fn metrics_of(line: &[u8]) -> Vec<Metric<'_>> {
    match parse_line(line) {
        Line::Metrics(values) => values.filter_map(Result::ok).collect(),
        Line::Event | Line::ServiceCheck => Vec::new(),
    }
}

/// Lines shaped like statsd, with every field drawn from valid and invalid choices.
fn statsd_like() -> impl Strategy<Value = Vec<u8>> {
    let name = "[a-zA-Z0-9._ /;=:-]{0,12}";
    let value = prop_oneof![
        "[-+]?[0-9]{1,6}(\\.[0-9]{0,3})?(e[-+]?[0-9])?",
        Just("Infinity".to_string()),
        Just("0x1f".to_string()),
        "[a-z]{0,3}",
        Just(String::new()),
        " -[0-9]{1,3}",
        Just(" -0".to_string()),
    ];
    let kind = prop_oneof!["c", "ms", "g", "s", "h", "d", "zz", "", " c"];
    let rate = prop_oneof![Just(String::new()), "\\|@[-+]?[0-9]?\\.?[0-9]{0,2}(e-1)?", "\\|[a-z]{1,3}"];
    let group = (value, kind, rate).prop_map(|(v, k, r)| format!("{v}|{k}{r}"));
    let groups = prop::collection::vec(group, 1..4).prop_map(|g| g.join(":"));
    let tail = prop_oneof![
        Just(String::new()),
        "\\|#[a-z:;,]{0,10}",
        "\\|#[a-z]{1,3}:[a-z]{1,3}\\|c:ci-[0-9a-f]{4}",
        "\\|T[0-9]{1,10}",
        "\\|card:low\\|e:it-false",
    ];
    (name, groups, tail).prop_map(|(n, g, t)| format!("{n}:{g}{t}").into_bytes())
}

/// The one-pass scanner splits `packet` into the same lines as [`lines`], and wherever it
/// reads a line itself it gives exactly the full parser's one metric and series key.
fn assert_scan_agrees(packet: &[u8]) {
    let scanned: Vec<Scanned<'_>> = scan_lines(packet).collect();
    let split: Vec<&[u8]> = lines(packet).collect();
    assert_eq!(scanned.len(), split.len(), "packet {:?}", line_text(packet));
    for (item, line) in scanned.into_iter().zip(split) {
        let simple = match item {
            Scanned::Other(other) => {
                assert_eq!(other, line, "packet {:?}", line_text(packet));
                continue;
            }
            Scanned::Simple(simple) => simple,
        };
        let Line::Metrics(values) = parse_line(line) else { panic!("{:?} is a metric line", line_text(line)) };
        let values: Vec<_> = values.collect();
        let [Ok(metric)] = values.as_slice() else { panic!("{:?} gave {values:?}", line_text(line)) };
        let want = (metric.kind, metric.value, metric.sample_rate, metric.timestamp);
        let got = (simple.kind, simple.value, simple.sample_rate, None);
        assert_eq!(got, want, "line {:?}", line_text(line));
        let mut fast_key = String::new();
        simple.push_key(&mut fast_key);
        if let Some(short) = simple.short_key {
            assert_eq!(Some(short), proto::ShortKey::new(fast_key.as_bytes()), "line {:?}", line_text(line));
        }
        for sanitize in [true, false] {
            let mut key = String::new();
            proto::key::push_series_key(&mut key, metric.name, metric.tags, sanitize);
            assert_eq!(fast_key, key, "line {:?}, sanitize {sanitize}", line_text(line));
        }
    }
}

fn assert_round_trip(line: &[u8]) {
    for metric in metrics_of(line) {
        let mut encoded = Vec::new();
        encode_metric(&metric, &mut encoded);
        let again = metrics_of(&encoded);
        assert_eq!(again, vec![metric], "line {:?} encoded as {:?}", line_text(line), line_text(&encoded));
    }
}

fn line_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics_on_any_bytes(packet in prop::collection::vec(any::<u8>(), 0..300)) {
        for line in lines(&packet) {
            if let Line::Metrics(values) = parse_line(line) {
                values.for_each(drop);
            }
        }
    }

    #[test]
    fn accepted_lines_round_trip(line in statsd_like()) {
        assert_round_trip(&line);
        assert_scan_agrees(&line);
    }

    #[test]
    fn the_one_pass_scanner_agrees_with_the_parser(
        lines in prop::collection::vec("[a-z. ;=:|_-]{0,4}:[-+]?[0-9.]{0,6}(\\|(c|ms|g|h|d|s|cc|@1))?(\\|@[-0-9.]{0,4})?(\\|#[a-z:;,= ._-]{0,8})?\r?", 0..5),
        separator in "\n|\r\n|\n\n",
    ) {
        assert_scan_agrees(lines.join(&separator).as_bytes());
    }

    #[test]
    fn the_one_pass_scanner_agrees_on_statsd_packets(lines in prop::collection::vec(statsd_like(), 1..5)) {
        assert_scan_agrees(&lines.join(&b'\n'));
    }

    #[test]
    fn the_one_pass_scanner_reads_long_and_short_decimals_as_the_parser(
        values in prop::collection::vec("-?[0-9]{0,10}(\\.[0-9]{0,10})?(\\.[0-9]{0,2})?", 1..6),
    ) {
        // Up to 10 digits on each side of a point, a second point, a sign: the scanner reads
        // (or hands over) every one of them as the parser does, whatever follows in the packet.
        let lines: Vec<String> = values.iter().map(|value| format!("n:{value}|ms")).collect();
        assert_scan_agrees(lines.join("\n").as_bytes());
    }

    #[test]
    fn decimal_numbers_read_exactly(text in "-?[0-9]{0,12}(\\.[0-9]{0,8})?") {
        let got = proto::number::js_number(text.as_bytes());
        let want: Option<f64> = text.parse().ok().filter(|_| text.bytes().any(|b| b.is_ascii_digit()));
        prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{}", text);
    }

    #[test]
    fn random_bytes_round_trip(line in prop::collection::vec(any::<u8>(), 0..60)) {
        assert_round_trip(&line);
        assert_scan_agrees(&line);
    }
}

/// Inputs the fuzzers found, kept so they never regress.
#[test]
fn fuzz_regressions() {
    // A gauge set to a negative value (the sign after a space is not a delta) re-encoded as a delta.
    assert_round_trip(b"\xff: -1|g");
    assert_round_trip(b"g: -0|g");
    // The fuzzer's own find: packed gauge values, one of them "\r-1" (whitespace before the sign).
    assert_round_trip(b"\xff\x3a\x3a\x32\x11\x5d\x3a\x31\x32\x0d\x3a\x31\x3a\x31\x3a\x0d\x2d\x31\x3a\x3a\x32\x11\x3a\x31\x32\x0d\x3a\x31\x3a\x18\x00\x00\x00\xfd\xff\xff\xff\x32\x3a\x11\x3a\x0d\x31\x32\x11\x3a\x0d\x30\xff\x3a\x31\x3a\x3b\xef\x3a\x30\x7c\x67\x0a\x79\x31\x2f\x3a\x32\x11\x3a\x0d\xff\xff\xff\x00\x00\x00\x33\xff\xff\xff\xff\xff\xff\xff\xff\xff\x0d\x3a\x31\x3a\x3a\x32\x11\x3a\x31\x32\x0d\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x36\x3a\x31\x3a\x31\x3a\x0d\x3a\x0d\x3a\xff\x3a\x32\x3a\x3b\xef\x3a\x30\x7c\x67\x0a\x79\x31\x2f\x3a\x32\x11\x3a\x0d\x3a\xff\xff\xff\xff\xff\x3a\x3a\x7c\x67\x0a\x79\x7c\x68");
}
